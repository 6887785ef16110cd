"""The one argument coercion of the Airflow layer: per kind of argument, what is accepted and what is refused.

Every refusal names the argument and shows the bad value; the operators' use of these rules (a
rendered value refused before the table changes) is in tests/unit/operators/test_templated_arguments.py.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_delta_provider.core import RetentionError
from airflow_delta_provider.utils.coercion import (
    LONG_MAX,
    is_deferred,
    is_none,
    to_bool,
    to_byte_size,
    to_choice,
    to_int,
    to_interval,
    to_list,
    to_seconds,
    to_text,
    to_timestamp,
    validate,
)


class _Resolvable:
    """Stands for an XComArg: anything with a ``resolve`` method is resolved before execute()."""

    def resolve(self, context: Any) -> Any:
        return None


# --- deferred values and "not given" -----------------------------------------------------------


@pytest.mark.parametrize(
    "value", ["{{ ds }}", "s3://b/{{ params.t }}", "{% if x %}a{% endif %}", _Resolvable()]
)
def test_templates_and_xcom_args_are_deferred(value: Any) -> None:
    assert is_deferred(value)
    validate(value, to_int, "version")  # not checked at parse time


@pytest.mark.parametrize("value", ["plain", "", "{ not a template }", 3, None, ["{{ x }}"]])
def test_other_values_are_not_deferred(value: Any) -> None:
    assert not is_deferred(value)


@pytest.mark.parametrize("value", [None, "None", "none", " NONE "])
def test_none_and_the_rendered_none_mean_not_given(value: Any) -> None:
    assert is_none(value)


@pytest.mark.parametrize("value", ["", " ", "null", "nothing", 0, False])
def test_blank_and_falsy_values_are_not_none(value: Any) -> None:
    assert not is_none(value)


# --- booleans ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[(word, True) for word in ("true", "True", " TRUE ", "yes", "Yes", "on", "1")],
        *[(word, False) for word in ("false", "False", " FALSE ", "no", "No", "off", "0")],
        (True, True),
        (False, False),
    ],
)
def test_unambiguous_booleans(value: Any, expected: bool) -> None:
    assert to_bool(value, "dry_run") is expected


@pytest.mark.parametrize(
    "value",
    ["", " ", "\t", "None", "none", "null", "maybe", "tru", "2", "-1", "t", "y", 0, 1, 2, 0.0, None, [], {}],
)
def test_ambiguous_booleans_are_errors_naming_argument_and_value(value: Any) -> None:
    with pytest.raises(ValueError, match=r"dry_run must be true or false, got ") as caught:
        to_bool(value, "dry_run")
    assert repr(value) in str(caught.value)
    assert "render to true or false" in str(caught.value)


@pytest.mark.parametrize("value", ["", " "])
def test_a_blank_boolean_says_why_it_is_not_false(value: str) -> None:
    with pytest.raises(ValueError, match="never read as a default"):
        to_bool(value, "dry_run")


@pytest.mark.parametrize("value", ["true", "no", 1, None])
def test_untemplated_booleans_take_only_python_bools(value: Any) -> None:
    with pytest.raises(ValueError, match=r"enforce_retention_duration must be True or False, got "):
        to_bool(value, "enforce_retention_duration", strings=False)
    assert to_bool(True, "enforce_retention_duration", strings=False) is True


# --- integers ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [("42", 42), (" 7 ", 7), (3, 3), (2.0, 2), ("0", 0), (None, None), ("None", None), (LONG_MAX, LONG_MAX)],
)
def test_integers(value: Any, expected: int | None) -> None:
    assert to_int(value, "version") == expected


@pytest.mark.parametrize(
    ("value", "requirement"),
    [
        (-1, "must be an integer >= 0"),
        ("-1", "must be an integer >= 0"),
        ("soon", "must be an integer >= 0"),
        (1.5, "must be an integer >= 0"),
        ("1.5", "must be an integer >= 0"),
        ("1e3", "must be an integer >= 0"),
        (True, "must be an integer >= 0"),
        ("", "must be an integer >= 0"),
        (" ", "must be an integer >= 0"),
        (math.nan, "must be an integer >= 0"),
        (math.inf, "must be an integer >= 0"),
        ([1], "must be an integer >= 0"),
        (2**63, f"must be an integer <= {LONG_MAX}"),
        (str(2**63), f"must be an integer <= {LONG_MAX}"),
        (1e19, f"must be an integer <= {LONG_MAX}"),
    ],
)
def test_bad_integers_are_errors_naming_argument_value_and_bound(value: Any, requirement: str) -> None:
    with pytest.raises(ValueError, match=f"version {requirement}, got ") as caught:
        to_int(value, "version")
    assert repr(value) in str(caught.value)


def test_integer_bounds_and_meaning() -> None:
    with pytest.raises(ValueError, match="parts must be an integer >= 1, got 0"):
        to_int(0, "parts", minimum=1)
    with pytest.raises(ValueError, match="Delta stores it as a signed 64-bit long"):
        to_int(2**63, "app_version")
    with pytest.raises(ValueError, match="after_version='soon' is not a table version"):
        to_int("soon", "after_version", minimum=-1, meaning="a table version")
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        to_int(None, "[delta] max_commit_attempts", minimum=1, optional=False)
    assert to_int("-1", "after_version", minimum=-1) == -1


# --- choices and text ------------------------------------------------------------------------------


def test_choices() -> None:
    assert to_choice(" LITE ", "mode", ("full", "lite")) == "lite"
    with pytest.raises(ValueError, match="mode must be one of 'full', 'lite', got 'medium'"):
        to_choice("medium", "mode", ("full", "lite"))
    with pytest.raises(ValueError, match="mode must be 'append' or 'overwrite', got 'merge'"):
        to_choice("merge", "mode", ("append", "overwrite"), expected="'append' or 'overwrite'")
    for bad in ("", " ", None, 1, "None"):
        with pytest.raises(ValueError, match="mode must be one of"):
            to_choice(bad, "mode", ("full", "lite"))


def test_text() -> None:
    assert to_text(" loader ", "app_id") == "loader"
    assert to_text("None", "app_id") is None
    assert to_text(None, "app_id") is None
    assert to_text("None", "replace_where", optional=False) == "None"  # data, never "not given"
    for bad in ("", "  ", 3, ["a"]):
        with pytest.raises(ValueError, match="app_id must be a non-empty string"):
            to_text(bad, "app_id")
    with pytest.raises(ValueError, match="prefix must be a non-empty string"):
        to_text(None, "prefix", optional=False)


# --- lists -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, []),
        ([], []),
        ("[]", []),
        ("s3://b/t", ["s3://b/t"]),
        (" s3://b/t ", ["s3://b/t"]),
        ('["a", " b "]', ["a", "b"]),
        (("a", "b"), ["a", "b"]),
        ("None", ["None"]),  # a list never reads "None" as "no items"
    ],
)
def test_lists(value: Any, expected: list[str]) -> None:
    assert to_list(value, "tables") == expected


def test_lists_can_drop_repeats() -> None:
    assert to_list(["a", "b", "a"], "tables", unique=True) == ["a", "b"]
    assert to_list(["a", "b", "a"], "files") == ["a", "b", "a"]  # the core names a file listed twice


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "tables must be a string or a list of non-empty strings"),
        ("  ", "tables must be a string or a list of non-empty strings"),
        ([""], "tables must be a string or a list of non-empty strings"),
        ([" "], "tables must be a string or a list of non-empty strings"),
        ([1], "tables must be a string or a list of non-empty strings"),
        ("[1, 2]", "tables must be a string or a list of non-empty strings"),
        ({"a": "b"}, "tables must be a string or a list of non-empty strings"),
        (b"a", "tables must be a string or a list of non-empty strings"),
        (7, "tables must be a string or a list of non-empty strings"),
        ("[not json", "tables is not a valid JSON list"),
        ("['single', 'quotes']", "tables is not a valid JSON list"),
    ],
)
def test_bad_lists_are_errors_that_say_how_to_render_one(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        to_list(value, "tables")
    assert "tojson" in str(caught.value)


# --- intervals -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (36, timedelta(hours=36)),
        (0, timedelta(0)),
        (1.5, timedelta(hours=1.5)),
        ("12", timedelta(hours=12)),
        ("interval 2 days", timedelta(days=2)),
        ("1 week", timedelta(weeks=1)),
        (timedelta(minutes=5), timedelta(minutes=5)),
        (None, None),
        ("None", None),
    ],
)
def test_intervals(value: Any, expected: timedelta | None) -> None:
    assert to_interval(value, "vacuum_interval") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (-3, r"retention=-3 \(hours\) is negative"),
        ("-3", r"retention='-3' \(hours\) is negative"),
        (timedelta(hours=-1), r"retention=datetime.timedelta\(days=-1, seconds=82800\) is negative"),
        ([7], r"retention must be a timedelta.*got \[7\]"),
        (True, "retention must be a timedelta.*got True"),
        ("", "retention must be a timedelta.*got ''"),
        (" ", "retention must be a timedelta.*got ' '"),
        (math.nan, r"retention=nan \(hours\) is not a number of hours"),
        # Out of range, in every form: one range check (the core's), at most 365,000 days.
        ("inf", r"retention='inf' \(hours\) is too long an interval: at most 365000 days"),
        (1e20, r"retention=1e\+20 \(hours\) is too long an interval: at most 365000 days"),
        (10**8, r"retention=100000000 \(hours\) is too long an interval"),
        ("100000000", r"retention='100000000' \(hours\) is too long an interval"),
        (timedelta(days=3_000_000), r"retention=datetime.timedelta\(days=3000000\) is too long an interval"),
        (timedelta.max, r"retention=datetime.timedelta\(days=999999999, .*is too long an interval"),
        ("interval 100000000000 weeks", "retention='interval 100000000000 weeks' is too long an interval"),
        ("interval 365001 days", "retention='interval 365001 days' is too long an interval"),
    ],
)
def test_bad_intervals_are_errors(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        to_interval(value, "retention")


@pytest.mark.parametrize("value", ["fortnightly", "interval 1 month", "7 dayz", "interval"])
def test_strings_that_are_no_delta_interval_are_refused_by_the_core_parser(value: str) -> None:
    with pytest.raises(RetentionError, match="vacuum_interval"):
        to_interval(value, "vacuum_interval")


def test_a_required_interval_is_not_none() -> None:
    with pytest.raises(ValueError, match="retention must be a timedelta"):
        to_interval(None, "retention", optional=False)


# --- seconds and timestamps -------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [(5, 5.0), ("0.5", 0.5), (timedelta(minutes=1), 60.0)])
def test_seconds(value: Any, expected: float) -> None:
    assert to_seconds(value, "poll_interval") == expected


@pytest.mark.parametrize("value", [0, -1, "", "soon", math.nan, math.inf, True, None, timedelta(0)])
def test_bad_seconds(value: Any) -> None:
    with pytest.raises(ValueError, match="poll_interval must be a positive number of seconds"):
        to_seconds(value, "poll_interval")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 11, 1, tzinfo=UTC), 1793491200000),
        (datetime(2026, 11, 1), 1793491200000),  # naive = UTC
        ("2026-11-01T00:00:00Z", 1793491200000),
        ("2026-11-01T01:00:00+01:00", 1793491200000),
        (1793491200000, 1793491200000),
        ("1793491200000", 1793491200000),
        (None, None),
        ("None", None),
    ],
)
def test_timestamps(value: Any, expected: int | None) -> None:
    assert to_timestamp(value, "after_timestamp") == expected


@pytest.mark.parametrize("value", ["", " ", "yesterday", "2026-13-01", True, 2**63, [1], 1.5])
def test_bad_timestamps(value: Any) -> None:
    with pytest.raises(ValueError, match="after_timestamp must be"):
        to_timestamp(value, "after_timestamp")


def test_bad_values_are_shown_redacted() -> None:
    with pytest.raises(ValueError) as caught:
        to_bool("s3://KEY:sup3r-s3cret@bucket/t", "dry_run")
    assert "sup3r-s3cret" not in str(caught.value)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (134217728, 134217728),
        ("128mb", 128 * 1024**2),
        (" 1TB ", 1024**4),
        ("1g", 1024**3),
        (None, None),
        ("None", None),
    ],
)
def test_sizes(value: Any, expected: int | None) -> None:
    assert to_byte_size(value, "target_file_size") == expected


@pytest.mark.parametrize(
    ("value", "message"),
    [
        # A blank value is what a template renders when it found nothing: never "the default".
        ("", r"target_file_size must be a size in bytes .*got ''.*An empty value is never read as a default"),
        ("   ", r"target_file_size must be a size in bytes .*got '   '"),
        (True, r"target_file_size must be a size in bytes .*got True"),
        (1.5, r"target_file_size must be a size in bytes .*got 1\.5"),
        ("1.5g", r"target_file_size='1\.5g' is not a size in bytes \(fractions are not supported\)"),
        ("128 mb", r"target_file_size='128 mb' is not a size in bytes"),
        (0, r"target_file_size=0 is not a positive size"),
        ("8192p", r"target_file_size='8192p' is larger than a Delta long"),
    ],
)
def test_bad_sizes_are_errors(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        to_byte_size(value, "target_file_size")
    with pytest.raises(ValueError, match="target_file_size"):
        to_byte_size(value, "target_file_size", optional=False)
