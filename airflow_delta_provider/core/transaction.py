"""Optimistic transactions: one atomic commit, checked against concurrent winners, retried.

A commit is a put-if-absent of ``_delta_log/%020d.json``. When another writer got that
version first, the winners' commits are read and checked with Delta's ConflictChecker
rules (``S/ConflictChecker.scala``), in Delta's order:

1. protocol changes (``ProtocolChangedError``),
2. metadata changes (``MetadataChangedError``),
3. the same application transaction id (Delta raises ``ConcurrentTransactionException``;
   here the loser re-checks instead: if the winner already recorded our ``appId`` at our
   version or later, our commit is done and nothing is written),
4. files added that match what we read (``ConcurrentAppendError``),
5. files removed that we read (``ConcurrentDeleteReadError``),
6. files removed that we remove too (``ConcurrentDeleteDeleteError``),

and, when none applies, the commit is retried at the next free version. Like Delta, the
commit carries a unique ``txnId`` in its commitInfo, so a writer whose put succeeded but
whose response was lost (an S3 retry answered 412) recognises its own commit.

Before the first attempt every action is checked against its Delta types
(:func:`~.validation.validate_actions`): nothing that a reader or a checkpoint could not
read back ever reaches the log. Once the commit file is in place the commit has
happened: the post-commit work (the ``.crc`` checksum, the checkpoint Delta's policy asks
for, log cleanup after it) runs through :func:`run_post_commit_hooks`, which logs a
failure as a warning and returns it on :attr:`CommitResult.post_commit_errors`, never
raising, as Delta treats its post-commit hooks.
"""

from __future__ import annotations

import dataclasses
import time
import uuid
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_delta_provider import __version__
from airflow_delta_provider.core.actions import (
    AddFile,
    DomainMetadata,
    Metadata,
    Protocol,
    RemoveFile,
    Transaction,
    dumps,
)
from airflow_delta_provider.core.checksum import next_checksum, read_checksum, write_checksum
from airflow_delta_provider.core.commits import check_replayable, read_commit
from airflow_delta_provider.core.errors import (
    AppendOnlyViolationError,
    CommitError,
    CommitFileExistsError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    DeltaError,
    MaxCommitAttemptsExceededError,
    MetadataChangedError,
    ProtocolChangedError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.features import Operation, check_supported
from airflow_delta_provider.core.logfiles import LogFileKind, commit_name, parse_log_file, version_prefix
from airflow_delta_provider.core.partitions import partition_columns_from_map
from airflow_delta_provider.core.redaction import get_logger, redact
from airflow_delta_provider.core.row_tracking import (
    assign_row_ids,
    assigns_row_ids,
    high_water_mark,
    winner_high_water_mark,
)
from airflow_delta_provider.core.snapshot import load_snapshot
from airflow_delta_provider.core.table_config import TableConfig
from airflow_delta_provider.core.validation import validate_actions, validate_commit_info

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from airflow_delta_provider.core.commits import CommitActions
    from airflow_delta_provider.core.predicate import Predicate
    from airflow_delta_provider.core.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)

ENGINE_INFO = f"airflow-delta-provider/{__version__}"
SERIALIZABLE = "Serializable"
WRITE_SERIALIZABLE = "WriteSerializable"
SNAPSHOT_ISOLATION = "SnapshotIsolation"
#: Attempts before giving up; each retry follows a commit that did not conflict with ours.
DEFAULT_MAX_ATTEMPTS = 100

Action = Protocol | Metadata | Transaction | AddFile | RemoveFile | DomainMetadata


#: :attr:`CommitResult.reason` when ``(app_id, app_version)`` was already committed.
ALREADY_COMMITTED = "already_committed"
#: :attr:`CommitResult.reason` when there was nothing to commit: no files to add, nothing to
#: remove, and no ``app_id`` to record.
NO_FILES = "no_files"


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


class OptimisticTransaction:
    """One transaction against a table: what it read, and the commit of what it writes.

    :param store: the table's store.
    :param read_snapshot: the snapshot the transaction read (default: the latest, loaded
        lazily; only protocol, metadata and transactions are needed for an append).
    :param new_table: the transaction creates the table (reads nothing; commits version 0).
    :param isolation_level: ``Serializable`` (Delta's default) or ``WriteSerializable``.
    :param max_attempts: commit attempts before :class:`MaxCommitAttemptsExceededError`.
    :param post_commit_hooks: work after a landed commit (the facade hands in Delta's
        checkpoint and log cleanup), run after the checksum through :func:`run_post_commit_hooks`.
    """

    def __init__(
        self,
        store: LogStore,
        *,
        read_snapshot: Snapshot | None = None,
        new_table: bool = False,
        isolation_level: str | None = None,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        post_commit_hooks: Sequence[PostCommitHook] = (),
    ) -> None:
        if max_attempts < 1:
            raise ValueError(f"max_attempts must be at least 1, got {max_attempts!r}.")
        self.store = store
        self._read_snapshot = read_snapshot
        self.new_table = new_table
        self._isolation_level = isolation_level
        self.max_attempts = max_attempts
        self.post_commit_hooks = tuple(post_commit_hooks)
        self.txn_id = str(uuid.uuid4())
        self._read_app_ids: set[str] = set()
        self._read_predicates: list[Predicate] = []
        self._read_whole_table = False
        self._read_paths: set[str] = set()

    # --- what the transaction read ------------------------------------------------------

    @cached_property
    def snapshot(self) -> Snapshot:
        if self._read_snapshot is not None:
            return self._read_snapshot
        return load_snapshot(self.store)

    @property
    def read_version(self) -> int:
        return -1 if self.new_table else self.snapshot.version

    def app_transaction_version(self, app_id: str) -> int | None:
        """The last version ``app_id`` committed, recording that this transaction read it."""
        self._read_app_ids.add(app_id)
        return None if self.new_table else self.snapshot.app_transaction_version(app_id)

    def read_files(self, predicate: Predicate | None, paths: Sequence[str]) -> None:
        """Record a read of the files matching ``predicate`` (None: the whole table).

        :param paths: the ``add.path`` of the files that matched.
        """
        if predicate is None:
            self._read_whole_table = True
        else:
            self._read_predicates.append(predicate)
        self._read_paths.update(self.store.path.canonical(p) for p in paths)

    def track_files_read(self, paths: Sequence[str]) -> None:
        """Record that the commit depends on exactly these files (Delta's ``trackFilesRead``).

        OPTIMIZE reads its input files and nothing else: a concurrent commit that removes one
        of them conflicts (``ConcurrentDeleteReadError`` naming it), one that only adds files
        does not.

        :param paths: the ``add.path`` of the files read.
        """
        self._read_paths.update(self.store.path.canonical(p) for p in paths)

    # --- commit -----------------------------------------------------------------------

    def commit(
        self,
        actions: Sequence[Action],
        *,
        operation: str,
        operation_parameters: Mapping[str, Any] | None = None,
        operation_metrics: Mapping[str, Any] | None = None,
        user_metadata: str | None = None,
        tags: Mapping[str, str] | None = None,
        data_change: bool = True,
        kind: Operation = Operation.WRITE,
    ) -> CommitResult:
        """Commit ``actions`` atomically at the next version, retrying past concurrent winners.

        :param actions: the actions (no commitInfo: it is built here).
        :param operation: Delta's operation name (``WRITE``, ``CREATE TABLE``, ``VACUUM START``...).
        :param operation_parameters: recorded in commitInfo, values as Delta writes them (strings).
        :param operation_metrics: recorded in commitInfo as strings.
        :param user_metadata: commitInfo ``userMetadata``.
        :param tags: commitInfo ``tags``.
        :param data_change: False for commits that do not change the table's data (OPTIMIZE,
            VACUUM): they cannot conflict with concurrent appends.
        :param kind: the operation whose feature support the table must have (VACUUM's records
            need only what VACUUM needs).
        :raises ConcurrentModificationError: a winner conflicts (the subclass names Delta's error).
        :raises UnsupportedFeatureError: the table's protocol asks for a feature this core lacks.
        :raises AppendOnlyViolationError: a data-changing remove on a ``delta.appendOnly`` table.
        :raises InvalidLogValueError: a value does not fit its Delta type (nothing is written).
        :raises MaxCommitAttemptsExceededError: too many winners in a row.
        :returns: the result; failures after the commit landed are on its ``post_commit_errors``.
        """
        new_protocol = next((a for a in actions if isinstance(a, Protocol)), None)
        new_metadata = next((a for a in actions if isinstance(a, Metadata)), None)
        protocol = new_protocol or self.snapshot.protocol
        metadata = new_metadata or self.snapshot.metadata
        # Every value against its Delta type, before anything else is decided or written.
        validate_actions(actions, metadata)
        check_supported(protocol, metadata, kind)
        self._check_append_only(actions, metadata)
        if not self.new_table:
            self.snapshot.check_replayable()  # never build on a log no reader can replay
        our_txns = {a.app_id: a.version for a in actions if isinstance(a, Transaction)}
        self._read_app_ids.update(our_txns)
        file_actions = [a for a in actions if isinstance(a, AddFile | RemoveFile)]
        changes_data = data_change and any(a.data_change for a in file_actions)
        blind_append = (
            all(isinstance(a, AddFile) for a in file_actions)
            and not self._read_predicates
            and not self._read_whole_table
        )
        isolation = self._isolation(metadata, changes_data)
        # Row tracking: ids and commit versions depend on the attempt's version and on the mark the
        # winners left, so they are assigned again on every attempt (None: the table has none).
        row_mark = None
        if assigns_row_ids(protocol, metadata):
            row_mark = -1 if self.new_table else high_water_mark(self.snapshot.domain_metadata)
        submitted = actions
        lines = [dumps({_KEY[type(a)]: a.to_json()}) for a in actions]
        metrics = {k: str(v) for k, v in (operation_metrics or {}).items()}
        removed = {self.store.path.canonical(a.path) for a in actions if isinstance(a, RemoveFile)}
        context = _ConflictContext(
            transaction=self,
            kind=kind,
            protocol_changed=new_protocol is not None,
            metadata_changed=new_metadata is not None,
            changes_data=changes_data,
            isolation=isolation,
            removed_paths=removed,
            our_txns=our_txns,
            partition_columns=list(metadata.partition_columns),
            schema=metadata.schema,
        )

        storage = self.store
        version = self.read_version + 1
        ict_enabled = TableConfig(metadata.configuration).in_commit_timestamps
        previous_ict = self._commit_ict(version - 1) if ict_enabled and version > 0 else None
        attempts = 0
        while True:
            attempts += 1
            if row_mark is not None:
                actions = assign_row_ids(submitted, high_water_mark=row_mark, version=version)
                validate_actions(actions, metadata)
                lines = [dumps({_KEY[type(a)]: a.to_json()}) for a in actions]
            now = int(time.time() * 1000)
            ict = None
            if ict_enabled:
                ict = max(now, previous_ict + 1) if previous_ict is not None else now
            commit_info = self._commit_info(
                operation,
                operation_parameters,
                metrics,
                user_metadata,
                tags,
                isolation=isolation,
                blind_append=blind_append,
                timestamp=now,
                in_commit_timestamp=ict,
            )
            validate_commit_info(commit_info)
            payload = "\n".join([dumps({"commitInfo": commit_info}), *lines]) + "\n"
            path = storage.log_path(commit_name(version))
            try:
                storage.put_if_absent(path, payload.encode())
            except CommitFileExistsError:
                taken = self._read_commit(version)
                if self._is_ours(taken):
                    log.info("Version %d is this transaction's own commit (a lost response); done.", version)
                    break
                winners = self._winners(version, taken)
                for winner in winners:
                    skipped = context.check(winner)
                    if skipped is not None:
                        return self._result(
                            winner.version, operation, metrics, actions, attempts, committed=False
                        )
                check_replayable(winners)  # the retry builds on the winners
                if row_mark is not None:  # Delta exempts this domain from conflicts: renumber above it
                    for winner in winners:
                        row_mark = winner_high_water_mark(winner.actions, row_mark)
                last = winners[-1]
                previous_ict = _ict(last)
                log.info(
                    "Version %d was taken by a concurrent commit (%d winner(s) up to version %d, no "
                    "conflict); retrying at version %d.",
                    version,
                    len(winners),
                    last.version,
                    last.version + 1,
                )
                version = last.version + 1
                if attempts >= self.max_attempts:
                    raise MaxCommitAttemptsExceededError(
                        f"Gave up committing {operation} to {self.store.root_uri} after {attempts} attempts: "
                        f"other writers committed first every time. Retry later, or raise max_attempts."
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
                    break
                raise
            break
        # The commit file is in place: from here on nothing may turn the commit into a failure.
        result = self._result(version, operation, metrics, actions, attempts, committed=True)
        log.info("Committed %s to %s at version %d.", operation, self.store.root_uri, version)
        commit = LandedCommit(self.store, version, protocol, metadata)
        errors = run_post_commit_hooks(commit, [self._checksum_hook(actions, ict), *self.post_commit_hooks])
        return dataclasses.replace(result, post_commit_errors=errors) if errors else result

    # --- helpers ----------------------------------------------------------------------

    def _isolation(self, metadata: Metadata, changes_data: bool) -> str:
        level = self._isolation_level or TableConfig(metadata.configuration).isolation_level
        if level not in (SERIALIZABLE, WRITE_SERIALIZABLE):
            raise CommitError(
                f"Isolation level {level!r} is not supported; use {SERIALIZABLE!r} (Delta's default) or "
                f"{WRITE_SERIALIZABLE!r}."
            )
        # Delta: a transaction that changes no data cannot be invalidated by concurrent appends.
        return level if changes_data else SNAPSHOT_ISOLATION

    @staticmethod
    def _check_append_only(actions: Sequence[Action], metadata: Metadata) -> None:
        if not TableConfig(metadata.configuration).append_only:
            return
        if any(isinstance(a, RemoveFile) and a.data_change for a in actions):
            raise AppendOnlyViolationError(
                "This table is configured to only allow appends (delta.appendOnly=true); an overwrite or "
                "replaceWhere would remove data. Append instead, or unset delta.appendOnly on the table "
                "if removing data is intended."
            )

    def _commit_info(
        self,
        operation: str,
        parameters: Mapping[str, Any] | None,
        metrics: Mapping[str, str],
        user_metadata: str | None,
        tags: Mapping[str, str] | None,
        *,
        isolation: str,
        blind_append: bool,
        timestamp: int,
        in_commit_timestamp: int | None,
    ) -> dict[str, Any]:
        info: dict[str, Any] = {}
        if in_commit_timestamp is not None:
            info["inCommitTimestamp"] = in_commit_timestamp
        info["timestamp"] = timestamp
        info["operation"] = operation
        info["operationParameters"] = {k: _parameter(v) for k, v in (parameters or {}).items()}
        if self.read_version >= 0:
            info["readVersion"] = self.read_version
        info["isolationLevel"] = SERIALIZABLE if isolation == SNAPSHOT_ISOLATION else isolation
        info["isBlindAppend"] = blind_append
        if metrics:
            info["operationMetrics"] = dict(metrics)
        if user_metadata is not None:
            info["userMetadata"] = user_metadata
        if tags:
            info["tags"] = {str(k): str(v) for k, v in tags.items()}
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

    def _result(
        self,
        version: int,
        operation: str,
        metrics: Mapping[str, str],
        actions: Sequence[Action],
        attempts: int,
        *,
        committed: bool,
    ) -> CommitResult:
        app = next((a for a in actions if isinstance(a, Transaction)), None)
        adds = [a for a in actions if isinstance(a, AddFile)]
        removes = [a for a in actions if isinstance(a, RemoveFile)]
        return CommitResult(
            version=version,
            committed=committed,
            operation=operation,
            read_version=None if self.new_table else self.read_version,
            attempts=attempts,
            app_id=app.app_id if app else None,
            app_version=app.version if app else None,
            num_added_files=len(adds) if committed else 0,
            num_removed_files=len(removes) if committed else 0,
            num_output_rows=int(metrics.get("numOutputRows", 0)) if committed else 0,
            num_output_bytes=sum(a.size for a in adds) if committed else 0,
            num_removed_bytes=sum(a.size or 0 for a in removes) if committed else 0,
            operation_metrics=dict(metrics) if committed else {},
            txn_id=self.txn_id if committed else None,
            reason=None if committed else ALREADY_COMMITTED,
        )


@dataclass
class _ConflictContext:
    """Our side of the conflict checks."""

    transaction: OptimisticTransaction
    kind: Operation
    protocol_changed: bool
    metadata_changed: bool
    changes_data: bool
    isolation: str
    removed_paths: set[str]
    our_txns: dict[str, int]
    partition_columns: list[str]
    schema: pa.Schema

    def check(self, winner: CommitActions) -> int | None:
        """Raise if ``winner`` conflicts; return its version if it already holds our app transaction."""
        txn = self.transaction
        info = winner.commit_info or {}
        operation = info.get("operation") or "unknown operation"
        where = f"table {txn.store.root_uri}, committed at version {winner.version}"
        small = winner.actions
        if txn.new_table:
            raise ProtocolChangedError(
                f"The protocol version of the Delta table has been changed by a concurrent update ({where}). "
                f"This happens when multiple writers are writing to an empty directory. Creating the "
                f"table ahead of time will avoid this conflict.",
                version=winner.version,
                operation=operation,
            )
        for action in small:
            if "protocol" in action:
                new_protocol = Protocol.from_json(action["protocol"])
                try:
                    check_supported(new_protocol, txn.snapshot.metadata, self.kind)
                except UnsupportedFeatureError as err:
                    raise ProtocolChangedError(
                        f"The protocol version of the Delta table has been changed by a concurrent update "
                        f"({operation}, {where}) to one this writer cannot write: {err}",
                        version=winner.version,
                        operation=operation,
                    ) from None
                if self.protocol_changed:
                    raise ProtocolChangedError(
                        f"The protocol version of the Delta table has been changed by a concurrent update "
                        f"({operation}, {where}). Please try the operation again.",
                        version=winner.version,
                        operation=operation,
                    )
        if any("metaData" in a for a in small):
            raise MetadataChangedError(
                f"The metadata of the Delta table has been changed by a concurrent update ({operation}, "
                f"{where}). Please try the operation again.",
                version=winner.version,
                operation=operation,
            )
        for action in small:
            if "txn" in action:
                app = Transaction.from_json(action["txn"])
                ours = self.our_txns.get(app.app_id)
                if ours is not None and app.version >= ours:
                    log.info(
                        "A concurrent commit (version %d) already recorded application %r at version %d; "
                        "nothing to commit.",
                        winner.version,
                        app.app_id,
                        app.version,
                    )
                    return winner.version
                if ours is None and app.app_id in txn._read_app_ids:
                    raise ConcurrentTransactionError(
                        f"This error occurs when multiple streaming queries are using the same checkpoint "
                        f"to write into this table: application {app.app_id!r} was committed concurrently "
                        f"({operation}, {where}).",
                        version=winner.version,
                        operation=operation,
                    )
        if not (txn._read_predicates or txn._read_whole_table or self.removed_paths):
            return None  # a blind append depends on no file: no need to parse the winner's files
        files = winner.file_actions()
        if self.isolation != SNAPSHOT_ISOLATION and (txn._read_predicates or txn._read_whole_table):
            counts_blind = self.isolation == SERIALIZABLE or self.metadata_changed
            if counts_blind or not info.get("isBlindAppend", False):
                adds = [a["add"] for a in files if "add" in a and a["add"].get("dataChange", True)]
                if adds and self._matches_read(adds):
                    raise ConcurrentAppendError(
                        f"Transaction conflict detected. A concurrent {operation} added data to {where} that "
                        f"this transaction read (its predicate: {self._predicate_text()}). Refresh the table "
                        f"and retry.",
                        version=winner.version,
                        operation=operation,
                    )
        canonical = txn.store.path.canonical
        removed = [
            canonical(a["remove"]["path"])
            for a in files
            if "remove" in a and a["remove"].get("dataChange", True)
        ]
        read = [p for p in removed if p in txn._read_paths]
        if read or (removed and txn._read_whole_table):
            raise ConcurrentDeleteReadError(
                f"Transaction conflict detected. A concurrent {operation} removed data from {where} that "
                f"this transaction read (e.g. {(read or removed)[0]}). Refresh the table and retry.",
                version=winner.version,
                operation=operation,
            )
        both = sorted({canonical(a["remove"]["path"]) for a in files if "remove" in a} & self.removed_paths)
        if both:
            raise ConcurrentDeleteDeleteError(
                f"Transaction conflict detected. A concurrent {operation} removed files that this "
                f"transaction also removes ({where}; e.g. {both[0]}). Refresh the table and retry.",
                version=winner.version,
                operation=operation,
            )
        return None

    def _predicate_text(self) -> str:
        predicates = self.transaction._read_predicates
        return " OR ".join(f"({p.text})" for p in predicates) if predicates else "the whole table"

    def _matches_read(self, adds: list[dict[str, Any]]) -> bool:
        txn = self.transaction
        if txn._read_whole_table or not self.partition_columns:
            return True
        raw = pa.array([a.get("partitionValues") or {} for a in adds], pa.map_(pa.string(), pa.string()))
        fields = [self.schema.field(c) for c in self.partition_columns]
        try:
            struct = partition_columns_from_map(raw, pa.schema(fields))
        except DeltaError:
            return True  # unparseable partition values: assume the worst
        values = pa.Table.from_arrays(struct.flatten(), names=self.partition_columns)
        return any(p.mask(values).to_numpy(zero_copy_only=False).any() for p in txn._read_predicates)


_KEY: dict[type, str] = {
    Protocol: "protocol",
    Metadata: "metaData",
    Transaction: "txn",
    AddFile: "add",
    RemoveFile: "remove",
    DomainMetadata: "domainMetadata",
}


def _ict(commit: CommitActions) -> int | None:
    info = commit.commit_info or {}
    value = info.get("inCommitTimestamp")
    return int(value) if isinstance(value, int | float) else None


def _parameter(value: Any) -> str:
    """Delta writes every operationParameters value as a string (JSON for structures)."""
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, separators=(",", ":"))
