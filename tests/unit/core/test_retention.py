"""Retention settings: Delta interval parsing and resolution with a recorded source."""

from __future__ import annotations

import logging
from datetime import timedelta

import pytest

from airflow_delta_provider.core.errors import RetentionError
from airflow_delta_provider.core.retention import (
    CHECKPOINT_INTERVAL,
    DELETED_FILE_RETENTION,
    ENABLE_EXPIRED_LOG_CLEANUP,
    LOG_RETENTION,
    SET_TRANSACTION_RETENTION,
    parse_interval,
    property_interval,
    resolve_all,
    resolve_checkpoint_interval,
    resolve_expired_log_cleanup,
    resolve_retention,
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


def test_property_interval_uses_delta_defaults():
    assert property_interval(None, LOG_RETENTION) == timedelta(days=30)
    assert property_interval({}, DELETED_FILE_RETENTION) == timedelta(days=7)
    assert property_interval({}, SET_TRANSACTION_RETENTION) is None
    assert property_interval({LOG_RETENTION: "interval 2 days"}, LOG_RETENTION) == timedelta(days=2)


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


@pytest.mark.parametrize("value", [True, -1, timedelta(days=-1), [7], "-5"])
def test_to_interval_refuses_bad_values(value):
    with pytest.raises(RetentionError, match="retention"):
        to_interval(value, name="retention")


def test_precedence_argument_property_provider_default():
    properties = {LOG_RETENTION: "interval 10 days"}
    provider = {LOG_RETENTION: "interval 20 days"}
    resolved = resolve_retention(
        LOG_RETENTION, explicit="1 day", properties=properties, provider_defaults=provider
    )
    assert (resolved.value, resolved.source) == (timedelta(days=1), "argument")
    resolved = resolve_retention(LOG_RETENTION, properties=properties, provider_defaults=provider)
    assert (resolved.value, resolved.source) == (timedelta(days=10), "table property")
    resolved = resolve_retention(LOG_RETENTION, properties={}, provider_defaults=provider)
    assert (resolved.value, resolved.source) == (timedelta(days=20), "provider config")
    resolved = resolve_retention(LOG_RETENTION)
    assert (resolved.value, resolved.source) == (timedelta(days=30), "default")
    assert resolved.to_dict() == {"name": LOG_RETENTION, "seconds": 30 * 86400.0, "source": "default"}


def test_empty_values_fall_through_to_the_next_source():
    resolved = resolve_retention(
        DELETED_FILE_RETENTION,
        explicit="",
        properties={DELETED_FILE_RETENTION: ""},
        provider_defaults={DELETED_FILE_RETENTION: 48},
    )
    assert (resolved.value, resolved.source) == (timedelta(hours=48), "provider config")


def test_bad_values_name_their_source():
    with pytest.raises(RetentionError, match=r"delta\.logRetentionDuration='forever'"):
        resolve_retention(LOG_RETENTION, properties={LOG_RETENTION: "forever"})
    with pytest.raises(RetentionError, match=r"\[delta\] default for delta\.logRetentionDuration"):
        resolve_retention(LOG_RETENTION, provider_defaults={LOG_RETENTION: "soon"})
    # A bare number is hours only where the caller chose the unit; a table property needs one.
    with pytest.raises(RetentionError, match="not an interval"):
        resolve_retention(LOG_RETENTION, properties={LOG_RETENTION: "168"})


def test_no_default_for_set_transaction_retention():
    resolved = resolve_retention(SET_TRANSACTION_RETENTION)
    assert resolved.value is None and resolved.source == "default"
    assert resolved.to_dict()["seconds"] is None


def test_checkpoint_interval():
    assert resolve_checkpoint_interval().value == 10
    resolved = resolve_checkpoint_interval(properties={CHECKPOINT_INTERVAL: "25"}, provider_defaults={})
    assert (resolved.value, resolved.source) == (25, "table property")
    assert resolve_checkpoint_interval(explicit=5, properties={CHECKPOINT_INTERVAL: "25"}).value == 5
    assert (
        resolve_checkpoint_interval(provider_defaults={CHECKPOINT_INTERVAL: "50"}).source == "provider config"
    )


@pytest.mark.parametrize("bad", ["0", "-3", "ten", "2.5", True, 1.5])
def test_bad_checkpoint_interval(bad):
    with pytest.raises(RetentionError, match="positive whole number"):
        resolve_checkpoint_interval(properties={CHECKPOINT_INTERVAL: bad})


def test_expired_log_cleanup_switch():
    assert resolve_expired_log_cleanup().value is True
    resolved = resolve_expired_log_cleanup(properties={ENABLE_EXPIRED_LOG_CLEANUP: "FALSE"})
    assert (resolved.value, resolved.source) == (False, "table property")
    assert resolve_expired_log_cleanup(explicit=True, properties={ENABLE_EXPIRED_LOG_CLEANUP: "false"}).value
    with pytest.raises(RetentionError, match="not true or false"):
        resolve_expired_log_cleanup(provider_defaults={ENABLE_EXPIRED_LOG_CLEANUP: "sometimes"})


def test_resolve_all_records_every_source():
    policy = resolve_all(
        {LOG_RETENTION: "interval 60 days", CHECKPOINT_INTERVAL: "20"},
        {DELETED_FILE_RETENTION: "interval 14 days", ENABLE_EXPIRED_LOG_CLEANUP: "false"},
        set_transaction_retention="interval 90 days",
    )
    assert policy.log_retention.source == "table property"
    assert policy.deleted_file_retention.value == timedelta(days=14)
    assert policy.deleted_file_retention.source == "provider config"
    assert policy.set_transaction_retention.source == "argument"
    assert policy.checkpoint_interval.value == 20
    assert policy.enable_expired_log_cleanup.value is False
    assert policy[LOG_RETENTION] is policy.log_retention
    assert set(policy.to_dict()) == {
        LOG_RETENTION,
        DELETED_FILE_RETENTION,
        SET_TRANSACTION_RETENTION,
        CHECKPOINT_INTERVAL,
        ENABLE_EXPIRED_LOG_CLEANUP,
    }


def test_resolve_all_warns_when_files_outlive_the_log(caplog):
    with caplog.at_level(logging.WARNING, logger="airflow_delta_provider.core.retention"):
        resolve_all({LOG_RETENTION: "interval 3 days"})
    assert any(
        DELETED_FILE_RETENTION in r.getMessage() and "table property" in r.getMessage()
        for r in caplog.records
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="airflow_delta_provider.core.retention"):
        resolve_all({LOG_RETENTION: "interval 30 days"}, deleted_file_retention="interval 7 days")
    assert not caplog.records
