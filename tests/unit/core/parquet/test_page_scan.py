"""Reading a fixed-width column chunk's values from its pages, checked against pyarrow's reader."""

from __future__ import annotations

import datetime as dt
import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.expressions.stats import read_footers
from airflow_delta_provider.core.expressions.stats_encoding import int96_bounds
from airflow_delta_provider.core.parquet import page_scan
from airflow_delta_provider.core.parquet.page_scan import DTYPES, _reduced, chunk_range, chunk_values
from airflow_delta_provider.core.parquet.thrift import read_struct
from airflow_delta_provider.core.storage import open_store

VALUES = [1.0, float("nan"), None, -2.5, 0.0, float("inf")] * 300


def _parquet(table: pa.Table, **options: object) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    return sink.getvalue()


def _chunks_values(data: bytes, column: str) -> np.ndarray | None:
    """chunk_values of every row group's chunk of ``column`` (a dotted path), concatenated."""
    metadata = pq.read_metadata(pa.BufferReader(data))
    index = [metadata.schema.column(i).path for i in range(metadata.num_columns)].index(column)
    schema = metadata.schema.column(index)
    found = []
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(index)
        start, length = chunk_range(chunk)
        values = chunk_values(
            data[start : start + length],
            chunk.physical_type,
            chunk.compression,
            schema.max_definition_level,
            schema.max_repetition_level,
        )
        if values is None:
            return None
        found.extend(values)
    return np.concatenate(found) if found else np.empty(0)


def _as_set(values: np.ndarray) -> set:
    return {"nan" if v != v else float(v) for v in values.tolist()}


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"compression": "zstd"},
        {"compression": "gzip"},
        {"compression": "brotli"},
        {"compression": "none"},
        {"use_dictionary": False},
        {"use_dictionary": False, "data_page_version": "2.0"},
        {"data_page_version": "2.0", "compression": "zstd"},
        {"use_dictionary": False, "use_byte_stream_split": True},
        {"use_dictionary": False, "data_page_size": 256, "row_group_size": 500},  # many pages and groups
        {"dictionary_pagesize_limit": 64},  # the dictionary overflows: later pages fall back to PLAIN
    ],
    ids=lambda options: ",".join(f"{k}={v}" for k, v in options.items()) or "defaults",
)
@pytest.mark.parametrize("arrow_type", [pa.float64(), pa.float32()], ids=["double", "float"])
def test_float_values_are_those_pyarrow_reads(options, arrow_type):
    table = pa.table({"x": pa.array(VALUES, arrow_type)})
    data = _parquet(table, **options)
    values = _chunks_values(data, "x")
    assert values is not None
    expected = pq.read_table(pa.BufferReader(data)).column("x").drop_null().to_numpy()
    if options.get("use_dictionary", True):
        # Dictionary pages hold each distinct value once; their data pages only point into them.
        assert _as_set(values) == _as_set(expected)
    else:
        np.testing.assert_array_equal(values, expected)


def test_a_float_inside_a_struct_skips_the_definition_levels():
    table = pa.table({"s": pa.array([{"a": 1.5}, None, {"a": None}, {"a": -3.0}])})
    values = _chunks_values(_parquet(table, use_dictionary=False), "s.a")
    assert values is not None and values.tolist() == [1.5, -3.0]


def test_int96_values_are_julian_days_and_nanoseconds():
    moments = [dt.datetime(2024, 1, 1, 12), None, dt.datetime(1900, 1, 1), dt.datetime(2262, 4, 1)]
    table = pa.table({"t": pa.array(moments, pa.timestamp("us"))})
    for dictionary in (True, False):
        data = _parquet(table, use_deprecated_int96_timestamps=True, use_dictionary=dictionary)
        values = _chunks_values(data, "t")
        assert values is not None
        got = sorted(
            dt.datetime(1970, 1, 1)
            + dt.timedelta(days=int(days) - 2_440_588, microseconds=int(nanos) // 1000)
            for nanos, days in values.tolist()
        )
        assert got == sorted(m for m in moments if m is not None)


@pytest.mark.parametrize(
    "damage",
    ["lz4", "truncated", "header-garbage", "length-past-the-end", "not-fixed-width"],
)
def test_what_cannot_be_read_gives_none(damage):
    """None, never a wrong answer or an exception: the caller then keeps no bounds."""
    table = pa.table({"x": pa.array(VALUES, pa.float64()), "s": ["a", "b", "c", "d", "e", "f"] * 300})
    data = _parquet(table, compression="lz4" if damage == "lz4" else "snappy", use_dictionary=False)
    metadata = pq.read_metadata(pa.BufferReader(data))
    column = metadata.row_group(0).column(1 if damage == "not-fixed-width" else 0)
    start, length = chunk_range(column)
    chunk = data[start : start + length]
    if damage == "truncated":
        chunk = chunk[: length // 2]
    elif damage == "header-garbage":
        chunk = b"\xff" * 16 + chunk
    elif damage == "length-past-the-end":
        chunk = chunk[:40]
    assert chunk_values(chunk, column.physical_type, column.compression, 1, 0) is None


def test_values_are_read_in_bounded_batches_with_the_same_stats(tmp_path, monkeypatch):
    """However small the batches of column chunks held at once, the stats are the same."""

    paths = []
    for index in range(5):
        values = [index + 0.5, None, -index - 0.25] if index != 3 else [1.0, float("nan"), 2.0]
        pq.write_table(pa.table({"i": [index] * 3, "f": values}), tmp_path / f"{index}.parquet")
        paths.append(str(tmp_path / f"{index}.parquet"))
    storage = open_store(str(tmp_path))
    columns = [("i",), ("f",)]
    whole = [f.stats for f in read_footers(storage, paths, stats_columns=columns)]
    monkeypatch.setattr(page_scan, "VALUE_BATCH_BYTES", 1)
    assert [f.stats for f in read_footers(storage, paths, stats_columns=columns)] == whole
    assert ["minValues" in json.loads(s) for s in whole] == [True, True, True, False, True]


def test_int96_pages_are_reduced_to_their_extremes():
    same_day = np.array([(5, 2_460_000), (1, 2_460_000), (9, 2_460_000)], DTYPES["INT96"])
    spread = np.array([(9, 2_459_999), (1, 2_460_001), (0, 2_460_001), (7, 2_459_999)], DTYPES["INT96"])
    for values in (same_day, spread):
        assert int96_bounds(_reduced(values, True)) == int96_bounds(values)
    assert _reduced(np.array([1.0, float("nan"), 2.0]), False).size == 1
    assert _reduced(np.array([1.0, 2.0]), False).size == 0


def _page_headers(data: bytes) -> list[tuple[bytes, int]]:
    """(chunk, position) of every page header of every column chunk of a file."""
    metadata = pq.read_metadata(pa.BufferReader(data))
    found = []
    for group in range(metadata.num_row_groups):
        for index in range(metadata.num_columns):
            start, length = chunk_range(metadata.row_group(group).column(index))
            chunk, position = data[start : start + length], 0
            while position < len(chunk):
                found.append((chunk, position))
                header, position = read_struct(chunk, position, page_scan._PAGE_HEADER)
                position += header[3]
    return found


def _either(read, data: bytes, position: int) -> object:
    try:
        return read(data, position)
    except (IndexError, ValueError) as err:
        return type(err)


def test_page_headers_read_in_one_loop_are_those_read_field_by_field(varied_parquet):
    """Every page header of varied files (dictionary, v1 and v2 data pages, page statistics,
    CRCs, each codec), and each with one byte damaged: the same fields, or the same error."""
    table = pa.table({"f": VALUES, "s": [str(v) for v in VALUES], "l": [[1, None]] * len(VALUES)})
    files = [
        *varied_parquet.values(),
        _parquet(table, data_page_version="2.0", compression="zstd", write_page_checksum=True),
        _parquet(table, use_dictionary=False, compression="gzip", data_page_size=512),
        _parquet(table, column_encoding={"f": "BYTE_STREAM_SPLIT", "s": "PLAIN"}, use_dictionary=False),
    ]
    headers = [found for data in files for found in _page_headers(data)]
    assert len(headers) > 100

    def reference(data: bytes, position: int) -> object:
        return read_struct(data, position, page_scan._PAGE_HEADER)

    for chunk, position in headers:
        # pyarrow's headers all take the one loop, without falling back.
        assert page_scan._usual_page_header(chunk, position) == reference(chunk, position)
        end = reference(chunk, position)[1]
        for at in range(position, end):
            for byte in (0x00, 0x15, 0x1C, 0x26, 0x7F, 0x80, 0xFF):
                damaged = chunk[:at] + bytes([byte]) + chunk[at + 1 : end]
                assert _either(page_scan.read_page_header, damaged, position) == _either(
                    reference, damaged, position
                )
