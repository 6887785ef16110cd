"""The rows of a change feed: each changed file read with pyarrow, its changed rows selected.

Every :class:`RowScan` names one file and which of its rows one commit changed: all of them, those
a deletion vector does not mark (an added or removed file read under its own DV), or those one DV
marks and another does not (a DV that grew or shrank). All files are read in one scan (change-data
files carry their ``_change_type``, the others get it from the log), each file once however many
commits count it (:func:`~.scan.read_files`); the columns that come from the log (a file's
partition values, a change's type, version and commit time) are constant columns of each scan's
rows, slices of one array per value (:func:`~.scan.constant_chunks`). A file that is gone (VACUUM
deleted it) is an error that names it, the version that needs it and the retention that removed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

import airflow_delta_provider.core.utils.arrays as arrays
from airflow_delta_provider.core.changes.read_schema import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION
from airflow_delta_provider.core.errors import ChangeDataFileNotFoundError
from airflow_delta_provider.core.log.deletion_vectors import deletion_vector_unique_id
from airflow_delta_provider.core.log.scan import (
    FileRead,
    RowSelection,
    constant_chunks,
    deletion_vector_rows,
    read_files,
)
from airflow_delta_provider.core.protocol.partitions import partition_columns_from_map
from airflow_delta_provider.core.protocol.schema import rename_to_logical

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.protocol.table_config import Setting
    from airflow_delta_provider.core.storage import LogStore

#: The types of the columns a change feed adds (Delta's: string, long, timestamp).
CDC_FIELDS = (
    pa.field(CHANGE_TYPE, pa.string()),
    pa.field(COMMIT_VERSION, pa.int64()),
    pa.field(COMMIT_TIMESTAMP, pa.timestamp("us", tz="UTC")),
)
_PARTITION_VALUES = pa.map_(pa.string(), pa.string())


@dataclass(frozen=True, slots=True)
class RowScan:
    """The rows of one file that one commit changed.

    :param change_type: ``insert`` / ``delete``; None for a change-data file, whose rows carry it.
    :param include: only the rows this deletion vector marks (None: every row).
    :param exclude: not the rows this deletion vector marks.
    :param size: the file's size in bytes, as the action records it (None: not recorded).
    """

    path: str
    partition_values: Mapping[str, str | None]
    version: int
    timestamp: int
    change_type: str | None
    include: Mapping[str, Any] | None = None
    exclude: Mapping[str, Any] | None = None
    size: int | None = None

    @property
    def whole(self) -> bool:
        return self.include is None and self.exclude is None


class DeletionVectors:
    """The rows each deletion vector marks, read once per vector; a vanished DV file is named with
    the version that needs it and the retention that deleted it."""

    def __init__(self, storage: LogStore, retention: Setting[Any]) -> None:
        self._storage = storage
        self._retention = retention
        self._rows: dict[str, npt.NDArray[np.uint64]] = {}

    def rows(self, dv: Mapping[str, Any], version: int) -> npt.NDArray[np.uint64]:
        key = deletion_vector_unique_id(dv) or ""
        if key not in self._rows:
            self._rows[key] = deletion_vector_rows(
                self._storage,
                dv,
                lambda uri: vanished_file_error(uri, version, "deletion vector", self._retention),
            )
        return self._rows[key]

    def difference(
        self, include: Mapping[str, Any], exclude: Mapping[str, Any] | None, version: int
    ) -> npt.NDArray[np.uint64]:
        """The rows ``include`` marks and ``exclude`` does not."""
        rows = self.rows(include, version)
        return (
            rows if exclude is None else np.setdiff1d(rows, self.rows(exclude, version), assume_unique=True)
        )


def vanished_file_error(
    uri: str, version: int, what: str, retention: Setting[Any]
) -> ChangeDataFileNotFoundError:
    return ChangeDataFileNotFoundError(
        f"The {what} {uri}, which the changes of version {version} need, is gone. VACUUM deletes the "
        f"files a table no longer uses (removed data files, their deletion vectors and change data "
        f"files) once they are older than {retention.describe()}: "
        f"read a range that starts later, or start again from a full snapshot (DeltaTable.snapshot()). "
        f"To keep changes readable longer, raise {retention.name} on the table.",
        path=uri,
        version=version,
    )


def read_rows(
    storage: LogStore,
    scans: Sequence[RowScan],
    *,
    logical: pa.Schema,
    physical: pa.Schema,
    partition_columns: Sequence[str],
    columns: Sequence[str],
    deletion_vectors: DeletionVectors,
    retention: Setting[Any],
) -> pa.Table:
    """The changed rows of ``scans``: the ``columns`` asked for (logical data columns and the change
    feed's own), in that order.

    :param logical: the read schema (logical names).
    :param physical: the same schema as the files name its columns (physical names under column
        mapping).
    """
    wanted = [logical.get_field_index(c) for c in columns if c not in _CDC_NAMES]
    data_fields = [physical.field(i) for i in wanted]
    partitions = {physical.field(logical.get_field_index(c)).name for c in partition_columns}
    extra = [f for f in CDC_FIELDS if f.name in columns]
    physical_columns = [f.name for f in data_fields] + [f.name for f in extra]
    reader = _Reader(storage, physical, partitions, deletion_vectors, retention)
    # Change-data files first, as their rows come first.
    ordered = [s for s in scans if s.change_type is None] + [s for s in scans if s.change_type is not None]
    table = reader.read(ordered, physical_columns) or _empty(data_fields, extra)
    data = rename_to_logical(
        table.select([f.name for f in data_fields]), pa.schema([logical.field(i) for i in wanted])
    )
    named = {
        **{f.name: data.column(f.name) for f in data.schema},
        **{f.name: table.column(f.name) for f in extra},
    }
    return pa.table({c: named[c] for c in columns})


_CDC_NAMES = frozenset(f.name for f in CDC_FIELDS)


def _empty(data_fields: list[pa.Field], extra: list[pa.Field]) -> pa.Table:
    return arrays.table([], pa.schema([*data_fields, *extra]))


def _file_change_types(
    scans: list[RowScan], counted: list[tuple[int, pa.Table]], from_log: pa.ChunkedArray
) -> pa.ChunkedArray:
    """The ``_change_type`` of each counted table's rows: a change-data file's own, else the log's
    (``from_log``, row-aligned with the counted tables one after the other)."""
    chunks: list[pa.Array] = []
    offset = 0
    for index, table in counted:
        own = scans[index].change_type is None
        chunks += table.column(CHANGE_TYPE).chunks if own else from_log.slice(offset, table.num_rows).chunks
        offset += table.num_rows
    return pa.chunked_array(chunks, type=from_log.type)


class _Reader:
    """Reads scans of one table with one physical schema."""

    def __init__(
        self,
        storage: LogStore,
        physical: pa.Schema,
        partitions: set[str],
        deletion_vectors: DeletionVectors,
        retention: Setting[Any],
    ) -> None:
        self._storage = storage
        self._partition_fields = [f for f in physical if f.name in partitions]
        self._data_fields = [f for f in physical if f.name not in partitions]
        self._dvs = deletion_vectors
        self._retention = retention

    def read(self, scans: list[RowScan], columns: list[str]) -> pa.Table | None:
        """The rows the scans count, with ``columns`` (None: no row): each file read once for all
        its scans (a file inserted and deleted within the range, a file whose deletion vector
        changed in many commits), not at all when no scan selects a row of it, in one scan of
        change-data and data files; the log's values are each scan's, over its rows."""
        if not scans:
            return None
        own = [f for f in self._data_fields if f.name in columns]
        file_change_types = CHANGE_TYPE in columns and any(s.change_type is None for s in scans)
        if file_change_types:
            # Change-data files hold it; data files read it as null, the log's value replaces it.
            own.append(CDC_FIELDS[0])
        by_path: dict[str, list[int]] = {}
        for index, scan in enumerate(scans):
            by_path.setdefault(scan.path, []).append(index)
        files = [
            FileRead(path, tuple(self._selection(scans[i]) for i in members))
            for path, members in by_path.items()
        ]
        try:
            tables = read_files(self._storage, files, pa.schema(own))
        except OSError:  # FileNotFoundError, or the filesystem's own "not found"
            self._raise_vanished(scans)
            raise
        counted = [
            (index, table)
            for members, per_selection in zip(by_path.values(), tables, strict=True)
            for index, table in zip(members, per_selection, strict=True)
            if table.num_rows
        ]
        if not counted:
            return None
        data = pa.concat_tables([table for _, table in counted])
        lengths = np.array([table.num_rows for _, table in counted], dtype=np.int64)
        order = arrays.integers([index for index, _ in counted], pa.int64())
        from_log = [c for c in columns if c not in data.column_names or c == CHANGE_TYPE]
        log_values = self._log_values(scans, from_log)
        out = {}
        for name in columns:
            if name in from_log:
                out[name] = constant_chunks(log_values.column(name).take(order), lengths)
            else:
                out[name] = data.column(name)
        if file_change_types:
            out[CHANGE_TYPE] = _file_change_types(scans, counted, out[CHANGE_TYPE])
        return pa.table(out)

    def _selection(self, scan: RowScan) -> RowSelection | None:
        """The rows a scan counts: those its ``include`` DV marks and its ``exclude`` DV does not,
        or those its ``exclude`` DV does not mark, or all."""
        if scan.include is not None:
            return RowSelection(self._dvs.difference(scan.include, scan.exclude, scan.version), keep=True)
        if scan.exclude is not None:
            return RowSelection(self._dvs.rows(scan.exclude, scan.version), keep=False)
        return None

    def _log_values(self, scans: list[RowScan], names: list[str]) -> pa.Table:
        """Per scan, the asked-for columns that come from the log: typed partition values, change
        type, version and commit time."""
        columns: dict[str, pa.Array] = {}
        partitions = [f for f in self._partition_fields if f.name in names]
        if partitions:
            maps = arrays.array([dict(s.partition_values or {}) for s in scans], _PARTITION_VALUES)
            typed = partition_columns_from_map(maps, pa.schema(partitions))
            columns.update({f.name: typed.field(f.name) for f in partitions})
        values: dict[str, list[Any]] = {
            CHANGE_TYPE: [s.change_type for s in scans],
            COMMIT_VERSION: [s.version for s in scans],
            COMMIT_TIMESTAMP: [s.timestamp * 1000 for s in scans],
        }
        for f in CDC_FIELDS:
            if f.name in names:
                raw = pa.int64() if f.name == COMMIT_TIMESTAMP else f.type
                columns[f.name] = arrays.array(values[f.name], raw).cast(f.type)
        return pa.table(columns) if columns else pa.table({"_": pa.nulls(len(scans))})

    def _raise_vanished(self, scans: list[RowScan]) -> None:
        """Raises the error naming the first file of ``scans`` that is gone, if one is."""
        for scan in scans:
            local = self._storage.path.decode(scan.path)
            if not self._storage.exists(local):
                what = "change data file" if scan.change_type is None else "data file"
                raise vanished_file_error(self._storage.to_uri(local), scan.version, what, self._retention)
