"""Idempotent writes: Delta's ``txn`` (``txnAppId`` / ``txnVersion``) and the commit that recorded it.

A writer that names its application and version commits at most once per version: when
the table already holds the app at that version or later, nothing is written and the
result names the version whose commit recorded it. Finding it costs the commits since the
last checkpoint (already read for the snapshot), or a few reads around the txn's
``lastUpdated`` when only the checkpoint holds it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import DeltaError, TableNotFoundError
from airflow_delta_provider.core.log.commits import read_commit
from airflow_delta_provider.core.log.logfiles import commit_name
from airflow_delta_provider.core.log.snapshot import load_snapshot
from airflow_delta_provider.core.transaction.commit_plan import (
    ALREADY_COMMITTED,
    CommitResult,
    check_app_arguments,
)
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.protocol.actions import Transaction
    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)


MAX_TXN_PROBES = 16
#: How far a commit file's modification time may trail the writer's ``lastUpdated`` (S3 keeps
#: whole seconds).
_MTIME_SLACK_MS = 1000


def already_committed(
    store: LogStore, app_id: str, app_version: int, *, snapshot: Snapshot | None = None
) -> CommitResult | None:
    """The "nothing to commit" result when the table holds ``app_id`` at ``app_version`` or later.

    See :meth:`DeltaTable.already_committed`. ``commit_files`` gives the same answer before it
    reads a single data file.
    """
    check_app_arguments(app_id, app_version)
    if snapshot is None:
        try:
            snapshot = load_snapshot(store)
        except TableNotFoundError:
            return None
    current = snapshot.app_transaction_version(app_id)
    if current is None or current < app_version:
        return None
    return already_committed_result(snapshot, app_id, app_version, current)


def already_committed_result(
    snapshot: Snapshot, app_id: str, app_version: int, current: int, operation: str = "WRITE"
) -> CommitResult:
    """The "nothing to commit" result once ``current`` (the app's recorded version) is known.

    :param operation: the operation that found nothing to commit.
    """
    recorded, exact = txn_commit_version(snapshot, app_id)
    log.info(
        "Application %r already committed version %d (>= %d) to %s at table version %s%d; nothing to commit.",
        app_id,
        current,
        app_version,
        snapshot.storage.root_uri,
        "" if exact else "<= ",
        recorded,
    )
    return CommitResult(
        version=recorded,
        committed=False,
        operation=operation,
        read_version=snapshot.version,
        app_id=app_id,
        app_version=app_version,
        reason=ALREADY_COMMITTED,
        version_exact=exact,
    )


def txn_commit_version(snapshot: Snapshot, app_id: str) -> tuple[int, bool]:
    """The version of the commit that recorded ``app_id``'s live txn, and whether it is exact.

    The commits after the last checkpoint are already read for the snapshot: the newest one
    holding the app's txn recorded it. A txn that only the checkpoint holds was recorded at
    or before the checkpoint's version; that commit is looked for by the txn's
    ``lastUpdated`` (a binary search over commit modification times, then at most
    :data:`MAX_TXN_PROBES` commits read around the match, each checked for the exact txn).
    When it is gone (log cleanup) or not found, the answer is the checkpoint's version and
    ``False``: an upper bound.

    :raises KeyError: the snapshot holds no live txn for ``app_id``.
    """
    txn = snapshot.transactions[app_id]
    for commit in reversed(snapshot.commits):
        for action in commit.actions:
            if "txn" in action and action["txn"].get("appId") == app_id:
                return commit.version, True
    bound = snapshot.segment.checkpoint_version
    if bound is None:  # no checkpoint, yet no commit holds it: nothing to search
        return snapshot.version, False
    found = _find_txn_commit(snapshot.storage, app_id, txn, bound)
    return (found, True) if found is not None else (bound, False)


def _find_txn_commit(storage: LogStore, app_id: str, txn: Transaction, last: int) -> int | None:
    """The version in ``[0, last]`` whose commit holds exactly ``txn``, reading few commits."""
    if txn.last_updated is not None:
        start = _first_commit_at_or_after(storage, txn.last_updated - _MTIME_SLACK_MS, last)
        # Forward first: the recording commit lands just after its lastUpdated.
        order = [start]
        for step in range(1, MAX_TXN_PROBES):
            order += [start + step, start - step]
    else:  # no time to go by: the newest commits before the checkpoint
        order = [last - step for step in range(MAX_TXN_PROBES)]
    probes = [v for v in dict.fromkeys(order) if 0 <= v <= last][:MAX_TXN_PROBES]
    for version in probes:
        try:
            commit = read_commit(storage, version)
            actions = commit.actions if commit is not None else []
        except DeltaError:
            continue
        for action in actions:
            recorded = action.get("txn") if isinstance(action, dict) else None
            if (
                isinstance(recorded, dict)
                and recorded.get("appId") == app_id
                and recorded.get("version") == txn.version
                and recorded.get("lastUpdated") == txn.last_updated
            ):
                return version
    return None


def _first_commit_at_or_after(storage: LogStore, timestamp: int, last: int) -> int:
    """The lowest version in ``[0, last]`` whose commit exists and was modified at or after
    ``timestamp`` (``last`` when none is): a binary search of one ``info`` per step."""
    low, high = 0, last
    while low < high:
        middle = (low + high) // 2
        info = storage.info(storage.log_path(commit_name(middle)))
        if info is None or info.modification_time < timestamp:  # cleaned up, or older
            low = middle + 1
        else:
            high = middle
    return low


def transaction_commit_version(snapshot: Snapshot, app_id: str) -> int | None:
    """Deprecated: use :func:`txn_commit_version` (it also says whether the answer is exact)."""
    if app_id not in snapshot.transactions:
        return None
    return txn_commit_version(snapshot, app_id)[0]
