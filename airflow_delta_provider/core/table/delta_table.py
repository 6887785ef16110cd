"""DeltaTable: the entry point of the core. Versions, snapshots, time travel and history."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from airflow_delta_provider.core.changes.feed import Changes, load_changes
from airflow_delta_provider.core.errors import (
    TableNotFoundError,
)
from airflow_delta_provider.core.expressions.partition_filter import PartitionFilter
from airflow_delta_provider.core.lifecycle.data_retention import DataRetentionOptions, apply_data_retention
from airflow_delta_provider.core.lifecycle.delete import DeleteOptions, delete
from airflow_delta_provider.core.lifecycle.purge import PurgeOptions, purge
from airflow_delta_provider.core.lifecycle.restore import RestoreOptions, find_tagged_commits
from airflow_delta_provider.core.lifecycle.restore import restore as restore_table
from airflow_delta_provider.core.log.segment import (
    build_segment,
)
from airflow_delta_provider.core.log.snapshot import Snapshot, load_snapshot
from airflow_delta_provider.core.log.timeline import (
    CommitTimeRule,
    CommitTimestamp,
    commit_timestamps,
    history,
    version_at,
)
from airflow_delta_provider.core.maintenance.checkpoint import (
    CheckpointOptions,
    should_checkpoint,
    write_checkpoint,
)
from airflow_delta_provider.core.maintenance.cleanup import CleanupOptions, cleanup_logs
from airflow_delta_provider.core.maintenance.optimize import OptimizeOptions, optimize
from airflow_delta_provider.core.maintenance.vacuum import VacuumOptions, vacuum
from airflow_delta_provider.core.storage import open_store
from airflow_delta_provider.core.transaction.commit import PostCommitHook
from airflow_delta_provider.core.transaction.commit_plan import CommitProperties
from airflow_delta_provider.core.transaction.create import CreateOptions, create_table
from airflow_delta_provider.core.transaction.idempotency import already_committed
from airflow_delta_provider.core.transaction.write import CommitOptions, commit_files
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime

    import fsspec
    import pyarrow as pa

    from airflow_delta_provider.core.expressions.predicate import Predicate
    from airflow_delta_provider.core.lifecycle.data_retention import DataRetentionResult
    from airflow_delta_provider.core.lifecycle.delete import DeleteResult, RowMatcher
    from airflow_delta_provider.core.lifecycle.restore import RestoreResult, TaggedCommits
    from airflow_delta_provider.core.maintenance.checkpoint import CheckpointResult
    from airflow_delta_provider.core.maintenance.cleanup import CleanupResult
    from airflow_delta_provider.core.maintenance.optimize import OptimizeResult, Rewriter
    from airflow_delta_provider.core.maintenance.vacuum import VacuumResult
    from airflow_delta_provider.core.protocol.table_config import TableConfig
    from airflow_delta_provider.core.transaction.commit import LandedCommit
    from airflow_delta_provider.core.transaction.commit_plan import CommitResult

log = get_logger(__name__)


P = ParamSpec("P")
Options = TypeVar("Options")
Owner = TypeVar("Owner")
Result = TypeVar("Result")


def _takes(
    kind: Callable[P, Options],
) -> Callable[[Callable[[Owner, Options], Result]], Callable[Concatenate[Owner, P], Result]]:
    """The facade method takes ``kind``'s arguments (declared once, on that dataclass) and gets
    them as one ``kind`` object: a misspelt argument is a type error for a type checker and a
    ``TypeError`` naming it at run time, and ``help()`` shows every argument."""

    def decorate(method: Callable[[Owner, Options], Result]) -> Callable[Concatenate[Owner, P], Result]:
        @functools.wraps(method)
        def forward(owner: Owner, /, *args: P.args, **kwargs: P.kwargs) -> Result:
            try:
                options = kind(*args, **kwargs)
            except TypeError as err:  # name the method the caller called, not the dataclass
                text = str(err).replace(f"{getattr(kind, '__qualname__', kind)}.__init__()", "", 1)
                raise TypeError(f"DeltaTable.{method.__name__}(){text}") from None
            return method(owner, options)

        signature = inspect.signature(kind)
        first = inspect.Parameter("self", inspect.Parameter.POSITIONAL_ONLY)
        returns = inspect.signature(method).return_annotation
        forward.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[first, *signature.parameters.values()], return_annotation=returns
        )
        return forward

    return decorate


@dataclass(frozen=True, kw_only=True)
class _CreateArguments(CreateOptions):
    """What :meth:`DeltaTable.create` takes: the table to create, how to open it, and the options."""

    uri: str = field(kw_only=False)
    schema: pa.Schema | str = field(kw_only=False)
    partition_by: Sequence[str] = field(default=(), kw_only=False)
    properties: Mapping[str, Any] | None = field(default=None, kw_only=False)
    storage_options: Mapping[str, Any] | None = None
    filesystem: fsspec.AbstractFileSystem | None = None
    provider_defaults: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class _CheckpointArguments(CheckpointOptions):
    """What :meth:`DeltaTable.checkpoint` takes: the version, and the options."""

    version: int | None = field(default=None, kw_only=False)


@dataclass(frozen=True, kw_only=True)
class _OptimizeArguments(OptimizeOptions):
    """What :meth:`DeltaTable.optimize` takes: the options, and the engine of the rewrite."""

    rewrite: Rewriter | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class _PurgeArguments(PurgeOptions):
    """What :meth:`DeltaTable.purge` takes: the options, and the engine of the rewrite."""

    rewrite: Rewriter | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, kw_only=True)
class _DeleteArguments(DeleteOptions):
    """What :meth:`DeltaTable.delete` takes: the options, and the engine finding the rows."""

    match_rows: RowMatcher | None = field(default=None, compare=False, repr=False)


class DeltaTable:
    """A Delta table at a location.

    Creating the object does no I/O; every method reads the log afresh, so a long-lived
    ``DeltaTable`` always sees the latest version.

    :param uri: the table root: a local path, ``file://``, ``s3://``, ``memory://`` or another
        fsspec URL.
    :param storage_options: credentials, endpoint, region ... as delta-rs / object_store keys or
        as the fsspec filesystem's own options (see ``docs/storage.md``).
    :param filesystem: an already configured fsspec filesystem (the Airflow hook passes one
        built from an Airflow connection).
    :param provider_defaults: provider-wide table-property defaults (the Airflow ``[delta]``
        section), used where the table sets no property of its own (see ``TableConfig``).
    """

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        filesystem: fsspec.AbstractFileSystem | None = None,
        provider_defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.storage = open_store(uri, storage_options, filesystem=filesystem)
        self.provider_defaults = dict(provider_defaults or {})

    def __repr__(self) -> str:
        return f"DeltaTable({self.storage.root_uri!r})"

    @property
    def uri(self) -> str:
        return self.storage.root_uri

    # --- versions and snapshots --------------------------------------------------------

    def version(self) -> int:
        """The latest version (one hint read and one listing from the last checkpoint)."""
        return build_segment(self.storage).version

    def snapshot(
        self,
        version: int | None = None,
        timestamp: datetime | str | int | None = None,
        *,
        partition_filter: str | Predicate | PartitionFilter | None = None,
    ) -> Snapshot:
        """The table at the latest version, at ``version``, or as of ``timestamp``.

        :param version: a version number to travel to.
        :param timestamp: a point in time (``datetime``; naive means UTC; ISO-8601 string;
            or milliseconds since the epoch): the latest version committed at or before it.
        :param partition_filter: a condition on partition columns only (SQL text such as
            ``"ds = '2024-06-01'"``, or a ``Predicate``): the snapshot's files are those of the
            selected partitions, replayed at a cost that follows them (docs/read-api.md,
            "A snapshot of some partitions"). Such a snapshot reads; it cannot checkpoint,
            VACUUM or be the snapshot a commit is checked against.
        :raises TableNotFoundError: there is no Delta table at the location.
        :raises VersionNotFoundError: the version or timestamp is outside the table's history.
        :raises UnsupportedFeatureError: the table needs a reader feature this core lacks.
        :raises PredicateError: the partition filter does not parse, names a column that is not a
            partition column, or a value that does not fit its column.
        """
        if version is not None and timestamp is not None:
            raise ValueError("Pass either version or timestamp, not both.")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 0):
            raise ValueError(f"version must be a non-negative integer, got {version!r}.")
        if timestamp is not None:
            version = self.version_at(timestamp).version
        snapshot = load_snapshot(self.storage, version, provider_defaults=self.provider_defaults)
        if partition_filter is None:
            return snapshot
        return snapshot.with_partition_filter(PartitionFilter.of(snapshot, partition_filter))

    # --- time travel -------------------------------------------------------------------

    def commit_timestamps(self) -> list[CommitTimestamp]:
        """Timestamps of every reconstructable version, oldest first, as Delta's time travel uses them.

        Modification times of the commit files, made strictly increasing as Delta does; while
        in-commit timestamps are enabled, ``commitInfo.inCommitTimestamp`` from the enablement
        version on (and nowhere else). Every commit time the core gives (the change feed's
        ``_commit_timestamp``, :meth:`history`, watchers) follows this one rule.
        """
        return commit_timestamps(self.snapshot())

    def version_at(self, timestamp: datetime | str | float) -> CommitTimestamp:
        """The latest version committed at or before ``timestamp`` (Delta's ``getActiveCommitAtTime``).

        Any integer is a timestamp, however far from today (it simply lies before or after
        every commit); so is any datetime and any ISO-8601 string, years beyond 9999 included.

        :raises TimestampEarlierThanRetentionError: before the earliest reconstructable version.
        :raises TimestampLaterThanLatestCommitError: after the latest commit.
        :raises VersionNotFoundError: the log holds no commit file to time travel by.
        :raises ValueError: ``timestamp`` is not a timestamp (a bool, NaN, an unparseable string).
        """
        return version_at(self.snapshot(), timestamp)

    # --- history -----------------------------------------------------------------------

    def history(self, limit: int | None = None) -> list[dict[str, Any]]:
        """Commit history, newest first: each commit's ``commitInfo`` plus ``version`` and ``timestamp``.

        With ``limit=n`` only the last ``n`` commit files are read. ``timestamp`` is the
        version's commit time as time travel has it (:meth:`commit_timestamps`).
        Versions whose commit was cleaned up are not listed.

        :param limit: the number of most recent commits to return; None for all.
        """
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
            raise ValueError(f"limit must be a positive integer, got {limit!r}.")
        return history(self.storage, self.version(), limit, rule=CommitTimeRule(self.snapshot))

    # --- changes -----------------------------------------------------------------------

    def changes(
        self,
        starting_version: int | None = None,
        ending_version: int | None = None,
        *,
        starting_timestamp: datetime | str | int | None = None,
        ending_timestamp: datetime | str | int | None = None,
        partition_filter: str | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> Changes:
        """What the commits from ``starting_version`` to ``ending_version`` (inclusive) changed, as
        Delta's Change Data Feed defines it (see ``docs/reading.md``).

        Only the commits of the range are read (never the table's file list); the changed rows are
        read by :meth:`Changes.to_pyarrow_table`, the file-level changes given by
        :meth:`Changes.files`. A commit with change-data (``cdc``) files contributes their rows; any
        other its added rows as inserts and its removed rows as deletes (a file whose deletion
        vector grew: exactly the newly deleted rows); OPTIMIZE and other ``dataChange=false``
        commits contribute nothing. Unlike Delta, a range where the change data feed was off is
        read wherever that is exact; a commit that rewrote rows without recording which (an
        UPDATE / DELETE / MERGE by an engine that writes no change data while the feed is off) is
        refused.

        :param starting_version: the first version (or give ``starting_timestamp``: the first
            version committed at or after it).
        :param ending_version: the last version (default and at most: the latest); or
            ``ending_timestamp``: the last version committed at or before it.
        :param partition_filter: only the changes in the partitions this SQL condition on partition
            columns selects (``"ds = '2024-01-01'"``, the predicate language of ``replace_where``):
            each commit's file actions are filtered by their partition values before any row is
            read, and a commit is judged on the selected files alone (see ``docs/partitions.md``).
        :param parameters: the values of the filter's ``:name`` markers, each bound as a literal
            (``partition_filter="ds = :day", parameters={"day": "2024-01-01"}``).
        :raises InvalidChangeRangeError: no start, both a version and a timestamp for one bound, a
            start after the latest version, an end before the start (Delta's error names).
        :raises TimestampLaterThanLatestCommitError: a timestamp after the latest commit.
        :raises TimestampEarlierThanRetentionError: an ending timestamp before the earliest version.
        :raises CommitsCleanedUpError: a commit of the range was removed by log cleanup.
        :raises ChangeDataNotRecordedError: a commit rewrote rows without recording which; the
            message names the version, the operation and what to do.
        :raises ChangeDataSchemaError: the schema changed incompatibly within the range.
        :raises UnsupportedFeatureError: the table needs a reader feature this core lacks.
        :raises PredicateError: the partition filter does not parse, names a data column or a
            column the table lacks, or a value that does not fit its column.
        """
        return load_changes(
            self.storage,
            starting_version,
            ending_version,
            starting_timestamp=starting_timestamp,
            ending_timestamp=ending_timestamp,
            provider_defaults=self.provider_defaults,
            partition_filter=partition_filter,
            parameters=parameters,
        )

    # --- writes ------------------------------------------------------------------------

    @classmethod
    @_takes(_CreateArguments)
    def create(cls, arguments: _CreateArguments) -> DeltaTable:
        """Create a Delta table (version 0) with the lowest protocol its schema and properties need.

        :param uri: the table root.
        :param schema: a pyarrow schema, or a Delta / Spark (``df.schema.json()``) schema JSON.
        :param partition_by: partition columns, in directory order.
        :param properties: table properties (``delta.appendOnly``, ``delta.logRetentionDuration``...).
        :param storage_options: as for :class:`DeltaTable`.
        :param filesystem: as for :class:`DeltaTable`.
        :param provider_defaults: as for :class:`DeltaTable`.
        :param name: see :class:`~airflow_delta_provider.core.transaction.create.CreateOptions`.
        :param description: see :class:`~airflow_delta_provider.core.transaction.create.CreateOptions`.
        :param mode: ``error``/``ignore``/``append``/``overwrite`` when a table exists; see
            :class:`~airflow_delta_provider.core.transaction.create.CreateOptions`. The commit's own
            settings (``user_metadata``, ``tags``...) are
            :class:`~airflow_delta_provider.core.transaction.commit_plan.CommitProperties`.
        :raises TableAlreadyExistsError: ``mode="error"`` and a table exists at ``uri``.
        :raises UnsupportedFeatureError: a property needs a feature this core cannot write.
        :raises SchemaMismatchError: ``mode="append"`` and the table's schema or partitioning differ.

        Like every commit, the version-0 commit is validated before it is written and reported
        as landed once written (see :meth:`commit_files`).
        """
        table = cls(
            arguments.uri,
            arguments.storage_options,
            filesystem=arguments.filesystem,
            provider_defaults=arguments.provider_defaults,
        )
        hooks = table._post_commit_hooks(arguments)
        create_table(
            table.storage, arguments.schema, arguments.partition_by, arguments.properties, arguments, hooks
        )
        return table

    @_takes(CommitOptions)
    def commit_files(self, options: CommitOptions) -> CommitResult:
        """Commit Parquet files that already exist under the table root, in one atomic commit.

        Statistics come from the files' Parquet footers (read in parallel), partition values
        from their ``col=value`` directories (or ``partition_values``). The schema of every
        file is checked against the table's, names spelled exactly as the table spells them.
        Every value that goes into the log is checked against its Delta type before anything
        is written. Once the commit file is in place the commit is reported as landed: the work
        after it (``.crc``, Delta's checkpoint every ``delta.checkpointInterval`` versions, log
        cleanup) never raises; its failures are on ``post_commit_errors``.

        :param files: the files, relative to the table root or as URIs under it.
        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.transaction.write.CommitOptions` (``prefix``, ``mode``,
            ``replace_where``, ``allow_empty_overwrite`` ...) and of the
            :class:`~airflow_delta_provider.core.transaction.commit_plan.CommitProperties` every commit takes
            (``app_id``/``app_version``, ``user_metadata``, ``tags``, ``max_attempts`` ...).
        :raises InvalidPathError: a file is outside the root, hidden, a symbolic link (local
            storage), missing or listed twice.
        :raises InvalidDataFileError: a file is not Parquet.
        :raises SchemaMismatchError: a file's schema or partition values do not fit the table.
        :raises EmptyOverwriteError: an overwrite with no files would remove data.
        :raises InvalidLogValueError: a value does not fit its Delta type (nothing is written).
        :raises ConcurrentModificationError: a concurrent commit conflicts (Delta's error names).
        :raises UnsupportedFeatureError: the table uses a writer feature this core lacks.
        """
        try:
            snapshot: Snapshot | None = self.snapshot()
        except TableNotFoundError:
            snapshot = None  # the commit creates the table
        return commit_files(self.storage, snapshot, options, self._post_commit_hooks(options))

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
        return already_committed(self.storage, app_id, app_version, snapshot=snapshot)

    def _post_commit_hooks(self, properties: CommitProperties) -> list[PostCommitHook]:
        """Delta's post-commit checkpoint and, after it, expired-log cleanup (Spark's
        ``checkpointAndCleanUpDeltaLog``), as ``properties`` ask for them."""
        if not properties.auto_checkpoint:
            return []
        cleanup = functools.partial(self._cleanup_after_checkpoint, properties.cleanup_expired_logs)
        return [
            PostCommitHook("checkpoint", self._checkpoint_after_commit),
            PostCommitHook("log cleanup", cleanup, after="checkpoint"),
        ]

    def _committed_config(self, commit: LandedCommit) -> TableConfig:
        """The configuration at the committed version, as its snapshot would have it."""
        return commit.metadata.config.with_provider_defaults(self.provider_defaults)

    def _checkpoint_after_commit(self, commit: LandedCommit) -> bool:
        if not should_checkpoint(commit.version, self._committed_config(commit)):
            return False
        write_checkpoint(
            load_snapshot(self.storage, commit.version, provider_defaults=self.provider_defaults)
        )
        return True

    def _cleanup_after_checkpoint(self, enabled: bool | None, commit: LandedCommit) -> bool:
        if enabled is None:
            enabled = self._committed_config(commit).expired_log_cleanup.value
        if not enabled:
            return False
        cleanup_logs(self.snapshot())
        return True

    @_takes(_DeleteArguments)
    def delete(self, options: _DeleteArguments) -> DeleteResult:
        """Delete the rows ``predicate`` selects (every row without one) in one ``DELETE`` commit,
        as Delta's DELETE does (see ``docs/lifecycle.md``).

        A predicate on partition columns only removes whole files without reading them; a
        condition on data columns reads the files whose partition values and statistics allow a
        match and marks the matching rows in deletion vectors (tables with
        ``delta.enableDeletionVectors``) or rewrites the files that hold them (with ``cdc`` files
        of the deleted rows when ``delta.enableChangeDataFeed`` is on). The commit records Delta's
        metrics (``numDeletedRows``, ``numRemovedFiles`` ...) and ``operationParameters.predicate``.

        :param predicate: a SQL condition meaning what it means in Spark SQL (the subset
            :class:`~.predicate.Predicate` parses); None deletes every row; an empty or blank string
            is refused.
        :param parameters: the values of the predicate's ``:name`` markers, bound as typed literals
            (never formatted into the text); the commit records the text with its markers.
        :param match_rows: another engine finding the matching rows (the Airflow operator's Spark);
            default: pyarrow in this process.
        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.lifecycle.delete.DeleteOptions` (``max_workers``) and of the
            :class:`~airflow_delta_provider.core.transaction.commit_plan.CommitProperties` every commit
            takes (``app_id``/``app_version``, ``user_metadata``, ``tags`` ...).
        :raises PredicateError: the predicate is blank, does not parse, names an unknown column,
            binds wrongly, or holds a value Spark would refuse or read depending on a setting
            (nothing is written).
        :raises AppendOnlyViolationError: the table only allows appends (``delta.appendOnly``).
        :raises ConcurrentAppendError: a concurrent commit added files the predicate may select.
        :raises ConcurrentDeleteReadError: a concurrent commit removed a file this DELETE read.
        :raises ConcurrentDeleteDeleteError: a concurrent commit removed a file this DELETE removes.
        :raises UnsupportedFeatureError: the table uses a feature this DELETE cannot honour.
        """
        hooks = self._post_commit_hooks(options)
        return delete(self.snapshot(), options, hooks, match_rows=options.match_rows)

    @_takes(DataRetentionOptions)
    def apply_data_retention(self, options: DataRetentionOptions) -> DataRetentionResult:
        """Delete the rows older than a retention policy's cutoff (``now - keep``) in one ``DELETE``
        commit tagged ``airflow.dataRetention`` (see ``docs/lifecycle.md``, data retention).

        The policy is ``policy`` or the table's ``airflow.dataRetention`` property. On a partition
        column (or a date partition generated from the column) whole files go and none is read.
        A run that would delete more than the policy's ``max_deleted_fraction`` (default 0.5) of
        the rows is refused, dry run included.

        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.lifecycle.data_retention.DataRetentionOptions` (``policy``,
            ``dry_run``, ``now``) and of the commit's
            :class:`~airflow_delta_provider.core.transaction.commit_plan.CommitProperties`.
        :raises RetentionError: the policy is malformed (an unknown key, an interval without a
            unit, a blank column); ``InvalidTablePropertyError`` when it is the table's.
        :raises DataRetentionError: the column is not the table's, or holds no time.
        :raises DataRetentionLimitError: the run would delete more than ``max_deleted_fraction``.
        """
        return apply_data_retention(self.snapshot(), options, self._post_commit_hooks(options))

    # --- maintenance ---------------------------------------------------------------------

    @_takes(_CheckpointArguments)
    def checkpoint(self, options: _CheckpointArguments) -> CheckpointResult:
        """Write a checkpoint of ``version`` (default: the latest) and then ``_last_checkpoint``.

        Classic single-file checkpoints, multi-part when ``parts`` > 1, V2 (with sidecars for
        large tables) when the table has the ``v2Checkpoint`` feature.

        :param version: the version to checkpoint (default: the latest).
        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.maintenance.checkpoint.CheckpointOptions` (``parts``,
            ``part_size``, ``now_ms``).
        :raises UnsupportedFeatureError: the table uses a writer feature a checkpoint cannot carry.
        :raises CorruptLogError: the replayed state contradicts the version's ``.crc``.
        """
        return write_checkpoint(self.snapshot(options.version), options)

    @_takes(CleanupOptions)
    def cleanup_logs(self, options: CleanupOptions) -> CleanupResult:
        """Delete expired log files exactly as Delta's MetadataCleanup does.

        Only whole groups of log files before a complete checkpoint whose preceding log is
        older than the cutoff (``now - delta.logRetentionDuration``, default 30 days, at UTC
        midnight) are deleted, so every version from the earliest retained checkpoint on
        stays readable.

        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.maintenance.cleanup.CleanupOptions` (``retention``,
            ``dry_run``, ``now``, ``max_workers``).
        """
        return cleanup_logs(self.snapshot(), options)

    @_takes(_OptimizeArguments)
    def optimize(self, options: _OptimizeArguments) -> OptimizeResult:
        """Compact small files (Delta's bin-packing OPTIMIZE) in one ``dataChange=false`` commit.

        Bins of files smaller than the target (``delta.targetFileSize``, default 1 GiB) and every
        file with a deletion vector are rewritten, one file per bin, and swapped in atomically;
        readers see the same rows before and after.

        :param rewrite: the engine writing each bin (default: pyarrow in this process, see
            :func:`~airflow_delta_provider.core.maintenance.optimize.rewrite_locally`; the Airflow layer's
            ``DeltaOptimizeOperator`` rewrites on Spark).
        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.maintenance.optimize.OptimizeOptions` (``partition_filter``,
            ``target_file_size``, ``min_file_size``, ``dry_run`` ...) and of the commit's
            :class:`~airflow_delta_provider.core.transaction.commit_plan.CommitProperties`
            (``app_id``/``app_version`` ...).
        :raises ConcurrentDeleteReadError: a concurrent commit removed a file the OPTIMIZE rewrote.
        """
        hooks = self._post_commit_hooks(options)
        return optimize(self.snapshot(), options, hooks, rewrite=options.rewrite)

    @_takes(_PurgeArguments)
    def purge(self, options: _PurgeArguments) -> OptimizeResult:
        """Rewrite every file whose rows a deletion vector deletes without those rows, in one
        ``dataChange=false`` ``REORG`` commit (Delta's ``REORG TABLE ... APPLY (PURGE)``), so that
        the next VACUUM, once the files are older than the retention, removes the deleted rows'
        bytes (see ``docs/lifecycle.md``, PURGE and the erasure sequence).

        Files with a deletion vector but no row count, and files holding columns dropped under
        column mapping, are rewritten too, as Delta does; readers see the same rows before and
        after. ``result.metrics`` are Delta's (OPTIMIZE's set, ``numDeletionVectorsRemoved``
        among them).

        :param rewrite: the engine writing each bin (default: pyarrow in this process; the
            Airflow layer's ``DeltaOptimizeOperator(purge=True)`` rewrites on Spark).
        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.lifecycle.purge.PurgeOptions` (``partition_filter``,
            ``target_file_size``, ``dry_run``) and of the commit's
            :class:`~airflow_delta_provider.core.transaction.commit_plan.CommitProperties`
            (``app_id``/``app_version``, ``user_metadata``, ``tags`` ...).
        :raises ConcurrentDeleteReadError: a concurrent commit (a DELETE) removed a file the purge
            rewrote; nothing is committed, run it again.
        :raises ConcurrentDeleteDeleteError: a concurrent rewrite removed the same files.
        """
        hooks = self._post_commit_hooks(options)
        return purge(self.snapshot(), options, hooks, rewrite=options.rewrite)

    @_takes(VacuumOptions)
    def vacuum(self, options: VacuumOptions) -> VacuumResult:
        """Delete the files the table no longer needs and that are older than the retention.

        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.maintenance.vacuum.VacuumOptions` (``retention``,
            ``dry_run``, ``mode`` full/lite, ``enforce_retention_duration``, ``max_workers``,
            ``now``, ``log_commits``).
        """
        return vacuum(self.snapshot(), options, self._post_commit_hooks(CommitProperties()))

    # --- restore ---------------------------------------------------------------------------

    @_takes(RestoreOptions)
    def restore(self, options: RestoreOptions) -> RestoreResult:
        """Restore the table to an earlier version in one ``RESTORE`` commit (Delta's ``RESTORE TABLE``).

        The target's files the table no longer has are added back as they were (deletion vectors,
        statistics, row ids), the table's files the target did not have are removed, both with
        ``dataChange=true``; the target's metadata comes back, the protocol is never downgraded.
        Restoring the current version commits nothing (``reason="no_op"``).

        :param version: the version to restore.
        :param options: the keyword arguments of
            :class:`~airflow_delta_provider.core.lifecycle.restore.RestoreOptions` (``timestamp`` instead of
            ``version``, ``enforce_retention_duration``) and of the commit's
            :class:`~airflow_delta_provider.core.transaction.commit_plan.CommitProperties`
            (``app_id``/``app_version``, ``user_metadata``, ``tags`` ...).
        :raises RestoreVersionNotFoundError: the version is outside the table's history.
        :raises RestoreTimestampEarlierError: the timestamp is before the earliest version.
        :raises RestoreTimestampGreaterError: the timestamp is after the latest commit.
        :raises TimeTravelBeyondRetentionError: the target is older than
            ``delta.deletedFileRetentionDuration`` (Delta 4.1+).
        :raises RestoreMissingFilesError: files the target needs were vacuumed; nothing is committed.
        :raises ConcurrentWriteError: a concurrent commit changed the table; nothing is committed.
        """
        return restore_table(self.snapshot(), options, self._post_commit_hooks(options))

    def tagged_commits(self, tags: Mapping[str, str], *, not_before_tag: str | None = None) -> TaggedCommits:
        """The commits whose commitInfo tags include ``tags`` (an Airflow run's identity) and the
        version before the first of them, the version "restore to before that run" restores.

        :param not_before_tag: a tag of those commits holding a time none of them precedes by the
            clock that wrote it (the run's logical date): the search reads only the commits since
            :data:`~.restore.CLOCK_SKEW_MARGIN` before it (commit times are the store's clock), and
            tolerates a log cleaned up before that.
        :raises TaggedCommitsNotFoundError: no commit carries them, or the first may have been
            cleaned up, or the first is version 0.
        """
        return find_tagged_commits(self.snapshot(), tags, not_before_tag=not_before_tag)
