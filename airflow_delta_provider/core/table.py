"""DeltaTable: the entry point of the core. Versions, snapshots, time travel and history."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import (
    TimestampEarlierThanRetentionError,
    TimestampLaterThanLatestCommitError,
)
from airflow_delta_provider.core.logfiles import LogFileKind, commit_name
from airflow_delta_provider.core.replay import parse_commit
from airflow_delta_provider.core.segment import (
    build_segment,
    complete_checkpoints,
    list_log_files,
)
from airflow_delta_provider.core.snapshot import Snapshot, load_snapshot
from airflow_delta_provider.core.storage import open_store
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
        self.storage = open_store(uri, storage_options, filesystem=filesystem)

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
        return load_snapshot(self.storage, version)

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
        if properties.get(ICT_ENABLED, "false").lower() == "true":
            since = int(properties.get(ICT_ENABLEMENT_VERSION, "0"))
            for index, entry in enumerate(result):
                if entry.version >= since:
                    ict = self._in_commit_timestamp(entry.version)
                    if ict is not None:
                        result[index] = CommitTimestamp(entry.version, ict, "inCommitTimestamp")
        return result

    def _in_commit_timestamp(self, version: int) -> int | None:
        info = self._commit_info(version)
        value = info.get("inCommitTimestamp") if info else None
        return int(value) if value is not None else None

    def version_at(self, timestamp: datetime | str | int) -> CommitTimestamp:
        """The latest version committed at or before ``timestamp`` (Delta's ``getActiveCommitAtTime``).

        :raises TimestampEarlierThanRetentionError: before the earliest reconstructable version.
        :raises TimestampLaterThanLatestCommitError: after the latest commit.
        """
        target = to_millis(timestamp)
        stamps = self.commit_timestamps()
        eligible = [s for s in stamps if s.timestamp <= target]
        if not eligible:
            raise TimestampEarlierThanRetentionError(
                f"The provided timestamp ({_format_ms(target)}) is before the earliest version available "
                f"to {self.uri} (version {stamps[0].version}, committed {_format_ms(stamps[0].timestamp)}). "
                f"Use a timestamp at or after {_format_ms(stamps[0].timestamp)}."
            )
        if target > stamps[-1].timestamp and eligible[-1] is stamps[-1]:
            # Delta refuses a timestamp past the last commit rather than guess the future.
            raise TimestampLaterThanLatestCommitError(
                f"The provided timestamp ({_format_ms(target)}) is after the latest version available to "
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
        # commitInfo is the first action by protocol; read only up to it when possible.
        first = data.split(b"\n", 1)[0]
        if first.startswith(b'{"commitInfo"'):
            try:
                return json.loads(first)["commitInfo"]
            except (ValueError, KeyError):
                pass
        return parse_commit(version, self.storage.to_uri(path), data).commit_info

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
            (keep it after checking that schema, with names spelled as the table spells them,
            and partitioning fit) or ``overwrite`` (replace its schema, partitioning and
            properties and remove all its files: Delta's ``CREATE OR REPLACE TABLE``).
        :raises TableAlreadyExistsError: ``mode="error"`` and a table exists at ``uri``.
        :raises UnsupportedFeatureError: a property needs a feature this core cannot write.
        :raises SchemaMismatchError: ``mode="append"`` and the table's schema or partitioning differ.

        Like every commit, the version-0 commit is validated before it is written and reported
        as landed once written (see :meth:`commit_files`).
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
        allow_empty_overwrite: bool = False,
    ) -> CommitResult:
        """Commit Parquet files that already exist under the table root, in one atomic commit.

        Statistics come from the files' Parquet footers (read in parallel), partition values
        from their ``col=value`` directories (or ``partition_values``). The schema of every
        file is checked against the table's, column names spelled exactly as the table spells
        them. Every value written to the log is checked against its Delta type first, so bad
        input leaves the table, its log and its files as they were.

        No files (``files=[]``, or a ``prefix`` directory that exists but holds no data file):
        an append writes nothing (``reason="no_files"``) unless ``app_id`` is given, in which
        case a commit records only the txn, so a retry of the run is recognised (Delta's
        streaming sink does the same for an empty batch); an overwrite that would remove data
        is refused unless ``allow_empty_overwrite=True``.

        Once the commit file is in place the commit is reported as landed: the checksum,
        checkpoint and log cleanup after it never raise; their failures are logged and listed
        in ``post_commit_errors``.

        :param files: the files, relative to the table root or as URIs under it. On local
            storage a file that is, or lies under, a symbolic link is refused.
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
        :param allow_empty_overwrite: let an overwrite (or ``replace_where``) without files
            remove the data it selects; refused by default, since an empty file list is
            more often a mistake than a wish to empty the table.
        :returns: what was done; ``committed=False`` with ``reason`` when nothing was written
            (``"already_committed"``: ``version`` is the version that recorded the txn, an
            upper bound when ``version_exact`` is False; ``"no_files"``).
        :raises InvalidPathError: a file is outside the root, hidden, a symbolic link, missing
            or listed twice; the prefix does not exist.
        :raises InvalidDataFileError: a file is not Parquet.
        :raises SchemaMismatchError: a file's schema or partition values do not fit the table
            (also: column names that differ from the table's only in case).
        :raises InvalidLogValueError: a value does not fit its Delta type (``app_version`` of
            2^63 or more, a partition value out of its column's range ...).
        :raises EmptyOverwriteError: an overwrite with no files would remove data.
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
            allow_empty_overwrite=allow_empty_overwrite,
        )

    def already_committed(
        self, app_id: str, app_version: int, *, snapshot: Snapshot | None = None
    ) -> CommitResult | None:
        """Whether ``(app_id, app_version)`` is already committed, as :meth:`commit_files` decides it.

        Reads only protocol, metadata and txns of the latest snapshot (never the file list).
        When the table holds ``app_id`` at ``app_version`` or later, returns the result
        :meth:`commit_files` would return: ``committed=False``, ``reason="already_committed"``,
        ``version`` the version whose commit recorded the txn. That commit is found exactly
        while it is in the log (reading the commits since the last checkpoint, or a handful
        located by the txn's ``lastUpdated``); otherwise ``version_exact`` is False and
        ``version`` is an upper bound (the last checkpoint's version).

        :param snapshot: the latest snapshot, when the caller already has it.
        :returns: None when the table does not exist or the application has not committed
            that version yet.
        :raises ValueError: ``app_id`` or ``app_version`` are not values a ``txn`` can hold.
        """
        from airflow_delta_provider.core.write import already_committed

        return already_committed(self, app_id, app_version, snapshot=snapshot)


def to_millis(value: datetime | str | int) -> int:
    """Milliseconds since the epoch from a datetime (naive = UTC), an ISO-8601 string or an int."""
    if isinstance(value, bool):
        raise ValueError(f"Not a timestamp: {value!r}.")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"Cannot parse the timestamp {value!r}; use ISO-8601, e.g. '2026-11-22T10:00:00Z'."
            ) from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return int(value.timestamp() * 1000)
    raise ValueError(
        f"Not a timestamp: {value!r}; pass a datetime, an ISO-8601 string or epoch milliseconds."
    )


def _format_ms(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
