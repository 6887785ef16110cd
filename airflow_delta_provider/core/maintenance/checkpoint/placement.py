"""Which part of a multi-part checkpoint each action goes to: Spark's hash partitioning.

Two writers of the same multi-part checkpoint must write the same parts (the protocol asks
it), so rows are placed as Spark's ``repartition(parts, keys...)`` places them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

__all__ = ["spark_partition_ids"]

_C1, _C2 = np.uint32(0xCC9E2D51), np.uint32(0x1B873593)


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k1(k1: np.ndarray) -> np.ndarray:
    return _rotl(k1 * _C1, 15) * _C2


def _mix_h1(h1: np.ndarray, k1: np.ndarray) -> np.ndarray:
    return _rotl(h1 ^ k1, 13) * np.uint32(5) + np.uint32(0xE6546B64)


def _spark_murmur3(strings: pa.Array, seeds: np.ndarray) -> np.ndarray:
    """Spark's ``Murmur3Hash`` of each string (``Murmur3_x86_32.hashUnsafeBytes``) with per-row seeds.

    Spark hashes whole 4-byte little-endian words, then each remaining byte on its own as a
    sign-extended int (not the reference tail handling); a null leaves the seed unchanged.
    """
    strings = strings.cast(pa.large_binary())
    count = len(strings)
    offsets = np.frombuffer(strings.buffers()[1], dtype=np.int64)[strings.offset : strings.offset + count + 1]
    data_buffer = strings.buffers()[2]
    data = np.frombuffer(data_buffer, dtype=np.uint8) if data_buffer is not None else np.zeros(0, np.uint8)
    padded = np.concatenate([data, np.zeros(4, np.uint8)])
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    aligned = lengths - lengths % 4
    h1 = seeds.astype(np.uint32).copy()
    with np.errstate(over="ignore"):
        for word in range(int(aligned.max() // 4) if count else 0):
            rows = np.flatnonzero(aligned > 4 * word)
            at = starts[rows] + 4 * word
            k1 = (
                padded[at].astype(np.uint32)
                | (padded[at + 1].astype(np.uint32) << np.uint32(8))
                | (padded[at + 2].astype(np.uint32) << np.uint32(16))
                | (padded[at + 3].astype(np.uint32) << np.uint32(24))
            )
            h1[rows] = _mix_h1(h1[rows], _mix_k1(k1))
        for tail in range(3):
            rows = np.flatnonzero(lengths % 4 > tail)
            k1 = (
                padded[starts[rows] + aligned[rows] + tail].astype(np.int8).astype(np.int32).astype(np.uint32)
            )
            h1[rows] = _mix_h1(h1[rows], _mix_k1(k1))
        # fmix
        h1 ^= lengths.astype(np.uint32)
        h1 ^= h1 >> np.uint32(16)
        h1 *= np.uint32(0x85EBCA6B)
        h1 ^= h1 >> np.uint32(13)
        h1 *= np.uint32(0xC2B2AE35)
        h1 ^= h1 >> np.uint32(16)
    valid = np.asarray(strings.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return np.where(valid, h1, seeds.astype(np.uint32)).view(np.int32)


def spark_partition_ids(keys: list[pa.Array], num_parts: int) -> np.ndarray:
    """0-based partition of each row under Spark's ``repartition(num_parts, keys...)``.

    ``pmod(Murmur3Hash(keys, seed=42), num_parts)``, the hash chaining through the key
    columns (each column's hash is the seed of the next; a null keeps the seed).

    :param keys: string arrays of equal length (the partitioning columns, in order).
    :param num_parts: the number of partitions.
    """
    if num_parts < 1:
        raise ValueError(f"num_parts must be at least 1, got {num_parts}.")
    hashes = np.full(len(keys[0]) if keys else 0, 42, dtype=np.int32)
    for key in keys:
        hashes = _spark_murmur3(key, hashes)
    return np.mod(hashes.astype(np.int64), num_parts)
