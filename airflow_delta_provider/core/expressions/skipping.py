"""Which active files of a snapshot may hold rows a predicate selects (partition pruning and data skipping).

A read's filter is evaluated per file, exactly on partition values (the comparisons rows get) and
as a necessary condition on the log's statistics (:class:`~.bounds.FileBounds`): a file is skipped
only when no row of it can match. Bounds are converted into each comparison's domain as the
column is (every conversion keeps order); an ``IN`` list is searched per file in
O(log values). Floating columns follow Spark's order: NaN above every number, so ``>``, ``>=`` and
a NaN literal never skip on a maximum (writers differ on whether it counts NaN). ``!=`` and
type-widened columns never skip.
"""

from __future__ import annotations

import bisect
import math
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.expressions.bounds import FileBounds
from airflow_delta_provider.core.expressions.coercion import to_domain
from airflow_delta_provider.core.expressions.normal_form import Comparison, InList, Junction, evaluate
from airflow_delta_provider.core.protocol.schema import TYPE_CHANGES_KEY

if TYPE_CHECKING:
    import numpy.typing as npt

    from airflow_delta_provider.core.expressions.normal_form import Clause
    from airflow_delta_provider.core.expressions.predicate import Predicate
    from airflow_delta_provider.core.log.snapshot import Snapshot

__all__ = ["files_matching", "partitions_may_match"]

_COMPARE = {"<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}


def files_matching(snapshot: Snapshot, predicate: Predicate) -> npt.NDArray[np.bool_]:
    """A mask over ``snapshot.files()``: True for each file that may hold a row ``predicate`` selects.

    :param predicate: built with the snapshot's partition columns and its other columns as
        ``data_columns``.
    :raises PredicateError: a literal that does not fit its column's type.
    """
    clause = predicate.normal_form(snapshot.schema)
    files = snapshot.files()
    partitions = set(snapshot.partition_columns)
    partition_values = snapshot.partition_values() if predicate.columns & partitions else None
    data = sorted(c for c in predicate.columns - partitions if _skippable(snapshot.schema.field(c)))
    bounds = FileBounds(snapshot, files.column("stats"), data) if data else None
    return _evaluate(clause, files.num_rows, partition_values, bounds)


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
    """Whether statistics may skip files on this column: the types Delta keeps min/max for, unless
    the column's type was widened (older files' bounds are of the older type)."""
    metadata = field.metadata or {}
    if TYPE_CHANGES_KEY.encode() in metadata:
        return False
    kind = field.type
    return bool(
        (pa.types.is_integer(kind) and pa.types.is_signed_integer(kind))
        or pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_date32(kind)
        or pa.types.is_timestamp(kind)
    )


def _evaluate(
    clause: Clause, count: int, partition_values: pa.Table | None, bounds: FileBounds | None
) -> npt.NDArray[np.bool_]:
    if isinstance(clause, Junction):
        masks = [_evaluate(p, count, partition_values, bounds) for p in clause.parts]
        combine = np.logical_and if clause.op == "and" else np.logical_or
        result = masks[0]
        for mask in masks[1:]:
            result = combine(result, mask)
        return result
    if isinstance(clause, Comparison) and clause.op in ("true", "false"):
        return np.full(count, clause.op == "true", dtype=bool)
    if partition_values is not None and clause.column in partition_values.column_names:
        types = {f.name: f.type for f in partition_values.schema}
        exact = evaluate(clause, partition_values.column, types)
        return _to_numpy(pc.fill_null(exact, False))
    if bounds is not None and clause.column in bounds.columns:
        if isinstance(clause, InList):
            return _in_may_match(clause, bounds)
        return _may_match(clause, bounds)
    return np.ones(count, dtype=bool)


def _some_value(bounds: FileBounds, column: str) -> pa.Array:
    """Per file, whether it may hold a non-null value of the column (unknown: yes)."""
    return pc.fill_null(pc.less(bounds.null_count(column), bounds.num_records), True)


def _may_match(clause: Comparison, bounds: FileBounds) -> npt.NDArray[np.bool_]:
    """Per file, whether its statistics allow a row that satisfies the comparison (unknown: yes)."""
    column = clause.column
    if clause.op == "is_null":
        return _to_numpy(pc.fill_null(pc.greater(bounds.null_count(column), 0), True))
    some_value = _some_value(bounds, column)
    if clause.op in ("is_not_null", "!="):
        return _to_numpy(some_value)
    value = clause.value
    assert value is not None
    if not value.is_valid:
        return np.zeros(len(some_value), dtype=bool)  # a comparison with NULL is never true
    if pa.types.is_floating(value.type):
        if math.isnan(value.as_py()):
            return _to_numpy(some_value) if clause.op != ">" else np.zeros(len(some_value), dtype=bool)
        if clause.op in (">", ">="):
            return _to_numpy(some_value)  # a maximum may leave NaN out
    low, high, starts = _domain_bounds(bounds, column, value.type)
    if clause.op == "=":
        allowed = pc.and_kleene(pc.less_equal(low, value), _at_most(high, starts, value, pc.greater_equal))
    elif clause.op in ("<", "<="):
        allowed = _COMPARE[clause.op](low, value)
    else:
        allowed = _at_most(high, starts, value, _COMPARE[clause.op])
    return _to_numpy(pc.and_(some_value, pc.fill_null(allowed, True)))


def _domain_bounds(bounds: FileBounds, column: str, domain: pa.DataType) -> tuple[Any, Any, Any]:
    """The column's minima and maxima in the comparison's domain, and the files' string prefixes."""
    kind = bounds.minimum(column).type
    low = to_domain(bounds.minimum(column), kind, domain)
    high = to_domain(bounds.maximum(column), kind, domain)
    starts = bounds.prefixes(column) if pa.types.is_string(domain) else None
    return low, high, starts


def _at_most(high: pa.Array, prefixes: list[str | None] | None, value: pa.Scalar, test: Any) -> pa.Array:
    """``test(high, value)`` (the maximum allows ``value``), or: the file may hold strings that start
    with its truncated maximum's prefix, and ``value`` does."""
    allowed = test(high, value)
    if not prefixes or not any(p is not None for p in prefixes):
        return allowed
    text = value.as_py()
    heads = pa.array(list({text[:k] for k in range(len(text) + 1)}), pa.string())
    starts = pc.is_in(pa.array(prefixes, pa.string()), value_set=heads)
    return pc.or_kleene(allowed, starts)


def _in_may_match(clause: InList, bounds: FileBounds) -> npt.NDArray[np.bool_]:
    """Per file, whether a listed value may lie within its bounds: the smallest listed value at or
    above the minimum is at most the maximum (or starts with a truncated maximum's prefix)."""
    some_value = _to_numpy(_some_value(bounds, clause.column))
    values = clause.values
    if clause.negated:
        return some_value & (not clause.has_null)  # NOT IN (.., NULL) is never true
    if len(values) == 0:
        return np.zeros(len(some_value), dtype=bool)
    if pa.types.is_floating(values.type) and bool(pc.any(pc.is_nan(values)).as_py()):
        return some_value  # a maximum may leave NaN out
    low, high, starts = _domain_bounds(bounds, clause.column, values.type)
    listed = _python(values)
    result = np.ones(len(some_value), dtype=bool)
    for index, (lo, hi) in enumerate(zip(_python(low), _python(high), strict=True)):
        result[index] = _listed_between(listed, lo, hi, starts[index] if starts else None)
    return some_value & result


def _listed_between(listed: list[Any], low: Any, high: Any, prefix: str | None) -> bool:
    """Whether a value of the sorted ``listed`` lies in [low, high] (None: unbounded), or at or above
    ``low`` and starts with ``prefix``."""
    at = bisect.bisect_left(listed, low) if low is not None else 0
    if at == len(listed):
        return False
    if high is None or listed[at] <= high:
        return True
    if prefix is None:
        return False
    at = bisect.bisect_left(listed, max(low, prefix) if low is not None else prefix)
    return at < len(listed) and listed[at].startswith(prefix)


def _python(values: pa.Array) -> list[Any]:
    """Values as Python objects that order as the values do (dates and timestamps as integers:
    Python's datetime holds only years 1 to 9999)."""
    if pa.types.is_date32(values.type):
        values = values.cast(pa.int32())
    elif pa.types.is_timestamp(values.type):
        values = values.cast(pa.int64())
    listed: list[Any] = values.to_pylist()
    return listed


def _to_numpy(mask: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.bool_]:
    if isinstance(mask, pa.ChunkedArray):
        mask = mask.combine_chunks() if mask.num_chunks else pa.array([], pa.bool_())
    return np.asarray(mask.to_numpy(zero_copy_only=False), dtype=bool)
