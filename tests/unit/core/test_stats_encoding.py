"""Each bound's JSON as Delta writes it: string truncation, INT96 instants, exact decimals."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pytest

from airflow_delta_provider.core.page_scan import DTYPES
from airflow_delta_provider.core.stats_encoding import (
    int96_bounds,
    stats_json,
    truncate_max_string,
    truncate_min_string,
)


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
