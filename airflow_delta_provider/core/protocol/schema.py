"""Delta table schemas (the ``schemaString`` of a ``metaData`` action) as pyarrow schemas, and back.

The type mapping follows PROTOCOL.md ("Schema Serialization Format"); Arrow's other encodings of the
same values are accepted on the way back, and types Delta cannot hold (or this core cannot read) are
refused with a :class:`SchemaError` naming the type and the column, as is a schema nested more
than ``schema_json.MAX_SCHEMA_DEPTH`` deep. Delta's column metadata rides on the Arrow field, so a
schema goes back unchanged. The mapping is in docs/read-api.md ("Types").
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, TypeAlias

import pyarrow as pa

from airflow_delta_provider.core.errors import SchemaError, SchemaMismatchError, UnsupportedFeatureError
from airflow_delta_provider.core.protocol.schema_json import (
    check_arrow_schema_depth,
    check_schema_depth,
    parse_schema_string,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "COLUMN_MAPPING_ID_KEY",
    "COLUMN_MAPPING_PHYSICAL_NAME_KEY",
    "DeltaType",
    "arrow_type_to_delta",
    "check_schema_compatible",
    "delta_type_name",
    "delta_type_to_arrow",
    "is_type_widening",
    "merge_schemas",
    "physical_name",
    "physical_name_map",
    "physical_schema",
    "rename_to_logical",
    "schema_from_delta",
    "schema_to_delta",
    "schema_to_delta_json",
]

#: A Delta type as it appears in a schemaString: a primitive name or a struct/array/map object.
DeltaType: TypeAlias = str | dict[str, Any]

COLUMN_MAPPING_PHYSICAL_NAME_KEY = "delta.columnMapping.physicalName"
COLUMN_MAPPING_ID_KEY = "delta.columnMapping.id"

# Spark writes list elements as "element" (parquet's 3-level list) and delta-rs names them so too.
LIST_ELEMENT_NAME = "element"
MAP_KEY_NAME = "key"
MAP_VALUE_NAME = "value"
MAX_DECIMAL_PRECISION = 38

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
    "void": pa.null(),
}
_DECIMAL = re.compile(r"decimal\(\s*(\d+)\s*,\s*(\d+)\s*\)")
_REFUSED_REASONS: dict[str, str] = {
    "variant": "the variantType table feature is not supported by this core",
    "geometry": "geospatial types are not supported by this core",
    "geography": "geospatial types are not supported by this core",
}
# Arrow and Parquet keep their own bookkeeping in field metadata; it is not Delta column metadata.
_FOREIGN_METADATA_PREFIXES = (b"ARROW:", b"PARQUET:")


# --- Delta -> arrow ----------------------------------------------------------------------


def schema_from_delta(schema_json: str | dict[str, Any]) -> pa.Schema:
    """The pyarrow schema of a Delta ``schemaString`` (the JSON text or its parsed object).

    :raises SchemaError: the JSON is malformed, is not a struct, nests too deeply, has duplicate
        column names (ignoring case), or uses a type this core does not support.
    """
    if isinstance(schema_json, str):
        try:
            schema_json = parse_schema_string(schema_json)
        except json.JSONDecodeError as exc:
            raise SchemaError(f"The Delta schemaString is not valid JSON: {exc}") from None
    if not isinstance(schema_json, dict) or schema_json.get("type") != "struct":
        raise SchemaError(f"A Delta table schema must be a struct type, got {_short(schema_json)}")
    return pa.schema(_fields_from_delta(check_schema_depth(schema_json), parent=""))


def delta_type_to_arrow(delta_type: DeltaType) -> pa.DataType:
    """The pyarrow type of one Delta type (``"long"``, ``"decimal(10,2)"``, a struct object ...).

    :raises SchemaError: the type is malformed or not supported (see the module docstring).
    """
    return _type_from_delta(delta_type, path="<type>")


def _type_from_delta(delta_type: Any, path: str) -> pa.DataType:
    if isinstance(delta_type, str):
        return _primitive_from_delta(delta_type, path)
    if not isinstance(delta_type, dict):
        raise SchemaError(f"Column {path} has a malformed Delta type: {_short(delta_type)}")
    kind = delta_type.get("type")
    if kind == "struct":
        return pa.struct(_fields_from_delta(delta_type, parent=path))
    if kind == "array":
        element_path = f"{path}.element"
        element = _type_from_delta(_require(delta_type, "elementType", path), element_path)
        contains_null = _require_bool(delta_type, "containsNull", path)
        return pa.list_(pa.field(LIST_ELEMENT_NAME, element, nullable=contains_null))
    if kind == "map":
        key = _type_from_delta(_require(delta_type, "keyType", path), f"{path}.key")
        value = _type_from_delta(_require(delta_type, "valueType", path), f"{path}.value")
        value_contains_null = _require_bool(delta_type, "valueContainsNull", path)
        return pa.map_(
            pa.field(MAP_KEY_NAME, key, nullable=False),
            pa.field(MAP_VALUE_NAME, value, nullable=value_contains_null),
        )
    raise _refused_type(kind if isinstance(kind, str) else _short(delta_type), path)


def _primitive_from_delta(name: str, path: str) -> pa.DataType:
    primitive = _PRIMITIVES.get(name)
    if primitive is not None:
        return primitive
    match = _DECIMAL.fullmatch(name)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= MAX_DECIMAL_PRECISION or scale > precision:
            raise SchemaError(
                f"Column {path} has type {name!r}: Delta decimals need 1 <= precision <= 38 and "
                f"0 <= scale <= precision."
            )
        return pa.decimal128(precision, scale)
    raise _refused_type(name, path)


def _refused_type(name: str, path: str) -> SchemaError:
    base = name.split("(", 1)[0].strip()
    reason = _REFUSED_REASONS.get(base, "it is not a Delta type this core knows")
    return SchemaError(f"Column {path} has Delta type {name!r}, which cannot be read: {reason}.")


def _fields_from_delta(struct: dict[str, Any], parent: str) -> list[pa.Field]:
    fields = struct.get("fields")
    if not isinstance(fields, list):
        raise SchemaError(f"The struct {parent or '<schema>'} has no 'fields' list: {_short(struct)}")
    result = []
    for raw in fields:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise SchemaError(f"A field of {parent or '<schema>'} has no name: {_short(raw)}")
        path = _join(parent, raw["name"])
        arrow_type = _type_from_delta(_require(raw, "type", path), path)
        metadata = raw.get("metadata") or {}
        if not isinstance(metadata, dict):
            raise SchemaError(f"Column {path} has metadata that is not a JSON object: {_short(metadata)}")
        if TYPE_CHANGES_KEY in metadata:
            _check_type_changes(metadata[TYPE_CHANGES_KEY], path)
        result.append(
            pa.field(
                raw["name"],
                arrow_type,
                nullable=_require_bool(raw, "nullable", path),
                metadata=_encode_metadata(metadata),
            )
        )
    _check_unique(result, parent)
    return result


# --- type widening -------------------------------------------------------------------------

TYPE_CHANGES_KEY = "delta.typeChanges"
_INTEGERS = ("byte", "short", "integer", "long")
#: Digits left of the point a decimal needs to hold every value of an integer type.
_INTEGER_DIGITS = {"byte": 3, "short": 5, "integer": 10, "long": 20}


def is_type_widening(from_type: str, to_type: str) -> bool:
    """Whether Delta's type widening allows ``from_type`` -> ``to_type`` (PROTOCOL.md, "Type Widening").

    Integers to wider integers; float, byte, short and integer to double; date to
    timestamp_ntz; ``decimal(p,s)`` to ``decimal(p+k1,s+k2)`` with ``k1 >= k2 >= 0``; integers
    to decimals with room for all their digits. Every such change is a lossless cast, which is
    how the read path upcasts older files.
    """
    if from_type in _INTEGERS and to_type in _INTEGERS:
        return _INTEGERS.index(from_type) < _INTEGERS.index(to_type)
    if to_type == "double" and from_type in ("float", "byte", "short", "integer"):
        return True
    if (from_type, to_type) == ("date", "timestamp_ntz"):
        return True
    target = _DECIMAL.fullmatch(to_type)
    if target is None:
        return False
    precision, scale = int(target.group(1)), int(target.group(2))
    if from_type in _INTEGER_DIGITS:
        return precision - scale >= _INTEGER_DIGITS[from_type]
    source = _DECIMAL.fullmatch(from_type)
    if source is None:
        return False
    old_precision, old_scale = int(source.group(1)), int(source.group(2))
    return scale >= old_scale and precision - scale >= old_precision - old_scale and precision > old_precision


def _check_type_changes(changes: Any, path: str) -> None:
    """A ``delta.typeChanges`` list: each change one this core reads by casting, else refused."""
    if not isinstance(changes, list):
        raise SchemaError(f"Column {path}: {TYPE_CHANGES_KEY} must be a JSON array, got {_short(changes)}.")
    for change in changes:
        if not isinstance(change, dict) or not all(
            isinstance(change.get(k), str) for k in ("fromType", "toType")
        ):
            raise SchemaError(
                f"Column {path}: each {TYPE_CHANGES_KEY} entry needs fromType and toType, "
                f"got {_short(change)}."
            )
        if not is_type_widening(change["fromType"], change["toType"]):
            raise UnsupportedFeatureError(
                f"Column {path} was changed from {change['fromType']} to {change['toType']} "
                f"({TYPE_CHANGES_KEY}); this core reads only the type widenings PROTOCOL.md defines, so "
                f"it cannot read files written before that change. Read the table with Spark.",
                feature="typeWidening",
                operation="read",
            )


def _encode_metadata(metadata: dict[str, Any]) -> dict[bytes, bytes] | None:
    if not metadata:
        return None
    return {key.encode(): _compact_json(value).encode() for key, value in metadata.items()}


# --- arrow -> Delta ----------------------------------------------------------------------


def schema_to_delta(schema: pa.Schema) -> dict[str, Any]:
    """The Delta schema object of a pyarrow schema (see the module docstring for the type mapping).

    :raises SchemaError: an arrow type has no Delta equivalent, or two columns differ only in case.
    """
    _check_unique(list(check_arrow_schema_depth(schema)), parent="")
    return {"type": "struct", "fields": [_field_to_delta(field, parent="") for field in schema]}


def schema_to_delta_json(schema: pa.Schema) -> str:
    """:func:`schema_to_delta` as the compact JSON Delta writes into ``schemaString``."""
    return _compact_json(schema_to_delta(schema))


def arrow_type_to_delta(arrow_type: pa.DataType) -> DeltaType:
    """The Delta type of one pyarrow type: a primitive name, or a struct/array/map object.

    :raises SchemaError: the type has no Delta equivalent (see the module docstring).
    """
    return _type_to_delta(arrow_type, path="<type>")


def delta_type_name(delta_type: DeltaType) -> str:
    """A short SQL-like name of a Delta type for messages: ``array<struct<a:long>>``."""
    if isinstance(delta_type, str):
        return delta_type
    kind = delta_type.get("type")
    if kind == "struct":
        inner = ",".join(f"{f['name']}:{delta_type_name(f['type'])}" for f in delta_type.get("fields", []))
        return f"struct<{inner}>"
    if kind == "array":
        return f"array<{delta_type_name(delta_type['elementType'])}>"
    if kind == "map":
        return f"map<{delta_type_name(delta_type['keyType'])},{delta_type_name(delta_type['valueType'])}>"
    return _short(delta_type)


def _field_to_delta(field: pa.Field, parent: str) -> dict[str, Any]:
    path = _join(parent, field.name)
    return {
        "name": field.name,
        "type": _type_to_delta(field.type, path),
        "nullable": field.nullable,
        "metadata": _decode_metadata(field.metadata),
    }


def _type_to_delta(arrow_type: pa.DataType, path: str) -> DeltaType:
    types = pa.types
    if types.is_dictionary(arrow_type) or types.is_run_end_encoded(arrow_type):
        return _type_to_delta(arrow_type.value_type, path)
    if isinstance(arrow_type, pa.BaseExtensionType):
        raise _unsupported_arrow(arrow_type, path, "extension types have no Delta equivalent")
    for predicate, delta_name in _SIMPLE_ARROW_TYPES:
        if predicate(arrow_type):
            return delta_name
    if types.is_timestamp(arrow_type):
        return "timestamp" if arrow_type.tz is not None else "timestamp_ntz"
    if types.is_decimal(arrow_type):
        if arrow_type.precision > MAX_DECIMAL_PRECISION or arrow_type.scale < 0:
            raise _unsupported_arrow(arrow_type, path, "Delta decimals have precision <= 38 and scale >= 0")
        return f"decimal({arrow_type.precision},{arrow_type.scale})"
    if types.is_struct(arrow_type):
        fields = [arrow_type.field(i) for i in range(arrow_type.num_fields)]
        _check_unique(fields, parent=path)
        return {"type": "struct", "fields": [_field_to_delta(f, parent=path) for f in fields]}
    if types.is_map(arrow_type):
        return {
            "type": "map",
            "keyType": _type_to_delta(arrow_type.key_type, f"{path}.key"),
            "valueType": _type_to_delta(arrow_type.item_type, f"{path}.value"),
            "valueContainsNull": arrow_type.item_field.nullable,
        }
    if _is_list_like(arrow_type):
        return {
            "type": "array",
            "elementType": _type_to_delta(arrow_type.value_type, f"{path}.element"),
            "containsNull": arrow_type.value_field.nullable,
        }
    if types.is_uint64(arrow_type):
        raise _unsupported_arrow(
            arrow_type, path, "no Delta integer holds every uint64; cast to int64 or decimal(20,0)"
        )
    if types.is_null(arrow_type):
        raise _unsupported_arrow(
            arrow_type, path, "a column of only nulls has no Delta type; cast it to a real type"
        )
    raise _unsupported_arrow(arrow_type, path, "it has no Delta equivalent")


_SIMPLE_ARROW_TYPES: tuple[tuple[Callable[[pa.DataType], bool], str], ...] = (
    (pa.types.is_string, "string"),
    (pa.types.is_large_string, "string"),
    (pa.types.is_string_view, "string"),
    (pa.types.is_binary, "binary"),
    (pa.types.is_large_binary, "binary"),
    (pa.types.is_binary_view, "binary"),
    (pa.types.is_fixed_size_binary, "binary"),
    (pa.types.is_boolean, "boolean"),
    (pa.types.is_int8, "byte"),
    (pa.types.is_int16, "short"),
    (pa.types.is_int32, "integer"),
    (pa.types.is_int64, "long"),
    # Widened to the smallest signed type holding every value: uint8 -> short etc.
    (pa.types.is_uint8, "short"),
    (pa.types.is_uint16, "integer"),
    (pa.types.is_uint32, "long"),
    (pa.types.is_float16, "float"),
    (pa.types.is_float32, "float"),
    (pa.types.is_float64, "double"),
    (pa.types.is_date32, "date"),
    (pa.types.is_date64, "date"),
)


def _is_list_like(arrow_type: pa.DataType) -> bool:
    types = pa.types
    return bool(
        types.is_list(arrow_type)
        or types.is_large_list(arrow_type)
        or types.is_fixed_size_list(arrow_type)
        or types.is_list_view(arrow_type)
        or types.is_large_list_view(arrow_type)
    )


def _unsupported_arrow(arrow_type: pa.DataType, path: str, reason: str) -> SchemaError:
    return SchemaError(f"Column {path} has arrow type {arrow_type}, which Delta cannot store: {reason}.")


def _decode_metadata(metadata: dict[bytes, bytes] | None) -> dict[str, Any]:
    """Delta column metadata from arrow field metadata (JSON values; plain strings tolerated)."""
    if not metadata:
        return {}
    decoded: dict[str, Any] = {}
    for key, raw in metadata.items():
        if key.startswith(_FOREIGN_METADATA_PREFIXES):
            continue
        decoded[key.decode()] = _metadata_value(raw)
    return decoded


def _metadata_value(raw: bytes) -> Any:
    # Our own fields hold JSON; fields from elsewhere (delta-rs, user code) may hold bare strings.
    text = raw.decode()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


# --- column mapping ----------------------------------------------------------------------


def physical_name(field: pa.Field) -> str:
    """The name a field has in the Parquet files: ``delta.columnMapping.physicalName``, else its name.

    Falls back to the logical name as Spark does (``DeltaColumnMapping.getPhysicalName``).
    """
    raw = (field.metadata or {}).get(COLUMN_MAPPING_PHYSICAL_NAME_KEY.encode())
    if raw is None:
        return str(field.name)
    value = _metadata_value(raw)
    return str(value)


def physical_name_map(schema: pa.Schema) -> dict[str, str]:
    """Top-level logical column name -> physical column name."""
    return {field.name: physical_name(field) for field in schema}


def physical_schema(schema: pa.Schema, mode: str) -> pa.Schema:
    """The schema of the table's Parquet files under column mapping ``mode``.

    For ``"name"`` and ``"id"`` every field, nested ones included (inside structs, arrays
    and maps), is renamed to its physical name; types and metadata are kept. ``"none"``
    returns ``schema`` itself. Spark writes physical names in both modes, so reading by
    name works for ``"id"`` too.

    :raises SchemaError: ``mode`` is not a column mapping mode.
    """
    if mode == "none":
        return schema
    if mode not in ("name", "id"):
        raise SchemaError(f"Unknown delta.columnMapping.mode {mode!r}; expected 'none', 'name' or 'id'.")
    return pa.schema([_physical_field(f) for f in schema], metadata=schema.metadata)


def _physical_field(field: pa.Field) -> pa.Field:
    return field.with_name(physical_name(field)).with_type(_map_child_fields(field.type, _physical_field))


def _map_child_fields(arrow_type: pa.DataType, convert: Callable[[pa.Field], pa.Field]) -> pa.DataType:
    """``arrow_type`` with ``convert`` applied to every struct field below it (not to list/map slots)."""
    types = pa.types
    if types.is_struct(arrow_type):
        return pa.struct([convert(arrow_type.field(i)) for i in range(arrow_type.num_fields)])
    if types.is_map(arrow_type):
        key = arrow_type.key_field
        item = arrow_type.item_field
        return pa.map_(
            key.with_type(_map_child_fields(key.type, convert)),
            item.with_type(_map_child_fields(item.type, convert)),
            keys_sorted=arrow_type.keys_sorted,
        )
    if _is_list_like(arrow_type):
        value = arrow_type.value_field
        return _with_value_field(arrow_type, value.with_type(_map_child_fields(value.type, convert)))
    return arrow_type


def _with_value_field(list_type: pa.DataType, value: pa.Field) -> pa.DataType:
    types = pa.types
    if types.is_large_list(list_type):
        return pa.large_list(value)
    if types.is_fixed_size_list(list_type):
        return pa.list_(value, list_type.list_size)
    if types.is_list_view(list_type):
        return pa.list_view(value)
    if types.is_large_list_view(list_type):
        return pa.large_list_view(value)
    return pa.list_(value)


def rename_to_logical(
    data: pa.Table | pa.RecordBatch, logical_schema: pa.Schema
) -> pa.Table | pa.RecordBatch:
    """Data read with physical column names, renamed (and cast) to ``logical_schema``.

    Every field of ``logical_schema`` is looked up in ``data`` by its physical name (its
    logical name when the data already uses it); nested struct fields, also inside arrays
    and maps, are renamed the same way. Renaming is a zero-copy view of the same buffers;
    a cast follows only where the file's types differ from the table's (type widening).
    Columns of ``data`` that ``logical_schema`` does not name are dropped.

    :raises SchemaError: a column is missing from ``data`` or cannot be cast to its table type.
    """
    columns = []
    for field in logical_schema:
        index = data.schema.get_field_index(physical_name(field))
        if index < 0:
            index = data.schema.get_field_index(field.name)
        if index < 0:
            raise SchemaError(
                f"Column {field.name!r} (physical name {physical_name(field)!r}) is not in the data read; "
                f"it has columns {data.schema.names}."
            )
        columns.append(_to_logical_column(data.column(index), field))
    if isinstance(data, pa.RecordBatch):
        return pa.RecordBatch.from_arrays(columns, schema=logical_schema)
    return pa.Table.from_arrays(columns, schema=logical_schema)


def _to_logical_column(column: pa.Array | pa.ChunkedArray, field: pa.Field) -> pa.Array | pa.ChunkedArray:
    renamed = _logical_names(column.type, field.type)
    try:
        if isinstance(column, pa.ChunkedArray):
            column = pa.chunked_array([chunk.view(renamed) for chunk in column.chunks], type=renamed)
        else:
            column = column.view(renamed)
        return column if renamed.equals(field.type) else column.cast(field.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise SchemaError(
            f"Column {field.name!r}: cannot read the file type {column.type} as {field.type}: {exc}"
        ) from None


def _logical_names(data_type: pa.DataType, logical_type: pa.DataType) -> pa.DataType:
    """``data_type`` (named physically) with the struct field names of ``logical_type``."""
    types = pa.types
    if types.is_struct(data_type) and types.is_struct(logical_type):
        by_physical: dict[str, pa.Field] = {}
        for i in range(logical_type.num_fields):
            child = logical_type.field(i)
            by_physical.setdefault(physical_name(child), child)
            by_physical.setdefault(child.name, child)
        fields = []
        for i in range(data_type.num_fields):
            child = data_type.field(i)
            logical = by_physical.get(child.name)
            if logical is None:
                fields.append(child)
            else:
                renamed = _logical_names(child.type, logical.type)
                fields.append(child.with_name(logical.name).with_type(renamed))
        return pa.struct(fields)
    if types.is_map(data_type) and types.is_map(logical_type):
        key, item = data_type.key_field, data_type.item_field
        return pa.map_(
            key.with_type(_logical_names(key.type, logical_type.key_type)),
            item.with_type(_logical_names(item.type, logical_type.item_type)),
            keys_sorted=data_type.keys_sorted,
        )
    if _is_list_like(data_type) and _is_list_like(logical_type):
        value = data_type.value_field
        element = _logical_names(value.type, logical_type.value_type)
        return _with_value_field(data_type, value.with_type(element))
    return data_type


# --- evolution and enforcement -------------------------------------------------------------


def merge_schemas(table: pa.Schema, new: pa.Schema) -> pa.Schema:
    """The table schema after merging ``new`` into it (Delta's schema evolution, ``mergeSchema``).

    Like Delta's ``SchemaMergingUtils.mergeSchemas``: existing columns keep their type,
    nullability, metadata and order; columns of ``new`` the table lacks are appended as
    nullable, at the top level and inside structs (also structs in arrays and maps).
    Names match case-insensitively, and a column of ``new`` that differs from the table's
    only in case is refused (the data files hold ``new``'s spelling, which readers would
    not find; nor may it be added beside the table's). Types must be equal as
    Delta types (``large_string`` equals ``string``); an arrow ``null`` column in ``new``
    fits any existing column. No implicit widening is done.

    :raises SchemaMismatchError: a column has different types in ``table`` and ``new``
        (the message names the column path and both Delta types), or is spelled differently.
    :raises SchemaError: a new column has no Delta type (arrow ``null``, ``uint64`` ...).
    """
    check_arrow_schema_depth(new)
    return pa.schema(_merge_fields(list(table), list(new), parent=""), metadata=table.metadata)


def _merge_fields(current: list[pa.Field], update: list[pa.Field], parent: str) -> list[pa.Field]:
    update_by_key = _by_key(update, parent, "The data")
    current_keys = {_key(f.name) for f in current}
    merged = []
    for field in current:
        other = update_by_key.get(_key(field.name))
        if other is None:
            merged.append(field)
        else:
            _check_same_spelling(field, other, parent)
            merged.append(field.with_type(_merge_types(field.type, other.type, _join(parent, field.name))))
    for field in update:
        if _key(field.name) not in current_keys:
            merged.append(_canonical_field(field, parent).with_nullable(True))
    return merged


def _merge_types(current: pa.DataType, update: pa.DataType, path: str) -> pa.DataType:
    types = pa.types
    update = _value_type(update)
    if types.is_null(update):
        return current
    if types.is_struct(current) and types.is_struct(update):
        return pa.struct(_merge_fields(_children(current), _children(update), parent=path))
    if types.is_map(current) and types.is_map(update):
        key = _merge_types(current.key_type, update.key_type, f"{path}.key")
        item = _merge_types(current.item_type, update.item_type, f"{path}.value")
        return pa.map_(
            current.key_field.with_type(key),
            current.item_field.with_type(item),
            keys_sorted=current.keys_sorted,
        )
    if _is_list_like(current) and _is_list_like(update):
        element = _merge_types(current.value_type, update.value_type, f"{path}.element")
        return _with_value_field(current, current.value_field.with_type(element))
    current_delta, update_delta = _type_to_delta(current, path), _type_to_delta(update, path)
    if current_delta != update_delta:
        raise SchemaMismatchError(
            f"Failed to merge fields: column {path} has type {delta_type_name(current_delta)} in the table "
            f"and {delta_type_name(update_delta)} in the data. Delta does not change a column's type on "
            f"write; cast the data to {delta_type_name(current_delta)}."
        )
    return current


def _canonical_field(field: pa.Field, parent: str) -> pa.Field:
    """``field`` with the arrow types Delta reads back (``large_string`` -> ``string`` ...)."""
    as_delta = _field_to_delta(field, parent)
    metadata = _encode_metadata(as_delta["metadata"]) or {}
    field_id = (field.metadata or {}).get(b"PARQUET:field_id")
    if field_id is not None:  # a file's column id, which column mapping (id mode) adopts
        metadata[b"PARQUET:field_id"] = field_id
    return pa.field(
        field.name,
        _type_from_delta(as_delta["type"], _join(parent, field.name)),
        nullable=field.nullable,
        metadata=metadata or None,
    )


def check_schema_compatible(table: pa.Schema, data: pa.Schema) -> None:
    """Refuse data that does not fit the table schema (Delta's schema enforcement on write).

    Names are resolved case-insensitively, as in Delta (Spark's default resolution), at
    every nesting level, but must then be spelled as the table spells them: readers of the
    data files match names case-sensitively, so a file column ``ID`` under a table column
    ``id`` would read as NULL. Order does not matter. Every data column must exist in the table with
    the same Delta type, recursively through structs, arrays and maps. Data that is
    non-nullable may go into a nullable column, not the other way round (also for array
    elements and map values: ``containsNull``/``valueContainsNull``). Table columns missing
    from the data are fine when nullable. An arrow ``null``-typed data column (all values
    null) fits any nullable column.

    :raises SchemaMismatchError: naming the column path and what does not fit (both names
        for a case-only difference); extra data columns are reported together, with the
        advice to enable schema merging.
    :raises SchemaError: a data column has no Delta type, or two differ only in case.
    """
    _check_fields(list(table), list(check_arrow_schema_depth(data)), parent="")


def _check_fields(table: list[pa.Field], data: list[pa.Field], parent: str) -> None:
    table_by_key = _by_key(table, parent, "The table")
    data_by_key = _by_key(data, parent, "The data")
    extra = [_join(parent, f.name) for f in data if _key(f.name) not in table_by_key]
    if extra:
        raise SchemaMismatchError(
            f"A schema mismatch was detected when writing: the data has column(s) {', '.join(extra)} that "
            f"the table does not have. To add them to the table schema, enable schema merging (Delta's "
            f"mergeSchema option); otherwise drop them from the data."
        )
    for field in table:
        path = _join(parent, field.name)
        other = data_by_key.get(_key(field.name))
        if other is None:
            if not field.nullable:
                raise SchemaMismatchError(f"Column {path} is NOT NULL in the table but the data lacks it.")
            continue
        _check_same_spelling(field, other, parent)
        if other.nullable and not field.nullable and not pa.types.is_null(other.type):
            raise SchemaMismatchError(
                f"Column {path} is NOT NULL in the table but nullable in the data; make the data column "
                f"non-nullable (after checking it has no nulls)."
            )
        _check_types(field.type, other.type, path)


def _check_types(table: pa.DataType, data: pa.DataType, path: str) -> None:
    types = pa.types
    data = _value_type(data)
    if types.is_null(data):
        return
    if types.is_struct(table) and types.is_struct(data):
        _check_fields(_children(table), _children(data), parent=path)
        return
    if types.is_map(table) and types.is_map(data):
        _check_types(table.key_type, data.key_type, f"{path}.key")
        _check_slot(table.item_field, data.item_field, f"{path}.value", "valueContainsNull")
        return
    if _is_list_like(table) and _is_list_like(data):
        _check_slot(table.value_field, data.value_field, f"{path}.element", "containsNull")
        return
    table_delta, data_delta = _type_to_delta(table, path), _type_to_delta(data, path)
    if table_delta != data_delta:
        raise SchemaMismatchError(
            f"A schema mismatch was detected when writing: column {path} has type "
            f"{delta_type_name(table_delta)} in the table but {delta_type_name(data_delta)} in the data. "
            f"Cast the data to {delta_type_name(table_delta)}."
        )


def _check_slot(table: pa.Field, data: pa.Field, path: str, flag: str) -> None:
    if data.nullable and not table.nullable and not pa.types.is_null(data.type):
        raise SchemaMismatchError(
            f"Column {path}: the table has {flag}=false but the data allows nulls there."
        )
    _check_types(table.type, data.type, path)


def _check_same_spelling(table: pa.Field, data: pa.Field, parent: str) -> None:
    """Delta resolves names case-insensitively, but the data files are read by name, and
    pyarrow, delta-rs and Parquet readers match names case-sensitively: a file column ``ID``
    under a table column ``id`` reads as all NULL. Refuse it, naming both spellings."""
    if table.name != data.name:
        raise SchemaMismatchError(
            f"A schema mismatch was detected when writing: the data's column {_join(parent, data.name)} "
            f"and the table's column {_join(parent, table.name)} differ only in case. Readers match "
            f"column names in data files case-sensitively and would read it as NULL; write the column "
            f"as {table.name!r} (rename it before writing the files)."
        )


# --- helpers -------------------------------------------------------------------------------


def _key(name: str) -> str:
    return name.lower()


def _by_key(fields: Iterable[pa.Field], parent: str, owner: str) -> dict[str, pa.Field]:
    by_key: dict[str, pa.Field] = {}
    for field in fields:
        previous = by_key.setdefault(_key(field.name), field)
        if previous is not field:
            raise SchemaError(
                f"{owner} has columns {_join(parent, previous.name)} and {_join(parent, field.name)}, which "
                f"Delta treats as the same column (names are case-insensitive)."
            )
    return by_key


def _check_unique(fields: list[pa.Field], parent: str) -> None:
    _by_key(fields, parent, "The schema")


def _children(struct_type: pa.DataType) -> list[pa.Field]:
    return [struct_type.field(i) for i in range(struct_type.num_fields)]


def _value_type(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(arrow_type) or pa.types.is_run_end_encoded(arrow_type):
        return arrow_type.value_type
    return arrow_type


def _join(parent: str, name: str) -> str:
    # Spark quotes names containing dots (or backticks) with backticks in column paths.
    quoted = f"`{name.replace('`', '``')}`" if ("." in name or "`" in name) else name
    return f"{parent}.{quoted}" if parent else quoted


def _require(obj: dict[str, Any], key: str, path: str) -> Any:
    if key not in obj:
        raise SchemaError(f"Column {path or '<schema>'}: the Delta type has no {key!r}: {_short(obj)}")
    return obj[key]


def _require_bool(obj: dict[str, Any], key: str, path: str) -> bool:
    value = _require(obj, key, path)
    if not isinstance(value, bool):
        raise SchemaError(f"Column {path}: {key!r} must be true or false, got {_short(value)}")
    return value


def _compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else _compact_json(value)
    return text if len(text) <= limit else text[:limit] + "..."
