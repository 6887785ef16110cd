"""Delta's JSON of statistics: each bound as Delta writes it, and the stats object.

A column's footer min/max becomes a bound by its kind (:func:`leaf_of`, from its Arrow and
physical types): integers and dates as they are, strings truncated as Delta truncates them,
timestamps in milliseconds (the maximum rounded up), decimals exact, INT96 from its values. A
value that has no exact bound gives None: the file then keeps no bounds at all (:mod:`.stats`).
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa

#: Delta's ``spark.databricks.delta.stats.truncateStringLength``.
STRING_PREFIX_LENGTH = 32
_ASCII_MAX = "\x7f"
_UTF8_MAX = "\U0010ffff"

#: How a column's footer bounds become Delta's: from the raw physical values, from pyarrow's
#: converted ones (``GENERIC``), or none at all.
NONE, GENERIC, INT, BOOL, FLOAT, STRING, DECIMAL_INT, DECIMAL_BYTES, DATE, TIMESTAMP = range(10)


def truncate_min_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str:
    """A lower bound of ``value`` at most ``prefix_length`` characters long."""
    return value if len(value) <= prefix_length else value[:prefix_length]


def truncate_max_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str | None:
    """An upper bound of ``value`` at most about ``prefix_length`` characters long, or None.

    Like Delta: keep the prefix and append a tie-breaker larger than the character cut off
    (``U+007F`` when that suffices, else ``U+10FFFF``), extending the prefix over characters
    that are already ``U+10FFFF``, up to twice the prefix length.
    """
    if len(value) <= prefix_length:
        return value
    length = prefix_length
    while length <= 2 * prefix_length:
        if length >= len(value):
            return value
        if value[length] == _UTF8_MAX:
            length += 1
        elif value[length] < _ASCII_MAX:
            return value[:length] + _ASCII_MAX
        else:
            return value[:length] + _UTF8_MAX
    return None


_MILLIS_DIVISOR = {"milliseconds": 1, "microseconds": 1000, "nanoseconds": 1_000_000}


_EPOCH_DATE = dt.date(1970, 1, 1)


@dataclass
class Leaf:
    """One primitive column outside lists and maps: where it is and how its bounds are read."""

    index: int
    path: tuple[str, ...]
    arrow_type: pa.DataType
    int96: bool
    kind: int
    floating: bool
    boundable: bool
    divisor: int = 1  # timestamps: raw units per millisecond
    scale: int = 0  # decimals
    utc: bool = False  # timestamps: written with a Z
    physical: str | None = None
    levels: tuple[int, int] = (0, 0)  # maximum definition and repetition levels


def leaf_of(index: int, path: tuple[str, ...], arrow_type: pa.DataType, column: Any) -> Leaf:
    """How the bounds of one column are read: raw physical values wherever their meaning is plain."""
    types = pa.types
    physical = column.physical_type if column is not None else None
    leaf = Leaf(
        index,
        path,
        arrow_type,
        int96=physical == "INT96",
        kind=NONE,
        floating=types.is_floating(arrow_type),
        boundable=boundable(arrow_type),
        physical=physical,
        levels=(column.max_definition_level, column.max_repetition_level) if column is not None else (0, 0),
    )
    if types.is_string(arrow_type) or types.is_large_string(arrow_type):
        leaf.kind = STRING if physical == "BYTE_ARRAY" else GENERIC
    elif types.is_integer(arrow_type):
        signed = types.is_signed_integer(arrow_type) and physical in ("INT32", "INT64")
        leaf.kind = INT if signed else GENERIC
    elif types.is_boolean(arrow_type):
        leaf.kind = BOOL if physical == "BOOLEAN" else GENERIC
    elif types.is_floating(arrow_type):
        leaf.kind = FLOAT if physical in ("FLOAT", "DOUBLE") else GENERIC
    elif types.is_decimal(arrow_type):
        leaf.scale = arrow_type.scale
        if physical in ("INT32", "INT64"):
            leaf.kind = DECIMAL_INT
        elif physical in ("FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
            leaf.kind = DECIMAL_BYTES
        else:
            leaf.kind = GENERIC
    elif types.is_date(arrow_type):
        leaf.kind = DATE if physical == "INT32" else GENERIC
    elif types.is_timestamp(arrow_type):
        leaf.kind = GENERIC
        leaf.utc = arrow_type.tz is not None
        if physical == "INT64":
            logical = json.loads(column.logical_type.to_json())
            divisor = (
                _MILLIS_DIVISOR.get(logical.get("timeUnit")) if logical.get("Type") == "Timestamp" else None
            )
            if divisor is not None:
                leaf.kind, leaf.divisor = TIMESTAMP, divisor
    return leaf


def bound_json(leaf: Leaf, low: Any, high: Any) -> tuple[str, str] | None:
    """A column's aggregated footer min/max as Delta's JSON values, or None without exact bounds."""
    kind = leaf.kind
    if kind == INT:
        return str(int(low)), str(int(high))
    if kind == STRING:
        # Raw bytes (UTF-8 order is code point order); a pyarrow handing back text is taken as it is.
        low_text = low.decode() if isinstance(low, bytes) else low
        high_text = high.decode() if isinstance(high, bytes) else high
        truncated = truncate_max_string(high_text)
        if truncated is None:
            return None
        return text_json(truncate_min_string(low_text)), text_json(truncated)
    if kind == TIMESTAMP:
        divisor = leaf.divisor
        return (
            _millis_json(low // divisor, leaf.utc),
            _millis_json(-(-high // divisor), leaf.utc),  # rounded up: stays an upper bound
        )
    if kind == DATE:
        low_date = _EPOCH_DATE + dt.timedelta(days=low)
        high_date = _EPOCH_DATE + dt.timedelta(days=high)
        return f'"{low_date.isoformat()}"', f'"{high_date.isoformat()}"'
    if kind in (DECIMAL_INT, DECIMAL_BYTES):
        return _decimal_json(low, leaf.scale), _decimal_json(high, leaf.scale)
    if kind == BOOL:
        return ("true" if low else "false"), ("true" if high else "false")
    if kind == FLOAT:
        # Only for writers that put NaN into min/max: finite bounds mean no NaN.
        low, high = float(low), float(high)
        return (json.dumps(low), json.dumps(high)) if math.isfinite(low) and math.isfinite(high) else None
    column = _ColumnStats(leaf.arrow_type, leaf.int96, None, low, high)
    bounds = _delta_bounds(column)
    return (stats_json(bounds[0]), stats_json(bounds[1])) if bounds is not None else None


def bounds_json(leaf: Leaf, lows: Sequence[Any], highs: Sequence[Any]) -> list[tuple[str, str] | None]:
    """:func:`bound_json` of one column in many files at once: the usual kinds as whole columns
    (numpy, Arrow), any value they cannot take (out of range, to be truncated, to be escaped)
    one by one."""
    kind = leaf.kind
    if kind == INT:
        return [(str(int(low)), str(int(high))) for low, high in zip(lows, highs, strict=True)]
    if kind == FLOAT:
        return [_float_bounds(low, high) for low, high in zip(lows, highs, strict=True)]
    if kind == TIMESTAMP:
        texts = _millis_texts(_floor_div(lows, leaf.divisor), _ceil_div(highs, leaf.divisor))
        suffix = 'Z"' if leaf.utc else '"'
        return [None if t is None else (f'"{t[0]}{suffix}', f'"{t[1]}{suffix}') for t in texts]
    if kind == DATE:
        return _date_bounds(lows, highs)
    if kind == STRING:
        short = _short_text_bounds(lows, highs)
        if short is not None:
            return list(short)
    return [_one_bound(leaf, low, high) for low, high in zip(lows, highs, strict=True)]


def _one_bound(leaf: Leaf, low: Any, high: Any) -> tuple[str, str] | None:
    try:
        return bound_json(leaf, low, high)
    except (ValueError, OverflowError, ArithmeticError, TypeError):
        return None  # a value Python cannot hold or Delta cannot write: no exact bound


def _float_bounds(low: float, high: float) -> tuple[str, str] | None:
    # Only for writers that put NaN into min/max: finite bounds mean no NaN. (``json.dumps`` of a
    # finite float is its ``repr``.)
    low, high = float(low), float(high)
    return (repr(low), repr(high)) if math.isfinite(low) and math.isfinite(high) else None


#: Milliseconds of 0001-01-01 and of the last of 9999-12-31: the years Delta's JSON writes.
_FIRST_MS = -62_135_596_800_000
_LAST_MS = 253_402_300_799_999
_FIRST_DAY, _LAST_DAY = _FIRST_MS // 86_400_000, _LAST_MS // 86_400_000


def _floor_div(values: Sequence[int], divisor: int) -> np.ndarray:
    array = np.array(values, dtype=np.int64)
    return array // divisor if divisor != 1 else array


def _ceil_div(values: Sequence[int], divisor: int) -> np.ndarray:
    """``values / divisor`` rounded up, without the overflow of ``-(-x // d)`` at the int64 minimum."""
    array = np.array(values, dtype=np.int64)
    if divisor == 1:
        return array
    quotient: np.ndarray = array // divisor
    rounded: np.ndarray = quotient + (array - quotient * divisor != 0)
    return rounded


def _millis_texts(lows: np.ndarray, highs: np.ndarray) -> list[tuple[str, str] | None]:
    """ISO texts of millisecond instants (``YYYY-MM-DDTHH:MM:SS.mmm``), None outside years 1-9999."""
    inside = (lows >= _FIRST_MS) & (highs <= _LAST_MS) & (lows <= _LAST_MS) & (highs >= _FIRST_MS)
    low_texts = np.datetime_as_string(np.where(inside, lows, 0).astype("datetime64[ms]"), unit="ms")
    high_texts = np.datetime_as_string(np.where(inside, highs, 0).astype("datetime64[ms]"), unit="ms")
    return [
        (str(low), str(high)) if ok else None
        for low, high, ok in zip(low_texts.tolist(), high_texts.tolist(), inside.tolist(), strict=True)
    ]


def _date_bounds(lows: Sequence[int], highs: Sequence[int]) -> list[tuple[str, str] | None]:
    low_days, high_days = np.array(lows, dtype=np.int64), np.array(highs, dtype=np.int64)
    inside = (low_days >= _FIRST_DAY) & (high_days <= _LAST_DAY) & (low_days <= _LAST_DAY)
    inside &= high_days >= _FIRST_DAY
    low_texts = np.datetime_as_string(np.where(inside, low_days, 0).astype("datetime64[D]"))
    high_texts = np.datetime_as_string(np.where(inside, high_days, 0).astype("datetime64[D]"))
    return [
        (f'"{low}"', f'"{high}"') if ok else None
        for low, high, ok in zip(low_texts.tolist(), high_texts.tolist(), inside.tolist(), strict=True)
    ]


#: Bytes a JSON string must escape: control characters, the quote and the backslash.
_ESCAPED = re.compile(rb'[\x00-\x1f"\\]')


def _short_text_bounds(lows: Sequence[Any], highs: Sequence[Any]) -> list[tuple[str, str]] | None:
    """String bounds needing neither truncation nor escapes (at most :data:`STRING_PREFIX_LENGTH`
    bytes, none to escape, valid UTF-8), quoted as they are; None when any needs either."""
    if not all(type(value) is bytes for value in itertools.chain(lows, highs)):
        return None
    if max(map(len, itertools.chain(lows, highs)), default=0) > STRING_PREFIX_LENGTH:
        return None
    joined = b"".join(itertools.chain(lows, highs))
    if _ESCAPED.search(joined):
        return None
    try:
        joined.decode()
    except UnicodeDecodeError:
        return None
    # A valid UTF-8 text is a sequence of valid UTF-8 values: each decodes.
    return [(f'"{low.decode()}"', f'"{high.decode()}"') for low, high in zip(lows, highs, strict=True)]


def boundable(arrow_type: pa.DataType) -> bool:
    """Whether readers may expect bounds for a column of this type (all but binaries)."""
    types = pa.types
    return not (
        types.is_binary(arrow_type)
        or types.is_large_binary(arrow_type)
        or types.is_fixed_size_binary(arrow_type)
    )


#: ``json.dumps(text, ensure_ascii=False)`` without building an encoder per call.
text_json = json.JSONEncoder(ensure_ascii=False).encode


def _millis_json(millis: int, utc: bool) -> str:
    """Delta's JSON form of a timestamp bound: milliseconds, ``Z`` for UTC-adjusted values."""
    text = (_EPOCH + dt.timedelta(milliseconds=millis)).isoformat(timespec="milliseconds")
    return f'"{text}Z"' if utc else f'"{text}"'


#: Spark's marker of INT96 values rebased to the Julian calendar (``LEGACY`` rebase mode).
LEGACY_INT96 = b"org.apache.spark.legacyINT96"
_JULIAN_EPOCH_DAY = 2_440_588  # the Julian day number of 1970-01-01
_DAY_MS = 86_400_000
_DAY_NS = 86_400_000_000_000


def int96_bounds(values: np.ndarray) -> tuple[str, str] | None:
    """INT96 timestamps' bounds as Delta's JSON (milliseconds, the maximum rounded up), or None.

    An INT96 value is the nanosecond of the day and the Julian day number; Spark writes UTC.
    """
    if not len(values):
        return None
    days, nanos = values["days"], values["nanos"]
    if nanos.min() < 0 or nanos.max() >= _DAY_NS:
        return None
    low_day, high_day = int(days.min()), int(days.max())
    low_nanos, high_nanos = int(nanos[days == low_day].min()), int(nanos[days == high_day].max())
    low = (low_day - _JULIAN_EPOCH_DAY) * _DAY_MS + low_nanos // 1_000_000
    high = (high_day - _JULIAN_EPOCH_DAY) * _DAY_MS - (-high_nanos // 1_000_000)
    try:
        return _millis_json(low, True), _millis_json(high, True)
    except OverflowError:
        return None  # outside years 1-9999


def _decimal_json(unscaled: int, scale: int) -> str:
    """An exact decimal number from its unscaled value (no float, no context rounding)."""
    return format(Decimal(f"{unscaled}E-{scale}") if scale else Decimal(unscaled), "f")


#: A stats column's path and, for a top-level column, its JSON key with the colon.
Key = tuple[tuple[str, ...], str | None]


def flat_object_json(entries: list[tuple[Key, str]]) -> str:
    """:func:`nested_object_json` of top-level columns only."""
    return "{" + ",".join([f"{key[1]}{value}" for key, value in entries]) + "}"


def nested_object_json(entries: list[tuple[Key, str]]) -> str:
    """A JSON object of values already encoded, nested by their paths (first appearance order)."""
    if all(key[1] is not None for key, _ in entries):
        return flat_object_json(entries)
    tree: dict[str, Any] = {}
    for (path, _), value in entries:
        _put(tree, path, _Encoded(value))
    return stats_json(tree)


class _Encoded(str):
    """A value already in JSON form (written as it is by :func:`stats_json`)."""

    __slots__ = ()


@dataclass
class _ColumnStats:
    """The aggregated footer statistics of one column (the converted-value route)."""

    arrow_type: pa.DataType
    int96: bool
    null_count: int | None = 0
    min_value: Any = None
    max_value: Any = None


def _delta_bounds(column: _ColumnStats) -> tuple[Any, Any] | None:
    """Footer min/max as Delta stats values, or None when Delta keeps no bounds for the type."""
    low, high, arrow_type = column.min_value, column.max_value, column.arrow_type
    if low is None or high is None:
        return None
    types = pa.types
    if types.is_string(arrow_type) or types.is_large_string(arrow_type):
        high = truncate_max_string(high)
        return (truncate_min_string(low), high) if high is not None else None
    if types.is_integer(arrow_type):
        return int(low), int(high)
    if types.is_boolean(arrow_type):
        return bool(low), bool(high)
    if types.is_floating(arrow_type):
        # Only called for writers that put NaN into min/max: finite bounds mean no NaN.
        low, high = float(low), float(high)
        return (low, high) if math.isfinite(low) and math.isfinite(high) else None
    if types.is_decimal(arrow_type):
        return Decimal(low), Decimal(high)
    if types.is_date(arrow_type):
        return low.isoformat(), high.isoformat()
    if types.is_timestamp(arrow_type):
        return _timestamp_text(low, arrow_type), _timestamp_text(high, arrow_type, round_up=True)
    return None  # binary, time ...: no bounds


def _timestamp_text(value: dt.datetime | int, arrow_type: pa.TimestampType, *, round_up: bool = False) -> str:
    """Delta's JSON form of a timestamp bound: milliseconds, ``Z`` for UTC-adjusted values.

    :param round_up: for a maximum: round sub-millisecond values up, so it stays an upper bound.
    """
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        micros = (value - _EPOCH) // dt.timedelta(microseconds=1)
    else:  # nanosecond values come back as ints
        nanos = int(value)
        micros = -(-nanos // 1000) if round_up else nanos // 1000
    millis = -(-micros // 1000) if round_up else micros // 1000
    value = _EPOCH + dt.timedelta(milliseconds=millis)
    text = value.isoformat(timespec="milliseconds")  # four-digit years, unlike strftime's %Y
    return text + "Z" if arrow_type.tz is not None else text


_EPOCH = dt.datetime(1970, 1, 1)


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def stats_json(stats: Mapping[str, Any]) -> str:
    """Compact JSON with decimals written as exact numbers (``json`` would need floats)."""
    if isinstance(stats, Mapping):
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{stats_json(v)}" for k, v in stats.items())
            + "}"
        )
    if isinstance(stats, _Encoded):
        return str.__str__(stats)
    if isinstance(stats, Decimal):
        return format(stats, "f")
    return json.dumps(stats, ensure_ascii=False)
