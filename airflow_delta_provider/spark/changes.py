"""Read a Delta table's changes between versions as a Spark DataFrame: the rows the core's
``DeltaTable.changes(...).to_pyarrow_table()`` returns, read by the executors.

The core decides everything from the commits of the range (:mod:`airflow_delta_provider.core.changes.feed`):
which files count, with which change type, version and commit time, and which of their rows (a
deletion vector that grew: the newly deleted rows). Spark reads each of those files once, change-data
files with their ``_change_type`` column; each row is keyed to its file (its size, checked against
``_metadata.file_path``) and joined with the file's scans (a file can count in several commits),
which bring the per-scan values and, for a scan that counts only some rows, the row set the core
decoded (a few rows as a list, more as a bitmap), which each row's ``_metadata.row_index`` is
tested against.
"""

from __future__ import annotations

from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.changes import (
    CHANGE_TYPE,
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    check_no_reserved_columns,
    vanished_file_error,
)
from airflow_delta_provider.core.protocol import partition_columns_from_map, schema_to_delta
from airflow_delta_provider.core.utils import get_logger
from airflow_delta_provider.spark.files import (
    FileKeys,
    column,
    empty_frame,
    field,
    file_columns,
    in_row_set,
    join_files,
    logical_columns,
    row_set_columns,
    scan_files,
)
from airflow_delta_provider.spark.paths import spark_file_paths, spark_path
from airflow_delta_provider.spark.read import as_table, read_snapshot
from airflow_delta_provider.spark.schema import check_spark_version, read_schema, read_schema_of

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_delta_provider.core.changes import Changes, RowScan
    from airflow_delta_provider.core.errors import DeltaError
    from airflow_delta_provider.core.log import Snapshot
    from airflow_delta_provider.core.table import DeltaTable
    from airflow_delta_provider.spark.schema import ReadSchema

__all__ = ["empty_changes", "read_change_set", "read_changes", "read_snapshot_changes"]

log = get_logger(__name__)

SCAN = "__delta_read_scan"
MODE = "__delta_read_scan_mode"
_PARTITION = "__delta_read_partition_{}"
_CONSTANT = "__delta_read_{}"
#: How a scan's rows count: all, only the marked ones, all but the marked ones.
_WHOLE, _INCLUDE, _EXCLUDE = 0, 1, 2


def read_changes(
    spark: Any,
    table: str | DeltaTable,
    starting_version: int,
    ending_version: int | None = None,
    *,
    partition_filter: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    spark_uri: str | None = None,
) -> Any:
    """A DataFrame of the changes of the commits ``starting_version`` to ``ending_version``
    (inclusive): the rows of ``DeltaTable.changes(...).to_pyarrow_table()``, read on Spark.

    Columns: the table's, then ``_change_type`` (``insert``, ``delete``, ``update_preimage``,
    ``update_postimage``), ``_commit_version`` and ``_commit_timestamp``.

    :param spark: a ``SparkSession``, classic or Spark Connect.
    :param table: the table URI or a core ``DeltaTable``.
    :param ending_version: the last version (default: the latest).
    :param partition_filter: only the changes of the partitions this SQL condition on partition
        columns selects (``DeltaTable.changes(partition_filter=...)``: only their files are read).
    :param parameters: the values of ``partition_filter``'s ``:name`` markers.
    :param storage_options: the core's storage options, with a URI ``table``.
    :param spark_uri: where Spark finds the table root, when its Hadoop URI is not the table URI.
    :raises DeltaError: as ``DeltaTable.changes`` (bounds, cleaned-up commits, a commit whose changed
        rows were not recorded, a schema change within the range, a vacuumed file).
    """
    delta_table = as_table(table, storage_options)
    changes = delta_table.changes(
        starting_version, ending_version, partition_filter=partition_filter, parameters=parameters
    )
    return read_change_set(spark, changes, spark_uri=spark_uri)


def read_change_set(spark: Any, changes: Changes, *, spark_uri: str | None = None) -> Any:
    """:func:`read_changes` of changes already loaded (``DeltaTable.changes(...)``)."""
    return _ChangeScan(spark, changes, spark_uri).frame()


def read_snapshot_changes(
    spark: Any,
    snapshot: Snapshot,
    committed_at: int,
    *,
    partition_filter: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    spark_uri: str | None = None,
) -> Any:
    """A snapshot's rows as the change feed's inserts at its version (what Delta's streaming source
    delivers first, before the changes after it): the columns of :func:`read_changes`,
    ``_change_type`` ``insert``, ``_commit_version`` the snapshot's version.

    :param committed_at: the version's commit time (ms since the epoch), the ``_commit_timestamp``.
    :param partition_filter: only the rows of the partitions it selects (see :func:`read_delta`).
    :param parameters: the values of ``partition_filter``'s ``:name`` markers.
    """
    from pyspark.sql import functions as F

    check_no_reserved_columns(snapshot.metadata, snapshot.version)
    frame = read_snapshot(
        spark, snapshot, partition_filter=partition_filter, parameters=parameters, spark_uri=spark_uri
    )
    return frame.select(
        *[column(name) for name in frame.columns],
        F.lit("insert").alias(CHANGE_TYPE),
        F.lit(snapshot.version).cast("long").alias(COMMIT_VERSION),
        F.expr(f"timestamp_millis({int(committed_at)})").alias(COMMIT_TIMESTAMP),
    )


def empty_changes(spark: Any, snapshot: Snapshot) -> Any:
    """A DataFrame with the columns of :func:`read_changes` of ``snapshot``'s table, and no row."""
    check_no_reserved_columns(snapshot.metadata, snapshot.version)
    fields = [field(c.logical, c.logical_type) for c in read_schema(snapshot).columns]
    return empty_frame(spark, [*fields, *_CDC_FIELDS])


class _ChangeScan:
    """The Spark read of one range of changes."""

    def __init__(self, spark: Any, changes: Changes, spark_uri: str | None) -> None:
        self.spark = spark
        self.changes = changes
        self.storage = changes.storage
        fields = schema_to_delta(changes.data_schema)["fields"]
        self.schema: ReadSchema = read_schema_of(
            fields, changes.column_mapping_mode, changes.partition_columns
        )
        self.scans = changes.row_scans()
        self.root = (spark_uri or spark_path(self.storage.root_uri)).rstrip("/")

    def frame(self) -> Any:
        columns = [*(column(c.logical) for c in self.schema.columns), *map(column, _CDC)]
        if not self.scans:
            fields = [field(c.logical, c.logical_type) for c in self.schema.columns]
            return empty_frame(self.spark, [*fields, *_CDC_FIELDS]).select(*columns)
        check_spark_version(
            self.spark,
            self.storage.root_uri,
            self.schema,
            deletion_vectors=any(not s.whole for s in self.scans),
            keyed=True,
        )
        paths = spark_file_paths(self.storage.path, [s.path for s in self.scans], self.root)
        log.info(
            "Reading the changes of versions %d to %d of %s on Spark: %d file scan(s).",
            self.changes.start_version,
            self.changes.end_version,
            self.storage.root_uri,
            len(self.scans),
        )
        sizes = _file_sizes(self.scans)
        parts = []
        for cdc in (True, False):
            kind = [i for i, s in enumerate(self.scans) if (s.change_type is None) == cdc]
            # Files all of whose scans count every row are read without row indexes.
            partial_files = {self.scans[i].path for i in kind if not self.scans[i].whole}
            for with_rows in (False, True):
                chosen = [i for i in kind if (self.scans[i].path in partial_files) == with_rows]
                if chosen:
                    parts.append(self._rows(paths, sizes, chosen, cdc=cdc, partial=with_rows))
        frame = reduce(lambda a, b: a.unionByName(b), parts)
        return frame.select(*columns)

    def _rows(
        self, paths: list[str], sizes: dict[str, int | None], chosen: list[int], *, cdc: bool, partial: bool
    ) -> Any:
        """The counted rows of the files of the chosen scans, with the scans' values."""
        from pyspark.sql import functions as F

        files = list(dict.fromkeys(self.scans[i].path for i in chosen))
        keys = FileKeys.of([sizes[path] for path in files])
        first = {self.scans[i].path: i for i in reversed(chosen)}
        try:
            data = scan_files(
                self.spark,
                self.storage,
                self.schema,
                files,
                [paths[first[path]] for path in files],
                keys=keys,
                row_index=partial,
                extra=[field(CHANGE_TYPE, "string")] if cdc else (),
                sizes=[sizes[path] for path in files],
            )
        except Exception as err:
            vanished = self._vanished([self.scans[i] for i in chosen])
            if vanished is not None:
                raise vanished from err
            raise
        scans = self._scans_frame(paths, sizes, chosen, partial=partial)
        frame = join_files(data, scans, keys, SCAN, self.storage.root_uri)
        if partial:
            frame = self._select_rows(frame)
        partitions = {
            name: F.col(_PARTITION.format(index)) for index, name in enumerate(self.changes.partition_columns)
        }
        change_type = column(CHANGE_TYPE) if cdc else F.col(_CONSTANT.format(CHANGE_TYPE))
        return frame.select(
            *logical_columns(self.schema, partitions),
            change_type.alias(CHANGE_TYPE),
            F.col(_CONSTANT.format(COMMIT_VERSION)).alias(COMMIT_VERSION),
            F.col(_CONSTANT.format(COMMIT_TIMESTAMP)).alias(COMMIT_TIMESTAMP),
        )

    def _vanished(self, scans: list[RowScan]) -> DeltaError | None:
        """The core's error for the first file of ``scans`` that is gone (VACUUM deleted it), if any:
        Spark's own says only that a path does not exist."""
        for scan in scans:
            local = self.storage.path.decode(scan.path)
            if not self.storage.exists(local):
                what = "change data file" if scan.change_type is None else "data file"
                retention = self.changes.deleted_file_retention
                return vanished_file_error(self.storage.to_uri(local), scan.version, what, retention)
        return None

    def _select_rows(self, frame: Any) -> Any:
        """Keeps the rows each scan counts: all, those its row set holds, or those it does not."""
        from pyspark.sql import functions as F

        mode = F.col(MODE)
        marked = in_row_set()
        keep = (mode == _WHOLE) | ((mode == _INCLUDE) & marked) | ((mode == _EXCLUDE) & ~marked)
        return frame.filter(keep)

    def _scans_frame(
        self, paths: list[str], sizes: dict[str, int | None], chosen: list[int], *, partial: bool
    ) -> Any:
        """One row per chosen scan: its file's path and size as Spark shows them, ordinal, row mode,
        change type, version, commit time, typed partition values and, when ``partial``, row set."""
        from pyspark.sql.types import StructType

        scans = [self.scans[i] for i in chosen]
        times = pa.array([s.timestamp * 1000 for s in scans], pa.int64()).cast(pa.timestamp("us", tz="UTC"))
        columns, fields = file_columns([paths[i] for i in chosen], [sizes[s.path] for s in scans])
        columns.update(
            {
                SCAN: pa.array(np.asarray(chosen, dtype=np.int64)),
                MODE: pa.array([_mode(s) for s in scans], pa.int32()),
                _CONSTANT.format(CHANGE_TYPE): pa.array([s.change_type for s in scans], pa.string()),
                _CONSTANT.format(COMMIT_VERSION): pa.array([s.version for s in scans], pa.int64()),
                _CONSTANT.format(COMMIT_TIMESTAMP): times,
            }
        )
        fields += [
            field(SCAN, "long"),
            field(MODE, "integer"),
            field(_CONSTANT.format(CHANGE_TYPE), "string"),
            field(_CONSTANT.format(COMMIT_VERSION), "long"),
            field(_CONSTANT.format(COMMIT_TIMESTAMP), "timestamp"),
        ]
        if partial:
            row_sets, row_fields = row_set_columns(
                [None if s.whole else self.changes.selected_rows(s) for s in scans], [s.path for s in scans]
            )
            columns.update(row_sets)
            fields += row_fields
        by_name = {c.logical: c for c in self.schema.columns}
        partition_fields = []
        for name in self.changes.partition_columns:
            item = by_name[name]
            partition_fields.append(pa.field(item.physical, self.changes.data_schema.field(name).type))
        if partition_fields:
            maps = pa.array(
                [list((s.partition_values or {}).items()) for s in scans], pa.map_(pa.string(), pa.string())
            )
            typed = partition_columns_from_map(maps, pa.schema(partition_fields))
            for index, name in enumerate(self.changes.partition_columns):
                columns[_PARTITION.format(index)] = typed.field(index)
                fields.append(field(_PARTITION.format(index), by_name[name].logical_type))
        schema = StructType.fromJson({"type": "struct", "fields": fields})
        return self.spark.createDataFrame(pa.table(columns), schema=schema)


def _file_sizes(scans: list[RowScan]) -> dict[str, int | None]:
    """Each file's size, as its scans' actions record it; None where one omits it or two disagree
    (the file is then keyed by its path)."""
    sizes: dict[str, int | None] = {}
    for scan in scans:
        if scan.path not in sizes:
            sizes[scan.path] = scan.size
        elif sizes[scan.path] != scan.size:
            sizes[scan.path] = None
    return sizes


def _mode(scan: RowScan) -> int:
    if scan.include is not None:
        return _INCLUDE
    return _EXCLUDE if scan.exclude is not None else _WHOLE


_CDC = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)
_CDC_FIELDS = [
    field(CHANGE_TYPE, "string"),
    field(COMMIT_VERSION, "long"),
    field(COMMIT_TIMESTAMP, "timestamp"),
]
