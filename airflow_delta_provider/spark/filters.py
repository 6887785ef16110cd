"""A read's filter as a Spark condition, with the same semantics as the core gives it.

The core parses the SQL text (:class:`~airflow_delta_provider.core.expressions.predicate.Predicate`) and types
every literal as the column's (a timestamp without a zone is UTC, as in partition values); the
condition built here compares each column with that typed value, so Spark applies no coercion
of its own (no session time zone, no string-to-number casts) and keeps exactly the rows the core
would keep.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_delta_provider.core.expressions import Comparison, Junction

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from airflow_delta_provider.core.expressions import Clause

__all__ = ["spark_condition"]


def spark_condition(clause: Clause, columns: Mapping[str, Any]) -> Any:
    """The Spark ``Column`` of a predicate in negation normal form.

    :param columns: the Spark ``Column`` of each logical column name the clause uses.
    """
    from pyspark.sql import functions as F

    if isinstance(clause, Junction):
        parts = [spark_condition(p, columns) for p in clause.parts]
        join: Callable[[Any, Any], Any] = (lambda a, b: a & b) if clause.op == "and" else (lambda a, b: a | b)
        return _balanced(parts, join)
    assert isinstance(clause, Comparison)
    column = columns[clause.column]
    if clause.op == "is_null":
        return column.isNull()
    if clause.op == "is_not_null":
        return column.isNotNull()
    assert clause.value is not None
    if not clause.value.is_valid:
        return F.lit(None).cast("boolean")  # a comparison with NULL is unknown
    value = spark_literal(clause.value)
    return {
        "=": lambda: column == value,
        "!=": lambda: column != value,
        "<": lambda: column < value,
        "<=": lambda: column <= value,
        ">": lambda: column > value,
        ">=": lambda: column >= value,
    }[clause.op]()


def _balanced(parts: list[Any], join: Callable[[Any, Any], Any]) -> Any:
    """``parts`` joined as a balanced tree: a long ``IN`` list or chain nests log2(n) deep, not n
    (Spark's analyzer, and Spark Connect's plan encoding, recurse once per level)."""
    if len(parts) == 1:
        return parts[0]
    middle = len(parts) // 2
    return join(_balanced(parts[:middle], join), _balanced(parts[middle:], join))


def spark_literal(value: pa.Scalar) -> Any:
    """A Spark literal of exactly ``value``'s type and value (classic and Spark Connect alike)."""
    from pyspark.sql import functions as F

    kind = value.type
    python = value.as_py()
    types = pa.types
    if types.is_timestamp(kind):
        # A string with its offset (or none, for timestamp_ntz): no session time zone is involved.
        assert isinstance(python, dt.datetime)
        return F.lit(python.isoformat()).cast("timestamp" if kind.tz is not None else "timestamp_ntz")
    if types.is_date(kind):
        return F.lit(python.isoformat()).cast("date")
    if types.is_decimal(kind):
        return F.lit(format(python, "f")).cast(f"decimal({kind.precision},{kind.scale})")
    if types.is_integer(kind):
        return F.lit(int(python)).cast(_INTEGER_TYPES[kind.bit_width])
    if types.is_floating(kind):
        return F.lit(float(python)).cast("float" if kind.bit_width == 32 else "double")
    if types.is_binary(kind) or types.is_large_binary(kind):
        return F.lit(bytearray(python))
    return F.lit(python)


_INTEGER_TYPES = {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}
