"""VACUUM: delete the files a Delta table no longer needs, the way Delta (Spark) does.

Follows delta-spark's ``VacuumCommand.gc``: a file stays while it is live or was removed within
``delta.deletedFileRetentionDuration``; FULL lists the table root for candidates, LITE reads the
removes of the commits since the last VACUUM; a real run commits ``VACUUM START`` and ``END``.
Every candidate is checked to lie strictly under the table root before the first deletion. The
rules, and where this core deliberately keeps more than Spark, are in docs/maintenance.md.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from airflow_delta_provider.core.errors import DeleteFilesError, VacuumDeleteError
from airflow_delta_provider.core.maintenance.vacuum.plan import (
    HiddenNames,
    VacuumEngine,
    VacuumPlan,
    VacuumRules,
    check_under_root,
    plan_vacuum,
)
from airflow_delta_provider.core.maintenance.vacuum.record import (
    LAST_VACUUM_INFO,
    VACUUM_END,
    VACUUM_START,
    commit_end,
    commit_start,
    read_last_vacuum_info,
    should_log_commits,
    write_last_vacuum_info,
)
from airflow_delta_provider.core.maintenance.vacuum.result import VacuumResult, VacuumStatus
from airflow_delta_provider.core.maintenance.vacuum.retention import (
    ResolvedVacuumRetention,
    check_retention_safety,
    millis,
    resolve_vacuum_retention,
)
from airflow_delta_provider.core.protocol.features import Operation, check_supported
from airflow_delta_provider.core.protocol.table_config import interval_text
from airflow_delta_provider.core.storage.base import DELETE_BATCH
from airflow_delta_provider.core.utils.arguments import check_bool, check_positive_int
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.protocol.actions import Metadata, Protocol
    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

__all__ = [
    "DELETE_BATCH",
    "LAST_VACUUM_INFO",
    "VACUUM_END",
    "VACUUM_START",
    "HiddenNames",
    "ResolvedVacuumRetention",
    "VacuumEngine",
    "VacuumMode",
    "VacuumOptions",
    "VacuumPlan",
    "VacuumResult",
    "VacuumRules",
    "VacuumStatus",
    "check_vacuumable",
    "read_last_vacuum_info",
    "resolve_vacuum_retention",
    "vacuum",
]

log = get_logger(__name__)

VacuumMode = Literal["full", "lite"]


@dataclass(frozen=True, kw_only=True)
class VacuumOptions:
    """Every option of a VACUUM (``DeltaTable.vacuum``).

    :param retention: how long removed files are kept: a ``timedelta``, a number of hours, or a
        Delta interval (``"interval 7 days"``, ``"168 hours"``). None: the table's
        ``delta.deletedFileRetentionDuration``, else the provider default, else 7 days.
    :param dry_run: only list what would be deleted; nothing is deleted or committed.
    :param mode: ``full`` (list the table root) or ``lite`` (read removed files from the log).
    :param enforce_retention_duration: refuse a retention shorter than the table's (Delta's
        ``retentionDurationCheck``). Switch off only when no writer can be running.
    :param max_workers: delete batches in flight (default: by store, see ``LogStore.delete_many``).
    :param now: the clock (``datetime``, naive = UTC, or epoch milliseconds); default: now.
    :param log_commits: write ``VACUUM START``/``VACUUM END`` commits. None (default): as Delta
        does, on local, HDFS, Azure and GCS tables but not on S3.
    :param engine: where a FULL VACUUM lists the table and where every VACUUM deletes (a
        :class:`VacuumEngine`, e.g. a Spark job's executors); default: this process, through the
        store. The rules (retention, protected paths, hidden names, the root check, the records)
        stay here whatever the engine.
    """

    retention: timedelta | str | float | None = None
    dry_run: bool = False
    mode: VacuumMode | str = "full"
    enforce_retention_duration: bool = True
    max_workers: int | None = None
    now: datetime | int | None = None
    log_commits: bool | None = None
    engine: VacuumEngine | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "mode", _check_mode(self.mode))
        check_bool("dry_run", self.dry_run)
        check_bool("enforce_retention_duration", self.enforce_retention_duration)
        if self.log_commits is not None:
            check_bool("log_commits", self.log_commits)
        check_positive_int("max_workers", self.max_workers)
        _now_millis(self.now)


def vacuum(
    snapshot: Snapshot, options: VacuumOptions | None = None, post_commit_hooks: Sequence[PostCommitHook] = ()
) -> VacuumResult:
    """Delete the files the table no longer references and that are older than the retention.

    :param snapshot: the table's latest snapshot (its configuration holds the provider defaults).
    :param options: see :class:`VacuumOptions`.
    :param post_commit_hooks: work after the ``VACUUM START``/``END`` commits land.
    :raises VacuumRetentionTooShortError: the retention is shorter than the table's.
    :raises VacuumRetentionNegativeError: the retention is negative.
    :raises VacuumLiteError: LITE cannot be exact on this table; run FULL.
    :raises UnsupportedFeatureError: the table uses a writer feature VACUUM cannot honour.
    :raises InvalidPathError: a candidate resolved outside the table root (nothing deleted).
    :raises VacuumDeleteError: the store refused some deletions (``VACUUM END`` says FAILED).
    :raises ValueError: ``snapshot`` is restricted to some partitions.
    """
    snapshot.require_whole("VACUUM")
    options = options or VacuumOptions()
    mode_name, dry_run = str(options.mode), options.dry_run
    now_ms = _now_millis(options.now)
    storage = snapshot.storage
    uri = storage.root_uri
    check_vacuumable(snapshot.protocol, snapshot.metadata)
    config = snapshot.config
    config.warn_on_incompatible_retentions()
    resolved = resolve_vacuum_retention(options.retention, config)
    check_retention_safety(resolved, enforce=options.enforce_retention_duration, table_uri=uri)
    delete_before_ms = now_ms - millis(resolved.effective.value)
    delete_before = datetime.fromtimestamp(delete_before_ms / 1000, tz=UTC)
    log.info(
        "VACUUM %s%s of %s at version %d: files untracked since before %s (retention %s, from the %s).",
        mode_name.upper(),
        " (dry run)" if dry_run else "",
        uri,
        snapshot.version,
        delete_before.isoformat(timespec="seconds"),
        interval_text(resolved.effective.value),
        resolved.effective.source,
    )

    plan = plan_vacuum(snapshot, delete_before_ms, mode=mode_name, engine=options.engine)
    paths = [p for p, _ in plan.files]
    check_under_root(storage, paths + plan.directories, resolve_links=mode_name == "lite")
    files = tuple(storage.path.to_uris(paths))
    directories = tuple(storage.path.to_uris(plan.directories))
    result = VacuumResult(
        table_uri=uri,
        version=snapshot.version,
        mode=mode_name,
        dry_run=dry_run,
        retention=resolved.effective,
        delete_before=delete_before,
        files=files,
        num_files=len(files),
        num_bytes=plan.num_bytes,
        directories=directories,
        num_directories=len(directories),
        eligible_start_version=plan.eligible_start_version,
        eligible_end_version=plan.eligible_end_version,
        enforce_retention_duration=options.enforce_retention_duration,
    )
    if dry_run:
        log.info(
            "VACUUM dry run of %s: %d file(s) (%d bytes) and %d empty director(y/ies) can be deleted.",
            uri,
            result.num_files,
            result.num_bytes,
            result.num_directories,
        )
        return result

    return _delete_planned(snapshot, plan, resolved, result, options, post_commit_hooks)


def _delete_planned(
    snapshot: Snapshot,
    plan: VacuumPlan,
    resolved: ResolvedVacuumRetention,
    result: VacuumResult,
    options: VacuumOptions,
    post_commit_hooks: Sequence[PostCommitHook],
) -> VacuumResult:
    """Delete what ``plan`` selected, between the ``VACUUM START`` and ``END`` records (when
    logged), then move ``_last_vacuum_info`` forward."""
    storage = snapshot.storage
    uri = storage.root_uri
    logged = should_log_commits(storage) if options.log_commits is None else options.log_commits
    start_version = None
    if logged:
        to_delete = (len(plan.files) + len(plan.directories), plan.num_bytes)
        start_version = commit_start(
            snapshot, to_delete, resolved, options.enforce_retention_duration, post_commit_hooks
        )
    try:
        deleted = _delete(storage, [p for p, _ in plan.files], options.max_workers, options.engine)
        deleted += storage.delete_empty_directories(plan.directories)
    except BaseException as err:
        end = commit_end(storage, VacuumStatus.FAILED, None, post_commit_hooks) if logged else None
        log.error(
            "VACUUM of %s failed while deleting files (%s)%s; files not yet deleted stay until the "
            "next VACUUM.",
            uri,
            err,
            f"; VACUUM END (FAILED) committed at version {end}" if end is not None else "",
        )
        raise
    end_version = None
    if logged:
        metrics = {"numDeletedFiles": deleted, "numVacuumedDirectories": plan.listed_directories + 1}
        end_version = commit_end(storage, VacuumStatus.COMPLETED, metrics, post_commit_hooks)
    last_vacuum = write_last_vacuum_info(storage, plan.outside_retention_version)
    log.info(
        "VACUUM of %s deleted %d file(s) and director(y/ies) (%d bytes planned) not needed since %s.",
        uri,
        deleted,
        result.num_bytes,
        result.delete_before.isoformat(timespec="seconds"),
    )
    return replace(
        result,
        num_deleted=deleted,
        start_version=start_version,
        end_version=end_version,
        status=VacuumStatus.COMPLETED.value,
        last_vacuum_version=last_vacuum,
    )


def _check_mode(mode: Any) -> str:
    text = mode.strip().lower() if isinstance(mode, str) else mode
    if text not in ("full", "lite"):
        raise ValueError(f"mode must be 'full' or 'lite', got {mode!r}.")
    return text


def _now_millis(now: datetime | int | None) -> int:
    if now is None:
        return int(time.time() * 1000)
    if isinstance(now, bool) or not isinstance(now, int | datetime):
        raise ValueError(f"now must be a datetime or epoch milliseconds, got {now!r}.")
    if isinstance(now, int):
        return now
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return int(now.timestamp() * 1000)


def check_vacuumable(protocol: Protocol, metadata: Metadata | None = None) -> None:
    """Refuse to VACUUM a table whose protocol asks for something this core cannot honour.

    Delta runs the full writer-protocol check before VACUUM (``deltaLog.protocolWrite``); the
    ``vacuumProtocolCheck`` feature makes that check mandatory for every VACUUM client. What
    VACUUM does with each feature is in :mod:`airflow_delta_provider.core.protocol.features`.

    :raises UnsupportedFeatureError: naming the feature (and ``vacuumProtocolCheck``).
    """
    check_supported(protocol, metadata, Operation.VACUUM)


def _delete(
    storage: LogStore, paths: Sequence[str], max_workers: int | None, engine: VacuumEngine | None
) -> int:
    """Delete the planned files through the store (batched, bounded parallel, with progress) or the engine."""
    try:
        if engine is not None:
            return engine.delete_many(storage, paths, max_workers) if paths else 0
        return storage.delete_many(paths, max_workers=max_workers)
    except DeleteFilesError as err:
        raise VacuumDeleteError(str(err), failed=err.failed) from err
