"""Watching a table for new commits, at a cost that does not grow with the log.

A poll with a known cursor costs one GET (``_delta_log/<cursor+1>.json``) when nothing is
new, plus one for ``_last_checkpoint`` to notice a cursor that log cleanup has outrun.
New commits are read one file each; only their commitInfo and file actions' partition
values are looked at (a partition filter is typed by the latest metadata, read only when a new
commit is found), and they are dated as time travel dates them (one listing of the log; the
latest metadata only when one carries an in-commit timestamp). The sensor and the trigger of the
Airflow layer share this module.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import TableNotFoundError
from airflow_delta_provider.core.log.commits import read_commit
from airflow_delta_provider.core.log.logfiles import commit_name
from airflow_delta_provider.core.log.segment import read_last_checkpoint
from airflow_delta_provider.core.log.timeline import CommitTimeRule, commit_times, commit_timestamps
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.changes.partition_filter import PartitionSelector
    from airflow_delta_provider.core.log.commits import CommitActions
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.table.delta_table import DeltaTable

log = get_logger(__name__)

#: Commits read per poll at most; a poll that finds more resumes from there next time.
MAX_COMMITS_PER_POLL = 1000
#: Partitions an event payload lists at most (``partitions_truncated`` says when there were more).
MAX_PAYLOAD_PARTITIONS = 100


@dataclass(frozen=True)
class CommitSummary:
    """What a watcher needs to know about one commit."""

    version: int
    #: milliseconds since the epoch: the version's commit time as time travel has it
    #: (:class:`~.timeline.CommitTimeRule`)
    timestamp: int
    operation: str | None
    #: the commit adds or removes data (``dataChange=true``); OPTIMIZE, VACUUM ... do not
    data_change: bool
    #: partition values of the files the commit adds
    added_partitions: list[dict[str, str | None]] = field(default_factory=list)
    #: the partitions whose data it changed (adds, removes and cdc files), as the log keys them
    touched_partitions: list[dict[str, str | None]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "timestamp": self.timestamp,
            "operation": self.operation,
            "data_change": self.data_change,
        }


@dataclass(frozen=True)
class CommitFilter:
    """Which commits count.

    :param data_changes_only: only commits that add or remove data.
    :param operations: only these commitInfo operations (``WRITE``, ``MERGE`` ...), case-insensitive.
    :param partition_values: only commits adding files whose partition values include all of these.
    :param after_timestamp: only commits at or after this time (milliseconds since the epoch).
    :param partition_filter: only commits that changed data in the partitions this SQL condition on
        partition columns selects (their adds, removes or change-data files; see
        ``DeltaTable.changes(partition_filter=...)``).
    """

    data_changes_only: bool = False
    operations: Sequence[str] | None = None
    partition_values: Mapping[str, str | None] | None = None
    after_timestamp: int | None = None
    partition_filter: str | None = None

    def matches(self, commit: CommitSummary) -> bool:
        if self.after_timestamp is not None and commit.timestamp < self.after_timestamp:
            return False
        if self.data_changes_only and not commit.data_change:
            return False
        if self.operations and (commit.operation or "").upper() not in {o.upper() for o in self.operations}:
            return False
        if self.partition_values:
            wanted = {k: (None if v is None else str(v)) for k, v in self.partition_values.items()}
            return any(all(p.get(k) == v for k, v in wanted.items()) for p in commit.added_partitions)
        return True


@dataclass(frozen=True)
class PollResult:
    """The outcome of one poll.

    :param cursor: the last version examined (the next poll starts after it); None when the
        table does not exist yet.
    :param matched: the commits after the previous cursor that pass the filter, oldest first.
    :param partitions: the partitions the matched commits changed (those the partition filter
        selects, when there is one), keyed by logical column in the table's partition order.
    """

    cursor: int | None
    matched: list[CommitSummary]
    table_exists: bool = True
    partitions: list[dict[str, str | None]] = field(default_factory=list)


def read_commit_summary(table: DeltaTable, version: int) -> CommitSummary | None:
    """The summary of one commit, or None when its file does not exist.

    :raises CorruptLogError: the commit file is not valid JSON lines.
    """
    commit = read_commit(table.storage, version)
    return _summaries(table, [commit])[0] if commit is not None else None


def _summaries(table: DeltaTable, commits: Sequence[CommitActions]) -> list[CommitSummary]:
    """The summaries of commits read, dated by the table's :class:`~.timeline.CommitTimeRule`."""
    if not commits:
        return []
    rule = CommitTimeRule(table.snapshot)  # reads the metadata only for a commit with an in-commit timestamp
    versions = [c.version for c in commits]
    times = commit_times(table.storage, versions, rule, {c.version: c.commit_info for c in commits})
    summaries = []
    for commit in commits:
        stamp = times.get(commit.version)
        if stamp is None:  # read, then gone from the listing (log cleanup): dated by its own file
            found = table.storage.info(table.storage.log_path(commit_name(commit.version)))
            stamp = rule.stamp(commit.version, found.modification_time if found else 0, commit.commit_info)
        summaries.append(_summary(commit, stamp.timestamp))
    return summaries


def _summary(commit: CommitActions, timestamp: int) -> CommitSummary:
    info = commit.commit_info or {}
    data_change = False
    partitions: list[dict[str, str | None]] = []
    for action in commit.file_actions():
        body = action.get("add") or action.get("remove") or {}
        if body.get("dataChange", True):
            data_change = True
        if "add" in action:
            partitions.append(dict(body.get("partitionValues") or {}))
    touched = commit.touched_partitions()
    return CommitSummary(
        version=commit.version,
        timestamp=timestamp,
        operation=info.get("operation"),
        data_change=data_change,
        added_partitions=partitions,
        touched_partitions=touched,
    )


def commit_partitions(snapshot: Snapshot, version: int) -> list[dict[str, str | None]] | None:
    """The partitions whose data the commit of ``version`` changed (its adds, removes and change-data
    files; an OPTIMIZE none), keyed by logical column in the table's partition order, as
    ``snapshot`` (a later one: a column's physical name never changes) names the columns; None when
    the commit file is gone (log cleanup).
    """
    commit = read_commit(snapshot.storage, version)
    if commit is None:
        return None
    return _Partitions.of(snapshot).named(commit.touched_partitions())


def check_partition_filter(table: DeltaTable, text: str) -> None:
    """Type a watcher's partition filter against the table's columns now, not at the first commit
    it would judge; a table that does not exist yet is judged when it does.

    :raises PredicateError: the filter does not parse, names a data column or a column the table
        lacks, or a value that does not fit its column.
    """
    try:
        _Partitions(table, text)._load()
    except TableNotFoundError:
        return


def poll(table: DeltaTable, cursor: int | None, commit_filter: CommitFilter | None = None) -> PollResult:
    """New commits after ``cursor`` that pass ``commit_filter``.

    :param cursor: the last version already seen; None to start from the table's
        beginning (with ``after_timestamp``, from the latest commit at or after it).
    :returns: the new cursor and the matching commits. A missing table is not an error:
        ``table_exists=False`` and the cursor stays.
    """
    commit_filter = commit_filter or CommitFilter()
    partitions = _Partitions(table, commit_filter.partition_filter)
    if cursor is None:
        try:
            latest = table.version()
        except TableNotFoundError:
            return PollResult(cursor=None, matched=[], table_exists=False)
        start = _first_candidate(table, latest, commit_filter.after_timestamp)
    else:
        start = cursor + 1
    commits: list[CommitActions] = []
    while len(commits) < MAX_COMMITS_PER_POLL:
        commit = read_commit(table.storage, start + len(commits))
        if commit is None:
            break
        commits.append(commit)
    summaries = _summaries(table, commits)
    matched = [s for s in summaries if commit_filter.matches(s) and partitions.selects(s)]
    last_seen = start - 1 + len(commits)
    if not commits and cursor is not None:
        # Nothing at cursor + 1. Log cleanup may have removed it while the table moved on.
        hint = read_last_checkpoint(table.storage)
        if hint is not None and hint.version > start:
            log.warning(
                "Version %d of %s is gone (log cleanup) but the table is at version %d or later; resuming "
                "from the latest version.",
                start,
                table.uri,
                hint.version,
            )
            latest = table.version()
            summary = read_commit_summary(table, latest)
            if summary is not None and commit_filter.matches(summary) and partitions.selects(summary):
                matched.append(summary)
            last_seen = latest
    return PollResult(
        cursor=last_seen if last_seen >= 0 else cursor,
        matched=matched,
        partitions=partitions.touched(matched),
    )


class _Partitions:
    """The partitions of the commits a poll found: which a partition filter selects, and those
    touched, by logical column, typed and named by the latest metadata (read on first need)."""

    def __init__(self, table: DeltaTable | None, text: str | None) -> None:
        self._table = table
        self._text = text
        self._loaded = False
        self._selector: PartitionSelector | None = None
        self._columns: list[str] = []
        self._logical: dict[str, str] = {}

    @classmethod
    def of(cls, snapshot: Snapshot) -> _Partitions:
        found = cls(None, None)
        found._load(snapshot)
        return found

    def _load(self, snapshot: Snapshot | None = None) -> None:
        if self._loaded:
            return
        # Here, not at the top: the selector and the column mapping import pyarrow, which the
        # sensor and the trigger (importing this module) must not when no partition is asked about.
        from airflow_delta_provider.core.changes.partition_filter import PartitionSelector, logical_keys

        if snapshot is None:
            assert self._table is not None
            snapshot = self._table.snapshot()
        self._columns = list(snapshot.partition_columns)
        self._logical = logical_keys(snapshot.protocol, snapshot.metadata)
        if self._text is not None:
            self._selector = PartitionSelector(self._text, snapshot.protocol, snapshot.metadata)
        self._loaded = True

    def named(self, partitions: list[dict[str, str | None]]) -> list[dict[str, str | None]]:
        """Distinct partition values as the log keys them, by logical column in partition order."""
        found = {tuple(value.get(key) for key in self._logical): None for value in partitions}
        return [dict(zip(self._columns, key, strict=True)) for key in found]

    def selects(self, summary: CommitSummary) -> bool:
        if self._text is None:
            return True
        self._load()
        assert self._selector is not None
        return bool(self._selector.mask(summary.touched_partitions).any())

    def touched(self, matched: list[CommitSummary]) -> list[dict[str, str | None]]:
        if not any(c.touched_partitions for c in matched):
            return []
        self._load()
        found: list[dict[str, str | None]] = []
        for summary in matched:
            values = summary.touched_partitions
            if self._selector is not None:
                kept = self._selector.mask(values).tolist()
                values = [value for value, keep in zip(values, kept, strict=True) if keep]
            found += values
        return self.named(found)


def _first_candidate(table: DeltaTable, latest: int, after_timestamp: int | None) -> int:
    """Where a cursor-less poll starts: version 0, or the oldest commit at or after ``after_timestamp``
    (as a change feed's starting timestamp resolves)."""
    if after_timestamp is None:
        return 0
    stamps = commit_timestamps(table.snapshot(latest))
    return next((s.version for s in stamps if s.timestamp >= after_timestamp), latest + 1)


def payload(table_uri: str, result: PollResult, previous: int | None) -> dict[str, Any]:
    """The JSON-native event/XCom payload for a poll that matched.

    ``from_version`` to ``to_version`` is the range the event covers: every version after the
    previous cursor (from the first match without one) up to the newest match; ``versions`` are
    the matching ones among them; ``partitions`` the partitions they changed (at most
    :data:`MAX_PAYLOAD_PARTITIONS`, ``partitions_truncated`` when there were more).
    """
    last = result.matched[-1]
    return {
        "status": "success",
        "table_uri": table_uri,
        "version": last.version,
        "versions": [c.version for c in result.matched],
        "from_version": previous + 1 if previous is not None else result.matched[0].version,
        "to_version": last.version,
        "previous_version": previous,
        "commit_timestamp": last.timestamp,
        "operation": last.operation,
        "commits": [c.to_dict() for c in result.matched][-100:],
        # The partitions changed (those the partition filter selects): what a watcher-driven DAG
        # processes, since Airflow gives a watcher's event no partition key.
        "partitions": result.partitions[:MAX_PAYLOAD_PARTITIONS],
        "partitions_truncated": len(result.partitions) > MAX_PAYLOAD_PARTITIONS,
    }
