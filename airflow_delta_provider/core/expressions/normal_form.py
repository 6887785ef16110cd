"""A predicate in negation normal form, typed by a table's schema, and its evaluation on Arrow.

Every NOT is pushed into the conditions (De Morgan; ``NOT a < 1`` is ``a >= 1``, exact in SQL's
three-valued logic under Spark's total order of floats); each comparison carries its literal cast
into the comparison's domain (:mod:`.coercion`), so whoever evaluates the form (the core on rows,
partition values or statistics, the Spark adapter) compares the same values in the same type.
An ``IN`` stays one :class:`InList` (typed as a whole, as Spark types it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.expressions.coercion import (
    arrow_type,
    comparison_domain,
    in_domain,
    literal_value,
    sql_type,
    to_arrow,
    to_domain,
)
from airflow_delta_provider.core.expressions.compare import NEGATED, compare, constant, is_in
from airflow_delta_provider.core.expressions.lexer import PredicateError
from airflow_delta_provider.core.expressions.literals import BIGINT, Literal
from airflow_delta_provider.core.protocol.schema import arrow_type_to_delta, delta_type_name

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from decimal import Decimal

    from airflow_delta_provider.core.expressions.literals import SqlType

__all__ = ["Clause", "Comparison", "InList", "Junction", "Node", "evaluate", "normal_form"]


@dataclass(frozen=True)
class Node:
    """A parsed condition: ``and``/``or``/``not`` of nodes, ``is_null`` (column), ``compare``
    (column, op, literal; op ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``<=>``) or ``in``
    (column, literals)."""

    op: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Comparison:
    """A condition of a predicate in negation normal form.

    :param column: the column, spelt as the table spells it.
    :param op: ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``is_null``, ``is_not_null``, or
        ``true`` / ``false`` (a comparison Spark's analyzer makes constant, NULL rows included).
    :param value: the literal cast into the comparison's domain, whose Arrow type is the value's
        (the column is converted into it to compare); None for the null tests. A null value makes
        the comparison unknown, so it matches no row.
    """

    column: str
    op: str
    value: pa.Scalar | None = None


@dataclass(frozen=True)
class InList:
    """``column [NOT] IN (values..., NULL if has_null)``.

    :param values: the listed non-null values cast into the domain (the array's type), distinct and
        sorted (NaN last; -0.0 written as 0.0).
    """

    column: str
    values: pa.Array
    has_null: bool = False
    negated: bool = False

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, InList)
            and (self.column, self.has_null, self.negated) == (other.column, other.has_null, other.negated)
            and self.values.equals(other.values)
        )

    def __hash__(self) -> int:
        return hash((self.column, self.has_null, self.negated, len(self.values)))


@dataclass(frozen=True)
class Junction:
    """``and`` / ``or`` of the clauses in ``parts``."""

    op: str
    parts: tuple[Comparison | InList | Junction, ...]


#: A predicate in negation normal form: no NOT, each negation folded into its condition.
Clause = Comparison | InList | Junction


def normal_form(node: Node, schema: pa.Schema, *, negate: bool = False) -> Clause:
    """``node`` in negation normal form, each literal typed against its column in ``schema``.

    :raises PredicateError: a literal that Spark would refuse or read depending on a setting, or a
        comparison of a nested column.
    """
    if node.op in ("and", "or"):
        op = {"and": "or", "or": "and"}[node.op] if negate else node.op
        return Junction(op, tuple(normal_form(a, schema, negate=negate) for a in node.args))
    if node.op == "not":
        return normal_form(node.args[0], schema, negate=not negate)
    column: str = node.args[0]
    if node.op == "is_null":
        return Comparison(column, "is_not_null" if negate else "is_null")
    column_type = _primitive(column, schema)
    if node.op == "in":
        return _in_list(column, column_type, node.args[1], negate=negate)
    op, literal = node.args[1], node.args[2]
    reduced = _strength_reduced(op, column_type, literal)
    if isinstance(reduced, bool):
        return Comparison(column, "false" if reduced == negate else "true")
    literal = reduced or literal
    domain = comparison_domain(column, column_type, literal)
    value = to_arrow([literal_value(column, literal, domain)], domain)[0]
    if op == "<=>":
        if not value.is_valid:
            return Comparison(column, "is_not_null" if negate else "is_null")
        if not negate:
            return Comparison(column, "=", value)
        return Junction("or", (Comparison(column, "is_null"), Comparison(column, "!=", value)))
    return Comparison(column, NEGATED[op] if negate else op, value)


def _strength_reduced(op: str, column_type: SqlType, literal: Literal) -> Literal | bool | None:
    """Spark's strength reduction of an integral column compared with a decimal literal
    (``DecimalPrecision``): ``i > 1.5`` is ``i > 1``, ``i >= 1.5`` is ``i >= 2`` (floor or ceiling,
    as a BIGINT: never the rounding a wide decimal comparison would do); beyond BIGINT's range the
    comparison is a constant TRUE or FALSE, for NULL rows too (``l <= 9223372036854775808`` selects
    every row). None: no reduction (``=``, ``!=``, ``<=>``, or no such literal)."""
    if not (column_type.integral and literal.type.name == "decimal" and literal.promotable):
        return None
    if op not in ("<", "<=", ">", ">=") or literal.value is None:
        return None
    value: Decimal = literal.value
    if not -(2**63) <= value <= 2**63 - 1:
        above = value > 2**63 - 1
        return above if op in ("<", "<=") else not above
    bound = math.floor(value) if op in (">", "<=") else math.ceil(value)
    return Literal(BIGINT, bound, literal.text)


def _primitive(column: str, schema: pa.Schema) -> SqlType:
    kind = schema.field(column).type
    found = sql_type(kind)
    if found is None:
        delta_type = arrow_type_to_delta(kind)
        name = delta_type_name(delta_type) if not isinstance(delta_type, str) else delta_type
        raise PredicateError(
            f"Column {column!r} is of the nested type {name}: a predicate compares only columns of a "
            f"primitive type (any column can be tested with IS NULL).",
            reason="nested",
        )
    return found


def _in_list(column: str, column_type: SqlType, literals: Sequence[Literal], *, negate: bool) -> InList:
    domain = in_domain(column, column_type, literals)
    values = [literal_value(column, literal, domain) for literal in literals]
    present = [v for v in values if v is not None]
    array = pc.unique(to_arrow(present, domain)) if present else pa.array([], arrow_type(domain))
    array = array.take(pc.sort_indices(array))
    return InList(column, array, has_null=len(present) < len(values), negated=negate)


# --- evaluation ---------------------------------------------------------------------------------


def evaluate(clause: Clause, operand: Callable[[str], Any], types: Mapping[str, pa.DataType]) -> Any:
    """The clause over columns given as Arrow arrays (or expressions): True, False or null per row.

    :param operand: a column's values (an array, chunked array or ``pc.field``), by name.
    :param types: each column's Arrow type.
    """
    if isinstance(clause, Junction):
        parts = [evaluate(p, operand, types) for p in clause.parts]
        combine = pc.and_kleene if clause.op == "and" else pc.or_kleene
        return balanced(parts, combine)
    column = operand(clause.column)
    if isinstance(clause, InList):
        found = is_in(
            to_domain(column, types[clause.column], clause.values.type),
            clause.values,
            has_null=clause.has_null,
        )
        return pc.invert(found) if clause.negated else found
    if clause.op == "is_null":
        return pc.is_null(column)
    if clause.op == "is_not_null":
        return pc.is_valid(column)
    if clause.op in ("true", "false"):
        return constant(column, clause.op == "true")
    assert clause.value is not None
    return compare(clause.op, to_domain(column, types[clause.column], clause.value.type), clause.value)


def balanced(parts: list[Any], combine: Callable[[Any, Any], Any]) -> Any:
    """``parts`` combined pairwise, level by level: a tree as deep as log2 of their number (a
    left-deep one as deep as the list is long exhausts Arrow's stack when it is bound)."""
    while len(parts) > 1:
        paired = [combine(a, b) for a, b in zip(parts[::2], parts[1::2], strict=False)]
        parts = paired + parts[len(paired) * 2 :]
    return parts[0]
