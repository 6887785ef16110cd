"""Delta's retention settings: interval parsing and the properties that hold them."""

from __future__ import annotations

import re
from datetime import timedelta

from airflow_delta_provider.core.errors import RetentionError

#: Table properties holding retention intervals, with Delta's defaults (None: no default).
LOG_RETENTION = "delta.logRetentionDuration"
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
SET_TRANSACTION_RETENTION = "delta.setTransactionRetentionDuration"

DEFAULTS: dict[str, timedelta | None] = {
    LOG_RETENTION: timedelta(days=30),
    DELETED_FILE_RETENTION: timedelta(weeks=1),
    SET_TRANSACTION_RETENTION: None,
}

_UNITS = {
    "nanosecond": timedelta(microseconds=0.001),
    "microsecond": timedelta(microseconds=1),
    "millisecond": timedelta(milliseconds=1),
    "second": timedelta(seconds=1),
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
}
_ALIASES = {
    "ns": "nanosecond",
    "us": "microsecond",
    "ms": "millisecond",
    "s": "second",
    "sec": "second",
    "m": "minute",
    "min": "minute",
    "h": "hour",
    "d": "day",
    "w": "week",
}
_TERM_RE = re.compile(r"(-?\d+(?:\.\d+)?)\s*([a-z]+)")


def parse_interval(text: str, *, name: str = "interval") -> timedelta:
    """Parse a Delta interval such as ``interval 7 days``, ``168 hours`` or ``1 week 2 days``.

    Delta stores these as Spark ``CalendarInterval`` strings; months and years are refused
    because their length in time is not fixed (Delta refuses them too).

    :param text: the property value.
    :param name: the property name, for the error message.
    :raises RetentionError: the value is not an interval.
    """
    value = text.strip().lower()
    value = value.removeprefix("interval").strip()
    if not value:
        raise RetentionError(f"{name} is empty; expected an interval such as 'interval 7 days'.")
    total = timedelta()
    position = 0
    for match in _TERM_RE.finditer(value):
        if value[position : match.start()].strip():
            break
        number, unit = float(match[1]), match[2]
        unit = _ALIASES.get(unit, unit.removesuffix("s") if unit.endswith("s") and len(unit) > 2 else unit)
        if unit not in _UNITS:
            raise RetentionError(
                f"{name}={text!r} uses the unit {match[2]!r}; use weeks, days, hours, minutes or seconds."
            )
        total += _UNITS[unit] * number
        position = match.end()
    if position == 0 or value[position:].strip():
        raise RetentionError(f"{name}={text!r} is not an interval; expected e.g. 'interval 7 days'.")
    if total < timedelta():
        raise RetentionError(f"{name}={text!r} is negative.")
    return total


def property_interval(configuration: dict[str, str | None] | None, key: str) -> timedelta | None:
    """The interval a table property sets, else Delta's default for it (None when it has none)."""
    value = (configuration or {}).get(key)
    if value is None:
        return DEFAULTS.get(key)
    return parse_interval(value, name=key)
