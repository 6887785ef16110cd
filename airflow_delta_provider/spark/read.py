"""Read a Delta table's snapshot as a Spark DataFrame, without Delta's jars.

``spark.read.parquet(table_root)`` is wrong on a Delta table: it reads removed and uncommitted
files, ignores deletion vectors, takes partition values from directory names, reads
column-mapped columns as nulls and, under column mapping, change-data files. Here the core
decides everything from the log and Spark reads exactly the active files:

1. the core lists the snapshot's active files and, given a filter, keeps those whose partition
   values and statistics allow a matching row (:mod:`~airflow_delta_provider.core.skipping`);
2. Spark reads those files, and only them, with the table's physical schema (column mapping:
   physical names, field ids in ``id`` mode), every column nullable (a file may lack one);
3. each row is keyed to its file by ``_metadata.file_path`` and joined (broadcast) with a small
   table holding the file's ordinal and typed partition values, as the core parses them from the
   log; a row whose file is not in that table fails the query (never a silent null);
4. deletion vectors, decoded by the core on the driver, become keys ``ordinal << shift | row``
   that the rows are anti-joined with on ``_metadata.row_index``, on the executors;
5. columns are renamed to their logical names (nested ones by a positional cast), the filter is
   applied to the rows, and the asked columns are selected.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import DeltaError
from airflow_delta_provider.core.predicate import Predicate
from airflow_delta_provider.core.redaction import get_logger
from airflow_delta_provider.core.scan import deletion_vector_rows
from airflow_delta_provider.spark.filters import spark_condition
from airflow_delta_provider.spark.paths import metadata_file_path, same_file_key, spark_file_paths, spark_path
from airflow_delta_provider.spark.schema import (
    FIELD_ID_READ,
    ReadSchema,
    check_spark_version,
    read_schema,
)

if TYPE_CHECKING:
    import datetime as dt
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.snapshot import Snapshot
    from airflow_delta_provider.core.table import DeltaTable

__all__ = ["read_delta", "read_snapshot"]

log = get_logger(__name__)

# Columns the read adds and drops again; named so that no table column collides with them.
FILE = "__delta_read_file_path"
ORDINAL = "__delta_read_file_ordinal"
ROW = "__delta_read_row_index"
KEY = "__delta_read_deleted_row"
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
    :param filter: a SQL condition (``"ds >= '2024-01-01' AND amount > 10"``) in the subset the
        core parses (comparisons, ``IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``):
        files that cannot hold a matching row are skipped before Spark sees a path, and the rows
        are filtered on Spark.
    :param storage_options: the core's storage options, with a URI ``table``.
    :param spark_uri: where Spark finds the table root when its Hadoop URI is not the table URI
        (default: the table URI, ``s3://`` as ``s3a://``). The session's Hadoop configuration
        must give Spark access to it.
    :raises UnsupportedFeatureError: the table needs a reader feature the core lacks, or a newer
        Spark (deletion vectors need 3.4, type widening 4.0).
    :raises PredicateError: the filter does not parse, names an unknown column or a value that
        does not fit its column.
    """
    if not isinstance(table, str) and storage_options is not None:
        raise ValueError("storage_options applies to a table URI; a DeltaTable already carries its own.")
    delta_table = _as_table(table, storage_options)
    snapshot = delta_table.snapshot(version=version, timestamp=timestamp)
    return read_snapshot(spark, snapshot, columns=columns, filter=filter, spark_uri=spark_uri)


def _as_table(table: str | DeltaTable, storage_options: Mapping[str, Any] | None) -> DeltaTable:
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
    spark_uri: str | None = None,
) -> Any:
    """:func:`read_delta` of a snapshot already loaded."""
    schema = read_schema(snapshot)
    selected = _select_columns(snapshot, columns)
    predicate = _predicate(snapshot, filter)
    files, partition_values = _files_to_read(snapshot, predicate)
    has_dv = files.column("deletion_vector").is_valid()
    with_dv = int(pc.sum(has_dv).as_py() or 0)
    keyed = with_dv > 0 or bool(snapshot.partition_columns)
    check_spark_version(spark, snapshot, deletion_vectors=with_dv > 0, keyed=keyed)
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
        frame = _empty(spark, schema)
    else:
        frame = _ScanBuilder(spark, snapshot, schema, paths).build(
            files, partition_values, has_dv if with_dv else None
        )
    if predicate is not None:
        logical = {c.logical: _column(c.logical) for c in schema.columns}
        frame = frame.filter(spark_condition(predicate.normal_form(snapshot.schema), logical))
    return frame.select(*[_column(c) for c in selected])


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


def _predicate(snapshot: Snapshot, text: str | None) -> Predicate | None:
    if text is None:
        return None
    partitions = snapshot.partition_columns
    data = [f.name for f in snapshot.schema if f.name not in partitions]
    predicate = Predicate(text, partitions, data_columns=data)
    predicate.normal_form(snapshot.schema)  # types every literal now: a bad value fails before Spark
    return predicate


def _files_to_read(snapshot: Snapshot, predicate: Predicate | None) -> tuple[pa.Table, pa.Table]:
    """The active files a read needs and their typed partition values (row-aligned)."""
    files = snapshot.files()
    partition_values = snapshot.partition_values() if snapshot.partition_columns else pa.table({})
    if predicate is None:
        return files, partition_values
    from airflow_delta_provider.core.skipping import files_matching

    mask = pa.array(files_matching(snapshot, predicate))
    return files.filter(mask), (
        partition_values.filter(mask) if partition_values.num_columns else partition_values
    )


def _empty(spark: Any, schema: ReadSchema) -> Any:
    from pyspark.sql.types import StructType

    fields = [
        {"name": c.logical, "type": c.logical_type, "nullable": True, "metadata": {}} for c in schema.columns
    ]
    return spark.createDataFrame([], StructType.fromJson({"type": "struct", "fields": fields}))


def _column(name: str) -> Any:
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


@dataclass
class _ScanBuilder:
    """One read of a snapshot's files on Spark."""

    spark: Any
    snapshot: Snapshot
    schema: ReadSchema
    paths: list[str]

    def build(self, files: pa.Table, partition_values: pa.Table, has_dv: pa.Array | None) -> Any:
        from pyspark.sql import functions as F

        keyed = has_dv is not None or partition_values.num_columns > 0
        if self.schema.mapping_mode == "id":
            self.spark.conf.set(FIELD_ID_READ, "true")
        frames = [
            self._scan(group, schema_json, keyed=keyed, row_index=has_dv is not None)
            for schema_json, group in file_type_groups(self.snapshot, self.schema, files, self.paths)
        ]
        frame = reduce(lambda a, b: a.unionByName(b), frames)
        if keyed:
            frame = frame.join(F.broadcast(self._files_frame(partition_values)), FILE, "left")
            frame = frame.withColumn(ORDINAL, self._checked_ordinal())
        if has_dv is not None:
            frame = self._drop_deleted_rows(frame, files, has_dv)
        return frame.select(*self._logical_columns(partition_values))

    def _scan(self, paths: list[str], schema_json: dict[str, Any], *, keyed: bool, row_index: bool) -> Any:
        """Some files, read with ``schema_json`` (physical names, the files' own types), their columns
        cast to the table's types; refuses a file Spark would leave out."""
        from pyspark.sql.types import StructType

        data = (
            self.spark.read.schema(StructType.fromJson(schema_json))
            .option("ignoreMissingFiles", "false")
            .option("ignoreCorruptFiles", "false")
            .parquet(*paths)
        )
        listed = {same_file_key(uri, encoded=True) for uri in data.inputFiles()}
        missing = [p for p in paths if same_file_key(p, encoded=False) not in listed]
        if missing:
            raise DeltaError(
                f"Spark left {len(missing)} active file(s) of {self.snapshot.storage.root_uri} out of its "
                f"listing (e.g. {_unescape(missing[0])!r}): Hadoop skips names that start with '_' or '.'. "
                f"Rewrite the table (OPTIMIZE) to give the files ordinary names, or read it with the core."
            )
        file_types = {f["name"]: f["type"] for f in schema_json["fields"]}
        columns = []
        for column in self.schema.columns:
            if column.partition:
                continue
            value = _column(column.physical)
            table_type = column.physical_field["type"]
            if file_types[column.physical] != table_type:  # a widened type, as this file has it
                value = value.cast(_spark_type(table_type)).alias(column.physical)
            columns.append(value)
        if keyed:
            metadata = _metadata_column(data)
            columns.append(metadata.getField("file_path").alias(FILE))
            if row_index:
                columns.append(metadata.getField("row_index").alias(ROW))
        return data.select(*columns)

    def _files_frame(self, partition_values: pa.Table) -> Any:
        """One row per file: its ``_metadata.file_path``, ordinal and typed partition values."""
        from pyspark.sql.types import StructType

        columns: dict[str, pa.Array] = {
            FILE: pa.array([metadata_file_path(p) for p in self.paths], pa.string()),
            ORDINAL: pa.array(np.arange(len(self.paths), dtype=np.int64)),
        }
        fields = [_field(FILE, "string"), _field(ORDINAL, "long")]
        types = {c.logical: c.logical_type for c in self.schema.columns}
        for index, name in enumerate(partition_values.column_names):
            columns[_PARTITION.format(index)] = partition_values.column(name).combine_chunks()
            fields.append(_field(_PARTITION.format(index), types[name]))
        # The schema, not Arrow's types, decides: a zone-less Arrow timestamp is timestamp_ntz.
        schema = StructType.fromJson({"type": "struct", "fields": fields})
        return self.spark.createDataFrame(pa.table(columns), schema=schema)

    def _checked_ordinal(self) -> Any:
        from pyspark.sql import functions as F

        message = F.concat(
            F.lit(
                f"read_delta of {self.snapshot.storage.root_uri}: Spark read a row of a file it names "
                f"differently from the files asked for; refusing to guess its partition values and "
                f"deletion vector. The file: "
            ),
            F.col(FILE),
        )
        return F.when(F.col(ORDINAL).isNull(), F.raise_error(message)).otherwise(F.col(ORDINAL))

    def _drop_deleted_rows(self, frame: Any, files: pa.Table, has_dv: pa.Array) -> Any:
        from pyspark.sql import functions as F

        shift = 63 - max(1, len(self.paths).bit_length())
        keys = _deleted_row_keys(self.snapshot, files, has_dv, shift)
        deleted = self.spark.createDataFrame(pa.table({KEY: pa.array(keys, pa.int64())}))
        key = F.shiftleft(F.col(ORDINAL), shift).bitwiseOR(F.col(ROW))
        return frame.join(deleted, key == F.col(KEY), "left_anti")

    def _logical_columns(self, partition_values: pa.Table) -> list[Any]:
        from pyspark.sql import functions as F

        partition_index = {name: i for i, name in enumerate(partition_values.column_names)}
        out = []
        for column in self.schema.columns:
            if column.partition:
                source = F.col(_PARTITION.format(partition_index[column.logical]))
                value = F.when(F.col(ORDINAL).isNotNull(), source)  # the ordinal's check runs
            else:
                value = _column(column.physical)
                if column.renamed_inside:
                    value = value.cast(_spark_type(column.logical_type))
            out.append(value.alias(column.logical))
        return out


def file_type_groups(
    snapshot: Snapshot, schema: ReadSchema, files: pa.Table, paths: list[str]
) -> list[tuple[dict[str, Any], list[str]]]:
    """The files grouped by the types their widened columns (``delta.typeChanges``) have in them,
    each group with the Spark schema (JSON) that reads it: Spark's Parquet reader widens only some
    types itself, so each file is read with its own types and cast to the table's.

    Without widened columns, one group: every file, read with the table's physical schema. Else
    the footers of the files are read (one ranged read each).
    """
    base = schema.data_schema_json()
    widened = [c for c in schema.columns if not c.partition and c.widened]
    if not widened:
        return [(base, paths)]
    from airflow_delta_provider.core.schema import arrow_type_to_delta
    from airflow_delta_provider.core.stats import read_footers

    storage = snapshot.storage
    footers = read_footers(
        storage,
        [storage.path.decode(p) for p in files.column("path").to_pylist()],
        stats_columns=[],
        sizes=files.column("size").to_pylist(),
    )
    groups: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for footer, path in zip(footers, paths, strict=True):
        file_types = {}
        for column in widened:
            index = footer.schema.get_field_index(column.physical)
            if index >= 0:
                file_types[column.physical] = _spark_type_json(
                    arrow_type_to_delta(footer.schema.field(index).type)
                )
        fields = [{**f, "type": file_types.get(f["name"], f["type"])} for f in base["fields"]]
        key = json.dumps(file_types, sort_keys=True)
        groups.setdefault(key, ({"type": "struct", "fields": fields}, []))[1].append(path)
    return list(groups.values())


def _spark_type_json(delta_type: Any) -> Any:
    """A Delta type (JSON) as the Spark schema JSON of a nullable field's type."""
    from airflow_delta_provider.core.column_mapping import spark_read_fields

    return spark_read_fields([{"name": "x", "type": delta_type, "nullable": True, "metadata": {}}], "none")[
        0
    ][0]["type"]


def _field(name: str, type_json: Any) -> dict[str, Any]:
    return {"name": name, "type": type_json, "nullable": True, "metadata": {}}


def _spark_type(type_json: Any) -> Any:
    """The Spark type of a type's JSON: a ``DataType`` for a nested type, the name of a primitive one."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(type_json, str):
        return type_json
    kinds: dict[str, Any] = {"struct": StructType, "array": ArrayType, "map": MapType}
    return kinds[type_json["type"]].fromJson(type_json)


def _metadata_column(data: Any) -> Any:
    """The ``_metadata`` struct of a file scan (``DataFrame.metadataColumn`` where PySpark has it,
    which resolves it even when a data column shares the name)."""
    from pyspark.sql import functions as F

    if hasattr(data, "metadataColumn"):
        return data.metadataColumn("_metadata")
    return F.col("_metadata")


def _unescape(spark_file_path: str) -> str:
    import re

    return re.sub(r"\\(.)", r"\1", spark_file_path)


def _deleted_row_keys(
    snapshot: Snapshot, files: pa.Table, has_dv: pa.Array, shift: int
) -> npt.NDArray[np.int64]:
    """``ordinal << shift | row`` for every deleted row of the files, decoded in parallel."""
    ordinals = np.flatnonzero(has_dv.to_numpy(zero_copy_only=False))
    descriptors = files.column("deletion_vector").take(pa.array(ordinals)).to_pylist()
    with ThreadPoolExecutor(max_workers=max(1, min(DV_READERS, len(descriptors)))) as pool:
        decoded = list(pool.map(lambda dv: deletion_vector_rows(snapshot.storage, dv), descriptors))
    limit = np.uint64(1) << np.uint64(shift)
    parts = []
    for ordinal, rows in zip(ordinals, decoded, strict=True):
        if rows.size and rows[-1] >= limit:
            raise DeltaError(
                f"A deletion vector of {files.column('path')[int(ordinal)].as_py()} deletes row {int(rows[-1])}, "
                f"beyond the {int(limit)} rows per file this read can address with {len(files)} files."
            )
        parts.append((np.int64(ordinal) << np.int64(shift)) | rows.astype(np.int64))
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)
