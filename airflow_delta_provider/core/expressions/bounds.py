"""What the log's statistics of each file prove about its rows, whoever wrote them.

A bound is used only as what it proves: a missing or unparseable statistic (or a file without
statistics) is unknown, never 0; a NaN or infinite float bound is unknown (writers differ on
whether NaN counts); a decimal bound that may have gone through a double (delta-rs writes them
as JSON doubles) is widened outward to the column's scale; a timestamp maximum stands for up to
999 microseconds more (Delta truncates it to milliseconds); a string maximum ending in a
tie-breaker (U+FFFD, U+10FFFF, U+007F: a truncated prefix) also stands for every string starting
with the prefix before it. ``tightBounds=false`` (deletion vectors) needs no rule of its own:
bounds of the physical rows bound the live ones, and null counts are compared only with 0 and
``numRecords``.
"""

from __future__ import annotations

import math
from decimal import ROUND_CEILING, ROUND_FLOOR, Context, Decimal
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.expressions.stats_parsed import parse_stats, stats_leaf, stats_parsed_type
from airflow_delta_provider.core.protocol.column_mapping import column_mapping_mode
from airflow_delta_provider.core.protocol.schema import physical_name

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_delta_provider.core.log.snapshot import Snapshot

__all__ = ["FileBounds", "decimal_bound"]

#: How far above a timestamp maximum a value may lie: Delta writes the maxima truncated to milliseconds.
#: (Built from a buffer: ``pa.scalar`` of a Python value imports pandas, which DELETE's import of
#: this module would make every process importing the facade pay; see ``core/utils/arrays.py``.)
_TIMESTAMP_MAX_SLACK = pa.Array.from_buffers(
    pa.duration("us"), 1, [None, pa.py_buffer(np.array([999], dtype=np.int64))]
)[0]
#: Characters a truncated string maximum ends with: Delta <= 3.2 writes U+FFFD, later ones U+007F or
#: U+10FFFF after the prefix (the core's own writer, U+10FFFF).
_TIE_BREAKERS = ("\ufffd", "\U0010ffff", "\x7f")
#: A decimal bound read as a double is within 2^-52 of the value (relative) whoever rounded it;
#: 2^-44 leaves room for a writer that converts less carefully.
_DOUBLE_MARGIN = Decimal(2) ** -44
_WIDE = Context(prec=80)
#: A decimal of at most this many digits survives a trip through a double: its bound is exact.
_DOUBLE_DIGITS = 15


class FileBounds:
    """The statistics of a snapshot's files for some of its columns (logical names), parsed once.

    :param stats: the files' ``add.stats`` (JSON), row-aligned with the files.
    """

    def __init__(self, snapshot: Snapshot, stats: pa.ChunkedArray, columns: Sequence[str]) -> None:
        self.columns = set(columns)
        self._types = {c: snapshot.schema.field(c).type for c in columns}
        mapped = column_mapping_mode(snapshot.protocol, snapshot.metadata) != "none"
        self._physical = {c: physical_name(snapshot.schema.field(c)) if mapped else c for c in columns}
        fields = [pa.field(self._physical[c], _read_type(self._types[c])) for c in columns]
        self._parsed = parse_stats(_unknown_specials(stats), stats_parsed_type(fields, tight_bounds=False))

    @property
    def num_records(self) -> pa.Array:
        """Rows per file (physical: a deletion vector's rows included); null when unknown."""
        return stats_leaf(self._parsed, "numRecords")

    def null_count(self, column: str) -> pa.Array:
        return stats_leaf(self._parsed, "nullCount", self._physical[column])

    def minimum(self, column: str) -> pa.Array:
        """A lower bound of the column's values per file, of its type (null: unknown)."""
        return self._bound(column, "minValues", upper=False)

    def maximum(self, column: str) -> pa.Array:
        """An upper bound of the column's values per file (strings: see :meth:`prefixes`)."""
        high = self._bound(column, "maxValues", upper=True)
        if pa.types.is_timestamp(high.type):
            return pc.add(high, _TIMESTAMP_MAX_SLACK)
        return high

    def prefixes(self, column: str) -> list[str | None]:
        """Per file, the prefix a truncated string maximum stands for (every string starting with
        it may be in the file, whatever its order against the maximum); None: an exact maximum."""
        highs = self._bound(column, "maxValues", upper=True).to_pylist()
        return [h[:-1] if h and h.endswith(_TIE_BREAKERS) else None for h in highs]

    def _bound(self, column: str, part: str, *, upper: bool) -> pa.Array:
        kind = self._types[column]
        leaf = stats_leaf(self._parsed, part, self._physical[column])
        if pa.types.is_decimal(kind):
            values = [decimal_bound(v, kind.precision, kind.scale, upper=upper) for v in leaf.to_pylist()]
            return pa.array(values, kind)
        if pa.types.is_floating(kind):
            return pc.if_else(pc.is_finite(leaf), leaf, pa.scalar(None, kind))
        return leaf


def _read_type(kind: pa.DataType) -> pa.DataType:
    """Decimal bounds are read as doubles: delta-rs writes them so, and an exact token is widened."""
    return pa.float64() if pa.types.is_decimal(kind) else kind


def _unknown_specials(stats: pa.ChunkedArray) -> pa.ChunkedArray:
    """NaN and infinite bounds (``"NaN"`` as Spark writes them, bare ``NaN`` as Python does) made
    null, i.e. unknown: the fast JSON path reads the rest."""
    quoted = pc.replace_substring_regex(stats, r'"(?:NaN|-?Infinity)"', "null")
    return pc.replace_substring_regex(quoted, r":\s*-?(?:NaN|Infinity)\s*([,}])", r":null\1")


def decimal_bound(value: float | None, precision: int, scale: int, *, upper: bool) -> Decimal | None:
    """A sound bound of a decimal(precision, scale) column from a statistic read as a double.

    Up to 15 digits, the double's shortest text is the decimal the writer meant (exact when it
    fits the scale); beyond, the double may be off by a rounding, so the bound is widened by a
    margin and rounded outward to the scale (and clamped to the type's range).
    """
    if value is None or not math.isfinite(value):
        return None
    token = Decimal(repr(value))
    step = Decimal(1).scaleb(-scale)
    largest = _WIDE.subtract(_WIDE.power(10, precision - scale), step)  # Python's default context: 28 digits
    if precision <= _DOUBLE_DIGITS:
        exact = token.quantize(step, context=_WIDE)
        if exact == token and abs(exact) <= largest:
            return exact
    margin = _WIDE.multiply(abs(token), _DOUBLE_MARGIN)
    widened = _WIDE.add(token, margin) if upper else _WIDE.subtract(token, margin)
    rounded = widened.quantize(step, rounding=ROUND_CEILING if upper else ROUND_FLOOR, context=_WIDE)
    return max(min(rounded, largest), _WIDE.minus(largest))
