"""The ingest and downstream example DAGs end to end: ``dag.test()``, a real SQLite metadata DB, local Spark.

The tests of this module share one table (as the DAGs do) and run in file order: first ingest
runs, then a failure injected after a commit, then the downstream DAGs reading what was written.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from dag_runs import xcom

from airflow_delta_provider.core import DeltaTable

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

pytestmark = [pytest.mark.system, pytest.mark.spark]
pytest.importorskip("pyspark")

DAY_1 = datetime(2026, 11, 1, tzinfo=UTC)
NEWER = datetime(2026, 11, 4, tzinfo=UTC)
OLDER = datetime(2026, 11, 2, tzinfo=UTC)


def expected_rows(day: datetime) -> int:
    """How many events the example job makes for a day (its own formula)."""
    return 20 + day.date().toordinal() % 7


def try_number(dag_run: Any, task_id: str) -> int:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ti = session.scalar(
            select(TaskInstance).where(
                TaskInstance.dag_id == dag_run.dag_id,
                TaskInstance.run_id == dag_run.run_id,
                TaskInstance.task_id == task_id,
            )
        )
        return ti.try_number


def rows_per_day(table_uri: str) -> dict[str, int]:
    data = DeltaTable(table_uri).snapshot().to_pyarrow_table(columns=["ds"]).column("ds").to_pylist()
    return {day: data.count(day) for day in sorted(set(data))}


@pytest.fixture(scope="module")
def ingest(load_example: Callable[[str], ModuleType]) -> ModuleType:
    return load_example("daily_ingest.py")


@pytest.fixture(scope="module")
def downstream(load_example: Callable[[str], ModuleType], ingest: ModuleType) -> ModuleType:
    return load_example("downstream.py")


def test_the_example_dags_load(ingest: ModuleType, downstream: ModuleType) -> None:
    assert ingest.dag.dag_id == "delta_daily_ingest"
    assert [t.task_id for t in ingest.dag.tasks] == ["ingest_events"]
    (task,) = ingest.dag.tasks
    # The table is the task's outlet: the asset the downstream DAG is scheduled on.
    assert task.outlets == [downstream.EVENTS]
    assert downstream.downstream_dag.dag_id == "delta_events_downstream"


def test_ingest_runs_commit_once_per_day_in_any_order(ingest: ModuleType) -> None:
    """Same run twice adds nothing; a backfill of an older day after a newer one commits once."""
    from airflow.utils.state import DagRunState

    table_uri = ingest.EVENTS_TABLE
    first = ingest.dag.test(logical_date=DAY_1)
    assert first.state == DagRunState.SUCCESS
    result = xcom(first, "ingest_events")
    assert (result["version"], result["committed"], result["rows"]) == (0, True, expected_rows(DAY_1))
    assert rows_per_day(table_uri) == {"2026-11-01": expected_rows(DAY_1)}

    again = ingest.dag.test(logical_date=DAY_1)  # the same run (same run id) once more
    assert again.state == DagRunState.SUCCESS
    assert xcom(again, "ingest_events")["skipped"] is True
    assert DeltaTable(table_uri).version() == 0
    assert rows_per_day(table_uri) == {"2026-11-01": expected_rows(DAY_1)}

    for day in (NEWER, OLDER):  # a newer day, then a backfill of an older one
        assert ingest.dag.test(logical_date=day).state == DagRunState.SUCCESS
    assert rows_per_day(table_uri) == {
        "2026-11-01": expected_rows(DAY_1),
        "2026-11-02": expected_rows(OLDER),
        "2026-11-04": expected_rows(NEWER),
    }
    history = DeltaTable(table_uri).history()
    assert [h["version"] for h in history] == [2, 1, 0]
    # The run identity is in each commit; newest first: the backfilled day, the newer day, day 1.
    assert [h["tags"]["airflow.logical_date"] for h in history] == [
        d.isoformat() for d in (OLDER, NEWER, DAY_1)
    ]
    assert all(h["tags"]["airflow.task_id"] == "ingest_events" for h in history)


def test_a_failure_after_the_commit_is_retried_without_duplicating(ingest: ModuleType) -> None:
    """The commit lands, then the task fails before it ends; the retry commits nothing."""
    from airflow.utils.state import DagRunState

    table_uri = ingest.EVENTS_TABLE
    (task,) = ingest.dag.tasks
    day = datetime(2026, 11, 3, tzinfo=UTC)
    before = DeltaTable(table_uri).version()
    failures: list[int] = []

    def fail_after_commit(context: Any, result: Any) -> None:
        # Runs after execute() returned, i.e. after the commit: a worker lost here fails the try.
        if context["ti"].try_number == 1:
            failures.append(result["version"])
            raise RuntimeError("injected failure after the commit")

    saved = (task._post_execute_hook, task.retry_delay)
    task._post_execute_hook = fail_after_commit
    task.retry_delay = timedelta(0)
    try:
        dag_run = ingest.dag.test(logical_date=day)
    finally:
        task._post_execute_hook, task.retry_delay = saved

    assert dag_run.state == DagRunState.SUCCESS
    assert failures == [before + 1]  # try 1 committed version before + 1, then failed
    assert try_number(dag_run, "ingest_events") == 2
    retry = xcom(dag_run, "ingest_events")
    assert (retry["skipped"], retry["version"], retry["write_dir"]) == (True, before + 1, None)
    assert DeltaTable(table_uri).version() == before + 1
    assert rows_per_day(table_uri)["2026-11-03"] == expected_rows(day)


def test_the_spark_job_lineage_names_the_task_as_its_parent(ingest: ModuleType) -> None:
    """With OpenLineage parent injection on, the Spark session carries the task's lineage run."""
    from airflow.utils.state import DagRunState

    (task,) = ingest.dag.tasks
    seen: list[dict[str, str | None]] = []
    original = task.python_callable

    def recording(spark: Any = None, dag_run: Any = None) -> Any:
        keys = ("spark.openlineage.parentJobName", "spark.openlineage.parentRunId")
        seen.append({k: spark.conf.get(k, None) for k in keys})
        return original(spark=spark, dag_run=dag_run)

    saved = (task.python_callable, task.openlineage_inject_parent_job_info)
    task.python_callable, task.openlineage_inject_parent_job_info = recording, True
    try:
        dag_run = ingest.dag.test(logical_date=datetime(2026, 11, 5, tzinfo=UTC))
    finally:
        task.python_callable, task.openlineage_inject_parent_job_info = saved
    assert dag_run.state == DagRunState.SUCCESS
    assert len(seen) == 1
    assert seen[0]["spark.openlineage.parentJobName"] == "delta_daily_ingest.ingest_events"
    assert seen[0]["spark.openlineage.parentRunId"]


def test_the_asset_scheduled_dag_sees_the_new_version(ingest: ModuleType, downstream: ModuleType) -> None:
    from airflow.utils.state import DagRunState

    table_uri = ingest.EVENTS_TABLE
    latest = DeltaTable(table_uri).version()
    dag_run = downstream.downstream_dag.test()
    assert dag_run.state == DagRunState.SUCCESS
    summary = xcom(dag_run, "report_new_version")
    assert summary["version"] == latest
    assert summary["rows"] == sum(rows_per_day(table_uri).values())
    assert summary["per_day"]["2026-11-03"]["rows"] == expected_rows(datetime(2026, 11, 3, tzinfo=UTC))


def test_the_deferrable_sensor_dag_waits_for_a_new_version(
    ingest: ModuleType, downstream: ModuleType
) -> None:
    """The sensor defers (its trigger runs inline in dag.test) until another writer commits."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import select

    table_uri = ingest.EVENTS_TABLE
    current = DeltaTable(table_uri).version()
    committed: list[int] = []

    def commit_once_deferred() -> None:
        """Another writer: appends a row once the sensor has poked and deferred.

        dag.test() runs the trigger inline and marks the task instance QUEUED meanwhile, so
        "deferred" is seen as: it ran, and then stopped running.
        """
        deadline = time.monotonic() + 120
        seen_running = False
        while time.monotonic() < deadline:
            with create_session() as session:
                state = session.scalar(
                    select(TaskInstance.state).where(
                        TaskInstance.dag_id == "delta_events_wait_for_version",
                        TaskInstance.task_id == "wait_for_new_version",
                    )
                )
            if state == TaskInstanceState.DEFERRED or (seen_running and state != TaskInstanceState.RUNNING):
                break
            seen_running = seen_running or state == TaskInstanceState.RUNNING
            time.sleep(0.05)
        import pyarrow as pa
        from deltalake import write_deltalake

        schema = DeltaTable(table_uri).snapshot().schema
        row = {"event_id": 0, "user_id": 1, "page": "home", "clicks": 1, "ds": "2026-11-09"}
        write_deltalake(table_uri, pa.Table.from_pylist([row], schema=schema), mode="append")
        committed.append(DeltaTable(table_uri).version())

    writer = threading.Thread(target=commit_once_deferred, daemon=True)
    writer.start()
    dag_run = downstream.wait_dag.test(run_conf={"after_version": current})
    writer.join(timeout=60)
    assert dag_run.state == DagRunState.SUCCESS
    assert committed == [current + 1]
    assert xcom(dag_run, "summarize_new_version")["version"] == current + 1
