"""The rows of a change feed: each changed file read with pyarrow, its changed rows selected.

Every :class:`RowScan` names one file and which of its rows one commit changed: all of them, those
a deletion vector does not mark (an added or removed file read under its own DV), or those one DV
marks and another does not (a DV that grew or shrank). Files read whole go into one dataset (two:
change-data files carry their ``_change_type``, the others get it from the log), with their
partition values, version and commit time as per-file constants; the others are read one by one and
masked. A file that is gone (VACUUM deleted it) is an error that names it, the version that needs it
and the retention that removed it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

import airflow_delta_provider.core.arrays as arrays
from airflow_delta_provider.core.changes_schema import CHANGE_TYPE, COMMIT_TIMESTAMP, COMMIT_VERSION
from airflow_delta_provider.core.deletion_vectors import deletion_vector_unique_id
from airflow_delta_provider.core.errors import ChangeDataFileNotFoundError
from airflow_delta_provider.core.partitions import partition_columns_from_map
from airflow_delta_provider.core.scan import deletion_vector_rows, file_dataset
from airflow_delta_provider.core.schema import rename_to_logical

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.table_config import Setting

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
    """

    path: str
    partition_values: Mapping[str, str | None]
    version: int
    timestamp: int
    change_type: str | None
    include: Mapping[str, Any] | None = None
    exclude: Mapping[str, Any] | None = None

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
        f"files) once they are older than {retention.name} ({retention.value}; {retention.source}): "
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
    parts = [
        reader.whole([s for s in scans if s.whole and s.change_type is None], physical_columns, cdc=True),
        reader.whole(
            [s for s in scans if s.whole and s.change_type is not None], physical_columns, cdc=False
        ),
        *reader.selected([s for s in scans if not s.whole], physical_columns),
    ]
    table = pa.concat_tables([p for p in parts if p is not None] or [_empty(data_fields, extra)])
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


class _Reader:
    """Reads scans of one table with one physical schema. The columns that come from the log (a
    file's partition values, a change's type, version and commit time) are taken, per row, from a
    small table of per-file values by the row's file (pyarrow's ``__fragment_index``)."""

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

    def whole(self, scans: list[RowScan], columns: list[str], *, cdc: bool) -> pa.Table | None:
        """Every row of each file, in one dataset; a change-data file's rows carry their change type."""
        if not scans:
            return None
        own = [f for f in self._data_fields if f.name in columns]
        if cdc and CHANGE_TYPE in columns:
            own.append(CDC_FIELDS[0])
        dataset = file_dataset(self._storage, [s.path for s in scans], pa.schema(own))
        table = self._read(dataset, scans, [*(f.name for f in own), _FRAGMENT_INDEX])
        return self._with_log_columns(table, scans, table.column(_FRAGMENT_INDEX), columns)

    def selected(self, scans: list[RowScan], columns: list[str]) -> list[pa.Table]:
        """The rows each scan's deletion vectors select; each file is read once for all its scans
        (a file whose deletion vector changed in many commits), and not at all when no scan
        selects a row of it."""
        files: dict[tuple[str, tuple[tuple[str, str | None], ...]], list[RowScan]] = {}
        for scan in scans:
            key = (scan.path, tuple(sorted((scan.partition_values or {}).items())))
            files.setdefault(key, []).append(scan)
        own = [f for f in self._data_fields if f.name in columns]
        parts = []
        for group in files.values():
            selections = [(s, self._selection(s)) for s in group]
            selections = [(s, rows) for s, rows in selections if rows is None or len(rows)]
            if not selections:
                continue
            dataset = file_dataset(self._storage, [selections[0][0].path], pa.schema(own))
            table = self._read(dataset, [selections[0][0]], [f.name for f in own], use_threads=False)
            for scan, rows in selections:
                picked = table.filter(self._mask(scan, rows, table.num_rows))
                index = arrays.from_numpy(np.zeros(picked.num_rows, dtype=np.int32))
                parts.append(self._with_log_columns(picked, [scan], index, columns))
        return parts

    def _with_log_columns(
        self, table: pa.Table, scans: list[RowScan], index: pa.Array | pa.ChunkedArray, columns: list[str]
    ) -> pa.Table:
        """``table``'s columns among ``columns``, and the others from the scans' values, row by row
        (``index``: the scan of each row)."""
        log_columns = self._log_values(scans, [c for c in columns if c not in table.column_names])
        return pa.table(
            {
                c: table.column(c) if c in table.column_names else log_columns.column(c).take(index)
                for c in columns
            }
        )

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

    def _selection(self, scan: RowScan) -> npt.NDArray[np.uint64] | None:
        """The rows a scan selects (None: every row its exclusion leaves)."""
        if scan.include is None:
            return None
        return self._dvs.difference(scan.include, scan.exclude, scan.version)

    def _mask(self, scan: RowScan, rows: npt.NDArray[np.uint64] | None, num_rows: int) -> pa.BooleanArray:
        if rows is not None:
            keep = np.zeros(num_rows, dtype=bool)
            keep[_within(rows, num_rows)] = True
        else:
            keep = np.ones(num_rows, dtype=bool)
            if scan.exclude is not None:
                keep[_within(self._dvs.rows(scan.exclude, scan.version), num_rows)] = False
        return arrays.from_numpy(keep)

    def _read(
        self, dataset: Any, scans: list[RowScan], columns: list[str], *, use_threads: bool = True
    ) -> pa.Table:
        try:
            table: pa.Table = dataset.to_table(columns=columns, use_threads=use_threads)
        except OSError:  # FileNotFoundError, or the filesystem's own "not found"
            for scan in scans:
                local = self._storage.path.decode(scan.path)
                if not self._storage.exists(local):
                    what = "change data file" if scan.change_type is None else "data file"
                    raise vanished_file_error(
                        self._storage.to_uri(local), scan.version, what, self._retention
                    ) from None
            raise
        return table


#: pyarrow's special column: the position, among the dataset's files, of the file a row came from.
_FRAGMENT_INDEX = "__fragment_index"


def _within(rows: npt.NDArray[np.uint64], num_rows: int) -> npt.NDArray[np.intp]:
    """Row indexes below ``num_rows`` (a DV may name rows past a file's end; they are ignored)."""
    return rows[rows < num_rows].astype(np.intp)
