"""Deletion vectors: Z85, descriptors, DV files and the RoaringBitmapArray format.

The real-table tests decode every deletion vector logged by Spark, delta-rs and
delta-kernel-rs in the conformance corpus and compare the live ones with the oracle.
The Roaring containers the corpus does not exercise (run and bitmap containers, the
run-container cookie, the native layout) are built byte by byte here, from the
RoaringFormatSpec, independently of the module's own writer.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import uuid
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from airflow_delta_provider.core.errors import DeletionVectorError
from airflow_delta_provider.core.log.deletion_vectors import (
    PORTABLE_MAGIC_NUMBER,
    deletion_vector_file,
    deletion_vector_file_bytes,
    deletion_vector_path,
    deletion_vector_unique_id,
    deserialize_deletion_vector,
    encode_deletion_vector_file_id,
    inline_deletion_vector,
    read_deletion_vector,
    selection_mask,
    serialize_deletion_vector,
    z85_decode,
    z85_encode,
)

CORPUS = Path(
    os.environ.get("DELTA_CONFORMANCE_DIR", Path(__file__).resolve().parents[3] / "conformance" / "corpus")
)
NATIVE_MAGIC_NUMBER = 1681511376


def read_local(path: str, start: int, length: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(start)
        return f.read(length)


def in_memory(files: dict[str, bytes]):
    def read_range(path: str, start: int, length: int) -> bytes:
        if path not in files:
            raise FileNotFoundError(path)
        return files[path][start : start + length]

    return read_range


# --- hand-built Roaring bitmaps (RoaringFormatSpec), independent of the module ----------------


def roaring32(containers: list[tuple[int, str, Any]], *, run_cookie: bool | None = None) -> bytes:
    """A 32-bit portable Roaring bitmap of ``(key, kind, payload)`` containers, in key order.

    ``array``: payload is the sorted low values; ``bitmap``: the low values, written as
    1024 little-endian uint64 words; ``run``: ``(start, length)`` pairs.
    """
    count = len(containers)
    with_runs = any(kind == "run" for _, kind, _ in containers) if run_cookie is None else run_cookie
    bodies, cardinalities = [], []
    for _, kind, payload in containers:
        if kind == "array":
            bodies.append(struct.pack(f"<{len(payload)}H", *payload))
            cardinalities.append(len(payload))
        elif kind == "bitmap":
            words = [0] * 1024
            for value in payload:
                words[value // 64] |= 1 << (value % 64)
            bodies.append(struct.pack("<1024Q", *words))
            cardinalities.append(len(payload))
        else:
            pairs = b"".join(struct.pack("<HH", start, length - 1) for start, length in payload)
            bodies.append(struct.pack("<H", len(payload)) + pairs)
            cardinalities.append(sum(length for _, length in payload))
    if with_runs:
        out = bytearray(struct.pack("<I", 12347 | ((count - 1) << 16)))
        flags = bytearray((count + 7) // 8)
        for i, (_, kind, _) in enumerate(containers):
            if kind == "run":
                flags[i // 8] |= 1 << (i % 8)
        out += flags
    else:
        out = bytearray(struct.pack("<II", 12346, count))
    for (key, _, _), cardinality in zip(containers, cardinalities, strict=True):
        out += struct.pack("<HH", key, cardinality - 1)
    if not with_runs or count >= 4:
        offset = len(out) + 4 * count
        for body in bodies:
            out += struct.pack("<I", offset)
            offset += len(body)
    return bytes(out) + b"".join(bodies)


def portable(buckets: list[tuple[int, bytes]]) -> bytes:
    """A RoaringBitmapArray: magic, uint64 bucket count, then (uint32 key, 32-bit bitmap) pairs."""
    body = b"".join(struct.pack("<I", key) + bitmap for key, bitmap in buckets)
    return struct.pack("<iQ", PORTABLE_MAGIC_NUMBER, len(buckets)) + body


def expected_values(key: int, containers: list[tuple[int, str, Any]]) -> list[int]:
    out = []
    for high, kind, payload in containers:
        lows = [v for s, n in payload for v in range(s, s + n)] if kind == "run" else sorted(payload)
        out += [(key << 32) | (high << 16) | low for low in lows]
    return out


# --- descriptors -----------------------------------------------------------------------------


def test_unique_id_with_and_without_offset():
    dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "sizeInBytes": 40, "cardinality": 6}
    assert deletion_vector_unique_id(dv) == "uab^-aqEH.-t@S}K{vb[*k^"
    assert deletion_vector_unique_id({**dv, "offset": 4}) == "uab^-aqEH.-t@S}K{vb[*k^@4"
    assert deletion_vector_unique_id({**dv, "offset": None}) == "uab^-aqEH.-t@S}K{vb[*k^"
    assert deletion_vector_unique_id({**dv, "offset": 1, "maxRowIndex": None}) == "uab^-aqEH.-t@S}K{vb[*k^@1"
    inline = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000", "sizeInBytes": 8, "cardinality": 1}
    assert deletion_vector_unique_id(inline) == "iwi5b=000010000"
    assert deletion_vector_unique_id(None) is None


def test_paths_of_the_protocol_examples():
    relative = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": 4}
    assert (
        deletion_vector_path(relative, "s3://mytable")
        == "s3://mytable/ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    )
    absolute = {
        "storageType": "p",
        "pathOrInlineDv": "s3://mytable/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin",
    }
    assert deletion_vector_path(absolute, "s3://elsewhere") == absolute["pathOrInlineDv"]


def test_path_without_prefix_and_file_id_encoding():
    file_id = uuid.UUID("61d16c75-6994-46b7-a15b-8b538852e50e")
    encoded = encode_deletion_vector_file_id(file_id)
    assert len(encoded) == 20
    dv = {"storageType": "u", "pathOrInlineDv": encoded}
    assert deletion_vector_path(dv, "/data/t") == f"/data/t/deletion_vector_{file_id}.bin"
    with_prefix = {"storageType": "u", "pathOrInlineDv": encode_deletion_vector_file_id(file_id, "x7q")}
    assert deletion_vector_path(with_prefix, "/data/t") == f"/data/t/x7q/deletion_vector_{file_id}.bin"


@pytest.mark.parametrize(
    ("dv", "message"),
    [
        ({"storageType": "i", "pathOrInlineDv": "00000"}, "inline deletion vector has no file"),
        ({"storageType": "x", "pathOrInlineDv": "00000"}, "Unknown deletion vector storageType 'x'"),
        ({"storageType": "u", "pathOrInlineDv": "short"}, "shorter than a 20-character"),
        ({"storageType": "u", "pathOrInlineDv": "ab" + "~" * 20}, "Invalid Z85 character"),
    ],
)
def test_path_refusals(dv, message):
    with pytest.raises(DeletionVectorError, match=message):
        deletion_vector_path(dv, "/t")


# --- Z85 -------------------------------------------------------------------------------------


@given(st.binary(max_size=200))
def test_z85_round_trip(data):
    encoded = z85_encode(data)
    assert len(encoded) == 5 * -(-len(data) // 4)
    assert z85_decode(encoded, len(data)) == data
    if len(data) % 4 == 0:
        assert z85_decode(encoded) == data
    else:  # Delta zero-pads unaligned input to whole 4-byte blocks
        assert z85_decode(encoded) == data + b"\0" * (-len(data) % 4)


@given(
    st.text(alphabet="0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#")
)
def test_z85_decode_encode_round_trip_on_valid_text(text):
    text = text[: len(text) // 5 * 5]
    try:
        data = z85_decode(text)
    except DeletionVectorError as error:
        assert "exceeds 32 bits" in str(error)
    else:
        padded_tail = text[-5:-4] == "#"  # the z85 crate's form of a last partial block
        assert (_crate_form(data) if padded_tail else z85_encode(data)) == text


def _crate_form(data: bytes) -> str:
    """``data`` as the Rust z85 crate encodes it: whole blocks, then a last partial block as
    Z85 of its bytes right-aligned in 4, its leading characters replaced by ``#``."""
    whole, rest = len(data) // 4 * 4, len(data) % 4
    if not rest:
        return z85_encode(data)
    tail = z85_encode(data[whole:].rjust(4, b"\0"))
    return z85_encode(data[:whole]) + "#" * (4 - rest) + tail[4 - rest :]


def test_z85_padded_last_block_of_the_rust_z85_crate():
    # The inline DV of version 5 of delta-kernel-rs' cdf-table-with-dv fixture: 34 bytes, its
    # last 2 in the z85 crate's padded form ("##" + 3 characters), which delta-kernel-rs and
    # delta-rs read as row 3.
    dv = {
        "storageType": "i",
        "pathOrInlineDv": "^Bg9^0rr910000000000iXQKl0rr91000005c8Xg##093",
        "sizeInBytes": 34,
        "cardinality": 1,
    }
    assert read_deletion_vector(dv, "/unused", in_memory({})).tolist() == [3]
    for data in (b"\x01", b"\x01\x02", b"\x01\x02\x03", b"abcd\xff\xfe\xfd"):
        assert z85_decode(_crate_form(data)) == data


def test_z85_known_vectors():
    # The ZeroMQ RFC 32 test vector, and the protocol's example UUID.
    assert z85_encode(bytes.fromhex("864FD26FB559F75B")) == "HelloWorld"
    assert z85_decode("HelloWorld") == bytes.fromhex("864FD26FB559F75B")
    file_id = uuid.UUID("d2c639aa-8816-431a-aaf6-d3fe2512ff61")
    assert z85_encode(file_id.bytes) == "^-aqEH.-t@S}K{vb[*k^"


@pytest.mark.parametrize(
    ("text", "size", "message"),
    [
        ("Hello", 5, "decodes to 4 bytes, not 5"),
        ("Hell", None, "not a multiple of 5"),
        ("Hell~", None, "Invalid Z85 character '~'"),
        ("Hellé", None, "not ASCII"),
        ("#####", None, "exceeds 32 bits"),
        ("###%%", None, "exceeds 32 bits"),
        ("#####Hello", None, "exceeds 32 bits"),
    ],
)
def test_z85_refusals(text, size, message):
    with pytest.raises(DeletionVectorError, match=message):
        z85_decode(text, size)


# --- the Roaring format ------------------------------------------------------------------------


def test_run_container_without_offsets():
    # One container, so the run cookie carries no offset header.
    containers = [(0, "run", [(10, 5)])]
    data = portable([(0, roaring32(containers))])
    assert deserialize_deletion_vector(data).tolist() == [10, 11, 12, 13, 14]


def test_run_array_and_bitmap_containers_with_offsets():
    # Five containers with the run cookie: offsets are present (count >= 4).
    bitmap_values = list(range(0, 65536, 9))  # 7282 values: a bitmap container
    containers = [
        (0, "run", [(0, 3), (100, 2), (65530, 6)]),
        (1, "array", [5, 7, 65535]),
        (2, "bitmap", bitmap_values),
        (3, "run", [(0, 65536)]),  # a full container: cardinality - 1 = 65535
        (7, "run", [(4000, 1)]),
    ]
    data = portable([(0, roaring32(containers)), (5, roaring32([(1, "run", [(2, 2)])]))])
    rows = deserialize_deletion_vector(data)
    assert rows.dtype == np.uint64
    assert rows.tolist() == [*expected_values(0, containers), (5 << 32) | (1 << 16) | 2, (5 << 32) | 65539]


def test_run_cookie_with_no_run_container_and_few_containers():
    containers = [(0, "array", [1, 2]), (4, "array", [3])]
    data = portable([(0, roaring32(containers, run_cookie=True))])
    assert deserialize_deletion_vector(data).tolist() == [1, 2, (4 << 16) | 3]


def test_bitmap_container_by_hand_without_run_cookie():
    values = list(range(3, 65536, 5))
    data = portable([(0, roaring32([(9, "bitmap", values)]))])
    assert deserialize_deletion_vector(data).tolist() == [(9 << 16) | v for v in values]
    full = portable([(0, roaring32([(0, "bitmap", list(range(65536)))]))])
    assert deserialize_deletion_vector(full).tolist() == list(range(65536))


def test_empty_buckets_as_spark_writes_them():
    # Spark writes a bitmap for every key from 0 up, so rows only in bucket 1 leave bucket 0 empty.
    empty = struct.pack("<II", 12346, 0)
    data = portable([(0, empty), (1, roaring32([(0, "array", [42])]))])
    assert deserialize_deletion_vector(data).tolist() == [(1 << 32) | 42]
    assert deserialize_deletion_vector(portable([])).tolist() == []


def test_native_layout():
    # Spark's older layout: int32 count, then per bitmap its int32 size; keys are positions.
    first, second = roaring32([(0, "array", [1, 5])]), roaring32([(2, "run", [(7, 3)])])
    data = struct.pack("<ii", NATIVE_MAGIC_NUMBER, 2)
    data += struct.pack("<i", len(first)) + first + struct.pack("<i", len(second)) + second
    expected = [1, 5] + [(1 << 32) | (2 << 16) | v for v in (7, 8, 9)]
    assert deserialize_deletion_vector(data).tolist() == expected


@st.composite
def container_sets(draw):
    """Random sorted containers of random kinds, with the values they hold."""
    keys = sorted(draw(st.sets(st.integers(0, 65535), min_size=1, max_size=6)))
    containers = []
    for key in keys:
        if draw(st.booleans()):
            lows = sorted(draw(st.sets(st.integers(0, 65535), min_size=1, max_size=300)))
        else:
            start = draw(st.integers(0, 65535 - 4097))
            lows = list(range(start, start + draw(st.integers(4097, 6000)), draw(st.integers(1, 2))))
            lows = [v for v in lows if v < 65536]
        if draw(st.booleans()):
            runs = []
            for v in lows:
                if runs and runs[-1][0] + runs[-1][1] == v:
                    runs[-1] = (runs[-1][0], runs[-1][1] + 1)
                else:
                    runs.append((v, 1))
            containers.append((key, "run", runs))
        else:
            containers.append((key, "array" if len(lows) <= 4096 else "bitmap", lows))
    return containers


@given(container_sets(), st.integers(0, 2**31 - 1))
def test_hand_built_bitmaps_decode(containers, bucket):
    data = portable([(bucket, roaring32(containers))])
    assert deserialize_deletion_vector(data).tolist() == expected_values(bucket, containers)


@given(st.sets(st.integers(0, 2**63 - 1), max_size=200) | st.sets(st.integers(0, 300_000), max_size=20_000))
def test_serialize_round_trip(rows):
    data = serialize_deletion_vector(rows)
    assert deserialize_deletion_vector(data).tolist() == sorted(rows)
    assert read_deletion_vector(inline_deletion_vector(rows), "/unused", in_memory({})).tolist() == sorted(
        rows
    )


def test_serialize_uses_bitmap_containers_above_4096_values():
    dense = np.arange(0, 65536, 3, dtype=np.uint64) + np.uint64(5 << 32)  # 21846 values, one container
    data = serialize_deletion_vector(dense)
    # magic + count + key + cookie + count + header + offset + one 8 KiB bitmap container
    assert len(data) == 4 + 8 + 4 + 8 + 4 + 4 + 8192
    assert np.array_equal(deserialize_deletion_vector(data), dense)
    assert len(serialize_deletion_vector(range(4097))) == 4 + 8 + 4 + 8 + 4 + 4 + 8192
    assert len(serialize_deletion_vector(range(4096))) == 4 + 8 + 4 + 8 + 4 + 4 + 2 * 4096
    assert deserialize_deletion_vector(serialize_deletion_vector(range(4096))).tolist() == list(range(4096))


def test_serialize_accepts_iterables_arrays_and_duplicates():
    assert deserialize_deletion_vector(serialize_deletion_vector(iter([5, 1, 5, 3]))).tolist() == [1, 3, 5]
    rows = deserialize_deletion_vector(serialize_deletion_vector(np.array([9, 2], dtype=np.int32)))
    assert rows.tolist() == [2, 9]
    assert deserialize_deletion_vector(serialize_deletion_vector([])).tolist() == []


@pytest.mark.parametrize("rows", [[-1], np.array([3, -2]), [2**63], np.array([0.5])])
def test_serialize_refuses_impossible_row_indexes(rows):
    with pytest.raises(ValueError):
        serialize_deletion_vector(rows)


def _corrupt_bitmaps() -> list[tuple[str, bytes, str]]:
    good = roaring32([(0, "array", [1, 2])])
    bitmap_claims_more = bytearray(roaring32([(0, "bitmap", list(range(5000)))]))
    struct.pack_into("<H", bitmap_claims_more, 10, 5000)  # header cardinality - 1 = 5000, popcount 5000
    return [
        ("bad magic", struct.pack("<iQ", 12345, 0), "not the RoaringBitmapArray magic"),
        ("too short", b"\x01", "too short"),
        ("truncated", portable([(0, good)])[:-1], "truncated or malformed"),
        ("bucket count", struct.pack("<iQ", PORTABLE_MAGIC_NUMBER, 10**9), "claims 1000000000 buckets"),
        ("high key bit", portable([(2**31, good)]), "0 high bit"),
        ("bad cookie", portable([(0, struct.pack("<II", 999, 0))]), "invalid Roaring bitmap cookie 999"),
        ("unsorted array", portable([(0, roaring32([(0, "array", [2, 1])]))]), "not strictly ascending"),
        ("unsorted keys", portable([(0, roaring32([(3, "array", [1]), (1, "array", [1])]))]), "ascending"),
        ("unsorted buckets", portable([(1, good), (0, good)]), "not strictly ascending"),
        ("run overflow", portable([(0, roaring32([(0, "run", [(65535, 2)])]))]), "extends past"),
        ("bitmap count", portable([(0, bytes(bitmap_claims_more))]), "holding 5000 values that claims 5001"),
    ]


@pytest.mark.parametrize(
    ("data", "message"), [c[1:] for c in _corrupt_bitmaps()], ids=[c[0] for c in _corrupt_bitmaps()]
)
def test_malformed_bitmaps_are_refused(data, message):
    with pytest.raises(DeletionVectorError, match=message):
        deserialize_deletion_vector(data, where="test bitmap")


# --- inline deletion vectors -------------------------------------------------------------------


def test_inline_deletion_vector_of_delta_kernel():
    # delta-kernel-rs's inline example (the portable layout): rows 3, 4, 7, 11, 18, 29.
    dv = {
        "storageType": "i",
        "pathOrInlineDv": "^Bg9^0rr910000000000iXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
        "sizeInBytes": 44,
        "cardinality": 6,
    }
    assert read_deletion_vector(dv, "/unused", in_memory({})).tolist() == [3, 4, 7, 11, 18, 29]
    assert inline_deletion_vector([3, 4, 7, 11, 18, 29]) == dv


def test_inline_example_of_the_protocol_is_byte_swapped():
    # PROTOCOL.md "JSON Example 3" decodes to 64 39 d3 d0 ...: the native magic and header
    # written big endian, which the little-endian format (and Spark's reader) do not accept.
    dv = {
        "storageType": "i",
        "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
        "sizeInBytes": 40,
        "cardinality": 6,
    }
    assert z85_decode(dv["pathOrInlineDv"])[:4] == struct.pack(">i", NATIVE_MAGIC_NUMBER)
    with pytest.raises(DeletionVectorError, match="inline deletion vector starts with 6439d3d0"):
        read_deletion_vector(dv, "/unused", in_memory({}))


def test_inline_size_and_cardinality_are_checked():
    dv = inline_deletion_vector([1, 2, 3])
    with pytest.raises(DeletionVectorError, match="not 64"):
        read_deletion_vector({**dv, "sizeInBytes": 64}, "/unused", in_memory({}))
    with pytest.raises(
        DeletionVectorError, match="holds 3 deleted rows, but its descriptor says cardinality 4"
    ):
        read_deletion_vector({**dv, "cardinality": 4}, "/unused", in_memory({}))


# --- DV files ----------------------------------------------------------------------------------


def test_files_with_several_deletion_vectors_round_trip(tmp_path):
    row_sets = [[0], list(range(0, 20_000, 2)), [7, 2**32 + 1, 2**40], list(range(70_000, 75_000))]
    bitmaps = [serialize_deletion_vector(rows) for rows in row_sets]
    file_id = uuid.uuid4()
    (tmp_path / "q1").mkdir()
    dv_file = tmp_path / "q1" / f"deletion_vector_{file_id}.bin"
    dv_file.write_bytes(deletion_vector_file_bytes(bitmaps))
    offset = 1
    for rows, bitmap in zip(row_sets, bitmaps, strict=True):
        relative = {
            "storageType": "u",
            "pathOrInlineDv": encode_deletion_vector_file_id(file_id, "q1"),
            "offset": offset,
            "sizeInBytes": len(bitmap),
            "cardinality": len(rows),
        }
        assert read_deletion_vector(relative, str(tmp_path), read_local).tolist() == rows
        absolute = {**relative, "storageType": "p", "pathOrInlineDv": str(dv_file)}
        assert read_deletion_vector(absolute, "/elsewhere", read_local).tolist() == rows
        offset += 4 + len(bitmap) + 4
    assert offset == dv_file.stat().st_size


def test_missing_offset_means_the_first_deletion_vector():
    bitmap = serialize_deletion_vector([4, 8])
    dv = {"storageType": "p", "pathOrInlineDv": "/t/dv.bin", "sizeInBytes": len(bitmap), "cardinality": 2}
    assert deletion_vector_file(bitmap) == deletion_vector_file_bytes([bitmap])
    assert read_deletion_vector(
        dv, "/t", in_memory({"/t/dv.bin": deletion_vector_file(bitmap)})
    ).tolist() == [
        4,
        8,
    ]


@pytest.fixture
def small_table(tmp_path) -> tuple[str, dict[str, Any], Path]:
    """A copy of table-with-dv-small's DV file, and the descriptor that points into it."""
    source = CORPUS / "tables" / "delta-kernel-rs" / "table-with-dv-small"
    if not source.is_dir():
        pytest.fail(f"The conformance corpus is missing: {CORPUS} (set DELTA_CONFORMANCE_DIR).")
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "vBn[lx{q8@P<9BNH/isA",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    }
    name = "deletion_vector_61d16c75-6994-46b7-a15b-8b538852e50e.bin"
    shutil.copy(source / name, tmp_path / name)
    assert read_deletion_vector(dv, str(tmp_path), read_local).tolist() == [0, 9]
    return str(tmp_path), dv, tmp_path / name


@pytest.mark.parametrize(("where", "name"), [(10, "bitmap"), (-1, "checksum")])
def test_corrupt_checksum(small_table, where, name):
    root, dv, dv_file = small_table
    data = bytearray(dv_file.read_bytes())
    data[where] ^= 0x10
    dv_file.write_bytes(bytes(data))
    with pytest.raises(DeletionVectorError, match="fails its checksum") as raised:
        read_deletion_vector(dv, root, read_local)
    assert str(dv_file) in str(raised.value)


def test_missing_file(small_table):
    root, dv, dv_file = small_table
    dv_file.unlink()
    with pytest.raises(DeletionVectorError, match="is missing") as raised:
        read_deletion_vector(dv, root, read_local)
    assert str(dv_file) in str(raised.value)


def test_wrong_version_size_and_truncation(small_table):
    root, dv, dv_file = small_table
    good = dv_file.read_bytes()
    with pytest.raises(DeletionVectorError, match="says sizeInBytes 35"):
        read_deletion_vector({**dv, "sizeInBytes": 35}, root, read_local)
    with pytest.raises(DeletionVectorError, match="says cardinality 3"):
        read_deletion_vector({**dv, "cardinality": 3}, root, read_local)
    with pytest.raises(DeletionVectorError, match="Invalid offset 0"):
        read_deletion_vector({**dv, "offset": 0}, root, read_local)
    dv_file.write_bytes(b"\x02" + good[1:])
    with pytest.raises(DeletionVectorError, match="format version 2"):
        read_deletion_vector(dv, root, read_local)
    dv_file.write_bytes(good[:-2])
    with pytest.raises(DeletionVectorError, match="is truncated"):
        read_deletion_vector(dv, root, read_local)
    dv_file.write_bytes(b"")
    with pytest.raises(DeletionVectorError, match="nothing"):
        read_deletion_vector(dv, root, read_local)


def test_a_valid_checksum_over_bad_bitmap_data(small_table):
    root, dv, dv_file = small_table
    bitmap = struct.pack("<iQ", 12345, 0) + b"\0" * 24
    dv_file.write_bytes(b"\x01" + struct.pack(">i", 36) + bitmap + struct.pack(">I", zlib.crc32(bitmap)))
    with pytest.raises(DeletionVectorError, match=f"deletion vector file {dv_file} .offset 1. starts with"):
        read_deletion_vector(dv, root, read_local)


# --- selection masks ---------------------------------------------------------------------------


def test_selection_mask():
    mask = selection_mask(5, np.array([1, 3], dtype=np.uint64))
    assert isinstance(mask, pa.BooleanArray)
    assert mask.to_pylist() == [True, False, True, False, True]
    assert selection_mask(3, np.empty(0, dtype=np.uint64)).to_pylist() == [True, True, True]
    assert selection_mask(0, np.empty(0, dtype=np.uint64)).to_pylist() == []
    # Indexes past the end of the file are ignored, as Spark and delta-kernel-rs do.
    assert selection_mask(3, np.array([2, 9], dtype=np.uint64)).to_pylist() == [True, True, False]
    with pytest.raises(DeletionVectorError, match="negative"):
        selection_mask(3, np.array([-1]))


def test_selection_mask_is_vectorised_for_large_files():
    deleted = np.arange(0, 2_000_000, 7, dtype=np.uint64)
    mask = selection_mask(2_000_000, deleted)
    assert len(mask) == 2_000_000
    assert mask.false_count == len(deleted)
    assert not mask[7].as_py() and mask[8].as_py()


# --- the real tables ---------------------------------------------------------------------------


def _dv_tables() -> list[dict[str, Any]]:
    manifest = CORPUS / "MANIFEST.json"
    if not manifest.is_file():
        return []
    tables = []
    for entry in json.loads(manifest.read_text()):
        files = (entry.get("expect") or {}).get("files")
        if files and json.loads((CORPUS / files).read_text()).get("deletion_vectors"):
            tables.append(entry)
    return tables


DV_TABLES = _dv_tables()


def _logged_deletion_vectors(log: Path) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(log file, action, data path, descriptor) of every add and remove with a DV in any log
    file: commits, compacted commits, JSON and parquet checkpoints, sidecars."""
    found = []
    for file in sorted(log.rglob("*")):
        if file.name.startswith(".") or not file.is_file():
            continue
        actions: list[dict[str, Any]] = []
        if file.suffix == ".json":
            actions = [json.loads(line) for line in file.read_text().splitlines() if line.strip()]
        elif file.suffix == ".parquet":
            table = pq.read_table(file)
            for kind in ("add", "remove"):
                if kind in table.column_names:
                    actions += [{kind: row} for row in table.column(kind).to_pylist() if row]
        for action in actions:
            for kind in ("add", "remove"):
                body = action.get(kind)
                if body and body.get("deletionVector"):
                    found.append((file.name, kind, body["path"], body["deletionVector"]))
    return found


def _live_files(log: Path, version: int) -> dict[str, dict[str, Any] | None]:
    """The live files at ``version`` and their DVs, replaying every commit by (path, DV id)."""
    live: dict[tuple[str, str | None], dict[str, Any] | None] = {}
    for v in range(version + 1):
        for line in (log / f"{v:020d}.json").read_text().splitlines():
            action = json.loads(line) if line.strip() else {}
            for kind in ("add", "remove"):
                if kind in action:
                    dv = action[kind].get("deletionVector")
                    key = (action[kind]["path"], deletion_vector_unique_id(dv))
                    if kind == "add":
                        live[key] = dv
                    else:
                        live.pop(key, None)
    paths = [path for path, _ in live]
    assert len(paths) == len(set(paths)), "a path is live twice"
    return {path: dv for (path, _), dv in live.items()}


def test_the_corpus_has_deletion_vector_tables():
    if not CORPUS.is_dir():
        pytest.fail(f"The conformance corpus is missing: {CORPUS} (set DELTA_CONFORMANCE_DIR).")
    assert len(DV_TABLES) >= 7


@pytest.mark.parametrize("entry", DV_TABLES, ids=[e["name"] for e in DV_TABLES])
def test_every_logged_deletion_vector_decodes(entry):
    root = CORPUS / "tables" / entry["table_root"]
    logged = _logged_deletion_vectors(root / "_delta_log")
    assert logged
    for log_file, kind, path, dv in logged:
        rows = read_deletion_vector(dv, str(root), read_local)  # checks checksum and cardinality
        assert len(rows) == dv["cardinality"], (log_file, kind, path)
        assert rows.dtype == np.uint64
        assert np.all(np.diff(rows.astype(np.int64)) > 0)
    if entry["has_checkpoint"]:
        assert any(f.endswith(".parquet") for f, *_ in logged), "no DV came from a checkpoint"


@pytest.mark.parametrize("entry", DV_TABLES, ids=[e["name"] for e in DV_TABLES])
def test_live_deletion_vectors_match_the_oracle(entry):
    root = CORPUS / "tables" / entry["table_root"]
    oracle = json.loads((CORPUS / entry["expect"]["files"]).read_text())["deletion_vectors"]
    live = _live_files(root / "_delta_log", entry["expect"]["version"])
    assert {path for path, dv in live.items() if dv is not None} == set(oracle)
    for path, expected in oracle.items():
        dv = live[path]
        assert dv is not None
        rows = read_deletion_vector(dv, str(root), read_local)
        assert rows.tolist() == expected["deleted_row_indexes"], path
        assert dv["cardinality"] == expected["num_deleted"] == len(rows)


@pytest.mark.parametrize("entry", DV_TABLES, ids=[e["name"] for e in DV_TABLES])
def test_selection_masks_give_the_table_row_count(entry):
    root = CORPUS / "tables" / entry["table_root"]
    live = _live_files(root / "_delta_log", entry["expect"]["version"])
    kept = 0
    for path, dv in live.items():
        num_rows = pq.ParquetFile(root / path).metadata.num_rows
        if dv is None:
            kept += num_rows
        else:
            mask = selection_mask(num_rows, read_deletion_vector(dv, str(root), read_local))
            assert mask.false_count == dv["cardinality"]
            kept += mask.true_count
    assert kept == entry["expect"]["num_rows"]


def test_real_files_hold_several_deletion_vectors():
    # compacted-log-files-table has DV files with two DVs, the second at offset 43.
    root = CORPUS / "tables" / "delta-kernel-rs" / "compacted-log-files-table"
    offsets = {dv.get("offset") for *_, dv in _logged_deletion_vectors(root / "_delta_log")}
    assert offsets == {1, 43}
