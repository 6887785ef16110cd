"""The maintenance policy over many tables: per table data retention, PURGE, OPTIMIZE, checkpoint, log
cleanup and VACUUM, each when the core's decision says it is due, and one report of what ran and why.

:class:`~airflow_delta_provider.operators.maintenance.DeltaMaintenanceOperator` renders and checks its
arguments into a :class:`MaintenancePolicy` and hands it here. A failing table does not stop the others.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import DeltaError
from airflow_delta_provider.core.maintenance import OptimizeOptions
from airflow_delta_provider.core.table import (
    DEFAULT_OPTIMIZE_MIN_FILES,
    checkpoint_due,
    cleanup_due,
    optimize_due,
    purge_due,
    vacuum_due,
)
from airflow_delta_provider.utils.secrets import describe_error
from airflow_delta_provider.utils.wording import count, human_duration

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow.sdk.types import Logger

    from airflow_delta_provider.core.maintenance import OptimizeResult
    from airflow_delta_provider.core.protocol import DataRetentionPolicy
    from airflow_delta_provider.core.table import DeltaTable, OptimizeDecision, PurgeDecision
    from airflow_delta_provider.hooks.delta import DeltaTableHook

__all__ = [
    "MAX_XCOM_FILES",
    "MaintenancePolicy",
    "StepReport",
    "StepStatus",
    "cap_files",
    "jsonable",
    "run_policy",
]

#: At most this many file paths go into an XCom; a VACUUM of 100,000 files would otherwise
#: push megabytes into the metadata database. The counts are always complete.
MAX_XCOM_FILES = 1000
#: The report's counts, per table and summed over the tables.
_TOTALS = (
    "files_removed",
    "bytes_removed",
    "log_files_removed",
    "log_bytes_removed",
    "files_compacted",
    "files_written",
    "rows_deleted",
    "files_purged",
)


def jsonable(value: Any) -> Any:
    """A JSON-native copy of a core result (datetimes as ISO-8601, timedeltas as seconds)."""
    if is_dataclass(value) and not isinstance(value, type):
        value = value.to_dict() if hasattr(value, "to_dict") else asdict(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Enum):
        return value.value
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def cap_files(result: dict[str, Any]) -> dict[str, Any]:
    """Keep at most :data:`MAX_XCOM_FILES` paths per list (``files``, ``directories``); say when cut."""
    for key in ("files", "directories"):
        paths = result.get(key)
        if isinstance(paths, list) and len(paths) > MAX_XCOM_FILES:
            result[key] = paths[:MAX_XCOM_FILES]
            result[f"{key}_truncated"] = True
    return result


class StepStatus(StrEnum):
    """What happened to one maintenance step of one table."""

    RAN = "ran"
    #: due, but a dry run did nothing
    DUE = "due"
    NOT_DUE = "not due"
    DISABLED = "disabled"
    FAILED = "failed"
    #: an earlier step of the table failed
    SKIPPED = "skipped"


@dataclass(frozen=True)
class StepReport:
    """One maintenance step of one table: its status, why, the core's decision and its result.

    :param status: what happened.
    :param reason: why, in words.
    :param decision: the core's decision (``DataRetentionDecision``, ``PurgeDecision``,
        ``OptimizeDecision``, ``CheckpointDecision``, ``CleanupDecision``, ``VacuumDecision``) as
        JSON, when one was taken.
    :param result: what the step did (the core's result as JSON, paths capped), when it ran.
    """

    status: StepStatus
    reason: str
    decision: dict[str, Any] | None = None
    result: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"status": self.status.value, "reason": self.reason}
        if self.decision is not None:
            out["decision"] = self.decision
        if self.result is not None:
            out["result"] = self.result
        return out


@dataclass(frozen=True, slots=True)
class MaintenancePolicy:
    """The rendered, validated policy of one :class:`DeltaMaintenanceOperator` run (its arguments)."""

    dry_run: bool
    log_retention: timedelta | None
    vacuum_retention: timedelta | None
    vacuum_interval: timedelta | None
    vacuum_mode: str
    optimize_target_file_size: int | None = None
    optimize_min_files: int = DEFAULT_OPTIMIZE_MIN_FILES
    data_retention: DataRetentionPolicy | None = None
    run_data_retention: bool = True
    run_purge: bool = False
    run_optimize: bool = False
    run_checkpoint: bool = True
    run_cleanup: bool = True
    run_vacuum: bool = True
    enforce_retention_duration: bool = True
    max_workers: int | None = None

    def describe(self) -> str:
        """The steps in words, for the log line that starts a run."""
        vacuum = "off"
        if self.run_vacuum:
            every = (
                f"at most every {human_duration(self.vacuum_interval)}"
                if self.vacuum_interval
                else "on every run"
            )
            vacuum = f"{self.vacuum_mode.upper()} {every}"
        optimize = f"from {count(self.optimize_min_files, 'small file')}" if self.run_optimize else "off"
        checkpoint = "when due" if self.run_checkpoint else "off"
        cleanup = "when due" if self.run_cleanup else "off"
        retention = "off"
        if self.run_data_retention:
            retention = (
                json.dumps(self.data_retention.to_dict())
                if self.data_retention is not None
                else "by each table's airflow.dataRetention"
            )
        purge = "when due" if self.run_purge else "off"
        return (
            f"data retention {retention}, PURGE {purge}, OPTIMIZE {optimize}, checkpoint {checkpoint}, "
            f"log cleanup {cleanup}, VACUUM {vacuum}"
        )


def run_policy(
    targets: Sequence[tuple[str, Callable[[], DeltaTableHook]]], policy: MaintenancePolicy, log: Logger
) -> dict[str, Any]:
    """Maintain each table in turn and report: per table, what ran and why; the failed tables; totals.

    :param targets: per table, its label in the report until the hook names it, and how to open it.
    :param policy: which steps, and their settings.
    :param log: the task's logger.
    """
    log.info(
        "Maintaining %s%s: %s.",
        count(len(targets), "Delta table"),
        " (dry run)" if policy.dry_run else "",
        policy.describe(),
    )
    reports = [_maintain(label, open_hook, policy, log) for label, open_hook in targets]
    return {
        "dry_run": policy.dry_run,
        "tables": reports,
        "failed": [r["table"] for r in reports if r["status"] == "failed"],
        "totals": {key: sum(r[key] for r in reports) for key in _TOTALS},
    }


def _maintain(
    label: str, open_hook: Callable[[], DeltaTableHook], policy: MaintenancePolicy, log: Logger
) -> dict[str, Any]:
    report: dict[str, Any] = {
        "table": label,
        "status": "success",
        "version": None,
        "latest_version": None,
        "steps": {},
        **dict.fromkeys(_TOTALS, 0),
        "earliest_retained_version": None,
        "versions_retained": None,
        "error": None,
    }
    steps: dict[str, dict[str, Any]] = report["steps"]  # StepReport.to_dict() per step
    planned: list[tuple[str, bool, Callable[[DeltaTable, MaintenancePolicy], StepReport]]] = [
        ("data_retention", policy.run_data_retention, _data_retention),
        ("purge", policy.run_purge, _purge),
        ("optimize", policy.run_optimize, _optimize),
        ("checkpoint", policy.run_checkpoint, _checkpoint),
        ("cleanup", policy.run_cleanup, _cleanup),
        ("vacuum", policy.run_vacuum, _vacuum),
    ]
    try:
        hook = open_hook()
        report["table"] = label = hook.table_uri
        table = hook.get_table()
        report["version"] = table.version()
    except Exception as err:
        return _failed(report, "open", err, [name for name, *_ in planned], log)
    for index, (name, enabled, step) in enumerate(planned):
        if not enabled:
            steps[name] = StepReport(StepStatus.DISABLED, f"run_{name}=False").to_dict()
            continue
        try:
            done = step(table, policy)
        except Exception as err:
            return _failed(report, name, err, [n for n, *_ in planned[index + 1 :]], log)
        steps[name] = done.to_dict()
        log.info("%s: %s %s (%s).", label, name, done.status.value, done.reason)
    _summarise(report)
    _retained(report, table, log)
    return report


def _retained(report: dict[str, Any], table: DeltaTable, log: Logger) -> None:
    """Fill in the latest version and how many versions time travel can still reach."""
    try:
        report["latest_version"] = latest = table.version()
        earliest = report["earliest_retained_version"]
        if earliest is None:
            # Cleanup deleted nothing (or did not run): the oldest reconstructable version.
            earliest = table.commit_timestamps()[0].version
    except DeltaError as err:
        # Only the report's counts are missing; the maintenance itself succeeded.
        log.warning("%s: cannot count the retained versions: %s", report["table"], err)
        return
    report["earliest_retained_version"] = earliest
    report["versions_retained"] = latest - earliest + 1


def _failed(
    report: dict[str, Any], step: str, err: Exception, later: Sequence[str], log: Logger
) -> dict[str, Any]:
    message = describe_error(err)
    log.error("%s: %s failed: %s", report["table"], step, message, exc_info=err)
    report["status"] = "failed"
    report["error"] = f"{step} failed: {message}"
    if step != "open":
        report["steps"][step] = StepReport(StepStatus.FAILED, message).to_dict()
    for name in later:
        report["steps"][name] = StepReport(StepStatus.SKIPPED, f"{step} failed").to_dict()
    _summarise(report)
    return report


def _summarise(report: dict[str, Any]) -> None:
    steps = report["steps"]
    cleanup = (steps.get("cleanup") or {}).get("result") or {}
    vacuum = (steps.get("vacuum") or {}).get("result") or {}
    metrics = ((steps.get("optimize") or {}).get("result") or {}).get("metrics") or {}
    report["files_compacted"] = int(metrics.get("numRemovedFiles") or 0)
    report["files_written"] = int(metrics.get("numAddedFiles") or 0)
    report["log_files_removed"] = int(cleanup.get("num_files") or 0)
    report["log_bytes_removed"] = int(cleanup.get("num_bytes") or 0)
    report["files_removed"] = int(vacuum.get("num_files") or 0)
    report["bytes_removed"] = int(vacuum.get("num_bytes") or 0)
    report["earliest_retained_version"] = cleanup.get("earliest_retained_version")
    retention = (steps.get("data_retention") or {}).get("result") or {}
    purged = ((steps.get("purge") or {}).get("result") or {}).get("metrics") or {}
    report["rows_deleted"] = int(retention.get("num_deleted_rows") or 0)
    report["files_purged"] = int(purged.get("numRemovedFiles") or 0)


def _data_retention(table: DeltaTable, policy: MaintenancePolicy) -> StepReport:
    """Delete the rows older than the policy's cutoff (the argument's policy, else the table's)."""
    result = table.apply_data_retention(policy=policy.data_retention, dry_run=policy.dry_run)
    decision = result.decision
    if decision.policy.value is None:
        return StepReport(StepStatus.DISABLED, decision.reason, decision.to_dict())
    if not decision.due:
        return StepReport(StepStatus.NOT_DUE, decision.reason, decision.to_dict())
    if policy.dry_run:
        return StepReport(StepStatus.DUE, f"{decision.reason}; dry run, nothing deleted", decision.to_dict())
    summary = jsonable(result.to_dict())
    summary.pop("decision", None)
    deleted = count(result.num_deleted_rows or 0, "row")
    reason = f"{decision.reason}; deleted {deleted} at version {summary['version']}"
    return StepReport(StepStatus.RAN, reason, decision.to_dict(), summary)


def _purge(table: DeltaTable, policy: MaintenancePolicy) -> StepReport:
    """Rewrite the files whose deletion vectors delete rows (REORG PURGE)."""
    return _rewrite_step(
        purge_due(table.snapshot()),
        policy,
        table.purge,
        lambda metrics: (
            f"rewrote {count(metrics.get('numRemovedFiles', 0), 'file')} "
            f"({count(metrics.get('numDeletionVectorsRemoved', 0), 'deletion vector')})"
        ),
    )


def _optimize(table: DeltaTable, policy: MaintenancePolicy) -> StepReport:
    options = OptimizeOptions(target_file_size=policy.optimize_target_file_size)
    return _rewrite_step(
        optimize_due(table.snapshot(), min_files=policy.optimize_min_files, options=options),
        policy,
        lambda: table.optimize(target_file_size=policy.optimize_target_file_size),
        lambda metrics: (
            f"rewrote {count(metrics.get('numRemovedFiles', 0), 'file')} into "
            f"{metrics.get('numAddedFiles', 0)}"
        ),
    )


def _rewrite_step(
    decision: OptimizeDecision | PurgeDecision,
    policy: MaintenancePolicy,
    rewrite: Callable[[], OptimizeResult],
    rewrote: Callable[[Mapping[str, int]], str],
) -> StepReport:
    """A step on OPTIMIZE's machinery (OPTIMIZE, PURGE): not due, due in a dry run, else the
    rewrite's commit, ``rewrote`` saying what its metrics count."""
    if not decision.due:
        return StepReport(StepStatus.NOT_DUE, decision.reason, decision.to_dict())
    if policy.dry_run:
        return StepReport(
            StepStatus.DUE, f"{decision.reason}; dry run, nothing rewritten", decision.to_dict()
        )
    result = rewrite()
    summary = jsonable(result.to_dict())
    summary.pop("commit", None)
    summary["written"] = summary.get("written", [])[:MAX_XCOM_FILES]
    reason = (
        f"{decision.reason}; {rewrote(result.metrics)} at version {result.version}"
        if result.committed
        else f"{decision.reason}; nothing committed ({result.reason})"
    )
    return StepReport(StepStatus.RAN, reason, decision.to_dict(), summary)


def _checkpoint(table: DeltaTable, policy: MaintenancePolicy) -> StepReport:
    decision = checkpoint_due(table.snapshot())
    if not decision.due:
        return StepReport(StepStatus.NOT_DUE, decision.reason, decision.to_dict())
    if policy.dry_run:
        return StepReport(StepStatus.DUE, f"{decision.reason}; dry run, nothing written", decision.to_dict())
    result = cap_files(jsonable(table.checkpoint()))
    return StepReport(StepStatus.RAN, decision.reason, decision.to_dict(), result)


def _cleanup(table: DeltaTable, policy: MaintenancePolicy) -> StepReport:
    decision = cleanup_due(table.snapshot().config)
    if not decision.due:
        # Delta's property gates automatic cleanup; a scheduled policy is automatic. An explicit
        # DeltaLogCleanupOperator still cleans such a table.
        return StepReport(StepStatus.DISABLED, decision.reason, decision.to_dict())
    result = cap_files(jsonable(table.cleanup_logs(retention=policy.log_retention, dry_run=policy.dry_run)))
    if result.get("num_files"):
        verb = "would delete" if policy.dry_run else "deleted"
        reason = (
            f"{verb} {count(result['num_files'], 'log file')} older than {result.get('cutoff')}; "
            f"earliest retained version {result.get('earliest_retained_version')}"
        )
        status = StepStatus.DUE if policy.dry_run else StepStatus.RAN
        return StepReport(status, reason, decision.to_dict(), result)
    reason = result.get("skipped_reason") or f"no expired log files before {result.get('cutoff')}"
    return StepReport(StepStatus.NOT_DUE, reason, decision.to_dict(), result)


def _vacuum(table: DeltaTable, policy: MaintenancePolicy) -> StepReport:
    decision = vacuum_due(table, policy.vacuum_interval)
    if not decision.due:
        return StepReport(StepStatus.NOT_DUE, decision.reason, decision.to_dict())
    result = table.vacuum(
        retention=policy.vacuum_retention,
        dry_run=policy.dry_run,
        mode=policy.vacuum_mode,
        enforce_retention_duration=policy.enforce_retention_duration,
        max_workers=policy.max_workers,
    )
    summary = cap_files(jsonable(result))
    verb = "would delete" if policy.dry_run else "deleted"
    removed = f"{count(summary.get('num_files', 0), 'file')}, {count(summary.get('num_bytes', 0), 'byte')}"
    status = StepStatus.DUE if policy.dry_run else StepStatus.RAN
    return StepReport(status, f"{decision.reason}; {verb} {removed}", decision.to_dict(), summary)
