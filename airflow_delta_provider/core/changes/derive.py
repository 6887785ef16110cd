"""What each commit of a range changed, file by file and row selection by row selection.

Delta's rules (``CDCReader.changesToDF``): a commit's ``cdc`` files when it has them, else its adds
and removes with ``dataChange=true``, each read under its own deletion vector. Without ``cdc``
files the derivation is kept only where it is exact (a commit that only deletes, only inserts, or
replaces what it removes); an UPDATE-like commit may hold copies of unchanged rows and is refused.
docs/reading.md ("What each commit contributes") has the details.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.changes.rows import RowScan
from airflow_delta_provider.core.errors import ChangeDataNotRecordedError, CorruptLogError
from airflow_delta_provider.core.expressions.predicate import Predicate, PredicateError
from airflow_delta_provider.core.log.timeline import info_object

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.changes.partition_filter import PartitionSelector
    from airflow_delta_provider.core.changes.rows import DeletionVectors
    from airflow_delta_provider.core.log.commits import CommitActions

#: Operations whose removed rows are all replaced by what they add: their deletes and inserts are
#: exact without ``cdc`` files (Delta's operation names, which delta-rs and this core use too).
REPLACING_OPERATIONS = frozenset(
    {
        "CREATE TABLE",
        "CREATE TABLE AS SELECT",
        "CREATE OR REPLACE TABLE",
        "CREATE OR REPLACE TABLE AS SELECT",
        "REPLACE TABLE",
        "REPLACE TABLE AS SELECT",
        "RESTORE",
        "TRUNCATE",
        "CLONE",
    }
)
_NO_OP_MERGE_METRICS = ("numTargetRowsInserted", "numTargetRowsUpdated", "numTargetRowsDeleted")


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file action of the range that carries changes.

    :param kind: ``add``, ``remove`` or ``cdc``.
    :param action: the action's fields, as the log has them.
    :param timestamp: the commit's time, milliseconds since the epoch.
    """

    kind: str
    action: Mapping[str, Any]
    version: int
    timestamp: int


@dataclass(frozen=True, slots=True)
class CommitContext:
    """What deriving one commit's changes needs to know besides the commit."""

    timestamp: int
    #: whether ``delta.enableChangeDataFeed`` is on at this version
    change_data_feed: bool
    partition_columns: Sequence[str]
    uri: str
    #: only the file actions in the partitions it selects (``changes(partition_filter=...)``)
    selector: PartitionSelector | None = None


def commit_changes(
    commit: CommitActions, context: CommitContext, deletion_vectors: DeletionVectors
) -> tuple[list[FileChange], list[RowScan]]:
    """The file changes and row scans of one commit.

    :raises ChangeDataNotRecordedError: the commit rewrote rows without recording which (see the
        module docstring), or a remove lacks the partition values its rows need.
    :raises CorruptLogError: an add and a remove of one path without a deletion vector between them.

    With a partition filter, only the files it selects count, and a commit is judged on those
    files alone: a rewrite in another partition does not refuse the selected partitions' changes.
    """
    version, timestamp = commit.version, context.timestamp
    selector = context.selector
    cdc = [a["cdc"] for a in commit.actions if "cdc" in a]
    if cdc:
        if selector is not None:
            cdc = selector.select(cdc)
        files = [FileChange("cdc", c, version, timestamp) for c in cdc]
        return files, [
            RowScan(c["path"], c["partitionValues"], version, timestamp, None, size=c.get("size"))
            for c in cdc
        ]
    info = commit.commit_info
    if _is_no_op_merge(info):
        return [], []
    file_actions = commit.file_actions()
    adds = [a["add"] for a in file_actions if "add" in a and a["add"]["dataChange"]]
    removes = [a["remove"] for a in file_actions if "remove" in a and a["remove"]["dataChange"]]
    if selector is not None:
        if context.partition_columns:  # a remove without partition values lies in no known partition
            _require_partition_values(commit, context, removes)
        adds, removes = selector.select(adds), selector.select(removes)
    if not adds and not removes:
        return [], []
    added = _by_path(adds, "add", commit)
    removed = _by_path(removes, "remove", commit)
    pairs = [(removed[p], added[p]) for p in removed if p in added]
    for remove, add in pairs:
        if remove.get("deletionVector") is None and add.get("deletionVector") is None:
            raise CorruptLogError(
                f"Version {version} of {context.uri} removes and adds {add['path']} in one commit with no "
                f"deletion vector on either side, so no row can have changed and yet the file is touched "
                f"(Delta refuses such a commit as well). The commit is malformed.",
                path=commit.path,
            )
    if not context.change_data_feed and not _replaces_what_it_removes(info, context.partition_columns):
        _refuse_rewrite(commit, info, context, removed, added, pairs, deletion_vectors)
    if context.partition_columns:
        _require_partition_values(commit, context, removes)
    files = [FileChange("remove", r, version, timestamp) for r in removes]
    files += [FileChange("add", a, version, timestamp) for a in adds]
    return files, _row_scans(version, timestamp, removed, added)


def _by_path(
    actions: list[Mapping[str, Any]], kind: str, commit: CommitActions
) -> dict[str, Mapping[str, Any]]:
    found: dict[str, Mapping[str, Any]] = {}
    for action in actions:
        if action["path"] in found:
            raise CorruptLogError(
                f"{commit.path} holds two {kind} actions with dataChange=true for {action['path']}; a commit "
                f"may touch a file once. The commit is malformed.",
                path=commit.path,
            )
        found[action["path"]] = action
    return found


def _row_scans(
    version: int,
    timestamp: int,
    removed: Mapping[str, Mapping[str, Any]],
    added: Mapping[str, Mapping[str, Any]],
) -> list[RowScan]:
    """Unpaired files read under their own DV; a pair's rows selected by the difference of its DVs."""
    scans = []
    for path, remove in removed.items():
        add = added.get(path)
        values = remove.get("partitionValues") or {}
        if add is None:
            dv = remove.get("deletionVector")
            scans.append(
                RowScan(path, values, version, timestamp, "delete", exclude=dv, size=remove.get("size"))
            )
            continue
        old, new, size = remove.get("deletionVector"), add.get("deletionVector"), add.get("size")
        if new is not None:  # rows the new DV marks and the old one did not: deleted
            scans.append(
                RowScan(path, values, version, timestamp, "delete", include=new, exclude=old, size=size)
            )
        if old is not None:  # rows the old DV marked and the new one does not: inserted again (RESTORE)
            values = add["partitionValues"]
            scans.append(
                RowScan(path, values, version, timestamp, "insert", include=old, exclude=new, size=size)
            )
    for path, add in added.items():
        if path not in removed:
            scans.append(
                RowScan(
                    path,
                    add["partitionValues"],
                    version,
                    timestamp,
                    "insert",
                    exclude=add.get("deletionVector"),
                    size=add.get("size"),
                )
            )
    return scans


def _is_no_op_merge(info: Mapping[str, Any] | None) -> bool:
    """Delta's ``shouldSkipFileActionsInCommit``: a MERGE whose metrics report no changed row."""
    if info is None or _operation(info) != "MERGE":
        return False
    metrics = info_object(info.get("operationMetrics")) or {}
    return all(str(metrics.get(name)) == "0" for name in _NO_OP_MERGE_METRICS)


def _operation(info: Mapping[str, Any] | None) -> str | None:
    """The commit's operation name (commitInfo is free-form: anything but a string is none)."""
    operation = info.get("operation") if isinstance(info, dict) else None
    return operation if isinstance(operation, str) else None


def _replaces_what_it_removes(info: Mapping[str, Any] | None, partition_columns: Sequence[str]) -> bool:
    """Whether the commit's operation removes exactly the rows it means to delete: an overwrite
    (whole table, whole partitions, a ``replaceWhere`` that copied no row), a CREATE OR REPLACE,
    a RESTORE, a complete-mode streaming write."""
    if not isinstance(info, dict):
        return False
    operation = _operation(info)
    parameters = info_object(info.get("operationParameters")) or {}
    if operation in REPLACING_OPERATIONS:
        return True
    if operation == "STREAMING UPDATE":
        return str(parameters.get("outputMode", "")).lower() == "complete"
    if operation != "WRITE" or str(parameters.get("mode", "")).lower() != "overwrite":
        return False
    copied = (info_object(info.get("operationMetrics")) or {}).get("numCopiedRows")
    if copied is not None:  # Spark's replaceWhere reports the rows it rewrote
        return str(copied) == "0"
    if parameters.get("replaceOnCond") or parameters.get("replaceUsingCols"):
        return False
    predicate = parameters.get("predicate")
    return predicate is None or _on_partitions_only(predicate, partition_columns)


def _on_partitions_only(predicate: Any, partition_columns: Sequence[str]) -> bool:
    """Whether an overwrite's predicate names partition columns only (so it removed whole files and
    copied no row); it is a SQL text, or a JSON list of them (or that list itself)."""
    texts = predicate
    if isinstance(predicate, str) and predicate.strip().startswith("["):
        try:
            texts = json.loads(predicate)
        except (ValueError, RecursionError):
            return False
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not partition_columns:
        return False
    try:
        for text in texts:
            Predicate(text, partition_columns)
    except (PredicateError, TypeError):
        return False
    return True


def _refuse_rewrite(
    commit: CommitActions,
    info: Mapping[str, Any] | None,
    context: CommitContext,
    removed: Mapping[str, Mapping[str, Any]],
    added: Mapping[str, Mapping[str, Any]],
    pairs: list[tuple[Mapping[str, Any], Mapping[str, Any]]],
    deletion_vectors: DeletionVectors,
) -> None:
    """Raise when the commit both deletes and inserts rows (a rewrite that may copy rows)."""
    deletes = any(p not in added for p in removed)
    inserts = any(p not in removed for p in added)
    for remove, add in pairs:
        if deletes and inserts:
            break
        old, new = remove.get("deletionVector"), add.get("deletionVector")
        if old is None:
            deletes = True
        elif new is None:
            inserts = True
        else:
            deletes = deletes or len(deletion_vectors.difference(new, old, commit.version)) > 0
            inserts = inserts or len(deletion_vectors.difference(old, new, commit.version)) > 0
    if not (deletes and inserts):
        return
    operation = _operation(info)
    named = f"{operation} " if operation else ""
    raise ChangeDataNotRecordedError(
        f"Version {commit.version} of {context.uri} ({named or 'a commit '}without change data files, "
        f"written while delta.enableChangeDataFeed was off) both removes and adds rows: a rewrite that "
        f"may copy unchanged rows, whose real deletes, inserts and updates cannot be told apart "
        f"(DELTA_MISSING_CHANGE_DATA). Read the changes from version {commit.version + 1} on (or up to "
        f"{commit.version - 1}), or enable the change data feed on the table (ALTER TABLE ... SET "
        f"TBLPROPERTIES ('delta.enableChangeDataFeed' = 'true')) so that later rewrites record their "
        f"changes.",
        version=commit.version,
        operation=operation,
    )


def _require_partition_values(
    commit: CommitActions, context: CommitContext, removes: list[Mapping[str, Any]]
) -> None:
    for remove in removes:
        if remove.get("partitionValues") is None:
            raise ChangeDataNotRecordedError(
                f"Version {commit.version} of {context.uri} removes {remove['path']} without its partition "
                f"values (a remove without extendedFileMetadata), so its deleted rows cannot be given "
                f"their partition columns (DELTA_REMOVE_FILE_CDC_MISSING_EXTENDED_METADATA). Read the "
                f"changes from version {commit.version + 1} on.",
                version=commit.version,
                operation=_operation(commit.commit_info),
            )
