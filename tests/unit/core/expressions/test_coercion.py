"""The type each comparison is evaluated in (Spark 4's ANSI coercion), cell by cell, and each
refusal with its reason. The rows these types select are checked against Spark itself by the
differential tests (tests/predicates_differential)."""

from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_delta_provider.core.expressions import Comparison, InList, Predicate, PredicateError

COLUMNS = {
    "b": pa.int8(),
    "i": pa.int32(),
    "l": pa.int64(),
    "f": pa.float32(),
    "x": pa.float64(),
    "d": pa.decimal128(10, 2),
    "w": pa.decimal128(38, 30),
    "s": pa.string(),
    "t": pa.bool_(),
    "dt": pa.date32(),
    "ts": pa.timestamp("us", tz="UTC"),
    "ntz": pa.timestamp("us"),
    "bin": pa.binary(),
}
SCHEMA = pa.schema(list(COLUMNS.items()))


def _domain(text: str) -> pa.DataType | str:
    """The Arrow type of the comparison's domain, or the refusal's reason."""
    try:
        form = Predicate(text, [], data_columns=list(COLUMNS)).normal_form(SCHEMA)
    except PredicateError as err:
        return f"refused: {err.reason}"
    if isinstance(form, InList):
        return form.values.type
    assert isinstance(form, Comparison) and form.value is not None
    return form.value.type


@pytest.mark.parametrize(
    ("text", "domain"),
    [
        # integral columns
        ("b = 300", pa.int32()),  # the wider integral: no overflow, no error
        ("i = 1L", pa.int64()),
        ("i = 1.5", pa.decimal128(11, 1)),
        ("i = 1e0", pa.float64()),
        ("i = 1.5F", pa.float64()),  # an integral and a float meet in DOUBLE under ANSI
        ("i = '1'", pa.int64()),  # a string is cast to BIGINT
        ("i = '1.0'", "refused: cast"),  # ANSI refuses the cast: the query fails
        ("i = TRUE", "refused: mismatch"),
        ("i = DATE '2024-01-01'", "refused: mismatch"),
        ("i IN (1, 1.5)", pa.decimal128(11, 1)),
        ("l IN ('1.04', 1.5)", pa.decimal128(21, 1)),  # folded left to right: '1.04' becomes 1.0
        ("l IN (1.5, '1.04')", pa.float64()),
        # floating columns
        ("f = 0.1", pa.float64()),  # widened, not narrowed: no row of float 0.1 matches
        ("f = 0.1F", pa.float32()),
        ("f IN (0.1F, 0.2D)", pa.float64()),
        ("x = 'NaN'", pa.float64()),
        ("x = '0x1p3'", "refused: cast"),  # hexadecimal floats are not supported
        # decimal columns
        ("d = 1", pa.decimal128(10, 2)),  # an integral literal is typed by its digits
        ("d = 1.005", pa.decimal128(11, 3)),
        ("d = 1.01D", pa.float64()),
        ("d = '1.01'", pa.float64()),  # decimal and string meet in DOUBLE
        ("w = 1", pa.decimal128(38, 30)),
        ("w = +1", "refused: decimal_rounding"),  # +1 is an expression: INT, DECIMAL(10,0)
        ("w IN (1, 2)", "refused: decimal_rounding"),  # no literal typing in IN
        ("w IN (1.0, 2.0)", pa.decimal128(38, 30)),
        # strings
        ("s = 'a'", pa.string()),
        ("s = 0123", "refused: ansi"),  # every value of s would be cast to BIGINT
        ("s IN ('a', 1)", "refused: ansi"),
        ("s = DATE '2024-01-01'", "refused: ansi"),
        # booleans
        ("t = 'yes'", pa.bool_()),
        ("t = 'maybe'", "refused: cast"),
        ("t = 1", "refused: mismatch"),
        # dates and timestamps
        ("dt = '2024-1-1'", pa.date32()),
        ("dt = TIMESTAMP_NTZ '2024-01-01 00:00:00'", pa.timestamp("us")),  # midnight, no zone involved
        ("dt = TIMESTAMP '2024-01-01 00:00:00Z'", "refused: time_zone"),  # the date in the session's zone
        ("ts = '2024-01-01T10:00:00Z'", pa.timestamp("us", tz="UTC")),
        ("ts = '2024-01-01 10:00:00'", "refused: time_zone"),  # zone-less: the session's zone
        ("ts = '2024-01-01 10:00:00 Europe/Paris'", "refused: zone"),
        ("ts = DATE '2024-01-01'", "refused: time_zone"),
        ("ntz = '2024-01-01 10:00:00'", pa.timestamp("us")),
        ("ntz = '2024-01-01 10:00:00Z'", "refused: zone"),  # Spark would drop the zone
        ("ntz = TIMESTAMP '2024-01-01 10:00:00Z'", "refused: time_zone"),
        ("ntz = DATE '2024-01-01'", pa.timestamp("us")),
        # binary
        ("bin = 'A'", pa.binary()),
        ("bin = X'41'", pa.binary()),
    ],
)
def test_each_comparison_is_typed_as_spark_types_it(text: str, domain: pa.DataType | str) -> None:
    assert _domain(text) == domain


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("s = 0123", r"s is a STRING column.*spark\.sql\.ansi\.enabled.*Quote the value: s = '0123'"),
        ("i = '1.0'", r"Spark casts the value to BIGINT and '1\.0' is not a whole number"),
        ("ts = '2024-01-01 10:00:00'", r"has no zone.*spark\.sql\.session\.timeZone.*'2024-01-01 10:00:00Z'"),
        ("ts = TIMESTAMP '2024-01-01'", r"'2024-01-01 00:00:00Z' for UTC"),
        ("ntz = '2024-01-01 10:00:00Z'", r"TIMESTAMP_NTZ has not \(Spark would drop it\)"),
        (
            "w IN (1, 2)",
            r"rounding every value of w \(DECIMAL\(38,30\)\) to 28 decimal place\(s\), as 1 is typed INT",
        ),
        ("t = 1", r"cannot compare BOOLEAN with INT \(DATATYPE_MISMATCH\)"),
        ("dt = TIMESTAMP '2024-01-01 00:00:00Z'", r"DATE with TIMESTAMP in spark\.sql\.session\.timeZone"),
    ],
)
def test_each_refusal_says_why_and_what_to_write(text: str, message: str) -> None:
    with pytest.raises(PredicateError, match=message):
        Predicate(text, [], data_columns=list(COLUMNS)).normal_form(SCHEMA)


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        # Spark's strength reduction of an integral column against a decimal literal: floor or
        # ceiling as a BIGINT, and a constant beyond BIGINT's range, NULL rows included.
        ("i > 1.5", [2]),
        ("i >= 1.5", [2]),
        ("i < 2E-30BD", [0]),  # i < 1, not i < 0 (the rounding a wide decimal would do)
        ("l <= 9223372036854775808", [0, 1, 2, 3]),
        ("l > 9223372036854775808", []),
        ("NOT l > 9223372036854775808", [0, 1, 2, 3]),
        ("i = 2E-30BD", [0]),  # no reduction for =: the literal is rounded into decimal(38,28)
    ],
)
def test_integral_columns_against_decimal_literals_follow_spark_s_reduction(
    text: str, rows: list[int]
) -> None:
    values = pa.table(
        {"i": pa.array([0, 1, 2, None], pa.int32()), "l": pa.array([0, 1, 2, None], pa.int64())}
    )
    mask = Predicate(text, [], data_columns=["i", "l"]).mask(values).to_pylist()
    assert [n for n, keep in enumerate(mask) if keep] == rows
