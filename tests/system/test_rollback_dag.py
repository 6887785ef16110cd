"""The rollback example DAG (``DeltaRestoreOperator(before_run_id=...)``), run with ``dag.test()``
against a real SQLite metadata DB: the events table is written by three runs of an ingest DAG
(the provider's commit operator, its run identity in commitInfo), then rolled back to before the
second.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.operators.commit import RunIdentity

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

pytestmark = pytest.mark.system

DAG_FILE = Path(__file__).resolve().parents[2] / "dags_examples" / "rollback.py"
RUNS = [f"scheduled__2026-11-0{day}T00:00:00+00:00" for day in (1, 2, 3)]


@pytest.fixture(scope="module")
def rollback_dag(load_example: Callable[[str], ModuleType]) -> ModuleType:
    return load_example(DAG_FILE.name)


def ingest(root: Path, run_id: str, ids: list[int]) -> None:
    """One run of ``delta_daily_ingest``: its file committed with the run identity the provider's
    commit operators record (``RunIdentity.tags``)."""
    landing = f"landing-{uuid.uuid4().hex[:8]}"
    (root / landing).mkdir(parents=True)
    pq.write_table(pa.table({"event_id": pa.array(ids, pa.int64())}), root / landing / "part-0.parquet")
    identity = RunIdentity("delta_daily_ingest", "ingest_events", run_id, -1, 1, 1)
    DeltaTable(str(root)).commit_files(prefix=landing, tags=identity.tags())


def test_a_bad_run_is_rolled_back_in_one_restore_commit(
    rollback_dag: ModuleType, xcom_value: Callable[..., Any]
) -> None:
    events = Path(rollback_dag.EVENTS_TABLE)
    for run_id, ids in zip(RUNS, ([1, 2], [3], [4, 5]), strict=True):
        ingest(events, run_id, ids)
    assert DeltaTable(str(events)).version() == 2

    dag_run = rollback_dag.dag.test(run_conf={"bad_run_id": RUNS[1]})

    assert str(dag_run.state) == "success"
    result = xcom_value(dag_run, "restore_before_bad_run")
    assert (result["committed"], result["version"], result["restored_version"]) == (True, 3, 0)
    assert result["before_run"]["versions"] == [1] and result["num_removed_files"] == 2
    assert sorted(RsDeltaTable(str(events)).to_pyarrow_table()["event_id"].to_pylist()) == [1, 2]
    info = DeltaTable(str(events)).history(1)[0]
    assert info["operation"] == "RESTORE" and info["tags"]["airflow.dag_id"] == "delta_rollback"
