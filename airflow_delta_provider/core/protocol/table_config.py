"""TableConfig: a table's properties, typed, parsed once, each with where its value came from.

As delta-kernel-rs and pyiceberg's ``TableProperties``: every property the core acts on is declared
once (its Delta name, the ``[delta]`` option that may default it, its type and Delta's default), and
resolved in one order: ``argument`` > ``table property`` > ``provider config`` (passed in; the core
never reads Airflow configuration) > ``default``. Values are parsed on first use, and a bad one
raises an error naming the key, the value and its source (docs/maintenance.md, "Retention policies").
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from airflow_delta_provider.core.errors import InvalidTablePropertyError, RetentionError
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "CHECKPOINT_INTERVAL",
    "DATA_RETENTION",
    "DELETED_FILE_RETENTION",
    "ENABLE_EXPIRED_LOG_CLEANUP",
    "LOG_RETENTION",
    "PROPERTIES",
    "PROVIDER_OPTIONS",
    "SET_TRANSACTION_RETENTION",
    "TARGET_FILE_SIZE",
    "DataRetentionPolicy",
    "Setting",
    "Source",
    "TableConfig",
    "parse_byte_size",
    "parse_data_retention",
    "parse_interval",
    "to_byte_size",
    "to_interval",
]

log = get_logger(__name__)

T = TypeVar("T")

LOG_RETENTION = "delta.logRetentionDuration"
DELETED_FILE_RETENTION = "delta.deletedFileRetentionDuration"
SET_TRANSACTION_RETENTION = "delta.setTransactionRetentionDuration"
CHECKPOINT_INTERVAL = "delta.checkpointInterval"
ENABLE_EXPIRED_LOG_CLEANUP = "delta.enableExpiredLogCleanup"
APPEND_ONLY = "delta.appendOnly"
ISOLATION_LEVEL = "delta.isolationLevel"
ENABLE_IN_COMMIT_TIMESTAMPS = "delta.enableInCommitTimestamps"
IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION = "delta.inCommitTimestampEnablementVersion"
CHECKPOINT_WRITE_STATS_AS_JSON = "delta.checkpoint.writeStatsAsJson"
CHECKPOINT_WRITE_STATS_AS_STRUCT = "delta.checkpoint.writeStatsAsStruct"
CHECKPOINT_POLICY = "delta.checkpointPolicy"
COLUMN_MAPPING_MODE = "delta.columnMapping.mode"
CHECKPOINT_PROTECTION_BEFORE_VERSION = "delta.requireCheckpointProtectionBeforeVersion"
UNIVERSAL_FORMATS = "delta.universalFormat.enabledFormats"
TARGET_FILE_SIZE = "delta.targetFileSize"
ENABLE_CHANGE_DATA_FEED = "delta.enableChangeDataFeed"
ENABLE_DELETION_VECTORS = "delta.enableDeletionVectors"
ENABLE_ROW_TRACKING = "delta.enableRowTracking"
ENABLE_TYPE_WIDENING = "delta.enableTypeWidening"
ENABLE_ICEBERG_COMPAT_V1 = "delta.enableIcebergCompatV1"
ENABLE_ICEBERG_COMPAT_V2 = "delta.enableIcebergCompatV2"
#: The provider's own table property: a data retention policy that travels with the table (not
#: ``delta.``: Delta refuses unknown properties in its namespace).
DATA_RETENTION = "airflow.dataRetention"
#: OPTIMIZE's default target (and small-file threshold): Delta's ``optimize.maxFileSize`` and
#: ``optimize.minFileSize``, both 1 GiB. (OSS delta-spark reads no table property for it; delta-rs
#: and Databricks read ``delta.targetFileSize``, which this core honours too.)
DEFAULT_TARGET_FILE_SIZE = 1024**3


class Source(enum.StrEnum):
    """Where a setting's value came from, highest precedence first."""

    ARGUMENT = "argument"
    TABLE_PROPERTY = "table property"
    PROVIDER_CONFIG = "provider config"
    DEFAULT = "default"


@dataclass(frozen=True)
class Setting(Generic[T]):
    """A resolved setting.

    :param name: the Delta property (``delta.logRetentionDuration`` ...).
    :param value: the typed value; None when nothing sets it and Delta has no default.
    :param source: where the value came from.
    """

    name: str
    value: T
    source: Source

    def describe(self) -> str:
        """``delta.logRetentionDuration (interval 30 days; default)``: intervals in Delta's words."""
        value = interval_text(self.value) if isinstance(self.value, timedelta) else self.value
        return f"{self.name} ({value}; {self.source})"

    def to_dict(self) -> dict[str, Any]:
        """JSON-native: intervals as ``seconds``, other values as ``value``."""
        if isinstance(self.value, timedelta) or (self.value is None and self.name in _INTERVALS):
            seconds = self.value.total_seconds() if isinstance(self.value, timedelta) else None
            return {"name": self.name, "seconds": seconds, "source": str(self.source)}
        value = self.value.to_dict() if isinstance(self.value, DataRetentionPolicy) else self.value
        return {"name": self.name, "value": value, "source": str(self.source)}


# --- value parsers ---------------------------------------------------------------------------

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
#: Delta's checkpoint interval is a Java int.
_MAX_INT = 2**31 - 1
#: The largest interval anyone means (and that datetime arithmetic survives).
_MAX_INTERVAL = timedelta(days=365_000)


def _unit(word: str) -> str:
    """The unit a word names: ``days`` -> ``day``, ``mins`` -> ``minute``, ``ms`` -> ``millisecond``."""
    unit = _ALIASES.get(word, word)
    if unit not in _UNITS and word.endswith("s"):
        unit = _ALIASES.get(word[:-1], word[:-1])
    return unit


def parse_interval(text: str, *, name: str = "interval") -> timedelta:
    """Parse a Delta interval such as ``interval 7 days``, ``168 hours`` or ``1 week 2 days``.

    Delta stores these as Spark ``CalendarInterval`` strings; months and years are refused
    because their length in time is not fixed (Delta refuses them too).

    :param text: the value.
    :param name: what the value is, for the error message.
    :raises RetentionError: the value is not an interval.
    """
    value = text.strip().lower().removeprefix("interval").strip()
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
        try:
            total += _UNITS[unit] * number
        except OverflowError:
            return _in_range(None, name, repr(text))
        position = match.end()
    if position == 0 or value[position:].strip():
        raise RetentionError(f"{name}={text!r} is not an interval; expected e.g. 'interval 7 days'.")
    return _in_range(total, name, repr(text))


def _in_range(total: timedelta | None, name: str, shown: str) -> timedelta:
    """The one range check of every interval, whatever its form: from zero to
    :data:`_MAX_INTERVAL` (None: too long for a ``timedelta`` at all).

    :raises RetentionError: naming ``name`` and the value as given (``shown``).
    """
    if total is not None and total < timedelta():
        raise RetentionError(f"{name}={shown} is negative; use an interval of zero or more.")
    if total is None or total > _MAX_INTERVAL:
        raise RetentionError(
            f"{name}={shown} is too long an interval: at most {_MAX_INTERVAL.days} days (about 1,000 years), "
            f"so that 'now - interval' is still a date."
        )
    return total


def to_interval(value: timedelta | str | float, *, name: str) -> timedelta:
    """An interval from a ``timedelta``, a number of hours, or a Delta interval string.

    :raises RetentionError: naming ``name`` and the value.
    """
    if isinstance(value, timedelta):
        return _in_range(value, name, repr(value))
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _hours(value, name, f"{value!r} (hours)")
    if isinstance(value, str):
        text = value.strip()
        if not text:
            raise RetentionError(f"{name} is empty; expected e.g. 'interval 7 days', a timedelta or hours.")
        try:
            number = float(text)
        except ValueError:
            return parse_interval(text, name=name)
        return _hours(number, name, f"{value!r} (hours)")
    raise RetentionError(f"{name}={value!r} is not an interval; use e.g. 'interval 7 days' or a timedelta.")


def _hours(number: float, name: str, shown: str) -> timedelta:
    if number != number:  # NaN
        raise RetentionError(f"{name}={shown} is not a number of hours.")
    try:
        result: timedelta | None = timedelta(hours=number)
    except OverflowError:  # beyond what a timedelta holds (inf included)
        result = None if number > 0 else timedelta(-1)
    return _in_range(result, name, shown)


def _property_interval(text: str, name: str) -> timedelta:
    # A table property needs its unit: a bare "168" is ambiguous in a property.
    return parse_interval(text, name=name)


def _positive_int(text: str, name: str) -> int:
    stripped = text.strip()
    if not stripped.lstrip("+").isdigit() or not 0 < int(stripped) <= _MAX_INT:
        raise RetentionError(
            f"{name}={text!r} is not a positive whole number of commits (at most {_MAX_INT})."
        )
    return int(stripped)


def _boolean(text: str, name: str) -> bool:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise RetentionError(f"{name}={text!r} is not true or false.")
    return lowered == "true"


def _non_negative_long(text: str, name: str) -> int:
    stripped = text.strip()
    if not stripped.lstrip("+").isdigit() or int(stripped) >= 2**63:
        raise RetentionError(f"{name}={text!r} is not a version number.")
    return int(stripped)


#: Spark's byte units (``JavaUtils.byteStringAs``, Spark 4): binary multiples, no unit meaning bytes.
_SIZE_UNITS = {"b": 1} | {
    spelling: 1024**power
    for power, letter in enumerate("kmgtp", 1)
    for spelling in (letter, f"{letter}b", f"{letter}i", f"{letter}ib")
}
_SIZE_RE = re.compile(r"([0-9]+)([a-z]+)?")
_FRACTIONAL_SIZE_RE = re.compile(r"[0-9]+\.[0-9]+[a-z]*")


def parse_byte_size(text: str, *, name: str = "size") -> int:
    """A positive size in bytes, as Spark reads one (``JavaUtils.byteStringAs``): digits and an
    optional unit, case-insensitive, surrounding spaces ignored: ``134217728``, ``1024b``, ``128k``,
    ``128mb``, ``1g``, ``1tb``, ``1p`` (b; k, kb, ki, kib; m...; g...; t...; p...: binary multiples).

    :param name: what the value is (``delta.targetFileSize``, ``target_file_size``), for the error.
    :raises RetentionError: not such a size (fractions and spaces inside included, as in Spark),
        not positive, or beyond a Delta long.
    """
    lowered = text.strip().lower()
    match = _SIZE_RE.fullmatch(lowered)
    if match is None or (match.group(2) or "b") not in _SIZE_UNITS:
        fraction = _FRACTIONAL_SIZE_RE.fullmatch(lowered) is not None
        raise RetentionError(
            f"{name}={text!r} is not a size in bytes{' (fractions are not supported)' if fraction else ''}; "
            f"use digits and an optional unit, as Spark does: b, k/kb/kib, m/mb/mib, g/gb/gib, t/tb/tib or "
            f"p/pb/pib (binary multiples), e.g. '134217728', '128mb' or '1g'."
        )
    return _size_in_range(int(match.group(1)) * _SIZE_UNITS[match.group(2) or "b"], name, repr(text))


def to_byte_size(value: int | str, *, name: str) -> int:
    """A positive size in bytes from an ``int`` or a string :func:`parse_byte_size` reads.

    :raises RetentionError: naming ``name`` and the value.
    """
    if isinstance(value, int) and not isinstance(value, bool):
        return _size_in_range(value, name, repr(value))
    if isinstance(value, str):
        return parse_byte_size(value, name=name)
    raise RetentionError(
        f"{name}={value!r} is not a size in bytes; use a whole number of bytes or e.g. '128mb'."
    )


def _size_in_range(value: int, name: str, shown: str) -> int:
    if value <= 0:
        raise RetentionError(f"{name}={shown} is not a positive size; use at least one byte.")
    if value >= 2**63:
        raise RetentionError(f"{name}={shown} is larger than a Delta long ({2**63 - 1} bytes).")
    return value


def _byte_size(text: str, name: str) -> int:
    return parse_byte_size(text, name=name)


def _text(text: str, name: str) -> str:
    return text.strip()


#: Rows older than the cutoff beyond this share of the table refuse a retention run, unless raised.
DEFAULT_MAX_DELETED_FRACTION = 0.5
_POLICY_KEYS = ("column", "keep", "max_deleted_fraction")


@dataclass(frozen=True)
class DataRetentionPolicy:
    """Keep the rows of the last ``keep``: rows whose ``column`` is older than ``now - keep`` go.

    :param column: the column holding each row's time (a date or timestamp column, or a partition
        column of ISO dates).
    :param keep: how long rows are kept; more than zero.
    :param max_deleted_fraction: a run that would delete more than this share of the table's rows
        is refused (default 0.5): a typo must never empty a table.
    """

    column: str
    keep: timedelta
    max_deleted_fraction: float = DEFAULT_MAX_DELETED_FRACTION

    def to_dict(self) -> dict[str, Any]:
        return {
            "column": self.column,
            "keep": interval_text(self.keep),
            "keep_seconds": self.keep.total_seconds(),
            "max_deleted_fraction": self.max_deleted_fraction,
        }


def interval_text(value: timedelta) -> str:
    """An interval as Delta writes one (``interval 90 days``), in the largest whole unit."""
    seconds = value.total_seconds()
    for unit, size in (("week", 604800), ("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"interval {count} {unit}{'s' if count != 1 else ''}"
    return f"interval {seconds:g} seconds"


def parse_data_retention(value: Any, *, name: str = DATA_RETENTION) -> DataRetentionPolicy:
    """A data retention policy: a mapping (or its JSON text, as the table property holds it) of
    ``column``, ``keep`` and optionally ``max_deleted_fraction``, parsed strictly: an unknown key,
    a blank column, an interval without a unit or of zero, a fraction outside (0, 1] are refused.

    :raises RetentionError: naming ``name``, the key and the value.
    """
    if isinstance(value, DataRetentionPolicy):
        return value
    given = value
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, Mapping):
        raise RetentionError(
            f'{name} must be a policy such as {{"column": "ds", "keep": "interval 90 days"}} (a '
            f"mapping, or its JSON text); got {_shown(given)}."
        )
    unknown = sorted(str(k) for k in value if k not in _POLICY_KEYS)
    if unknown:
        raise RetentionError(f"{name} has the unknown key(s) {unknown}; the keys are {list(_POLICY_KEYS)}.")
    column = value.get("column")
    if not isinstance(column, str) or not column.strip():
        raise RetentionError(
            f"{name} needs 'column', the name of the column holding each row's time; got {column!r}."
        )
    return DataRetentionPolicy(
        column.strip(), _policy_keep(value.get("keep"), name), _policy_fraction(value, name)
    )


def _policy_keep(keep: Any, name: str) -> timedelta:
    if isinstance(keep, timedelta):
        interval = _in_range(keep, f"{name} keep", repr(keep))
    elif isinstance(keep, str):
        interval = parse_interval(keep, name=f"{name} keep")  # a unit is required: "90" is refused
    else:
        raise RetentionError(
            f"{name} needs 'keep', how long rows are kept, as an interval with its unit such as "
            f"'interval 90 days'; got {keep!r}."
        )
    if interval <= timedelta():
        raise RetentionError(f"{name} keep={keep!r} keeps nothing; give an interval of more than zero.")
    return interval


def _policy_fraction(value: Mapping[str, Any], name: str) -> float:
    fraction = value.get("max_deleted_fraction", DEFAULT_MAX_DELETED_FRACTION)
    if (
        isinstance(fraction, bool)
        or not isinstance(fraction, int | float)
        or not 0 < fraction <= 1  # NaN fails this too
    ):
        raise RetentionError(
            f"{name} max_deleted_fraction={fraction!r} must be a number above 0 and at most 1 (the largest "
            f"share of the table's rows one run may delete)."
        )
    return float(fraction)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 200 else text[:200] + "..."


def _data_retention(text: str, name: str) -> DataRetentionPolicy:
    return parse_data_retention(text, name=name)


def _coerce_argument(parse: Callable[[str, str], Any], value: Any, name: str) -> Any:
    """An explicit argument or provider default: typed values as they are, strings parsed."""
    if parse is _property_interval:
        return to_interval(value, name=name)
    if parse is _data_retention:
        return parse_data_retention(value, name=name)
    if parse is _boolean and isinstance(value, bool):
        return value
    if parse is _byte_size:
        return to_byte_size(value, name=name)
    if (
        parse in (_positive_int, _non_negative_long)
        and isinstance(value, int)
        and not isinstance(value, bool)
    ):
        return parse(str(value), name)
    if isinstance(value, str):
        return parse(value, name)
    raise RetentionError(f"{name}={value!r} has the wrong type.")


@dataclass(frozen=True)
class PropertySpec:
    """One table property the core acts on.

    :param name: the Delta property.
    :param parse: text -> typed value (raises RetentionError naming the key).
    :param default: Delta's default (None: none).
    :param option: the ``[delta]`` provider option that may default it (None: not configurable).
    """

    name: str
    parse: Callable[[str, str], Any]
    default: Any
    option: str | None = None


PROPERTIES: dict[str, PropertySpec] = {
    p.name: p
    for p in (
        PropertySpec(LOG_RETENTION, _property_interval, timedelta(days=30), "log_retention_duration"),
        PropertySpec(
            DELETED_FILE_RETENTION, _property_interval, timedelta(weeks=1), "deleted_file_retention_duration"
        ),
        PropertySpec(
            SET_TRANSACTION_RETENTION, _property_interval, None, "set_transaction_retention_duration"
        ),
        PropertySpec(CHECKPOINT_INTERVAL, _positive_int, 10, "checkpoint_interval"),
        PropertySpec(ENABLE_EXPIRED_LOG_CLEANUP, _boolean, True),
        PropertySpec(APPEND_ONLY, _boolean, False),
        PropertySpec(ISOLATION_LEVEL, _text, "Serializable"),
        PropertySpec(ENABLE_IN_COMMIT_TIMESTAMPS, _boolean, False),
        PropertySpec(IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION, _non_negative_long, 0),
        PropertySpec(CHECKPOINT_WRITE_STATS_AS_JSON, _boolean, True),
        PropertySpec(CHECKPOINT_WRITE_STATS_AS_STRUCT, _boolean, False),
        PropertySpec(CHECKPOINT_POLICY, _text, "classic"),
        PropertySpec(COLUMN_MAPPING_MODE, _text, "none"),
        PropertySpec(CHECKPOINT_PROTECTION_BEFORE_VERSION, _non_negative_long, 0),
        PropertySpec(UNIVERSAL_FORMATS, _text, ""),
        PropertySpec(TARGET_FILE_SIZE, _byte_size, DEFAULT_TARGET_FILE_SIZE),
        PropertySpec(ENABLE_CHANGE_DATA_FEED, _boolean, False),
        PropertySpec(ENABLE_DELETION_VECTORS, _boolean, False),
        PropertySpec(ENABLE_ROW_TRACKING, _boolean, False),
        PropertySpec(ENABLE_TYPE_WIDENING, _boolean, False),
        PropertySpec(ENABLE_ICEBERG_COMPAT_V1, _boolean, False),
        PropertySpec(ENABLE_ICEBERG_COMPAT_V2, _boolean, False),
        PropertySpec(DATA_RETENTION, _data_retention, None),
    )
}
_INTERVALS = frozenset(name for name, spec in PROPERTIES.items() if spec.parse is _property_interval)
#: Delta property -> the ``[delta]`` provider option that may default it (the Airflow layer's
#: configuration section reads these names).
PROVIDER_OPTIONS: dict[str, str] = {name: spec.option for name, spec in PROPERTIES.items() if spec.option}


class TableConfig:
    """The typed configuration of a table.

    Operations read it from their snapshot (``Snapshot.config``: the table's properties over
    the provider defaults); where Delta defines a value by the table alone (txn and tombstone
    retention in replay, isolation, append-only, in-commit timestamps, checkpoint stats) they
    read :attr:`table_only` (or ``Metadata.config``, the same view), never a config built anew.

    :param properties: the table's ``metaData.configuration``.
    :param provider_defaults: provider-wide defaults, keyed by Delta property or by the
        ``[delta]`` option name (``log_retention_duration``); values as strings, numbers
        (hours for intervals) or timedeltas.
    """

    def __init__(
        self,
        properties: Mapping[str, str | None] | None = None,
        provider_defaults: Mapping[str, Any] | None = None,
    ) -> None:
        self.properties = dict(properties or {})
        self.provider_defaults = dict(provider_defaults or {})

    def __repr__(self) -> str:
        return (
            f"TableConfig({len(self.properties)} properties, {len(self.provider_defaults)} provider defaults)"
        )

    @cached_property
    def table_only(self) -> TableConfig:
        """The same properties without the provider defaults: Delta's own view of the table."""
        return self if not self.provider_defaults else TableConfig(self.properties)

    def with_provider_defaults(self, provider_defaults: Mapping[str, Any] | None) -> TableConfig:
        """This table's properties over ``provider_defaults`` (its :attr:`table_only` is this one)."""
        if not provider_defaults:
            return self.table_only
        config = TableConfig(self.properties, provider_defaults)
        config.__dict__["table_only"] = self.table_only
        return config

    def flag(self, name: str) -> bool:
        """A boolean property (``delta.enableDeletionVectors`` ...), false unless set.

        :raises InvalidTablePropertyError: the value is not true or false.
        """
        return bool(self._configured(name).value)

    def resolve(self, name: str, explicit: Any = None) -> Setting[Any]:
        """A setting, with ``explicit`` (the caller's argument, None for none) taking precedence.

        :raises RetentionError: ``explicit`` is not a valid value.
        :raises InvalidTablePropertyError: the table property or provider default is not valid.
        """
        spec = PROPERTIES[name]
        if explicit is not None:
            return Setting(name, _coerce_argument(spec.parse, explicit, name), Source.ARGUMENT)
        return self._configured(name)

    def _configured(self, name: str) -> Setting[Any]:
        cache: dict[str, Setting[Any]] = self.__dict__.setdefault("_cache", {})
        if name in cache:
            return cache[name]
        spec = PROPERTIES[name]
        setting: Setting[Any]
        raw = self.properties.get(name)
        provided = self.provider_defaults.get(name)
        if provided in (None, "") and spec.option is not None:
            provided = self.provider_defaults.get(spec.option)
        if raw is not None:
            try:
                setting = Setting(name, spec.parse(str(raw), name), Source.TABLE_PROPERTY)
            except RetentionError as err:
                raise InvalidTablePropertyError(
                    f"The table property {err} Fix it on the table, e.g. ALTER TABLE ... SET TBLPROPERTIES "
                    f"('{name}' = ...)."
                ) from None
        elif provided not in (None, ""):
            where = f"[delta] {spec.option}" if spec.option else f"the provider default for {name}"
            try:
                setting = Setting(name, _coerce_argument(spec.parse, provided, where), Source.PROVIDER_CONFIG)
            except RetentionError as err:
                raise InvalidTablePropertyError(f"The provider configuration {err}") from None
        else:
            setting = Setting(name, spec.default, Source.DEFAULT)
        cache[name] = setting
        return setting

    # --- the settings the operations read -------------------------------------------------

    @property
    def log_retention(self) -> Setting[timedelta]:
        return self._configured(LOG_RETENTION)

    @property
    def deleted_file_retention(self) -> Setting[timedelta]:
        return self._configured(DELETED_FILE_RETENTION)

    @property
    def set_transaction_retention(self) -> Setting[timedelta | None]:
        return self._configured(SET_TRANSACTION_RETENTION)

    @property
    def checkpoint_interval(self) -> Setting[int]:
        return self._configured(CHECKPOINT_INTERVAL)

    @property
    def expired_log_cleanup(self) -> Setting[bool]:
        return self._configured(ENABLE_EXPIRED_LOG_CLEANUP)

    @property
    def append_only(self) -> bool:
        return bool(self._configured(APPEND_ONLY).value)

    @property
    def isolation_level(self) -> str:
        return str(self._configured(ISOLATION_LEVEL).value)

    @property
    def in_commit_timestamps(self) -> bool:
        return bool(self._configured(ENABLE_IN_COMMIT_TIMESTAMPS).value)

    @property
    def in_commit_timestamp_enablement_version(self) -> int:
        return int(self._configured(IN_COMMIT_TIMESTAMP_ENABLEMENT_VERSION).value)

    @property
    def checkpoint_stats_as_json(self) -> bool:
        return bool(self._configured(CHECKPOINT_WRITE_STATS_AS_JSON).value)

    @property
    def checkpoint_stats_as_struct(self) -> bool:
        return bool(self._configured(CHECKPOINT_WRITE_STATS_AS_STRUCT).value)

    @property
    def checkpoint_policy(self) -> str:
        return str(self._configured(CHECKPOINT_POLICY).value).lower()

    @property
    def column_mapping_mode(self) -> str:
        return str(self._configured(COLUMN_MAPPING_MODE).value).lower()

    @property
    def checkpoint_protection_before_version(self) -> int:
        return int(self._configured(CHECKPOINT_PROTECTION_BEFORE_VERSION).value)

    @property
    def target_file_size(self) -> Setting[int]:
        """OPTIMIZE's target file size in bytes (``delta.targetFileSize``, default 1 GiB)."""
        return self._configured(TARGET_FILE_SIZE)

    @property
    def data_retention(self) -> Setting[DataRetentionPolicy | None]:
        """The table's data retention policy (``airflow.dataRetention``), None when it has none."""
        return self._configured(DATA_RETENTION)

    @cached_property
    def universal_formats(self) -> frozenset[str]:
        text = str(self._configured(UNIVERSAL_FORMATS).value).lower()
        return frozenset(f.strip() for f in text.split(",") if f.strip())

    def warn_on_incompatible_retentions(self) -> None:
        """Log, as Delta does, when the deleted-file retention exceeds the log retention.

        VACUUM then keeps data files of versions whose log is already gone, so time travel to
        them fails anyway (Delta refuses such properties when
        ``vacuum.enforceDeletedFileAndLogRetentionDurationCompatibility`` is on).
        """
        logs, files = self.log_retention, self.deleted_file_retention
        if files.value > logs.value:
            log.warning(
                "%s (%s, from the %s) is longer than %s (%s, from the %s): VACUUM keeps data files for "
                "versions whose log may already be cleaned up, so time travel to them fails anyway. Delta "
                "requires the deleted-file retention to be at most the log retention.",
                DELETED_FILE_RETENTION,
                files.value,
                files.source,
                LOG_RETENTION,
                logs.value,
                logs.source,
            )
