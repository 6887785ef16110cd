"""What a VACUUM may delete: protected paths, the listing (FULL) or the log's removes (LITE)."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from airflow_delta_provider.core.errors import CorruptLogError, InvalidPathError, VacuumLiteError
from airflow_delta_provider.core.log.deletion_vectors import deletion_vector_path
from airflow_delta_provider.core.log.logfiles import LogFileKind
from airflow_delta_provider.core.log.segment import list_log_files
from airflow_delta_provider.core.log.timeline import CommitTimeRule, commit_times
from airflow_delta_provider.core.maintenance.vacuum.record import LAST_VACUUM_INFO, read_last_vacuum_info
from airflow_delta_provider.core.maintenance.vacuum.retention import millis
from airflow_delta_provider.core.storage.local import LocalStore
from airflow_delta_provider.core.storage.paths import LOG_DIR
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from datetime import timedelta

    import pyarrow as pa

    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore, TreeListing

log = get_logger(__name__)


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
class HiddenNames:
    """Delta's ``DeltaTableUtils.isHiddenDirectory`` for one table, applied to a path component.

    A value (not a closure), so a distributed listing can ship it to the processes that list.

    :param partition_prefixes: ``<column>=`` of each partition column (never hidden).
    :param iceberg: UniForm with Iceberg: the ``metadata`` directories hold Iceberg's metadata.
    """

    partition_prefixes: tuple[str, ...] = ()
    iceberg: bool = False

    @property
    def hidden_starts(self) -> tuple[str, ...]:
        """A name that starts with none of these is not hidden (a listing's cheap first test)."""
        return (".", "_", "metadata") if self.iceberg else (".", "_")

    def __call__(self, name: str) -> bool:
        # UniForm keeps the Iceberg metadata of the table in `metadata` directories.
        if self.iceberg and name == "metadata":
            return True
        return (
            name.startswith((".", "_"))
            and not name.startswith(("_delta_index", "_change_data"))
            and not (self.partition_prefixes and name.startswith(self.partition_prefixes))
        )


@dataclass(frozen=True, eq=False)
class VacuumRules:
    """What decides whether a listed file may go, for a listing done elsewhere (a Spark job).

    :param delete_before_ms: ``now - retention`` (already checked against the table's retention).
    :param protected: relative paths that must stay (see :func:`protected_paths`).
    :param hidden: which path components are hidden (never listed, never deleted).
    """

    delete_before_ms: int
    protected: set[str]
    hidden: HiddenNames

    def candidates(self, files: Iterable[tuple[str, int, int]]) -> list[tuple[str, int, int]]:
        """The listed, visible ``(relative, size, modification ms)`` that may be deleted:
        unprotected and older than the retention (one pass; a million files on large tables)."""
        cutoff, protected = self.delete_before_ms, self.protected
        return [file for file in files if file[2] < cutoff and file[0] not in protected]


class VacuumEngine(Protocol):
    """Where a FULL VACUUM lists the table and deletes (default: this process, through the store).

    An engine does the I/O only; what may be deleted is decided here: its listing goes through
    :func:`plan_from_listing` (the same rules as the store's own listing), the candidates through
    :func:`check_under_root`, and the START/END commits are the core's.
    """

    def list_tree(self, storage: LogStore, rules: VacuumRules) -> TreeListing:
        """:meth:`LogStore.list_tree` of the table root with ``rules.hidden``; files that are
        protected or not older than ``rules.delete_before_ms`` may be left out."""

    def delete_many(self, storage: LogStore, paths: Sequence[str], max_workers: int | None) -> int:
        """:meth:`LogStore.delete_many` of the candidate files; returns how many were deleted."""


def vacuum_rules(snapshot: Snapshot, delete_before_ms: int) -> VacuumRules:
    """The rules of a VACUUM of ``snapshot`` with the cutoff ``delete_before_ms`` (reads the log)."""
    snapshot.require_whole("VACUUM")
    return VacuumRules(
        delete_before_ms, protected_paths(snapshot, delete_before_ms), hidden_name_rule(snapshot)
    )


def plan_vacuum(
    snapshot: Snapshot, delete_before_ms: int, *, mode: str = "full", engine: VacuumEngine | None = None
) -> VacuumPlan:
    """What a VACUUM of ``snapshot`` may delete; reads the log and (FULL) lists the table.

    Checks nothing about retention: callers pass a ``delete_before_ms`` already checked.

    :param snapshot: its latest snapshot.
    :param delete_before_ms: ``now - retention`` in epoch milliseconds.
    :param mode: ``full`` or ``lite``.
    :param engine: where FULL lists the table (default: the store, in this process).
    """
    storage = snapshot.storage
    rules = vacuum_rules(snapshot, delete_before_ms)
    outside = latest_commit_at_or_before(snapshot, delete_before_ms)
    if mode == "lite":
        plan = _plan_lite(snapshot, delete_before_ms, rules.protected, rules.hidden, outside)
    else:
        if engine is None:
            listing = storage.list_tree(rules.hidden, rules.protected)
        else:
            listing = engine.list_tree(storage, rules)
        plan = plan_from_listing(storage, listing, rules)
    plan.outside_retention_version = outside
    return plan


def hidden_name_rule(snapshot: Snapshot) -> HiddenNames:
    """Delta's ``DeltaTableUtils.isHiddenDirectory`` for this table, applied to each path component."""
    return HiddenNames(
        tuple(f"{c}=" for c in snapshot.partition_columns),
        "iceberg" in snapshot.config.table_only.universal_formats,
    )


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
    state = snapshot.replay(tombstones=True, now_ms=delete_before_ms - 1 + millis(retention))
    protected: set[str] = set()
    for table in (state.adds, state.removes):
        for path in table.column("path").to_pylist():
            for relative in storage.path.relative_forms(path):
                _add_with_parents(protected, relative)
        _protect_deletion_vectors(storage, table.column("deletionVector"), protected)
    return protected


def _table_retention(snapshot: Snapshot) -> timedelta:
    """The retention replay applies to tombstones: the table's own (no argument, no provider default)."""
    return snapshot.config.table_only.deleted_file_retention.value


def _protect_deletion_vectors(storage: LogStore, column: pa.ChunkedArray, protected: set[str]) -> None:
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
        inside = storage.path.relative(path)
        if inside:
            _add_with_parents(protected, inside)


def _add_with_parents(protected: set[str], relative: str) -> None:
    protected.add(relative)
    position = relative.rfind("/")
    while position > 0:
        parent = relative[:position]
        if parent in protected:
            return  # its own parents are in already
        protected.add(parent)
        position = relative.rfind("/", 0, position)


def latest_commit_at_or_before(snapshot: Snapshot, timestamp_ms: int) -> int | None:
    """Delta's ``getActiveCommitAtTime(deleteBefore, canReturnLastCommit=true)``: the newest commit
    whose (monotonized, or in-commit) timestamp is at or before ``timestamp_ms``; None when the
    earliest commit in the log is newer."""
    stamps = _commit_stamps(snapshot)
    eligible = [version for version, stamp in stamps if stamp <= timestamp_ms and version <= snapshot.version]
    return eligible[-1] if eligible else None


def _commit_stamps(snapshot: Snapshot) -> list[tuple[int, int]]:
    """Every listed commit's time (:class:`~.timeline.CommitTimeRule`), the commits before the
    earliest reconstructable version included."""
    stamps = commit_times(snapshot.storage, range(snapshot.version + 1), CommitTimeRule(snapshot))
    return [(version, stamp.timestamp) for version, stamp in stamps.items()]


def plan_from_listing(storage: LogStore, listing: TreeListing, rules: VacuumRules) -> VacuumPlan:
    """The FULL plan from a listing of the table root: old unprotected files, unprotected empty
    directories (deepest first); paths become the store's filesystem paths."""
    plan = VacuumPlan(listed_directories=len(listing.directories))
    root_prefix = storage.path.prefix
    plan.files = [(root_prefix + relative, size) for relative, size, _ in rules.candidates(listing.files)]
    plan.files.sort()
    empty = [d for d in listing.empty_directories if d not in rules.protected]
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


def _removed_files(storage: LogStore, paths: Sequence[str]) -> list[tuple[str, int, int]]:
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


def check_under_root(storage: LogStore, paths: Iterable[str], *, resolve_links: bool) -> None:
    """Refuse the whole run when any candidate is not strictly below the table root.

    :raises InvalidPathError: naming the first path :func:`paths_outside_root` finds.
    """
    outside = paths_outside_root(storage, paths, resolve_links=resolve_links, first_only=True)
    if outside:
        raise InvalidPathError(
            f"VACUUM refuses to run: the candidate {outside[0]!r} is not strictly under the table root "
            f"{storage.root_uri} (or is inside {LOG_DIR}). Nothing was deleted. Check the table's log "
            f"for paths that leave the root."
        )


def paths_outside_root(
    storage: LogStore, paths: Iterable[str], *, resolve_links: bool, first_only: bool = False
) -> list[str]:
    """The paths that may not be deleted from this table: not strictly below the root (an empty,
    ``.`` or ``..`` segment counts as leaving it), or inside ``_delta_log``. The one confinement
    rule of every delete of a table's files (VACUUM, and the files an attempt did not commit).

    With ``resolve_links`` (paths from the log or from a caller, not from a listing that never
    follows links) the real location of each parent directory is checked too, locally: a path
    through a symbolic link to a directory elsewhere must not make a delete leave the root.

    :param first_only: stop at the first such path.
    """
    log_dir = storage.path.log_dir
    log_prefix = log_dir + "/"
    local = storage if resolve_links and isinstance(storage, LocalStore) else None
    if local is None:
        paths = list(paths)
        # Excluding the log directory's name (no slash) also catches the directory itself.
        if storage.path.contains_all(paths, excluded=log_dir):
            return []  # else: path by path, to name the ones that are not inside
    checked: dict[str, bool] = {}
    outside: list[str] = []
    for path in paths:
        inside = storage.path.contains(path) and path != log_dir and not path.startswith(log_prefix)
        if inside and local is not None:
            parent = path.rpartition("/")[0]
            if parent not in checked:
                checked[parent] = local.real_path_inside(parent, allow_root=True)
            inside = checked[parent]
        if not inside:
            outside.append(path)
            if first_only:
                break
    return outside
