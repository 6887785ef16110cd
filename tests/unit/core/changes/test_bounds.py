"""The version range of DeltaTable.changes() as Delta Spark resolves it (changes_bounds): version and
timestamp bounds, Delta's error names, commits removed by log cleanup, and the cost: only the
range's commits are read, never the table's file list."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from changes_support import CORPUS, log_state

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.changes.bounds import MAX_COMMIT_MILLIS
from airflow_delta_provider.core.errors import (
    CommitsCleanedUpError,
    CorruptLogError,
    InvalidChangeRangeError,
    TimestampEarlierThanRetentionError,
    TimestampLaterThanLatestCommitError,
    VersionGapError,
)
from airflow_delta_provider.core.log import snapshot as snapshot_module

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64())])
#: Commit file times of the table below: version -> epoch milliseconds.
TIMES = {0: 1_700_000_000_000, 1: 1_700_000_010_000, 2: 1_700_000_020_000, 3: 1_700_000_030_000}


def timed_table(root: Path, properties: dict[str, str] | None = None) -> DeltaTable:
    """v0 creates the table, v1-v3 append one row each; the commit files carry TIMES."""
    table = DeltaTable.create(str(root), SCHEMA, properties=properties)
    for version in (1, 2, 3):
        pq.write_table(pa.table({"id": pa.array([version], pa.int64())}), root / f"{version}.parquet")
        table.commit_files([f"{version}.parquet"])
    for version, ms in TIMES.items():
        os.utime(root / "_delta_log" / f"{version:020d}.json", ns=(ms * 1_000_000,) * 2)
    return table


def at(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def versions_of(table: DeltaTable, **bounds: Any) -> tuple[int, int, list[int]]:
    changes = table.changes(**bounds)
    rows = changes.to_pyarrow_table(["_commit_version"]).column(0).to_pylist()
    return changes.start_version, changes.end_version, sorted(rows)


# --- versions ------------------------------------------------------------------------------------


def test_version_bounds_are_inclusive_and_the_end_is_capped_at_the_latest(tmp_path: Path) -> None:
    table = timed_table(tmp_path / "t")
    assert versions_of(table, starting_version=1, ending_version=2) == (1, 2, [1, 2])
    assert versions_of(table, starting_version=2) == (2, 3, [2, 3])
    assert versions_of(table, starting_version=3, ending_version=99) == (3, 3, [3])
    assert versions_of(table, starting_version=0, ending_version=0) == (0, 0, [])  # CREATE TABLE: no rows


BAD_BOUNDS: list[tuple[dict[str, Any], str]] = [
    ({}, "DELTA_NO_START_FOR_CDC_READ"),
    ({"ending_version": 2}, "DELTA_NO_START_FOR_CDC_READ"),
    ({"starting_version": 1, "starting_timestamp": TIMES[1]}, "DELTA_MULTIPLE_CDC_BOUNDARY"),
    (
        {"starting_version": 1, "ending_version": 2, "ending_timestamp": TIMES[2]},
        "DELTA_MULTIPLE_CDC_BOUNDARY",
    ),
    ({"starting_version": -1}, "DELTA_VERSION_INVALID"),
    ({"starting_version": True}, "DELTA_VERSION_INVALID"),
    ({"starting_version": "1"}, "DELTA_VERSION_INVALID"),
    ({"starting_version": 1.0}, "DELTA_VERSION_INVALID"),
    ({"starting_version": 1, "ending_version": -2}, "DELTA_VERSION_INVALID"),
    ({"starting_version": 4}, "DELTA_CDC_START_VERSION_AFTER_LATEST"),
    ({"starting_version": 3, "ending_version": 2}, "DELTA_INVALID_CDC_RANGE"),
    ({"starting_timestamp": TIMES[3], "ending_timestamp": TIMES[1]}, "DELTA_INVALID_CDC_RANGE"),
    ({"starting_timestamp": TIMES[2] + 1, "ending_timestamp": TIMES[2]}, "DELTA_INVALID_CDC_RANGE"),
]


@pytest.mark.parametrize(
    ("bounds", "error_class"), BAD_BOUNDS, ids=[f"{e}-{i}" for i, (_, e) in enumerate(BAD_BOUNDS)]
)
def test_bad_bounds_are_refused_with_deltas_error_name_and_the_table_unchanged(
    tmp_path: Path, bounds: dict[str, Any], error_class: str
) -> None:
    table = timed_table(tmp_path / "t")
    before = log_state(tmp_path / "t")
    with pytest.raises(InvalidChangeRangeError) as info:
        table.changes(**bounds)
    assert info.value.delta_error_class == error_class
    assert error_class in str(info.value)
    assert isinstance(info.value, ValueError)
    assert log_state(tmp_path / "t") == before and table.version() == 3


# --- timestamps ----------------------------------------------------------------------------------


def test_a_starting_timestamp_is_the_first_commit_at_or_after_it(tmp_path: Path) -> None:
    table = timed_table(tmp_path / "t")
    assert versions_of(table, starting_timestamp=TIMES[1])[:2] == (1, 3)
    assert versions_of(table, starting_timestamp=TIMES[1] + 1)[:2] == (2, 3)
    assert versions_of(table, starting_timestamp=at(TIMES[2]))[:2] == (2, 3)  # a datetime
    assert versions_of(table, starting_timestamp=at(TIMES[2] - 1).isoformat())[:2] == (2, 3)  # ISO-8601
    assert versions_of(table, starting_timestamp=TIMES[0] - 10**9)[:2] == (0, 3)  # before all: the earliest
    with pytest.raises(TimestampLaterThanLatestCommitError, match="DELTA_TIMESTAMP_GREATER_THAN_COMMIT"):
        table.changes(starting_timestamp=TIMES[3] + 1)


def test_an_ending_timestamp_is_the_last_commit_at_or_before_it(tmp_path: Path) -> None:
    table = timed_table(tmp_path / "t")
    assert versions_of(table, starting_version=0, ending_timestamp=TIMES[2])[:2] == (0, 2)
    assert versions_of(table, starting_version=0, ending_timestamp=TIMES[2] + 9_999)[:2] == (0, 2)
    assert versions_of(table, starting_version=0, ending_timestamp=TIMES[3])[:2] == (0, 3)
    with pytest.raises(TimestampEarlierThanRetentionError):
        table.changes(starting_version=0, ending_timestamp=TIMES[0] - 1)
    with pytest.raises(TimestampLaterThanLatestCommitError):
        table.changes(starting_version=0, ending_timestamp=TIMES[3] + 1)


def test_two_timestamps_between_the_same_two_commits_give_no_change(tmp_path: Path) -> None:
    table = timed_table(tmp_path / "t")
    changes = table.changes(starting_timestamp=TIMES[1] + 1, ending_timestamp=TIMES[2] - 1)
    assert (changes.start_version, changes.end_version) == (2, 1)
    assert changes.files().num_rows == 0
    assert changes.to_pyarrow_table().num_rows == 0
    assert changes.to_pyarrow_table().schema == changes.schema


def test_in_commit_timestamps_resolve_timestamp_bounds() -> None:
    table = DeltaTable(str(CORPUS / "tables" / "delta-rs" / "cdc_ict_table"))
    ict = {
        r["_commit_version"]: r["_commit_timestamp"]
        for r in table.changes(1).to_pyarrow_table(["_commit_version", "_commit_timestamp"]).to_pylist()
    }
    assert versions_of(table, starting_timestamp=ict[2])[:2] == (2, 3)
    assert versions_of(table, starting_timestamp=ict[2] + dt.timedelta(milliseconds=1))[:2] == (3, 3)
    assert versions_of(table, starting_version=1, ending_timestamp=ict[2])[:2] == (1, 2)


# --- commits log cleanup removed -------------------------------------------------------------------


def append_with_in_commit_timestamp(root: Path, ict: int) -> None:
    """:func:`timed_table` with in-commit timestamps enabled, then v4: another writer's append whose
    commitInfo has ``ict``."""
    timed_table(root, {"delta.enableInCommitTimestamps": "true"})
    pq.write_table(pa.table({"id": pa.array([4], pa.int64())}), root / "4.parquet")
    add = {"path": "4.parquet", "partitionValues": {}, "modificationTime": 1, "dataChange": True}
    actions = [
        {"commitInfo": {"operation": "WRITE", "inCommitTimestamp": ict}},
        {"add": {**add, "size": (root / "4.parquet").stat().st_size}},
    ]
    (root / "_delta_log" / f"{4:020d}.json").write_text("\n".join(map(json.dumps, actions)) + "\n")


@pytest.mark.parametrize("ict", [MAX_COMMIT_MILLIS + 1, -MAX_COMMIT_MILLIS - 1, 2**63 - 1, -(2**63)], ids=str)
def test_an_in_commit_timestamp_no_timestamp_holds_is_refused_naming_the_commit(
    tmp_path: Path, ict: int, table_state: Any
) -> None:
    """``_commit_timestamp`` is microseconds in a long: an in-commit timestamp (milliseconds, any
    long in the log) past that range is a corrupt commit, not an OverflowError."""
    root = tmp_path / "t"
    append_with_in_commit_timestamp(root, ict)
    before = table_state(root)
    with pytest.raises(
        CorruptLogError, match=rf"Version 4 .*inCommitTimestamp {ict} .*00000000000000000004.json"
    ):
        DeltaTable(str(root)).changes(3)
    assert versions_of(DeltaTable(str(root)), starting_version=1, ending_version=3) == (1, 3, [1, 2, 3])
    assert table_state(root) == before


def test_an_in_commit_timestamp_at_the_edge_of_the_range_is_read(tmp_path: Path) -> None:
    root = tmp_path / "t"
    append_with_in_commit_timestamp(root, -MAX_COMMIT_MILLIS)
    stamps = DeltaTable(str(root)).changes(4).to_pyarrow_table(["_commit_timestamp"]).column(0)
    assert stamps.cast(pa.int64()).to_pylist() == [-MAX_COMMIT_MILLIS * 1000]


def test_a_range_whose_commits_were_cleaned_up_names_the_version_retention_and_earliest() -> None:
    root = CORPUS / "tables" / "delta-rs" / "checkpoint-cdf-table"  # commits start at 3 (checkpoint 3)
    table = DeltaTable(str(root))
    for start in (0, 1, 2):
        with pytest.raises(CommitsCleanedUpError) as info:
            table.changes(start)
        error = info.value
        assert (error.version, error.earliest_version) == (start, 3)
        message = str(error)
        assert f"version {start} " in message and "delta.logRetentionDuration" in message
        assert "from version 3 on" in message and "DeltaTable.snapshot()" in message
    assert table.changes(3).start_version == 3


def test_a_start_whose_state_cannot_be_rebuilt_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), SCHEMA)
    for version in range(1, 8):
        pq.write_table(pa.table({"id": pa.array([version], pa.int64())}), root / f"{version}.parquet")
        table.commit_files([f"{version}.parquet"], auto_checkpoint=False)
    table.checkpoint(5)
    for version in (0, 1):  # log cleanup by a writer that kept commits 2-7 but no checkpoint before 5
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    with pytest.raises(CommitsCleanedUpError, match=r"version 3 .* cannot be rebuilt"):
        table.changes(3)
    assert versions_of(table, starting_version=5)[:2] == (5, 7)
    assert versions_of(table, starting_version=6)[2] == [6, 7]


def test_a_commit_missing_inside_the_range_is_a_gap(tmp_path: Path) -> None:
    root = tmp_path / "t"
    timed_table(root)
    shutil.move(root / "_delta_log" / f"{2:020d}.json", tmp_path / "aside.json")
    with pytest.raises(VersionGapError) as info:
        DeltaTable(str(root)).changes(1)
    assert info.value.missing_version == 2


# --- cost ----------------------------------------------------------------------------------------


def test_only_the_range_is_read_never_the_file_list(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), SCHEMA)
    for version in range(1, 26):
        pq.write_table(pa.table({"id": pa.array([version], pa.int64())}), root / f"{version}.parquet")
        table.commit_files([f"{version}.parquet"])  # Delta's checkpoint every 10 versions
    read: list[str] = []
    store = table.storage
    original = type(store).read_joined

    def spy(self: Any, paths: Any, **kwargs: Any) -> Any:
        read.extend(os.path.basename(p) for p in paths)
        return original(self, paths, **kwargs)

    def no_file_list(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("changes() replayed the table's file list")

    monkeypatch.setattr(type(store), "read_joined", spy)
    monkeypatch.setattr(snapshot_module, "replay_files", no_file_list)
    changes = table.changes(22, 24)
    assert sorted(changes.to_pyarrow_table(["id"]).column(0).to_pylist()) == [22, 23, 24]
    # The latest snapshot's own commits (after checkpoint 20) and nothing else.
    assert sorted(read) == [f"{v:020d}.json" for v in range(21, 26)]


def test_the_file_level_changes_do_not_import_pandas(tmp_path: Path) -> None:
    # pyarrow imports pandas (a fifth of a second) when handed Python values; the log-only path
    # builds its arrays without it (core.arrays), as a snapshot load does.
    timed_table(tmp_path / "t")
    probe = (
        "import sys\n"
        "from airflow_delta_provider.core import DeltaTable\n"
        "changes = DeltaTable(sys.argv[1]).changes(1)\n"
        "print(changes.files().num_rows, 'pandas' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path / "t")], capture_output=True, text=True, check=True
    )
    assert result.stdout.split() == ["3", "False"]


def test_a_range_read_while_another_writer_commits_is_exactly_its_versions(tmp_path: Path) -> None:
    """The latest version is fixed when the range is resolved: commits landing meanwhile (another
    writer, in another thread) are neither half-read nor read past the range's end."""
    import threading

    root = tmp_path / "t"
    table = DeltaTable.create(str(root), SCHEMA)
    stop = threading.Event()

    def writer() -> None:
        version = 0
        while not stop.is_set() and version < 200:
            version += 1
            pq.write_table(pa.table({"id": pa.array([version], pa.int64())}), root / f"{version}.parquet")
            table.commit_files([f"{version}.parquet"], auto_checkpoint=False)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(20):
            start, end, versions = versions_of(DeltaTable(str(root)), starting_version=0)
            assert start == 0 and versions == list(range(1, end + 1))
    finally:
        stop.set()
        thread.join()
