"""The values of one fixed-width Parquet column chunk, for bounds its footer cannot give.

Footers of Arrow-based writers (pyarrow, polars, delta-rs) leave NaN out of a float column's
min/max without counting it, and Spark writes no statistics at all for INT96 timestamps. Their
bounds come from the values instead: this reads the chunk's pages as they lie in the file and
returns every value that a dictionary or a ``PLAIN`` / ``BYTE_STREAM_SPLIT`` page holds,
without levels or row assembly. A dictionary-encoded data page only points into the
dictionary, whose values are the chunk's distinct values, so it is skipped; any other page
encoding, codec or page layout gives None (the caller keeps no bounds).

pyarrow reads a chunk too, but sets a reader up per file: ~70 us per 1,000-row file here,
against ~10 us for this (``benchmarks/write.md``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.memory import READ_POOL

#: Parquet's page types and encodings (parquet.thrift).
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY, _BYTE_STREAM_SPLIT = 0, 2, 3, 8, 9
#: Footer codec names (pyarrow's spelling) -> pyarrow codec; others (LZO, Hadoop's LZ4) are not read.
_CODECS = {"SNAPPY": "snappy", "GZIP": "gzip", "BROTLI": "brotli", "ZSTD": "zstd", "LZ4_RAW": "lz4_raw"}
#: numpy dtypes of the fixed-width physical types read here.
DTYPES: dict[str, np.dtype[Any]] = {
    "FLOAT": np.dtype("<f4"),
    "DOUBLE": np.dtype("<f8"),
    "INT96": np.dtype([("nanos", "<i8"), ("days", "<i4")]),
}

# Thrift's compact protocol (Parquet's footers and page headers): field and element types.
_T_STOP, _T_TRUE, _T_FALSE, _T_BYTE, _T_I16, _T_I32, _T_I64, _T_DOUBLE, _T_BINARY = range(9)
_T_LIST, _T_SET, _T_MAP, _T_STRUCT = 9, 10, 11, 12


def chunk_range(column: Any) -> tuple[int, int]:
    """``(offset, length)`` of a column chunk (``ColumnChunkMetaData``) in its file."""
    start = column.data_page_offset
    if column.has_dictionary_page and 0 < column.dictionary_page_offset < start:
        start = column.dictionary_page_offset
    return start, column.total_compressed_size


def chunk_values(
    chunk: bytes, physical_type: str, compression: str, max_definition: int, max_repetition: int
) -> list[np.ndarray] | None:
    """Every value the chunk's dictionary and plain pages hold (an array per page that holds any),
    or None when a page cannot be read.

    :param chunk: the chunk's bytes (:func:`chunk_range`).
    :param physical_type: ``FLOAT``, ``DOUBLE`` or ``INT96``.
    :param compression: the footer's codec name (``SNAPPY``, ``ZSTD``, ...).
    :param max_definition: the column's maximum definition level (0: no levels stored).
    :param max_repetition: the same for repetition levels.
    """
    dtype = DTYPES.get(physical_type)
    codec = codec_of(compression)
    if dtype is None or (codec is None and compression != "UNCOMPRESSED"):
        return None
    parts: list[np.ndarray] = []
    view = memoryview(chunk)
    position = 0
    try:
        while position < len(chunk):
            header, position = read_page_header(chunk, position)
            size = header.get(3)
            if not isinstance(size, int) or size < 0 or position + size > len(chunk):
                return None
            body = view[position : position + size]
            position += size
            values = _page_values(header, body, dtype, codec, max_definition, max_repetition)
            if values is None:
                return None
            if len(values):
                parts.append(values)
    except (IndexError, ValueError, pa.ArrowException):
        return None
    return parts


def _page_values(
    header: dict[int, Any],
    body: memoryview,
    dtype: np.dtype[Any],
    codec: pa.Codec | None,
    max_definition: int,
    max_repetition: int,
) -> np.ndarray | None:
    kind, plain_size = header.get(1), header.get(2)
    if not isinstance(plain_size, int):
        return None
    if kind == _DICTIONARY_PAGE:
        page = header.get(7, {})
        if page.get(2, _PLAIN) not in (_PLAIN, _PLAIN_DICTIONARY):
            return None
        return _fixed(decompressed(body, plain_size, codec), dtype, _PLAIN, page.get(1))
    if kind == _DATA_PAGE:
        page = header.get(5, {})
        encoding = page.get(2)
        if encoding in (_RLE_DICTIONARY, _PLAIN_DICTIONARY):
            return np.empty(0, dtype)  # indices into the dictionary
        data = decompressed(body, plain_size, codec)
        for levels, encoding_field in ((max_repetition, 4), (max_definition, 3)):
            if levels:
                if page.get(encoding_field, _RLE) != _RLE:
                    return None  # BIT_PACKED levels carry no length
                skip = 4 + int.from_bytes(data[:4], "little")
                if skip > len(data):
                    return None
                data = data[skip:]
        return _fixed(data, dtype, encoding, page.get(1))
    if kind == _DATA_PAGE_V2:
        page = header.get(8, {})
        encoding = page.get(4)
        if encoding in (_RLE_DICTIONARY, _PLAIN_DICTIONARY):
            return np.empty(0, dtype)
        levels = page.get(5, 0) + page.get(6, 0)  # stored uncompressed, ahead of the values
        if levels > len(body):
            return None
        values = body[levels:]
        if page.get(7, True):
            values = decompressed(values, plain_size - levels, codec)
        return _fixed(values, dtype, encoding, page.get(1))
    return np.empty(0, dtype) if kind == 1 else None  # index pages hold no values


def codec_of(compression: str) -> pa.Codec | None:
    """The pyarrow codec of a footer's codec name, made once (making one costs as much as using it)."""
    name = _CODECS.get(compression)
    if name is None:
        return None
    codec = _CODEC_CACHE.get(name)
    if codec is None:
        codec = _CODEC_CACHE[name] = pa.Codec(name)
    return codec


_CODEC_CACHE: dict[str, pa.Codec] = {}


def decompressed(body: bytes | memoryview, size: int, codec: pa.Codec | None) -> memoryview:
    """The page body decompressed, without a copy, from the read pool (:mod:`.memory`)."""
    if codec is None:
        return memoryview(body)
    return memoryview(codec.decompress(body, decompressed_size=size, memory_pool=READ_POOL)).cast("B")


def _fixed(data: memoryview, dtype: np.dtype[Any], encoding: int | None, most: Any) -> np.ndarray | None:
    """The page's values; None for another encoding, or a size that cannot be ``most`` values or
    fewer (the page header's count: with nulls, more than the values stored)."""
    width = dtype.itemsize
    if len(data) % width or not isinstance(most, int) or len(data) // width > most:
        return None
    if encoding == _PLAIN:
        return np.frombuffer(data, dtype)
    if encoding == _BYTE_STREAM_SPLIT and dtype.names is None:
        count = len(data) // width
        return np.frombuffer(data, np.uint8).reshape(width, count).T.copy().view(dtype).ravel()
    return None


#: What a ``PageHeader`` read needs: type, sizes, and the data, dictionary and v2 data page
#: headers without their statistics.
_PAGE_HEADER: dict[int, Any] = {
    1: None,
    2: None,
    3: None,
    5: {1: None, 2: None, 3: None, 4: None},
    7: {1: None, 2: None},
    8: {1: None, 2: None, 3: None, 4: None, 5: None, 6: None, 7: None},
}


def read_page_header(data: bytes | memoryview, position: int) -> tuple[dict[int, Any], int]:
    """A ``PageHeader`` as ``{field id: value}`` (:func:`read_struct`), without statistics."""
    return read_struct(data, position, _PAGE_HEADER)


def read_struct(
    data: bytes | memoryview, position: int, spec: dict[int, Any] | None = None, depth: int = 0
) -> tuple[dict[int, Any], int]:
    """A compact-protocol struct as ``{field id: value}``, and the position after it.

    :param spec: the fields to read (others are skipped), each with the spec of its struct
        value or of its list's struct elements (None: everything); None reads every field.
    """
    if depth > 16:
        raise ValueError("nested too deeply")
    fields: dict[int, Any] = {}
    field = 0
    while True:
        header = data[position]
        position += 1
        if header == _T_STOP:
            return fields, position
        kind = header & 0x0F
        if header >> 4:
            field += header >> 4
        else:
            raw, position = varint(data, position)
            field = (raw >> 1) ^ -(raw & 1)
        if spec is not None and field not in spec:
            position = skip_compact(data, position, kind, depth + 1)
        elif kind in (_T_TRUE, _T_FALSE):
            fields[field] = kind == _T_TRUE
        else:
            fields[field], position = read_value(data, position, kind, spec and spec[field], depth + 1)


def read_value(
    data: bytes | memoryview, position: int, kind: int, spec: dict[int, Any] | None, depth: int
) -> tuple[Any, int]:
    """One compact-protocol value of type ``kind`` (maps are skipped: None)."""
    if kind == _T_BYTE:
        return data[position], position + 1
    if kind in (_T_I16, _T_I32, _T_I64):
        raw, position = varint(data, position)
        return (raw >> 1) ^ -(raw & 1), position
    if kind == _T_DOUBLE:
        return bytes(data[position : position + 8]), position + 8
    if kind == _T_BINARY:
        length, position = varint(data, position)
        if position + length > len(data):
            raise ValueError("binary past the end")
        return bytes(data[position : position + length]), position + length
    if kind == _T_STRUCT:
        return read_struct(data, position, spec, depth)
    if kind in (_T_LIST, _T_SET):
        size, element, position = _list_header(data, position)
        items = []
        for _ in range(size):
            if element in (_T_TRUE, _T_FALSE):
                items.append(data[position] == _T_TRUE)
                position += 1
            else:
                item, position = read_value(data, position, element, spec, depth + 1)
                items.append(item)
        return items, position
    return None, skip_compact(data, position, kind, depth)


def _list_header(data: bytes | memoryview, position: int) -> tuple[int, int, int]:
    """A compact-protocol list's size and element type, and the position of its first element."""
    header = data[position]
    position += 1
    size, element = header >> 4, header & 0x0F
    if size == 15:
        size, position = varint(data, position)
    if size > len(data) - position:  # every element takes a byte at least
        raise ValueError("list longer than the data")
    return size, element, position


def varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """An unsigned LEB128 varint at ``position`` and the position after it."""
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def skip_compact(data: bytes | memoryview, position: int, kind: int, depth: int) -> int:
    """The position after one compact-protocol value of type ``kind`` at ``position``.

    Integers and strings inside structs and lists are skipped in place (most of a footer).

    :raises ValueError: the value runs past the end of ``data`` or nests too deeply.
    """
    if depth > 64 or position >= len(data):
        raise ValueError("nested too deeply, or past the end")
    if kind in (_T_TRUE, _T_FALSE):
        return position  # a struct field's boolean is in its header
    if kind == _T_BYTE:
        return position + 1
    if kind in (_T_I16, _T_I32, _T_I64):
        while data[position] & 0x80:
            position += 1
        return position + 1
    if kind == _T_DOUBLE:
        return position + 8
    if kind == _T_BINARY:
        length, position = varint(data, position)
        if position + length > len(data):
            raise ValueError("binary past the end")
        return position + length
    if kind in (_T_LIST, _T_SET):
        size, element, position = _list_header(data, position)
        if element in (_T_TRUE, _T_FALSE, _T_BYTE):  # a list's booleans take a byte each
            return position + size
        if element in (_T_I16, _T_I32, _T_I64):
            for _ in range(size):
                while data[position] & 0x80:
                    position += 1
                position += 1
            return position
        for _ in range(size):
            position = skip_compact(data, position, element, depth + 1)
        return position
    if kind == _T_MAP:
        size, position = varint(data, position)
        if 2 * size > len(data) - position:
            raise ValueError("map longer than the footer")
        if size:
            types = data[position]
            position += 1
            for _ in range(size):
                position = skip_compact(data, position, types >> 4, depth + 1)
                position = skip_compact(data, position, types & 0x0F, depth + 1)
        return position
    if kind == _T_STRUCT:
        while True:
            header = data[position]
            position += 1
            if header == _T_STOP:
                return position
            if header >> 4 == 0:  # a field id of its own follows
                while data[position] & 0x80:
                    position += 1
                position += 1
            field_kind = header & 0x0F
            if field_kind in (_T_I16, _T_I32, _T_I64):
                while data[position] & 0x80:
                    position += 1
                position += 1
            elif field_kind not in (_T_TRUE, _T_FALSE):
                position = skip_compact(data, position, field_kind, depth + 1)
    raise ValueError(f"unknown compact type {kind}")
