"""The values of fixed-width Parquet column chunks, for bounds their footers cannot give.

Footers of Arrow-based writers (pyarrow, polars, delta-rs) leave NaN out of a float column's
min/max without counting it, and Spark writes no statistics at all for INT96 timestamps: their
bounds come from the values. This reads a chunk's pages as they lie in the file and returns
every value a dictionary or a ``PLAIN`` / ``BYTE_STREAM_SPLIT`` page holds, without levels or
row assembly (a dictionary-encoded data page only points into the dictionary); any other page
encoding, codec or layout gives None, and the caller keeps no bounds. pyarrow reads a chunk too,
but sets up a reader per file, several times the cost (benchmarks/write.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.parquet.footer import unreadable
from airflow_delta_provider.core.parquet.thrift import (
    T_FALSE,
    T_I16,
    T_I64,
    T_STOP,
    T_STRUCT,
    T_TRUE,
    read_struct,
    skip_compact,
    varint,
)
from airflow_delta_provider.core.utils.memory import READ_POOL

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow.parquet as pq

    from airflow_delta_provider.core.storage import LogStore

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
    """A ``PageHeader`` as ``{field id: value}`` (:func:`read_struct`), without statistics.

    Page headers as every writer lays them out (ascending short field ids, integers, the one
    page header struct) are read in one loop; anything else by :func:`read_struct`.
    """
    try:
        return _usual_page_header(data, position)
    except _Unusual:
        return read_struct(data, position, _PAGE_HEADER)


class _Unusual(Exception):
    """A page header laid out otherwise than :func:`_usual_page_header` reads."""


def _usual_page_header(data: bytes | memoryview, position: int) -> tuple[dict[int, Any], int]:
    """:func:`read_struct` of a ``PageHeader`` with :data:`_PAGE_HEADER`, in one loop: the page
    type's header struct read in place, one-byte integers inline; :class:`_Unusual` for any
    layout it does not read the same way (long field ids, other value types)."""
    header: dict[int, Any] = {}
    fields, wanted, field, outer = header, _PAGE_HEADER, 0, 0
    while True:
        byte = data[position]
        position += 1
        if byte == T_STOP:
            if fields is header:
                return header, position
            fields, wanted, field = header, _PAGE_HEADER, outer
            continue
        if not byte >> 4:
            raise _Unusual
        field += byte >> 4
        kind = byte & 0x0F
        if field not in wanted:
            position = skip_compact(data, position, kind, 1)
        elif T_I16 <= kind <= T_I64:
            value = data[position]
            if value < 0x80:
                position += 1
            else:
                value, position = varint(data, position)
            fields[field] = (value >> 1) ^ -(value & 1)
        elif kind in (T_TRUE, T_FALSE):
            fields[field] = kind == T_TRUE
        elif kind == T_STRUCT and fields is header and wanted[field] is not None:
            outer, wanted, field = field, wanted[field], 0
            fields = header[outer] = {}
        else:
            raise _Unusual


# --- the values of many files' chunks ------------------------------------------------------


class ValueLeaf(Protocol):
    """A fixed-width leaf column whose values are read: its column index, physical type, and
    maximum definition and repetition levels."""

    index: int
    physical: str | None
    levels: tuple[int, int]


def read_leaf_values(
    storage: LogStore,
    paths: list[str],
    footers: list[pq.FileMetaData],
    wanted: Sequence[Sequence[tuple[int, ValueLeaf]]],
    workers: int,
    tails: list[tuple[int | None, bytes]],
    missed: list[int] | None = None,
) -> list[dict[int, list[np.ndarray] | None]]:
    """Per file, the values of the wanted leaves (by leaf position) as arrays, one per page that
    holds any, from their column chunks: taken from the file's tail already read (``tails``:
    where it starts in the file, and its bytes) when it holds them, else one ranged read per
    chunk, all of a window's at once; None where a page cannot be read
    (:func:`chunk_values`). Fixed-width values only: floats and INT96.

    :param missed: if given, gets for each chunk read separately from a tail that ends the
        file how many bytes from its start to the end of the file it is."""
    requests: list[tuple[int, int, ValueLeaf, str]] = []  # (file, position, leaf, codec)
    starts: list[int] = []
    lengths: list[int] = []
    chunks: list[bytes | Exception | None] = []
    for file, (metadata, leaves) in enumerate(zip(footers, wanted, strict=True)):
        offset, tail = tails[file]
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for position, leaf in leaves:
                column = row_group.column(leaf.index)
                start, length = chunk_range(column)
                requests.append((file, position, leaf, column.compression))
                starts.append(start)
                lengths.append(length)
                if offset is not None and offset <= start and start + length <= offset + len(tail):
                    chunks.append(tail[start - offset : start - offset + length])
                else:
                    chunks.append(None)
                    if missed is not None and offset is not None:
                        missed.append(offset + len(tail) - start)
    found: list[dict[int, list[np.ndarray] | None]] = [{at: [] for at, _ in leaves} for leaves in wanted]
    # Read in batches of at most VALUE_BATCH_BYTES, each chunk reduced to what the bounds need as
    # soon as it is decoded: large files' float columns are never all held at once.
    batch: list[int] = []
    size = 0
    for index in range(len(requests) + 1):
        if index == len(requests) or (batch and size + lengths[index] > VALUE_BATCH_BYTES):
            _read_missing(storage, paths, requests, starts, lengths, chunks, batch, workers)
            for at in batch:
                file, position, leaf, codec = requests[at]
                chunk, chunks[at] = chunks[at], None
                if not isinstance(chunk, bytes) or len(chunk) != lengths[at]:
                    reason = chunk if isinstance(chunk, Exception) else "it is shorter than its footer says"
                    raise unreadable(storage, paths[file], reason)
                parts = found[file][position]
                if parts is not None:
                    values = chunk_values(chunk, leaf.physical or "", codec, *leaf.levels)
                    if values is None:
                        found[file][position] = None
                    else:
                        parts.extend(_reduced(array, leaf.physical == "INT96") for array in values)
            batch, size = [], 0
        if index < len(requests):
            batch.append(index)
            size += lengths[index]
    return found


#: The most bytes of column chunks :func:`read_leaf_values` holds at a time.
VALUE_BATCH_BYTES = 64 * 1024 * 1024


def _read_missing(
    storage: LogStore,
    paths: list[str],
    requests: list[tuple[int, int, ValueLeaf, str]],
    starts: list[int],
    lengths: list[int],
    chunks: list[bytes | Exception | None],
    batch: list[int],
    workers: int,
) -> None:
    """Read the chunks of ``batch`` that the tails did not hold, into ``chunks``."""
    missing = [index for index in batch if chunks[index] is None]
    if not missing:
        return
    read = storage.read_ranges(
        [paths[requests[i][0]] for i in missing],
        [starts[i] for i in missing],
        [lengths[i] for i in missing],
        max_workers=workers,
    )
    for index, got in zip(missing, read, strict=True):
        chunks[index] = got


def _reduced(values: np.ndarray, int96: bool) -> np.ndarray:
    """What the bounds need of a page's values: a NaN if it holds one (floats); its least and
    greatest value (INT96: by day, then nanosecond)."""
    if not int96:
        # min() is NaN when any value is: one pass, no mask, for the usual page without NaN.
        if not len(values) or not np.isnan(values.min()):
            return values[:0]
        nan: np.ndarray = values[np.isnan(values)][:1]
        return nan
    days, nanos = values["days"], values["nanos"]
    first = np.flatnonzero(days == days.min())
    last = np.flatnonzero(days == days.max())
    extremes: np.ndarray = values[[first[np.argmin(nanos[first])], last[np.argmax(nanos[last])]]]
    return extremes
