"""The incremental example DAG (``dags_examples/silver.py``) end to end: ``dag.test()``, a real SQLite
metadata DB, local Spark, the events table written by the ingest DAG and by delta-rs (a foreign
writer, with an append and a replaced day).

Every source version must be consumed exactly once across re-runs, a retry after the commit and
foreign commits: the silver table's signed totals per day and user equal the events table's, and
the versions each run consumed follow one another without a gap or an overlap.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pytest
from dag_runs import xcom

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.table.consumer import consumer_app_id

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

pytestmark = [pytest.mark.system, pytest.mark.spark]
pytest.importorskip("pyspark")

TASK = "build_silver"


@pytest.fixture(scope="module")
def ingest(load_example: Callable[[str], ModuleType]) -> ModuleType:
    return load_example("daily_ingest.py")


@pytest.fixture(scope="module")
def silver(load_example: Callable[[str], ModuleType], ingest: ModuleType) -> ModuleType:
    return load_example("silver.py")


def run(dag: Any, hour: int) -> Any:
    from airflow.utils.state import DagRunState

    dag_run = dag.test(logical_date=datetime(2026, 11, 10, hour, tzinfo=UTC))
    assert dag_run.state == DagRunState.SUCCESS
    return dag_run


def consumed(silver: ModuleType, dag_run: Any) -> list[int] | None:
    return xcom(dag_run, TASK)["source"]["versions"]


def assert_totals_equal(silver: ModuleType) -> None:
    expected = silver.totals(silver.EVENTS_TABLE, signed=False)
    assert silver.totals(silver.SILVER_TABLE, signed=True) == expected and expected


def test_the_silver_dag_is_scheduled_on_the_events_asset(silver: ModuleType, ingest: ModuleType) -> None:
    (task,) = silver.dag.tasks
    assert list(silver.dag.timetable.asset_condition.objects) == [silver.EVENTS]
    assert task.source == ingest.EVENTS_TABLE and task.table_uri == silver.SILVER_TABLE
    assert [o.uri for o in task.outlets] == [f"file://{silver.SILVER_TABLE}"]


def test_each_events_version_is_consumed_once(silver: ModuleType, ingest: ModuleType) -> None:
    import deltalake
    import pyarrow as pa

    events = ingest.EVENTS_TABLE
    for day in (1, 2):  # events versions 0 and 1
        ingest.dag.test(logical_date=datetime(2026, 11, day, tzinfo=UTC))

    first = run(silver.dag, 1)
    assert consumed(silver, first) == [0, 1]  # the snapshot: no cursor yet
    assert_totals_equal(silver)
    again = xcom(run(silver.dag, 1), TASK)  # the same run once more
    assert (again["skipped"], again["reason"], again["version"]) == (True, "already_committed", 0)

    # A writer outside Airflow: a new day (2), then day 2026-11-02 replaced (3).
    rows = pa.table(
        {
            "event_id": pa.array([1, 2], pa.int64()),
            "user_id": pa.array([7, 7], pa.int32()),
            "page": ["home", "cart"],
            "clicks": pa.array([5, 6], pa.int32()),
        }
    )
    deltalake.write_deltalake(events, rows.append_column("ds", pa.array(["2026-11-09"] * 2)), mode="append")
    deltalake.write_deltalake(
        events,
        rows.append_column("ds", pa.array(["2026-11-02"] * 2)),
        mode="overwrite",
        predicate="ds = '2026-11-02'",
    )

    # A run whose first try fails right after its commit: the retry consumes nothing.
    (task,) = silver.dag.tasks
    failures: list[list[int]] = []

    def fail_after_commit(context: Any, result: Any) -> None:
        if context["ti"].try_number == 1:
            failures.append(result["source"]["versions"])
            raise RuntimeError("injected failure after the commit")

    saved = (task._post_execute_hook, task.retry_delay)
    task._post_execute_hook, task.retry_delay = fail_after_commit, timedelta(0)
    try:
        retried = run(silver.dag, 2)
    finally:
        task._post_execute_hook, task.retry_delay = saved
    assert failures == [[2, 3]]
    assert xcom(retried, TASK)["reason"] == "already_committed"
    assert_totals_equal(silver)

    ingest.dag.test(logical_date=datetime(2026, 11, 3, tzinfo=UTC))  # events version 4
    assert consumed(silver, run(silver.dag, 3)) == [4, 4]
    assert_totals_equal(silver)
    version = DeltaTable(silver.SILVER_TABLE).version()
    idle = xcom(run(silver.dag, 4), TASK)  # nothing new: no commit
    assert (idle["committed"], idle["source"]["versions"]) == (False, None)
    assert DeltaTable(silver.SILVER_TABLE).version() == version

    # The cursor, as any engine reads it: a txn of the silver table.
    app_id = consumer_app_id(
        DeltaTable(events).snapshot().metadata.id, "airflow/delta_events_silver/build_silver"
    )
    assert deltalake.DeltaTable(silver.SILVER_TABLE).transaction_version(app_id) == 4
    # Per events version, the silver rows are that version's changes, once (the snapshot's at 1).
    silver_rows = DeltaTable(silver.SILVER_TABLE).snapshot().to_pyarrow_table().to_pylist()
    assert {r["events_version"] for r in silver_rows} == {1, 2, 3, 4}
    for version in (2, 3, 4):
        expected: dict[tuple[str, int], list[int]] = {}
        for change in DeltaTable(events).changes(version, version).to_pyarrow_table().to_pylist():
            sign = 1 if change["_change_type"] in ("insert", "update_postimage") else -1
            entry = expected.setdefault((change["ds"], change["user_id"]), [0, 0])
            entry[0] += sign
            entry[1] += sign * change["clicks"]
        found = {
            (r["ds"], r["user_id"]): [r["events"], r["clicks"]]
            for r in silver_rows
            if r["events_version"] == version
        }
        assert found == expected, version
