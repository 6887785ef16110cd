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
    "hr": "hour",
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
        number, unit = float(match[1]), _unit(match[2])
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


def _unit(word: str) -> str:
    """The unit a word names: ``days`` -> ``day``, ``mins`` -> ``minute``, ``ms`` -> ``millisecond``."""
    unit = _ALIASES.get(word, word)
    if unit not in _UNITS and word.endswith("s"):
        unit = _ALIASES.get(word[:-1], word[:-1])
    return unit


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


ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
DEFAULT_CHECKPOINT_INTERVAL = 10


@dataclass(frozen=True)
class ResolvedSetting:
    """A non-interval table setting (checkpoint interval, cleanup switch) and where it came from.

    :param name: the Delta property.
    :param value: the resolved value.
    :param source: ``argument``, ``table property``, ``provider config`` or ``default``.
    """

    name: str
    value: Any
    source: str

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "value": self.value, "source": self.source}


def _first(
    name: str,
    explicit: Any,
    properties: Mapping[str, str | None] | None,
    provider_defaults: Mapping[str, Any] | None,
) -> tuple[Any, str] | None:
    """The first value set, in precedence order, with its source; None when nothing sets it."""
    for value, source in (
        (explicit, ARGUMENT),
        ((properties or {}).get(name), TABLE_PROPERTY),
        ((provider_defaults or {}).get(name), PROVIDER_CONFIG),
    ):
        if value is not None and value != "":
            return value, source
    return None


def _where(name: str, source: str) -> str:
    return f"[delta] default for {name}" if source == PROVIDER_CONFIG else name


def resolve_checkpoint_interval(
    *,
    explicit: int | str | None = None,
    properties: Mapping[str, str | None] | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
) -> ResolvedSetting:
    """``delta.checkpointInterval`` (Delta's default 10): a positive whole number of commits.

    :raises RetentionError: the value is not a positive integer; the message names key and value.
    """
    found = _first(CHECKPOINT_INTERVAL, explicit, properties, provider_defaults)
    if found is None:
        return ResolvedSetting(CHECKPOINT_INTERVAL, DEFAULT_CHECKPOINT_INTERVAL, DEFAULT)
    value, source = found
    try:
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ValueError
        number = int(str(value).strip()) if not isinstance(value, int | float) else int(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise RetentionError(
            f"{_where(CHECKPOINT_INTERVAL, source)}={value!r} is not a positive whole number of commits."
        )
    return ResolvedSetting(CHECKPOINT_INTERVAL, number, source)


def resolve_expired_log_cleanup(
    *,
    explicit: bool | str | None = None,
    properties: Mapping[str, str | None] | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
) -> ResolvedSetting:
    """``delta.enableExpiredLogCleanup`` (Delta's default true): whether cleanup follows checkpoints.

    :raises RetentionError: the value is not ``true`` or ``false``.
    """
    found = _first(ENABLE_EXPIRED_LOG_CLEANUP, explicit, properties, provider_defaults)
    if found is None:
        return ResolvedSetting(ENABLE_EXPIRED_LOG_CLEANUP, True, DEFAULT)
    value, source = found
    if isinstance(value, bool):
        return ResolvedSetting(ENABLE_EXPIRED_LOG_CLEANUP, value, source)
    text = str(value).strip().lower()
    if text not in ("true", "false"):
        raise RetentionError(f"{_where(ENABLE_EXPIRED_LOG_CLEANUP, source)}={value!r} is not true or false.")
    return ResolvedSetting(ENABLE_EXPIRED_LOG_CLEANUP, text == "true", source)


@dataclass(frozen=True)
class RetentionPolicy:
    """Every maintenance setting of a table, resolved, with the source of each.

    Indexing by Delta property works too: ``policy["delta.logRetentionDuration"]``.
    """

    log_retention: ResolvedRetention
    deleted_file_retention: ResolvedRetention
    set_transaction_retention: ResolvedRetention
    checkpoint_interval: ResolvedSetting
    enable_expired_log_cleanup: ResolvedSetting

    def settings(self) -> dict[str, ResolvedRetention | ResolvedSetting]:
        """The settings keyed by Delta property."""
        return {
            s.name: s
            for s in (
                self.log_retention,
                self.deleted_file_retention,
                self.set_transaction_retention,
                self.checkpoint_interval,
                self.enable_expired_log_cleanup,
            )
        }

    def __getitem__(self, name: str) -> ResolvedRetention | ResolvedSetting:
        return self.settings()[name]

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {name: setting.to_dict() for name, setting in self.settings().items()}


def resolve_all(
    properties: Mapping[str, str | None] | None = None,
    provider_defaults: Mapping[str, Any] | None = None,
    *,
    log_retention: timedelta | str | float | None = None,
    deleted_file_retention: timedelta | str | float | None = None,
    set_transaction_retention: timedelta | str | float | None = None,
    checkpoint_interval: int | str | None = None,
    enable_expired_log_cleanup: bool | str | None = None,
) -> RetentionPolicy:
    """Resolve every maintenance setting at once (explicit argument > table property > provider
    config > Delta default).

    Logs a warning, as Delta does, when the deleted-file retention exceeds the log retention:
    VACUUM would then keep data files of versions whose log is already gone, so time travel to
    them fails anyway (Delta refuses such properties when
    ``vacuum.enforceDeletedFileAndLogRetentionDurationCompatibility`` is on).

    :param properties: the table's properties.
    :param provider_defaults: provider-wide values keyed by Delta property (the ``[delta]`` section).
    :raises RetentionError: a value is not valid; the message names the key and the value.
    """

    def interval(name: str, explicit: timedelta | str | float | None) -> ResolvedRetention:
        return resolve_retention(
            name, explicit=explicit, properties=properties, provider_defaults=provider_defaults
        )

    policy = RetentionPolicy(
        log_retention=interval(LOG_RETENTION, log_retention),
        deleted_file_retention=interval(DELETED_FILE_RETENTION, deleted_file_retention),
        set_transaction_retention=interval(SET_TRANSACTION_RETENTION, set_transaction_retention),
        checkpoint_interval=resolve_checkpoint_interval(
            explicit=checkpoint_interval, properties=properties, provider_defaults=provider_defaults
        ),
        enable_expired_log_cleanup=resolve_expired_log_cleanup(
            explicit=enable_expired_log_cleanup, properties=properties, provider_defaults=provider_defaults
        ),
    )
    logs, files = policy.log_retention, policy.deleted_file_retention
    if logs.value is not None and files.value is not None and files.value > logs.value:
        log.warning(
            "%s (%s, from the %s) is longer than %s (%s, from the %s): VACUUM keeps data files for versions "
            "whose log may already be cleaned up, so time travel to them fails anyway. Delta requires the "
            "deleted-file retention to be at most the log retention.",
            DELETED_FILE_RETENTION,
            files.value,
            files.source,
            LOG_RETENTION,
            logs.value,
            logs.source,
        )
    return policy
