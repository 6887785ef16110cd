"""Delta's value types as the log holds them: the integer ranges, what an integer is, the
float limits, and a writer's check of one value against its type.

Both directions decide "does this value fit its Delta type" from here: the check of every
action read from the log (:mod:`.action_checks`) and the validation of every value written
to it (the actions' ``validate()`` and :mod:`.validation`). Each side words its own
messages: a reader names the file and line of a corrupt action, a writer the field and its value.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any, TypeGuard

from airflow_delta_provider.core.errors import InvalidLogValueError

#: Delta's ``long`` (signed 64-bit) and ``int`` (signed 32-bit) ranges.
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
#: Delta's integer types and their ranges.
INTEGER_RANGES = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (INT_MIN, INT_MAX),
    "long": (LONG_MIN, LONG_MAX),
}
#: The largest finite magnitude of Delta's ``float`` and ``double``.
FLOAT_MAX = {"float": Decimal("3.4028234663852886e38"), "double": Decimal("1.7976931348623157e308")}


def decimal_digits(number: Decimal) -> tuple[int, int]:
    """The digits a finite ``number`` needs before and after the point, trailing zeros dropped:
    ``(36, 2)`` for ``999999999999999999999999999999999999.99``, ``(0, 0)`` for zero.

    Exact for any number of digits and any exponent: read off the coefficient, never through a
    context (``Decimal.normalize()`` under Python's default one keeps 28 digits and rounds a
    precision-38 decimal past its type).
    """
    _, coefficient, exponent = number.as_tuple()
    assert isinstance(exponent, int), "a finite number"
    significant = len(coefficient)
    while significant and coefficient[significant - 1] == 0:
        significant -= 1
    if significant == 0:
        return 0, 0
    exponent += len(coefficient) - significant
    return max(0, significant + exponent), max(0, -exponent)


def is_integer(value: Any) -> TypeGuard[int]:
    """Whether ``value`` is an integer as Delta's integer types take it: an ``int``, never a
    ``bool`` (JSON's ``true``) nor a float (``1.0``).

    Hot loops test ``type(value) is int`` inline first and fall back to the full check; for
    the values ``json.loads`` and Arrow produce that is the same answer.
    """
    return isinstance(value, int) and not isinstance(value, bool)


def check_integer(
    field: str,
    value: Any,
    minimum: int = LONG_MIN,
    maximum: int = LONG_MAX,
    type_name: str = "long",
) -> int:
    """``value`` if it is an integer in ``[minimum, maximum]`` (by default a Delta ``long``).

    :param field: what the value is, for the message (``txn.version (app_version)`` ...).
    :raises InvalidLogValueError: naming the field, the value and the allowed range.
    """
    kind = f"a {'non-negative ' if minimum == 0 else ''}Delta {type_name}"
    if not is_integer(value):
        raise InvalidLogValueError(
            f"{field} must be an integer ({kind}, {minimum} to {maximum}), got {show_value(value)}."
        )
    if not minimum <= value <= maximum:
        raise InvalidLogValueError(
            f"{field} is {value}, outside the allowed range of {kind}: {minimum} to {maximum}."
        )
    return value


def check_string(field: str, value: Any) -> None:
    """Refuse anything but a non-empty string.

    :raises InvalidLogValueError: naming the field and the value.
    """
    if not isinstance(value, str) or not value:
        raise InvalidLogValueError(f"{field} must be a non-empty string, got {show_value(value)}.")


def show_value(value: Any) -> str:
    """A value as a writer's message shows it: its repr and type, or the repr cut at 200 characters."""
    text = repr(value)
    return (text[:200] + "...") if len(text) > 200 else f"{text} ({type(value).__name__})"
