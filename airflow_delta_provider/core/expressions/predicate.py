"""Predicates: Delta's ``replaceWhere`` and a read's filter, parsed from SQL and evaluated columnar.

The grammar is the part of Spark SQL a partition predicate needs (comparisons, ``IN``, ``BETWEEN``,
``IS [NOT] NULL``, ``AND`` / ``OR`` / ``NOT``, typed literals), with SQL's nulls. A commit's predicate
may name only partition columns (a commit of existing files cannot rewrite data); a read's may also
name primitive data columns, handed to the engine as :meth:`Predicate.normal_form`.
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import DeltaError, shorten
from airflow_delta_provider.core.protocol.partitions import parse_partition_value
from airflow_delta_provider.core.protocol.schema import arrow_type_to_delta, delta_type_name

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence


class PredicateError(DeltaError, ValueError):
    """A predicate that cannot be parsed or does not apply to the table."""


_TOKEN = re.compile(
    r"""\s*(?:
        (?P<string>'(?:[^']|'')*')
      | (?P<quoted>`(?:[^`]|``)+`)
      | (?P<number>[+-]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)
      | (?P<op><=>|<=|>=|<>|!=|==|=|<|>)
      | (?P<punct>[(),])
      | (?P<marker>:[A-Za-z_][A-Za-z0-9_]*)
      | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    )""",
    re.VERBOSE,
)
#: How deep NOT and parentheses may nest in a predicate, and how many conditions it may join.
MAX_NESTING = 64
MAX_CONDITIONS = 1000
_KEYWORDS = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE", "DATE", "TIMESTAMP"}


@dataclass(frozen=True)
class _Column:
    name: str


@dataclass(frozen=True)
class _Literal:
    value: Any
    kind: str  # "string", "number", "boolean", "null", "date", "timestamp"


@dataclass(frozen=True)
class _Node:
    op: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Comparison:
    """A condition of a predicate in negation normal form.

    :param column: the column, spelt as the table spells it.
    :param op: ``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``is_null`` or ``is_not_null``.
    :param value: the literal typed as the column (None for the null tests); a null literal makes
        the comparison unknown, so it matches no row.
    """

    column: str
    op: str
    value: pa.Scalar | None = None


@dataclass(frozen=True)
class Junction:
    """``and`` / ``or`` of the clauses in ``parts``."""

    op: str
    parts: tuple[Comparison | Junction, ...]


#: A predicate in negation normal form: no NOT, each negation folded into its comparison.
Clause = Comparison | Junction
_NEGATED_OP = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


class Predicate:
    """A parsed partition predicate.

    :param text: the SQL text.
    :param partition_columns: the table's partition columns.
    :param data_columns: the other columns the predicate may name (a read's filter); by default
        none, so that any column but a partition column is refused (a commit's predicate).
    :param parameters: the values of the text's named markers (``:name``), each bound as a literal
        of its Python type (a string as a string literal); every marker must be bound and every
        parameter used.
    :raises PredicateError: the text does not parse, names a column it may not, or binds wrongly.
    """

    def __init__(
        self,
        text: str,
        partition_columns: Sequence[str],
        *,
        data_columns: Sequence[str] = (),
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        if not isinstance(text, str) or not text.strip():
            raise PredicateError(f"The predicate must be a non-empty SQL condition, got {text!r}.")
        self.text = text.strip()
        self.parameters: Mapping[str, Any] = dict(parameters or {})
        self._used: set[str] = set()
        self._tokens = _tokenize(self.text)
        self._position = 0
        self._depth = 0
        self._conditions = 0
        self._partition_only = not data_columns
        self._by_key = {c.lower(): c for c in [*data_columns, *partition_columns]}
        self.columns: set[str] = set()
        self._tree = self._parse_or()
        if self._position != len(self._tokens):
            raise self._error(f"unexpected {self._tokens[self._position][1]!r}")
        unused = sorted(set(self.parameters) - self._used)
        if unused:
            raise PredicateError(
                f"The parameters {unused} are not used by the predicate {shorten(self.text, 200)!r}: a value "
                f"meant to narrow it would be ignored. Use each as :name in the predicate, or drop it."
            )

    def __repr__(self) -> str:
        return f"Predicate({self.text!r})"

    @property
    def bound_text(self) -> str:
        """The text with each marker replaced by the SQL literal of its value, as Spark records a
        parameterized predicate (a commit's ``operationParameters.predicate``); the text itself
        when nothing is bound."""
        if not self.parameters:
            return self.text
        parts = [_sql_literal(self.parameters[t[1:]]) if k == "marker" else t for k, t in self._tokens]
        return " ".join(parts)

    # --- evaluation ---------------------------------------------------------------------

    def mask(self, partition_values: pa.Table) -> pa.BooleanArray:
        """Which rows of a typed partition-value table match (unknown -> False).

        :param partition_values: one column per partition column, with the table's types.
        """
        expression = _to_expression(self._tree, partition_values.schema)
        if partition_values.num_rows == 0:
            return pa.array([], pa.bool_())
        import numpy as np

        index = "__row__"
        # From numpy: building the row numbers from a Python range costs ~0.1 µs a row.
        numbered = partition_values.append_column(
            index, pa.array(np.arange(partition_values.num_rows, dtype=np.int64))
        )
        kept = numbered.filter(expression).column(index).to_numpy()
        result = np.zeros(partition_values.num_rows, dtype=bool)
        result[kept] = True
        return pa.array(result)

    def expression(self, schema: pa.Schema) -> pc.Expression:
        """The predicate as a pyarrow row filter over a table of ``schema`` (SQL semantics)."""
        return _to_expression(self._tree, schema)

    def normal_form(self, schema: pa.Schema) -> Clause:
        """The predicate in negation normal form, literals typed by ``schema``, for an engine.

        NOT is pushed down to the comparisons (De Morgan; ``NOT a < 1`` is ``a >= 1``, which is
        exact in SQL's three-valued logic), ``IN`` becomes ``=`` joined by OR, ``BETWEEN`` two
        comparisons and ``<=>`` a comparison or a null test.

        :raises PredicateError: a literal does not fit its column's type, or the column is nested.
        """
        return _normal(self._tree, schema, negate=False)

    # --- parsing ------------------------------------------------------------------------

    def _peek(self) -> tuple[str, str] | None:
        return self._tokens[self._position] if self._position < len(self._tokens) else None

    def _take(self) -> tuple[str, str]:
        token = self._peek()
        if token is None:
            raise self._error("unexpected end")
        self._position += 1
        return token

    def _accept(self, *words: str) -> bool:
        token = self._peek()
        if token is not None and token[0] in ("word", "punct", "op") and token[1].upper() in words:
            self._position += 1
            return True
        return False

    def _expect(self, word: str) -> None:
        if not self._accept(word):
            found = self._peek()
            raise self._error(f"expected {word} but found {found[1] if found else 'the end'!r}")

    def _error(self, what: str) -> PredicateError:
        on = "partition columns" if self._partition_only else "the table's columns"
        return PredicateError(
            f"Cannot parse the predicate {shorten(self.text, 200)!r}: {what}. Use a SQL condition on "
            f"{on}, e.g. \"ds = '2024-01-01' AND region IN ('eu', 'us')\"."
        )

    # A chain of ORs (ANDs) is one node with every operand, evaluated as a balanced tree; NOT and
    # parentheses nest at most MAX_NESTING deep, and at most MAX_CONDITIONS conditions are joined:
    # no predicate exhausts a stack (Python's, or Arrow's when it binds a large expression, which
    # crashes the process: 20,000 ORed equalities do).

    def _parse_or(self) -> Any:
        nodes = [self._parse_and()]
        while self._accept("OR"):
            nodes.append(self._parse_and())
        return nodes[0] if len(nodes) == 1 else _Node("or", tuple(nodes))

    def _parse_and(self) -> Any:
        nodes = [self._parse_not()]
        while self._accept("AND"):
            nodes.append(self._parse_not())
        return nodes[0] if len(nodes) == 1 else _Node("and", tuple(nodes))

    def _parse_not(self) -> Any:
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise self._error(f"NOT and parentheses nest more than {MAX_NESTING} deep")
        try:
            if self._accept("NOT"):
                return _Node("not", (self._parse_not(),))
            if self._accept("("):
                node = self._parse_or()
                self._expect(")")
                return node
            return self._parse_condition()
        finally:
            self._depth -= 1

    def _parse_condition(self) -> Any:
        self._conditions += 1
        if self._conditions > MAX_CONDITIONS:
            raise self._error(f"it has more than {MAX_CONDITIONS} conditions (use IN for a list of values)")
        column = self._parse_column()
        if self._accept("IS"):
            negated = self._accept("NOT")
            self._expect("NULL")
            node = _Node("is_null", (column,))
            return _Node("not", (node,)) if negated else node
        negated = self._accept("NOT")
        if self._accept("IN"):
            self._expect("(")
            values = [self._parse_literal()]
            while self._accept(","):
                values.append(self._parse_literal())
            self._expect(")")
            node = _Node("in", (column, tuple(values)))
            return _Node("not", (node,)) if negated else node
        if self._accept("BETWEEN"):
            low = self._parse_literal()
            self._expect("AND")
            high = self._parse_literal()
            node = _Node("and", (_Node(">=", (column, low)), _Node("<=", (column, high))))
            return _Node("not", (node,)) if negated else node
        if negated:
            raise self._error("NOT must be followed by IN or BETWEEN here")
        kind, op = self._take()
        if kind != "op":
            raise self._error(f"expected a comparison after {column.name!r}, found {op!r}")
        op = {"==": "=", "<>": "!=", "<=>": "<=>"}.get(op, op)
        return _Node(op, (column, self._parse_literal()))

    def _parse_column(self) -> _Column:
        kind, text = self._take()
        if kind == "quoted":
            name = text[1:-1].replace("``", "`")
        elif kind == "word" and text.upper() not in _KEYWORDS:
            name = text
        else:
            raise self._error(f"expected a column name, found {text!r}")
        column = self._by_key.get(name.lower())
        if column is None and not self._partition_only:
            raise PredicateError(
                f"The predicate {shorten(self.text, 200)!r} uses column {name!r}, which is not a column of "
                f"the table (columns: {sorted(self._by_key.values())})."
            )
        if column is None:
            raise PredicateError(
                f"The predicate {shorten(self.text, 200)!r} uses column {name!r}, which is not a partition "
                f"column (partition columns: {sorted(self._by_key.values()) or 'none'}). replaceWhere in "
                f"this provider can only select whole partitions."
            )
        self.columns.add(column)
        return _Column(column)

    def _parse_literal(self) -> _Literal:
        kind, text = self._take()
        if kind == "marker":
            return self._bound(text[1:])
        if kind == "string":
            return _Literal(text[1:-1].replace("''", "'"), "string")
        if kind == "number":
            return _Literal(Decimal(text), "number")
        if kind == "word":
            upper = text.upper()
            if upper in ("TRUE", "FALSE"):
                return _Literal(upper == "TRUE", "boolean")
            if upper == "NULL":
                return _Literal(None, "null")
            if upper in ("DATE", "TIMESTAMP"):
                inner_kind, inner = self._take()
                if inner_kind != "string":
                    raise self._error(f"{upper} must be followed by a quoted string")
                return _Literal(inner[1:-1], upper.lower())
        raise self._error(f"expected a literal value, found {text!r}")

    def _bound(self, name: str) -> _Literal:
        if name not in self.parameters:
            raise PredicateError(
                f"The predicate {shorten(self.text, 200)!r} uses the marker :{name}, which no parameter "
                f"binds (parameters: {sorted(self.parameters) or 'none'}). Pass parameters={{{name!r}: ...}}."
            )
        self._used.add(name)
        value = self.parameters[name]
        if value is None:
            return _Literal(None, "null")
        if isinstance(value, bool):
            return _Literal(value, "boolean")
        if isinstance(value, int | float | Decimal):
            return _Literal(Decimal(str(value)), "number")
        if isinstance(value, str):
            return _Literal(value, "string")
        raise PredicateError(
            f"The parameter {name!r} is a {type(value).__name__}; bind a string, a number or a boolean."
        )


def _sql_literal(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if not isinstance(value, str):
        return str(value)
    # Spark's string literal: a backslash escapes, a quote is doubled.
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def _tokenize(text: str) -> list[tuple[str, str]]:
    tokens, position = [], 0
    while position < len(text):
        if text[position:].strip() == "":
            break
        match = _TOKEN.match(text, position)
        if match is None or match.end() == position:
            raise PredicateError(
                f"Cannot parse the predicate {shorten(text, 200)!r} at {shorten(text[position:], 80)!r}."
            )
        kind = match.lastgroup
        assert kind is not None
        tokens.append((kind, match.group(kind)))
        position = match.end()
    return tokens


def _to_expression(node: Any, schema: pa.Schema) -> pc.Expression:
    if node.op == "and":
        return _balanced([_to_expression(a, schema) for a in node.args], operator.and_)
    if node.op == "or":
        return _balanced([_to_expression(a, schema) for a in node.args], operator.or_)
    if node.op == "not":
        return ~_to_expression(node.args[0], schema)
    column: _Column = node.args[0]
    field = pc.field(column.name)
    arrow_type = schema.field(column.name).type
    if node.op == "is_null":
        return field.is_null()
    if node.op == "in":
        return _is_in(field, [_scalar(v, arrow_type, column.name) for v in node.args[1]], arrow_type)
    value = _scalar(node.args[1], arrow_type, column.name)
    if node.op == "<=>":
        return field.is_null() if not value.is_valid else (field == value) & field.is_valid()
    return _compare(node.op, field, value)


def _balanced(
    expressions: list[pc.Expression], combine: Callable[[pc.Expression, pc.Expression], pc.Expression]
) -> pc.Expression:
    """``expressions`` combined pairwise, level by level: a tree as deep as log2 of their number
    (a left-deep one as deep as the list is long exhausts Arrow's stack when it is bound)."""
    while len(expressions) > 1:
        paired = [combine(a, b) for a, b in zip(expressions[::2], expressions[1::2], strict=False)]
        expressions = paired + expressions[len(paired) * 2 :]
    return expressions[0]


def _is_in(field: pc.Expression, values: list[pa.Scalar], arrow_type: pa.DataType) -> pc.Expression:
    """SQL's ``IN``: TRUE on a match; else unknown when the value or a listed value is NULL; else
    FALSE. One set lookup, however long the list (an OR per value would nest as deep)."""
    unknown = pa.scalar(None, pa.bool_())
    present = [v for v in values if v.is_valid]
    found = field.isin(pa.array([v.as_py() for v in present], arrow_type)) if present else pc.scalar(False)
    if len(present) < len(values):
        found = pc.if_else(found, pc.scalar(True), unknown)
    return pc.if_else(field.is_valid(), found, unknown)


def _normal(node: Any, schema: pa.Schema, *, negate: bool) -> Clause:
    if node.op in ("and", "or"):
        op = {"and": "or", "or": "and"}[node.op] if negate else node.op
        return Junction(op, tuple(_normal(a, schema, negate=negate) for a in node.args))
    if node.op == "not":
        return _normal(node.args[0], schema, negate=not negate)
    column: _Column = node.args[0]
    if node.op == "is_null":
        return Comparison(column.name, "is_not_null" if negate else "is_null")
    if node.op == "in":
        parts = tuple(_normal(_Node("=", (column, v)), schema, negate=negate) for v in node.args[1])
        return Junction("and" if negate else "or", parts)
    value = _scalar(node.args[1], schema.field(column.name).type, column.name)
    if node.op == "<=>":
        if not value.is_valid:
            return Comparison(column.name, "is_not_null" if negate else "is_null")
        if not negate:
            return Comparison(column.name, "=", value)
        return Junction("or", (Comparison(column.name, "is_null"), Comparison(column.name, "!=", value)))
    return Comparison(column.name, _NEGATED_OP[node.op] if negate else node.op, value)


def _compare(op: str, field: pc.Expression, value: pa.Scalar) -> pc.Expression:
    if not value.is_valid:
        return pc.scalar(pa.scalar(None, pa.bool_()))  # comparisons with NULL are unknown
    return {
        "=": field == value,
        "!=": field != value,
        "<": field < value,
        "<=": field <= value,
        ">": field > value,
        ">=": field >= value,
    }[op]


def _scalar(literal: _Literal, arrow_type: pa.DataType, column: str) -> pa.Scalar:
    delta_type = arrow_type_to_delta(arrow_type)
    if not isinstance(delta_type, str):
        raise PredicateError(
            f"Column {column!r} is of the nested type {delta_type_name(delta_type)}: a predicate compares "
            f"only columns of a primitive type (any column can be tested with IS NULL)."
        )
    if literal.kind == "null":
        return pa.scalar(None, arrow_type)
    text = literal.value
    if literal.kind == "boolean":
        text = "true" if literal.value else "false"
    elif literal.kind == "number":
        text = str(literal.value)
    try:
        value = parse_partition_value(str(text), delta_type, column=column)
    except DeltaError as err:
        raise PredicateError(
            f"The value {literal.value!r} does not fit column {column!r} ({delta_type}): {err}"
        ) from None
    if literal.kind == "number" and delta_type in ("string",):
        value = str(literal.value)
    return pa.scalar(value, arrow_type)
