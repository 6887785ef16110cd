"""A filter on partition columns (``partition_filter=``): a snapshot restricted to some partitions,
a change feed of some partitions, a watcher of some partitions, an Airflow run's slice.

:class:`PartitionFilter` wraps a :class:`~.predicate.Predicate` that names partition columns only,
in the predicate language of the rest of the core (comparisons, ``IN``, ``BETWEEN``,
``IS [NOT] NULL``, ``AND`` / ``OR`` / ``NOT``, ``:name`` markers bound from parameters), and gives
the partition-pruned replay (``core/log/partition_pruning.py``) what it asks: exact selection over
typed partition values (:func:`~.skipping.partitions_may_match`), and a "may" over the value
ranges of a checkpoint's row groups (kept unless no value in it can satisfy the condition).
:func:`slice_filter` says an Airflow run's slice (columns equal to a key's parts) as one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.expressions.coercion import to_domain
from airflow_delta_provider.core.expressions.lexer import tokenize
from airflow_delta_provider.core.expressions.predicate import (
    Comparison,
    InList,
    Junction,
    Predicate,
    PredicateError,
)
from airflow_delta_provider.core.expressions.skipping import partitions_may_match

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.expressions.predicate import Clause
    from airflow_delta_provider.core.log.partition_pruning import PartitionBounds
    from airflow_delta_provider.core.log.snapshot import Snapshot

__all__ = ["PartitionFilter", "bound_by", "slice_filter"]


class PartitionFilter:
    """A condition on a table's partition columns.

    .. code-block:: python

        snapshot = DeltaTable(uri).snapshot(partition_filter="ds >= '2024-06-01' AND region = 'eu'")
        snapshot.files()  # only those partitions' files, replayed at their cost

    :param predicate: SQL text, or a :class:`Predicate` naming only partition columns.
    :param partition_columns: the table's partition columns.
    :param schema: the table's logical schema: when given, every literal is typed now (a value
        that does not fit its column is refused here, not at the first read).
    :param parameters: with SQL text, the values of its ``:name`` markers, each bound as a literal.
    :raises PredicateError: the text does not parse, names a column that is not a partition
        column, or a literal does not fit its column.
    """

    def __init__(
        self,
        predicate: str | Predicate,
        partition_columns: Sequence[str],
        schema: pa.Schema | None = None,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        if isinstance(predicate, str):
            # Other columns parse, to be refused below with what a partition filter is.
            others = (
                [n for n in schema.names if n not in set(partition_columns)] if schema is not None else []
            )
            predicate = Predicate(
                predicate, list(partition_columns), data_columns=others, parameters=parameters
            )
        elif parameters is not None:
            raise TypeError("parameters bind the markers of SQL text; a Predicate carries its own.")
        elif not isinstance(predicate, Predicate):
            raise TypeError(f"A partition filter is SQL text or a Predicate, got {type(predicate).__name__}.")
        others = sorted(predicate.columns - set(partition_columns))
        if others:
            what = "is not a partition column" if len(others) == 1 else "are not partition columns"
            raise PredicateError(
                f"The partition filter {predicate.text!r} names {', '.join(map(repr, others))}, which "
                f"{what} (the table's: {list(partition_columns)}); a partition filter selects partitions "
                f"only."
            )
        self.predicate = predicate
        if schema is not None:
            predicate.normal_form(pa.schema([schema.field(c) for c in partition_columns]))

    @classmethod
    def of(cls, snapshot: Snapshot, value: str | Predicate | PartitionFilter) -> PartitionFilter:
        """``value`` as a partition filter of ``snapshot``'s table, its literals typed."""
        if isinstance(value, PartitionFilter):
            return cls(value.predicate, snapshot.partition_columns, snapshot.schema)
        return cls(value, snapshot.partition_columns, snapshot.schema)

    def __repr__(self) -> str:
        return f"PartitionFilter({self.text!r})"

    @property
    def text(self) -> str:
        return self.predicate.text

    @property
    def columns(self) -> frozenset[str]:
        return frozenset(self.predicate.columns)

    def matches(self, values: pa.Table) -> npt.NDArray[np.bool_]:
        """Per row of typed partition values: whether the filter selects it (exact on partition
        columns, with compute kernels only: ``Predicate.mask`` filters through Acero, whose first
        use imports ``pyarrow.dataset`` and pandas, a third of a second in a fresh process)."""
        return partitions_may_match(self.predicate, values.schema, values)

    def may_match(self, bounds: PartitionBounds) -> npt.NDArray[np.bool_]:
        """Per range of partition values: whether some value in it may be selected."""
        return _may_match(self.predicate.normal_form(bounds.schema), bounds, bounds.low.num_rows)


def _may_match(clause: Clause, bounds: PartitionBounds, count: int) -> npt.NDArray[np.bool_]:
    if isinstance(clause, Junction):
        masks = [_may_match(part, bounds, count) for part in clause.parts]
        combine = np.logical_and if clause.op == "and" else np.logical_or
        result = masks[0]
        for mask in masks[1:]:
            result = combine(result, mask)
        return result
    column = clause.column
    if column not in bounds.low.column_names:
        return np.ones(count, dtype=bool)
    if isinstance(clause, Comparison) and clause.op in ("is_null", "true", "false"):
        if clause.op == "true":  # (Spark's constant comparisons: every row, NULL ones too)
            return np.ones(count, dtype=bool)
        return bounds.may_be_null[column].copy() if clause.op == "is_null" else np.zeros(count, dtype=bool)
    present = bounds.may_hold_value[column]
    if isinstance(clause, Comparison) and clause.op == "is_not_null":
        return present.copy()
    domain = clause.values.type if isinstance(clause, InList) else _domain(clause)
    if domain is None:
        return np.zeros(count, dtype=bool)  # a comparison with NULL is never true
    if pa.types.is_floating(domain):
        return present.copy()  # (Spark's order of NaN and -0.0: no range is judged, every one may)
    kind = bounds.low.schema.field(column).type
    low = to_domain(bounds.low.column(column), kind, domain)
    high = to_domain(bounds.high.column(column), kind, domain)
    if isinstance(clause, InList):
        if clause.negated:
            return present.copy()
        inside = pa.array(np.zeros(count, dtype=bool))
        for value in clause.values:
            inside = pc.or_(inside, pc.and_(pc.less_equal(low, value), pc.greater_equal(high, value)))
    elif clause.op == "=":
        inside = pc.and_(pc.less_equal(low, clause.value), pc.greater_equal(high, clause.value))
    elif clause.op == "!=":
        inside = pc.invert(pc.and_(pc.equal(low, clause.value), pc.equal(high, clause.value)))
    elif clause.op in ("<", "<="):
        inside = _COMPARE[clause.op](low, clause.value)
    else:
        inside = _COMPARE[clause.op](high, clause.value)
    # Unknown bounds: may.
    known = np.asarray(pc.fill_null(inside, True).to_numpy(zero_copy_only=False), dtype=bool)
    return known & present


def _domain(clause: Comparison) -> pa.DataType | None:
    """The type a comparison is made in (its literal's, cast there); None when the literal is NULL."""
    value = clause.value
    return None if value is None or not value.is_valid else value.type


_COMPARE = {"<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}


def slice_filter(columns: Sequence[str], values: Sequence[str]) -> tuple[str, dict[str, str]]:
    """The partition filter selecting ``columns`` equal to ``values`` (an Airflow run's partition
    key, split into its parts), each value bound to a marker, never spliced into the text: a value
    is typed as a string literal bound to its column would be, whatever characters it holds.

    :returns: the text (``"`ds` = :p0 AND `region` = :p1"``) and its parameters.
    :raises ValueError: no column, or not one value per column.
    """
    if not columns or len(columns) != len(values):
        raise ValueError(
            f"A slice needs one value per column, got columns {list(columns)} and {list(values)}."
        )
    text = " AND ".join(f"`{column.replace('`', '``')}` = :p{index}" for index, column in enumerate(columns))
    return text, {f"p{index}": value for index, value in enumerate(values)}


def bound_by(parameters: Mapping[str, Any] | None, *texts: str | None) -> tuple[dict[str, Any] | None, ...]:
    """``parameters`` shared by several conditions (a read's ``filter`` and ``partition_filter``),
    split by the markers each text holds: per text, the values of its markers (None for a text
    that is None or holds none).

    :raises PredicateError: a parameter that is no marker of any of them.
    """
    if parameters is None:
        return (None,) * len(texts)
    names = [{t.value for t in tokenize(text) if t.kind == "marker"} if text else set() for text in texts]
    unused = sorted(set(parameters) - set().union(*names))
    if unused:
        raise PredicateError(
            f"The parameters {unused} are not used by the conditions {[t for t in texts if t]}: a value "
            f"meant to narrow them would be ignored. Use each as :name in a condition, or drop it.",
            reason="parameter",
        )
    return tuple({k: v for k, v in parameters.items() if k in own} or None for own in names)
