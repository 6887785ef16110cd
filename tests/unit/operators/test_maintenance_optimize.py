"""OPTIMIZE as a step of DeltaMaintenanceOperator: due from a number of small files, its report, dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import write_deltalake

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.table.maintenance_due import optimize_due
from airflow_delta_provider.operators.maintenance import DeltaMaintenanceOperator


def small_files_table(root: Path, files: int) -> str:
    """A delta-rs table of ``files`` one-row appends (delta-rs writes them; the core compacts them)."""
    for n in range(files):
        write_deltalake(
            str(root), pa.table({"id": pa.array([n], pa.int64()), "name": [f"row-{n}"]}), mode="append"
        )
    return str(root)


def ids(root: str) -> list[int]:
    return sorted(DeltaTable(root).snapshot().to_pyarrow_table().column("id").to_pylist())


def test_optimize_due_counts_the_files_the_plan_would_rewrite(tmp_path: Path) -> None:
    root = small_files_table(tmp_path / "t", 4)
    snapshot = DeltaTable(root).snapshot()
    due = optimize_due(snapshot, min_files=4)
    assert (due.due, due.small_files, due.bins, due.min_files) == (True, 4, 1, 4)
    assert "4 small file(s)" in due.reason and "threshold 4" in due.reason
    not_due = optimize_due(snapshot, min_files=5)
    assert not not_due.due and "fewer than the threshold of 5" in not_due.reason
    assert json.dumps(due.to_dict())
    with pytest.raises(ValueError, match="min_files"):
        optimize_due(snapshot, min_files=0)


def test_maintenance_optimizes_when_due_and_reports_it(tmp_path: Path) -> None:
    busy = small_files_table(tmp_path / "busy", 5)
    quiet = small_files_table(tmp_path / "quiet", 2)
    report = DeltaMaintenanceOperator(
        task_id="m",
        tables=[busy, quiet],
        run_optimize=True,
        optimize_min_files=3,
        run_vacuum=False,
    ).execute({})

    assert report["failed"] == []
    by_name = {Path(e["table"]).name: e for e in report["tables"]}
    step = by_name["busy"]["steps"]["optimize"]
    assert step["status"] == "ran" and "rewrote 5 files into 1" in step["reason"]
    assert step["decision"]["small_files"] == 5
    assert step["result"]["metrics"]["numRemovedFiles"] == 5
    assert by_name["busy"]["files_compacted"] == 5 and by_name["busy"]["files_written"] == 1
    assert by_name["quiet"]["steps"]["optimize"]["status"] == "not due"
    assert report["totals"]["files_compacted"] == 5
    # The OPTIMIZE commit comes before the checkpoint step, which then covers it.
    assert DeltaTable(busy).snapshot().num_files() == 1
    assert ids(busy) == [0, 1, 2, 3, 4]
    assert sorted(RsDeltaTable(busy).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2, 3, 4]
    assert DeltaTable(busy).history(1)[0]["operation"] == "OPTIMIZE"
    json.dumps(report)


def test_maintenance_optimize_dry_run_and_off_by_default(tmp_path: Path) -> None:
    root = small_files_table(tmp_path / "t", 3)
    version = DeltaTable(root).version()
    dry = DeltaMaintenanceOperator(
        task_id="m", tables=root, run_optimize=True, optimize_min_files=2, dry_run=True
    ).execute({})
    assert dry["tables"][0]["steps"]["optimize"]["status"] == "due"
    default = DeltaMaintenanceOperator(task_id="m", tables=root, run_vacuum=False).execute({})
    assert default["tables"][0]["steps"]["optimize"] == {"status": "disabled", "reason": "run_optimize=False"}
    assert DeltaTable(root).version() == version


def test_bad_optimize_arguments_are_refused_at_init() -> None:
    with pytest.raises(ValueError, match="optimize_min_files"):
        DeltaMaintenanceOperator(task_id="m", tables="/x", optimize_min_files=0)
    for bad in (1.5, "", "  ", "128 mb", "1.5g", 0, True):
        with pytest.raises(ValueError, match="optimize_target_file_size"):
            DeltaMaintenanceOperator(task_id="m", tables="/x", optimize_target_file_size=bad)
