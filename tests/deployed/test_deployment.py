"""The provider in a real Airflow deployment, driven only through its REST API and CLI.

The tests share one deployment (``conftest.py``) and run in file order; each works on its own
tables under the deployment's table folder (the example DAGs' Variable ``delta_examples_root``, the
tier's own DAGs' ``$DELTA_DEMO_ROOT``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from airflow_delta_provider.core import DeltaTable

if TYPE_CHECKING:
    from .conftest import Deployment

from .conftest import POLL_INTERVAL

INGEST = "delta_daily_ingest"
DAYS = ("2026-11-01", "2026-11-02", "2026-11-03")


def airflow_version() -> tuple[int, int, int]:
    import airflow

    major, minor, patch = (int(p) for p in airflow.__version__.split(".")[:3])
    return major, minor, patch


def rows_per_day(uri: str) -> dict[str, int]:
    """Rows per ``ds`` read by delta-rs, the reference reader."""
    import deltalake

    table = deltalake.DeltaTable(uri).to_pyarrow_table(columns=["ds"])
    counts: dict[str, int] = {}
    for day in table.column("ds").to_pylist():
        counts[day] = counts.get(day, 0) + 1
    return counts


def expected_rows(day: str) -> int:
    from datetime import date

    return 20 + date.fromisoformat(day).toordinal() % 7


def ingest_runs(deployment: Deployment) -> list[dict[str, Any]]:
    return deployment.runs(INGEST)


# --- ingest: several days at once, a clear, the asset-scheduled downstream -----------------------


def test_ingest_several_days_at_once_then_clear_one(deployment: Deployment) -> None:
    events = str(deployment.tables / "events")
    runs = {day: deployment.trigger(INGEST, logical_date=f"{day}T00:00:00Z") for day in DAYS}
    # And one the way the CLI triggers without -l: no logical date (the day of run_after).
    deployment.cli("dags", "trigger", INGEST)
    for run_id in runs.values():
        assert deployment.wait_run(INGEST, run_id, timeout=420) == "success"
    all_runs = deployment.wait_for(
        lambda: (r := ingest_runs(deployment)) and all(x["state"] in ("success", "failed") for x in r) and r,
        420,
        "every ingest run (the scheduled and CLI-triggered ones too) to finish",
    )
    assert {r["state"] for r in all_runs} == {"success"}, all_runs
    no_date = [r for r in all_runs if r["logical_date"] is None]
    assert no_date, "the CLI run without -l has no logical date"
    days = set(DAYS) | {str(r["run_after"])[:10] for r in no_date}
    days |= {str(r["logical_date"])[:10] for r in all_runs if r["logical_date"]}
    commits = [deployment.xcom(INGEST, r["dag_run_id"], "ingest_events") for r in all_runs]
    assert all(c["committed"] for c in commits)
    # One normalised URI everywhere: the XCom's is the table's file:// URI.
    assert {c["table_uri"] for c in commits} == {f"file://{events}"}
    versions = sorted(c["version"] for c in commits)
    assert versions == list(range(len(all_runs)))  # concurrent first writes resolved, one version each
    expected = {day: expected_rows(day) for day in days}
    assert rows_per_day(events) == expected
    core = DeltaTable(events)
    assert core.version() == len(all_runs) - 1
    assert core.snapshot().to_pyarrow_table(columns=["ds"]).num_rows == sum(expected.values())

    # Clear one day: it replaces its slice again (a new version), nothing else changes.
    cleared = runs[DAYS[1]]
    deployment.api(
        "POST",
        f"/dags/{INGEST}/clearTaskInstances",
        json={"dry_run": False, "dag_run_id": cleared, "task_ids": ["ingest_events"], "only_failed": False},
    )
    deployment.wait_for(
        lambda: (
            deployment.task_instance(INGEST, cleared, "ingest_events")["try_number"] == 2
            and deployment.run_state(INGEST, cleared) == "success"
        ),
        300,
        "the cleared day to run again",
    )
    again = deployment.xcom(INGEST, cleared, "ingest_events")
    assert again["committed"] and again["version"] == len(all_runs)
    assert again["removed_files"] >= 1 and again["operation"] == "WRITE"
    assert rows_per_day(events) == expected
    history = core.history()
    assert history[0]["operationParameters"]["predicate"]
    assert history[0]["tags"]["airflow.run_id"] == cleared


def test_the_asset_scheduled_downstream_runs_once_per_new_version(deployment: Deployment) -> None:
    events_uri = f"file://{deployment.tables / 'events'}"
    latest = DeltaTable(str(deployment.tables / "events")).version()

    def seen_versions() -> list[int] | None:
        runs = deployment.runs("delta_events_downstream")
        if any(r["state"] not in ("success", "failed") for r in runs):
            return None
        found = []
        for run in runs:
            upstream = deployment.api(
                "GET", f"/dags/delta_events_downstream/dagRuns/{run['dag_run_id']}/upstreamAssetEvents"
            )["asset_events"]
            for event in upstream:
                assert event["uri"] == events_uri
                extra = event["extra"]
                assert extra["table_uri"] == events_uri and extra["committed"] is True
                assert extra["operation"] in ("WRITE", "CREATE TABLE AS SELECT")
                assert extra["metrics"]["num_output_rows"] > 0
                found.append(extra["version"])
        return sorted(found) if len(found) == latest + 1 else None

    versions = deployment.wait_for(seen_versions, 240, "the downstream runs of every version")
    assert versions == list(range(latest + 1))  # each new version seen by exactly one run
    for run in deployment.runs("delta_events_downstream"):
        assert run["state"] == "success"


def test_a_retry_after_the_commit_commits_nothing_and_reports_the_recorded_commit(
    deployment: Deployment,
) -> None:
    dag_id = "deployed_retry_after_commit"
    run_id = deployment.trigger(dag_id)
    assert deployment.wait_run(dag_id, run_id, timeout=300) == "success"
    ti = deployment.task_instance(dag_id, run_id, "write_once")
    assert ti["try_number"] == 2
    first_try = deployment.log_text(dag_id, run_id, "write_once", 1)
    assert "Committed 1 file, 5 rows" in first_try and "Task failed with exception" in first_try
    result = deployment.xcom(dag_id, run_id, "write_once")
    assert (result["skipped"], result["version"], result["reason"]) == (True, 0, "already_committed")
    # What the recorded commit did, not an empty WRITE.
    assert (result["operation"], result["rows"], result["files"] > 0) == ("CREATE TABLE AS SELECT", 5, True)
    retry_log = deployment.log_text(dag_id, run_id, "write_once", 2)
    assert "Spark was not started" in retry_log and "CREATE TABLE AS SELECT" in retry_log
    uri = str(deployment.tables / "retried")
    assert DeltaTable(uri).version() == 0
    import deltalake

    assert deltalake.DeltaTable(uri).to_pyarrow_table().num_rows == 5


def test_a_green_spark_task_log_shows_no_error(deployment: Deployment) -> None:
    """Spark's JVM start-up chatter is routed at its own level (and Spark stays on loopback)."""
    # A run the tests triggered: a scheduled one the scheduler may add for today is not theirs.
    run = next(
        r for r in ingest_runs(deployment) if r["state"] == "success" and r.get("run_type") == "manual"
    )
    records = deployment.task_log(INGEST, run["dag_run_id"], "ingest_events")
    errors = [r for r in records if str(r.get("level", "")).lower() in ("error", "critical")]
    assert not errors, errors
    text = "\n".join(str(r.get("event", "")) for r in records)
    assert "resolves to a loopback address" not in text and "SPARK_LOCAL_IP" not in text


# --- the deferrable sensor and [delta] poll_interval ----------------------------------------------


def test_the_deferrable_sensor_defers_and_resumes_on_a_foreign_commit(deployment: Deployment) -> None:
    import deltalake

    uri = str(deployment.tables / "sensed")
    deltalake.write_deltalake(uri, pa.table({"id": [1]}))
    dag_id = "deployed_wait_default_interval"
    run_id = deployment.trigger(dag_id, conf={"after_version": 0})
    deployment.wait_for(
        lambda: deployment.task_instance(dag_id, run_id, "wait")["state"] == "deferred",
        180,
        "the sensor to be deferred",
    )
    log = deployment.log_text(dag_id, run_id, "wait")
    # [delta] poll_interval of the deployment applies to a sensor that sets no poke_interval.
    assert f"polling every {POLL_INTERVAL} seconds" in log
    assert "Deferring to the triggerer" in log
    deltalake.write_deltalake(uri, pa.table({"id": [2]}), mode="append")  # another process commits
    assert deployment.wait_run(dag_id, run_id, timeout=120) == "success"
    found = deployment.xcom(dag_id, run_id, "wait")
    assert (found["version"], found["versions"], found["table_uri"]) == (1, [1], f"file://{uri}")
    log = deployment.log_text(dag_id, run_id, "wait")
    assert "cancelled by user action" not in log and "on_kill" not in log
    assert "Resumed: the triggerer found version 1" in log


# --- AssetWatcher: foreign commits, filters, a triggerer restart ---------------------------------


def _watch_runs(deployment: Deployment, dag_id: str) -> list[list[list[int]]]:
    runs = sorted(deployment.runs(dag_id), key=lambda r: r["run_after"])
    if any(r["state"] not in ("success", "failed") for r in runs):
        return []
    return [deployment.xcom(dag_id, r["dag_run_id"], "seen") for r in runs]


def _wait_watch_runs(deployment: Deployment, dag_id: str, count: int) -> list[list[list[int]]]:
    return deployment.wait_for(
        lambda: (seen := _watch_runs(deployment, dag_id)) and len(seen) >= count and seen,
        120,
        f"{count} run(s) of {dag_id}",
    )


def _quiet(deployment: Deployment, dag_id: str, count: int) -> None:
    """No further run appears during several poll intervals."""
    time.sleep(POLL_INTERVAL * 4)
    assert len(deployment.runs(dag_id)) == count


def test_an_asset_watcher_fires_on_foreign_commits_and_ignores_filtered_ones(deployment: Deployment) -> None:
    import deltalake

    data = str(deployment.tables / "watched_data")
    writes = str(deployment.tables / "watched_writes")
    for uri in (data, writes):
        deltalake.write_deltalake(uri, pa.table({"id": [1, 2]}))  # version 0 (CREATE TABLE)
    assert _wait_watch_runs(deployment, "deployed_watch_data_changes", 1) == [[[0]]]
    assert _wait_watch_runs(deployment, "deployed_watch_writes", 1) == [[[0]]]

    # Filtered out: OPTIMIZE changes no data; DELETE is not a WRITE.
    deltalake.write_deltalake(data, pa.table({"id": [3]}), mode="append")  # 1: WRITE
    assert _wait_watch_runs(deployment, "deployed_watch_data_changes", 2)[1] == [[1]]
    deltalake.DeltaTable(data).optimize.compact()  # 2: OPTIMIZE, dataChange false
    deltalake.DeltaTable(writes).delete("id = 1")  # 1: DELETE
    _quiet(deployment, "deployed_watch_data_changes", 2)
    _quiet(deployment, "deployed_watch_writes", 1)
    deltalake.write_deltalake(writes, pa.table({"id": [4]}), mode="append")  # 2: WRITE
    assert _wait_watch_runs(deployment, "deployed_watch_writes", 2)[1] == [[2]]


def test_an_asset_watcher_survives_a_triggerer_restart_without_refiring(deployment: Deployment) -> None:
    if airflow_version() < (3, 3, 0):
        pytest.skip("Airflow < 3.3 has no asset state store: a restarted watcher starts again (documented)")
    import deltalake

    data = str(deployment.tables / "watched_data")
    before = len(deployment.runs("deployed_watch_data_changes"))
    assert before >= 2, "runs after the previous test"
    deployment.stop_component("triggerer")
    deployment.start_component("triggerer")
    log = deployment.logs / "triggerer.log"
    deployment.wait_for(
        lambda: (
            log.read_text(errors="replace").count("watched_data") >= 1
            and "Watching file://" in log.read_text(errors="replace")
        ),
        120,
        "the restarted triggerer to run the watcher again",
    )
    _quiet(deployment, "deployed_watch_data_changes", before)  # versions 0-2 are not fired again
    deltalake.write_deltalake(data, pa.table({"id": [5]}), mode="append")  # 3: WRITE
    seen = _wait_watch_runs(deployment, "deployed_watch_data_changes", before + 1)
    assert seen[-1] == [[3]]
    assert "has no attribute 'aget'" not in log.read_text(errors="replace")


# --- connections through the API ----------------------------------------------------------------


def test_a_delta_connection_added_through_the_api_is_used_by_a_dag(deployment: Deployment) -> None:
    lake = deployment.tables / "lake"
    deployment.api(
        "POST",
        "/connections",
        json={"connection_id": "deployed_lake", "conn_type": "delta", "host": str(lake)},
    )
    run_id = deployment.trigger("deployed_commit_via_connection", conf={"batch": "b1"})
    assert deployment.wait_run("deployed_commit_via_connection", run_id) == "success"
    result = deployment.xcom("deployed_commit_via_connection", run_id, "commit")
    assert (result["version"], result["rows"], result["table_uri"]) == (0, 3, f"file://{lake}")
    # The table's asset event (through the connection's alias) schedules the DAG on that asset.
    runs = deployment.wait_for(
        lambda: (r := deployment.runs("deployed_on_lake_asset")) and r[0]["state"] == "success" and r,
        120,
        "the DAG scheduled on the lake's asset",
    )
    assert deployment.xcom("deployed_on_lake_asset", runs[0]["dag_run_id"], "lake_version") == [0]


def test_test_connection_through_the_api_gives_a_clear_message(deployment: Deployment) -> None:
    missing = deployment.tables / "missing"
    answer = deployment.api(
        "POST",
        "/connections/test",
        json={"connection_id": "probe_missing", "conn_type": "delta", "host": str(missing)},
    )
    assert answer["status"] is False
    assert answer["message"].startswith(
        f"Cannot read the Delta table at file://{missing}: TableNotFoundError"
    )
    events = deployment.tables / "events"
    answer = deployment.api(
        "POST",
        "/connections/test",
        json={"connection_id": "probe", "conn_type": "delta", "host": str(events)},
    )
    assert answer == {
        "status": True,
        "message": f"Delta table at file://{events} is at version {DeltaTable(str(events)).version()}.",
    }


def test_secret_storage_options_are_masked_by_airflow(
    deployment: Deployment, s3_endpoint: str, s3_bucket: str
) -> None:
    """The password field holds the secret options: the API never shows them; the test still uses them."""
    secret = "deployed-s3cr3t-value"
    uri = f"s3://{s3_bucket}/events"
    options = {
        "key": "AKIDDEPLOYED",
        "secret": secret,
        "endpoint_url": s3_endpoint,
        "region_name": "us-east-1",
    }
    DeltaTable.create(uri, pa.schema([("id", pa.int64())]), storage_options=options)
    body = {
        "connection_id": "deployed_s3_lake",
        "conn_type": "delta",
        "host": uri,
        "password": json.dumps({"key": "AKIDDEPLOYED", "secret": secret}),
        "extra": json.dumps({"storage_options": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}),
    }
    deployment.api("POST", "/connections", json=body)
    shown = json.dumps(deployment.api("GET", "/connections/deployed_s3_lake"))
    listed = json.dumps(deployment.api("GET", "/connections"))
    assert secret not in shown and secret not in listed
    answer = deployment.api("POST", "/connections/test", json=body)
    assert answer == {"status": True, "message": f"Delta table at {uri} is at version 0."}
    # The form: the password field is shown, labelled for the secret options.
    meta = deployment.client.get("/ui/connections/hook_meta").json()
    delta = next(m for m in meta if m.get("connection_type") == "delta")
    password = (delta.get("standard_fields") or {}).get("password") or {}
    assert password.get("hidden") is not True


# --- the nightly maintenance DAG -------------------------------------------------------------------


def test_the_nightly_maintenance_dag_runs(deployment: Deployment) -> None:
    events = str(deployment.tables / "events")
    # The deployment set the Variable (through the CLI) to a table of the scheduled run's own before
    # it started; now the events table, as a user sets it in the UI (read when the run starts).
    variable = deployment.api("GET", "/variables/delta_maintenance_tables")
    assert json.loads(variable["value"]) == [str(deployment.idle_table())]
    deployment.api(
        "PATCH",
        "/variables/delta_maintenance_tables",
        json={"key": "delta_maintenance_tables", "value": json.dumps([events])},
    )
    assert json.loads(deployment.api("GET", "/variables/delta_maintenance_tables")["value"]) == [events]
    run_id = deployment.trigger("delta_nightly_maintenance", conf={"dry_run": False})
    assert deployment.wait_run("delta_nightly_maintenance", run_id) == "success"
    report = deployment.xcom("delta_nightly_maintenance", run_id, "maintain_tables", "maintenance_report")
    (table,) = report["tables"]
    assert table["table"] == f"file://{events}" and table["status"] == "success"
    assert set(table["steps"]) == {"data_retention", "purge", "optimize", "checkpoint", "cleanup", "vacuum"}
    records = deployment.task_log("delta_nightly_maintenance", run_id, "maintain_tables")
    text = "\n".join(str(r.get("event", "")) for r in records)
    assert (
        "Maintaining 1 Delta table: data retention " in text
        and ", PURGE when due, OPTIMIZE from " in text
        and "small files, checkpoint when due, log cleanup when due, VACUUM FULL at most every 7" in text
    )
    # The operator's own wording: plain counts and human durations. (The reasons it quotes are the
    # core's decisions, worded by the core.)
    assert "deleted 0 files, 0 bytes" in text and "(interval 7 days, 0:00:00" not in text
