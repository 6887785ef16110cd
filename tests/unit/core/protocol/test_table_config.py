"""TableConfig: typed table properties, intervals, resolution with a recorded source."""

from __future__ import annotations

import logging
import re
from datetime import timedelta

import pytest

from airflow_delta_provider.core.errors import InvalidTablePropertyError, RetentionError
from airflow_delta_provider.core.protocol.table_config import (
    CHECKPOINT_INTERVAL,
    DELETED_FILE_RETENTION,
    ENABLE_EXPIRED_LOG_CLEANUP,
    LOG_RETENTION,
    SET_TRANSACTION_RETENTION,
    TARGET_FILE_SIZE,
    Setting,
    Source,
    TableConfig,
    parse_byte_size,
    parse_interval,
    to_byte_size,
    to_interval,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("interval 7 days", timedelta(days=7)),
        ("INTERVAL 30 DAYS", timedelta(days=30)),
        ("168 hours", timedelta(hours=168)),
        ("interval 1 week 2 days", timedelta(days=9)),
        ("1 day 12 hours 30 minutes", timedelta(days=1, hours=12, minutes=30)),
        ("90 mins", timedelta(minutes=90)),
        ("2 hrs", timedelta(hours=2)),
        ("interval 500 milliseconds", timedelta(milliseconds=500)),
        ("1.5 days", timedelta(hours=36)),
        ("7d", timedelta(days=7)),
        ("interval 0 seconds", timedelta(0)),
    ],
)
def test_parse_interval(text, expected):
    assert parse_interval(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("interval 1 month", "unit 'month'"),
        ("2 years", "unit 'years'"),
        ("", "empty"),
        ("interval", "empty"),
        ("seven days", "not an interval"),
        ("7 days and more", "not an interval"),
        ("-1 days", "negative"),
        ("7", "not an interval"),
    ],
)
def test_bad_intervals_name_key_and_value(text, message):
    with pytest.raises(RetentionError, match=message) as err:
        parse_interval(text, name=LOG_RETENTION)
    assert LOG_RETENTION in str(err.value)


def test_delta_defaults():
    config = TableConfig(None)
    assert config.log_retention.value == timedelta(days=30)
    assert config.deleted_file_retention.value == timedelta(days=7)
    assert config.set_transaction_retention.value is None
    assert TableConfig({LOG_RETENTION: "interval 2 days"}).log_retention.value == timedelta(days=2)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (timedelta(days=3), timedelta(days=3)),
        (36, timedelta(hours=36)),
        (1.5, timedelta(minutes=90)),
        ("48", timedelta(hours=48)),
        ("interval 2 days", timedelta(days=2)),
    ],
)
def test_to_interval_accepts_timedeltas_hours_and_strings(value, expected):
    assert to_interval(value, name="retention") == expected


@pytest.mark.parametrize(
    "value",
    [True, -1, timedelta(days=-1), [7], "-5", "", "  ", float("nan"), 10**12, "interval 10000000 days"],
)
def test_to_interval_refuses_bad_values(value):
    with pytest.raises(RetentionError, match="retention"):
        to_interval(value, name="retention")


def test_precedence_argument_property_provider_default():
    config = TableConfig({LOG_RETENTION: "interval 10 days"}, {LOG_RETENTION: "interval 20 days"})
    resolved = config.resolve(LOG_RETENTION, "1 day")
    assert (resolved.value, resolved.source) == (timedelta(days=1), "argument")
    resolved = config.resolve(LOG_RETENTION)
    assert (resolved.value, resolved.source) == (timedelta(days=10), "table property")
    resolved = TableConfig({}, {LOG_RETENTION: "interval 20 days"}).log_retention
    assert (resolved.value, resolved.source) == (timedelta(days=20), "provider config")
    resolved = TableConfig().log_retention
    assert (resolved.value, resolved.source) == (timedelta(days=30), "default")
    assert resolved.to_dict() == {"name": LOG_RETENTION, "seconds": 30 * 86400.0, "source": "default"}


def test_provider_defaults_are_found_by_their_delta_option_name_too():
    """The ``[delta]`` option names the docs list resolve as well as the Delta property names."""
    config = TableConfig({}, {"log_retention_duration": "interval 3 days", "checkpoint_interval": "50"})
    assert config.log_retention.value == timedelta(days=3)
    assert config.log_retention.source is Source.PROVIDER_CONFIG
    assert config.checkpoint_interval.value == 50


def test_an_empty_provider_default_falls_through_but_an_empty_argument_or_property_is_refused():
    config = TableConfig({}, {DELETED_FILE_RETENTION: ""})
    assert config.deleted_file_retention.source is Source.DEFAULT
    assert TableConfig({}, {DELETED_FILE_RETENTION: 48}).deleted_file_retention.value == timedelta(hours=48)
    with pytest.raises(RetentionError, match="empty"):
        config.resolve(DELETED_FILE_RETENTION, "")
    with pytest.raises(InvalidTablePropertyError, match=DELETED_FILE_RETENTION):
        _ = TableConfig({DELETED_FILE_RETENTION: ""}).deleted_file_retention


def test_bad_values_name_their_source():
    with pytest.raises(
        InvalidTablePropertyError, match=r"table property delta\.logRetentionDuration='forever'"
    ):
        _ = TableConfig({LOG_RETENTION: "forever"}).log_retention
    with pytest.raises(
        InvalidTablePropertyError, match=r"provider configuration \[delta\] log_retention_duration"
    ):
        _ = TableConfig({}, {LOG_RETENTION: "soon"}).log_retention
    # A bare number is hours only where the caller chose the unit; a table property needs one.
    with pytest.raises(RetentionError, match="not an interval"):
        _ = TableConfig({LOG_RETENTION: "168"}).log_retention
    # The same bad value is the same error whichever operation reads it.
    assert issubclass(InvalidTablePropertyError, RetentionError)


def test_a_bad_property_only_stops_what_reads_it():
    config = TableConfig({LOG_RETENTION: "forever", CHECKPOINT_INTERVAL: "5"})
    assert config.checkpoint_interval.value == 5
    with pytest.raises(InvalidTablePropertyError):
        _ = config.log_retention


def test_no_default_for_set_transaction_retention():
    resolved = TableConfig().set_transaction_retention
    assert resolved.value is None and resolved.source == "default"
    assert resolved.to_dict()["seconds"] is None


def test_checkpoint_interval():
    assert TableConfig().checkpoint_interval.value == 10
    resolved = TableConfig({CHECKPOINT_INTERVAL: "25"}, {}).checkpoint_interval
    assert (resolved.value, resolved.source) == (25, "table property")
    assert TableConfig({CHECKPOINT_INTERVAL: "25"}).resolve(CHECKPOINT_INTERVAL, 5).value == 5
    assert TableConfig({}, {CHECKPOINT_INTERVAL: "50"}).checkpoint_interval.source == "provider config"


@pytest.mark.parametrize("bad", ["0", "-3", "ten", "2.5", True, 1.5, "", "99999999999999999999999"])
def test_bad_checkpoint_interval(bad):
    with pytest.raises(RetentionError, match="positive whole number"):
        _ = TableConfig({CHECKPOINT_INTERVAL: bad}).checkpoint_interval


def test_expired_log_cleanup_switch():
    assert TableConfig().expired_log_cleanup.value is True
    resolved = TableConfig({ENABLE_EXPIRED_LOG_CLEANUP: "FALSE"}).expired_log_cleanup
    assert (resolved.value, resolved.source) == (False, "table property")
    assert TableConfig({ENABLE_EXPIRED_LOG_CLEANUP: "false"}).resolve(ENABLE_EXPIRED_LOG_CLEANUP, True).value
    with pytest.raises(RetentionError, match="not true or false"):
        _ = TableConfig({}, {ENABLE_EXPIRED_LOG_CLEANUP: "sometimes"}).expired_log_cleanup


def test_every_setting_records_its_source():
    config = TableConfig(
        {LOG_RETENTION: "interval 60 days", CHECKPOINT_INTERVAL: "20"},
        {DELETED_FILE_RETENTION: "interval 14 days", ENABLE_EXPIRED_LOG_CLEANUP: "false"},
    )
    assert config.log_retention.source == "table property"
    assert config.deleted_file_retention.value == timedelta(days=14)
    assert config.deleted_file_retention.source == "provider config"
    assert config.resolve(SET_TRANSACTION_RETENTION, "interval 90 days").source == "argument"
    assert config.checkpoint_interval.value == 20
    assert config.expired_log_cleanup.value is False


def test_a_warning_when_files_outlive_the_log(caplog):
    with caplog.at_level(logging.WARNING, logger="airflow_delta_provider.core.protocol.table_config"):
        TableConfig({LOG_RETENTION: "interval 3 days"}).warn_on_incompatible_retentions()
    assert any(
        DELETED_FILE_RETENTION in r.getMessage() and "table property" in r.getMessage()
        for r in caplog.records
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="airflow_delta_provider.core.protocol.table_config"):
        TableConfig({LOG_RETENTION: "interval 30 days"}).warn_on_incompatible_retentions()
    assert not caplog.records


#: Intervals past the one range (365,000 days), in every form an interval takes.
TOO_LONG = [
    pytest.param(timedelta(days=3_000_000), id="timedelta"),
    pytest.param(timedelta.max, id="timedelta-max"),
    pytest.param(10**8, id="hours"),
    pytest.param(1e300, id="hours-beyond-timedelta"),
    pytest.param(float("inf"), id="infinite-hours"),
    pytest.param("100000000", id="hours-string"),
    pytest.param("interval 400000 days", id="interval-string"),
    pytest.param("interval 100000000000 weeks", id="interval-beyond-timedelta"),
]


@pytest.mark.parametrize("value", TOO_LONG)
def test_one_range_check_for_every_interval_form_and_source(value):
    message = r"is too long an interval: at most 365000 days"
    with pytest.raises(RetentionError, match=message):
        TableConfig().resolve(DELETED_FILE_RETENTION, value)  # an argument
    with pytest.raises(InvalidTablePropertyError, match=r"provider configuration .*" + message):
        _ = TableConfig({}, {DELETED_FILE_RETENTION: value}).deleted_file_retention
    if isinstance(value, str) and not value.isdigit():
        with pytest.raises(InvalidTablePropertyError, match=r"table property .*" + message):
            _ = TableConfig({LOG_RETENTION: value}).log_retention
    assert to_interval(timedelta(days=365_000), name="retention") == timedelta(days=365_000)


@pytest.mark.parametrize("value", TOO_LONG)
@pytest.mark.parametrize("operation", ["vacuum", "cleanup_logs"])
def test_a_too_long_retention_is_refused_and_the_table_is_unchanged(tmp_path, value, operation):
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_delta_provider.core import DeltaTable

    table = DeltaTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": [1]}), tmp_path / "t" / "a.parquet")
    table.commit_files(["a.parquet"])
    pq.write_table(pa.table({"id": [2]}), tmp_path / "t" / "b.parquet")
    table.commit_files(["b.parquet"], mode="overwrite")
    before = (
        table.version(),
        table.snapshot().files().column("path").to_pylist(),
        os.listdir(tmp_path / "t"),
    )
    log_before = sorted(os.listdir(tmp_path / "t" / "_delta_log"))

    with pytest.raises(RetentionError, match="too long an interval"):
        getattr(table, operation)(retention=value)

    after = (table.version(), table.snapshot().files().column("path").to_pylist(), os.listdir(tmp_path / "t"))
    assert after == before and sorted(os.listdir(tmp_path / "t" / "_delta_log")) == log_before


#: Sizes as Spark's JavaUtils.byteStringAs reads them (tests/unit/operators/test_optimize.py checks
#: the parser against Spark itself).
SPARK_SIZES = {
    "134217728": 134217728,
    "1024b": 1024,
    "1024B": 1024,
    " 128mb ": 128 * 1024**2,
    "128m": 128 * 1024**2,
    "128MB": 128 * 1024**2,
    "64k": 64 * 1024,
    "64kb": 64 * 1024,
    "1g": 1024**3,
    "1gb": 1024**3,
    "1t": 1024**4,
    "1tb": 1024**4,
    "1TB": 1024**4,
    "2p": 2 * 1024**5,
    "2pb": 2 * 1024**5,
    "1kib": 1024,
    "3Mi": 3 * 1024**2,
    "1GiB": 1024**3,
    "1tib": 1024**4,
}
NOT_SIZES = [
    "1.5g",
    "128 mb",
    "1xb",
    "mb",
    "",
    " ",
    "-1",
    "0",
    "0mb",
    "+5",
    "1e9",
    "8192p",
    "9223372036854775808",
]


@pytest.mark.parametrize(("text", "expected"), list(SPARK_SIZES.items()))
def test_sizes_parse_with_sparks_units_in_every_source(text, expected):
    assert parse_byte_size(text) == expected
    assert TableConfig({TARGET_FILE_SIZE: text}).target_file_size.value == expected
    assert TableConfig({}, {TARGET_FILE_SIZE: text}).target_file_size.value == expected
    assert TableConfig().resolve(TARGET_FILE_SIZE, text).value == expected


@pytest.mark.parametrize("text", NOT_SIZES)
def test_what_spark_refuses_as_a_size_is_refused_naming_it(text):
    with pytest.raises(RetentionError, match=re.escape(f"{TARGET_FILE_SIZE}={text!r}")):
        parse_byte_size(text, name=TARGET_FILE_SIZE)
    with pytest.raises(InvalidTablePropertyError, match=f"table property {TARGET_FILE_SIZE}"):
        _ = TableConfig({TARGET_FILE_SIZE: text}).target_file_size


@pytest.mark.parametrize("value", [0, -5, 2**63, True, 1.5, None, [1]])
def test_size_arguments_that_are_not_positive_longs_are_refused(value):
    with pytest.raises(RetentionError, match="target_file_size"):
        to_byte_size(value, name="target_file_size")
    assert to_byte_size(2**63 - 1, name="target_file_size") == 2**63 - 1


def test_the_table_only_view_drops_the_provider_defaults_and_is_the_metadatas():
    from airflow_delta_provider.core.protocol.actions import Metadata

    metadata = Metadata("id", '{"type":"struct","fields":[]}', (), {LOG_RETENTION: "interval 2 days"})
    config = metadata.config.with_provider_defaults({"deleted_file_retention_duration": "interval 3 days"})
    assert config.deleted_file_retention == Setting(
        DELETED_FILE_RETENTION, timedelta(days=3), Source.PROVIDER_CONFIG
    )
    assert config.table_only is metadata.config
    assert config.table_only.deleted_file_retention.source is Source.DEFAULT
    assert config.table_only.log_retention == config.log_retention  # the table's own value in both
    assert metadata.config.with_provider_defaults(None) is metadata.config


def test_replay_keeps_txns_by_the_tables_own_retention_not_the_providers(tmp_path):
    """Delta expires txns by ``delta.setTransactionRetentionDuration`` on the table alone; the
    provider default is written on the tables the provider creates, never applied to others."""
    import os

    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_delta_provider.core import DeltaTable

    uri = str(tmp_path / "t")
    DeltaTable.create(uri, pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": [1]}), os.path.join(uri, "f.parquet"))
    DeltaTable(uri).commit_files(["f.parquet"], app_id="job", app_version=1)
    strict = DeltaTable(uri, provider_defaults={SET_TRANSACTION_RETENTION: "interval 0 hours"})
    assert strict.snapshot().config.set_transaction_retention.source is Source.PROVIDER_CONFIG
    assert strict.snapshot().app_transaction_version("job") == 1
