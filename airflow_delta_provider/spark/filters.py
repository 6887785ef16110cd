"""A predicate as a Spark condition that selects the rows Spark SQL's own rules select.

The core parses the SQL text (:class:`~airflow_delta_provider.core.expressions.Predicate`) and
types every comparison (:meth:`~airflow_delta_provider.core.expressions.Predicate.normal_form`):
its literal is cast into the comparison's domain, the type Spark's coercion would choose. The
condition built here casts the column into that domain and compares it with that typed literal,
so Spark applies no coercion of its own (no session time zone, no string-to-number casts). A
comparison in a floating domain is made on ``nanvl(column, column)`` (the column itself), which
Spark cannot push to the Parquet reader: its dictionary and min/max filters compare -0.0 and 0.0
bit by bit and trust footers that leave NaN out (``f = 0.0`` would miss -0.0 rows, ``f > 1.5``
NaN rows).
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_delta_provider.core.expressions import Comparison, InList, Junction

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from airflow_delta_provider.core.expressions import Clause

__all__ = ["spark_condition", "spark_literal"]


def spark_condition(clause: Clause, columns: Mapping[str, Any]) -> Any:
    """The Spark ``Column`` of a predicate in negation normal form.

    :param columns: the Spark ``Column`` of each logical column name the clause uses.
    """
    from pyspark.sql import functions as F

    if isinstance(clause, Junction):
        parts = [spark_condition(p, columns) for p in clause.parts]
        join: Callable[[Any, Any], Any] = (lambda a, b: a & b) if clause.op == "and" else (lambda a, b: a | b)
        return _balanced(parts, join)
    column = columns[clause.column]
    if isinstance(clause, InList):
        operand = _in_domain(column, clause.values.type)
        items = [spark_literal(v) for v in clause.values]
        if clause.has_null:
            items.append(F.lit(None).cast(_spark_type(clause.values.type)))
        found = (
            operand.isin(*items)
            if items
            else F.lit(None).cast("boolean")
            if clause.has_null
            else F.lit(False)
        )
        return ~found if clause.negated else found
    assert isinstance(clause, Comparison)
    if clause.op == "is_null":
        return column.isNull()
    if clause.op == "is_not_null":
        return column.isNotNull()
    if clause.op in ("true", "false"):
        return F.lit(clause.op == "true")
    assert clause.value is not None
    if not clause.value.is_valid:
        return F.lit(None).cast("boolean")  # a comparison with NULL is unknown
    operand = _in_domain(column, clause.value.type)
    value = spark_literal(clause.value)
    return {
        "=": lambda: operand == value,
        "!=": lambda: operand != value,
        "<": lambda: operand < value,
        "<=": lambda: operand <= value,
        ">": lambda: operand > value,
        ">=": lambda: operand >= value,
    }[clause.op]()


def _in_domain(column: Any, domain: pa.DataType) -> Any:
    """The column cast into the comparison's domain; a floating one behind ``nanvl`` (see the
    module docstring). A cast to the column's own type is a no-op Spark removes."""
    from pyspark.sql import functions as F

    operand = column.cast(_spark_type(domain))
    return F.nanvl(operand, operand) if pa.types.is_floating(domain) else operand


def _balanced(parts: list[Any], join: Callable[[Any, Any], Any]) -> Any:
    """``parts`` joined as a balanced tree: a long chain nests log2(n) deep, not n (Spark's
    analyzer, and Spark Connect's plan encoding, recurse once per level)."""
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


def _spark_type(kind: pa.DataType) -> str:
    """The Spark SQL type name of a domain's Arrow type."""
    types = pa.types
    if types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    if types.is_integer(kind):
        return _INTEGER_TYPES[kind.bit_width]
    if types.is_timestamp(kind):
        return "timestamp" if kind.tz is not None else "timestamp_ntz"
    return _SPARK_TYPES[str(kind)]


_INTEGER_TYPES = {8: "tinyint", 16: "smallint", 32: "int", 64: "bigint"}
_SPARK_TYPES = {
    "float": "float",
    "double": "double",
    "string": "string",
    "large_string": "string",
    "bool": "boolean",
    "date32[day]": "date",
    "binary": "binary",
    "large_binary": "binary",
}
