"""Read a Delta table's snapshot as a Spark DataFrame, without Delta's jars.

``spark.read.parquet(table_root)`` is wrong on a Delta table (removed files, deletion vectors,
partition values, column mapping). Here the core decides everything from the log and Spark reads
exactly the active files, each row keyed to its file (by ``_metadata.file_size`` and checked
against ``_metadata.file_path``) for its partition values and deletion vector; a row whose file is
unknown fails the query. docs/reading.md
("A snapshot: read_delta") has the steps.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.expressions import (
    PartitionFilter,
    Predicate,
    PredicateError,
    bound_by,
    files_matching,
)
from airflow_delta_provider.core.log import deletion_vector_rows
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
from airflow_delta_provider.spark.filters import spark_condition
from airflow_delta_provider.spark.paths import spark_file_paths, spark_path
from airflow_delta_provider.spark.schema import check_spark_version, read_schema

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.log import Snapshot
    from airflow_delta_provider.core.table import DeltaTable
    from airflow_delta_provider.spark.schema import ReadSchema

__all__ = ["as_table", "read_delta", "read_snapshot"]

log = get_logger(__name__)

# Columns the read adds and drops again; named so that no table column collides with them.
ORDINAL = "__delta_read_file_ordinal"
_PARTITION = "__delta_read_partition_{}"
#: Parallel reads of deletion vector files.
DV_READERS = 16


def read_delta(
    spark: Any,
    table: str | DeltaTable,
    *,
    version: int | None = None,
    timestamp: dt.datetime | str | int | None = None,
    columns: Sequence[str] | None = None,
    filter: str | None = None,
    partition_filter: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    storage_options: Mapping[str, Any] | None = None,
    spark_uri: str | None = None,
) -> Any:
    """A DataFrame of a Delta table's rows at a version: what Spark with Delta's jars would read.

    :param spark: a ``SparkSession``, classic or Spark Connect.
    :param table: the table URI (local path, ``file://``, ``s3://`` ...) or a core ``DeltaTable``
        (for instance ``DeltaTableHook(...).get_table()``, which carries an Airflow connection).
    :param version: the version to read (default: the latest).
    :param timestamp: read the version that was current at this time (datetime, ISO-8601 string
        or epoch milliseconds), as the core's time travel resolves it.
    :param columns: the columns to return (default: all, in schema order).
    :param filter: a SQL condition (``"ds >= '2024-01-01' AND amount > :amount"``) in the subset
        the core parses (comparisons, ``IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``<=>``,
        ``AND``/``OR``/``NOT``), meaning what it means in Spark SQL: files that cannot hold a
        matching row are skipped before Spark sees a path, and the rows are filtered on Spark.
    :param partition_filter: only the partitions this condition on partition columns selects (the
        language of ``filter``; any other column is refused): only their files are replayed from the
        log and read.
    :param parameters: the values of the filters' named markers (``{"amount": 10}``), bound as
        typed literals (never formatted into the text); each names a marker of ``filter`` or of
        ``partition_filter``.
    :param storage_options: the core's storage options, with a URI ``table``.
    :param spark_uri: where Spark finds the table root when its Hadoop URI is not the table URI
        (default: the table URI, ``s3://`` as ``s3a://``). The session's Hadoop configuration
        must give Spark access to it.
    :raises UnsupportedFeatureError: the table needs a reader feature the core lacks, or a newer
        Spark (deletion vectors need 3.4, type widening 4.0).
    :raises PredicateError: a filter does not parse, names an unknown column (the partition filter:
        a column that is not a partition column), binds wrongly, or holds a value Spark would refuse
        or read depending on a setting.
    """
    if not isinstance(table, str) and storage_options is not None:
        raise ValueError("storage_options applies to a table URI; a DeltaTable already carries its own.")
    delta_table = as_table(table, storage_options)
    snapshot = delta_table.snapshot(version=version, timestamp=timestamp)
    return read_snapshot(
        spark,
        snapshot,
        columns=columns,
        filter=filter,
        partition_filter=partition_filter,
        parameters=parameters,
        spark_uri=spark_uri,
    )


def as_table(table: str | DeltaTable, storage_options: Mapping[str, Any] | None) -> DeltaTable:
    from airflow_delta_provider.core.table import DeltaTable

    if isinstance(table, DeltaTable):
        return table
    if isinstance(table, str):
        return DeltaTable(table, storage_options)
    raise TypeError(f"table must be a table URI or a DeltaTable, got {type(table).__name__}.")


def read_snapshot(
    spark: Any,
    snapshot: Snapshot,
    *,
    columns: Sequence[str] | None = None,
    filter: str | None = None,
    partition_filter: str | None = None,
    parameters: Mapping[str, Any] | None = None,
    spark_uri: str | None = None,
) -> Any:
    """:func:`read_delta` of a snapshot already loaded (with a partition filter, its files not read
    yet: they are replayed for the selected partitions only)."""
    own, partitions = bound_by(parameters, filter, partition_filter)
    if partition_filter is not None:
        chosen = PartitionFilter(partition_filter, snapshot.partition_columns, snapshot.schema, partitions)
        snapshot = snapshot.with_partition_filter(chosen)
    schema = read_schema(snapshot)
    selected = _select_columns(snapshot, columns)
    predicate = _predicate(snapshot, filter, own)
    files, partition_values = _files_to_read(snapshot, predicate)
    has_dv = files.column("deletion_vector").is_valid()
    with_dv = int(pc.sum(has_dv).as_py() or 0)
    keyed = with_dv > 0 or bool(snapshot.partition_columns)
    check_spark_version(spark, snapshot.storage.root_uri, schema, deletion_vectors=with_dv > 0, keyed=keyed)
    root = (spark_uri or spark_path(snapshot.storage.root_uri)).rstrip("/")
    paths = spark_file_paths(snapshot.storage.path, files.column("path").to_pylist(), root)
    log.info(
        "Reading %d file(s) (%d with deletion vectors) of %s at version %d on Spark%s.",
        len(paths),
        with_dv,
        snapshot.storage.root_uri,
        snapshot.version,
        f"; the filter skipped {snapshot.num_files() - len(paths)}" if predicate is not None else "",
    )
    if not paths:
        frame = empty_frame(spark, [field(c.logical, c.logical_type) for c in schema.columns])
    else:
        frame = _ScanBuilder(spark, snapshot, schema, paths).build(
            files, partition_values, has_dv if with_dv else None
        )
    if predicate is not None:
        logical = {c.logical: column(c.logical) for c in schema.columns}
        frame = frame.filter(spark_condition(predicate.normal_form(snapshot.schema), logical))
    return frame.select(*[column(c) for c in selected])


def _select_columns(snapshot: Snapshot, columns: Sequence[str] | None) -> list[str]:
    names = [f.name for f in snapshot.schema]
    if columns is None:
        return names
    if isinstance(columns, str):
        raise TypeError(f"columns must be a list of column names, not the string {columns!r}.")
    by_key = {n.lower(): n for n in names}
    chosen = []
    for name in columns:
        found = name if name in names else by_key.get(str(name).lower())
        if found is None:
            raise ValueError(f"The table has no column {name!r}; its columns are {names}.")
        chosen.append(found)
    return chosen


def _predicate(
    snapshot: Snapshot, text: str | None, parameters: Mapping[str, Any] | None
) -> Predicate | None:
    if text is None:
        if parameters is not None:
            raise PredicateError(
                "parameters were given without a filter to bind them to.", reason="parameter"
            )
        return None
    partitions = snapshot.partition_columns
    data = [f.name for f in snapshot.schema if f.name not in partitions]
    predicate = Predicate(text, partitions, data_columns=data, parameters=parameters)
    predicate.normal_form(snapshot.schema)  # types every literal now: a bad value fails before Spark
    return predicate


def _files_to_read(snapshot: Snapshot, predicate: Predicate | None) -> tuple[pa.Table, pa.Table]:
    """The active files a read needs and their typed partition values (row-aligned)."""
    files = snapshot.files()
    partition_values = snapshot.partition_values() if snapshot.partition_columns else pa.table({})
    if predicate is None:
        return files, partition_values
    mask = pa.array(files_matching(snapshot, predicate))
    return files.filter(mask), (
        partition_values.filter(mask) if partition_values.num_columns else partition_values
    )


@dataclass
class _ScanBuilder:
    """One read of a snapshot's files on Spark."""

    spark: Any
    snapshot: Snapshot
    schema: ReadSchema
    paths: list[str]

    def build(self, files: pa.Table, partition_values: pa.Table, has_dv: pa.Array | None) -> Any:
        """The rows of ``files``: those of files without a deletion vector in one scan (a plain one
        for an unpartitioned table: no per-row work), those of files with one in a scan keyed by
        file with each row's index, so that rows of files without a deletion vector never pay for
        one."""
        everything = np.arange(files.num_rows)
        if has_dv is None:
            return self._scan(everything, files, partition_values, with_dv=False)
        with_dv = has_dv.to_numpy(zero_copy_only=False)
        frame = self._scan(everything[with_dv], files, partition_values, with_dv=True)
        if not with_dv.all():
            plain = self._scan(everything[~with_dv], files, partition_values, with_dv=False)
            frame = plain.unionByName(frame)
        return frame

    def _scan(
        self, rows: npt.NDArray[np.int64], files: pa.Table, partition_values: pa.Table, *, with_dv: bool
    ) -> Any:
        """The rows of the files at ``rows`` of ``files``, their deleted rows dropped when ``with_dv``."""
        from pyspark.sql import functions as F

        chosen = pa.array(rows, pa.int64())
        files = files.take(chosen)
        if partition_values.num_columns:
            partition_values = partition_values.take(chosen)
        paths = [self.paths[i] for i in rows.tolist()]
        sizes = files.column("size").to_pylist()
        keyed = with_dv or partition_values.num_columns > 0
        keys = FileKeys.of(sizes) if keyed else None
        frame = scan_files(
            self.spark,
            self.snapshot.storage,
            self.schema,
            files.column("path").to_pylist(),
            paths,
            keys=keys,
            row_index=with_dv,
            sizes=sizes,
        )
        partitions: dict[str, Any] = {}
        if keys is not None:
            deleted = self._deleted_rows(files) if with_dv else None
            per_file = self._files_frame(paths, sizes, partition_values, deleted)
            frame = join_files(frame, per_file, keys, ORDINAL, self.snapshot.storage.root_uri)
            partitions = {
                name: F.col(_PARTITION.format(index))
                for index, name in enumerate(partition_values.column_names)
            }
        if with_dv:
            frame = frame.filter(~in_row_set())
        return frame.select(*logical_columns(self.schema, partitions))

    def _files_frame(
        self,
        paths: list[str],
        sizes: list[int | None],
        partition_values: pa.Table,
        deleted: list[npt.NDArray[np.uint64] | None] | None,
    ) -> Any:
        """One row per file: its path and size as Spark shows them, ordinal, typed partition values
        and the rows its deletion vector deletes."""
        from pyspark.sql.types import StructType

        columns, fields = file_columns(paths, sizes)
        columns[ORDINAL] = pa.array(np.arange(len(paths), dtype=np.int64))
        fields.append(field(ORDINAL, "long"))
        types = {c.logical: c.logical_type for c in self.schema.columns}
        for index, name in enumerate(partition_values.column_names):
            columns[_PARTITION.format(index)] = partition_values.column(name).combine_chunks()
            fields.append(field(_PARTITION.format(index), types[name]))
        if deleted is not None:
            row_sets, row_fields = row_set_columns(deleted, paths)
            columns.update(row_sets)
            fields += row_fields
        # The schema, not Arrow's types, decides: a zone-less Arrow timestamp is timestamp_ntz.
        schema = StructType.fromJson({"type": "struct", "fields": fields})
        return self.spark.createDataFrame(pa.table(columns), schema=schema)

    def _deleted_rows(self, files: pa.Table) -> list[npt.NDArray[np.uint64] | None]:
        """The rows each file's deletion vector deletes (None: it has none), decoded by the core,
        in parallel."""
        descriptors = files.column("deletion_vector").to_pylist()
        storage = self.snapshot.storage

        def decoded(dv: dict[str, Any] | None) -> npt.NDArray[np.uint64] | None:
            return None if dv is None else deletion_vector_rows(storage, dv)

        with ThreadPoolExecutor(max_workers=max(1, min(DV_READERS, len(descriptors)))) as pool:
            return list(pool.map(decoded, descriptors))
