"""What the Delta view shows of one table: history, health (with the cursors of the consumers that
commit into it) and maintenance, read through the core.

Every function here only reads: listings of ``_delta_log``, the commit files shown, the latest
snapshot's file state (a checkpoint plus the commits after it) and, on request, a VACUUM dry
run. Nothing writes or deletes. The answers are JSON-native dicts; the API (``app.py``) redacts
them once more before they leave the server.

``commitInfo`` is free-form (other engines write ``tags`` as a string, ``operationParameters``
as a string, ``userMetadata`` that is not an object, values nested at any depth): every field is
read by its expected shape and anything else is shown as short text, never trusted to be a dict.
Table properties are read through the core's ``TableConfig``, the one parser of their values.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import DeltaError, InvalidTablePropertyError
from airflow_delta_provider.core.log import (
    CommitTimeRule,
    LogFileKind,
    commit_counts,
    commit_name,
    commit_timestamps,
    complete_checkpoints,
    history,
    info_integer,
    info_object,
    list_log_files,
)
from airflow_delta_provider.core.maintenance import read_last_vacuum_info
from airflow_delta_provider.core.protocol import (
    DATA_RETENTION,
    FEATURES,
    Operation,
    features_in_use,
    reader_features,
    supports,
    to_interval,
    writer_features,
)
from airflow_delta_provider.core.table import (
    checkpoint_due,
    cleanup_due,
    commit_partitions,
    consumer_partition,
    parse_consumer_app_id,
    vacuum_due,
)
from airflow_delta_provider.core.utils import masked_options

if TYPE_CHECKING:
    from airflow_delta_provider.core.log import Snapshot
    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.table import DeltaTable

__all__ = [
    "MAX_HISTORY",
    "consumer_cursors",
    "free_text",
    "restore_target",
    "table_health",
    "table_history",
    "table_maintenance",
    "vacuum_dry_run",
]

#: The most commits one history page reads.
MAX_HISTORY = 100
#: The partitions a history entry lists, and the largest commit file whose partitions it reads.
PARTITIONS_SHOWN = 20
MAX_PARTITIONS_COMMIT_BYTES = 16 * 1024 * 1024
#: How far back the maintenance view looks for VACUUM START/END commits.
VACUUM_LOOKBACK = 100
_TAG = "airflow."
_MAINTENANCE_OPERATIONS = ("VACUUM START", "VACUUM END", "OPTIMIZE", "REORG")
#: How much of a free-form commitInfo value is shown: characters, and levels of nesting.
_TEXT_LIMIT = 500
_DEPTH_LIMIT = 8
#: The metrics of each column, by the names Spark/Delta and delta-rs give them (first found wins).


def _iso(ms: Any) -> str | None:
    """An epoch-milliseconds timestamp as ISO text; None when it is no date a calendar holds."""
    millis = info_integer(ms)
    if millis is None:
        return None
    try:
        return datetime.fromtimestamp(millis / 1000, tz=UTC).isoformat(timespec="seconds")
    except (OverflowError, ValueError, OSError):
        return None


def _bounded(value: Any, depth: int = 0) -> Any:
    """A JSON value cut to :data:`_DEPTH_LIMIT` levels (deeper ones become ``"..."``), so that
    turning it into text cannot exhaust the stack however deeply another engine nested it."""
    if isinstance(value, dict | list) and depth >= _DEPTH_LIMIT:
        return "..."
    if isinstance(value, dict):
        return {str(k): _bounded(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_bounded(v, depth + 1) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN is no JSON a browser parses
    return value


def free_text(value: Any) -> str | None:
    """A free-form value as short text: strings as they are, anything else as compact JSON."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(_bounded(value), separators=(",", ":"))
    return text if len(text) <= _TEXT_LIMIT else text[:_TEXT_LIMIT] + "..."


def _object(value: Any) -> dict[str, Any]:
    """A commitInfo field that should be a JSON object, by the core's reading; {} when it is none."""
    return info_object(value) or {}


def run_identity(info: dict[str, Any]) -> dict[str, Any] | None:
    """The Airflow execution that made a commit: its commitInfo tags, else its userMetadata."""
    tags = _object(info.get("tags"))
    found = {k[len(_TAG) :]: v for k, v in tags.items() if k.startswith(_TAG)}
    if not found.get("dag_id"):
        found = _object(_object(info.get("userMetadata")).get("airflow"))
    names = {key: free_text(found.get(key)) for key in ("dag_id", "task_id", "run_id")}
    if not all(names.values()):
        return None
    map_index = info_integer(found.get("map_index"))
    return {
        **names,
        "logical_date": free_text(found.get("logical_date")),
        "map_index": -1 if map_index is None else map_index,
        "try_number": max(info_integer(found.get("try_number")) or 1, 1),
        # The Airflow asset partition key of the run (a CronPartitionTimetable tick, ...).
        "partition_key": free_text(found.get("partition_key")),
    }


def _parameters(value: Any) -> dict[str, str]:
    """``operationParameters`` as text per name (Delta writes each value JSON-encoded), the values of
    options named like secrets masked, also inside a value that is an object (CREATE TABLE's
    ``properties``, Delta's JSON text of the table's properties)."""
    parameters = _object(value)
    if not parameters and value not in (None, "", {}):
        return {"value": free_text(value) or ""}
    shown = {}
    for name, item in masked_options(parameters).items():
        inner = info_object(item)
        if inner and masked_options(inner) != inner:
            item = masked_options(inner)
        shown[name] = (free_text(item) or "").strip('"')
    return shown


def _latest(table: DeltaTable) -> Snapshot | None:
    """The latest snapshot, whose metadata names the partition columns; None when the log cannot
    give it (the page still shows the commits it reads, and the one that cannot be read says so)."""
    try:
        snapshot = table.snapshot()
        snapshot.partition_columns  # noqa: B018 - reads the metadata now, inside the guard
    except DeltaError:
        return None
    return snapshot


def _partitions(snapshot: Snapshot | None, version: int) -> dict[str, Any]:
    """The partitions whose data a commit changed (the first :data:`PARTITIONS_SHOWN`), read from
    its file actions; none listed for a commit file over :data:`MAX_PARTITIONS_COMMIT_BYTES`."""
    if snapshot is None or not snapshot.partition_columns:
        return {}
    storage = snapshot.storage
    stat = storage.info(storage.log_path(commit_name(version)))
    if stat is None or stat.size > MAX_PARTITIONS_COMMIT_BYTES:
        return {"partitions": None, "partitions_count": None}
    touched = commit_partitions(snapshot, version) or []
    return {"partitions": touched[:PARTITIONS_SHOWN], "partitions_count": len(touched)}


def _entry(info: dict[str, Any], storage: LogStore, snapshot: Snapshot | None = None) -> dict[str, Any]:
    operation = free_text(info.get("operation")) or "?"
    identity = run_identity(info)
    kind = "commit"
    if operation in _MAINTENANCE_OPERATIONS or operation.startswith("VACUUM"):
        kind = "maintenance"
    elif identity is not None and identity["try_number"] > 1:
        kind = "retry"
    counts = commit_counts(storage, info)  # rows and files added and removed
    return {
        "version": info["version"],
        "timestamp": _iso(info["timestamp"]),
        "operation": operation,
        "kind": kind,
        "parameters": _parameters(info.get("operationParameters")),
        **counts,
        "engine": free_text(info.get("engineInfo")),
        "airflow": identity,
        **_partitions(snapshot, info["version"]),
    }


def table_history(table: DeltaTable, limit: int = 20, before: int | None = None) -> dict[str, Any]:
    """One page of the table's history, newest first: only the ``limit`` commit files shown are read.

    :param limit: commits on the page (1 to :data:`MAX_HISTORY`).
    :param before: show the commits before this version (the next page); None: from the latest.
    """
    if not 1 <= limit <= MAX_HISTORY:
        raise ValueError(f"limit must be between 1 and {MAX_HISTORY}, got {limit}.")
    files = list_log_files(table.storage, 0)
    commits = [f.version for f in files if f.kind is LogFileKind.COMMIT]
    latest = table.version()
    start = latest if before is None else min(latest, before - 1)
    rule = CommitTimeRule(table.snapshot)  # reads the metadata only for a commit with an in-commit timestamp
    commits_shown = history(table.storage, start, limit, rule=rule) if start >= 0 else []
    snapshot = _latest(table) if commits_shown else None  # names the partition columns
    entries = [_entry(info, table.storage, snapshot) for info in commits_shown]
    runs: dict[tuple[str, str, str, int], int] = {}
    first_of_run: set[tuple[str, str]] = set()
    for entry in reversed(entries):  # oldest first: a later commit of the same task run is a re-run
        identity = entry["airflow"]
        if identity is None:
            continue
        run = (identity["dag_id"], identity["run_id"])
        if run not in first_of_run:  # the run's oldest commit on the page offers "restore to before it"
            first_of_run.add(run)
            entry["restore_target"] = {"dag_id": run[0], "run_id": run[1]}
        key = (identity["dag_id"], identity["task_id"], identity["run_id"], identity["map_index"])
        if key in runs:
            entry["rerun_of"] = runs[key]
            if entry["kind"] == "commit":
                entry["kind"] = "retry"
        runs[key] = entry["version"]
    checkpoints = [c.version for c in complete_checkpoints(files)]
    oldest = entries[-1]["version"] if entries else None
    return {
        "latest_version": latest,
        "earliest_version": commits[0] if commits else None,
        "entries": entries,
        "checkpoints": [v for v in checkpoints if oldest is None or v >= oldest],
        "next_before": oldest if oldest is not None and commits and oldest > commits[0] else None,
    }


def restore_target(table: DeltaTable, dag_id: str, run_id: str) -> dict[str, Any]:
    """The version "restore to before this run" restores: the one before the run's first commit to the
    table, found by the run identity in commitInfo tags, as ``DeltaRestoreOperator(before_run_id=...)``
    finds it (the core's ``tagged_commits``: only the commits since an hour before the run's logical
    date are read)."""
    found = table.tagged_commits(
        {f"{_TAG}dag_id": dag_id, f"{_TAG}run_id": run_id}, not_before_tag=f"{_TAG}logical_date"
    )
    return {"dag_id": dag_id, "run_id": run_id, **found.to_dict()}


def _histogram(sizes: list[int]) -> list[dict[str, Any]]:
    """Files per size bucket, powers of two from the smallest to the largest file."""
    if not sizes:
        return []
    low = max(1, min(sizes)).bit_length() - 1
    high = max(1, max(sizes)).bit_length()
    buckets = [{"from": 2**e if e else 0, "to": 2 ** (e + 1), "files": 0} for e in range(low, high)]
    for size in sizes:
        buckets[max(1, size).bit_length() - 1 - low]["files"] += 1
    return buckets


def _features(snapshot: Snapshot) -> list[dict[str, Any]]:
    protocol = snapshot.protocol
    readers = reader_features(protocol)
    used = features_in_use(snapshot.metadata)
    rows = []
    for name in sorted(readers | writer_features(protocol)):
        rows.append(
            {
                "name": name,
                "reader": name in readers,
                "known": name in FEATURES,
                "in_use": name in used,
                "operations": {op.value: supports(name, op).value for op in Operation},
            }
        )
    return rows


def table_health(table: DeltaTable) -> dict[str, Any]:
    """Active files and bytes, file sizes against the target, partitions, log length, protocol."""
    snapshot = table.snapshot()
    files = snapshot.files()
    sizes = [int(s) for s in files.column("size").to_pylist()] if files.num_rows else []
    # The size OPTIMIZE aims at, as the core's TableConfig reads it (an invalid value raises).
    target = snapshot.config.target_file_size.to_dict()
    partitions = snapshot.partition_columns
    num_partitions = 0
    if partitions and files.num_rows:
        values = snapshot.partition_values()
        num_partitions = len(values.group_by(partitions).aggregate([]))
    log_files = list_log_files(table.storage, 0)
    commits = [f for f in log_files if f.kind is LogFileKind.COMMIT]
    checkpoint = snapshot.segment.checkpoint_version
    protocol = snapshot.protocol
    return {
        "version": snapshot.version,
        "active_files": len(sizes),
        "active_bytes": sum(sizes),
        "target_file_size": target,
        "small_files": sum(1 for s in sizes if s < target["value"]),
        "small_bytes": sum(s for s in sizes if s < target["value"]),
        "histogram": _histogram(sizes),
        "partition_columns": partitions,
        "partitions": num_partitions,
        "last_checkpoint_version": checkpoint,
        "commits_since_checkpoint": snapshot.version - checkpoint
        if checkpoint is not None
        else snapshot.version + 1,
        "versions_retained": len(commits),
        "earliest_version": commits[0].version if commits else None,
        "log_bytes": sum(f.file.size for f in log_files),
        "protocol": {
            "min_reader_version": protocol.min_reader_version,
            "min_writer_version": protocol.min_writer_version,
            "reader_features": sorted(protocol.reader_features or ()),
            "writer_features": sorted(protocol.writer_features or ()),
        },
        "features": _features(snapshot),
        # Properties are anyone's text: a credential put there is shown masked, like any secret.
        "properties": masked_options(dict(sorted(snapshot.properties.items()))),
        "consumers": consumer_cursors(snapshot),
    }


def consumer_cursors(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The cursors of the consumers that commit into the table (``txn`` actions named as
    :mod:`~airflow_delta_provider.core.table.consumer` names them): who consumes which source table, up
    to which version, last moved when."""
    found = []
    for app_id, txn in sorted(snapshot.transactions.items()):
        parsed = parse_consumer_app_id(app_id)
        if parsed is not None:
            found.append(
                {
                    "app_id": app_id,
                    "source_table_id": parsed[0],
                    "consumer": parsed[1],
                    "partition": consumer_partition(app_id),
                    "version": txn.version,
                    "last_updated": _iso(txn.last_updated),
                }
            )
    return found


def vacuum_dry_run(table: DeltaTable) -> dict[str, Any]:
    """What a VACUUM would delete now, under the table's retention: a dry run, never a real one."""
    result = table.vacuum(dry_run=True)
    assert result.dry_run and result.num_deleted == 0
    root = table.uri.rstrip("/") + "/"
    return {
        "version": result.version,
        "num_files": result.num_files,
        "num_bytes": result.num_bytes,
        "retention": result.retention.to_dict(),
        "delete_before": result.delete_before.isoformat(timespec="seconds"),
        "files": [f[len(root) :] if f.startswith(root) else f for f in result.files[:50]],
        "more_files": max(0, result.num_files - 50),
    }


def table_maintenance(
    table: DeltaTable, vacuum_interval: timedelta | None, now: datetime | None = None
) -> dict[str, Any]:
    """The last checkpoint, log cleanup and VACUUM, and when each is next due.

    :param vacuum_interval: the time between two VACUUMs (the maintenance operator's).
    """
    now = now if now is not None else datetime.now(UTC)
    snapshot = table.snapshot()
    config = snapshot.config
    files = list_log_files(table.storage, 0)
    checkpoints = complete_checkpoints(files)
    commits = [f for f in files if f.kind is LogFileKind.COMMIT]
    last_checkpoint = checkpoints[-1] if checkpoints else None
    checkpoint = checkpoint_due(snapshot, config).to_dict()
    checkpoint["last"] = (
        {
            "version": last_checkpoint.version,
            "kind": last_checkpoint.kind.value,
            "timestamp": _iso(max(f.file.modification_time for f in last_checkpoint.files)),
            "parts": len(last_checkpoint.files),
        }
        if last_checkpoint is not None
        else None
    )
    checkpoint["next_due_at_version"] = (last_checkpoint.version if last_checkpoint else 0) + checkpoint[
        "interval"
    ]["value"]

    retention = config.log_retention
    cleanup = cleanup_due(config).to_dict()
    cleanup["retention"] = retention.to_dict()
    cleanup["earliest_retained_version"] = commits[0].version if commits else None
    cleanup["cleaned_up"] = bool(commits) and commits[0].version > 0
    oldest_ms = commits[0].file.modification_time if commits else None
    cleanup["oldest_commit_time"] = _iso(oldest_ms)
    # Cleanup deletes only log files before a checkpoint and older than the retention (None: the
    # retention reaches past the calendar's last date).
    cleanup["next_due"] = (
        _iso(oldest_ms + retention.value // timedelta(milliseconds=1))
        if oldest_ms is not None and isinstance(retention.value, timedelta)
        else None
    )
    cleanup["checkpoint_needed"] = last_checkpoint is None or (
        bool(commits) and last_checkpoint.version <= commits[0].version
    )

    vacuum = vacuum_due(table, vacuum_interval, now).to_dict()
    vacuum["retention"] = config.deleted_file_retention.to_dict()
    vacuum["last_vacuum_info_version"] = read_last_vacuum_info(table.storage)
    lookback = history(table.storage, snapshot.version, VACUUM_LOOKBACK, rule=CommitTimeRule(snapshot))
    recent = [
        _entry(info, table.storage)
        for info in lookback
        if (free_text(info.get("operation")) or "").startswith("VACUUM")
    ]
    vacuum["recent"] = recent[:10]
    vacuum["lookback_commits"] = VACUUM_LOOKBACK
    return {
        "version": snapshot.version,
        "now": now.isoformat(timespec="seconds"),
        "checkpoint": checkpoint,
        "cleanup": cleanup,
        "vacuum": vacuum,
        "data_retention": _data_retention(snapshot, lookback, table.storage),
        "commit_timestamps_source": commit_timestamps(snapshot)[-1].source if commits else None,
    }


def _data_retention(snapshot: Snapshot, commits: list[dict[str, Any]], storage: LogStore) -> dict[str, Any]:
    """The table's data retention policy (its ``airflow.dataRetention``, read by the core's
    TableConfig), the last retention run and the last PURGE among ``commits``, with what each removed."""
    try:
        setting = snapshot.config.data_retention
        policy: dict[str, Any] | None = setting.to_dict()["value"]
        error = None
    except InvalidTablePropertyError as err:
        policy, error = None, str(err)
    last_run = last_purge = None
    for info in commits:  # newest first
        operation = free_text(info.get("operation"))
        tags = _object(info.get("tags"))
        if last_run is None and operation == "DELETE" and DATA_RETENTION in tags:
            applied = _object(tags[DATA_RETENTION])
            last_run = {
                **_removed(info, storage),
                "cutoff": free_text(applied.get("cutoff")),
                "policy": {k: free_text(applied.get(k)) for k in ("column", "keep", "max_deleted_fraction")},
                "deleted_rows": info_integer(_object(info.get("operationMetrics")).get("numDeletedRows")),
            }
        if last_purge is None and operation == "REORG":
            metrics = _object(info.get("operationMetrics"))
            last_purge = {
                **_removed(info, storage),
                "deletion_vectors_removed": info_integer(metrics.get("numDeletionVectorsRemoved")),
            }
    return {
        "property": DATA_RETENTION,
        "policy": policy,
        "error": error,
        "last_run": last_run,
        "last_purge": last_purge,
        "lookback_commits": VACUUM_LOOKBACK,
    }


def _removed(info: dict[str, Any], storage: LogStore) -> dict[str, Any]:
    entry = _entry(info, storage)
    keys = ("version", "timestamp", "parameters", "files_removed", "bytes_removed", "airflow")
    return {key: entry.get(key) for key in keys}


def interval(value: str | None, default: timedelta) -> timedelta | None:
    """A VACUUM interval given by the page (``"7 days"``, ``"none"``), else ``default``."""
    if value is None or value == "":
        return default
    if value.strip().lower() == "none":
        return None
    return to_interval(value, name="vacuum_interval")
