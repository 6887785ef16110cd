"""Each bound's JSON as Delta writes it: string truncation, INT96 instants, exact decimals."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from airflow_delta_provider.core.expressions.stats_encoding import (
    DATE,
    FLOAT,
    INT,
    STRING,
    TIMESTAMP,
    Leaf,
    bound_json,
    bounds_json,
    int96_bounds,
    stats_json,
    truncate_max_string,
    truncate_min_string,
)
from airflow_delta_provider.core.parquet.page_scan import DTYPES


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("short", "short"),
        ("x" * 32, "x" * 32),
        ("x" * 33, "x" * 32 + "\x7f"),  # the cut character is below U+007F
        ("x" * 32 + "é" + "y", "x" * 32 + "\U0010ffff"),  # above it: the largest code point
        ("x" * 32 + "\U0010ffff" * 3 + "z", "x" * 32 + "\U0010ffff" * 3 + "\x7f"),
        ("x" * 32 + "\U0010ffff" * 33, None),  # cannot be bounded within twice the prefix
    ],
)
def test_truncate_max_string(value, expected):
    assert truncate_max_string(value) == expected
    if expected is not None:
        assert expected.encode() >= value.encode()[: len(expected.encode())]


def test_truncate_min_string_is_a_prefix():
    assert truncate_min_string("z" * 50) == "z" * 32
    assert truncate_min_string("abc") == "abc"


@pytest.mark.parametrize(
    ("values", "bounds"),
    [
        (
            [dt.datetime(2024, 1, 1, 0, 0, 0, 1500), dt.datetime(1970, 1, 1), dt.datetime(2024, 1, 1)],
            ("1970-01-01T00:00:00.000Z", "2024-01-01T00:00:00.002Z"),  # the maximum rounded up
        ),
        (
            [dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59)],
            ("0001-01-01T00:00:00.000Z", "9999-12-31T23:59:00.000Z"),
        ),
        ([dt.datetime(9999, 12, 31, 23, 59, 59, 999999)], None),  # rounded up past year 9999
        ([], None),
    ],
)
def test_int96_bounds_come_from_julian_days_and_nanoseconds(values, bounds):
    def int96(value: dt.datetime) -> tuple[int, int]:
        since = value - dt.datetime(1970, 1, 1)
        nanos = (since.seconds * 1_000_000 + since.microseconds) * 1000
        return nanos, since.days + 2_440_588

    array = np.array([int96(v) for v in values], DTYPES["INT96"])
    expected = (f'"{bounds[0]}"', f'"{bounds[1]}"') if bounds is not None else None
    assert int96_bounds(array) == expected


def test_stats_json_writes_decimals_without_exponent():
    assert stats_json({"a": {"b": Decimal("1E-7")}, "n": 1}) == '{"a":{"b":0.0000001},"n":1}'


# --- one column of many files at once, as each file alone --------------------------------

_MS = {"milliseconds": 1, "microseconds": 1000, "nanoseconds": 1_000_000}
#: Raw footer values at and past the edges of what Delta's JSON can write, per kind.
_EDGE_INTS = [
    0,
    1,
    -1,
    999,
    -999,
    1000,
    -1001,
    1_704_067_200_123_456,
    -62_135_596_800_000_001,  # just before year 1 in microseconds
    -62_135_596_800_000_000,
    253_402_300_799_999_999,  # the last microsecond of year 9999
    253_402_300_800_000_000,
    -62_135_596_800_000,  # milliseconds
    253_402_300_799_999,
    253_402_300_800_000,
    2**63 - 1,
    -(2**63),
]
_EDGE_DAYS = [0, -1, 19_723, -719_162, -719_163, 2_932_896, 2_932_897, -365_000, 2**31 - 1, -(2**31)]
_EDGE_STRINGS = [
    b"",
    b"a",
    b"name-000005999",
    b"x" * 32,
    b"x" * 33,
    b'quote " inside',
    b"back\\slash",
    b"tab\tnew\nline\x00nul\x1f",
    "é".encode() * 16,  # 32 bytes, 16 characters
    "é".encode() * 17,  # 34 bytes, 17 characters: no truncation needed either
    ("x" * 32 + "é" + "y").encode(),
    ("x" * 32 + "\U0010ffff" * 33).encode(),  # no bound within twice the prefix
    "\U0010ffff".encode(),
    "\u2028 line separator \x7f".encode(),
    b"\xff\xfe not UTF-8",
    b"\xed\xa0\x80",  # an encoded surrogate: not UTF-8 either
]
_EDGE_FLOATS = [0.0, -0.0, 1.5, -2.25, 1e300, -1e-300, 5e-324, float("inf"), float("-inf"), float("nan"), 0.1]


def _leaf(kind: int, **fields: object) -> Leaf:
    leaf = Leaf(0, ("c",), pa.int64(), int96=False, kind=kind, floating=kind == FLOAT, boundable=True)
    for name, value in fields.items():
        setattr(leaf, name, value)
    return leaf


def _one_by_one(leaf: Leaf, lows: list, highs: list) -> list:
    """What the per-file route wrote: :func:`bound_json` per file, None where it raised."""
    out = []
    for low, high in zip(lows, highs, strict=True):
        try:
            out.append(bound_json(leaf, low, high))
        except (ValueError, OverflowError, ArithmeticError, TypeError):
            out.append(None)
    return out


def _pairs(values: list) -> tuple[list, list]:
    """Every ordered pair of the values, as lows and highs (one file each)."""
    lows = [low for low in values for _ in values]
    highs = [high for _ in values for high in values]
    return lows, highs


@pytest.mark.parametrize(
    "leaf",
    [
        _leaf(INT),
        _leaf(FLOAT),
        _leaf(DATE),
        _leaf(STRING),
        *[_leaf(TIMESTAMP, divisor=_MS[unit], utc=utc) for unit in _MS for utc in (False, True)],
    ],
    ids=lambda leaf: f"kind{leaf.kind}-div{leaf.divisor}-utc{leaf.utc}",
)
def test_bounds_of_many_files_are_those_of_each_file_alone(leaf):
    values = {
        INT: _EDGE_INTS,
        FLOAT: _EDGE_FLOATS,
        DATE: _EDGE_DAYS,
        STRING: _EDGE_STRINGS,
        TIMESTAMP: _EDGE_INTS,
    }[leaf.kind]
    lows, highs = _pairs(values)
    expected = _one_by_one(leaf, lows, highs)
    assert bounds_json(leaf, lows, highs) == expected
    # A column whose values all take the whole-column route (short, plain strings; in range).
    plain = [i for i, bound in enumerate(expected) if bound is not None]
    found = bounds_json(leaf, [lows[i] for i in plain], [highs[i] for i in plain])
    assert found == [expected[i] for i in plain]
    assert bounds_json(leaf, [], []) == []


def test_string_bounds_of_short_plain_strings_are_quoted_as_they_are():
    leaf = _leaf(STRING)
    assert bounds_json(leaf, [b"a", "é".encode()], [b"b", b"z" * 32]) == [
        ('"a"', '"b"'),
        ('"é"', '"' + "z" * 32 + '"'),
    ]
