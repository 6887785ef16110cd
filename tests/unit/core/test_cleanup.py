"""Expired-log cleanup: Delta's MetadataCleanup rules, on real tables with controlled file ages."""

from __future__ import annotations

import os
import uuid
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.cleanup import cutoff_for
from airflow_delta_provider.core.errors import RetentionError, UnsupportedFeatureError

SCHEMA = pa.schema([("id", pa.int64())])
NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)


def commit(table: DeltaTable, value: int) -> None:
    relative = f"w-{uuid.uuid4().hex[:8]}/p.parquet"
    os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
    pq.write_table(pa.table({"id": [value]}), os.path.join(table.storage.root, relative))
    table.commit_files([relative], auto_checkpoint=False)


def age(table: DeltaTable, days_by_version: dict[int, float]) -> None:
    """Set the modification time of every log file of a version to NOW - days."""
    for name in os.listdir(table.storage.log_dir):
        if name[:20].isdigit() and int(name[:20]) in days_by_version:
            stamp = (NOW - timedelta(days=days_by_version[int(name[:20])])).timestamp()
            os.utime(os.path.join(table.storage.log_dir, name), (stamp, stamp))


def log_names(table: DeltaTable) -> list[str]:
    return sorted(n for n in os.listdir(table.storage.log_dir) if n[:20].isdigit())


@pytest.fixture
def table(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    for i in range(1, 8):
        commit(table, i)
    return table


def test_cutoff_is_utc_midnight():
    assert cutoff_for(NOW, timedelta(days=30)) == datetime(2026, 5, 16, tzinfo=UTC)


def test_nothing_without_a_checkpoint(table):
    age(table, dict.fromkeys(range(8), 60))
    result = table.cleanup_logs(now=NOW)
    assert result.num_files == 0 and "_last_checkpoint" in result.skipped_reason


def test_whole_groups_before_the_checkpoint_go_and_its_version_stays(table):
    table.checkpoint(3)
    table.checkpoint(6)
    age(table, {**dict.fromkeys(range(6), 40), 6: 40, 7: 1})
    before = table.snapshot().to_pyarrow_table()["id"].to_pylist()
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 6 and result.earliest_retained_version == 6
    names = log_names(table)
    assert names[0].startswith(f"{6:020d}")
    assert f"{6:020d}.json" in names and f"{6:020d}.crc" in names and f"{6:020d}.checkpoint.parquet" in names
    assert f"{3:020d}.checkpoint.parquet" not in names
    assert all(n.startswith(f"{5:020d}") is False for n in names)
    assert sorted(table.snapshot().to_pyarrow_table()["id"].to_pylist()) == sorted(before)
    assert table.snapshot(6).version == 6


def test_a_young_commit_before_a_checkpoint_keeps_the_group(table):
    table.checkpoint(3)
    table.checkpoint(6)
    age(table, {**dict.fromkeys(range(5), 40), 5: 2, 6: 2, 7: 1})
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 3
    assert log_names(table)[0].startswith(f"{3:020d}")


def test_modification_times_are_made_monotonic(table):
    """A recent file followed by "older" ones: the later ones count as newer, so nothing after it goes."""
    table.checkpoint(6)
    age(table, {**dict.fromkeys(range(8), 40), 2: 1})
    result = table.cleanup_logs(now=NOW)
    assert result.num_files == 0


def test_retention_precedence_and_dry_run(table):
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 10))
    assert table.cleanup_logs(now=NOW).num_files == 0  # 30-day default
    result = table.cleanup_logs(
        now=NOW, provider_defaults={"delta.logRetentionDuration": "interval 5 days"}, dry_run=True
    )
    assert result.retention.source == "provider config" and result.num_files > 0
    result = table.cleanup_logs(now=NOW, retention="interval 2 days", dry_run=True)
    assert result.retention.source == "argument" and result.num_files > 0
    assert f"{0:020d}.json" in log_names(table)  # dry run: nothing deleted
    with pytest.raises(RetentionError, match="fortnight"):
        table.cleanup_logs(retention="1 fortnight")


def test_only_log_files_are_touched(table):
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    data = sorted(p for p in os.listdir(table.storage.root) if p != "_delta_log")
    result = table.cleanup_logs(now=NOW)
    assert all("/" not in f or f.startswith("_sidecars/") for f in result.files)
    assert sorted(p for p in os.listdir(table.storage.root) if p != "_delta_log") == data


def test_multipart_and_crc_and_uuid_files_go_too(table):
    table.checkpoint(2, parts=2)
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    result = table.cleanup_logs(now=NOW)
    gone = set(result.files)
    assert {f"{2:020d}.checkpoint.{p:010d}.{2:010d}.parquet" for p in (1, 2)} <= gone
    assert f"{2:020d}.crc" in gone


def test_unknown_writer_features_are_refused(tmp_path, log_writer):
    log_writer.commit(
        0,
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["futureX"]}},
        log_writer.metadata(),
    )
    with pytest.raises(UnsupportedFeatureError, match="futureX"):
        DeltaTable(str(log_writer.root)).cleanup_logs()


def test_post_commit_checkpoint_cleans_expired_logs(tmp_path):
    table = DeltaTable.create(
        str(tmp_path / "t"), SCHEMA, properties={"delta.logRetentionDuration": "interval 1 days"}
    )
    for i in range(1, 10):
        commit(table, i)
    age(table, dict.fromkeys(range(10), 5))
    relative = "last/p.parquet"
    os.makedirs(os.path.join(table.storage.root, "last"))
    pq.write_table(pa.table({"id": [10]}), os.path.join(table.storage.root, relative))
    table.commit_files([relative])  # version 10: checkpoint, then cleanup of everything before it
    assert log_names(table)[0].startswith(f"{10:020d}")
    assert sorted(table.snapshot().to_pyarrow_table()["id"].to_pylist()) == list(range(1, 11))
