"""Delta's retention settings: interval parsing and the properties that hold them."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import RetentionError

if TYPE_CHECKING:
    from collections.abc import Mapping

log = logging.getLogger(__name__)

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


# --- resolution: argument > table property > provider config > Delta default ---------------

CHECKPOINT_INTERVAL = "delta.checkpointInterval"

ARGUMENT = "argument"
TABLE_PROPERTY = "table property"
PROVIDER_CONFIG = "provider config"
DEFAULT = "default"


@dataclass(frozen=True)
class ResolvedRetention:
    """A retention setting and where its value came from.

    :param name: the Delta property (``delta.logRetentionDuration`` ...).
    :param value: the interval; None when nothing sets it and Delta has no default.
    :param source: ``argument``, ``table property``, ``provider config`` or ``default``.
    """

    name: str
    value: timedelta | None
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "seconds": self.value.total_seconds() if self.value is not None else None,
            "source": self.source,
        }


def to_interval(value: timedelta | str | float, *, name: str) -> timedelta:
    """An interval from a ``timedelta``, a Delta interval string, or a number of hours.

    :raises RetentionError: naming ``name`` and the value.
    """
    if isinstance(value, timedelta):
        if value < timedelta():
            raise RetentionError(f"{name}={value!r} is negative.")
        return value
    if isinstance(value, bool):
        raise RetentionError(f"{name}={value!r} is not an interval.")
    if isinstance(value, int | float):
        if value < 0:
            raise RetentionError(f"{name}={value!r} hours is negative.")
        return timedelta(hours=value)
    if isinstance(value, str):
        text = value.strip()
        try:
            return to_interval(float(text), name=name)
        except ValueError:
            return parse_interval(text, name=name)
    raise RetentionError(f"{name}={value!r} is not an interval; use e.g. 'interval 7 days' or a timedelta.")


def resolve_retention(
    name: str,
    *,
    explicit: timedelta | str | float | None = None,
    properties: Mapping[str, str | None] | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
) -> ResolvedRetention:
    """Resolve one retention setting: explicit argument > table property > provider config > Delta default.

    :param name: the Delta property, e.g. :data:`LOG_RETENTION`.
    :param explicit: the caller's value (``timedelta``, interval string or hours).
    :param properties: the table's properties.
    :param provider_defaults: provider-wide values keyed by Delta property (the Airflow
        ``[delta]`` section); the core never reads Airflow configuration itself.
    :raises RetentionError: a value is not an interval; the message names the key and value.
    """
    if explicit is not None and explicit != "":
        return ResolvedRetention(name, to_interval(explicit, name=name), ARGUMENT)
    value = (properties or {}).get(name)
    if value not in (None, ""):
        return ResolvedRetention(name, parse_interval(str(value), name=name), TABLE_PROPERTY)
    value = (provider_defaults or {}).get(name)
    if value not in (None, ""):
        return ResolvedRetention(
            name, to_interval(value, name=f"[delta] default for {name}"), PROVIDER_CONFIG
        )
    return ResolvedRetention(name, DEFAULTS.get(name), DEFAULT)


def resolve_all(
    properties: Mapping[str, str | None] | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
    *,
    log_retention: timedelta | str | None = None,
    deleted_file_retention: timedelta | str | None = None,
) -> dict[str, ResolvedRetention]:
    """Every retention setting of a table, resolved; warns as Delta does when the file
    retention exceeds the log retention (time travel to versions whose files VACUUM keeps
    would then fail for lack of their log)."""
    resolved = {
        LOG_RETENTION: resolve_retention(
            LOG_RETENTION, explicit=log_retention, properties=properties, provider_defaults=provider_defaults
        ),
        DELETED_FILE_RETENTION: resolve_retention(
            DELETED_FILE_RETENTION,
            explicit=deleted_file_retention,
            properties=properties,
            provider_defaults=provider_defaults,
        ),
        SET_TRANSACTION_RETENTION: resolve_retention(
            SET_TRANSACTION_RETENTION, properties=properties, provider_defaults=provider_defaults
        ),
    }
    logs, files = resolved[LOG_RETENTION].value, resolved[DELETED_FILE_RETENTION].value
    if logs is not None and files is not None and files > logs:
        log.warning(
            "%s (%s, from the %s) is longer than %s (%s, from the %s): versions whose data files VACUUM "
            "keeps may already have lost their log. Delta requires the file retention to be at most the log "
            "retention.",
            DELETED_FILE_RETENTION,
            files,
            resolved[DELETED_FILE_RETENTION].source,
            LOG_RETENTION,
            logs,
            resolved[LOG_RETENTION].source,
        )
    return resolved
