"""Deletion vectors: descriptors, their files, and the RoaringBitmapArray they hold.

A deletion vector marks rows of one data file as deleted. The log carries a descriptor
(``storageType``, ``pathOrInlineDv``, ``offset``, ``sizeInBytes``, ``cardinality``); the bitmap
is inline (Z85 text) or in a ``.bin`` file under the table root or at an absolute path. The
formats (PROTOCOL.md, "Deletion Vector Format") are decoded here with numpy, Roaring included,
rather than through a Roaring library; each decoder says its layout.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from airflow_delta_provider.core.errors import DeletionVectorError

__all__ = [
    "PORTABLE_MAGIC_NUMBER",
    "ReadRange",
    "deletion_vector_file",
    "deletion_vector_file_bytes",
    "deletion_vector_path",
    "deletion_vector_unique_id",
    "deserialize_deletion_vector",
    "encode_deletion_vector_file_id",
    "inline_deletion_vector",
    "read_deletion_vector",
    "selection_mask",
    "serialize_deletion_vector",
    "z85_decode",
    "z85_encode",
]

#: Reads ``length`` bytes at ``start`` of a file: ``read_range(path, start, length)``.
#: Must raise ``FileNotFoundError`` for a missing file.
ReadRange = Callable[[str, int, int], bytes]

PORTABLE_MAGIC_NUMBER = 1681511377
NATIVE_MAGIC_NUMBER = 1681511376
DV_FILE_FORMAT_VERSION = 1

_Z85_ALPHABET = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_ENCODE = np.frombuffer(_Z85_ALPHABET, dtype=np.uint8)
_Z85_DECODE = np.full(256, -1, dtype=np.int64)
_Z85_DECODE[_Z85_ENCODE] = np.arange(85)
_Z85_POWERS = np.array([85**4, 85**3, 85**2, 85, 1], dtype=np.uint64)
_ENCODED_UUID_LENGTH = 20

# 32-bit Roaring portable format (https://github.com/RoaringBitmap/RoaringFormatSpec).
_SERIAL_COOKIE_NO_RUNCONTAINER = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4
_ARRAY_CONTAINER_MAX = 4096
_BITMAP_CONTAINER_BYTES = 8192
_MAX_BUCKET_KEY = 2**31 - 1

_U64 = npt.NDArray[np.uint64]
_U32 = npt.NDArray[np.uint32]


# --- Descriptors ------------------------------------------------------------------------


def deletion_vector_unique_id(dv: Mapping[str, Any] | None) -> str | None:
    """The protocol's ``uniqueId`` of a DV descriptor, or None when there is no DV.

    ``<storageType><pathOrInlineDv>``, followed by ``@<offset>`` when an offset is present.
    Together with the file path it is the key of a logical file in log replay.
    """
    if dv is None:
        return None
    unique = f"{dv['storageType']}{dv['pathOrInlineDv']}"
    offset = dv.get("offset")
    return f"{unique}@{offset}" if offset is not None else unique


def deletion_vector_path(dv: Mapping[str, Any], table_root: str) -> str:
    """The file that holds a stored DV.

    ``u``: ``pathOrInlineDv`` is an optional random prefix followed by a 20-character Z85
    UUID; the file is ``<table_root>/<prefix>/deletion_vector_<uuid>.bin`` (no prefix
    directory when the prefix is empty). ``p``: ``pathOrInlineDv`` is already the absolute
    path (a URI, as written in the log). ``i`` has no file.

    :param table_root: the table root (URI or filesystem path) without a trailing slash.
    :raises DeletionVectorError: inline DV, unknown storage type, or malformed UUID.
    """
    storage_type = dv.get("storageType")
    value = dv.get("pathOrInlineDv")
    if not isinstance(value, str):
        raise DeletionVectorError(f"The deletion vector descriptor has no pathOrInlineDv: {dict(dv)!r}")
    if storage_type == "p":
        return value
    if storage_type == "u":
        if len(value) < _ENCODED_UUID_LENGTH:
            raise DeletionVectorError(
                f"The deletion vector pathOrInlineDv {value!r} is shorter than a 20-character Z85 UUID."
            )
        prefix, encoded = value[:-_ENCODED_UUID_LENGTH], value[-_ENCODED_UUID_LENGTH:]
        file_id = uuid.UUID(bytes=z85_decode(encoded))
        parts = [table_root.rstrip("/"), prefix, f"deletion_vector_{file_id}.bin"]
        return "/".join(p for i, p in enumerate(parts) if p or i == 0)
    if storage_type == "i":
        raise DeletionVectorError(f"An inline deletion vector has no file: {dict(dv)!r}")
    raise DeletionVectorError(
        f"Unknown deletion vector storageType {storage_type!r} (expected 'u', 'p' or 'i'): {dict(dv)!r}"
    )


def encode_deletion_vector_file_id(file_id: uuid.UUID, prefix: str = "") -> str:
    """The ``pathOrInlineDv`` of a ``u`` descriptor for ``deletion_vector_<file_id>.bin``."""
    return prefix + z85_encode(file_id.bytes)


def inline_deletion_vector(row_indexes: Iterable[int] | npt.NDArray[np.integer]) -> dict[str, Any]:
    """An inline (``storageType`` ``i``) descriptor holding the given row indexes."""
    rows = _as_row_indexes(row_indexes)
    bitmap = serialize_deletion_vector(rows)
    return {
        "storageType": "i",
        "pathOrInlineDv": z85_encode(bitmap),
        "sizeInBytes": len(bitmap),
        "cardinality": len(rows),
    }


# --- Z85 ----------------------------------------------------------------------------------


def z85_encode(data: bytes) -> str:
    """Encode bytes as Z85 the way Delta does: zero-pad to a multiple of 4 bytes first.

    The result has ``5 * ceil(len(data) / 4)`` characters; a 16-byte UUID gives 20.
    """
    padded = bytes(data) + b"\0" * (-len(data) % 4)
    words = np.frombuffer(padded, dtype=">u4").astype(np.uint64)
    digits = (words[:, None] // _Z85_POWERS[None, :]) % np.uint64(85)
    return _Z85_ENCODE[digits.astype(np.intp)].tobytes().decode("ascii")


def z85_decode(text: str, size: int | None = None) -> bytes:
    """Decode Delta's Z85.

    Delta's variant of ZeroMQ's Base85 zero-pads its input to a multiple of 4 bytes before
    encoding, so decoding needs the real length (``sizeInBytes``).

    The last block may also be in the padded form of the Rust ``z85`` crate, which
    delta-kernel-rs and delta-rs write inline deletion vectors with: ``k`` leading ``#``
    (1 to 3; no standard block starts with ``#``, whose value would exceed 32 bits) and
    ``5 - k`` characters for the last ``4 - k`` bytes.

    :param text: Z85 characters; the length must be a multiple of 5.
    :param size: the real length of the data (``sizeInBytes``); the zero padding the
        encoder added is dropped. Default: return every decoded byte.
    :raises DeletionVectorError: bad length, a character outside the Z85 alphabet, a
        block above 2**32 - 1, or fewer decoded bytes than ``size``.
    """
    try:
        raw = text.encode("ascii")
    except UnicodeEncodeError:
        raise DeletionVectorError(f"Invalid Z85 text (not ASCII): {text!r}") from None
    if len(raw) % 5:
        raise DeletionVectorError(f"Invalid Z85 text of length {len(raw)} (not a multiple of 5): {text!r}")
    codes = _Z85_DECODE[np.frombuffer(raw, dtype=np.uint8)]
    bad = np.flatnonzero(codes < 0)
    if bad.size:
        raise DeletionVectorError(f"Invalid Z85 character {text[int(bad[0])]!r} in {text!r}")
    blocks = codes.reshape(-1, 5).astype(np.uint64)
    tail = _padded_tail(raw[-5:], text) if raw[-5:-4] == b"#" else None
    if tail is not None:
        blocks = blocks[:-1]
    values = (blocks * _Z85_POWERS).sum(axis=1, dtype=np.uint64)
    if values.size and int(values.max()) > 0xFFFFFFFF:
        raise DeletionVectorError(f"Invalid Z85 text (a block exceeds 32 bits): {text!r}")
    decoded: bytes = values.astype(">u4").tobytes() + (tail or b"")
    if size is None:
        return decoded
    if size < 0 or size > len(decoded):
        raise DeletionVectorError(f"Z85 text {text!r} decodes to {len(decoded)} bytes, not {size}.")
    return decoded[:size]


def _padded_tail(block: bytes, text: str) -> bytes:
    """The bytes of a last block in the ``z85`` crate's padded form (``##093`` -> ``03 00``)."""
    hashes = len(block) - len(block.lstrip(b"#"))
    value = 0
    for byte in block[hashes:]:
        value = value * 85 + int(_Z85_DECODE[byte])
    if hashes > 3 or value >= 256 ** (4 - hashes):
        raise DeletionVectorError(f"Invalid Z85 text (a block exceeds 32 bits): {text!r}")
    return value.to_bytes(4 - hashes, "big")


# --- Reading ------------------------------------------------------------------------------


def read_deletion_vector(dv: Mapping[str, Any], table_root: str, read_range: ReadRange) -> _U64:
    """The sorted deleted row indexes of a DV, as a ``uint64`` array.

    Inline DVs are decoded from ``pathOrInlineDv``. Stored DVs are read from
    :func:`deletion_vector_path` at ``offset`` (default 1, the first DV after the version
    byte): the int32 size must equal ``sizeInBytes``, the CRC-32 must match and the file's
    version byte must be 1. The decoded count must equal ``cardinality``.

    :param dv: the descriptor from the log (``add.deletionVector``).
    :param table_root: the table root, joined with ``/`` to ``u`` paths.
    :param read_range: ``read_range(path, start, length)``; raises ``FileNotFoundError``
        for a missing file.
    :raises DeletionVectorError: missing or corrupt file, checksum or cardinality mismatch,
        malformed bitmap. The message names the file.
    """
    size = dv.get("sizeInBytes")
    if size is None or int(size) < 0:
        raise DeletionVectorError(f"The deletion vector descriptor has no valid sizeInBytes: {dict(dv)!r}")
    size = int(size)
    if dv.get("storageType") == "i":
        where = "inline deletion vector"
        data = z85_decode(dv["pathOrInlineDv"], size)
    else:
        path = deletion_vector_path(dv, table_root)
        offset = dv.get("offset")
        where = f"deletion vector file {path}" + (f" (offset {offset})" if offset is not None else "")
        data = _read_stored(path, 1 if offset is None else int(offset), size, read_range, where)
    rows = deserialize_deletion_vector(data, where=where)
    expected = dv.get("cardinality")
    if expected is not None and len(rows) != int(expected):
        raise DeletionVectorError(
            f"The {where} holds {len(rows)} deleted rows, but its descriptor says cardinality {expected}."
        )
    return rows


def _read_stored(path: str, offset: int, size: int, read_range: ReadRange, where: str) -> bytes:
    """The bitmap bytes of one DV in a DV file, with size, checksum and version verified."""
    if offset < 1:
        raise DeletionVectorError(f"Invalid offset {offset} for the {where}: byte 0 is the format version.")
    length = 4 + size + 4
    try:
        if offset == 1:
            raw = read_range(path, 0, 1 + length)
            version, raw = raw[:1], raw[1:]
        else:
            version = read_range(path, 0, 1)
            raw = read_range(path, offset, length)
    except FileNotFoundError:
        raise DeletionVectorError(f"The deletion vector file {path} is missing.") from None
    if version != bytes([DV_FILE_FORMAT_VERSION]):
        found = version[0] if version else "nothing (empty file)"
        raise DeletionVectorError(
            f"The {where} has format version {found}; only version {DV_FILE_FORMAT_VERSION} is known."
        )
    if len(raw) < length:
        raise DeletionVectorError(
            f"The {where} is truncated: {len(raw)} bytes where {length} were expected at offset {offset}."
        )
    (stored_size,) = struct.unpack_from(">i", raw, 0)
    if stored_size != size:
        raise DeletionVectorError(
            f"The {where} stores a DV of {stored_size} bytes, but the descriptor says sizeInBytes {size}."
        )
    data = bytes(raw[4 : 4 + size])
    (checksum,) = struct.unpack_from(">I", raw, 4 + size)
    actual = zlib.crc32(data)
    if actual != checksum:
        raise DeletionVectorError(
            f"The {where} fails its checksum (stored CRC-32 {checksum:#010x}, computed {actual:#010x}): "
            "the file is corrupt."
        )
    return data


def deserialize_deletion_vector(data: bytes, *, where: str = "deletion vector") -> _U64:
    """Decode a serialised RoaringBitmapArray (with its magic number) into sorted row indexes.

    Little endian. Magic ``1681511377``: the 64-bit "portable" Roaring format, ``numBuckets``
    (uint64), then per bucket a uint32 key (the high 32 bits of the row indexes, most significant
    bit 0) and a standard 32-bit Roaring bitmap of the low 32 bits (array, bitmap and run
    containers, with or without the run-container cookie). Magic ``1681511376``: Spark's older
    "native" layout (an int32 count, then per bitmap an int32 size and the bitmap, keys implied by
    position), which Spark still reads.

    :param where: names the source in error messages.
    :raises DeletionVectorError: unknown magic, truncated or malformed bitmap.
    """
    data = bytes(data)
    try:
        if len(data) < 4:
            raise DeletionVectorError(f"The {where} is too short ({len(data)} bytes) for a bitmap array.")
        (magic,) = struct.unpack_from("<i", data, 0)
        if magic == PORTABLE_MAGIC_NUMBER:
            rows, _ = _decode_portable(data, 4, where)
        elif magic == NATIVE_MAGIC_NUMBER:
            rows, _ = _decode_native(data, 4, where)
        else:
            raise DeletionVectorError(
                f"The {where} starts with {data[:4].hex()}, not the RoaringBitmapArray magic number "
                f"{PORTABLE_MAGIC_NUMBER} (little endian)."
            )
    except (struct.error, ValueError) as error:
        raise DeletionVectorError(f"The {where} is truncated or malformed: {error}") from None
    if rows.size > 1 and not bool(np.all(rows[1:] > rows[:-1])):
        raise DeletionVectorError(f"The {where} is malformed: its keys or values are not strictly ascending.")
    return rows


def _decode_portable(data: bytes, position: int, where: str) -> tuple[_U64, int]:
    (buckets,) = struct.unpack_from("<Q", data, position)
    position += 8
    if buckets > (len(data) - position) // 12:  # a bucket takes at least 4 + 8 bytes
        raise DeletionVectorError(f"The {where} claims {buckets} buckets, more than its size allows.")
    parts: list[_U64] = []
    for _ in range(buckets):
        (key,) = struct.unpack_from("<I", data, position)
        if key > _MAX_BUCKET_KEY:
            raise DeletionVectorError(f"The {where} has bucket key {key}; keys must have a 0 high bit.")
        low, position = _decode_roaring32(data, position + 4, where)
        parts.append((np.uint64(key) << np.uint64(32)) | low.astype(np.uint64))
    return _concat64(parts), position


def _decode_native(data: bytes, position: int, where: str) -> tuple[_U64, int]:
    (count,) = struct.unpack_from("<i", data, position)
    position += 4
    if count < 0 or count > (len(data) - position) // 12:
        raise DeletionVectorError(f"The {where} claims {count} bitmaps, which its size does not allow.")
    parts: list[_U64] = []
    for key in range(count):
        (size,) = struct.unpack_from("<i", data, position)
        start = position + 4
        low, end = _decode_roaring32(data, start, where)
        if end - start != size:
            raise DeletionVectorError(f"The {where} has a bitmap of {end - start} bytes that claims {size}.")
        parts.append((np.uint64(key) << np.uint64(32)) | low.astype(np.uint64))
        position = end
    return _concat64(parts), position


def _decode_roaring32(data: bytes, start: int, where: str) -> tuple[_U32, int]:
    """One 32-bit portable Roaring bitmap at ``start``: its values and the end position."""
    position = start
    (cookie,) = struct.unpack_from("<I", data, position)
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        count = (cookie >> 16) + 1
        flag_bytes = (count + 7) // 8
        is_run = np.unpackbits(
            np.frombuffer(data, np.uint8, flag_bytes, position + 4), count=count, bitorder="little"
        ).astype(bool)
        position += 4 + flag_bytes
        has_offsets = count >= _NO_OFFSET_THRESHOLD
    elif cookie == _SERIAL_COOKIE_NO_RUNCONTAINER:
        (count,) = struct.unpack_from("<I", data, position + 4)
        if count > 65536:
            raise DeletionVectorError(f"The {where} has a Roaring bitmap with {count} containers (> 65536).")
        is_run = np.zeros(count, dtype=bool)
        position += 8
        has_offsets = True
    else:
        raise DeletionVectorError(f"The {where} has an invalid Roaring bitmap cookie {cookie}.")
    header = np.frombuffer(data, "<u2", 2 * count, position).reshape(count, 2)
    keys = header[:, 0].astype(np.uint32)
    cardinalities = header[:, 1].astype(np.int64) + 1
    position += 4 * count
    if has_offsets:
        position += 4 * count  # container offsets; containers follow in order, as Java reads them
    values: list[_U32] = []
    for i in range(count):
        cardinality = int(cardinalities[i])
        if is_run[i]:
            low, position = _run_container(data, position, where)
        elif cardinality > _ARRAY_CONTAINER_MAX:
            bits = np.frombuffer(data, np.uint8, _BITMAP_CONTAINER_BYTES, position)
            low = np.flatnonzero(np.unpackbits(bits, bitorder="little")).astype(np.uint32)
            position += _BITMAP_CONTAINER_BYTES
        else:
            low = np.frombuffer(data, "<u2", cardinality, position).astype(np.uint32)
            position += 2 * cardinality
        if len(low) != cardinality:
            raise DeletionVectorError(
                f"The {where} has a Roaring container (key {int(keys[i])}) holding {len(low)} values "
                f"that claims {cardinality}."
            )
        values.append((keys[i] << np.uint32(16)) | low)
    return (np.concatenate(values) if values else np.empty(0, dtype=np.uint32)), position


def _run_container(data: bytes, position: int, where: str) -> tuple[_U32, int]:
    """A run container: uint16 run count, then (start, length - 1) pairs; expanded with numpy."""
    (runs,) = struct.unpack_from("<H", data, position)
    pairs = np.frombuffer(data, "<u2", 2 * runs, position + 2).reshape(runs, 2).astype(np.int64)
    position += 2 + 4 * runs
    starts, lengths = pairs[:, 0], pairs[:, 1] + 1
    if runs and int((starts + lengths).max()) > 65536:
        raise DeletionVectorError(f"The {where} has a Roaring run that extends past its container.")
    total = int(lengths.sum())
    first_of_run = np.repeat(np.cumsum(lengths) - lengths, lengths)
    low = np.repeat(starts, lengths) + (np.arange(total, dtype=np.int64) - first_of_run)
    return low.astype(np.uint32), position


def _concat64(parts: list[_U64]) -> _U64:
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


# --- Writing ------------------------------------------------------------------------------


def serialize_deletion_vector(row_indexes: Iterable[int] | npt.NDArray[np.integer]) -> bytes:
    """The RoaringBitmapArray bytes (magic + portable format) of a set of row indexes.

    Duplicates are dropped and the order is irrelevant. Containers are arrays up to 4096
    values and bitmaps above; no run containers. Only non-empty buckets are written.

    :raises ValueError: a negative row index, or one at or above 2**63 (keys need a 0 high bit).
    """
    rows = np.unique(_as_row_indexes(row_indexes))
    out = bytearray(struct.pack("<iQ", PORTABLE_MAGIC_NUMBER, 0))
    if rows.size == 0:
        return bytes(out)
    highs = (rows >> np.uint64(32)).astype(np.uint32)
    bucket_keys, bucket_starts = np.unique(highs, return_index=True)
    for key, low in zip(bucket_keys, np.split(rows, bucket_starts[1:]), strict=True):
        out += struct.pack("<I", int(key))
        out += _serialize_roaring32((low & np.uint64(0xFFFFFFFF)).astype(np.uint32))
    struct.pack_into("<Q", out, 4, len(bucket_keys))
    return bytes(out)


def _serialize_roaring32(values: _U32) -> bytes:
    """A sorted, duplicate-free uint32 array in the 32-bit portable Roaring format (no runs)."""
    keys = (values >> np.uint32(16)).astype(np.uint16)
    container_keys, container_starts = np.unique(keys, return_index=True)
    bodies: list[bytes] = []
    for low in np.split((values & np.uint32(0xFFFF)).astype("<u2"), container_starts[1:]):
        if len(low) > _ARRAY_CONTAINER_MAX:
            bits = np.zeros(65536, dtype=np.uint8)
            bits[low] = 1
            bodies.append(np.packbits(bits, bitorder="little").tobytes())
        else:
            bodies.append(low.tobytes())
    count = len(bodies)
    header = np.empty((count, 2), dtype="<u2")
    header[:, 0] = container_keys
    header[:, 1] = np.diff(np.append(container_starts, len(values))) - 1
    sizes = np.array([len(b) for b in bodies], dtype=np.int64)
    first = 8 + 8 * count  # cookie, count, descriptive header, offset header
    offsets = (first + np.cumsum(sizes) - sizes).astype("<u4")
    return b"".join(
        [
            struct.pack("<II", _SERIAL_COOKIE_NO_RUNCONTAINER, count),
            header.tobytes(),
            offsets.tobytes(),
            *bodies,
        ]
    )


def deletion_vector_file_bytes(bitmaps: Sequence[bytes]) -> bytes:
    """A DV file holding the given serialised DVs (from :func:`serialize_deletion_vector`).

    Layout: version byte 1, then per DV its size (int32), the bytes and their CRC-32, big
    endian. The first DV is at offset 1 and each next one ``8 + len(previous)`` further;
    the descriptor's ``sizeInBytes`` is ``len(bitmap)``.
    """
    out = bytearray([DV_FILE_FORMAT_VERSION])
    for bitmap in bitmaps:
        out += struct.pack(">i", len(bitmap)) + bytes(bitmap) + struct.pack(">I", zlib.crc32(bitmap))
    return bytes(out)


def deletion_vector_file(bitmap: bytes) -> bytes:
    """A DV file holding one serialised DV (at offset 1): ``deletion_vector_file_bytes([bitmap])``."""
    return deletion_vector_file_bytes([bitmap])


def _as_row_indexes(row_indexes: Iterable[int] | npt.NDArray[np.integer]) -> _U64:
    if isinstance(row_indexes, np.ndarray):
        array = row_indexes.ravel()
    else:
        items = list(row_indexes)
        if any(i < 0 for i in items):
            raise ValueError("Row indexes must not be negative.")
        array = np.array(items, dtype=np.uint64)
    if array.size == 0:
        return np.empty(0, dtype=np.uint64)
    if array.dtype.kind not in "iu":
        raise ValueError(f"Row indexes must be integers, not {array.dtype}.")
    if array.dtype.kind == "i" and int(array.min()) < 0:
        raise ValueError("Row indexes must not be negative.")
    rows = array.astype(np.uint64)
    if int(rows.max()) >> 32 > _MAX_BUCKET_KEY:
        raise ValueError(f"Row index {int(rows.max())} is too large for a deletion vector (>= 2**63).")
    return rows


# --- Applying -----------------------------------------------------------------------------


def selection_mask(num_rows: int, deleted: npt.NDArray[np.integer]) -> pa.BooleanArray:
    """A mask for ``Table.filter``: True for the rows a DV keeps, False for deleted ones.

    Indexes at or beyond ``num_rows`` are ignored, as Spark and delta-kernel-rs do.

    :param num_rows: the number of rows in the data file.
    :param deleted: the deleted row indexes (from :func:`read_deletion_vector`).
    :raises DeletionVectorError: a negative row index.
    """
    keep = np.ones(num_rows, dtype=bool)
    deleted = np.asarray(deleted)
    if deleted.size:
        if deleted.dtype.kind == "i" and int(deleted.min()) < 0:
            raise DeletionVectorError("A deletion vector holds a negative row index.")
        deleted = deleted[deleted < num_rows]
        keep[deleted.astype(np.intp)] = False
    return pa.array(keep, type=pa.bool_())
