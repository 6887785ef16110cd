"""``stats_parsed``: the JSON ``add.stats`` of many files as one Arrow struct column.

Checkpoints written with ``delta.checkpoint.writeStatsAsStruct`` carry it in Spark's layout, and
data skipping evaluates a filter over it; both parse every file's JSON in one pass of Arrow's
JSON reader, falling back to one row at a time (a bad value becomes null) where Arrow refuses.
Read leaves with :func:`stats_leaf`: a file whose statistics are missing or unparseable is a null
struct, and its leaves are null (unknown), not the zeros Arrow keeps under a null struct.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from airflow_delta_provider.core.utils.redaction import get_logger

log = get_logger(__name__)


def _min_max_type(arrow_type: pa.DataType) -> pa.DataType | None:
    """The min/max stats type of a column, None when Delta collects no min/max for it."""
    types = pa.types
    if types.is_struct(arrow_type):
        fields = []
        for child in arrow_type:
            child_type = _min_max_type(child.type)
            if child_type is not None:
                fields.append(pa.field(child.name, child_type))
        # Parquet cannot store an empty group.
        return pa.struct(fields) if fields else None
    if (
        types.is_integer(arrow_type)
        or types.is_floating(arrow_type)
        or types.is_decimal(arrow_type)
        or types.is_string(arrow_type)
        or types.is_large_string(arrow_type)
        or types.is_date(arrow_type)
        or types.is_timestamp(arrow_type)
    ):
        return arrow_type
    return None  # booleans, binaries, lists and maps: Spark keeps no min/max


def _null_count_type(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(arrow_type) and arrow_type.num_fields:
        return pa.struct([pa.field(c.name, _null_count_type(c.type)) for c in arrow_type])
    return pa.int64()


def stats_parsed_type(data_fields: list[pa.Field], *, tight_bounds: bool) -> pa.StructType:
    """``stats_parsed``: numRecords, minValues, maxValues, nullCount (, tightBounds), Spark's layout."""
    fields = [pa.field("numRecords", pa.int64())]
    min_max = [pa.field(f.name, t) for f in data_fields if (t := _min_max_type(f.type)) is not None]
    if min_max:
        fields += [pa.field("minValues", pa.struct(min_max)), pa.field("maxValues", pa.struct(min_max))]
    if data_fields:
        fields.append(
            pa.field(
                "nullCount", pa.struct([pa.field(f.name, _null_count_type(f.type)) for f in data_fields])
            )
        )
    if tight_bounds:
        fields.append(pa.field("tightBounds", pa.bool_()))
    return pa.struct(fields)


def _json_read_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type pyarrow's JSON reader can fill for ``arrow_type`` (dates come as strings)."""
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(c.name, _json_read_type(c.type)) for c in arrow_type])
    if pa.types.is_date(arrow_type):
        return pa.string()
    return arrow_type


def parse_stats(stats: pa.ChunkedArray, stats_type: pa.StructType) -> pa.Array:
    """``stats_parsed`` from the JSON ``stats`` column, in one pass of Arrow's JSON reader."""
    stats = stats.combine_chunks() if stats.num_chunks else pa.array([], pa.string())
    count = len(stats)
    if count == 0:
        return pa.array([], stats_type)
    # One line per file: a null becomes {} and then a null struct.
    # large_string: the joined lines of many millions of files may pass 2 GiB.
    newline = pa.scalar("\n", pa.large_string())
    empty = pa.scalar("", pa.large_string())
    lines = pc.binary_join_element_wise(pc.fill_null(stats.cast(pa.large_string()), "{}"), newline, empty)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + count + 1]
    body = pa.py_buffer(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])]
    longest = int(np.max(np.diff(offsets)))
    read_type = _json_read_type(stats_type)
    try:
        table = pa_json.read_json(
            pa.BufferReader(body),
            read_options=pa_json.ReadOptions(block_size=max(1 << 22, 2 * longest + 1024)),
            parse_options=pa_json.ParseOptions(
                explicit_schema=pa.schema(list(read_type)), unexpected_field_behavior="ignore"
            ),
        )
        if table.num_rows != count:
            raise pa.ArrowInvalid(f"{table.num_rows} rows for {count} stats")
        parsed = pa.StructArray.from_arrays(
            [table.column(f.name).combine_chunks() for f in read_type], fields=list(read_type)
        )
        parsed = parsed.cast(stats_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        # Values Arrow's reader refuses (NaN written as a string, a stats value of the wrong
        # type after a schema change): parse per row, a bad value becomes null.
        log.debug("Parsing stats row by row (%s).", err)
        rows = []
        for text in stats.to_pylist():
            try:
                value = json.loads(text) if text is not None else None
            except ValueError:
                value = None
            rows.append(_coerce(value, stats_type) if isinstance(value, dict) else None)
        return pa.array(rows, stats_type)
    if stats.null_count:
        parsed = pa.StructArray.from_arrays(
            [parsed.field(i) for i in range(stats_type.num_fields)],
            fields=list(stats_type),
            mask=stats.is_null(),
        )
    return parsed


_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def record_counts(stats: pa.ChunkedArray) -> pa.Array:
    """``numRecords`` of each file from its JSON statistics: null where they are missing, do not
    parse or lack it (unknown: read the footer), never 0."""
    return stats_leaf(parse_stats(stats, stats_parsed_type([], tight_bounds=False)), "numRecords")


def stats_leaf(parsed: pa.Array, *path: str) -> pa.Array:
    """A leaf of ``stats_parsed`` (``"numRecords"``, ``"nullCount", column`` ...): null where the
    file's statistics (or the struct above the leaf) are null. ``StructArray.field`` would give the
    zeros a null struct's children hold: a file without statistics would count 0 rows."""
    names = [field.name for field in parsed.type]
    if path[0] not in names:
        return pa.nulls(len(parsed), pa.int64())
    leaf = pc.struct_field(parsed, list(path))
    return leaf.combine_chunks() if isinstance(leaf, pa.ChunkedArray) else leaf


def _coerce(value: Any, arrow_type: pa.DataType) -> Any:
    """``value`` as a Python value of ``arrow_type``, or None when it does not fit."""
    if value is None:
        return None
    types = pa.types
    try:
        if types.is_struct(arrow_type):
            if not isinstance(value, dict):
                return None
            return {f.name: _coerce(value.get(f.name), f.type) for f in arrow_type}
        if types.is_floating(arrow_type):
            if isinstance(value, str):  # "NaN" as Spark writes it; a decimal as a checkpoint's text
                return _FLOAT_WORDS[value] if value in _FLOAT_WORDS else float(value)
            return float(value) if not isinstance(value, bool) else None
        if types.is_boolean(arrow_type):
            return value if isinstance(value, bool) else None
        if types.is_integer(arrow_type):
            return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
        if types.is_string(arrow_type) or types.is_large_string(arrow_type):
            return value if isinstance(value, str) else None
        scalar = pa.scalar(str(value), pa.string()).cast(arrow_type)
        return scalar.as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return None
