"""Arrow arrays and scalars from Python values, without importing pandas.

``pa.array``, ``pa.scalar``, ``pa.Table.from_pylist`` and every compute call given a plain
Python value ask pyarrow's pandas shim whether the value is a pandas object, and that
question imports pandas (about a fifth of a cold snapshot load). The core builds its arrays
from Python values here instead: from Arrow buffers filled by numpy, type by type, for the
types the log uses (strings, integers, booleans, ``map<string, string>``, structs of them).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from collections.abc import Sequence

_INTEGERS: dict[pa.DataType, type[np.signedinteger[Any]]] = {
    pa.int8(): np.int8,
    pa.int16(): np.int16,
    pa.int32(): np.int32,
    pa.int64(): np.int64,
}


def array(values: Sequence[Any], data_type: pa.DataType) -> pa.Array:
    """``pa.array(values, data_type)`` for the types of the log (None is null).

    :raises TypeError: a value does not fit the type (the caller checked the values first).
    :raises OverflowError: an integer is out of the type's range.
    """
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return strings(values, data_type)
    if pa.types.is_boolean(data_type):
        return booleans(values)
    numpy_type = _INTEGERS.get(data_type)
    if numpy_type is not None:
        return integers(values, data_type)
    if pa.types.is_map(data_type):
        return _map(values, data_type)
    if pa.types.is_struct(data_type):
        return _struct(values, data_type)
    if pa.types.is_null(data_type):
        return pa.nulls(len(values))
    raise TypeError(f"no pandas-free conversion to {data_type}")


def strings(values: Sequence[str | None], data_type: pa.DataType | None = None) -> pa.Array:
    """A string array (``data_type``: string or large_string) from Python strings and None."""
    count = len(values)
    encoded = [b"" if v is None else v.encode() for v in values]
    lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=count)
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    large = data_type is not None and pa.types.is_large_string(data_type)
    if not large and offsets[-1] >= 2**31:
        built = pa.Array.from_buffers(
            pa.large_string(),
            count,
            [_validity(values), pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))],
        )
        return built.cast(pa.string())
    offset_buffer = pa.py_buffer(offsets if large else offsets.astype(np.int32))
    return pa.Array.from_buffers(
        pa.large_string() if large else pa.string(),
        count,
        [_validity(values), offset_buffer, pa.py_buffer(b"".join(encoded))],
    )


def integers(values: Sequence[int | None], data_type: pa.DataType) -> pa.Array:
    """An integer array of ``data_type`` from Python ints (and None)."""
    numpy_type = _INTEGERS[data_type]
    info = np.iinfo(numpy_type)
    data = np.fromiter((0 if v is None else v for v in values), dtype=np.int64, count=len(values))
    if len(data) and (data.min() < info.min or data.max() > info.max):
        raise OverflowError(f"an integer is out of the range of {data_type}")
    return pa.Array.from_buffers(
        data_type, len(values), [_validity(values), pa.py_buffer(data.astype(numpy_type, copy=False))]
    )


def from_numpy(values: np.ndarray) -> pa.Array:
    """A primitive Arrow array sharing a 1-d numpy array of integers or booleans (no nulls)."""
    if values.dtype == np.bool_:
        return _bits(values)
    data = np.ascontiguousarray(values)
    return pa.Array.from_buffers(pa.from_numpy_dtype(data.dtype), len(data), [None, pa.py_buffer(data)])


def booleans(values: Sequence[bool | None]) -> pa.Array:
    """A boolean array from Python booleans (and None)."""
    data = np.fromiter((bool(v) for v in values), dtype=np.bool_, count=len(values))
    bits = _bits(data)
    validity = _validity(values)
    if validity is None:
        return bits
    return pa.Array.from_buffers(pa.bool_(), len(values), [validity, bits.buffers()[1]])


def scalar(value: Any, data_type: pa.DataType) -> pa.Scalar:
    """``pa.scalar(value, data_type)``, for compute calls (which would convert a Python value)."""
    return array([value], data_type)[0]


def _bits(mask: np.ndarray) -> pa.Array:
    packed = np.packbits(mask, bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(mask), [None, pa.py_buffer(packed)])


def _validity(values: Sequence[Any]) -> pa.Buffer | None:
    present = np.fromiter((v is not None for v in values), dtype=np.bool_, count=len(values))
    if present.all():
        return None
    return pa.py_buffer(np.packbits(present, bitorder="little"))


def _mask(values: Sequence[Any]) -> pa.Array | None:
    """The null mask of ``values`` (True where None), or None when nothing is null."""
    missing = np.fromiter((v is None for v in values), dtype=np.bool_, count=len(values))
    return _bits(missing) if missing.any() else None


def _map(values: Sequence[dict[str, Any] | None], data_type: pa.MapType) -> pa.Array:
    count = len(values)
    sizes = np.fromiter((0 if v is None else len(v) for v in values), dtype=np.int64, count=count)
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    keys = [k for v in values if v for k in v]
    items = [i for v in values if v for i in v.values()]
    return pa.MapArray.from_arrays(
        from_numpy(offsets),
        array(keys, data_type.key_type),
        array(items, data_type.item_type),
        type=data_type,
        mask=_mask(values),
    )


def _struct(values: Sequence[dict[str, Any] | None], data_type: pa.StructType) -> pa.Array:
    children = [
        array([None if v is None else v.get(field.name) for v in values], field.type) for field in data_type
    ]
    return pa.StructArray.from_arrays(children, fields=list(data_type), mask=_mask(values))


def table(rows: Sequence[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    """``pa.Table.from_pylist(rows, schema=schema)`` for the types of the log."""
    if not rows:  # (``schema.empty_table()`` imports pandas)
        return pa.Table.from_arrays([pa.nulls(0, field.type) for field in schema], schema=schema)
    columns = [array([row.get(field.name) for row in rows], field.type) for field in schema]
    return pa.Table.from_arrays(columns, schema=schema)


def to_bools(mask: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean Arrow array (or chunked array) as a numpy bool array, null as False.

    ``Array.to_numpy(zero_copy_only=False)`` goes through pyarrow's pandas conversion, which
    imports pandas; this unpacks the bits.
    """
    chunks = mask.chunks if isinstance(mask, pa.ChunkedArray) else [mask]
    parts = [np.zeros(0, dtype=np.bool_)]
    for chunk in chunks:
        if chunk.null_count:
            chunk = chunk.fill_null(_FALSE_SCALAR)
        buffer = chunk.buffers()[1]
        data = np.frombuffer(buffer, dtype=np.uint8) if buffer is not None else np.zeros(0, np.uint8)
        bits = np.unpackbits(data, bitorder="little")
        parts.append(bits[chunk.offset : chunk.offset + len(chunk)].astype(np.bool_))
    return np.concatenate(parts)


_FALSE_SCALAR = booleans([False])[0]
