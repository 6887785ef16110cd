"""Argument coercion: one set of rules for every operator, sensor and trigger of the provider.

Arguments come as Python values or as strings rendered by templates (``""`` or ``"None"`` when a
template found nothing). Each function turns one kind of argument into its value, or raises a
:class:`ValueError` that names the argument, shows the (redacted) value and says what to pass. A
blank string is never a value, so a template that rendered nothing cannot run a destructive task
as if given a default. The rules per kind are in docs/operators.md ("Templated arguments").
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.utils import redact

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "BOOLEAN_WORDS",
    "LONG_MAX",
    "is_deferred",
    "is_deferred_inside",
    "is_none",
    "to_app_id",
    "to_app_version",
    "to_bool",
    "to_byte_size",
    "to_choice",
    "to_data_retention",
    "to_int",
    "to_interval",
    "to_list",
    "to_seconds",
    "to_text",
    "to_timestamp",
    "validate",
]

#: The largest value of Delta's ``long`` (versions, txn versions, timestamps in the log).
LONG_MAX = 2**63 - 1
#: The strings a boolean argument takes (Python's ``configparser`` words), and their values.
BOOLEAN_WORDS = {
    "true": True,
    "yes": True,
    "on": True,
    "1": True,
    "false": False,
    "no": False,
    "off": False,
    "0": False,
}

_BLANK = " An empty value is never read as a default: it is what a template renders when it found nothing."


def is_deferred(value: Any) -> bool:
    """Whether a value is known only when the task runs: a Jinja template, or an ``XComArg``."""
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    # XComArg and other lazily resolved arguments (``ResolveMixin``) resolve before execute().
    return callable(getattr(value, "resolve", None))


def is_none(value: Any) -> bool:
    """Whether a value says "not given": None, or the string ``"None"`` a template renders for it."""
    return value is None or (isinstance(value, str) and value.strip().lower() == "none")


def validate(value: Any, coerce: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    """Check an argument at DAG-parse time with ``coerce``, unless it is deferred (then at run time)."""
    if not is_deferred(value):
        coerce(value, *args, **kwargs)


def _shown(value: Any) -> str:
    return redact(repr(value))


def _blank(value: Any) -> bool:
    return isinstance(value, str) and not value.strip()


def _refuse(
    name: str, value: Any, requirement: str, advice: str, *, meaning: str | None = None
) -> ValueError:
    """The error for a bad argument: what it must be, what it was, and what to do."""
    shown = _shown(value)
    message = f"{name} {requirement}, got {shown}"
    if meaning:
        message += f": {name}={shown} is not {meaning}"
    message += f". {advice}"
    if _blank(value):
        message += _BLANK
    return ValueError(message)


def to_bool(value: Any, name: str, *, strings: bool = True) -> bool:
    """A boolean argument.

    :param value: the argument as given or rendered.
    :param name: the argument's name, for the error.
    :param strings: accept the words of :data:`BOOLEAN_WORDS` (templated arguments); False for
        arguments that are not templated, which take only ``True`` or ``False``.
    :raises ValueError: anything else, a blank string and ``"None"`` included.
    """
    if isinstance(value, bool):
        return value
    if not strings:
        raise _refuse(name, value, "must be True or False", "Pass a Python bool.")
    if isinstance(value, str) and value.strip().lower() in BOOLEAN_WORDS:
        return BOOLEAN_WORDS[value.strip().lower()]
    raise _refuse(
        name,
        value,
        "must be true or false",
        "Pass True or False; a template must render to true or false (yes/no, on/off and 1/0 are "
        "accepted too, in any case).",
    )


def to_int(
    value: Any,
    name: str,
    *,
    minimum: int = 0,
    maximum: int = LONG_MAX,
    optional: bool = True,
    meaning: str | None = None,
) -> int | None:
    """An integer argument within ``[minimum, maximum]``; None when optional and not given.

    :param meaning: what the number is (e.g. ``"a table version"``), added to the error.
    :raises ValueError: not an integer, out of bounds, a blank string, or None when required.
    """
    advice = "Pass a whole number; a template must render to one" + (
        " (or to None for the default)." if optional else "."
    )
    if is_none(value):
        if optional:
            return None
        raise _refuse(name, value, f"must be an integer >= {minimum}", advice, meaning=meaning)
    number: int | None = None
    if isinstance(value, str) and not _blank(value):
        try:
            number = int(value.strip())
        except ValueError:
            number = None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        try:
            number = int(value) if int(value) == value else None
        except (OverflowError, ValueError):  # inf, nan
            number = None
    if number is None or number < minimum:
        raise _refuse(name, value, f"must be an integer >= {minimum}", advice, meaning=meaning)
    if number > maximum:
        raise _refuse(
            name,
            value,
            f"must be an integer <= {maximum}",
            advice + (" Delta stores it as a signed 64-bit long." if maximum == LONG_MAX else ""),
            meaning=meaning,
        )
    return number


def to_choice(value: Any, name: str, choices: Sequence[str], *, expected: str | None = None) -> str:
    """One of ``choices`` (compared lower-cased, spaces stripped).

    :param expected: how the error names the choices; default ``one of 'a', 'b'``.
    :raises ValueError: anything else.
    """
    if isinstance(value, str) and value.strip().lower() in choices:
        return value.strip().lower()
    described = expected or "one of " + ", ".join(repr(c) for c in choices)
    raise _refuse(name, value, f"must be {described}", "Pass one of them; a template must render to one.")


def to_text(value: Any, name: str, *, optional: bool = True) -> str | None:
    """A non-blank string argument, stripped; None when optional and not given (None or ``"None"``).

    :raises ValueError: not a string, blank, or not given when required.
    """
    if optional and is_none(value):
        return None
    if not isinstance(value, str) or _blank(value):
        raise _refuse(
            name,
            value,
            "must be a non-empty string",
            "Pass a string; a template must render to one"
            + (" (or to None for the default)." if optional else "."),
        )
    return value.strip()


def to_list(value: Any, name: str, *, unique: bool = False) -> list[str]:
    """A list of non-empty strings from a list, one string, or a JSON list rendered by a template.

    None gives ``[]``; the string ``"None"`` is one item like any other string.

    :param unique: drop repeated items, keeping the first.
    :raises ValueError: a blank string, a string that starts like a JSON list but is none, or
        items that are not non-empty strings.
    """
    advice = (
        "Pass a list of strings or one string; a template must render a JSON list (e.g. "
        "'{{ value | tojson }}') or one string."
    )
    if value is None:
        return []
    items: Any = value
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise _refuse(name, value, "must be a string or a list of non-empty strings", advice)
        if not text.startswith("["):
            return [text]
        try:
            items = json.loads(text)
        except ValueError:
            raise ValueError(f"{name} is not a valid JSON list: {_shown(value)}. {advice}") from None
    if (
        isinstance(items, str | bytes | Mapping)
        or not isinstance(items, Sequence)
        or not all(isinstance(item, str) and item.strip() for item in items)
    ):
        raise _refuse(name, value, "must be a string or a list of non-empty strings", advice)
    items = [item.strip() for item in items]
    return list(dict.fromkeys(items)) if unique else items


def to_interval(value: Any, name: str, *, optional: bool = True) -> timedelta | None:
    """A duration from a timedelta, a number of hours, or a Delta interval string, parsed and
    range-checked by the core's one interval parser
    (:func:`airflow_delta_provider.core.protocol.table_config.to_interval`).

    :raises ValueError: a blank string, a value of another kind, or not given when required.
    :raises RetentionError: a negative, too long or unparseable interval (the core says why).
    """
    kinds = "must be a timedelta, a Delta interval such as 'interval 7 days', or a number of hours;"
    if _not_given(value, name, (timedelta, int, float, str), kinds, optional=optional):
        return None
    from airflow_delta_provider.core.protocol import to_interval as parse_interval_argument

    return parse_interval_argument(value.strip() if isinstance(value, str) else value, name=name)


def to_byte_size(value: Any, name: str, *, optional: bool = True) -> int | None:
    """A positive size in bytes from an ``int`` or a size string such as ``"128mb"`` or ``"1tb"``,
    parsed by the core's one size parser (Spark's units:
    :func:`airflow_delta_provider.core.protocol.table_config.parse_byte_size`); None when optional and not
    given.

    :raises ValueError: a blank string, a value of another kind, or not given when required.
    :raises RetentionError: a string that is no size, or a size out of range (the core says why).
    """
    requirement = "must be a size in bytes (an integer, or e.g. '128mb' or '1g')"
    if _not_given(value, name, (int, str), requirement, optional=optional):
        return None
    from airflow_delta_provider.core.protocol import to_byte_size as parse_size_argument

    return parse_size_argument(value, name=name)


def to_data_retention(value: Any, name: str) -> Any:
    """A data retention policy (a ``DataRetentionPolicy``) from a mapping or its JSON text, parsed by
    the core's one policy parser; None when not given (None or ``"None"``).

    :raises ValueError: a blank string, a bool, or a value of another kind.
    :raises RetentionError: a malformed policy (the core names the key and the value).
    """
    requirement = 'must be a policy such as {"column": "ds", "keep": "interval 90 days"} (or its JSON)'
    if _not_given(value, name, (Mapping, str), requirement, optional=True):
        return None
    from airflow_delta_provider.core.protocol import parse_data_retention

    return parse_data_retention(value, name=name)


def is_deferred_inside(value: Any) -> bool:
    """Whether a value, or a value of a mapping or a list it holds, is known only at run time."""
    if isinstance(value, Mapping):
        return any(is_deferred_inside(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(is_deferred_inside(v) for v in value)
    return is_deferred(value)


def _not_given(value: Any, name: str, kinds: tuple[type, ...], requirement: str, *, optional: bool) -> bool:
    """For an argument the core parses: True when it is not given (None or ``"None"``) and
    optional; False when it is of one of ``kinds``, to be parsed.

    :raises ValueError: not given when required, a blank string, a bool, or another kind.
    """
    advice = "Pass one; a template must render to one" + (
        " (or to None for the default)." if optional else "."
    )
    if is_none(value):
        if optional:
            return True
        raise _refuse(name, value, requirement, advice)
    if isinstance(value, bool) or not isinstance(value, kinds) or _blank(value):
        raise _refuse(name, value, requirement, advice)
    return False


def to_seconds(value: Any, name: str) -> float:
    """A positive, finite number of seconds from a number, a numeric string or a timedelta.

    :raises ValueError: anything else, zero and negative values included.
    """
    seconds: float | None = None
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and not _blank(value):
        try:
            seconds = float(value.strip())
        except ValueError:
            seconds = None
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise _refuse(
            name, value, "must be a positive number of seconds", "Pass a number of seconds greater than 0."
        )
    return seconds


def to_timestamp(value: Any, name: str, *, optional: bool = True) -> int | None:
    """Milliseconds since the epoch from a datetime, an ISO-8601 string or a number of milliseconds.

    :raises ValueError: anything else, a blank string, or not given when required.
    """
    advice = (
        "Pass a datetime, an ISO-8601 string such as '2026-11-01T00:00:00Z' or milliseconds since "
        "the epoch; a template must render to one" + (" (or to None)." if optional else ".")
    )
    requirement = "must be a point in time"
    if is_none(value):
        if optional:
            return None
        raise _refuse(name, value, requirement, advice)
    numeric = isinstance(value, int) or (isinstance(value, str) and value.strip().lstrip("-").isdigit())
    if numeric and not isinstance(value, bool):
        return to_int(value, name, minimum=-LONG_MAX, optional=False)
    if isinstance(value, str | datetime) and not _blank(value):
        from airflow_delta_provider.core.log import to_millis

        try:
            millis = to_millis(value)
        except (TypeError, ValueError, OverflowError, OSError):
            raise _refuse(name, value, requirement, advice) from None
        if abs(millis) <= LONG_MAX:
            return millis
    raise _refuse(name, value, requirement, advice)


# --- Delta's txn identifiers -------------------------------------------------------------

#: What an app_version is, for its errors.
_TXN_VERSION = "a Delta txnVersion (a non-negative integer, stored as a signed 64-bit long)"


def to_app_id(value: Any) -> str | None:
    """A Delta ``txnAppId`` (the ``app_id`` argument); None (or ``"None"``) for the default.

    :raises ValueError: not a string, or blank.
    """
    return to_text(value, "app_id")


def to_app_version(value: Any) -> int | None:
    """A Delta ``txnVersion`` (the ``app_version`` argument) from an int or a rendered template
    (``"42"``); None (or ``"None"``) for the default.

    :raises ValueError: not a whole number in ``[0, 2**63 - 1]``.
    """
    return to_int(value, "app_version", minimum=0, maximum=LONG_MAX, meaning=_TXN_VERSION)
