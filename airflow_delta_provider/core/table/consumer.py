"""A consumer of a table's changes: which source versions it reads next, from the cursor its target holds.

A consumer commits what it computed from a source table into a target together with its cursor (the
last source version consumed) as a ``txn`` of the target in the same commit, as Structured
Streaming's Delta sink records its batches: any engine sees how far it got, and the cursor moves
only with the data, as a compare-and-set (:class:`~.commit_plan.CursorAdvance`). Next come the
versions after the cursor, up to the newest or a bound; without a cursor, the source's snapshot as
inserts (as Delta's streaming source starts) or an explicit starting version. The cursor's
``appId`` is ``delta-source/<source table id>/<consumer>`` (docs/reading.md). A consumer of one
partition (an Airflow run's partition key) keeps a cursor per partition
(``...?partition=<key>``) and reads only that partition's changes (docs/partitions.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote

from airflow_delta_provider.core.changes.bounds import ChangeRange, checked_commit_time, range_commit_files
from airflow_delta_provider.core.errors import ConsumerCursorError, SourceIsTargetError
from airflow_delta_provider.core.expressions.partition_filter import PartitionFilter
from airflow_delta_provider.core.log.timeline import CommitTimeRule, commit_info
from airflow_delta_provider.core.transaction.commit_plan import CursorAdvance
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_delta_provider.core.changes.feed import Changes
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.table.delta_table import DeltaTable

__all__ = [
    "SOURCE_APP_PREFIX",
    "ConsumerPartition",
    "SourceRead",
    "StartingVersion",
    "commit_time",
    "consumer_app_id",
    "consumer_partition",
    "parse_consumer_app_id",
    "plan_read",
]

log = get_logger(__name__)

#: The start of every consumer cursor's ``appId``.
SOURCE_APP_PREFIX = "delta-source/"
#: Where a consumer without a cursor starts: None (the source's snapshot, then its changes),
#: ``"latest"`` (only versions after the current one) or a version (its changes from there).
StartingVersion = int | Literal["latest"] | None


#: What separates a per-partition cursor's partition key (percent-encoded) from its consumer.
_PARTITION_MARK = "?partition="


def consumer_app_id(source_table_id: str, consumer: str, partition: str | None = None) -> str:
    """The ``appId`` of ``consumer``'s cursor on the source table ``source_table_id``, and of its
    cursor of one partition (a key) when ``partition`` is given."""
    if not source_table_id or "/" in source_table_id:
        raise ValueError(f"A source table id is a non-empty name without '/', got {source_table_id!r}.")
    if not consumer:
        raise ValueError("A consumer needs a non-empty name.")
    base = f"{SOURCE_APP_PREFIX}{source_table_id}/{consumer}"
    return base if partition is None else f"{base}{_PARTITION_MARK}{quote(partition, safe='')}"


def parse_consumer_app_id(app_id: str) -> tuple[str, str] | None:
    """``(source table id, consumer)`` of a cursor's ``appId`` (a partition's cursor too, see
    :func:`consumer_partition`); None for any other ``appId``."""
    if not app_id.startswith(SOURCE_APP_PREFIX):
        return None
    table_id, _, consumer = app_id[len(SOURCE_APP_PREFIX) :].partition("/")
    consumer = consumer.rpartition(_PARTITION_MARK)[0] or consumer
    return (table_id, consumer) if table_id and consumer else None


def consumer_partition(app_id: str) -> str | None:
    """The partition key of a per-partition cursor's ``appId``; None for a cursor of a whole table."""
    if parse_consumer_app_id(app_id) is None or _PARTITION_MARK not in app_id:
        return None
    return unquote(app_id.rpartition(_PARTITION_MARK)[2])


@dataclass(frozen=True)
class ConsumerPartition:
    """One partition a consumer reads, with its own cursor: an Airflow run's partition key.

    :param key: the partition key (names the cursor).
    :param source_filter: the source's partition filter selecting it, and the filter's parameters.
    :param target_filter: the target's partition filter of the slice the consumer writes for it
        (a cursor-less first read is refused only when that slice holds data); None: the whole
        target is judged.
    """

    key: str
    source_filter: tuple[str, Mapping[str, Any]]
    target_filter: tuple[str, Mapping[str, Any]] | None = None


@dataclass(frozen=True)
class SourceRead:
    """What a consumer reads next from its source, and the cursor its commit records.

    :param app_id: the cursor's ``appId``.
    :param cursor: the version the target holds for it (None: no cursor yet).
    :param latest: the source's latest version when the read was planned.
    :param start: the first version delivered (None: nothing new).
    :param end: the last version delivered (None: nothing new).
    :param snapshot: the source's snapshot at ``end``, when its rows are delivered as inserts (a
        first read without a starting version); for a partition, restricted to it.
    :param committed_at: when ``snapshot``'s version was committed (ms; :func:`commit_time`), the
        inserts' ``_commit_timestamp``.
    :param changes: the changes of ``start`` to ``end`` otherwise.
    :param record: the cursor version the commit records (None: the cursor does not move).
    :param partition: the one partition read (its rows only, in the snapshot and the changes).
    """

    app_id: str
    cursor: int | None
    latest: int
    start: int | None = None
    end: int | None = None
    snapshot: Snapshot | None = None
    committed_at: int | None = None
    changes: Changes | None = None
    record: int | None = None
    partition: ConsumerPartition | None = None

    @property
    def versions(self) -> tuple[int, int] | None:
        """``(start, end)`` of what is delivered; None when nothing is new."""
        if self.start is None or self.end is None:
            return None
        return self.start, self.end

    @property
    def advance(self) -> CursorAdvance | None:
        """The cursor move the commit makes (a compare-and-set from :attr:`cursor`), if any."""
        if self.record is None:
            return None
        return CursorAdvance(self.app_id, self.record, self.cursor)


def plan_read(
    source: DeltaTable,
    target: Snapshot | None,
    consumer: str,
    *,
    up_to: int | None = None,
    starting_version: StartingVersion = None,
    reset: bool = False,
    partition: ConsumerPartition | None = None,
) -> SourceRead:
    """What ``consumer`` reads next from ``source``, given the cursor ``target`` holds.

    With a cursor: the changes of the versions after it, up to the source's latest version (or
    ``up_to``, when lower); nothing when there is none. Without one (or with ``reset``): from
    ``starting_version``; by default the snapshot at that last version (Delta's streaming source).
    With ``partition``: the same for that partition alone, with its own cursor; versions that
    changed nothing in it are nothing new (the cursor stays, nothing is committed).

    :param target: the target's latest snapshot (None: the target does not exist yet).
    :param consumer: the consumer's name, unique per target (see :func:`consumer_app_id`).
    :param up_to: deliver no version after this one (e.g. the version an event announced).
    :param starting_version: where a consumer without a cursor starts (see :data:`StartingVersion`).
    :param reset: start again as if there were no cursor (the commit still checks the one there).
    :param partition: read one partition, with its cursor (see :class:`ConsumerPartition`).
    :raises TableNotFoundError: the source does not exist.
    :raises SourceIsTargetError: the source and the target are one table (one table id), whatever
        locations name them.
    :raises ConsumerCursorError: no cursor (and no ``starting_version``) while the target holds
        data (in the partition's slice, for a partition), or a cursor of this consumer on another
        source table.
    :raises PredicateError: a partition's filter does not fit the source's or the target's columns.
    :raises DeltaError: as :meth:`DeltaTable.changes` (versions removed by log cleanup, a commit
        whose changed rows were not recorded ...).
    """
    latest_snapshot = source.snapshot()
    if target is not None:
        _check_not_self(latest_snapshot, target)
    latest = latest_snapshot.version
    key = partition.key if partition is not None else None
    app_id = consumer_app_id(latest_snapshot.metadata.id, consumer, key)
    cursor = target.app_transaction_version(app_id) if target is not None else None
    end = latest if up_to is None else min(up_to, latest)
    read = _Planned(source, app_id, cursor, latest_snapshot, partition)
    if cursor is not None and not reset:
        return read.changes(cursor + 1, end) if end > cursor else read.nothing()
    if not reset and target is not None:
        _check_first_read(target, app_id, consumer, source.uri, starting_version, partition)
    if starting_version is None:
        snapshot = latest_snapshot if end == latest else source.snapshot(end)
        return read.snapshot(snapshot)
    start = latest + 1 if starting_version == "latest" else starting_version
    if end < start:  # nothing yet: record where the consumer stands, or "latest" would move on
        return SourceRead(
            app_id, cursor, latest, record=start - 1 if start > 0 else None, partition=partition
        )
    return read.changes(start, end)


@dataclass(frozen=True)
class _Planned:
    """The reads :func:`plan_read` may plan, for one cursor (of a partition, or of the table)."""

    source: DeltaTable
    app_id: str
    cursor: int | None
    latest_snapshot: Snapshot
    partition: ConsumerPartition | None

    @property
    def latest(self) -> int:
        return self.latest_snapshot.version

    def nothing(self) -> SourceRead:
        return SourceRead(self.app_id, self.cursor, self.latest, partition=self.partition)

    def changes(self, start: int, end: int) -> SourceRead:
        text, parameters = self.partition.source_filter if self.partition is not None else (None, None)
        changes = self.source.changes(start, end, partition_filter=text, parameters=parameters)
        if self.partition is not None and not changes.row_scans():
            return self.nothing()  # the versions changed nothing in this partition
        return SourceRead(
            self.app_id,
            self.cursor,
            self.latest,
            start,
            end,
            changes=changes,
            record=end,
            partition=self.partition,
        )

    def snapshot(self, snapshot: Snapshot) -> SourceRead:
        if self.partition is not None:  # the partition's files alone, replayed at their cost
            text, parameters = self.partition.source_filter
            chosen = PartitionFilter(text, snapshot.partition_columns, snapshot.schema, parameters)
            snapshot = snapshot.with_partition_filter(chosen)
            if snapshot.num_files() == 0:
                return self.nothing()  # the partition holds no data yet
        version = snapshot.version
        return SourceRead(
            self.app_id,
            self.cursor,
            self.latest,
            0,
            version,
            snapshot=snapshot,
            committed_at=commit_time(self.latest_snapshot, version),
            record=version,
            partition=self.partition,
        )


def _check_not_self(source: Snapshot, target: Snapshot) -> None:
    """Refuse a source that is the target: locations can name one table in many ways (a symlink,
    ``file://`` or not, ``s3a://``, case on a case-insensitive store), its id names it once."""
    table_id = source.metadata.id
    if table_id == target.metadata.id:
        raise SourceIsTargetError(
            f"The source {source.storage.root_uri} and the target {target.storage.root_uri} are one "
            f"table (id {table_id}): the source is the target reached through another location (a "
            f"symlink, another spelling), or a copy of it (a copied table keeps its id). A consumer "
            f"cannot consume its own commits: each run would read its own output again. Name another "
            f"source table; to consume a copy, create the copy as a new table so that it gets an id of "
            f"its own."
        )


def _check_first_read(
    target: Snapshot,
    app_id: str,
    consumer: str,
    source_uri: str,
    starting_version: StartingVersion,
    partition: ConsumerPartition | None,
) -> None:
    """Refuse a start that would deliver rows the target may already hold (in the partition's
    slice, for a partition: another partition's data is no reason to refuse)."""
    own = parse_consumer_app_id(app_id)
    assert own is not None  # (plan_read built it with consumer_app_id)
    table_id = own[0]
    for other, txn in target.transactions.items():
        parsed = parse_consumer_app_id(other)
        # (the consumer's cursors of other partitions of the same source are no reason to refuse)
        if parsed is not None and parsed[1] == consumer and parsed[0] != table_id:
            raise ConsumerCursorError(
                f"{target.storage.root_uri} holds a cursor of consumer {consumer!r} on another source "
                f"table (id {parsed[0]}, consumed up to version {txn.version}), but {source_uri} is "
                f"table {table_id}: the source was dropped "
                f"and created again, or the consumer now reads another table. Starting over would "
                f"deliver rows the target may already hold; reset the consumer to start over on this "
                f"table (with an overwrite of the target, or from an explicit starting version)."
            )
    if starting_version is None and _holds_data(target, partition):
        where = f"data in the slice of partition {partition.key!r}" if partition is not None else "data"
        raise ConsumerCursorError(
            f"{target.storage.root_uri} holds {where} but no cursor of consumer {consumer!r} on "
            f"{source_uri} (appId {app_id!r}): either the consumer never committed to it, or its "
            f"cursor expired (the target's delta.setTransactionRetentionDuration passed without a "
            f"commit of it). Starting from the source's snapshot would add rows the target may "
            f"already hold. Give the source version to start from, or reset the consumer and "
            f"overwrite the target."
        )


def _holds_data(target: Snapshot, partition: ConsumerPartition | None) -> bool:
    """Whether the target holds data (in the slice the partition's consumer writes)."""
    if partition is None or partition.target_filter is None:
        return target.num_files() > 0
    text, parameters = partition.target_filter
    chosen = PartitionFilter(text, target.partition_columns, target.schema, parameters)
    return bool(chosen.matches(target.partition_values()).any())


def commit_time(latest: Snapshot, version: int | None = None) -> int:
    """When ``version`` (default: ``latest``'s) was committed (ms), as the change feed gives it in
    ``_commit_timestamp`` and time travel finds it (:class:`~.timeline.CommitTimeRule`).

    :param latest: the table's latest snapshot (its properties decide the rule).
    :raises CommitsCleanedUpError: the version's commit is no longer in the log.
    :raises CorruptLogError: its in-commit timestamp lies outside what a timestamp can hold.
    """
    version = latest.version if version is None else version
    files, times = range_commit_files(latest, ChangeRange(version, version, latest.version))
    rule = CommitTimeRule(latest)
    info = commit_info(latest.storage, version) if rule.takes_ict(version) else None
    return checked_commit_time(rule.stamp(version, times[version], info), files[0].file.path)
