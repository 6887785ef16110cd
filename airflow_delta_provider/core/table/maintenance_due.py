"""Maintenance policy: whether each maintenance step is due for a table, and why (not).

Scheduled maintenance (the Airflow layer's ``DeltaMaintenanceOperator``, the UI) asks these
questions; the answers are typed decisions, one dataclass per step, with the setting each
rests on and where its value came from, and typed reports of what a step did. Nothing here
writes or deletes. The data retention step's decision and report are defined beside the run that
acts on them (:mod:`.data_retention`, a layer below) and exported here with the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.lifecycle.data_retention import (
    DataRetentionDecision,
    DataRetentionResult,
    data_retention_due,
)
from airflow_delta_provider.core.lifecycle.purge import plan_purge
from airflow_delta_provider.core.log.timeline import info_object
from airflow_delta_provider.core.maintenance.optimize import OptimizeOptions, plan_optimize
from airflow_delta_provider.core.maintenance.vacuum.record import LAST_VACUUM_INFO, VACUUM_END
from airflow_delta_provider.core.protocol.table_config import ENABLE_EXPIRED_LOG_CLEANUP, Setting, TableConfig

if TYPE_CHECKING:
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.table.delta_table import DeltaTable

__all__ = [
    "DEFAULT_OPTIMIZE_MIN_FILES",
    "DEFAULT_VACUUM_INTERVAL",
    "CheckpointDecision",
    "CleanupDecision",
    "DataRetentionDecision",
    "DataRetentionResult",
    "LastVacuum",
    "OptimizeDecision",
    "PurgeDecision",
    "VacuumDecision",
    "checkpoint_due",
    "cleanup_due",
    "data_retention_due",
    "last_vacuum",
    "optimize_due",
    "purge_due",
    "vacuum_due",
]

#: Small files (in bins OPTIMIZE would rewrite) before a scheduled OPTIMIZE is due: Delta's auto
#: compaction threshold (``autoCompact.minNumFiles``).
DEFAULT_OPTIMIZE_MIN_FILES = 50
#: Time between two scheduled VACUUMs of one table (the maintenance operator's and the Delta view's
#: default): the default tombstone retention, so each run finds what the last one could not take.
DEFAULT_VACUUM_INTERVAL = timedelta(days=7)


@dataclass(frozen=True)
class CheckpointDecision:
    """Whether a checkpoint is due.

    :param due: the latest version has no checkpoint and at least ``interval`` commits were
        made since the last checkpoint (since version 0 when there is none).
    :param reason: why (not), in words.
    :param version: the latest version.
    :param last_checkpoint_version: the version of the last checkpoint, None when there is none.
    :param commits_since: commits since that checkpoint (or version 0).
    :param interval: ``delta.checkpointInterval`` and its source.
    """

    due: bool
    reason: str
    version: int
    last_checkpoint_version: int | None
    commits_since: int
    interval: Setting[int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "reason": self.reason,
            "version": self.version,
            "last_checkpoint_version": self.last_checkpoint_version,
            "commits_since": self.commits_since,
            "interval": self.interval.to_dict(),
        }


@dataclass(frozen=True)
class CleanupDecision:
    """Whether scheduled log cleanup may run (Delta's ``delta.enableExpiredLogCleanup``).

    The property gates only automatic cleanup; an explicit cleanup always runs.
    """

    due: bool
    reason: str
    enabled: Setting[bool]

    def to_dict(self) -> dict[str, Any]:
        return {"due": self.due, "reason": self.reason, "enabled": self.enabled.to_dict()}


@dataclass(frozen=True)
class LastVacuum:
    """The last completed VACUUM that could be found.

    :param timestamp: when it completed.
    :param description: where that is recorded (a ``VACUUM END`` commit or ``_last_vacuum_info``).
    :param version: the ``VACUUM END`` commit's version, None when only ``_last_vacuum_info`` tells.
    """

    timestamp: datetime
    description: str
    version: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "timestamp": self.timestamp.isoformat(),
            "description": self.description,
            "version": self.version,
        }


@dataclass(frozen=True)
class VacuumDecision:
    """Whether a scheduled VACUUM is due.

    :param due: no completed VACUUM within ``interval`` (always due when ``interval`` is None).
    :param reason: why (not), in words.
    :param interval: the time between two VACUUMs; None vacuums on every run.
    :param last: the last completed VACUUM within the interval, when there is one.
    :param next_due: when the next VACUUM is due (None when due now).
    """

    due: bool
    reason: str
    interval: timedelta | None
    last: LastVacuum | None = None
    next_due: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "reason": self.reason,
            "interval_seconds": self.interval.total_seconds() if self.interval is not None else None,
            "last": self.last.to_dict() if self.last is not None else None,
            "next_due": self.next_due.isoformat() if self.next_due is not None else None,
        }


@dataclass(frozen=True)
class OptimizeDecision:
    """Whether a scheduled OPTIMIZE is due.

    :param due: OPTIMIZE would rewrite at least ``min_files`` small files (files in bins of two or
        more, and files with deletion vectors).
    :param reason: why (not), in words.
    :param small_files: the files OPTIMIZE would rewrite now.
    :param small_bytes: their bytes.
    :param bins: the files OPTIMIZE would write.
    :param min_files: the threshold.
    :param target_file_size: ``delta.targetFileSize`` (or the argument) and its source.
    """

    due: bool
    reason: str
    small_files: int
    small_bytes: int
    bins: int
    min_files: int
    target_file_size: Setting[int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "reason": self.reason,
            "small_files": self.small_files,
            "small_bytes": self.small_bytes,
            "bins": self.bins,
            "min_files": self.min_files,
            "target_file_size": self.target_file_size.to_dict(),
        }


def optimize_due(
    snapshot: Snapshot,
    *,
    min_files: int = DEFAULT_OPTIMIZE_MIN_FILES,
    options: OptimizeOptions | None = None,
) -> OptimizeDecision:
    """Whether an OPTIMIZE of ``snapshot`` is due: its plan rewrites at least ``min_files`` files.

    :param min_files: the threshold (default 50, Delta's auto-compaction ``minNumFiles``).
    :param options: the OPTIMIZE's options (target size, partition filter).
    """
    if isinstance(min_files, bool) or not isinstance(min_files, int) or min_files < 1:
        raise ValueError(f"min_files must be a positive integer, got {min_files!r}.")
    plan = plan_optimize(snapshot, options)
    target = plan.target_file_size
    counts = (plan.num_files, plan.size, len(plan.bins), min_files, target)
    what = (
        f"{plan.num_files} small file(s) ({plan.size} bytes) would be rewritten into {len(plan.bins)}, "
        f"target {target.value} bytes from the {target.source}"
    )
    if plan.num_files < min_files:
        return OptimizeDecision(False, f"{what}; fewer than the threshold of {min_files}", *counts)
    return OptimizeDecision(True, f"{what}; threshold {min_files}", *counts)


@dataclass(frozen=True)
class PurgeDecision:
    """Whether a PURGE is due: some file's deletion vector deletes rows (or a file holds a column
    dropped under column mapping), so the deleted rows' bytes are still in live files.

    :param files: the files a purge would rewrite.
    :param deletion_vectors: how many of them carry a deletion vector.
    :param bins: the files it would write (at most).
    """

    due: bool
    reason: str
    files: int
    deletion_vectors: int
    bins: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "reason": self.reason,
            "files": self.files,
            "deletion_vectors": self.deletion_vectors,
            "bins": self.bins,
        }


def purge_due(snapshot: Snapshot) -> PurgeDecision:
    """Whether a PURGE of ``snapshot`` would rewrite anything (its plan; no data file is read)."""
    plan = plan_purge(snapshot)
    vectors = sum(b.num_deletion_vectors for b in plan.bins)
    counts = (plan.num_files, vectors, len(plan.bins))
    if not plan.bins:
        return PurgeDecision(False, "no file has rows deleted by a deletion vector", *counts)
    return PurgeDecision(
        True,
        f"{plan.num_files} file(s) ({vectors} with a deletion vector) hold deleted rows or dropped columns",
        *counts,
    )


def checkpoint_due(snapshot: Snapshot, config: TableConfig | None = None) -> CheckpointDecision:
    """Whether a checkpoint of ``snapshot`` is due under Delta's interval.

    :param snapshot: the table's latest snapshot.
    :param config: its configuration (default: the snapshot's, provider defaults included).
    """
    config = config if config is not None else snapshot.config
    interval = config.checkpoint_interval
    version = snapshot.version
    last = snapshot.segment.checkpoint_version
    since = version - (last if last is not None else 0)

    def decision(due: bool, reason: str) -> CheckpointDecision:
        return CheckpointDecision(due, reason, version, last, since, interval)

    if last == version:
        return decision(False, f"version {version} already has a checkpoint")
    where = f"the checkpoint at version {last}" if last is not None else "version 0 (no checkpoint yet)"
    if since < interval.value:
        return decision(
            False, f"{since} commit(s) since {where}, fewer than the checkpoint interval {interval.value}"
        )
    return decision(True, f"{since} commit(s) since {where}, checkpoint interval {interval.value}")


def cleanup_due(config: TableConfig) -> CleanupDecision:
    """Whether scheduled log cleanup may run on a table with this configuration."""
    enabled = config.expired_log_cleanup
    if not enabled.value:
        return CleanupDecision(False, f"the table sets {ENABLE_EXPIRED_LOG_CLEANUP}=false", enabled)
    return CleanupDecision(True, "expired log cleanup is enabled", enabled)


def last_vacuum(table: DeltaTable, since: datetime) -> LastVacuum | None:
    """The last completed VACUUM at or after ``since``; None when there is none.

    Reads only the commits made since ``since`` (a ``VACUUM END`` commit with status COMPLETED,
    as Delta writes on most storage), then falls back to ``_delta_log/_last_vacuum_info``'s
    modification time: Delta writes no VACUUM commits on S3 by default.
    """
    since_ms = int(since.timestamp() * 1000)
    recent = sum(1 for stamp in table.commit_timestamps() if stamp.timestamp >= since_ms)
    for entry in table.history(limit=recent) if recent else []:
        if entry.get("operation") != VACUUM_END or entry.get("timestamp", 0) < since_ms:
            continue
        parameters = info_object(entry.get("operationParameters")) or {}
        status = str(parameters.get("status", "COMPLETED")).strip('"')
        if status.upper() == "COMPLETED":
            stamp = datetime.fromtimestamp(entry["timestamp"] / 1000, tz=UTC)
            return LastVacuum(
                stamp,
                f"VACUUM END at version {entry['version']} ({stamp.isoformat(timespec='seconds')})",
                entry["version"],
            )
    info = table.storage.info(table.storage.log_path(LAST_VACUUM_INFO))
    if info is not None and info.modification_time >= since_ms:
        stamp = datetime.fromtimestamp(info.modification_time / 1000, tz=UTC)
        return LastVacuum(stamp, f"{LAST_VACUUM_INFO} written {stamp.isoformat(timespec='seconds')}")
    return None


def vacuum_due(table: DeltaTable, interval: timedelta | None, now: datetime | None = None) -> VacuumDecision:
    """Whether a scheduled VACUUM is due: none completed within ``interval`` (None: always due)."""
    if interval is None:
        return VacuumDecision(True, "no vacuum interval: VACUUM on every run", None)
    now = now if now is not None else datetime.now(UTC)
    since = now - interval
    last = last_vacuum(table, since)
    if last is None:
        return VacuumDecision(
            True, f"no completed VACUUM since {since.isoformat(timespec='seconds')}", interval
        )
    next_due = last.timestamp + interval
    return VacuumDecision(
        False,
        f"last vacuumed by {last.description}; next due after {next_due.isoformat(timespec='seconds')}",
        interval,
        last,
        next_due,
    )
