"""VACUUM in the core: what is protected, what goes, LITE, retention safety, commits and faults.

Tables are written with the ``log_writer`` fixture (raw commits, so every case can be set up
exactly: tombstone ages, deletion vectors, absolute paths, hidden names) over real files whose
modification times are set with ``os.utime``. The clock is passed as ``now``.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    CorruptLogError,
    InvalidPathError,
    RetentionError,
    UnsupportedFeatureError,
    VacuumDeleteError,
    VacuumLiteError,
    VacuumRetentionNegativeError,
    VacuumRetentionTooShortError,
)
from airflow_delta_provider.core.log.deletion_vectors import (
    deletion_vector_path,
    encode_deletion_vector_file_id,
)
from airflow_delta_provider.core.maintenance.vacuum import (
    LAST_VACUUM_INFO,
    read_last_vacuum_info,
    resolve_vacuum_retention,
)
from airflow_delta_provider.core.protocol.table_config import TableConfig

if TYPE_CHECKING:
    from pathlib import Path

HOUR = 3_600_000
DAY = 24 * HOUR
WEEK = 7 * DAY


def now_ms() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1000)


def touch(root: Path, relative: str, age_ms: int, data: bytes = b"parquet-bytes") -> Path:
    """A file under the table root whose modification time is ``age_ms`` in the past."""
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    stamp = (now_ms() - age_ms) / 1000
    os.utime(path, (stamp, stamp))
    return path


def age_log(root: Path, age_ms: int) -> None:
    """Move the commit files into the past (one second apart, in version order)."""
    base = (now_ms() - age_ms) / 1000
    for index, path in enumerate(sorted((root / "_delta_log").glob("*.json"))):
        os.utime(path, (base + index, base + index))


def names(result: Any) -> set[str]:
    prefix = result.table_uri.rstrip("/") + "/"
    return {f.removeprefix(prefix) for f in result.files}


def files_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts}


@pytest.fixture
def table(log_writer: Any) -> Any:
    """Version 0 adds live.parquet and old.parquet; version 1 removes old.parquet 8 days ago and
    recent.parquet (added in 0 too) 1 day ago. All data files are 10 days old."""
    w = log_writer
    root = w.root
    now = now_ms()
    for name in ("live.parquet", "old.parquet", "recent.parquet"):
        touch(root, name, 10 * DAY)
    w.commit(
        0,
        w.commit_info("CREATE TABLE"),
        w.protocol(),
        w.metadata(),
        w.add("live.parquet"),
        w.add("old.parquet"),
        w.add("recent.parquet"),
    )
    w.commit(
        1,
        w.commit_info("DELETE"),
        w.remove("old.parquet", now - 8 * DAY),
        w.remove("recent.parquet", now - 1 * DAY),
    )
    return w


# --- what is protected -------------------------------------------------------------------------


def test_live_files_and_unexpired_tombstones_are_kept(table: Any) -> None:
    root = table.root
    result = DeltaTable(str(root)).vacuum(dry_run=True)
    assert names(result) == {"old.parquet"}
    assert result.num_bytes == (root / "old.parquet").stat().st_size
    assert result.retention.value == timedelta(weeks=1) and result.retention.source == "default"
    assert result.status == "DRY_RUN" and result.start_version is None
    assert files_under(root) == {"live.parquet", "old.parquet", "recent.parquet"}


def test_a_real_run_deletes_exactly_the_plan(table: Any) -> None:
    root = table.root
    result = DeltaTable(str(root)).vacuum()
    assert names(result) == {"old.parquet"}
    assert result.num_deleted == 1 and result.status == "COMPLETED"
    assert files_under(root) == {"live.parquet", "recent.parquet"}
    # The tombstone of recent.parquet expires after 7 days: a VACUUM a week later takes it.
    later = DeltaTable(str(root)).vacuum(now=now_ms() + 7 * DAY)
    assert names(later) == {"recent.parquet"}
    assert files_under(root) == {"live.parquet"}


def test_shorter_retention_with_the_check_off_reaches_recent_tombstones(table: Any, caplog: Any) -> None:
    with caplog.at_level(logging.WARNING, logger="airflow_delta_provider.core.maintenance.vacuum"):
        result = DeltaTable(str(table.root)).vacuum(
            retention="12 hours", enforce_retention_duration=False, dry_run=True
        )
    assert names(result) == {"old.parquet", "recent.parquet"}
    assert "safety check off" in caplog.text
    # Retentions in Delta's words, not as Python prints a timedelta ("7 days, 0:00:00").
    assert "retention interval 12 hours, shorter than the table's interval 1 week" in caplog.text


def test_the_log_words_the_retention_as_delta_does(table: Any, caplog: Any) -> None:
    with caplog.at_level(logging.INFO, logger="airflow_delta_provider.core.maintenance.vacuum"):
        DeltaTable(str(table.root)).vacuum(dry_run=True)
    assert "(retention interval 1 week, from the default)" in caplog.text
    assert "0:00:00" not in caplog.text


def test_deletion_vector_files_of_live_files_and_fresh_tombstones_are_kept(log_writer: Any) -> None:
    w = log_writer
    root = w.root
    now = now_ms()

    def dv(prefix: str = "") -> dict[str, Any]:
        return {
            "storageType": "u",
            "pathOrInlineDv": encode_deletion_vector_file_id(uuid.uuid4(), prefix),
            "offset": 1,
            "sizeInBytes": 10,
            "cardinality": 1,
        }

    live_dv, fresh_dv, expired_dv = dv("ab"), dv(), dv("cd")
    absolute_dv = {**dv(), "storageType": "p", "pathOrInlineDv": (root / "elsewhere" / "dv.bin").as_uri()}
    for descriptor in (live_dv, fresh_dv, expired_dv):
        touch(root, os.path.relpath(deletion_vector_path(descriptor, str(root)), root), 10 * DAY)
    touch(root, "elsewhere/dv.bin", 10 * DAY)
    for name in ("a.parquet", "b.parquet", "c.parquet", "d.parquet"):
        touch(root, name, 10 * DAY)
    features = {"readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}
    w.commit(
        0,
        w.commit_info(),
        w.protocol(3, 7, **features),
        w.metadata(),
        w.add("a.parquet", deletionVector=live_dv),
        w.add("d.parquet", deletionVector=absolute_dv),
    )
    w.commit(
        1,
        w.commit_info(),
        w.remove("b.parquet", now - 1 * DAY, deletionVector=fresh_dv),
        w.remove("c.parquet", now - 8 * DAY, deletionVector=expired_dv),
    )
    result = DeltaTable(str(root)).vacuum(dry_run=True)
    expired_file = os.path.relpath(deletion_vector_path(expired_dv, str(root)), root)
    assert names(result) == {"c.parquet", expired_file}
    assert expired_file.startswith("cd/deletion_vector_")


def test_hidden_names_are_never_touched_except_delta_index_change_data_and_partitions(
    log_writer: Any,
) -> None:
    w = log_writer
    root = w.root
    w.commit(0, w.commit_info(), w.protocol(), w.metadata(partition_columns=["_p"]))
    untouchable = [
        "_SUCCESS",
        ".part-0.parquet.crc",
        "_temporary/0/part-1.parquet",
        ".spark-staging/x.parquet",
        "_p_without_equals/x.parquet",
        "_p=1/_committed_123",
        "_p=1/.x.parquet.crc",
        "_p=1/_started_1/x.parquet",
    ]
    reachable = [
        "_delta_index/index.bin",
        "_delta_index_v2/index.bin",
        "_change_data/cdc-1.parquet",
        "_p=1/orphan.parquet",
        "_p=2/nested/orphan.parquet",
        "plain/orphan.parquet",
    ]
    for name in untouchable + reachable:
        touch(root, name, 30 * DAY)
    result = DeltaTable(str(root)).vacuum()
    assert names(result) == set(reachable)
    assert files_under(root) == set(untouchable)
    assert (root / "_delta_log" / "00000000000000000000.json").exists()


def test_uniform_iceberg_metadata_directories_are_hidden(log_writer: Any) -> None:
    w = log_writer
    config = {"delta.universalFormat.enabledFormats": "iceberg"}
    w.commit(0, w.commit_info(), w.protocol(), w.metadata(configuration=config))
    touch(w.root, "metadata/v1.metadata.json", 30 * DAY)
    touch(w.root, "orphan.parquet", 30 * DAY)
    assert names(DeltaTable(str(w.root)).vacuum(dry_run=True)) == {"orphan.parquet"}


def test_untracked_files_younger_than_the_retention_survive(table: Any) -> None:
    """A writer's uncommitted output (in flight) is younger than the retention: never a candidate."""
    root = table.root
    touch(root, "in-flight/part-0.parquet", 2 * HOUR)
    touch(root, "in-flight/part-1.parquet", 6 * DAY)
    touch(root, "crashed/part-0.parquet", 8 * DAY)
    result = DeltaTable(str(root)).vacuum()
    assert names(result) == {"old.parquet", "crashed/part-0.parquet"}
    assert {"in-flight/part-0.parquet", "in-flight/part-1.parquet"} <= files_under(root)
    # Nothing is deleted at exactly the boundary either: only strictly older files go.
    edge = touch(root, "edge.parquet", 0)
    stamp = int(edge.stat().st_mtime * 1000)
    assert "edge.parquet" not in names(DeltaTable(str(root)).vacuum(now=stamp + WEEK, dry_run=True))
    assert "edge.parquet" in names(DeltaTable(str(root)).vacuum(now=stamp + WEEK + 1, dry_run=True))


def test_partition_directories_of_live_files_stay_and_emptied_ones_go_next_run(log_writer: Any) -> None:
    w = log_writer
    root = w.root
    now = now_ms()
    for name in ("p=1/a.parquet", "p=2/b.parquet", "p=2/c.parquet"):
        touch(root, name, 10 * DAY)
    w.commit(
        0,
        w.commit_info(),
        w.protocol(),
        w.metadata(partition_columns=["p"]),
        w.add("p=1/a.parquet", partitionValues={"p": "1"}),
        w.add("p=2/b.parquet", partitionValues={"p": "2"}),
        w.add("p=2/c.parquet", partitionValues={"p": "2"}),
    )
    w.commit(
        1, w.commit_info(), w.remove("p=1/a.parquet", now - 8 * DAY), w.remove("p=2/b.parquet", now - 8 * DAY)
    )
    first = DeltaTable(str(root)).vacuum()
    assert names(first) == {"p=1/a.parquet", "p=2/b.parquet"}
    # p=1 was not empty when listed: as in Delta, it goes in the next run.
    assert first.directories == ()
    assert (root / "p=1").is_dir()
    second = DeltaTable(str(root)).vacuum()
    assert second.files == () and names_of(second.directories, second) == {"p=1"}
    assert not (root / "p=1").exists() and (root / "p=2" / "c.parquet").exists()


def names_of(uris: tuple[str, ...], result: Any) -> set[str]:
    prefix = result.table_uri.rstrip("/") + "/"
    return {u.removeprefix(prefix) for u in uris}


def test_empty_directories_go_deepest_first_and_occupied_ones_stay(table: Any) -> None:
    root = table.root
    (root / "empty" / "nested" / "deeper").mkdir(parents=True)
    (root / "only-hidden").mkdir()
    touch(root, "only-hidden/.keep", 30 * DAY)
    (root / "has-young").mkdir()
    touch(root, "has-young/new.parquet", HOUR)
    (root / "_hidden_dir" / "empty").mkdir(parents=True)
    result = DeltaTable(str(root)).vacuum()
    assert names_of(result.directories, result) == {"empty", "empty/nested", "empty/nested/deeper"}
    assert result.num_directories == 3
    assert result.num_deleted == 1 + 3  # old.parquet and three directories
    assert not (root / "empty").exists()
    assert (root / "only-hidden" / ".keep").exists()
    assert (root / "has-young" / "new.parquet").exists()
    assert (root / "_hidden_dir" / "empty").is_dir()


def test_absolute_paths_outside_the_root_are_neither_protected_nor_deleted(
    tmp_path: Path, log_writer: Any
) -> None:
    w = log_writer
    root = w.root
    now = now_ms()
    outside = tmp_path / "other-table"
    for name in ("live.parquet", "removed.parquet"):
        touch(outside, name, 30 * DAY)
    touch(root, "inside.parquet", 30 * DAY)
    touch(root, "inside-removed.parquet", 30 * DAY)
    w.commit(
        0,
        w.commit_info(),
        w.protocol(),
        w.metadata(),
        w.add((outside / "live.parquet").as_uri()),
        w.add((outside / "removed.parquet").as_uri()),
        # An absolute URI under the root protects its file like a relative path.
        w.add((root / "inside.parquet").as_uri()),
        w.add(str(root / "inside-removed.parquet")),
    )
    w.commit(
        1,
        w.commit_info(),
        w.remove((outside / "removed.parquet").as_uri(), now - 30 * DAY),
        w.remove(str(root / "inside-removed.parquet"), now - 30 * DAY),
    )
    age_log(root, 20 * DAY)
    for mode in ("full", "lite"):
        result = DeltaTable(str(root)).vacuum(mode=mode, dry_run=True)
        assert names(result) == {"inside-removed.parquet"}, mode
    DeltaTable(str(root)).vacuum(mode="lite")
    assert {p.name for p in outside.iterdir()} == {"live.parquet", "removed.parquet"}
    assert files_under(root) == {"inside.parquet"}


def test_url_encoded_log_paths_protect_their_decoded_files(log_writer: Any) -> None:
    w = log_writer
    root = w.root
    touch(root, "p=a b/x y.parquet", 30 * DAY)
    touch(root, "p=a%2Fb/z.parquet", 30 * DAY)  # a partition value with '/' is escaped on disk
    touch(root, "p=c/orphan.parquet", 30 * DAY)
    w.commit(
        0,
        w.commit_info(),
        w.protocol(),
        w.metadata(partition_columns=["p"]),
        w.add("p=a%20b/x%20y.parquet", partitionValues={"p": "a b"}),
        w.add("p=a%252Fb/z.parquet", partitionValues={"p": "a/b"}),
    )
    assert names(DeltaTable(str(root)).vacuum(dry_run=True)) == {"p=c/orphan.parquet"}


def test_unencoded_paths_of_careless_writers_are_protected_too(log_writer: Any) -> None:
    w = log_writer
    touch(w.root, "100%.parquet", 30 * DAY)  # a writer that did not URL-encode '%'
    w.commit(0, w.commit_info(), w.protocol(), w.metadata(), w.add("100%.parquet"))
    assert DeltaTable(str(w.root)).vacuum(dry_run=True).files == ()


def test_symlinks_are_not_followed_out_of_the_root(tmp_path: Path, log_writer: Any) -> None:
    w = log_writer
    root = w.root
    outside = tmp_path / "precious"
    touch(outside, "keep.parquet", 30 * DAY)
    w.commit(0, w.commit_info(), w.protocol(), w.metadata())
    (root / "link").symlink_to(outside, target_is_directory=True)
    result = DeltaTable(str(root)).vacuum()
    # The link itself is an old untracked entry of the table; the directory it points to is not.
    assert (outside / "keep.parquet").exists()
    assert all("keep.parquet" not in f for f in result.files)


def test_a_log_path_through_a_symlink_is_refused_before_anything_is_deleted(
    tmp_path: Path, log_writer: Any
) -> None:
    w = log_writer
    root = w.root
    now = now_ms()
    outside = tmp_path / "precious"
    touch(outside, "x.parquet", 30 * DAY)
    touch(root, "expired.parquet", 30 * DAY)
    w.commit(
        0, w.commit_info(), w.protocol(), w.metadata(), w.add("link/x.parquet"), w.add("expired.parquet")
    )
    w.commit(
        1,
        w.commit_info(),
        w.remove("link/x.parquet", now - 20 * DAY),
        w.remove("expired.parquet", now - 20 * DAY),
    )
    age_log(root, 20 * DAY)
    (root / "link").symlink_to(outside, target_is_directory=True)
    with pytest.raises(InvalidPathError, match=r"not strictly under the table root.*Nothing was deleted"):
        DeltaTable(str(root)).vacuum(mode="lite")
    assert (outside / "x.parquet").exists() and (root / "expired.parquet").exists()


def test_removes_that_climb_out_of_the_root_are_never_deleted(tmp_path: Path, log_writer: Any) -> None:
    w = log_writer
    root = w.root
    now = now_ms()
    touch(tmp_path, "sibling.parquet", 30 * DAY)
    w.commit(0, w.commit_info(), w.protocol(), w.metadata(), w.add("../sibling.parquet"))
    w.commit(1, w.commit_info(), w.remove("../sibling.parquet", now - 20 * DAY))
    age_log(root, 20 * DAY)
    # A relative path that leaves the root makes the log corrupt: VACUUM refuses before listing.
    with pytest.raises(
        CorruptLogError, match=r"Line 4 of .*00000000000000000000\.json.*leads out of the table root"
    ):
        DeltaTable(str(root)).vacuum(mode="lite")
    assert (tmp_path / "sibling.parquet").exists()


# --- LITE --------------------------------------------------------------------------------------


@pytest.fixture
def lite_table(log_writer: Any) -> Any:
    """1-day file retention; versions 0-3 are 3 days old, version 4 is fresh.

    v0 adds a, b, c, d; v1 removes a and writes a cdc file; v2 removes b; v3 adds e;
    v4 (now) removes c. A stray file no commit names sits in the root."""
    w = log_writer
    root = w.root
    now = now_ms()
    config = {"delta.deletedFileRetentionDuration": "interval 1 days"}
    for name in ("a", "b", "c", "d", "e"):
        touch(root, f"{name}.parquet", 5 * DAY)
    touch(root, "_change_data/cdc-1.parquet", 5 * DAY)
    touch(root, "stray.parquet", 5 * DAY)
    w.commit(
        0,
        w.commit_info(),
        w.protocol(),
        w.metadata(configuration=config),
        *(w.add(f"{n}.parquet") for n in "abcd"),
    )
    w.commit(
        1,
        w.commit_info(),
        w.remove("a.parquet", now - 3 * DAY),
        {
            "cdc": {
                "path": "_change_data/cdc-1.parquet",
                "partitionValues": {},
                "size": 7,
                "dataChange": False,
            }
        },
    )
    w.commit(2, w.commit_info(), w.remove("b.parquet", now - 3 * DAY))
    w.commit(3, w.commit_info(), w.add("e.parquet"))
    age_log(root, 3 * DAY)
    w.commit(4, w.commit_info(), w.remove("c.parquet", now))
    return w


def test_lite_deletes_the_removes_of_commits_outside_the_retention(lite_table: Any) -> None:
    root = lite_table.root
    result = DeltaTable(str(root)).vacuum(mode="lite")
    assert names(result) == {"a.parquet", "b.parquet", "_change_data/cdc-1.parquet"}
    assert (result.eligible_start_version, result.eligible_end_version) == (0, 3)
    assert files_under(root) == {"c.parquet", "d.parquet", "e.parquet", "stray.parquet"}
    assert result.last_vacuum_version == 3
    assert (root / "_delta_log" / LAST_VACUUM_INFO).read_bytes() == (
        b'{"latestCommitVersionOutsideOfRetentionWindow":3}\n'
    )
    # FULL finds the stray file that LITE cannot see.
    assert names(DeltaTable(str(root)).vacuum(dry_run=True)) == {"stray.parquet"}


def test_lite_starts_after_the_last_vacuum(lite_table: Any) -> None:
    root = lite_table.root
    (root / "_delta_log" / LAST_VACUUM_INFO).write_text('{"latestCommitVersionOutsideOfRetentionWindow":1}\n')
    result = DeltaTable(str(root)).vacuum(mode="lite", dry_run=True)
    assert (result.eligible_start_version, result.eligible_end_version) == (2, 3)
    assert names(result) == {"b.parquet"}


def test_lite_refuses_when_the_log_was_cleaned_and_no_vacuum_is_recorded(lite_table: Any) -> None:
    root = lite_table.root
    write_checkpoint_for(root, 2)
    for version in (0, 1):
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    with pytest.raises(
        VacuumLiteError, match=r"Please run VACUUM FULL.*earliest commit left in the log is version 2"
    ):
        DeltaTable(str(root)).vacuum(mode="lite", dry_run=True)
    assert VacuumLiteError.delta_error_class == "DELTA_CANNOT_VACUUM_LITE"
    # A VACUUM recorded at or after the earliest commit makes LITE exact again.
    (root / "_delta_log" / LAST_VACUUM_INFO).write_text('{"latestCommitVersionOutsideOfRetentionWindow":2}')
    result = DeltaTable(str(root)).vacuum(mode="lite", dry_run=True)
    assert (result.eligible_start_version, result.eligible_end_version) == (3, 3) and result.files == ()


def test_full_records_its_window_so_a_later_lite_works_on_a_cleaned_log(lite_table: Any) -> None:
    root = lite_table.root
    full = DeltaTable(str(root)).vacuum()
    assert full.last_vacuum_version == 3 and read_last_vacuum_info(DeltaTable(str(root)).storage) == 3
    write_checkpoint_for(root, 3)
    for version in (0, 1, 2):
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    assert DeltaTable(str(root)).vacuum(mode="lite").files == ()


def test_the_recorded_window_never_moves_back(lite_table: Any) -> None:
    root = lite_table.root
    (root / "_delta_log" / LAST_VACUUM_INFO).write_text('{"latestCommitVersionOutsideOfRetentionWindow":4}')
    result = DeltaTable(str(root)).vacuum(mode="lite")
    assert result.last_vacuum_version is None and result.files == ()
    assert read_last_vacuum_info(DeltaTable(str(root)).storage) == 4


@pytest.mark.parametrize(
    "content", [b"", b"not json", b'{"latestCommitVersionOutsideOfRetentionWindow":"x"}']
)
def test_an_unreadable_last_vacuum_info_counts_as_missing(lite_table: Any, content: bytes) -> None:
    root = lite_table.root
    (root / "_delta_log" / LAST_VACUUM_INFO).write_bytes(content)
    assert read_last_vacuum_info(DeltaTable(str(root)).storage) is None
    assert DeltaTable(str(root)).vacuum(mode="lite", dry_run=True).eligible_start_version == 0


def test_lite_with_no_commit_older_than_the_retention_does_nothing(table: Any) -> None:
    result = DeltaTable(str(table.root)).vacuum(mode="lite")
    assert result.files == () and result.eligible_start_version is None
    assert not (table.root / "_delta_log" / LAST_VACUUM_INFO).exists()


def write_checkpoint_for(root: Path, version: int) -> None:
    DeltaTable(str(root)).checkpoint(version)


# --- retention ---------------------------------------------------------------------------------


def test_a_retention_shorter_than_the_table_s_is_refused_with_delta_s_explanation(table: Any) -> None:
    root = table.root
    before = files_under(root)
    with pytest.raises(VacuumRetentionTooShortError) as caught:
        DeltaTable(str(root)).vacuum(retention=timedelta(hours=1))
    message = str(caught.value)
    assert "Are you sure you would like to vacuum files with such a low retention period?" in message
    assert "enforce_retention_duration=False" in message
    assert 'please use a value not less than "168 hours"' in message
    assert "The retention interval 1 hour is shorter than the interval 1 week of " in message
    assert isinstance(caught.value, RetentionError)
    assert caught.value.delta_error_class == "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"
    assert files_under(root) == before
    assert sorted(p.name for p in (root / "_delta_log").iterdir()) == [
        "00000000000000000000.json",
        "00000000000000000001.json",
    ]


def test_the_configured_hours_are_rounded_up_in_the_message(log_writer: Any) -> None:
    w = log_writer
    config = {"delta.deletedFileRetentionDuration": "interval 90 minutes"}
    w.commit(0, w.commit_info(), w.protocol(), w.metadata(configuration=config))
    with pytest.raises(VacuumRetentionTooShortError, match='not less than "2 hours"'):
        DeltaTable(str(w.root)).vacuum(retention="1 hour")


@pytest.mark.parametrize("retention", [timedelta(hours=-1), "-5", "interval -1 days"])
def test_a_negative_retention_is_refused_even_with_the_check_off(table: Any, retention: Any) -> None:
    with pytest.raises(VacuumRetentionNegativeError, match="can't be less than 0"):
        DeltaTable(str(table.root)).vacuum(retention=retention, enforce_retention_duration=False)


@pytest.mark.parametrize("retention", ["forever", "3 months", "", "  ", [1], True])
def test_a_retention_that_is_not_an_interval_is_refused(table: Any, retention: Any) -> None:
    with pytest.raises(RetentionError):
        DeltaTable(str(table.root)).vacuum(retention=retention, dry_run=True)


def test_retention_precedence_argument_property_provider_default() -> None:
    key = "delta.deletedFileRetentionDuration"
    defaults = {key: "interval 14 days"}
    resolved = resolve_vacuum_retention(None, TableConfig())
    assert (resolved.effective.value, resolved.effective.source) == (timedelta(weeks=1), "default")
    resolved = resolve_vacuum_retention(None, TableConfig({}, defaults))
    assert (resolved.effective.value, resolved.effective.source) == (timedelta(days=14), "provider config")
    resolved = resolve_vacuum_retention(None, TableConfig({key: "interval 2 days"}, defaults))
    assert (resolved.effective.value, resolved.effective.source) == (timedelta(days=2), "table property")
    resolved = resolve_vacuum_retention("36", TableConfig({key: "interval 2 days"}, defaults))
    assert (resolved.effective.value, resolved.effective.source, resolved.configured.value) == (
        timedelta(hours=36),
        "argument",
        timedelta(days=2),
    )


def test_a_longer_retention_is_honoured(table: Any) -> None:
    result = DeltaTable(str(table.root)).vacuum(retention="interval 9 days", dry_run=True)
    assert result.files == () and result.retention.value == timedelta(days=9)


def test_the_provider_default_sets_the_safety_floor(table: Any) -> None:
    defaults = {"delta.deletedFileRetentionDuration": "interval 30 days"}
    with pytest.raises(VacuumRetentionTooShortError, match='"720 hours"'):
        DeltaTable(str(table.root), provider_defaults=defaults).vacuum(retention="interval 7 days")
    assert DeltaTable(str(table.root), provider_defaults=defaults).vacuum(dry_run=True).files == ()


# --- commits -----------------------------------------------------------------------------------


def history(root: Path) -> list[dict[str, Any]]:
    return DeltaTable(str(root)).history()


def test_start_and_end_commits_carry_delta_s_parameters_and_metrics(table: Any) -> None:
    root = table.root
    (root / "empty").mkdir()
    result = DeltaTable(str(root)).vacuum(retention="interval 7 days 12 hours")
    assert (result.start_version, result.end_version) == (2, 3)
    end, start = history(root)[:2]
    assert start["operation"] == "VACUUM START"
    assert start["operationParameters"] == {
        "retentionCheckEnabled": "true",
        "defaultRetentionMillis": str(WEEK),
        "specifiedRetentionMillis": str(WEEK + 12 * HOUR),
    }
    assert start["operationMetrics"] == {
        "numFilesToDelete": "2",
        "sizeOfDataToDelete": str(len(b"parquet-bytes")),
    }
    assert end["operation"] == "VACUUM END"
    assert end["operationParameters"] == {"status": "COMPLETED"}
    # Delta counts deleted files and directories together, and every listed directory plus the root.
    assert end["operationMetrics"] == {"numDeletedFiles": "2", "numVacuumedDirectories": "2"}
    lines = (root / "_delta_log" / "00000000000000000002.json").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["commitInfo"]["operation"] == "VACUUM START"


def test_without_a_specified_retention_the_parameter_is_absent(table: Any) -> None:
    DeltaTable(str(table.root)).vacuum()
    start = history(table.root)[1]
    assert "specifiedRetentionMillis" not in start["operationParameters"]


def test_dry_runs_and_log_commits_false_commit_nothing(table: Any) -> None:
    root = table.root
    DeltaTable(str(root)).vacuum(dry_run=True)
    assert DeltaTable(str(root)).version() == 1
    result = DeltaTable(str(root)).vacuum(log_commits=False)
    assert result.files and result.start_version is None and result.end_version is None
    assert DeltaTable(str(root)).version() == 1


def _immutable(path: Path) -> bool:
    """Make ``path`` undeletable: ``chattr +i`` as root (chmod does not stop root), chmod otherwise."""
    if os.geteuid() == 0:
        if shutil.which("chattr") is None:
            return False
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False)
        return done.returncode == 0
    path.parent.chmod(0o555)
    return True


def _mutable(path: Path) -> None:
    if os.geteuid() == 0:
        subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)
    else:
        path.parent.chmod(0o755)


def test_a_deletion_that_fails_part_way_commits_failed_and_re_raises(log_writer: Any) -> None:
    """A real fault: the filesystem refuses to delete one of the candidates."""
    w = log_writer
    root = w.root
    now = now_ms()
    names_ = [f"part-{i:04d}.parquet" for i in range(3000)]
    for name in names_:
        touch(root, f"d/{name}", 10 * DAY)
    w.commit(0, w.commit_info(), w.protocol(), w.metadata(), *(w.add(f"d/{n}") for n in names_))
    w.commit(1, w.commit_info(), *(w.remove(f"d/{n}", now - 8 * DAY) for n in names_))
    age_log(root, 8 * DAY)
    stuck = root / "d" / names_[1500]
    if not _immutable(stuck):
        pytest.skip("cannot make a file undeletable here (no chattr)")
    try:
        with pytest.raises(VacuumDeleteError) as raised:
            DeltaTable(str(root)).vacuum(max_workers=1)
    finally:
        _mutable(stuck)
    refused = [path for path, _ in raised.value.failed]
    assert str(stuck) in refused and str(stuck) in str(raised.value)
    assert raised.value.failed[0][1].startswith(("PermissionError", "OSError"))
    end, start = history(root)[:2]
    assert start["operation"] == "VACUUM START"
    assert end["operation"] == "VACUUM END"
    assert end["operationParameters"] == {"status": "FAILED"}
    assert "operationMetrics" not in end or not end["operationMetrics"]
    assert stuck.exists()
    assert not (root / "_delta_log" / LAST_VACUUM_INFO).exists()
    if os.geteuid() == 0:  # one immutable file: every other one was deleted
        assert refused == [str(stuck)] and "refused to delete 1 of 3000 file(s)" in str(raised.value)
        assert list((root / "d").iterdir()) == [stuck]
    else:  # a read-only directory refuses the whole first batch: the run stops there
        assert len(refused) == 1000 and "2000 other file(s) were not attempted" in str(raised.value)
    # The next VACUUM finishes the job.
    result = DeltaTable(str(root)).vacuum()
    assert result.status == "COMPLETED" and not any((root / "d").iterdir())


# --- protocol and arguments ------------------------------------------------------------------


def test_an_unknown_writer_feature_is_refused_naming_vacuum_protocol_check(log_writer: Any) -> None:
    w = log_writer
    touch(w.root, "orphan.parquet", 30 * DAY)
    features = {
        "readerFeatures": ["vacuumProtocolCheck"],
        "writerFeatures": ["vacuumProtocolCheck", "someFutureFeature"],
    }
    w.commit(0, w.commit_info(), w.protocol(3, 7, **features), w.metadata())
    with pytest.raises(
        UnsupportedFeatureError, match=r"'someFutureFeature'.*'vacuumProtocolCheck'"
    ) as caught:
        DeltaTable(str(w.root)).vacuum(dry_run=True)
    assert (caught.value.feature, caught.value.operation) == ("someFutureFeature", "vacuum")
    assert (w.root / "orphan.parquet").exists()


def test_vacuum_protocol_check_alone_is_honoured(log_writer: Any) -> None:
    w = log_writer
    touch(w.root, "orphan.parquet", 30 * DAY)
    features = {"readerFeatures": ["vacuumProtocolCheck"], "writerFeatures": ["vacuumProtocolCheck"]}
    w.commit(0, w.commit_info(), w.protocol(3, 7, **features), w.metadata())
    result = DeltaTable(str(w.root)).vacuum()
    assert names(result) == {"orphan.parquet"} and result.status == "COMPLETED"


def test_catalog_managed_tables_are_refused(log_writer: Any) -> None:
    w = log_writer
    features = {"readerFeatures": ["catalogManaged"], "writerFeatures": ["catalogManaged"]}
    w.commit(0, w.commit_info(), w.protocol(3, 7, **features), w.metadata())
    with pytest.raises(UnsupportedFeatureError, match=r"catalog"):
        DeltaTable(str(w.root)).vacuum(dry_run=True)


def test_features_that_only_bind_data_writes_do_not_stop_a_dry_run(log_writer: Any) -> None:
    w = log_writer
    touch(w.root, "orphan.parquet", 30 * DAY)
    config = {"delta.columnMapping.mode": "name", "delta.constraints.positive": "id > 0"}
    w.commit(0, w.commit_info(), w.protocol(2, 5), w.metadata(configuration=config))
    assert names(DeltaTable(str(w.root)).vacuum(dry_run=True)) == {"orphan.parquet"}


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mode": "medium"}, "mode must be 'full' or 'lite'"),
        ({"dry_run": "yes"}, "dry_run must be True or False"),
        ({"enforce_retention_duration": None}, "enforce_retention_duration must be True or False"),
        ({"max_workers": 0}, "max_workers must be a positive integer"),
        ({"max_workers": True}, "max_workers must be a positive integer"),
        ({"now": "yesterday"}, "now must be a datetime or epoch milliseconds"),
    ],
)
def test_bad_arguments_are_refused(table: Any, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        DeltaTable(str(table.root)).vacuum(**kwargs)
    assert files_under(table.root) == {"live.parquet", "old.parquet", "recent.parquet"}


def test_mode_is_case_insensitive_and_now_accepts_datetimes(table: Any) -> None:
    naive_future = datetime.now(tz=UTC).replace(tzinfo=None) + timedelta(days=7)
    result = DeltaTable(str(table.root)).vacuum(mode=" FULL ", now=naive_future, dry_run=True)
    assert result.mode == "full"
    assert names(result) == {"old.parquet", "recent.parquet"}


def test_to_dict_is_json(table: Any) -> None:
    result = DeltaTable(str(table.root)).vacuum()
    payload = json.loads(json.dumps(result.to_dict()))
    assert payload["num_files"] == 1 and payload["files"] == list(result.files)
    assert payload["retention"] == {
        "name": "delta.deletedFileRetentionDuration",
        "seconds": WEEK / 1000,
        "source": "default",
    }
    assert payload["status"] == "COMPLETED"
    assert datetime.fromisoformat(payload["delete_before"]) == result.delete_before


@pytest.mark.parametrize("hours", [200, 200.0, "200"])
def test_a_number_of_hours_is_a_retention_as_everywhere_else(table: Any, hours: Any) -> None:
    """retention=24.vacuum() used to raise where cleanup_logs took hours: one unit rule now."""
    result = DeltaTable(str(table.root)).vacuum(retention=hours, dry_run=True)
    assert result.retention.value == timedelta(hours=200) and result.retention.source == "argument"
