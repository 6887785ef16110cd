"""A daily producer of Airflow partitions: each run writes exactly one ``ds`` of a Delta table.

``delta_partitioned_orders`` runs on a ``CronPartitionTimetable`` (Airflow 3.2+): every daily tick
is a DAG run with a ``partition_key``, the day (``key_format="%Y-%m-%d"``). Its task,
``@task.delta_pyspark(partition_key_columns=["ds"])``, computes the day's orders with Spark and
commits them to the ``daily_orders`` table (``daily_orders`` under the examples' root, below), replacing the
partition its key names:

* no ``replace_where`` string: the run's key is the slice (``ds = '2026-03-01'``, the key bound to
  the ``ds`` column and read as a date). A clear of one day, or ``airflow backfill create`` over
  past days, replaces each day once; rows of another day are refused before anything is committed;
* the commit's asset event carries the key, so ``partitioned_totals.py``
  (``PartitionedAssetTimetable``) runs once per day written, for that day;
* the key is in the commit's idempotency identity and in its commitInfo tags
  (``airflow.partition_key``), which the provider's Delta view shows per version.

On Airflow 3.1 (no asset partitions) this file defines no DAG. A run needs a key: a scheduled
tick, a backfill, or ``POST /api/v2/dags/delta_partitioned_orders/dagRuns`` with ``partition_key``
(``airflow dags trigger`` and ``dag.test()`` give none). See docs/partitions.md.

Configuration: the Airflow Variable ``delta_examples_root``, where the example DAGs keep their
tables (e.g. ``s3://lake/examples``; Admin > Variables in the UI), read when this file is parsed
because the tables are the DAGs' assets; unset, ``.demo/`` beside this folder, where ``make demo``
runs them. Object-store credentials: the workers' own, or ``storage_conn_id=`` on the tasks.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Variable, task

try:  # Airflow 3.2+: a run per cron tick, keyed by its day
    from airflow.sdk import CronPartitionTimetable
except ImportError:  # Airflow 3.1 has no asset partitions: no DAG below
    CronPartitionTimetable = None

#: Where the example DAGs keep their tables (the module docstring says how to set it).
EXAMPLES_ROOT = str(
    Variable.get("delta_examples_root", default=Path(__file__).resolve().parent.parent / ".demo")
).rstrip("/")
#: The table this DAG writes, one ``ds`` per run, and ``partitioned_totals.py`` reads.
ORDERS_TABLE = f"{EXAMPLES_ROOT}/daily_orders"
SPARK_CONF = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.sql.session.timeZone": "UTC",
}


def orders_of(day: date) -> list[tuple[int, str, int]]:
    """The day's orders, ``(order_id, region, amount)``: a deterministic function of the day, so a
    re-run writes the same rows (and a test knows them)."""
    count = 5 + day.toordinal() % 4
    return [(n, ("eu", "us")[n % 2], 10 * (n + 1) + day.day) for n in range(count)]


if CronPartitionTimetable is not None:
    # [START howto_partitioned_producer]
    with DAG(
        dag_id="delta_partitioned_orders",
        description="One day of orders per partitioned run, replacing that day's ds.",
        schedule=CronPartitionTimetable("0 0 * * *", timezone="UTC", key_format="%Y-%m-%d"),
        start_date=datetime(2026, 3, 1),
        catchup=False,
        # Days may run at once and be backfilled in any order: each replaces its own slice.
        max_active_runs=3,
        default_args={"retries": 2, "retry_delay": timedelta(seconds=10)},
        tags=["delta", "example", "partitions"],
        doc_md=__doc__,
    ) as dag:

        @task.delta_pyspark(
            table_uri=ORDERS_TABLE,
            partition_by=["ds"],
            partition_key_columns=["ds"],
            config_kwargs=SPARK_CONF,
        )
        def write_orders(spark: Any = None, dag_run: Any = None) -> Any:
            """The run's day of orders (``dag_run.partition_key``: Airflow 3.2 and 3.3 alike)."""
            key = getattr(dag_run, "partition_key", None)
            if not key:
                raise ValueError(
                    "delta_partitioned_orders writes the day its run's partition key names, and this run "
                    "has none: let the timetable schedule it, backfill it, or trigger it with a "
                    "partition_key through the REST API."
                )
            day = date.fromisoformat(key)
            return spark.createDataFrame(
                [(order_id, region, amount, day) for order_id, region, amount in orders_of(day)],
                "order_id LONG, region STRING, amount LONG, ds DATE",
            )

        write_orders()
    # [END howto_partitioned_producer]
