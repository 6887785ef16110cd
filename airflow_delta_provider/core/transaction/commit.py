"""The one transaction: a :class:`~.commit_plan.CommitPlan` committed atomically, checked against
concurrent winners, retried.

A commit is a put-if-absent of ``_delta_log/%020d.json``; a lost race is checked with Delta's
ConflictChecker rules (:mod:`.conflicts`) and retried at the next free version, and a ``txnId`` lets
a writer whose response was lost recognise its own commit. Every action is validated before the
first attempt. Once the commit file is in place the commit has happened: post-commit work
(checksum, checkpoint, log cleanup) reports failures on :attr:`CommitResult.post_commit_errors`.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_delta_provider import __version__
from airflow_delta_provider.core.errors import (
    AppendOnlyViolationError,
    CommitError,
    CommitFileExistsError,
    ConcurrentTransactionError,
    DeltaError,
    MaxCommitAttemptsExceededError,
)
from airflow_delta_provider.core.log.checksum import next_checksum, read_checksum, write_checksum
from airflow_delta_provider.core.log.commits import check_replayable, read_commit
from airflow_delta_provider.core.log.logfiles import LogFileKind, commit_name, parse_log_file, version_prefix
from airflow_delta_provider.core.log.snapshot import load_snapshot
from airflow_delta_provider.core.protocol.actions import (
    AddCDCFile,
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Transaction,
    dumps,
)
from airflow_delta_provider.core.protocol.features import check_supported
from airflow_delta_provider.core.protocol.row_tracking import (
    assign_row_ids,
    assigns_row_ids,
    high_water_mark,
    winner_high_water_mark,
)
from airflow_delta_provider.core.protocol.validation import validate_actions, validate_commit_info
from airflow_delta_provider.core.transaction.commit_plan import (
    ALREADY_COMMITTED,
    Action,
    CommitPlan,
    CommitProperties,
    CommitResult,
    ReadSet,
)
from airflow_delta_provider.core.transaction.conflicts import (
    SERIALIZABLE,
    SNAPSHOT_ISOLATION,
    WRITE_SERIALIZABLE,
    ConflictChecker,
)
from airflow_delta_provider.core.transaction.idempotency import already_committed_result
from airflow_delta_provider.core.utils.redaction import get_logger, redact

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow_delta_provider.core.log.commits import CommitActions
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore

__all__ = [
    "ENGINE_INFO",
    "LandedCommit",
    "OptimisticTransaction",
    "PostCommitHook",
    "run_post_commit_hooks",
]

log = get_logger(__name__)

ENGINE_INFO = f"airflow-delta-provider/{__version__}"


@dataclass(frozen=True)
class LandedCommit:
    """A commit whose file is in place, as post-commit work sees it.

    :param store: the table's store.
    :param version: the committed version.
    :param protocol: the table's protocol at that version.
    :param metadata: the table's metadata at that version.
    """

    store: LogStore
    version: int
    protocol: Protocol
    metadata: Metadata


@dataclass(frozen=True)
class PostCommitHook:
    """Work to do after a commit landed; its failure never turns the commit into a failure.

    The transaction writes the version's checksum itself; other work (Delta's checkpoint and
    log cleanup) is handed to it from above, so the commit path imports no maintenance module.

    :param name: what it is, in warnings and :attr:`CommitResult.post_commit_errors`.
    :param run: called with the landed commit; returns False when it did nothing (the hooks
        that run ``after`` it are then skipped too).
    :param after: the name of a hook that must have run and succeeded first (log cleanup
        runs only after a checkpoint).
    """

    name: str
    run: Callable[[LandedCommit], bool | None]
    after: str | None = None


def run_post_commit_hooks(commit: LandedCommit, hooks: Sequence[PostCommitHook]) -> tuple[str, ...]:
    """Run the post-commit hooks of ``version`` in order, never raising.

    The commit file is in place: whatever fails now (``IsADirectoryError``, a full disk, a
    checkpoint that overflows...) is logged as a WARNING with its cause, redacted, and
    returned, so the caller reports a landed commit as landed. ``BaseException`` (a
    ``KeyboardInterrupt``) still propagates.

    :returns: one ``"<hook> after version N: <error>"`` per failed hook.
    """
    version = commit.version
    done: set[str] = set()
    errors: list[str] = []
    for hook in hooks:
        if hook.after is not None and hook.after not in done:
            continue
        try:
            if hook.run(commit) is not False:
                done.add(hook.name)
        except Exception as err:
            message = redact(f"{hook.name} after version {version}: {_describe(err)}")
            log.warning(
                "Version %d of %s is committed, but its post-commit work failed (the commit stands; "
                "the table is readable without it): %s",
                version,
                redact(commit.store.root_uri),
                message,
            )
            errors.append(message)
    return tuple(errors)


def _describe(err: BaseException) -> str:
    """``Type: message``, with the chain of causes (what a WARNING line needs to be acted on)."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen and len(parts) < 4:
        seen.add(id(current))
        parts.append(f"{type(current).__name__}: {current}")
        current = current.__cause__ or current.__context__
    return " (caused by ".join(parts) + ")" * (len(parts) - 1)


@dataclass
class _Commit:
    """One plan made ready to write: its actions, its commitInfo fields and its conflict surface."""

    plan: CommitPlan
    actions: list[Action]
    protocol: Protocol
    metadata: Metadata
    metrics: dict[str, str]
    tags: dict[str, str] | None
    isolation: str
    blind_append: bool
    checker: ConflictChecker
    #: the row-tracking high-water mark to assign ids above (None: the table tracks no rows)
    row_mark: int | None
    #: the in-commit timestamp of the version before the attempt (None: no ICT, or none yet)
    previous_ict: int | None
    ict_enabled: bool


class OptimisticTransaction:
    """One transaction against a table: what it read, and the commit of a plan.

    :param store: the table's store.
    :param read_snapshot: the snapshot the transaction read (default: the latest, loaded
        lazily; only protocol, metadata and transactions are needed for an append).
    :param new_table: the transaction creates the table (reads nothing; commits version 0).
    :param isolation_level: ``Serializable`` (Delta's default) or ``WriteSerializable``.
    :param properties: the commit's settings: its own ``txn`` (``app_id`` / ``app_version``),
        commitInfo ``userMetadata`` and ``tags``, attempts.
    :param post_commit_hooks: work after a landed commit (the facade hands in Delta's
        checkpoint and log cleanup), run after the checksum through :func:`run_post_commit_hooks`.
    :raises ValueError: ``read_snapshot`` is restricted to some partitions (``partition_filter``).
    """

    def __init__(
        self,
        store: LogStore,
        *,
        read_snapshot: Snapshot | None = None,
        new_table: bool = False,
        isolation_level: str | None = None,
        properties: CommitProperties | None = None,
        post_commit_hooks: Sequence[PostCommitHook] = (),
    ) -> None:
        if read_snapshot is not None:
            # The conflict checks (and the .crc and checkpoint after the commit) take the read
            # snapshot for the whole table.
            read_snapshot.require_whole("A commit")
        self.store = store
        self._read_snapshot = read_snapshot
        self.new_table = new_table
        self._isolation_level = isolation_level
        self.properties = properties or CommitProperties()
        self.post_commit_hooks = tuple(post_commit_hooks)
        self.txn_id = str(uuid.uuid4())
        #: what the transaction read so far (the conflict checks compare winners with it)
        self.read_set = ReadSet()

    # --- what the transaction read ------------------------------------------------------

    @cached_property
    def snapshot(self) -> Snapshot:
        if self._read_snapshot is not None:
            return self._read_snapshot
        return load_snapshot(self.store)

    @property
    def read_version(self) -> int:
        return -1 if self.new_table else self.snapshot.version

    def record_read(self, read: ReadSet) -> None:
        """Add ``read`` to what the transaction read (its paths compared canonically)."""
        paths = frozenset(map(self.store.path.canonical, read.paths))
        self.read_set = self.read_set.union(dataclasses.replace(read, paths=paths))

    def app_transaction_version(self, app_id: str) -> int | None:
        """The last version ``app_id`` committed, recording that this transaction read it."""
        self.record_read(ReadSet(app_ids=frozenset({app_id})))
        return None if self.new_table else self.snapshot.app_transaction_version(app_id)

    def already_committed(self, operation: str) -> CommitResult | None:
        """The "nothing to commit" result when the table already holds the properties'
        ``(app_id, app_version)``; None otherwise (or when the commit is not idempotent).

        Reads protocol, metadata and txns of the snapshot only, never its files: a builder asks
        this first, before any work (the hot path of a retried task).
        """
        app = self.properties.app_transaction
        if app is None or self.new_table:
            return None
        # Not recorded as read: the commit's own appId is blind, asked again of every winner.
        current = self.snapshot.app_transaction_version(app[0])
        if current is None or current < app[1]:
            return None
        return already_committed_result(self.snapshot, app[0], app[1], current, operation)

    def _check_cursors(self) -> None:
        """Each cursor the properties advance still holds the version its application read (the
        reads are recorded, so a winner that records one of them conflicts too).

        :raises ConcurrentTransactionError: the table holds another version (another consumer
            moved the cursor since it was read).
        """
        for cursor in self.properties.cursors:
            current = self.app_transaction_version(cursor.app_id)
            if current != cursor.expected:
                raise ConcurrentTransactionError(
                    f"Application {cursor.app_id!r} read version {cursor.expected} of its txn, but "
                    f"{self.store.root_uri} now holds {current} (version {self.read_version} of the "
                    f"table): another writer with the same application id committed since. Read it "
                    f"again and redo the work from there.",
                    version=self.read_version,
                )

    # --- commit -----------------------------------------------------------------------

    def commit(self, plan: CommitPlan) -> CommitResult:
        """Commit ``plan`` atomically at the next version, retrying past concurrent winners.

        :raises ConcurrentModificationError: a winner conflicts (the subclass names Delta's error).
        :raises UnsupportedFeatureError: the table's protocol asks for a feature this core lacks.
        :raises AppendOnlyViolationError: a data-changing remove on a ``delta.appendOnly`` table.
        :raises InvalidLogValueError: a value does not fit its Delta type (nothing is written).
        :raises MaxCommitAttemptsExceededError: too many winners in a row.
        :returns: the result; failures after the commit landed are on its ``post_commit_errors``.
            Nothing is written when the table already holds the properties' ``app_id`` at
            ``app_version`` or later.
        """
        done = self.already_committed(plan.operation)
        if done is not None:
            return done
        self._check_cursors()
        prepared = self._prepare(plan)
        landed = self._land(prepared)
        if isinstance(landed, CommitResult):
            return landed
        version, attempts, ict = landed
        # The commit file is in place: from here on nothing may turn the commit into a failure.
        result = self._result(version, prepared, attempts, committed=True)
        log.info("Committed %s to %s at version %d.", plan.operation, self.store.root_uri, version)
        commit = LandedCommit(self.store, version, prepared.protocol, prepared.metadata)
        hooks = [self._checksum_hook(prepared.actions, ict), *self.post_commit_hooks]
        errors = run_post_commit_hooks(commit, hooks)
        return dataclasses.replace(result, post_commit_errors=errors) if errors else result

    def _prepare(self, plan: CommitPlan) -> _Commit:
        """Validate ``plan`` and fix what every attempt writes (all before anything is written)."""
        properties = self.properties
        app = properties.app_transaction
        now = int(time.time() * 1000)
        own = Transaction(app[0], app[1], last_updated=now) if app else None
        cursors = tuple(Transaction(c.app_id, c.version, last_updated=now) for c in properties.cursors)
        if cursors:
            plan = dataclasses.replace(plan, txns=(*cursors, *plan.txns))
        actions = plan.actions(own)
        protocol = plan.protocol or self.snapshot.protocol
        metadata = plan.metadata or self.snapshot.metadata
        # Every value against its Delta type, before anything else is decided or written.
        validate_actions(actions, metadata)
        check_supported(protocol, metadata, plan.kind)
        self._check_append_only(actions, metadata)
        if not self.new_table:
            self.snapshot.check_replayable()  # never build on a log no reader can replay
        our_txns = {a.app_id: a.version for a in actions if isinstance(a, Transaction)}
        # The cursors are compare-and-sets: read (a winner recording one conflicts); the own appId is not.
        advanced = {c.app_id for c in properties.cursors}
        self.record_read(dataclasses.replace(plan.read, app_ids=plan.read.app_ids | advanced))
        read = self.read_set
        file_actions = [a for a in actions if isinstance(a, AddFile | RemoveFile)]
        changes_data = plan.data_change and any(a.data_change for a in file_actions)
        blind_append = not read.reads_by_predicate and all(
            isinstance(a, AddFile) for a in actions if isinstance(a, AddFile | RemoveFile | AddCDCFile)
        )
        isolation = self._isolation(metadata, changes_data)
        canonical = self.store.path.canonical
        checker = ConflictChecker(
            root_uri=self.store.root_uri,
            path=self.store.path,
            new_table=self.new_table,
            read_metadata=None if self.new_table else self.snapshot.metadata,
            kind=plan.kind,
            protocol_changed=plan.protocol is not None,
            metadata_changed=plan.metadata is not None,
            isolation=isolation,
            read=read,
            removed_paths=frozenset(canonical(a.path) for a in plan.removes),
            our_txns=our_txns,
            own_app_id=app[0] if app else None,
            metadata=metadata,
            domains=frozenset(d.domain for d in plan.domains),
        )
        # Row tracking: ids and commit versions depend on the attempt's version and on the mark the
        # winners left, so they are assigned again on every attempt (None: the table has none).
        row_mark = None
        if assigns_row_ids(protocol, metadata):
            row_mark = -1 if self.new_table else high_water_mark(self.snapshot.domain_metadata)
        ict_enabled = metadata.config.in_commit_timestamps
        version = self.read_version + 1
        tags = {**(properties.tags or {}), **plan.tags}
        return _Commit(
            plan=plan,
            actions=actions,
            protocol=protocol,
            metadata=metadata,
            metrics={k: str(v) for k, v in plan.metrics.items()},
            tags=tags or None,
            isolation=isolation,
            blind_append=blind_append,
            checker=checker,
            row_mark=row_mark,
            previous_ict=self._commit_ict(version - 1) if ict_enabled and version > 0 else None,
            ict_enabled=ict_enabled,
        )

    def _land(self, commit: _Commit) -> tuple[int, int, int | None] | CommitResult:
        """Put the commit at the next free version: ``(version, attempts, in-commit timestamp)``,
        or the result saying a winner already recorded our application transaction."""
        storage = self.store
        submitted = commit.actions
        version = self.read_version + 1
        attempts = 0
        while True:
            attempts += 1
            if commit.row_mark is not None:
                commit.actions = assign_row_ids(submitted, high_water_mark=commit.row_mark, version=version)
                validate_actions(commit.actions, commit.metadata)
            lines = [dumps({_KEY[type(a)]: a.to_json()}) for a in commit.actions]
            now = int(time.time() * 1000)
            ict = None
            if commit.ict_enabled:
                ict = max(now, commit.previous_ict + 1) if commit.previous_ict is not None else now
            commit_info = self._commit_info(commit, timestamp=now, in_commit_timestamp=ict)
            validate_commit_info(commit_info)
            payload = "\n".join([dumps({"commitInfo": commit_info}), *lines]) + "\n"
            try:
                storage.put_if_absent(storage.log_path(commit_name(version)), payload.encode())
            except CommitFileExistsError:
                taken = self._read_commit(version)
                if self._is_ours(taken):
                    log.info("Version %d is this transaction's own commit (a lost response); done.", version)
                    return version, attempts, ict
                winners = self._winners(version, taken)
                for winner in winners:
                    if commit.checker.check(winner) is not None:
                        return self._result(winner.version, commit, attempts, committed=False)
                check_replayable(winners)  # the retry builds on the winners
                if commit.row_mark is not None:  # Delta exempts this domain from conflicts: renumber above
                    for winner in winners:
                        commit.row_mark = winner_high_water_mark(winner.actions, commit.row_mark)
                last = winners[-1]
                commit.previous_ict = _ict(last)
                log.info(
                    "Version %d was taken by a concurrent commit (%d winner(s) up to version %d, no "
                    "conflict); retrying at version %d.",
                    version,
                    len(winners),
                    last.version,
                    last.version + 1,
                )
                version = last.version + 1
                if attempts >= self.properties.max_attempts:
                    raise MaxCommitAttemptsExceededError(
                        f"Gave up committing {commit.plan.operation} to {self.store.root_uri} after "
                        f"{attempts} attempts: other writers committed first every time. Retry later, or "
                        f"raise max_attempts."
                    ) from None
                continue
            except DeltaError:
                raise
            except Exception:
                # The put may have landed even though the call failed (a timeout after the write).
                try:
                    landed = self._read_commit(version)
                except DeltaError:
                    landed = None
                if self._is_ours(landed):
                    return version, attempts, ict
                raise
            return version, attempts, ict

    # --- helpers ----------------------------------------------------------------------

    def _isolation(self, metadata: Metadata, changes_data: bool) -> str:
        level = self._isolation_level or metadata.config.isolation_level
        if level not in (SERIALIZABLE, WRITE_SERIALIZABLE):
            raise CommitError(
                f"Isolation level {level!r} is not supported; use {SERIALIZABLE!r} (Delta's default) or "
                f"{WRITE_SERIALIZABLE!r}."
            )
        # Delta: a transaction that changes no data cannot be invalidated by concurrent appends.
        return level if changes_data else SNAPSHOT_ISOLATION

    @staticmethod
    def _check_append_only(actions: Sequence[Action], metadata: Metadata) -> None:
        if not metadata.config.append_only:
            return
        if any(isinstance(a, RemoveFile) and a.data_change for a in actions):
            raise AppendOnlyViolationError(
                "This table is configured to only allow appends (delta.appendOnly=true); an overwrite or "
                "replaceWhere would remove data. Append instead, or unset delta.appendOnly on the table "
                "if removing data is intended."
            )

    def _commit_info(
        self, commit: _Commit, *, timestamp: int, in_commit_timestamp: int | None
    ) -> dict[str, Any]:
        plan = commit.plan
        info: dict[str, Any] = {}
        if in_commit_timestamp is not None:
            info["inCommitTimestamp"] = in_commit_timestamp
        info["timestamp"] = timestamp
        info["operation"] = plan.operation
        info["operationParameters"] = {k: _parameter(v) for k, v in plan.parameters.items()}
        if self.read_version >= 0:
            info["readVersion"] = self.read_version
        isolation = commit.isolation
        info["isolationLevel"] = SERIALIZABLE if isolation == SNAPSHOT_ISOLATION else isolation
        info["isBlindAppend"] = commit.blind_append
        if commit.metrics:
            info["operationMetrics"] = dict(commit.metrics)
        if self.properties.user_metadata is not None:
            info["userMetadata"] = self.properties.user_metadata
        if commit.tags:
            info["tags"] = {str(k): str(v) for k, v in commit.tags.items()}
        info["engineInfo"] = ENGINE_INFO
        info["txnId"] = self.txn_id
        return info

    def _read_commit(self, version: int) -> CommitActions | None:
        return read_commit(self.store, version)

    def _is_ours(self, commit: CommitActions | None) -> bool:
        """Whether ``commit`` is this transaction's own (found through its ``txnId``)."""
        try:
            info = commit.commit_info if commit is not None else None
        except DeltaError:
            return False
        return info is not None and bool(info) and info.get("txnId") == self.txn_id

    def _commit_ict(self, version: int) -> int | None:
        try:
            commit = self._read_commit(version)
        except DeltaError:
            return None
        return _ict(commit) if commit is not None else None

    def _winners(self, first: int, first_commit: CommitActions | None) -> list[CommitActions]:
        """The contiguous commits from ``first`` on (at least ``first`` itself, already read)."""
        storage = self.store
        versions = sorted(
            f.version
            for f in (parse_log_file(i) for i in storage.list_log(version_prefix(first)))
            if f is not None and f.kind is LogFileKind.COMMIT and f.version >= first
        )
        winners: list[CommitActions] = []
        for version in versions:
            if version != first + len(winners):
                break
            commit = first_commit if version == first else self._read_commit(version)
            if commit is None:
                break
            winners.append(commit)
        if not winners:  # listing lagged behind the failed put: the commit exists all the same
            commit = first_commit or self._read_commit(first)
            if commit is None:
                raise CommitError(
                    f"Version {first} of {self.store.root_uri} exists but cannot be read; retry."
                )
            winners.append(commit)
        return winners

    def _checksum_hook(self, actions: Sequence[Action], ict: int | None) -> PostCommitHook:
        """The version's ``.crc``, written first after every commit."""
        return PostCommitHook("checksum", lambda landed: self._write_checksum(landed, actions, ict))

    def _write_checksum(self, landed: LandedCommit, actions: Sequence[Action], ict: int | None) -> bool:
        """``version``'s ``.crc`` from the previous one and this commit's actions (False: none written)."""
        storage, version = self.store, landed.version
        previous = None
        if version > 0:
            previous = read_checksum(storage, version - 1)
            if previous is None:
                return False  # never re-read the table to build one: Spark rebuilds it if it wants
        checksum = next_checksum(
            previous,
            actions,
            protocol=landed.protocol,
            metadata=landed.metadata,
            txn_id=self.txn_id,
            in_commit_timestamp=ict,
        )
        if checksum is None:
            return False
        write_checksum(storage, version, checksum)
        return True

    def _result(self, version: int, commit: _Commit, attempts: int, *, committed: bool) -> CommitResult:
        actions, metrics = commit.actions, commit.metrics
        app = self.properties.app_transaction  # the commit's own, not the cursors it advances
        adds = [a for a in actions if isinstance(a, AddFile)]
        removes = [a for a in actions if isinstance(a, RemoveFile)]
        return CommitResult(
            version=version,
            committed=committed,
            operation=commit.plan.operation,
            read_version=None if self.new_table else self.read_version,
            attempts=attempts,
            app_id=app[0] if app else None,
            app_version=app[1] if app else None,
            num_added_files=len(adds) if committed else 0,
            num_removed_files=len(removes) if committed else 0,
            num_output_rows=int(metrics.get("numOutputRows", 0)) if committed else 0,
            num_output_bytes=sum(a.size for a in adds) if committed else 0,
            num_removed_bytes=sum(a.size or 0 for a in removes) if committed else 0,
            operation_metrics=dict(metrics) if committed else {},
            txn_id=self.txn_id if committed else None,
            reason=None if committed else ALREADY_COMMITTED,
        )


_KEY: dict[type, str] = {
    Protocol: "protocol",
    Metadata: "metaData",
    Transaction: "txn",
    DomainMetadata: "domainMetadata",
    RemoveFile: "remove",
    AddFile: "add",
    AddCDCFile: "cdc",
}


def _ict(commit: CommitActions) -> int | None:
    info = commit.commit_info or {}
    value = info.get("inCommitTimestamp")
    return int(value) if isinstance(value, int | float) else None


def _parameter(value: Any) -> str:
    """Delta writes every operationParameters value as a string (JSON for structures)."""
    if isinstance(value, str):
        return value
    return json.dumps(value, separators=(",", ":"))
