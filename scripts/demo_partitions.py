"""The demo's part on Airflow's asset partitions (``scripts/demo.py`` runs it where the installed
Airflow has them, 3.2+): the example pair ``partitioned_orders.py`` (a ``CronPartitionTimetable``
producer writing one ``ds`` per run) and ``partitioned_totals.py`` (a ``PartitionedAssetTimetable``
consumer building a per-day aggregate), in keyed test runs (``keyed_runs.py``). It writes two days
out of order (a backfill of an older day after a newer one), runs the consumer once per day, clears
one day of the producer and runs that day's consumer again (it reads that commit alone), and
checks that each day of the aggregate equals the orders of that day: each consumed once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from keyed_runs import keyed_test

if TYPE_CHECKING:
    from collections.abc import Callable

#: Two days, the later one first: what a backfill of an older day after a newer run looks like.
DAYS = ("2026-03-02", "2026-03-01")


def partitions_demo(load: Callable[[str], Any], return_value: Callable[[Any, str], Any]) -> None:
    import airflow
    import airflow.sdk

    print("\n== Asset partitions: delta_partitioned_orders -> delta_partitioned_totals ==")
    if not hasattr(airflow.sdk, "CronPartitionTimetable"):
        print(f"  skipped: Airflow {airflow.__version__} has no asset partitions (3.2+)")
        return
    producer, consumer = load("partitioned_orders.py"), load("partitioned_totals.py")
    for day in DAYS:
        written = return_value(keyed_test(producer.dag, day), "write_orders") or {}
        print(
            f"  orders run of partition {day}: committed version {written.get('version')}, replacing ds={day}"
        )
    for day in sorted(DAYS):
        _consume(consumer, day, return_value)
    cleared = DAYS[0]
    written = return_value(keyed_test(producer.dag, cleared), "write_orders") or {}
    print(
        f"  orders run of partition {cleared} again (a clear): version {written.get('version')} replaced "
        f"{written.get('removed_files')} file(s) of that day and nothing else"
    )
    for day in (cleared, DAYS[1]):
        _consume(consumer, day, return_value)
    _check(producer, consumer)


def _consume(consumer: Any, day: str, return_value: Callable[[Any, str], Any]) -> None:
    result = return_value(keyed_test(consumer.dag, day), "daily_totals") or {}
    source = result.get("source") or {}
    versions = source.get("versions")
    if versions is None:
        print(f"  totals run of partition {day}: nothing new in that day, nothing committed")
        return
    if source.get("previous_cursor") is None:
        read = f"its first read: that day's rows of the snapshot at version {versions[1]}"
    else:
        read = f"that day's changes of versions {versions[0]} to {versions[1]}"
    print(
        f"  totals run of partition {day}: {read}; committed version {result.get('version')}, the "
        f"day's cursor at {source.get('cursor')}"
    )


def _check(producer: Any, consumer: Any) -> None:
    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.plugins.tables import consumer_cursors

    orders = DeltaTable(producer.ORDERS_TABLE).snapshot().to_pyarrow_table()
    expected = orders.group_by(["ds", "region"]).aggregate([("amount", "count"), ("amount", "sum")])
    want = {(str(r["ds"]), r["region"]): (r["amount_count"], r["amount_sum"]) for r in expected.to_pylist()}
    totals = DeltaTable(consumer.TOTALS_TABLE).snapshot()
    found = {
        (str(r["ds"]), r["region"]): (r["orders"], r["amount"]) for r in totals.to_pyarrow_table().to_pylist()
    }
    for cursor in consumer_cursors(totals):
        print(
            f"  cursor of partition {cursor['partition']} in daily_totals' log: orders version "
            f"{cursor['version']}"
        )
    print(
        f"  daily_totals per day and region {'equal' if found == want else 'DIFFER FROM'} the orders "
        f"table's ({len(found)} day-region pairs): each day's versions consumed exactly once"
    )
    if found != want:
        raise SystemExit(f"daily_totals {found} != orders {want}")
