"""VACUUM: delete the files a Delta table no longer needs, the way Delta (Spark) does.

Follows ``VacuumCommand.gc`` of delta-spark (``S/commands/VacuumCommand.scala``):

- **Retention.** Files are kept for ``delta.deletedFileRetentionDuration`` (default one week)
  after they stopped being part of the table: ``deleteBefore = now - retention``. A retention
  shorter than the table's is refused with Delta's explanation unless the caller switches the
  safety check off; a negative one always is.
- **Protected ("valid") paths.** Every live ``add``, every tombstone (``remove``) whose
  ``deletionTimestamp >= deleteBefore``, each one's parent directories and its deletion-vector
  file. Absolute paths outside the table root are neither protected nor deleted.
- **FULL** (default) lists the table root recursively, skipping hidden names (``_`` or ``.``
  prefix at any level) except ``_delta_index*``, ``_change_data*`` and ``<partitionCol>=*``;
  candidates are files older than ``deleteBefore`` that are not protected, plus empty
  directories. Untracked files younger than the retention (a writer's uncommitted output)
  are never candidates.
- **LITE** reads the ``remove`` and ``cdc`` actions of the commits between the last VACUUM
  (``_delta_log/_last_vacuum_info``) and the latest commit at or before ``deleteBefore``; it
  lists nothing, so it cannot find files no commit ever named. When the log no longer holds
  those commits it refuses with Delta's ``DELTA_CANNOT_VACUUM_LITE``.
- **Real runs** commit an empty ``VACUUM START`` (parameters and metrics as Delta writes
  them), delete in parallel (batched ``DeleteObjects`` on S3), then commit ``VACUUM END``
  with ``COMPLETED``, or ``FAILED`` before re-raising the error that stopped the deletion.
  Delta writes these two commits only on some storage schemes (not S3); ``log_commits``
  overrides that.

Nothing outside the table root is ever deleted: every candidate is checked to lie strictly
under the root before the first deletion, and the whole run is refused otherwise.

Deliberate differences from Spark (each safer or more exact, none deletes more):

- a directory is a candidate only when nothing at all is left under it; Spark lists every
  directory without old files and lets the non-recursive delete of the non-empty ones fail;
- absolute (``p``) deletion-vector paths under the root are protected too (Spark protects
  only ``u`` ones);
- LITE also skips hidden paths, and deletes no directories (it lists none);
- FULL records the latest commit outside the retention window in ``_last_vacuum_info`` (Spark
  records nothing after FULL, which makes every later LITE on a table whose early commits
  were cleaned fail), and the recorded version never moves back;
- an explicit retention other than 0 is honoured (Spark >= 4.1 ignores it by default and
  uses the table property).
"""

from __future__ import annotations

import enum
import json
import logging
import math
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal

from airflow_delta_provider.core.deletion_vectors import deletion_vector_path
from airflow_delta_provider.core.errors import (
    DeleteFilesError,
    InvalidPathError,
    VacuumDeleteError,
    VacuumLiteError,
    VacuumRetentionNegativeError,
    VacuumRetentionTooShortError,
)
from airflow_delta_provider.core.features import Operation, check_supported
from airflow_delta_provider.core.logfiles import LogFileKind
from airflow_delta_provider.core.paths import LOG_DIR
from airflow_delta_provider.core.replay import replay_files
from airflow_delta_provider.core.segment import list_log_files
from airflow_delta_provider.core.storage.base import DELETE_BATCH  # noqa: F401  (re-exported)
from airflow_delta_provider.core.storage.local import LocalStore
from airflow_delta_provider.core.table_config import DELETED_FILE_RETENTION, Setting, Source, TableConfig

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    import pyarrow as pa

    from airflow_delta_provider.core.actions import Metadata, Protocol
    from airflow_delta_provider.core.snapshot import Snapshot
    from airflow_delta_provider.core.storage import TableStorage
    from airflow_delta_provider.core.table import DeltaTable

log = logging.getLogger(__name__)

VacuumMode = Literal["full", "lite"]

LAST_VACUUM_INFO = "_last_vacuum_info"
LAST_VACUUM_INFO_KEY = "latestCommitVersionOutsideOfRetentionWindow"
VACUUM_START = "VACUUM START"
VACUUM_END = "VACUUM END"
#: Schemes on which Delta writes VACUUM START/END commits by default (``supportedFsForLogging``).
LOGGED_SCHEMES = frozenset({"wasbs", "wasbss", "abfs", "abfss", "adl", "gs", "file", "hdfs"})
_SCHEME_ALIASES = {"gcs": "gs", "local": "file"}


class VacuumStatus(enum.StrEnum):
    DRY_RUN = "DRY_RUN"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


# --- result ------------------------------------------------------------------------------


@dataclass(frozen=True)
class VacuumResult:
    """What a VACUUM deleted, or (dry run) would delete.

    :param table_uri: the table root.
    :param version: the table version whose state protected the files.
    :param mode: ``full`` or ``lite``.
    :param dry_run: True when nothing was deleted or committed.
    :param retention: the retention used and where it came from (``argument``, ``table
        property``, ``provider config`` or ``default``).
    :param delete_before: files older than this (and tombstones removed before it) could go.
    :param files: absolute URIs of the files deleted (or to delete), sorted.
    :param num_files: ``len(files)``.
    :param num_bytes: their total size.
    :param directories: absolute URIs of the empty directories deleted (or to delete).
    :param num_directories: ``len(directories)``.
    :param num_deleted: files and directories actually deleted (0 in a dry run; files already
        gone when the deletion reached them are not counted).
    :param start_version: the ``VACUUM START`` commit, None when none was written.
    :param end_version: the ``VACUUM END`` commit, None when none was written.
    :param status: ``DRY_RUN`` or ``COMPLETED`` (a failed run raises instead).
    :param eligible_start_version: LITE: the first commit read; None for FULL.
    :param eligible_end_version: LITE: the last commit read; None for FULL.
    :param last_vacuum_version: the ``latestCommitVersionOutsideOfRetentionWindow`` written to
        ``_delta_log/_last_vacuum_info`` (None when the file was left as it was).
    """

    table_uri: str
    version: int
    mode: str
    dry_run: bool
    retention: Setting[timedelta]
    delete_before: datetime
    files: tuple[str, ...]
    num_files: int
    num_bytes: int
    directories: tuple[str, ...] = ()
    num_directories: int = 0
    num_deleted: int = 0
    start_version: int | None = None
    end_version: int | None = None
    status: str = VacuumStatus.DRY_RUN.value
    eligible_start_version: int | None = None
    eligible_end_version: int | None = None
    last_vacuum_version: int | None = None
    enforce_retention_duration: bool = True

    def to_dict(self) -> dict[str, Any]:
        """A JSON-native form (for XCom): retention in seconds, ``delete_before`` in ISO-8601."""
        return {
            "table_uri": self.table_uri,
            "version": self.version,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "retention": self.retention.to_dict(),
            "delete_before": self.delete_before.isoformat(),
            "files": list(self.files),
            "num_files": self.num_files,
            "num_bytes": self.num_bytes,
            "directories": list(self.directories),
            "num_directories": self.num_directories,
            "num_deleted": self.num_deleted,
            "start_version": self.start_version,
            "end_version": self.end_version,
            "status": self.status,
            "eligible_start_version": self.eligible_start_version,
            "eligible_end_version": self.eligible_end_version,
            "last_vacuum_version": self.last_vacuum_version,
            "enforce_retention_duration": self.enforce_retention_duration,
        }


@dataclass
class VacuumPlan:
    """The files and directories a VACUUM would delete (filesystem paths of the table's store).

    :param files: ``(path, size)`` of each file, sorted by path.
    :param directories: empty directories, deepest first.
    :param listed_directories: directories the listing saw (Delta's ``numVacuumedDirectories``
        is this plus one, for the root).
    :param eligible_start_version: LITE: the first commit read.
    :param eligible_end_version: LITE: the last commit read.
    :param outside_retention_version: the latest commit at or before ``deleteBefore``.
    """

    files: list[tuple[str, int]] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)
    listed_directories: int = 0
    eligible_start_version: int | None = None
    eligible_end_version: int | None = None
    outside_retention_version: int | None = None

    @property
    def num_bytes(self) -> int:
        return sum(size for _, size in self.files)


@dataclass(frozen=True)
class ResolvedVacuumRetention:
    """The retention a VACUUM uses, and the table's own against which it is checked.

    :param effective: the retention used (the argument, else the configured one).
    :param configured: the table's ``delta.deletedFileRetentionDuration`` without the argument.
    """

    effective: Setting[timedelta]
    configured: Setting[timedelta]

    @property
    def explicit(self) -> bool:
        return self.effective.source is Source.ARGUMENT


# --- entry point ---------------------------------------------------------------------------


def vacuum(
    table: DeltaTable,
    *,
    retention: timedelta | str | None = None,
    dry_run: bool = False,
    mode: VacuumMode | str = "full",
    enforce_retention_duration: bool = True,
    max_workers: int | None = None,
    now: datetime | int | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
    log_commits: bool | None = None,
) -> VacuumResult:
    """Delete the files the table no longer references and that are older than the retention.

    :param table: the table.
    :param retention: how long removed files are kept: a ``timedelta``, a number of hours, or a
        Delta interval (``"interval 7 days"``, ``"168 hours"``). None: the table's
        ``delta.deletedFileRetentionDuration``, else the provider default, else 7 days.
    :param dry_run: only list what would be deleted; nothing is deleted or committed.
    :param mode: ``full`` (list the table root) or ``lite`` (read removed files from the log).
    :param enforce_retention_duration: refuse a retention shorter than the table's (Delta's
        ``retentionDurationCheck``). Switch off only when no writer can be running.
    :param max_workers: threads deleting files (default: 8 on remote stores, 4 locally).
    :param now: the clock (``datetime``, naive = UTC, or epoch milliseconds); default: now.
    :param provider_defaults: provider-wide table-property defaults
        (``{"delta.deletedFileRetentionDuration": "interval 14 days"}``).
    :param log_commits: write ``VACUUM START``/``VACUUM END`` commits. None (default): as Delta
        does, on local, HDFS, Azure and GCS tables but not on S3.
    :raises VacuumRetentionTooShortError: the retention is shorter than the table's.
    :raises VacuumRetentionNegativeError: the retention is negative.
    :raises VacuumLiteError: LITE cannot be exact on this table; run FULL.
    :raises UnsupportedFeatureError: the table uses a writer feature VACUUM cannot honour.
    :raises InvalidPathError: a candidate resolved outside the table root (nothing deleted).
    :raises VacuumDeleteError: the store refused some deletions (``VACUUM END`` says FAILED).
    """
    mode_name = _check_mode(mode)
    if not isinstance(dry_run, bool):
        raise ValueError(f"dry_run must be True or False, got {dry_run!r}.")
    if not isinstance(enforce_retention_duration, bool):
        raise ValueError(
            f"enforce_retention_duration must be True or False, got {enforce_retention_duration!r}."
        )
    if max_workers is not None and (
        not isinstance(max_workers, int) or isinstance(max_workers, bool) or max_workers < 1
    ):
        raise ValueError(f"max_workers must be a positive integer, got {max_workers!r}.")
    now_ms = _now_millis(now)
    storage = table.storage

    snapshot = table.snapshot()
    check_vacuumable(snapshot.protocol, snapshot.metadata)
    config = TableConfig(snapshot.properties, provider_defaults)
    config.warn_on_incompatible_retentions()
    resolved = resolve_vacuum_retention(retention, config)
    check_retention_safety(resolved, enforce=enforce_retention_duration, table_uri=table.uri)
    delete_before_ms = now_ms - _millis(resolved.effective.value)
    delete_before = datetime.fromtimestamp(delete_before_ms / 1000, tz=UTC)
    log.info(
        "VACUUM %s%s of %s at version %d: files untracked since before %s (retention %s, from the %s).",
        mode_name.upper(),
        " (dry run)" if dry_run else "",
        table.uri,
        snapshot.version,
        delete_before.isoformat(timespec="seconds"),
        resolved.effective.value,
        resolved.effective.source,
    )

    plan = plan_vacuum(table, snapshot, delete_before_ms, mode=mode_name)
    _check_under_root(
        storage, [p for p, _ in plan.files] + plan.directories, resolve_links=mode_name == "lite"
    )
    files = tuple(storage.to_uri(p) for p, _ in plan.files)
    directories = tuple(storage.to_uri(p) for p in plan.directories)
    result = VacuumResult(
        table_uri=table.uri,
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
        enforce_retention_duration=enforce_retention_duration,
    )
    if dry_run:
        log.info(
            "VACUUM dry run of %s: %d file(s) (%d bytes) and %d empty director(y/ies) can be deleted.",
            table.uri,
            result.num_files,
            result.num_bytes,
            result.num_directories,
        )
        return result

    logged = should_log_commits(storage) if log_commits is None else bool(log_commits)
    start_version = None
    if logged:
        start_version = _commit_start(table, snapshot, plan, resolved, enforce_retention_duration)
    try:
        deleted = _delete(storage, [p for p, _ in plan.files], max_workers)
        deleted += storage.delete_empty_directories(plan.directories)
    except BaseException as err:
        end = _commit_end(table, VacuumStatus.FAILED, None) if logged else None
        log.error(
            "VACUUM of %s failed while deleting files (%s)%s; files not yet deleted stay until the "
            "next VACUUM.",
            table.uri,
            err,
            f"; VACUUM END (FAILED) committed at version {end}" if end is not None else "",
        )
        raise
    end_version = None
    if logged:
        metrics = {"numDeletedFiles": deleted, "numVacuumedDirectories": plan.listed_directories + 1}
        end_version = _commit_end(table, VacuumStatus.COMPLETED, metrics)
    last_vacuum = write_last_vacuum_info(storage, plan.outside_retention_version)
    log.info(
        "VACUUM of %s deleted %d file(s) and director(y/ies) (%d bytes planned) not needed since %s.",
        table.uri,
        deleted,
        result.num_bytes,
        delete_before.isoformat(timespec="seconds"),
    )
    return replace(
        result,
        num_deleted=deleted,
        start_version=start_version,
        end_version=end_version,
        status=VacuumStatus.COMPLETED.value,
        last_vacuum_version=last_vacuum,
    )


# --- checks ----------------------------------------------------------------------------------


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
    VACUUM does with each feature is in :mod:`airflow_delta_provider.core.features`.

    :raises UnsupportedFeatureError: naming the feature (and ``vacuumProtocolCheck``).
    """
    check_supported(protocol, metadata, Operation.VACUUM)


def resolve_vacuum_retention(
    retention: timedelta | str | float | None, config: TableConfig
) -> ResolvedVacuumRetention:
    """The retention to use and the table's configured one (see :class:`TableConfig`).

    :param retention: the explicit retention (``timedelta``, hours, or a Delta interval).
    :param config: the table's configuration.
    :raises VacuumRetentionNegativeError: the explicit retention is negative.
    :raises RetentionError: a value is not an interval.
    """
    configured = config.deleted_file_retention
    if retention is None:
        return ResolvedVacuumRetention(configured, configured)
    negative = (
        (isinstance(retention, timedelta) and retention < timedelta())
        or (isinstance(retention, int | float) and not isinstance(retention, bool) and retention < 0)
        or (isinstance(retention, str) and "-" in retention)
    )
    if negative:
        raise VacuumRetentionNegativeError(
            f"Retention for VACUUM can't be less than 0, got {retention!r}. Use a retention of at least the "
            f"table's {DELETED_FILE_RETENTION}."
        )
    return ResolvedVacuumRetention(config.resolve(DELETED_FILE_RETENTION, retention), configured)


def check_retention_safety(resolved: ResolvedVacuumRetention, *, enforce: bool, table_uri: str) -> None:
    """Delta's ``checkRetentionPeriodSafety``: refuse (or, with the check off, warn about) a
    retention shorter than the table's.

    :raises VacuumRetentionTooShortError: with Delta's explanation and the hours to use.
    """
    effective, configured = resolved.effective.value, resolved.configured.value
    if effective >= configured:
        return
    seconds = configured.total_seconds()
    hours = math.ceil(seconds / 3600)  # Delta rounds the configured hours up
    if enforce:
        raise VacuumRetentionTooShortError(
            f"Are you sure you would like to vacuum files with such a low retention period? The "
            f"retention {effective} is shorter than the {configured} of {table_uri} "
            f"({DELETED_FILE_RETENTION}, from the {resolved.configured.source}). If you have writers that "
            f"are currently writing to this table, there is a risk that you may corrupt the state of "
            f"your Delta table: files they are about to commit, and files that readers of recent "
            f"versions still need, would be deleted.\n\nIf you are certain that there are no operations "
            f"being performed on this table, such as insert/upsert/delete/optimize, then you may turn "
            f"off this check with enforce_retention_duration=False (Delta: "
            f"spark.databricks.delta.retentionDurationCheck.enabled = false).\n\nIf you are not sure, "
            f'please use a value not less than "{hours} hours".'
        )
    log.warning(
        "VACUUM of %s with retention %s, shorter than the table's %s, and the retention safety check "
        "off: files that running writers are about to commit, or that readers of versions newer than "
        "the retention still need, may be deleted.",
        table_uri,
        effective,
        configured,
    )


def should_log_commits(storage: TableStorage) -> bool:
    """Delta's rule for VACUUM START/END commits: only on the schemes it knows to be safe for them."""
    scheme = (storage.scheme or "").lower()
    return _SCHEME_ALIASES.get(scheme, scheme) in LOGGED_SCHEMES


# --- planning --------------------------------------------------------------------------------


def plan_vacuum(
    table: DeltaTable, snapshot: Snapshot, delete_before_ms: int, *, mode: str = "full"
) -> VacuumPlan:
    """What a VACUUM of ``snapshot`` may delete; reads the log and (FULL) lists the table.

    Checks nothing about retention: callers pass a ``delete_before_ms`` already checked.

    :param table: the table.
    :param snapshot: its latest snapshot.
    :param delete_before_ms: ``now - retention`` in epoch milliseconds.
    :param mode: ``full`` or ``lite``.
    """
    storage = snapshot.storage
    hidden = hidden_name_rule(snapshot)
    protected = protected_paths(snapshot, delete_before_ms)
    outside = latest_commit_at_or_before(table, snapshot, delete_before_ms)
    if mode == "lite":
        plan = _plan_lite(snapshot, delete_before_ms, protected, hidden, outside)
    else:
        plan = _plan_full(storage, delete_before_ms, protected, hidden)
    plan.outside_retention_version = outside
    return plan


def hidden_name_rule(snapshot: Snapshot) -> Callable[[str], bool]:
    """Delta's ``DeltaTableUtils.isHiddenDirectory`` for this table, applied to each path component."""
    partition_prefixes = tuple(f"{c}=" for c in snapshot.partition_columns)
    iceberg = "iceberg" in TableConfig(snapshot.properties).universal_formats

    def is_hidden(name: str) -> bool:
        # UniForm keeps the Iceberg metadata of the table in `metadata` directories.
        if iceberg and name == "metadata":
            return True
        return (
            name.startswith((".", "_"))
            and not name.startswith(("_delta_index", "_change_data"))
            and not (partition_prefixes and name.startswith(partition_prefixes))
        )

    return is_hidden


def protected_paths(snapshot: Snapshot, delete_before_ms: int) -> set[str]:
    """Paths (relative to the root, as stored) VACUUM must not delete.

    Every live ``add``; every tombstone with ``deletionTimestamp >= delete_before_ms``; the
    parent directories of both; their deletion-vector files. Paths are kept both URL-decoded
    (the protocol's form) and as written, so a writer that forgot to encode cannot lose files.
    """
    storage = snapshot.storage
    retention = _table_retention(snapshot)
    # replay_files keeps tombstones newer than `now - table retention`; choose `now` so that the
    # cut falls exactly at delete_before (tombstones at or after it are protected, as in Delta).
    state = replay_files(
        storage,
        snapshot.segment,
        snapshot._commits,
        snapshot._small,
        tombstones=True,
        now_ms=delete_before_ms - 1 + _millis(retention),
    )
    protected: set[str] = set()
    for table in (state.adds, state.removes):
        for path in table.column("path").to_pylist():
            for relative in storage.path.relative_forms(path):
                _add_with_parents(protected, relative)
        _protect_deletion_vectors(storage, table.column("deletionVector"), protected)
    return protected


def _table_retention(snapshot: Snapshot) -> timedelta:
    """The retention replay applies to tombstones: the table's own (no argument, no provider default)."""
    return TableConfig(snapshot.properties).deleted_file_retention.value


def _protect_deletion_vectors(storage: TableStorage, column: pa.ChunkedArray, protected: set[str]) -> None:
    if column.null_count == len(column):
        return
    for dv in column.filter(column.is_valid()).to_pylist():
        if dv.get("storageType") == "i":
            continue
        # A malformed descriptor raises: VACUUM must not guess which file a live DV is in.
        path = deletion_vector_path(dv, storage.root)
        if dv.get("storageType") == "p":
            for relative in storage.path.relative_forms(path):
                _add_with_parents(protected, relative)
            continue
        relative = storage.path.relative(path)
        if relative:
            _add_with_parents(protected, relative)


def _add_with_parents(protected: set[str], relative: str) -> None:
    protected.add(relative)
    position = relative.rfind("/")
    while position > 0:
        parent = relative[:position]
        if parent in protected:
            return  # its own parents are in already
        protected.add(parent)
        position = relative.rfind("/", 0, position)


def latest_commit_at_or_before(table: DeltaTable, snapshot: Snapshot, timestamp_ms: int) -> int | None:
    """Delta's ``getActiveCommitAtTime(deleteBefore, canReturnLastCommit=true)``: the newest commit
    whose (monotonized, or in-commit) timestamp is at or before ``timestamp_ms``; None when the
    earliest commit in the log is newer."""
    stamps = _commit_stamps(table, snapshot)
    eligible = [version for version, stamp in stamps if stamp <= timestamp_ms and version <= snapshot.version]
    return eligible[-1] if eligible else None


def _commit_stamps(table: DeltaTable, snapshot: Snapshot) -> list[tuple[int, int]]:
    if TableConfig(snapshot.properties).in_commit_timestamps:
        # In-commit timestamps need the commits read; the table knows how.
        return [(s.version, s.timestamp) for s in table.commit_timestamps()]
    stamps = []
    previous = -1
    for item in list_log_files(snapshot.storage, 0):
        if item.kind is not LogFileKind.COMMIT:
            continue
        stamp = max(item.file.modification_time, previous + 1)
        previous = stamp
        stamps.append((item.version, stamp))
    return stamps


def _plan_full(
    storage: TableStorage, delete_before_ms: int, protected: set[str], hidden: Callable[[str], bool]
) -> VacuumPlan:
    listing = storage.list_tree(hidden, protected)
    plan = VacuumPlan(listed_directories=len(listing.directories))
    root_prefix = storage.path.prefix
    for relative, size, mtime in listing.files:
        if mtime < delete_before_ms and relative not in protected:
            plan.files.append((root_prefix + relative, size))
    plan.files.sort()
    empty = [d for d in listing.empty_directories if d not in protected]
    # Deepest first, so that a directory holding only empty directories goes after them.
    empty.sort(key=lambda d: (-d.count("/"), d))
    plan.directories = [root_prefix + d for d in empty]
    return plan


def _plan_lite(
    snapshot: Snapshot,
    delete_before_ms: int,
    protected: set[str],
    hidden: Callable[[str], bool],
    outside: int | None,
) -> VacuumPlan:
    storage = snapshot.storage
    plan = VacuumPlan()
    if outside is None:
        log.info("VACUUM LITE of %s: no commit is older than the retention; nothing to do.", storage.root_uri)
        return plan
    commits = [f for f in list_log_files(storage, 0) if f.kind is LogFileKind.COMMIT]
    earliest = commits[0].version if commits else 0
    last = read_last_vacuum_info(storage)
    if earliest != 0 and (last is None or last < earliest):
        since = (
            f"the last VACUUM recorded version {last}"
            if last is not None
            else f"no VACUUM is recorded in {LAST_VACUUM_INFO}"
        )
        raise VacuumLiteError(
            f"VACUUM LITE cannot delete all eligible files as some files are not referenced by the "
            f"Delta log. Please run VACUUM FULL. ({storage.root_uri}: the earliest commit left in the log "
            f"is version {earliest} and {since}, so removes in the cleaned commits cannot be read.)"
        )
    start = min(snapshot.version, last + 1 if last is not None else earliest)
    end = outside
    if start > end:
        return plan
    plan.eligible_start_version, plan.eligible_end_version = start, end
    wanted = [c for c in commits if start <= c.version <= end]
    root_prefix = storage.path.prefix
    # As Delta: one entry per path, the newest (deletion) time wins, then the age test.
    newest: dict[str, tuple[int, int]] = {}
    for path, size, stamp in _removed_files(storage, [c.file.path for c in wanted]):
        forms = storage.path.relative_forms(path)
        if not forms:
            continue  # outside the table (e.g. a shallow clone's source): never deleted
        previous = newest.get(forms[0])
        if previous is None or stamp > previous[1]:
            newest[forms[0]] = (size, stamp)
    for relative, (size, stamp) in newest.items():
        if stamp >= delete_before_ms or relative in protected:
            continue
        if relative.startswith("../") or _has_hidden_part(relative, hidden):
            continue
        plan.files.append((root_prefix + relative, size))
    plan.files.sort()
    return plan


def _has_hidden_part(relative: str, hidden: Callable[[str], bool]) -> bool:
    slashed = "/" + relative
    if "/_" not in slashed and "/." not in slashed and "/metadata" not in slashed:
        return False  # the common case, without splitting
    return any(hidden(part) for part in relative.split("/"))


def _removed_files(storage: TableStorage, paths: Sequence[str]) -> list[tuple[str, int, int]]:
    """``(log path, size, time)`` of every ``remove`` (time = deletionTimestamp), its ``u``
    deletion-vector file, and every ``cdc`` file (time 0, as Delta) in the given commits."""

    def read(path: str) -> bytes:
        return storage.read_bytes(path)

    if storage.is_local or len(paths) < 4:
        blobs = [read(p) for p in paths]
    else:
        with ThreadPoolExecutor(max_workers=16) as pool:
            blobs = list(pool.map(read, paths))
    lines = [
        line for blob in blobs for line in blob.split(b"\n") if line.startswith((b'{"remove"', b'{"cdc"'))
    ]
    if not lines:
        return []
    try:
        actions = json.loads(b"[" + b",".join(lines) + b"]")
    except ValueError:
        actions = []
        for path, blob in zip(paths, blobs, strict=True):
            for number, line in enumerate(blob.split(b"\n"), 1):
                if line.startswith((b'{"remove"', b'{"cdc"')):
                    try:
                        actions.append(json.loads(line))
                    except ValueError as err:
                        from airflow_delta_provider.core.errors import CorruptLogError

                        raise CorruptLogError(
                            f"Line {number} of {storage.to_uri(path)} is not valid JSON ({err}).",
                            path=storage.to_uri(path),
                        ) from None
    result: list[tuple[str, int, int]] = []
    for action in actions:
        if "remove" in action:
            remove = action["remove"]
            stamp = int(remove.get("deletionTimestamp") or 0)
            result.append((remove["path"], int(remove.get("size") or 0), stamp))
            dv = remove.get("deletionVector")
            if dv and dv.get("storageType") == "u":
                # As a URI, so that it resolves like a log path (DV file names need no encoding).
                dv_path = storage.to_uri(deletion_vector_path(dv, storage.root))
                result.append((dv_path, int(dv.get("sizeInBytes") or 0), stamp))
        elif "cdc" in action:
            cdc = action["cdc"]
            result.append((cdc["path"], int(cdc.get("size") or 0), 0))
    return result


# --- _last_vacuum_info -----------------------------------------------------------------------


def read_last_vacuum_info(storage: TableStorage) -> int | None:
    """``latestCommitVersionOutsideOfRetentionWindow`` of ``_delta_log/_last_vacuum_info``; None
    when the file is missing, empty or unreadable (Delta treats a corrupt file as missing)."""
    path = storage.log_path(LAST_VACUUM_INFO)
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        value = json.loads(data.decode().strip().splitlines()[0]).get(LAST_VACUUM_INFO_KEY)
    except (ValueError, IndexError, AttributeError, UnicodeDecodeError):
        log.warning("Ignoring the unreadable %s: %r", storage.to_uri(path), data[:200])
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def write_last_vacuum_info(storage: TableStorage, version: int | None) -> int | None:
    """Record that the removes of every commit up to ``version`` were vacuumed.

    The recorded version never moves back (an earlier VACUUM with a shorter retention already
    went further). Returns the version written, or None when the file was left as it was.
    """
    if version is None:
        return None
    previous = read_last_vacuum_info(storage)
    if previous is not None and previous >= version:
        return None
    # Delta's own bytes: one JSON object and a newline (LogStore.write of a single line).
    payload = json.dumps({LAST_VACUUM_INFO_KEY: version}, separators=(",", ":")) + "\n"
    storage.put(storage.log_path(LAST_VACUUM_INFO), payload.encode())
    return version


# --- deleting --------------------------------------------------------------------------------


def _check_under_root(storage: TableStorage, paths: Iterable[str], *, resolve_links: bool) -> None:
    """Refuse the whole run when any candidate is not strictly below the table root.

    With ``resolve_links`` (candidates from the log, not from a listing that never follows links)
    the real location of each parent directory is checked too, locally: a log path through a
    symbolic link to a directory elsewhere must not make VACUUM delete outside the root.
    """
    log_prefix = storage.path.log_dir + "/"
    check_links = resolve_links and isinstance(storage, LocalStore)
    checked: dict[str, bool] = {}
    for path in paths:
        inside = storage.path.contains(path) and not path.startswith(log_prefix)
        if inside and check_links:
            parent = path.rpartition("/")[0]
            if parent not in checked:
                checked[parent] = storage.real_path_inside(parent, allow_root=True)
            inside = checked[parent]
        if not inside:
            raise InvalidPathError(
                f"VACUUM refuses to run: the candidate {path!r} is not strictly under the table root "
                f"{storage.root_uri} (or is inside {LOG_DIR}). Nothing was deleted. Check the table's log "
                f"for paths that leave the root."
            )


def _delete(storage: TableStorage, paths: Sequence[str], max_workers: int | None) -> int:
    """Delete the planned files through the store (batched, bounded parallel, with progress)."""
    try:
        return storage.delete_many(paths, max_workers=max_workers)
    except DeleteFilesError as err:
        raise VacuumDeleteError(str(err), failed=err.failed) from err


# --- commits -----------------------------------------------------------------------------------


def _commit_start(
    table: DeltaTable,
    snapshot: Snapshot,
    plan: VacuumPlan,
    resolved: ResolvedVacuumRetention,
    enforce: bool,
) -> int:
    from airflow_delta_provider.core.transaction import OptimisticTransaction

    parameters: dict[str, Any] = {
        "retentionCheckEnabled": enforce,
        "defaultRetentionMillis": _millis(resolved.configured.value),
    }
    if resolved.explicit:
        parameters["specifiedRetentionMillis"] = _millis(resolved.effective.value)
    metrics = {
        "numFilesToDelete": len(plan.files) + len(plan.directories),
        "sizeOfDataToDelete": plan.num_bytes,
    }
    result = OptimisticTransaction(table, read_snapshot=snapshot).commit(
        [],
        operation=VACUUM_START,
        operation_parameters=parameters,
        operation_metrics=metrics,
        data_change=False,
    )
    return result.version


def _commit_end(table: DeltaTable, status: VacuumStatus, metrics: Mapping[str, int] | None) -> int | None:
    from airflow_delta_provider.core.transaction import OptimisticTransaction

    try:
        result = OptimisticTransaction(table).commit(
            [],
            operation=VACUUM_END,
            operation_parameters={"status": status.value},
            operation_metrics=metrics,
            data_change=False,
        )
    except Exception:
        if status is VacuumStatus.FAILED:
            # The deletion error is the one to report; the END commit is bookkeeping.
            log.exception("Could not commit VACUUM END (FAILED) to %s.", table.uri)
            return None
        raise
    return result.version


def _millis(value: timedelta) -> int:
    return int(value.total_seconds() * 1000)
