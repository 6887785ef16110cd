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

import contextlib
import enum
import json
import logging
import math
import os
import posixpath
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from airflow_delta_provider.core.deletion_vectors import deletion_vector_path
from airflow_delta_provider.core.errors import (
    InvalidPathError,
    RetentionError,
    UnsupportedFeatureError,
    VacuumDeleteError,
    VacuumLiteError,
    VacuumRetentionNegativeError,
    VacuumRetentionTooShortError,
)
from airflow_delta_provider.core.logfiles import LogFileKind
from airflow_delta_provider.core.protocol import (
    MAX_WRITER_VERSION,
    SUPPORTED_WRITER_FEATURES,
    Operation,
    check_readable,
    writer_features,
)
from airflow_delta_provider.core.replay import replay_files
from airflow_delta_provider.core.retention import DEFAULTS, DELETED_FILE_RETENTION, parse_interval
from airflow_delta_provider.core.segment import list_log_files
from airflow_delta_provider.core.storage import LOG_DIR, _file_info, has_scheme, resolve_path

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterable, Mapping, Sequence

    import pyarrow as pa

    from airflow_delta_provider.core.actions import Protocol
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
#: Stores whose "directories" are key prefixes that vanish with their last object.
_PREFIX_STORES = frozenset({"s3", "s3a", "s3n", "gs", "gcs"})
#: Objects per delete request (the S3 ``DeleteObjects`` maximum) and per local work item.
DELETE_BATCH = 1000
#: Seconds between two progress messages of a long deletion.
PROGRESS_INTERVAL = 10.0
ICEBERG_FORMATS = "delta.universalFormat.enabledFormats"

#: Writer features whose obligations concern only the rows and metadata of commits that add
#: data. VACUUM adds no data and changes no metadata, so it honours them by doing nothing.
_DATA_ONLY_WRITER_FEATURES = frozenset(
    {
        "invariants",
        "checkConstraints",
        "generatedColumns",
        "identityColumns",
        "columnMapping",
        "allowColumnDefaults",
        "rowTracking",
    }
)
VACUUM_WRITER_FEATURES = SUPPORTED_WRITER_FEATURES | _DATA_ONLY_WRITER_FEATURES


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
    :param retention: the retention used.
    :param retention_source: where it came from (``argument``, ``table property``,
        ``provider default`` or ``Delta default``).
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
    retention: timedelta
    retention_source: str
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
            "retention": self.retention.total_seconds(),
            "retention_source": self.retention_source,
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
    """The retention a VACUUM uses and the table's own, against which it is checked."""

    effective: timedelta
    source: str
    configured: timedelta
    configured_source: str
    explicit: bool


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
    :param retention: how long removed files are kept: a ``timedelta``, a Delta interval
        (``"interval 7 days"``, ``"168 hours"``) or a number of hours as a string. None: the
        table's ``delta.deletedFileRetentionDuration``, else the provider default, else 7 days.
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
    check_vacuumable(snapshot.protocol)
    resolved = resolve_vacuum_retention(
        retention, properties=snapshot.properties, provider_defaults=provider_defaults
    )
    check_retention_safety(resolved, enforce=enforce_retention_duration, table_uri=table.uri)
    delete_before_ms = now_ms - _millis(resolved.effective)
    delete_before = datetime.fromtimestamp(delete_before_ms / 1000, tz=UTC)
    log.info(
        "VACUUM %s%s of %s at version %d: files untracked since before %s (retention %s, from the %s).",
        mode_name.upper(),
        " (dry run)" if dry_run else "",
        table.uri,
        snapshot.version,
        delete_before.isoformat(timespec="seconds"),
        resolved.effective,
        resolved.source,
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
        retention_source=resolved.source,
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
        deleted = delete_files(storage, [p for p, _ in plan.files], max_workers=max_workers)
        deleted += delete_directories(storage, plan.directories)
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


def check_vacuumable(protocol: Protocol) -> None:
    """Refuse to VACUUM a table whose protocol asks for something this core cannot honour.

    Delta runs the full writer-protocol check before VACUUM (``deltaLog.protocolWrite``); the
    ``vacuumProtocolCheck`` feature makes that check mandatory for every VACUUM client. Features
    that only constrain the data a commit adds (invariants, column mapping...) do not bind a
    VACUUM, which adds none. Catalog-managed tables may be vacuumed only through their catalog.

    :param protocol: the table's protocol.
    :raises UnsupportedFeatureError: naming the feature, and ``vacuumProtocolCheck`` when the
        table has it.
    """
    check_readable(protocol)
    features = writer_features(protocol)
    why = (
        " The table has the 'vacuumProtocolCheck' feature, which requires VACUUM to honour every writer "
        "feature of the table."
        if "vacuumProtocolCheck" in features
        else ""
    )
    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise UnsupportedFeatureError(
            f"The table requires Delta writer version {protocol.min_writer_version}; this core writes up "
            f"to version {MAX_WRITER_VERSION} and will not VACUUM it.{why} Vacuum it with an engine that "
            f"supports that version.",
            feature=f"minWriterVersion={protocol.min_writer_version}",
            operation=Operation.VACUUM.value,
        )
    if "catalogManaged" in features or "catalogOwned-preview" in features:
        feature = "catalogManaged" if "catalogManaged" in features else "catalogOwned-preview"
        raise UnsupportedFeatureError(
            f"The table is catalog-managed ({feature!r}): the protocol forbids VACUUM outside its "
            f"catalog.{why} Vacuum it through the catalog that manages it.",
            feature=feature,
            operation=Operation.VACUUM.value,
        )
    unsupported = sorted(features - VACUUM_WRITER_FEATURES)
    if unsupported:
        raise UnsupportedFeatureError(
            f"The table uses the writer feature {unsupported[0]!r}"
            + (f" (and {', '.join(map(repr, unsupported[1:]))})" if len(unsupported) > 1 else "")
            + f", which this core does not implement; VACUUM could delete files that feature still "
            f"needs.{why} Vacuum the table with an engine that supports it (Spark with Delta Lake).",
            feature=unsupported[0],
            operation=Operation.VACUUM.value,
        )


def resolve_vacuum_retention(
    retention: timedelta | str | None,
    *,
    properties: Mapping[str, str] | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
) -> ResolvedVacuumRetention:
    """The retention to use and the table's configured one.

    Precedence: the explicit argument > the table's ``delta.deletedFileRetentionDuration`` >
    the provider-wide default > Delta's default (one week). The configured retention (without
    the argument) is what the safety check compares against.

    :param retention: the explicit retention (``timedelta``, Delta interval, or hours as text).
    :param properties: the table properties.
    :param provider_defaults: provider-wide property defaults.
    :raises VacuumRetentionNegativeError: the explicit retention is negative.
    :raises RetentionError: a value is not an interval.
    """
    configured, configured_source = _configured_retention(properties or {}, provider_defaults or {})
    if retention is None:
        return ResolvedVacuumRetention(configured, configured_source, configured, configured_source, False)
    value = _explicit_retention(retention)
    return ResolvedVacuumRetention(value, "argument", configured, configured_source, True)


def _configured_retention(
    properties: Mapping[str, str], provider_defaults: Mapping[str, Any]
) -> tuple[timedelta, str]:
    value = properties.get(DELETED_FILE_RETENTION)
    if value is not None:
        return parse_interval(str(value), name=DELETED_FILE_RETENTION), "table property"
    default = provider_defaults.get(DELETED_FILE_RETENTION)
    if default is not None:
        if isinstance(default, timedelta):
            return default, "provider default"
        return parse_interval(str(default), name=DELETED_FILE_RETENTION), "provider default"
    fallback = DEFAULTS[DELETED_FILE_RETENTION]
    assert fallback is not None
    return fallback, "Delta default"


def _explicit_retention(retention: Any) -> timedelta:
    if isinstance(retention, timedelta):
        value = retention
    elif isinstance(retention, str):
        text = retention.strip()
        if "-" in text:
            raise VacuumRetentionNegativeError(
                f"Retention for VACUUM can't be less than 0, got {retention!r}. Use a retention of at "
                f"least the table's delta.deletedFileRetentionDuration."
            )
        try:
            # A bare number is hours, as Spark's RETAIN n HOURS and delta-rs's retention_hours.
            value = timedelta(hours=float(text))
        except ValueError:
            value = parse_interval(text, name="retention")
    else:
        raise RetentionError(
            f"retention must be a timedelta or an interval such as 'interval 7 days', got {retention!r}."
        )
    if value < timedelta():
        raise VacuumRetentionNegativeError(
            f"Retention for VACUUM can't be less than 0, got {value}. Use a retention of at least the "
            f"table's delta.deletedFileRetentionDuration."
        )
    return value


def check_retention_safety(resolved: ResolvedVacuumRetention, *, enforce: bool, table_uri: str) -> None:
    """Delta's ``checkRetentionPeriodSafety``: refuse (or, with the check off, warn about) a
    retention shorter than the table's.

    :raises VacuumRetentionTooShortError: with Delta's explanation and the hours to use.
    """
    if resolved.effective >= resolved.configured:
        return
    seconds = resolved.configured.total_seconds()
    hours = math.ceil(seconds / 3600)  # Delta rounds the configured hours up
    if enforce:
        raise VacuumRetentionTooShortError(
            f"Are you sure you would like to vacuum files with such a low retention period? The "
            f"retention {resolved.effective} is shorter than the {resolved.configured} of {table_uri} "
            f"({DELETED_FILE_RETENTION}, from the {resolved.configured_source}). If you have writers that "
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
        resolved.effective,
        resolved.configured,
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
    formats = (snapshot.properties.get(ICEBERG_FORMATS) or "").lower()
    iceberg = "iceberg" in [f.strip() for f in formats.split(",")]

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
    root_prefix = storage.root.rstrip("/") + "/"
    for table in (state.adds, state.removes):
        for path in table.column("path").to_pylist():
            for relative in _relative_forms(storage, root_prefix, path):
                _add_with_parents(protected, relative)
        _protect_deletion_vectors(storage, root_prefix, table.column("deletionVector"), protected)
    return protected


def _table_retention(snapshot: Snapshot) -> timedelta:
    from airflow_delta_provider.core.retention import property_interval

    value = property_interval(snapshot.properties, DELETED_FILE_RETENTION)
    assert value is not None
    return value


def _protect_deletion_vectors(
    storage: TableStorage, root_prefix: str, column: pa.ChunkedArray, protected: set[str]
) -> None:
    if column.null_count == len(column):
        return
    for dv in column.filter(column.is_valid()).to_pylist():
        if dv.get("storageType") == "i":
            continue
        # A malformed descriptor raises: VACUUM must not guess which file a live DV is in.
        path = deletion_vector_path(dv, storage.root)
        if dv.get("storageType") == "p":
            for relative in _relative_forms(storage, root_prefix, path):
                _add_with_parents(protected, relative)
            continue
        relative = path[len(root_prefix) :] if path.startswith(root_prefix) else None
        if relative:
            _add_with_parents(protected, relative)


def _relative_forms(storage: TableStorage, root_prefix: str, path: str) -> list[str]:
    """A log path relative to the root: URL-decoded and (if different) as written; [] when outside."""
    if "%" not in path and ":" not in path and not path.startswith("/"):
        return [_normalize(path)]
    forms = []
    for fs_path in (resolve_path(storage, path), _undecoded_fs_path(storage, path)):
        if fs_path is not None and fs_path.startswith(root_prefix):
            forms.append(_normalize(fs_path[len(root_prefix) :]))
    return list(dict.fromkeys(f for f in forms if f))


def _undecoded_fs_path(storage: TableStorage, path: str) -> str | None:
    """:func:`resolve_path` without URL-decoding, for writers that did not encode their paths."""
    if "%" not in path:
        return None
    if not has_scheme(path):
        return path if path.startswith("/") else f"{storage.root.rstrip('/')}/{path}"
    parts = urlsplit(path)
    scheme = parts.scheme.lower()
    if scheme in ("file", "local"):
        return parts.path
    if scheme in ("s3", "s3a", "s3n"):
        return f"{parts.netloc}/{parts.path.lstrip('/')}"
    return None


def _normalize(relative: str) -> str:
    return posixpath.normpath(relative) if ("/." in relative or relative.startswith(".")) else relative


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
    if (snapshot.properties.get("delta.enableInCommitTimestamps") or "").lower() == "true":
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
    listing = list_table(storage, hidden, protected)
    plan = VacuumPlan(listed_directories=len(listing.directories))
    root_prefix = storage.root.rstrip("/") + "/"
    for relative, size, mtime in listing.files:
        if mtime < delete_before_ms and relative not in protected:
            plan.files.append((root_prefix + relative, size))
    plan.files.sort()
    empty = [d for d in listing.empty_directories if d not in protected]
    # Deepest first, so that a directory holding only empty directories goes after them.
    empty.sort(key=lambda d: (-d.count("/"), d))
    plan.directories = [root_prefix + d for d in empty]
    return plan


@dataclass
class TableListing:
    """The visible content of a table root.

    :param files: ``(relative path, size, modification ms)`` (local listings leave out the
        files they were asked to skip).
    :param directories: relative paths of the visible directories.
    :param empty_directories: those with nothing at all (not even hidden entries) below them.
    """

    files: list[tuple[str, int, int]]
    directories: list[str]
    empty_directories: list[str]


def list_table(
    storage: TableStorage, hidden: Callable[[str], bool], skip: Container[str] = frozenset()
) -> TableListing:
    """List the table root recursively, skipping hidden names at every level.

    :param skip: relative paths of files that need no size or age (protected ones); local
        listings leave them out and save their ``stat`` calls.
    """
    if storage.is_local:
        return _list_local(storage.root, hidden, skip)
    return _list_fsspec(storage, hidden)


def _list_local(root: str, hidden: Callable[[str], bool], skip: Container[str] = frozenset()) -> TableListing:
    """Scan the root level by level. Files in ``skip`` (protected ones) are seen but not
    ``stat``-ed: on a large live table most files are protected and cost no system call."""
    files: list[tuple[str, int, int]] = []
    directories: list[str] = []
    # Per directory: has it any entry that is not a visible directory, and its visible subdirs.
    occupied: dict[str, bool] = {}
    children: dict[str, list[str]] = {}

    def scan(relative: str) -> tuple[str, list[tuple[str, int, int]], list[str], bool] | None:
        absolute = f"{root}/{relative}" if relative else root
        prefix = f"{relative}/" if relative else ""
        found: list[tuple[str, int, int]] = []
        subdirs: list[str] = []
        has_other = False
        try:
            entries = os.scandir(absolute)
        except (FileNotFoundError, NotADirectoryError):
            return None
        with entries:
            for entry in entries:
                name = entry.name
                # Only `_`/`.` names and UniForm's `metadata` can be hidden: skip the call for others.
                if (name[0] in "._" or name == "metadata") and hidden(name):
                    has_other = True
                    continue
                path = prefix + name
                try:
                    # Symlinks are never followed: a link to a directory must not lead the listing
                    # (and the deletions) out of the table root; the link itself is a file.
                    if entry.is_dir(follow_symlinks=False):
                        subdirs.append(path)
                        continue
                    has_other = True
                    if path in skip:
                        continue
                    stat = entry.stat(follow_symlinks=False)
                except FileNotFoundError:  # deleted while listing
                    continue
                found.append((path, stat.st_size, int(stat.st_mtime * 1000)))
        return relative, found, subdirs, has_other

    # Breadth first. (Threads do not help: the per-entry work holds the GIL longer than the
    # ``stat`` call releases it; measured slower with 2-8 threads on 100,000 files.)
    level = [""]
    while level:
        results = [scan(directory) for directory in level]
        level = []
        for item in results:
            if item is None:
                continue
            relative, found, subdirs, has_other = item
            files.extend(found)
            occupied[relative] = has_other
            children[relative] = subdirs
            directories.extend(subdirs)
            level.extend(subdirs)
    empty = _empty_directories(directories, occupied, children)
    return TableListing(files, directories, empty)


def _empty_directories(
    directories: list[str], occupied: Mapping[str, bool], children: Mapping[str, list[str]]
) -> list[str]:
    is_empty: dict[str, bool] = {}
    # Deepest first: a directory is empty when it holds nothing but empty directories.
    for directory in sorted(directories, key=lambda d: -d.count("/")):
        is_empty[directory] = not occupied.get(directory, True) and all(
            is_empty.get(child, False) for child in children.get(directory, [])
        )
    return [d for d in directories if is_empty[d]]


def _list_fsspec(storage: TableStorage, hidden: Callable[[str], bool]) -> TableListing:
    fs = storage.fs
    root = storage.root.rstrip("/")
    prefix = root + "/"
    with contextlib.suppress(Exception):
        fs.invalidate_cache(root)
    try:
        entries = fs.find(root, withdirs=True, detail=True)
    except FileNotFoundError:
        entries = {}
    files: list[tuple[str, int, int]] = []
    directories: list[str] = []
    nonempty: set[str] = set()
    prefix_store = storage.scheme in _PREFIX_STORES
    for name, entry in entries.items():
        name = name.rstrip("/")
        if not name.startswith(prefix):
            continue
        relative = name[len(prefix) :]
        parts = relative.split("/")
        # Whatever exists below a directory (hidden or not) keeps it.
        for i in range(1, len(parts)):
            nonempty.add("/".join(parts[:i]))
        if any(hidden(part) for part in parts):
            continue
        if entry.get("type") == "directory":
            if not prefix_store:
                directories.append(relative)
            continue
        info = _file_info(entry)
        files.append((relative, info.size, info.modification_time))
    # On object stores a "directory" is a key prefix: it disappears with its last object, and
    # deleting a prefix would mean a recursive delete. Directories are left to the store there.
    empty = [d for d in directories if d not in nonempty]
    return TableListing(files, directories, empty)


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
    root_prefix = storage.root.rstrip("/") + "/"
    # As Delta: one entry per path, the newest (deletion) time wins, then the age test.
    newest: dict[str, tuple[int, int]] = {}
    for path, size, stamp in _removed_files(storage, [c.file.path for c in wanted]):
        forms = _relative_forms(storage, root_prefix, path)
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
    prefix = storage.root.rstrip("/") + "/"
    log_prefix = prefix + LOG_DIR + "/"
    real_root = os.path.realpath(storage.root) if storage.is_local and resolve_links else None
    checked: dict[str, bool] = {}
    for path in paths:
        inside = (
            path.startswith(prefix)
            and len(path) > len(prefix)
            and not path.startswith(log_prefix)
            and "/../" not in path
            and "/./" not in path
            and not path.endswith(("/..", "/."))
        )
        if inside and real_root is not None:
            parent = path.rpartition("/")[0]
            if parent not in checked:
                real = os.path.realpath(parent)
                checked[parent] = real == real_root or real.startswith(real_root + os.sep)
            inside = checked[parent]
        if not inside:
            raise InvalidPathError(
                f"VACUUM refuses to run: the candidate {path!r} is not strictly under the table root "
                f"{storage.root_uri} (or is inside {LOG_DIR}). Nothing was deleted. Check the table's log "
                f"for paths that leave the root."
            )


def delete_files(storage: TableStorage, paths: Sequence[str], *, max_workers: int | None = None) -> int:
    """Delete files in bounded parallel batches; returns how many existed and were deleted.

    S3: one ``DeleteObjects`` request per 1,000 keys, keys used verbatim (no glob expansion).
    Local: ``os.remove``. Other stores: the filesystem's ``rm_file``. Stops at the first batch
    that fails (the remaining batches are cancelled) and raises.

    :raises VacuumDeleteError: the store refused some deletions.
    :raises OSError: a local deletion failed.
    """
    if not paths:
        return 0
    if storage.scheme == "s3" or _is_s3fs(storage.fs):
        worker: Callable[[Sequence[str]], int] = lambda batch: _delete_s3(storage, batch)  # noqa: E731
        workers = max_workers or 8
    elif storage.is_local:
        worker = _delete_local
        workers = max_workers or 4
    else:
        worker = lambda batch: _delete_fsspec(storage, batch)  # noqa: E731
        workers = max_workers or 8
    batches = [paths[i : i + DELETE_BATCH] for i in range(0, len(paths), DELETE_BATCH)]
    progress = _Progress(storage.root_uri, len(paths))
    if workers == 1 or len(batches) == 1:
        total = 0
        for batch in batches:
            total += worker(batch)
            progress.advance(len(batch))
        progress.finish()
        return total
    total = 0
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="delta-vacuum") as pool:
        pending: set[Future[int]] = set()
        sizes: dict[Future[int], int] = {}
        for batch in batches:
            future = pool.submit(worker, batch)
            sizes[future] = len(batch)
            pending.add(future)
        while pending:
            done, pending = wait(pending, timeout=PROGRESS_INTERVAL, return_when=FIRST_EXCEPTION)
            for future in done:
                error = future.exception()
                if error is not None:
                    for other in pending:
                        other.cancel()
                    raise error
                total += future.result()
                progress.advance(sizes[future])
    progress.finish()
    return total


class _Progress:
    """INFO messages at most every :data:`PROGRESS_INTERVAL` seconds while deleting."""

    def __init__(self, uri: str, total: int) -> None:
        self.uri = uri
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.last = self.started
        self.lock = threading.Lock()

    def advance(self, count: int) -> None:
        with self.lock:
            self.done += count
            now = time.monotonic()
            if now - self.last >= PROGRESS_INTERVAL and self.done < self.total:
                self.last = now
                log.info(
                    "VACUUM of %s: %d of %d file(s) deleted (%.0f%%) in %.0f s.",
                    self.uri,
                    self.done,
                    self.total,
                    100 * self.done / self.total,
                    now - self.started,
                )

    def finish(self) -> None:
        if time.monotonic() - self.started >= PROGRESS_INTERVAL:
            log.info(
                "VACUUM of %s: all %d file(s) handled in %.0f s.",
                self.uri,
                self.total,
                time.monotonic() - self.started,
            )


def _delete_local(batch: Sequence[str]) -> int:
    deleted = 0
    for path in batch:
        try:
            os.remove(path)
        except FileNotFoundError:
            continue  # already gone (a concurrent VACUUM): nothing to do
        deleted += 1
    return deleted


def _delete_fsspec(storage: TableStorage, batch: Sequence[str]) -> int:
    deleted = 0
    for path in batch:
        try:
            storage.fs.rm_file(path)
        except FileNotFoundError:
            continue
        deleted += 1
    return deleted


def _is_s3fs(fs: Any) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "s3" in protocol and hasattr(fs, "_call_s3")


def _delete_s3(storage: TableStorage, batch: Sequence[str]) -> int:
    from fsspec.asyn import sync

    fs = storage.fs
    by_bucket: dict[str, list[str]] = {}
    for path in batch:
        bucket, _, key = path.partition("/")
        by_bucket.setdefault(bucket, []).append(key)
    deleted = 0
    for bucket, keys in by_bucket.items():
        response = sync(
            fs.loop,
            fs._call_s3,
            "delete_objects",
            Bucket=bucket,
            Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
        )
        errors = response.get("Errors") or []
        if errors:
            failed = [(f"{bucket}/{e.get('Key')}", f"{e.get('Code')}: {e.get('Message')}") for e in errors]
            raise VacuumDeleteError(
                f"S3 refused to delete {len(failed)} of {len(keys)} file(s) of {storage.root_uri}, e.g. "
                f"s3://{failed[0][0]} ({failed[0][1]}). Check the credentials' s3:DeleteObject "
                f"permission and run VACUUM again.",
                failed=failed,
            )
        # S3 deletes are idempotent and do not say whether the key existed.
        deleted += len(keys)
    for path in batch:
        with contextlib.suppress(Exception):
            fs.invalidate_cache(path)
    return deleted


def delete_directories(storage: TableStorage, directories: Sequence[str]) -> int:
    """Delete empty directories (deepest first); one that is no longer empty is left alone."""
    deleted = 0
    for directory in directories:
        try:
            if storage.is_local:
                os.rmdir(directory)
            else:
                storage.fs.rmdir(directory)
        except FileNotFoundError:
            continue
        except OSError as err:
            if err.errno in (39, 66) or "not empty" in str(err).lower():  # ENOTEMPTY (Linux, macOS)
                log.info("Keeping %s: a file appeared in it during VACUUM.", storage.to_uri(directory))
                continue
            raise
        deleted += 1
    return deleted


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
        "defaultRetentionMillis": _millis(resolved.configured),
    }
    if resolved.explicit:
        parameters["specifiedRetentionMillis"] = _millis(resolved.effective)
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
