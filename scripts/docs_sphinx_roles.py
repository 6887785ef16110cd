"""A griffe extension for the docs site: the docstrings' Sphinx roles as links of the API reference.

The provider's docstrings are written for Sphinx (``:class:`DeltaTable```, ``:meth:`.commit_files```,
``:mod:`.segment```, ``~`` for the last name only). mkdocstrings' Sphinx parser reads the field lists
(``:param:``, ``:raises:``) but leaves roles in the text as they are. This extension rewrites each
role into an optional cross-reference: a link when the object it names is on a page of the site,
the name as code when it is not (a private module, a class of another package). Links the docs'
pages write themselves (``[title][identifier]``) stay required: ``mkdocs build --strict`` fails
on one that names nothing.
"""

from __future__ import annotations

import html
import re
from typing import Any

import griffe

__all__ = ["SphinxRoles"]

_ROLE = re.compile(r":(?:py:)?(?P<role>class|func|meth|exc|attr|data|obj|mod|const):`(?P<target>[^`]+)`")


def _resolve(obj: griffe.Object, target: str) -> str:
    """The full path of ``target`` as seen from ``obj``'s docstring, or ``target`` itself."""
    name = target.lstrip(".")
    head, _, rest = name.partition(".")
    scope: griffe.Object | None = obj
    while scope is not None:
        try:
            return scope.resolve(head) + (f".{rest}" if rest else "")
        except (griffe.NameResolutionError, AttributeError):
            scope = scope.parent
    if target.startswith("."):  # Sphinx's ``.name``: a module beside this one, in its package
        module = obj if obj.is_module else obj.module
        package = module if module.is_init_module else module.parent
        if package is not None:
            return f"{package.path}.{name}"
    return name


def _rewrite(obj: griffe.Object, text: str) -> str:
    def link(match: re.Match[str]) -> str:
        target = match["target"].strip()
        shown = target.lstrip("~")
        title = shown.rsplit(".", 1)[-1] if target.startswith("~") else shown.lstrip(".")
        identifier = _resolve(obj, shown)
        return (
            f'<autoref identifier="{html.escape(identifier)}" optional>'
            f"<code>{html.escape(title)}</code></autoref>"
        )

    return _ROLE.sub(link, text)


class SphinxRoles(griffe.Extension):
    """Rewrite the Sphinx roles of every docstring of a package once it is loaded."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in _walk(pkg):
            if obj.docstring is not None:
                obj.docstring.value = _rewrite(obj, obj.docstring.value)


def _walk(obj: griffe.Object) -> list[griffe.Object]:
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found.extend(_walk(member))  # type: ignore[arg-type]
    return found
