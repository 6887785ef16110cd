"""``stats_parsed``: many files' JSON stats as one Arrow struct column, in Spark's layout."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa

from airflow_delta_provider.core.expressions.stats_parsed import parse_stats, stats_parsed_type

FIELDS = [
    pa.field("id", pa.int64()),
    pa.field("x", pa.float64()),
    pa.field("d", pa.date32()),
    pa.field("b", pa.binary()),
    pa.field("s", pa.struct([("n", pa.int32()), ("l", pa.list_(pa.int32()))])),
]


def test_the_layout_is_sparks():
    stats_type = stats_parsed_type(FIELDS, tight_bounds=True)
    assert [f.name for f in stats_type] == [
        "numRecords",
        "minValues",
        "maxValues",
        "nullCount",
        "tightBounds",
    ]
    # No min/max for binaries and lists (Spark keeps none); a null count for every column.
    assert [f.name for f in stats_type.field("minValues").type] == ["id", "x", "d", "s"]
    assert [f.name for f in stats_type.field("minValues").type.field("s").type] == ["n"]
    assert [f.name for f in stats_type.field("nullCount").type] == ["id", "x", "d", "b", "s"]


def test_stats_parse_as_json_says_and_a_missing_one_is_null():
    stats = [
        {
            "numRecords": 2,
            "minValues": {"id": 1, "d": "2024-01-02"},
            "maxValues": {"id": 5},
            "nullCount": {"id": 0},
        },
        None,
        {"numRecords": 7},
    ]
    texts = pa.chunked_array([[json.dumps(s) if s is not None else None for s in stats]], pa.string())
    parsed = parse_stats(texts, stats_parsed_type(FIELDS, tight_bounds=False)).to_pylist()
    assert parsed[0]["numRecords"] == 2
    assert parsed[0]["minValues"]["id"] == 1 and parsed[0]["minValues"]["d"] == dt.date(2024, 1, 2)
    assert parsed[0]["maxValues"]["id"] == 5 and parsed[0]["nullCount"]["id"] == 0
    assert parsed[1] is None
    assert parsed[2]["numRecords"] == 7 and parsed[2]["minValues"] is None


def test_a_value_arrow_refuses_becomes_null_in_its_row_only():
    texts = pa.chunked_array(
        [['{"numRecords":1,"minValues":{"x":"NaN","id":"seven"}}', '{"numRecords":2,"minValues":{"id":3}}']]
    )
    parsed = parse_stats(texts, stats_parsed_type(FIELDS, tight_bounds=False)).to_pylist()
    assert parsed[0]["numRecords"] == 1 and parsed[0]["minValues"]["id"] is None
    assert parsed[0]["minValues"]["x"] != parsed[0]["minValues"]["x"]  # NaN
    assert parsed[1]["minValues"]["id"] == 3


def test_a_file_without_readable_statistics_has_an_unknown_record_count_not_zero():
    """A null struct's leaves hold zeros in Arrow: read through ``stats_leaf``, they are null."""
    from airflow_delta_provider.core.expressions.stats_parsed import record_counts

    fast = pa.chunked_array([['{"numRecords": 5}', None, "{}"]])
    assert record_counts(fast).to_pylist() == [5, None, None]
    # A value Arrow refuses sends every row through the row-by-row parse.
    slow = pa.chunked_array([['{"numRecords": 5, "minValues": {"id": "x"}}', None, "{", '{"numRecords": 2}']])
    assert record_counts(slow).to_pylist() == [5, None, None, 2]
