"""Literals typed as Spark SQL types them, and Spark's casts of a string into the other types.

A number's type follows from its spelling (``1`` INT, ``2147483648`` BIGINT, ``1.50`` DECIMAL(3,2),
``1e0`` DOUBLE, suffixes ``Y S L F D BD``); ``DATE``/``TIMESTAMP``/``TIMESTAMP_NTZ`` texts and string
casts follow Spark's ``DateTimeUtils`` and ANSI casts (``spark.sql.ansi.enabled``, Spark 4's
default); a bound parameter is typed as ``spark.sql(args=...)`` types a Python value. Dates are
kept as days and timestamps as microseconds since the epoch (UTC; an NTZ one as its wall clock),
so every year Spark reads is representable. A text whose value would depend on the session's
time zone is refused (:class:`~.lexer.PredicateError`, saying what to write instead).
"""

from __future__ import annotations

import datetime as dt
import math
import numbers
import re
import sys
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Context, Decimal, InvalidOperation
from typing import Any

from airflow_delta_provider.core.errors import shorten
from airflow_delta_provider.core.expressions.lexer import PredicateError

__all__ = [
    "BIGINT",
    "BINARY",
    "BOOLEAN",
    "DATE",
    "DOUBLE",
    "FLOAT",
    "INT",
    "MAX_PRECISION",
    "SMALLINT",
    "STRING",
    "TIMESTAMP",
    "TIMESTAMP_NTZ",
    "TINYINT",
    "VOID",
    "AmbiguousCast",
    "InvalidCast",
    "Literal",
    "SqlType",
    "bind_parameter",
    "decimal_type",
    "format_value",
    "number_literal",
    "string_to_boolean",
    "string_to_date",
    "string_to_decimal",
    "string_to_double",
    "string_to_long",
    "string_to_timestamp",
    "typed_literal",
]

MAX_PRECISION = 38


@dataclass(frozen=True)
class SqlType:
    """A Spark SQL type: its name, and for ``decimal`` its precision and scale."""

    name: str
    precision: int = 0
    scale: int = 0

    def __str__(self) -> str:
        return f"decimal({self.precision},{self.scale})" if self.name == "decimal" else self.name

    @property
    def integral(self) -> bool:
        return self.name in INTEGRAL_BITS

    @property
    def floating(self) -> bool:
        return self.name in ("float", "double")

    @property
    def numeric(self) -> bool:
        return self.integral or self.floating or self.name == "decimal"


def decimal_type(precision: int, scale: int) -> SqlType:
    return SqlType("decimal", precision, scale)


VOID, BOOLEAN, STRING, BINARY = SqlType("void"), SqlType("boolean"), SqlType("string"), SqlType("binary")
TINYINT, SMALLINT, INT, BIGINT = SqlType("tinyint"), SqlType("smallint"), SqlType("int"), SqlType("bigint")
FLOAT, DOUBLE = SqlType("float"), SqlType("double")
DATE, TIMESTAMP, TIMESTAMP_NTZ = SqlType("date"), SqlType("timestamp"), SqlType("timestamp_ntz")
INTEGRAL_BITS = {"tinyint": 8, "smallint": 16, "int": 32, "bigint": 64}


@dataclass(frozen=True)
class Literal:
    """A typed literal.

    :param type: its Spark type.
    :param value: None (NULL), bool, int, Decimal, float, str, bytes; a DATE's days and a
        TIMESTAMP's microseconds since the epoch.
    :param text: as written (or ``:name`` for a parameter), for messages.
    :param promotable: whether Spark sees a literal (an integral one compared with a decimal column
        is then typed by its digits); False when written with a unary plus, an expression.
    """

    type: SqlType
    value: Any
    text: str
    promotable: bool = True


class InvalidCast(Exception):
    """A string that Spark's ANSI cast refuses (the query would fail); the caller says which
    comparison, in a :class:`PredicateError`."""


class AmbiguousCast(InvalidCast):
    """A string Spark reads, but whose value depends on a setting or would surprise: a zone-less
    timestamp read in the session time zone (``reason`` ``time_zone``), a region zone or a zone
    Spark drops (``zone``)."""

    def __init__(self, message: str, reason: str) -> None:
        super().__init__(message)
        self.reason = reason


# --- numbers ------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(?P<digits>\d+\.\d*|\.\d+|\d+)(?P<exponent>[eE][+-]?\d+)?(?P<suffix>[A-Za-z_]*)")
# Spark bounds a literal by Scala's BigDecimal(Double.MaxValue) (and of Float.MaxValue as a
# double): the decimal text Java prints for the double, not its exact binary value.
_DOUBLE_MAX = Decimal(repr(sys.float_info.max))
_FLOAT_MAX = Decimal("3.4028234663852886e38")


def number_literal(text: str, *, negative: bool = False, promotable: bool = True) -> Literal:
    """A number token (``text`` without its sign) as Spark's parser types it.

    :raises PredicateError: an unknown suffix, or a value out of its type's range.
    """
    match = _NUMBER.fullmatch(text)
    shown = ("-" if negative else "") + text
    if match is None:
        raise PredicateError(f"{shown!r} is not a number Spark SQL reads.", reason="literal")
    digits, exponent, suffix = match["digits"], match["exponent"] or "", match["suffix"].upper()
    exact = Decimal(("-" if negative else "") + digits + exponent)
    integer_text = "." not in digits and not exponent
    if suffix in ("L", "S", "Y") and integer_text:
        kind = {"L": BIGINT, "S": SMALLINT, "Y": TINYINT}[suffix]
        return Literal(_check_integral(int(exact), kind, shown), int(exact), shown, promotable)
    if suffix == "D" or (suffix == "" and exponent):
        return Literal(DOUBLE, _bounded_float(exact, _DOUBLE_MAX, "DOUBLE", shown), shown, promotable)
    if suffix == "F":
        value = _bounded_float(exact, _FLOAT_MAX, "FLOAT", shown)
        return Literal(FLOAT, float(_float32(value)), shown, promotable)
    if suffix == "BD" or (suffix == "" and not integer_text):
        return _decimal_literal(exact, shown, promotable)
    if suffix == "":
        value = int(exact)
        if -(2**31) <= value < 2**31:
            return Literal(INT, value, shown, promotable)
        if -(2**63) <= value < 2**63:
            return Literal(BIGINT, value, shown, promotable)
        return _decimal_literal(exact, shown, promotable)
    raise PredicateError(
        f"{shown!r} is not a number Spark SQL reads: the suffixes are Y (TINYINT), S (SMALLINT), L (BIGINT) "
        f"on whole numbers, and F (FLOAT), D (DOUBLE), BD (DECIMAL).",
        reason="literal",
    )


def _check_integral(value: int, kind: SqlType, shown: str) -> SqlType:
    bits = INTEGRAL_BITS[kind.name]
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise PredicateError(
            f"The literal {shown} is out of the range of {str(kind).upper()}.", reason="literal"
        )
    return kind


def _bounded_float(exact: Decimal, limit: Decimal, name: str, shown: str) -> float:
    if abs(exact) > limit:
        raise PredicateError(
            f"The literal {shown} is out of the range of {name} (Spark refuses it).", reason="literal"
        )
    return float(exact)


def _float32(value: float) -> Any:
    import numpy as np

    return np.float32(value)


def _decimal_literal(exact: Decimal, shown: str, promotable: bool) -> Literal:
    kind = decimal_of(exact)
    if kind.precision > MAX_PRECISION:
        raise PredicateError(
            f"The literal {shown} has {kind.precision} digits: more than a DECIMAL holds "
            f"({MAX_PRECISION}); Spark refuses it (write it as a DOUBLE, e.g. {shown}D, if that is meant).",
            reason="literal",
        )
    value = exact if exact.as_tuple().exponent <= 0 else Decimal(int(exact))  # type: ignore[operator]
    return Literal(kind, value, shown, promotable)


def decimal_of(exact: Decimal) -> SqlType:
    """The DECIMAL type Spark gives a value (``BigDecimal``'s precision and scale, scale >= 0)."""
    _, digits, exponent = exact.as_tuple()
    assert isinstance(exponent, int)
    significant = len("".join(map(str, digits)).lstrip("0")) or 1
    if exponent > 0:
        return decimal_type(significant + exponent if any(digits) else 1, 0)
    scale = -exponent
    return decimal_type(max(significant, scale), scale)


# --- typed literals -----------------------------------------------------------------------------


def typed_literal(keyword: str, body: str) -> Literal:
    """``DATE 'text'``, ``TIMESTAMP 'text'`` (``TIMESTAMP_LTZ``) and ``TIMESTAMP_NTZ 'text'``.

    :raises PredicateError: the text is not a date or timestamp Spark reads, or its value would
        depend on the session time zone (a zone-less TIMESTAMP).
    """
    shown = f"{keyword} {_quote(body)}"
    try:
        if keyword == "DATE":
            return Literal(DATE, string_to_date(body), shown)
        if keyword == "TIMESTAMP_NTZ":
            return Literal(TIMESTAMP_NTZ, string_to_timestamp(body, zoned=False), shown)
        return Literal(TIMESTAMP, string_to_timestamp(body, zoned=True), shown)
    except InvalidCast as err:
        reason = err.reason if isinstance(err, AmbiguousCast) else "literal"
        raise PredicateError(f"{shown} is refused: {err}.", reason=reason) from None


def binary_literal(hex_digits: str) -> Literal:
    shown = f"X'{hex_digits}'"
    try:
        return Literal(BINARY, bytes.fromhex(hex_digits) if len(hex_digits) % 2 == 0 else None, shown)
    except ValueError:
        pass
    raise PredicateError(
        f"{shown} is not a binary literal: it takes an even number of hex digits.", reason="literal"
    )


def _quote(text: str) -> str:
    return "'" + shorten(text, 60).replace("\\", "\\\\").replace("'", "\\'") + "'"


# --- Spark's casts of a string (ANSI) ------------------------------------------------------------

# Spark trims these before reading a number (UTF8String.toLong), a date, a timestamp or a boolean:
# ASCII whitespace and ISO control characters (not U+00A0). A double is read by Java's
# Double.parseDouble, which trims characters up to U+0020 only.
_TRIMMED = "".join(map(chr, range(33))) + "\x7f"
_JAVA_TRIMMED = "".join(map(chr, range(33)))
_LONG = re.compile(r"[+-]?\d+")
_JAVA_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?[fFdD]?)")
_SPECIAL_DOUBLES = {
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "+infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
    "nan": math.nan,
}
_DECIMAL_TEXT = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_TRUE = {"t", "true", "y", "yes", "1"}
_FALSE = {"f", "false", "n", "no", "0"}


def string_to_long(text: str) -> int:
    """Spark's ANSI cast of a string to BIGINT (whole numbers only; no decimal point)."""
    trimmed = text.strip(_TRIMMED)
    if not _LONG.fullmatch(trimmed):
        raise InvalidCast(f"{_quote(text)} is not a whole number")
    value = int(trimmed)
    if not -(2**63) <= value < 2**63:
        raise InvalidCast(f"{_quote(text)} is out of the range of BIGINT")
    return value


def string_to_double(text: str) -> float:
    """Spark's ANSI cast of a string to DOUBLE: Java's number syntax, or inf/infinity/nan words."""
    trimmed = text.strip(_JAVA_TRIMMED)
    if _JAVA_DOUBLE.fullmatch(trimmed):
        number = trimmed.rstrip("fFdD") if trimmed[-1:] not in ("N", "y") else trimmed
        return float(number.replace("Infinity", "inf"))
    special = _SPECIAL_DOUBLES.get(text.strip(_JAVA_TRIMMED).lower())
    if special is None:
        raise InvalidCast(f"{_quote(text)} is not a number (hexadecimal floats are not supported)")
    return special


def string_to_decimal(text: str, precision: int, scale: int) -> Decimal:
    """Spark's ANSI cast of a string to DECIMAL(precision, scale): rounded half up, refused when it
    does not fit."""
    trimmed = text.strip(_TRIMMED)
    if not _DECIMAL_TEXT.fullmatch(trimmed):
        raise InvalidCast(f"{_quote(text)} is not a decimal number")
    return fit_decimal(Decimal(trimmed), precision, scale, _quote(text))


def fit_decimal(value: Decimal, precision: int, scale: int, shown: str) -> Decimal:
    """``value`` rounded half up (away from zero) to ``scale``, as Spark's cast rounds it.

    :raises InvalidCast: it then needs more than ``precision`` digits.
    """
    try:
        rounded = value.quantize(Decimal(1).scaleb(-scale), rounding=ROUND_HALF_UP, context=_WIDE)
    except InvalidOperation:
        raise InvalidCast(f"{shown} does not fit DECIMAL({precision},{scale})") from None
    if rounded.adjusted() + 1 + scale > precision and rounded != 0:
        raise InvalidCast(f"{shown} does not fit DECIMAL({precision},{scale})")
    return rounded


def string_to_boolean(text: str) -> bool:
    """Spark's ANSI cast of a string to BOOLEAN."""
    word = text.strip(_TRIMMED).lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise InvalidCast(f"{_quote(text)} is not a boolean (true, false, t, f, yes, no, y, n, 1, 0)")


_DATE_TEXT = re.compile(
    r"(?P<sign>[+-])?(?P<y>\d{4,7})(?:-(?P<m>\d{1,2})(?:-(?P<d>\d{1,2})(?:[ T].*)?)?)?", re.DOTALL
)
_TIMESTAMP_TEXT = re.compile(
    r"(?P<sign>[+-])?(?P<y>\d{4,6})(?:-(?P<m>\d{1,2})(?:-(?P<d>\d{1,2})"
    r"(?:[ T](?P<H>\d{1,2})(?::(?P<M>\d{1,2})(?::(?P<S>\d{1,2})(?:\.(?P<f>\d*))?(?P<zone>\D.*)?)?)?)?)?)?",
    re.DOTALL,
)


def string_to_date(text: str) -> int:
    """Spark's cast of a string to DATE (``DateTimeUtils.stringToDate``): days since the epoch.
    ``yyyy``, ``yyyy-[m]m``, ``yyyy-[m]m-[d]d`` and after the day a space or ``T`` and anything."""
    match = _DATE_TEXT.fullmatch(text.strip(_TRIMMED))
    if match is None:
        raise InvalidCast(f"{_quote(text)} is not a date")
    year = int(match["y"]) * (-1 if match["sign"] == "-" else 1)
    return _days(year, int(match["m"] or 1), int(match["d"] or 1), text)


def string_to_timestamp(text: str, *, zoned: bool) -> int:
    """Spark's cast of a string to TIMESTAMP (``zoned``) or TIMESTAMP_NTZ: microseconds since the
    epoch (an NTZ value's wall clock read as UTC).

    :raises InvalidCast: not a timestamp; a TIMESTAMP without a zone (Spark would read it in the
        session's time zone) or with a region zone (the JVM's and Python's time zone data may
        differ); an NTZ with a zone (Spark would drop it).
    """
    match = _TIMESTAMP_TEXT.fullmatch(text.strip(_TRIMMED))
    if match is None:
        raise InvalidCast(f"{_quote(text)} is not a timestamp")
    year = int(match["y"]) * (-1 if match["sign"] == "-" else 1)
    days = _days(year, int(match["m"] or 1), int(match["d"] or 1), text)
    hour, minute, second = (int(match[k] or 0) for k in ("H", "M", "S"))
    if hour > 23 or minute > 59 or second > 59:
        raise InvalidCast(f"{_quote(text)} is not a timestamp (no such time of day)")
    micros = int(((match["f"] or "") + "000000")[:6])
    local = ((days * 24 + hour) * 60 + minute) * 60 + second
    zone = match["zone"]
    if not zoned:
        if zone is not None:
            raise AmbiguousCast(
                f"{_quote(text)} has a zone, which a TIMESTAMP_NTZ has not (Spark would drop it); write the "
                f"wall-clock time without a zone",
                "zone",
            )
        return local * 1_000_000 + micros
    if zone is None:
        example = text.strip() + (
            "Z" if match["S"] else ":00Z" if match["M"] else " 00:00:00Z" if not match["H"] else ":00:00Z"
        )
        raise AmbiguousCast(
            f"{_quote(text)} has no zone, so Spark would read it in spark.sql.session.timeZone; add one "
            f"({_quote(example)} for UTC, or an offset such as +02:00)",
            "time_zone",
        )
    return (local - _offset_seconds(zone.strip(), text)) * 1_000_000 + micros


_OFFSET = re.compile(
    r"(?:(?:UTC|GMT|UT)(?=[+-]|$))?(?:(?P<sign>[+-])(?P<h>\d{1,2})(?::?(?P<m>\d{1,2}))?(?::?(?P<s>\d{2}))?)?"
)


def _offset_seconds(zone: str, text: str) -> int:
    if zone == "Z":
        return 0
    match = _OFFSET.fullmatch(zone)
    if match is None or not zone:
        raise AmbiguousCast(
            f"{_quote(text)} names the zone {zone!r}: only UTC offsets are supported (Z, +02:00, UTC+2), "
            f"as region zones depend on the time zone data of each engine",
            "zone",
        )
    if match["sign"] is None:
        return 0
    hours, minutes, seconds = int(match["h"]), int(match["m"] or 0), int(match["s"] or 0)
    if hours > 18 or minutes > 59 or seconds > 59 or hours * 3600 + minutes * 60 + seconds > 18 * 3600:
        raise InvalidCast(f"{_quote(text)} has the offset {zone!r}, beyond +-18:00")
    total = hours * 3600 + minutes * 60 + seconds
    return -total if match["sign"] == "-" else total


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _days(year: int, month: int, day: int, text: str) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (any year, as Java's LocalDate)."""
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not 1 <= month <= 12 or not 1 <= day <= _MONTH_DAYS[month - 1] + (leap and month == 2):
        raise InvalidCast(f"{_quote(text)} is not a date (no such day)")
    # Howard Hinnant's days_from_civil.
    shifted = year - (month <= 2)
    era = shifted // 400
    year_of_era = shifted - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


def format_value(kind: SqlType, value: Any) -> str:
    """A literal's value as SQL text, for messages."""
    if value is None:
        return "NULL"
    if kind.name == "date":
        return (
            f"DATE '{_EPOCH + dt.timedelta(days=value)}'" if -719162 <= value <= 2932896 else f"DATE({value})"
        )
    if kind.name in ("timestamp", "timestamp_ntz"):
        try:
            moment = dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=value)
        except OverflowError:
            return f"{kind.name.upper()}({value} us)"
        return (
            f"{'TIMESTAMP' if kind.name == 'timestamp' else 'TIMESTAMP_NTZ'} '{moment.isoformat(sep=' ')}"
            + ("Z'" if kind.name == "timestamp" else "'")
        )
    if isinstance(value, str):
        return _quote(value)
    return str(value)


_EPOCH = dt.date(1970, 1, 1)
_WIDE = Context(prec=2 * MAX_PRECISION + 2)


# --- parameters ---------------------------------------------------------------------------------


def bind_parameter(name: str, value: Any) -> Literal:
    """A bound value as the literal ``spark.sql(text, args={name: value})`` makes of it.

    :raises PredicateError: a value Spark would read differently from how it reads here (a naive
        datetime: in the process's zone), None (a missing value must not select nothing silently)
        or a type with no SQL literal.
    """
    shown = f":{name}"
    if isinstance(value, bool):
        return Literal(BOOLEAN, value, shown)
    if isinstance(value, numbers.Integral):
        number = int(value)
        if not -(2**63) <= number < 2**63:
            raise PredicateError(
                f"The parameter {shown} = {number} is out of the range of BIGINT.", reason="parameter"
            )
        return Literal(INT if -(2**31) <= number < 2**31 else BIGINT, number, shown)
    if isinstance(value, float):
        return Literal(DOUBLE, float(value), shown)
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise PredicateError(
                f"The parameter {shown} = {value} is no decimal number; pass a float.", reason="parameter"
            )
        return _decimal_literal(value, shown, True)
    if isinstance(value, str):
        return Literal(STRING, value, shown)
    if isinstance(value, bytes | bytearray):
        return Literal(BINARY, bytes(value), shown)
    if isinstance(value, dt.datetime):
        return Literal(TIMESTAMP, _instant(value, shown), shown)
    if isinstance(value, dt.date):
        return Literal(DATE, value.toordinal() - _EPOCH.toordinal(), shown)
    if value is None:
        raise PredicateError(
            f"The parameter {shown} is None: a comparison with NULL selects no row, so a missing value is "
            f"refused; pass a value, or write IS NULL in the predicate.",
            reason="parameter",
        )
    raise PredicateError(
        f"The parameter {shown} is a {type(value).__name__}, which has no SQL literal; pass a str, int, "
        f"float, Decimal, bool, date, datetime (with tzinfo) or bytes (a list only as the whole list "
        f"of an IN).",
        reason="parameter",
    )


def _instant(value: dt.datetime, shown: str) -> int:
    offset = value.utcoffset()
    if offset is None:
        raise PredicateError(
            f"The parameter {shown} = {value.isoformat()} is a datetime without tzinfo: Spark would read it "
            f"in the local zone of the process that binds it. Give it a tzinfo (e.g. "
            f"datetime.timezone.utc), or pass a string for a TIMESTAMP_NTZ column.",
            reason="parameter",
        )
    naive = value.replace(tzinfo=None) - offset
    days = naive.date().toordinal() - _EPOCH.toordinal()
    return (
        ((days * 24 + naive.hour) * 60 + naive.minute) * 60_000_000
        + naive.second * 1_000_000
        + naive.microsecond
    )
