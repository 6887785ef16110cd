"""Reading Airflow connection fields that hold JSON, and refusing bad ones without showing them.

Connection fields hold secrets, and a malformed one may be a secret pasted into the wrong place:
every error here names the connection and the field, never the content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "StorageConnectionError",
    "connection_extra",
    "extra_field",
    "flag_field",
    "json_kind",
    "json_object",
    "object_field",
]


class StorageConnectionError(ValueError):
    """A storage connection that cannot give credentials for the table's storage (names the connection
    and the field, never a secret)."""


def json_object(value: Any, what: str, *, example: str = '{"endpoint_url": "..."}') -> dict[str, Any]:
    """A connection field holding a JSON object, as a dict.

    The error never shows the field's content, whichever field it is: connection fields hold
    secrets, and a malformed one may be a secret pasted into the wrong place.

    :param value: the field (a JSON string or an already decoded mapping).
    :param what: names the connection and the field, for the error.
    :param example: a JSON object of the kind expected, for the error.
    :raises ValueError: the field is not a JSON object.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{what} is not a JSON object such as {example} (invalid JSON at line {err.lineno}, column "
                f"{err.colno}: {err.msg}; its content is not shown, as it may hold a secret)."
            ) from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a JSON object such as {example}, got {json_kind(value)}.")
    return dict(value)


def json_kind(value: Any) -> str:
    """What kind of JSON value ``value`` is (``null``, ``a string`` ...), never the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def connection_extra(conn: Any) -> Mapping[str, Any]:
    """A connection's extra as a mapping (Airflow decodes it; a JSON list or string is refused).

    :raises StorageConnectionError: naming the connection, never the content.
    """
    extra = conn.extra_dejson
    if extra is None or extra == "":
        return {}
    if not isinstance(extra, Mapping):
        raise StorageConnectionError(
            f"The extra of connection {conn.conn_id!r} ({conn.conn_type}) must be a JSON object, got "
            f"{json_kind(extra)}."
        )
    return extra


def object_field(conn: Any, value: Any, name: str, example: str) -> Mapping[str, Any]:
    """``value``, an extra that must be a JSON object when it is set at all (null included).

    :raises StorageConnectionError: naming the connection and the field, never the content.
    """
    if isinstance(value, Mapping):
        return value
    raise StorageConnectionError(
        f"Connection {conn.conn_id!r} ({conn.conn_type}): the {name} extra must be a JSON object such as "
        f"{example}, got {json_kind(value)}. Fix the connection's extra."
    )


def extra_field(conn: Any, name: str) -> Any:
    """A connection extra as the storage providers read it: ``name``, else ``extra__<conn_type>__name``.

    An empty string counts as unset."""
    extra = connection_extra(conn)
    value = extra.get(name)
    if value is None:
        value = extra.get(f"extra__{conn.conn_type}__{name}")
    return None if value == "" else value


def flag_field(conn: Any, name: str) -> bool:
    """A boolean extra (``true``, ``1``, ``yes``, ``on`` in any case), False when unset."""
    value = extra_field(conn, name)
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")
