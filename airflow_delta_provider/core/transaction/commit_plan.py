"""A commit as data: what it changes (:class:`CommitPlan`), what it read (:class:`ReadSet`), the
settings every commit takes (:class:`CommitProperties`) and what it did (:class:`CommitResult`).

Each operation (a write, CREATE, OPTIMIZE, ...) only *builds* a plan; the one transaction
(:class:`~.transaction.OptimisticTransaction`) validates it, checks it against concurrent
winners, commits it and runs the post-commit work, the same way for every operation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.protocol.actions import (
    AddCDCFile,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Transaction,
)
from airflow_delta_provider.core.protocol.features import Operation
from airflow_delta_provider.core.utils.arguments import check_bool, check_positive_int

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from airflow_delta_provider.core.expressions.predicate import Predicate

__all__ = [
    "ALREADY_COMMITTED",
    "DEFAULT_MAX_ATTEMPTS",
    "NO_FILES",
    "Action",
    "CommitPlan",
    "CommitProperties",
    "CommitResult",
    "CursorAdvance",
    "ReadSet",
    "check_app_arguments",
]

#: Attempts before giving up; each retry follows a commit that did not conflict with ours.
DEFAULT_MAX_ATTEMPTS = 100
#: :attr:`CommitResult.reason` when ``(app_id, app_version)`` was already committed.
ALREADY_COMMITTED = "already_committed"
#: :attr:`CommitResult.reason` when there was nothing to commit: no files to add, nothing to
#: remove, and no ``app_id`` to record.
NO_FILES = "no_files"

Action = Protocol | Metadata | Transaction | DomainMetadata | RemoveFile | AddFile | AddCDCFile


def check_app_arguments(app_id: str | None, app_version: int | None) -> None:
    """Delta's rule for idempotent writes: both ``app_id`` and ``app_version`` or neither, and
    values the ``txn`` action can hold (a non-empty string, a non-negative long).

    :raises ValueError: (``InvalidLogValueError`` for values outside the types).
    """
    if (app_id is None) != (app_version is None):
        raise ValueError(
            "Invalid options for idempotent writes: both app_id and app_version must be given (Delta's "
            "txnAppId and txnVersion), or neither."
        )
    if app_id is not None and app_version is not None:
        Transaction(app_id, app_version).validate()


@dataclass(frozen=True)
class CursorAdvance:
    """An application transaction the commit moves from the version the application read to a new
    one: a consumer's cursor on another table, recorded in the same commit as what it produced.

    A compare-and-set: the commit is refused (``ConcurrentTransactionError``) unless the table
    still holds ``expected`` for ``app_id`` (None: no ``txn`` of it), at the version the commit is
    built on and in every concurrent winner, so that two consumers that read the same cursor never
    both commit past it. ``version`` may equal ``expected`` (the cursor recorded again).

    :param app_id: the application (``txnAppId``).
    :param version: the version to record (``txnVersion``), a non-negative long.
    :param expected: the version the application read from the table, None when it had none.
    """

    app_id: str
    version: int
    expected: int | None = None

    def __post_init__(self) -> None:
        Transaction(self.app_id, self.version).validate()
        if self.expected is not None:
            Transaction(self.app_id, self.expected).validate()


@dataclass(frozen=True, kw_only=True)
class CommitProperties:
    """What every commit takes beside what it changes (delta-rs's ``CommitProperties`` and
    ``PostCommitHookProperties``); each operation's options extend it.

    :param app_id: with ``app_version``: an idempotent commit (Delta's ``txnAppId`` /
        ``txnVersion``, a ``txn`` in the same commit). When the table already holds ``app_id`` at
        ``app_version`` or later, nothing is committed and the result says so.
    :param app_version: a non-negative integer (a Delta long), increasing per ``app_id``.
    :param user_metadata: commitInfo ``userMetadata``.
    :param tags: commitInfo ``tags`` (the Airflow run identity goes here).
    :param max_attempts: commit attempts when concurrent writers keep winning.
    :param auto_checkpoint: after the commit, Delta's checkpoint when its policy says so (every
        ``delta.checkpointInterval`` versions, default 10), then expired-log cleanup, as Spark does.
    :param cleanup_expired_logs: whether that cleanup runs after such a checkpoint; None (default):
        as the table's ``delta.enableExpiredLogCleanup`` says.
    :param cursors: application transactions the commit advances beside its own ``app_id`` (a
        consumer's cursor on the table it read), each checked as a compare-and-set
        (:class:`CursorAdvance`) and written as a ``txn`` of the commit.
    """

    app_id: str | None = None
    app_version: int | None = None
    user_metadata: str | None = None
    tags: Mapping[str, str] | None = None
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    auto_checkpoint: bool = True
    cleanup_expired_logs: bool | None = None
    cursors: Sequence[CursorAdvance] = ()

    def __post_init__(self) -> None:
        check_positive_int("max_attempts", self.max_attempts, optional=False)
        check_bool("auto_checkpoint", self.auto_checkpoint)
        if self.cleanup_expired_logs is not None:
            check_bool("cleanup_expired_logs", self.cleanup_expired_logs)
        check_app_arguments(self.app_id, self.app_version)
        if isinstance(self.cursors, CursorAdvance) or not all(
            isinstance(c, CursorAdvance) for c in self.cursors
        ):
            raise ValueError(f"cursors must be a sequence of CursorAdvance, got {self.cursors!r}.")
        apps = [c.app_id for c in self.cursors]
        if len(set(apps)) != len(apps) or self.app_id in apps:
            raise ValueError(
                f"Each application may have one txn per commit; cursors {apps} repeat an application "
                f"(or the commit's own app_id {self.app_id!r})."
            )

    @property
    def app_transaction(self) -> tuple[str, int] | None:
        """``(app_id, app_version)`` of an idempotent commit, else None."""
        if self.app_id is None or self.app_version is None:
            return None
        return self.app_id, self.app_version


@dataclass(frozen=True)
class ReadSet:
    """What a transaction read, which concurrent winners must not have changed (Delta's
    ``readPredicates``, ``readFiles``, ``readWholeTable`` and ``readAppIds``).

    :param predicates: the partition predicates whose files were read.
    :param paths: the files read (``add.path``; the transaction compares them canonically).
    :param whole_table: every file was read.
    :param app_ids: the applications whose ``txn`` was read.
    """

    predicates: tuple[Predicate, ...] = ()
    paths: frozenset[str] = frozenset()
    whole_table: bool = False
    app_ids: frozenset[str] = frozenset()

    @classmethod
    def matching(cls, predicate: Predicate | None, paths: Iterable[str]) -> ReadSet:
        """A read of the files that ``predicate`` selects (None: the whole table), with their paths."""
        if predicate is None:
            return cls(paths=frozenset(paths), whole_table=True)
        return cls(predicates=(predicate,), paths=frozenset(paths))

    @classmethod
    def files(cls, paths: Iterable[str]) -> ReadSet:
        """A read of exactly these files (Delta's ``trackFilesRead``): a commit that removes one of
        them conflicts, one that only adds files does not (OPTIMIZE)."""
        return cls(paths=frozenset(paths))

    @property
    def reads_by_predicate(self) -> bool:
        """Whether files added concurrently may be ones this transaction should have read."""
        return bool(self.predicates) or self.whole_table

    def union(self, other: ReadSet) -> ReadSet:
        return ReadSet(
            predicates=(*self.predicates, *other.predicates),
            paths=self.paths | other.paths,
            whole_table=self.whole_table or other.whole_table,
            app_ids=self.app_ids | other.app_ids,
        )


@dataclass(frozen=True)
class CommitPlan:
    """What one commit changes, as an operation planned it.

    :param operation: Delta's operation name (``WRITE``, ``CREATE TABLE``, ``OPTIMIZE`` ...).
    :param parameters: commitInfo ``operationParameters`` (values as Delta writes them: strings,
        JSON for structures).
    :param metrics: commitInfo ``operationMetrics`` (written as strings).
    :param protocol: a new protocol, if the commit changes it.
    :param metadata: new metadata (schema, partitioning, properties), if the commit changes it.
    :param txns: application transactions beside the commit's own ``app_id`` (e.g. a consumer's
        cursor on another table).
    :param domains: domain metadata the commit sets or removes.
    :param removes: files the commit removes.
    :param adds: files the commit adds.
    :param cdc: change-data files the commit wrote.
    :param read: what the plan was computed from (its conflict surface).
    :param data_change: False when the commit rewrites without changing the data (OPTIMIZE,
        VACUUM records): it then runs at snapshot isolation and cannot conflict with appends.
    :param kind: the operation whose feature support the table must have.
    :param tags: commitInfo tags the operation itself adds (over the properties' tags).
    """

    operation: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    protocol: Protocol | None = None
    metadata: Metadata | None = None
    txns: tuple[Transaction, ...] = ()
    domains: tuple[DomainMetadata, ...] = ()
    removes: tuple[RemoveFile, ...] = ()
    adds: tuple[AddFile, ...] = ()
    cdc: tuple[AddCDCFile, ...] = ()
    read: ReadSet = ReadSet()
    data_change: bool = True
    kind: Operation = Operation.WRITE
    tags: Mapping[str, str] = field(default_factory=dict)

    def actions(self, txn: Transaction | None = None) -> list[Action]:
        """The commit's actions in the order they are written (the commit's own ``txn`` first)."""
        head: list[Action] = [a for a in (self.protocol, self.metadata, txn) if a is not None]
        return [*head, *self.txns, *self.domains, *self.removes, *self.adds, *self.cdc]


@dataclass(frozen=True)
class CommitResult:
    """What a commit did.

    :param version: the version holding the commit. When nothing was committed: for
        ``reason="already_committed"`` the version whose ``txn`` recorded the application's
        version (see ``version_exact``); for ``reason="no_files"`` the table's current version.
    :param committed: False when nothing was written; ``reason`` says why.
    :param reason: None for a commit; ``"already_committed"`` (the table already holds
        ``app_id`` at ``app_version`` or later) or ``"no_files"`` (an append, or an overwrite
        that matched nothing, with no files and no ``app_id``: an empty WRITE commit would
        only add noise to the log) when nothing was written.
    :param version_exact: False only for ``"already_committed"`` when the commit that recorded
        the txn could not be found (cleaned up, or too far from the txn's ``lastUpdated``):
        ``version`` is then an upper bound, the newest version that may have recorded it (the
        application's data is in the table at that version).
    :param post_commit_errors: failures of the work after a landed commit (checksum,
        checkpoint, log cleanup), each ``"<step> after version N: <error>"``. The commit
        stands; the table is readable without that work, and a later checkpoint redoes it.
    """

    version: int
    committed: bool
    operation: str
    read_version: int | None
    attempts: int = 1
    app_id: str | None = None
    app_version: int | None = None
    num_added_files: int = 0
    num_removed_files: int = 0
    num_output_rows: int = 0
    num_output_bytes: int = 0
    num_removed_bytes: int = 0
    operation_metrics: dict[str, str] = field(default_factory=dict)
    txn_id: str | None = None
    reason: str | None = None
    version_exact: bool = True
    post_commit_errors: tuple[str, ...] = ()

    @property
    def skipped(self) -> bool:
        """Nothing was written (see :attr:`reason`)."""
        return not self.committed

    @property
    def already_committed(self) -> bool:
        """Nothing was written because the table already holds ``(app_id, app_version)``."""
        return not self.committed and self.reason == ALREADY_COMMITTED

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (for XCom and asset event extras)."""
        return {
            "version": self.version,
            "committed": self.committed,
            "skipped": self.skipped,
            "reason": self.reason,
            "version_exact": self.version_exact,
            "operation": self.operation,
            "read_version": self.read_version,
            "attempts": self.attempts,
            "app_id": self.app_id,
            "app_version": self.app_version,
            "num_added_files": self.num_added_files,
            "num_removed_files": self.num_removed_files,
            "num_output_rows": self.num_output_rows,
            "num_output_bytes": self.num_output_bytes,
            "num_removed_bytes": self.num_removed_bytes,
            "operation_metrics": dict(self.operation_metrics),
            "txn_id": self.txn_id,
            "post_commit_errors": list(self.post_commit_errors),
        }
