"""Snapshot: one version of a Delta table, loaded lazily and only as far as asked.

Opening a snapshot reads the commits after the checkpoint and the checkpoint's small
columns (protocol, metadata, txns, domains), and checks that the core can read the
table. When the version's checksum file (``.crc``) may answer those questions
(:func:`~.checksum.checksum_answers` decides), the checkpoint is not read for them. The
file list is replayed on the first call that needs it.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import (
    CorruptLogError,
    DeletionVectorError,
    DeltaError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.log.checksum import checksum_answers
from airflow_delta_provider.core.log.commits import CommitActions, check_replayable, read_commits
from airflow_delta_provider.core.log.partition_pruning import PartitionPruner
from airflow_delta_provider.core.log.replay import FileState, SmallState, replay_files, replay_small_state
from airflow_delta_provider.core.log.scan import (
    FileRead,
    RowSelection,
    deletion_vector_rows,
    file_dataset,
    read_files,
    runs,
)
from airflow_delta_provider.core.log.segment import build_segment
from airflow_delta_provider.core.protocol.features import Operation, check_supported, reader_features
from airflow_delta_provider.core.protocol.partitions import partition_columns_from_map
from airflow_delta_provider.core.protocol.schema import physical_schema, rename_to_logical
from airflow_delta_provider.core.protocol.validation import check_column_mapping
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pyarrow.dataset as ds

    from airflow_delta_provider.core.log.partition_pruning import PartitionSelection
    from airflow_delta_provider.core.log.segment import LogSegment
    from airflow_delta_provider.core.protocol.actions import DomainMetadata, Metadata, Protocol, Transaction
    from airflow_delta_provider.core.protocol.table_config import TableConfig
    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)


def load_snapshot(
    storage: LogStore,
    version: int | None = None,
    *,
    provider_defaults: Mapping[str, Any] | None = None,
    partition_filter: PartitionSelection | None = None,
) -> Snapshot:
    """The table at ``version`` (default: the latest), protocol and metadata read and checked.

    As Delta: an unreadable checkpoint is not fatal while an older one (or the commits from
    version 0) can rebuild the same version; the warning names the file.

    :param partition_filter: restrict the snapshot's files to these partitions
        (:meth:`Snapshot.with_partition_filter`; ``core.expressions.PartitionFilter`` builds one).
    :raises TableNotFoundError: there is no Delta table at the location.
    :raises VersionNotFoundError: the version is outside the table's history.
    :raises UnsupportedFeatureError: the table needs a reader feature this core lacks.
    :raises ValueError: the partition filter names a column that is not a partition column.
    """
    segment = build_segment(storage, version)
    while True:
        snapshot = Snapshot(storage, segment, provider_defaults=provider_defaults)
        try:
            loaded = snapshot.load()
        except CorruptLogError as err:
            segment = _segment_before_corrupt_checkpoint(storage, segment, err)
            continue
        return loaded if partition_filter is None else loaded.with_partition_filter(partition_filter)


def _segment_before_corrupt_checkpoint(
    storage: LogStore, segment: LogSegment, err: CorruptLogError
) -> LogSegment:
    """The segment of the same version from the checkpoint before the one ``err`` names.

    :raises CorruptLogError: ``err`` itself, when it names no checkpoint file of the segment or
        no older checkpoint (or commit 0) can rebuild the version.
    """
    checkpoint = segment.checkpoint
    if checkpoint is None or err.path not in [storage.to_uri(p) for p in checkpoint.paths]:
        raise err
    log.warning("%s; trying the checkpoint before version %d.", err, checkpoint.version)
    try:
        return build_segment(storage, segment.version, before_checkpoint=checkpoint.version)
    except DeltaError:
        raise err from None


#: ``files()`` column names, from the protocol's ``add`` field names.
FILE_COLUMNS = {
    "path": "path",
    "partitionValues": "partition_values",
    "size": "size",
    "modificationTime": "modification_time",
    "dataChange": "data_change",
    "stats": "stats",
    "tags": "tags",
    "deletionVector": "deletion_vector",
    "baseRowId": "base_row_id",
    "defaultRowCommitVersion": "default_row_commit_version",
    "clusteringProvider": "clustering_provider",
}
TOMBSTONE_COLUMNS = {
    "path": "path",
    "deletionTimestamp": "deletion_timestamp",
    "dataChange": "data_change",
    "extendedFileMetadata": "extended_file_metadata",
    "partitionValues": "partition_values",
    "size": "size",
    "deletionVector": "deletion_vector",
    "baseRowId": "base_row_id",
    "defaultRowCommitVersion": "default_row_commit_version",
}


class Snapshot:
    """The state of a table at one version.

    Build it with :meth:`DeltaTable.snapshot`; it is immutable once loaded.

    :param storage: the table's storage.
    :param segment: the log files of this version.
    :param commits: the segment's commits, when the caller already read them.
    :param provider_defaults: provider-wide property defaults for :attr:`config`.
    """

    def __init__(
        self,
        storage: LogStore,
        segment: LogSegment,
        *,
        commits: list[CommitActions] | None = None,
        provider_defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self._storage = storage
        self._segment = segment
        self._provider_defaults = dict(provider_defaults or {})
        self._partition_filter: PartitionSelection | None = None
        if commits is not None:
            self.__dict__["_commits"] = commits

    def __repr__(self) -> str:
        restricted = f", partition_filter={self._partition_filter.text!r}" if self._partition_filter else ""
        return f"Snapshot({self._storage.root_uri!r}, version={self.version}{restricted})"

    # --- a restriction to some partitions ---------------------------------------------

    @property
    def partition_filter(self) -> PartitionSelection | None:
        """The partitions this snapshot's files are restricted to (None: the whole table)."""
        return self._partition_filter

    def with_partition_filter(self, partition_filter: PartitionSelection) -> Snapshot:
        """The same version with its files restricted to the partitions ``partition_filter``
        selects: :meth:`files`, :meth:`partition_values`, :meth:`num_files`, the datasets and
        tables read from them hold only those partitions' files, replayed at a cost that follows
        them (:func:`~.replay.replay_files`); protocol, metadata, txns and domains are the
        table's. It shares what this snapshot already read (commits, small state).

        A restricted snapshot is for reading: it cannot checkpoint, VACUUM, clean up the log or be
        the snapshot a commit is checked against (:meth:`require_whole`).

        :raises ValueError: the filter names a column that is not a partition column.
        """
        if self._partition_filter is not None:
            raise ValueError(
                f"This snapshot is already restricted to {self._partition_filter.text!r}; restrict the "
                f"table's snapshot instead (combine the two conditions with AND)."
            )
        PartitionPruner(partition_filter, self.protocol, self.metadata)  # checks its columns now
        restricted = Snapshot(self._storage, self._segment, provider_defaults=self._provider_defaults)
        for name in ("_commits", "_small", "_log_small", "config"):
            if name in self.__dict__:
                restricted.__dict__[name] = self.__dict__[name]
        restricted._partition_filter = partition_filter
        return restricted

    def require_whole(self, purpose: str) -> None:
        """Refuse a snapshot restricted to some partitions for ``purpose``: what needs the whole
        table (a checkpoint, VACUUM, log cleanup, a commit's conflict checks) must never take a
        part of it for all of it.

        :raises ValueError: the snapshot is restricted (:attr:`partition_filter`).
        """
        if self._partition_filter is not None:
            raise ValueError(
                f"{purpose} needs the whole table, and this snapshot of {self._storage.root_uri} at "
                f"version {self.version} holds only the files of the partitions "
                f"{self._partition_filter.text!r}. Load it without partition_filter "
                f"(DeltaTable.snapshot(version=...))."
            )

    # --- what every question needs -----------------------------------------------------

    @property
    def version(self) -> int:
        return self._segment.version

    @property
    def segment(self) -> LogSegment:
        return self._segment

    @property
    def storage(self) -> LogStore:
        return self._storage

    @cached_property
    def _commits(self) -> list[CommitActions]:
        return read_commits(self._storage, self._segment)

    @property
    def commits(self) -> list[CommitActions]:
        """The commits after the segment's checkpoint, oldest first (read once)."""
        return self._commits

    @property
    def state(self) -> SmallState:
        """Protocol, metadata, live txns and domains, as replayed (read once)."""
        return self._small

    @cached_property
    def _small(self) -> SmallState:
        answers = checksum_answers(self._storage, self._segment, self._commits)
        state = replay_small_state(self._storage, self._segment, self._commits, checksum=answers)
        check_supported(state.protocol, None, Operation.READ)
        return state

    def load(self) -> Snapshot:
        """Read protocol and metadata now and check that the core can read the table."""
        _ = self._small
        return self

    def check_replayable(self) -> None:
        """Raise unless every line of every commit this snapshot replays is a well-formed action.

        Loading a snapshot parses only the lines protocol and metadata need; a writer calls
        this before it commits, so that it never builds on a log no reader can replay.

        :raises CorruptLogError: naming the file and line of the first bad action.
        """
        check_replayable(self._commits)

    @property
    def protocol(self) -> Protocol:
        return self._small.protocol

    @property
    def metadata(self) -> Metadata:
        return self._small.metadata

    @property
    def schema(self) -> pa.Schema:
        """The logical schema (column names as users see them)."""
        return self.metadata.schema

    @property
    def partition_columns(self) -> list[str]:
        return list(self.metadata.partition_columns)

    @property
    def properties(self) -> dict[str, str]:
        """The table properties (``metaData.configuration``)."""
        return dict(self.metadata.configuration)

    @cached_property
    def config(self) -> TableConfig:
        """The typed table configuration: the table's properties over the provider defaults
        (``config.table_only`` where Delta defines a value by the table alone)."""
        return self.metadata.config.with_provider_defaults(self._provider_defaults)

    @property
    def transactions(self) -> dict[str, Transaction]:
        """The live ``txn`` per application id (expired ones dropped as Delta does)."""
        return dict(self._small.transactions)

    def app_transaction_version(self, app_id: str) -> int | None:
        """The last version application ``app_id`` committed, or None if it never did."""
        txn = self._small.transactions.get(app_id)
        return txn.version if txn is not None else None

    @property
    def domain_metadata(self) -> dict[str, DomainMetadata]:
        """Live domain metadata by domain name."""
        return dict(self._small.domains)

    @property
    def commit_info(self) -> dict[str, Any] | None:
        """The ``commitInfo`` of this version's commit, when it is in the segment."""
        for commit in reversed(self._commits):
            if commit.version == self.version:
                return commit.commit_info
        return None

    # --- files -------------------------------------------------------------------------

    @cached_property
    def _file_state(self) -> FileState:
        return self._replay_files()

    @cached_property
    def _log_small(self) -> SmallState:
        """The small state as the checkpoint and commits say it (what the file replay builds on).

        The same as :attr:`_small` unless the checksum answered that; then the checkpoint is
        read now, on the first question about files, so that it is checked as a load without
        the checksum checks it.
        """
        if self._small.checksum_version is None:
            return self._small
        state = replay_small_state(self._storage, self._segment, self._commits, footers=self._small.footers)
        if (state.protocol, state.metadata) != (self._small.protocol, self._small.metadata):
            log.warning(
                "The checksum file of version %d of %s disagrees with its checkpoint on the protocol or "
                "metadata; the file list follows the log.",
                self.version,
                self._storage.root_uri,
            )
        return state

    def _replay_files(self, *, tombstones: bool = False, now_ms: int | None = None) -> FileState:
        """The file replay, past an unreadable checkpoint exactly as a load without the checksum.

        Loading falls back past a checkpoint whose small columns it cannot read
        (:func:`load_snapshot`). When the checksum answered the small state, the checkpoint is
        first read here and the same fallback applies; the snapshot then keeps the segment it
        could read.
        """
        while True:
            try:
                small = self._log_small
            except CorruptLogError as err:
                segment = _segment_before_corrupt_checkpoint(self._storage, self._segment, err)
                self._segment = segment
                for name in ("_commits", "_log_small"):
                    self.__dict__.pop(name, None)
                continue
            return replay_files(
                self._storage,
                self._segment,
                self._commits,
                small,
                tombstones=tombstones,
                now_ms=now_ms,
                partition_filter=self._partition_filter,
            )

    def files(self) -> pa.Table:
        """The active data files, one row each.

        Columns: ``path`` (as written in the log), ``partition_values`` (map of strings, as
        the protocol serialises them), ``size``, ``modification_time`` (ms), ``data_change``,
        ``stats`` (JSON), ``tags``, ``deletion_vector`` (the protocol's descriptor, null
        when the file has none), ``base_row_id``, ``default_row_commit_version``,
        ``clustering_provider``.
        """
        adds = self._file_state.adds
        return adds.rename_columns([FILE_COLUMNS[name] for name in adds.column_names])

    def partition_values(self) -> pa.Table:
        """Typed partition values of the active files, one column per partition column, row-aligned
        with :meth:`files`."""
        fields = self._partition_fields(self._read_schema)
        typed = partition_columns_from_map(
            self._file_state.adds.column("partitionValues").combine_chunks(), pa.schema(fields)
        )
        return pa.table(typed.flatten(), names=self.partition_columns) if fields else pa.table({})

    def num_files(self) -> int:
        return int(self._file_state.adds.num_rows)

    def replay(self, *, tombstones: bool = False, now_ms: int | None = None) -> FileState:
        """The reconciled file actions (Arrow, the log's column names), with the unexpired
        tombstones as of ``now_ms`` when asked; for operations that need more than :meth:`files`.

        :raises ValueError: tombstones asked of a snapshot restricted to some partitions.
        """
        if tombstones:
            self.require_whole("Reading the tombstones (VACUUM, a checkpoint)")
        if not tombstones and now_ms is None:
            return self._file_state
        return self._replay_files(tombstones=tombstones, now_ms=now_ms)

    def tombstones(self) -> pa.Table:
        """The unexpired ``remove`` actions (per ``delta.deletedFileRetentionDuration``)."""
        removes = self.replay(tombstones=True).removes
        return removes.rename_columns([TOMBSTONE_COLUMNS[name] for name in removes.column_names])

    def file_uris(self) -> list[str]:
        """Absolute URIs of the active data files.

        :raises DeletionVectorError: some files carry deletion vectors: reading them as
            plain files would return deleted rows. Use :meth:`to_pyarrow_table`.
        """
        adds = self._file_state.adds
        self._refuse_deletion_vectors(adds, "file_uris()")
        return [self._storage.to_uri(self._storage.path.decode(p)) for p in adds.column("path").to_pylist()]

    def _refuse_deletion_vectors(self, adds: pa.Table, what: str) -> None:
        with_dv = adds.column("deletionVector").is_valid()
        count = pc.sum(with_dv).as_py() or 0
        if count:
            first = adds.filter(with_dv).column("path")[0].as_py()
            raise DeletionVectorError(
                f"{count} active file(s) of {self._storage.root_uri} at version {self.version} carry "
                f"deletion vectors (e.g. {first}); {what} would return rows that were deleted. Use "
                f"Snapshot.to_pyarrow_table(), which applies them, or files() to see the descriptors."
            )

    # --- data --------------------------------------------------------------------------

    def to_pyarrow_dataset(self) -> ds.Dataset:
        """A pyarrow dataset over the active files, with partition columns and the table schema.

        :raises DeletionVectorError: files carry deletion vectors (use :meth:`to_pyarrow_table`).
        :raises UnsupportedFeatureError: the table uses column mapping (use :meth:`to_pyarrow_table`).
        """
        adds = self._file_state.adds
        self._refuse_deletion_vectors(adds, "to_pyarrow_dataset()")
        if self._column_mapping_mode != "none":
            raise UnsupportedFeatureError(
                f"{self._storage.root_uri} uses column mapping (mode {self._column_mapping_mode!r}): its "
                f"Parquet files use physical column names, which a plain pyarrow dataset cannot rename. "
                f"Use Snapshot.to_pyarrow_table().",
                feature="columnMapping",
                operation="read",
            )
        return self._dataset(adds, self.schema)

    @cached_property
    def _read_schema(self) -> pa.Schema:
        """The schema of the Parquet files: logical, or physical names under column mapping."""
        mode = self._column_mapping_mode
        if mode == "none":
            return self.schema

        check_column_mapping(self.metadata)  # two columns of one physical name: refused, not misread
        return physical_schema(self.schema, mode)

    @property
    def _column_mapping_mode(self) -> str:
        if "columnMapping" not in reader_features(self.protocol):
            return "none"
        return self.properties.get("delta.columnMapping.mode", "none")

    def _dataset(self, adds: pa.Table, read_schema: pa.Schema) -> ds.Dataset:
        """A dataset of ``adds`` read with ``read_schema`` (logical, or physical under column mapping)."""
        partition_fields = self._partition_fields(read_schema)
        partition_names = {f.name for f in partition_fields}
        data_fields = [f for f in read_schema if f.name not in partition_names]
        constants = None
        if partition_fields:
            typed = partition_columns_from_map(
                adds.column("partitionValues").combine_chunks(), pa.schema(partition_fields)
            )
            constants = pa.Table.from_struct_array(typed)
        return file_dataset(
            self._storage,
            adds.column("path").to_pylist(),
            pa.schema([*data_fields, *partition_fields]),
            constants,
        )

    def _partition_fields(self, read_schema: pa.Schema) -> list[pa.Field]:
        # Under column mapping the log keys partition values by physical name.
        return [read_schema.field(self.schema.get_field_index(c)) for c in self.partition_columns]

    def to_pyarrow_table(
        self, columns: list[str] | None = None, *, paths: Sequence[str] | None = None
    ) -> pa.Table:
        """Read the table's rows: deletion vectors applied, column mapping resolved.

        :param columns: logical column names to read (default: all).
        :param paths: read only these active files (``add.path`` values; OPTIMIZE reads a bin).
        """
        adds = self._file_state.adds
        if paths is not None:
            adds = adds.filter(pc.is_in(adds.column("path"), pa.array(list(paths), pa.string())))
        logical = self.schema
        read_schema = self._read_schema
        wanted = (
            list(range(len(logical))) if columns is None else [logical.get_field_index(c) for c in columns]
        )
        selected = pa.schema([read_schema.field(i) for i in wanted])
        partition_names = {f.name for f in self._partition_fields(read_schema)}
        data = pa.schema([f for f in selected if f.name not in partition_names])
        tables = [t for (t,) in read_files(self._storage, self._file_reads(adds), data)]
        table = self._with_partition_values(adds, tables, selected)
        if read_schema is not logical:
            table = rename_to_logical(table, pa.schema([logical.field(i) for i in wanted]))
        return table

    def _file_reads(self, adds: pa.Table) -> list[FileRead]:
        """The files of ``adds``, each with the rows its deletion vector leaves."""
        reads = []
        for path, dv in zip(
            adds.column("path").to_pylist(), adds.column("deletionVector").to_pylist(), strict=True
        ):
            kept = None if dv is None else RowSelection(deletion_vector_rows(self._storage, dv), keep=False)
            reads.append(FileRead(path, (kept,)))
        return reads

    def _with_partition_values(self, adds: pa.Table, tables: list[pa.Table], selected: pa.Schema) -> pa.Table:
        """The files' rows (``tables``, row-aligned with ``adds``) with the ``selected`` columns:
        partition columns from the log, typed, over each file's rows."""
        counted = [index for index, table in enumerate(tables) if table.num_rows]
        if not counted:
            return selected.empty_table()
        data = pa.concat_tables([tables[i] for i in counted])
        columns = {name: data.column(name) for name in data.column_names}
        fields = [f for f in self._partition_fields(self._read_schema) if f.name in selected.names]
        if fields:
            values = adds.column("partitionValues").take(pa.array(counted, pa.int64())).combine_chunks()
            typed = partition_columns_from_map(values, pa.schema(fields))
            lengths = np.array([tables[i].num_rows for i in counted], dtype=np.int64)
            columns.update({f.name: runs(typed.field(f.name), lengths) for f in fields})
        return pa.Table.from_arrays([columns[name] for name in selected.names], schema=selected)
