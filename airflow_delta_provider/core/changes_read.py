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
        *(reader.selected(s, physical_columns) for s in scans if not s.whole),
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
    return pa.schema([*data_fields, *extra]).empty_table()


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

    def whole(self, scans: list[RowScan], columns: list[str], *, cdc: bool) -> pa.Table | None:
        """Every row of each file, in one dataset; a change-data file's rows carry their change type."""
        if not scans:
            return None
        constants = [f for f in CDC_FIELDS if not (cdc and f.name == CHANGE_TYPE)]
        dataset = file_dataset(
            self._storage,
            [s.path for s in scans],
            pa.schema([*self._data_fields, *self._partition_fields, *CDC_FIELDS]),
            self._constants(scans, constants),
        )
        return self._read(dataset, scans, columns)

    def selected(self, scan: RowScan, columns: list[str]) -> pa.Table:
        """The rows of one file the scan's deletion vectors select."""
        constants = [f for f in CDC_FIELDS if not (scan.change_type is None and f.name == CHANGE_TYPE)]
        dataset = file_dataset(
            self._storage,
            [scan.path],
            pa.schema([*self._data_fields, *self._partition_fields, *CDC_FIELDS]),
            self._constants([scan], constants),
        )
        table = self._read(dataset, [scan], columns, use_threads=False)
        keep = (
            np.ones(table.num_rows, dtype=bool)
            if scan.include is None
            else np.zeros(table.num_rows, dtype=bool)
        )
        if scan.include is not None:
            keep[_within(self._dvs.difference(scan.include, scan.exclude, scan.version), table.num_rows)] = (
                True
            )
        elif scan.exclude is not None:
            keep[_within(self._dvs.rows(scan.exclude, scan.version), table.num_rows)] = False
        return table.filter(pa.array(keep))

    def _constants(self, scans: list[RowScan], cdc_fields: list[pa.Field]) -> pa.Table:
        """Per scan: its typed partition values, change type, version and commit time."""
        columns: dict[str, pa.Array] = {}
        if self._partition_fields:
            maps = pa.array([list((s.partition_values or {}).items()) for s in scans], _PARTITION_VALUES)
            typed = partition_columns_from_map(maps, pa.schema(self._partition_fields))
            columns.update({f.name: typed.field(f.name) for f in self._partition_fields})
        values = {
            CHANGE_TYPE: [s.change_type for s in scans],
            COMMIT_VERSION: [s.version for s in scans],
            COMMIT_TIMESTAMP: [s.timestamp * 1000 for s in scans],
        }
        for f in cdc_fields:
            columns[f.name] = pa.array(
                values[f.name], pa.int64() if f.name == COMMIT_TIMESTAMP else f.type
            ).cast(f.type)
        return pa.table(columns)

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


def _within(rows: npt.NDArray[np.uint64], num_rows: int) -> npt.NDArray[np.intp]:
    """Row indexes below ``num_rows`` (a DV may name rows past a file's end; they are ignored)."""
    return rows[rows < num_rows].astype(np.intp)
