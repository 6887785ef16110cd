"""How the Airflow layer words numbers in its log lines: plain counts and human durations.

``count(1, "file")`` is ``"1 file"``, ``count(0, "directory", "directories")`` is ``"0 directories"``,
``human_duration(timedelta(days=7))`` is ``"7 days"`` (never ``"7 days, 0:00:00"``), and
``versions([3, 4])`` is ``"versions 3 and 4"``.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["count", "human_duration", "versions"]

_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60))


def count(number: int, noun: str, plural: str | None = None) -> str:
    """``"1 file"``, ``"3 files"``; ``plural`` for nouns that do not take an ``s``.

    :param number: how many.
    :param noun: the singular noun.
    :param plural: the plural noun (default: the noun with ``s``).
    """
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def human_duration(value: timedelta | float | int | None) -> str:
    """A duration in words: ``"7 days"``, ``"1 hour 30 minutes"``, ``"2 seconds"``, ``"0.5 seconds"``.

    :param value: a ``timedelta`` or a number of seconds; None reads ``"none"``.
    """
    if value is None:
        return "none"
    seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if seconds < 0:
        return "-" + human_duration(-seconds)
    parts = []
    rest = seconds
    for unit, size in _UNITS:
        whole = int(rest // size)
        if whole:
            parts.append(count(whole, unit))
            rest -= whole * size
    if rest or not parts:
        amount = int(rest) if float(rest).is_integer() else round(rest, 3)
        parts.append(f"{amount} second" if amount == 1 else f"{amount} seconds")
    return " ".join(parts)


def versions(numbers: Sequence[int]) -> str:
    """``"version 3"``, ``"versions 3 and 4"``, ``"versions 1, 2 and 3"``.

    :param numbers: table versions, in order.
    """
    shown = [str(n) for n in numbers]
    if len(shown) == 1:
        return f"version {shown[0]}"
    if not shown:
        return "no version"
    return f"versions {', '.join(shown[:-1])} and {shown[-1]}"
