from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest

from airflow_delta_provider.core import (
    DeltaTable,
    TimestampEarlierThanRetentionError,
    TimestampLaterThanLatestCommitError,
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
