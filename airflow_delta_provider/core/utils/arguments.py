"""Checks of the arguments the core's public functions take (typed values, no parsing).

The Airflow layer turns rendered templates into these types first; here a value of the
wrong type or range is refused naming the argument, never guessed at.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_bool", "check_positive_int"]


def check_bool(name: str, value: Any) -> bool:
    """``value`` when it is a bool.

    :raises ValueError: naming ``name`` and the value.
    """
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be True or False, got {value!r}.")
    return value


def check_positive_int(name: str, value: Any, *, optional: bool = True) -> int | None:
    """``value`` when it is a positive int (or None, when ``optional``).

    :raises ValueError: naming ``name`` and the value.
    """
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return value
