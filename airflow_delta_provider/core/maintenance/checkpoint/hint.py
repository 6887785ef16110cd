"""The ``_last_checkpoint`` hint's checksum, as Delta computes and validates it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

__all__ = ["canonical_json", "last_checkpoint_checksum"]


def _encode(text: str) -> str:
    # PROTOCOL.md "How to URL encode keys and string values": every octet but
    # a-z A-Z 0-9 - . _ ~ is percent-encoded, hex in upper case.
    return '"' + quote(text, safe="-._~") + '"'


def _canonical_leaf(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _encode(value)
    if isinstance(value, int | float):
        return json.dumps(value)
    raise TypeError(f"Cannot canonicalise {value!r} ({type(value).__name__}) as JSON.")


def _canonical_pairs(value: Any, path: list[str], out: list[tuple[str, str]]) -> None:
    if isinstance(value, Mapping):
        for key, child in value.items():
            _canonical_pairs(child, [*path, _encode(str(key))], out)
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            _canonical_pairs(child, [*path, str(index)], out)
    else:
        out.append(("+".join(path), _canonical_leaf(value)))


def canonical_json(payload: Mapping[str, Any]) -> str:
    """The canonical form of a ``_last_checkpoint`` JSON (PROTOCOL.md "JSON checksum").

    Leaves become ``path=value`` pairs (names URL-encoded and quoted, array positions as
    numbers, joined by ``+``), sorted by the UTF-8 bytes of the path and joined by ``,``; the
    top-level ``checksum`` key is left out.
    """
    pairs: list[tuple[str, str]] = []
    for key, value in payload.items():
        if key != "checksum":
            _canonical_pairs(value, [_encode(str(key))], pairs)
    pairs.sort(key=lambda pair: pair[0].encode("utf-8"))
    return ",".join(f"{path}={value}" for path, value in pairs)


def last_checkpoint_checksum(payload: Mapping[str, Any]) -> str:
    """The MD5 ``checksum`` of a ``_last_checkpoint`` JSON, as Delta computes and validates it."""
    return hashlib.md5(canonical_json(payload).encode("utf-8"), usedforsecurity=False).hexdigest()
