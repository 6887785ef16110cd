from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_delta_provider.core.errors import CorruptLogError
from airflow_delta_provider.core.partitions import (
    parse_partition_path,
    parse_partition_strings,
    partition_columns_from_map,
)

UTC = dt.UTC


@pytest.mark.parametrize(
    ("raw", "arrow_type", "expected"),
    [
        (["1", None, ""], pa.int32(), [1, None, None]),
        (["true", "FALSE", None], pa.bool_(), [True, False, None]),
        (["2021-09-08"], pa.date32(), [dt.date(2021, 9, 8)]),
        (
            ["2021-09-08 11:11:11", "2021-09-08 11:11:11.123456", "1970-01-01T00:00:00.000001Z"],
            pa.timestamp("us", tz="UTC"),
            [
                dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC),
                dt.datetime(2021, 9, 8, 11, 11, 11, 123456, tzinfo=UTC),
                dt.datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=UTC),
            ],
        ),
        (["2021-09-08 11:11:11"], pa.timestamp("us"), [dt.datetime(2021, 9, 8, 11, 11, 11)]),
        (["1.50", "-0"], pa.decimal128(5, 2), [Decimal("1.50"), Decimal("0.00")]),
        (["1.5", "NaN"], pa.float64(), [1.5, float("nan")]),
        (["héllo"], pa.binary(), ["héllo".encode()]),
        (["", "x"], pa.string(), [None, "x"]),
    ],
)
def test_serialized_values_parse_to_their_type(raw, arrow_type, expected):
    parsed = parse_partition_strings(pa.array(raw, pa.string()), arrow_type).to_pylist()
    assert [str(v) for v in parsed] == [str(v) for v in expected]


@pytest.mark.parametrize(
    ("raw", "arrow_type"), [(["x"], pa.int32()), (["yes"], pa.bool_()), (["2021-13-01"], pa.date32())]
)
def test_bad_values_name_the_column(raw, arrow_type):
    with pytest.raises(CorruptLogError, match="column c"):
        parse_partition_strings(pa.array(raw), arrow_type, "c")


def test_columns_from_maps_vectorised():
    maps = pa.array(
        [[("a", "1"), ("b", "x")], [("a", None), ("b", "")], [("b", "y"), ("a", "3")]],
        pa.map_(pa.string(), pa.string()),
    )
    typed = partition_columns_from_map(maps, pa.schema([("a", pa.int64()), ("b", pa.string())]))
    assert typed.to_pylist() == [{"a": 1, "b": "x"}, {"a": None, "b": None}, {"a": 3, "b": "y"}]


def test_parse_partition_path_unescapes():
    assert parse_partition_path("a=1/b=x%2Fy%3Az/c=__HIVE_DEFAULT_PARTITION__/part-0.parquet") == {
        "a": "1",
        "b": "x/y:z",
        "c": None,
    }
