"""The one private pyarrow API the core uses (``core/parquet/pyarrow_compat.py``), pinned: the native
footer reader gives the public reader's ``FileMetaData``, and a corrupt footer is an exception."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.parquet import pyarrow_compat
from airflow_delta_provider.core.parquet.pyarrow_compat import read_footer_metadata


def footer_of(table: pa.Table) -> bytes:
    """The tail of a Parquet file: footer, its length and ``PAR1``, as the stats reader reads it."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    data = sink.getvalue().to_pybytes()
    length = int.from_bytes(data[-8:-4], "little")
    return b"PAR1" + data[-8 - length :]


def test_the_native_reader_is_there_and_reads_what_the_public_reader_reads():
    assert pyarrow_compat._Reader is not None  # the fast path is in use with this pyarrow
    footer = footer_of(pa.table({"id": pa.array([3, 1, 2], pa.int64()), "s": ["b", None, "a"]}))
    native = read_footer_metadata(footer)
    public = pq.read_metadata(pa.BufferReader(footer))
    assert native.equals(public)
    assert (native.num_rows, native.schema.to_arrow_schema().names) == (3, ["id", "s"])
    stats = native.row_group(0).column(0).statistics
    assert (stats.min, stats.max, stats.null_count) == (1, 3, 0)


@pytest.mark.parametrize(
    "footer",
    [b"PAR1" + b"\x00" * 16 + (16).to_bytes(4, "little") + b"PAR1", b"PAR1", b"not parquet at all"],
)
def test_a_corrupt_footer_raises(footer):
    with pytest.raises((OSError, pa.ArrowException, ValueError)):
        read_footer_metadata(footer)
