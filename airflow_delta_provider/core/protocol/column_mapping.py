"""Column mapping (``delta.columnMapping.mode`` = ``name`` | ``id``) on the write side.

Under column mapping every column, nested ones included, has a logical name (the one in
``schemaString``), a physical name (``delta.columnMapping.physicalName``: the name of its
Parquet column) and an id (``delta.columnMapping.id``: the Parquet ``field_id``). The log
keys partition values and statistics by physical name (PROTOCOL.md, "Column Mapping").

This module decides, for a commit of existing files, that every file names its columns
physically (and, in ``id`` mode, carries the field ids), and gives new columns their
physical names and ids: ``col-<uuid4>`` and ``maxColumnId + 1`` in schema pre-order, as
Delta's ``DeltaColumnMapping.assignColumnIdAndPhysicalName`` does, for a new table; the
name the files already use for a column that schema evolution adds. The read side lives
in :mod:`.schema` (``physical_schema``, ``rename_to_logical``).
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_delta_provider.core.errors import SchemaError, SchemaMismatchError
from airflow_delta_provider.core.protocol.features import reader_features
from airflow_delta_provider.core.protocol.schema import (
    COLUMN_MAPPING_ID_KEY,
    COLUMN_MAPPING_PHYSICAL_NAME_KEY,
    physical_name,
    schema_to_delta,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    from airflow_delta_provider.core.protocol.actions import Metadata, Protocol

__all__ = [
    "MAX_COLUMN_ID_KEY",
    "MODE_KEY",
    "PARQUET_FIELD_ID",
    "assign_column_mapping",
    "column_dropped",
    "column_mapping_mode",
    "configured_mode",
    "delta_physical_name",
    "extra_columns",
    "field_id",
    "logical_file_data",
    "logical_file_schema",
    "physical_data",
    "physical_delta_fields",
    "physical_path",
    "spark_read_fields",
    "spark_write_schemas",
]

MODE_KEY = "delta.columnMapping.mode"
MAX_COLUMN_ID_KEY = "delta.columnMapping.maxColumnId"
#: The arrow field metadata key pyarrow reads and writes a Parquet ``field_id`` under.
PARQUET_FIELD_ID = b"PARQUET:field_id"
_MODES = ("none", "name", "id")


def configured_mode(configuration: Mapping[str, str]) -> str:
    """The ``delta.columnMapping.mode`` a table's properties set (``none`` when unset).

    :raises SchemaError: the value is not ``none``, ``name`` or ``id``.
    """
    mode = (configuration.get(MODE_KEY) or "none").strip().lower()
    if mode not in _MODES:
        raise SchemaError(
            f"{MODE_KEY}={configuration.get(MODE_KEY)!r} is not a column mapping mode; use 'none', "
            f"'name' or 'id'."
        )
    return mode


def column_mapping_mode(protocol: Protocol, metadata: Metadata) -> str:
    """The mode in force: readers ignore the property unless the protocol has the feature."""
    if "columnMapping" not in reader_features(protocol):
        return "none"
    return configured_mode(metadata.configuration)


# --- the log's keys --------------------------------------------------------------------------


def physical_delta_fields(fields: list[Any]) -> list[Any]:
    """A ``schemaString``'s fields (parsed JSON) renamed to their physical names, at every depth."""
    return [_physical_delta_field(f) for f in fields]


def delta_physical_name(item: Mapping[str, Any]) -> Any:
    """A ``schemaString`` field's physical name (its name when it has none)."""
    metadata = item.get("metadata")
    if isinstance(metadata, dict) and COLUMN_MAPPING_PHYSICAL_NAME_KEY in metadata:
        return metadata[COLUMN_MAPPING_PHYSICAL_NAME_KEY]
    return item.get("name")


def _physical_delta_field(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    return {**item, "name": delta_physical_name(item), "type": _physical_delta_type(item.get("type"))}


def _physical_delta_type(delta_type: Any) -> Any:
    if not isinstance(delta_type, dict):
        return delta_type
    kind = delta_type.get("type")
    if kind == "struct":
        return {**delta_type, "fields": physical_delta_fields(delta_type.get("fields") or [])}
    if kind == "array":
        return {**delta_type, "elementType": _physical_delta_type(delta_type.get("elementType"))}
    if kind == "map":
        return {
            **delta_type,
            "keyType": _physical_delta_type(delta_type.get("keyType")),
            "valueType": _physical_delta_type(delta_type.get("valueType")),
        }
    return delta_type


def physical_path(schema: pa.Schema, path: Sequence[str]) -> tuple[str, ...]:
    """The physical spelling of a logical column path through structs (a stats column)."""
    fields: list[pa.Field] = list(schema)
    out: list[str] = []
    for part in path:
        match = next((f for f in fields if f.name == part), None)
        if match is None:
            raise SchemaError(f"Column {'.'.join(path)!r} is not in the table schema.")
        out.append(physical_name(match))
        fields = _struct_children(match.type)
    return tuple(out)


# --- files ------------------------------------------------------------------------------------


def field_id(field: pa.Field) -> int | None:
    """The Parquet ``field_id`` pyarrow read for a file's field, if it has one."""
    raw = (field.metadata or {}).get(PARQUET_FIELD_ID)
    return int(raw) if raw is not None else None


def column_id(field: pa.Field) -> int | None:
    """A table field's ``delta.columnMapping.id``."""
    raw = (field.metadata or {}).get(COLUMN_MAPPING_ID_KEY.encode())
    return int(raw) if raw is not None else None


def logical_file_schema(table: pa.Schema, file_schema: pa.Schema, mode: str) -> pa.Schema:
    """A data file's schema under its logical names, after checking it names columns physically.

    Each file column, at every depth, must be the physical name of a table column (and, in
    ``id`` mode, carry that column's id as its Parquet ``field_id``; Delta writes the ids in
    ``name`` mode too, so there they are checked where present). In ``id`` mode a file column
    carrying a column's id is that column (Spark resolves by id), so its name must be that
    column's physical name (delta-rs resolves by name). A file column that is neither a
    physical name, a logical one nor an id is kept as it is (a new column, for schema
    evolution, or an extra one that schema enforcement refuses).

    :raises SchemaMismatchError: naming the logical column, the physical name it must have
        and what the file has instead.
    """
    return pa.schema(_logical_fields(list(table), list(file_schema), "", mode), metadata=file_schema.metadata)


def logical_file_data(table: pa.Schema, data: pa.Table, mode: str) -> pa.Table:
    """A data file's rows under their logical names, at every depth (a zero-copy view).

    The columns are resolved as :func:`logical_file_schema` resolves them (and refused as it
    refuses them), so what is checked on the rows is what readers of the table will read.
    """
    schema = logical_file_schema(table, data.schema, mode)
    columns = [_viewed(data.column(i), schema.field(i).type) for i in range(data.num_columns)]
    return pa.Table.from_arrays(columns, schema=schema)


def _viewed(column: pa.ChunkedArray, arrow_type: pa.DataType) -> pa.ChunkedArray:
    """``column`` under ``arrow_type``: the same buffers, other struct field names."""
    return pa.chunked_array([chunk.view(arrow_type) for chunk in column.chunks], type=arrow_type)


def _logical_fields(table: list[pa.Field], data: list[pa.Field], parent: str, mode: str) -> list[pa.Field]:
    by_physical = {physical_name(f): f for f in table}
    by_logical = {f.name.lower(): f for f in table}
    # In id mode a column is its id (Spark resolves by field_id); the name must agree with it.
    by_id = {i: f for f in table if (i := column_id(f)) is not None} if mode == "id" else {}
    out = []
    for field in data:
        column = by_physical.get(field.name)
        ident = field_id(field)
        owner = by_id.get(ident) if ident is not None else None
        if owner is not None and column is None:
            path = _logical_path(parent, owner.name)
            raise SchemaMismatchError(
                f"The file's column {field.name!r} has field_id {ident}, the id of column "
                f"{path!r}, whose physical name is {physical_name(owner)!r}: Spark resolves columns by id "
                f"and would read it as {path!r}, while readers that resolve physical names (delta-rs, "
                f"this core) would read NULL. Write the Parquet column as {physical_name(owner)!r} with "
                f"field_id {column_id(owner)}."
            )
        if column is None:
            logical = by_logical.get(field.name.lower())
            if logical is not None:
                raise SchemaMismatchError(
                    f"The file holds column {_logical_path(parent, logical.name)!r} under its logical name "
                    f"{field.name!r}, but the table uses column mapping (mode {mode!r}): readers look for it "
                    f"under its physical name {physical_name(logical)!r} and would read NULL. Write the "
                    f"Parquet column as {physical_name(logical)!r}"
                    + (f" with field_id {column_id(logical)}" if mode == "id" else "")
                    + " (DeltaSparkOperator and DeltaPySparkOperator do this from the table's metadata)."
                )
            out.append(field)  # unknown: a new column (merge) or an extra one (refused later)
            continue
        _check_field_id(column, field, _logical_path(parent, column.name), mode)
        child_type = _logical_type(column.type, field.type, _logical_path(parent, column.name), mode)
        out.append(field.with_name(column.name).with_type(child_type))
    return out


def _check_field_id(column: pa.Field, field: pa.Field, logical: str, mode: str) -> None:
    expected, actual = column_id(column), field_id(field)
    if expected is None or (actual is None and mode != "id") or actual == expected:
        return
    raise SchemaMismatchError(
        f"Column {logical!r} (physical name {physical_name(column)!r}) has Parquet field_id "
        f"{actual if actual is not None else 'none'} in the file, but the table's column mapping "
        f"(mode {mode!r}) gives it id {expected}: readers resolve columns by id and would read the wrong "
        f"data or NULL. Write the column with field_id {expected}."
    )


def _logical_type(table: pa.DataType, data: pa.DataType, path: str, mode: str) -> pa.DataType:
    types = pa.types
    if types.is_struct(table) and types.is_struct(data):
        return pa.struct(_logical_fields(_struct_children(table), _struct_children(data), path, mode))
    if types.is_map(table) and types.is_map(data):
        return pa.map_(
            data.key_field.with_type(_logical_type(table.key_type, data.key_type, f"{path}.key", mode)),
            data.item_field.with_type(_logical_type(table.item_type, data.item_type, f"{path}.value", mode)),
            keys_sorted=data.keys_sorted,
        )
    if _is_list(table) and _is_list(data):
        element = _logical_type(table.value_type, data.value_type, f"{path}.element", mode)
        return _same_list(data, data.value_field.with_type(element))
    return data


def _logical_path(parent: str, name: str) -> str:
    return f"{parent}.{name}" if parent else name


# --- new columns ------------------------------------------------------------------------------


def assign_column_mapping(
    schema: pa.Schema,
    configuration: Mapping[str, str],
    mode: str,
    *,
    from_files: bool = False,
) -> tuple[pa.Schema, dict[str, str]]:
    """Give every field without one an id and a physical name; raise ``maxColumnId`` to match.

    Ids continue from max(``delta.columnMapping.maxColumnId``, the largest id in the schema)
    and are handed out in schema pre-order, nested fields included (Delta's order). A new
    field's physical name is ``col-<uuid4>`` (a new table, as Delta names them), or, with
    ``from_files`` (columns that files already hold: schema evolution, a table created from
    files), the name the files use; in ``id`` mode such a column must carry a Parquet
    ``field_id`` in the file, which becomes its id.

    :returns: the schema, and the configuration with ``maxColumnId`` set.
    :raises SchemaMismatchError: in ``id`` mode, a new column's file has no field id, or one
        another column already has; or two columns would share a physical name.
    """

    def namer(field: pa.Field) -> str:
        return str(field.name) if from_files else f"col-{uuid.uuid4()}"

    by_file_id = from_files and mode == "id"
    fields = list(schema)
    existing = [i for f in _walk(fields) if (i := column_id(f)) is not None]
    max_id = max([int(configuration.get(MAX_COLUMN_ID_KEY) or 0), *existing])
    used = set(existing)
    taken_names: set[tuple[str, str]] = set()

    def assign(field: pa.Field, parent: str) -> pa.Field:
        nonlocal max_id
        metadata = {k: v for k, v in (field.metadata or {}).items() if k != PARQUET_FIELD_ID}
        if column_id(field) is None:
            given = field_id(field)
            if by_file_id and given is None:
                raise SchemaMismatchError(
                    f"The new column {_logical_path(parent, field.name)!r} has no Parquet field_id; a table "
                    f"with column mapping mode 'id' finds columns by id. Write it with field_id "
                    f"{max_id + 1} (larger than the table's delta.columnMapping.maxColumnId {max_id})."
                )
            if by_file_id and given is not None:
                if given in used:
                    raise SchemaMismatchError(
                        f"The new column {_logical_path(parent, field.name)!r} has Parquet field_id {given}, "
                        f"which another column of the table already has; write it with field_id "
                        f"{max_id + 1}."
                    )
                new_id = given
            else:
                new_id = max_id + 1
            used.add(new_id)
            max_id = max(max_id, new_id)
            metadata[COLUMN_MAPPING_ID_KEY.encode()] = str(new_id).encode()
            metadata[COLUMN_MAPPING_PHYSICAL_NAME_KEY.encode()] = json.dumps(namer(field)).encode()
        name_key = (parent, physical_name(field.with_metadata(metadata)))
        if name_key in taken_names:
            raise SchemaMismatchError(
                f"Two columns of {parent or 'the table'} would share the physical name {name_key[1]!r}."
            )
        taken_names.add(name_key)
        path = _logical_path(parent, field.name)
        return field.with_metadata(metadata).with_type(_assign_type(field.type, path, assign))

    assigned = pa.schema([assign(f, "") for f in fields], metadata=schema.metadata)
    return assigned, {**configuration, MAX_COLUMN_ID_KEY: str(max_id)}


def _assign_type(
    arrow_type: pa.DataType, path: str, assign: Callable[[pa.Field, str], pa.Field]
) -> pa.DataType:
    types = pa.types
    if types.is_struct(arrow_type):
        return pa.struct([assign(f, path) for f in _struct_children(arrow_type)])
    if types.is_map(arrow_type):
        return pa.map_(
            arrow_type.key_field.with_type(_assign_type(arrow_type.key_type, f"{path}.key", assign)),
            arrow_type.item_field.with_type(_assign_type(arrow_type.item_type, f"{path}.value", assign)),
            keys_sorted=arrow_type.keys_sorted,
        )
    if _is_list(arrow_type):
        element = _assign_type(arrow_type.value_type, f"{path}.element", assign)
        return pa.list_(arrow_type.value_field.with_type(element))
    return arrow_type


def column_dropped(schema: pa.Schema, configuration: Mapping[str, str]) -> bool:
    """Whether a column (or nested field) may have been dropped from a column-mapped table: an id
    up to ``maxColumnId`` that no field of the schema has (ids are handed out one by one, so a
    table whose fields hold every id never lost one). Its files may then hold columns the schema
    no longer names."""
    ids = {i for f in _walk(list(schema)) if (i := column_id(f)) is not None}
    max_id = int(configuration.get(MAX_COLUMN_ID_KEY) or 0)
    return not set(range(1, max_id + 1)) <= ids


def extra_columns(file_schema: pa.Schema, table_physical: pa.Schema) -> list[str]:
    """The columns of a data file, at every depth, that the table's physical schema does not have
    (Delta's ``fileHasExtraColumns``: names compared case-insensitively, as Spark resolves them)."""

    def extra(found: list[pa.Field], known: list[pa.Field], parent: str) -> list[str]:
        by_name = {f.name.lower(): f for f in known}
        names = []
        for field in found:
            path = f"{parent}{field.name}"
            match = by_name.get(field.name.lower())
            if match is None:
                names.append(path)
            else:
                names += extra(_nested_fields(field.type), _nested_fields(match.type), f"{path}.")
        return names

    return extra(list(file_schema), list(table_physical), "")


def _walk(fields: list[pa.Field]) -> Iterator[pa.Field]:
    for field in fields:
        yield field
        yield from _walk(_nested_fields(field.type))


def _nested_fields(arrow_type: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(arrow_type):
        return _struct_children(arrow_type)
    if pa.types.is_map(arrow_type):
        return [*_nested_fields(arrow_type.key_type), *_nested_fields(arrow_type.item_type)]
    if _is_list(arrow_type):
        return _nested_fields(arrow_type.value_type)
    return []


def _struct_children(arrow_type: pa.DataType) -> list[pa.Field]:
    if not pa.types.is_struct(arrow_type):
        return []
    return [arrow_type.field(i) for i in range(arrow_type.num_fields)]


def _is_list(arrow_type: pa.DataType) -> bool:
    types = pa.types
    return bool(
        types.is_list(arrow_type) or types.is_large_list(arrow_type) or types.is_fixed_size_list(arrow_type)
    )


# --- writing files --------------------------------------------------------------------------


def physical_data(data: pa.Table, table_schema: pa.Schema) -> pa.Table:
    """Rows under logical names, renamed for a Parquet file of a column-mapped table.

    Every column, nested struct fields included, gets its physical name, and every field
    the table gives an id carries it as ``PARQUET:field_id`` (pyarrow writes it into the
    footer), as Delta writes files in both ``name`` and ``id`` mode. Renaming is a
    zero-copy view. Columns the table does not have are refused.

    :raises SchemaMismatchError: ``data`` has a column the table does not have.
    """
    by_name = {f.name: f for f in table_schema}
    fields, columns = [], []
    for index, name in enumerate(data.schema.names):
        column = by_name.get(name)
        if column is None:
            raise SchemaMismatchError(
                f"The data has column {name!r}, which the table does not have "
                f"(columns: {table_schema.names})."
            )
        physical = _physical_file_field(column, data.schema.field(index))
        fields.append(physical)
        columns.append(_viewed(data.column(index), physical.type))
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _physical_file_field(column: pa.Field, data: pa.Field) -> pa.Field:
    ident = column_id(column)
    metadata = {PARQUET_FIELD_ID: str(ident).encode()} if ident is not None else None
    return pa.field(
        physical_name(column), _physical_file_type(column.type, data.type), data.nullable, metadata=metadata
    )


def _physical_file_type(table: pa.DataType, data: pa.DataType) -> pa.DataType:
    types = pa.types
    if types.is_struct(table) and types.is_struct(data):
        by_name = {f.name: f for f in _struct_children(table)}
        children = []
        for child in _struct_children(data):
            column = by_name.get(child.name)
            if column is None:
                raise SchemaMismatchError(
                    f"The data has the struct field {child.name!r}, which the table lacks."
                )
            children.append(_physical_file_field(column, child))
        return pa.struct(children)
    if types.is_map(table) and types.is_map(data):
        return pa.map_(
            data.key_field.with_type(_physical_file_type(table.key_type, data.key_type)),
            data.item_field.with_type(_physical_file_type(table.item_type, data.item_type)),
            keys_sorted=data.keys_sorted,
        )
    if _is_list(table) and _is_list(data):
        return _same_list(
            data, data.value_field.with_type(_physical_file_type(table.value_type, data.value_type))
        )
    return data


def _same_list(list_type: pa.DataType, value: pa.Field) -> pa.DataType:
    if pa.types.is_large_list(list_type):
        return pa.large_list(value)
    if pa.types.is_fixed_size_list(list_type):
        return pa.list_(value, list_type.list_size)
    return pa.list_(value)


# --- Spark's write -------------------------------------------------------------------------

#: The Spark StructField metadata key Spark's Parquet writer turns into a ``field_id``.
SPARK_FIELD_ID = "parquet.field.id"


def spark_write_schemas(
    table_schema: pa.Schema, frame_schema: Mapping[str, Any], configuration: Mapping[str, str], mode: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """How a Spark DataFrame becomes a column-mapped table's Parquet file: two Spark schemas (JSON).

    The first, logical, is what ``DataFrame.to`` reconciles the frame to (inner struct fields
    reordered by name, safe upcasts to the table's types); the second has the same shape with
    physical names and ``parquet.field.id`` at every depth, for a positional ``cast`` plus
    ``alias`` per column. Delta writes field ids in both modes, and so does this. A frame
    column the table lacks (schema evolution) keeps its name, which becomes its physical name
    on commit; in ``id`` mode it gets the next free id.

    :param frame_schema: the frame's ``schema.json()``, parsed (Spark's JSON is Delta's).
    :raises SchemaMismatchError: a struct in the frame has a field the table's struct lacks
        (``DataFrame.to`` would drop it silently).
    """
    by_name = {f.name: f for f in table_schema}
    ids = [i for f in _walk(list(table_schema)) if (i := column_id(f)) is not None]
    next_id = max([int(configuration.get(MAX_COLUMN_ID_KEY) or 0), *ids]) + 1
    logical: list[dict[str, Any]] = []
    physical: list[dict[str, Any]] = []
    for item in frame_schema.get("fields", []):
        column = by_name.get(item["name"])
        if column is None:
            metadata = dict(item.get("metadata") or {})
            if mode == "id":
                metadata[SPARK_FIELD_ID] = next_id
                next_id += 1
            logical.append(item)
            physical.append({**item, "metadata": metadata})
            continue
        _check_no_new_nested(column, item["type"], column.name)
        delta = _field_json(column)
        logical.append(_strip_metadata(delta))
        physical.append(_spark_physical(delta))
    return {"type": "struct", "fields": logical}, {"type": "struct", "fields": physical}


def spark_read_fields(
    fields: Sequence[Mapping[str, Any]], mode: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """How Spark reads a table's Parquet files: two lists of Spark fields (JSON) of the same shape.

    The second is the read schema: physical names at every depth and, in ``id`` mode only,
    ``parquet.field.id`` (name-mode files need not carry ids, and Delta reads them by name); the
    first holds the logical names, for a positional ``cast`` plus ``alias`` per column. Every
    field is nullable in both, since a file may lack a column (it reads as null).

    :param fields: ``schemaString`` fields (parsed JSON).
    :param mode: the column mapping mode in force.
    """
    logical = [_nullable(_strip_metadata(dict(f))) for f in fields]
    if mode == "none":
        return logical, logical
    physical = [_nullable(_spark_physical(dict(f))) for f in fields]
    if mode != "id":
        physical = [_nullable(_strip_metadata({**f, "metadata": {}})) for f in physical]
    return logical, physical


def _nullable(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "nullable": True, "type": _nullable_type(item["type"])}


def _nullable_type(delta_type: Any) -> Any:
    if not isinstance(delta_type, dict):
        return delta_type
    kind = delta_type.get("type")
    if kind == "struct":
        return {**delta_type, "fields": [_nullable(f) for f in delta_type["fields"]]}
    if kind == "array":
        return {**delta_type, "elementType": _nullable_type(delta_type["elementType"]), "containsNull": True}
    if kind == "map":
        return {
            **delta_type,
            "keyType": _nullable_type(delta_type["keyType"]),
            "valueType": _nullable_type(delta_type["valueType"]),
            "valueContainsNull": True,
        }
    return delta_type


def _field_json(field: pa.Field) -> dict[str, Any]:
    fields: list[dict[str, Any]] = schema_to_delta(pa.schema([field]))["fields"]
    return fields[0]


def _strip_metadata(item: dict[str, Any]) -> dict[str, Any]:
    return {**item, "metadata": {}, "type": _map_delta_fields(item["type"], _strip_metadata)}


def _spark_physical(item: dict[str, Any]) -> dict[str, Any]:
    metadata = item.get("metadata") or {}
    spark_metadata = (
        {SPARK_FIELD_ID: metadata[COLUMN_MAPPING_ID_KEY]} if COLUMN_MAPPING_ID_KEY in metadata else {}
    )
    return {
        **item,
        "name": delta_physical_name(item),
        "metadata": spark_metadata,
        "type": _map_delta_fields(item["type"], _spark_physical),
    }


def _map_delta_fields(delta_type: Any, convert: Callable[[dict[str, Any]], dict[str, Any]]) -> Any:
    if not isinstance(delta_type, dict):
        return delta_type
    kind = delta_type.get("type")
    if kind == "struct":
        return {**delta_type, "fields": [convert(f) for f in delta_type["fields"]]}
    if kind == "array":
        return {**delta_type, "elementType": _map_delta_fields(delta_type["elementType"], convert)}
    if kind == "map":
        return {
            **delta_type,
            "keyType": _map_delta_fields(delta_type["keyType"], convert),
            "valueType": _map_delta_fields(delta_type["valueType"], convert),
        }
    return delta_type


def _check_no_new_nested(column: pa.Field, frame_type: Any, path: str) -> None:
    if not isinstance(frame_type, dict):
        return
    kind = frame_type.get("type")
    if kind == "struct" and pa.types.is_struct(column.type):
        children = {f.name.lower(): f for f in _struct_children(column.type)}
        for item in frame_type["fields"]:
            child = children.get(item["name"].lower())
            if child is None:
                raise SchemaMismatchError(
                    f"The DataFrame's struct column {path} has the field {item['name']!r}, which the table's "
                    f"struct lacks. Adding nested fields to a column-mapped table is not supported by this "
                    f"provider; add it with Spark and Delta (ALTER TABLE ... ADD COLUMNS), or drop it."
                )
            _check_no_new_nested(child, item["type"], f"{path}.{child.name}")
    elif kind == "array" and _is_list(column.type):
        _check_no_new_nested(column.type.value_field, frame_type["elementType"], f"{path}.element")
    elif kind == "map" and pa.types.is_map(column.type):
        _check_no_new_nested(column.type.key_field, frame_type["keyType"], f"{path}.key")
        _check_no_new_nested(column.type.item_field, frame_type["valueType"], f"{path}.value")
