"""VACUUM with its listing, anti-join and deletions as a Spark job, for tables beyond one machine.

As Delta's ``VacuumCommand`` on Spark: the executors list the table's subdirectories, the listing is
anti-joined with the paths the table still needs, and the executors delete the candidates, through
the core's :mod:`~airflow_delta_provider.core.maintenance.vacuum.distributed` tasks. Everything
that decides what may go stays in the core; the result is the core's ``VacuumResult``.
docs/spark-deployment.md ("VACUUM on Spark") has what the executors need.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa
from airflow.providers.apache.spark.operators.spark_pyspark import PySparkOperator
from airflow.providers.common.compat.standard.operators import PythonOperator

from airflow_delta_provider.core.maintenance import (
    DELETED_SCHEMA,
    FILE,
    LISTING_SCHEMA,
    DeleteFiles,
    ListSubtrees,
    listing_from_rows,
    split_listing,
)
from airflow_delta_provider.core.utils import get_logger
from airflow_delta_provider.operators.maintenance import DeltaVacuumOperator
from airflow_delta_provider.operators.spark_support.output import RoutedSparkOutput
from airflow_delta_provider.utils.coercion import to_int

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.sdk import Context

    from airflow_delta_provider.core.maintenance import VacuumRules
    from airflow_delta_provider.core.storage import LogStore, TreeListing

__all__ = ["DeltaSparkVacuumOperator", "SparkVacuumEngine"]

log = get_logger(__name__)

#: Paths per delete task: a few S3 ``DeleteObjects`` batches each.
DELETE_TASK_SIZE = 10_000


def _ddl(schema: pa.Schema) -> str:
    names = {pa.string(): "STRING", pa.int64(): "BIGINT"}
    return ", ".join(f"{field.name} {names[field.type]}" for field in schema)


class SparkVacuumEngine:
    """A :class:`~airflow_delta_provider.core.maintenance.vacuum.VacuumEngine` running on a Spark session.

    :param spark: a ``SparkSession`` (classic or Spark Connect).
    :param parallelism: tasks of the listing and of the deletions; default: the session's
        ``spark.default.parallelism`` (classic) or 8.
    """

    def __init__(self, spark: Any, parallelism: int | None = None) -> None:
        self.spark = spark
        self.parallelism = parallelism or _default_parallelism(spark)

    def list_tree(self, storage: LogStore, rules: VacuumRules) -> TreeListing:
        first_level, subdirectories = split_listing(storage, rules.hidden)
        if not subdirectories:
            return first_level
        spark = self.spark
        tasks = min(len(subdirectories), self.parallelism)
        log.info(
            "VACUUM of %s: listing %d directories in %d Spark task(s).",
            storage.root_uri,
            len(subdirectories),
            tasks,
        )
        directories = spark.createDataFrame(pa.table({"directory": pa.array(subdirectories, pa.string())}))
        listed = directories.repartition(tasks).mapInArrow(
            ListSubtrees(storage, rules.hidden), _ddl(LISTING_SCHEMA)
        )
        protected = spark.createDataFrame(pa.table({"path": pa.array(sorted(rules.protected), pa.string())}))
        # The anti-join against the paths the table needs, and the age test, on the executors;
        # directories go through as they are (the core decides about them).
        # Directories are not anti-joined (protected parents still count as listed directories).
        kind, mtime = listed["kind"], listed["modification_time"]
        files = listed.where((kind == FILE) & (mtime < rules.delete_before_ms))
        kept = files.join(protected, on="path", how="left_anti").unionByName(listed.where(kind != FILE))
        rows = _to_arrow(kept)
        listing = listing_from_rows(first_level, rows)
        log.info(
            "VACUUM of %s: the Spark listing kept %d unprotected file(s) older than the retention and "
            "%d director(y/ies).",
            storage.root_uri,
            len(listing.files) - len(first_level.files),
            len(listing.directories),
        )
        return listing

    def delete_many(self, storage: LogStore, paths: Sequence[str], max_workers: int | None) -> int:
        tasks = max(1, min(self.parallelism, -(-len(paths) // DELETE_TASK_SIZE)))
        log.info(
            "VACUUM of %s: deleting %d file(s) in %d Spark task(s).", storage.root_uri, len(paths), tasks
        )
        frame = self.spark.createDataFrame(pa.table({"path": pa.array(list(paths), pa.string())}))
        deleted = frame.repartition(tasks).mapInArrow(DeleteFiles(storage, max_workers), _ddl(DELETED_SCHEMA))
        total = _to_arrow(deleted.groupBy().sum("deleted")).column(0)[0].as_py()
        return int(total or 0)


def _to_arrow(frame: Any) -> pa.Table:
    """Collect a (small) DataFrame as Arrow: ``toArrow`` on Spark >= 4, else through pandas."""
    to_arrow = getattr(frame, "toArrow", None)
    if to_arrow is not None:
        table: pa.Table = to_arrow()
        return table
    return pa.Table.from_pandas(frame.toPandas(), preserve_index=False)


def _default_parallelism(spark: Any) -> int:
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # Spark Connect has no SparkContext
        return 8


def _no_callable(spark: Any = None) -> None:
    """The ``python_callable`` PySparkOperator requires; the operator runs its own job instead."""


class _SparkVacuumRunner(PythonOperator):  # type: ignore[misc]  # the compat import is untyped (Any)
    """Runs the VACUUM while the Spark session is up: after ``PySparkOperator.execute_callable`` in
    the MRO of :class:`DeltaSparkVacuumOperator`, it is that ``super()``, as in the PySpark operator."""

    _engine: SparkVacuumEngine | None
    parallelism: int | None

    def execute_callable(self) -> Any:
        self._engine = SparkVacuumEngine(self.op_kwargs["spark"], self.parallelism)
        try:
            return DeltaVacuumOperator.execute(self, self._context)
        finally:
            self._engine = None


class DeltaSparkVacuumOperator(DeltaVacuumOperator, RoutedSparkOutput, PySparkOperator, _SparkVacuumRunner):
    """VACUUM a Delta table with the listing, the anti-join and the deletions on Spark.

    Takes every argument of :class:`~airflow_delta_provider.operators.maintenance.DeltaVacuumOperator`
    (same safety rules, same result) plus the Spark session's, as the spark provider's
    ``PySparkOperator``:

    :param conn_id: a ``spark`` connection (standalone, YARN, Kubernetes master) or a
        ``spark_connect`` connection; default ``local[*]``. (templated)
    :param config_kwargs: Spark configuration of the session. (templated)
    :param parallelism: Spark tasks listing and deleting; default the session's default parallelism.

    .. code-block:: python

        DeltaSparkVacuumOperator(task_id="vacuum", table_uri="s3://lake/events", conn_id="spark_prod")
    """

    template_fields: Sequence[str] = tuple(
        dict.fromkeys((*DeltaVacuumOperator.template_fields, "conn_id", "config_kwargs"))
    )

    def __init__(
        self,
        *,
        conn_id: str | None = None,
        config_kwargs: dict[str, Any] | None = None,
        parallelism: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(python_callable=_no_callable, conn_id=conn_id, config_kwargs=config_kwargs, **kwargs)
        self.parallelism = to_int(parallelism, "parallelism", minimum=1)
        self._engine: SparkVacuumEngine | None = None
        self._context: Context | None = None

    def vacuum_engine(self) -> SparkVacuumEngine | None:
        return self._engine

    def execute(self, context: Context) -> Any:
        # PythonOperator.execute -> PySparkOperator.execute_callable (the session) -> the runner.
        self._context = context
        try:
            return PythonOperator.execute(self, context)
        finally:
            self._context = None
