"""Deletion vectors: descriptors, their files, and the RoaringBitmapArray they hold.

A deletion vector (DV) marks rows of one data file as deleted. The log carries a
descriptor (``storageType``, ``pathOrInlineDv``, ``offset``, ``sizeInBytes``,
``cardinality``); the bitmap itself is inline (Z85 text) or in a ``.bin`` file under
the table root. Decoding follows PROTOCOL.md "Deletion Vector Format": a 64-bit
RoaringBitmapArray in the portable serialisation, row indexes as ``uint64``.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.errors import DeletionVectorError

_Z85_CHARS = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_DECODE = {c: i for i, c in enumerate(_Z85_CHARS)}
_RBA_MAGIC = 1681511377
_SERIAL_COOKIE_NO_RUN = 12346
_SERIAL_COOKIE = 12347
_NO_OFFSET_THRESHOLD = 4

ReadRange = Callable[[str, int, int], bytes]


def deletion_vector_unique_id(dv: Mapping[str, Any] | None) -> str | None:
    """The protocol's unique id of a DV: ``storageType + pathOrInlineDv`` (``@offset`` if any)."""
    if dv is None:
        return None
    unique = f"{dv['storageType']}{dv['pathOrInlineDv']}"
    offset = dv.get("offset")
    return f"{unique}@{offset}" if offset is not None else unique


def z85_decode(text: str) -> bytes:
    """Decode Z85 (as Delta writes it; the input length is a multiple of 5)."""
    data = text.encode("ascii")
    if len(data) % 5:
        raise DeletionVectorError(f"Invalid Z85 text of length {len(data)} (not a multiple of 5): {text!r}")
    out = bytearray()
    for start in range(0, len(data), 5):
        value = 0
        for char in data[start : start + 5]:
            try:
                value = value * 85 + _Z85_DECODE[char]
            except KeyError:
                raise DeletionVectorError(f"Invalid Z85 character {chr(char)!r} in {text!r}") from None
        out += value.to_bytes(4, "big")
    return bytes(out)


def z85_encode(data: bytes) -> str:
    """Encode bytes as Z85, zero-padding to a multiple of 4 bytes as Delta does."""
    padded = data + b"\0" * (-len(data) % 4)
    chars = bytearray()
    for start in range(0, len(padded), 4):
        value = int.from_bytes(padded[start : start + 4], "big")
        block = bytearray()
        for _ in range(5):
            value, digit = divmod(value, 85)
            block.append(_Z85_CHARS[digit])
        chars += block[::-1]
    return chars.decode("ascii")


def deletion_vector_path(dv: Mapping[str, Any], table_root: str) -> str:
    """The file that holds a stored DV: ``u`` relative to the table root, ``p`` absolute."""
    storage_type = dv["storageType"]
    value = dv["pathOrInlineDv"]
    if storage_type == "p":
        return value
    if storage_type == "u":
        prefix, encoded = value[:-20], value[-20:]
        file_id = uuid.UUID(bytes=z85_decode(encoded)[:16])
        name = f"deletion_vector_{file_id}.bin"
        return "/".join(p for p in (table_root.rstrip("/"), prefix, name) if p)
    raise DeletionVectorError(f"A deletion vector of storage type {storage_type!r} has no file: {dict(dv)!r}")


def read_deletion_vector(dv: Mapping[str, Any], table_root: str, read_range: ReadRange) -> np.ndarray:
    """The sorted deleted row indexes of a DV, as ``uint64``.

    :param dv: the descriptor from the log.
    :param table_root: the table root path (filesystem form) for ``u`` DVs.
    :param read_range: reads ``length`` bytes at ``start`` of a file.
    :raises DeletionVectorError: the DV file is missing, its checksum or cardinality is wrong.
    """
    if dv["storageType"] == "i":
        data = z85_decode(dv["pathOrInlineDv"])[: dv["sizeInBytes"]]
        where = "inline deletion vector"
    else:
        path = deletion_vector_path(dv, table_root)
        offset = dv.get("offset") or 1
        size = int(dv["sizeInBytes"])
        try:
            raw = read_range(path, offset, size + 8)
        except FileNotFoundError:
            raise DeletionVectorError(f"The deletion vector file {path} is missing.") from None
        if len(raw) < size + 8:
            raise DeletionVectorError(f"The deletion vector file {path} is truncated at offset {offset}.")
        (stored_size,) = struct.unpack(">i", raw[:4])
        data = raw[4 : 4 + size]
        (checksum,) = struct.unpack(">I", raw[4 + size : 8 + size])
        if stored_size != size or zlib.crc32(data) != checksum:
            raise DeletionVectorError(
                f"The deletion vector at offset {offset} of {path} fails its checksum: the file is corrupt."
            )
        where = path
    rows = _decode_bitmap_array(data, where)
    expected = dv.get("cardinality")
    if expected is not None and len(rows) != int(expected):
        raise DeletionVectorError(
            f"The {where} holds {len(rows)} rows, but its descriptor says cardinality {expected}."
        )
    return rows


def _decode_bitmap_array(data: bytes, where: str) -> np.ndarray:
    try:
        (magic,) = struct.unpack_from("<i", data, 0)
        if magic != _RBA_MAGIC:
            raise DeletionVectorError(f"The {where} does not start with the RoaringBitmapArray magic number.")
        (buckets,) = struct.unpack_from("<q", data, 4)
        position = 12
        parts = []
        for _ in range(buckets):
            (high,) = struct.unpack_from("<I", data, position)
            low, position = _decode_roaring32(data, position + 4)
            parts.append((np.uint64(high) << np.uint64(32)) | low.astype(np.uint64))
    except struct.error:
        raise DeletionVectorError(f"The {where} is truncated.") from None
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def _decode_roaring32(data: bytes, position: int) -> tuple[np.ndarray, int]:
    """One 32-bit portable Roaring bitmap at ``position``; returns values and the end position."""
    (cookie,) = struct.unpack_from("<I", data, position)
    if cookie & 0xFFFF == _SERIAL_COOKIE:
        count = (cookie >> 16) + 1
        run_bytes = (count + 7) // 8
        run_flags = np.unpackbits(np.frombuffer(data, np.uint8, run_bytes, position + 4), bitorder="little")
        position += 4 + run_bytes
    elif cookie == _SERIAL_COOKIE_NO_RUN:
        (count,) = struct.unpack_from("<I", data, position + 4)
        run_flags = np.zeros(count, dtype=np.uint8)
        position += 8
    else:
        raise DeletionVectorError("Invalid Roaring bitmap cookie in a deletion vector.")
    header = np.frombuffer(data, "<u2", 2 * count, position).reshape(count, 2)
    keys, cardinalities = header[:, 0].astype(np.uint32), header[:, 1].astype(np.int64) + 1
    position += 4 * count
    has_offsets = cookie == _SERIAL_COOKIE_NO_RUN or count >= _NO_OFFSET_THRESHOLD
    if has_offsets:
        position += 4 * count  # container offsets: containers follow in order anyway
    values = []
    for i in range(count):
        base = keys[i] << np.uint32(16)
        if run_flags[i]:
            (runs,) = struct.unpack_from("<H", data, position)
            pairs = np.frombuffer(data, "<u2", 2 * runs, position + 2).reshape(runs, 2).astype(np.uint32)
            position += 2 + 4 * runs
            low = np.concatenate([np.arange(s, s + n + 1, dtype=np.uint32) for s, n in pairs]) if runs else []
        elif cardinalities[i] > 4096:
            bits = np.unpackbits(np.frombuffer(data, np.uint8, 8192, position), bitorder="little")
            low = np.flatnonzero(bits).astype(np.uint32)
            position += 8192
        else:
            low = np.frombuffer(data, "<u2", int(cardinalities[i]), position).astype(np.uint32)
            position += 2 * int(cardinalities[i])
        values.append(base | np.asarray(low, dtype=np.uint32))
    return (np.concatenate(values) if values else np.empty(0, np.uint32)), position


def serialize_deletion_vector(row_indexes: np.ndarray | list[int]) -> bytes:
    """A RoaringBitmapArray (portable, no run containers) of the given row indexes."""
    rows = np.unique(np.asarray(row_indexes, dtype=np.uint64))
    out = bytearray(struct.pack("<iq", _RBA_MAGIC, 0))
    highs = (rows >> np.uint64(32)).astype(np.uint32)
    buckets = 0
    for high in np.unique(highs):
        low = (rows[highs == high] & np.uint64(0xFFFFFFFF)).astype(np.uint32)
        out += struct.pack("<I", int(high)) + _serialize_roaring32(low)
        buckets += 1
    struct.pack_into("<q", out, 4, buckets)
    return bytes(out)


def _serialize_roaring32(values: np.ndarray) -> bytes:
    keys = (values >> np.uint32(16)).astype(np.uint16)
    unique_keys = np.unique(keys)
    containers = []
    for key in unique_keys:
        low = (values[keys == key] & np.uint32(0xFFFF)).astype("<u2")
        if len(low) > 4096:
            bits = np.zeros(65536, dtype=np.uint8)
            bits[low] = 1
            containers.append((int(key), len(low), np.packbits(bits, bitorder="little").tobytes()))
        else:
            containers.append((int(key), len(low), low.tobytes()))
    out = bytearray(struct.pack("<II", _SERIAL_COOKIE_NO_RUN, len(containers)))
    for key, cardinality, _ in containers:
        out += struct.pack("<HH", key, cardinality - 1)
    offset = len(out) + 4 * len(containers)
    for _, _, body in containers:
        out += struct.pack("<I", offset)
        offset += len(body)
    for _, _, body in containers:
        out += body
    return bytes(out)


def deletion_vector_file(bitmap: bytes) -> bytes:
    """A one-DV ``.bin`` file: version byte 1, then size, bitmap and CRC-32 (big-endian)."""
    return b"\x01" + struct.pack(">i", len(bitmap)) + bitmap + struct.pack(">I", zlib.crc32(bitmap))


def selection_mask(num_rows: int, deleted: np.ndarray) -> pa.BooleanArray:
    """True for the rows a DV keeps, for ``Table.filter``."""
    keep = np.ones(num_rows, dtype=bool)
    deleted = deleted[deleted < num_rows]
    keep[deleted.astype(np.int64)] = False
    return pa.array(keep)
