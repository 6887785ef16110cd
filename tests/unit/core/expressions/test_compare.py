"""Spark's comparisons of floating values (NaN equals NaN and lies above +Infinity, -0.0 equals
0.0), of empty strings (a string, never NULL) and SQL's nulls, on data rows and on partition
values alike. Expected rows are Spark 4's answers on the same rows
(../shared/spark-predicates-and-airflow-partitions-notes.md, A1; the differential tests ask
Spark again for thousands of generated predicates)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from airflow_delta_provider.core.expressions import Predicate, partitions_may_match

FLOATS = [1.0, math.nan, -0.0, 0.0, None, math.inf, 0.1]  # rows 1..7


def _rows(text: str, kind: pa.DataType, *, partition: bool = False) -> list[int]:
    values = pa.table({"x": pa.array(FLOATS, kind)})
    predicate = Predicate(text, ["x"]) if partition else Predicate(text, [], data_columns=["x"])
    mask = predicate.mask(values).to_pylist()
    return [n + 1 for n, keep in enumerate(mask) if keep]


SPARK_ANSWERS = [
    ("x > 0", [1, 2, 6, 7]),
    ("x >= 1", [1, 2, 6]),
    ("x < 2", [1, 3, 4, 7]),
    ("x <> 1", [2, 3, 4, 6, 7]),
    ("x BETWEEN 0 AND 'NaN'", [1, 2, 3, 4, 6, 7]),
    ("x BETWEEN 1 AND 'Infinity'", [1, 6]),
    ("x IN ('NaN', 1.0)", [1, 2]),
    ("x NOT IN (1.0)", [2, 3, 4, 6, 7]),
    ("x = 'NaN'", [2]),
    ("x = 'nan'", [2]),
    ("x <=> 'NaN'", [2]),
    ("NOT (x = 'NaN')", [1, 3, 4, 6, 7]),
    ("x < 'NaN'", [1, 3, 4, 6, 7]),
    ("x <= 'NaN'", [1, 2, 3, 4, 6, 7]),
    ("x > 'NaN'", []),
    ("x >= 'NaN'", [2]),
    ("x = 0", [3, 4]),
    ("x = 0.0", [3, 4]),
    ("x = -0.0", [3, 4]),
    ("x IN (0)", [3, 4]),
    ("x IN (-0.0)", [3, 4]),
    ("x IN (-0.0D, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)", [3, 4]),  # an InSet in Spark
    ("x IN ('NaN', 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)", [2]),
    ("x = '-inf'", []),
    ("x > '-Infinity'", [1, 2, 3, 4, 6, 7]),
    ("x IS NULL", [5]),
]


@pytest.mark.parametrize(("text", "rows"), SPARK_ANSWERS)
@pytest.mark.parametrize("kind", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_floating_comparisons_follow_spark_s_order(text: str, rows: list[int], kind: pa.DataType) -> None:
    assert _rows(text, kind) == rows


@pytest.mark.parametrize(("text", "rows"), SPARK_ANSWERS)
def test_a_floating_partition_column_compares_alike(text: str, rows: list[int]) -> None:
    assert _rows(text, pa.float64(), partition=True) == rows
    values = pa.table({"x": pa.array(FLOATS, pa.float64())})
    kept = partitions_may_match(Predicate(text, ["x"]), values.schema, values)
    assert [n + 1 for n, keep in enumerate(kept) if keep] == rows


@pytest.mark.parametrize(
    ("text", "double", "float"),
    [
        ("x = 0.1", [7], []),  # float 0.1 widened to double is 0.10000000149011612
        ("x = 0.1F", [], [7]),
        ("x > 0.05", [1, 2, 6, 7], [1, 2, 6, 7]),
        ("x = '0.1'", [7], []),
    ],
)
def test_a_float_column_is_widened_to_double_not_the_literal_narrowed(
    text: str, double: list[int], float: list[int]
) -> None:
    assert _rows(text, pa.float64()) == double
    assert _rows(text, pa.float32()) == float


STRINGS = ["", "a", None, "a\tb", "a\\tb", "it's", "123"]  # rows 1..7


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("s = ''", [1]),
        ("s != ''", [2, 4, 5, 6, 7]),
        ("s IN ('', 'a')", [1, 2]),
        ("s <=> ''", [1]),
        ("NOT (s <=> '')", [2, 3, 4, 5, 6, 7]),
        ("s IS NULL", [3]),
        ("s < 'a'", [1, 7]),
        (r"s = 'a\tb'", [4]),
        (r"s = 'a\\tb'", [5]),
        (r"s = 'it\'s'", [6]),
        ("s = '123'", [7]),
    ],
)
def test_an_empty_string_literal_is_a_string(text: str, rows: list[int]) -> None:
    values = pa.table({"s": pa.array(STRINGS, pa.string())})
    mask = Predicate(text, [], data_columns=["s"]).mask(values).to_pylist()
    assert [n + 1 for n, keep in enumerate(mask) if keep] == rows


def test_a_string_partition_column_reads_the_empty_value_as_null() -> None:
    """The log stores '' and NULL alike (PROTOCOL.md): a partition value '' is read as NULL, as
    Spark reads it, so ``p = ''`` selects nothing and ``p IS NULL`` selects it."""
    from airflow_delta_provider.core.protocol.partitions import parse_partition_strings

    values = pa.table({"p": parse_partition_strings(pa.array(["", None, "a"]), pa.string(), "p")})
    for text, rows in [("p = ''", []), ("p IS NULL", [0, 1]), ("p != ''", [2]), ("p <=> ''", [])]:
        mask = Predicate(text, ["p"]).mask(values).to_pylist()
        assert [n for n, keep in enumerate(mask) if keep] == rows, text


def test_a_large_in_list_is_one_set_lookup() -> None:
    ids = pa.table({"id": pa.array(np.arange(0, 400_000, 2), pa.int64())})
    listed = ", ".join(str(v) for v in range(0, 200_000))
    mask = Predicate(f"id IN ({listed})", [], data_columns=["id"]).mask(ids)
    assert mask.true_count == 100_000
    bound = Predicate("id NOT IN (:ids)", [], data_columns=["id"], parameters={"ids": list(range(100_000))})
    assert bound.mask(ids).true_count == 150_000
