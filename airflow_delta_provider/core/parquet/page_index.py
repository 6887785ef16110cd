"""Parquet's page index: where each data page of a column chunk is, and which pages hold only nulls.

A checkpoint of a million rows has dozens of pages per column, and reading a few of its rows
takes the offset indexes of some twenty columns: their page locations are decoded together in a
few array operations, not varint by varint, and kept by content (the same bytes decode the same).
"""

from __future__ import annotations

import itertools
import threading

import numpy as np

from airflow_delta_provider.core.parquet.thrift import read_struct, varint

#: (offset, compressed size, first row) of each data page of a column chunk.
PageLocations = list[tuple[int, int, int]]

#: Offset indexes decoded, by their bytes.
_DECODED: dict[bytes, PageLocations] = {}
_DECODED_KEPT = 256
_LOCK = threading.Lock()
#: A PageLocation as arrow C++ (pyarrow) and arrow-rs (delta-rs) lay it out: fields 1 (i64), 2 (i32),
#: 3 (i64), stop; any other layout is read the generic way.
_HEADERS = np.array([0x16, 0x15, 0x16, 0x00], np.uint64)
#: Bytes of the longest varint read in place (63 bits).
_VARINT_BYTES = 9


class PageIndexError(ValueError):
    """A page index this module cannot read."""


def page_locations(indexes: list[bytes]) -> list[PageLocations]:
    """Each OffsetIndex's page locations (the caller does not change them: they are shared)."""
    found = {data: _DECODED.get(data) for data in indexes}
    missing = [data for data, locations in found.items() if locations is None]
    if missing:
        try:
            decoded = _decode_together(missing)
        except PageIndexError:
            decoded = [_decode_slowly(data) for data in missing]
        if not all(decoded):
            raise PageIndexError("an offset index without pages")
        found.update(zip(missing, decoded, strict=True))
        with _LOCK:
            _DECODED.update(zip(missing, decoded, strict=True))
            for data in list(_DECODED)[: max(len(_DECODED) - _DECODED_KEPT, 0)]:
                del _DECODED[data]
    return [found[data] or [] for data in indexes]


def clear_page_locations() -> None:
    """Forget the offset indexes decoded (never stale: they are kept by content)."""
    with _LOCK:
        _DECODED.clear()


def _decode_together(indexes: list[bytes]) -> list[PageLocations]:
    """The offset indexes' PageLocation lists, decoded in one pass over their joined bytes.

    Every byte below 0x80 ends a varint, and a PageLocation's field headers are single bytes
    below 0x80: so each location is exactly seven such "tokens" (header, offset, header, size,
    header, first row, stop), which are found, summed and checked as arrays.
    """
    counts, bodies = [], []
    for data in indexes:
        if len(data) < 2 or data[0] != 0x19 or data[1] & 0x0F != 12:  # field 1, a list of structs
            raise PageIndexError("not a list of page locations")
        count, position = data[1] >> 4, 2
        if count == 15:
            count, position = varint(data, 2)
        if count == 0:
            raise PageIndexError("an offset index without pages")
        counts.append(count)
        bodies.append(data[position:])
    raw = np.frombuffer(b"".join(bodies), np.uint8)
    body_starts = np.cumsum([0, *(len(body) for body in bodies)])
    ends = np.flatnonzero(raw < 0x80)
    tokens = 7 * np.array(counts, np.int64)
    first = np.searchsorted(ends, body_starts[:-1])
    if np.any(first + tokens > len(ends)) or np.any(ends[first + tokens - 1] >= body_starts[1:]):
        raise PageIndexError("page locations past their index")
    token_firsts = np.cumsum(tokens) - tokens
    which = np.repeat(first - token_firsts, tokens) + np.arange(int(tokens.sum()))
    token_ends = ends[which]
    token_starts = np.empty_like(token_ends)
    token_starts[1:] = token_ends[:-1] + 1
    token_starts[token_firsts] = body_starts[:-1]
    lengths = token_ends - token_starts + 1
    if lengths.max(initial=1) > _VARINT_BYTES:
        raise PageIndexError("a varint too long to read in place")
    # Each token's bytes, and each byte's place in its token (its 7-bit digit).
    before = np.cumsum(lengths) - lengths
    digit = np.arange(int(lengths.sum())) - np.repeat(before, lengths)
    at = np.repeat(token_starts, lengths) + digit
    shifted = (raw[at] & 0x7F).astype(np.uint64) << (7 * digit).astype(np.uint64)
    values = np.add.reduceat(shifted, before).reshape(-1, 7)
    if not (values[:, 0::2] == _HEADERS).all() or not (lengths.reshape(-1, 7)[:, 0::2] == 1).all():
        raise PageIndexError("page locations laid out otherwise")
    fields = values[:, 1::2].astype(np.int64)
    locations = [(offset, size, row) for offset, size, row in ((fields >> 1) ^ -(fields & 1)).tolist()]
    starts = np.cumsum([0, *counts]).tolist()
    return [locations[start:end] for start, end in itertools.pairwise(starts)]


def _decode_slowly(data: bytes) -> PageLocations:
    """Any OffsetIndex the compact protocol allows (fields in another order, or more of them)."""
    try:
        index, _ = read_struct(data, 0, {1: None})
        return [(location[1], location[2], location[3]) for location in index.get(1, [])]
    except (IndexError, KeyError, TypeError, ValueError) as err:
        raise PageIndexError(f"offset index: {err}") from None


def null_pages(data: bytes) -> np.ndarray:
    """A ColumnIndex's ``null_pages`` (its first field): whether each page holds only nulls."""
    if len(data) < 2 or data[0] != 0x19 or data[1] & 0x0F not in (1, 2):  # a list of booleans
        raise PageIndexError("column index")
    count, position = data[1] >> 4, 2
    if count == 15:
        count, position = varint(memoryview(data), 2)
    if count > len(data) - position:
        raise PageIndexError("column index shorter than its list")
    flags = np.frombuffer(data, np.uint8, count, position)
    if (flags > 2).any():  # a compact boolean is 1 (true) or 2 (false); some writers write 0
        raise PageIndexError("column index")
    empty: np.ndarray = flags == 1
    return empty
