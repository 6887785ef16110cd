"""Incremental consumption (``source=``) in the deployed Airflow: real scheduler runs triggered by the
source's asset, driven only through the REST API.

Two consumers: the example ``delta_events_silver`` (on the events table that the ingest tests of
``test_deployment.py`` wrote with concurrent runs and a clear), and ``deployed_consume`` (on a table
delta-rs writes, announced by an ``AssetWatcher``), whose first committing try fails after its commit,
which runs twice at once in separate processes, and one of whose runs is cleared. Each source
version must land in the target exactly once.
"""

from __future__ import annotations

import itertools
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from consumer_checks import check_exactly_once, consumed_versions

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.table.consumer import consumer_app_id

from .conftest import POLL_INTERVAL

if TYPE_CHECKING:
    from .conftest import Deployment

SILVER = "delta_events_silver"
CONSUME = "deployed_consume"
CONSUMER = "airflow/deployed_consume/consume"


def finished_runs(deployment: Deployment, dag_id: str) -> list[dict[str, Any]] | None:
    """The DAG's runs once none is queued or running (None while one is)."""
    runs = deployment.runs(dag_id)
    return None if any(r["state"] not in ("success", "failed") for r in runs) else runs


def app_id_of(source: str, consumer: str) -> str:
    return consumer_app_id(DeltaTable(source).snapshot().metadata.id, consumer)


def cursor(source: str, target: str, consumer: str) -> int | None:
    import deltalake

    return deltalake.DeltaTable(target).transaction_version(app_id_of(source, consumer))


def settle(deployment: Deployment, dag_id: str, timeout: float = 600) -> list[dict[str, Any]]:
    """The DAG's runs, once none has been queued or running for a few poll intervals."""

    def quiet() -> list[dict[str, Any]] | None:
        first = finished_runs(deployment, dag_id)
        if first is None:
            return None
        time.sleep(POLL_INTERVAL * 3)  # an event just emitted may still create a run
        again = finished_runs(deployment, dag_id)
        return again if again is not None and len(again) == len(first) else None

    return list(deployment.wait_for(quiet, timeout, f"the runs of {dag_id} to finish", interval=2))


def committed_ranges(target: str, app_id: str) -> list[tuple[int, int]]:
    """The source versions each commit of the target consumed, read from its log as any engine
    sees it: the cursor's ``txn`` in each commit, from the version after the previous one."""
    import json

    ranges, previous = [], -1
    log = Path(target) / "_delta_log"
    for path in sorted(log.glob("*.json")):
        for line in path.read_text().splitlines():
            txn = json.loads(line).get("txn") if line.strip() else None
            if txn and txn["appId"] == app_id:
                ranges.append((previous + 1, txn["version"]))
                previous = txn["version"]
    return ranges


def assert_tiles(ranges: list[tuple[int, int]], first: int, last: int) -> None:
    """The ranges follow one another from ``first`` to ``last``: no version twice, none missed."""
    assert ranges and ranges[0][0] == first and ranges[-1][1] == last, ranges
    for (_, end), (start, _) in itertools.pairwise(ranges):
        assert start == end + 1, ranges


# --- the example: silver from the ingest DAG's events ---------------------------------------------


def test_the_silver_example_consumed_every_events_version_once(deployment: Deployment) -> None:
    events, silver = str(deployment.tables / "events"), str(deployment.tables / "events_silver")
    if not (deployment.tables / "events" / "_delta_log").exists():  # run alone: ingest a day first
        run_id = deployment.trigger("delta_daily_ingest", logical_date="2026-11-01T00:00:00Z")
        assert deployment.wait_run("delta_daily_ingest", run_id, timeout=420) == "success"
    runs = settle(deployment, SILVER)
    assert runs and {r["state"] for r in runs} == {"success"}, runs
    assert any(r["run_type"] == "asset_triggered" for r in runs)
    # Maintenance commits (OPTIMIZE, VACUUM) announce no asset event: a manual run reads up to the latest.
    run_id = deployment.trigger(SILVER)
    assert deployment.wait_run(SILVER, run_id, timeout=420) == "success"
    latest = DeltaTable(events).version()
    consumer = "airflow/delta_events_silver/build_silver"
    assert cursor(events, silver, consumer) == latest
    assert_tiles(committed_ranges(silver, app_id_of(events, consumer)), 0, latest)

    import deltalake

    source = deltalake.DeltaTable(events).to_pyarrow_table(columns=["ds", "user_id", "clicks"]).to_pylist()
    expected: Counter[tuple[str, int]] = Counter()
    clicks: Counter[tuple[str, int]] = Counter()
    for row in source:
        expected[(row["ds"], row["user_id"])] += 1
        clicks[(row["ds"], row["user_id"])] += row["clicks"]
    found: Counter[tuple[str, int]] = Counter()
    found_clicks: Counter[tuple[str, int]] = Counter()
    for row in deltalake.DeltaTable(silver).to_pyarrow_table().to_pylist():
        found[(row["ds"], row["user_id"])] += row["events"]
        found_clicks[(row["ds"], row["user_id"])] += row["clicks"]
    assert +found == expected and +found_clicks == clicks


# --- a foreign writer's table, announced by an AssetWatcher ----------------------------------------


def write(uri: str, ids: list[int], mode: str = "append") -> None:
    import deltalake

    table = pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]})
    deltalake.write_deltalake(uri, table, mode=mode, configuration={"delta.enableChangeDataFeed": "true"})


def test_a_consumer_of_a_foreign_writers_table_consumes_each_version_once(deployment: Deployment) -> None:
    import deltalake

    source, target = str(deployment.tables / "consumed_source"), str(deployment.tables / "consumed_target")
    (deployment.tables / "consume_fail_once").touch()  # the first committing try fails after its commit
    write(source, [1, 2, 3])  # 0
    # Quick successive commits: the watcher's events trigger runs that overlap (max_active_runs=3).
    for ids in ([4], [5, 6]):  # 1, 2
        time.sleep(POLL_INTERVAL)
        write(source, ids)
    time.sleep(POLL_INTERVAL)
    deltalake.DeltaTable(source).delete("id = 2")  # 3
    runs = settle(deployment, CONSUME)
    assert {r["state"] for r in runs} == {"success"} and all(r["run_type"] == "asset_triggered" for r in runs)
    assert not (deployment.tables / "consume_fail_once").exists()
    retried = [
        r for r in runs if deployment.task_instance(CONSUME, r["dag_run_id"], "consume")["try_number"] == 2
    ]
    assert len(retried) == 1
    retry = deployment.xcom(CONSUME, retried[0]["dag_run_id"], "consume")
    assert (retry["skipped"], retry["reason"]) == (True, "already_committed")
    assert cursor(source, target, CONSUMER) == 3
    assert_tiles(committed_ranges(target, app_id_of(source, CONSUMER)), 0, 3)
    check_exactly_once(source, target, ["id", "v"])
    per_version = consumed_versions(target)
    for version in range(4):
        assert (
            per_version[version] == DeltaTable(source).changes(version, version).to_pyarrow_table().num_rows
        )


def test_two_runs_at_once_consume_a_version_once(deployment: Deployment) -> None:
    """Both read the cursor before either commits (a barrier in the callable); one commits the
    version, the other's commit is refused, it reads the cursor again and finds nothing new."""
    import deltalake

    source, target = str(deployment.tables / "consumed_source"), str(deployment.tables / "consumed_target")
    deltalake.DeltaTable(source).update(updates={"v": "'changed'"}, predicate="id = 4")  # 4, not announced
    before = len(deployment.runs(CONSUME))
    conf = {"barrier": "two-at-once", "parties": 2}
    run_ids = [deployment.trigger(CONSUME, conf=conf) for _ in range(2)]
    for run_id in run_ids:
        assert deployment.wait_run(CONSUME, run_id, timeout=420) == "success"
    assert len(deployment.runs(CONSUME)) == before + 2  # the UPDATE triggered no run
    results = [deployment.xcom(CONSUME, run_id, "consume") for run_id in run_ids]
    winners = [r for r in results if r["committed"]]
    (loser,) = [r for r in results if not r["committed"]]
    assert [w["source"]["versions"] for w in winners] == [[4, 4]]
    assert (loser["source"]["rounds"], loser["source"]["versions"]) == (2, None), loser
    assert cursor(source, target, CONSUMER) == 4
    assert_tiles(committed_ranges(target, app_id_of(source, CONSUMER)), 0, 4)
    check_exactly_once(source, target, ["id", "v"])


def test_a_cleared_consumer_run_consumes_nothing_again(deployment: Deployment) -> None:
    source, target = str(deployment.tables / "consumed_source"), str(deployment.tables / "consumed_target")
    committed = next(
        r["dag_run_id"]
        for r in deployment.runs(CONSUME)
        if deployment.xcom(CONSUME, r["dag_run_id"], "consume").get("committed")
    )
    version = DeltaTable(target).version()
    tries = deployment.task_instance(CONSUME, committed, "consume")["try_number"]
    deployment.api(
        "POST",
        f"/dags/{CONSUME}/clearTaskInstances",
        json={"dry_run": False, "dag_run_id": committed, "task_ids": ["consume"], "only_failed": False},
    )
    deployment.wait_for(
        lambda: (
            deployment.task_instance(CONSUME, committed, "consume")["try_number"] == tries + 1
            and deployment.run_state(CONSUME, committed) == "success"
        ),
        300,
        "the cleared run to run again",
    )
    again = deployment.xcom(CONSUME, committed, "consume")
    assert (again["skipped"], again["reason"]) == (True, "already_committed")
    assert "Spark was not started" in deployment.log_text(CONSUME, committed, "consume", tries + 1)
    assert DeltaTable(target).version() == version
    check_exactly_once(source, target, ["id", "v"])


@pytest.mark.parametrize("dag_id", [SILVER, CONSUME])
def test_the_delta_view_shows_the_consumer_cursor(deployment: Deployment, dag_id: str) -> None:
    target = "events_silver" if dag_id == SILVER else "consumed_target"
    uri = f"file://{deployment.tables / target}"
    assets = deployment.api("GET", "/assets", params={"uri_pattern": target})["assets"]
    (asset,) = [a for a in assets if a["uri"] == uri]
    response = deployment.client.get(f"/delta/api/assets/{asset['id']}/health")
    assert response.status_code == 200, response.text
    (found,) = response.json()["consumers"]
    assert found["consumer"].startswith(f"airflow/{dag_id}/")
