"""A package face's names, imported on first use (PEP 562).

Each subpackage's ``__init__`` names what it offers in a ``_LAZY`` table (public name -> the
module defining it) and imports the same names under ``TYPE_CHECKING`` for type checkers and
for ``tests/test_architecture.py``. Importing one module of the core then imports only what
that module needs: the Airflow entry points, which must not import pyarrow, reach the few
light modules they use through the same faces as everyone else.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["lazy_attributes"]


def lazy_attributes(
    package: str, names: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` for the names of ``names``.

    A name is imported from its module when first asked for, then kept in the package's
    namespace, so later lookups are plain attribute reads; an unknown name is the usual
    ``AttributeError`` (``ImportError`` in a ``from ... import``) naming it.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = names.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
