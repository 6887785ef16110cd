"""Version checksum files (``_delta_log/NNN.crc``), kept up incrementally.

Spark writes one per version and checks the table against it (before a checkpoint, for
instance), so a wrong checksum is worse than none. This module only ever derives version
``v`` from the checksum of ``v - 1`` plus the actions of commit ``v``, and gives up
(returns None) whenever that cannot be exact: no previous checksum, or a remove without a
size. Optional fields it cannot keep exact (``allFiles``, deletion-vector counts) are
dropped; the file-size histogram is updated bin by bin.
"""

from __future__ import annotations

import bisect
import json
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.actions import (
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Transaction,
    dumps,
)
from airflow_delta_provider.core.logfiles import checksum_name
from airflow_delta_provider.core.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)

_DROPPED = ("allFiles", "numDeletedRecordsOpt", "numDeletionVectorsOpt", "deletedRecordCountsHistogramOpt")


def read_checksum(storage: LogStore, version: int) -> dict[str, Any] | None:
    """The checksum of ``version``, or None when there is none (or it is unreadable)."""
    try:
        data = storage.read_bytes(storage.log_path(checksum_name(version)))
    except FileNotFoundError:
        return None
    try:
        checksum = json.loads(data)
    except ValueError:
        log.warning("Ignoring the unreadable checksum file of version %d.", version)
        return None
    return checksum if isinstance(checksum, dict) else None


def next_checksum(
    previous: Mapping[str, Any] | None,
    actions: Sequence[Any],
    *,
    protocol: Protocol,
    metadata: Metadata,
    txn_id: str | None,
    in_commit_timestamp: int | None,
) -> dict[str, Any] | None:
    """The checksum after a commit of ``actions`` on top of ``previous`` (None: empty table).

    :param previous: the previous version's checksum; None only for version 0.
    :param actions: the commit's actions (dataclasses from :mod:`.actions`).
    :param protocol: the protocol in force after the commit.
    :param metadata: the metadata in force after the commit.
    :returns: the new checksum, or None when it cannot be derived exactly.
    """
    checksum: dict[str, Any] = {key: value for key, value in (previous or {}).items() if key not in _DROPPED}
    size = int(checksum.get("tableSizeBytes", 0))
    files = int(checksum.get("numFiles", 0))
    histogram = checksum.get("fileSizeHistogram") or checksum.get("histogramOpt")
    histogram_key = "fileSizeHistogram" if "fileSizeHistogram" in checksum else "histogramOpt"
    if histogram is not None:
        histogram = {k: list(v) if isinstance(v, list) else v for k, v in histogram.items()}
    transactions = checksum.get("setTransactions")
    for action in actions:
        if isinstance(action, AddFile):
            size += action.size
            files += 1
            histogram = _histogram_add(histogram, action.size, +1)
        elif isinstance(action, RemoveFile):
            if action.size is None:
                return None
            size -= action.size
            files -= 1
            histogram = _histogram_add(histogram, action.size, -1)
        elif isinstance(action, Transaction) and transactions is not None:
            transactions = [t for t in transactions if t.get("appId") != action.app_id]
            transactions.append(action.to_json())
        elif isinstance(action, DomainMetadata):
            domains = checksum.get("domainMetadata")
            if domains is not None or previous is None:  # the list is complete, or there is none yet
                kept = [d for d in domains or [] if d.get("domain") != action.domain]
                # Live domains only (no tombstones), as Spark writes the list.
                checksum["domainMetadata"] = kept if action.removed else [*kept, action.to_json()]
    if files < 0 or size < 0:
        return None
    checksum.update(
        {
            "tableSizeBytes": size,
            "numFiles": files,
            "numMetadata": 1,
            "numProtocol": 1,
            "metadata": metadata.to_json(),
            "protocol": protocol.to_json(),
        }
    )
    if txn_id is not None:
        checksum["txnId"] = txn_id
    else:
        checksum.pop("txnId", None)
    if in_commit_timestamp is not None:
        checksum["inCommitTimestampOpt"] = in_commit_timestamp
    else:
        checksum.pop("inCommitTimestampOpt", None)
    if transactions is not None:
        checksum["setTransactions"] = transactions
    if previous is None:
        checksum.setdefault("setTransactions", [a.to_json() for a in actions if isinstance(a, Transaction)])
        checksum.setdefault("domainMetadata", [])
    checksum.pop("fileSizeHistogram", None)
    checksum.pop("histogramOpt", None)
    if histogram is not None:
        checksum[histogram_key] = histogram
    return checksum


def _histogram_add(histogram: dict[str, Any] | None, size: int, sign: int) -> dict[str, Any] | None:
    if histogram is None:
        return None
    try:
        boundaries = histogram["sortedBinBoundaries"]
        index = bisect.bisect_right(boundaries, size) - 1
        if index < 0:
            return None
        histogram["fileCounts"][index] += sign
        histogram["totalBytes"][index] += sign * size
    except (KeyError, IndexError, TypeError):
        return None  # malformed: drop the histogram rather than carry a wrong one
    return histogram


def write_checksum(storage: LogStore, version: int, checksum: Mapping[str, Any]) -> None:
    """Write ``version``'s checksum file.

    Raises what the storage raises: the caller runs it as post-commit work
    (:func:`~.transaction.run_post_commit_hooks`), which reports the failure without failing
    the commit (a missing checksum is allowed by the protocol).
    """
    storage.put(storage.log_path(checksum_name(version)), dumps(checksum).encode())
