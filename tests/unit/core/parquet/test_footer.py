"""Footers read from storage: one ranged read of each file's tail, parsed by pyarrow."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.errors import InvalidDataFileError
from airflow_delta_provider.core.parquet.footer import footer_bytes, parse_footer, schema_end
from airflow_delta_provider.core.storage import open_store


def test_footers_are_those_pyarrow_reads_whether_or_not_the_tail_holds_them(tmp_path):
    """A footer inside the tail is taken from it (its offset in the file given); a larger one is
    read again, exactly (no offset: its bytes are not the file's)."""
    narrow = pa.table({"a": [1, 2]})
    wide = pa.table({f"column_{i:03d}": [i] for i in range(80)})
    pq.write_table(narrow, tmp_path / "narrow.parquet")
    pq.write_table(wide, tmp_path / "wide.parquet")
    storage = open_store(str(tmp_path))
    paths = [str(tmp_path / "narrow.parquet"), str(tmp_path / "wide.parquet")]
    footers, offsets = footer_bytes(storage, paths, [None, None], 1, tail_bytes=1024)
    assert offsets[0] == 0 and offsets[1] is None
    for path, footer in zip(paths, footers, strict=True):
        assert parse_footer(storage, path, footer).equals(pq.read_metadata(path))


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"not parquet at all", "PAR1"),
        (b"PAR1" + (10_000).to_bytes(4, "little") + b"PAR1", "exceeds the file"),
    ],
    ids=["no-magic", "footer-longer-than-the-file"],
)
def test_a_file_that_is_not_parquet_is_named(tmp_path, content, reason):
    (tmp_path / "bad.parquet").write_bytes(content)
    storage = open_store(str(tmp_path))
    with pytest.raises(InvalidDataFileError, match=rf"bad\.parquet.*{reason}"):
        footer_bytes(storage, [str(tmp_path / "bad.parquet")], [None], 1)


@pytest.mark.parametrize(
    ("encoded", "expected"),
    [
        (bytes([0x15, 0x02, 0x19, 0x1C, 0x18, 0x01, 0x61, 0x00, 0x16, 0x04]), 8),  # version, schema [{name}]
        (bytes([0x16, 0x04, 0x15, 0x02]), None),  # num_rows first: not the usual order
        (bytes([0x15, 0x02, 0x19, 0x1C, 0x18, 0x09, 0x61]), None),  # a name running past the end
        (bytes([0x15, 0x02, 0x19, 0x1C, 0x0D]), None),  # an unknown type
        (bytes([0x15, 0x02, 0x19, 0xF3, 0xFF, 0xFF, 0xFF, 0xFF, 0x0F, 0x01]), None),  # 2**32 bytes listed
        (bytes([0x15, 0x02, 0x19, 0x17, 0x00]), None),  # a double running past the end
        (b"", None),
    ],
    ids=["usual", "other-order", "truncated", "unknown-type", "huge-list", "short-double", "empty"],
)
def test_schema_bytes_are_found_only_in_a_well_formed_usual_prefix(encoded, expected):
    assert schema_end(encoded, 0) == expected
