"""Checkpoints: the state of one table version in Parquet, so that readers skip the log replay.

What is written follows Delta (Spark's ``Checkpoints.scala``) and the protocol:

- **Classic** (``NNN.checkpoint.parquet``, V1 spec): protocol, metadata, the live ``add``
  actions, the unexpired ``remove`` tombstones (without ``stats``/``tags``), the unexpired
  ``txn`` actions and the live ``domainMetadata``. ``add.stats`` is kept as JSON unless
  ``delta.checkpoint.writeStatsAsJson`` is false; ``add.stats_parsed`` and
  ``add.partitionValues_parsed`` are added when ``delta.checkpoint.writeStatsAsStruct`` is
  true (keyed by physical column names under column mapping, as the protocol says).
  ``dataChange`` is false on every file action, as in the state Spark checkpoints.
- **Multi-part** (``NNN.checkpoint.PPPPPPPPPP.NNNNNNNNNN.parquet``): on request, or when the
  actions exceed ``part_size``, for tables without ``v2Checkpoint``. Rows go to parts by
  Spark's hash partitioning of the file's ``path`` (``(path, dvId)`` when the table supports
  deletion vectors): ``pmod(murmur3(key, seed 42), parts)``, so that two writers of the same
  checkpoint write the same parts, as the protocol requires.
- **V2** (tables with the ``v2Checkpoint`` feature): a classic-named V2 checkpoint (with a
  ``checkpointMetadata`` action) when the file actions fit in one part; above that, a
  UUID-named top-level file holding the non-file actions, a ``checkpointMetadata`` action and
  one ``sidecar`` action per file in ``_delta_log/_sidecars/`` (50,000 actions each by
  default, Spark's default).

Crash safety: each checkpoint file is written whole with one atomic put of its final name
(local: a synced temp file renamed over it; S3: one PUT), so no name ever holds a truncated
file; ``_last_checkpoint`` is written only after every file of the checkpoint exists. A
crash in between leaves an unreferenced (complete) checkpoint, orphan sidecars, or an
incomplete multi-part set, which readers ignore. ``_last_checkpoint`` never moves back to
an older version while the checkpoint it names exists; a dangling hint (its checkpoint
missing or incomplete) is replaced.

Checkpoints write no commit (Delta has no ``CHECKPOINT`` operation).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import time
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from airflow_delta_provider.core.arguments import check_positive_int
from airflow_delta_provider.core.deletion_vectors import deletion_vector_unique_id
from airflow_delta_provider.core.errors import (
    CorruptLogError,
    InvalidTablePropertyError,
)
from airflow_delta_provider.core.features import (
    Operation,
    check_supported,
    reader_features,
    writer_features,
)
from airflow_delta_provider.core.logfiles import (
    LAST_CHECKPOINT,
    SIDECAR_DIR,
    checksum_name,
    classic_checkpoint_name,
    multipart_checkpoint_name,
)
from airflow_delta_provider.core.redaction import get_logger
from airflow_delta_provider.core.replay import (
    ADD_SCHEMA,
    REMOVE_SCHEMA,
    SmallState,
    replay_files,
    replay_small_state,
)
from airflow_delta_provider.core.segment import hinted_checkpoint_exists, read_last_checkpoint
from airflow_delta_provider.core.table_config import TableConfig

if TYPE_CHECKING:
    from airflow_delta_provider.core.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)

__all__ = [
    "CheckpointOptions",
    "CheckpointResult",
    "InvalidTablePropertyError",
    "canonical_json",
    "last_checkpoint_checksum",
    "should_checkpoint",
    "spark_partition_ids",
    "write_checkpoint",
]


#: Actions per part above which a classic checkpoint is split into a multi-part one. Spark
#: only splits when ``spark.databricks.delta.checkpoint.partSize`` is set; multi-part
#: checkpoints are deprecated, so the core splits only tables too big for one file.
CLASSIC_PART_SIZE = 10_000_000
#: File actions per sidecar of a V2 checkpoint (Spark's default partSize for V2).
SIDECAR_PART_SIZE = 50_000
#: Tables with at least this many files get INFO progress logs for each step.
PROGRESS_THRESHOLD = 100_000
#: Rows per Parquet row group of the file actions.
ROW_GROUP_SIZE = 262_144

_STRING_MAP = pa.map_(pa.string(), pa.string())
_STRING_LIST = pa.list_(pa.field("element", pa.string()))

#: The non-file action columns, in Spark's order and with Spark's types.
TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", _STRING_LIST),
        ("configuration", _STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", _STRING_LIST),
        ("writerFeatures", _STRING_LIST),
    ]
)
DOMAIN_METADATA_TYPE = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", _STRING_MAP)])
SIDECAR_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("sizeInBytes", pa.int64()),
        ("modificationTime", pa.int64()),
        ("tags", _STRING_MAP),
    ]
)

#: ``add`` fields in Spark's checkpoint order (``stats`` after the others, then the parsed ones).
_ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
)
_REMOVE_FIELDS = tuple(REMOVE_SCHEMA.names)


@dataclass(frozen=True)
class CheckpointResult:
    """What :func:`write_checkpoint` wrote.

    :param version: the table version the checkpoint holds.
    :param kind: ``"classic"``, ``"multipart"`` or ``"v2"``.
    :param files: the files written, relative to ``_delta_log`` (sidecars as ``_sidecars/<name>``).
    :param num_actions: the actions in the checkpoint (``_last_checkpoint.size``).
    :param num_add_files: the live files (``add`` actions) in it.
    :param size_in_bytes: the bytes of every file of the checkpoint.
    :param last_checkpoint_written: False when ``_last_checkpoint`` already named a newer version
        and was left alone.
    """

    version: int
    kind: str
    files: list[str]
    num_actions: int
    num_add_files: int
    size_in_bytes: int
    last_checkpoint_written: bool

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict (for XCom)."""
        return asdict(self)


# --- policy ------------------------------------------------------------------------------


def should_checkpoint(version: int, config: TableConfig | Mapping[str, str | None] | None) -> bool:
    """Whether Delta's automatic policy checkpoints after committing ``version``.

    Spark (``TransactionHelper``): ``version != 0 and version % delta.checkpointInterval == 0``.
    (delta-rs checkpoints when ``(version + 1) % interval == 0`` with a default of 100; the
    core follows Delta.)

    :param version: the version just committed.
    :param config: the table's configuration (or its properties).
    :raises InvalidTablePropertyError: ``delta.checkpointInterval`` is not a positive integer.
    :raises ValueError: ``version`` is not a non-negative integer.
    """
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"version must be a non-negative integer, got {version!r}.")
    if not isinstance(config, TableConfig):
        config = TableConfig(config)
    return version != 0 and version % config.checkpoint_interval.value == 0


# --- _last_checkpoint checksum -----------------------------------------------------------


def _encode(text: str) -> str:
    # PROTOCOL.md "How to URL encode keys and string values": every octet but
    # a-z A-Z 0-9 - . _ ~ is percent-encoded, hex in upper case.
    return '"' + quote(text, safe="-._~") + '"'


def _canonical_leaf(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _encode(value)
    if isinstance(value, int | float):
        return json.dumps(value)
    raise TypeError(f"Cannot canonicalise {value!r} ({type(value).__name__}) as JSON.")


def _canonical_pairs(value: Any, path: list[str], out: list[tuple[str, str]]) -> None:
    if isinstance(value, Mapping):
        for key, child in value.items():
            _canonical_pairs(child, [*path, _encode(str(key))], out)
    elif isinstance(value, list | tuple):
        for index, child in enumerate(value):
            _canonical_pairs(child, [*path, str(index)], out)
    else:
        out.append(("+".join(path), _canonical_leaf(value)))


def canonical_json(payload: Mapping[str, Any]) -> str:
    """The canonical form of a ``_last_checkpoint`` JSON (PROTOCOL.md "JSON checksum").

    Leaves become ``path=value`` pairs (names URL-encoded and quoted, array positions as
    numbers, joined by ``+``), sorted by the UTF-8 bytes of the path and joined by ``,``; the
    top-level ``checksum`` key is left out.
    """
    pairs: list[tuple[str, str]] = []
    for key, value in payload.items():
        if key != "checksum":
            _canonical_pairs(value, [_encode(str(key))], pairs)
    pairs.sort(key=lambda pair: pair[0].encode("utf-8"))
    return ",".join(f"{path}={value}" for path, value in pairs)


def last_checkpoint_checksum(payload: Mapping[str, Any]) -> str:
    """The MD5 ``checksum`` of a ``_last_checkpoint`` JSON, as Delta computes and validates it."""
    return hashlib.md5(canonical_json(payload).encode("utf-8"), usedforsecurity=False).hexdigest()


# --- Spark's hash partitioning -------------------------------------------------------------

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


# --- the checkpoint -----------------------------------------------------------------------


@dataclass
class _State:
    """The state to checkpoint, as Arrow."""

    small: SmallState
    adds: pa.Table  # ADD_SCHEMA
    removes: pa.Table  # REMOVE_SCHEMA


@dataclass(frozen=True)
class CheckpointOptions:
    """Every option of a checkpoint (``DeltaTable.checkpoint``).

    :param parts: the number of files to spread the file actions over: for classic tables a
        multi-part checkpoint when > 1, for ``v2Checkpoint`` tables sidecars when > 1; 1 forces
        a single file. None: decided by ``part_size``.
    :param part_size: actions per part when ``parts`` is None (default: 10,000,000 for classic
        tables, 50,000 per sidecar for V2 ones).
    :param now_ms: the clock (ms since the epoch) against which tombstone and ``txn`` retention
        is measured; default now.
    """

    parts: int | None = None
    part_size: int | None = None
    now_ms: int | None = None

    def __post_init__(self) -> None:
        check_positive_int("parts", self.parts)
        check_positive_int("part_size", self.part_size)


def write_checkpoint(snapshot: Snapshot, options: CheckpointOptions | None = None) -> CheckpointResult:
    """Write a checkpoint of ``snapshot``'s version and then ``_last_checkpoint``.

    :param snapshot: the version to checkpoint (loaded: protocol and metadata checked readable).
    :param options: parts, part size and clock.
    :raises UnsupportedFeatureError: the table needs a feature the core cannot checkpoint.
    :raises CorruptLogError: the log (or the version checksum) contradicts itself.
    """
    options = options or CheckpointOptions()
    parts = options.parts
    started = time.perf_counter()
    now = options.now_ms if options.now_ms is not None else int(time.time() * 1000)
    storage = snapshot.storage
    check_supported(snapshot.protocol, snapshot.metadata, Operation.CHECKPOINT)
    version = snapshot.version
    segment = snapshot.segment
    commits = snapshot.commits
    small = replay_small_state(storage, segment, commits, now_ms=now)
    files = replay_files(storage, segment, commits, small, tombstones=True, now_ms=now)
    state = _State(small=small, adds=files.adds, removes=files.removes)
    log.log(
        _progress_level(state),
        "Checkpoint of %s at version %d: replayed %d files, %d tombstones, %d txns in %.2f s.",
        storage.root_uri,
        version,
        state.adds.num_rows,
        state.removes.num_rows,
        len(small.transactions),
        time.perf_counter() - started,
    )
    _validate_against_checksum(storage, version, state)

    add_column = _add_column(state, TableConfig(small.metadata.configuration))
    remove_column = _remove_column(state)
    file_actions = state.adds.num_rows + state.removes.num_rows
    v2 = "v2Checkpoint" in writer_features(small.protocol)
    if parts is None:
        size = options.part_size or (SIDECAR_PART_SIZE if v2 else CLASSIC_PART_SIZE)
        parts = max(1, math.ceil(file_actions / size))
    if v2:
        written = _write_v2(storage, version, state, add_column, remove_column, parts)
    elif parts > 1:
        written = _write_multipart(storage, version, state, add_column, remove_column, parts)
    else:
        written = _write_classic(storage, version, state, add_column, remove_column)
    kind, names, num_actions, size_in_bytes = written

    last = {
        "version": version,
        "size": num_actions,
        **({"parts": len(names)} if kind == "multipart" else {}),
        "sizeInBytes": size_in_bytes,
        "numOfAddFiles": state.adds.num_rows,
    }
    last["checksum"] = last_checkpoint_checksum(last)
    hint = read_last_checkpoint(storage)
    if hint is not None and hint.version > version and not hinted_checkpoint_exists(storage, hint):
        # Never moving the hint back applies to a hint that names a checkpoint: a dangling one
        # (its checkpoint missing or incomplete) makes other readers fail, so it is replaced.
        log.warning(
            "%s names version %d, whose checkpoint is missing or incomplete; replacing it with this "
            "checkpoint (version %d).",
            storage.to_uri(storage.log_path(LAST_CHECKPOINT)),
            hint.version,
            version,
        )
        hint = None
    if hint is not None and hint.version > version:
        log.info(
            "Not updating %s: it names version %d, newer than this checkpoint (%d).",
            LAST_CHECKPOINT,
            hint.version,
            version,
        )
        last_written = False
    else:
        storage.put(storage.log_path(LAST_CHECKPOINT), json.dumps(last, separators=(",", ":")).encode())
        last_written = True
    log.log(
        _progress_level(state),
        "Wrote the %s checkpoint of %s at version %d (%d actions, %d files, %d bytes) in %.2f s.",
        kind,
        storage.root_uri,
        version,
        num_actions,
        len(names),
        size_in_bytes,
        time.perf_counter() - started,
    )
    return CheckpointResult(
        version=version,
        kind=kind,
        files=names,
        num_actions=num_actions,
        num_add_files=state.adds.num_rows,
        size_in_bytes=size_in_bytes,
        last_checkpoint_written=last_written,
    )


def _progress_level(state: _State) -> int:
    """INFO for the steps of large checkpoints (they take seconds to minutes), DEBUG otherwise."""
    return logging.INFO if state.adds.num_rows >= PROGRESS_THRESHOLD else logging.DEBUG


def _validate_against_checksum(storage: LogStore, version: int, state: _State) -> None:
    """Refuse to checkpoint a state that contradicts the version's ``.crc``, as Spark does.

    Spark validates the snapshot against its checksum before writing a checkpoint and treats
    a mismatch as state corruption; an unreadable checksum file is ignored (it is optional).
    """
    path = storage.log_path(checksum_name(version))
    try:
        checksum = json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        return
    except ValueError:
        log.warning("Ignoring the unreadable version checksum %s.", storage.to_uri(path))
        return
    if not isinstance(checksum, dict):
        return
    expected_files = checksum.get("numFiles")
    expected_bytes = checksum.get("tableSizeBytes")
    actual_files = state.adds.num_rows
    actual_bytes = int(pc.sum(state.adds.column("size")).as_py() or 0)
    if (isinstance(expected_files, int) and expected_files != actual_files) or (
        isinstance(expected_bytes, int) and expected_bytes != actual_bytes
    ):
        uri = storage.to_uri(path)
        raise CorruptLogError(
            f"The state of version {version} does not match its checksum {uri}: the log replays to "
            f"{actual_files} files / {actual_bytes} bytes, the checksum says {expected_files} files / "
            f"{expected_bytes} bytes. Refusing to write a checkpoint of a state that may be corrupt; "
            f"check the log (a commit may have been altered or lost).",
            path=uri,
        )


# --- columns ------------------------------------------------------------------------------


def _add_column(state: _State, config: TableConfig) -> pa.ChunkedArray:
    """The checkpoint's ``add`` column over all live files, built chunk by chunk without copying."""
    adds = state.adds
    count = adds.num_rows
    fields: list[pa.Field] = []
    columns: list[pa.ChunkedArray | pa.Array] = []
    for name in _ADD_FIELDS:
        fields.append(ADD_SCHEMA.field(name).with_nullable(True))
        # Spark's state (and so its checkpoint) has dataChange=false on every file.
        columns.append(pa.array(np.zeros(count, dtype=bool)) if name == "dataChange" else adds.column(name))
    if config.checkpoint_stats_as_json:
        fields.append(pa.field("stats", pa.string()))
        columns.append(adds.column("stats"))
    if config.checkpoint_stats_as_struct:
        physical, partition_fields = _physical_fields(state)
        if partition_fields:
            from airflow_delta_provider.core.partitions import partition_columns_from_map

            parsed = partition_columns_from_map(
                adds.column("partitionValues"), pa.schema([f.with_nullable(True) for f in partition_fields])
            )
            fields.append(pa.field("partitionValues_parsed", parsed.type))
            columns.append(parsed)
        partition_names = {f.name for f in partition_fields}
        data_fields = [f for f in physical if f.name not in partition_names]
        dv_support = "deletionVectors" in writer_features(state.small.protocol)
        stats_type = _stats_type(data_fields, tight_bounds=dv_support)
        fields.append(pa.field("stats_parsed", stats_type))
        columns.append(_parse_stats(adds.column("stats"), stats_type))
    return _struct_column(columns, fields)


def _remove_column(state: _State) -> pa.ChunkedArray:
    """The checkpoint's ``remove`` column over all unexpired tombstones (no stats, no tags)."""
    removes = state.removes
    fields = [f.with_nullable(True) for f in REMOVE_SCHEMA]
    columns = [
        pa.array(np.zeros(removes.num_rows, dtype=bool)) if f.name == "dataChange" else removes.column(f.name)
        for f in fields
    ]
    return _struct_column(columns, fields)


def _struct_column(columns: list[pa.ChunkedArray | pa.Array], fields: list[pa.Field]) -> pa.ChunkedArray:
    """A struct column from row-aligned children whose chunking may differ (zero-copy slices)."""
    aligned = pa.table(columns, schema=pa.schema(fields))
    struct_type = pa.struct(fields)
    chunks = [pa.StructArray.from_arrays(batch.columns, fields=fields) for batch in aligned.to_batches()]
    return pa.chunked_array(chunks, struct_type)


def _physical_fields(state: _State) -> tuple[list[pa.Field], list[pa.Field]]:
    """The table's columns under their physical names, and the partition columns among them."""
    from airflow_delta_provider.core.schema import physical_schema

    metadata = state.small.metadata
    schema = metadata.schema
    mode = "none"
    if "columnMapping" in reader_features(state.small.protocol):
        mode = TableConfig(metadata.configuration).column_mapping_mode
    physical = physical_schema(schema, mode)
    partitions = [physical.field(schema.get_field_index(c)) for c in metadata.partition_columns]
    return list(physical), partitions


def _min_max_type(arrow_type: pa.DataType) -> pa.DataType | None:
    """The min/max stats type of a column, None when Delta collects no min/max for it."""
    types = pa.types
    if types.is_struct(arrow_type):
        fields = []
        for child in arrow_type:
            child_type = _min_max_type(child.type)
            if child_type is not None:
                fields.append(pa.field(child.name, child_type))
        # Parquet cannot store an empty group.
        return pa.struct(fields) if fields else None
    if (
        types.is_integer(arrow_type)
        or types.is_floating(arrow_type)
        or types.is_decimal(arrow_type)
        or types.is_string(arrow_type)
        or types.is_large_string(arrow_type)
        or types.is_date(arrow_type)
        or types.is_timestamp(arrow_type)
    ):
        return arrow_type
    return None  # booleans, binaries, lists and maps: Spark keeps no min/max


def _null_count_type(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(arrow_type) and arrow_type.num_fields:
        return pa.struct([pa.field(c.name, _null_count_type(c.type)) for c in arrow_type])
    return pa.int64()


def _stats_type(data_fields: list[pa.Field], *, tight_bounds: bool) -> pa.StructType:
    """``stats_parsed``: numRecords, minValues, maxValues, nullCount (, tightBounds), Spark's layout."""
    fields = [pa.field("numRecords", pa.int64())]
    min_max = [pa.field(f.name, t) for f in data_fields if (t := _min_max_type(f.type)) is not None]
    if min_max:
        fields += [pa.field("minValues", pa.struct(min_max)), pa.field("maxValues", pa.struct(min_max))]
    if data_fields:
        fields.append(
            pa.field(
                "nullCount", pa.struct([pa.field(f.name, _null_count_type(f.type)) for f in data_fields])
            )
        )
    if tight_bounds:
        fields.append(pa.field("tightBounds", pa.bool_()))
    return pa.struct(fields)


def _json_read_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type pyarrow's JSON reader can fill for ``arrow_type`` (dates come as strings)."""
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(c.name, _json_read_type(c.type)) for c in arrow_type])
    if pa.types.is_date(arrow_type):
        return pa.string()
    return arrow_type


def _parse_stats(stats: pa.ChunkedArray, stats_type: pa.StructType) -> pa.Array:
    """``stats_parsed`` from the JSON ``stats`` column, in one pass of Arrow's JSON reader."""
    stats = stats.combine_chunks() if stats.num_chunks else pa.array([], pa.string())
    count = len(stats)
    if count == 0:
        return pa.array([], stats_type)
    # One line per file: a null becomes {} and then a null struct.
    # large_string: the joined lines of many millions of files may pass 2 GiB.
    newline = pa.scalar("\n", pa.large_string())
    empty = pa.scalar("", pa.large_string())
    lines = pc.binary_join_element_wise(pc.fill_null(stats.cast(pa.large_string()), "{}"), newline, empty)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + count + 1]
    body = pa.py_buffer(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])]
    longest = int(np.max(np.diff(offsets)))
    read_type = _json_read_type(stats_type)
    try:
        table = pa_json.read_json(
            pa.BufferReader(body),
            read_options=pa_json.ReadOptions(block_size=max(1 << 22, 2 * longest + 1024)),
            parse_options=pa_json.ParseOptions(
                explicit_schema=pa.schema(list(read_type)), unexpected_field_behavior="ignore"
            ),
        )
        if table.num_rows != count:
            raise pa.ArrowInvalid(f"{table.num_rows} rows for {count} stats")
        parsed = pa.StructArray.from_arrays(
            [table.column(f.name).combine_chunks() for f in read_type], fields=list(read_type)
        )
        parsed = parsed.cast(stats_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        # Values Arrow's reader refuses (NaN written as a string, a stats value of the wrong
        # type after a schema change): parse per row, a bad value becomes null.
        log.debug("Parsing stats row by row (%s).", err)
        rows = []
        for text in stats.to_pylist():
            try:
                value = json.loads(text) if text is not None else None
            except ValueError:
                value = None
            rows.append(_coerce(value, stats_type) if isinstance(value, dict) else None)
        return pa.array(rows, stats_type)
    if stats.null_count:
        parsed = pa.StructArray.from_arrays(
            [parsed.field(i) for i in range(stats_type.num_fields)],
            fields=list(stats_type),
            mask=stats.is_null(),
        )
    return parsed


_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _coerce(value: Any, arrow_type: pa.DataType) -> Any:
    """``value`` as a Python value of ``arrow_type``, or None when it does not fit."""
    if value is None:
        return None
    types = pa.types
    try:
        if types.is_struct(arrow_type):
            if not isinstance(value, dict):
                return None
            return {f.name: _coerce(value.get(f.name), f.type) for f in arrow_type}
        if types.is_floating(arrow_type):
            if isinstance(value, str):
                return _FLOAT_WORDS.get(value)
            return float(value) if not isinstance(value, bool) else None
        if types.is_boolean(arrow_type):
            return value if isinstance(value, bool) else None
        if types.is_integer(arrow_type):
            return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
        if types.is_string(arrow_type) or types.is_large_string(arrow_type):
            return value if isinstance(value, str) else None
        scalar = pa.scalar(str(value), pa.string()).cast(arrow_type)
        return scalar.as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return None


# --- tables -------------------------------------------------------------------------------


def _action_schema(add_type: pa.DataType, remove_type: pa.DataType, *, v2: bool) -> pa.Schema:
    """The checkpoint's columns, in Spark's order."""
    fields = [
        pa.field("txn", TXN_TYPE),
        pa.field("add", add_type),
        pa.field("remove", remove_type),
        pa.field("metaData", METADATA_TYPE),
        pa.field("protocol", PROTOCOL_TYPE),
        pa.field("domainMetadata", DOMAIN_METADATA_TYPE),
    ]
    if v2:
        fields += [
            pa.field("checkpointMetadata", CHECKPOINT_METADATA_TYPE),
            pa.field("sidecar", SIDECAR_TYPE),
        ]
    return pa.schema(fields)


def _small_rows(state: _State) -> list[dict[str, Any]]:
    small = state.small
    metadata = small.metadata.to_json()
    metadata["partitionColumns"] = list(metadata["partitionColumns"])
    rows: list[dict[str, Any]] = [{"protocol": small.protocol.to_json()}, {"metaData": metadata}]
    rows += [{"txn": txn.to_json()} for _, txn in sorted(small.transactions.items())]
    rows += [{"domainMetadata": domain.to_json()} for _, domain in sorted(small.domains.items())]
    return rows


def _small_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    columns = []
    for field in schema:
        values = [row.get(field.name) for row in rows]
        columns.append(pa.array(values, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _file_table(
    add_column: pa.ChunkedArray,
    remove_column: pa.ChunkedArray,
    schema: pa.Schema,
    selection: np.ndarray | None = None,
) -> pa.Table:
    """The file-action rows (adds, then removes) with the other columns null.

    :param selection: only these rows, indexing the concatenation adds + removes.
    """
    add_count = len(add_column)
    if selection is not None:
        add_take = selection[selection < add_count]
        remove_take = selection[selection >= add_count] - add_count
        add_column = add_column.take(pa.array(add_take)) if len(add_take) else add_column.slice(0, 0)
        remove_column = (
            remove_column.take(pa.array(remove_take)) if len(remove_take) else remove_column.slice(0, 0)
        )
    pieces = []
    for name, rows in (("add", add_column), ("remove", remove_column)):
        if len(rows) == 0:
            continue
        arrays = [rows if f.name == name else pa.nulls(len(rows), f.type) for f in schema]
        pieces.append(pa.Table.from_arrays(arrays, schema=schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


def _parquet(tables: list[pa.Table], schema: pa.Schema) -> pa.Buffer:
    """One Parquet file of the tables, each starting its own row groups.

    The non-file actions come first in a row group of their own: readers that want only
    protocol, metadata and txns skip the file-action row groups by their null counts.
    """
    sink = pa.BufferOutputStream()
    # Statistics only for the non-file action columns: they let readers skip the row groups
    # without them; min/max over a million paths and stats strings would only cost time.
    stats_columns = [
        path
        for path in _leaf_paths(schema)
        if path.split(".", 1)[0]
        in ("txn", "metaData", "protocol", "domainMetadata", "checkpointMetadata", "sidecar")
    ]
    with pq.ParquetWriter(
        sink,
        schema,
        compression="snappy",
        use_dictionary=False,
        write_statistics=stats_columns or False,
    ) as writer:
        for table in tables:
            if table.num_rows:
                writer.write_table(table, row_group_size=ROW_GROUP_SIZE)
        if not any(t.num_rows for t in tables):
            writer.write_table(schema.empty_table())
    return sink.getvalue()


def _leaf_paths(schema: pa.Schema) -> list[str]:
    """Dotted Parquet column paths of every leaf (lists and maps with their repeated groups)."""
    paths: list[str] = []

    def walk(prefix: str, arrow_type: pa.DataType) -> None:
        if pa.types.is_struct(arrow_type):
            for child in arrow_type:
                walk(f"{prefix}.{child.name}", child.type)
        elif pa.types.is_map(arrow_type):
            walk(f"{prefix}.key_value.key", arrow_type.key_type)
            walk(f"{prefix}.key_value.value", arrow_type.item_type)
        elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            walk(f"{prefix}.list.{arrow_type.value_field.name}", arrow_type.value_type)
        else:
            paths.append(prefix)

    for field in schema:
        walk(field.name, field.type)
    return paths


def _put(storage: LogStore, name: str, data: pa.Buffer) -> int:
    """Write ``_delta_log/<name>`` whole (atomically on local and S3); returns its size."""
    payload = memoryview(data) if storage.is_local else data.to_pybytes()
    storage.put(storage.log_path(name), payload)
    return int(data.size)


# --- writers ------------------------------------------------------------------------------


def _write_classic(
    storage: LogStore,
    version: int,
    state: _State,
    add_column: pa.ChunkedArray,
    remove_column: pa.ChunkedArray,
) -> tuple[str, list[str], int, int]:
    schema = _action_schema(add_column.type, remove_column.type, v2=False)
    small = _small_table(_small_rows(state), schema)
    files = _file_table(add_column, remove_column, schema)
    name = classic_checkpoint_name(version)
    size = _put(storage, name, _parquet([small, files], schema))
    return "classic", [name], small.num_rows + files.num_rows, size


def _write_multipart(
    storage: LogStore,
    version: int,
    state: _State,
    add_column: pa.ChunkedArray,
    remove_column: pa.ChunkedArray,
    parts: int,
) -> tuple[str, list[str], int, int]:
    schema = _action_schema(add_column.type, remove_column.type, v2=False)
    small = _small_table(_small_rows(state), schema)
    # Spark repartitions by coalesce(add.path, remove.path) (and the DV id where the table
    # supports deletion vectors): the non-file actions have a null key and land together.
    paths = pa.concat_arrays(
        [state.adds.column("path").combine_chunks(), state.removes.column("path").combine_chunks()]
    )
    keys = [paths]
    if "deletionVectors" in writer_features(state.small.protocol):
        keys.append(_dv_ids(state))
    file_parts = spark_partition_ids(keys, parts)
    small_part = int(spark_partition_ids([pa.nulls(1, pa.string())], parts)[0])
    order = np.argsort(file_parts, kind="stable")
    bounds = np.searchsorted(file_parts[order], np.arange(parts + 1))
    names, total_rows, total_bytes = [], 0, 0
    for part in range(parts):
        selection = order[bounds[part] : bounds[part + 1]]
        tables = [small] if part == small_part else []
        tables.append(_file_table(add_column, remove_column, schema, selection))
        name = multipart_checkpoint_name(version, part + 1, parts)
        total_bytes += _put(storage, name, _parquet(tables, schema))
        total_rows += sum(t.num_rows for t in tables)
        names.append(name)
        log.log(_progress_level(state), "Wrote checkpoint part %d of %d (%s).", part + 1, parts, name)
    return "multipart", names, total_rows, total_bytes


def _dv_ids(state: _State) -> pa.Array:
    """The deletion-vector unique id of each file action (adds, then removes), null without a DV."""
    ids: list[str | None] = []
    for table in (state.adds, state.removes):
        column = table.column("deletionVector")
        if column.null_count == len(column):
            ids.extend([None] * len(column))
            continue
        ids.extend(deletion_vector_unique_id(dv) for dv in column.to_pylist())
    return pa.array(ids, pa.string())


def _write_v2(
    storage: LogStore,
    version: int,
    state: _State,
    add_column: pa.ChunkedArray,
    remove_column: pa.ChunkedArray,
    parts: int,
) -> tuple[str, list[str], int, int]:
    schema = _action_schema(add_column.type, remove_column.type, v2=True)
    rows = [{"checkpointMetadata": {"version": version}}, *_small_rows(state)]
    file_actions = state.adds.num_rows + state.removes.num_rows
    if parts <= 1:
        # Classic-named V2 checkpoint with every action inline: older clients still find it
        # and fail on the protocol with a clear error, as the protocol recommends.
        small = _small_table(rows, schema)
        files = _file_table(add_column, remove_column, schema)
        name = classic_checkpoint_name(version)
        size = _put(storage, name, _parquet([small, files], schema))
        return "v2", [name], small.num_rows + files.num_rows, size
    sidecar_schema = pa.schema([schema.field("add"), schema.field("remove")])
    names: list[str] = []
    sidecars: list[dict[str, Any]] = []
    total_bytes = 0
    bounds = np.linspace(0, file_actions, parts + 1).astype(np.int64)
    for part in range(parts):
        selection = np.arange(bounds[part], bounds[part + 1], dtype=np.int64)
        table = _file_table(add_column, remove_column, schema, selection).select(["add", "remove"])
        sidecar_name = f"{version:020d}.checkpoint.{part + 1:010d}.{parts:010d}.{uuid.uuid4()}.parquet"
        name = f"{SIDECAR_DIR}/{sidecar_name}"
        size = _put(storage, name, _parquet([table.cast(sidecar_schema)], sidecar_schema))
        info = storage.info(storage.log_path(name))
        sidecars.append(
            {
                "path": sidecar_name,
                "sizeInBytes": size,
                "modificationTime": info.modification_time if info is not None else int(time.time() * 1000),
            }
        )
        names.append(name)
        total_bytes += size
        log.log(_progress_level(state), "Wrote checkpoint sidecar %d of %d (%s).", part + 1, parts, name)
    rows += [{"sidecar": sidecar} for sidecar in sidecars]
    small = _small_table(rows, schema)
    top = f"{version:020d}.checkpoint.{uuid.uuid4()}.parquet"
    total_bytes += _put(storage, top, _parquet([small], schema))
    return "v2", [top, *names], small.num_rows + file_actions, total_bytes
