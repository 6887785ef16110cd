from __future__ import annotations

import inspect
import os
from datetime import UTC, datetime, timedelta, timezone

import pyarrow as pa
import pytest

from airflow_delta_provider.core import (
    DeltaTable,
    TimestampEarlierThanRetentionError,
    TimestampLaterThanLatestCommitError,
    VersionNotFoundError,
)
from airflow_delta_provider.core.storage import LocalStore

T0 = 1_700_000_000_000  # ms


def _set_mtime(log_writer, version: int, ms: int) -> None:
    path = log_writer.log / f"{version:020d}.json"
    os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))


def test_commit_timestamps_are_made_monotonic(log_writer):
    log_writer.basic(4)
    for version, ms in enumerate([T0, T0 + 1000, T0 + 500, T0 + 3000]):
        _set_mtime(log_writer, version, ms)
    stamps = DeltaTable(str(log_writer.root)).commit_timestamps()
    assert [s.timestamp for s in stamps] == [T0, T0 + 1000, T0 + 1001, T0 + 3000]


def test_time_travel_by_timestamp(log_writer):
    log_writer.basic(4)
    for version, ms in enumerate([T0, T0 + 1000, T0 + 500, T0 + 3000]):
        _set_mtime(log_writer, version, ms)
    table = DeltaTable(str(log_writer.root))
    assert table.snapshot(timestamp=T0 + 1001).version == 2
    assert table.snapshot(timestamp=T0 + 999).version == 0
    assert table.snapshot(timestamp=datetime.fromtimestamp((T0 + 3000) / 1000, UTC)).version == 3
    naive = datetime.fromtimestamp((T0 + 1000) / 1000, UTC).replace(tzinfo=None)
    assert table.snapshot(timestamp=naive).version == 1
    assert table.snapshot(timestamp=naive.isoformat() + "Z").version == 1
    with pytest.raises(TimestampEarlierThanRetentionError, match="before the earliest version"):
        table.snapshot(timestamp=T0 - 1)
    with pytest.raises(TimestampLaterThanLatestCommitError, match="after the latest version"):
        table.snapshot(timestamp=T0 + 10_000)


def test_time_travel_uses_in_commit_timestamps_from_enablement(log_writer):
    log_writer.basic(2)
    ict = {
        "delta.enableInCommitTimestamps": "true",
        "delta.inCommitTimestampEnablementVersion": "2",
        "delta.inCommitTimestampEnablementTimestamp": str(T0 + 5000),
    }
    log_writer.commit(2, log_writer.commit_info(inCommitTimestamp=T0 + 5000), log_writer.metadata(ict))
    log_writer.commit(3, log_writer.commit_info(inCommitTimestamp=T0 + 9000), log_writer.add("x"))
    for version, ms in enumerate([T0, T0 + 1000, T0 + 99_000, T0 + 2000]):
        _set_mtime(log_writer, version, ms)
    table = DeltaTable(str(log_writer.root))
    stamps = table.commit_timestamps()
    assert [(s.timestamp, s.source) for s in stamps[2:]] == [
        (T0 + 5000, "inCommitTimestamp"),
        (T0 + 9000, "inCommitTimestamp"),
    ]
    assert table.snapshot(timestamp=T0 + 8999).version == 2
    assert table.history(limit=1)[0]["timestamp"] == T0 + 9000


def test_history_newest_first_reads_only_the_last_n_commits(log_writer, monkeypatch):
    log_writer.basic(20)
    reads: list[str] = []
    original = LocalStore.read_bytes

    def counting(self, path):
        reads.append(path)
        return original(self, path)

    monkeypatch.setattr(LocalStore, "read_bytes", counting)
    history = DeltaTable(str(log_writer.root)).history(limit=3)
    assert [h["version"] for h in history] == [19, 18, 17]
    assert history[0]["operation"] == "WRITE"
    assert sorted(p.rsplit("/", 1)[-1] for p in reads if p.endswith(".json")) == [
        f"{v:020d}.json" for v in (17, 18, 19)
    ]


def test_history_stops_at_cleaned_up_commits(log_writer):
    log_writer.basic(3)
    full = DeltaTable(str(log_writer.root)).history()
    assert [h["version"] for h in full] == [2, 1, 0]
    assert full[-1]["operation"] == "CREATE TABLE"


@pytest.mark.parametrize("bad", [0, -1, "3"])
def test_history_limit_validated(log_writer, bad):
    log_writer.basic(1)
    with pytest.raises(ValueError, match="limit"):
        DeltaTable(str(log_writer.root)).history(limit=bad)


def test_version_and_timestamp_are_exclusive(log_writer):
    log_writer.basic(1)
    with pytest.raises(ValueError, match="either version or timestamp"):
        DeltaTable(str(log_writer.root)).snapshot(version=0, timestamp=T0)


# --- absurd timestamps ------------------------------------------------------------------------------

ABSURD_TIMESTAMPS = [
    # (id, value, expected error, a fragment naming the value)
    ("1e18-ms", 10**18, TimestampLaterThanLatestCommitError, "1000000000000000000 ms since the epoch"),
    ("1e18-float", 1e18, TimestampLaterThanLatestCommitError, "1000000000000000000 ms since the epoch"),
    ("minus-1e18-ms", -(10**18), TimestampEarlierThanRetentionError, "-1000000000000000000 ms"),
    ("2**63", 2**63, TimestampLaterThanLatestCommitError, "9223372036854775808 ms"),
    ("minus-2**63", -(2**63), TimestampEarlierThanRetentionError, "-9223372036854775808 ms"),
    ("10**40", 10**40, TimestampLaterThanLatestCommitError, "ms since the epoch"),
    ("max-naive-datetime", datetime.max, TimestampLaterThanLatestCommitError, "9999-12-31 23:59:59.999999"),
    ("min-naive-datetime", datetime.min, TimestampEarlierThanRetentionError, "0001-01-01 00:00:00"),
    (
        "min-datetime-east-of-utc",
        datetime.min.replace(tzinfo=timezone(timedelta(hours=14))),
        TimestampEarlierThanRetentionError,
        "0001-01-01 00:00:00+14:00",
    ),
    (
        "max-datetime-west-of-utc",
        datetime.max.replace(tzinfo=timezone(timedelta(hours=-14))),
        TimestampLaterThanLatestCommitError,
        "9999-12-31 23:59:59.999999-14:00",
    ),
    (
        "huge-iso-year",
        "+275760-09-13T00:00:00Z",
        TimestampLaterThanLatestCommitError,
        "'+275760-09-13T00:00:00Z'",
    ),
    ("negative-iso-year", "-10000-01-01", TimestampEarlierThanRetentionError, "'-10000-01-01'"),
    ("year-zero", "0000-01-01T00:00:00Z", TimestampEarlierThanRetentionError, "'0000-01-01T00:00:00Z'"),
]


@pytest.mark.parametrize(
    ("value", "error", "fragment"), [c[1:] for c in ABSURD_TIMESTAMPS], ids=[c[0] for c in ABSURD_TIMESTAMPS]
)
def test_absurd_timestamps_get_a_clear_error_naming_them(log_writer, log_state, value, error, fragment):
    log_writer.basic(2)
    table = DeltaTable(str(log_writer.root))
    before = log_state(log_writer.root)
    with pytest.raises(error) as info:
        table.snapshot(timestamp=value)
    assert isinstance(info.value, VersionNotFoundError)
    assert fragment in str(info.value)
    assert table.version() == 1 and log_state(log_writer.root) == before


@pytest.mark.parametrize(
    "value",
    [True, float("nan"), float("inf"), "yesterday", "", [T0], object()],
    ids=["bool", "nan", "inf", "words", "empty", "list", "object"],
)
def test_a_value_that_is_not_a_timestamp_is_a_value_error(log_writer, value):
    log_writer.basic(1)
    with pytest.raises(ValueError, match="timestamp") as info:
        DeltaTable(str(log_writer.root)).snapshot(timestamp=value)
    assert not isinstance(info.value, VersionNotFoundError)


def test_iso_timestamps_of_any_year_convert_exactly():
    from airflow_delta_provider.core.log.timeline import to_millis

    assert to_millis("2026-11-22T10:00:00Z") == to_millis(datetime(2026, 11, 22, 10, tzinfo=UTC))
    assert to_millis("1969-12-31T23:59:59.999Z") == -1
    assert to_millis("+12026-11-22T10:00:00+01:00") - to_millis("2026-11-22T10:00:00+01:00") == (
        25 * 146_097 * 86_400_000
    )
    assert to_millis(1.9) == 1 and to_millis(-0.5) == -1


def test_time_travel_without_commit_files_is_a_version_not_found_error(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    table.checkpoint()
    for name in os.listdir(table.storage.log_dir):
        if name.endswith(".json"):
            os.remove(os.path.join(table.storage.log_dir, name))
    with pytest.raises(VersionNotFoundError, match="no commit file"):
        table.snapshot(timestamp=T0)


# --- the facade's arguments --------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda t: t.commit_files([], mdoe="overwrite"), "commit_files"),
        (lambda t: t.optimize(dryrun=True), "optimize"),
        (lambda t: t.vacuum(retain_hours=1), "vacuum"),
        (lambda t: t.cleanup_logs(retension=1), "cleanup_logs"),
        (lambda t: t.checkpoint(0, part=2), "checkpoint"),
        (lambda t: DeltaTable.create(t.uri, "{}", mdoe="ignore"), "create"),
        (lambda t: t.restore(0, enforce_retention=False), "restore"),
    ],
)
def test_a_misspelt_argument_is_a_type_error_naming_it_and_changes_nothing(tmp_path, log_state, call, name):
    table = DeltaTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    before = log_state(table.storage.root)
    with pytest.raises(TypeError, match=rf"^DeltaTable\.{name}\(\) got an unexpected keyword argument"):
        call(table)
    assert log_state(table.storage.root) == before


def test_the_facade_shows_every_argument_it_takes():
    commit = inspect.signature(DeltaTable.commit_files).parameters
    assert list(commit)[:2] == ["self", "files"]
    assert {"mode", "replace_where", "app_id", "app_version", "user_metadata", "tags", "max_attempts"} <= set(
        commit
    )
    assert all(
        p.kind is inspect.Parameter.KEYWORD_ONLY for n, p in commit.items() if n not in ("self", "files")
    )
    create = inspect.signature(DeltaTable.create).parameters
    assert list(create)[:4] == ["uri", "schema", "partition_by", "properties"]
    assert {"storage_options", "provider_defaults", "mode", "name", "user_metadata"} <= set(create)
    assert list(inspect.signature(DeltaTable.checkpoint).parameters)[:2] == ["self", "version"]
    assert "rewrite" in inspect.signature(DeltaTable.optimize).parameters
