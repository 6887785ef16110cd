"""Delta schemas (the ``schemaString`` JSON) and pyarrow schemas, both ways.

Delta field metadata (comments, column-mapping ids and physical names, generation
expressions, ...) rides on the arrow field metadata: each key maps to the JSON
encoding of its value, so a round trip is lossless.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pyarrow as pa

from airflow_delta_provider.core.errors import SchemaError

_PRIMITIVES: dict[str, pa.DataType] = {
    "string": pa.string(),
    "long": pa.int64(),
    "integer": pa.int32(),
    "short": pa.int16(),
    "byte": pa.int8(),
    "float": pa.float32(),
    "double": pa.float64(),
    "boolean": pa.bool_(),
    "binary": pa.binary(),
    "date": pa.date32(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_DECIMAL_RE = re.compile(r"^decimal\(\s*(\d+)\s*,\s*(-?\d+)\s*\)$")
PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"


def schema_from_delta(schema: str | dict[str, Any]) -> pa.Schema:
    """The pyarrow schema of a Delta ``schemaString``.

    :raises SchemaError: the JSON is not a struct schema, or a type is unknown.
    """
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except ValueError as err:
            raise SchemaError(f"The table schema is not valid JSON: {err}") from None
    if not isinstance(schema, dict) or schema.get("type") != "struct":
        raise SchemaError(f"The table schema must be a struct type, got {str(schema)[:200]!r}.")
    return pa.schema([_field_from_delta(f, "") for f in schema.get("fields", [])])


def _field_from_delta(field: dict[str, Any], parent: str) -> pa.Field:
    name = field["name"]
    path = f"{parent}.{name}" if parent else name
    metadata = {k: json.dumps(v) for k, v in (field.get("metadata") or {}).items()}
    return pa.field(
        name,
        delta_type_to_arrow(field["type"], path),
        nullable=bool(field.get("nullable", True)),
        metadata=metadata or None,
    )


def delta_type_to_arrow(delta_type: str | dict[str, Any], path: str = "") -> pa.DataType:
    """The pyarrow type of a Delta type (a primitive name, or a struct/array/map object).

    :raises SchemaError: the type is unknown to this core (e.g. ``variant``, ``geometry``).
    """
    if isinstance(delta_type, str):
        if delta_type in _PRIMITIVES:
            return _PRIMITIVES[delta_type]
        match = _DECIMAL_RE.match(delta_type)
        if match:
            return pa.decimal128(int(match[1]), int(match[2]))
        raise SchemaError(
            f"Column {path or '?'} has the Delta type {delta_type!r}, which this core does not support."
        )
    kind = delta_type.get("type")
    if kind == "struct":
        return pa.struct([_field_from_delta(f, path) for f in delta_type["fields"]])
    if kind == "array":
        element = pa.field(
            "element",
            delta_type_to_arrow(delta_type["elementType"], f"{path}.element"),
            nullable=bool(delta_type.get("containsNull", True)),
        )
        return pa.list_(element)
    if kind == "map":
        key = pa.field("key", delta_type_to_arrow(delta_type["keyType"], f"{path}.key"), nullable=False)
        value = pa.field(
            "value",
            delta_type_to_arrow(delta_type["valueType"], f"{path}.value"),
            nullable=bool(delta_type.get("valueContainsNull", True)),
        )
        return pa.map_(key, value)
    raise SchemaError(f"Column {path or '?'} has an unknown Delta type {json.dumps(delta_type)[:200]}.")


def schema_to_delta(schema: pa.Schema) -> dict[str, Any]:
    """The Delta schema object of a pyarrow schema."""
    return {"type": "struct", "fields": [_field_to_delta(f, f.name) for f in schema]}


def schema_to_delta_json(schema: pa.Schema) -> str:
    """The compact ``schemaString`` Delta writers store in ``metaData``."""
    return json.dumps(schema_to_delta(schema), separators=(",", ":"))


def _field_to_delta(field: pa.Field, path: str) -> dict[str, Any]:
    metadata = {}
    for key, value in (field.metadata or {}).items():
        text = value.decode()
        try:
            metadata[key.decode()] = json.loads(text)
        except ValueError:
            metadata[key.decode()] = text
    return {
        "name": field.name,
        "type": arrow_type_to_delta(field.type, path),
        "nullable": field.nullable,
        "metadata": metadata,
    }


def arrow_type_to_delta(arrow_type: pa.DataType, path: str = "") -> str | dict[str, Any]:
    """The Delta type of a pyarrow type.

    Unsigned integers widen to the next signed type (``uint64`` is refused: no Delta type
    holds it); dictionaries are their value type; timestamps of any unit map to
    ``timestamp`` (with a time zone) or ``timestamp_ntz``.

    :raises SchemaError: the type has no Delta equivalent.
    """
    t = arrow_type
    if pa.types.is_dictionary(t):
        return arrow_type_to_delta(t.value_type, path)
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if (
        pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    ):
        return "binary"
    simple = {
        pa.int64(): "long",
        pa.int32(): "integer",
        pa.int16(): "short",
        pa.int8(): "byte",
        pa.uint8(): "short",
        pa.uint16(): "integer",
        pa.uint32(): "long",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.date32(): "date",
        pa.date64(): "date",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz is not None else "timestamp_ntz"
    if pa.types.is_decimal(t):
        if t.precision > 38:
            raise SchemaError(f"Column {path} is {t}; Delta decimals hold at most 38 digits.")
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_struct(t):
        return {"type": "struct", "fields": [_field_to_delta(f, f"{path}.{f.name}") for f in t]}
    if pa.types.is_map(t):
        return {
            "type": "map",
            "keyType": arrow_type_to_delta(t.key_type, f"{path}.key"),
            "valueType": arrow_type_to_delta(t.item_type, f"{path}.value"),
            "valueContainsNull": t.item_field.nullable,
        }
    if (
        pa.types.is_list(t)
        or pa.types.is_large_list(t)
        or pa.types.is_fixed_size_list(t)
        or pa.types.is_list_view(t)
    ):
        return {
            "type": "array",
            "elementType": arrow_type_to_delta(t.value_type, f"{path}.element"),
            "containsNull": t.value_field.nullable,
        }
    raise SchemaError(f"Column {path} has the arrow type {t}, which has no Delta equivalent.")


# --- column mapping --------------------------------------------------------------------


def physical_schema(schema: pa.Schema, mode: str) -> pa.Schema:
    """The schema with every (nested) field renamed to its column-mapping physical name.

    :param mode: the table's ``delta.columnMapping.mode``: ``none``, ``name`` or ``id``.
    """
    if mode == "none":
        return schema
    return pa.schema([_physical_field(f) for f in schema])


def _physical_field(field: pa.Field) -> pa.Field:
    raw = (field.metadata or {}).get(PHYSICAL_NAME_KEY.encode())
    if raw is None:
        raise SchemaError(f"Column {field.name} has no {PHYSICAL_NAME_KEY} although column mapping is on.")
    return pa.field(json.loads(raw), _map_nested(field.type, _physical_field), field.nullable, field.metadata)


def _map_nested(t: pa.DataType, rename: Any) -> pa.DataType:
    if pa.types.is_struct(t):
        return pa.struct([rename(f) for f in t])
    if pa.types.is_list(t):
        f = t.value_field
        return pa.list_(f.with_type(_map_nested(f.type, rename)))
    if pa.types.is_map(t):
        key, item = t.key_field, t.item_field
        return pa.map_(
            key.with_type(_map_nested(key.type, rename)), item.with_type(_map_nested(item.type, rename))
        )
    return t


def rename_to_logical(table: pa.Table, logical: pa.Schema) -> pa.Table:
    """A table read with physical column names, with the logical names (nested ones too).

    Columns correspond by position; the data is not copied.
    """
    arrays = [_cast_names(column, field.type) for column, field in zip(table.columns, logical, strict=True)]
    return pa.Table.from_arrays(arrays, schema=logical)


def _cast_names(column: pa.ChunkedArray, logical_type: pa.DataType) -> pa.ChunkedArray:
    if column.type == logical_type:
        return column
    return pa.chunked_array([_rebuild(chunk, logical_type) for chunk in column.chunks], type=logical_type)


def _rebuild(array: pa.Array, logical_type: pa.DataType) -> pa.Array:
    """Rebuild ``array`` with the logical type's names, child by child (positions match)."""
    if pa.types.is_struct(logical_type):
        children = [_rebuild(array.field(i), f.type) for i, f in enumerate(logical_type)]
        return pa.StructArray.from_arrays(
            children, fields=list(logical_type), mask=array.is_null() if array.null_count else None
        )
    if pa.types.is_list(logical_type):
        values = _rebuild(array.values, logical_type.value_type)
        return pa.ListArray.from_arrays(
            array.offsets, values, type=logical_type, mask=array.is_null() if array.null_count else None
        )
    if pa.types.is_map(logical_type):
        keys = _rebuild(array.keys, logical_type.key_type)
        items = _rebuild(array.items, logical_type.item_type)
        return pa.MapArray.from_arrays(
            array.offsets, keys, items, type=logical_type, mask=array.is_null() if array.null_count else None
        )
    return array.cast(logical_type) if array.type != logical_type else array
