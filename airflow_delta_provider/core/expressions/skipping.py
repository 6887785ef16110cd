"""Which active files of a snapshot may hold rows a predicate selects (partition pruning and data skipping).

A read's filter is evaluated per file, exactly on partition values and as a necessary condition on
the log's statistics: a file is skipped only when no row of it can match. Statistics are trusted as
Delta's ``DataSkippingReader`` trusts them, except where a bound may not hold for every row a reader
sees: a timestamp maximum stands for up to 999 microseconds more (Delta truncates it to
milliseconds), and ``!=``, floating-point columns and type-widened columns never skip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.expressions.predicate import Comparison, Junction
from airflow_delta_provider.core.expressions.stats_parsed import parse_stats, stats_parsed_type
from airflow_delta_provider.core.protocol.column_mapping import column_mapping_mode
from airflow_delta_provider.core.protocol.schema import TYPE_CHANGES_KEY, physical_name

if TYPE_CHECKING:
    import numpy.typing as npt

    from airflow_delta_provider.core.expressions.predicate import Clause, Predicate
    from airflow_delta_provider.core.log.snapshot import Snapshot

__all__ = ["files_matching", "partitions_may_match"]

#: How far above a timestamp maximum a value may lie: Delta writes the maxima truncated to milliseconds.
#: (Built from a buffer: ``pa.scalar`` of a Python value imports pandas, which DELETE's import of
#: this module would make every process importing the facade pay; see ``core/utils/arrays.py``.)
_TIMESTAMP_MAX_SLACK = pa.Array.from_buffers(
    pa.duration("us"), 1, [None, pa.py_buffer(np.array([999], dtype=np.int64))]
)[0]


def files_matching(snapshot: Snapshot, predicate: Predicate) -> npt.NDArray[np.bool_]:
    """A mask over ``snapshot.files()``: True for each file that may hold a row ``predicate`` selects.

    :param predicate: built with the snapshot's partition columns and its other columns as
        ``data_columns``.
    :raises PredicateError: a literal does not fit its column's type.
    """
    clause = predicate.normal_form(snapshot.schema)
    files = snapshot.files()
    partitions = set(snapshot.partition_columns)
    partition_values = snapshot.partition_values() if predicate.columns & partitions else None
    data = sorted(c for c in predicate.columns - partitions if _skippable(snapshot.schema.field(c)))
    stats = _FileStats(snapshot, files.column("stats"), data)
    return _evaluate(clause, files.num_rows, partition_values, stats)


def partitions_may_match(
    predicate: Predicate, schema: pa.Schema, partition_values: pa.Table
) -> npt.NDArray[np.bool_]:
    """Per row of ``partition_values`` (typed, one column per partition column), whether a file with
    those values may hold a row ``predicate`` selects: exactly on partition columns, and "may" for a
    condition on any other column (the conflict checks judge a concurrent commit's adds so).

    :param schema: the table's logical schema, to type the predicate's literals.
    """
    clause = predicate.normal_form(schema)
    return _evaluate(clause, partition_values.num_rows, partition_values, None)


def _skippable(field: pa.Field) -> bool:
    """Whether statistics may skip files on this column (see the module docstring)."""
    metadata = field.metadata or {}
    if TYPE_CHANGES_KEY.encode() in metadata:
        return False
    kind = field.type
    return bool(
        pa.types.is_integer(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
    )


class _FileStats:
    """The parsed statistics of the files, for the data columns statistics may skip on."""

    def __init__(self, snapshot: Snapshot, stats: pa.ChunkedArray, columns: list[str]) -> None:
        self.columns = set(columns)
        self.physical = {c: _physical(snapshot, c) for c in columns}
        if not columns:
            self.parsed = None
            return
        fields = [pa.field(self.physical[c], snapshot.schema.field(c).type) for c in columns]
        self.parsed = parse_stats(stats, stats_parsed_type(fields, tight_bounds=False))

    def value(self, part: str, column: str) -> pa.Array:
        assert self.parsed is not None
        return self.parsed.field(part).field(self.physical[column])

    @property
    def num_records(self) -> pa.Array:
        assert self.parsed is not None
        return self.parsed.field("numRecords")


def _physical(snapshot: Snapshot, column: str) -> str:
    field = snapshot.schema.field(column)
    if column_mapping_mode(snapshot.protocol, snapshot.metadata) == "none":
        return str(field.name)
    return physical_name(field)


def _evaluate(
    clause: Clause, count: int, partition_values: pa.Table | None, stats: _FileStats | None
) -> npt.NDArray[np.bool_]:
    if isinstance(clause, Junction):
        masks = [_evaluate(p, count, partition_values, stats) for p in clause.parts]
        combine = np.logical_and if clause.op == "and" else np.logical_or
        result = masks[0]
        for mask in masks[1:]:
            result = combine(result, mask)
        return result
    if partition_values is not None and clause.column in partition_values.column_names:
        return _exact(clause, partition_values.column(clause.column))
    if stats is not None and clause.column in stats.columns:
        return _may_match(clause, stats)
    return np.ones(count, dtype=bool)


def _exact(clause: Comparison, values: pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    """Per file, whether its partition value satisfies the comparison (unknown: no)."""
    if clause.op == "is_null":
        result = pc.is_null(values)
    elif clause.op == "is_not_null":
        result = pc.is_valid(values)
    else:
        result = _COMPARE[clause.op](values, clause.value)
    return _to_numpy(pc.fill_null(result, False))


def _may_match(clause: Comparison, stats: _FileStats) -> npt.NDArray[np.bool_]:
    """Per file, whether its statistics allow a row that satisfies the comparison (unknown: yes)."""
    records = stats.num_records
    nulls = stats.value("nullCount", clause.column)
    if clause.op == "is_null":
        return _to_numpy(pc.fill_null(pc.greater(nulls, 0), True))
    some_value = pc.fill_null(pc.less(nulls, records), True)
    if clause.op == "is_not_null":
        return _to_numpy(some_value)
    assert clause.value is not None
    if not clause.value.is_valid:
        return np.zeros(len(records), dtype=bool)  # a comparison with NULL is never true
    if clause.op == "!=":
        return _to_numpy(some_value)
    low = stats.value("minValues", clause.column)
    high = stats.value("maxValues", clause.column)
    if pa.types.is_timestamp(high.type):
        high = pc.add(high, _TIMESTAMP_MAX_SLACK)
    value = clause.value
    if clause.op == "=":
        bounds = pc.and_(pc.less_equal(low, value), pc.greater_equal(high, value))
    elif clause.op in ("<", "<="):
        bounds = _COMPARE[clause.op](low, value)
    else:
        bounds = _COMPARE[clause.op](high, value)
    return _to_numpy(pc.and_(some_value, pc.fill_null(bounds, True)))


_COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _to_numpy(mask: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks() if mask.num_chunks else pa.array([], pa.bool_())
    return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
