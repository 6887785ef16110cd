"""RESTORE: a table back to an earlier version in one commit (Delta's ``RESTORE TABLE``).

As Delta's ``RestoreTableCommand``: compared on ``(path, deletion-vector id)``, the target's files
the table no longer has are added back as the target had them and the table's other files removed;
the target's metadata and the merged protocol are committed without conflict resolution (Delta's
``commitLarge``). Every file to add back, and its deletion-vector file, must exist.
:func:`find_tagged_commits` finds "the version before run X". docs/lifecycle.md has the rules.
"""

from __future__ import annotations

import dataclasses
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import (
    ConcurrentModificationError,
    ConcurrentWriteError,
    RestoreMissingFilesError,
    RestoreTimestampEarlierError,
    RestoreTimestampGreaterError,
    RestoreVersionNotFoundError,
    TaggedCommitsNotFoundError,
    TimestampEarlierThanRetentionError,
    TimestampLaterThanLatestCommitError,
    TimeTravelBeyondRetentionError,
    VersionNotFoundError,
)
from airflow_delta_provider.core.log.deletion_vectors import deletion_vector_path, deletion_vector_unique_id
from airflow_delta_provider.core.log.logfiles import LogFileKind
from airflow_delta_provider.core.log.segment import complete_checkpoints, list_log_files
from airflow_delta_provider.core.log.snapshot import load_snapshot
from airflow_delta_provider.core.log.timeline import (
    CommitTimeRule,
    commit_info,
    commit_times,
    commit_timestamps,
    to_millis,
    version_at,
)
from airflow_delta_provider.core.protocol.actions import AddFile, DomainMetadata, RemoveFile
from airflow_delta_provider.core.protocol.constraints import merged_identity_schema
from airflow_delta_provider.core.protocol.features import Operation, merge_protocols, writer_features
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import (
    CommitPlan,
    CommitProperties,
    CommitResult,
    ReadSet,
)
from airflow_delta_provider.core.transaction.create import remove_actions
from airflow_delta_provider.core.utils.arguments import check_bool
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.protocol.actions import Metadata, Protocol
    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

__all__ = [
    "CLOCK_SKEW_MARGIN",
    "MAX_MISSING_FILES_NAMED",
    "NO_OP",
    "RESTORE",
    "RestoreOptions",
    "RestorePlan",
    "RestoreResult",
    "TaggedCommit",
    "TaggedCommits",
    "commit_restore",
    "find_tagged_commits",
    "plan_restore",
    "recorded_restore",
    "restore",
]

log = get_logger(__name__)

RESTORE = "RESTORE"
#: :attr:`RestoreResult.reason` when the target is the current version (Delta commits nothing).
NO_OP = "no_op"
#: At most this many missing files are named by :class:`~.errors.RestoreMissingFilesError` (Delta's 100).
MAX_MISSING_FILES_NAMED = 100
#: Files checked for existence at a time.
_CHECK_WORKERS = 16
#: How far a store's clock (commit times) may lag the clock of a time a tag holds (the scheduler's,
#: for an Airflow run's logical date): the search for a run's commits reads this far past it.
CLOCK_SKEW_MARGIN = timedelta(hours=1)
CLUSTERING_DOMAIN = "delta.clustering"


@dataclass(frozen=True, kw_only=True)
class RestoreOptions(CommitProperties):
    """What a RESTORE takes (``DeltaTable.restore``), beside the
    :class:`~.commit_plan.CommitProperties` every commit takes (with ``app_id`` and ``app_version``
    a restore is idempotent).

    :param version: the version to restore.
    :param timestamp: instead of ``version``: restore the last version committed at or before it
        (a ``datetime``, naive meaning UTC; an ISO-8601 string; milliseconds since the epoch).
    :param enforce_retention_duration: refuse a target committed before
        ``delta.deletedFileRetentionDuration`` (Delta 4.1+). With False such a restore is allowed;
        the files it needs are still checked one by one.
    """

    version: int | None = field(default=None, kw_only=False)
    timestamp: datetime | str | int | float | None = None
    enforce_retention_duration: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("enforce_retention_duration", self.enforce_retention_duration)
        if (self.version is None) == (self.timestamp is None):
            raise ValueError(
                "Either the version or the timestamp to restore should be given, not both and not neither; "
                f"got version={self.version!r}, timestamp={self.timestamp!r}."
            )
        version = self.version
        if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 0):
            raise ValueError(f"version must be a non-negative integer (a table version), got {version!r}.")
        if self.timestamp is not None:
            to_millis(self.timestamp)  # raises ValueError naming a value that is not a timestamp


@dataclass(frozen=True)
class RestorePlan:
    """What a restore of ``latest`` to ``target`` commits (computed and checked, not committed).

    :param latest: the table as the restore read it.
    :param target: the version restored.
    :param adds: the target's files added back (``dataChange=true``).
    :param removes: the current files the target did not have (``dataChange=true``).
    :param protocol: the merge of both protocols.
    :param metadata: the target's metadata, identity high-water marks merged.
    :param domains: the domain metadata Delta's RESTORE writes (the clustering domain).
    :param parameters: commitInfo ``operationParameters``.
    :param metrics: Delta's RESTORE ``operationMetrics``.
    """

    latest: Snapshot
    target: Snapshot
    adds: tuple[AddFile, ...]
    removes: tuple[RemoveFile, ...]
    protocol: Protocol
    metadata: Metadata
    domains: tuple[DomainMetadata, ...]
    parameters: dict[str, str]
    metrics: dict[str, int]


@dataclass(frozen=True)
class RestoreResult:
    """What a restore did.

    :param version: the version holding the restore; when nothing was committed, the current
        version (``reason="no_op"``) or the version that recorded ``app_id`` at ``app_version``
        (``reason="already_committed"``).
    :param restored_version: the version whose state the table has (or had) after the restore;
        None only when an earlier restore's commit can no longer be read.
    :param committed: whether this call committed.
    :param reason: None for a commit; ``no_op`` or ``already_committed``.
    :param metrics: Delta's RESTORE ``operationMetrics`` (of the recorded commit when already
        committed, when it can be read; empty for a no-op).
    :param commit: the commit's result; None for a no-op.
    """

    version: int
    restored_version: int | None
    committed: bool
    reason: str | None = None
    metrics: Mapping[str, int] = field(default_factory=dict)
    commit: CommitResult | None = None

    @property
    def num_restored_files(self) -> int:
        return int(self.metrics.get("numRestoredFiles", 0))

    @property
    def num_removed_files(self) -> int:
        return int(self.metrics.get("numRemovedFiles", 0))

    @property
    def already_committed(self) -> bool:
        return self.commit is not None and self.commit.already_committed

    @property
    def post_commit_errors(self) -> tuple[str, ...]:
        return self.commit.post_commit_errors if self.commit is not None else ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (for XCom)."""
        return {
            "version": self.version,
            "restored_version": self.restored_version,
            "committed": self.committed,
            "reason": self.reason,
            "operation": RESTORE,
            "num_restored_files": self.num_restored_files,
            "num_removed_files": self.num_removed_files,
            "metrics": dict(self.metrics),
            "read_version": self.commit.read_version if self.commit is not None else self.version,
            "app_id": self.commit.app_id if self.commit is not None else None,
            "app_version": self.commit.app_version if self.commit is not None else None,
            "attempts": self.commit.attempts if self.commit is not None else 0,
            "post_commit_errors": list(self.post_commit_errors),
        }


# --- the restore ---------------------------------------------------------------------------


def restore(
    latest: Snapshot, options: RestoreOptions, post_commit_hooks: Sequence[PostCommitHook] = ()
) -> RestoreResult:
    """Restore the table of ``latest`` to ``options``' version or timestamp (see the module docstring).

    :raises RestoreVersionNotFoundError: the version is outside the versions the log can rebuild.
    :raises RestoreTimestampEarlierError: the timestamp is before the earliest such version.
    :raises RestoreTimestampGreaterError: the timestamp is after the latest commit.
    :raises TimeTravelBeyondRetentionError: the target is older than the deleted-file retention.
    :raises RestoreMissingFilesError: files the target needs are gone (vacuumed); names them.
    :raises ConcurrentWriteError: a concurrent commit changed the table; nothing was committed.
    :raises UnsupportedFeatureError: the restored protocol asks for a feature this core cannot write.
    """
    store = latest.storage
    # Before any work: a retried task whose restore already landed commits nothing again.
    transaction = OptimisticTransaction(store, read_snapshot=latest, properties=options)
    done = transaction.already_committed(RESTORE)
    if done is not None:
        return recorded_restore(latest, done)
    target_version = _target_version(latest, options)
    if target_version == latest.version:
        log.info(
            "%s is already at version %d: nothing to restore (Delta commits nothing either).",
            store.root_uri,
            target_version,
        )
        return RestoreResult(latest.version, target_version, committed=False, reason=NO_OP)
    target = load_snapshot(store, target_version)
    if options.enforce_retention_duration:
        check_retention(latest, target)
    plan = plan_restore(latest, target, options)
    return commit_restore(plan, options, post_commit_hooks)


def _target_version(latest: Snapshot, options: RestoreOptions) -> int:
    """The version ``options`` name, with Delta's RESTORE errors outside the history."""
    uri = latest.storage.root_uri
    if options.timestamp is not None:
        try:
            return version_at(latest, options.timestamp).version
        except TimestampEarlierThanRetentionError as err:
            raise RestoreTimestampEarlierError(f"Cannot restore {uri}: {_lower_first(err)}") from None
        except TimestampLaterThanLatestCommitError as err:
            raise RestoreTimestampGreaterError(f"Cannot restore {uri}: {_lower_first(err)}") from None
    assert options.version is not None
    version = options.version
    earliest = _earliest_version(latest)
    if not earliest <= version <= latest.version:
        raise RestoreVersionNotFoundError(
            f"Cannot restore table {uri} to version {version}. Available versions: [{earliest}, "
            f"{latest.version}]. Restore a version in that range (the log before version {earliest} "
            f"was cleaned up)."
            if earliest > 0
            else f"Cannot restore table {uri} to version {version}. Available versions: [0, "
            f"{latest.version}]."
        )
    return version


def _earliest_version(latest: Snapshot) -> int:
    """The earliest version the log can rebuild: 0 while commit 0 is there, else the earliest
    complete checkpoint (one listing; no commit is read)."""
    files = list_log_files(latest.storage, 0)
    commits = [f.version for f in files if f.kind is LogFileKind.COMMIT]
    if commits and commits[0] == 0:
        return 0
    checkpoints = complete_checkpoints(files)
    return checkpoints[0].version if checkpoints else latest.version


def _lower_first(err: Exception) -> str:
    text = str(err)
    return text[:1].lower() + text[1:]


def recorded_restore(latest: Snapshot, done: CommitResult) -> RestoreResult:
    """The result of a restore an earlier call committed (``done``: the table holds its ``app_id`` at
    ``app_version``): its version, and the restored version and metrics its commitInfo records
    (None and empty when that commit can no longer be read)."""
    info: dict[str, Any] = {}
    if done.version_exact:
        info = commit_info(latest.storage, done.version) or {}
    metrics = {}
    for key, value in (info.get("operationMetrics") or {}).items():
        if isinstance(value, int | str) and str(value).lstrip("-").isdigit():
            metrics[str(key)] = int(value)
    parameters = info.get("operationParameters") or {}
    restored: int | None = None
    if str(parameters.get("version", "")).isdigit():
        restored = int(parameters["version"])
    elif parameters.get("timestamp") is not None:
        try:
            restored = version_at(latest, str(parameters["timestamp"])).version
        except (ValueError, VersionNotFoundError):
            restored = None
    return RestoreResult(
        version=done.version,
        restored_version=restored,
        committed=False,
        reason=done.reason,
        metrics=metrics,
        commit=done,
    )


# --- retention -----------------------------------------------------------------------------


def check_retention(latest: Snapshot, target: Snapshot, now_ms: int | None = None) -> None:
    """Delta 4.1+: refuse a target committed before ``delta.deletedFileRetentionDuration`` (read
    through the latest snapshot's :class:`~.table_config.TableConfig`).

    :raises TimeTravelBeyondRetentionError: naming the version, when it was committed and the retention.
    """
    retention = latest.config.deleted_file_retention
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    cutoff = now - retention.value // timedelta(milliseconds=1)
    committed = _snapshot_timestamp(latest, target)
    if committed >= cutoff:
        return
    hours = retention.value // timedelta(hours=1)
    raise TimeTravelBeyondRetentionError(
        f"Cannot restore {latest.storage.root_uri} to version {target.version}: it was committed at "
        f"{_iso(committed)}, beyond delta.deletedFileRetentionDuration ({hours} HOURS, {retention.source}) "
        f"set on the table, so VACUUM may have deleted files it needs. Restore a version committed after "
        f"{_iso(cutoff)}, or pass enforce_retention_duration=False (the files the restore needs are then "
        f"still checked one by one)."
    )


def _snapshot_timestamp(latest: Snapshot, snapshot: Snapshot) -> int:
    """When the snapshot's version was committed, as time travel dates it (the table's
    :class:`~.timeline.CommitTimeRule`); its checkpoint's modification time when the commit was
    cleaned up."""
    stamp = commit_times(latest.storage, [snapshot.version], CommitTimeRule(latest)).get(snapshot.version)
    if stamp is not None:
        return stamp.timestamp
    checkpoint = snapshot.segment.checkpoint
    found = snapshot.storage.info(checkpoint.files[0].file.path) if checkpoint is not None else None
    return found.modification_time if found is not None else 0


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")


# --- the plan ------------------------------------------------------------------------------


def plan_restore(latest: Snapshot, target: Snapshot, options: RestoreOptions) -> RestorePlan:
    """What restoring ``latest``'s table to ``target`` commits, after checking that every file it
    adds back (and its deletion-vector file) still exists.

    :raises RestoreMissingFilesError: naming up to :data:`MAX_MISSING_FILES_NAMED` missing files.
    """
    store = latest.storage
    current_files = latest.files()
    target_files = target.files()
    current_keys = _file_keys(store, current_files)
    target_keys = _file_keys(store, target_files)
    to_add = target_files.filter(pc.invert(pc.is_in(target_keys, value_set=current_keys)))
    to_remove = current_files.filter(pc.invert(pc.is_in(current_keys, value_set=target_keys)))
    missing = missing_files(store, to_add)
    if missing:
        raise _missing_error(store, target.version, missing)
    now = int(time.time() * 1000)
    adds = tuple(_add_actions(to_add))
    stats = to_remove.column("stats").to_pylist()
    removes = tuple(
        dataclasses.replace(remove, stats=stat)
        for remove, stat in zip(remove_actions(to_remove, now), stats, strict=True)
    )
    metrics = {
        "numRestoredFiles": len(adds),
        "restoredFilesSize": sum(a.size for a in adds),
        "numRemovedFiles": len(removes),
        "removedFilesSize": sum(r.size or 0 for r in removes),
        "numOfFilesAfterRestore": target_files.num_rows,
        "tableSizeAfterRestore": int(pc.sum(target_files.column("size")).as_py() or 0),
    }
    if options.version is not None:
        parameters = {"version": str(options.version)}
    else:
        assert options.timestamp is not None
        parameters = {"timestamp": _iso(to_millis(options.timestamp))}
    metadata = dataclasses.replace(
        target.metadata, schema_string=merged_identity_schema(target.metadata, latest.metadata)
    )
    return RestorePlan(
        latest=latest,
        target=target,
        adds=adds,
        removes=removes,
        protocol=merge_protocols(target.protocol, latest.protocol),
        metadata=metadata,
        domains=restored_domains(target, latest),
        parameters=parameters,
        metrics=metrics,
    )


def _file_keys(store: LogStore, files: pa.Table) -> pa.Array:
    """Each file's logical key, as log replay keys it: canonical path and deletion-vector id."""
    canonical = store.path.canonical
    paths = files.column("path").to_pylist()
    dvs = files.column("deletion_vector").to_pylist()
    keys = []
    for path, dv in zip(paths, dvs, strict=True):
        unique = deletion_vector_unique_id({k: v for k, v in dv.items() if v is not None} if dv else None)
        keys.append(canonical(path) if unique is None else f"{canonical(path)}\x00{unique}")
    return pa.array(keys, pa.string())


def _add_actions(files: pa.Table) -> list[AddFile]:
    """The ``add`` actions of active files (rows of :meth:`Snapshot.files`), ``dataChange=true``."""
    adds = []
    for row in files.to_pylist():
        dv = row.get("deletion_vector")
        tags = row.get("tags")
        adds.append(
            AddFile(
                path=row["path"],
                partition_values=dict(row.get("partition_values") or {}),
                size=row["size"],
                modification_time=row["modification_time"],
                data_change=True,
                stats=row.get("stats"),
                tags=dict(tags) if tags else None,
                deletion_vector={k: v for k, v in dv.items() if v is not None} if dv else None,
                base_row_id=row.get("base_row_id"),
                default_row_commit_version=row.get("default_row_commit_version"),
                clustering_provider=row.get("clustering_provider"),
            )
        )
    return adds


def missing_files(store: LogStore, files: pa.Table) -> list[str]:
    """The data files (paths as in the log) and deletion-vector files (as the descriptor names
    them) of ``files`` that do not exist, in order; at most :data:`MAX_MISSING_FILES_NAMED`."""
    wanted: dict[str, str] = {}  # filesystem path -> the name to report
    for path, dv in zip(
        files.column("path").to_pylist(), files.column("deletion_vector").to_pylist(), strict=True
    ):
        wanted.setdefault(store.path.decode(path), path)
        if dv and dv.get("storageType") in ("u", "p"):
            located = deletion_vector_path({k: v for k, v in dv.items() if v is not None}, store.root)
            wanted.setdefault(store.path.decode(located), located)
    paths = list(wanted)
    if len(paths) > 1:
        with ThreadPoolExecutor(min(_CHECK_WORKERS, len(paths)), thread_name_prefix="delta-restore") as pool:
            found = list(pool.map(store.info, paths))
    else:
        found = [store.info(p) for p in paths]
    if paths:
        log.info("Checked that the %d file(s) the restore adds back exist.", len(paths))
    missing = [wanted[p] for p, info in zip(paths, found, strict=True) if info is None]
    return missing[:MAX_MISSING_FILES_NAMED]


def _missing_error(store: LogStore, version: int, missing: list[str]) -> RestoreMissingFilesError:
    shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
    return RestoreMissingFilesError(
        f"Not all files of version {version} of {store.root_uri} are available: {shown} "
        f"{'is' if len(missing) == 1 else 'are'} missing (deleted by VACUUM, or by hand). Nothing was "
        f"committed. Restore a more recent version (one whose files VACUUM kept), or put the files back.",
        version=version,
        missing=missing,
    )


def restored_domains(target: Snapshot, latest: Snapshot) -> tuple[DomainMetadata, ...]:
    """Delta's ``handleDomainMetadataForRestoreTable``: other domains stay as they are; when the table
    has a clustering domain it gets the target's clustering columns (none when the target was not
    clustered)."""
    current = latest.domain_metadata.get(CLUSTERING_DOMAIN)
    if current is None or current.removed:
        return ()
    restored = target.domain_metadata.get(CLUSTERING_DOMAIN)
    if restored is not None and not restored.removed and "clustering" in writer_features(target.protocol):
        return (DomainMetadata(CLUSTERING_DOMAIN, restored.configuration),)
    empty = json.dumps({"clusteringColumns": [], "domainName": CLUSTERING_DOMAIN}, separators=(",", ":"))
    return (DomainMetadata(CLUSTERING_DOMAIN, empty),)


# --- the commit ----------------------------------------------------------------------------


def commit_restore(
    plan: RestorePlan, options: RestoreOptions, post_commit_hooks: Sequence[PostCommitHook] = ()
) -> RestoreResult:
    """Commit ``plan`` through the one transaction, read set: the whole table as ``plan.latest`` had it.

    :raises ConcurrentWriteError: a concurrent commit changed the table (Delta refuses a lost
        race of RESTORE the same way); nothing was committed.
    """
    latest = plan.latest
    store = latest.storage
    transaction = OptimisticTransaction(
        store, read_snapshot=latest, properties=options, post_commit_hooks=post_commit_hooks
    )
    commit = CommitPlan(
        RESTORE,
        plan.parameters,
        plan.metrics,
        protocol=plan.protocol,
        metadata=plan.metadata,
        domains=plan.domains,
        removes=plan.removes,
        adds=plan.adds,
        read=ReadSet.matching(None, latest.files().column("path").to_pylist()),
        kind=Operation.WRITE,
    )
    try:
        result = transaction.commit(commit)
    except ConcurrentModificationError as err:
        raise ConcurrentWriteError(
            f"A concurrent transaction has written to {store.root_uri} since the restore read it at "
            f"version {latest.version} (version {err.version}: {err.operation or 'a commit'}): {err} "
            f"Nothing was committed. Run the restore again: it then also undoes that commit.",
            version=err.version,
            operation=err.operation,
        ) from err
    if result.committed:
        log.info(
            "Restored %s to version %d at version %d: %d file(s) added back (%d bytes), %d removed "
            "(%d bytes).",
            store.root_uri,
            plan.target.version,
            result.version,
            plan.metrics["numRestoredFiles"],
            plan.metrics["restoredFilesSize"],
            plan.metrics["numRemovedFiles"],
            plan.metrics["removedFilesSize"],
        )
    if not result.committed:  # a concurrent commit recorded this restore's app_id already
        return recorded_restore(latest, result)
    return RestoreResult(
        version=result.version,
        restored_version=plan.target.version,
        committed=True,
        metrics=dict(plan.metrics),
        commit=result,
    )


# --- the commits of a run ------------------------------------------------------------------


@dataclass(frozen=True)
class TaggedCommit:
    """A commit whose commitInfo carries the tags searched for."""

    version: int
    #: when it was committed (ms; as time travel dates it)
    timestamp: int
    operation: str | None
    tags: dict[str, str]


@dataclass(frozen=True)
class TaggedCommits:
    """Every commit of a table that carries some tags (an Airflow run's), oldest first.

    :param tags: the tags searched for.
    :param commits: the commits carrying them, oldest first (at least one).
    :param searched_from: the oldest version whose commitInfo was read.
    """

    tags: dict[str, str]
    commits: tuple[TaggedCommit, ...]
    searched_from: int

    @property
    def first(self) -> TaggedCommit:
        return self.commits[0]

    @property
    def version_before(self) -> int:
        """The version before the first of the commits: what "restore to before them" restores."""
        return self.first.version - 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "tags": dict(self.tags),
            "versions": [c.version for c in self.commits],
            "first_version": self.first.version,
            "version_before": self.version_before,
            "first_timestamp": _iso(self.first.timestamp),
            "searched_from": self.searched_from,
        }


def find_tagged_commits(
    latest: Snapshot, tags: Mapping[str, str], *, not_before_tag: str | None = None
) -> TaggedCommits:
    """The commits whose commitInfo ``tags`` include ``tags``, and so the version before the first.

    The commits are read newest first. Without ``not_before_tag`` every commit in the log is read,
    and the answer needs the log from version 0: when older commits were cleaned up, one of them may
    have carried the tags too. ``not_before_tag`` names a tag of the matching commits that holds a
    time none of them was committed before by the clock that wrote it (an Airflow run's logical
    date, the scheduler's clock). Commit times are the store's clock, which may lag: the search
    goes on to :data:`CLOCK_SKEW_MARGIN` before that time or before the oldest match found,
    whichever is earlier (each older match moves it back), and a cleaned-up log matters only when
    it was cleaned past that point. A time more than the margin after the newest match's commit
    is no such bound: every commit is read.

    :raises TaggedCommitsNotFoundError: no commit carries the tags, or the first of them may have
        been cleaned up, or the first is version 0 (there is no version before it).
    """
    if not tags:
        raise ValueError("tags must name at least one commitInfo tag to look for.")
    store = latest.storage
    stamps = commit_timestamps(latest)
    found: list[TaggedCommit] = []
    margin = CLOCK_SKEW_MARGIN // timedelta(milliseconds=1)
    bound: int | None = None
    complete = bool(stamps) and stamps[0].version == 0
    searched_from = latest.version
    for count, stamp in enumerate(reversed(stamps), 1):
        if bound is not None and stamp.timestamp < min(bound, found[-1].timestamp) - margin:
            complete = True  # commit times only grow: no older commit can be the run's
            break
        searched_from = stamp.version
        info = commit_info(store, stamp.version) or {}
        raw = info.get("tags")
        carried: dict[str, Any] = raw if isinstance(raw, dict) else {}
        if all(carried.get(k) == v for k, v in tags.items()):
            found.append(TaggedCommit(stamp.version, stamp.timestamp, info.get("operation"), dict(carried)))
            if len(found) == 1 and not_before_tag is not None:
                bound = _time_bound(carried.get(not_before_tag), stamp.timestamp + margin)
        if count % 1000 == 0:
            log.info(
                "Read the commitInfo of %d commit(s) of %s, back to version %d.",
                count,
                store.root_uri,
                stamp.version,
            )
    return _tagged_result(latest, tags, found, complete, searched_from)


def _tagged_result(
    latest: Snapshot, tags: Mapping[str, str], found: list[TaggedCommit], complete: bool, searched_from: int
) -> TaggedCommits:
    """The commits found (newest first) as :class:`TaggedCommits`, or why they cannot be told."""
    uri = latest.storage.root_uri
    wanted = ", ".join(f"{k}={v!r}" for k, v in tags.items())
    if not found:
        where = (
            f"versions {searched_from} to {latest.version}"
            if complete
            else f"the retained log (versions {searched_from} to {latest.version}; older commits were "
            f"cleaned up)"
        )
        raise TaggedCommitsNotFoundError(f"No commit of {uri} carries the tags {wanted} in {where}.")
    found = found[::-1]
    if not complete:
        raise TaggedCommitsNotFoundError(
            f"The first commit of {uri} with the tags {wanted} cannot be told: the oldest one the log "
            f"holds is version {found[0].version}, but the log before version {searched_from} was cleaned "
            f"up and may have held earlier ones. Restore by version or timestamp instead."
        )
    if found[0].version == 0:
        raise TaggedCommitsNotFoundError(
            f"Version 0 of {uri} carries the tags {wanted}: those commits created the table, so there is "
            f"no version before them to restore."
        )
    return TaggedCommits(dict(tags), tuple(found), searched_from)


def _time_bound(value: Any, latest_possible: int) -> int | None:
    """A tag's time as a bound for the search (ms): None when it is no time, or later than
    ``latest_possible`` (the newest match's commit time plus the margin: no bound on its commits)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        bound = to_millis(value)
    except ValueError:
        return None
    return bound if bound <= latest_possible else None
