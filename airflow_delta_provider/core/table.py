"""DeltaTable: the entry point of the core. Versions, snapshots, time travel and history."""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import (
    CorruptLogError,
    DeltaError,
    TimestampEarlierThanRetentionError,
    TimestampLaterThanLatestCommitError,
    VersionNotFoundError,
)
from airflow_delta_provider.core.logfiles import LogFileKind, commit_name
from airflow_delta_provider.core.replay import commit_info_of
from airflow_delta_provider.core.segment import (
    LogSegment,
    build_segment,
    complete_checkpoints,
    list_log_files,
)
from airflow_delta_provider.core.snapshot import Snapshot
from airflow_delta_provider.core.storage import TableStorage
from airflow_delta_provider.core.transaction import DEFAULT_MAX_ATTEMPTS

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import fsspec
    import pyarrow as pa

    from airflow_delta_provider.core.checkpoint import CheckpointResult
    from airflow_delta_provider.core.cleanup import CleanupResult
    from airflow_delta_provider.core.transaction import CommitResult
    from airflow_delta_provider.core.vacuum import VacuumResult
    from airflow_delta_provider.core.write import CreateMode, SchemaMode, WriteMode

log = logging.getLogger(__name__)

ICT_ENABLED = "delta.enableInCommitTimestamps"
ICT_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
ICT_ENABLEMENT_TIMESTAMP = "delta.inCommitTimestampEnablementTimestamp"


@dataclass(frozen=True, slots=True)
class CommitTimestamp:
    """When a version was committed, as Delta's time travel sees it."""

    version: int
    #: milliseconds since the epoch (UTC)
    timestamp: int
    #: ``"inCommitTimestamp"`` or ``"modificationTime"``
    source: str


class DeltaTable:
    """A Delta table at a location.

    Creating the object does no I/O; every method reads the log afresh, so a long-lived
    ``DeltaTable`` always sees the latest version.

    :param uri: the table root: a local path, ``file://``, ``s3://``, ``memory://`` or another
        fsspec URL.
    :param storage_options: fsspec options for the filesystem (credentials, endpoint, ...).
    :param filesystem: an already configured fsspec filesystem (the Airflow hook passes one
        built from an Airflow connection).
    """

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        filesystem: fsspec.AbstractFileSystem | None = None,
    ) -> None:
        self.storage = TableStorage(uri, storage_options, filesystem=filesystem)

    def __repr__(self) -> str:
        return f"DeltaTable({self.storage.root_uri!r})"

    @property
    def uri(self) -> str:
        return self.storage.root_uri

    # --- versions and snapshots --------------------------------------------------------

    def version(self) -> int:
        """The latest version (one hint read and one listing from the last checkpoint)."""
        return build_segment(self.storage).version

    def snapshot(self, version: int | None = None, timestamp: datetime | str | int | None = None) -> Snapshot:
        """The table at the latest version, at ``version``, or as of ``timestamp``.

        :param version: a version number to travel to.
        :param timestamp: a point in time (``datetime``; naive means UTC; ISO-8601 string;
            or milliseconds since the epoch): the latest version committed at or before it.
        :raises TableNotFoundError: there is no Delta table at the location.
        :raises VersionNotFoundError: the version or timestamp is outside the table's history.
        :raises UnsupportedFeatureError: the table needs a reader feature this core lacks.
        """
        if version is not None and timestamp is not None:
            raise ValueError("Pass either version or timestamp, not both.")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 0):
            raise ValueError(f"version must be a non-negative integer, got {version!r}.")
        if timestamp is not None:
            version = self.version_at(timestamp).version
        return self._load(build_segment(self.storage, version), version)

    def _load(self, segment: LogSegment, version: int | None) -> Snapshot:
        while True:
            snapshot = Snapshot(self.storage, segment)
            try:
                return snapshot.load()
            except CorruptLogError as err:
                checkpoint = segment.checkpoint
                if checkpoint is None or err.path not in [self.storage.to_uri(p) for p in checkpoint.paths]:
                    raise
                # As Delta: an unreadable checkpoint is not fatal while an older one can
                # rebuild the same version.
                log.warning("%s; trying the checkpoint before version %d.", err, checkpoint.version)
                try:
                    segment = build_segment(self.storage, version, before_checkpoint=checkpoint.version)
                except DeltaError:
                    raise err from None

    # --- time travel -------------------------------------------------------------------

    def commit_timestamps(self) -> list[CommitTimestamp]:
        """Timestamps of every reconstructable version, oldest first, as Delta's time travel uses them.

        Modification times of the commit files, made strictly increasing as Delta does; with
        in-commit timestamps enabled, ``commitInfo.inCommitTimestamp`` from the enablement
        version on.
        """
        files = list_log_files(self.storage, 0)
        commits = [f for f in files if f.kind is LogFileKind.COMMIT]
        if not commits:
            build_segment(self.storage)  # raises the precise error
        checkpoints = complete_checkpoints(files)
        earliest = 0 if commits and commits[0].version == 0 else None
        if earliest is None:
            earliest = checkpoints[0].version if checkpoints else commits[0].version
        result: list[CommitTimestamp] = []
        previous = -1
        for commit in commits:
            stamp = max(commit.file.modification_time, previous + 1)
            previous = stamp
            if commit.version >= earliest:
                result.append(CommitTimestamp(commit.version, stamp, "modificationTime"))
        latest = self.snapshot()
        properties = latest.properties
        if (properties.get(ICT_ENABLED) or "false").lower() == "true":
            since = _enablement_version(properties.get(ICT_ENABLEMENT_VERSION), self.uri)
            for index, entry in enumerate(result):
                if entry.version >= since:
                    ict = self._in_commit_timestamp(entry.version)
                    if ict is not None:
                        result[index] = CommitTimestamp(entry.version, ict, "inCommitTimestamp")
        return result

    def _in_commit_timestamp(self, version: int) -> int | None:
        info = self._commit_info(version)  # checked: inCommitTimestamp is a long when present
        return info.get("inCommitTimestamp") if info else None

    def version_at(self, timestamp: datetime | str | int) -> CommitTimestamp:
        """The latest version committed at or before ``timestamp`` (Delta's ``getActiveCommitAtTime``).

        Any integer is a timestamp, however far from today (it simply lies before or after
        every commit); so is any datetime and any ISO-8601 string, years beyond 9999 included.

        :raises TimestampEarlierThanRetentionError: before the earliest reconstructable version.
        :raises TimestampLaterThanLatestCommitError: after the latest commit.
        :raises VersionNotFoundError: the log holds no commit file to time travel by.
        :raises ValueError: ``timestamp`` is not a timestamp (a bool, NaN, an unparseable string).
        """
        target = to_millis(timestamp)
        stamps = self.commit_timestamps()
        given = _describe_timestamp(timestamp, target)
        if not stamps:
            raise VersionNotFoundError(
                f"Cannot time travel to {given} in {self.uri}: its log holds no commit file to date a "
                f"version by (only checkpoints). Load a version by number instead."
            )
        eligible = [s for s in stamps if s.timestamp <= target]
        if not eligible:
            raise TimestampEarlierThanRetentionError(
                f"The provided timestamp ({given}) is before the earliest version available "
                f"to {self.uri} (version {stamps[0].version}, committed {_format_ms(stamps[0].timestamp)}). "
                f"Use a timestamp at or after {_format_ms(stamps[0].timestamp)}."
            )
        if target > stamps[-1].timestamp and eligible[-1] is stamps[-1]:
            # Delta refuses a timestamp past the last commit rather than guess the future.
            raise TimestampLaterThanLatestCommitError(
                f"The provided timestamp ({given}) is after the latest version available to "
                f"{self.uri} (version {stamps[-1].version}, committed {_format_ms(stamps[-1].timestamp)}). "
                f"Use a timestamp at or before {_format_ms(stamps[-1].timestamp)}, or load the latest "
                f"version."
            )
        return eligible[-1]

    # --- history -----------------------------------------------------------------------

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Commit history, newest first: each commit's ``commitInfo`` plus ``version`` and ``timestamp``.

        With ``limit=n`` only the last ``n`` commit files are read. ``timestamp`` is the
        in-commit timestamp when present, else the commit file's modification time.
        Versions whose commit was cleaned up are not listed.

        :param limit: the number of most recent commits to return; None for all.
        """
        if limit is not None and (not isinstance(limit, int) or limit < 1):
            raise ValueError(f"limit must be a positive integer, got {limit!r}.")
        latest = self.version()
        entries: list[dict[str, Any]] = []
        version = latest
        while version >= 0 and (limit is None or len(entries) < limit):
            entry = self._history_entry(version)
            if entry is None:
                break
            entries.append(entry)
            version -= 1
        return entries

    def _history_entry(self, version: int) -> dict[str, Any] | None:
        path = self.storage.log_path(commit_name(version))
        info = self.storage.info(path)
        if info is None:
            return None
        commit_info = self._commit_info(version) or {}
        timestamp = commit_info.get("inCommitTimestamp")
        return {
            **commit_info,
            "version": version,
            "timestamp": int(timestamp) if timestamp is not None else info.modification_time,
        }

    def _commit_info(self, version: int) -> dict[str, Any] | None:
        path = self.storage.log_path(commit_name(version))
        try:
            data = self.storage.read_bytes(path)
        except FileNotFoundError:
            return None
        return commit_info_of(version, self.storage.to_uri(path), data)

    # --- writes ------------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        uri: str,
        schema: pa.Schema | str,
        partition_by: Sequence[str] = (),
        properties: Mapping[str, Any] | None = None,
        *,
        name: str | None = None,
        description: str | None = None,
        mode: CreateMode = "error",
        storage_options: Mapping[str, Any] | None = None,
        filesystem: fsspec.AbstractFileSystem | None = None,
        user_metadata: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> DeltaTable:
        """Create a Delta table (version 0) with the lowest protocol its schema and properties need.

        :param uri: the table root.
        :param schema: a pyarrow schema, or a Delta / Spark (``df.schema.json()``) schema JSON.
        :param partition_by: partition columns, in directory order.
        :param properties: table properties (``delta.appendOnly``, ``delta.logRetentionDuration``...).
        :param name: the table's name in its metadata.
        :param description: the table's description.
        :param mode: when a table exists: ``error`` (default), ``ignore`` (keep it), ``append``
            (keep it after checking that schema and partitioning fit) or ``overwrite`` (replace
            its schema, partitioning and properties and remove all its files).
        :raises TableAlreadyExistsError: ``mode="error"`` and a table exists at ``uri``.
        :raises UnsupportedFeatureError: a property needs a feature this core cannot write.
        """
        from airflow_delta_provider.core.write import create_table

        table = cls(uri, storage_options, filesystem=filesystem)
        create_table(
            table,
            schema,
            partition_by,
            properties,
            name=name,
            description=description,
            mode=mode,
            user_metadata=user_metadata,
            tags=tags,
        )
        return table

    # --- maintenance ---------------------------------------------------------------------

    def checkpoint(self, version: int | None = None, *, parts: int | None = None) -> CheckpointResult:
        """Write a checkpoint of ``version`` (default: the latest) and then ``_last_checkpoint``.

        Classic single-file checkpoints, multi-part when ``parts`` > 1, V2 (with sidecars for
        large tables) when the table has the ``v2Checkpoint`` feature. See
        :func:`airflow_delta_provider.core.checkpoint.write_checkpoint`.

        :raises UnsupportedFeatureError: the table uses a writer feature a checkpoint cannot carry.
        :raises CorruptLogError: the replayed state contradicts the version's ``.crc``.
        """
        from airflow_delta_provider.core.checkpoint import write_checkpoint

        return write_checkpoint(self, version, parts=parts)

    def cleanup_logs(
        self,
        *,
        retention: timedelta | str | float | None = None,
        dry_run: bool = False,
        now: datetime | int | None = None,
        provider_defaults: Mapping[str, Any] | None = None,
    ) -> CleanupResult:
        """Delete expired log files exactly as Delta's MetadataCleanup does.

        Only whole groups of log files before a complete checkpoint whose preceding log is
        older than the cutoff (``now - delta.logRetentionDuration``, default 30 days, at UTC
        midnight) are deleted, so every version from the earliest retained checkpoint on
        stays readable. See :func:`airflow_delta_provider.core.cleanup.cleanup_logs`.

        :param retention: overrides the table's ``delta.logRetentionDuration``.
        :param dry_run: only report what would be deleted.
        """
        from airflow_delta_provider.core.cleanup import cleanup_logs

        return cleanup_logs(
            self, retention=retention, dry_run=dry_run, now=now, provider_defaults=provider_defaults
        )

    def vacuum(
        self,
        *,
        retention: timedelta | str | None = None,
        dry_run: bool = False,
        mode: str = "full",
        enforce_retention_duration: bool = True,
        max_workers: int | None = None,
        now: datetime | int | None = None,
        provider_defaults: Mapping[str, Any] | None = None,
        log_commits: bool | None = None,
    ) -> VacuumResult:
        """Delete files the table no longer references that are older than the retention (Delta's VACUUM).

        Never deletes a live file, an unexpired tombstone, their deletion vectors, hidden
        files, young untracked files (in-flight writes) or anything outside the table root.
        A retention shorter than the table's ``delta.deletedFileRetentionDuration`` (default
        7 days) is refused unless ``enforce_retention_duration=False``. See
        :func:`airflow_delta_provider.core.vacuum.vacuum` for every parameter.

        :param dry_run: only report what would be deleted.
        :param mode: ``full`` (list the table root, Delta's default) or ``lite`` (read removes
            from the log).
        """
        from airflow_delta_provider.core.vacuum import vacuum

        return vacuum(
            self,
            retention=retention,
            dry_run=dry_run,
            mode=mode,
            enforce_retention_duration=enforce_retention_duration,
            max_workers=max_workers,
            now=now,
            provider_defaults=provider_defaults,
            log_commits=log_commits,
        )

    def commit_files(
        self,
        files: Sequence[str] | None = None,
        *,
        prefix: str | None = None,
        mode: WriteMode = "append",
        replace_where: str | None = None,
        partition_values: Mapping[str, str | None] | None = None,
        schema_mode: SchemaMode = "enforce",
        app_id: str | None = None,
        app_version: int | None = None,
        user_metadata: str | None = None,
        tags: Mapping[str, str] | None = None,
        schema: pa.Schema | str | None = None,
        partition_by: Sequence[str] | None = None,
        properties: Mapping[str, Any] | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        max_workers: int | None = None,
        isolation_level: str | None = None,
        auto_checkpoint: bool = True,
    ) -> CommitResult:
        """Commit Parquet files that already exist under the table root, in one atomic commit.

        Statistics come from the files' Parquet footers (read in parallel), partition values
        from their ``col=value`` directories (or ``partition_values``). The schema of every
        file is checked against the table's.

        :param files: the files, relative to the table root or as URIs under it.
        :param prefix: instead of ``files``: a directory under the root whose (non-hidden)
            files are committed.
        :param mode: ``append``, or ``overwrite`` to replace the table's data (all of it, or
            the partitions ``replace_where`` selects).
        :param replace_where: with ``mode="overwrite"``: a SQL predicate on partition columns
            (Delta's ``replaceWhere``); only matching files are replaced, and the written files
            must match it.
        :param partition_values: the partition values of all the files, when their paths do
            not carry them.
        :param schema_mode: ``enforce`` (files must fit the table schema) or ``merge`` (new
            nullable columns are added to the schema in the same commit).
        :param app_id: with ``app_version``: an idempotent write (Delta's ``txnAppId`` /
            ``txnVersion``). When the table already holds ``app_id`` at ``app_version`` or later,
            nothing is committed and the result says so.
        :param app_version: a non-negative integer, increasing per ``app_id``.
        :param user_metadata: commitInfo ``userMetadata``.
        :param tags: commitInfo ``tags`` (the Airflow run identity goes here).
        :param schema: for a table that does not exist yet: its schema (default: the first
            file's, partition columns as strings).
        :param partition_by: for a new table: its partition columns; for an existing one it
            must equal the table's.
        :param properties: for a new table: its properties.
        :param max_attempts: commit attempts when concurrent writers keep winning.
        :param max_workers: threads reading footers.
        :param isolation_level: ``Serializable`` (default) or ``WriteSerializable``.
        :param auto_checkpoint: checkpoint after the commit when Delta's policy says so
            (every ``delta.checkpointInterval`` versions, default 10), as Spark does.
        :raises InvalidPathError: a file is outside the root, hidden, missing or listed twice.
        :raises InvalidDataFileError: a file is not Parquet.
        :raises SchemaMismatchError: a file's schema or partition values do not fit the table.
        :raises ConcurrentModificationError: a concurrent commit conflicts (Delta's error names).
        :raises UnsupportedFeatureError: the table uses a writer feature this core lacks.
        """
        from airflow_delta_provider.core.write import commit_files

        return commit_files(
            self,
            files,
            prefix=prefix,
            mode=mode,
            replace_where=replace_where,
            partition_values=partition_values,
            schema_mode=schema_mode,
            app_id=app_id,
            app_version=app_version,
            user_metadata=user_metadata,
            tags=tags,
            schema=schema,
            partition_by=partition_by,
            properties=properties,
            max_attempts=max_attempts,
            max_workers=max_workers,
            isolation_level=isolation_level,
            auto_checkpoint=auto_checkpoint,
        )


def to_millis(value: datetime | str | float) -> int:
    """Milliseconds since the epoch from a datetime (naive = UTC), an ISO-8601 string or a number.

    Every datetime and every ISO-8601 date converts, whatever its year (expanded years such
    as ``+275760-09-13`` too); numbers are milliseconds (a fraction is floored), however large.

    :raises ValueError: not a timestamp (a bool, NaN or infinity, an unparseable string,
        another type), naming the value.
    """
    if isinstance(value, bool):
        raise ValueError(
            f"Not a timestamp: {value!r}; pass a datetime, an ISO-8601 string or epoch milliseconds."
        )
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"Not a timestamp: {value!r}; epoch milliseconds must be a finite number.")
        return math.floor(value)
    if isinstance(value, str):
        return _iso_millis(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        # Integer arithmetic on a timedelta: exact, and no overflow at either end of datetime's range.
        return (value - _EPOCH) // timedelta(milliseconds=1)
    raise ValueError(
        f"Not a timestamp: {_short(repr(value))}; pass a datetime, an ISO-8601 string or epoch milliseconds."
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The Gregorian calendar repeats every 400 years, which hold exactly this many days.
_DAYS_PER_400_YEARS = 146_097
_EXPANDED_YEAR = re.compile(r"^([+-]?)(\d{4,})(-.*)$")


def _iso_millis(text: str) -> int:
    """An ISO-8601 timestamp string in epoch milliseconds, for any year."""
    stripped = text.strip()
    normalised = stripped[:-1] + "+00:00" if stripped[-1:] in ("Z", "z") else stripped
    match = _EXPANDED_YEAR.match(normalised)
    try:
        if match is None:
            return to_millis(datetime.fromisoformat(normalised))
        sign, digits, rest = match.groups()
        year = -int(digits) if sign == "-" else int(digits)
        # Parse within 2000-2399 and shift by whole 400-year cycles: exact for any year.
        cycles, offset = divmod(year - 2000, 400)
        parsed = datetime.fromisoformat(f"{2000 + offset:04d}{rest}")
        return to_millis(parsed) + cycles * _DAYS_PER_400_YEARS * 86_400_000
    except ValueError:
        raise ValueError(
            f"Cannot parse the timestamp {_short(repr(text))}; use ISO-8601, e.g. '2026-11-22T10:00:00Z'."
        ) from None


def _format_ms(ms: int) -> str:
    """An ISO-8601 UTC rendering of epoch milliseconds, or the number itself outside years 1-9999."""
    try:
        return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")
    except OverflowError:
        return f"{_short(str(ms))} ms since the epoch (outside the years 1-9999)"


def _describe_timestamp(value: Any, ms: int) -> str:
    """The timestamp as the caller gave it, and the time it stands for."""
    formatted = _format_ms(ms)
    if isinstance(value, int | float):
        return (
            formatted
            if formatted.endswith("9999)")
            else f"{_short(repr(value))} ms since the epoch = {formatted}"
        )
    given = _short(repr(value)) if isinstance(value, str) else _short(str(value))
    return f"{given} = {formatted}"


def _enablement_version(value: str | None, uri: str) -> int:
    """``delta.inCommitTimestampEnablementVersion`` as a version number (0 when unset)."""
    if value is None:
        return 0
    try:
        version = int(value)
    except ValueError:
        version = -1
    if version < 0:
        raise CorruptLogError(
            f"The table property {ICT_ENABLEMENT_VERSION}={_short(repr(value))} of {uri} is not a version "
            f"number; the table's metadata is corrupt. Fix the property with the engine that set it."
        )
    return version


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
