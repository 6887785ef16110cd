"""Row sets on Spark (spark/files.py): a deletion vector's rows, as the per-file columns the rows are
joined with, tested by Spark itself for every row index around them (word and list edges, a set far
from row 0, a dense and a sparse one), and the refusal of a set no bitmap can hold."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from airflow_delta_provider.core import DeltaError
from airflow_delta_provider.spark.files import (
    LIST_ROWS,
    MAX_BITMAP_ROWS,
    ROW,
    ROW_BITS,
    ROW_LIST,
    in_row_set,
    row_set_columns,
)

pytestmark = pytest.mark.spark

_RNG = np.random.default_rng(25)
SETS: list[np.ndarray | None] = [
    None,
    np.array([], dtype=np.uint64),
    np.array([0], dtype=np.uint64),
    np.arange(LIST_ROWS, dtype=np.uint64) * 3,  # the longest list
    np.arange(LIST_ROWS + 1, dtype=np.uint64) * 3,  # the shortest bitmap
    np.array([0, 62, 63, 64, 65, 127, 128, 191, 192, 255, 256, 1000, 4095, 4096], dtype=np.uint64),
    np.arange(10**9 + 3, 10**9 + 1003, dtype=np.uint64),  # dense, far from row 0
    np.sort(_RNG.choice(200_000, size=6_000, replace=False)).astype(np.uint64),  # 3% at random
]


def _candidates(rows: np.ndarray | None) -> np.ndarray:
    """Every row index at and around the set's rows and its words' edges."""
    if rows is None or not rows.size:
        return np.arange(0, 300, dtype=np.int64)
    around = (rows.astype(np.int64)[:, None] + np.arange(-65, 66)[None, :]).ravel()
    return np.unique(np.concatenate([around[around >= 0], np.arange(0, 130)]))


def test_spark_finds_exactly_the_rows_of_each_set(local_spark: Any) -> None:
    columns, fields = row_set_columns(SETS, [f"file {i}" for i in range(len(SETS))])
    assert columns[ROW_LIST][3].as_py() is not None and columns[ROW_BITS][4].as_py() is not None
    files = local_spark.createDataFrame(
        pa.table({"file": pa.array(range(len(SETS)), pa.int64()), **columns}),
        schema=_schema([{"name": "file", "type": "long", "nullable": False, "metadata": {}}, *fields]),
    )
    candidates = [_candidates(rows) for rows in SETS]
    probe = pa.table(
        {
            "file": pa.array(np.repeat(np.arange(len(SETS)), [len(c) for c in candidates]), pa.int64()),
            ROW: pa.array(np.concatenate(candidates), pa.int64()),
        }
    )
    got = (
        local_spark.createDataFrame(probe)
        .join(files, "file")
        .select("file", ROW, in_row_set().alias("marked"))
        .toArrow()
    )
    marked: dict[int, set[int]] = {i: set() for i in range(len(SETS))}
    for file, row, hit in zip(*(got.column(c).to_pylist() for c in ("file", ROW, "marked")), strict=True):
        assert hit is not None
        if hit:
            marked[file].add(row)
    for index, rows in enumerate(SETS):
        expected = set() if rows is None else set(np.intersect1d(rows, candidates[index]).tolist())
        assert marked[index] == expected, index
    assert got.num_rows == sum(len(c) for c in candidates)


def test_a_set_wider_than_a_bitmap_holds_is_refused() -> None:
    rows = np.concatenate([np.arange(LIST_ROWS, dtype=np.uint64), [np.uint64(MAX_BITMAP_ROWS)]])
    with pytest.raises(DeltaError, match=r"deletion vector of part-1\.parquet marks rows 0 to \d+"):
        row_set_columns([rows], ["part-1.parquet"])


def _schema(fields: list[dict[str, Any]]) -> Any:
    from pyspark.sql.types import StructType

    return StructType.fromJson({"type": "struct", "fields": fields})
