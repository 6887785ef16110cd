"""Columnar log replay: the state of one version from its checkpoint and commits.

The replay runs in two layers, each only as far as a question needs:

- **Small state** (:func:`replay_small_state`): protocol, metadata, txns and domain
  metadata. The checkpoint contributes only its ``protocol``, ``metaData``, ``txn``,
  ``domainMetadata`` and ``sidecar`` columns (row groups whose statistics say a column
  is all null are not even read; in large row groups, only the pages holding the actions:
  :mod:`.checkpoint_pages`); the commits after it are read whole, but their
  ``add``/``remove`` lines are kept as raw text and not parsed. This is what every
  commit and every sensor poke asks, and it never touches the add rows.
- **File state** (:func:`replay_files`): the active files and the tombstones. The
  checkpoint's ``add`` column is read as Arrow; the commits' ``add``/``remove`` lines are
  read by Arrow's JSON reader against an explicit schema and checked and reconciled column
  by column (:func:`_columnar_file_actions`): the newest action per ``(path, deletion vector
  id)`` wins, and checkpoint rows whose key the commits touch are dropped. Lines Arrow cannot
  represent exactly (``tags``, deletion vectors, null or missing partition values) take the
  exact route (``json`` and :func:`~.action_checks.action_problem`) one by one; a log Arrow
  cannot vouch for takes it whole (:func:`_reconcile_exact`), and that route names the file
  and line of a malformed action.

Paths are compared after canonicalisation, as Delta does: URL-decoded, relative to the
table root when they point under it.

Every action is checked as it is parsed (:func:`~.action_checks.action_problem`): a malformed
one raises :class:`CorruptLogError` naming the file and the line (the row, in a Parquet
checkpoint), never a bare ``KeyError`` or ``OverflowError`` later. A relative path that
climbs out of the table root (``../x``) is malformed: the core never reads outside the root.
The commit files themselves (reading, splitting into lines, parsing, :func:`~.commits.check_replayable`
for writers) are :mod:`.commits`.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from airflow_delta_provider.core.action_checks import action_problem, malformed_action_error
from airflow_delta_provider.core.actions import DomainMetadata, Metadata, Protocol, Transaction
from airflow_delta_provider.core.arrays import from_numpy, scalar, strings, to_bools
from airflow_delta_provider.core.arrays import table as arrow_table
from airflow_delta_provider.core.checkpoint_pages import CheckpointPages
from airflow_delta_provider.core.column_mapping import column_mapping_mode, delta_physical_name
from airflow_delta_provider.core.commits import (
    file_line_origin,
    parse_commit,
    parse_line,
    segment_file_actions,
    segment_file_lines,
)
from airflow_delta_provider.core.deletion_vectors import deletion_vector_unique_id
from airflow_delta_provider.core.errors import CorruptLogError, DeltaError
from airflow_delta_provider.core.features import reader_features
from airflow_delta_provider.core.logfiles import SIDECAR_DIR
from airflow_delta_provider.core.memory import READ_POOL
from airflow_delta_provider.core.paths import TablePath, escapes_root, has_scheme
from airflow_delta_provider.core.table_config import TableConfig

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow_delta_provider.core.checksum import ChecksumAnswers
    from airflow_delta_provider.core.commits import CommitActions
    from airflow_delta_provider.core.segment import Checkpoint, LogSegment
    from airflow_delta_provider.core.storage import LogStore


DELETION_VECTOR_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
        ("maxRowIndex", pa.int64()),
    ]
)
_STRING_MAP = pa.map_(pa.string(), pa.string())

#: The ``add`` action as a checkpoint stores it (without the optional parsed stats).
ADD_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        ("partitionValues", _STRING_MAP),
        ("size", pa.int64()),
        ("modificationTime", pa.int64()),
        ("dataChange", pa.bool_()),
        ("stats", pa.string()),
        ("tags", _STRING_MAP),
        ("deletionVector", DELETION_VECTOR_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
        ("clusteringProvider", pa.string()),
    ]
)

#: The ``remove`` action as a checkpoint stores it (tombstones keep no stats or tags).
REMOVE_SCHEMA = pa.schema(
    [
        pa.field("path", pa.string(), nullable=False),
        ("deletionTimestamp", pa.int64()),
        ("dataChange", pa.bool_()),
        ("extendedFileMetadata", pa.bool_()),
        ("partitionValues", _STRING_MAP),
        ("size", pa.int64()),
        ("deletionVector", DELETION_VECTOR_TYPE),
        ("baseRowId", pa.int64()),
        ("defaultRowCommitVersion", pa.int64()),
    ]
)

_SMALL_COLUMNS = ("protocol", "metaData", "txn", "domainMetadata", "sidecar", "checkpointMetadata")
#: Scalars for compute calls (a Python value there would make pyarrow import pandas).
_ZERO = scalar(0, pa.int64())
_TRUE = scalar(True, pa.bool_())
_FALSE = scalar(False, pa.bool_())
_INLINE = scalar("i", pa.string())
#: A JSON escape of a UTF-16 surrogate (``\\ud800``-``\\udfff``).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_REPEATED_SEGMENT_RE = re.compile(r"\.(list|key_value|element|array|bag|map)\b")


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
    # Newest wins: the checksum's answers, the checkpoint's actions, then each commit's in
    # version order (the checksum agrees with the commits: checksum_answers checked).
    latest: dict[str, dict[str, Any]] = {}
    txns: dict[str, dict[str, Any]] = {}
    domains: dict[str, dict[str, Any]] = {}
    sidecars: list[str] = []
    checkpoint_actions: list[dict[str, Any]] = []
    footers = {} if footers is None else footers
    if segment.checkpoint is not None:
        columns = _checkpoint_columns_needed(segment.checkpoint, checksum)
        if columns:
            checkpoint_actions = read_checkpoint_small_actions(storage, segment.checkpoint, columns, footers)
        if checksum is None:
            _require_checkpoint_state(storage, segment.checkpoint, checkpoint_actions)
        else:
            _check_checkpoint_shape(storage, segment.checkpoint, checkpoint_actions, footers)
    if checksum is not None:
        latest = {"protocol": checksum.protocol, "metaData": checksum.metadata}
        txns = dict(checksum.transactions or {})
        domains = dict(checksum.domains or {})
    # A JSON (V2) checkpoint holds file actions too; they join the checkpoint's Parquet adds.
    checkpoint_file_actions = [a for a in checkpoint_actions if "add" in a or "remove" in a]
    metadata_at = -1
    replayed = itertools.chain(checkpoint_actions, (a for c in commits for a in c.actions))
    for index, action in enumerate(replayed):
        if "protocol" in action:
            latest["protocol"] = action["protocol"]
        elif "metaData" in action:
            latest["metaData"] = action["metaData"]
            metadata_at = index
        elif "txn" in action:
            txns[action["txn"]["appId"]] = action["txn"]
        elif "domainMetadata" in action:
            domains[action["domainMetadata"]["domain"]] = action["domainMetadata"]
        elif "sidecar" in action:
            sidecars.append(_sidecar_path(storage, action["sidecar"]["path"]))
    protocol, metadata = latest.get("protocol"), latest.get("metaData")

    where = storage.to_uri(storage.log_dir)
    if protocol is None:
        raise CorruptLogError(
            f"No protocol action in the Delta log of version {segment.version} at {where}: every table "
            f"needs one. The log is corrupt or incomplete.",
            path=where,
        )
    if metadata is None:
        raise CorruptLogError(
            f"No metaData action in the Delta log of version {segment.version} at {where}: every table "
            f"needs one. The log is corrupt or incomplete.",
            path=where,
        )
    origin = _origin(storage, segment, checkpoint_actions, commits, metadata_at)
    if metadata_at < 0 and checksum is not None:
        origin = f"in the checksum file {checksum.uri}"
    meta = Metadata.from_json(metadata, origin=origin)
    transactions = {app: Transaction.from_json(t) for app, t in txns.items()}
    retention = TableConfig(meta.configuration).set_transaction_retention.value
    if retention is not None:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        cutoff = now - int(retention.total_seconds() * 1000)
        # As Delta: with a retention set, a txn without lastUpdated counts as expired.
        transactions = {
            app: t
            for app, t in transactions.items()
            if t.last_updated is not None and t.last_updated > cutoff
        }
    live_domains = {
        name: DomainMetadata.from_json(d) for name, d in domains.items() if not d.get("removed", False)
    }
    return SmallState(
        protocol=Protocol.from_json(protocol),
        metadata=meta,
        transactions=transactions,
        domains=live_domains,
        sidecars=sidecars,
        checkpoint_file_actions=checkpoint_file_actions,
        checksum_version=checksum.version if checksum is not None else None,
        footers=footers,
    )


def _checkpoint_columns_needed(checkpoint: Checkpoint, checksum: ChecksumAnswers | None) -> tuple[str, ...]:
    """The small action columns of the checkpoint that the replay must still read.

    Without a checksum: all of them. With one: txn and domainMetadata unless it carries them,
    and the V2 columns (sidecars, the JSON checkpoint's file actions) only where the table can
    have a V2 checkpoint (the ``v2Checkpoint`` reader feature, or a JSON checkpoint file).
    """
    if checksum is None:
        return _SMALL_COLUMNS
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


def _require_checkpoint_state(
    storage: LogStore, checkpoint: Checkpoint, actions: list[dict[str, Any]]
) -> None:
    """A checkpoint holds the table's protocol and metadata; a file without them is not one."""
    missing = [kind for kind in ("protocol", "metaData") if not any(kind in a for a in actions)]
    if missing:
        raise _not_a_checkpoint(storage, checkpoint, missing)


def _check_checkpoint_shape(
    storage: LogStore,
    checkpoint: Checkpoint,
    actions: list[dict[str, Any]],
    footers: dict[str, pq.FileMetaData] | None = None,
) -> None:
    """:func:`_require_checkpoint_state` without decoding a row, for when the checksum answered.

    Each Parquet file must open, its action columns must have the shape of actions, and its
    protocol and metaData columns must be able to hold a value by their row-group statistics;
    a JSON checkpoint was read whole (``actions``). What this cannot see (a malformed protocol
    row) is found when the file list is first asked for (:meth:`.Snapshot._log_small`).
    """
    found = {kind for kind in ("protocol", "metaData") if any(kind in a for a in actions)}
    for path in checkpoint.paths:
        if path.endswith(".json"):
            continue
        parquet = _open_parquet(storage, path, footers)
        schema = parquet.schema_arrow
        _check_checkpoint_schema(schema, storage.to_uri(path))
        leaves = _action_leaves(parquet)
        for kind in ("protocol", "metaData"):
            index = schema.get_field_index(kind)
            usable = index >= 0 and not pa.types.is_null(schema.field(index).type)
            if usable and _row_groups_with_values(parquet, [kind], leaves):
                found.add(kind)
    missing = [kind for kind in ("protocol", "metaData") if kind not in found]
    if missing:
        raise _not_a_checkpoint(storage, checkpoint, missing)


def _not_a_checkpoint(storage: LogStore, checkpoint: Checkpoint, missing: list[str]) -> CorruptLogError:
    uri = storage.to_uri(checkpoint.paths[0])
    names = ", ".join(storage.to_uri(p) for p in checkpoint.paths)
    return CorruptLogError(
        f"The checkpoint {names} holds no {' and no '.join(missing)} action: it is not a usable Delta "
        f"checkpoint (every checkpoint holds the table's protocol and metaData). It was not written "
        f"by a Delta writer, or its writer failed.",
        path=uri,
    )


def _sidecar_path(storage: LogStore, path: str) -> str:
    if has_scheme(path):
        return storage.path.decode(path)
    return storage.log_path(f"{SIDECAR_DIR}/{unquote(path)}")


def read_checkpoint_small_actions(
    storage: LogStore,
    checkpoint: Checkpoint,
    columns: Sequence[str] = _SMALL_COLUMNS,
    footers: dict[str, pq.FileMetaData] | None = None,
) -> list[dict[str, Any]]:
    """The non-file actions of a checkpoint (and, for JSON V2 checkpoints, its file actions).

    :param columns: the action columns to read from a Parquet checkpoint (default: every
        non-file action); a JSON checkpoint is read whole.

    :raises CorruptLogError: the file cannot be read, its action columns do not have the
        shape of actions, or an action is malformed (naming the file and the 1-based row).
    """
    actions: list[dict[str, Any]] = []
    for path in checkpoint.paths:
        uri = storage.to_uri(path)
        if path.endswith(".json"):
            commit = parse_commit(checkpoint.version, uri, _read_checkpoint_bytes(storage, path))
            actions.extend(commit.actions)
            actions.extend(commit.file_actions())
            continue
        parquet = _open_parquet(storage, path, footers)
        _check_checkpoint_schema(parquet.schema_arrow, uri)
        names = set(parquet.schema_arrow.names)
        present = [c for c in columns if c in names]
        if not present:
            continue
        leaves = _action_leaves(parquet)
        metadata = parquet.metadata
        starts = np.zeros(metadata.num_row_groups + 1, dtype=np.int64)
        np.cumsum([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)], out=starts[1:])
        pages = CheckpointPages(storage, path, parquet)
        for name in present:
            rows = _paged_rows(pages, parquet, name, leaves, starts)
            if rows is None:
                rows = _small_column_rows(parquet, name, leaves, starts, uri)
            for row_number, row in rows:
                action = {name: _drop_nulls(row) if isinstance(row, dict) else row}
                problem = action_problem(action)
                if problem is not None:
                    raise malformed_action_error(
                        f"Row {row_number} of the checkpoint {uri}", problem, None, action, uri
                    )
                actions.append(action)
    return actions


def _paged_rows(
    pages: CheckpointPages,
    parquet: pq.ParquetFile,
    name: str,
    leaves: dict[str, list[_Leaf]],
    starts: np.ndarray,
) -> list[tuple[int, Any]] | None:
    """:func:`_small_column_rows` read page by page (:mod:`.checkpoint_pages`): only for row
    groups of many rows (a small one decodes as fast whole), None when any of them cannot be."""
    found: list[tuple[int, Any]] = []
    for group in _row_groups_with_values(parquet, [name], leaves):
        if parquet.metadata.row_group(group).num_rows < _PAGED_ROWS:
            return None
        rows = pages.action_rows(name, group)
        if rows is None:
            return None
        found.extend((int(starts[group]) + row + 1, value) for row, value in rows)
    return found


#: Row groups at least this large have their small action columns read page by page.
_PAGED_ROWS = 50_000


#: Rows decoded at a time when looking for the few non-file actions in a large row group.
_SMALL_BATCH = 8192


def _small_column_rows(
    parquet: pq.ParquetFile, name: str, leaves: dict[str, list[_Leaf]], starts: np.ndarray, uri: str
) -> list[tuple[int, Any]]:
    """(1-based file row, value) of every row where the action column ``name`` is present.

    Checkpoints written by delta-rs or Spark put the handful of protocol, metaData and txn rows
    in row groups of up to millions of add rows, and decoding a nested column over all of them
    costs tens of milliseconds per 100,000 rows. So, per row group whose statistics say the
    column may hold a value: first count the rows that hold one, exactly (from the null count
    of a leaf the Parquet schema declares required inside the action, which is null only where
    the action is; otherwise from the validity of one cheap leaf, read alone), then decode the
    column batch by batch and stop once that many rows were found.
    """
    probe = _presence_leaf(leaves.get(name, []))
    found: list[tuple[int, Any]] = []
    try:
        for group in _row_groups_with_values(parquet, [name], leaves):
            expected = _present_count(parquet, group, probe)
            if expected == 0:
                continue
            offset = 0
            seen = 0
            batches = parquet.iter_batches(
                batch_size=_SMALL_BATCH, row_groups=[group], columns=[name], use_threads=False
            )
            for batch in batches:
                column = batch.column(0)
                present = np.flatnonzero(to_bools(column.is_valid()))
                if len(present):
                    values = column.take(from_numpy(present)).to_pylist(maps_as_pydicts="lossy")
                    rows = (starts[group] + offset + present + 1).tolist()
                    found.extend(zip(rows, values, strict=True))
                    seen += len(present)
                offset += len(batch)
                if expected is not None and seen >= expected:
                    break
    except (OSError, pa.ArrowException, ValueError, OverflowError) as err:
        raise _corrupt_checkpoint(uri, err) from None
    return found


@dataclass(frozen=True)
class _Leaf:
    """A leaf column of an action outside lists and maps: one value (or null) per row."""

    index: int
    path: str
    #: the leaf is required inside the action: null exactly where the action is absent.
    required: bool
    #: how cheap it is to decode (lower is cheaper)
    cost: int


#: Leaf types cheapest to decode first, for the presence probe.
_PROBE_ORDER = ("BOOLEAN", "INT32", "INT64")


def _action_leaves(parquet: pq.ParquetFile) -> dict[str, list[_Leaf]]:
    """The leaves outside lists and maps of each top-level column (one pass over the schema)."""
    schema = parquet.schema
    leaves: dict[str, list[_Leaf]] = {}
    for index in range(len(schema)):
        column = schema.column(index)
        path = column.path
        if column.max_repetition_level or _REPEATED_SEGMENT_RE.search(path):
            continue
        top = path.split(".", 1)[0]
        # Directly in the action struct, with the struct's own definition level: required.
        required = path.count(".") == 1 and column.max_definition_level == 1
        physical = column.physical_type
        cost = _PROBE_ORDER.index(physical) if physical in _PROBE_ORDER else len(_PROBE_ORDER)
        leaves.setdefault(top, []).append(_Leaf(index, path, required, cost))
    return leaves


def _presence_leaf(leaves: list[_Leaf]) -> _Leaf | None:
    """The leaf to learn an action's presence from: a required one if any, else the cheapest."""
    return min(leaves, key=lambda leaf: (not leaf.required, leaf.cost)) if leaves else None


def _present_count(parquet: pq.ParquetFile, group: int, leaf: _Leaf | None) -> int | None:
    """How many rows of ``group`` hold the action (None: unknown, decode every row)."""
    if leaf is None:
        return None
    row_group = parquet.metadata.row_group(group)
    stats = row_group.column(leaf.index).statistics
    if leaf.required and stats is not None and stats.has_null_count:
        return int(row_group.num_rows - stats.null_count)
    probe = parquet.read_row_group(group, columns=[leaf.path], use_threads=False).column(0)
    return int(len(probe) - probe.null_count)


#: The action columns of a checkpoint, and the field each must have (None: any struct).
_ACTION_COLUMNS: dict[str, str | None] = {
    "add": "path",
    "remove": "path",
    "sidecar": "path",
    "protocol": None,
    "metaData": None,
    "txn": None,
    "domainMetadata": None,
    "checkpointMetadata": None,
}


def _is_text(data_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(data_type) or pa.types.is_large_string(data_type))


def _check_checkpoint_schema(schema: pa.Schema, uri: str) -> None:
    """Refuse a Parquet file whose action columns are not structs (it is not a checkpoint)."""
    for name, key in _ACTION_COLUMNS.items():
        index = schema.get_field_index(name)
        if index < 0:
            continue
        column_type = schema.field(index).type
        if pa.types.is_null(column_type):
            continue  # an all-null column: no action of this kind
        if not pa.types.is_struct(column_type):
            problem = f"its {name!r} column is {column_type}, not the struct of the {name} action"
        elif key is not None and (
            column_type.get_field_index(key) < 0 or not _is_text(column_type.field(key).type)
        ):
            problem = f"its {name!r} column has no string {key!r} field"
        else:
            continue
        raise CorruptLogError(f"The checkpoint file {uri} is not a Delta checkpoint: {problem}.", path=uri)


def _drop_nulls(row: dict[str, Any]) -> dict[str, Any]:
    # Parquet gives absent optional fields as None; the JSON form omits them.
    return {k: v for k, v in row.items() if v is not None}


def _row_groups_with_values(
    parquet: pq.ParquetFile, columns: list[str], leaves: dict[str, list[_Leaf]] | None = None
) -> list[int]:
    """Row groups where any of ``columns`` may be non-null, judged by column statistics.

    A checkpoint of a million files has a handful of non-file rows; statistics let the
    reader skip every row group that holds only add rows.
    """
    metadata = parquet.metadata
    leaves = leaves if leaves is not None else _action_leaves(parquet)
    wanted = [[leaf.index for leaf in leaves.get(c, [])] for c in columns]
    if any(not indexes for indexes in wanted):
        return list(range(metadata.num_row_groups))
    groups = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        if any(not all(_all_null(row_group, i) for i in indexes) for indexes in wanted):
            groups.append(group)
    return groups


def _all_null(row_group: pq.RowGroupMetaData, column: int) -> bool:
    stats = row_group.column(column).statistics
    if stats is None or not stats.has_null_count:
        return False
    return bool(stats.null_count >= row_group.num_rows)


def _open_parquet(
    storage: LogStore, path: str, footers: dict[str, pq.FileMetaData] | None = None
) -> pq.ParquetFile:
    """A checkpoint file opened; with ``footers``, its footer is taken from there when it was read
    before (the files are never rewritten under their name), and kept there when not."""
    uri = storage.to_uri(path)
    try:
        source = path if storage.is_local else storage.arrow_fs.open_input_file(path)
        if footers is None:
            return pq.ParquetFile(source)
        parquet = pq.ParquetFile(source, metadata=footers.get(path))
        footers.setdefault(path, parquet.metadata)
        return parquet
    except FileNotFoundError:
        raise CorruptLogError(
            f"The checkpoint file {uri} is missing: it disappeared while the table was being read.",
            path=uri,
        ) from None
    except (OSError, pa.ArrowException) as err:
        raise _corrupt_checkpoint(uri, err) from None


def _read_checkpoint_bytes(storage: LogStore, path: str) -> bytes:
    try:
        return storage.read_bytes(path)
    except FileNotFoundError:
        uri = storage.to_uri(path)
        raise CorruptLogError(f"The checkpoint file {uri} is missing.", path=uri) from None


def _corrupt_checkpoint(uri: str, err: Exception) -> CorruptLogError:
    return CorruptLogError(
        f"The checkpoint file {uri} cannot be read ({err}); it is truncated or corrupt.", path=uri
    )


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
) -> FileState:
    """Active files (and, if asked, unexpired tombstones) of the segment's version."""
    tail_adds, tail_removes, touched = _reconcile_commits(storage, commits, _partition_keys(small))
    checkpoint_adds, checkpoint_removes = _read_checkpoint_files(
        storage, segment.checkpoint, small, removes=tombstones
    )
    if touched:
        checkpoint_adds = _drop_touched(checkpoint_adds, touched, storage.path)
        if tombstones:
            checkpoint_removes = _drop_touched(checkpoint_removes, touched, storage.path)
    adds = pa.concat_tables([checkpoint_adds, tail_adds]) if tail_adds.num_rows else checkpoint_adds
    removes = arrow_table([], REMOVE_SCHEMA)
    if tombstones:
        removes = pa.concat_tables([checkpoint_removes, tail_removes])
        retention = TableConfig(small.metadata.configuration).deleted_file_retention.value
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        cutoff = now - int(retention.total_seconds() * 1000)
        timestamps = pc.fill_null(removes.column("deletionTimestamp"), _ZERO)
        removes = removes.filter(pc.greater(timestamps, scalar(cutoff, pa.int64())))
    return FileState(adds=adds, removes=removes)


@dataclass
class TouchedKeys:
    """Every (canonical path, DV id) key the commits after a checkpoint touched.

    :param key_values: the keys, as Arrow strings (repeats allowed);
    :param path_values: their canonical paths (repeats allowed: ``pc.is_in`` takes them as they
        are, and making them distinct first costs more than the lookup). The keys are made
        distinct only when asked (a log without a checkpoint never asks).
    """

    key_values: pa.Array
    path_values: pa.Array

    @functools.cached_property
    def keys(self) -> set[str]:
        return set(self.key_values.unique().to_pylist())

    def __bool__(self) -> bool:
        return len(self.key_values) > 0


#: Fewer ``add``/``remove`` lines than this (the usual tail after a checkpoint) take the exact
#: route: below it the JSON reader's fixed cost outweighs what it saves (both routes answer the
#: same; measured crossover 150-200 lines).
COLUMNAR_MIN_FILE_LINES = 128


def _reconcile_commits(
    storage: LogStore, commits: list[CommitActions], partition_columns: Sequence[str] = ()
) -> tuple[pa.Table, pa.Table, TouchedKeys]:
    """The commits' winning adds and removes, and every key the commits touched.

    The columnar route (:func:`_columnar_file_actions`) answers long tails when it can do so
    exactly; otherwise every line takes the exact route (``json`` and :func:`action_problem` per action),
    which also names the file and line of a malformed action.
    """
    if sum(commit.file_line_count for commit in commits) >= COLUMNAR_MIN_FILE_LINES:
        columnar = _columnar_file_actions(storage.path, commits, partition_columns)
        if columnar is not None:
            return columnar
    return _reconcile_exact(storage, commits)


def _reconcile_exact(
    storage: LogStore, commits: list[CommitActions]
) -> tuple[pa.Table, pa.Table, TouchedKeys]:
    """:func:`_reconcile_commits` one parsed action at a time."""
    rows: list[dict[str, Any]] = []
    paths: list[str] = []
    keys: list[str] = []
    is_add: list[bool] = []
    canonical = storage.path.canonical
    # Every action here passed action_problem: path, types and ranges are as the protocol says.
    for commit, actions in segment_file_actions(commits):
        for action in actions:
            if "add" in action:
                row, flag = action["add"], True
            elif "remove" in action:
                row, flag = action["remove"], False
            else:
                continue
            rows.append(row)
            path = canonical(row["path"])
            if not path.isascii():
                _require_unicode(path, commit.path)
            paths.append(path)
            keys.append(_key(path, deletion_vector_unique_id(row.get("deletionVector"))))
            is_add.append(flag)
    touched = TouchedKeys(strings(keys), strings(paths))
    if not keys:
        return arrow_table([], ADD_SCHEMA), arrow_table([], REMOVE_SCHEMA), touched
    winners = _last_per_key(keys)
    adds = [rows[i] for i in winners if is_add[i]]
    removes = [rows[i] for i in winners if not is_add[i]]
    return (
        _rows_to_table(adds, ADD_SCHEMA) if adds else arrow_table([], ADD_SCHEMA),
        _rows_to_table(removes, REMOVE_SCHEMA) if removes else arrow_table([], REMOVE_SCHEMA),
        touched,
    )


def _require_unicode(path: str, where: str) -> None:
    """Refuse a path ``json`` decoded from a lone surrogate escape (``"\\ud800"``): no file has it."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise CorruptLogError(
            f"A file action in {where} has the path {path[:200]!r}, which is not valid Unicode (a lone "
            f"surrogate escape). The log is corrupt; restore the file from a backup.",
            path=where,
        ) from None


def _last_per_key(keys: list[str]) -> list[int]:
    """Positions of the newest action per key, in log order.

    A dict keeps each key's last position (no Arrow group-by, whose first use imports
    pyarrow.dataset, and with it pandas).
    """
    return sorted(dict(zip(keys, range(len(keys)), strict=True)).values())


def _key(path: str, dv_id: str | None) -> str:
    return f"{path}\x00{dv_id}" if dv_id is not None else path


def _rows_to_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    try:
        return arrow_table(rows, schema)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as err:  # checked before: a bug if hit
        raise CorruptLogError(f"A file action in the log has a field of the wrong type: {err}") from None


def _read_checkpoint_files(
    storage: LogStore, checkpoint: Checkpoint | None, small: SmallState, *, removes: bool
) -> tuple[pa.Table, pa.Table]:
    if checkpoint is None:
        return arrow_table([], ADD_SCHEMA), arrow_table([], REMOVE_SCHEMA)
    add_parts: list[pa.Table] = []
    remove_parts: list[pa.Table] = []
    sources = [p for p in checkpoint.paths if not p.endswith(".json")] + small.sidecars
    for path in sources:
        uri = storage.to_uri(path)
        parquet = _open_parquet(storage, path, small.footers)
        schema = parquet.schema_arrow
        _check_checkpoint_schema(schema, uri)
        wanted = [c for c in ("add", "remove") if c in schema.names and (c == "add" or removes)]
        if not wanted:
            continue
        try:
            table = _read_columns(storage, path, parquet.metadata, wanted)
        except (OSError, pa.ArrowException) as err:
            raise _corrupt_checkpoint(uri, err) from None
        if "add" in wanted:
            add_parts.append(_checkpoint_file_rows(table.column("add"), ADD_SCHEMA, "add", uri))
        if "remove" in wanted:
            remove_parts.append(_checkpoint_file_rows(table.column("remove"), REMOVE_SCHEMA, "remove", uri))
    if small.checkpoint_file_actions:
        json_adds = [a["add"] for a in small.checkpoint_file_actions if "add" in a]
        json_removes = [a["remove"] for a in small.checkpoint_file_actions if "remove" in a]
        if json_adds:
            add_parts.append(_rows_to_table(json_adds, ADD_SCHEMA))
        if json_removes and removes:
            remove_parts.append(_rows_to_table(json_removes, REMOVE_SCHEMA))
    adds = pa.concat_tables(add_parts) if add_parts else arrow_table([], ADD_SCHEMA)
    tombstones = pa.concat_tables(remove_parts) if remove_parts else arrow_table([], REMOVE_SCHEMA)
    return adds, tombstones


def _read_columns(storage: LogStore, path: str, metadata: pq.FileMetaData, columns: list[str]) -> pa.Table:
    """``columns`` of a Parquet file, its row groups decoded in parallel, in file order.

    What ``pq.read_table`` does, without its dataset machinery (whose first import costs
    tens of milliseconds and imports pandas): each worker reads a contiguous run of row groups
    through a reader of its own, sharing the footer already read.
    """
    groups = metadata.num_row_groups
    workers = min(groups, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2, 8)

    def read(run: range) -> pa.Table:
        source = path if storage.is_local else storage.arrow_fs.open_input_file(path)
        reader = pq.ParquetFile(source, metadata=metadata, pre_buffer=True)
        return reader.read_row_groups(list(run), columns=columns, use_threads=False)

    if workers <= 1:
        return read(range(groups))
    runs = [range(i * groups // workers, (i + 1) * groups // workers) for i in range(workers)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return pa.concat_tables(list(pool.map(read, runs)))


#: Fields a checkpoint's file actions must not leave null (the protocol's required fields).
_REQUIRED_FILE_FIELDS = {
    "add": ("path", "partitionValues", "size", "modificationTime", "dataChange"),
    "remove": ("path", "dataChange"),
}


def _checkpoint_file_rows(column: pa.ChunkedArray, schema: pa.Schema, kind: str, uri: str) -> pa.Table:
    """A checkpoint's ``add``/``remove`` column as a flat table, after the columnar equivalent of
    :func:`~.action_checks.action_problem` (required fields, sizes, paths that stay under the root).

    :raises CorruptLogError: naming the file and the 1-based row of the first bad action.
    """
    try:
        flat = _conform_actions(column, schema)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as err:
        raise CorruptLogError(
            f"The checkpoint file {uri} is not a readable Delta checkpoint: its {kind!r} column does not "
            f"hold {kind} actions ({err}).",
            path=uri,
        ) from None
    bad = _first_bad_file_row(flat, kind)
    if bad is None:
        return flat
    index, problem = bad
    valid = to_bools(pc.is_valid(column))
    row = int(np.flatnonzero(valid)[index]) + 1
    raise malformed_action_error(f"Row {row} of the checkpoint {uri}", problem, None, {kind: None}, uri)


def _first_bad_file_row(flat: pa.Table, kind: str) -> tuple[int, str] | None:
    """(row, problem) of the first row that breaks the protocol, or None: null checks and minima
    over whole columns, per-row work only for the rows a byte scan cannot clear."""
    if flat.num_rows == 0:
        return None
    for name in _REQUIRED_FILE_FIELDS[kind]:
        values = flat.column(name)
        if values.null_count:
            return _index_of(pc.is_null(values)), f"{kind}.{name} is null"
    paths = flat.column("path")
    empty = _first_index(pc.equal(pc.binary_length(paths), _ZERO))
    if empty is not None:
        return empty, f"{kind}.path is empty"
    sizes = flat.column("size")
    smallest = pc.min(sizes).as_py()
    if smallest is not None and smallest < 0:
        index = _index_of(pc.less(sizes, _ZERO))
        return index, f"{kind}.size is {sizes[index].as_py()}; it must not be negative"
    if _may_climb(paths):
        for index, path in enumerate(paths.to_pylist()):
            if escapes_root(path):
                return index, (
                    f"{kind}.path {path[:80]!r} is relative and leads out of the table root through '..'; "
                    f"the core never reads outside the table root"
                )
    dvs = flat.column("deletionVector")
    if dvs.null_count < len(dvs):
        return _first_bad_deletion_vector(dvs, kind)
    return None


def _first_bad_deletion_vector(dvs: pa.ChunkedArray, kind: str) -> tuple[int, str] | None:
    present = pc.is_valid(dvs)
    where = f"{kind}.deletionVector"
    storage_type = pc.struct_field(dvs, "storageType")
    known = pc.fill_null(pc.is_in(storage_type, strings(["u", "i", "p"])), _FALSE)
    bad_type = pc.and_(present, pc.invert(known))
    index = _first_index(bad_type)
    if index is not None:
        return index, f"{where}.storageType must be 'u', 'i' or 'p', got {storage_type[index].as_py()!r}"
    for name in ("pathOrInlineDv", "sizeInBytes", "cardinality"):
        index = _first_index(pc.and_(present, pc.is_null(pc.struct_field(dvs, name))))
        if index is not None:
            return index, f"{where}.{name} is null"
    values = pc.struct_field(dvs, "pathOrInlineDv")
    stored = pc.and_(present, pc.not_equal(storage_type, _INLINE))
    if _may_climb(values.filter(stored)):
        types, texts = storage_type.to_pylist(), values.to_pylist()
        for index, (dv_type, text) in enumerate(zip(types, texts, strict=True)):
            if dv_type == "u":
                escapes = escapes_root(f"{text[:-20]}/deletion_vector.bin")
            else:
                escapes = dv_type == "p" and escapes_root(text)
            if escapes:
                return index, f"{where}.pathOrInlineDv {text[:80]!r} leads out of the table root through '..'"
    return None


def _first_index(mask: pa.ChunkedArray | pa.Array) -> int | None:
    """The first position where ``mask`` is true, or None."""
    index = int(pc.index(mask, _TRUE).as_py())
    return index if index >= 0 else None


def _index_of(mask: pa.ChunkedArray | pa.Array) -> int:
    """The first position where ``mask`` is true, which the caller knows exists."""
    index = _first_index(mask)
    if index is None:
        raise AssertionError("no true value in a mask known to hold one")
    return index


def _may_climb(strings: pa.ChunkedArray | pa.Array) -> bool:
    """Whether any string may hold a ``..`` segment, plain or URL-encoded (``%2E``).

    A scan of the string data buffers as 16-bit pairs at both alignments, without copying
    them: tens of milliseconds for a million paths, where per-string compute kernels (or a
    regular expression) take several times that. False positives (``a..b``) only cost the
    exact per-row check.
    """
    chunks = strings.chunks if isinstance(strings, pa.ChunkedArray) else [strings]
    for chunk in chunks:
        if len(chunk) == 0 or chunk.null_count == len(chunk):
            continue
        offset_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], dtype=offset_type)
        offsets = offsets[chunk.offset : chunk.offset + len(chunk) + 1]
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        for start in (0, 1):
            pairs = data[start : start + (data.size - start) // 2 * 2].view(np.uint16)
            if (pairs == _DOT_DOT).any():
                return True
            # An encoded dot: '%2' followed by 'E' or 'e' ('%20' and the like are common).
            after = np.flatnonzero(pairs == _PERCENT_TWO) * 2 + start + 2
            after = after[after < data.size]
            if after.size and np.isin(data[after], _CAPITAL_OR_SMALL_E).any():
                return True
    return False


def _has_pair(data: bytearray, pair: np.uint16) -> bool:
    """Whether two bytes (``pair``, as one 16-bit value) follow each other somewhere in ``data``.

    ``b"\\u" in data`` takes ~1 ms per MB of log text, whose stats strings hold a backslash
    every ~15 bytes; comparing 16-bit pairs at both alignments takes an eighth of that.
    """
    raw = np.frombuffer(data, dtype=np.uint8)
    mask = np.empty(min(_PAIR_CHUNK, raw.size // 2), dtype=bool)  # small and reused: fresh memory costs
    for start in (0, 1):
        pairs = raw[start : start + (raw.size - start) // 2 * 2].view(np.uint16)
        for begin in range(0, len(pairs), _PAIR_CHUNK):
            part = pairs[begin : begin + _PAIR_CHUNK]
            if np.equal(part, pair, out=mask[: len(part)]).any():
                return True
    return False


_PAIR_CHUNK = 1 << 19


_UNICODE_ESCAPE = np.frombuffer(b"\\u", dtype=np.uint16)[0]
_DOT_DOT = np.frombuffer(b"..", dtype=np.uint16)[0]
_PERCENT_TWO = np.frombuffer(b"%2", dtype=np.uint16)[0]
_CAPITAL_OR_SMALL_E = np.frombuffer(b"Ee", dtype=np.uint8)


def _conform_actions(column: pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    """Rows of a checkpoint action column where the action is present, as a flat table."""
    chunks = []
    for chunk in column.chunks:
        for piece in _valid_runs(chunk):
            chunks.append(_flatten(piece, schema))
    if not chunks:
        return arrow_table([], schema)
    return pa.Table.from_batches(chunks, schema=schema)


def _valid_runs(chunk: pa.StructArray) -> list[pa.StructArray]:
    """The non-null stretches of a struct array, as zero-copy slices where they are few.

    Checkpoint rows are one action each, so the add column is null on the few protocol,
    metadata and txn rows; slicing around them avoids copying a million rows' strings.
    """
    if chunk.null_count == 0:
        return [chunk]
    if chunk.null_count == len(chunk):
        return []
    valid = to_bools(chunk.is_valid())
    edges = np.flatnonzero(np.diff(np.concatenate(([False], valid, [False])).astype(np.int8)))
    starts, ends = edges[0::2], edges[1::2]
    if len(starts) > 256:
        return [chunk.filter(from_numpy(valid))]
    return [chunk.slice(int(s), int(e - s)) for s, e in zip(starts, ends, strict=True)]


def _flatten(struct: pa.StructArray, schema: pa.Schema) -> pa.RecordBatch:
    struct_type = struct.type
    arrays = []
    for target in schema:
        index = struct_type.get_field_index(target.name)
        if index < 0:
            if target.name == "stats":
                arrays.append(_stats_from_parsed(struct))
                continue
            arrays.append(pa.nulls(len(struct), target.type))
            continue
        arrays.append(_conform(struct.field(index), target.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast a checkpoint column to the type this core uses, field by field for structs."""
    if array.type == target:
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = []
        for child in target:
            index = array.type.get_field_index(child.name)
            children.append(
                _conform(array.field(index), child.type) if index >= 0 else pa.nulls(len(array), child.type)
            )
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    return array.cast(target)


def _stats_from_parsed(struct: pa.StructArray) -> pa.Array:
    """``stats`` as JSON from ``stats_parsed`` for checkpoints written without JSON stats."""
    index = struct.type.get_field_index("stats_parsed")
    if index < 0:
        return pa.nulls(len(struct), pa.string())
    parsed = struct.field(index).to_pylist()
    return strings(
        [None if p is None else json.dumps(p, default=_json_scalar, separators=(",", ":")) for p in parsed]
    )


def _json_scalar(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text.replace("+00:00", "Z")
    return str(value)


# --- file actions, columnar ------------------------------------------------------------

_TEXT = pa.string()
_LONG = pa.int64()
#: A deletion vector as read from JSON: every integer as a long, range-checked on the exact route.
_JSON_DELETION_VECTOR = pa.struct(
    [
        ("storageType", _TEXT),
        ("pathOrInlineDv", _TEXT),
        ("offset", _LONG),
        ("sizeInBytes", _LONG),
        ("cardinality", _LONG),
        ("maxRowIndex", _LONG),
    ]
)
#: Fields of a file action the columnar route reads as Arrow; any other field the protocol
#: defines (``tags``) sends its line to the exact route when it is not null.
_EXACT_ONLY_FIELDS = ("tags",)


def _partition_keys(small: SmallState) -> tuple[str, ...]:
    """The keys of ``partitionValues`` in the log: the partition columns, by their physical names
    under column mapping. (A wrong guess costs only speed: such lines take the exact route.)"""
    columns = small.metadata.partition_columns
    try:
        if not columns or column_mapping_mode(small.protocol, small.metadata) == "none":
            return columns
        fields = json.loads(small.metadata.schema_string).get("fields") or []
    except (DeltaError, ValueError, AttributeError):
        return columns
    by_name = {f.get("name"): f for f in fields if isinstance(f, dict)}
    return tuple(str(delta_physical_name(by_name[c])) if c in by_name else c for c in columns)


def _json_file_schema(partition_columns: Sequence[str]) -> pa.Schema:
    """The ``add``/``remove`` lines as Arrow's JSON reader reads them, ``partitionValues`` as a
    struct of the partition columns (the reader cannot build a ``map<string, string>``)."""
    values = pa.struct([(name, _TEXT) for name in partition_columns])
    add = pa.struct(
        [
            ("path", _TEXT),
            ("partitionValues", values),
            ("size", _LONG),
            ("modificationTime", _LONG),
            ("dataChange", pa.bool_()),
            ("stats", _TEXT),
            ("deletionVector", _JSON_DELETION_VECTOR),
            ("baseRowId", _LONG),
            ("defaultRowCommitVersion", _LONG),
            ("clusteringProvider", _TEXT),
        ]
    )
    remove = pa.struct(
        [
            ("path", _TEXT),
            ("deletionTimestamp", _LONG),
            ("dataChange", pa.bool_()),
            ("extendedFileMetadata", pa.bool_()),
            ("partitionValues", values),
            ("size", _LONG),
            ("stats", _TEXT),
            ("deletionVector", _JSON_DELETION_VECTOR),
            ("baseRowId", _LONG),
            ("defaultRowCommitVersion", _LONG),
        ]
    )
    return pa.schema([("add", add), ("remove", remove)])


def _columnar_file_actions(
    root: TablePath, commits: list[CommitActions], partition_columns: Sequence[str]
) -> tuple[pa.Table, pa.Table, TouchedKeys] | None:
    """:func:`_reconcile_commits` with the ``add``/``remove`` lines parsed by Arrow's JSON reader
    against an explicit schema, checked and reconciled column by column; None when the exact
    route must answer.

    Exactness: Arrow's reader refuses every value of the wrong JSON type, integers out of
    ``long`` range or written as floats, duplicate keys and invalid JSON (then None: the
    exact route parses the lines again and names the bad one). It accepts invalid UTF-8 and
    lone surrogates, which ``json`` refuses, so those send the segment to the exact route
    before it runs. Unknown fields are inferred, then ignored, as the exact route ignores
    them; a line with another top-level key, or with partition values outside the table's
    partition columns, sends the segment to the exact route. Lines Arrow cannot represent
    exactly take the exact route one by one: ``tags`` (a map), deletion vectors (their id is
    part of the key, their integers are range-checked), a missing or null partition value (a
    struct cannot tell them apart, a map can), partition values not written in the order of
    the partition columns (a map keeps the order of the line).
    """
    found = segment_file_lines(commits)
    if found is None:
        return None
    data, starts = found
    count = starts[-1]
    if not count:
        return (
            arrow_table([], ADD_SCHEMA),
            arrow_table([], REMOVE_SCHEMA),
            TouchedKeys(strings([]), strings([])),
        )
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if _has_pair(data, _UNICODE_ESCAPE) and _SURROGATE_ESCAPE.search(data):
        return None  # escaped surrogates: json and Arrow may disagree on a lone one
    schema = _json_file_schema(partition_columns)
    try:
        parsed = pa_json.read_json(
            pa.py_buffer(data),
            parse_options=pa_json.ParseOptions(
                explicit_schema=_json_declared_schema(schema), unexpected_field_behavior="infer"
            ),
            memory_pool=READ_POOL,
        )
    except (pa.ArrowException, ValueError):
        return None
    del data  # the text of every line, no longer needed: a lower peak
    if parsed.num_rows != count or parsed.schema.names[:2] != ["add", "remove"]:
        return None
    # Keys beside the action that are no action the protocol defines are ignored, as the exact
    # route ignores them; another action on the line is refused there.
    if any(action_problem({name: None}) is not None for name in parsed.schema.names[2:]):
        return None
    add = parsed.column("add")
    remove = parsed.column("remove")
    is_add = to_bools(add.is_valid())
    is_remove = to_bools(remove.is_valid())
    if (is_add == is_remove).any():
        return None  # a line with both actions, or with a null one: the exact route refuses it
    add_fields = _typed_fields(add, schema.field("add").type)
    remove_fields = _typed_fields(remove, schema.field("remove").type)
    if add_fields is None or remove_fields is None:
        return None  # a field of another type than the protocol's: the exact route names it
    lines = functools.cache(lambda: [line for c in commits for _, line in c.file_lines])
    exact = np.zeros(count, dtype=bool)
    for fields, expected in (
        (add_fields, schema.field("add").type),
        (remove_fields, schema.field("remove").type),
    ):
        if not _mark_exact_rows(fields, expected, partition_columns, lines, exact):
            return None
    # The checks of a checkpoint's file rows (the columnar action_problem); the exact route
    # names the line of a bad one.
    if _first_bad_file_row(_rows_of(add_fields, is_add), "add") is not None:
        return None
    if _first_bad_file_row(_rows_of(remove_fields, is_remove), "remove") is not None:
        return None
    # The exact route for the lines Arrow cannot represent: parsed, checked, named when bad.
    exact_rows = np.flatnonzero(exact)
    exact_actions: dict[int, dict[str, Any]] = {}
    for index in exact_rows.tolist():
        commit, number, line = file_line_origin(commits, starts, index)
        action = parse_line(line, commit.path, number)
        problem = action_problem(action)
        if problem is not None:
            raise malformed_action_error(
                f"Line {number} of {commit.path}", problem, line, action, commit.path
            )
        exact_actions[index] = action["add"] if "add" in action else action["remove"]
    paths_array = pc.coalesce(add_fields["path"], remove_fields["path"])
    if _any_needs_canonical(pa.chunked_array([paths_array])):
        paths_array = strings([root.canonical(p) for p in paths_array.to_pylist()])
    dv_ids = {i: deletion_vector_unique_id(row.get("deletionVector")) for i, row in exact_actions.items()}
    dv_ids = {i: unique for i, unique in dv_ids.items() if unique is not None}
    key_values = paths_array
    if dv_ids:
        keys = paths_array.to_pylist()
        for index, unique in dv_ids.items():
            keys[index] = _key(keys[index], unique)
        key_values = strings(keys)
    touched = TouchedKeys(key_values, paths_array)
    winners = _last_positions(key_values)
    adds = _winning_rows(winners[is_add[winners]], add_fields, exact, exact_actions, ADD_SCHEMA)
    removes = _winning_rows(winners[is_remove[winners]], remove_fields, exact, exact_actions, REMOVE_SCHEMA)
    for commit in commits:
        commit._files_checked = True
    return adds, removes, touched


def _last_positions(keys: pa.Array) -> np.ndarray:
    """Positions of the last occurrence of each key, ascending (what :func:`_last_per_key` gives)."""
    encoded = pc.dictionary_encode(keys)  # no nulls: every key is a path
    if len(encoded.dictionary) == len(keys):
        return np.arange(len(keys))  # every key once (a tail of new files): no sort
    indices = encoded.indices
    # Read from the buffer: ``to_numpy`` and ``np.asarray`` import pandas.
    codes = np.frombuffer(
        indices.buffers()[1], dtype=np.int64 if pa.types.is_int64(indices.type) else np.int32
    )
    codes = codes[indices.offset : indices.offset + len(indices)]
    _, first_from_end = np.unique(codes[::-1], return_index=True)
    return np.sort(len(codes) - 1 - first_from_end)


def _json_declared_schema(schema: pa.Schema) -> pa.Schema:
    """What the reader is told of :func:`_json_file_schema`: the strings (it would read a text
    that looks like a date as a timestamp) and the partition values; it infers the other fields
    (twice as fast as converting them to declared types), and :func:`_typed_fields` checks them."""
    return pa.schema(
        [
            (kind.name, pa.struct([f for f in kind.type if f.type == _TEXT or f.name == "partitionValues"]))
            for kind in schema
        ]
    )


def _typed_fields(
    column: pa.ChunkedArray, expected: pa.StructType
) -> dict[str, pa.Array | pa.ChunkedArray] | None:
    """The fields of one action as read (one array each, ``stats`` in the reader's chunks), each
    of its ``expected`` type (absent or all null: nulls of that type); None when one was
    inferred as another type (a float, a string for a number, ...). Fields the protocol does
    not define are kept as inferred."""
    count = len(column)
    struct_type = column.type
    fields: dict[str, pa.Array | pa.ChunkedArray] = {}
    for index in range(struct_type.num_fields):
        child = struct_type.field(index)
        # ``StructArray.field`` ignores the struct's own validity; rows of the other action are
        # null in every field, as the reader fills them.
        parts = [chunk.field(index) for chunk in column.chunks]
        if child.name in _KEPT_IN_CHUNKS:
            fields[child.name] = pa.chunked_array(parts, type=child.type)
        else:
            fields[child.name] = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    for target in expected:
        found = fields.get(target.name)
        if found is None or pa.types.is_null(found.type):
            fields[target.name] = pa.nulls(count, target.type)
        elif target.name == "deletionVector":
            continue  # rows with one take the exact route
        elif found.type != target.type:
            return None
    return fields


#: Fields left in the JSON reader's chunks (one per ~1 MB block): the long texts, which the
#: file list only passes on; joining them was a copy of ~2 MB per 10,000 lines into fresh memory.
_KEPT_IN_CHUNKS = frozenset({"stats"})


def _mark_exact_rows(
    fields: dict[str, pa.Array],
    expected: pa.StructType,
    partition_columns: Sequence[str],
    lines: Callable[[], list[bytes]],
    exact: np.ndarray,
) -> bool:
    """Mark in ``exact`` the rows of one action only the exact route represents; False when
    the whole segment must take the exact route."""
    for name in _EXACT_ONLY_FIELDS:
        if name in fields and expected.get_field_index(name) < 0:
            exact |= to_bools(fields[name].is_valid())
    exact |= to_bools(fields["deletionVector"].is_valid())
    values = fields["partitionValues"]
    if values.type.num_fields != len(partition_columns):
        return False  # keys outside the partition columns: which rows hold them, a struct cannot say
    present = to_bools(values.is_valid())
    for index in range(values.type.num_fields):
        exact |= present & to_bools(values.field(index).is_null())
    if len(partition_columns) > 1 and present.any():
        exact |= present & ~_values_in_column_order(lines(), partition_columns)
    return True


def _values_in_column_order(lines: list[bytes], partition_columns: Sequence[str]) -> np.ndarray:
    """Per line, whether its one ``partitionValues`` object lists the partition columns in
    their order (a map keeps the order of the line, a struct the order of the schema)."""
    value = r'\s*:\s*(?:null|"(?:[^"\\]|\\.)*")\s*'
    keys = ",".join(f'\\s*"{_re2_literal(name)}"{value}' for name in partition_columns)
    texts = strings([line.decode("utf-8") for line in lines])
    ordered = pc.match_substring_regex(texts, r'"partitionValues"\s*:\s*\{' + keys + r"\}")
    once = pc.equal(pc.count_substring(texts, '"partitionValues"'), scalar(1, pa.int32()))
    return to_bools(pc.and_(ordered, once))


def _re2_literal(text: str) -> str:
    """``text`` as a regular expression (RE2 syntax) matching exactly it."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"\\x{{{ord(c):X}}}" for c in text)


def _rows_of(fields: dict[str, pa.Array], present: np.ndarray) -> pa.Table:
    """The rows of one action, with the fields :func:`_first_bad_file_row` checks."""
    names = ("path", "partitionValues", "size", "modificationTime", "dataChange")
    if present.all():  # (a tail of adds only: no copy)
        columns = {name: fields[name] for name in names if name in fields}
    else:
        mask = from_numpy(present)
        columns = {name: fields[name].filter(mask) for name in names if name in fields}
    # Rows with a deletion vector take the exact route, which checks it.
    columns["deletionVector"] = pa.nulls(int(present.sum()), DELETION_VECTOR_TYPE)
    return pa.table(columns)


def _winning_rows(
    rows: np.ndarray,
    fields: dict[str, pa.Array],
    exact: np.ndarray,
    exact_actions: dict[int, dict[str, Any]],
    schema: pa.Schema,
) -> pa.Table:
    """The winning rows of one action, in log order, as ``schema``: Arrow's columns where the
    row took the columnar route, the exact route's values where it did not."""
    if not len(rows):
        return arrow_table([], schema)
    from_arrow = rows[~exact[rows]]
    from_python = rows[exact[rows]]
    # Every line is a winner of this action on the columnar route (a tail of adds of distinct
    # files, the usual case): Arrow's columns as they are, no copy.
    every = len(from_arrow) == len(fields["path"])

    def pick(values: pa.Array) -> pa.Array:
        return values if every else values.take(from_numpy(from_arrow))

    columns = []
    for target in schema:
        if target.name == "partitionValues":
            columns.append(_struct_to_map(pick(fields[target.name])))
        elif target.name in ("tags", "deletionVector") or target.name not in fields:
            columns.append(pa.nulls(len(from_arrow), target.type))
        else:
            columns.append(pick(fields[target.name]))
    table = pa.Table.from_arrays(columns, schema=schema)
    if not len(from_python):
        return table
    python_rows = _rows_to_table([exact_actions[i] for i in from_python.tolist()], schema)
    # Back to log order: the Arrow rows first, then the exact ones, each at its place.
    order = np.argsort(np.concatenate([from_arrow, from_python]), kind="stable")
    return pa.concat_tables([table, python_rows]).take(from_numpy(order))


def _struct_to_map(values: pa.StructArray) -> pa.Array:
    """Partition values read as a struct (every field present) as the ``map<string, string>``
    of the log, keys in the order of the partition columns."""
    count = len(values)
    width = values.type.num_fields
    names = [values.type.field(i).name for i in range(width)]
    present = to_bools(values.is_valid())
    sizes = np.where(present, width, 0)
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    if width:
        rows = np.flatnonzero(present)
        items = pc.take(
            pa.concat_arrays([values.field(i) for i in range(width)]),
            from_numpy((np.arange(width)[None, :] * count + rows[:, None]).ravel()),
        )
        keys = strings(names).take(from_numpy(np.tile(np.arange(width), len(rows))))
    else:
        items, keys = strings([]), strings([])
    mask = from_numpy(~present) if not present.all() else None
    return pa.MapArray.from_arrays(from_numpy(offsets), keys, items, type=_STRING_MAP, mask=mask)


# --- paths -----------------------------------------------------------------------------


def _drop_touched(table: pa.Table, touched: TouchedKeys, root: TablePath) -> pa.Table:
    """Checkpoint rows whose (canonical path, DV id) the commits after it did not touch."""
    if table.num_rows == 0:
        return table
    paths = table.column("path")
    if _any_needs_canonical(paths):
        canonical = strings([root.canonical(p) for p in paths.to_pylist()])
    else:
        canonical = paths
    # Whether any is touched, from a set of the smaller side (a set of 1,000 checkpoint paths
    # costs a third of one of 10,000 tail paths); which ones, only when some are.
    smaller = len(canonical) < len(touched.path_values)
    if smaller and not pc.any(pc.is_in(touched.path_values, value_set=canonical)).as_py():
        return table
    candidates = pc.is_in(canonical, value_set=touched.path_values)
    if not pc.any(candidates).as_py():
        return table
    positions = np.flatnonzero(to_bools(candidates))
    dvs = table.column("deletionVector").take(from_numpy(positions)).to_pylist()
    canonical_at = canonical.take(from_numpy(positions)).to_pylist()
    keep = np.ones(table.num_rows, dtype=bool)
    for position, path, dv in zip(positions, canonical_at, dvs, strict=True):
        if _key(path, deletion_vector_unique_id(dv)) in touched.keys:
            keep[position] = False
    return table.filter(from_numpy(keep))


def _any_needs_canonical(paths: pa.ChunkedArray) -> bool:
    """Whether any path is absolute, a URI or URL-encoded (and so needs ``TablePath.canonical``).

    Scans the string data buffers directly: a byte search over a million paths costs a
    few milliseconds, where per-string compute kernels cost a hundred.
    """
    for chunk in paths.chunks:
        if len(chunk) == 0:
            continue
        offset_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], dtype=offset_type)[
            chunk.offset : chunk.offset + len(chunk) + 1
        ]
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        raw = data.tobytes()
        if b"%" in raw or b":" in raw:
            return True
        ends, begins = np.asarray(offsets[1:]), np.asarray(offsets[:-1])
        starts = begins[ends > begins] - offsets[0]
        if (data[starts] == ord("/")).any():
            return True
    return False
