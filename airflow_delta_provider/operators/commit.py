"""Idempotent commits of Parquet output into Delta tables, keyed on the Airflow run identity.

Every commit carries a Delta ``txn`` action. By default ``app_id`` is the task instance
(``airflow/<dag_id>/<task_id>/<run>[/<map_index>]``, the run by its logical date, else its run id)
and ``app_version`` says which executions count as the same: always ``0`` for ``append`` (any
re-execution that finds it commits nothing), the first try of the current clear generation for
``overwrite`` / ``replace_where`` (a retry after the commit commits nothing, a clear replaces the
slice again). Users with their own sequencing pass ``app_id`` / ``app_version`` (templated). The
run identity goes into commitInfo ``tags`` and ``userMetadata``. See docs/idempotency.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import AssetAlias, BaseOperator

from airflow_delta_provider.assets.delta import asset_event_extra, delta_table_asset, table_asset_uri
from airflow_delta_provider.config import (
    DEFAULT_SET_TRANSACTION_RETENTION,
    max_commit_attempts,
    provider_table_properties,
)
from airflow_delta_provider.hooks.mixins import DeltaTableMixin, delta_template_fields
from airflow_delta_provider.operators.partitioned import PartitionKeyMixin
from airflow_delta_provider.utils.coercion import (
    is_deferred,
    to_app_id,
    to_app_version,
    to_bool,
    to_choice,
    to_list,
    to_text,
    validate,
)
from airflow_delta_provider.utils.version_compat import (
    add_event_partitions,
    alias_event_extra,
    run_partition_key,
)
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pyarrow as pa
    from airflow.sdk import Context

    from airflow_delta_provider.core.log import Snapshot
    from airflow_delta_provider.core.table import DeltaTable
    from airflow_delta_provider.core.transaction import CommitResult, CursorAdvance, WriteMode

__all__ = [
    "DEFAULT_SET_TRANSACTION_RETENTION",
    "DeltaCommitOperator",
    "RunIdentity",
    "connection_asset_alias",
    "default_app_version",
    "resolve_idempotency_key",
]

#: Write modes; ``replace_where`` turns an overwrite into a replace of the partitions it selects.
MODES = ("append", "overwrite")
#: Prefix of the commitInfo tags holding the Airflow run identity.
TAG_PREFIX = "airflow."


# --- the run identity and the idempotency key ------------------------------------------------


@dataclass(frozen=True)
class RunIdentity:
    """Who is committing: one execution of one task instance.

    :param dag_id: the DAG.
    :param task_id: the task.
    :param run_id: the DAG run.
    :param logical_date: the run's logical date (ISO-8601), None for runs without one.
    :param map_index: the mapped instance (-1 when not mapped).
    :param try_number: this try.
    :param first_try: the first try of the current clear generation (Airflow's
        ``max_tries - retries + 1``): equal for all retries, higher after each clear.
    :param partition_key: the run's asset partition key (Airflow 3.2+), None without one.
    """

    dag_id: str
    task_id: str
    run_id: str
    map_index: int
    try_number: int
    first_try: int
    logical_date: str | None = None
    partition_key: str | None = None

    @classmethod
    def from_context(cls, context: Context | Mapping[str, Any]) -> RunIdentity:
        """The identity of the running task instance.

        :raises ValueError: the context has no task instance (``ti``).
        """
        ti = context.get("ti") or context.get("task_instance")
        if ti is None:
            raise ValueError(
                "The context has no task instance ('ti'); a Delta commit operator takes its idempotency key "
                "from the run identity. Run it as an Airflow task, or pass app_id and app_version."
            )
        task = context.get("task") or getattr(ti, "task", None)
        retries = int(getattr(task, "retries", 0) or 0)
        try_number = int(getattr(ti, "try_number", 1) or 1)
        max_tries = getattr(ti, "max_tries", None)
        # max_tries = try_number_at_clear + retries after a clear, = retries before any clear.
        first_try = int(max_tries) - retries + 1 if isinstance(max_tries, int) and max_tries >= 0 else 1
        map_index = getattr(ti, "map_index", -1)
        logical_date = context.get("logical_date")
        return cls(
            logical_date=logical_date.isoformat() if logical_date is not None else None,
            dag_id=str(ti.dag_id),
            task_id=str(ti.task_id),
            run_id=str(ti.run_id),
            map_index=int(map_index) if map_index is not None else -1,
            try_number=try_number,
            first_try=max(1, min(first_try, try_number)),
            partition_key=run_partition_key(context),
        )

    @property
    def app_id(self) -> str:
        """The default ``txnAppId``: one per task instance (logical date or run id, and map index),
        and per partition key (two runs of one logical date with different keys are two commits)."""
        base = f"airflow/{self.dag_id}/{self.task_id}/{self.logical_date or self.run_id}"
        base = base if self.map_index < 0 else f"{base}/{self.map_index}"
        if self.partition_key is None:
            return base
        return f"{base}?partition={quote(self.partition_key, safe='')}"

    def tags(self) -> dict[str, str]:
        """The commitInfo ``tags`` recording this execution."""
        return {
            f"{TAG_PREFIX}dag_id": self.dag_id,
            f"{TAG_PREFIX}task_id": self.task_id,
            f"{TAG_PREFIX}run_id": self.run_id,
            f"{TAG_PREFIX}map_index": str(self.map_index),
            f"{TAG_PREFIX}try_number": str(self.try_number),
            **({f"{TAG_PREFIX}logical_date": self.logical_date} if self.logical_date else {}),
            **({f"{TAG_PREFIX}partition_key": self.partition_key} if self.partition_key is not None else {}),
        }

    def user_metadata(self) -> str:
        """A compact JSON of the identity, for commitInfo ``userMetadata`` (shown by ``DESCRIBE HISTORY``)."""
        return json.dumps(
            {
                "airflow": {
                    "dag_id": self.dag_id,
                    "task_id": self.task_id,
                    "run_id": self.run_id,
                    "logical_date": self.logical_date,
                    "map_index": self.map_index,
                    "try_number": self.try_number,
                    **({"partition_key": self.partition_key} if self.partition_key is not None else {}),
                }
            },
            separators=(",", ":"),
        )


def default_app_version(identity: RunIdentity, mode: str) -> int:
    """The default ``txnVersion`` of a commit (see the module docstring).

    :param identity: the running task instance.
    :param mode: ``append`` or ``overwrite``.
    """
    return 0 if mode == "append" else identity.first_try


def resolve_idempotency_key(
    context: Context | Mapping[str, Any], app_id: Any, app_version: Any, mode: str
) -> tuple[RunIdentity, str, int]:
    """The run identity and the ``(app_id, app_version)`` an execution commits with: the task's
    own (rendered) ``app_id`` / ``app_version`` where given, else the task instance's.

    :param mode: ``append`` or ``overwrite`` (an OPTIMIZE counts as an overwrite): decides the
        default ``app_version`` (see :func:`default_app_version`).
    """
    identity = RunIdentity.from_context(context)
    resolved_id = to_app_id(app_id) or identity.app_id
    resolved_version = to_app_version(app_version)
    if resolved_version is None:
        resolved_version = default_app_version(identity, mode)
    return identity, resolved_id, resolved_version


def connection_asset_alias(delta_conn_id: str) -> AssetAlias:
    """The asset alias a commit operator given only ``delta_conn_id`` emits its table's asset event through.

    :param delta_conn_id: the ``delta`` connection naming the table.
    """
    return AssetAlias(name=f"delta-connection/{delta_conn_id}")


# --- argument checks ---------------------------------------------------------------------


def _to_mode(value: Any) -> WriteMode:
    mode = to_choice(value, "mode", MODES, expected="'append' or 'overwrite'")
    return "overwrite" if mode == "overwrite" else "append"


def _to_files(value: Any) -> list[str]:
    """The files to commit: a list, one path, or a JSON list rendered by a template (``"[]"``: none)."""
    return to_list(value, "files")


def _recorded_commit(table: DeltaTable, result: CommitResult) -> CommitResult:
    """``result`` (nothing committed: the txn was recorded by ``result.version``) with the operation and
    metrics of the commit that recorded it, read from its commitInfo.

    The core's "already committed" result names the recording version but carries no metrics; when
    that commit cannot be read (cleaned up, or ``version_exact`` is False) the result is kept as it is.
    """
    from airflow_delta_provider.core.log import commit_info

    if not result.version_exact:
        return result
    try:
        info = commit_info(table.storage, result.version) or {}
    except Exception:  # the report is a courtesy; the skip itself is decided
        return result
    metrics = info.get("operationMetrics") or {}

    def metric(name: str) -> int:
        try:
            return int(metrics.get(name) or 0)
        except (TypeError, ValueError):
            return 0

    return replace(
        result,
        operation=str(info.get("operation") or result.operation),
        num_added_files=metric("numFiles") or metric("numAddedFiles"),
        num_removed_files=metric("numRemovedFiles"),
        num_output_rows=metric("numOutputRows"),
        num_output_bytes=metric("numOutputBytes"),
        num_removed_bytes=metric("numRemovedBytes"),
        operation_metrics={str(k): str(v) for k, v in metrics.items()},
    )


def already_committed(
    table: DeltaTable, app_id: str, app_version: int, *, snapshot: Snapshot | None = None
) -> CommitResult | None:
    """The core's "nothing to commit" result when the table holds ``app_id`` at ``app_version`` or later
    (:meth:`DeltaTable.already_committed`: protocol, metadata and txns only, no file list)."""
    return table.already_committed(app_id, app_version, snapshot=snapshot)


def _existing_snapshot(table: DeltaTable) -> Snapshot | None:
    """The table's latest snapshot, None when there is no table yet."""
    from airflow_delta_provider.core.errors import TableNotFoundError

    try:
        return table.snapshot()
    except TableNotFoundError:
        return None


# --- the shared behaviour of the commit operators ---------------------------------------------


class DeltaCommitMixin(PartitionKeyMixin, DeltaTableMixin):
    """What :class:`DeltaCommitOperator` and ``DeltaPySparkOperator`` share: the table, the
    idempotency key, the commit, the asset event and the lineage.

    Subclasses call :meth:`_default_outlets` before ``super().__init__`` (so the default outlet is
    in the kwargs), :meth:`_init_commit_args` after it, and :meth:`_commit` from ``execute``.
    """

    table_purpose = "to write"
    commit_template_fields: tuple[str, ...] = delta_template_fields(
        "mode", "replace_where", "app_id", "app_version", "user_metadata", "partition_key_columns"
    )

    mode: str
    replace_where: str | None
    partition_by: list[str] | None
    merge_schema: bool
    table_properties: dict[str, Any] | None
    app_id: str | None
    app_version: int | str | None
    user_metadata: str | None
    commit_tags: dict[str, str] | None
    allow_empty_overwrite: bool
    log: Any

    @staticmethod
    def _default_outlets(kwargs: dict[str, Any], table_uri: str | None, delta_conn_id: str | None) -> None:
        """Make the table an outlet unless the user chose outlets (call before ``super().__init__``).

        A literal ``table_uri`` is the table's asset. A table named only by a ``delta`` connection is
        known when the task runs (reading the connection at parse time would be I/O): the outlet is the
        connection's :func:`connection_asset_alias`, to which the task attaches the table's asset, so
        the event is the table's asset event all the same.
        """
        if "outlets" in kwargs:
            return
        if isinstance(table_uri, str) and table_uri and not is_deferred(table_uri):
            kwargs["outlets"] = [delta_table_asset(table_uri)]
        elif (
            not table_uri
            and isinstance(delta_conn_id, str)
            and delta_conn_id
            and not is_deferred(delta_conn_id)
        ):
            kwargs["outlets"] = [connection_asset_alias(delta_conn_id)]

    def _init_commit_args(
        self,
        *,
        table_uri: str | None,
        delta_conn_id: str | None,
        storage_conn_id: str | None,
        storage_options: Mapping[str, Any] | None,
        mode: str,
        replace_where: str | None,
        partition_by: Sequence[str] | str | None,
        merge_schema: bool,
        table_properties: Mapping[str, Any] | None,
        app_id: str | None,
        app_version: int | str | None,
        user_metadata: str | None,
        tags: Mapping[str, str] | None,
        allow_empty_overwrite: bool = False,
        partition_key_columns: Sequence[str] | str | None = None,
        add_partitions: bool = False,
    ) -> None:
        """Check and store the commit arguments (call after ``super().__init__``)."""
        self._init_table(
            table_uri=table_uri,
            delta_conn_id=delta_conn_id,
            storage_conn_id=storage_conn_id,
            storage_options=storage_options,
        )
        validate(mode, _to_mode)
        if (
            replace_where is not None
            and not isinstance(replace_where, str)
            and not is_deferred(replace_where)
        ):
            raise ValueError(f"replace_where must be a SQL predicate string, got {replace_where!r}.")
        if isinstance(replace_where, str) and not replace_where.strip():
            raise ValueError(
                "replace_where is empty; give a predicate such as \"ds = '{{ ds }}'\" or leave it out."
            )
        if replace_where is not None and not is_deferred(mode) and _to_mode(mode) != "overwrite":
            raise ValueError(
                "replace_where selects the partitions an overwrite replaces; use it with mode='overwrite' "
                f"(got mode={mode!r})."
            )
        validate(app_version, to_app_version)
        validate(app_id, to_app_id)
        if tags is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
            raise ValueError(f"tags must map strings to strings, got {tags!r}.")
        self.mode = mode
        self.replace_where = replace_where
        self.partition_by = to_list(partition_by, "partition_by") if partition_by is not None else None
        self.merge_schema = to_bool(merge_schema, "merge_schema")
        self.table_properties = dict(table_properties) if table_properties else None
        self.app_id = app_id
        self.app_version = app_version
        self.user_metadata = user_metadata
        self.commit_tags = dict(tags) if tags else None
        self.allow_empty_overwrite = to_bool(allow_empty_overwrite, "allow_empty_overwrite", strings=False)
        self._init_partition_args(partition_key_columns=partition_key_columns, add_partitions=add_partitions)

    # --- the table -------------------------------------------------------------------------

    def _resolved_replace_where(self) -> tuple[str | None, dict[str, str] | None]:
        """The predicate of the slice replaced and its parameters: a keyed run's slice, else the
        rendered ``replace_where`` (a blank one is refused: it would turn a replace into a full
        overwrite)."""
        if self._slice is not None:
            return self._slice.predicate()
        if self.replace_where is None:
            return None, None
        return to_text(self.replace_where, "replace_where", optional=False), None

    def _resolved_mode(self) -> WriteMode:
        if self._slice is not None:
            return "overwrite"  # a keyed run replaces its slice
        mode = _to_mode(self.mode)
        if self.replace_where is not None and mode != "overwrite":
            raise ValueError(
                f"replace_where={self.replace_where!r} needs mode='overwrite' "
                f"(the rendered mode is {mode!r})."
            )
        return mode

    def idempotency_key(self, context: Context | Mapping[str, Any]) -> tuple[RunIdentity, str, int]:
        """The run identity and the ``(app_id, app_version)`` this execution commits with; decides
        first the slice a keyed run replaces (see :meth:`_run_slice`)."""
        self._slice = self._run_slice(context)
        return resolve_idempotency_key(context, self.app_id, self.app_version, self._resolved_mode())

    # --- the commit ------------------------------------------------------------------------

    def _commit(
        self,
        table: DeltaTable,
        identity: RunIdentity,
        app_id: str,
        app_version: int,
        *,
        files: Sequence[str] | None = None,
        prefix: str | None = None,
        schema: pa.Schema | str | None = None,
        partition_values: Mapping[str, str | None] | None = None,
        constraints_checked: bool = False,
        identity_generated: Sequence[str] = (),
        cursors: Sequence[CursorAdvance] = (),
    ) -> CommitResult:
        """Commit the files with the core, recording the txn and the run identity.

        :param constraints_checked: the rows were checked against the table's constraints with
            Spark (the PySpark operator); the core does not read the files to check them again.
        :param identity_generated: identity columns whose values the writer generated.
        :param cursors: consumer cursors the commit advances (the PySpark operator's ``source``).
        """
        tags = {**(self.commit_tags or {}), **identity.tags()}
        replace_where, parameters = self._resolved_replace_where()
        # The core refuses an overwrite that removes data and adds nothing unless this is set.
        return table.commit_files(
            files,
            prefix=prefix,
            mode=self._resolved_mode(),
            replace_where=replace_where,
            parameters=parameters,
            partition_values=partition_values,
            schema_mode="merge" if self.merge_schema else "enforce",
            app_id=app_id,
            app_version=app_version,
            user_metadata=self.user_metadata or identity.user_metadata(),
            tags=tags,
            schema=schema,
            partition_by=self.partition_by,
            properties=provider_table_properties(self.table_properties),
            max_attempts=max_commit_attempts(),
            allow_empty_overwrite=self.allow_empty_overwrite,
            constraints_checked=constraints_checked,
            identity_generated=list(identity_generated),
            cursors=list(cursors),
        )

    def _report(
        self,
        context: Context | Mapping[str, Any],
        result: CommitResult,
        identity: RunIdentity,
        *,
        note: str = "",
        event_extra: Mapping[str, Any] | None = None,
        **more: Any,
    ) -> dict[str, Any]:
        """Log the outcome, emit the asset event and build the XCom value.

        For a commit made by an earlier execution, the value reports what that recorded commit did
        (its operation, files, rows and bytes), read from its commitInfo.

        :param note: a sentence added to the log line of a skipped commit.
        :param event_extra: keys added to the asset event's extra.
        """
        uri = self.hook.table_uri  # normalised, never with credentials
        if result.already_committed:
            result = _recorded_commit(self.hook.get_table(), result)
            self.log.info(
                "Nothing to commit: version %d of %s already holds this task instance's commit "
                "(appId=%r, txnVersion=%d), made by an earlier execution: %s, %s, %s, %s. This is try %d.%s",
                result.version,
                uri,
                result.app_id,
                result.app_version,
                result.operation,
                count(result.num_added_files, "file"),
                count(result.num_output_rows, "row"),
                count(result.num_output_bytes, "byte"),
                identity.try_number,
                f" {note}" if note else "",
            )
        elif result.skipped:
            self.log.info("Nothing to commit to %s: %s.", uri, result.reason)
        else:
            self.log.info(
                "Committed %s, %s, %s to %s as version %d (%s, appId=%r, txnVersion=%d, %s removed).",
                count(result.num_added_files, "file"),
                count(result.num_output_rows, "row"),
                count(result.num_output_bytes, "byte"),
                uri,
                result.version,
                result.operation,
                result.app_id,
                result.app_version,
                count(result.num_removed_files, "file"),
            )
        value: dict[str, Any] = {
            "table_uri": uri,
            "version": result.version,
            "committed": result.committed,
            "skipped": result.skipped,
            "reason": result.reason,
            "operation": result.operation,
            "mode": self._resolved_mode(),
            "app_id": result.app_id,
            "app_version": result.app_version,
            "read_version": result.read_version,
            "attempts": result.attempts,
            "files": result.num_added_files,
            "rows": result.num_output_rows,
            "bytes": result.num_output_bytes,
            "removed_files": result.num_removed_files,
            "removed_bytes": result.num_removed_bytes,
            **more,
        }
        self._emit_asset_event(context, result, uri, event_extra)
        self._lineage_result = value
        return value

    def _emit_asset_event(
        self,
        context: Context | Mapping[str, Any],
        result: CommitResult | Mapping[str, Any],
        uri: str,
        more: Mapping[str, Any] | None = None,
    ) -> None:
        """Attach the commit to the table's asset event (or to an alias naming the rendered table)."""
        events = context.get("outlet_events")
        if events is None:
            return
        extra = {**asset_event_extra(result, uri), **(more or {})}
        key = run_partition_key(context)
        if key is not None:
            extra["partition_key"] = key
        outlets = getattr(self, "outlets", None) or []
        asset_uri = table_asset_uri(uri)
        keys = self._announced_keys(result) if self.add_partitions else ([key] if key is not None else [])
        for outlet in outlets:
            if isinstance(outlet, AssetAlias):
                events[outlet].add(delta_table_asset(asset_uri), extra=alias_event_extra(extra))
            elif getattr(outlet, "uri", None) == asset_uri:
                events[outlet].extra = extra
                # Explicit where this Airflow takes keys (3.3+); 3.2 gives the event its run's key.
                if keys:
                    add_event_partitions(events[outlet], keys)

    # --- OpenLineage -----------------------------------------------------------------------

    _lineage_result: dict[str, Any] | None = None

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """The table as the output dataset: storage, version, schema and output statistics facets."""
        from airflow_delta_provider.openlineage import operator_lineage

        uri = self.hook.table_uri
        schema = None
        result = self._lineage_result
        if result is not None:
            try:
                schema = self.hook.get_table().snapshot(version=result["version"]).schema
            except Exception as err:  # lineage must never fail the task
                self.log.debug("No schema for the lineage of %s: %s", uri, err)
        return operator_lineage(uri, result, schema)


class DeltaCommitOperator(DeltaCommitMixin, BaseOperator):
    """Commit Parquet files that are already under a Delta table's root, idempotently.

    For output written elsewhere, e.g. by a ``SparkSubmitOperator`` job on a cluster that wrote
    ``df.write.partitionBy("ds").parquet("s3://lake/events/run=…")``: this task commits those
    files in one atomic Delta commit, with the txn of its run identity, so retries and re-runs
    never add them twice. The files must be under the table root, outside hidden (``_``/``.``)
    directories; hidden files in the prefix (``_SUCCESS``, ``.crc``) are ignored.

    .. seealso:: ``docs/operators.md`` and ``docs/idempotency.md``

    :param table_uri: the table root (``s3://bucket/path``, a local path...). (templated)
    :param prefix: the directory, relative to the table root or as a URI under it, whose
        files are committed. (templated)
    :param files: instead of ``prefix``: the files to commit. (templated)
    :param delta_conn_id: a ``delta`` connection naming the table and its storage. (templated)
    :param storage_conn_id: an Airflow storage connection (aws, google, azure). (templated)
    :param storage_options: fsspec options, when no connection holds them.
    :param mode: ``append`` (default) or ``overwrite``. (templated)
    :param replace_where: with ``overwrite``: replace only the partitions this predicate on
        partition columns selects, e.g. ``"ds = '{{ ds }}'"``. (templated)
    :param partition_by: partition columns (of a new table; must match an existing one).
    :param partition_values: partition values of all the files when their paths carry none.
    :param merge_schema: add new nullable columns of the files to the table schema.
    :param table_properties: properties of a table created by this commit; the provider adds
        ``delta.setTransactionRetentionDuration`` (``[delta] set_transaction_retention_duration``).
    :param schema: the schema of a table created by this commit (pyarrow schema or Delta / Spark
        schema JSON); default: the first file's.
    :param app_id: Delta ``txnAppId``; default: the task instance. (templated)
    :param app_version: Delta ``txnVersion``; default: see ``docs/idempotency.md``. (templated)
    :param user_metadata: commitInfo ``userMetadata``; default: the run identity as JSON. (templated)
    :param tags: extra commitInfo tags (the run identity is always added).
    :param allow_empty_overwrite: let an ``overwrite`` (or ``replace_where``) that adds no file
        remove the data it replaces. Default False: a ``files`` template rendering ``[]`` (or an
        empty ``prefix``) with ``mode="overwrite"`` is refused instead of emptying the table.
    :param partition_key_columns: the partition columns a run's asset ``partition_key`` names, in
        key order (a composite key's ``|``-separated parts, one per column). A run with a key (a
        ``CronPartitionTimetable`` tick, a ``PartitionedAssetTimetable`` run, a REST-triggered key)
        then replaces exactly that slice (``replace_where`` of those values, the key's parts bound
        and converted to each column's type), refuses rows outside it before anything is committed,
        and commits with the key in its idempotency identity; a run without a key (Airflow 3.1, a
        schedule without partitions) writes as it would without them. (templated)
    :param add_partitions: declare on the table's asset event every partition the commit touched
        (Airflow 3.3+'s ``outlet_events[asset].add_partitions``: one event per key, the values of
        ``partition_key_columns``, default every partition column, joined with ``|``), e.g. for a
        ``PartitionedAtRuntime`` producer whose output spans several days.

    Returns (XCom): ``table_uri``, ``version``, ``skipped``, ``committed``, ``operation``, ``mode``,
    ``app_id``, ``app_version``, ``files``, ``rows``, ``bytes``, ``removed_files``, ``removed_bytes``.
    """

    template_fields: Sequence[str] = (*DeltaCommitMixin.commit_template_fields, "prefix", "files")
    ui_color = "#dff5e1"

    def __init__(
        self,
        *,
        table_uri: str | None = None,
        prefix: str | None = None,
        files: Sequence[str] | str | None = None,
        delta_conn_id: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        mode: str = "append",
        replace_where: str | None = None,
        partition_by: Sequence[str] | str | None = None,
        partition_values: Mapping[str, str | None] | None = None,
        merge_schema: bool = False,
        table_properties: Mapping[str, Any] | None = None,
        schema: pa.Schema | str | None = None,
        app_id: str | None = None,
        app_version: int | str | None = None,
        user_metadata: str | None = None,
        tags: Mapping[str, str] | None = None,
        allow_empty_overwrite: bool = False,
        partition_key_columns: Sequence[str] | str | None = None,
        add_partitions: bool = False,
        **kwargs: Any,
    ) -> None:
        self._default_outlets(kwargs, table_uri, delta_conn_id)
        # First: BaseOperator refuses an unknown argument by name (TypeError), so a misspelt
        # ``prefx=`` is reported as such, not as a missing prefix.
        super().__init__(**kwargs)
        if (prefix is None) == (files is None):
            raise ValueError(
                "DeltaCommitOperator needs exactly one of prefix (a directory of Parquet files under the "
                f"table root) or files (a list of them); got prefix={prefix!r}, files={files!r}."
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
        validate(files, _to_files)
        self.prefix = prefix
        self.files = files
        self.partition_values = dict(partition_values) if partition_values is not None else None
        self.schema = schema

    def _files(self) -> list[str] | None:
        return None if self.files is None else _to_files(self.files)

    def execute(self, context: Context) -> dict[str, Any]:
        identity, app_id, app_version = self.idempotency_key(context)
        prefix = None if self.prefix is None else to_text(self.prefix, "prefix", optional=False)
        files = self._files()
        table = self.hook.get_table()
        if self._slice is not None:
            self.check_run_slice(_existing_snapshot(table))
        replace_where, parameters = self._resolved_replace_where()
        self.log.info(
            "Committing %s to %s (mode=%s%s, appId=%r, txnVersion=%d).",
            f"the files under {prefix!r}" if prefix is not None else count(len(files or []), "file"),
            self.hook.table_uri,
            self._resolved_mode(),
            f", replace_where={replace_where!r}{f' {parameters}' if parameters else ''}"
            if replace_where
            else "",
            app_id,
            app_version,
        )
        result = self._commit(
            table,
            identity,
            app_id,
            app_version,
            files=files,
            prefix=prefix,
            schema=self.schema,
            partition_values=self.partition_values,
        )
        return self._report(context, result, identity)
