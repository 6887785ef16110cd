"""replaceWhere predicates: parsing and SQL semantics over typed partition values."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from airflow_delta_provider.core.expressions.predicate import (
    Comparison,
    InList,
    Junction,
    Predicate,
    PredicateError,
)

VALUES = pa.table(
    {
        "ds": pa.array([dt.date(2024, 1, 1), dt.date(2024, 1, 2), dt.date(2024, 1, 3), None]),
        "region": ["eu", "us", None, "eu"],
        "hour": pa.array([0, 5, 23, 7], pa.int32()),
    }
)


def _rows(text: str) -> list[int]:
    mask = Predicate(text, ["ds", "region", "hour"]).mask(VALUES).to_pylist()
    return [i for i, matched in enumerate(mask) if matched]


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("ds = '2024-01-02'", [1]),
        ("ds = DATE '2024-01-02'", [1]),
        ("ds >= '2024-01-02'", [1, 2]),
        ("region = 'eu' AND hour > 3", [3]),
        ("region = 'eu' OR hour = 23", [0, 2, 3]),
        ("NOT region = 'eu'", [1]),  # NULL region is unknown, not a match
        ("region IN ('us', 'xx')", [1]),
        ("region NOT IN ('us')", [0, 3]),
        ("region IN ('us', NULL)", [1]),
        ("region NOT IN ('us', NULL)", []),  # NOT (unknown) is unknown
        ("NOT region IN ('us')", [0, 3]),
        ("hour IN (5, 7) AND region IN ('eu')", [3]),
        ("region IS NULL", [2]),
        ("ds IS NOT NULL AND hour BETWEEN 1 AND 7", [1]),
        ("hour NOT BETWEEN 1 AND 7", [0, 2]),
        ("`region` <> 'eu'", [1]),
        ("(region = 'eu' OR region = 'us') AND NOT (hour = 0)", [1, 3]),
        ("region = NULL", []),
        ("region <=> NULL", [2]),
        ("HOUR == 5", [1]),
    ],
)
def test_sql_semantics(text, rows):
    assert _rows(text) == rows


def test_columns_are_recorded_with_the_table_spelling():
    assert Predicate("DS = '2024-01-01' and Hour < 3", ["ds", "hour"]).columns == {"ds", "hour"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "non-empty"),
        ("ds = ", "unexpected end"),
        ("ds = '2024-01-01' garbage", "unexpected"),
        ("ds ~ 1", "Cannot parse"),
        ("(ds = '2024-01-01'", "expected \\)"),
        ("value = 3", "not a partition column"),
    ],
)
def test_bad_predicates_are_refused_clearly(text, message):
    with pytest.raises(PredicateError, match=message):
        Predicate(text, ["ds"])


def test_a_literal_that_does_not_fit_the_column_type_is_refused():
    with pytest.raises(
        PredicateError, match=r"comparison of hour with 'noon' is refused.*not a whole number"
    ):
        Predicate("hour = 'noon'", ["hour"]).mask(VALUES.select(["hour"]))


def test_string_escapes():
    values = pa.table({"name": ["it's", "its"]})
    assert Predicate("name = 'it''s'", ["name"]).mask(values).to_pylist() == [True, False]


def test_empty_table_gives_an_empty_mask():
    assert len(Predicate("hour = 1", ["hour"]).mask(VALUES.slice(0, 0))) == 0


@pytest.mark.parametrize(
    "text",
    [
        "(" * 65 + "hour = 1" + ")" * 65,
        "NOT " * 65 + "hour = 1",
        "NOT (" * 10_000 + "hour = 1" + ")" * 10_000,
        " OR ".join(["hour = 1"] * 1001),
        " AND ".join(["hour BETWEEN 1 AND 2"] * 2_000),
    ],
    ids=["parentheses", "NOTs", "deep NOTs", "1001 conditions", "2,000 BETWEENs"],
)
def test_a_predicate_too_large_to_evaluate_safely_is_refused_clearly(text):
    """Nesting past MAX_NESTING was a RecursionError, 20,000 ORed conditions crashed the process
    (Arrow binds the expression recursively): both are refused, with a message of bounded length."""
    with pytest.raises(PredicateError, match=r"nest more than 64 deep|more than 1000 conditions") as raised:
        Predicate(text, ["hour"]).mask(VALUES.select(["hour"]))
    assert len(str(raised.value)) < 600


def test_the_largest_predicates_allowed_and_long_value_lists_evaluate():
    hours = VALUES.select(["hour"])
    nested = "(" * 63 + "hour = 5" + ")" * 63
    assert Predicate(nested, ["hour"]).mask(hours).to_pylist() == [False, True, False, False]
    chain = " OR ".join(f"hour = {h}" for h in range(1000))
    assert Predicate(chain, ["hour"]).mask(hours).to_pylist() == [True, True, True, True]
    listed = "hour IN (" + ", ".join(str(h) for h in range(7, 20_007)) + ")"
    assert Predicate(listed, ["hour"]).mask(hours).to_pylist() == [False, False, True, True]
    assert Predicate("NOT " + listed, ["hour"]).mask(hours).to_pylist() == [True, True, False, False]


# --- a read's filter: data columns and the normal form an engine receives ------------------------

READ_SCHEMA = pa.schema([("ds", pa.date32()), ("id", pa.int64()), ("tags", pa.list_(pa.string()))])


def test_a_read_may_name_data_columns_of_a_primitive_type():
    predicate = Predicate("ID > 3 AND ds = '2024-01-01'", ["ds"], data_columns=["id", "tags"])
    assert predicate.columns == {"id", "ds"}
    with pytest.raises(PredicateError, match="not a column of the table"):
        Predicate("nope = 1", ["ds"], data_columns=["id"])
    with pytest.raises(PredicateError, match="nested type array<string>"):
        Predicate("tags = 'a'", ["ds"], data_columns=["id", "tags"]).normal_form(READ_SCHEMA)
    assert Predicate("tags IS NULL", ["ds"], data_columns=["tags"]).normal_form(READ_SCHEMA) == Comparison(
        "tags", "is_null"
    )


@pytest.mark.parametrize(
    ("text", "form"),
    [
        ("NOT id < 3", Comparison("id", ">=", pa.scalar(3, pa.int64()))),
        (
            "NOT (id = 1 OR id IS NULL)",
            Junction(
                "and", (Comparison("id", "!=", pa.scalar(1, pa.int64())), Comparison("id", "is_not_null"))
            ),
        ),
        ("id NOT IN (2, 1, 2)", InList("id", pa.array([1, 2], pa.int64()), negated=True)),
        ("id IN (1, NULL)", InList("id", pa.array([1], pa.int64()), has_null=True)),
        (
            "id BETWEEN 1 AND 2",
            Junction(
                "and",
                (
                    Comparison("id", ">=", pa.scalar(1, pa.int64())),
                    Comparison("id", "<=", pa.scalar(2, pa.int64())),
                ),
            ),
        ),
        ("id <=> NULL", Comparison("id", "is_null")),
        (
            "NOT id <=> 4",
            Junction("or", (Comparison("id", "is_null"), Comparison("id", "!=", pa.scalar(4, pa.int64())))),
        ),
        ("ds = '2024-01-02'", Comparison("ds", "=", pa.scalar(dt.date(2024, 1, 2)))),
    ],
)
def test_the_normal_form_pushes_negations_into_typed_comparisons(text, form):
    assert Predicate(text, ["ds"], data_columns=["id"]).normal_form(READ_SCHEMA) == form


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        ("NOT (region = 'eu' AND hour > 3)", [0, 1]),  # NULL AND TRUE is NULL: row 2 stays out
        ("NOT region IN ('eu', NULL)", []),  # 'us' NOT IN ('eu', NULL) is NULL
        ("NOT NOT hour BETWEEN 1 AND 7", [1, 3]),
        ("NOT (region <=> 'eu') OR ds IS NULL", [1, 2, 3]),
        ("NOT (ds >= '2024-01-02' OR region IS NOT NULL)", []),
    ],
)
def test_negations_keep_sql_s_three_valued_logic(text, rows):
    """Through the normal form (NOT pushed down by De Morgan) on arrays, and as a pyarrow filter
    expression: the same rows."""
    predicate = Predicate(text, ["ds", "region", "hour"])
    assert _rows(text) == rows
    assert VALUES.filter(predicate.expression(VALUES.schema)).equals(VALUES.take(pa.array(rows, pa.int64())))


# --- parameters: values bound to named markers ----------------------------------------------------

BOUND = pa.table(
    {
        "name": ["it's", "x' OR 'a' = 'a", "a:b", None],
        "id": pa.array([1, 2, 3, 4], pa.int64()),
        "ts": pa.array(
            [dt.datetime(2024, 1, 1, h, tzinfo=dt.UTC) for h in range(4)], pa.timestamp("us", tz="UTC")
        ),
    }
)


def _bound(text: str, **parameters: object) -> list[int]:
    predicate = Predicate(text, [], data_columns=BOUND.column_names, parameters=parameters)
    return [n for n, keep in enumerate(predicate.mask(BOUND).to_pylist()) if keep]


def test_a_bound_value_is_a_value_whatever_it_holds() -> None:
    assert _bound("name = :name", name="it's") == [0]
    assert _bound("name = :name", name="x' OR 'a' = 'a") == [1]
    assert _bound("name = ':name'") == []  # a marker inside a string is text
    assert _bound("name = 'a:b'") == [2]
    assert _bound("id IN (:ids) AND name <> :name", ids=[1, 2, 3], name="a:b") == [0, 1]
    assert _bound("id = :`the id`", **{"the id": 3}) == [2]
    assert _bound("ts >= :since", since=dt.datetime(2024, 1, 1, 2, tzinfo=dt.UTC)) == [2, 3]
    assert _bound("id = :id", id="2") == [1]  # a str is a STRING literal, cast as Spark casts it


@pytest.mark.parametrize(
    ("text", "parameters", "message"),
    [
        ("id = :id", {}, "no parameter binds"),
        ("id = :Id", {"id": 1}, "case-sensitive"),
        ("id = 1", {"id": 1}, "not used"),
        ("id = ?", {}, "positional parameter markers"),
        ("id = :id", {"id": None}, "is None"),
        ("ts = :t", {"t": dt.datetime(2024, 1, 1)}, "without tzinfo"),
        ("id = :ids", {"ids": [1, 2]}, "binds only the items of an IN"),
        ("id IN (:ids)", {"ids": []}, "empty list"),
        ("id IN (:ids)", {"ids": [[1]]}, "nested"),
        ("id = :id", {"id": object()}, "no SQL literal"),
        ("id = :id", {"id": 2**64}, "range of BIGINT"),
        ("id = :id", [("id", 1)], "must map"),
    ],
)
def test_bad_bindings_are_refused(text: str, parameters: object, message: str) -> None:
    with pytest.raises(PredicateError, match=message) as raised:
        Predicate(text, [], data_columns=BOUND.column_names, parameters=parameters).normal_form(BOUND.schema)  # type: ignore[arg-type]
    assert raised.value.reason in ("parameter", "syntax")


def test_bound_values_are_typed_as_spark_binds_them() -> None:
    from decimal import Decimal

    from airflow_delta_provider.core.expressions.literals import bind_parameter

    expected = [
        (1, "int"),
        (2**40, "bigint"),
        (Decimal("1.005"), "decimal(4,3)"),
        (1.5, "double"),
        (True, "boolean"),
        ("x", "string"),
        (dt.date(2024, 1, 1), "date"),
        (dt.datetime(2024, 1, 1, tzinfo=dt.UTC), "timestamp"),
        (b"x", "binary"),
    ]
    assert [(value, str(bind_parameter("p", value).type)) for value, _ in expected] == expected
