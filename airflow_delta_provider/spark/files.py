"""Reading a set of a table's data files on Spark, each row keyed to its file (and row index).

What :func:`~.read.read_delta` and :func:`~.changes.read_changes` share:

- :func:`scan_files`: the files read with the table's physical schema (column mapping, widened
  columns per file), every column nullable; a file Spark would leave out of its listing is
  refused. With ``keys`` (:class:`FileKeys`), each row carries its file's key and path and, with
  ``row_index``, ``_metadata.row_index`` (:data:`ROW`);
- :func:`file_columns` / :func:`join_files`: each row joined with its file's values (keyed by
  the file's size, a long, and checked against its exact path), failing the query for a row
  whose file matches none;
- :func:`row_set_columns`: row sets decoded on the driver (deletion vectors) as per-file columns
  of that join, a few rows as a list, more as a bitmap of 64-bit words; :func:`in_row_set`
  tests a row's :data:`ROW` against its file's set with no further join.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.errors import DeltaError
from airflow_delta_provider.spark.paths import metadata_file_path, same_file_key
from airflow_delta_provider.spark.schema import FIELD_ID_READ

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.spark.schema import ReadSchema

__all__ = [
    "FILE",
    "ROW",
    "FileKeys",
    "column",
    "file_columns",
    "in_row_set",
    "join_files",
    "row_set_columns",
    "scan_files",
    "spark_type",
]

# Columns a read adds and drops again; named so that no table column collides with them.
FILE = "__delta_read_file_path"
ROW = "__delta_read_row_index"
#: A row's file key (:class:`FileKeys`), and the per-file table's size of each file.
KEY = "__delta_read_file_key"
FILE_SIZE = "__delta_read_file_size"


@dataclass(frozen=True)
class FileKeys:
    """How each row of a scan finds its file's row in a per-file table, as a long join key: the
    file's size (``_metadata.file_size`` against the log's ``size``), so that the per-row work is
    a lookup in a table of longs, with no hashing of path strings; files whose size another file
    of the scan shares (or the log omits) are keyed by a 64-bit hash of their path instead. Either
    way the row's ``_metadata.file_path`` must then equal the file's exactly: a log size that
    is not the file's fails the query (:func:`join_files`) rather than pairing rows with another
    file.

    :param hashed_sizes: the sizes whose files are keyed by path; None: every file is.
    """

    hashed_sizes: frozenset[int] | None

    @classmethod
    def of(cls, sizes: Sequence[int | None] | None) -> FileKeys:
        """The keys of a scan of distinct files whose log sizes are ``sizes``."""
        if sizes is None or any(size is None for size in sizes):
            return cls(None)
        counts = Counter(sizes)
        return cls(frozenset(size for size, n in counts.items() if n > 1 and size is not None))

    def row_key(self, metadata: Any) -> Any:
        """The key of a scanned row, from its ``_metadata`` struct."""
        from pyspark.sql import functions as F

        return self._key(metadata.getField("file_size"), F.xxhash64(metadata.getField("file_path")))

    def file_key(self) -> Any:
        """The key of a row of the per-file table (:func:`file_columns`)."""
        from pyspark.sql import functions as F

        return self._key(F.col(FILE_SIZE), F.xxhash64(F.col(FILE)))

    def _key(self, size: Any, path_hash: Any) -> Any:
        from pyspark.sql import functions as F

        if self.hashed_sizes is None:
            return path_hash
        if not self.hashed_sizes:
            return size.cast("long")
        return F.when(size.isin(*sorted(self.hashed_sizes)), path_hash).otherwise(size.cast("long"))


def scan_files(
    spark: Any,
    storage: LogStore,
    schema: ReadSchema,
    log_paths: Sequence[str],
    spark_paths: Sequence[str],
    *,
    keys: FileKeys | None,
    row_index: bool,
    extra: Sequence[dict[str, Any]] = (),
    sizes: Sequence[int | None] | None = None,
) -> Any:
    """The data columns (physical names, the table's types) of the files, with :data:`FILE` and
    :data:`KEY` when ``keys`` are given, :data:`ROW` when asked, and the ``extra`` fields (Spark
    JSON) the files hold besides.

    :param log_paths: the files as the log names them; ``spark_paths`` the same, as handed to Spark.
    :raises DeltaError: Spark's listing leaves a file out (a name Hadoop treats as hidden).
    """
    if schema.mapping_mode == "id":
        # Matches Parquet columns by field id for read schemas that carry ids (only those do).
        spark.conf.set(FIELD_ID_READ, "true")
    frames = []
    for schema_json, paths in file_type_groups(storage, schema, log_paths, spark_paths, sizes):
        frames.append(
            _scan(spark, storage, schema, paths, schema_json, keys=keys, row_index=row_index, extra=extra)
        )
    return reduce(lambda a, b: a.unionByName(b), frames)


def _scan(
    spark: Any,
    storage: LogStore,
    schema: ReadSchema,
    paths: list[str],
    schema_json: dict[str, Any],
    *,
    keys: FileKeys | None,
    row_index: bool,
    extra: Sequence[dict[str, Any]],
) -> Any:
    from pyspark.sql.types import StructType

    read_json = {**schema_json, "fields": [*schema_json["fields"], *extra]}
    data = (
        spark.read.schema(StructType.fromJson(read_json))
        .option("ignoreMissingFiles", "false")
        .option("ignoreCorruptFiles", "false")
        .parquet(*paths)
    )
    listed = {same_file_key(uri, encoded=True) for uri in data.inputFiles()}
    missing = [p for p in paths if same_file_key(p, encoded=False) not in listed]
    if missing:
        raise DeltaError(
            f"Spark left {len(missing)} active file(s) of {storage.root_uri} out of its listing (e.g. "
            f"{_unescape(missing[0])!r}): Hadoop skips names that start with '_' or '.'. Rewrite the "
            f"table (OPTIMIZE) to give the files ordinary names, or read it with the core."
        )
    file_types = {f["name"]: f["type"] for f in schema_json["fields"]}
    columns = []
    for item in schema.columns:
        if item.partition:
            continue
        value = column(item.physical)
        table_type = item.physical_field["type"]
        if file_types[item.physical] != table_type:  # a widened type, as this file has it
            value = value.cast(spark_type(table_type)).alias(item.physical)
        columns.append(value)
    columns += [column(f["name"]) for f in extra]
    if keys is not None:
        columns += key_columns(data, keys, row_index=row_index)
    return data.select(*columns)


def key_columns(data: Any, keys: FileKeys, *, row_index: bool) -> list[Any]:
    """The columns a keyed scan of ``data`` (a file scan) adds: :data:`KEY`, :data:`FILE` and,
    when asked, :data:`ROW`."""
    metadata = _metadata_column(data)
    columns = [keys.row_key(metadata).alias(KEY), metadata.getField("file_path").alias(FILE)]
    if row_index:
        columns.append(metadata.getField("row_index").alias(ROW))
    return columns


def file_type_groups(
    storage: LogStore,
    schema: ReadSchema,
    log_paths: Sequence[str],
    spark_paths: Sequence[str],
    sizes: Sequence[int | None] | None = None,
) -> list[tuple[dict[str, Any], list[str]]]:
    """The files (their Spark paths) grouped by the types their widened columns
    (``delta.typeChanges``) have in them, each group with the Spark schema (JSON) that reads it:
    Spark's Parquet reader widens only some types itself, so each file is read with its own types
    and cast to the table's.

    Without widened columns, one group: every file, read with the table's physical schema. Else
    the footers of the files are read (one ranged read each).
    """
    base = schema.data_schema_json()
    widened = [c for c in schema.columns if not c.partition and c.widened]
    unique = list(dict.fromkeys(spark_paths))
    if not widened:
        return [(base, unique)]
    from airflow_delta_provider.core.expressions import read_footers

    first = {spark: index for index, spark in reversed(list(enumerate(spark_paths)))}
    footers = read_footers(
        storage,
        [storage.path.decode(log_paths[first[p]]) for p in unique],
        stats_columns=[],
        sizes=[sizes[first[p]] for p in unique] if sizes is not None else None,
    )
    groups: dict[str, tuple[dict[str, Any], list[str]]] = {}
    for footer, path in zip(footers, unique, strict=True):
        file_types = {}
        for item in widened:
            index = footer.schema.get_field_index(item.physical)
            if index >= 0:
                file_types[item.physical] = _file_type_json(footer.schema.field(index).type)
        fields = [{**f, "type": file_types.get(f["name"], f["type"])} for f in base["fields"]]
        key = json.dumps(file_types, sort_keys=True)
        groups.setdefault(key, ({"type": "struct", "fields": fields}, []))[1].append(path)
    return list(groups.values())


def _file_type_json(arrow_type: pa.DataType) -> Any:
    """The Spark type (JSON) of a column as a file stores it."""
    from airflow_delta_provider.core.protocol import arrow_type_to_delta, spark_read_fields

    item = {"name": "x", "type": arrow_type_to_delta(arrow_type), "nullable": True, "metadata": {}}
    return spark_read_fields([item], "none")[0][0]["type"]


def join_files(rows: Any, files: Any, keys: FileKeys, ordinal: str, root_uri: str) -> Any:
    """The ``rows`` of a keyed scan (:func:`scan_files`) joined with ``files``, the per-file table
    (:func:`file_columns`, one or more rows per file, among them the non-null column ``ordinal``):
    on the file's key (:class:`FileKeys`), then its exact path. Every row must find its file: one
    that matches none fails the query (a file Spark names otherwise than predicted, or whose size
    is not the log's); its values would be unknown.

    Returns the joined rows with ``ordinal`` checked, the key columns dropped.
    """
    from pyspark.sql import functions as F

    keyed = files.select(
        keys.file_key().alias(_FILE_KEY),
        F.col(FILE).alias(_FILE_AGAIN),
        *[F.col(c) for c in files.columns if c not in (FILE, FILE_SIZE)],
    )
    # Range comparisons, not '=': Spark would make an equality a (string) join key.
    exact = (F.col(FILE) <= F.col(_FILE_AGAIN)) & (F.col(FILE) >= F.col(_FILE_AGAIN))
    joined = rows.join(F.broadcast(keyed), (F.col(KEY) == F.col(_FILE_KEY)) & exact, "left")
    joined = joined.withColumn(ordinal, _checked(ordinal, root_uri))
    # The filter uses the checked column, so that the check runs for every row.
    return joined.filter(F.col(ordinal).isNotNull()).drop(_FILE_KEY, _FILE_AGAIN, KEY)


_FILE_KEY = "__delta_read_file_key_of_file"
_FILE_AGAIN = "__delta_read_file_path_of_file"


def file_columns(
    spark_paths: Sequence[str], sizes: Sequence[int | None]
) -> tuple[dict[str, pa.Array], list[dict[str, Any]]]:
    """The columns of a per-file table that name its files for :func:`join_files`, and their Spark
    fields: :data:`FILE` (``_metadata.file_path`` as Spark will show it) and :data:`FILE_SIZE` (the
    log's size).

    :param spark_paths: the files as handed to Spark (:func:`~.paths.spark_file_paths`).
    """
    columns = {
        FILE: pa.array([metadata_file_path(p) for p in spark_paths], pa.string()),
        FILE_SIZE: pa.array(sizes, pa.int64()),
    }
    return columns, [field(FILE, "string"), field(FILE_SIZE, "long")]


def _checked(ordinal: str, root_uri: str) -> Any:
    """The column ``ordinal`` (joined on the file), failing the query where it is null."""
    from pyspark.sql import functions as F

    message = F.concat(
        F.lit(
            f"Reading {root_uri} on Spark: Spark read a row of a file it names differently from the files "
            f"asked for, or whose size is not the one the log records; refusing to guess its partition "
            f"values and deletion vector. The file: "
        ),
        F.col(FILE),
    )
    return F.when(F.col(ordinal).isNull(), F.raise_error(message)).otherwise(F.col(ordinal))


#: Columns of the joined per-file table that hold its row set (:func:`row_set_columns`).
ROW_LIST = "__delta_read_row_list"
ROW_BITS = "__delta_read_row_bits"
ROW_BITS_FROM = "__delta_read_row_bits_from"
ROW_BITS_TO = "__delta_read_row_bits_to"
#: A row set of at most this many rows is a list (each row compared with each); a larger one a bitmap.
LIST_ROWS = 16
#: The most rows one bitmap spans (a 1 GiB bitmap; Spark indexes its words with an int).
MAX_BITMAP_ROWS = 1 << 33


def row_set_columns(
    row_sets: Sequence[npt.NDArray[np.uint64] | None], what: Sequence[str]
) -> tuple[dict[str, pa.Array], list[dict[str, Any]]]:
    """Per file (or scan), its row set as columns Spark tests a row index against in place
    (:func:`in_row_set`), and their Spark fields: a few rows as a list; more as a bitmap of
    64-bit words over the rows from the first marked one's word to the last one's (bit ``i`` of
    word ``w``: row ``from + 64 * w + i``), so that the broadcast table stays small for sparse
    sets and each row's test is one lookup for dense ones.

    :param row_sets: sorted, unique row indexes per file; None or empty marks no row.
    :param what: names each set's file, for the error about a row index no file can hold.
    :raises DeltaError: a set spans more rows than :data:`MAX_BITMAP_ROWS`.
    """
    lists: list[list[int] | None] = []
    bitmaps: list[npt.NDArray[np.int64] | None] = []
    bounds: list[tuple[int | None, int | None]] = []
    for rows, name in zip(row_sets, what, strict=True):
        if rows is None or not rows.size or rows.size <= LIST_ROWS:
            lists.append(None if rows is None or not rows.size else rows.astype(np.int64).tolist())
            bitmaps.append(None)
            bounds.append((None, None))
            continue
        first = int(rows[0]) & ~63
        if int(rows[-1]) - first >= MAX_BITMAP_ROWS:
            raise DeltaError(
                f"A deletion vector of {name} marks rows {int(rows[0])} to {int(rows[-1])}, more than the "
                f"{MAX_BITMAP_ROWS} rows a read on Spark can hold as a bitmap per file; a data file holds "
                f"far fewer rows, so the deletion vector is corrupt. Read the table with the core."
            )
        offsets = rows - np.uint64(first)
        word = (offsets >> np.uint64(6)).astype(np.intp)
        starts = np.flatnonzero(np.diff(word, prepend=-1))  # the first row of each word
        words = np.zeros(int(word[-1]) + 1, dtype=np.uint64)
        # A word's rows set distinct bits: their sum is their union.
        words[word[starts]] = np.add.reduceat(np.uint64(1) << (offsets & np.uint64(63)), starts)
        bitmaps.append(words.view(np.int64))
        lists.append(None)
        bounds.append((first, first + 64 * words.size))
    columns = {
        ROW_LIST: pa.array(lists, pa.list_(pa.int64())),
        ROW_BITS: pa.array(bitmaps, pa.list_(pa.int64())),
        ROW_BITS_FROM: pa.array([b[0] for b in bounds], pa.int64()),
        ROW_BITS_TO: pa.array([b[1] for b in bounds], pa.int64()),
    }
    longs = {"type": "array", "elementType": "long", "containsNull": False}
    fields = [
        field(ROW_LIST, longs),
        field(ROW_BITS, longs),
        field(ROW_BITS_FROM, "long"),
        field(ROW_BITS_TO, "long"),
    ]
    return columns, fields


def in_row_set() -> Any:
    """Whether a row's :data:`ROW` is in its file's row set (the columns of :func:`row_set_columns`,
    joined to it); false where the file has none."""
    from pyspark.sql import functions as F

    bit = (
        f"shiftright(element_at({ROW_BITS}, cast(shiftright({ROW} - {ROW_BITS_FROM}, 6) AS INT) + 1), "
        f"cast({ROW} & 63 AS INT)) & 1 = 1"
    )
    return F.expr(
        f"CASE WHEN {ROW_LIST} IS NOT NULL THEN array_contains({ROW_LIST}, {ROW}) "
        f"WHEN {ROW} >= {ROW_BITS_FROM} AND {ROW} < {ROW_BITS_TO} THEN {bit} ELSE false END"
    )


def empty_frame(spark: Any, fields: list[dict[str, Any]]) -> Any:
    from pyspark.sql.types import StructType

    return spark.createDataFrame([], StructType.fromJson({"type": "struct", "fields": fields}))


def field(name: str, type_json: Any) -> dict[str, Any]:
    """A nullable Spark field (JSON)."""
    return {"name": name, "type": type_json, "nullable": True, "metadata": {}}


def column(name: str) -> Any:
    """The Spark column of a top-level name, whatever characters it holds."""
    from pyspark.sql import functions as F

    return F.col("`" + name.replace("`", "``") + "`")


def spark_type(type_json: Any) -> Any:
    """The Spark type of a type's JSON: a ``DataType`` for a nested type, the name of a primitive one."""
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(type_json, str):
        return type_json
    kinds: dict[str, Any] = {"struct": StructType, "array": ArrayType, "map": MapType}
    return kinds[type_json["type"]].fromJson(type_json)


def logical_columns(schema: ReadSchema, partitions: dict[str, Any]) -> list[Any]:
    """Every column of ``schema`` under its logical name: data columns renamed (nested fields by a
    positional cast), partition columns from ``partitions`` (logical name -> Spark column)."""
    out = []
    for item in schema.columns:
        if item.partition:
            value = partitions[item.logical]
        else:
            value = column(item.physical)
            if item.renamed_inside:
                value = value.cast(spark_type(item.logical_type))
        out.append(value.alias(item.logical))
    return out


def _metadata_column(data: Any) -> Any:
    """The ``_metadata`` struct of a file scan (``DataFrame.metadataColumn`` where PySpark has it,
    which resolves it even when a data column shares the name)."""
    from pyspark.sql import functions as F

    if hasattr(data, "metadataColumn"):
        return data.metadataColumn("_metadata")
    return F.col("_metadata")


def _unescape(spark_file_path: str) -> str:
    return re.sub(r"\\(.)", r"\1", spark_file_path)
