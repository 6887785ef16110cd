"""What the Delta view shows of one table: history, health (with the cursors of the consumers that
commit into it) and maintenance, read through the core.

Every function here only reads: listings of ``_delta_log``, the commit files shown, the latest
snapshot's file state (a checkpoint plus the commits after it) and, on request, a VACUUM dry
run. Nothing writes or deletes. The answers are JSON-native dicts; the API (``app.py``) redacts
them once more before they leave the server.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.consumer import parse_consumer_app_id
from airflow_delta_provider.core.features import (
    FEATURES,
    Operation,
    features_in_use,
    reader_features,
    supports,
    writer_features,
)
from airflow_delta_provider.core.history import commit_timestamps, history
from airflow_delta_provider.core.logfiles import LogFileKind
from airflow_delta_provider.core.maintenance import checkpoint_due, cleanup_due, vacuum_due
from airflow_delta_provider.core.segment import complete_checkpoints, list_log_files
from airflow_delta_provider.core.table_config import to_interval
from airflow_delta_provider.core.vacuum.record import read_last_vacuum_info

if TYPE_CHECKING:
    from airflow_delta_provider.core.snapshot import Snapshot
    from airflow_delta_provider.core.table import DeltaTable

__all__ = [
    "DEFAULT_TARGET_FILE_SIZE",
    "MAX_HISTORY",
    "TARGET_FILE_SIZE",
    "consumer_cursors",
    "table_health",
    "table_history",
    "table_maintenance",
    "vacuum_dry_run",
]

#: The table property naming the size data files should have.
TARGET_FILE_SIZE = "delta.targetFileSize"
#: Without it: Delta's OPTIMIZE target (``spark.databricks.delta.optimize.maxFileSize``, 1 GiB).
DEFAULT_TARGET_FILE_SIZE = 1024**3
#: The most commits one history page reads.
MAX_HISTORY = 100
#: How far back the maintenance view looks for VACUUM START/END commits.
VACUUM_LOOKBACK = 100
_TAG = "airflow."
_MAINTENANCE_OPERATIONS = ("VACUUM START", "VACUUM END", "OPTIMIZE")
_SIZE_UNITS = {"b": 1, "kb": 1024, "mb": 1024**2, "gb": 1024**3, "tb": 1024**4}


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip('"'))
    except (TypeError, ValueError):
        return None


def run_identity(info: dict[str, Any]) -> dict[str, Any] | None:
    """The Airflow execution that made a commit: its commitInfo tags, else its userMetadata."""
    tags = info.get("tags") or {}
    found = {k[len(_TAG) :]: v for k, v in tags.items() if isinstance(k, str) and k.startswith(_TAG)}
    if not found.get("dag_id"):
        try:
            meta = json.loads(info.get("userMetadata") or "{}")
        except (TypeError, ValueError):
            meta = {}
        found = dict(meta.get("airflow") or {}) if isinstance(meta, dict) else {}
    if not found.get("dag_id") or not found.get("task_id") or not found.get("run_id"):
        return None
    return {
        "dag_id": str(found["dag_id"]),
        "task_id": str(found["task_id"]),
        "run_id": str(found["run_id"]),
        "logical_date": found.get("logical_date"),
        "map_index": _int(found.get("map_index")) if found.get("map_index") is not None else -1,
        "try_number": _int(found.get("try_number")) or 1,
    }


def _entry(info: dict[str, Any]) -> dict[str, Any]:
    metrics = info.get("operationMetrics") or {}
    operation = str(info.get("operation") or "?")
    identity = run_identity(info)
    kind = "commit"
    if operation in _MAINTENANCE_OPERATIONS or operation.startswith("VACUUM"):
        kind = "maintenance"
    elif identity is not None and identity["try_number"] > 1:
        kind = "retry"
    parameters = {str(k): str(v).strip('"') for k, v in (info.get("operationParameters") or {}).items()}
    return {
        "version": info["version"],
        "timestamp": _iso(info["timestamp"]),
        "operation": operation,
        "kind": kind,
        "parameters": parameters,
        "rows_added": _int(metrics.get("numOutputRows")),
        "files_added": _int(metrics.get("numAddedFiles", metrics.get("numFiles"))),
        "files_removed": _int(metrics.get("numRemovedFiles", metrics.get("numDeletedFiles"))),
        "bytes_added": _int(metrics.get("numOutputBytes", metrics.get("numAddedBytes"))),
        "bytes_removed": _int(metrics.get("numRemovedBytes", metrics.get("sizeOfDataToDelete"))),
        "engine": info.get("engineInfo"),
        "airflow": identity,
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
    entries = [_entry(info) for info in history(table.storage, start, limit)] if start >= 0 else []
    runs: dict[tuple[str, str, str, int], int] = {}
    for entry in reversed(entries):  # oldest first: a later commit of the same task run is a re-run
        identity = entry["airflow"]
        if identity is None:
            continue
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


def target_file_size(snapshot: Snapshot) -> dict[str, Any]:
    """``delta.targetFileSize`` in bytes and its source (Delta's OPTIMIZE target without it)."""
    raw = snapshot.properties.get(TARGET_FILE_SIZE)
    if raw is not None:
        text = str(raw).strip().lower().replace(" ", "")
        number = text.rstrip("kmgtb")
        unit = text[len(number) :] or "b"
        unit = unit if unit.endswith("b") else unit + "b"
        if number.isdigit() and unit in _SIZE_UNITS:
            return {
                "name": TARGET_FILE_SIZE,
                "value": int(number) * _SIZE_UNITS[unit],
                "source": "table property",
            }
    return {"name": TARGET_FILE_SIZE, "value": DEFAULT_TARGET_FILE_SIZE, "source": "default"}


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
    target = target_file_size(snapshot)
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
        "properties": dict(sorted(snapshot.properties.items())),
        "consumers": consumer_cursors(snapshot),
    }


def consumer_cursors(snapshot: Snapshot) -> list[dict[str, Any]]:
    """The cursors of the consumers that commit into the table (``txn`` actions named as
    :mod:`~airflow_delta_provider.core.consumer` names them): who consumes which source table, up
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
    expires = (
        datetime.fromtimestamp(oldest_ms / 1000, tz=UTC) + retention.value
        if oldest_ms is not None and isinstance(retention.value, timedelta)
        else None
    )
    cleanup["oldest_commit_time"] = _iso(oldest_ms)
    # Cleanup deletes only log files before a checkpoint and older than the retention.
    cleanup["next_due"] = expires.isoformat(timespec="seconds") if expires is not None else None
    cleanup["checkpoint_needed"] = last_checkpoint is None or (
        bool(commits) and last_checkpoint.version <= commits[0].version
    )

    vacuum = vacuum_due(table, vacuum_interval, now).to_dict()
    vacuum["retention"] = config.deleted_file_retention.to_dict()
    vacuum["last_vacuum_info_version"] = read_last_vacuum_info(table.storage)
    recent = [
        _entry(info)
        for info in history(table.storage, snapshot.version, VACUUM_LOOKBACK)
        if str(info.get("operation", "")).startswith("VACUUM")
    ]
    vacuum["recent"] = recent[:10]
    vacuum["lookback_commits"] = VACUUM_LOOKBACK
    return {
        "version": snapshot.version,
        "now": now.isoformat(timespec="seconds"),
        "checkpoint": checkpoint,
        "cleanup": cleanup,
        "vacuum": vacuum,
        "commit_timestamps_source": commit_timestamps(snapshot)[-1].source if commits else None,
    }


def interval(value: str | None, default: timedelta) -> timedelta | None:
    """A VACUUM interval given by the page (``"7 days"``, ``"none"``), else ``default``."""
    if value is None or value == "":
        return default
    if value.strip().lower() == "none":
        return None
    return to_interval(value, name="vacuum_interval")
