"""Version checksum files (``_delta_log/NNN.crc``): read to answer small questions, kept up incrementally.

Read side (:func:`checksum_answers`): as Spark, a snapshot takes its protocol and metadata (and, when
present, txns and domain metadata) from its version's checksum, under stricter rules: the log wins,
and an unusable checksum is never an error. Write side (:func:`next_checksum`): a wrong checksum is
worse than none, so version ``v`` is derived only from ``v - 1`` plus commit ``v``, and not at all
when that cannot be exact. docs/read-api.md ("The version checksum") has the rules.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.log.logfiles import checksum_name
from airflow_delta_provider.core.protocol.action_checks import action_problem
from airflow_delta_provider.core.protocol.actions import (
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Transaction,
    dumps,
)
from airflow_delta_provider.core.protocol.delta_types import LONG_MAX
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.log.commits import CommitActions
    from airflow_delta_provider.core.log.segment import LogSegment
    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)

_DROPPED = ("allFiles", "numDeletedRecordsOpt", "numDeletionVectorsOpt", "deletedRecordCountsHistogramOpt")


def read_checksum(storage: LogStore, version: int) -> dict[str, Any] | None:
    """The checksum of ``version``, or None when there is none (or it is unreadable)."""
    try:
        data = storage.read_bytes(storage.log_path(checksum_name(version)))
    except FileNotFoundError:
        return None
    except OSError as err:  # a checksum is optional: never fail a read over one
        log.warning("Ignoring the checksum file of version %d: it cannot be read (%s).", version, err)
        return None
    try:
        checksum = json.loads(data)
    except (ValueError, RecursionError):
        log.warning("Ignoring the checksum file of version %d: it is not valid JSON.", version)
        return None
    return checksum if isinstance(checksum, dict) else None


@dataclass(frozen=True)
class ChecksumAnswers:
    """What the checksum of one snapshot's version may answer, as checked action payloads.

    ``protocol`` and ``metadata`` are always there; ``transactions`` and ``domains`` are None
    when the checksum does not carry them (the checkpoint must answer those).
    """

    version: int
    #: where it was read (for errors found later, e.g. in the schema)
    uri: str
    protocol: dict[str, Any]
    metadata: dict[str, Any]
    #: the txn payload per appId (all of them, before any retention), or None
    transactions: dict[str, dict[str, Any]] | None
    #: the live domainMetadata payload per domain, or None
    domains: dict[str, dict[str, Any]] | None


def checksum_answers(
    storage: LogStore, segment: LogSegment, commits: Sequence[CommitActions]
) -> ChecksumAnswers | None:
    """THE decision whether the version checksum may answer a snapshot's small questions.

    None (use the checkpoint) unless: the segment has a checkpoint (without one every commit
    is read anyway), its listing shows the checksum of the segment's own version, the file
    parses, protocol and metadata are in it and well-formed (a listed ``setTransactions`` or
    ``domainMetadata`` must be well-formed too, with no key twice), and it agrees with the
    last protocol, metaData, txn per appId and domainMetadata per domain of ``commits`` (the
    commits after the checkpoint). See the module docstring for how this follows Spark.

    :param commits: the segment's commits (their small actions are parsed here if not yet).
    """
    listed = segment.checksum
    if segment.checkpoint is None or listed is None or listed.version != segment.version:
        return None
    checksum = read_checksum(storage, segment.version)
    if checksum is None:
        return None
    uri = storage.to_uri(listed.file.path)
    problem, answers = _parse_answers(checksum, segment.version, uri)
    if problem is None and answers is not None:
        problem = _disagreement(answers, commits)
    if problem is not None:
        log.warning("Ignoring the checksum file %s: %s; reading the checkpoint instead.", uri, problem)
        return None
    return answers


def _parse_answers(
    checksum: Mapping[str, Any], version: int, uri: str
) -> tuple[str | None, ChecksumAnswers | None]:
    """(problem, None) for a malformed checksum, (None, None) for one without protocol and
    metadata (Spark then falls back to the log too), else (None, the answers)."""
    protocol, metadata = checksum.get("protocol"), checksum.get("metadata")
    if protocol is None and metadata is None:
        return None, None
    for kind, payload in (("protocol", protocol), ("metaData", metadata)):
        if payload is None:
            return f"it has no {kind}", None
        bad = action_problem({kind: payload})
        if bad is not None:
            return f"its {kind} is malformed ({bad})", None
    lists: dict[str, dict[str, dict[str, Any]] | None] = {}
    for field, kind, key in (
        ("setTransactions", "txn", "appId"),
        ("domainMetadata", "domainMetadata", "domain"),
    ):
        entries = checksum.get(field)
        if entries is None:
            lists[kind] = None
            continue
        if not isinstance(entries, list):
            return f"its {field} is not a list", None
        by_key: dict[str, dict[str, Any]] = {}
        for entry in entries:
            bad = action_problem({kind: entry})
            if bad is not None:
                return f"an entry of its {field} is malformed ({bad})", None
            if entry[key] in by_key:
                return f"its {field} lists {entry[key]!r} twice", None
            by_key[entry[key]] = entry
        lists[kind] = by_key
    if not isinstance(protocol, dict) or not isinstance(metadata, dict):  # action_problem said so
        return "its protocol or metadata is not an object", None
    domains = lists["domainMetadata"]
    if domains is not None:  # Spark lists live domains only; a tombstone means "absent"
        domains = {name: d for name, d in domains.items() if not d.get("removed", False)}
    return None, ChecksumAnswers(
        version=version,
        uri=uri,
        protocol=protocol,
        metadata=metadata,
        transactions=lists["txn"],
        domains=domains,
    )


def _disagreement(answers: ChecksumAnswers, commits: Sequence[CommitActions]) -> str | None:
    """How the checksum contradicts the newest small actions of ``commits``, or None."""
    last: dict[str, tuple[int, dict[str, Any]]] = {}
    txns: dict[str, tuple[int, dict[str, Any]]] = {}
    domains: dict[str, tuple[int, dict[str, Any]]] = {}
    for commit in commits:
        for action in commit.actions:
            if "protocol" in action:
                last["protocol"] = (commit.version, action["protocol"])
            elif "metaData" in action:
                last["metaData"] = (commit.version, action["metaData"])
            elif "txn" in action:
                txns[action["txn"]["appId"]] = (commit.version, action["txn"])
            elif "domainMetadata" in action:
                domains[action["domainMetadata"]["domain"]] = (commit.version, action["domainMetadata"])
    if "protocol" in last:
        version, payload = last["protocol"]
        if Protocol.from_json(payload) != Protocol.from_json(answers.protocol):
            return f"its protocol differs from the one commit {version} sets"
    if "metaData" in last:
        version, payload = last["metaData"]
        if Metadata.from_json(payload) != Metadata.from_json(answers.metadata):
            return f"its metadata differs from the one commit {version} sets"
    if answers.transactions is not None:
        for app_id, (version, payload) in txns.items():
            listed = answers.transactions.get(app_id)
            if listed is None or Transaction.from_json(listed) != Transaction.from_json(payload):
                return f"its setTransactions disagree with the txn of {app_id!r} in commit {version}"
    if answers.domains is not None:
        for name, (version, payload) in domains.items():
            listed = answers.domains.get(name)
            expected = None if payload.get("removed", False) else DomainMetadata.from_json(payload)
            if (DomainMetadata.from_json(listed) if listed is not None else None) != expected:
                return f"its domainMetadata disagrees with the domain {name!r} in commit {version}"
    return None


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
    if files < 0 or not 0 <= size <= LONG_MAX:  # tableSizeBytes is a Delta long: no crc, not a wrong one
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
