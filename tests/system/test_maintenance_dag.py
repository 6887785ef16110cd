"""The nightly maintenance example DAG, run with ``dag.test()`` against a real SQLite metadata DB.

The tables are real delta-rs tables under ``tmp_path``, named through the Airflow Variable the
DAG reads (``AIRFLOW_VAR_DELTA_MAINTENANCE_TABLES``, Airflow's environment-variable backend).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import PostCommitHookProperties, write_deltalake

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

pytestmark = pytest.mark.system

DAG_FILE = Path(__file__).resolve().parents[2] / "dags_examples" / "nightly_maintenance.py"
DAG_ID = "delta_nightly_maintenance"
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


@pytest.fixture(scope="module")
def maintenance_dag(load_example: Callable[[str], ModuleType]) -> ModuleType:
    """The example DAG, loaded from the dags folder of a migrated SQLite DB (``tests/system/conftest.py``).

    The fixture points the Variable ``delta_examples_root`` at an empty temporary directory for this
    module.
    """
    return load_example(DAG_FILE.name)


def write_table(root: Path, commits: int, *, overwrite_last: bool = False) -> str:
    """A delta-rs table of one-row versions; the last may overwrite everything before it."""
    for version in range(commits):
        write_deltalake(
            str(root),
            pa.table({"id": pa.array([version], pa.int64())}),
            mode="overwrite" if overwrite_last and version == commits - 1 else "append",
            # Tombstones expire at once, so VACUUM has work without turning its safety check off.
            configuration={"delta.deletedFileRetentionDuration": "interval 0 hours"}
            if version == 0
            else None,
            post_commithook_properties=NO_HOOKS,
        )
    return str(root)


def age(root: str, days: float) -> None:
    """Move the log 40 days and the data files one day into the past (what cleanup and VACUUM read)."""
    now = time.time()
    for index, path in enumerate(sorted((Path(root) / "_delta_log").iterdir())):
        stamp = now - days * 86_400 + index
        os.utime(path, (stamp, stamp))
    for path in Path(root).glob("*.parquet"):
        os.utime(path, (now - 86_400, now - 86_400))


def tree(root: str) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in Path(root).rglob("*")
        if p.is_file()
    }


def xcoms(run_id: str) -> dict[tuple[str, str], Any]:
    """The run's XComs from the metadata DB, by (task id, key)."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=DAG_ID, run_id=run_id).all()
        return {(row.task_id, row.key): row.value for row in rows}


def task_states(dag_run: Any) -> dict[str, str]:
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session

    with create_session() as session:
        run = session.query(DagRun).filter_by(dag_id=DAG_ID, run_id=dag_run.run_id).one()
        return {ti.task_id: str(ti.state) for ti in run.get_task_instances(session=session)}


def test_the_dag_loads(maintenance_dag: ModuleType) -> None:
    """The DAG parses without touching any table (it reads its table list at run time)."""
    dag = maintenance_dag.dag
    assert dag.dag_id == DAG_ID
    assert set(dag.task_ids) == {"tables_to_maintain", "maintain_tables", "report"}
    assert dag.max_active_runs == 1


def test_nightly_run_maintains_every_table(
    maintenance_dag: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    neglected = write_table(tmp_path / "neglected", 12, overwrite_last=True)
    age(neglected, days=40)
    fresh = write_table(tmp_path / "fresh", 3)
    monkeypatch.setenv("AIRFLOW_VAR_DELTA_MAINTENANCE_TABLES", json.dumps([neglected, fresh]))

    dag_run = maintenance_dag.dag.test()

    assert str(dag_run.state) == "success"
    values = xcoms(dag_run.run_id)
    report = values[("maintain_tables", "maintenance_report")]
    assert values[("maintain_tables", "return_value")] == report
    by_table = {Path(entry["table"]).name: entry for entry in report["tables"]}
    assert report["failed"] == []
    assert [by_table["neglected"]["steps"][s]["status"] for s in ("checkpoint", "cleanup", "vacuum")] == [
        "ran",
        "ran",
        "ran",
    ]
    assert by_table["neglected"]["files_removed"] == 11
    assert by_table["neglected"]["versions_retained"] == 3  # 11 and the VACUUM START/END commits
    assert by_table["fresh"]["steps"]["checkpoint"]["status"] == "not due"
    assert by_table["fresh"]["files_removed"] == 0
    assert values[("report", "return_value")] == report["totals"]
    # The tables are whole: delta-rs reads what was there before maintenance.
    assert RsDeltaTable(neglected).to_pyarrow_table()["id"].to_pylist() == [11]
    assert sorted(RsDeltaTable(fresh).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2]
    assert (Path(neglected) / "_delta_log" / "_last_checkpoint").exists()


def test_dry_run_changes_nothing(
    maintenance_dag: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    neglected = write_table(tmp_path / "neglected", 12, overwrite_last=True)
    age(neglected, days=40)
    monkeypatch.setenv("AIRFLOW_VAR_DELTA_MAINTENANCE_TABLES", json.dumps([neglected]))
    before = tree(neglected)

    dag_run = maintenance_dag.dag.test(run_conf={"dry_run": True})

    assert str(dag_run.state) == "success"
    report = xcoms(dag_run.run_id)[("maintain_tables", "maintenance_report")]
    assert report["dry_run"] is True
    assert report["tables"][0]["steps"]["vacuum"]["result"]["num_files"] == 11
    assert tree(neglected) == before


def test_a_failing_table_fails_the_task_after_the_others_are_maintained(
    maintenance_dag: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    neglected = write_table(tmp_path / "neglected", 12, overwrite_last=True)
    age(neglected, days=40)
    missing = str(tmp_path / "missing")
    monkeypatch.setenv("AIRFLOW_VAR_DELTA_MAINTENANCE_TABLES", json.dumps([missing, neglected]))

    dag_run = maintenance_dag.dag.test()

    assert str(dag_run.state) == "failed"
    states = task_states(dag_run)
    assert states["maintain_tables"] == "failed"
    # The report task runs anyway (trigger rule all_done), so the night's report is not lost, and
    # fails too: as the last task it decides the run's state.
    assert states["report"] == "failed"
    report = xcoms(dag_run.run_id)[("maintain_tables", "maintenance_report")]
    assert [Path(t).name for t in report["failed"]] == ["missing"]
    assert report["totals"]["files_removed"] == 11
    assert RsDeltaTable(neglected).to_pyarrow_table()["id"].to_pylist() == [11]


def test_without_the_variable_the_demo_tables_are_maintained(
    maintenance_dag: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("AIRFLOW_VAR_DELTA_MAINTENANCE_TABLES", raising=False)
    demo_root = Path(os.environ["AIRFLOW_VAR_DELTA_EXAMPLES_ROOT"])

    # Nothing under the demo root yet: the run skips maintenance instead of failing.
    dag_run = maintenance_dag.dag.test()
    assert str(dag_run.state) == "success"
    states = task_states(dag_run)
    assert states["tables_to_maintain"] == "skipped"
    assert states["maintain_tables"] == "skipped"

    neglected = write_table(demo_root / "events", 12, overwrite_last=True)
    age(neglected, days=40)
    (demo_root / "notes").mkdir(exist_ok=True)  # not a table: not picked up
    dag_run = maintenance_dag.dag.test()
    assert str(dag_run.state) == "success"
    report = xcoms(dag_run.run_id)[("maintain_tables", "maintenance_report")]
    assert [Path(entry["table"]).name for entry in report["tables"]] == ["events"]
    assert report["totals"]["files_removed"] == 11
