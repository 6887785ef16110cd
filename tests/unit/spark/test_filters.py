"""The Spark adapter's filters select what Spark SQL selects on the rows themselves, even where
Spark's own Parquet filter pushdown would not: its dictionary and min/max filters compare -0.0 and
0.0 bit by bit and trust footers that leave NaN out, so ``spark.read.parquet(...).filter(f = 0.0)``
misses -0.0 rows and ``f > 1.5`` misses NaN rows. read_delta and a DELETE matched on Spark
compare floats behind ``nanvl``, which Spark does not push down.
"""

from __future__ import annotations

import math
import uuid
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.spark import read_delta
from airflow_delta_provider.spark.delete import spark_row_matcher

pytestmark = pytest.mark.spark

SCHEMA = pa.schema([("id", pa.int64()), ("f", pa.float32()), ("x", pa.float64())])
#: Files as pyarrow writes them (footers leave NaN out; dictionary pages hold -0.0 apart).
FILES = [
    {"id": [1, 2], "f": [-0.0, -0.0], "x": [-0.0, -0.0]},
    {"id": [3, 4], "f": [0.0, 0.0], "x": [0.0, 0.0]},
    {"id": [5, 6, 7, 8], "f": [-0.0, 1.0, math.nan, None], "x": [0.0, 1.0, math.nan, None]},
]
FILTERS = [
    "f = -0.0",
    "f = 0",
    "f = 0.0D",
    "x = 0",
    "x = -0.0",
    "x IN (0, 7)",
    "f > 1.5",
    "x > 1.5",
    "x >= 1",
    "x = 'NaN'",
    "f IN ('NaN')",
    "NOT (x = 'NaN')",
    "x <= 0",
    "f < 'NaN'",
    "x IS NULL",
]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> DeltaTable:
    root = tmp_path_factory.mktemp("floats") / "t"
    table = DeltaTable.create(str(root), SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    names = []
    for columns in FILES:
        name = f"part-{uuid.uuid4()}.parquet"
        pq.write_table(pa.table(columns, schema=SCHEMA), root / name, use_dictionary=True)
        names.append(name)
    table.commit_files(names)
    return table


def _spark_sql(spark: Any, text: str) -> list[int]:
    rows = pa.concat_tables([pa.table(columns, schema=SCHEMA) for columns in FILES])
    spark.createDataFrame(rows).createOrReplaceTempView("floats")
    return sorted(r.id for r in spark.sql(f"SELECT id FROM floats WHERE {text}").collect())


@pytest.mark.parametrize("text", FILTERS)
def test_read_delta_selects_what_spark_sql_selects_on_the_rows(
    local_spark: Any, table: DeltaTable, text: str
) -> None:
    found = sorted(r.id for r in read_delta(local_spark, table, filter=text).collect())
    assert found == _spark_sql(local_spark, text)


def test_spark_s_own_pushdown_misses_those_rows(local_spark: Any, table: DeltaTable) -> None:
    """Why the adapter does not hand float comparisons to Spark's Parquet reader as they are."""
    from pyspark.sql import functions as F

    frame = local_spark.read.parquet(*[str(Path(table.storage.root) / p) for p in _paths(table)])
    assert frame.filter(F.col("x") == F.lit(0.0)).count() < len(_spark_sql(local_spark, "x = 0"))


@pytest.mark.parametrize("text", ["f = -0.0", "x > 1.5", "x = 'NaN'", "f IN (0, 7)"])
def test_no_float_comparison_is_pushed_to_the_parquet_reader(
    local_spark: Any, table: DeltaTable, text: str
) -> None:
    plan = read_delta(local_spark, table, filter=text)._jdf.queryExecution().executedPlan().toString()
    pushed = [line for line in plan.splitlines() if "PushedFilters" in line]
    assert pushed, plan  # the scan reports what it pushes
    assert all("EqualTo" not in line and "GreaterThan" not in line and "In(" not in line for line in pushed)


@pytest.mark.parametrize("text", ["f = 0", "x > 1.5", "x = 'NaN'"])
def test_a_delete_matched_on_spark_deletes_what_spark_sql_selects(
    local_spark: Any, table: DeltaTable, tmp_path: Path, text: str
) -> None:
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(table.storage.root, root)
    copy = DeltaTable(str(root))
    result = copy.delete(text, match_rows=spark_row_matcher(local_spark))
    everything = sorted(i for columns in FILES for i in columns["id"])
    survivors = sorted(copy.snapshot().to_pyarrow_table().column("id").to_pylist())
    assert survivors == sorted(set(everything) - set(_spark_sql(local_spark, text)))
    assert result.num_deleted_rows == len(_spark_sql(local_spark, text))


def _paths(table: DeltaTable) -> list[str]:
    return [str(p) for p in table.snapshot().files().column("path").to_pylist()]
