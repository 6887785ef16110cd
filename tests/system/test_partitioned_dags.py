"""The partitioned example pair (``dags_examples/partitioned_orders.py`` and ``partitioned_totals.py``)
end to end: keyed ``dag.test()`` runs (``scripts/keyed_runs.py``: the run ``dag.test()`` creates is
given a partition key, as the scheduler gives one), a real SQLite metadata DB, local Spark.

Days are written out of order, one day is written again (a clear), and the consumer runs once per
day and again after the re-run: each day of ``daily_totals`` equals the aggregate of that day of
``orders``, each day's source versions are consumed once (the versions each run read per day follow
one another without a gap or an overlap), and a day with nothing new commits nothing.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from dag_runs import xcom
from partition_checks import orders_per_day, totals_per_day

from airflow_delta_provider.core import DeltaTable

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from keyed_runs import keyed_test

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

pytestmark = [pytest.mark.system, pytest.mark.spark]
pytest.importorskip("pyspark")
if not hasattr(pytest.importorskip("airflow.sdk"), "CronPartitionTimetable"):
    pytest.skip("asset partitions need Airflow 3.2+", allow_module_level=True)


@pytest.fixture(scope="module")
def orders(load_example: Callable[[str], ModuleType]) -> ModuleType:
    return load_example("partitioned_orders.py")


@pytest.fixture(scope="module")
def totals(load_example: Callable[[str], ModuleType], orders: ModuleType) -> ModuleType:
    return load_example("partitioned_totals.py")


def run(dag: Any, key: str) -> Any:
    from airflow.utils.state import DagRunState

    dag_run = keyed_test(dag, key)
    assert dag_run.state == DagRunState.SUCCESS, key
    assert dag_run.partition_key == key
    return dag_run


def test_the_pair_is_a_partitioned_producer_and_its_partitioned_consumer(
    orders: ModuleType, totals: ModuleType
) -> None:
    from airflow.sdk import CronPartitionTimetable, PartitionedAssetTimetable

    assert isinstance(orders.dag.timetable, CronPartitionTimetable)
    assert isinstance(totals.dag.timetable, PartitionedAssetTimetable)
    (producer,), (consumer,) = orders.dag.tasks, totals.dag.tasks
    assert producer.partition_key_columns == ["ds"] and consumer.partition_key_columns == ["ds"]
    assert [o.uri for o in producer.outlets] == [totals.ORDERS.uri]
    assert consumer.source == orders.ORDERS_TABLE


def test_each_day_is_replaced_once_and_consumed_once_in_any_order(
    orders: ModuleType, totals: ModuleType
) -> None:
    from airflow.models.asset import AssetEvent
    from airflow.utils.session import create_session

    # Two days, the later first (a backfill of an older day arrives after a newer one).
    for day in ("2026-03-02", "2026-03-01"):
        result = xcom(run(orders.dag, day), "write_orders")
        assert result["committed"] and result["app_id"].endswith(f"?partition={day}")
    with create_session() as session:
        keys = [e.partition_key for e in session.query(AssetEvent).order_by(AssetEvent.id)]
    assert keys[-2:] == ["2026-03-02", "2026-03-01"]  # each commit's event carries its run's key

    ranges: dict[str, list[list[int]]] = {}
    for day in ("2026-03-01", "2026-03-02"):
        source = xcom(run(totals.dag, day), "daily_totals")["source"]
        assert source["partition_key"] == day and source["previous_cursor"] is None
        ranges.setdefault(day, []).append(source["versions"])
    assert totals_per_day(totals.TOTALS_TABLE) == orders_per_day(orders.ORDERS_TABLE)

    # A clear of 2026-03-02: the producer's run replaces the day, the consumer's run of that day
    # reads that commit alone; 2026-03-01 has nothing new and commits nothing.
    rerun = xcom(run(orders.dag, "2026-03-02"), "write_orders")
    assert rerun["removed_files"] >= 1
    after = xcom(run(totals.dag, "2026-03-02"), "daily_totals")
    assert after["source"]["versions"] == [ranges["2026-03-02"][0][1] + 1, rerun["version"]]
    ranges["2026-03-02"].append(after["source"]["versions"])
    before = DeltaTable(totals.TOTALS_TABLE).version()
    quiet = xcom(run(totals.dag, "2026-03-01"), "daily_totals")
    assert not quiet["committed"] and quiet["source"]["versions"] is None
    assert DeltaTable(totals.TOTALS_TABLE).version() == before
    assert totals_per_day(totals.TOTALS_TABLE) == orders_per_day(orders.ORDERS_TABLE)
    # Per day, the ranges read follow one another: no version read twice, none skipped.
    for day, read in ranges.items():
        for previous, following in itertools.pairwise(read):
            assert following[0] == previous[1] + 1, (day, read)


def test_a_run_without_a_key_is_refused_by_the_producer(orders: ModuleType) -> None:
    from airflow.utils.state import DagRunState

    before = DeltaTable(orders.ORDERS_TABLE).version()
    dag_run = orders.dag.test()  # dag.test() gives no partition key
    assert dag_run.state == DagRunState.FAILED
    assert DeltaTable(orders.ORDERS_TABLE).version() == before
