"""File actions (``add`` / ``remove``) as Arrow tables: their schemas and their checks.

The file state of a version is a pyarrow table of file actions, built from a checkpoint's
columns, from commit lines parsed by Arrow's JSON reader, or from parsed actions one by one
(:func:`rows_to_table`). :func:`first_bad_file_row` is the columnar equivalent of
:func:`~.action_checks.action_problem` for such a table, so every route refuses the same
actions.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import CorruptLogError
from airflow_delta_provider.core.storage.paths import escapes_root
from airflow_delta_provider.core.utils.arrays import scalar, strings
from airflow_delta_provider.core.utils.arrays import table as arrow_table

DELETION_VECTOR_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)


_STRING_MAP = pa.map_(pa.string(), pa.string())


#: The ``add`` action as a checkpoint stores it (without the optional parsed stats).
ADD_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        ("partitionValues", _STRING_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", _STRING_MAP),
        ("deletionVector", DELETION_VECTOR_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
        ("clusteringProvider", pa.string()),
    ]
)


#: The ``remove`` action as a checkpoint stores it (tombstones keep no stats or tags).
REMOVE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", _STRING_MAP),
        ("size", pa.int64()),
        ("deletionVector", DELETION_VECTOR_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)


#: Scalars for compute calls (a Python value there would make pyarrow import pandas).
_ZERO = scalar(0, pa.int64())
_TRUE = scalar(True, pa.bool_())
_FALSE = scalar(False, pa.bool_())
_INLINE = scalar("i", pa.string())


def rows_to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    try:
        return arrow_table(rows, schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as err:  # checked before: a bug if hit
        raise CorruptLogError(f"A file action in the log has a field of the wrong type: {err}") from None


#: Fields a checkpoint's file actions must not leave null (the protocol's required fields).
_REQUIRED_FILE_FIELDS = {
    "add": ("path", "partitionValues", "size", "modificationTime", "dataChange"),
    "remove": ("path", "dataChange"),
}


def first_bad_file_row(flat: pa.Table, kind: str) -> tuple[int, str] | None:
    """(row, problem) of the first row that breaks the protocol, or None: null checks and minima
    over whole columns, per-row work only for the rows a byte scan cannot clear."""
    if flat.num_rows == 0:
        return None
    for name in _REQUIRED_FILE_FIELDS[kind]:
        values = flat.column(name)
        if values.null_count:
            return _index_of(pc.is_null(values)), f"{kind}.{name} is null"
    paths = flat.column("path")
    empty = _first_index(pc.equal(pc.binary_length(paths), _ZERO))
    if empty is not None:
        return empty, f"{kind}.path is empty"
    sizes = flat.column("size")
    smallest = pc.min(sizes).as_py()
    if smallest is not None and smallest < 0:
        index = _index_of(pc.less(sizes, _ZERO))
        return index, f"{kind}.size is {sizes[index].as_py()}; it must not be negative"
    if may_climb(paths):
        for index, path in enumerate(paths.to_pylist()):
            if escapes_root(path):
                return index, (
                    f"{kind}.path {path[:80]!r} is relative and leads out of the table root through '..'; "
                    f"the core never reads outside the table root"
                )
    dvs = flat.column("deletionVector")
    if dvs.null_count < len(dvs):
        return _first_bad_deletion_vector(dvs, kind)
    return None


def _first_bad_deletion_vector(dvs: pa.ChunkedArray, kind: str) -> tuple[int, str] | None:
    present = pc.is_valid(dvs)
    where = f"{kind}.deletionVector"
    storage_type = pc.struct_field(dvs, "storageType")
    known = pc.fill_null(pc.is_in(storage_type, strings(["u", "i", "p"])), _FALSE)
    bad_type = pc.and_(present, pc.invert(known))
    index = _first_index(bad_type)
    if index is not None:
        return index, f"{where}.storageType must be 'u', 'i' or 'p', got {storage_type[index].as_py()!r}"
    for name in ("pathOrInlineDv", "sizeInBytes", "cardinality"):
        index = _first_index(pc.and_(present, pc.is_null(pc.struct_field(dvs, name))))
        if index is not None:
            return index, f"{where}.{name} is null"
    values = pc.struct_field(dvs, "pathOrInlineDv")
    stored = pc.and_(present, pc.not_equal(storage_type, _INLINE))
    if may_climb(values.filter(stored)):
        types, texts = storage_type.to_pylist(), values.to_pylist()
        for index, (dv_type, text) in enumerate(zip(types, texts, strict=True)):
            if dv_type == "u":
                escapes = escapes_root(f"{text[:-20]}/deletion_vector.bin")
            else:
                escapes = dv_type == "p" and escapes_root(text)
            if escapes:
                return index, f"{where}.pathOrInlineDv {text[:80]!r} leads out of the table root through '..'"
    return None


def _first_index(mask: pa.ChunkedArray | pa.Array) -> int | None:
    """The first position where ``mask`` is true, or None."""
    index = int(pc.index(mask, _TRUE).as_py())
    return index if index >= 0 else None


def _index_of(mask: pa.ChunkedArray | pa.Array) -> int:
    """The first position where ``mask`` is true, which the caller knows exists."""
    index = _first_index(mask)
    if index is None:
        raise AssertionError("no true value in a mask known to hold one")
    return index


def may_climb(strings: pa.ChunkedArray | pa.Array) -> bool:
    """Whether any string may hold a ``..`` segment, plain or URL-encoded (``%2E``).

    A scan of the string data buffers as 16-bit pairs at both alignments, without copying
    them: tens of milliseconds for a million paths, where per-string compute kernels (or a
    regular expression) take several times that. False positives (``a..b``) only cost the
    exact per-row check.
    """
    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    for chunk in chunks:
        if len(chunk) == 0 or chunk.null_count == len(chunk):
            continue
        offset_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], dtype=offset_type)
        offsets = offsets[chunk.offset : chunk.offset + len(chunk) + 1]
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        for start in (0, 1):
            pairs = data[start : start + (data.size - start) // 2 * 2].view(np.uint16)
            if (pairs == _DOT_DOT).any():
                return True
            # An encoded dot: '%2' followed by 'E' or 'e' ('%20' and the like are common).
            after = np.flatnonzero(pairs == _PERCENT_TWO) * 2 + start + 2
            after = after[after < data.size]
            if after.size and np.isin(data[after], _CAPITAL_OR_SMALL_E).any():
                return True
    return False


_DOT_DOT = np.frombuffer(b"..", dtype=np.uint16)[0]


_PERCENT_TWO = np.frombuffer(b"%2", dtype=np.uint16)[0]


_CAPITAL_OR_SMALL_E = np.frombuffer(b"Ee", dtype=np.uint8)
