"""Thrift's compact protocol read as pyarrow reads the same footers."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.parquet.thrift import T_STRUCT, read_struct, skip_compact


def _footer(table: pa.Table, **options) -> tuple[bytes, pq.FileMetaData]:
    sink = io.BytesIO()
    pq.write_table(table, sink, **options)
    data = sink.getvalue()
    length = int.from_bytes(data[-8:-4], "little")
    return data[-8 - length : -8], pq.read_metadata(pa.BufferReader(data))


def test_a_footer_reads_as_pyarrow_reads_it():
    footer, metadata = _footer(
        pa.table({"id": pa.array(range(100), pa.int64()), "s": ["x"] * 100}), row_group_size=30
    )
    meta, end = read_struct(footer, 0)
    assert end == len(footer)
    assert meta[3] == metadata.num_rows  # FileMetaData.num_rows
    assert len(meta[4]) == metadata.num_row_groups  # row_groups
    assert [group[3] for group in meta[4]] == [metadata.row_group(g).num_rows for g in range(4)]
    assert [element[4].decode() for element in meta[2][1:]] == ["id", "s"]  # schema names
    assert skip_compact(footer, 0, T_STRUCT, 0) == len(footer)


def test_a_spec_keeps_only_the_fields_asked_for():
    footer, metadata = _footer(pa.table({"id": [1, 2, 3]}))
    meta, end = read_struct(footer, 0, {3: None, 4: {3: None}})
    assert end == len(footer)
    assert set(meta) == {3, 4}
    assert meta[4] == [{3: metadata.row_group(0).num_rows}]


@pytest.mark.parametrize("cut", [1, 5, 20])
def test_a_truncated_footer_is_an_error_not_a_wrong_answer(cut):
    footer, _ = _footer(pa.table({"id": [1, 2, 3]}))
    with pytest.raises((IndexError, ValueError)):
        skip_compact(footer[:-cut], 0, T_STRUCT, 0)
