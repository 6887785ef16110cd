"""How log lines word numbers: plain counts and human durations, never "file(s)" or "7 days, 0:00:00"."""

from __future__ import annotations

from datetime import timedelta

import pytest

from airflow_delta_provider.utils.wording import count, human_duration, versions


@pytest.mark.parametrize(
    ("number", "noun", "plural", "expected"),
    [
        pytest.param(0, "file", None, "0 files", id="zero"),
        pytest.param(1, "file", None, "1 file", id="one"),
        pytest.param(3, "file", None, "3 files", id="many"),
        pytest.param(1, "directory", "directories", "1 directory", id="one-irregular"),
        pytest.param(2, "directory", "directories", "2 directories", id="many-irregular"),
    ],
)
def test_count(number, noun, plural, expected):
    assert count(number, noun, plural) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param(timedelta(days=7), "7 days", id="days"),
        pytest.param(timedelta(hours=1, minutes=30), "1 hour 30 minutes", id="hours-minutes"),
        pytest.param(2, "2 seconds", id="seconds"),
        pytest.param(1.0, "1 second", id="one-second"),
        pytest.param(0.5, "0.5 seconds", id="fraction"),
        pytest.param(timedelta(0), "0 seconds", id="zero"),
        pytest.param(None, "none", id="none"),
    ],
)
def test_human_duration(value, expected):
    assert human_duration(value) == expected


def test_versions():
    assert versions([3]) == "version 3"
    assert versions([3, 4]) == "versions 3 and 4"
    assert versions([1, 2, 3]) == "versions 1, 2 and 3"
