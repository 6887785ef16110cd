"""The rows a DELETE selects, found on Spark: a row matcher for ``DeltaTable.delete(match_rows=...)``.

For tables too large to read in one process, Spark reads the candidate files the core planned on
(partition values and statistics already skipped the others) and returns only the positions of the
matching rows, ``(file ordinal, _metadata.row_index)``; the core turns them into deletion vectors or
rewrites and commits. Each file is read with the table's physical schema, its partition values
joined from the log (as :func:`~.read.read_delta` does), and the predicate applied as the core
types it (:func:`~.filters.spark_condition`): the same rows the core's own evaluation selects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.utils import get_logger
from airflow_delta_provider.spark.files import (
    ROW,
    FileKeys,
    column,
    field,
    file_columns,
    join_files,
    logical_columns,
    scan_files,
)
from airflow_delta_provider.spark.filters import spark_condition
from airflow_delta_provider.spark.paths import spark_file_paths, spark_path
from airflow_delta_provider.spark.schema import check_spark_version, read_schema

if TYPE_CHECKING:
    from collections.abc import Callable

    import numpy.typing as npt

    from airflow_delta_provider.core.expressions import Predicate
    from airflow_delta_provider.core.lifecycle import Candidates
    from airflow_delta_provider.core.log import Snapshot

__all__ = ["spark_row_matcher"]

log = get_logger(__name__)

ORDINAL = "__delta_delete_file_ordinal"
_PARTITION = "__delta_delete_partition_{}"


def spark_row_matcher(
    spark: Any, *, spark_uri: str | None = None
) -> Callable[[Snapshot, Predicate, Candidates], dict[str, npt.NDArray[np.uint64]]]:
    """A row matcher that evaluates the predicate on Spark.

    :param spark: a ``SparkSession`` (classic or Spark Connect; Spark 3.4 or later for
        ``_metadata.row_index``).
    :param spark_uri: where Spark finds the table root when its Hadoop URI is not the table URI
        (default: the table URI, ``s3://`` as ``s3a://``).
    """

    def match(
        snapshot: Snapshot, predicate: Predicate, candidates: Candidates
    ) -> dict[str, npt.NDArray[np.uint64]]:
        return _matching_rows(spark, snapshot, predicate, candidates, spark_uri)

    return match


def _matching_rows(
    spark: Any, snapshot: Snapshot, predicate: Predicate, candidates: Candidates, spark_uri: str | None
) -> dict[str, npt.NDArray[np.uint64]]:
    from pyspark.sql import functions as F

    log_paths = candidates.paths
    if not log_paths:
        return {}
    storage = snapshot.storage
    schema = read_schema(snapshot)
    check_spark_version(spark, storage.root_uri, schema, deletion_vectors=True, keyed=True)
    root = (spark_uri or spark_path(storage.root_uri)).rstrip("/")
    paths = spark_file_paths(storage.path, log_paths, root)
    log.info("Finding the rows to delete in %d file(s) of %s on Spark.", len(paths), storage.root_uri)
    sizes = candidates.files.column("size").to_pylist()
    keys = FileKeys.of(sizes)
    frame = scan_files(spark, storage, schema, log_paths, paths, keys=keys, row_index=True, sizes=sizes)
    values = candidates.partition_values
    per_file = _files_frame(spark, schema, paths, sizes, values)
    frame = join_files(frame, per_file, keys, ORDINAL, storage.root_uri)
    partitions = {name: F.col(_PARTITION.format(i)) for i, name in enumerate(values.column_names)}
    logical = frame.select(column(ORDINAL), column(ROW), *logical_columns(schema, partitions))
    names = {c.logical: column(c.logical) for c in schema.columns}
    condition = spark_condition(predicate.normal_form(snapshot.schema), names)
    matched = logical.filter(condition).select(column(ORDINAL), column(ROW))
    return _by_file(_collect(matched), log_paths)


def _files_frame(
    spark: Any, schema: Any, paths: list[str], sizes: list[int | None], partition_values: pa.Table
) -> Any:
    """One row per file: its path and size as Spark shows them, ordinal and typed partition values."""
    from pyspark.sql.types import StructType

    columns, fields = file_columns(paths, sizes)
    columns[ORDINAL] = pa.array(np.arange(len(paths), dtype=np.int64))
    fields.append(field(ORDINAL, "long"))
    types = {c.logical: c.logical_type for c in schema.columns}
    for index, name in enumerate(partition_values.column_names):
        columns[_PARTITION.format(index)] = partition_values.column(name).combine_chunks()
        fields.append(field(_PARTITION.format(index), types[name]))
    return spark.createDataFrame(
        pa.table(columns), schema=StructType.fromJson({"type": "struct", "fields": fields})
    )


def _collect(frame: Any) -> pa.Table:
    """The matched ``(ordinal, row)`` pairs on the driver, as Arrow."""
    if hasattr(frame, "toArrow"):  # PySpark 4
        return frame.toArrow()
    return pa.Table.from_pandas(frame.toPandas(), preserve_index=False)  # pragma: no cover - Spark 3.x


def _by_file(pairs: pa.Table, log_paths: list[str]) -> dict[str, npt.NDArray[np.uint64]]:
    """The row positions per file (``add.path``), sorted."""
    if pairs.num_rows == 0:
        return {}
    ordinals = pairs.column(0).to_numpy()
    rows = pairs.column(1).to_numpy().astype(np.uint64)
    order = np.lexsort((rows, ordinals))
    ordinals, rows = ordinals[order], rows[order]
    starts = np.flatnonzero(np.r_[True, ordinals[1:] != ordinals[:-1]])
    ends = np.r_[starts[1:], len(ordinals)]
    return {log_paths[int(ordinals[s])]: rows[s:e] for s, e in zip(starts, ends, strict=True)}
