from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_delta_provider.core.deletion_vectors import (
    deletion_vector_file,
    deletion_vector_path,
    deletion_vector_unique_id,
    read_deletion_vector,
    selection_mask,
    serialize_deletion_vector,
    z85_decode,
    z85_encode,
)
from airflow_delta_provider.core.errors import DeletionVectorError


def _reader(files: dict[str, bytes]):
    def read_range(path: str, start: int, length: int) -> bytes:
        if path not in files:
            raise FileNotFoundError(path)
        return files[path][start : start + length]

    return read_range


@given(st.binary(max_size=64).map(lambda b: b + b"\0" * (-len(b) % 4)))
def test_z85_round_trip(data):
    assert z85_decode(z85_encode(data)) == data


def test_unique_id():
    dv = {"storageType": "u", "pathOrInlineDv": "abc", "sizeInBytes": 1, "cardinality": 1}
    assert deletion_vector_unique_id(dv) == "uabc"
    assert deletion_vector_unique_id({**dv, "offset": 7}) == "uabc@7"
    assert deletion_vector_unique_id(None) is None


@pytest.mark.parametrize(
    "rows",
    [[0], [2, 79], list(range(5000)), [1, 70_000, 2**32 + 5], list(range(0, 200_000, 3))],
)
def test_stored_deletion_vector_round_trip(rows):
    bitmap = serialize_deletion_vector(rows)
    encoded = z85_encode(b"\x12" * 16)
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "ab" + encoded,
        "offset": 1,
        "sizeInBytes": len(bitmap),
        "cardinality": len(rows),
    }
    path = deletion_vector_path(dv, "/t")
    assert path.startswith("/t/ab/deletion_vector_12121212-")
    got = read_deletion_vector(dv, "/t", _reader({path: deletion_vector_file(bitmap)}))
    assert got.tolist() == sorted(rows)


def test_inline_deletion_vector():
    bitmap = serialize_deletion_vector([3, 4])
    dv = {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(bitmap),
        "sizeInBytes": len(bitmap),
        "cardinality": 2,
    }
    assert read_deletion_vector(dv, "/t", _reader({})).tolist() == [3, 4]


def test_run_containers_decode():
    import struct

    # One bucket; a 32-bit roaring bitmap with one run container [10, 14].
    body = (
        struct.pack("<I", 12347 | (0 << 16))
        + bytes([1])
        + struct.pack("<HH", 0, 4)
        + struct.pack("<HHH", 1, 10, 4)
    )
    bitmap = struct.pack("<iq", 1681511377, 1) + struct.pack("<I", 0) + body
    dv = {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(bitmap),
        "sizeInBytes": len(bitmap),
        "cardinality": 5,
    }
    assert read_deletion_vector(dv, "/t", _reader({})).tolist() == [10, 11, 12, 13, 14]


def test_corrupt_checksum_missing_file_and_wrong_cardinality():
    bitmap = serialize_deletion_vector([1, 2])
    dv = {
        "storageType": "p",
        "pathOrInlineDv": "/t/dv.bin",
        "offset": 1,
        "sizeInBytes": len(bitmap),
        "cardinality": 2,
    }
    good = deletion_vector_file(bitmap)
    bad = good[:-1] + bytes([good[-1] ^ 1])
    with pytest.raises(DeletionVectorError, match="checksum"):
        read_deletion_vector(dv, "/t", _reader({"/t/dv.bin": bad}))
    with pytest.raises(DeletionVectorError, match="missing"):
        read_deletion_vector(dv, "/t", _reader({}))
    with pytest.raises(DeletionVectorError, match="cardinality 3"):
        read_deletion_vector({**dv, "cardinality": 3}, "/t", _reader({"/t/dv.bin": good}))


def test_selection_mask():
    assert selection_mask(5, np.array([1, 3, 9], dtype=np.uint64)).to_pylist() == [
        True,
        False,
        True,
        False,
        True,
    ]
