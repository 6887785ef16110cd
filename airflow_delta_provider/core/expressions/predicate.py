"""Predicates: a DELETE's condition, Delta's ``replaceWhere``, a read's filter, parsed from SQL and
evaluated with Spark SQL's semantics (Spark 4 defaults; docs/lifecycle.md, "What a predicate means").

The grammar is the part of Spark SQL a row filter needs (comparisons with a literal on either
side, ``IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``<=>``, ``AND`` / ``OR`` / ``NOT``, typed literals,
named parameter markers ``:name`` bound from ``parameters``), with SQL's nulls. A commit's
predicate may name only partition columns; a read's or a DELETE's any primitive column. Literals
are typed as Spark's parser types them (:mod:`.literals`) and compared in the type Spark's
coercion chooses (:mod:`.coercion`, :mod:`.normal_form`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import shorten
from airflow_delta_provider.core.expressions.lexer import PredicateError, Token, tokenize
from airflow_delta_provider.core.expressions.literals import (
    BOOLEAN,
    STRING,
    VOID,
    Literal,
    binary_literal,
    bind_parameter,
    format_value,
    number_literal,
    typed_literal,
)
from airflow_delta_provider.core.expressions.normal_form import (
    Clause,
    Comparison,
    InList,
    Junction,
    Node,
    evaluate,
    normal_form,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Clause", "Comparison", "InList", "Junction", "Predicate", "PredicateError"]

#: How deep NOT and parentheses may nest in a predicate, how many conditions it may join, and how
#: many values an IN may list (a bound list included).
MAX_NESTING = 64
MAX_CONDITIONS = 1000
MAX_IN_VALUES = 1_000_000
_RESERVED = {"AND", "OR", "NOT", "IN", "IS", "NULL", "BETWEEN", "TRUE", "FALSE", "DISTINCT", "FROM"}
_TYPED = {"DATE", "TIMESTAMP", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ"}
_FLIPPED = {"=": "=", "!=": "!=", "<=>": "<=>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_LIST_TYPES = (list, tuple, set, frozenset)


class Predicate:
    """A parsed predicate.

    :param text: the SQL text.
    :param partition_columns: the table's partition columns.
    :param data_columns: the other columns the predicate may name (a read's filter, a DELETE); by
        default none, so that any column but a partition column is refused (a commit's predicate).
    :param parameters: the values of the text's named markers (``:name``), each bound as a typed
        literal (``spark.sql(text, args=parameters)`` reads them alike); a list, tuple or set binds
        the items of an ``IN``. Every marker must be bound and every parameter used.
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
        self.parameters: Mapping[str, Any] = _checked_parameters(parameters)
        self._tokens = tokenize(self.text)
        self._position = 0
        self._depth = 0
        self._conditions = 0
        self._used: set[str] = set()
        self._partition_only = not data_columns
        self._by_key = {c.lower(): c for c in [*data_columns, *partition_columns]}
        self.columns: set[str] = set()
        self._tree = self._parse_or()
        if self._position != len(self._tokens):
            raise self._error(f"unexpected {self._tokens[self._position].value!r}")
        unused = sorted(set(self.parameters) - self._used)
        if unused:
            raise PredicateError(
                f"The parameters {unused} are not used by the predicate {shorten(self.text, 200)!r}: a value "
                f"meant to narrow it would be ignored. Use each as :name in the predicate, or drop it.",
                reason="parameter",
            )
        self._forms: dict[pa.Schema, Clause] = {}

    def __repr__(self) -> str:
        return f"Predicate({self.text!r})"

    @property
    def bound_text(self) -> str:
        """The text with each marker replaced by the SQL literal of its bound value (a list's items
        joined by commas), the rest as written: what Spark records of a parameterized condition.
        A ``replace_where`` commit records it (the partition values are in its files' paths
        anyway); a DELETE records :attr:`text`, its markers, never the values."""
        parts, position = [], 0
        for token in self._tokens:
            if token.kind != "marker" or token.value not in self.parameters:
                continue
            value = self.parameters[token.value]
            items = _ordered(value) if isinstance(value, _LIST_TYPES) else [value]
            literals = [bind_parameter(token.value, item) for item in items]
            parts += [
                self.text[position : token.start],
                ", ".join(format_value(bound.type, bound.value) for bound in literals),
            ]
            position = token.end
        return "".join([*parts, self.text[position:]])

    # --- evaluation ---------------------------------------------------------------------

    def mask(self, rows: pa.Table) -> pa.BooleanArray:
        """Which rows of a typed table match (unknown -> False): partition values or data rows.

        :param rows: a column per column the predicate names, with the table's types.
        """
        form = self.normal_form(rows.schema)
        if rows.num_rows == 0:
            return pa.array([], pa.bool_())
        types = {f.name: f.type for f in rows.schema}
        result = pc.fill_null(evaluate(form, rows.column, types), False)
        if isinstance(result, pa.ChunkedArray):
            result = result.combine_chunks()
        assert isinstance(result, pa.BooleanArray)
        return result

    def expression(self, schema: pa.Schema) -> pc.Expression:
        """The predicate as a pyarrow row filter over a table of ``schema`` (Spark's semantics)."""
        return evaluate(self.normal_form(schema), pc.field, {f.name: f.type for f in schema})

    def normal_form(self, schema: pa.Schema) -> Clause:
        """The predicate in negation normal form, literals typed by ``schema``, for an engine.

        NOT is pushed down to the conditions (``NOT a < 1`` is ``a >= 1``), ``IN`` stays one
        :class:`InList`, ``BETWEEN`` is two comparisons and ``<=>`` a comparison or a null test.

        :raises PredicateError: a literal Spark would refuse, or read depending on a setting, or a
            comparison of a nested column.
        """
        form = self._forms.get(schema)
        if form is None:
            form = self._forms[schema] = normal_form(self._tree, schema)
        return form

    # --- parsing ------------------------------------------------------------------------

    def _peek(self, ahead: int = 0) -> Token | None:
        index = self._position + ahead
        return self._tokens[index] if index < len(self._tokens) else None

    def _take(self) -> Token:
        token = self._peek()
        if token is None:
            raise self._error("unexpected end")
        self._position += 1
        return token

    def _accept(self, *words: str) -> bool:
        token = self._peek()
        if token is not None and token.kind in ("word", "punct", "op") and token.value.upper() in words:
            self._position += 1
            return True
        return False

    def _expect(self, word: str) -> None:
        if not self._accept(word):
            found = self._peek()
            raise self._error(f"expected {word} but found {found.value if found else 'the end'!r}")

    def _error(self, what: str, reason: str = "syntax") -> PredicateError:
        on = "partition columns" if self._partition_only else "the table's columns"
        return PredicateError(
            f"Cannot parse the predicate {shorten(self.text, 200)!r}: {what}. Use a SQL condition on "
            f"{on}, e.g. \"ds = '2024-01-01' AND region IN ('eu', 'us')\".",
            reason=reason,
        )

    # A chain of ORs (ANDs) is one node with every operand, evaluated as a balanced tree; NOT and
    # parentheses nest at most MAX_NESTING deep, and at most MAX_CONDITIONS conditions are joined:
    # no predicate exhausts a stack (Python's, or Arrow's when it binds a large expression, which
    # crashes the process: 20,000 ORed equalities do).

    def _parse_or(self) -> Node:
        nodes = [self._parse_and()]
        while self._accept("OR"):
            nodes.append(self._parse_and())
        return nodes[0] if len(nodes) == 1 else Node("or", tuple(nodes))

    def _parse_and(self) -> Node:
        nodes = [self._parse_not()]
        while self._accept("AND"):
            nodes.append(self._parse_not())
        return nodes[0] if len(nodes) == 1 else Node("and", tuple(nodes))

    def _parse_not(self) -> Node:
        self._depth += 1
        if self._depth > MAX_NESTING:
            raise self._error(f"NOT and parentheses nest more than {MAX_NESTING} deep", "too_large")
        try:
            if self._accept("NOT"):
                return Node("not", (self._parse_not(),))
            if self._accept("("):
                node = self._parse_or()
                self._expect(")")
                return node
            return self._parse_condition()
        finally:
            self._depth -= 1

    def _parse_condition(self) -> Node:
        self._conditions += 1
        if self._conditions > MAX_CONDITIONS:
            raise self._error(
                f"it has more than {MAX_CONDITIONS} conditions (use IN for a list of values)", "too_large"
            )
        left = self._parse_operand()
        if self._accept("IS"):
            return self._parse_is(self._column_of(left, "IS"))
        negated = self._accept("NOT")
        if self._accept("IN"):
            node = Node("in", (self._column_of(left, "IN"), self._parse_list()))
            return Node("not", (node,)) if negated else node
        if self._accept("BETWEEN"):
            column = self._column_of(left, "BETWEEN")
            low = self._parse_literal()
            self._expect("AND")
            high = self._parse_literal()
            node = Node("and", (Node("compare", (column, ">=", low)), Node("compare", (column, "<=", high))))
            return Node("not", (node,)) if negated else node
        if negated:
            raise self._error("NOT must be followed by IN or BETWEEN here")
        token = self._take()
        if token.kind != "op":
            raise self._error(f"expected a comparison, found {token.value!r}")
        op = {"==": "=", "<>": "!="}.get(token.value, token.value)
        right = self._parse_operand()
        if isinstance(left, str) and isinstance(right, Literal):
            return Node("compare", (left, op, right))
        if isinstance(left, Literal) and isinstance(right, str):
            return Node("compare", (right, _FLIPPED[op], left))
        raise self._error("a comparison must compare one column with one value")

    def _parse_is(self, column: str) -> Node:
        negated = self._accept("NOT")
        if self._accept("DISTINCT"):
            self._expect("FROM")
            node = Node("not", (Node("compare", (column, "<=>", self._parse_literal())),))
        else:
            self._expect("NULL")
            node = Node("is_null", (column,))
        return Node("not", (node,)) if negated else node

    def _column_of(self, operand: str | Literal, keyword: str) -> str:
        if isinstance(operand, Literal):
            raise self._error(f"{keyword} applies to a column here, not to the value {operand.text}")
        return operand

    def _parse_operand(self) -> str | Literal:
        token = self._peek()
        if token is None:
            raise self._error("unexpected end")
        following = self._peek(1)
        # DATE and TIMESTAMP name a column unless a string follows (DATE '2024-01-01').
        typed = token.value.upper() in _TYPED and following is not None and following.kind == "string"
        if token.kind == "quoted" or (
            token.kind == "word" and token.value.upper() not in _RESERVED and not typed
        ):
            self._position += 1
            return self._column(token.value)
        return self._parse_literal()

    def _column(self, name: str) -> str:
        column = self._by_key.get(name.lower())
        if column is None and not self._partition_only:
            raise PredicateError(
                f"The predicate {shorten(self.text, 200)!r} uses column {name!r}, which is not a column of "
                f"the table (columns: {sorted(self._by_key.values())}).",
                reason="column",
            )
        if column is None:
            raise PredicateError(
                f"The predicate {shorten(self.text, 200)!r} uses column {name!r}, which is not a partition "
                f"column (partition columns: {sorted(self._by_key.values()) or 'none'}). replaceWhere in "
                f"this provider can only select whole partitions.",
                reason="column",
            )
        self.columns.add(column)
        return column

    def _parse_list(self) -> tuple[Literal, ...]:
        self._expect("(")
        items = [*self._parse_items()]
        while self._accept(","):
            items.extend(self._parse_items())
        self._expect(")")
        if len(items) > MAX_IN_VALUES:
            raise self._error(f"an IN lists more than {MAX_IN_VALUES:,} values", "too_large")
        return tuple(items)

    def _parse_items(self) -> list[Literal]:
        """One item of an IN list: a literal, or a marker bound to a list (its items)."""
        token = self._peek()
        if token is not None and token.kind == "marker":
            value = self._bound(token.value)
            if isinstance(value, _LIST_TYPES):
                self._position += 1
                if not value:
                    raise PredicateError(
                        f"The parameter :{token.value} is an empty list: refused, as NOT IN () would select "
                        f"every row; give at least one value, or leave the condition out.",
                        reason="parameter",
                    )
                return [_bound_item(token.value, n, item) for n, item in enumerate(_ordered(value))]
        return [self._parse_literal()]

    def _bound(self, name: str) -> Any:
        if name not in self.parameters:
            bound = sorted(self.parameters) or "none"
            raise PredicateError(
                f"The predicate {shorten(self.text, 200)!r} uses the marker :{name}, which no parameter "
                f"binds (parameters: {bound}; names are case-sensitive). Pass parameters={{{name!r}: ...}}.",
                reason="parameter",
            )
        self._used.add(name)
        return self.parameters[name]

    def _parse_literal(self) -> Literal:
        token = self._take()
        kind, text = token.kind, token.value
        if kind == "string":
            parts, last = [text], token
            while (following := self._peek()) is not None and following.kind == "string":
                last = self._take()
                parts.append(last.value)  # 'a' 'b' is 'ab', as in Spark
            return Literal(STRING, "".join(parts), self.text[token.start : last.end])
        if kind == "number":
            return number_literal(text)
        if kind == "sign":
            number = self._take()
            if number.kind != "number":
                raise self._error(f"a sign goes before a number only, not before {number.value!r}")
            return number_literal(number.value, negative=text == "-", promotable=text == "-")
        if kind == "marker":
            value = self._bound(text)
            if isinstance(value, _LIST_TYPES):
                raise PredicateError(
                    f"The parameter :{text} is a {type(value).__name__}: a list binds only the items of an "
                    f"IN (column IN (:{text})); pass a single value here.",
                    reason="parameter",
                )
            return bind_parameter(text, value)
        if kind == "binary":
            return binary_literal(text)
        if kind == "word":
            return self._keyword_literal(text)
        raise self._error(f"expected a value, found {text!r}")

    def _keyword_literal(self, word: str) -> Literal:
        upper = word.upper()
        if upper in ("TRUE", "FALSE"):
            return Literal(BOOLEAN, upper == "TRUE", upper)
        if upper == "NULL":
            return Literal(VOID, None, "NULL")
        if upper in _TYPED:
            body = self._take()
            if body.kind != "string":
                raise self._error(f"{upper} must be followed by a quoted string")
            parts = [body.value]
            while (following := self._peek()) is not None and following.kind == "string":
                parts.append(self._take().value)
            return typed_literal("TIMESTAMP" if upper == "TIMESTAMP_LTZ" else upper, "".join(parts))
        raise self._error(
            f"expected a value, found {word!r} (functions and expressions are not in the supported subset)"
        )


def _checked_parameters(parameters: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if parameters is None:
        return {}
    if not isinstance(parameters, Mapping) or not all(isinstance(k, str) for k in parameters):
        raise PredicateError(
            f"parameters must map marker names to values (e.g. {{'customer_id': 42}} for :customer_id), got "
            f"{type(parameters).__name__}.",
            reason="parameter",
        )
    return dict(parameters)


def _bound_item(name: str, index: int, value: Any) -> Literal:
    if isinstance(value, _LIST_TYPES):
        raise PredicateError(
            f"The parameter :{name} holds a nested {type(value).__name__}; list plain values.",
            reason="parameter",
        )
    return bind_parameter(f"{name}[{index}]", value)


def _ordered(values: Any) -> list[Any]:
    """A bound list's items in a stable order (a set's own order varies between processes)."""
    if isinstance(values, set | frozenset):
        return sorted(values, key=lambda v: (type(v).__name__, repr(v)))
    return list(values)
