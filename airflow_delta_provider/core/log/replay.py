"""Log replay: the state of one version from its checkpoint and the commits after it.

A pipeline, run only as far as a question needs (as delta-kernel-rs's log replay):

- **Small state** (:func:`replay_small_state`): protocol, metadata, txns and domain metadata,
  newest wins: the version checksum's answers, then the checkpoint's small action columns
  (:mod:`.checkpoint_reader`), then each commit's actions. Every commit and sensor poke asks
  this, and it never touches the add rows.
- **File state** (:func:`replay_files`): the commits' file actions reconciled
  (:mod:`.reconcile`), the checkpoint's ``add`` / ``remove`` rows (:mod:`.checkpoint_reader`)
  without those the commits touched, and the tombstones not yet expired.

Every action is checked as it is read; a malformed one raises :class:`CorruptLogError` naming
its file and line (or checkpoint row).
"""

from __future__ import annotations

import itertools
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import CorruptLogError, DeltaError
from airflow_delta_provider.core.log.checkpoint_reader import (
    SMALL_ACTION_COLUMNS,
    check_checkpoint_shape,
    read_checkpoint_files,
    read_checkpoint_small_actions,
    require_checkpoint_state,
    sidecar_path,
)
from airflow_delta_provider.core.log.file_actions import ADD_SCHEMA, DELETION_VECTOR_TYPE, REMOVE_SCHEMA
from airflow_delta_provider.core.log.partition_pruning import PartitionPruner
from airflow_delta_provider.core.log.reconcile import drop_touched, reconcile_commits
from airflow_delta_provider.core.protocol.actions import DomainMetadata, Metadata, Protocol, Transaction
from airflow_delta_provider.core.protocol.column_mapping import column_mapping_mode, delta_physical_name
from airflow_delta_provider.core.protocol.features import reader_features
from airflow_delta_provider.core.utils.arrays import scalar
from airflow_delta_provider.core.utils.arrays import table as arrow_table

if TYPE_CHECKING:
    from collections.abc import Iterable

    import pyarrow.parquet as pq

    from airflow_delta_provider.core.log.checksum import ChecksumAnswers
    from airflow_delta_provider.core.log.commits import CommitActions
    from airflow_delta_provider.core.log.partition_pruning import PartitionSelection
    from airflow_delta_provider.core.log.segment import Checkpoint, LogSegment
    from airflow_delta_provider.core.storage import LogStore

#: The replay's names, and the Arrow form of file actions (:mod:`.file_actions`) that callers
#: import from here.
__all__ = [
    "ADD_SCHEMA",
    "DELETION_VECTOR_TYPE",
    "REMOVE_SCHEMA",
    "FileState",
    "SmallState",
    "read_checkpoint_small_actions",
    "replay_files",
    "replay_small_state",
]

#: Scalars for compute calls (a Python value there would make pyarrow import pandas).
_ZERO = scalar(0, pa.int64())


# --- small state -----------------------------------------------------------------------


@dataclass
class SmallState:
    """Protocol, metadata, transactions and domains of one version."""

    protocol: Protocol
    metadata: Metadata
    transactions: dict[str, Transaction]
    domains: dict[str, DomainMetadata]
    #: V2 checkpoint sidecar files (filesystem paths) holding the checkpoint's file actions.
    sidecars: list[str]
    #: file actions found in a JSON (V2) checkpoint's top-level file.
    checkpoint_file_actions: list[dict[str, Any]]
    #: the version whose checksum file answered protocol and metadata (None: the log did).
    checksum_version: int | None = None
    #: the footers of the checkpoint's Parquet files read so far, by path: the file list opens
    #: them without reading a footer again
    footers: dict[str, pq.FileMetaData] = field(default_factory=dict)


def replay_small_state(
    storage: LogStore,
    segment: LogSegment,
    commits: list[CommitActions],
    *,
    now_ms: int | None = None,
    checksum: ChecksumAnswers | None = None,
    footers: dict[str, pq.FileMetaData] | None = None,
) -> SmallState:
    """Protocol, metadata, txns and domains: newest wins, checkpoint first, then commits.

    :param checksum: what the version checksum may answer (from
        :func:`~.checksum.checksum_answers`, which alone decides that): protocol and metadata,
        and txns and domains when it carries them. The checkpoint is then read only for what
        the checksum does not answer (and for V2 sidecars), often not at all.
    :raises CorruptLogError: no protocol or no metadata action in the segment, naming the log;
        a malformed action, naming its file and line (or checkpoint row); a checkpoint that
        is not one (no protocol or metaData action in it, or action columns of the wrong
        shape), naming the checkpoint file, so that the caller can fall back to an older one.
    """
    footers = {} if footers is None else footers
    checkpoint_actions = _checkpoint_small_actions(storage, segment.checkpoint, checksum, footers)
    # Newest wins: the checksum's answers, the checkpoint's actions, then each commit's in
    # version order (the checksum agrees with the commits: checksum_answers checked).
    latest = _LatestActions.of_checksum(checksum)
    latest.apply(storage, itertools.chain(checkpoint_actions, (a for c in commits for a in c.actions)))
    protocol, metadata = _require_protocol_and_metadata(storage, segment, latest)
    origin = _origin(storage, segment, checkpoint_actions, commits, latest.metadata_at)
    if latest.metadata_at < 0 and checksum is not None:
        origin = f"in the checksum file {checksum.uri}"
    meta = Metadata.from_json(metadata, origin=origin)
    return SmallState(
        protocol=Protocol.from_json(protocol),
        metadata=meta,
        transactions=_live_transactions(latest.txns, meta, now_ms),
        domains={
            name: DomainMetadata.from_json(d)
            for name, d in latest.domains.items()
            if not d.get("removed", False)
        },
        sidecars=latest.sidecars,
        # A JSON (V2) checkpoint holds file actions too; they join the checkpoint's Parquet adds.
        checkpoint_file_actions=[a for a in checkpoint_actions if "add" in a or "remove" in a],
        checksum_version=checksum.version if checksum is not None else None,
        footers=footers,
    )


def _checkpoint_small_actions(
    storage: LogStore,
    checkpoint: Checkpoint | None,
    checksum: ChecksumAnswers | None,
    footers: dict[str, pq.FileMetaData],
) -> list[dict[str, Any]]:
    """The checkpoint's small actions the checksum does not answer, once the checkpoint is
    known to be one (holding protocol and metaData)."""
    if checkpoint is None:
        return []
    columns = _checkpoint_columns_needed(checkpoint, checksum)
    actions = read_checkpoint_small_actions(storage, checkpoint, columns, footers) if columns else []
    if checksum is None:
        require_checkpoint_state(storage, checkpoint, actions)
    else:
        check_checkpoint_shape(storage, checkpoint, actions, footers)
    return actions


@dataclass
class _LatestActions:
    """The newest small action of each kind (as parsed JSON) seen so far in the replay."""

    latest: dict[str, dict[str, Any]] = field(default_factory=dict)
    txns: dict[str, dict[str, Any]] = field(default_factory=dict)
    domains: dict[str, dict[str, Any]] = field(default_factory=dict)
    sidecars: list[str] = field(default_factory=list)
    #: the position in the replayed actions of the newest metaData (-1: none, or the checksum's)
    metadata_at: int = -1

    @classmethod
    def of_checksum(cls, checksum: ChecksumAnswers | None) -> _LatestActions:
        if checksum is None:
            return cls()
        return cls(
            latest={"protocol": checksum.protocol, "metaData": checksum.metadata},
            txns=dict(checksum.transactions or {}),
            domains=dict(checksum.domains or {}),
        )

    def apply(self, storage: LogStore, actions: Iterable[dict[str, Any]]) -> None:
        for index, action in enumerate(actions):
            if "protocol" in action:
                self.latest["protocol"] = action["protocol"]
            elif "metaData" in action:
                self.latest["metaData"] = action["metaData"]
                self.metadata_at = index
            elif "txn" in action:
                self.txns[action["txn"]["appId"]] = action["txn"]
            elif "domainMetadata" in action:
                self.domains[action["domainMetadata"]["domain"]] = action["domainMetadata"]
            elif "sidecar" in action:
                self.sidecars.append(sidecar_path(storage, action["sidecar"]["path"]))


def _require_protocol_and_metadata(
    storage: LogStore, segment: LogSegment, latest: _LatestActions
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The newest protocol and metaData actions; every table has both."""
    where = storage.to_uri(storage.log_dir)
    for kind in ("protocol", "metaData"):
        if latest.latest.get(kind) is None:
            raise CorruptLogError(
                f"No {kind} action in the Delta log of version {segment.version} at {where}: every table "
                f"needs one. The log is corrupt or incomplete.",
                path=where,
            )
    return latest.latest["protocol"], latest.latest["metaData"]


def _live_transactions(
    txns: dict[str, dict[str, Any]], metadata: Metadata, now_ms: int | None
) -> dict[str, Transaction]:
    """The txns not expired under the table's own ``delta.setTransactionRetentionDuration``."""
    transactions = {app: Transaction.from_json(t) for app, t in txns.items()}
    retention = metadata.config.set_transaction_retention.value  # the table's own, as in Delta
    if retention is None:
        return transactions
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    cutoff = now - int(retention.total_seconds() * 1000)
    # As Delta: with a retention set, a txn without lastUpdated counts as expired.
    return {
        app: t for app, t in transactions.items() if t.last_updated is not None and t.last_updated > cutoff
    }


def _checkpoint_columns_needed(checkpoint: Checkpoint, checksum: ChecksumAnswers | None) -> tuple[str, ...]:
    """The small action columns of the checkpoint that the replay must still read.

    Without a checksum: all of them. With one: txn and domainMetadata unless it carries them,
    and the V2 columns (sidecars, the JSON checkpoint's file actions) only where the table can
    have a V2 checkpoint (the ``v2Checkpoint`` reader feature, or a JSON checkpoint file).
    """
    if checksum is None:
        return SMALL_ACTION_COLUMNS
    columns: list[str] = []
    if checksum.transactions is None:
        columns.append("txn")
    if checksum.domains is None:
        columns.append("domainMetadata")
    v2 = "v2Checkpoint" in reader_features(Protocol.from_json(checksum.protocol))
    if v2 or any(path.endswith(".json") for path in checkpoint.paths):
        columns += ["sidecar", "checkpointMetadata"]
    return tuple(columns)


def _origin(
    storage: LogStore,
    segment: LogSegment,
    checkpoint_actions: list[dict[str, Any]],
    commits: list[CommitActions],
    index: int,
) -> str | None:
    """Where the ``index``-th small action of the replay was read."""
    if index < len(checkpoint_actions):
        checkpoint = segment.checkpoint
        return f"in the checkpoint {storage.to_uri(checkpoint.paths[0])}" if checkpoint else None
    index -= len(checkpoint_actions)
    for commit in commits:
        if index < len(commit.actions):
            return f"line {commit.line_of(index)} of {commit.path}"
        index -= len(commit.actions)
    return None


# --- file state ------------------------------------------------------------------------


@dataclass
class FileState:
    """Active files and tombstones of one version, as Arrow tables (``ADD_SCHEMA`` / ``REMOVE_SCHEMA``)."""

    adds: pa.Table
    removes: pa.Table


def replay_files(
    storage: LogStore,
    segment: LogSegment,
    commits: list[CommitActions],
    small: SmallState,
    *,
    tombstones: bool = False,
    now_ms: int | None = None,
    partition_filter: PartitionSelection | None = None,
) -> FileState:
    """Active files (and, if asked, unexpired tombstones) of the segment's version.

    The checkpoint's file actions are decoded in a thread while this one reconciles the commits
    after it (the decode releases the GIL); an error of the commits is raised first, as when the
    two ran one after the other.

    :param partition_filter: only the active files of the partitions it selects (no
        tombstones): the commits are reconciled whole (a newer action of a path decides, whatever
        its partition), then only the selected adds are kept; of the checkpoint, only the row
        groups and rows that may hold one are decoded and checked (:mod:`.partition_pruning`).
    :raises ValueError: tombstones asked of a partition-pruned replay.
    """
    pruner = None
    if partition_filter is not None:
        if tombstones:
            raise ValueError(
                "A partition-pruned replay has no tombstones: VACUUM and checkpoints need the whole table."
            )
        pruner = PartitionPruner(partition_filter, small.protocol, small.metadata)

    def checkpoint_files() -> tuple[pa.Table, pa.Table]:
        return read_checkpoint_files(
            storage,
            segment.checkpoint,
            sidecars=small.sidecars,
            json_actions=small.checkpoint_file_actions,
            footers=small.footers,
            removes=tombstones,
            pruner=pruner,
        )

    if segment.checkpoint is None or not commits:
        tail_adds, tail_removes, touched = reconcile_commits(storage, commits, log_partition_keys(small))
        checkpoint_adds, checkpoint_removes = checkpoint_files()
    else:
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="delta-checkpoint") as pool:
            decoding = pool.submit(checkpoint_files)
            tail_adds, tail_removes, touched = reconcile_commits(storage, commits, log_partition_keys(small))
            checkpoint_adds, checkpoint_removes = decoding.result()
    if pruner is not None and tail_adds.num_rows:
        tail_adds = tail_adds.filter(pa.array(pruner.mask(tail_adds.column("partitionValues"))))
    if touched:
        checkpoint_adds = drop_touched(checkpoint_adds, touched, storage.path)
        if tombstones:
            checkpoint_removes = drop_touched(checkpoint_removes, touched, storage.path)
    adds = pa.concat_tables([checkpoint_adds, tail_adds]) if tail_adds.num_rows else checkpoint_adds
    removes = arrow_table([], REMOVE_SCHEMA)
    if tombstones:
        removes = pa.concat_tables([checkpoint_removes, tail_removes])
        retention = small.metadata.config.deleted_file_retention.value  # the table's own
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        cutoff = now - int(retention.total_seconds() * 1000)
        timestamps = pc.fill_null(removes.column("deletionTimestamp"), _ZERO)
        removes = removes.filter(pc.greater(timestamps, scalar(cutoff, pa.int64())))
    return FileState(adds=adds, removes=removes)


def log_partition_keys(small: SmallState) -> tuple[str, ...]:
    """The keys of ``partitionValues`` in the log: the partition columns, by their physical names
    under column mapping. (A wrong guess costs only speed: such lines take the exact route.)"""
    columns = small.metadata.partition_columns
    try:
        if not columns or column_mapping_mode(small.protocol, small.metadata) == "none":
            return columns
        fields = small.metadata.schema_json.get("fields") or []
    except (DeltaError, ValueError, AttributeError):
        return columns
    by_name = {f.get("name"): f for f in fields if isinstance(f, dict)}
    return tuple(str(delta_physical_name(by_name[c])) if c in by_name else c for c in columns)
