"""The type a comparison is evaluated in, as Spark 4's ANSI type coercion chooses it.

:func:`comparison_domain` gives the common type of a column and a literal (``=``, ``<``, ``<=>``,
each side of a ``BETWEEN``; an integral literal against a decimal column is typed by its digits),
:func:`in_domain` that of a column and every item of an ``IN`` list (left to right, as Spark folds
it). Both refuse, with a :class:`~.lexer.PredicateError` saying why and what to write, where
Spark's answer depends on a setting or on the data: a number against a string column, a
comparison between a TIMESTAMP and a DATE or TIMESTAMP_NTZ (the session time zone), a decimal
comparison that would round the column's values. :func:`literal_value` casts a literal into the
domain (Spark's casts, ANSI); :func:`to_domain` converts a column (an Arrow array or expression).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import shorten
from airflow_delta_provider.core.expressions.lexer import PredicateError
from airflow_delta_provider.core.expressions.literals import (
    BIGINT,
    BINARY,
    BOOLEAN,
    DATE,
    DOUBLE,
    FLOAT,
    INT,
    INTEGRAL_BITS,
    MAX_PRECISION,
    SMALLINT,
    STRING,
    TIMESTAMP,
    TIMESTAMP_NTZ,
    TINYINT,
    VOID,
    AmbiguousCast,
    InvalidCast,
    Literal,
    SqlType,
    decimal_of,
    decimal_type,
    fit_decimal,
    string_to_boolean,
    string_to_date,
    string_to_decimal,
    string_to_double,
    string_to_long,
    string_to_timestamp,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "arrow_type",
    "comparison_domain",
    "in_domain",
    "literal_value",
    "sql_type",
    "to_arrow",
    "to_domain",
]

_DAY_MICROS = 86_400_000_000
_INTEGRAL_DECIMALS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}
_BY_BITS = {8: TINYINT, 16: SMALLINT, 32: INT, 64: BIGINT}


def sql_type(kind: pa.DataType) -> SqlType | None:
    """The Spark type of an Arrow column type; None for a nested (or unknown) one."""
    types = pa.types
    if types.is_integer(kind) and types.is_signed_integer(kind):
        return _BY_BITS[kind.bit_width]
    checks = (
        (types.is_float32, FLOAT),
        (types.is_float64, DOUBLE),
        (types.is_boolean, BOOLEAN),
        (types.is_date32, DATE),
        (types.is_string, STRING),
        (types.is_large_string, STRING),
        (types.is_binary, BINARY),
        (types.is_large_binary, BINARY),
    )
    for check, found in checks:
        if check(kind):
            return found
    if types.is_decimal(kind):
        return decimal_type(kind.precision, kind.scale)
    if types.is_timestamp(kind):
        return TIMESTAMP if kind.tz is not None else TIMESTAMP_NTZ
    return None


def arrow_type(kind: SqlType) -> pa.DataType:
    """The Arrow type values of a domain are compared in."""
    if kind.name == "decimal":
        return pa.decimal128(kind.precision, kind.scale)
    return _ARROW[kind.name]


_ARROW = {
    "void": pa.null(),
    "boolean": pa.bool_(),
    "tinyint": pa.int8(),
    "smallint": pa.int16(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}


# --- the domain ---------------------------------------------------------------------------------


def comparison_domain(column: str, column_type: SqlType, literal: Literal) -> SqlType:
    """The type Spark compares ``column`` and ``literal`` in (``=``, ``<`` ..., ``<=>``).

    :raises PredicateError: Spark refuses the comparison, or its answer depends on a setting or
        on the data (see the module docstring).
    """
    promote = literal.promotable and literal.type.integral and column_type.name == "decimal"
    other = _promoted(literal) if promote else literal.type
    domain = _wider(column_type, other, column, literal)
    _check_column(column, column_type, domain, literal)
    return domain


def in_domain(column: str, column_type: SqlType, literals: Sequence[Literal]) -> SqlType:
    """The type Spark compares ``column`` and an ``IN`` list in: the wider type of the column and
    every item, folded left to right (no literal is typed by its digits here)."""
    domain = column_type
    for literal in literals:
        domain = _wider(domain, literal.type, column, literal)
    if literals:
        # The literal that chose the domain: the one with the most digits before the point.
        widest = max(literals, key=lambda lit: _whole_digits(lit.type))
        _check_column(column, column_type, domain, widest if widest.type != STRING else literals[0])
    return domain


def _whole_digits(kind: SqlType) -> int:
    if kind.name == "decimal" or kind.integral:
        decimal = _as_decimal(kind)
        return decimal.precision - decimal.scale
    return -1 if kind in (STRING, VOID) else 0


def _promoted(literal: Literal) -> SqlType:
    """Spark's ``DecimalType.fromLiteral``: an integral literal typed by its digits."""
    return decimal_of(Decimal(literal.value))


def _wider(left: SqlType, right: SqlType, column: str, literal: Literal) -> SqlType:
    """Spark's ``findWiderTypeForTwo`` under ANSI (the column's type first)."""
    if left == right or right == VOID:
        return left
    if left == VOID:
        return right
    if left.numeric and right.numeric:
        return _wider_numeric(left, right)
    if STRING in (left, right):
        other = right if left == STRING else left
        if other.integral:
            return BIGINT
        if other.numeric:
            return DOUBLE
        return other
    kinds = {left.name, right.name}
    if kinds == {"date", "timestamp_ntz"}:
        return TIMESTAMP_NTZ
    if kinds in ({"date", "timestamp"}, {"timestamp", "timestamp_ntz"}):
        raise PredicateError(
            f"{_described(column, literal)}: Spark compares {_upper(left)} with {_upper(right)} in "
            f"spark.sql.session.timeZone, so the answer depends on that setting. Compare like with like: "
            f"TIMESTAMP '...Z' (with a zone) for a timestamp column, DATE '...' for a date column, "
            f"TIMESTAMP_NTZ '...' for a timestamp_ntz column.",
            reason="time_zone",
        )
    raise PredicateError(
        f"{_described(column, literal)}: Spark cannot compare {_upper(left)} with {_upper(right)} "
        f"(DATATYPE_MISMATCH); write a value of the column's type.",
        reason="mismatch",
    )


def _wider_numeric(left: SqlType, right: SqlType) -> SqlType:
    if left.integral and right.integral:
        return left if INTEGRAL_BITS[left.name] >= INTEGRAL_BITS[right.name] else right
    if left.floating or right.floating:
        return FLOAT if left == right == FLOAT else DOUBLE
    first, second = (_as_decimal(left), _as_decimal(right))
    scale = max(first.scale, second.scale)
    whole = max(first.precision - first.scale, second.precision - second.scale)
    if whole + scale > MAX_PRECISION:  # DecimalType.boundedPreferIntegralDigits
        scale = max(0, MAX_PRECISION - whole)
    return decimal_type(min(whole + scale, MAX_PRECISION), scale)


def _as_decimal(kind: SqlType) -> SqlType:
    return decimal_type(_INTEGRAL_DECIMALS[kind.name], 0) if kind.integral else kind


def _check_column(column: str, column_type: SqlType, domain: SqlType, literal: Literal) -> None:
    """Refuse a domain in which Spark's answer depends on a setting or on the column's values."""
    if column_type == STRING and domain != STRING:
        raise PredicateError(
            f"{_described(column, literal)}: {column} is a STRING column, and Spark compares it with "
            f"{_upper(literal.type)} by casting every value of {column} to {_upper(domain)} (under ANSI "
            f"the query fails on the first value that is not one; without ANSI those rows are dropped), "
            f"so the answer depends on spark.sql.ansi.enabled and on the data. Quote the value: {column} = "
            f"'{literal.text.strip(chr(39))}'.",
            reason="ansi",
        )
    if column_type.name == "decimal" and domain.name == "decimal" and domain.scale < column_type.scale:
        raise PredicateError(
            f"{_described(column, literal)}: Spark would compare in {_upper(domain)}, rounding every value "
            f"of {column} ({_upper(column_type)}) to {domain.scale} decimal place(s), as {literal.text} is "
            f"typed {_upper(literal.type)}. Write the value as a decimal with at most "
            f"{column_type.precision - column_type.scale} digits before the point (1.0 rather than 1, no "
            f"unary plus), or compare with = (which types a whole number by its digits) instead of IN.",
            reason="decimal_rounding",
        )


def _upper(kind: SqlType) -> str:
    return str(kind).upper()


def _described(column: str, literal: Literal) -> str:
    return f"The comparison of {column} with {shorten(literal.text, 60)}"


# --- values -------------------------------------------------------------------------------------


def literal_value(column: str, literal: Literal, domain: SqlType) -> Any:
    """``literal`` cast into ``domain`` as Spark casts it (ANSI): the Python value a comparison in
    that domain uses (see :class:`~.literals.Literal` for dates and timestamps). A floating value
    is normalised (-0.0 is 0.0, which Spark compares equal).

    :raises PredicateError: the cast fails (Spark would fail the query), or its value would depend
        on the session time zone.
    """
    if literal.value is None:
        return None
    try:
        value = _cast(literal, domain)
    except AmbiguousCast as err:
        raise PredicateError(f"{_described(column, literal)} is refused: {err}.", reason=err.reason) from None
    except InvalidCast as err:
        raise PredicateError(
            f"{_described(column, literal)} is refused: Spark casts the value to {_upper(domain)} and "
            f"{err}, which fails the query under ANSI (spark.sql.ansi.enabled; without it no row matches). "
            f"Write a value of the column's type.",
            reason="cast",
            literal=literal.text,
            target=str(domain),
        ) from None
    if domain.floating and value == 0:
        return 0.0
    return value


def _cast(literal: Literal, domain: SqlType) -> Any:
    source, value = literal.type, literal.value
    if source == STRING:
        return _cast_string(value, domain)
    if domain.floating:
        return float(value)
    if domain.name == "decimal":
        return fit_decimal(Decimal(value), domain.precision, domain.scale, literal.text)
    if source.name == "date" and domain.name == "timestamp_ntz":
        return value * _DAY_MICROS
    return value


def _cast_string(text: str, domain: SqlType) -> Any:
    name = domain.name
    if name == "string":
        return text
    if domain.integral:
        return string_to_long(text)
    if domain.floating:
        return string_to_double(text)
    if name == "decimal":
        return string_to_decimal(text, domain.precision, domain.scale)
    if name == "boolean":
        return string_to_boolean(text)
    if name == "date":
        return string_to_date(text)
    if name in ("timestamp", "timestamp_ntz"):
        return string_to_timestamp(text, zoned=name == "timestamp")
    if name == "binary":
        return text.encode("utf-8")
    raise InvalidCast(f"a string cannot be cast to {domain}")


def to_arrow(values: Sequence[Any], domain: SqlType) -> pa.Array:
    """Values of a domain (as :func:`literal_value` gives them) as an Arrow array of its type."""
    kind = arrow_type(domain)
    if domain.name == "date":
        return pa.array(values, pa.int32()).cast(kind)
    if domain.name in ("timestamp", "timestamp_ntz"):
        return pa.array(values, pa.int64()).cast(kind)
    return pa.array(values, kind)


# --- columns ------------------------------------------------------------------------------------


def to_domain(operand: Any, column_type: pa.DataType, domain: pa.DataType) -> Any:
    """A column (an Arrow array or expression of ``column_type``) converted into ``domain`` as Spark
    casts it: integers exactly or (to double) rounded to nearest, decimals to double correctly
    rounded (through their decimal text: Arrow's direct cast is not), dates to midnight."""
    if column_type == domain:
        return operand
    if pa.types.is_decimal(column_type) and pa.types.is_floating(domain):
        return _arrow_cast(_arrow_cast(operand, pa.string()), domain)
    unsafe = pa.types.is_integer(column_type) and pa.types.is_floating(domain)
    return _arrow_cast(operand, domain, safe=not unsafe)


def _arrow_cast(operand: Any, kind: pa.DataType, *, safe: bool = True) -> Any:
    if isinstance(operand, pc.Expression):
        return operand.cast(kind, safe=safe)
    return pc.cast(operand, kind, safe=safe)
