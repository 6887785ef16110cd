"""The changes of a table between two versions, as Delta's Change Data Feed defines them.

:func:`load_changes` reads only the commits of the range (and a listing of the log, for commit
times as time travel gives them), never the table's file list: the latest snapshot's small
state says the latest version, the schema and the retentions; the commits say what changed
(:mod:`.derive`); :class:`Changes` reads the changed rows on demand (:mod:`.rows`). Bounds
follow Delta Spark (:mod:`.bounds`), commit times the core's one rule (time travel's), and
the read schema Delta Spark's (:mod:`.read_schema`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

import airflow_delta_provider.core.utils.arrays as arrays
from airflow_delta_provider.core.changes.bounds import (
    ChangeRange,
    commit_time,
    range_commit_files,
    resolve_range,
)
from airflow_delta_provider.core.changes.derive import CommitContext, FileChange, commit_changes
from airflow_delta_provider.core.changes.partition_filter import PartitionSelector
from airflow_delta_provider.core.changes.read_schema import (
    check_no_reserved_columns,
    check_read_compatible,
)
from airflow_delta_provider.core.changes.rows import CDC_FIELDS, DeletionVectors, RowScan, read_rows
from airflow_delta_provider.core.errors import (
    CommitsCleanedUpError,
    VersionGapError,
    VersionNotFoundError,
)
from airflow_delta_provider.core.log.commits import read_commit_files
from airflow_delta_provider.core.log.file_actions import DELETION_VECTOR_TYPE
from airflow_delta_provider.core.log.snapshot import load_snapshot
from airflow_delta_provider.core.log.timeline import CommitTimeRule
from airflow_delta_provider.core.protocol.actions import Metadata, Protocol
from airflow_delta_provider.core.protocol.column_mapping import column_mapping_mode, configured_mode
from airflow_delta_provider.core.protocol.features import Operation, check_supported
from airflow_delta_provider.core.protocol.schema import physical_schema
from airflow_delta_provider.core.protocol.validation import check_column_mapping
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from datetime import datetime

    import numpy.typing as npt

    from airflow_delta_provider.core.log.commits import CommitActions
    from airflow_delta_provider.core.log.logfiles import LogFile
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)

__all__ = ["Changes", "load_changes"]

#: ``Changes.files()`` columns.
FILES_SCHEMA = pa.schema(
    [
        pa.field("_change_type", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        ("partition_values", pa.map_(pa.string(), pa.string())),
        ("size", pa.int64()),
        ("deletion_vector", DELETION_VECTOR_TYPE),
        pa.field("_commit_version", pa.int64(), nullable=False),
        pa.field("_commit_timestamp", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)
_ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"


class Changes:
    """The changes of the commits ``start_version`` to ``end_version`` (inclusive) of a table.

    Build it with :meth:`DeltaTable.changes`. The commits are read and checked when it is built;
    the data files when :meth:`to_pyarrow_table` is called.
    """

    def __init__(
        self,
        storage: LogStore,
        versions: ChangeRange,
        *,
        files: list[FileChange],
        scans: list[RowScan],
        logical: pa.Schema,
        physical: pa.Schema,
        partition_columns: Sequence[str],
        deletion_vectors: DeletionVectors,
        retention: Any,
        mapping_mode: str = "none",
    ) -> None:
        self._mapping_mode = mapping_mode
        self._storage = storage
        self._range = versions
        self._files = files
        self._scans = scans
        self._logical = logical
        self._physical = physical
        self._partition_columns = list(partition_columns)
        self._deletion_vectors = deletion_vectors
        self._retention = retention

    def __repr__(self) -> str:
        return f"Changes({self._storage.root_uri!r}, versions {self.start_version} to {self.end_version})"

    @property
    def start_version(self) -> int:
        return self._range.start

    @property
    def end_version(self) -> int:
        """The last version of the range (``start_version - 1`` when the range is empty)."""
        return self._range.end

    @property
    def schema(self) -> pa.Schema:
        """The schema of :meth:`to_pyarrow_table`: the table's columns, then ``_change_type``,
        ``_commit_version`` and ``_commit_timestamp``."""
        return pa.schema([*self._logical, *CDC_FIELDS])

    def files(self) -> pa.Table:
        """The file-level changes, one row per file action that carries changes.

        Columns: ``_change_type`` (``add``, ``remove`` or ``cdc``), ``path`` (as written in the
        log), ``partition_values`` (map of strings, as the protocol serialises them), ``size``,
        ``deletion_vector`` (the protocol's descriptor), ``_commit_version``, ``_commit_timestamp``.
        A commit with change-data files lists those only; another its adds and removes with
        ``dataChange=true`` (an add and a remove of one path: its deletion vector changed).
        """
        rows = self._files
        columns = [
            arrays.strings([f.kind for f in rows]),
            arrays.strings([f.action["path"] for f in rows]),
            arrays.array([f.action.get("partitionValues") for f in rows], FILES_SCHEMA.field(2).type),
            arrays.integers([f.action.get("size") for f in rows], pa.int64()),
            arrays.array([f.action.get("deletionVector") for f in rows], DELETION_VECTOR_TYPE),
            arrays.integers([f.version for f in rows], pa.int64()),
            arrays.integers([f.timestamp * 1000 for f in rows], pa.int64()).cast(FILES_SCHEMA.field(6).type),
        ]
        return pa.Table.from_arrays(columns, schema=FILES_SCHEMA)

    def to_pyarrow_table(self, columns: Sequence[str] | None = None) -> pa.Table:
        """The changed rows: the table's columns (logical names) and ``_change_type`` (``insert``,
        ``delete``, ``update_preimage``, ``update_postimage``), ``_commit_version`` and
        ``_commit_timestamp`` (microseconds, UTC, millisecond precision). Rows are in no order.

        :param columns: the columns to return, in this order (default: all of :attr:`schema`).
        :raises ValueError: a column is not in :attr:`schema`.
        :raises ChangeDataFileNotFoundError: a file the changes need was deleted by VACUUM.
        """
        names = self.schema.names
        if columns is None:
            columns = names
        elif isinstance(columns, str) or not all(isinstance(c, str) for c in columns):
            raise ValueError(f"columns must be a list of column names, got {columns!r}.")
        unknown = [c for c in columns if c not in names]
        if unknown:
            raise ValueError(f"Unknown column(s) {', '.join(map(repr, unknown))}; the changes have {names}.")
        return read_rows(
            self._storage,
            self._scans,
            logical=self._logical,
            physical=self._physical,
            partition_columns=self._partition_columns,
            columns=list(columns),
            deletion_vectors=self._deletion_vectors,
            retention=self._retention,
        )

    # --- for an engine that reads the changed rows itself (the Spark adapter) -----------------

    @property
    def storage(self) -> LogStore:
        return self._storage

    @property
    def data_schema(self) -> pa.Schema:
        """The table's columns the rows are read with (logical names; :attr:`schema` without the
        change feed's own columns)."""
        return self._logical

    @property
    def partition_columns(self) -> list[str]:
        return list(self._partition_columns)

    @property
    def column_mapping_mode(self) -> str:
        """The column mapping mode the files are read in (``none``, ``name`` or ``id``)."""
        return self._mapping_mode

    @property
    def deleted_file_retention(self) -> Any:
        """The table's ``delta.deletedFileRetentionDuration`` setting (what VACUUM honours)."""
        return self._retention

    def row_scans(self) -> list[RowScan]:
        """What :meth:`to_pyarrow_table` reads: per file and commit, the file, its partition values,
        version, commit time (ms), change type (None for a change-data file, whose rows carry it) and
        which rows count (:meth:`selected_rows`)."""
        return list(self._scans)

    def selected_rows(self, scan: RowScan) -> npt.NDArray[np.uint64]:
        """The row indexes of a scan's file its deletion vectors decide: with ``include``, the rows
        that count (those ``include`` marks and ``exclude`` does not); with only ``exclude``, the
        rows that do not. Empty for a scan that reads the whole file.

        :raises ChangeDataFileNotFoundError: a deletion vector file VACUUM deleted.
        """
        if scan.include is not None:
            return self._deletion_vectors.difference(scan.include, scan.exclude, scan.version)
        if scan.exclude is not None:
            return self._deletion_vectors.rows(scan.exclude, scan.version)
        return np.empty(0, dtype=np.uint64)


def load_changes(
    storage: LogStore,
    starting_version: int | None = None,
    ending_version: int | None = None,
    *,
    starting_timestamp: datetime | str | int | None = None,
    ending_timestamp: datetime | str | int | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
    partition_filter: str | None = None,
    parameters: Mapping[str, Any] | None = None,
) -> Changes:
    """The changes of a version range (see :meth:`DeltaTable.changes` for the rules and errors)."""
    if parameters is not None and partition_filter is None:
        raise ValueError("parameters bind the markers of a partition_filter; pass one, or leave them out.")
    latest = load_snapshot(storage, provider_defaults=provider_defaults)
    versions = resolve_range(latest, starting_version, ending_version, starting_timestamp, ending_timestamp)
    if versions.end < versions.start:
        if partition_filter is not None:  # refused alike, whether or not the range is empty
            _selector(latest, latest.metadata, partition_filter, parameters)
        return _changes(
            latest, versions, latest.metadata, [], [], DeletionVectors(storage, _retention(latest))
        )
    files, times = range_commit_files(latest, versions)
    rule = CommitTimeRule(latest)
    commits = _range_commits(latest, files)
    metadata = _metadata_by_version(latest, commits)
    read_metadata, read_version = _read_metadata(latest, metadata, versions)
    selector = None
    if partition_filter is not None:
        selector = _selector(latest, read_metadata, partition_filter, parameters)
    _check_schemas(read_metadata, read_version, metadata, versions)
    _check_removed_files_schema(latest, commits[0], read_metadata, read_version, versions)
    deletion_vectors = DeletionVectors(storage, _retention(latest))
    changed: list[FileChange] = []
    scans: list[RowScan] = []
    selected = _commits_selected(commits, selector) if selector is not None else [True] * len(commits)
    for commit, may_select in zip(commits, selected, strict=True):
        for action in commit.actions:
            if "protocol" in action:
                check_supported(Protocol.from_json(action["protocol"]), None, Operation.READ)
        if not may_select:
            continue  # no file of the commit lies in the selected partitions: its lines stay unparsed
        context = CommitContext(
            timestamp=commit_time(commit, times, rule),
            change_data_feed=_feed_enabled(metadata[commit.version]),
            partition_columns=read_metadata.partition_columns,
            uri=storage.root_uri,
            selector=selector,
        )
        commit_files, commit_scans = commit_changes(commit, context, deletion_vectors)
        changed += commit_files
        scans += commit_scans
    log.debug(
        "Changes of %s, versions %d to %d: %d file action(s).",
        storage.root_uri,
        versions.start,
        versions.end,
        len(changed),
    )
    return _changes(latest, versions, read_metadata, changed, scans, deletion_vectors)


def _changes(
    latest: Snapshot,
    versions: ChangeRange,
    read_metadata: Metadata,
    changed: list[FileChange],
    scans: list[RowScan],
    deletion_vectors: DeletionVectors,
) -> Changes:
    mode = column_mapping_mode(latest.protocol, read_metadata)
    if mode != "none":
        check_column_mapping(read_metadata)  # as the snapshot reader: refused, not misread
    return Changes(
        latest.storage,
        versions,
        files=changed,
        scans=scans,
        logical=read_metadata.schema,
        physical=physical_schema(read_metadata.schema, mode),
        partition_columns=read_metadata.partition_columns,
        deletion_vectors=deletion_vectors,
        retention=_retention(latest),
        mapping_mode=mode,
    )


def _selector(
    latest: Snapshot, read_metadata: Metadata, text: str, parameters: Mapping[str, Any] | None
) -> PartitionSelector:
    return PartitionSelector(text, latest.protocol, read_metadata, parameters)


def _commits_selected(commits: list[CommitActions], selector: PartitionSelector) -> list[bool]:
    """Per commit, whether it may hold file actions in the selected partitions (its change-data
    files, or its file lines' distinct partition values, read without parsing the lines, all
    judged at once): a partition's reader parses only the commits that touched it."""
    found: list[list[dict[str, str | None]] | None] = [
        None if any("cdc" in a for a in c.actions) else c.file_partition_values() for c in commits
    ]
    distinct: dict[tuple[tuple[str, str | None], ...], int] = {}
    for values in found:
        for value in values or ():
            distinct.setdefault(tuple(sorted(value.items())), len(distinct))
    mask = selector.mask([dict(key) for key in distinct]).tolist()
    return [
        values is None or any(mask[distinct[tuple(sorted(v.items()))]] for v in values) for values in found
    ]


def _retention(latest: Snapshot) -> Any:
    return latest.config.deleted_file_retention


def _range_commits(latest: Snapshot, files: list[LogFile]) -> list[CommitActions]:
    """The range's commits: those the latest snapshot already read, the others read now."""
    known = {c.version: c for c in latest.commits}
    read = {
        c.version: c for c in read_commit_files(latest.storage, [f for f in files if f.version not in known])
    }
    return [known[f.version] if f.version in known else read[f.version] for f in files]


def _metadata_by_version(latest: Snapshot, commits: list[CommitActions]) -> dict[int, Metadata]:
    """The table's metadata at each version of the range."""
    current = _start_metadata(latest, commits)
    result = {}
    for commit in commits:
        found = _metadata_action(commit)
        if found is not None:
            current = found
        result[commit.version] = current
    return result


def _metadata_action(commit: CommitActions) -> Metadata | None:
    for index, action in enumerate(commit.actions):
        if "metaData" in action:
            return Metadata.from_json(
                action["metaData"], origin=f"line {commit.line_of(index)} of {commit.path}"
            )
    return None


def _start_metadata(latest: Snapshot, commits: list[CommitActions]) -> Metadata:
    """The metadata in force at the range's first version, read as cheaply as the log allows: from
    that commit, from the latest snapshot when nothing changed it since, else from the snapshot of
    the first version."""
    first = commits[0]
    own = _metadata_action(first)
    if own is not None:
        return own
    since = [c for c in latest.commits if c.version > first.version]
    checkpoint = latest.segment.checkpoint_version
    if (checkpoint is None or checkpoint <= first.version) and not any(_metadata_action(c) for c in since):
        return latest.metadata
    return _metadata_at(latest, first.version)


def _metadata_at(latest: Snapshot, version: int) -> Metadata:
    """The metadata of one version, from its snapshot's small state.

    :raises CommitsCleanedUpError: log cleanup left no way to rebuild that version.
    """
    try:
        return load_snapshot(latest.storage, version).metadata
    except (VersionNotFoundError, VersionGapError) as err:  # commits before it, and checkpoints, cleaned
        raise CommitsCleanedUpError(
            f"The changes of version {version} of {latest.storage.root_uri} cannot be read: the "
            f"table's state at that version cannot be rebuilt ({err}). Read changes from the earliest "
            f"checkpoint's version on, or start again from a full snapshot (DeltaTable.snapshot()).",
            version=version,
            earliest_version=None,
        ) from None


def _read_metadata(
    latest: Snapshot, metadata: dict[int, Metadata], versions: ChangeRange
) -> tuple[Metadata, int]:
    """The schema the rows are read with, and its version (Delta's batch schema mode): the end
    version's when column mapping is on at the start, end or latest version, else the latest."""
    start, end = metadata[versions.start], metadata[versions.end]
    if any(configured_mode(m.configuration) != "none" for m in (latest.metadata, start, end)):
        return end, versions.end
    return latest.metadata, latest.version


def _check_schemas(
    read: Metadata, read_version: int, metadata: dict[int, Metadata], versions: ChangeRange
) -> None:
    check_no_reserved_columns(read, read_version)
    previous = metadata[versions.start]
    for version in versions.versions[1:]:
        if metadata[version] is not previous:
            check_read_compatible(
                read, read_version, metadata[version], version, versions.start, versions.end
            )
            previous = metadata[version]
    check_read_compatible(
        read, read_version, metadata[versions.start], versions.start, versions.start, versions.end
    )


def _check_removed_files_schema(
    latest: Snapshot, first: CommitActions, read: Metadata, read_version: int, versions: ChangeRange
) -> None:
    """The files the first commit removes were written under the schema before it: when that
    commit changed the schema, that schema must be readable too (Delta does not check it and reads
    them with the new one)."""
    if versions.start == 0 or _metadata_action(first) is None or any("cdc" in a for a in first.actions):
        return
    if any("remove" in a and a["remove"]["dataChange"] for a in first.file_actions()):
        previous = _metadata_at(latest, versions.start - 1)
        check_read_compatible(read, read_version, previous, versions.start - 1, versions.start, versions.end)


def _feed_enabled(metadata: Metadata) -> bool:
    return str(metadata.configuration.get(_ENABLE_CHANGE_DATA_FEED, "false")).strip().lower() == "true"
