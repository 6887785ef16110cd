"""A silver table built incrementally from the ``events`` table: each new version consumed exactly once.

``delta_events_silver`` is scheduled on the events table's asset, so it runs after every commit the
ingest DAG (``daily_ingest.py``) makes, and after every version the deferrable sensor of
``downstream.py`` reports (its asset event says which versions a writer outside Airflow committed).
Its task, ``@task.delta_pyspark(source=...)``, receives ``changes``: a Spark DataFrame of what the
events table changed since the last version this task consumed (the table's snapshot on the first
run), up to the version of the event that triggered the run. It returns, per day and user, the
signed change in events and clicks of each source version, which the operator commits to
``events_silver`` together with the task's cursor (the last events version consumed) as a Delta
``txn`` of the same commit. So:

* a re-run or a clear of a run that committed consumes nothing again (the task instance is in the
  table), and a retry after the commit does not even start Spark;
* two runs at once read the same cursor, but only one commits past it: the other reads the new
  cursor and works on what is left;
* a day the ingest DAG replaces (a clear) arrives as its old rows' deletes and new rows' inserts,
  so the totals stay exact.

``SUM(events), SUM(clicks) ... GROUP BY ds, user_id`` over ``events_silver`` equals the same
aggregate over ``events`` (``totals`` below). The cursor is visible to any engine (the ``txn``
action, appId ``delta-source/<events table id>/airflow/delta_events_silver/build_silver``) and in
the provider's Delta view (Health, "Consumer cursors").

Configuration: the Airflow Variable ``delta_examples_root``, where the example DAGs keep their
tables (e.g. ``s3://lake/examples``; Admin > Variables in the UI), read when this file is parsed
because the tables are the DAGs' assets; unset, ``.demo/`` beside this folder, where ``make demo``
runs them. Object-store credentials: the workers' own, or ``storage_conn_id=`` on the tasks.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Variable, task

from airflow_delta_provider.assets.delta import delta_table_asset

#: Where the example DAGs keep their tables (the module docstring says how to set it).
EXAMPLES_ROOT = str(
    Variable.get("delta_examples_root", default=Path(__file__).resolve().parent.parent / ".demo")
).rstrip("/")
EVENTS_TABLE = f"{EXAMPLES_ROOT}/events"
SILVER_TABLE = f"{EXAMPLES_ROOT}/events_silver"
EVENTS = delta_table_asset(EVENTS_TABLE)
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}


def totals(table_uri: str, *, signed: bool) -> dict[tuple[str, int], tuple[int, int]]:
    """(events, clicks) per (day, user): of the events table (``signed=False``), or summed over the
    silver table's signed rows. Days whose rows were all deleted (zero events) are left out."""
    from airflow_delta_provider.core import DeltaTable

    columns = ["ds", "user_id", "events", "clicks"] if signed else ["ds", "user_id", "clicks"]
    rows = DeltaTable(table_uri).snapshot().to_pyarrow_table(columns=columns)
    events = ("events", "sum") if signed else ("clicks", "count")
    grouped = rows.group_by(["ds", "user_id"]).aggregate([events, ("clicks", "sum")])
    name = "events_sum" if signed else "clicks_count"
    return {(r["ds"], r["user_id"]): (r[name], r["clicks_sum"]) for r in grouped.to_pylist() if r[name]}


# [START howto_incremental_delta_pyspark]
with DAG(
    dag_id="delta_events_silver",
    description="Per day and user, the change in events and clicks of each new events version, once.",
    schedule=[EVENTS],
    start_date=datetime(2026, 11, 1),
    catchup=False,
    # Runs may overlap safely (the cursor is a compare-and-set in the silver table's log: each
    # source version is committed once); one at a time leaves the worker slots to the ingest runs,
    # and the events that arrive meanwhile are consumed together by the next run.
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
    tags=["delta", "example"],
    doc_md=__doc__,
) as dag:

    @task.delta_pyspark(
        source=EVENTS_TABLE,
        table_uri=SILVER_TABLE,
        partition_by=["ds"],
        config_kwargs=SPARK_CONF,
    )
    def build_silver(spark: Any = None, changes: Any = None, source_versions: Any = None) -> Any:
        """The signed change per day, user and events version (deletes and pre-images count -1)."""
        from pyspark.sql import functions as F

        if source_versions is None:
            return None  # nothing new since the last run: nothing is committed
        sign = F.when(F.col("_change_type").isin("insert", "update_postimage"), 1).otherwise(-1)
        return changes.groupBy("ds", "user_id", F.col("_commit_version").alias("events_version")).agg(
            F.sum(sign).cast("long").alias("events"),
            F.sum(sign * F.col("clicks")).cast("long").alias("clicks"),
        )

    build_silver()
# [END howto_incremental_delta_pyspark]
