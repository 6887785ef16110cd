"""Run a PySpark callable and commit the DataFrame it returns into a Delta table, idempotently.

Built on the spark provider's ``PySparkOperator`` (``local[*]`` by default, a ``spark`` connection
for a cluster, ``spark_connect`` for Spark Connect). A task instance whose idempotency key the
table already holds reports that version without starting Spark; otherwise the DataFrame is
written as Parquet to a fresh directory per attempt under the table root
(:mod:`.spark_support.attempt`) and exactly those files are committed with the txn. With ``source=`` the
callable also receives another table's changes since this task's cursor (:mod:`.spark_support.source`).
Files of an attempt that did not commit are deleted when it can tell, else by VACUUM later.
See docs/operators.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_pyspark import PySparkOperator
from airflow.providers.common.compat.standard.operators import PythonOperator

from airflow_delta_provider.operators.commit import DeltaCommitMixin, RunIdentity, already_committed
from airflow_delta_provider.operators.spark_support.attempt import (
    DEFAULT_WRITE_OPTIONS,
    attempt_dir,
    check_write_subdir,
    collect_attempt_files,
    commit_landed,
    discard_attempt,
    spark_path,
)
from airflow_delta_provider.operators.spark_support.constraints import prepare_frame
from airflow_delta_provider.operators.spark_support.output import RoutedSparkOutput
from airflow_delta_provider.operators.spark_support.source import (
    MAX_SOURCE_ROUNDS,
    SOURCE_TEMPLATE_FIELDS,
    DeltaSourceMixin,
    source_event_extra,
)
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from airflow.sdk import Context

    from airflow_delta_provider.core.log import Snapshot
    from airflow_delta_provider.core.table import DeltaTable, SourceRead
    from airflow_delta_provider.core.transaction import CommitResult, CursorAdvance

__all__ = ["DEFAULT_WRITE_OPTIONS", "DeltaPySparkOperator"]


@dataclass
class _Pending:
    """What the execution found before starting Spark, for the write and commit inside the session."""

    table: DeltaTable
    snapshot: Snapshot | None
    identity: RunIdentity
    app_id: str
    app_version: int
    partition_columns: list[str]
    context: Context
    #: with ``source=``: what this execution reads from the source, and in which round
    source_read: SourceRead | None = None
    rounds: int = 1


class _DataFrameWriter(PythonOperator):  # type: ignore[misc]  # the compat import is untyped (Any)
    """Writes what the callable returned while the Spark session is still up.

    ``PySparkOperator.execute_callable`` opens the session, calls ``super().execute_callable()``
    and stops the session in ``finally``. Placed after it in the MRO of
    :class:`DeltaPySparkOperator`, this class is that ``super()``: it runs the callable and writes
    its DataFrame before the session stops. Not usable on its own.
    """

    def execute_callable(self) -> Any:
        return self._write_output(super().execute_callable)

    def _write_output(self, run_callable: Callable[[], Any]) -> Any:  # pragma: no cover - overridden
        raise NotImplementedError


class DeltaPySparkOperator(
    DeltaCommitMixin, DeltaSourceMixin, RoutedSparkOutput, PySparkOperator, _DataFrameWriter
):
    """Run a PySpark callable and commit the DataFrame it returns to a Delta table, exactly once.

    .. code-block:: python

        def daily(spark, ds):
            return spark.read.json(f"/landing/{ds}/*.json").withColumn("ds", F.lit(ds))


        DeltaPySparkOperator(
            task_id="ingest",
            python_callable=daily,
            table_uri="s3://lake/events",
            partition_by=["ds"],
            mode="overwrite",
            replace_where="ds = '{{ ds }}'",
        )

    Incremental, from another table's changes (each source version consumed exactly once)::

        def silver(spark, changes, source_versions):
            return changes.filter("_change_type = 'insert'").drop("_change_type")


        DeltaPySparkOperator(task_id="silver", python_callable=silver, source="s3://lake/events",
                             table_uri="s3://lake/silver")

    .. seealso:: ``docs/operators.md``, ``docs/idempotency.md`` and ``docs/reading.md``

    :param python_callable: receives ``spark`` (a ``SparkSession``) and any context values it
        names (with ``source``: ``changes`` and ``source_versions`` too); returns the DataFrame to
        commit.
    :param table_uri: the table root. (templated)
    :param delta_conn_id: a ``delta`` connection naming the table. (templated)
    :param storage_conn_id: an Airflow storage connection for ``table_uri``. (templated)
    :param storage_options: fsspec options for the core's access to the table.
    :param mode: ``append`` (default) or ``overwrite``. (templated)
    :param replace_where: with ``overwrite``: replace only the partitions this predicate on
        partition columns selects, e.g. ``"ds = '{{ ds }}'"``; every written row must match it. (templated)
    :param partition_by: partition columns of a table created by the first write; an existing
        table's partitioning is used (and must equal this when given).
    :param merge_schema: add new nullable columns of the DataFrame to the table schema.
    :param table_properties: properties of a table created by the first write (the provider adds
        ``delta.setTransactionRetentionDuration``).
    :param app_id: Delta ``txnAppId``; default: the task instance. (templated)
    :param app_version: Delta ``txnVersion``; default: see ``docs/idempotency.md``. (templated)
    :param user_metadata: commitInfo ``userMetadata``; default: the run identity as JSON. (templated)
    :param tags: extra commitInfo tags (the run identity is always added).
    :param allow_empty_overwrite: let an ``overwrite`` (or ``replace_where``) whose DataFrame wrote
        no file remove the data it replaces; default False (refused).
    :param partition_key_columns: the partition columns a run's asset ``partition_key`` names (a
        composite key's ``|``-separated parts, in order): a keyed run replaces exactly that slice
        with its DataFrame, rows outside it refused before anything is committed; a run without a
        key writes as it would without them (see ``DeltaCommitOperator`` and docs/partitions.md).
        (templated)
    :param add_partitions: declare every partition the commit touched on the table's asset event
        (Airflow 3.3+, see ``DeltaCommitOperator``).
    :param spark_table_uri: where Spark writes the table, when its Hadoop path differs from
        ``table_uri`` (default: ``table_uri`` with ``s3://`` as ``s3a://``). (templated)
    :param write_subdir: the directory under the table root holding each attempt's output;
        must not be hidden (``_``/``.``). Default ``airflow``.
    :param write_options: extra Spark ``DataFrameWriter`` options (override the defaults in
        :data:`DEFAULT_WRITE_OPTIONS`).
    :param conn_id: a ``spark`` or ``spark_connect`` connection; default ``local[*]``. (templated)
    :param config_kwargs: Spark configuration. (templated)
    :param openlineage_inject_parent_job_info: add the task's OpenLineage run as the parent of the
        Spark job's lineage (``spark.openlineage.parent*``), so the Spark listener's events link to
        this task; default ``[openlineage] spark_inject_parent_job_info``.
    :param openlineage_inject_transport_info: pass the OpenLineage transport to the Spark job;
        default ``[openlineage] spark_inject_transport_info``.
    :param source: a table whose changes the callable consumes: its URI (``s3://...``, an absolute
        or ``./`` path) or a ``delta`` connection id. The callable then receives ``changes`` (a
        DataFrame of the source's changes since the last source version this task consumed, up to
        the newest, or up to the version of the source's asset event that triggered the run;
        columns as ``read_changes``) and ``source_versions`` (``(start, end)``, None when nothing is
        new), and the commit records ``end`` as the task's cursor (a ``txn`` of the target). A
        first run starts with the source's snapshot (all rows as inserts). (templated)
    :param source_storage_conn_id: an Airflow storage connection for a source URI. (templated)
    :param source_storage_options: fsspec options for the core's access to a source URI.
    :param source_starting_version: where a task without a cursor starts instead of the snapshot:
        a version (its changes from there) or ``"latest"`` (only versions after the current one).
        Ignored once the task has a cursor. (templated)
    :param source_reset: start over as if there were no cursor (after the source's log lost the
        versions after it; use with ``mode="overwrite"`` to rebuild from the snapshot). (templated)
    :param spark_source_uri: where Spark reads the source, when its Hadoop path differs from the
        source URI. (templated)
    :param source_partition_key_columns: with ``source`` and ``partition_key_columns``: the source's
        partition columns a run's partition key names (default: ``partition_key_columns``). A keyed
        run then consumes only that partition of the source, with a cursor of its own: each source
        version of each partition once, in whatever order the partitions' runs come (a first read
        is judged on the target's slice alone). (templated)

    Returns (XCom): ``table_uri``, ``version``, ``skipped``, ``committed``, ``operation``, ``mode``,
    ``app_id``, ``app_version``, ``files``, ``rows``, ``bytes``, ``removed_files``, ``removed_bytes``
    and ``write_dir`` (the attempt's directory, relative to the root; None when skipped); with
    ``source``, ``source`` (the source's URI, the cursor's ``app_id``, the ``versions`` consumed,
    the ``cursor`` after the commit).
    """

    template_fields: Sequence[str] = (
        *PySparkOperator.template_fields,
        *DeltaCommitMixin.commit_template_fields,
        "spark_table_uri",
        *SOURCE_TEMPLATE_FIELDS,
    )
    ui_color = "#fce8d5"

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        table_uri: str | None = None,
        delta_conn_id: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        mode: str = "append",
        replace_where: str | None = None,
        partition_by: Sequence[str] | str | None = None,
        merge_schema: bool = False,
        table_properties: Mapping[str, Any] | None = None,
        app_id: str | None = None,
        app_version: int | str | None = None,
        user_metadata: str | None = None,
        tags: Mapping[str, str] | None = None,
        allow_empty_overwrite: bool = False,
        partition_key_columns: Sequence[str] | str | None = None,
        add_partitions: bool = False,
        spark_table_uri: str | None = None,
        write_subdir: str = "airflow",
        write_options: Mapping[str, str] | None = None,
        conn_id: str | None = None,
        config_kwargs: dict[str, Any] | None = None,
        openlineage_inject_parent_job_info: bool | None = None,
        openlineage_inject_transport_info: bool | None = None,
        source: str | None = None,
        source_storage_conn_id: str | None = None,
        source_storage_options: Mapping[str, Any] | None = None,
        source_starting_version: int | str | None = None,
        source_reset: bool | str = False,
        spark_source_uri: str | None = None,
        source_partition_key_columns: Sequence[str] | str | None = None,
        **kwargs: Any,
    ) -> None:
        self._default_outlets(kwargs, table_uri, delta_conn_id)
        super().__init__(
            python_callable=python_callable, conn_id=conn_id, config_kwargs=config_kwargs, **kwargs
        )
        self._init_commit_args(
            table_uri=table_uri,
            delta_conn_id=delta_conn_id,
            storage_conn_id=storage_conn_id,
            storage_options=storage_options,
            mode=mode,
            replace_where=replace_where,
            partition_by=partition_by,
            merge_schema=merge_schema,
            table_properties=table_properties,
            app_id=app_id,
            app_version=app_version,
            user_metadata=user_metadata,
            tags=tags,
            allow_empty_overwrite=allow_empty_overwrite,
            partition_key_columns=partition_key_columns,
            add_partitions=add_partitions,
        )
        self.spark_table_uri = spark_table_uri
        self.write_subdir = check_write_subdir(write_subdir)
        self.write_options = dict(write_options) if write_options else None
        self.openlineage_inject_parent_job_info = openlineage_inject_parent_job_info
        self.openlineage_inject_transport_info = openlineage_inject_transport_info
        self._init_source_args(
            source=source,
            source_storage_conn_id=source_storage_conn_id,
            source_storage_options=source_storage_options,
            source_starting_version=source_starting_version,
            source_reset=source_reset,
            spark_source_uri=spark_source_uri,
            python_callable=python_callable,
            source_partition_key_columns=source_partition_key_columns,
            partition_key_columns=partition_key_columns,
        )
        self._pending: _Pending | None = None

    # --- execution -------------------------------------------------------------------------

    def execute(self, context: Context) -> Any:
        identity, app_id, app_version = self.idempotency_key(context)
        table = self.hook.get_table()
        snapshot, columns = self._target_state(table, log_missing=True)
        self.check_run_slice(snapshot)  # a key the table cannot hold is refused before Spark starts
        # Before Spark starts: a retry whose commit already landed must not run the job again.
        if snapshot is not None:
            done = already_committed(table, app_id, app_version, snapshot=snapshot)
            if done is not None:
                return self._report(context, done, identity, note="Spark was not started.", write_dir=None)
        pending = _Pending(table, snapshot, identity, app_id, app_version, columns, context)
        if self.source is not None:
            pending.source_read = self.plan_source(context, snapshot, identity, self.hook.table_uri)
        self._pending = pending
        self.config_kwargs = self.spark_config(context)
        try:
            # PythonOperator.execute → PySparkOperator.execute_callable (session) → _write_frame.
            return super().execute(context)
        finally:
            self._pending = None

    def _target_state(
        self, table: DeltaTable, *, log_missing: bool = False
    ) -> tuple[Snapshot | None, list[str]]:
        """The target's latest snapshot (None: no table yet) and the partition columns of the write."""
        from airflow_delta_provider.core.errors import SchemaMismatchError, TableNotFoundError

        try:
            snapshot = table.snapshot()
        except TableNotFoundError:
            if log_missing:
                self.log.info("No Delta table at %s yet; the first write creates it.", self.hook.table_uri)
            return None, list(self.partition_by or [])
        columns = list(snapshot.partition_columns)
        if self.partition_by is not None and [c.lower() for c in self.partition_by] != [
            c.lower() for c in columns
        ]:
            raise SchemaMismatchError(
                f"partition_by={self.partition_by} differs from the partition columns {columns} of "
                f"{self.hook.table_uri}; a write cannot change a table's partitioning. Drop partition_by "
                f"or write to a new table."
            )
        return snapshot, columns

    def _write_output(self, run_callable: Callable[[], Any]) -> Any:
        """Run the callable and write its DataFrame (inside the Spark session). With ``source``,
        the callable gets the source's changes, and when a concurrent run moved the cursor before
        the commit, the cursor is read again and the work done again from it."""
        from airflow_delta_provider.core.errors import ConcurrentTransactionError

        pending = self._pending
        if pending is None:  # pragma: no cover - only reachable by calling execute_callable directly
            raise RuntimeError("DeltaPySparkOperator.execute_callable runs only from execute().")
        if pending.source_read is None:
            return self._write_frame(run_callable())
        spark = self.op_kwargs.get("spark")
        for rounds in range(1, MAX_SOURCE_ROUNDS + 1):
            pending.rounds = rounds
            self.op_kwargs = {**self.op_kwargs, **self.source_arguments(spark, pending.source_read)}
            try:
                return self._write_frame(run_callable())
            except ConcurrentTransactionError as err:
                if rounds == MAX_SOURCE_ROUNDS:
                    raise
                self.log.warning(
                    "A concurrent run committed to %s first (%s). Reading the cursor again and running the "
                    "callable on what is left (round %d of at most %d).",
                    self.hook.table_uri,
                    err,
                    rounds + 1,
                    MAX_SOURCE_ROUNDS,
                )
                pending.snapshot, pending.partition_columns = self._target_state(pending.table)
                pending.source_read = self.plan_source(
                    pending.context, pending.snapshot, pending.identity, self.hook.table_uri
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def spark_config(self, context: Context) -> dict[str, Any]:
        """``config_kwargs`` plus, when enabled, OpenLineage's parent-job and transport properties.

        As the spark provider's ``SparkSubmitOperator`` does, so Airflow's and Spark's lineage of
        one write are one run tree. Lineage never fails the task: on an error the job runs without.
        """
        config = dict(self.config_kwargs or {})
        parent, transport = self.openlineage_inject_parent_job_info, self.openlineage_inject_transport_info
        if parent is None or transport is None:
            from airflow.configuration import conf  # airflow.sdk.configuration is 3.2+

            if parent is None:
                parent = conf.getboolean("openlineage", "spark_inject_parent_job_info", fallback=False)
            if transport is None:
                transport = conf.getboolean("openlineage", "spark_inject_transport_info", fallback=False)
        if not parent and not transport:
            return config
        try:
            from airflow.providers.common.compat.openlineage.utils.spark import (
                inject_parent_job_information_into_spark_properties,
                inject_transport_information_into_spark_properties,
            )

            if parent:
                config = inject_parent_job_information_into_spark_properties(config, context)
            if transport:
                config = inject_transport_information_into_spark_properties(config, context)
        except Exception as err:
            self.log.warning("Could not add OpenLineage properties to the Spark job: %s", err)
        return config

    def _attempt_dir(self, identity: RunIdentity) -> str:
        return attempt_dir(self.write_subdir, identity)

    def _write_frame(self, frame: Any) -> dict[str, Any]:
        """Write the DataFrame under the table root and commit it (runs inside the Spark session)."""
        pending = self._pending
        if pending is None:  # pragma: no cover - only reachable by calling execute_callable directly
            raise RuntimeError("DeltaPySparkOperator.execute_callable runs only from execute().")
        read = pending.source_read
        is_frame = hasattr(frame, "write") and hasattr(frame, "schema")
        if not is_frame and (read is None or frame is not None):
            raise TypeError(
                f"The callable of {self.task_id!r} must return a Spark DataFrame to commit to "
                f"{self.hook.table_uri}, got {type(frame).__name__}"
                + (" (or None: no rows, the consumed versions are recorded all the same)." if read else ".")
            )
        # Nothing new and no rows (the callable's usual answer to source_versions=None): no Spark
        # write; a commit only when the cursor must be recorded (a first run with nothing to read).
        if read is not None and (frame is None or (read.versions is None and frame.isEmpty())):
            return self._commit_without_rows(pending, read, frame)
        table = pending.table
        prepared = None
        partition_dirs = list(pending.partition_columns)
        if pending.snapshot is not None:
            frame = _with_table_spelling(frame, pending.snapshot.schema.names, self.log)
            # Generated and identity columns added, every constraint checked with Spark.
            prepared = prepare_frame(frame, pending.snapshot.metadata, self.log)
            frame = prepared.frame
            frame, partition_dirs = _with_physical_names(frame, pending.snapshot, partition_dirs, self.log)
        attempt = self._attempt_dir(pending.identity)
        root = (self.spark_table_uri or spark_path(table.uri)).rstrip("/")
        target = f"{root}/{attempt}"
        options = {**DEFAULT_WRITE_OPTIONS, **(self.write_options or {})}
        committing = False
        try:
            # "error" (not its alias "errorifexists", which Spark Connect rejects): the attempt's
            # directory is fresh, so existing output there is a bug, never something to overwrite.
            writer = frame.write.format("parquet").mode("error").options(**options)
            if partition_dirs:
                writer = writer.partitionBy(*partition_dirs)
            self.log.info("Writing the DataFrame to %s.", target)
            writer.save(target)
            files = collect_attempt_files(table, attempt, partition_dirs)
            self.log.info("Spark wrote %s under %s.", count(len(files), "file"), attempt)
            committing = True
            result = self._commit(
                table,
                pending.identity,
                pending.app_id,
                pending.app_version,
                files=files,
                schema=frame.schema.json() if pending.snapshot is None else None,
                constraints_checked=prepared is not None and prepared.checked,
                identity_generated=prepared.identity_generated if prepared is not None else (),
                cursors=_cursors(read),
            )
        except BaseException:
            # Remove the attempt's files now rather than leave them to VACUUM, but only when no commit
            # can reference them: the failure came before the commit, or the table does not hold our
            # txn (a refused commit: schema, predicate, conflict). A failure after the commit landed
            # (e.g. in its post-commit checkpoint) keeps them.
            if not committing or not commit_landed(table, pending.app_id, pending.app_version):
                discard_attempt(table, attempt, self.log)
            raise
        if result.skipped:
            # A concurrent attempt (a zombie of an earlier try) committed first; ours are orphans.
            discard_attempt(table, attempt, self.log)
            _check_not_overtaken(
                result, read, lambda: commit_landed(table, pending.app_id, pending.app_version)
            )
        return self._report_write(pending, result, write_dir=None if result.skipped else attempt)

    def _commit_without_rows(self, pending: _Pending, read: SourceRead, frame: Any) -> dict[str, Any]:
        """With ``source``, no rows to write: commit the cursor alone when it moves, else nothing."""
        from airflow_delta_provider.core.transaction import NO_FILES, CommitResult

        snapshot = pending.snapshot
        if read.advance is None:
            self.log.info(
                "No new source version and no rows to write: nothing is committed (%s stays at version %s).",
                self.hook.table_uri,
                snapshot.version if snapshot is not None else None,
            )
            version = snapshot.version if snapshot is not None else -1
            empty = CommitResult(version, False, "WRITE", version, reason=NO_FILES)
            return self._report_write(pending, empty, write_dir=None)
        if snapshot is None and frame is None:
            raise TypeError(
                f"There is no table at {self.hook.table_uri} yet: the callable of {self.task_id!r} must "
                f"return a DataFrame (even an empty one) to create it, got None."
            )
        self.log.info("No rows to write: committing the consumed source versions alone.")
        result = self._commit(
            pending.table,
            pending.identity,
            pending.app_id,
            pending.app_version,
            files=[],
            schema=frame.schema.json() if snapshot is None else None,
            cursors=_cursors(read),
        )
        table, app = pending.table, (pending.app_id, pending.app_version)
        _check_not_overtaken(result, read, lambda: commit_landed(table, *app))
        return self._report_write(pending, result, write_dir=None)

    def _report_write(
        self, pending: _Pending, result: CommitResult, *, write_dir: str | None
    ) -> dict[str, Any]:
        """The commit's report, with what was read from the source (XCom and asset event)."""
        read = pending.source_read
        if read is None:
            return self._report(pending.context, result, pending.identity, write_dir=write_dir)
        source = self.source_report(read, pending.rounds)
        return self._report(
            pending.context,
            result,
            pending.identity,
            event_extra=source_event_extra(source),
            write_dir=write_dir,
            source=source,
        )


def _check_not_overtaken(
    result: CommitResult, read: SourceRead | None, own_landed: Callable[[], bool]
) -> None:
    """A consumer's commit found "already committed" because a concurrent run moved the cursor to or
    past its end (not because this task instance committed): the versions were consumed by that run,
    and this one reads the cursor again like after any moved cursor.

    :raises ConcurrentTransactionError: for :meth:`DeltaPySparkOperator._write_output`'s next round.
    """
    if read is None or not result.already_committed or own_landed():
        return
    from airflow_delta_provider.core.errors import ConcurrentTransactionError

    raise ConcurrentTransactionError(
        f"a concurrent run consumed the source up to version {read.end} or further (committed at "
        f"version {result.version})",
        version=result.version,
    )


def _cursors(read: SourceRead | None) -> list[CursorAdvance]:
    advance = read.advance if read is not None else None
    return [advance] if advance is not None else []


def _with_table_spelling(frame: Any, table_columns: Sequence[str], log: Any) -> Any:
    """The DataFrame with each column that matches a table column but for case renamed to the table's
    spelling, as Delta does on write (Spark resolves names case-insensitively; Parquet readers do not).

    Only top-level columns are renamed; a column matching none, or several, stays as it is and the
    core's schema check decides.
    """
    by_lower: dict[str, list[str]] = {}
    for name in table_columns:
        by_lower.setdefault(name.lower(), []).append(name)
    renames: dict[str, str] = {}
    for name in frame.columns:
        matches = by_lower.get(name.lower(), [])
        if len(matches) == 1 and matches[0] != name and matches[0] not in frame.columns:
            renames[name] = matches[0]
    if not renames:
        return frame
    log.info(
        "Renaming DataFrame column(s) to the table's spelling: %s.",
        ", ".join(f"{old!r} -> {new!r}" for old, new in renames.items()),
    )
    return frame.withColumnsRenamed(renames)


def _with_physical_names(
    frame: Any, snapshot: Snapshot, partition_columns: Sequence[str], log: Any
) -> tuple[Any, list[str]]:
    """Under column mapping, the DataFrame as Delta writes it: every column, nested fields too,
    under its physical name with its ``parquet.field.id``; and the partition columns' physical
    names (Spark names the partition directories after them, as Delta does).

    The frame is first reconciled to the table's logical schema by name (``DataFrame.to``:
    inner fields in the table's order, safe upcasts), then each column is cast to the same
    shape under physical names, which renames by position. The core checks the footers.
    """
    from airflow_delta_provider.core.protocol import (
        column_mapping_mode,
        physical_name_map,
        spark_write_schemas,
    )

    mode = column_mapping_mode(snapshot.protocol, snapshot.metadata)
    if mode == "none":
        return frame, list(partition_columns)
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    logical, physical = spark_write_schemas(
        snapshot.schema, json.loads(frame.schema.json()), snapshot.properties, mode
    )
    logical_type, physical_type = StructType.fromJson(logical), StructType.fromJson(physical)
    reconciled = frame.to(logical_type)
    columns = [
        F.col(f"`{source.name}`").cast(target.dataType).alias(target.name, metadata=target.metadata)
        for source, target in zip(logical_type.fields, physical_type.fields, strict=True)
    ]
    log.info(
        "The table uses column mapping (mode %r): writing the DataFrame's columns under their physical "
        "names, with their field ids.",
        mode,
    )
    names = physical_name_map(snapshot.schema)
    return reconciled.select(*columns), [names[c] for c in partition_columns]
