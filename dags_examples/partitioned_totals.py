"""A consumer of Airflow partitions: a per-day aggregate of ``daily_orders``, one run per day written.

``delta_partitioned_totals`` runs on a ``PartitionedAssetTimetable`` over the ``daily_orders`` table's
asset (Airflow 3.2+): each asset event of ``partitioned_orders.py`` carries its run's
``partition_key`` (the day), and the scheduler starts one run of this DAG per day, keyed the same
(``IdentityMapper``). Its task, ``@task.delta_pyspark(source=ORDERS, partition_key_columns=["ds"])``:

* receives only that day's changes of ``daily_orders`` (``changes``; on the day's first run, the day's
  rows of the table as inserts), read from the file-level changes filtered by partition values,
  so the cost follows the day, not the table;
* keeps a cursor per day in the ``daily_totals`` table's log (a ``txn``, appId
  ``delta-source/<daily_orders table id>/airflow/delta_partitioned_totals/daily_totals?partition=<day>``):
  each version of each day is consumed exactly once, whatever order the days arrive in (a backfill
  of past days, a clear of one day); a day with nothing new commits nothing;
* replaces its day of ``daily_totals`` (under the examples' root, below) with the day's
  aggregate: per day and region, the orders and their amount.

The producer replaces a whole day in each commit, so the day's rows after the changes read are the
inserts of the newest commit among them; the aggregate is computed from those. On Airflow 3.1 this
file defines no DAG. See docs/partitions.md.

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

try:  # Airflow 3.2+: one run per upstream partition key
    from airflow.sdk import PartitionedAssetTimetable
except ImportError:  # Airflow 3.1 has no asset partitions: no DAG below
    PartitionedAssetTimetable = None

#: Where the example DAGs keep their tables (the module docstring says how to set it).
EXAMPLES_ROOT = str(
    Variable.get("delta_examples_root", default=Path(__file__).resolve().parent.parent / ".demo")
).rstrip("/")
ORDERS_TABLE = f"{EXAMPLES_ROOT}/daily_orders"
TOTALS_TABLE = f"{EXAMPLES_ROOT}/daily_totals"
#: The asset of ``partitioned_orders.py``'s table: its events carry each run's day.
ORDERS = delta_table_asset(ORDERS_TABLE)
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}


def day_totals(changes: Any) -> Any:
    """Per day and region, the orders and their amount, from a day's changes: the inserts of the
    newest commit among them (each commit of the producer replaces the whole day)."""
    from pyspark.sql import functions as F

    newest = changes.agg(F.max("_commit_version")).first()[0]
    rows = changes.filter((F.col("_commit_version") == newest) & (F.col("_change_type") == "insert"))
    return rows.groupBy("ds", "region").agg(
        F.count("*").alias("orders"),
        F.sum("amount").cast("long").alias("amount"),
        F.lit(newest).cast("long").alias("orders_version"),
    )


if PartitionedAssetTimetable is not None:
    # [START howto_partitioned_consumer]
    with DAG(
        dag_id="delta_partitioned_totals",
        description="Per day and region, the orders and their amount, once per day's change.",
        schedule=PartitionedAssetTimetable(assets=ORDERS),
        start_date=datetime(2026, 3, 1),
        catchup=False,
        max_active_runs=3,
        default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
        tags=["delta", "example", "partitions"],
        doc_md=__doc__,
    ) as dag:

        @task.delta_pyspark(
            source=ORDERS_TABLE,
            table_uri=TOTALS_TABLE,
            partition_by=["ds"],
            partition_key_columns=["ds"],
            config_kwargs=SPARK_CONF,
        )
        def daily_totals(spark: Any = None, changes: Any = None, source_versions: Any = None) -> Any:
            """The run's day aggregated; None (nothing committed) when the day has nothing new."""
            if source_versions is None:
                return None
            return day_totals(changes)

        daily_totals()
    # [END howto_partitioned_consumer]
