"""Partition values: the protocol's string serialisation, typed columnar, and Hive paths.

In the log every partition value is a string (or null) in ``add.partitionValues``;
PROTOCOL.md "Partition Value Serialization" fixes the format per type. An empty
string means null for every type, as Delta writes it.
"""

from __future__ import annotations

from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import CorruptLogError

HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"


def partition_columns_from_map(
    values: pa.Array | pa.ChunkedArray, partition_schema: pa.Schema
) -> pa.StructArray:
    """Typed partition columns from the ``partitionValues`` maps of many files, vectorised.

    :param values: ``map<string, string>`` per file.
    :param partition_schema: the partition columns (names as the log keys them, i.e.
        physical names under column mapping) and their types.
    :raises CorruptLogError: a value does not parse as its column's type.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], values.type)
    children = []
    for field in partition_schema:
        raw = (
            pc.map_lookup(values, pa.scalar(field.name), "first")
            if len(values)
            else pa.array([], pa.string())
        )
        children.append(parse_partition_strings(raw, field.type, field.name))
    return (
        pa.StructArray.from_arrays(children, fields=list(partition_schema))
        if children
        else pa.array([{}] * len(values), pa.struct([]))
    )


def parse_partition_strings(raw: pa.Array, arrow_type: pa.DataType, column: str = "?") -> pa.Array:
    """Serialized partition values (strings, nulls) as an array of ``arrow_type``."""
    raw = raw.cast(pa.string())
    raw = pc.if_else(pc.equal(raw, ""), pa.scalar(None, pa.string()), raw)
    try:
        if pa.types.is_string(arrow_type):
            return raw
        if pa.types.is_boolean(arrow_type):
            lowered = pc.utf8_lower(raw)
            bad = pc.and_(pc.is_valid(lowered), pc.invert(pc.is_in(lowered, pa.array(["true", "false"]))))
            if pc.any(bad).as_py():
                raise ValueError(f"not a boolean: {raw.filter(bad)[0]}")
            return pc.equal(lowered, "true")
        if pa.types.is_timestamp(arrow_type):
            text = pc.replace_substring_regex(raw, r"(Z|\+00:00)$", "")
            naive = text.cast(pa.timestamp("us"))
            return naive.cast(arrow_type)  # zone-less values are UTC, per the protocol
        if pa.types.is_binary(arrow_type):
            return raw.cast(pa.binary())
        return raw.cast(arrow_type)
    except (pa.ArrowInvalid, ValueError) as err:
        raise CorruptLogError(
            f"The partition values of column {column!r} do not parse as {arrow_type}: {err}"
        ) from None


def parse_partition_path(relative_path: str) -> dict[str, str | None]:
    """``col=value`` directory segments of a data-file path, unescaped (the file name is ignored)."""
    values: dict[str, str | None] = {}
    for segment in relative_path.split("/")[:-1]:
        if "=" not in segment:
            continue
        name, _, value = segment.partition("=")
        text = unescape_partition_value(value)
        values[unescape_partition_value(name)] = None if text == HIVE_DEFAULT_PARTITION else text
    return values


def unescape_partition_value(text: str) -> str:
    """Undo Hive's path escaping (``%XX``)."""
    return unquote(text)
