"""Partition values: the protocol's serialisation both ways, typed columns, Hive-style paths."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from airflow_delta_provider.core.errors import CorruptLogError, SchemaError
from airflow_delta_provider.core.protocol.partitions import (
    HIVE_DEFAULT_PARTITION,
    escape_partition_value,
    escape_path_name,
    parse_partition_path,
    parse_partition_strings,
    parse_partition_value,
    partition_columns_from_map,
    partition_path,
    serialize_partition_value,
    unescape_partition_value,
    unescape_path_name,
)
from airflow_delta_provider.core.protocol.schema import (
    arrow_type_to_delta,
    delta_type_to_arrow,
    physical_schema,
    schema_from_delta,
)

CORPUS = Path(
    os.environ.get("DELTA_CONFORMANCE_DIR", Path(__file__).resolve().parents[3] / "conformance" / "corpus")
)
UTC = dt.UTC
STRING_MAP = pa.map_(pa.string(), pa.string())

# (Delta type, serialised value, Python value); serialize(python) gives the string back.
CASES: list[tuple[str, str, Any]] = [
    ("string", "hello world", "hello world"),
    ("string", "null", "null"),  # the literal string, not null
    ("string", "ü/é=%", "ü/é=%"),
    ("long", "-9223372036854775808", -(2**63)),
    ("long", "9223372036854775807", 2**63 - 1),
    ("integer", "-2147483648", -(2**31)),
    ("short", "32767", 32767),
    ("byte", "-128", -128),
    ("double", "1.5", 1.5),
    ("double", "1.0E10", 1e10),
    ("double", "-2.5E-10", -2.5e-10),
    ("double", "0.001", 0.001),
    ("double", "1234567.0", 1234567.0),
    ("double", "1.0E7", 1e7),
    ("double", "NaN", math.nan),
    ("double", "Infinity", math.inf),
    ("double", "-Infinity", -math.inf),
    ("double", "-0.0", -0.0),
    ("float", "0.1", float(np.float32(0.1))),
    ("float", "3.4028235E38", float(np.finfo(np.float32).max)),
    ("boolean", "true", True),
    ("boolean", "false", False),
    ("binary", "\x01\x02\x03", b"\x01\x02\x03"),
    ("binary", "😀", "😀".encode()),
    ("date", "2021-09-08", dt.date(2021, 9, 8)),
    ("date", "0001-01-01", dt.date(1, 1, 1)),
    ("timestamp", "2021-09-08 11:11:11", dt.datetime(2021, 9, 8, 11, 11, 11, tzinfo=UTC)),
    ("timestamp", "2021-09-08 11:11:11.123456", dt.datetime(2021, 9, 8, 11, 11, 11, 123456, tzinfo=UTC)),
    ("timestamp", "2021-09-08 11:11:11.1", dt.datetime(2021, 9, 8, 11, 11, 11, 100000, tzinfo=UTC)),
    ("timestamp", "1970-01-01 00:00:00", dt.datetime(1970, 1, 1, tzinfo=UTC)),
    ("timestamp_ntz", "2013-07-05 17:01:00.123456", dt.datetime(2013, 7, 5, 17, 1, 0, 123456)),
    ("timestamp_ntz", "9999-12-31 23:59:59.999999", dt.datetime(9999, 12, 31, 23, 59, 59, 999999)),
    ("decimal(12,5)", "-2342342.23423", Decimal("-2342342.23423")),
    ("decimal(12,5)", "0.00004", Decimal("0.00004")),
    ("decimal(12,5)", "234.00000", Decimal("234.00000")),
    ("decimal(38,10)", "1E-10", Decimal("1E-10")),
    ("decimal(1,0)", "0", Decimal(0)),
    ("decimal(38,0)", "9" * 38, Decimal("9" * 38)),
]


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float):
        return (math.isnan(left) and math.isnan(right)) or (
            left == right and math.copysign(1, left) == math.copysign(1, right)
        )
    return left == right and type(left) is type(right)


@pytest.mark.parametrize(("delta_type", "text", "value"), CASES)
def test_every_type_both_ways(delta_type: str, text: str, value: Any) -> None:
    assert _same(parse_partition_value(text, delta_type), value)
    assert serialize_partition_value(value, delta_type) == text


@pytest.mark.parametrize(("delta_type", "text", "value"), CASES)
def test_vectorised_parse_agrees_with_the_scalar_one(delta_type: str, text: str, value: Any) -> None:
    arrow_type = delta_type_to_arrow(delta_type)
    typed = parse_partition_strings(pa.array([text, None, "", text]), arrow_type, "c")
    assert typed.type == arrow_type
    values = typed.to_pylist()
    assert values[1] is None and values[2] is None
    assert _same(values[0], value) or (isinstance(value, float) and values[0] == pytest.approx(value))


@pytest.mark.parametrize("delta_type", sorted({case[0] for case in CASES}))
def test_null_and_empty_string_are_null_for_every_type(delta_type: str) -> None:
    assert parse_partition_value(None, delta_type) is None
    assert parse_partition_value("", delta_type) is None
    assert serialize_partition_value(None, delta_type) is None


def test_empty_string_value_is_written_as_null() -> None:
    assert serialize_partition_value("", "string") is None


@pytest.mark.parametrize(
    ("text", "arrow_type", "expected"),
    [
        (["TRUE", "False"], pa.bool_(), [True, False]),
        (["-0", "1.5"], pa.decimal128(5, 2), [Decimal("0.00"), Decimal("1.50")]),
        (["+1", " 2"], pa.int64(), [1, 2]),
        (["1.0E10", "1e-3", "inf"], pa.float64(), [1e10, 0.001, math.inf]),
    ],
)
def test_lenient_forms_are_read(text: list[str], arrow_type: pa.DataType, expected: list[Any]) -> None:
    assert parse_partition_strings(pa.array(text), arrow_type).to_pylist() == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1970-01-01T00:00:00.123456Z", dt.datetime(1970, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)),
        ("2024-01-01T10:00:00.000000Z", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01T10:00:00Z", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01 10:00:00Z", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01T12:00:00+02:00", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01T05:30:00-0430", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01T10:00:00.123456789Z", dt.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2024-01-01 10:00:00.123456789", dt.datetime(2024, 1, 1, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2024-01-01 10:00", dt.datetime(2024, 1, 1, 10, tzinfo=UTC)),
        ("2024-01-01", dt.datetime(2024, 1, 1, tzinfo=UTC)),
    ],
)
def test_timestamps_in_both_protocol_formats(text: str, expected: dt.datetime) -> None:
    assert parse_partition_value(text, "timestamp") == expected
    typed = parse_partition_strings(pa.array([text]), pa.timestamp("us", tz="UTC"))
    assert typed.to_pylist() == [expected]


def test_timestamps_are_written_in_utc_without_trailing_zeros() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    value = dt.datetime(2021, 1, 1, 1, 2, 3, 120000, tzinfo=plus_two)
    assert serialize_partition_value(value, "timestamp") == "2020-12-31 23:02:03.12"
    assert (
        serialize_partition_value(dt.datetime(2021, 1, 1), "timestamp") == "2021-01-01 00:00:00"
    )  # naive: UTC
    assert (
        serialize_partition_value(dt.datetime(5, 1, 1, 0, 0, 0, 1), "timestamp_ntz")
        == "0005-01-01 00:00:00.000001"
    )


@pytest.mark.parametrize(
    ("text", "delta_type", "message"),
    [
        ("abc", "long", r"Partition value 'abc' of column c is not a valid long"),
        ("1.0", "integer", r"'1\.0' of column c is not a valid integer"),
        ("128", "byte", r"out of range for a 8-bit integer"),
        ("2", "boolean", r"'2' of column c is not a valid boolean"),
        ("2021-13-01", "date", r"not a valid date"),
        ("09/08/2021", "date", r"expected YYYY-MM-DD"),
        ("yesterday", "timestamp", r"not a valid timestamp"),
        ("2021-09-08T11:11:11Z", "timestamp_ntz", r"has no time zone"),
        ("1.234", "decimal(5,2)", r"more than 2 digits after the point"),
        ("12345", "decimal(5,2)", r"more than 3 digits before the point"),
        ("NaN", "decimal(5,2)", r"not a finite number"),
        ("x", "decimal(5,2)", r"not a valid decimal\(5,2\)"),
    ],
)
def test_invalid_values_raise_corrupt_log_error_naming_column_and_value(
    text: str, delta_type: str, message: str
) -> None:
    with pytest.raises(CorruptLogError, match=message):
        parse_partition_value(text, delta_type, column="c")
    with pytest.raises(CorruptLogError, match=message):
        parse_partition_strings(pa.array(["", text, None]), delta_type_to_arrow(delta_type), "c")


@pytest.mark.parametrize("delta_type", ["variant", "array", "void", "decimal", "int"])
def test_non_partition_types_are_refused(delta_type: str) -> None:
    with pytest.raises(SchemaError, match=rf"Partition column p has type '{delta_type}'"):
        parse_partition_value("1", delta_type, column="p")
    with pytest.raises(SchemaError, match="not a partition column type"):
        serialize_partition_value(1, delta_type)


def test_nested_arrow_types_are_refused_as_partition_columns() -> None:
    with pytest.raises(SchemaError, match="not a partition column type"):
        parse_partition_strings(pa.array(["1"]), pa.list_(pa.int32()), "p")


@pytest.mark.parametrize(
    ("value", "delta_type", "message"),
    [
        (True, "integer", "got bool"),
        (2**31, "integer", "out of range"),
        ("1", "long", "got str"),
        (1, "string", "got int"),
        ("true", "boolean", "got str"),
        (dt.datetime(2021, 1, 1), "date", "got datetime"),
        (dt.date(2021, 1, 1), "timestamp", "got date"),
        (dt.datetime(2021, 1, 1, tzinfo=UTC), "timestamp_ntz", "must be a naive datetime"),
        (b"\xff\xfe", "binary", "can't decode"),
        (Decimal("1.234"), "decimal(5,2)", "more than 2 digits after the point"),
        (Decimal("1234"), "decimal(5,2)", "more than 3 digits before the point"),
        (Decimal("NaN"), "decimal(5,2)", "not a finite number"),
    ],
)
def test_values_that_do_not_fit_raise_schema_error(value: Any, delta_type: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        serialize_partition_value(value, delta_type)


def test_serialize_accepts_numpy_scalars_and_other_decimal_inputs() -> None:
    assert serialize_partition_value(np.int16(7), "short") == "7"
    assert serialize_partition_value(np.float32(0.1), "float") == "0.1"
    assert serialize_partition_value(3, "double") == "3.0"
    assert serialize_partition_value(4, "decimal(12,5)") == "4.00000"
    assert serialize_partition_value("1.5", "decimal(3,1)") == "1.5"
    assert serialize_partition_value(0.1, "decimal(3,2)") == "0.10"
    assert serialize_partition_value(Decimal("0.00000001"), "decimal(38,10)") == "1.00E-8"  # Java's toString
    assert serialize_partition_value(bytearray(b"ab"), "binary") == "ab"


# --- property tests -------------------------------------------------------------------------------


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_long_round_trip(value: int) -> None:
    assert parse_partition_value(serialize_partition_value(value, "long"), "long") == value


@given(st.floats(allow_nan=False))
def test_double_round_trip(value: float) -> None:
    assert _same(parse_partition_value(serialize_partition_value(value, "double"), "double"), value)


@given(st.floats(width=32, allow_nan=False))
def test_float_round_trip(value: float) -> None:
    parsed = parse_partition_value(serialize_partition_value(value, "float"), "float")
    assert _same(float(np.float32(parsed)), value)


@given(st.decimals(allow_nan=False, allow_infinity=False, places=4, min_value=-(10**12), max_value=10**12))
def test_decimal_round_trip(value: Decimal) -> None:
    text = serialize_partition_value(value, "decimal(20,4)")
    assert parse_partition_value(text, "decimal(20,4)") == value
    assert parse_partition_strings(pa.array([text]), pa.decimal128(20, 4)).to_pylist() == [value]


@given(st.datetimes(timezones=st.just(UTC)))
def test_timestamp_round_trip(value: dt.datetime) -> None:
    text = serialize_partition_value(value, "timestamp")
    assert parse_partition_value(text, "timestamp") == value
    assert parse_partition_strings(pa.array([text]), pa.timestamp("us", tz="UTC")).to_pylist() == [value]


@given(st.datetimes())
def test_timestamp_ntz_round_trip(value: dt.datetime) -> None:
    assert parse_partition_value(serialize_partition_value(value, "timestamp_ntz"), "timestamp_ntz") == value


@given(st.dates())
def test_date_round_trip(value: dt.date) -> None:
    assert parse_partition_value(serialize_partition_value(value, "date"), "date") == value


@given(st.binary(min_size=1).filter(lambda b: _is_utf8(b)))
def test_binary_round_trip(value: bytes) -> None:
    assert parse_partition_value(serialize_partition_value(value, "binary"), "binary") == value


def _is_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


# --- vectorised extraction from partitionValues maps ------------------------------------------------


def _maps(rows: list[dict[str, str | None] | None]) -> pa.Array:
    return pa.array([None if r is None else list(r.items()) for r in rows], STRING_MAP)


SCHEMA = pa.schema([("a", pa.int32()), ("b", pa.string()), ("t", pa.timestamp("us", tz="UTC"))])


def test_map_lookup_handles_missing_keys_nulls_duplicates_and_order() -> None:
    values = _maps(
        [
            {"t": "2021-01-01 00:00:00", "a": "1", "b": "x"},
            None,  # no partitionValues at all
            {"b": ""},  # empty string: null
            {},
            {"a": None, "b": "y"},
        ]
    )
    # A map with a duplicate key: the first entry wins, as pc.map_lookup(..., "first").
    values = pa.concat_arrays([values, pa.array([[("a", "7"), ("a", "8")]], STRING_MAP)])
    result = partition_columns_from_map(values, SCHEMA)
    assert result.type == pa.struct(list(SCHEMA))
    assert result.to_pylist() == [
        {"a": 1, "b": "x", "t": dt.datetime(2021, 1, 1, tzinfo=UTC)},
        {"a": None, "b": None, "t": None},
        {"a": None, "b": None, "t": None},
        {"a": None, "b": None, "t": None},
        {"a": None, "b": "y", "t": None},
        {"a": 7, "b": None, "t": None},
    ]


def test_sliced_chunked_and_list_of_struct_inputs() -> None:
    rows = [{"a": str(i), "b": f"v{i}"} for i in range(10)]
    values = _maps(rows)
    expected = [{"a": i, "b": f"v{i}"} for i in range(10)]
    schema = pa.schema([("a", pa.int32()), ("b", pa.string())])
    assert partition_columns_from_map(values.slice(3, 4), schema).to_pylist() == expected[3:7]
    chunked = pa.chunked_array([values.slice(0, 5), values.slice(5)])
    assert partition_columns_from_map(chunked, schema).to_pylist() == expected
    entries = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
    as_list = pa.array([[{"key": k, "value": v} for k, v in r.items()] for r in rows], entries)
    assert partition_columns_from_map(as_list.slice(2), schema).to_pylist() == expected[2:]
    large = values.cast(pa.map_(pa.large_string(), pa.large_string()))
    assert partition_columns_from_map(large, schema).to_pylist() == expected


def test_no_partition_columns_and_no_rows() -> None:
    values = _maps([{"a": "1"}, {}])
    empty = partition_columns_from_map(values, pa.schema([]))
    assert len(empty) == 2 and empty.type == pa.struct([])
    assert partition_columns_from_map(_maps([]), SCHEMA).to_pylist() == []
    assert len(partition_columns_from_map(pa.chunked_array([], STRING_MAP), SCHEMA)) == 0


def test_map_values_of_the_wrong_type_are_refused() -> None:
    with pytest.raises(SchemaError, match="partitionValues must be a map"):
        partition_columns_from_map(pa.array(["a=1"]), SCHEMA)


def test_a_bad_value_names_its_column() -> None:
    with pytest.raises(CorruptLogError, match=r"Partition value 'x' of column a is not a valid integer"):
        partition_columns_from_map(_maps([{"a": "1"}, {"a": "x"}]), SCHEMA)


def test_vectorised_fallback_matches_scalar_parse_on_mixed_formats() -> None:
    texts = ["2021-01-01 00:00:00", "2021-01-01T01:00:00Z", "2021-01-01T03:00:00+02:00", None, "",
             "2021-01-01 00:00:00.1234567", "2021-01-01"]  # fmt: skip
    typed = parse_partition_strings(pa.array(texts), pa.timestamp("us", tz="UTC"), "t")
    assert typed.to_pylist() == [parse_partition_value(t, "timestamp") for t in texts]


def test_one_million_files_two_columns_is_fast() -> None:
    rows = 1_000_000
    index = np.arange(rows)
    keys = pa.array(np.tile(np.array(["date", "ts"]), rows), pa.string())
    dates = pc.cast(pa.array(19000 + index % 365, pa.int32()).cast(pa.date32()), pa.string())
    stamps = pa.array(index * 1_000_000, pa.timestamp("us")).cast(pa.string())  # "1970-01-01 00:00:05.000000"
    items = pc.cast(pa.chunked_array([dates, stamps]).combine_chunks(), pa.string())
    order = np.empty(2 * rows, dtype=np.int64)
    order[0::2], order[1::2] = index, index + rows
    maps = pa.MapArray.from_arrays(
        pa.array(np.arange(0, 2 * rows + 1, 2), pa.int32()), keys, items.take(order)
    )
    schema = pa.schema([("date", pa.date32()), ("ts", pa.timestamp("us", tz="UTC"))])

    result = partition_columns_from_map(maps, schema)

    assert len(result) == rows
    assert result[rows - 1].as_py() == {
        "date": dt.date(1970, 1, 1) + dt.timedelta(days=19000 + (rows - 1) % 365),
        "ts": dt.datetime(1970, 1, 12, 13, 46, 39, tzinfo=UTC),
    }


# --- Hive-style paths -------------------------------------------------------------------------------

HIVE_ESCAPED = [chr(c) for c in range(1, 0x20)] + list("\"#%'*/:=?\\\x7f{[]^")


@pytest.mark.parametrize("char", HIVE_ESCAPED)
def test_every_hive_escaped_character(char: str) -> None:
    escaped = escape_path_name(f"a{char}b")
    assert escaped == f"a%{ord(char):02X}b"
    assert unescape_path_name(escaped) == f"a{char}b"


@pytest.mark.parametrize(
    "char", [" ", "+", "!", "@", "&", "$", ",", ";", "<", ">", "|", "~", "`", "}", "é", "😀"]
)
def test_characters_hive_leaves_alone(char: str) -> None:
    assert escape_path_name(char) == char


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("%3a%3A", "::"),  # lowercase hex is read too
        ("100%", "100%"),  # too short to be an escape
        ("%2", "%2"),
        ("a%2", "a%2"),
        ("%zz1", "%zz1"),  # not hex: kept
        ("%-1x", "%-1x"),  # Java's parseInt gives -1: kept
        ("%+Fx", "\x0fx"),  # Java's parseInt accepts a sign
        ("%25252F", "%252F"),  # one level only
    ],
)
def test_unescape_like_hive(text: str, expected: str) -> None:
    assert unescape_path_name(text) == expected


def test_null_partition_directories() -> None:
    assert escape_partition_value(None) == HIVE_DEFAULT_PARTITION
    assert escape_partition_value("") == HIVE_DEFAULT_PARTITION
    assert unescape_partition_value(HIVE_DEFAULT_PARTITION) is None
    assert unescape_partition_value("a%3Ab") == "a:b"


@given(st.text())
def test_escape_round_trip(text: str) -> None:
    escaped = escape_path_name(text)
    assert unescape_path_name(escaped) == text
    assert not set(escaped) & (set(HIVE_ESCAPED) - {"%"})


@given(st.text(min_size=1))
def test_partition_value_round_trip(text: str) -> None:
    assume(text != HIVE_DEFAULT_PARTITION)
    assert unescape_partition_value(escape_partition_value(text)) == text


@given(
    st.dictionaries(st.text(min_size=1), st.one_of(st.none(), st.text(min_size=1)), min_size=1, max_size=4)
)
def test_partition_path_round_trip(values: dict[str, str | None]) -> None:
    assume(HIVE_DEFAULT_PARTITION not in values.values())
    path = partition_path(values, list(values)) + "/part-0.parquet"
    assert parse_partition_path(path) == values


def test_partition_path_and_its_parse() -> None:
    values = {"date": "2021-09-08", "ts": "2021-09-08 11:11:11", "s": None, "x": "a/b=c"}
    path = partition_path(values, ["date", "ts", "s", "x"])
    assert path == "date=2021-09-08/ts=2021-09-08 11%3A11%3A11/s=__HIVE_DEFAULT_PARTITION__/x=a%2Fb%3Dc"
    assert parse_partition_path(path + "/part-00000.snappy.parquet") == values
    assert partition_path({"a=b": "1"}, ["a=b"]) == "a%3Db=1"
    with pytest.raises(SchemaError, match=r"No partition value for partition column\(s\) \['b'\]"):
        partition_path({"a": "1"}, ["a", "b"])


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("part-0.parquet", {}),
        ("a=1/part-0.parquet", {"a": "1"}),
        ("a=1/b=/part-0.parquet", {"a": "1", "b": None}),
        ("a=1/b=x=y/c=1", {"a": "1", "b": "x=y"}),  # the last segment is the file name
        ("sub/a=1/part-0.parquet", {"a": "1"}),
        ("a=1/sub/b=2/part-0.parquet", {"b": "2"}),  # Spark stops at the first non-partition directory
        ("a=1/sub/part-0.parquet", {"a": "1"}),
        ("=1/a=2/part-0.parquet", {"a": "2"}),
    ],
)
def test_parse_partition_path(path: str, expected: dict[str, str | None]) -> None:
    assert parse_partition_path(path) == expected


# --- the conformance corpus ------------------------------------------------------------------------


def _partitioned_tables() -> list[str]:
    manifest = CORPUS / "MANIFEST.json"
    if not manifest.is_file():
        pytest.fail(f"The conformance corpus is missing: {CORPUS} (set DELTA_CONFORMANCE_DIR).")
    entries = json.loads(manifest.read_text())
    return [e["table_root"] for e in entries if e["partition_columns"] and e["expect"]["kind"] == "read"]


def _raw_partition_values(root: Path) -> dict[str, dict[str, str | None]]:
    """``add.path`` -> ``add.partitionValues`` from every commit and checkpoint of a table."""
    import pyarrow.parquet as pq

    found: dict[str, dict[str, str | None]] = {}
    log = root / "_delta_log"
    for parquet in [*sorted(log.glob("*.parquet")), *sorted((log / "_sidecars").glob("*.parquet"))]:
        table = pq.read_table(parquet)
        if "add" in table.column_names:
            for add in table.column("add").drop_null().to_pylist():
                found[add["path"]] = dict(add["partitionValues"] or [])
    for commit in sorted(log.glob("*.json")):
        for line in commit.read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            if "add" in action:
                found[action["add"]["path"]] = action["add"]["partitionValues"]
    return found


@pytest.mark.parametrize("table_root", _partitioned_tables())
def test_partition_values_match_deltalake(table_root: str) -> None:
    deltalake = pytest.importorskip("deltalake")
    root = CORPUS / "tables" / table_root
    delta_table = deltalake.DeltaTable(str(root))
    metadata = delta_table.metadata()
    logical = schema_from_delta(delta_table.schema().to_json())
    mode = metadata.configuration.get("delta.columnMapping.mode", "none")
    physical = physical_schema(logical, mode)
    columns = list(metadata.partition_columns)
    # The log keys partition values by physical name under column mapping.
    fields = [physical.field(logical.get_field_index(c)) for c in columns]
    actions = pa.table(delta_table.get_add_actions(flatten=True))
    raw = _raw_partition_values(root)
    maps = [raw[path] for path in actions.column("path").to_pylist()]

    typed = partition_columns_from_map(_maps(maps), pa.schema(fields))

    for column, field in zip(columns, fields, strict=True):
        expected = actions.column(f"partition.{column}").to_pylist()
        assert typed.field(field.name).to_pylist() == expected, column
        delta_type = arrow_type_to_delta(logical.field(column).type)
        scalars = [parse_partition_value(m.get(field.name), delta_type, column=column) for m in maps]
        assert scalars == expected, column


def test_partition_directories_match_the_log_and_re_escape_exactly() -> None:
    checked = 0
    without_directories = []
    for table_root in _partitioned_tables():
        files_with_directories = 0
        for path, logged in _raw_partition_values(CORPUS / "tables" / table_root).items():
            stored = unquote(path)  # the log holds the URL-encoded form of the storage path
            from_path = parse_partition_path(stored)
            if not from_path:
                continue
            assert from_path.keys() == logged.keys(), path
            for key, value in from_path.items():
                if value != logged[key]:  # only kernel-timestamp-partition-col-ISO8601: ISO-8601 in the log
                    assert parse_partition_value(value, "timestamp") == parse_partition_value(
                        logged[key], "timestamp"
                    ), path
            # Spark's directory names are exactly Hive's escaping of the values.
            assert partition_path(from_path, list(from_path)) == stored.rsplit("/", 1)[0], path
            files_with_directories += 1
        checked += files_with_directories
        if not files_with_directories:
            without_directories.append(table_root)
    assert checked > 100
    # delta-rs wrote this one with bare file names (no col=value directories).
    assert without_directories == ["delta-rs/checkpoint_with_partitions"]
