"""``DeltaTable.snapshot(partition_filter=...)``: a snapshot of some partitions, and what it refuses.

The restricted snapshot reads (files, partition values, rows); whatever takes a snapshot for the
whole table (a checkpoint, VACUUM, log cleanup, a commit's conflict checks, tombstones) refuses it
with an error naming the filter, and the table is unchanged. A DELETE of a partition replays only
that partition and commits against the whole snapshot. (Equality with the full replay on every
layout: ``tests/property/test_partition_pruning.py``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions import PartitionFilter, Predicate, PredicateError
from airflow_delta_provider.core.log import load_snapshot
from airflow_delta_provider.core.maintenance import CleanupOptions, VacuumOptions
from airflow_delta_provider.core.maintenance.checkpoint import write_checkpoint
from airflow_delta_provider.core.maintenance.cleanup import cleanup_logs
from airflow_delta_provider.core.maintenance.vacuum import vacuum
from airflow_delta_provider.core.protocol.actions import AddFile
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan

if TYPE_CHECKING:
    from pathlib import Path


def _table(root: Path) -> DeltaTable:
    """Two partitions of ``ds`` (and a null one), two files each, with rows."""
    table = DeltaTable.create(
        str(root), pa.schema([("id", pa.int64()), ("ds", pa.date32())]), partition_by=["ds"]
    )
    for n, ds in enumerate(["2024-01-01", "2024-01-01", "2024-01-02", "2024-01-02", None]):
        directory = f"ds={ds}" if ds is not None else "ds=__HIVE_DEFAULT_PARTITION__"
        (root / directory).mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": [n * 10, n * 10 + 1]}), root / directory / f"f{n}.parquet")
        table.commit_files([f"{directory}/f{n}.parquet"], auto_checkpoint=False)
    return table


def test_a_snapshot_of_some_partitions_reads_their_files_only(tmp_path: Path) -> None:
    table = _table(tmp_path / "t")
    table.checkpoint()
    part = table.snapshot(partition_filter="ds = '2024-01-02'")
    assert part.partition_filter is not None and part.partition_filter.text == "ds = '2024-01-02'"
    assert part.num_files() == 2
    assert sorted(part.to_pyarrow_table().column("id").to_pylist()) == [20, 21, 30, 31]
    assert part.version == table.version() and part.schema == table.snapshot().schema
    nulls = table.snapshot(partition_filter=Predicate("ds IS NULL", ["ds"]))
    assert nulls.files().column("path").to_pylist() == ["ds=__HIVE_DEFAULT_PARTITION__/f4.parquet"]
    none = table.snapshot(version=1, partition_filter="ds > DATE '2024-01-05'")
    assert none.num_files() == 0 and none.to_pyarrow_table().num_rows == 0
    assert "partition_filter=\"ds > DATE '2024-01-05'\"" in repr(none)
    via_load = load_snapshot(table.storage, partition_filter=PartitionFilter("ds IS NOT NULL", ["ds"]))
    assert via_load.num_files() == 4


@pytest.mark.parametrize(
    ("value", "error", "message"),
    [
        ("id = 1", PredicateError, "names 'id', which is not a partition column .* selects partitions only"),
        ("nope = 1", PredicateError, "not a column"),
        ("ds = 'not a date'", PredicateError, "comparison of ds with 'not a date' is refused"),
        ("ds = ", PredicateError, "Cannot parse"),
        (Predicate("id = 1 AND ds IS NULL", ["ds"], data_columns=["id"]), PredicateError, "not a partition"),
        (42, TypeError, "SQL text or a Predicate"),
    ],
)
def test_bad_partition_filters_are_refused_before_anything_is_replayed(
    tmp_path: Path, value: Any, error: type[Exception], message: str, table_state: Any
) -> None:
    table = _table(tmp_path / "t")
    before = table_state(tmp_path / "t")
    with pytest.raises(error, match=message):
        table.snapshot(partition_filter=value)
    assert table_state(tmp_path / "t") == before


def test_what_needs_the_whole_table_refuses_a_snapshot_of_some_partitions(
    tmp_path: Path, table_state: Any
) -> None:
    table = _table(tmp_path / "t")
    part = table.snapshot(partition_filter="ds = '2024-01-01'")
    before = table_state(tmp_path / "t")
    refusals = {
        "A checkpoint": lambda: write_checkpoint(part),
        "VACUUM": lambda: vacuum(part, VacuumOptions(dry_run=True)),
        "Log cleanup": lambda: cleanup_logs(part, CleanupOptions(dry_run=True)),
        "A commit": lambda: OptimisticTransaction(table.storage, read_snapshot=part).commit(
            CommitPlan("WRITE", adds=(AddFile("x.parquet", {"ds": "2024-01-01"}, 1, 1),))
        ),
        "Reading the tombstones": part.tombstones,
    }
    for purpose, call in refusals.items():
        with pytest.raises(ValueError, match=f"{purpose}.*needs the whole table.*ds = '2024-01-01'"):
            call()
    with pytest.raises(ValueError, match="already restricted"):
        part.with_partition_filter(PartitionFilter("ds IS NULL", ["ds"]))
    assert table_state(tmp_path / "t") == before


def test_a_delete_of_a_partition_replays_that_partition_and_commits_against_the_table(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_delta_provider.core.log import replay

    table = _table(tmp_path / "t")
    table.checkpoint()
    filters = []
    original = replay.replay_files

    def spying(*args: Any, **kwargs: Any) -> Any:
        filters.append(kwargs.get("partition_filter"))
        return original(*args, **kwargs)

    monkeypatch.setattr("airflow_delta_provider.core.log.snapshot.replay_files", spying)
    result = table.delete("ds = '2024-01-01'")
    assert result.num_removed_files == 2 and result.mode == "metadata"
    assert [f.text if f is not None else None for f in filters] == ["ds = '2024-01-01'"]
    monkeypatch.undo()
    remaining = DeltaTable(str(tmp_path / "t")).snapshot().to_pyarrow_table()
    assert sorted(remaining.column("id").to_pylist()) == [20, 21, 30, 31, 40, 41]
