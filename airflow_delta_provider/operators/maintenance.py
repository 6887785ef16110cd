"""Delta table maintenance from Airflow: checkpoints, log cleanup, VACUUM, and a policy over many tables.

The operators are thin: they open the table through the hook and call the core's
``DeltaTable.checkpoint``, ``.cleanup_logs`` and ``.vacuum``; every rule about what may be deleted
lives in the core. The policy over many tables runs in :mod:`.maintenance_policy`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator
from airflow.sdk.exceptions import AirflowException

from airflow_delta_provider.core.table import (
    DEFAULT_OPTIMIZE_MIN_FILES,
    DEFAULT_VACUUM_INTERVAL,
    checkpoint_due,
)
from airflow_delta_provider.hooks.mixins import build_hook
from airflow_delta_provider.operators.base import DeltaBaseOperator, delta_template_fields
from airflow_delta_provider.operators.maintenance_policy import (
    MaintenancePolicy,
    cap_files,
    jsonable,
    run_policy,
)
from airflow_delta_provider.utils.coercion import (
    is_deferred,
    is_deferred_inside,
    to_bool,
    to_byte_size,
    to_choice,
    to_data_retention,
    to_int,
    to_interval,
    to_list,
    validate,
)
from airflow_delta_provider.utils.secrets import credential_free, refuse_credentials
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from datetime import timedelta

    from airflow.sdk import Context

    from airflow_delta_provider.core.maintenance import VacuumEngine
    from airflow_delta_provider.hooks.delta import DeltaTableHook

__all__ = [
    "DeltaCheckpointOperator",
    "DeltaLogCleanupOperator",
    "DeltaMaintenanceError",
    "DeltaMaintenanceOperator",
    "DeltaVacuumOperator",
]

#: VACUUM modes the core implements (Delta's VACUUM FULL and VACUUM LITE).
VACUUM_MODES = ("full", "lite")
#: Log at most this many paths of a dry run; the rest is summarised.
MAX_LOGGED_FILES = 50


class DeltaMaintenanceError(AirflowException):
    """Maintenance failed for some tables; the others were maintained.

    :param message: names the failed tables and their errors.
    :param report: the full per-table report (also pushed to XCom as ``maintenance_report``).
    """

    def __init__(self, message: str, *, report: Mapping[str, Any]) -> None:
        super().__init__(message)
        self.report = dict(report)


# --- argument helpers --------------------------------------------------------------------


def _to_mode(value: Any) -> str:
    return to_choice(value, "mode", VACUUM_MODES)


def _to_vacuum_mode(value: Any) -> str:
    return to_choice(value, "vacuum_mode", VACUUM_MODES)


# --- single-table operators --------------------------------------------------------------


class _DeltaTableOperator(DeltaBaseOperator):
    """The single-table maintenance operators: a :class:`DeltaBaseOperator` that maintains its table."""

    table_purpose = "to maintain"


class DeltaCheckpointOperator(_DeltaTableOperator):
    """Write a checkpoint of a Delta table (and ``_last_checkpoint``).

    A checkpoint is a Parquet snapshot of the log at one version; readers start from it instead
    of replaying every commit. It deletes nothing.

    :param table_uri: the table root. (templated)
    :param delta_conn_id: a ``delta`` connection naming the table. (templated)
    :param storage_conn_id: an Airflow storage connection for ``table_uri``. (templated)
    :param storage_options: fsspec options for the storage.
    :param version: the version to checkpoint; None (default) for the latest. (templated)
    :param parts: spread the file actions over this many files (multi-part for classic tables,
        sidecars for ``v2Checkpoint`` tables); None lets the core decide by size.
    :param only_if_due: write the checkpoint only when Delta's policy says one is due (the latest
        version has none and at least ``delta.checkpointInterval`` commits were made since the last).

    Returns (XCom) the table URI and what was written: version, kind, files, actions, bytes; or
    ``{"written": False, "reason": ...}`` when ``only_if_due`` found nothing to do.
    """

    template_fields: Sequence[str] = delta_template_fields("version")
    ui_color = "#e8f4fd"

    def __init__(
        self,
        *,
        version: int | str | None = None,
        parts: int | None = None,
        only_if_due: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        validate(version, to_int, "version")
        to_int(parts, "parts", minimum=1)
        self.version = version
        self.parts = parts
        self.only_if_due = to_bool(only_if_due, "only_if_due", strings=False)

    def execute(self, context: Context) -> dict[str, Any]:
        version = to_int(self.version, "version")
        table = self.hook.get_table()
        uri = self.hook.table_uri
        if self.only_if_due:
            decision = checkpoint_due(table.snapshot())
            due, reason = decision.due, decision.reason
            if not due:
                self.log.info("No checkpoint of %s: %s.", uri, reason)
                return {"table_uri": uri, "written": False, "reason": reason}
        result = table.checkpoint(version, parts=self.parts)
        self.log.info(
            "Wrote a %s checkpoint of %s at version %d: %s, %s, %s, %s.",
            result.kind,
            uri,
            result.version,
            count(len(result.files), "file"),
            count(result.num_actions, "action"),
            count(result.num_add_files, "live data file"),
            count(result.size_in_bytes, "byte"),
        )
        return {"table_uri": uri, "written": True, **jsonable(result)}


class DeltaLogCleanupOperator(_DeltaTableOperator):
    """Delete expired ``_delta_log`` files the way Delta's metadata cleanup does.

    Only log files older than the log retention (``delta.logRetentionDuration``, default 30 days,
    measured from UTC midnight) and older than a complete checkpoint go, so every version from the
    earliest retained checkpoint on stays readable. Data files are never touched.

    :param table_uri: the table root. (templated)
    :param delta_conn_id: a ``delta`` connection naming the table. (templated)
    :param storage_conn_id: an Airflow storage connection for ``table_uri``. (templated)
    :param storage_options: fsspec options for the storage.
    :param retention: overrides the log retention: a ``timedelta``, a Delta interval such as
        ``"interval 30 days"``, or a number of hours. None (default): the table's property, else
        the ``[delta] log_retention_duration`` config, else Delta's 30 days. (templated)
    :param dry_run: only report what would be deleted. (templated)

    Returns (XCom) the table URI and the cleanup result: cutoff, files (at most 1000 listed), number
    of files and bytes, the earliest retained version, and the reason when nothing was done.
    """

    template_fields: Sequence[str] = delta_template_fields("retention", "dry_run")
    ui_color = "#fdf6e3"

    def __init__(
        self,
        *,
        retention: timedelta | str | float | None = None,
        dry_run: bool | str = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        validate(retention, to_interval, "retention")
        validate(dry_run, to_bool, "dry_run")
        self.retention = retention
        # Shadows BaseOperator.dry_run(), a debugging hook; the argument name is the contract.
        self.dry_run = dry_run  # type: ignore[method-assign,assignment]

    def execute(self, context: Context) -> dict[str, Any]:
        dry_run = to_bool(self.dry_run, "dry_run")
        retention = to_interval(self.retention, "retention")
        table = self.hook.get_table()
        uri = self.hook.table_uri
        result = table.cleanup_logs(
            retention=retention,
            dry_run=dry_run,
        )
        summary = jsonable(result)
        _log_cleanup(self.log, uri, summary)
        return cap_files({"table_uri": uri, **summary})


class DeltaVacuumOperator(_DeltaTableOperator):
    """VACUUM a Delta table: delete data files no version within the retention needs.

    Safe by default: the retention is the table's ``delta.deletedFileRetentionDuration`` (Delta's
    default 7 days), and a shorter ``retention`` is refused unless ``enforce_retention_duration``
    is turned off, because files younger than the retention may still be read by running queries
    or be written by in-flight jobs. Nothing outside the table root is deleted.

    :param table_uri: the table root. (templated)
    :param delta_conn_id: a ``delta`` connection naming the table. (templated)
    :param storage_conn_id: an Airflow storage connection for ``table_uri``. (templated)
    :param storage_options: fsspec options for the storage.
    :param retention: overrides the deleted-file retention: a ``timedelta``, a Delta interval such
        as ``"interval 7 days"``, or a number of hours. None (default): the table's property, else
        the ``[delta] deleted_file_retention_duration`` config, else Delta's 7 days. (templated)
    :param dry_run: only list the files that would be deleted. (templated)
    :param mode: ``"full"`` (default; lists the table directory and also finds files no commit
        ever referenced) or ``"lite"`` (reads only the log; cheaper on object stores). (templated)
    :param enforce_retention_duration: refuse a retention shorter than the table's (default True).
        Turn it off only when no reader or writer can be using the table.
    :param max_workers: threads deleting files in parallel; None for the core's default.

    Returns (XCom) the table URI and the VACUUM result: mode, retention, files (at most 1000 listed),
    number of files, bytes and directories, the START/END commit versions, status.
    """

    template_fields: Sequence[str] = delta_template_fields("retention", "dry_run", "mode")
    ui_color = "#fde8e8"

    def __init__(
        self,
        *,
        retention: timedelta | str | float | None = None,
        dry_run: bool | str = False,
        mode: str = "full",
        enforce_retention_duration: bool = True,
        max_workers: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        validate(retention, to_interval, "retention")
        validate(dry_run, to_bool, "dry_run")
        validate(mode, _to_mode)
        self.retention = retention
        # Shadows BaseOperator.dry_run(), a debugging hook; the argument name is the contract.
        self.dry_run = dry_run  # type: ignore[method-assign,assignment]
        self.mode = mode
        self.enforce_retention_duration = to_bool(
            enforce_retention_duration, "enforce_retention_duration", strings=False
        )
        self.max_workers = to_int(max_workers, "max_workers", minimum=1)

    def vacuum_engine(self) -> VacuumEngine | None:
        """Where the listing and the deletions run; None: this process (see ``DeltaSparkVacuumOperator``)."""
        return None

    def execute(self, context: Context) -> dict[str, Any]:
        dry_run = to_bool(self.dry_run, "dry_run")
        retention = to_interval(self.retention, "retention")
        mode = _to_mode(self.mode)
        table = self.hook.get_table()
        uri = self.hook.table_uri
        if not self.enforce_retention_duration:
            self.log.warning(
                "VACUUM of %s runs with the retention safety check off: files younger than the table's "
                "deleted-file retention may be deleted while readers or writers still need them.",
                uri,
            )
        result = table.vacuum(
            retention=retention,
            dry_run=dry_run,
            mode=mode,
            enforce_retention_duration=self.enforce_retention_duration,
            max_workers=self.max_workers,
            engine=self.vacuum_engine(),
        )
        summary = jsonable(result)
        _log_vacuum(self.log, uri, summary)
        return cap_files({"table_uri": uri, **summary})


def _log_cleanup(logger: Any, uri: str, summary: Mapping[str, Any]) -> None:
    files = summary.get("files") or []
    verb = "Would delete" if summary.get("dry_run") else "Deleted"
    reason = summary.get("skipped_reason")
    if reason:
        logger.info("Log cleanup of %s did nothing: %s", uri, reason)
        return
    logger.info(
        "%s %s (%s) of %s older than %s; earliest retained version: %s.",
        verb,
        count(summary.get("num_files", len(files)), "expired log file"),
        count(summary.get("num_bytes", 0), "byte"),
        uri,
        summary.get("cutoff"),
        summary.get("earliest_retained_version"),
    )
    if summary.get("dry_run"):
        _log_paths(logger, files)


def _log_vacuum(logger: Any, uri: str, summary: Mapping[str, Any]) -> None:
    files = summary.get("files") or []
    verb = "would delete" if summary.get("dry_run") else "deleted"
    logger.info(
        "VACUUM %s of %s %s %s (%s) and %s not needed since %s; status %s.",
        str(summary.get("mode", "")).upper(),
        uri,
        verb,
        count(summary.get("num_files", len(files)), "file"),
        count(summary.get("num_bytes", 0), "byte"),
        count(summary.get("num_directories", 0), "directory", "directories"),
        summary.get("delete_before"),
        summary.get("status"),
    )
    if summary.get("dry_run"):
        _log_paths(logger, files)


def _log_paths(logger: Any, files: Sequence[str]) -> None:
    for path in files[:MAX_LOGGED_FILES]:
        logger.info("  %s", path)
    if len(files) > MAX_LOGGED_FILES:
        logger.info("  ... and %d more.", len(files) - MAX_LOGGED_FILES)


class DeltaMaintenanceOperator(BaseOperator):
    """Run the maintenance policy over one or many Delta tables.

    For each table, in Delta's order (the rows' retention first, then the rewrites, so the
    checkpoint covers their commits; checkpoint before cleanup; VACUUM last because it is the
    destructive one):

    - **data retention** (when the table has a policy: ``data_retention``, else its
      ``airflow.dataRetention`` property): the rows older than ``now - keep`` are deleted through
      DELETE (whole files for a partition column or a date partition generated from the column);
      a run that would delete more than the policy's ``max_deleted_fraction`` (default 0.5) of the
      rows fails the table, nothing deleted;
    - **PURGE** (off unless ``run_purge=True``) when a file's deletion vector deletes rows: those
      files are rewritten without them (Delta's REORG PURGE), so that this run's VACUUM, once they
      are older than the retention, removes the deleted rows' bytes: the erasure sequence
      (``docs/lifecycle.md``) as one policy step;
    0. **OPTIMIZE** (off unless ``run_optimize=True``) when due: its plan would rewrite at least
       ``optimize_min_files`` small files (bins of files under ``delta.targetFileSize``, and files
       with deletion vectors). The rewrite runs in the worker with pyarrow, one bin at a time;
       for tables whose bins do not fit a worker, run
       :class:`~airflow_delta_provider.operators.optimize.DeltaOptimizeOperator` on Spark instead;
    1. **checkpoint** when due: the latest version has none and at least ``delta.checkpointInterval``
       commits were made since the last checkpoint;
    2. **log cleanup** when due: log files older than the log retention and older than a complete
       checkpoint exist (skipped when the table sets ``delta.enableExpiredLogCleanup=false``);
    3. **VACUUM** when due: no completed VACUUM within ``vacuum_interval``.

    Tables are maintained one after the other; a failing table does not stop the others, and a step
    that fails skips the table's later steps. The per-table report (what ran and why or why not,
    files and bytes removed, versions retained) is logged, pushed to XCom as ``maintenance_report``
    and returned. When any table failed, the task fails at the end naming them.

    :param tables: table URIs (a list, one URI, or a JSON list rendered by a template such as
        ``"{{ var.value.delta_tables }}"``). (templated)
    :param delta_conn_ids: ``delta`` connections naming further tables. (templated)
    :param storage_conn_id: an Airflow storage connection for the URIs in ``tables``. (templated)
    :param storage_options: fsspec options for the URIs in ``tables``.
    :param data_retention: a data retention policy for every table, ``{"column": "ds", "keep":
        "interval 90 days"}`` (optionally ``"max_deleted_fraction": 0.5``), or its JSON; None: each
        table's ``airflow.dataRetention`` property, if any. (templated)
    :param run_data_retention: apply the policy where there is one (default True).
    :param run_purge: consider PURGE (default False).
    :param run_optimize: consider OPTIMIZE (default False).
    :param optimize_min_files: small files before OPTIMIZE is due (default 50, Delta's
        auto-compaction ``minNumFiles``). (templated)
    :param optimize_target_file_size: bytes, or a size in Spark's units (``"128mb"``, ``"1tb"``);
        overrides every table's ``delta.targetFileSize`` (default 1 GiB). None: each table's; a blank
        value is an error. (templated)
    :param run_checkpoint: consider checkpoints (default True).
    :param run_cleanup: consider log cleanup (default True).
    :param run_vacuum: consider VACUUM (default True).
    :param log_retention: overrides every table's log retention (see
        :class:`DeltaLogCleanupOperator`). (templated)
    :param vacuum_retention: overrides every table's deleted-file retention (see
        :class:`DeltaVacuumOperator`). (templated)
    :param vacuum_interval: the time between two VACUUMs of a table (default 7 days; a timedelta, an
        interval string or a number of hours). None vacuums on every run. (templated)
    :param vacuum_mode: ``"full"`` (default) or ``"lite"``. (templated)
    :param enforce_retention_duration: VACUUM's retention safety check (default True).
    :param dry_run: write and delete nothing; report what would be done. (templated)
    :param max_workers: threads deleting files in parallel, per table.
    """

    template_fields: Sequence[str] = (
        "tables",
        "delta_conn_ids",
        "storage_conn_id",
        "log_retention",
        "vacuum_retention",
        "vacuum_interval",
        "vacuum_mode",
        "dry_run",
        "optimize_target_file_size",
        "optimize_min_files",
        "data_retention",
    )
    ui_color = "#e8fde8"

    def __init__(
        self,
        *,
        tables: str | Sequence[str] = (),
        delta_conn_ids: str | Sequence[str] = (),
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        data_retention: Mapping[str, Any] | str | None = None,
        run_data_retention: bool = True,
        run_purge: bool = False,
        run_optimize: bool = False,
        optimize_min_files: int | str = DEFAULT_OPTIMIZE_MIN_FILES,
        optimize_target_file_size: int | str | None = None,
        run_checkpoint: bool = True,
        run_cleanup: bool = True,
        run_vacuum: bool = True,
        log_retention: timedelta | str | float | None = None,
        vacuum_retention: timedelta | str | float | None = None,
        vacuum_interval: timedelta | str | float | None = DEFAULT_VACUUM_INTERVAL,
        vacuum_mode: str = "full",
        enforce_retention_duration: bool = True,
        dry_run: bool | str = False,
        max_workers: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        known = [value for value in (tables, delta_conn_ids) if not is_deferred(value)]
        if (
            len(known) == 2
            and not to_list(tables, "tables")
            and not to_list(delta_conn_ids, "delta_conn_ids")
        ):
            raise ValueError(
                "DeltaMaintenanceOperator needs tables (URIs) or delta_conn_ids to maintain; got neither."
            )
        if not is_deferred(tables):
            for uri in to_list(tables, "tables"):
                refuse_credentials(uri, argument="tables", owner=type(self).__name__)
        validate(delta_conn_ids, to_list, "delta_conn_ids")
        validate(log_retention, to_interval, "log_retention")
        validate(vacuum_retention, to_interval, "vacuum_retention")
        validate(vacuum_interval, to_interval, "vacuum_interval")
        validate(vacuum_mode, _to_vacuum_mode)
        validate(dry_run, to_bool, "dry_run")
        self.tables = tables
        self.delta_conn_ids = delta_conn_ids
        self.storage_conn_id = storage_conn_id
        self.storage_options = dict(storage_options) if storage_options else None
        if not is_deferred_inside(data_retention):
            to_data_retention(data_retention, "data_retention")
        self.data_retention = data_retention
        self.run_data_retention = to_bool(run_data_retention, "run_data_retention", strings=False)
        self.run_purge = to_bool(run_purge, "run_purge", strings=False)
        self.run_optimize = to_bool(run_optimize, "run_optimize", strings=False)
        validate(optimize_min_files, to_int, "optimize_min_files", minimum=1, optional=False)
        self.optimize_min_files = optimize_min_files
        validate(optimize_target_file_size, to_byte_size, "optimize_target_file_size")
        self.optimize_target_file_size = optimize_target_file_size
        self.run_checkpoint = to_bool(run_checkpoint, "run_checkpoint", strings=False)
        self.run_cleanup = to_bool(run_cleanup, "run_cleanup", strings=False)
        self.run_vacuum = to_bool(run_vacuum, "run_vacuum", strings=False)
        self.log_retention = log_retention
        self.vacuum_retention = vacuum_retention
        self.vacuum_interval = vacuum_interval
        self.vacuum_mode = vacuum_mode
        self.enforce_retention_duration = to_bool(
            enforce_retention_duration, "enforce_retention_duration", strings=False
        )
        # Shadows BaseOperator.dry_run(), a debugging hook; the argument name is the contract.
        self.dry_run = dry_run  # type: ignore[method-assign,assignment]
        self.max_workers = to_int(max_workers, "max_workers", minimum=1)

    def get_hook(self, *, table_uri: str | None = None, delta_conn_id: str | None = None) -> DeltaTableHook:
        """The hook for one table: a URI from ``tables`` or a connection from ``delta_conn_ids``."""
        if delta_conn_id is not None:
            return build_hook(delta_conn_id=delta_conn_id)
        return build_hook(
            table_uri=table_uri, storage_conn_id=self.storage_conn_id, storage_options=self.storage_options
        )

    def execute(self, context: Context) -> dict[str, Any]:
        uris = to_list(self.tables, "tables", unique=True)
        conn_ids = to_list(self.delta_conn_ids, "delta_conn_ids", unique=True)
        if not uris and not conn_ids:
            raise ValueError(
                f"No table to maintain: tables rendered to {self.tables!r} and "
                f"delta_conn_ids to {self.delta_conn_ids!r}; give at least one table."
            )
        targets = [(credential_free(uri), partial(self.get_hook, table_uri=uri)) for uri in uris]
        targets += [
            (f"connection {conn_id!r}", partial(self.get_hook, delta_conn_id=conn_id)) for conn_id in conn_ids
        ]
        report = run_policy(targets, self._policy(), self.log)
        ti = context.get("ti") if isinstance(context, Mapping) else None
        if ti is not None:
            # Pushed under its own key too: when a table fails the task raises, and a return
            # value would never reach XCom.
            ti.xcom_push(key="maintenance_report", value=report)
        failed = [r for r in report["tables"] if r["status"] == "failed"]
        if failed:
            errors = "; ".join(f"{r['table']}: {str(r['error']).rstrip('.')}" for r in failed)
            raise DeltaMaintenanceError(
                f"Maintenance failed for {len(failed)} of {count(len(report['tables']), 'table')}: {errors}. "
                "The other tables were maintained; see the task log and the 'maintenance_report' XCom.",
                report=report,
            )
        return report

    def _policy(self) -> MaintenancePolicy:
        """The policy of this run, from the rendered arguments."""
        return MaintenancePolicy(
            dry_run=to_bool(self.dry_run, "dry_run"),
            log_retention=to_interval(self.log_retention, "log_retention"),
            vacuum_retention=to_interval(self.vacuum_retention, "vacuum_retention"),
            vacuum_interval=to_interval(self.vacuum_interval, "vacuum_interval"),
            vacuum_mode=_to_vacuum_mode(self.vacuum_mode),
            optimize_target_file_size=to_byte_size(
                self.optimize_target_file_size, "optimize_target_file_size"
            ),
            optimize_min_files=to_int(
                self.optimize_min_files, "optimize_min_files", minimum=1, optional=False
            )
            or 1,
            data_retention=to_data_retention(self.data_retention, "data_retention"),
            run_data_retention=self.run_data_retention,
            run_purge=self.run_purge,
            run_optimize=self.run_optimize,
            run_checkpoint=self.run_checkpoint,
            run_cleanup=self.run_cleanup,
            run_vacuum=self.run_vacuum,
            enforce_retention_duration=self.enforce_retention_duration,
            max_workers=self.max_workers,
        )
