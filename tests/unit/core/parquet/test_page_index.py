"""Offset and column indexes read as the pages of the file lie, on files pyarrow and delta-rs wrote."""

from __future__ import annotations

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.parquet import page_index
from airflow_delta_provider.core.parquet.page_index import PageIndexError, null_pages, page_locations
from airflow_delta_provider.core.parquet.page_scan import read_page_header
from airflow_delta_provider.core.parquet.thrift import read_struct

_DATA_PAGES = (0, 3)  # DATA_PAGE, DATA_PAGE_V2


def _indexes(path) -> list[tuple[int, int, bytes, bytes]]:
    """(row group, column, offset index bytes, column index bytes) of every column chunk."""
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    meta, _ = read_struct(data[-8 - length : -8], 0, {4: {1: {4: None, 5: None, 6: None, 7: None}}})
    return [
        (group, column, data[chunk[4] : chunk[4] + chunk[5]], data[chunk[6] : chunk[6] + chunk[7]])
        for group, row_group in enumerate(meta[4])
        for column, chunk in enumerate(row_group[1])
    ]


def _check_against_the_pages(path) -> int:
    """Every location is a data page of its chunk: back to back from the chunk's first data page,
    its size the page's, its first row the rows before it. Returns the pages checked."""
    data = path.read_bytes()
    metadata = pq.read_metadata(path)
    indexes = _indexes(path)
    decoded = page_locations([offset_index for _, _, offset_index, _ in indexes])
    checked = 0
    for (group, column, _, _), locations in zip(indexes, decoded, strict=True):
        chunk = metadata.row_group(group).column(column)
        assert locations[0][0] == chunk.data_page_offset
        rows = 0
        for number, (offset, size, first_row) in enumerate(locations):
            header, position = read_page_header(memoryview(data), offset)
            assert header[1] in _DATA_PAGES
            assert position - offset + header[3] == size
            assert first_row == rows
            rows += header[5][1] if header[1] == 0 else header[8][3]  # num_values / num_rows
            if number + 1 < len(locations):
                assert offset + size == locations[number + 1][0]
            checked += 1
        assert rows == metadata.row_group(group).num_rows
    return checked


@pytest.mark.parametrize(
    "options",
    [
        {"max_rows_per_page": 100, "row_group_size": 12_000},  # 120 pages: a list's long header
        {"max_rows_per_page": 7, "data_page_version": "2.0", "compression": "zstd"},
        {},
    ],
)
def test_page_locations_are_where_the_pages_are(tmp_path, options):
    rows = 20_000
    table = pa.table(
        {
            "big": pa.array(np.arange(rows, dtype=np.int64) * 2**40),
            "text": pa.array([f"value-{i % 97}" if i % 5 else None for i in range(rows)]),
            "flag": pa.array([i % 3 == 0 for i in range(rows)]),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, write_page_index=True, **options)
    assert _check_against_the_pages(path) >= 3


def test_page_locations_of_a_checkpoint_delta_rs_wrote(tmp_path):
    root = tmp_path / "t"
    for index in range(3):
        deltalake.write_deltalake(str(root), pa.table({"id": [index]}), mode="append")
    deltalake.DeltaTable(str(root)).create_checkpoint()
    [checkpoint] = (root / "_delta_log").glob("*.checkpoint.parquet")
    assert _check_against_the_pages(checkpoint) >= 10


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        out.append((value & 0x7F) | (0x80 if value >> 7 else 0))
        value >>= 7
        if not value:
            return bytes(out)


def _zigzag(value: int) -> bytes:
    return _varint((value << 1) ^ (value >> 63))


def _location(offset: int, size: int, first_row: int, order: tuple[int, ...] = (1, 2, 3)) -> bytes:
    """A PageLocation struct, its fields in ``order`` (long-form headers where ids go back)."""
    values = {1: (6, offset), 2: (5, size), 3: (6, first_row)}
    out, last = bytearray(), 0
    for field in order:
        kind, value = values[field]
        delta = field - last
        out += bytes([delta << 4 | kind]) if 0 < delta <= 15 else bytes([kind]) + _zigzag(field)
        out += _zigzag(value)
        last = field
    return bytes(out) + b"\x00"


def _offset_index(locations: list[bytes], tail: bytes = b"") -> bytes:
    count = len(locations)
    header = bytes([0x19, count << 4 | 12]) if count < 15 else bytes([0x19, 0xFC]) + _varint(count)
    return header + b"".join(locations) + tail + b"\x00"


def test_an_offset_index_laid_out_otherwise_reads_the_same():
    """Fields in another order, or the optional unencoded sizes after the list: read the slow
    way, alongside ones read the fast way, to the same locations."""
    expected = [(4, 100, 0), (104, 2**33, 10), (2**40, 50, 2**31)]
    usual = _offset_index([_location(*loc) for loc in expected])
    reordered = _offset_index([_location(*loc, order=(3, 1, 2)) for loc in expected])
    sizes_after = _offset_index([_location(*loc) for loc in expected], tail=b"\x19\x36" + b"\x02" * 3)
    page_index.clear_page_locations()
    assert page_locations([usual, reordered, sizes_after, usual]) == [expected] * 4
    many = [(i * 1_000, 1_000, i * 10) for i in range(40)]
    assert page_locations([_offset_index([_location(*loc) for loc in many])]) == [many]


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x19",
        _offset_index([]),
        _offset_index([_location(4, 100, 0)])[:-4],  # cut inside the location
        b"\x15\x02\x00",  # not a list
        b"\x19\x2c" + b"\x80" * 30,  # a varint without end
    ],
)
def test_an_unreadable_offset_index_is_refused(data):
    page_index.clear_page_locations()
    with pytest.raises(PageIndexError):
        page_locations([data])


def test_null_pages_say_which_pages_hold_only_nulls(tmp_path):
    values = [None] * 1_000 + list(range(500)) + [None] * 300
    path = tmp_path / "t.parquet"
    pq.write_table(
        pa.table({"v": pa.array(values, pa.int64())}), path, write_page_index=True, max_rows_per_page=100
    )
    [(_, _, _, column_index)] = _indexes(path)
    assert null_pages(column_index).tolist() == [True] * 10 + [False] * 5 + [True] * 3
    for unreadable in (b"\x19\x31\x01", b"\x19\x31\x01\x02\x07", b"\x15\x02"):
        with pytest.raises(PageIndexError):
            null_pages(unreadable)
