"""A run's partition key as a slice of a table, and partitions as Airflow keys (utils/partitions.py)."""

from __future__ import annotations

import pytest

from airflow_delta_provider.utils.partitions import (
    RunSlice,
    partition_keys,
    to_key_columns,
    with_partition_keys,
)


@pytest.mark.parametrize(
    ("key", "columns", "values"),
    [
        ("2026-03-01", ["ds"], ("2026-03-01",)),
        ("a|b", ["ds"], ("a|b",)),  # one column: the whole key, separator and all
        ("us|2026-03-01", ["region", "ds"], ("us", "2026-03-01")),
        ("us|x|y", ["a", "b", "c"], ("us", "x", "y")),
    ],
)
def test_a_key_splits_over_its_columns(key: str, columns: list[str], values: tuple[str, ...]) -> None:
    found = RunSlice.of(key, columns)
    assert (found.key, found.columns, found.values) == (key, tuple(columns), values)
    text, parameters = found.predicate()
    assert text == " AND ".join(f"`{c}` = :p{i}" for i, c in enumerate(columns))
    assert parameters == {f"p{i}": v for i, v in enumerate(values)}


@pytest.mark.parametrize(("key", "count"), [("2026-03-01", 1), ("a|b|c", 3)])
def test_a_key_with_another_number_of_parts_is_refused(key: str, count: int) -> None:
    with pytest.raises(ValueError, match=rf"has {count} part\(s\) separated by '\|'.*2 column\(s\)"):
        RunSlice.of(key, ["region", "ds"])


def test_an_empty_part_names_no_partition() -> None:
    with pytest.raises(ValueError, match=r"empty part for \['b'\]"):
        RunSlice.of("us||x", ["a", "b", "c"])


def test_a_column_with_a_backtick_is_quoted() -> None:
    text, _ = RunSlice.of("x", ["we`ird"]).predicate()
    assert text == "`we``ird` = :p0"


def test_key_columns_are_distinct_names() -> None:
    assert to_key_columns('["region", "ds"]') == ["region", "ds"]
    assert to_key_columns("ds") == ["ds"]
    with pytest.raises(ValueError, match="twice"):
        to_key_columns(["ds", "DS"])
    with pytest.raises(ValueError, match="non-empty strings"):
        to_key_columns(["ds", ""])


def test_partitions_as_keys_and_those_no_key_names() -> None:
    partitions = [
        {"region": "us", "ds": "2026-03-01"},
        {"region": "eu", "ds": "2026-03-01"},
        {"region": "us", "ds": "2026-03-01"},
        {"region": None, "ds": "2026-03-02"},
        {"region": "", "ds": "2026-03-02"},
        {"region": "x" * 250, "ds": "2026-03-02"},
    ]
    keys, unnamed = partition_keys(partitions, ["region", "ds"])
    assert keys == ["us|2026-03-01", "eu|2026-03-01"]
    assert unnamed == partitions[3:]
    assert partition_keys(partitions[:2], ["ds"])[0] == ["2026-03-01"]


def test_a_watchers_event_gets_the_keys_of_its_partitions() -> None:
    event = {"version": 3, "partitions": [{"ds": "2026-03-01", "region": "us"}]}
    assert with_partition_keys(event)["partition_keys"] == ["2026-03-01|us"]
    assert with_partition_keys({"version": 3, "partitions": []})["partition_keys"] == []
