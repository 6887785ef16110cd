"""Which schema a change feed is read with, and the schema changes it cannot be read across.

As Delta's batch change data feed (``CDCReaderBase.checkBatchCdfReadSchemaIncompatibility``): rows
are read with the latest schema, or with the end version's schema when column mapping is on at the
start, the end or the latest version. Every schema of the range (the start version's and each
``metaData`` after it) must be read-compatible with it: no column mapping rename or drop, no
partitioning change, no dropped column, no type change, no nullability tightened. The comparison
works on the log's schema JSON, as Delta's compares Spark types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import ChangeDataSchemaError
from airflow_delta_provider.core.protocol.column_mapping import configured_mode, delta_physical_name

if TYPE_CHECKING:
    from airflow_delta_provider.core.protocol.actions import Metadata

#: The columns a change feed adds (Delta's ``CDCReader.CDC_*``); a table column may not use them.
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CDC_COLUMNS = (CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP)


def check_read_compatible(
    read: Metadata, read_version: int, other: Metadata, other_version: int, start: int, end: int
) -> None:
    """Refuse reading the data written under ``other`` (at ``other_version``) with ``read``'s schema.

    :raises ChangeDataSchemaError: Delta's ``DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE``
        (``other`` is a schema change of the range) or ``..._INCOMPATIBLE_DATA_SCHEMA`` (the start
        version's schema), naming the versions and the way out.
    """
    if other_version <= read_version:
        compatible = _no_mapping_change(new=read, old=other) and _read_compatible(
            _struct(other), _struct(read), forbid_tighten_nullability=True
        )
    else:
        compatible = _no_mapping_change(new=other, old=read) and _read_compatible(
            _struct(read), _struct(other), forbid_tighten_nullability=False
        )
    if compatible:
        return
    schema_change = other_version > start
    kind = "schema change" if schema_change else "data schema"
    error_class = (
        "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"
        if schema_change
        else "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA"
    )
    way_out = (
        f"Read the changes separately from version {start} to {other_version - 1}, and from version "
        f"{other_version} to {end}."
        if schema_change
        else f"Read the changes from after the schema change that version {read_version}'s schema "
        f"cannot read across."
    )
    raise ChangeDataSchemaError(
        f"Retrieving table changes between version {start} and {end} failed because of an incompatible "
        f"{kind} ({error_class}): the read schema is the one at version {read_version}, but the schema "
        f"at version {other_version} renames, drops or retypes a column, tightens its nullability or "
        f"changes the partitioning, so rows written under it cannot be read with the read schema. "
        f"{way_out}",
        version=other_version,
        delta_error_class=error_class,
    )


def reserved_columns(metadata: Metadata) -> list[str]:
    """The table columns whose names a change feed uses for its own columns."""
    names = {str(f.get("name")) for f in _struct(metadata).get("fields", [])}
    return [c for c in CDC_COLUMNS if c in names]


def check_no_reserved_columns(metadata: Metadata, version: int) -> None:
    """Refuse to read changes of a table with a column a change feed names (Delta's
    ``DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS``).

    :param version: the version whose schema the changes would be read with.
    """
    _ = metadata.schema  # a schema at all (columns differing only in case, unknown types): SchemaError
    reserved = reserved_columns(metadata)
    if reserved:
        raise ChangeDataSchemaError(
            f"The table has column(s) {', '.join(reserved)}, whose names the change feed uses for its own "
            f"columns ({', '.join(CDC_COLUMNS)}) (DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS). Rename them to "
            f"read the table's changes.",
            version=version,
            delta_error_class="DELTA_TABLE_ALREADY_CONTAINS_CDC_COLUMNS",
        )


def _struct(metadata: Metadata) -> dict[str, Any]:
    return metadata.schema_json


# --- column mapping: DeltaColumnMapping.hasNoColumnMappingSchemaChanges ---------------------------


def _no_mapping_change(new: Metadata, old: Metadata) -> bool:
    new_mode, old_mode = configured_mode(new.configuration), configured_mode(old.configuration)
    if new_mode == "none":
        return old_mode == "none"  # reading across a downgrade is refused
    if old_mode == "none":
        # An upgrade in between gave every existing column its name as physical name.
        old_fields = _physical_paths(_struct(old), physical=False)
    else:
        old_fields = _physical_paths(_struct(old), physical=True)
    new_fields = _physical_paths(_struct(new), physical=True)
    dropped = any(path not in new_fields for path in old_fields)
    renamed = any(path in new_fields and new_fields[path] != name for path, name in old_fields.items())
    return not dropped and not renamed and tuple(new.partition_columns) == tuple(old.partition_columns)


def _physical_paths(struct: dict[str, Any], *, physical: bool) -> dict[tuple[str, ...], str]:
    """Every field, nested ones included, by its path of physical names: its logical name."""
    found: dict[tuple[str, ...], str] = {}

    def visit(data_type: Any, path: tuple[str, ...]) -> None:
        if not isinstance(data_type, dict):
            return
        kind = data_type.get("type")
        if kind == "struct":
            for f in data_type.get("fields", []):
                key = (*path, str(delta_physical_name(f) if physical else f.get("name")))
                found[key] = str(f.get("name"))
                visit(f.get("type"), key)
        elif kind == "array":
            visit(data_type.get("elementType"), (*path, "element"))
        elif kind == "map":
            visit(data_type.get("keyType"), (*path, "key"))
            visit(data_type.get("valueType"), (*path, "value"))

    visit(struct, ())
    return found


# --- SchemaUtils.isReadCompatible ----------------------------------------------------------------


def _read_compatible(
    existing: dict[str, Any], read: dict[str, Any], *, forbid_tighten_nullability: bool
) -> bool:
    """Whether data written with ``existing`` can be read with ``read`` (no drop, no type change,
    no nullability change in the forbidden direction); names compare case-insensitively for
    presence and exactly for a match, as Delta's."""
    existing_fields = {str(f["name"]).lower(): f for f in existing.get("fields", [])}
    read_fields = read.get("fields", [])
    if not set(existing_fields) <= {str(f["name"]).lower() for f in read_fields}:
        return False
    for field in read_fields:
        old = existing_fields.get(str(field["name"]).lower())
        if old is None:
            continue  # a column added later reads as null
        if old["name"] != field["name"]:
            return False
        if not _nullability_ok(
            old.get("nullable", True), field.get("nullable", True), forbid_tighten_nullability
        ):
            return False
        if not _type_compatible(old["type"], field["type"], forbid_tighten_nullability):
            return False
    return True


def _nullability_ok(existing: bool, read: bool, forbid_tighten: bool) -> bool:
    return (read or not existing) if forbid_tighten else (existing or not read)


def _type_compatible(existing: Any, read: Any, forbid_tighten: bool) -> bool:
    if isinstance(existing, dict) and isinstance(read, dict):
        kind = existing.get("type")
        if kind != read.get("type"):
            return False
        if kind == "struct":
            return _read_compatible(existing, read, forbid_tighten_nullability=forbid_tighten)
        if kind == "array":
            return _nullability_ok(
                existing.get("containsNull", True), read.get("containsNull", True), forbid_tighten
            ) and _type_compatible(existing.get("elementType"), read.get("elementType"), forbid_tighten)
        if kind == "map":
            return (
                _nullability_ok(
                    existing.get("valueContainsNull", True),
                    read.get("valueContainsNull", True),
                    forbid_tighten,
                )
                and _type_compatible(existing.get("keyType"), read.get("keyType"), forbid_tighten)
                and _type_compatible(existing.get("valueType"), read.get("valueType"), forbid_tighten)
            )
        return existing == read
    if existing == "void":
        return True  # Spark's NullType reads as anything
    return isinstance(existing, str) and isinstance(read, str) and _normal(existing) == _normal(read)


def _normal(type_name: str) -> str:
    """``decimal(10, 2)`` and ``decimal(10,2)`` are one type."""
    return type_name.replace(" ", "").lower()
