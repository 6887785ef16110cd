"""The steps of :class:`~.maintenance.DeltaMaintenanceOperator` as data: each step's typed report
(its status, why, the core's decision and result as JSON), the run's validated settings, and the
steps over the rows (data retention, PURGE) and the rewrites (OPTIMIZE, PURGE) that need no more
of the operator than its settings. The core decides; this module only reports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, is_dataclass
from datetime import datetime, timedelta
from enum import Enum, StrEnum
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.maintenance import purge_due
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_delta_provider.core.maintenance import OptimizeDecision, PurgeDecision
    from airflow_delta_provider.core.optimize import OptimizeResult
    from airflow_delta_provider.core.table import DeltaTable
    from airflow_delta_provider.core.table_config import DataRetentionPolicy

__all__ = [
    "LIFECYCLE_TOTALS",
    "MAX_XCOM_FILES",
    "Settings",
    "StepReport",
    "StepStatus",
    "cap_files",
    "data_retention_step",
    "jsonable",
    "purge_step",
    "rewrite_step",
    "summarise_lifecycle",
]

#: At most this many file paths go into an XCom; a VACUUM of 100,000 files would otherwise
#: push megabytes into the metadata database. The counts are always complete.
MAX_XCOM_FILES = 1000


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
    :param decision: the core's decision (``CheckpointDecision``, ``CleanupDecision``,
        ``VacuumDecision``) as JSON, when one was taken.
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
class Settings:
    """The rendered, validated policy of one :class:`DeltaMaintenanceOperator` run."""

    dry_run: bool
    log_retention: timedelta | None
    vacuum_retention: timedelta | None
    vacuum_interval: timedelta | None
    vacuum_mode: str
    optimize_target_file_size: int | None = None
    optimize_min_files: int = 50
    data_retention: DataRetentionPolicy | None = None


# --- the rows' lifecycle: data retention and PURGE ----------------------------------------

#: The report's counts of the lifecycle steps, per table and summed over the tables.
LIFECYCLE_TOTALS = ("rows_deleted", "files_purged")


def data_retention_step(table: DeltaTable, settings: Settings) -> StepReport:
    """Delete the rows older than the policy's cutoff (the argument's policy, else the table's)."""
    result = table.apply_data_retention(policy=settings.data_retention, dry_run=settings.dry_run)
    decision = result.decision
    if decision.policy.value is None:
        return StepReport(StepStatus.DISABLED, decision.reason, decision.to_dict())
    if not decision.due:
        return StepReport(StepStatus.NOT_DUE, decision.reason, decision.to_dict())
    if settings.dry_run:
        return StepReport(StepStatus.DUE, f"{decision.reason}; dry run, nothing deleted", decision.to_dict())
    summary = jsonable(result.to_dict())
    summary.pop("decision", None)
    deleted = count(result.num_deleted_rows or 0, "row")
    reason = f"{decision.reason}; deleted {deleted} at version {summary['version']}"
    return StepReport(StepStatus.RAN, reason, decision.to_dict(), summary)


def purge_step(table: DeltaTable, settings: Settings) -> StepReport:
    """Rewrite the files whose deletion vectors delete rows (REORG PURGE)."""
    return rewrite_step(
        purge_due(table.snapshot()),
        settings,
        table.purge,
        lambda metrics: (
            f"rewrote {count(metrics.get('numRemovedFiles', 0), 'file')} "
            f"({count(metrics.get('numDeletionVectorsRemoved', 0), 'deletion vector')})"
        ),
    )


def rewrite_step(
    decision: OptimizeDecision | PurgeDecision,
    settings: Settings,
    rewrite: Callable[[], OptimizeResult],
    rewrote: Callable[[Mapping[str, int]], str],
) -> StepReport:
    """A step on OPTIMIZE's machinery (OPTIMIZE, PURGE): not due, due in a dry run, else the
    rewrite's commit, ``rewrote`` saying what its metrics count."""
    if not decision.due:
        return StepReport(StepStatus.NOT_DUE, decision.reason, decision.to_dict())
    if settings.dry_run:
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


def summarise_lifecycle(report: dict[str, Any]) -> None:
    steps = report["steps"]
    retention = (steps.get("data_retention") or {}).get("result") or {}
    purge = ((steps.get("purge") or {}).get("result") or {}).get("metrics") or {}
    report["rows_deleted"] = int(retention.get("num_deleted_rows") or 0)
    report["files_purged"] = int(purge.get("numRemovedFiles") or 0)
