"""VACUUM's bookkeeping: ``VACUUM START``/``END`` commits and ``_delta_log/_last_vacuum_info``."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.maintenance.vacuum.result import VacuumStatus
from airflow_delta_provider.core.maintenance.vacuum.retention import ResolvedVacuumRetention, millis
from airflow_delta_provider.core.protocol.features import Operation
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

log = get_logger(__name__)

LAST_VACUUM_INFO = "_last_vacuum_info"
LAST_VACUUM_INFO_KEY = "latestCommitVersionOutsideOfRetentionWindow"
VACUUM_START = "VACUUM START"
VACUUM_END = "VACUUM END"
#: Schemes on which Delta writes VACUUM START/END commits by default (``supportedFsForLogging``).
LOGGED_SCHEMES = frozenset({"wasbs", "wasbss", "abfs", "abfss", "adl", "gs", "file", "hdfs"})
_SCHEME_ALIASES = {"gcs": "gs", "local": "file"}


def should_log_commits(storage: LogStore) -> bool:
    """Delta's rule for VACUUM START/END commits: only on the schemes it knows to be safe for them."""
    scheme = (storage.scheme or "").lower()
    return _SCHEME_ALIASES.get(scheme, scheme) in LOGGED_SCHEMES


def read_last_vacuum_info(storage: LogStore) -> int | None:
    """``latestCommitVersionOutsideOfRetentionWindow`` of ``_delta_log/_last_vacuum_info``; None
    when the file is missing, empty or unreadable (Delta treats a corrupt file as missing)."""
    path = storage.log_path(LAST_VACUUM_INFO)
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        return None
    try:
        value = json.loads(data.decode().strip().splitlines()[0]).get(LAST_VACUUM_INFO_KEY)
    except (ValueError, IndexError, AttributeError, UnicodeDecodeError):
        log.warning("Ignoring the unreadable %s: %r", storage.to_uri(path), data[:200])
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return None
    return value


def write_last_vacuum_info(storage: LogStore, version: int | None) -> int | None:
    """Record that the removes of every commit up to ``version`` were vacuumed.

    The recorded version never moves back (an earlier VACUUM with a shorter retention already
    went further). Returns the version written, or None when the file was left as it was.
    """
    if version is None:
        return None
    previous = read_last_vacuum_info(storage)
    if previous is not None and previous >= version:
        return None
    # Delta's own bytes: one JSON object and a newline (LogStore.write of a single line).
    payload = json.dumps({LAST_VACUUM_INFO_KEY: version}, separators=(",", ":")) + "\n"
    storage.put(storage.log_path(LAST_VACUUM_INFO), payload.encode())
    return version


def commit_start(
    snapshot: Snapshot,
    to_delete: tuple[int, int],
    resolved: ResolvedVacuumRetention,
    enforce: bool,
    hooks: Sequence[PostCommitHook],
) -> int:
    """Commit ``VACUUM START`` with Delta's parameters and metrics; returns its version.

    :param to_delete: the number of files and directories, and the bytes, the run will delete.
    """
    parameters: dict[str, Any] = {
        "retentionCheckEnabled": enforce,
        "defaultRetentionMillis": millis(resolved.configured.value),
    }
    if resolved.explicit:
        parameters["specifiedRetentionMillis"] = millis(resolved.effective.value)
    metrics = {
        "numFilesToDelete": to_delete[0],
        "sizeOfDataToDelete": to_delete[1],
    }
    transaction = OptimisticTransaction(snapshot.storage, read_snapshot=snapshot, post_commit_hooks=hooks)
    plan = CommitPlan(VACUUM_START, parameters, metrics, data_change=False, kind=Operation.VACUUM)
    return transaction.commit(plan).version


def commit_end(
    store: LogStore, status: VacuumStatus, metrics: Mapping[str, int] | None, hooks: Sequence[PostCommitHook]
) -> int | None:
    """Commit ``VACUUM END`` with ``status``; with FAILED a failure to commit is only logged."""
    try:
        plan = CommitPlan(
            VACUUM_END, {"status": status.value}, metrics or {}, data_change=False, kind=Operation.VACUUM
        )
        result = OptimisticTransaction(store, post_commit_hooks=hooks).commit(plan)
    except Exception:
        if status is VacuumStatus.FAILED:
            # The deletion error is the one to report; the END commit is bookkeeping.
            log.exception("Could not commit VACUUM END (FAILED) to %s.", store.root_uri)
            return None
        raise
    return result.version
