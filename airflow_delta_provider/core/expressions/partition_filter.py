"""A partition filter: a predicate on partition columns only, decided by files' partition values.

What a change feed restricted to partitions (``DeltaTable.changes(partition_filter=...)``), a read
of some partitions (``read_delta(partition_filter=...)``), a watcher waiting on partitions and an
Airflow run's slice of a table select. The same predicate language as ``replace_where`` and a
read's filter; a data column is refused, since no file's rows are looked at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import shorten
from airflow_delta_provider.core.expressions.predicate import Predicate, PredicateError

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import pyarrow as pa

__all__ = ["partition_predicate", "slice_filter"]


def partition_predicate(
    text: str,
    schema: pa.Schema,
    partition_columns: Sequence[str],
    parameters: Mapping[str, Any] | None = None,
) -> Predicate:
    """The predicate of a partition filter, every literal typed by ``schema``.

    :param text: a SQL condition on partition columns (``"ds = '2024-01-01'"``, ``"ds = :day"``).
    :param schema: the table's logical schema.
    :param partition_columns: the table's partition columns.
    :param parameters: the values of the text's ``:name`` markers.
    :raises PredicateError: the text does not parse, names a data column or a column the table
        lacks, or a value that does not fit its column.
    """
    columns = list(partition_columns)
    data_columns = [name for name in schema.names if name not in columns]
    predicate = Predicate(text, columns, data_columns=data_columns, parameters=parameters)
    named = sorted(predicate.columns - set(columns))
    if named:
        raise PredicateError(
            f"The partition filter {shorten(text, 200)!r} names the data column(s) {named}: it selects "
            f"files by their partition values, before any row is read (partition columns: "
            f"{columns or 'none'}). Filter the rows afterwards."
        )
    predicate.normal_form(schema)  # every literal typed now: a value that does not fit is refused here
    return predicate


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
