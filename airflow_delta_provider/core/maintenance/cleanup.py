"""Expired-log cleanup, exactly as Delta's ``MetadataCleanup`` does it.

Log files go only in whole groups that end right before a complete checkpoint, and only when the
group's last file is older than ``delta.logRetentionDuration`` (truncated to UTC midnight), so that
every version from that checkpoint on stays reconstructable (``MetadataCleanup.listExpiredDeltaLogs``
and ``BufferingLogDeletionIterator``). Where delta-rs differs this module follows Delta; the rules,
rule by rule, are in docs/maintenance.md ("Log cleanup").
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import (
    DeltaError,
    InvalidPathError,
    RetentionError,
)
from airflow_delta_provider.core.log.checkpoint_reader import read_checkpoint_small_actions
from airflow_delta_provider.core.log.logfiles import SIDECAR_DIR, LogFileKind, is_temp_file
from airflow_delta_provider.core.log.segment import (
    Checkpoint,
    complete_checkpoints,
    log_files_of,
    read_last_checkpoint,
)
from airflow_delta_provider.core.protocol.actions import Protocol
from airflow_delta_provider.core.protocol.features import (
    Operation,
    check_supported,
    reader_features,
    writer_features,
)
from airflow_delta_provider.core.protocol.table_config import LOG_RETENTION, Setting, TableConfig
from airflow_delta_provider.core.utils.arguments import check_bool, check_positive_int
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from airflow_delta_provider.core.log.logfiles import LogFile
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import FileInfo, LogStore

log = get_logger(__name__)


STAGED_COMMITS_DIR = "_staged_commits"
_STAGED_COMMIT_RE = re.compile(r"^(\d{20})\.[0-9a-fA-F-]{36}\.json$")
_CHECKPOINT_KINDS = frozenset(
    {LogFileKind.CLASSIC_CHECKPOINT, LogFileKind.MULTIPART_CHECKPOINT, LogFileKind.UUID_CHECKPOINT}
)
_BUFFERED_KINDS = _CHECKPOINT_KINDS | {LogFileKind.COMMIT, LogFileKind.CHECKSUM}


@dataclass(frozen=True)
class CleanupResult:
    """What a log cleanup deleted (or, in a dry run, would delete).

    :param table_uri: the table.
    :param cutoff: log files last modified at or before this time may go (a UTC midnight).
    :param retention: the log retention used and where it came from.
    :param dry_run: True when nothing was deleted, only planned.
    :param files: absolute URIs of the files deleted (or to delete), as in ``VacuumResult``:
        commits, checkpoints and ``.crc`` files of ``_delta_log``, sidecars and staged commits
        below it, expired temp files of killed writers (``.<name>.<uuid>.tmp``) included.
    :param num_bytes: their total size.
    :param earliest_retained_version: the oldest version that can still be loaded after the
        cleanup (None when the log holds no commit).
    :param checkpoint_version: the newest checkpoint the deleted groups ended at.
    :param skipped_reason: why no log file (commit, checkpoint, ``.crc``) could be deleted,
        when none could be; expired temp files are deleted all the same.
    """

    table_uri: str
    cutoff: datetime
    retention: Setting[timedelta]
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
        """The result as JSON-able values (for XCom)."""
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


@dataclass(frozen=True)
class CleanupPlan:
    """The log files Delta's algorithm selects, before anything is deleted.

    :param expired: the commits, checkpoints and ``.crc`` files of the deleted groups.
    :param compacted: expired compacted logs.
    :param checkpoint_version: the newest checkpoint a deleted group ended at.
    """

    expired: list[LogFile]
    compacted: list[LogFile]
    checkpoint_version: int | None


def cutoff_for(now: datetime, retention: timedelta) -> datetime:
    """Delta's cutoff: ``now - retention``, truncated to UTC midnight.

    :param now: the current time (a naive value is taken as UTC).
    :param retention: the log retention.
    """
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    moment = (now - retention).astimezone(UTC)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0)


def plan_expired(files: Sequence[LogFile], cutoff_ms: int, last_checkpoint_version: int) -> CleanupPlan:
    """Select expired log files as Delta's ``BufferingLogDeletionIterator`` does.

    Files are buffered in name order; a complete checkpoint (with a non-empty file) closes
    the buffer before it, which is deleted when its last file's adjusted modification time
    is at or before the cutoff and its version is below ``last_checkpoint_version``. A file
    whose version is higher than the previous file's but whose time is not later is adjusted
    to one millisecond after it; such a file is buffered as is, even a checkpoint, as Delta
    does. Parts of an incomplete multi-part checkpoint are never selected.

    :param files: the listed ``_delta_log`` files, in name order.
    :param cutoff_ms: the cutoff, milliseconds since the epoch.
    :param last_checkpoint_version: the version ``_last_checkpoint`` names.
    """
    max_version = last_checkpoint_version - 1
    expired: list[LogFile] = []
    buffer: list[tuple[LogFile, int]] = []
    parts: dict[tuple[int, int], list[tuple[LogFile, int]]] = defaultdict(list)
    closing: int | None = None
    last_version, last_mtime = -1, None

    def flush(checkpoint: int) -> None:
        nonlocal closing
        if buffer:
            last, mtime = buffer[-1]
            if mtime <= cutoff_ms and last.version <= max_version:
                expired.extend(f for f, _ in buffer)
                closing = checkpoint
            buffer.clear()

    multipart = LogFileKind.MULTIPART_CHECKPOINT
    for f in files:
        kind = f.kind
        if kind not in _BUFFERED_KINDS:
            continue
        version, info = f.version, f.file
        mtime = info.modification_time
        if last_mtime is not None and last_version < version and last_mtime >= mtime:
            mtime = last_mtime + 1
            buffer.append((f, mtime))
        elif kind in _CHECKPOINT_KINDS and info.size > 0:
            if kind is not multipart:
                flush(version)
                buffer.append((f, mtime))
            else:
                key = (version, f.num_parts)
                parts[key].append((f, mtime))
                if len(parts[key]) == f.num_parts:
                    flush(version)
                    buffer.extend(parts.pop(key))
        else:
            buffer.append((f, mtime))
        last_version, last_mtime = version, mtime
    compacted = [
        f
        for f in files
        if f.kind is LogFileKind.COMPACTED
        and f.file.modification_time <= cutoff_ms
        and f.version <= last_checkpoint_version
    ]
    return CleanupPlan(expired, compacted, closing)


def earliest_reconstructable(files: Iterable[LogFile]) -> int | None:
    """The oldest version that can be loaded from these log files.

    Version 0 when every commit from 0 is there; else, as Delta's
    ``findEarliestReliableCheckpoint``, the oldest complete checkpoint that has its own
    commit and contiguous commits after it up to the newest one.

    :param files: the ``_delta_log`` files that remain.
    """
    files = list(files)
    commits = sorted({f.version for f in files if f.kind is LogFileKind.COMMIT})
    if not commits:
        checkpoints = complete_checkpoints(files)
        return checkpoints[-1].version if checkpoints else None
    # The first version from which the commits run without a gap to the newest one.
    index = len(commits) - 1
    while index > 0 and commits[index - 1] == commits[index] - 1:
        index -= 1
    start = commits[index]
    if start == 0:
        return 0
    present = set(commits)
    for checkpoint in complete_checkpoints(files):
        if checkpoint.version >= start and checkpoint.version in present:
            return checkpoint.version
    return None


@dataclass(frozen=True, kw_only=True)
class CleanupOptions:
    """Every option of a log cleanup (``DeltaTable.cleanup_logs``).

    :param retention: the log retention (``timedelta``, hours, or a Delta interval); default
        the table's ``delta.logRetentionDuration``, then the provider default, then 30 days.
    :param dry_run: only report what would be deleted.
    :param now: the current time (datetime, or milliseconds since the epoch); for tests and replays.
    :param max_workers: delete batches in flight (default: by store, see ``LogStore.delete_many``).
    """

    retention: timedelta | str | float | None = None
    dry_run: bool = False
    now: datetime | int | None = None
    max_workers: int | None = None

    def __post_init__(self) -> None:
        check_bool("dry_run", self.dry_run)
        check_positive_int("max_workers", self.max_workers)
        _as_datetime(self.now)  # refuses a bad clock before anything is read


def cleanup_logs(snapshot: Snapshot, options: CleanupOptions | None = None) -> CleanupResult:
    """Delete expired log files the way Delta does (see the module docstring).

    An explicit call runs even when the table sets ``delta.enableExpiredLogCleanup=false``:
    in Delta that property gates only the *automatic* cleanup after checkpoints, which the
    commit path honours. Nothing outside ``_delta_log`` is ever deleted.

    :param snapshot: the table's latest snapshot (its configuration holds the provider defaults).
    :param options: retention, dry run, clock, workers.
    :raises UnsupportedFeatureError: the table uses a writer feature the core does not know.
    :raises RetentionError: the retention is not valid.
    :raises ValueError: ``snapshot`` is restricted to some partitions.
    """
    snapshot.require_whole("Log cleanup")
    options = options or CleanupOptions()
    protocol = snapshot.protocol
    check_supported(protocol, snapshot.metadata, Operation.LOG_CLEANUP)
    config = snapshot.config
    resolved = config.resolve(LOG_RETENTION, options.retention)
    cutoff = cutoff_for(_as_datetime(options.now), resolved.value)
    cutoff_ms = int(cutoff.timestamp() * 1000)
    storage = snapshot.storage
    uri = storage.root_uri
    result = CleanupResult(uri, cutoff, resolved, options.dry_run)

    hint = read_last_checkpoint(storage)
    # One listing from the first name: writers' temp files (dot-names) sort before every version.
    listing = storage.list_log()
    files = log_files_of(listing)
    v2 = "v2Checkpoint" in (reader_features(protocol) | writer_features(protocol))
    sidecars = storage.list_from(storage.log_path(SIDECAR_DIR)) if v2 else []
    temps = _expired_temp_files(listing, cutoff_ms) + _expired_temp_files(sidecars, cutoff_ms)
    skipped = None
    if hint is None:
        skipped = "the table has no _last_checkpoint; Delta deletes no log file then"
    else:
        plan = plan_expired(files, cutoff_ms, hint.version)
        if not plan.expired and not plan.compacted:
            skipped = (
                f"no complete checkpoint up to version {hint.version} has all the log before it "
                f"older than {cutoff.isoformat()}"
            )
        else:
            skipped = _protection_refusal(storage, protocol, config, files, plan)
            if skipped:
                log.info("Log cleanup of %s skipped: %s", uri, skipped)
    if skipped is not None:
        result = dataclasses.replace(
            result, earliest_retained_version=earliest_reconstructable(files), skipped_reason=skipped
        )
        return _delete_planned(storage, uri, result, temps, options.max_workers)

    doomed: list[FileInfo] = [f.file for f in plan.expired] + [f.file for f in plan.compacted]
    gone = {info.path for info in doomed}
    remaining = [f for f in files if f.file.path not in gone]
    deleted_commits = [f.version for f in plan.expired if f.kind is LogFileKind.COMMIT]
    if deleted_commits:
        doomed += _staged_commits(storage, max(deleted_commits))
    if v2 and any(f.is_checkpoint for f in plan.expired):
        doomed += _unreferenced_sidecars(storage, sidecars, remaining, cutoff_ms)
    doomed += temps
    uris = _uris_inside_log(storage, doomed)
    result = dataclasses.replace(
        result,
        files=uris,
        num_bytes=sum(f.size for f in doomed),
        earliest_retained_version=earliest_reconstructable(remaining),
        checkpoint_version=plan.checkpoint_version,
    )
    if options.dry_run:
        return result
    log.info(
        "Deleting %d log file(s) of %s older than %s (groups up to the checkpoint at version %s).",
        len(doomed),
        uri,
        cutoff.isoformat(),
        plan.checkpoint_version,
    )
    storage.delete_many([f.path for f in doomed], max_workers=options.max_workers)
    return result


def _protection_refusal(
    storage: LogStore,
    protocol: Protocol,
    config: TableConfig,
    files: Sequence[LogFile],
    plan: CleanupPlan,
) -> str | None:
    """Why ``checkpointProtection`` forbids this cleanup (Delta's ``metadataCleanupAllowed``), or None."""
    if "checkpointProtection" not in writer_features(protocol) or not plan.expired:
        return None
    protected = config.checkpoint_protection_before_version
    if protected <= 0:
        return None
    commits: list[int] = []
    for f in plan.expired:  # name order; Delta stops at the first commit at or past the version
        if f.kind is LogFileKind.COMMIT:
            if f.version > protected - 1:
                break
            commits.append(f.version)
    start, end = (min(commits), max(commits)) if commits else (0, 0)
    if end >= protected - 1:
        return None  # everything below the protected version goes in this one run
    boundary = end + 1
    if any(c.version == boundary for c in complete_checkpoints(files)):
        return None
    if _all_protocols_supported(storage, files, start, boundary):
        return None
    return (
        f"checkpointProtection: the log below version {protected} may only be removed all at once, this "
        f"run would stop at version {boundary} without a checkpoint there, and the protocols of versions "
        f"{start}-{boundary} cannot all be confirmed from their .crc files"
    )


def _all_protocols_supported(storage: LogStore, files: Sequence[LogFile], start: int, end: int) -> bool:
    """Every version in ``[start, end]`` has a ``.crc`` with a protocol the core reads (and, at ``end``,
    writes: Delta checkpoints that version)."""
    checksums = {f.version: f for f in files if f.kind is LogFileKind.CHECKSUM and start <= f.version <= end}
    if len(checksums) != end - start + 1:
        return False
    for version, f in checksums.items():
        try:
            payload = json.loads(storage.read_bytes(f.file.path))
            protocol = Protocol.from_json(payload["protocol"])
            # Delta checkpoints the boundary version: there the cleanup's own rules apply.
            check_supported(protocol, None, Operation.LOG_CLEANUP if version == end else Operation.READ)
        except (DeltaError, OSError, ValueError, KeyError, TypeError):
            return False
    return True


def _staged_commits(storage: LogStore, max_version: int) -> list[FileInfo]:
    """Staged (unbackfilled) commits up to the newest deleted commit, as Delta deletes them."""
    listed = storage.list_from(storage.log_path(STAGED_COMMITS_DIR))
    selected = []
    for info in listed:
        match = _STAGED_COMMIT_RE.match(info.name)
        if match and int(match[1]) <= max_version:
            selected.append(info)
    return selected


def _unreferenced_sidecars(
    storage: LogStore, sidecars: Sequence[FileInfo], remaining: Sequence[LogFile], cutoff_ms: int
) -> list[FileInfo]:
    """Sidecars older than the cutoff that no remaining checkpoint references.

    As Delta, every remaining single-file checkpoint (classic-named or UUID-named) is read,
    whatever its version, and a sidecar is kept while its time is not strictly before the
    cutoff, so an in-progress checkpoint's sidecars are never touched.

    :param sidecars: the listing of ``_delta_log/_sidecars``.
    """
    sidecars = [s for s in sidecars if not is_temp_file(s.name)]
    if not sidecars:
        return []
    referenced: set[str] = set()
    for f in remaining:
        if f.kind in (LogFileKind.CLASSIC_CHECKPOINT, LogFileKind.UUID_CHECKPOINT) and f.file.size > 0:
            for action in read_checkpoint_small_actions(storage, Checkpoint(f.version, (f,))):
                sidecar = action.get("sidecar")
                if sidecar and sidecar.get("path"):
                    referenced.add(str(sidecar["path"]).rsplit("/", 1)[-1])
    return [s for s in sidecars if s.modification_time < cutoff_ms and s.name not in referenced]


def _expired_temp_files(listing: Sequence[FileInfo], cutoff_ms: int) -> list[FileInfo]:
    """Writers' temp files (``.<name>.<uuid>.tmp``) of a directory listing, last modified at or
    before the cutoff."""
    found = []
    for info in listing:  # sorted by name: dot-names come before versions and uuids
        if info.name >= "/":
            break
        if info.modification_time <= cutoff_ms and is_temp_file(info.name):
            found.append(info)
    return found


def _delete_planned(
    storage: LogStore, uri: str, result: CleanupResult, doomed: list[FileInfo], max_workers: int | None
) -> CleanupResult:
    """Report (and, unless a dry run, delete) ``doomed``: here, only temp files."""
    if not doomed:
        return result
    result = dataclasses.replace(
        result, files=_uris_inside_log(storage, doomed), num_bytes=sum(f.size for f in doomed)
    )
    if not result.dry_run:
        log.info("Deleting %d expired temp file(s) of killed writers in the log of %s.", len(doomed), uri)
        storage.delete_many([f.path for f in doomed], max_workers=max_workers)
    return result


def _uris_inside_log(storage: LogStore, doomed: Iterable[FileInfo]) -> list[str]:
    """The URIs of files inside ``_delta_log``; refuses (before any delete) a path outside it."""
    log_dir = storage.log_dir
    uris = []
    for info in doomed:
        relative = info.path[len(log_dir) + 1 :] if info.path.startswith(log_dir + "/") else None
        if not relative or any(part in ("", ".", "..") for part in relative.split("/")):
            raise InvalidPathError(
                f"Refusing log cleanup: {info.path} is not inside {log_dir}; nothing was deleted."
            )
        uris.append(storage.to_uri(info.path))
    return uris


def _as_datetime(now: datetime | int | None) -> datetime:
    if now is None:
        return datetime.now(UTC)
    if isinstance(now, bool) or not isinstance(now, datetime | int):
        raise RetentionError(f"now={now!r} is not a datetime or milliseconds since the epoch.")
    if isinstance(now, int):
        return datetime.fromtimestamp(now / 1000, UTC)
    return now if now.tzinfo is not None else now.replace(tzinfo=UTC)
