"""replaceWhere predicates: parsing and SQL semantics over typed partition values."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from airflow_delta_provider.core.predicate import Predicate, PredicateError

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
    with pytest.raises(PredicateError, match="does not fit column 'hour'"):
        Predicate("hour = 'noon'", ["hour"]).mask(VALUES.select(["hour"]))


def test_string_escapes():
    values = pa.table({"name": ["it's", "its"]})
    assert Predicate("name = 'it''s'", ["name"]).mask(values).to_pylist() == [True, False]


def test_empty_table_gives_an_empty_mask():
    assert len(Predicate("hour = 1", ["hour"]).mask(VALUES.slice(0, 0))) == 0
