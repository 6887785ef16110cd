"""The one check of an action read from the log: :func:`action_problem`.

Unknown fields and unknown actions in the log are tolerated everywhere, as the protocol
asks of readers; a field the protocol defines must have its type and fit its Delta type
(:mod:`.delta_types`). Readers name the file and line of the action it refuses
(:func:`malformed_action_error`); the actions' ``from_json`` refuse a payload through
:func:`check_action`. The checks take the parsed JSON (plain dicts), never the typed models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import CorruptLogError, ProtocolError, shorten
from airflow_delta_provider.core.protocol.delta_types import INT_MAX, INT_MIN, LONG_MAX, LONG_MIN, is_integer
from airflow_delta_provider.core.storage.paths import escapes_root

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping


class _Malformed(Exception):
    """A field breaks the protocol; the message names the field and its value (no location)."""


def action_problem(action: Any) -> str | None:
    """What is wrong with one parsed log line, or None when it is a well-formed line.

    Every field the protocol defines for an action (and the core reads) must have its
    type and fit its Delta type: required fields present and not null, integers as JSON
    integers within ``long`` (or ``int``) range, sizes not negative, maps of strings,
    relative paths that stay under their base directory. Unknown actions and unknown fields
    are not checked, as the protocol asks; a line holding two known actions is refused.

    :param action: the line as ``json.loads`` returned it.
    """
    if type(action) is not dict:
        return f"the line is {_describe(action)}, not a JSON object holding an action"
    if len(action) == 1:
        ((kind, payload),) = action.items()
        check = _CHECKS.get(kind)
        if check is None:
            return None
    else:
        kinds = [k for k in action if k in _CHECKS]
        if not kinds:
            return None
        if len(kinds) > 1:
            return f"the line holds {len(kinds)} actions ({', '.join(kinds)}); a line holds one action"
        kind = kinds[0]
        payload, check = action[kind], _CHECKS[kind]
    if type(payload) is not dict:
        return f"the {kind} action is {_describe(payload)}, not an object"
    try:
        check(payload)
    except _Malformed as err:
        return str(err)
    return None


def check_action(kind: str, payload: Any) -> None:
    """Refuse the payload of a ``kind`` action that :func:`action_problem` finds malformed.

    :raises ProtocolError: for a protocol action.
    :raises CorruptLogError: for any other action.
    """
    problem = action_problem({kind: payload})
    if problem is not None:
        error = ProtocolError if kind == "protocol" else CorruptLogError
        raise error(f"Invalid {kind} action: {problem}. The log is corrupt.")


def malformed_action_error(
    where: str, problem: str, raw: bytes | None, action: Any, path: str
) -> CorruptLogError:
    """The error for an action read from the log that :func:`action_problem` refused.

    :param where: the line or row (``Line 3 of <uri>``); ``raw``, the line as read, if any.
    :returns: a :class:`ProtocolError` for a protocol action, a :class:`CorruptLogError` otherwise.
    """
    error = ProtocolError if isinstance(action, dict) and "protocol" in action else CorruptLogError
    shown = f": {raw[:200]!r}" if raw is not None else ""
    return error(
        f"{where} is a malformed Delta action: {problem}{shown}. The log is corrupt; restore the file "
        f"from a backup, or repair it with the engine that wrote it.",
        path=path,
    )


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return f"the boolean {str(value).lower()}"
    if isinstance(value, float):
        return f"the number {shorten(repr(value))} (not an integer)"
    if isinstance(value, int):
        return f"the integer {shorten(str(value))}"
    if isinstance(value, str):
        return f"the string {shorten(repr(value))}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return shorten(repr(value))


def _missing(payload: Mapping[str, Any], where: str, key: str) -> _Malformed:
    return _Malformed(f"{where}.{key} is {'null' if key in payload else 'missing'}")


def _wrong(where: str, key: str, expected: str, value: Any) -> _Malformed:
    return _Malformed(f"{where}.{key} must be {expected}, got {_describe(value)}")


def _field(
    payload: Mapping[str, Any], where: str, key: str, required: bool, json_type: type, expected: str
) -> Any:
    """The field's value checked for its JSON type; None when it is absent (or null) and optional."""
    value = payload.get(key)
    if value is None:
        if required:
            raise _missing(payload, where, key)
        return None
    if type(value) is not json_type:
        raise _wrong(where, key, expected, value)
    return value


def _long(
    payload: Mapping[str, Any],
    where: str,
    key: str,
    *,
    required: bool = False,
    minimum: int = LONG_MIN,
    maximum: int = LONG_MAX,
    kind: str = "long",
) -> None:
    value = payload.get(key)
    if value is None:
        if required:
            raise _missing(payload, where, key)
        return
    if type(value) is not int and not is_integer(value):
        raise _wrong(where, key, f"an integer (a Delta {kind})", value)
    if not minimum <= value <= maximum:
        raise _Malformed(
            f"{where}.{key} is {shorten(str(value))}, which does not fit: it must be a Delta {kind} "
            f"from {minimum} to {maximum}"
        )


def _int(
    payload: Mapping[str, Any], where: str, key: str, *, required: bool = False, minimum: int = INT_MIN
) -> None:
    _long(payload, where, key, required=required, minimum=minimum, maximum=INT_MAX, kind="int")


def _string(payload: Mapping[str, Any], where: str, key: str, *, required: bool = False) -> None:
    _field(payload, where, key, required, str, "a string")


def _bool(payload: Mapping[str, Any], where: str, key: str, *, required: bool = False) -> None:
    _field(payload, where, key, required, bool, "true or false")


def _string_map(payload: Mapping[str, Any], where: str, key: str, *, required: bool = False) -> None:
    value = _field(payload, where, key, required, dict, "an object of strings")
    for name, item in (value or {}).items():
        if item is not None and type(item) is not str:
            raise _Malformed(
                f"{where}.{key}[{shorten(repr(name))}] must be a string or null, got {_describe(item)}"
            )


def _string_list(payload: Mapping[str, Any], where: str, key: str, *, required: bool = False) -> None:
    for item in _field(payload, where, key, required, list, "a list of strings") or ():
        if type(item) is not str:
            raise _Malformed(f"{where}.{key} must hold strings only, got {_describe(item)}")


def _path(payload: Mapping[str, Any], where: str, key: str) -> None:
    value = payload.get(key)
    if value is None:
        raise _missing(payload, where, key)
    if type(value) is not str or not value:
        raise _wrong(where, key, "a non-empty string", value)
    if escapes_root(value):
        raise _Malformed(
            f"{where}.{key} {shorten(repr(value))} is relative and leads out of the table root through "
            f"'..'; the core never reads outside the table root"
        )


def _deletion_vector(payload: Mapping[str, Any], where: str) -> None:
    dv = payload.get("deletionVector")
    if dv is None:
        return
    where = f"{where}.deletionVector"
    if type(dv) is not dict:
        raise _Malformed(f"{where} must be an object, got {_describe(dv)}")
    storage_type = dv.get("storageType")
    if storage_type not in ("u", "i", "p"):
        raise _Malformed(f"{where}.storageType must be 'u', 'i' or 'p', got {_describe(storage_type)}")
    _string(dv, where, "pathOrInlineDv", required=True)
    _int(dv, where, "offset", minimum=0)
    _int(dv, where, "sizeInBytes", required=True, minimum=0)
    _long(dv, where, "cardinality", required=True, minimum=0)
    _long(dv, where, "maxRowIndex")
    value = dv["pathOrInlineDv"]
    if storage_type == "u":
        # <random prefix><20-character Z85 UUID>: the file is <root>/<prefix>/deletion_vector_<uuid>.bin
        if len(value) < 20:
            raise _Malformed(f"{where}.pathOrInlineDv {shorten(repr(value))} is shorter than a Z85 UUID")
        escapes = escapes_root(f"{value[:-20]}/deletion_vector.bin")
    else:
        escapes = storage_type == "p" and escapes_root(value)
    if escapes:
        raise _Malformed(
            f"{where}.pathOrInlineDv {shorten(repr(value))} leads out of the table root through '..'; the "
            f"core never reads outside the table root"
        )


# File actions come by the thousand: a plain one passes a few inline tests; anything else
# (or anything wrong) takes the field-by-field check, which names the problem.
def _plain_path(path: Any) -> bool:
    return (
        type(path) is str
        and path != ""
        and ((".." not in path and "%" not in path) or not escapes_root(path))
    )


def _check_add(p: Mapping[str, Any]) -> None:
    size = p.get("size")
    modified = p.get("modificationTime")
    values = p.get("partitionValues")
    plain = (
        _plain_path(p.get("path"))
        and type(size) is int
        and 0 <= size <= LONG_MAX
        and type(modified) is int
        and LONG_MIN <= modified <= LONG_MAX
        and type(p.get("dataChange")) is bool
        and type(values) is dict
    )
    if plain and values is not None:
        for value in values.values():
            if value is not None and type(value) is not str:
                plain = False
                break
    if plain and len(p) != 5:
        stats = p.get("stats")
        provider = p.get("clusteringProvider")
        plain = (
            (stats is None or type(stats) is str)
            and (provider is None or type(provider) is str)
            and p.get("tags") is None
            and p.get("deletionVector") is None
            and p.get("baseRowId") is None
            and p.get("defaultRowCommitVersion") is None
        )
    if plain:
        return
    _path(p, "add", "path")
    _string_map(p, "add", "partitionValues", required=True)
    _long(p, "add", "size", required=True, minimum=0)
    _long(p, "add", "modificationTime", required=True)
    _bool(p, "add", "dataChange", required=True)
    if len(p) > 5:  # more than the required fields, all present
        _string(p, "add", "stats")
        _string_map(p, "add", "tags")
        _deletion_vector(p, "add")
        _long(p, "add", "baseRowId")
        _long(p, "add", "defaultRowCommitVersion")
        _string(p, "add", "clusteringProvider")


def _check_remove(p: Mapping[str, Any]) -> None:
    deleted = p.get("deletionTimestamp")
    if (
        _plain_path(p.get("path"))
        and type(p.get("dataChange")) is bool
        and (deleted is None or (type(deleted) is int and LONG_MIN <= deleted <= LONG_MAX))
        and len(p) == 2 + ("deletionTimestamp" in p)
    ):
        return
    _path(p, "remove", "path")
    _bool(p, "remove", "dataChange", required=True)
    _long(p, "remove", "deletionTimestamp")
    if len(p) > 2 + ("deletionTimestamp" in p):  # more than the usual fields
        _bool(p, "remove", "extendedFileMetadata")
        _string_map(p, "remove", "partitionValues")
        _long(p, "remove", "size", minimum=0)
        _string(p, "remove", "stats")
        _string_map(p, "remove", "tags")
        _deletion_vector(p, "remove")
        _long(p, "remove", "baseRowId")
        _long(p, "remove", "defaultRowCommitVersion")


def _check_cdc(p: Mapping[str, Any]) -> None:
    _path(p, "cdc", "path")
    _string_map(p, "cdc", "partitionValues", required=True)
    _long(p, "cdc", "size", required=True, minimum=0)
    _bool(p, "cdc", "dataChange", required=True)
    _string_map(p, "cdc", "tags")


def _check_metadata(p: Mapping[str, Any]) -> None:
    _string(p, "metaData", "id", required=True)
    fmt = p.get("format")
    if fmt is None:
        raise _missing(p, "metaData", "format")
    if type(fmt) is not dict:
        raise _wrong("metaData", "format", "an object", fmt)
    _string(fmt, "metaData.format", "provider", required=True)
    _string_map(fmt, "metaData.format", "options")
    _string(p, "metaData", "schemaString", required=True)
    _string_list(p, "metaData", "partitionColumns", required=True)
    _string_map(p, "metaData", "configuration", required=True)
    _string(p, "metaData", "name")
    _string(p, "metaData", "description")
    _long(p, "metaData", "createdTime")


def _check_protocol(p: Mapping[str, Any]) -> None:
    _int(p, "protocol", "minReaderVersion", required=True, minimum=1)
    _int(p, "protocol", "minWriterVersion", required=True, minimum=1)
    _string_list(p, "protocol", "readerFeatures")
    _string_list(p, "protocol", "writerFeatures")


def _check_txn(p: Mapping[str, Any]) -> None:
    _string(p, "txn", "appId", required=True)
    _long(p, "txn", "version", required=True)
    _long(p, "txn", "lastUpdated")


def _check_domain_metadata(p: Mapping[str, Any]) -> None:
    _string(p, "domainMetadata", "domain", required=True)
    _string(p, "domainMetadata", "configuration", required=True)
    _bool(p, "domainMetadata", "removed", required=True)


def _check_commit_info(p: Mapping[str, Any]) -> None:
    # Free-form, but time travel reads the in-commit timestamp as a long (one per commit: cheap).
    if p.get("inCommitTimestamp") is not None:
        _long(p, "commitInfo", "inCommitTimestamp")


def _check_sidecar(p: Mapping[str, Any]) -> None:
    _path(p, "sidecar", "path")
    _long(p, "sidecar", "sizeInBytes", required=True, minimum=0)
    _long(p, "sidecar", "modificationTime", required=True)
    _string_map(p, "sidecar", "tags")


def _check_checkpoint_metadata(p: Mapping[str, Any]) -> None:
    _long(p, "checkpointMetadata", "version", required=True, minimum=0)
    _string_map(p, "checkpointMetadata", "tags")


_CHECKS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "add": _check_add,
    "remove": _check_remove,
    "metaData": _check_metadata,
    "protocol": _check_protocol,
    "txn": _check_txn,
    "commitInfo": _check_commit_info,
    "cdc": _check_cdc,
    "domainMetadata": _check_domain_metadata,
    "sidecar": _check_sidecar,
    "checkpointMetadata": _check_checkpoint_metadata,
}
