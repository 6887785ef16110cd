"""OPTIMIZE (bin-packing compaction) of a Delta table, or its REORG PURGE, the rewrite running on Spark.

The core decides what to rewrite and commits it (:mod:`airflow_delta_provider.core.maintenance.optimize`,
and :mod:`airflow_delta_provider.core.lifecycle.purge` with ``purge=True``: Delta's purge selection and a
``REORG`` commit); Spark reads each bin (deletion vectors applied on the executors, physical names and field
ids kept under column mapping) and writes one file per bin into a fresh directory per attempt. A
retry of a landed commit, an empty plan and a dry run return without starting Spark; an attempt
that does not land has its files deleted by the core's rules. docs/maintenance-operators.md
("DeltaOptimizeOperator") has the steps.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import reduce
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from airflow.providers.apache.spark.operators.spark_pyspark import PySparkOperator
from airflow.providers.common.compat.standard.operators import PythonOperator

from airflow_delta_provider.core.lifecycle import REORG, PurgeOptions, plan_purge
from airflow_delta_provider.core.log import deletion_vector_rows
from airflow_delta_provider.core.maintenance import (
    OPTIMIZE,
    OptimizeOptions,
    OptimizePlan,
    OptimizeResult,
    RewriteOptions,
    plan_optimize,
)
from airflow_delta_provider.core.protocol import column_mapping_mode, spark_write_schemas
from airflow_delta_provider.hooks.mixins import DeltaTableMixin, delta_template_fields
from airflow_delta_provider.operators.commit import RunIdentity, already_committed, resolve_idempotency_key
from airflow_delta_provider.operators.spark_support.attempt import (
    DEFAULT_WRITE_OPTIONS,
    attempt_dir,
    check_write_subdir,
    collect_attempt_files,
    commit_landed,
    discard_attempt,
    spark_path,
)
from airflow_delta_provider.operators.spark_support.output import RoutedSparkOutput
from airflow_delta_provider.spark.files import (
    FileKeys,
    column,
    field,
    file_columns,
    in_row_set,
    join_files,
    key_columns,
    row_set_columns,
)
from airflow_delta_provider.spark.paths import spark_file_paths
from airflow_delta_provider.utils.coercion import (
    to_app_id,
    to_app_version,
    to_bool,
    to_byte_size,
    to_int,
    to_text,
    validate,
)
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow.sdk import Context

    from airflow_delta_provider.core.log import Snapshot
    from airflow_delta_provider.core.table import DeltaTable

__all__ = ["BIN_COLUMN", "DeltaOptimizeOperator"]

#: The column (and directory name) the Spark job partitions its output by: one directory per bin.
BIN_COLUMN = "optimize_bin"


def _no_callable(spark: Any = None) -> None:
    """The operator's ``python_callable``: the rewrite runs in :class:`_OptimizeInSession` instead."""


@dataclass
class _Pending:
    """What the execution decided before starting Spark, for the rewrite inside the session."""

    table: DeltaTable
    options: RewriteOptions
    identity: RunIdentity
    context: Context


class _OptimizeInSession(PythonOperator):  # type: ignore[misc]  # the compat import is untyped (Any)
    """Placed after ``PySparkOperator`` in the MRO: its ``execute_callable`` runs inside the session
    ``PySparkOperator.execute_callable`` opens (and stops afterwards). Not usable on its own."""

    def execute_callable(self) -> Any:
        return self._optimize_in_session(self.op_kwargs["spark"])


class DeltaOptimizeOperator(DeltaTableMixin, RoutedSparkOutput, PySparkOperator, _OptimizeInSession):
    """Compact a Delta table's small files on Spark (Delta's OPTIMIZE, bin-packing), exactly once.

    .. code-block:: python

        DeltaOptimizeOperator(
            task_id="optimize",
            table_uri="s3://lake/events",
            partition_filter="ds >= '{{ macros.ds_add(ds, -7) }}'",
            conn_id="spark_cluster",
        )

    Readers see the same rows before and after; sensors and asset watchers that count only data
    changes do not fire on it (its files are committed with ``dataChange=false``).

    With ``purge=True`` it runs Delta's ``REORG TABLE ... APPLY (PURGE)`` instead: every file whose
    rows a deletion vector deletes (and every file holding a column dropped under column mapping)
    is rewritten without them, single files included, in a ``REORG`` commit, so that VACUUM can
    then remove the deleted rows' bytes (the erasure sequence, ``docs/lifecycle.md``).

    .. seealso:: ``docs/maintenance.md`` (OPTIMIZE) and ``docs/lifecycle.md`` (PURGE)

    :param table_uri: the table root. (templated)
    :param delta_conn_id: a ``delta`` connection naming the table. (templated)
    :param storage_conn_id: an Airflow storage connection for ``table_uri``. (templated)
    :param storage_options: fsspec options for the core's access to the table.
    :param partition_filter: a SQL predicate on partition columns: compact only these partitions. (templated)
    :param target_file_size: bytes, or a size in Spark's units (``"128mb"``, ``"1g"``, ``"1tb"``);
        overrides ``delta.targetFileSize`` (default 1 GiB). None (or a template rendering None): the
        table's; a blank value is an error. (templated)
    :param min_file_size: files at least this big are left alone (default: the target size); not
        with ``purge``, which selects files by their deletion vectors.
    :param purge: run REORG PURGE (Delta's file selection and ``REORG`` commit) instead of the
        bin-packing OPTIMIZE.
    :param app_id: Delta ``txnAppId``; default: the task instance. (templated)
    :param app_version: Delta ``txnVersion``; default: equal across retries, raised by a clear. (templated)
    :param dry_run: plan only (no Spark, no commit); the plan is returned. (templated)
    :param spark_table_uri: where Spark finds the table, when its Hadoop path differs from
        ``table_uri`` (default: ``table_uri`` with ``s3://`` as ``s3a://``). (templated)
    :param write_subdir: the non-hidden directory under the root holding each attempt's files
        (default ``optimize``).
    :param conn_id: a ``spark`` or ``spark_connect`` connection; default ``local[*]``. (templated)
    :param config_kwargs: Spark configuration. (templated)

    Returns (XCom): ``table_uri``, ``operation`` (``OPTIMIZE`` or ``REORG``), ``version``,
    ``committed``, ``reason`` (None, ``no_files``, ``dry_run``, ``already_committed``), ``plan``
    (bins, files, bytes, deletion vectors, the target and its source), ``metrics`` (Delta's OPTIMIZE
    metrics, ``numDeletionVectorsRemoved`` among them), ``write_dir``, ``app_id``, ``app_version``.
    """

    template_fields: Sequence[str] = (
        *delta_template_fields(
            "partition_filter", "target_file_size", "app_id", "app_version", "dry_run", "spark_table_uri"
        ),
        *PySparkOperator.template_fields,
    )
    table_purpose = "to optimize"
    ui_color = "#fdf1d5"

    def __init__(
        self,
        *,
        table_uri: str | None = None,
        delta_conn_id: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        partition_filter: str | None = None,
        target_file_size: int | str | None = None,
        min_file_size: int | None = None,
        purge: bool = False,
        app_id: str | None = None,
        app_version: int | str | None = None,
        dry_run: bool | str = False,
        spark_table_uri: str | None = None,
        write_subdir: str = "optimize",
        conn_id: str | None = None,
        config_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(python_callable=_no_callable, conn_id=conn_id, config_kwargs=config_kwargs, **kwargs)
        self._init_table(
            table_uri=table_uri,
            delta_conn_id=delta_conn_id,
            storage_conn_id=storage_conn_id,
            storage_options=storage_options,
        )
        validate(app_id, to_app_id)
        validate(app_version, to_app_version)
        validate(dry_run, to_bool, "dry_run")
        validate(target_file_size, to_byte_size, "target_file_size")
        self.partition_filter = partition_filter
        self.target_file_size = target_file_size
        self.min_file_size = to_int(min_file_size, "min_file_size", minimum=1)
        self.purge = to_bool(purge, "purge", strings=False)
        if self.purge and self.min_file_size is not None:
            raise ValueError(
                f"min_file_size={min_file_size!r} does not apply to a purge (purge=True), which rewrites "
                f"every file with deleted rows whatever its size; leave it out."
            )
        self.app_id = app_id
        self.app_version = app_version
        self.dry_run = dry_run  # the argument name is the contract
        self.spark_table_uri = spark_table_uri
        self.write_subdir = check_write_subdir(write_subdir)
        self._pending: _Pending | None = None

    # --- execution -------------------------------------------------------------------------

    def execute(self, context: Context) -> dict[str, Any]:
        # An OPTIMIZE replaces what it rewrote: each clear of the task is a new version.
        identity, app_id, app_version = resolve_idempotency_key(
            context, self.app_id, self.app_version, "overwrite"
        )
        arguments: dict[str, Any] = {
            "partition_filter": to_text(self.partition_filter, "partition_filter"),
            "target_file_size": to_byte_size(self.target_file_size, "target_file_size"),
            "app_id": app_id,
            "app_version": app_version,
            "user_metadata": identity.user_metadata(),
            "tags": identity.tags(),
            "dry_run": to_bool(self.dry_run, "dry_run"),
        }
        options: OptimizeOptions | PurgeOptions = (
            PurgeOptions(**arguments)
            if self.purge
            else OptimizeOptions(min_file_size=self.min_file_size, **arguments)
        )
        table = self.hook.get_table()
        snapshot = table.snapshot()
        # Before Spark starts: a retry whose commit already landed must not rewrite anything again.
        done = already_committed(table, app_id, app_version, snapshot=snapshot)
        if done is not None:
            empty = OptimizePlan.empty(snapshot, REORG if self.purge else OPTIMIZE)
            return self._report(OptimizeResult(empty, done), options, note="Spark was not started.")
        plan = (
            plan_optimize(snapshot, options)
            if isinstance(options, OptimizeOptions)
            else plan_purge(snapshot, options)
        )
        if options.dry_run or not plan.bins:
            result = OptimizeResult(plan, None, dry_run=options.dry_run)
            return self._report(result, options, note="Spark was not started.")
        self._pending = _Pending(table, options, identity, context)
        try:
            # PythonOperator.execute → PySparkOperator.execute_callable (session) → _optimize_in_session.
            report: dict[str, Any] = super().execute(context)
            return report
        finally:
            self._pending = None

    def _optimize_in_session(self, spark: Any) -> dict[str, Any]:
        pending = self._pending
        if pending is None:  # pragma: no cover - only reachable by calling execute_callable directly
            raise RuntimeError("DeltaOptimizeOperator.execute_callable runs only from execute().")
        table, options = pending.table, pending.options
        attempt = attempt_dir(self.write_subdir, pending.identity)
        root = (self.spark_table_uri or spark_path(table.uri)).rstrip("/")

        def rewrite(plan: OptimizePlan) -> dict[int, list[str]]:
            try:
                return self._rewrite_on_spark(spark, table, plan, root, attempt)
            except BaseException:
                # The core's contract for a rewriter: a failed one removes what it wrote.
                discard_attempt(table, attempt, self.log)
                raise

        try:
            # The core replans on the latest snapshot, calls rewrite (a failure becomes an
            # OptimizeRewriteError), checks what it reports, and commits, deleting what the rewrite
            # wrote when the commit is refused or a concurrent run of this task committed first.
            run = table.purge if isinstance(options, PurgeOptions) else table.optimize
            result = run(rewrite=rewrite, **_as_kwargs(options))
        except BaseException:
            assert options.app_id is not None and options.app_version is not None
            if not commit_landed(table, options.app_id, options.app_version):
                discard_attempt(table, attempt, self.log)
            raise
        if not result.committed:
            discard_attempt(table, attempt, self.log)
        return self._report(result, options, write_dir=attempt if result.committed else None)

    def _rewrite_on_spark(
        self, spark: Any, table: DeltaTable, plan: OptimizePlan, root: str, attempt: str
    ) -> dict[int, list[str]]:
        """Write every bin in one Spark job (one file per bin); the files written, per bin."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        snapshot = plan.snapshot
        schema_json = _file_schema(snapshot)
        schema = StructType.fromJson(schema_json)
        target = f"{root}/{attempt}"
        frames = []
        with_dv: list[tuple[int, dict[str, Any]]] = []
        for bin_ in plan.bins:
            rows = bin_.files.select(["path", "size", "deletion_vector"]).to_pylist()
            plain = [r["path"] for r in rows if r["deletion_vector"] is None]
            if plain:
                paths = spark_file_paths(snapshot.storage.path, plain, root)
                frames.append(
                    spark.read.schema(schema).parquet(*paths).withColumn(BIN_COLUMN, F.lit(bin_.index))
                )
            with_dv += [(bin_.index, r) for r in rows if r["deletion_vector"] is not None]
        if with_dv:
            frames.append(_surviving_rows(spark, snapshot, schema_json, root, with_dv))
        data = reduce(lambda a, b: a.unionByName(b), frames)
        self.log.info(
            "%s: rewriting %s (%s, %s with deletion vectors) into %s on Spark, under %s.",
            plan.operation,
            count(plan.num_files, "file"),
            count(plan.size, "byte"),
            len(with_dv),
            count(len(plan.bins), "file"),
            target,
        )
        (
            data.repartition(len(plan.bins), BIN_COLUMN)
            .write.format("parquet")
            .mode("error")
            .options(**DEFAULT_WRITE_OPTIONS)
            .partitionBy(BIN_COLUMN)
            .save(target)
        )
        written: dict[int, list[str]] = {b.index: [] for b in plan.bins}
        prefix = f"{BIN_COLUMN}="
        for path in collect_attempt_files(table, attempt, [BIN_COLUMN]):
            directory = next((p for p in path.split("/") if p.startswith(prefix)), None)
            if directory is not None:
                written[int(directory[len(prefix) :])].append(path)
        return written

    def _report(
        self,
        result: OptimizeResult,
        options: RewriteOptions,
        *,
        note: str = "",
        write_dir: str | None = None,
    ) -> dict[str, Any]:
        report = result.to_dict()
        report.pop("commit", None)
        report.update(
            table_uri=self.hook.table_uri,
            write_dir=write_dir,
            app_id=options.app_id,
            app_version=options.app_version,
        )
        plan = result.plan
        uri = self.hook.table_uri
        operation = plan.operation
        if result.committed:
            metrics = result.metrics
            self.log.info(
                "%s of %s committed at version %d: %s (%s, %s) rewritten into %s (%s).",
                operation,
                uri,
                report["version"],
                count(metrics["numRemovedFiles"], "file"),
                count(metrics["numRemovedBytes"], "byte"),
                count(metrics["numDeletionVectorsRemoved"], "deletion vector"),
                count(metrics["numAddedFiles"], "file"),
                count(metrics["numAddedBytes"], "byte"),
            )
        elif result.reason == "already_committed":
            self.log.info(
                "Nothing to do: %s already holds this task instance's %s (appId=%r, txnVersion=%d) at "
                "table version %d. %s",
                uri,
                operation,
                options.app_id,
                options.app_version,
                report["version"],
                note,
            )
        elif result.reason == "dry_run":
            self.log.info(
                "Dry run: %s of %s would rewrite %s (%s) into %s. %s",
                operation,
                uri,
                count(plan.num_files, "file"),
                count(plan.size, "byte"),
                count(len(plan.bins), "file"),
                note,
            )
        elif operation == REORG:
            self.log.info(
                "Nothing to purge in %s at version %d: none of %s has rows deleted by a deletion vector. %s",
                uri,
                plan.snapshot.version,
                count(plan.num_files_considered, "file"),
                note,
            )
        else:
            self.log.info(
                "Nothing to compact in %s at version %d: %s considered, none in a bin of two or more small "
                "files (target %s). %s",
                uri,
                plan.snapshot.version,
                count(plan.num_files_considered, "file"),
                count(plan.target_file_size.value, "byte"),
                note,
            )
        return report


def _as_kwargs(options: RewriteOptions) -> dict[str, Any]:
    return {f.name: getattr(options, f.name) for f in fields(options)}


def _surviving_rows(
    spark: Any,
    snapshot: Snapshot,
    schema_json: dict[str, Any],
    root: str,
    files: list[tuple[int, dict[str, Any]]],
) -> Any:
    """The rows of the files with a deletion vector (each with its bin) that their vectors keep, in
    one scan of all of them: each row keyed to its file (``spark.files.join_files``) for its bin and
    deleted rows, tested by its ``_metadata.row_index`` on the executors."""
    from pyspark.sql.types import StructType

    storage = snapshot.storage
    paths = spark_file_paths(storage.path, [row["path"] for _, row in files], root)
    sizes = [row["size"] for _, row in files]
    keys = FileKeys.of(sizes)
    data = spark.read.schema(StructType.fromJson(schema_json)).parquet(*paths)
    data = data.select("*", *key_columns(data, keys, row_index=True))
    descriptors = [{k: v for k, v in row["deletion_vector"].items() if v is not None} for _, row in files]
    columns, fields = file_columns(paths, sizes)
    row_sets, row_fields = row_set_columns([deletion_vector_rows(storage, dv) for dv in descriptors], paths)
    columns[BIN_COLUMN] = pa.array([index for index, _ in files], pa.int32())
    columns.update(row_sets)
    fields += [field(BIN_COLUMN, "integer"), *row_fields]
    per_file = spark.createDataFrame(
        pa.table(columns), schema=StructType.fromJson({"type": "struct", "fields": fields})
    )
    kept = join_files(data, per_file, keys, BIN_COLUMN, storage.root_uri).filter(~in_row_set())
    return kept.select(*[column(f["name"]) for f in schema_json["fields"]], column(BIN_COLUMN))


def _file_schema(snapshot: Snapshot) -> dict[str, Any]:
    """The Spark schema (JSON) of the table's data files: the data columns, physically named and
    with their ``parquet.field.id`` under column mapping. Spark reads the files by these names and
    writes the ids back (``spark.sql.parquet.fieldId.write.enabled``, on by default); columns the
    table dropped are not read."""
    partition_columns = set(snapshot.partition_columns)
    fields = [f for f in snapshot.metadata.schema_json["fields"] if f["name"] not in partition_columns]
    data = {"type": "struct", "fields": fields}
    mode = column_mapping_mode(snapshot.protocol, snapshot.metadata)
    if mode == "none":
        return data
    _, physical = spark_write_schemas(snapshot.schema, data, snapshot.properties, mode)
    return physical
