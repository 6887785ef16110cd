"""A table's history: commit timestamps as Delta's time travel sees them, and commitInfo.

Log-level reads below the facade: VACUUM (the latest commit outside the retention window),
time travel and ``DeltaTable.history`` all ask these.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.logfiles import LogFileKind, commit_name
from airflow_delta_provider.core.replay import parse_commit
from airflow_delta_provider.core.segment import build_segment, complete_checkpoints, list_log_files

if TYPE_CHECKING:
    from airflow_delta_provider.core.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore

__all__ = ["CommitTimestamp", "commit_info", "commit_timestamps", "history"]


@dataclass(frozen=True, slots=True)
class CommitTimestamp:
    """When a version was committed, as Delta's time travel sees it."""

    version: int
    #: milliseconds since the epoch (UTC)
    timestamp: int
    #: ``"inCommitTimestamp"`` or ``"modificationTime"``
    source: str


def commit_timestamps(latest: Snapshot) -> list[CommitTimestamp]:
    """Timestamps of every reconstructable version, oldest first, as Delta's time travel uses them.

    Modification times of the commit files, made strictly increasing as Delta does; with
    in-commit timestamps enabled, ``commitInfo.inCommitTimestamp`` from the enablement
    version on.

    :param latest: the table's latest snapshot (its properties say whether in-commit
        timestamps are on).
    """
    storage = latest.storage
    files = list_log_files(storage, 0)
    commits = [f for f in files if f.kind is LogFileKind.COMMIT]
    if not commits:
        build_segment(storage)  # raises the precise error
    checkpoints = complete_checkpoints(files)
    earliest = 0 if commits and commits[0].version == 0 else None
    if earliest is None:
        earliest = checkpoints[0].version if checkpoints else commits[0].version
    result: list[CommitTimestamp] = []
    previous = -1
    for commit in commits:
        stamp = max(commit.file.modification_time, previous + 1)
        previous = stamp
        if commit.version >= earliest:
            result.append(CommitTimestamp(commit.version, stamp, "modificationTime"))
    config = latest.config
    if config.in_commit_timestamps:
        since = config.in_commit_timestamp_enablement_version
        for index, entry in enumerate(result):
            if entry.version >= since:
                info = commit_info(storage, entry.version)
                ict = info.get("inCommitTimestamp") if info else None
                if ict is not None:
                    result[index] = CommitTimestamp(entry.version, int(ict), "inCommitTimestamp")
    return result


def commit_info(storage: LogStore, version: int) -> dict[str, Any] | None:
    """The ``commitInfo`` of one commit (None when the commit file does not exist)."""
    path = storage.log_path(commit_name(version))
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        return None
    # commitInfo is the first action by protocol; read only up to it when possible.
    first = data.split(b"\n", 1)[0]
    if first.startswith(b'{"commitInfo"'):
        try:
            info: dict[str, Any] = json.loads(first)["commitInfo"]
            return info
        except (ValueError, KeyError):
            pass
    return parse_commit(version, storage.to_uri(path), data).commit_info


def history(storage: LogStore, latest: int, limit: int | None = None) -> list[dict[str, Any]]:
    """Commit history, newest first: each commit's ``commitInfo`` plus ``version`` and ``timestamp``.

    Only the last ``limit`` commit files are read. ``timestamp`` is the in-commit timestamp
    when present, else the commit file's modification time. Versions whose commit was cleaned
    up are not listed.

    :param latest: the latest version.
    :param limit: the number of most recent commits to return; None for all.
    """
    entries: list[dict[str, Any]] = []
    version = latest
    while version >= 0 and (limit is None or len(entries) < limit):
        info = storage.info(storage.log_path(commit_name(version)))
        if info is None:
            break
        details = commit_info(storage, version) or {}
        timestamp = details.get("inCommitTimestamp")
        entries.append(
            {
                **details,
                "version": version,
                "timestamp": int(timestamp) if timestamp is not None else info.modification_time,
            }
        )
        version -= 1
    return entries
