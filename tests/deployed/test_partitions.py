"""Airflow's asset partitions in the deployed Airflow: the example pair ``delta_partitioned_orders``
(``CronPartitionTimetable``) and ``delta_partitioned_totals`` (``PartitionedAssetTimetable``) on
real scheduler runs, driven through the REST API and the CLI (Airflow 3.2+; skipped on 3.1, where
the example files define no DAG).

The producer's keys come from its timetable (the scheduled run of the latest tick) and from
``airflow backfill create`` over two past days (run backwards: an older day after a newer one);
one backfilled day is then cleared and written again. The scheduler starts a consumer run per
partition the producer's events carry. Each day of ``daily_totals`` must equal the aggregate of
that day of ``daily_orders``, and each day's source versions must be consumed exactly once: the
ranges each day's cursor recorded follow one another, and every version that changed the day lies
in exactly one of them.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from partition_checks import orders_per_day, totals_per_day

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.table import commit_partitions, consumer_partition, parse_consumer_app_id

from .test_incremental import settle

if TYPE_CHECKING:
    from .conftest import Deployment

if not hasattr(pytest.importorskip("airflow.sdk"), "CronPartitionTimetable"):
    pytest.skip("asset partitions need Airflow 3.2+", allow_module_level=True)

PRODUCER = "delta_partitioned_orders"
CONSUMER = "delta_partitioned_totals"
BACKFILLED = ("2026-03-01", "2026-03-02")


def tables(deployment: Deployment) -> tuple[str, str]:
    return str(deployment.tables / "daily_orders"), str(deployment.tables / "daily_totals")


def cursor_ranges(target: str) -> dict[str, list[tuple[int, int]]]:
    """Per partition, the source versions each commit of the target consumed, from the per-partition
    cursors' ``txn`` actions in its log, as any engine reads them."""
    ranges: dict[str, list[tuple[int, int]]] = {}
    previous: dict[str, int] = {}
    for path in sorted((Path(target) / "_delta_log").glob("*.json")):
        for line in path.read_text().splitlines():
            txn = json.loads(line).get("txn") if line.strip() else None
            if not txn or parse_consumer_app_id(txn["appId"]) is None:
                continue
            key = consumer_partition(txn["appId"])
            assert key is not None, txn
            ranges.setdefault(key, []).append((previous.get(key, -1) + 1, txn["version"]))
            previous[key] = txn["version"]
    return ranges


def runs_by_key(deployment: Deployment, dag_id: str, keys: set[str], timeout: float = 900) -> dict[str, Any]:
    """The DAG's runs by partition key, once it has a run of each of ``keys`` and all have finished."""

    def settled() -> dict[str, list[dict[str, Any]]] | None:
        if {r.get("partition_key") for r in deployment.runs(dag_id)} < keys:
            return None
        found: dict[str, list[dict[str, Any]]] = {}
        for run in settle(deployment, dag_id):
            found.setdefault(run.get("partition_key"), []).append(run)
        return found

    return dict(deployment.wait_for(settled, timeout, f"runs of {dag_id} for {sorted(keys)}", interval=5))


def test_partitions_from_the_timetable_a_backfill_and_a_clear_are_consumed_once_each(
    deployment: Deployment,
) -> None:
    orders, totals = tables(deployment)
    deployment.wait_for(lambda: {PRODUCER, CONSUMER} <= deployment.dag_ids(), 240, "the pair to be parsed")
    # The timetable's own run (the latest tick, catchup off): a key the scheduler gave.
    deployment.wait_for(lambda: deployment.runs(PRODUCER), 300, "the scheduled run")
    (scheduled,) = runs_by_key(deployment, PRODUCER, set()).values()
    (run,) = scheduled
    assert run["state"] == "success" and run["partition_key"], run
    # Two past days, the later first (an older partition after a newer one).
    deployment.cli(
        "backfill",
        "create",
        "--dag-id",
        PRODUCER,
        "--from-date",
        BACKFILLED[0],
        "--to-date",
        BACKFILLED[1],
        "--run-backwards",
    )
    by_key = runs_by_key(deployment, PRODUCER, set(BACKFILLED))
    assert all(r["state"] == "success" for runs in by_key.values() for r in runs), by_key
    # A clear of one backfilled day: it commits that day again.
    cleared = by_key[BACKFILLED[1]][0]["dag_run_id"]
    deployment.api(
        "POST",
        f"/dags/{PRODUCER}/clearTaskInstances",
        json={"dry_run": False, "dag_run_id": cleared, "task_ids": ["write_orders"], "only_failed": False},
    )
    assert deployment.wait_run(PRODUCER, cleared, timeout=600) == "success"

    keys = {run["partition_key"], *BACKFILLED}
    written = Counter(
        (h.get("tags") or {}).get("airflow.partition_key") for h in DeltaTable(orders).history()
    )
    assert {k for k in written if k} == keys and written[BACKFILLED[1]] == 2, written  # the clear wrote again

    # The scheduler starts a consumer run per partition the events carry.
    consumer_runs = runs_by_key(deployment, CONSUMER, keys)
    assert set(consumer_runs) == keys
    assert all(r["state"] == "success" for runs in consumer_runs.values() for r in runs), consumer_runs

    # Target rows equal the source's per partition.
    assert totals_per_day(totals) == orders_per_day(orders)
    # Exactly once: per day, the cursor's ranges follow one another, and every version that changed
    # the day lies in exactly one of them.
    source = DeltaTable(orders).snapshot()
    changed: dict[str, list[int]] = {}
    for version in range(source.version + 1):
        for values in commit_partitions(source, version) or []:
            changed.setdefault(str(values["ds"]), []).append(version)
    ranges = cursor_ranges(totals)
    assert set(ranges) == keys
    for day, read in ranges.items():
        for (_, end), (start, _) in itertools.pairwise(read):
            assert start == end + 1, (day, read)
        for version in changed[day]:
            assert sum(first <= version <= last for first, last in read) == 1, (day, version, read)
