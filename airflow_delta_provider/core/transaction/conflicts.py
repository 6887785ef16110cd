"""Whether a concurrent winner invalidates a commit: Delta's ConflictChecker rules
(``S/ConflictChecker.scala``), in Delta's order:

1. protocol changes (``ProtocolChangedError``),
2. metadata changes (``MetadataChangedError``),
3. an appId the commit read or advances as a cursor (Delta's ``ConcurrentTransactionException``);
   a winner that recorded one of *our* appIds at our version or later did our work: nothing is
   written. The own appId is blind (a lower version of it in a winner: the commit retries),
4. the same domain metadata (``ConcurrentTransactionError``; the row-tracking domain excepted,
   the transaction renumbers above the winner's mark),
5. files added that match what we read (``ConcurrentAppendError``),
6. files removed that we read (``ConcurrentDeleteReadError``),
7. files removed that we remove too (``ConcurrentDeleteDeleteError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_delta_provider.core.errors import (
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    DeltaError,
    MetadataChangedError,
    ProtocolChangedError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.expressions.skipping import partitions_may_match
from airflow_delta_provider.core.protocol.actions import Metadata, Protocol, Transaction
from airflow_delta_provider.core.protocol.features import Operation, check_supported
from airflow_delta_provider.core.protocol.partitions import partition_columns_from_map
from airflow_delta_provider.core.protocol.row_tracking import ROW_TRACKING_DOMAIN
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from airflow_delta_provider.core.expressions.predicate import Predicate
    from airflow_delta_provider.core.log.commits import CommitActions
    from airflow_delta_provider.core.storage.paths import TablePath
    from airflow_delta_provider.core.transaction.commit_plan import ReadSet

log = get_logger(__name__)

SERIALIZABLE = "Serializable"
WRITE_SERIALIZABLE = "WriteSerializable"
SNAPSHOT_ISOLATION = "SnapshotIsolation"


@dataclass(frozen=True)
class ConflictChecker:
    """Our side of the conflict checks: what the commit read and what it changes.

    :param root_uri: the table, for messages.
    :param path: the table's path rules (winners' paths are compared canonically).
    :param new_table: the commit creates the table: any winner means someone else created it.
    :param read_metadata: the metadata the commit was planned on.
    :param kind: the operation whose feature support a winner's new protocol must keep.
    :param protocol_changed: the commit writes a protocol.
    :param metadata_changed: the commit writes metadata.
    :param isolation: the commit's isolation level.
    :param read: what the commit read (canonical paths).
    :param removed_paths: the canonical paths the commit removes.
    :param our_txns: the commit's application transactions (its own and the cursors it advances).
    :param metadata: the table's metadata after the commit (partition columns and types).
    :param domains: the domains whose metadata the commit sets or removes.
    :param own_app_id: the commit's own idempotency appId (``app_id``), None without one.
    """

    root_uri: str
    path: TablePath
    new_table: bool
    read_metadata: Metadata | None
    kind: Operation
    protocol_changed: bool
    metadata_changed: bool
    isolation: str
    read: ReadSet
    removed_paths: frozenset[str]
    our_txns: dict[str, int]
    metadata: Metadata
    domains: frozenset[str] = frozenset()
    own_app_id: str | None = None

    def check(self, winner: CommitActions) -> int | None:
        """Raise if ``winner`` conflicts; return its version if it already holds our app transaction."""
        info = winner.commit_info or {}
        operation = info.get("operation") or "unknown operation"
        where = f"table {self.root_uri}, committed at version {winner.version}"
        if self.new_table:
            raise ProtocolChangedError(
                f"The protocol version of the Delta table has been changed by a concurrent update ({where}). "
                f"This happens when multiple writers are writing to an empty directory. Creating the "
                f"table ahead of time will avoid this conflict.",
                version=winner.version,
                operation=operation,
            )
        self._check_protocol_and_metadata(winner, operation, where)
        done = self._check_app_transactions(winner, operation, where)
        if done is not None:
            return done
        self._check_domains(winner, operation, where)
        if not (self.read.reads_by_predicate or self.removed_paths):
            return None  # a blind append depends on no file: no need to parse the winner's files
        self._check_files(winner, info, operation, where)
        return None

    def _check_protocol_and_metadata(self, winner: CommitActions, operation: str, where: str) -> None:
        for action in winner.actions:
            if "protocol" in action:
                new_protocol = Protocol.from_json(action["protocol"])
                try:
                    check_supported(new_protocol, self.read_metadata, self.kind)
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
        if any("metaData" in a for a in winner.actions):
            raise MetadataChangedError(
                f"The metadata of the Delta table has been changed by a concurrent update ({operation}, "
                f"{where}). Please try the operation again.",
                version=winner.version,
                operation=operation,
            )

    def _check_app_transactions(self, winner: CommitActions, operation: str, where: str) -> int | None:
        for action in winner.actions:
            if "txn" not in action:
                continue
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
            if app.app_id == self.own_app_id and app.app_id not in self.read.app_ids:
                continue  # blind: a lower version of it is another run's, and changes nothing we read
            # A cursor at a lower version too (Delta conflicts on every read appId): committing
            # over it would redo what the winner did, e.g. consume a source version twice.
            if ours is not None or app.app_id in self.read.app_ids:
                raise ConcurrentTransactionError(
                    f"This error occurs when multiple streaming queries are using the same checkpoint "
                    f"to write into this table: application {app.app_id!r} was committed concurrently "
                    f"at version {app.version} ({operation}, {where}). Read the table again and redo "
                    f"the work from there.",
                    version=winner.version,
                    operation=operation,
                )
        return None

    def _check_domains(self, winner: CommitActions, operation: str, where: str) -> None:
        """Delta's ``checkIfDomainMetadataConflict``: a winner that set a domain we set too wins it."""
        if not self.domains:
            return
        for action in winner.actions:
            domain = (action.get("domainMetadata") or {}).get("domain")
            if domain in self.domains and domain != ROW_TRACKING_DOMAIN:
                raise ConcurrentTransactionError(
                    f"A conflicting metadata domain {domain} is added: a concurrent {operation} "
                    f"({where}) set it too. Refresh the table and retry.",
                    version=winner.version,
                    operation=operation,
                )

    def _check_files(self, winner: CommitActions, info: dict[str, Any], operation: str, where: str) -> None:
        files = winner.file_actions()
        read = self.read
        if self.isolation != SNAPSHOT_ISOLATION and read.reads_by_predicate:
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
        canonical = self.path.canonical
        removed = [
            canonical(a["remove"]["path"])
            for a in files
            if "remove" in a and a["remove"].get("dataChange", True)
        ]
        overlap = [p for p in removed if p in read.paths]
        if overlap or (removed and read.whole_table):
            raise ConcurrentDeleteReadError(
                f"Transaction conflict detected. A concurrent {operation} removed data from {where} that "
                f"this transaction read (e.g. {(overlap or removed)[0]}). Refresh the table and retry.",
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

    def _predicate_text(self) -> str:
        predicates = self.read.predicates
        return " OR ".join(f"({p.text})" for p in predicates) if predicates else "the whole table"

    def _matches_read(self, adds: list[dict[str, Any]]) -> bool:
        partition_columns = list(self.metadata.partition_columns)
        if self.read.whole_table or not partition_columns:
            return True
        raw = pa.array([a.get("partitionValues") or {} for a in adds], pa.map_(pa.string(), pa.string()))
        schema = self.metadata.schema
        fields = [schema.field(c) for c in partition_columns]
        try:
            struct = partition_columns_from_map(raw, pa.schema(fields))
        except DeltaError:
            return True  # unparseable partition values: assume the worst
        values = pa.Table.from_arrays(struct.flatten(), names=partition_columns)
        return any(self._may_match(p, values) for p in self.read.predicates)

    def _may_match(self, predicate: Predicate, values: pa.Table) -> bool:
        """Whether files with these partition values may hold rows ``predicate`` selects (a DELETE's
        condition on data columns may select any row of a file its partition part allows)."""
        if predicate.columns <= set(values.column_names):
            return bool(predicate.mask(values).to_numpy(zero_copy_only=False).any())
        return bool(partitions_may_match(predicate, self.metadata.schema, values).any())
