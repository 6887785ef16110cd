"""Checkpoints: the state of one table version in Parquet, so that readers skip the log replay.

Classic, multi-part and V2 (sidecar) checkpoints, written as Spark writes them (``Checkpoints.scala``),
each file with one atomic put and ``_last_checkpoint`` last, so that a crash leaves only files that
readers ignore (docs/maintenance.md has the layouts). Reading them is the log's
(:mod:`~airflow_delta_provider.core.log.checkpoint_reader`). Checkpoints write no commit.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.log.logfiles import LAST_CHECKPOINT
from airflow_delta_provider.core.log.replay import replay_files, replay_small_state
from airflow_delta_provider.core.log.segment import hinted_checkpoint_exists, read_last_checkpoint
from airflow_delta_provider.core.maintenance.checkpoint.hint import canonical_json, last_checkpoint_checksum
from airflow_delta_provider.core.maintenance.checkpoint.placement import spark_partition_ids
from airflow_delta_provider.core.maintenance.checkpoint.policy import should_checkpoint
from airflow_delta_provider.core.maintenance.checkpoint.writer import (
    CLASSIC_PART_SIZE,
    SIDECAR_PART_SIZE,
    CheckpointState,
    build_add_column,
    build_remove_column,
    clustered,
    progress_level,
    validate_against_checksum,
    write_classic,
    write_multipart,
    write_v2,
)
from airflow_delta_provider.core.protocol.features import Operation, check_supported, writer_features
from airflow_delta_provider.core.utils.arguments import check_positive_int
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from airflow_delta_provider.core.log.snapshot import Snapshot

log = get_logger(__name__)

__all__ = [
    "CheckpointOptions",
    "CheckpointResult",
    "canonical_json",
    "last_checkpoint_checksum",
    "should_checkpoint",
    "spark_partition_ids",
    "write_checkpoint",
]


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


@dataclass(frozen=True, kw_only=True)
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
    :raises ValueError: ``snapshot`` is restricted to some partitions.
    """
    snapshot.require_whole("A checkpoint")
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
    state = clustered(CheckpointState(small=small, adds=files.adds, removes=files.removes))
    log.log(
        progress_level(state),
        "Checkpoint of %s at version %d: replayed %d files, %d tombstones, %d txns in %.2f s.",
        storage.root_uri,
        version,
        state.adds.num_rows,
        state.removes.num_rows,
        len(small.transactions),
        time.perf_counter() - started,
    )
    validate_against_checksum(storage, version, state)

    add_column = build_add_column(state, small.metadata.config)
    remove_column = build_remove_column(state)
    file_actions = state.adds.num_rows + state.removes.num_rows
    v2 = "v2Checkpoint" in writer_features(small.protocol)
    if parts is None:
        size = options.part_size or (SIDECAR_PART_SIZE if v2 else CLASSIC_PART_SIZE)
        parts = max(1, math.ceil(file_actions / size))
    if v2:
        written = write_v2(storage, version, state, add_column, remove_column, parts)
    elif parts > 1:
        written = write_multipart(storage, version, state, add_column, remove_column, parts)
    else:
        written = write_classic(storage, version, state, add_column, remove_column)
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
        progress_level(state),
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
