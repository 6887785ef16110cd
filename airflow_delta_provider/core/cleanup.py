"""Expired-log cleanup, exactly as Delta's ``MetadataCleanup`` does it.

Delta deletes log files only in whole groups that end before a *complete* checkpoint,
and only when the group's newest file is older than the cutoff, so that every version
from that checkpoint on stays reconstructable:

* the cutoff is ``now - delta.logRetentionDuration`` (default 30 days) truncated to UTC
  midnight;
* nothing happens without ``_last_checkpoint``; only checkpoints up to the one it names count;
* modification times are made monotonic first (a file not newer than the one before it
  counts as one millisecond newer), so a copied or touched log cannot open a hole;
* every kind of log file before the chosen checkpoint goes: commits, classic, multi-part
  and UUID checkpoints, ``.crc`` files, compacted logs; the checkpoint's own version keeps
  its commit, checkpoint and ``.crc``; sidecars no retained checkpoint references go when
  older than the cutoff and a checkpoint was deleted;
* a table with ``checkpointProtection`` is only cleaned when everything below
  ``delta.requireCheckpointProtectionBeforeVersion`` goes in the same run.

delta-rs differs (it leaves multi-part, UUID, ``.crc`` and compacted files, and does not
make timestamps monotonic); this module follows Delta.
"""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import InvalidPathError, UnsupportedFeatureError
from airflow_delta_provider.core.logfiles import SIDECAR_DIR, LogFileKind
from airflow_delta_provider.core.protocol import MAX_WRITER_VERSION, Operation, writer_features
from airflow_delta_provider.core.retention import LOG_RETENTION, ResolvedRetention, resolve_retention
from airflow_delta_provider.core.segment import complete_checkpoints, list_log_files, read_last_checkpoint

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_delta_provider.core.segment import Checkpoint, LogFile
    from airflow_delta_provider.core.table import DeltaTable

log = logging.getLogger(__name__)

ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
PROTECTION_BEFORE_VERSION = "delta.requireCheckpointProtectionBeforeVersion"
_BATCH = 1000


@dataclass(frozen=True)
class CleanupResult:
    """What a log cleanup deleted (or, in a dry run, would delete).

    :param cutoff: files at or before this time may go (UTC midnight).
    :param files: the deleted log file names (relative to ``_delta_log``).
    :param earliest_retained_version: the oldest version still reconstructable.
    :param skipped_reason: why nothing could be deleted, when that is the case.
    """

    table_uri: str
    cutoff: datetime
    retention: ResolvedRetention
    dry_run: bool
    files: list[str] = field(default_factory=list)
    num_bytes: int = 0
    earliest_retained_version: int | None = None
    checkpoint_version: int | None = None
    skipped_reason: str | None = None

    @property
    def num_files(self) -> int:
        return len(self.files)

    def to_dict(self) -> dict[str, Any]:
        return {
            "table_uri": self.table_uri,
            "cutoff": self.cutoff.isoformat(),
            "retention": self.retention.to_dict(),
            "dry_run": self.dry_run,
            "files": list(self.files),
            "num_files": self.num_files,
            "num_bytes": self.num_bytes,
            "earliest_retained_version": self.earliest_retained_version,
            "checkpoint_version": self.checkpoint_version,
            "skipped_reason": self.skipped_reason,
        }


def cutoff_for(now: datetime, retention: timedelta) -> datetime:
    """Delta's cutoff: ``now - retention``, truncated to UTC midnight."""
    moment = (now - retention).astimezone(UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def cleanup_logs(
    table: DeltaTable,
    *,
    retention: timedelta | str | float | None = None,
    dry_run: bool = False,
    now: datetime | int | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
    max_workers: int | None = None,
) -> CleanupResult:
    """Delete expired log files the way Delta does (see the module docstring).

    An explicit call runs even when the table sets ``delta.enableExpiredLogCleanup=false``:
    that property gates the *automatic* cleanup after checkpoints, as in Delta.

    :param retention: the log retention (``timedelta``, Delta interval or hours); default
        the table's ``delta.logRetentionDuration``, then the provider default, then 30 days.
    :param dry_run: only report what would be deleted.
    :param now: the current time (datetime, or milliseconds); for tests and replays.
    :raises UnsupportedFeatureError: the table uses a writer feature the core does not know.
    """
    snapshot = table.snapshot()
    _check_cleanable(snapshot.protocol)
    resolved = resolve_retention(
        LOG_RETENTION, explicit=retention, properties=snapshot.properties, provider_defaults=provider_defaults
    )
    moment = _as_datetime(now)
    cutoff = cutoff_for(moment, resolved.value or timedelta(days=30))
    cutoff_ms = int(cutoff.timestamp() * 1000)
    storage = table.storage
    result = CleanupResult(table.uri, cutoff, resolved, dry_run)

    hint = read_last_checkpoint(storage)
    if hint is None:
        return _replace(
            result, skipped_reason="the table has no _last_checkpoint; Delta keeps every log file then"
        )
    files = list_log_files(storage, 0)
    checkpoints = [c for c in complete_checkpoints(files) if c.version <= hint.version]
    boundary = _boundary(files, checkpoints, cutoff_ms)
    earliest = min((f.version for f in files if f.kind is LogFileKind.COMMIT), default=None)
    if boundary is None:
        return _replace(
            result,
            earliest_retained_version=earliest,
            skipped_reason=(
                f"no complete checkpoint has all the log before it older than {cutoff.isoformat()}"
            ),
        )
    protected_before = snapshot.properties.get(PROTECTION_BEFORE_VERSION)
    protected = "checkpointProtection" in writer_features(snapshot.protocol) and protected_before
    if protected and boundary.version < int(protected_before):
        return _replace(
            result,
            earliest_retained_version=earliest,
            skipped_reason=(
                f"checkpointProtection: versions below {protected_before} may only be removed all at "
                f"once, and only those below {boundary.version} are expired"
            ),
        )

    doomed = [f for f in files if _before(f, boundary.version)]
    if any(f.is_checkpoint for f in doomed):
        doomed += _unreferenced_sidecars(table, checkpoints, boundary, cutoff_ms)
    names = [f.file.path[len(storage.log_dir) + 1 :] for f in doomed]
    outside = [f.file.path for f in doomed if not f.file.path.startswith(storage.log_dir + "/")]
    if outside:  # a listing that returned foreign paths: refuse rather than delete them
        raise InvalidPathError(f"Refusing log cleanup: {outside[0]} is not in {storage.log_dir}.")
    result = _replace(
        result,
        files=names,
        num_bytes=sum(f.file.size for f in doomed),
        earliest_retained_version=boundary.version,
        checkpoint_version=boundary.version,
    )
    if dry_run or not doomed:
        return result
    log.info(
        "Deleting %d log file(s) of %s before the checkpoint at version %d (cutoff %s).",
        len(doomed),
        table.uri,
        boundary.version,
        cutoff.isoformat(),
    )
    _delete(table, [f.file.path for f in doomed], max_workers)
    return result


def _boundary(files: list[LogFile], checkpoints: list[Checkpoint], cutoff_ms: int) -> Checkpoint | None:
    """The newest complete checkpoint whose preceding log files are all at or before the cutoff."""
    adjusted: dict[str, int] = {}
    previous = None
    for f in files:  # version order: monotonic modification times, as Delta adjusts them
        mtime = f.file.modification_time
        if previous is not None and mtime <= previous:
            mtime = previous + 1
        adjusted[f.file.path] = mtime
        previous = mtime
    chosen = None
    for checkpoint in checkpoints:
        before = [f for f in files if _before(f, checkpoint.version)]
        if not before:
            continue
        if max(adjusted[f.file.path] for f in before) <= cutoff_ms:
            chosen = checkpoint
        else:
            break  # monotonic: later checkpoints cannot qualify either
    return chosen


def _before(f: LogFile, version: int) -> bool:
    if f.kind is LogFileKind.COMPACTED:
        return f.end_version is not None and f.end_version < version
    return f.version < version


def _unreferenced_sidecars(
    table: DeltaTable, checkpoints: list[Checkpoint], boundary: Checkpoint, cutoff_ms: int
) -> list[Any]:
    from airflow_delta_provider.core.replay import read_checkpoint_small_actions

    storage = table.storage
    directory = f"{storage.log_dir}/{SIDECAR_DIR}"
    sidecars = storage.list_from(directory)
    if not sidecars:
        return []
    referenced: set[str] = set()
    for checkpoint in checkpoints:
        if checkpoint.version < boundary.version:
            continue
        for action in read_checkpoint_small_actions(storage, checkpoint):
            if action.get("sidecar"):
                referenced.add(str(action["sidecar"].get("path", "")).rsplit("/", 1)[-1])
    return [_Sidecar(s) for s in sidecars if s.name not in referenced and s.modification_time <= cutoff_ms]


@dataclass(frozen=True)
class _Sidecar:
    """A sidecar file, shaped like a log file for deletion."""

    file: Any
    is_checkpoint: bool = False


def _delete(table: DeltaTable, paths: list[str], max_workers: int | None) -> None:
    storage = table.storage
    batches = [paths[i : i + _BATCH] for i in range(0, len(paths), _BATCH)]
    workers = max_workers or (1 if storage.is_local else 8)
    done = 0
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(batches)))) as pool:
        for batch in pool.map(lambda b: (storage.delete(b), b)[1], batches):
            done += len(batch)
            if len(paths) > _BATCH:
                log.info("Deleted %d of %d log files of %s.", done, len(paths), table.uri)


def _check_cleanable(protocol: Any) -> None:
    from airflow_delta_provider.core.checkpoint import CHECKPOINT_WRITER_FEATURES

    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise UnsupportedFeatureError(
            f"The table requires Delta writer version {protocol.min_writer_version}; refusing log cleanup.",
            feature=f"minWriterVersion={protocol.min_writer_version}",
            operation=Operation.LOG_CLEANUP.value,
        )
    unknown = sorted(writer_features(protocol) - CHECKPOINT_WRITER_FEATURES - {"checkpointProtection"})
    if unknown:
        raise UnsupportedFeatureError(
            f"The table uses the writer feature {unknown[0]!r}, which this core does not implement; log "
            f"cleanup could delete files it needs. Clean the log with an engine that supports it.",
            feature=unknown[0],
            operation=Operation.LOG_CLEANUP.value,
        )


def _as_datetime(now: datetime | int | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if isinstance(now, int):
        return datetime.fromtimestamp(now / 1000, UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)


def _replace(result: CleanupResult, **changes: Any) -> CleanupResult:
    import dataclasses

    return dataclasses.replace(result, **changes)
