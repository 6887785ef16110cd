"""DAGs of the deployed tier (beside ``dags_examples/``): tables under ``$DELTA_DEMO_ROOT``."""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Asset, AssetWatcher, task

from airflow_delta_provider.assets.delta import delta_table_asset
from airflow_delta_provider.operators.commit import DeltaCommitOperator
from airflow_delta_provider.sensors.delta import DeltaTableVersionSensor
from airflow_delta_provider.triggers.delta import DeltaTableVersionTrigger

ROOT = Path(os.environ.get("DELTA_DEMO_ROOT", "/tmp/delta-deployed-tables"))
START = datetime(2026, 1, 1)
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.master": "local[1]",
}


def _fail_first_try_after_commit(context: Any, result: Any) -> None:
    """A worker lost right after the commit landed: try 1 fails, the retry must commit nothing."""
    if context["ti"].try_number == 1:
        raise RuntimeError(f"simulated worker loss after committing version {result['version']}")


with DAG(dag_id="deployed_retry_after_commit", schedule=None, start_date=START, catchup=False):

    @task.delta_pyspark(
        table_uri=str(ROOT / "retried"),
        retries=1,
        retry_delay=timedelta(seconds=1),
        config_kwargs=SPARK_CONF,
        post_execute=_fail_first_try_after_commit,
    )
    def write_once(spark: Any = None) -> Any:
        return spark.range(5).selectExpr("id", "id * 10 as value")

    write_once()


with DAG(
    dag_id="deployed_wait_default_interval",
    schedule=None,
    start_date=START,
    catchup=False,
    params={"after_version": 0},
    render_template_as_native_obj=True,
):
    # No poke_interval: [delta] poll_interval of the deployment applies (and is logged).
    DeltaTableVersionSensor(
        task_id="wait",
        table_uri=str(ROOT / "sensed"),
        after_version="{{ params.after_version }}",
        deferrable=True,
        timeout=600,
    )


def _watched(name: str, **filters: Any) -> Asset:
    uri = str(ROOT / name)
    trigger = DeltaTableVersionTrigger(table_uri=uri, **filters)  # no poll_interval: [delta] applies
    return delta_table_asset(uri, watchers=[AssetWatcher(name=f"{name}_commits", trigger=trigger)])


WATCHED_DATA = _watched("watched_data", data_changes_only=True)
WATCHED_WRITES = _watched("watched_writes", operations=["WRITE"])

for dag_id, asset in (
    ("deployed_watch_data_changes", WATCHED_DATA),
    ("deployed_watch_writes", WATCHED_WRITES),
):
    with DAG(dag_id=dag_id, schedule=[asset], start_date=START, catchup=False, max_active_runs=1):

        @task(task_id="seen")
        def seen(triggering_asset_events: Any = None, asset: Asset = asset) -> list[list[int]]:
            """The versions of each event that triggered this run."""
            return [list(e.extra["payload"]["versions"]) for e in triggering_asset_events[asset]]

        seen()


LAKE = ROOT / "lake"

with DAG(
    dag_id="deployed_commit_via_connection",
    schedule=None,
    start_date=START,
    catchup=False,
    params={"batch": "b0"},
):

    @task
    def land(params: Any = None) -> str:
        import pyarrow as pa
        import pyarrow.parquet as pq

        prefix = f"landing/{params['batch']}"
        (LAKE / prefix).mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": [1, 2, 3]}), LAKE / prefix / "part-0.parquet")
        return prefix

    # Only the connection names the table: the asset event goes through the connection's alias.
    DeltaCommitOperator(task_id="commit", delta_conn_id="deployed_lake", prefix=land())


with DAG(
    dag_id="deployed_on_lake_asset", schedule=[delta_table_asset(str(LAKE))], start_date=START, catchup=False
):

    @task
    def lake_version(triggering_asset_events: Any = None) -> list[int]:
        return [e.extra["version"] for e in triggering_asset_events[delta_table_asset(str(LAKE))]]

    lake_version()


# --- a consumer of a foreign writer's table (source=): each version exactly once ----------------

CONSUMED = ROOT / "consumed_source"
#: Announced by an AssetWatcher: creation, appends and deletes; an UPDATE is left for manual runs.
CONSUMED_ASSET = _watched("consumed_source", operations=["CREATE TABLE", "WRITE", "DELETE"])
#: While this file exists, the first try that commits fails right after its commit (once).
FAIL_ONCE = ROOT / "consume_fail_once"


def _fail_once_after_commit(context: Any, result: Any) -> None:
    if context["ti"].try_number == 1 and result.get("committed"):
        try:
            FAIL_ONCE.unlink()
        except FileNotFoundError:
            return
        raise RuntimeError(f"simulated worker loss after committing version {result['version']}")


def _barrier(name: str, parties: int, timeout: float = 180) -> None:
    """Wait until ``parties`` runs reached the barrier: they all read the cursor before any commits."""
    import time
    import uuid

    directory = ROOT / "barriers" / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / uuid.uuid4().hex).touch()
    deadline = time.monotonic() + timeout
    while len(list(directory.iterdir())) < parties and time.monotonic() < deadline:
        time.sleep(0.5)


with DAG(
    dag_id="deployed_consume",
    schedule=[CONSUMED_ASSET],
    start_date=START,
    catchup=False,
    max_active_runs=3,
):

    @task.delta_pyspark(
        source=str(CONSUMED),
        source_starting_version=0,
        table_uri=str(ROOT / "consumed_target"),
        retries=1,
        retry_delay=timedelta(seconds=1),
        config_kwargs=SPARK_CONF,
        post_execute=_fail_once_after_commit,
    )
    def consume(
        spark: Any = None, changes: Any = None, source_versions: Any = None, dag_run: Any = None
    ) -> Any:
        """The change rows as they come (a ledger that replays to the source's rows)."""
        conf = dag_run.conf or {}
        if conf.get("barrier"):
            _barrier(conf["barrier"], int(conf.get("parties", 2)))
        return changes.select("id", "v", "_change_type", "_commit_version")

    consume()
