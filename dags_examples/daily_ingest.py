"""Daily ingest into a Delta table with ``@task.delta_pyspark``, replacing its day's partition.

Each run computes one day of click events with Spark and commits them to the ``events`` table
(under the Variable ``delta_examples_root``, see below). The task:

* replaces the partition of its day (Delta's replaceWhere), so re-running a day after a clear
  replaces that day and nothing else. The day is the run's logical date, or, for a run triggered
  without one (``airflow dags trigger`` without ``-l``, the UI's "Trigger" without a date), the
  day the run was triggered for (``run_after``);
* is idempotent: a retry after its commit landed commits nothing and does not start Spark again,
  and several days may run at once or be backfilled in any order;
* creates the table on the first run, partitioned by ``ds``;
* emits an asset event for the table (its storage URI) with the version it committed, which
  schedules ``delta_events_downstream`` in ``downstream.py``.

Runs on a local Spark (``local[*]``, bound to the loopback interface so that a laptop with
several network interfaces neither warns nor exposes the driver); set ``conn_id`` to a ``spark`` or
``spark_connect`` connection to run the job on a cluster.

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

#: Where the example DAGs keep their tables (the module docstring says how to set it).
EXAMPLES_ROOT = str(
    Variable.get("delta_examples_root", default=Path(__file__).resolve().parent.parent / ".demo")
).rstrip("/")
#: The table this DAG writes and ``downstream.py`` reads.
EVENTS_TABLE = f"{EXAMPLES_ROOT}/events"
#: Spark settings for a small local job; a cluster connection brings its own.
SPARK_CONF = {
    # Pinned to loopback: a local job needs no other interface, and on a multi-homed host Spark
    # would otherwise warn and bind to whichever address the host name resolves to.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}


def run_day(dag_run: Any) -> str:
    """The day a run ingests: its logical date, or the day it was triggered for when it has none."""
    when = getattr(dag_run, "logical_date", None) or dag_run.run_after
    return when.strftime("%Y-%m-%d")


# [START howto_decorator_delta_pyspark]
with DAG(
    dag_id="delta_daily_ingest",
    description="One day of click events per run, committed to a Delta table exactly once.",
    schedule="@daily",
    start_date=datetime(2026, 11, 1),
    catchup=False,
    # Days may overlap and be backfilled in any order: each run has its own Delta txn.
    max_active_runs=3,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["delta", "example"],
    doc_md=__doc__,
    user_defined_macros={"run_day": run_day},
) as dag:

    @task.delta_pyspark(
        table_uri=EVENTS_TABLE,
        partition_by=["ds"],
        mode="overwrite",
        replace_where="ds = '{{ run_day(dag_run) }}'",
        config_kwargs=SPARK_CONF,
    )
    def ingest_events(spark: Any = None, dag_run: Any = None) -> Any:
        """The day's events: a deterministic function of the day, so a re-run writes the same rows."""
        from pyspark.sql import functions as F

        day = datetime.fromisoformat(run_day(dag_run)).date()
        count = 20 + day.toordinal() % 7
        return spark.range(count).select(
            F.col("id").alias("event_id"),
            (F.col("id") % 5).cast("int").alias("user_id"),
            F.element_at(
                F.array(F.lit("home"), F.lit("search"), F.lit("cart")), (F.col("id") % 3 + 1).cast("int")
            ).alias("page"),
            (F.lit(day.toordinal() % 3) + F.col("id") % 4).cast("int").alias("clicks"),
            F.lit(str(day)).alias("ds"),
        )

    ingest_events()
# [END howto_decorator_delta_pyspark]
