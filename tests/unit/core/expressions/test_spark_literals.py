"""Literals read as Spark SQL 4 reads them: string escapes, number types, typed literals.

``spark_literals.json`` holds Spark's answers for each literal text (its UTF-8 bytes and length,
or its type and value, or an error). The core is checked against the file without Spark; a
Spark-marked test asks local Spark again, so that a Spark upgrade changing a rule fails here.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from airflow_delta_provider.core.expressions import Predicate, PredicateError
from airflow_delta_provider.core.expressions.lexer import tokenize
from airflow_delta_provider.core.expressions.literals import number_literal, typed_literal

GOLDEN = Path(__file__).with_name("spark_literals.json")

STRINGS = [
    r"'a\tb'",
    r"'a\\b'",
    r"'it\'s'",
    r"'it''s'",
    r"'\"'",
    r"'\0'",
    r"'\00'",
    r"'\012'",
    r"'\101'",
    r"'\201'",
    r"'\1019'",
    r"'\u00e9'",
    r"'\u00E9x'",
    r"'\u12'",
    r"'\uZZZZ'",
    r"'\U0001F600'",
    r"'\U0001f600'",
    r"'\ud83d\ude00'",
    r"'\z'",
    r"'a\%b'",
    r"'a\_b'",
    r"'\Z'",
    r"'\b'",
    r"'\r'",
    r"'\n'",
    r"'a\'",
    r"'x\\'",
    r"'a' 'b'",
    r"'a''b'",
    r"'\''",
    r"'\\''",
    "'tab\there'",
    r"'\ '",
    "'\\\n'",
    r"'\N'",
    r"r'a\tb'",
    r"R'\u0041'",
    "''",
    "'' ''",
    r"'\\\\'",
]
NUMBERS = [
    "0123",
    "1",
    "-1",
    "- 1",
    "2147483647",
    "2147483648",
    "-2147483648",
    "-2147483649",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "99999999999999999999999999999999999999",
    "999999999999999999999999999999999999999",
    "1.5",
    ".5",
    "1.",
    "1.50",
    "00.010",
    "-0.0",
    "0.00000000000000000000000000000000000001",
    "0.000000000000000000000000000000000000001",
    "1e0",
    "1E-3",
    "1.5e10",
    "1e308",
    "1e309",
    "1.7976931348623157e308",
    "1.7976931348623159e308",
    "1e-400",
    "1.5F",
    "1.5f",
    "3.4028235e38F",
    "3.4028236e38F",
    "1D",
    "1.5d",
    "1e3D",
    "1L",
    "9223372036854775808L",
    "1S",
    "32768S",
    "1Y",
    "127Y",
    "128Y",
    "-128Y",
    "1BD",
    "1.5BD",
    "1E2BD",
    "1.5L",
    "1x",
]
TYPED = [
    "DATE '2024-01-01'",
    "DATE '2024'",
    "DATE '2024-1'",
    "DATE '2024-1-1'",
    "DATE ' 2024-01-01 '",
    "DATE '+2024-01-01'",
    "DATE '2024-01-01T05'",
    "DATE '2024-01-01 anything'",
    "DATE '0001-01-01'",
    "DATE '9999-12-31'",
    "DATE '2024-02-30'",
    "DATE '2024/01/01'",
    "DATE '20240101'",
    "TIMESTAMP '2024-01-01T10:00:00Z'",
    "TIMESTAMP '2024-01-01 10:00:00 UTC'",
    "TIMESTAMP '2024-01-01T10:00:00+05:30'",
    "TIMESTAMP '2024-01-01T10:00:00+0530'",
    "TIMESTAMP '2024-01-01T10:00:00 +05:30'",
    "TIMESTAMP '2024-01-01T10:00:00+1'",
    "TIMESTAMP '2024-01-01T10:00:00 GMT+1'",
    "TIMESTAMP '2024-01-01T10:00:00.1234567Z'",
    "TIMESTAMP '2024-01-01T10:00:00.Z'",
    "TIMESTAMP '2024-01-01T10:00Z'",
    "TIMESTAMP_LTZ '2024-01-01 00:00:00+01:00'",
    "TIMESTAMP_NTZ '2024-01-01 10:00:00.123456'",
    "TIMESTAMP_NTZ '2024-01-01'",
]


def _spark_answer(spark: Any, literal: str) -> dict[str, Any]:
    try:
        row = spark.sql(f"SELECT typeof({literal}) AS t, cast({literal} AS string) AS v").collect()[0]
    except Exception as err:  # Spark's parse and analysis errors have many classes
        return {"error": str(err).strip().splitlines()[0][:120]}
    answer: dict[str, Any] = {"type": row.t, "value": row.v}
    if row.t == "string":
        answer["hex"] = spark.sql(f"SELECT hex(encode({literal}, 'UTF-8')) AS h").collect()[0].h
    if row.t in ("timestamp", "timestamp_ntz", "date"):
        unit = "unix_date" if row.t == "date" else "unix_micros"
        value = f"to_timestamp({literal})" if row.t == "timestamp_ntz" else literal
        answer["epoch"] = spark.sql(f"SELECT {unit}({value}) AS e").collect()[0].e
    return answer


def _golden() -> dict[str, dict[str, Any]]:
    return dict(json.loads(GOLDEN.read_text()))


@pytest.mark.spark
def test_the_golden_answers_are_spark_s(local_spark: Any) -> None:
    """Regenerate with: ``pytest ... -k golden --update-golden`` is not offered; on a difference,
    rewrite the file from this test's ``found`` (after checking the new Spark's release notes)."""
    local_spark.conf.set("spark.sql.session.timeZone", "UTC")
    found = {literal: _spark_answer(local_spark, literal) for literal in [*STRINGS, *NUMBERS, *TYPED]}
    golden = _golden()
    assert {k: v for k, v in found.items() if golden.get(k) != v} == {}


@pytest.mark.parametrize("literal", STRINGS)
def test_string_literals_are_unescaped_as_spark_does(literal: str) -> None:
    answer = _golden()[literal]
    if "error" in answer:
        with pytest.raises(PredicateError):
            _string_value(literal)
        return
    value = _string_value(literal)
    assert value.encode().hex().upper() == answer["hex"]


def _string_value(literal: str) -> str:
    tokens = tokenize(literal)
    assert all(t.kind == "string" for t in tokens)
    return "".join(t.value for t in tokens)


@pytest.mark.parametrize("literal", NUMBERS)
def test_numbers_are_typed_as_spark_types_them(literal: str) -> None:
    answer = _golden()[literal]
    negative = literal.startswith("-")
    text = literal.lstrip("- ")
    if "error" in answer:
        with pytest.raises(PredicateError, match=r"number|range|digits"):
            number_literal(text, negative=negative)
        return
    typed = number_literal(text, negative=negative)
    assert str(typed.type) == answer["type"]
    expected: Any = answer["value"]
    if answer["type"] in ("double", "float"):
        assert typed.value == float(expected)
    elif answer["type"].startswith("decimal"):
        assert typed.value == Decimal(expected)
    else:
        assert typed.value == int(expected)


@pytest.mark.parametrize("literal", TYPED)
def test_typed_literals_read_as_spark_reads_them_or_are_refused_for_a_reason(literal: str) -> None:
    """Spark reads a zone-less TIMESTAMP in the session's zone and drops a zone from a
    TIMESTAMP_NTZ: both are refused here (a value that depends on a setting, or a surprise)."""
    answer = _golden()[literal]
    keyword, _, body = literal.partition(" ")
    body = body.strip()[1:-1]
    keyword = "TIMESTAMP" if keyword == "TIMESTAMP_LTZ" else keyword
    if "error" in answer:
        with pytest.raises(PredicateError, match="refused"):
            typed_literal(keyword, body)
        return
    try:
        typed = typed_literal(keyword, body)
    except PredicateError as err:
        assert err.reason in ("time_zone", "zone"), err
        return
    assert typed.value == answer["epoch"]


def test_a_predicate_concatenates_adjacent_strings_and_keeps_raw_ones() -> None:
    import pyarrow as pa

    rows = pa.table({"s": ["ab", "a\\tb", "it's", "a'b"]})
    assert Predicate("s = 'a' 'b'", [], data_columns=["s"]).mask(rows).to_pylist() == [
        True,
        False,
        False,
        False,
    ]
    assert Predicate(r"s = r'a\tb'", [], data_columns=["s"]).mask(rows).to_pylist() == [
        False,
        True,
        False,
        False,
    ]
    assert Predicate(r"s IN ('it\'s', 'a''b')", [], data_columns=["s"]).mask(rows).to_pylist() == [
        False,
        False,
        True,
        True,
    ]


@pytest.mark.spark
def test_bound_parameters_are_typed_as_spark_binds_them(local_spark: Any) -> None:
    """``spark.sql(text, args=...)`` and the core bind a Python value to the same SQL type."""
    import datetime as dt

    from airflow_delta_provider.core.expressions.literals import bind_parameter

    values = [
        1,
        -(2**31),
        2**31,
        2**40,
        Decimal("1.005"),
        Decimal("-0.10"),
        1.5,
        True,
        "x",
        dt.date(2024, 1, 1),
    ]
    values.append(dt.datetime(2024, 1, 1, 10, tzinfo=dt.timezone(dt.timedelta(hours=2))))
    columns = ", ".join(f"typeof(:p{n}) AS t{n}" for n in range(len(values)))
    row = local_spark.sql(f"SELECT {columns}", args={f"p{n}": v for n, v in enumerate(values)}).collect()[0]
    assert [row[f"t{n}"] for n in range(len(values))] == [str(bind_parameter("p", v).type) for v in values]
