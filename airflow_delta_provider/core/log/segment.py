"""Log segment discovery: which files of ``_delta_log`` make up one table version.

A version is the newest complete checkpoint at or below it plus the contiguous commits after it,
found as Delta's ``SnapshotManagement`` finds them: ``_last_checkpoint`` is only a hint where to
start listing (listed again from 0 when it points at no usable checkpoint), incomplete multi-part
and zero-byte checkpoints are ignored, and a gap in the commits is a :class:`VersionGapError` naming
the missing version.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import (
    MissingCheckpointError,
    TableNotFoundError,
    VersionGapError,
    VersionNotFoundError,
)
from airflow_delta_provider.core.log.logfiles import (
    LAST_CHECKPOINT,
    LastCheckpoint,
    LogFile,
    LogFileKind,
    commit_name,
    parse_last_checkpoint,
    parse_log_file,
    version_prefix,
)
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from airflow_delta_provider.core.storage import FileInfo, LogStore

log = get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """One complete checkpoint: a single file, or every part of a multi-part one."""

    version: int
    files: tuple[LogFile, ...]

    @property
    def kind(self) -> LogFileKind:
        return self.files[0].kind

    @property
    def paths(self) -> list[str]:
        return [f.file.path for f in self.files]


@dataclass(frozen=True, slots=True)
class LogSegment:
    """The files that make up one version: a checkpoint (or none) and the commits after it.

    :param version: the version this segment describes.
    :param checkpoint: the checkpoint the replay starts from, None to replay from version 0.
    :param commits: the commit files after the checkpoint, in version order.
    :param checksum: the version checksum (``.crc``) of ``version`` when the listing shows one.
    """

    version: int
    checkpoint: Checkpoint | None
    commits: tuple[LogFile, ...]
    checksum: LogFile | None = None

    @property
    def checkpoint_version(self) -> int | None:
        return self.checkpoint.version if self.checkpoint else None


def read_last_checkpoint(storage: LogStore) -> LastCheckpoint | None:
    """The ``_last_checkpoint`` hint, or None when it is missing, empty or corrupt."""
    path = storage.log_path(LAST_CHECKPOINT)
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        return None
    return parse_last_checkpoint(data, path=storage.to_uri(path))


def list_log_files(storage: LogStore, start_version: int = 0, *, stat: bool = True) -> list[LogFile]:
    """Recognised ``_delta_log`` files from a version on, in name order; strays are dropped.

    :param stat: False to leave each file's size and time to be read when first asked (see
        :meth:`~.storage.LogStore.list_log`): a segment asks only for its checkpoint's and
        checksum's.
    """
    return log_files_of(storage.list_log(version_prefix(start_version), stat=stat))


def log_files_of(listing: Iterable[FileInfo]) -> list[LogFile]:
    """The recognised ``_delta_log`` files of a listing, in its order; strays are dropped."""
    parsed = (parse_log_file(f) for f in listing)
    return [f for f in parsed if f is not None]


def hinted_checkpoint_exists(storage: LogStore, hint: LastCheckpoint) -> bool:
    """Whether the checkpoint ``_last_checkpoint`` names is there and complete (one listing).

    A hint is only a place to start listing; one that names a missing or incomplete
    checkpoint is dangling, and other readers (delta-rs) fail on it.
    """
    files = [f for f in list_log_files(storage, hint.version, stat=False) if f.version == hint.version]
    return any(c.version == hint.version for c in complete_checkpoints(files))


def complete_checkpoints(files: Iterable[LogFile]) -> list[Checkpoint]:
    """The complete checkpoints among listed files, oldest first.

    A version may hold several candidates (a classic file beside a multi-part set,
    two multi-part sets of different sizes); any complete one will do, and a
    single-file one is preferred because it is one read.
    """
    by_version: dict[int, list[LogFile]] = defaultdict(list)
    for f in files:
        if f.is_checkpoint and f.file.size > 0:
            by_version[f.version].append(f)
    checkpoints = []
    for version in sorted(by_version):
        candidates = by_version[version]
        single = [f for f in candidates if f.kind is not LogFileKind.MULTIPART_CHECKPOINT]
        if single:
            # UUID-named (V2) checkpoints are authoritative when present beside a classic one.
            single.sort(key=lambda f: f.kind is not LogFileKind.UUID_CHECKPOINT)
            checkpoints.append(Checkpoint(version, (single[0],)))
            continue
        sets: dict[int, dict[int, LogFile]] = defaultdict(dict)
        for f in candidates:
            sets[f.num_parts][f.part] = f
        for num_parts, parts in sorted(sets.items()):
            if len(parts) == num_parts:
                checkpoints.append(Checkpoint(version, tuple(parts[p] for p in range(1, num_parts + 1))))
                break
        else:
            log.warning(
                "Ignoring the incomplete multi-part checkpoint at version %d (%s).",
                version,
                ", ".join(sorted(f.name for f in candidates)),
            )
    return checkpoints


def build_segment(
    storage: LogStore,
    version: int | None = None,
    *,
    before_checkpoint: int | None = None,
) -> LogSegment:
    """Find the files that make up ``version`` (default: the latest).

    :param storage: the table's storage.
    :param version: the version to load; None for the latest.
    :param before_checkpoint: only use checkpoints older than this version (used to fall
        back when a checkpoint turns out to be unreadable).
    :raises TableNotFoundError: there is no Delta log at the location.
    :raises VersionNotFoundError: the version does not exist or is no longer reconstructable.
    :raises VersionGapError: a commit is missing between the checkpoint and the version.
    """
    hint = read_last_checkpoint(storage) if before_checkpoint is None else None
    start = 0
    if hint is not None and (version is None or hint.version <= version):
        start = hint.version
    files = list_log_files(storage, start, stat=False)
    segment = _segment_from_listing(storage, files, version, before_checkpoint)
    if segment is None and start > 0:
        log.warning(
            "%s points at version %d, but no complete checkpoint is there; listing the whole log.",
            storage.to_uri(storage.log_path(LAST_CHECKPOINT)),
            start,
        )
        files = list_log_files(storage, 0, stat=False)
        segment = _segment_from_listing(storage, files, version, before_checkpoint)
    if segment is None:
        raise _no_segment_error(storage, files, version)
    return segment


def _segment_from_listing(
    storage: LogStore,
    files: Sequence[LogFile],
    version: int | None,
    before_checkpoint: int | None,
) -> LogSegment | None:
    """A segment from one listing, or None when this listing cannot make one.

    None means "list more": the listing holds neither a usable checkpoint nor commit 0.
    """
    limit = version if version is not None else float("inf")
    limit_cp = min(limit, before_checkpoint - 1) if before_checkpoint is not None else limit
    checkpoints = [c for c in complete_checkpoints(files) if c.version <= limit_cp]
    checkpoint = checkpoints[-1] if checkpoints else None
    base = checkpoint.version if checkpoint else -1
    commits = [f for f in files if f.kind is LogFileKind.COMMIT and base < f.version <= limit]
    if checkpoint is None and (not commits or commits[0].version != 0):
        return None
    expected = base + 1
    for commit in commits:
        if commit.version != expected:
            raise VersionGapError(
                f"The Delta log of {storage.root_uri} has no commit for version {expected}: after "
                f"{'checkpoint ' + str(base) if checkpoint else 'version ' + str(expected - 1)} the next "
                f"commit is {commit.name}. The log is incomplete; restore "
                f"{commit_name(expected)} or load an earlier version.",
                missing_version=expected,
                path=storage.to_uri(storage.log_path(commit_name(expected))),
            )
        expected += 1
    latest = commits[-1].version if commits else base
    if version is not None and latest < version:
        raise VersionNotFoundError(
            f"Version {version} of {storage.root_uri} does not exist; the latest version is {latest}."
        )
    checksum = next(
        (f for f in files if f.kind is LogFileKind.CHECKSUM and f.version == latest and f.file.size > 0), None
    )
    return LogSegment(latest, checkpoint, tuple(commits), checksum)


def _no_segment_error(storage: LogStore, files: Sequence[LogFile], version: int | None) -> Exception:
    commits = [f for f in files if f.kind is LogFileKind.COMMIT]
    checkpoints = [f for f in files if f.is_checkpoint]
    if not commits and not checkpoints:
        return TableNotFoundError(
            f"No Delta table at {storage.root_uri}: {storage.to_uri(storage.log_dir)} holds no commits "
            f"or checkpoints. Check the location, or create the table first."
        )
    if version is not None and (commits or checkpoints):
        earliest = min(f.version for f in [*commits, *checkpoints])
        if version < earliest:
            return VersionNotFoundError(
                f"Version {version} of {storage.root_uri} cannot be reconstructed: the earliest log file "
                f"is for version {earliest} and there is no checkpoint at or before version {version} "
                f"(older log files were cleaned up)."
            )
    if checkpoints and not complete_checkpoints(checkpoints):
        return MissingCheckpointError(
            f"The Delta log of {storage.root_uri} has no complete checkpoint and no commit 0 to replay "
            f"from: {', '.join(f.name for f in checkpoints)} is incomplete or empty.",
            path=storage.to_uri(checkpoints[0].file.path),
        )
    first = commits[0] if commits else checkpoints[0]
    return VersionGapError(
        f"The Delta log of {storage.root_uri} starts at {first.name} with no checkpoint to start from: "
        f"version 0 is missing. The log is incomplete.",
        missing_version=0,
        path=storage.to_uri(storage.log_path(commit_name(0))),
    )
