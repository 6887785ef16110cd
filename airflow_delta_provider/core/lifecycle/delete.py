"""DELETE: remove the rows a predicate selects in one commit, as Delta's ``DeleteCommand`` does.

Three plans, chosen as Delta chooses (docs/lifecycle.md has the actions of each): no predicate or
one on partition columns only removes whole files without reading data; a condition on data
columns adds the matching rows to deletion vectors on a table that writes them
(:func:`~.features.deletion_vectors_writable`); otherwise copy-on-write rewrites each file holding
a matching row (with ``cdc`` files when the change data feed is on). The predicate is evaluated
by :class:`~.predicate.Predicate` (:func:`~.delete_rows.match_rows_locally`), or by another
engine through ``match_rows``; the plan and the commit stay here. Files the plan wrote are
deleted again, by VACUUM's confinement rules, when the commit is refused.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_delta_provider.core.errors import AppendOnlyViolationError
from airflow_delta_provider.core.expressions.partition_filter import PartitionFilter
from airflow_delta_provider.core.expressions.predicate import Predicate, PredicateError
from airflow_delta_provider.core.expressions.skipping import files_matching
from airflow_delta_provider.core.lifecycle.delete_plan import (
    DELETE,
    DeletePlan,
    Scan,
    Timer,
    checked_matches,
    copy_on_write_plan,
    deletion_vector_plan,
    discard_written,
    metadata_plan,
)
from airflow_delta_provider.core.lifecycle.delete_rows import Candidates, FileReader, match_rows_locally
from airflow_delta_provider.core.protocol.features import (
    Operation,
    check_supported,
    deletion_vectors_writable,
)
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitProperties, CommitResult
from airflow_delta_provider.core.utils.arguments import check_positive_int
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy as np
    import numpy.typing as npt

    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

__all__ = [
    "DELETE",
    "DeleteOptions",
    "DeletePlan",
    "DeleteResult",
    "RowMatcher",
    "check_predicate_text",
    "commit_delete",
    "delete",
    "plan_delete",
]

log = get_logger(__name__)

#: :attr:`DeleteResult.reason` when no row matched: nothing was written.
NOTHING_TO_DELETE = "nothing_to_delete"

#: An engine that finds the rows a predicate selects: for each candidate file (``add.path``), the
#: positions of its matching rows (rows its deletion vector marks may be included).
RowMatcher = Callable[["Snapshot", Predicate, Candidates], Mapping[str, "npt.NDArray[np.uint64]"]]


def check_predicate_text(predicate: object) -> None:
    """Refuse a predicate that is not a SQL condition: ``None`` deletes every row, but an empty or
    blank string (a template that rendered nothing) must never empty a table.

    :raises PredicateError: naming the value and what to pass instead.
    """
    if predicate is None:
        return
    if not isinstance(predicate, str):
        raise PredicateError(
            f"The DELETE predicate must be a SQL condition (a string), or None to delete every row; got "
            f"{type(predicate).__name__} {predicate!r}."
        )
    if not predicate.strip():
        raise PredicateError(
            f"The DELETE predicate is empty ({predicate!r}): refusing, as a template that rendered nothing "
            f"must not empty the table. Give a condition such as \"ds < '2024-01-01'\", or pass None to "
            f"delete every row on purpose."
        )


@dataclass(frozen=True, kw_only=True)
class DeleteOptions(CommitProperties):
    """Every option of a DELETE (``DeltaTable.delete``), beside the
    :class:`~.commit_plan.CommitProperties` every commit takes (with ``app_id`` and ``app_version``
    a DELETE is idempotent).

    :param predicate: the rows to delete, a SQL condition on any columns with Spark SQL's
        meaning (``"ds < '2024-01-01' AND user_id = :user_id"``); None deletes every row. An empty
        string is refused.
    :param parameters: the values of the predicate's named markers (``{"user_id": 42}``), bound as
        typed literals, never formatted into the text; the commit records the text with its markers.
    :param max_workers: data files read at once (default: the CPU count locally, 32 on object
        stores).
    """

    predicate: str | None = field(default=None, kw_only=False)
    parameters: Mapping[str, Any] | None = None
    max_workers: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_predicate_text(self.predicate)
        if self.parameters is not None and self.predicate is None:
            raise PredicateError(
                "parameters were given without a predicate: a DELETE without one deletes every row, so "
                "the values would be ignored. Pass the predicate they bind (e.g. 'id = :id').",
                reason="parameter",
            )
        check_positive_int("max_workers", self.max_workers)


@dataclass(frozen=True)
class DeleteResult:
    """What a DELETE did.

    :param predicate: the predicate's text (None: every row).
    :param read_version: the version the DELETE read.
    :param commit: the commit's result; None when no row matched (nothing was written).
    :param mode: ``metadata``, ``deletion_vectors`` or ``copy_on_write`` (None when nothing was
        planned: the DELETE was already committed).
    :param metrics: Delta's DELETE ``operationMetrics`` as committed (empty when nothing was).
    :param num_deleted_rows: None when unknown (whole files removed without row counts).
    """

    predicate: str | None
    read_version: int
    commit: CommitResult | None
    mode: str | None = None
    metrics: dict[str, int] = field(default_factory=dict)
    num_deleted_rows: int | None = 0

    @property
    def version(self) -> int:
        """The committed version (or the one recording this DELETE's ``app_id``; else the one read)."""
        return self.commit.version if self.commit is not None else self.read_version

    @property
    def committed(self) -> bool:
        return self.commit is not None and self.commit.committed

    @property
    def reason(self) -> str | None:
        """None when committed; else ``nothing_to_delete`` or ``already_committed``."""
        if self.commit is None:
            return NOTHING_TO_DELETE
        return self.commit.reason

    def _metric(self, name: str) -> int:
        return int(self.metrics.get(name, 0))

    @property
    def num_removed_files(self) -> int:
        return self._metric("numRemovedFiles")

    @property
    def num_added_files(self) -> int:
        return self._metric("numAddedFiles")

    @property
    def num_deletion_vectors_added(self) -> int:
        return self._metric("numDeletionVectorsAdded")

    @property
    def num_added_change_files(self) -> int:
        return self._metric("numAddedChangeFiles")

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form (for XCom and asset event extras)."""
        return {
            "version": self.version,
            "committed": self.committed,
            "reason": self.reason,
            "read_version": self.read_version,
            "predicate": self.predicate,
            "mode": self.mode,
            "num_deleted_rows": self.num_deleted_rows,
            "num_removed_files": self.num_removed_files,
            "num_added_files": self.num_added_files,
            "num_deletion_vectors_added": self.num_deletion_vectors_added,
            "num_added_change_files": self.num_added_change_files,
            "metrics": dict(self.metrics),
            "commit": self.commit.to_dict() if self.commit is not None else None,
        }


# --- the plan --------------------------------------------------------------------------------


def parse_predicate(
    snapshot: Snapshot, text: str | None, parameters: Mapping[str, Any] | None = None
) -> Predicate | None:
    """The predicate over the snapshot's columns, its markers bound to ``parameters`` and every
    literal typed against its column as Spark types it.

    :raises PredicateError: a syntax error, an unknown column, a marker left unbound or a
        parameter unused, or a literal Spark would refuse or read depending on a setting (named).
    """
    check_predicate_text(text)
    if text is None:
        return None
    partitions = snapshot.partition_columns
    data = [f.name for f in snapshot.schema if f.name not in set(partitions)]
    predicate = Predicate(text, partitions, data_columns=data, parameters=parameters)
    predicate.normal_form(snapshot.schema)  # types every literal: a bad one fails before anything is read
    return predicate


def plan_delete(
    snapshot: Snapshot, options: DeleteOptions, *, match_rows: RowMatcher | None = None
) -> DeletePlan:
    """Decide what a DELETE of ``snapshot`` commits, writing the files it needs (see the module
    docstring). Nothing is written before the predicate and the table are checked.

    :raises PredicateError: the predicate does not parse, names an unknown column or a value that
        does not fit its column.
    :raises AppendOnlyViolationError: the table is append-only (``delta.appendOnly``).
    :raises UnsupportedFeatureError: the table uses a feature this DELETE cannot honour.
    """
    started = time.monotonic()
    check_supported(snapshot.protocol, snapshot.metadata, Operation.DELETE)
    if snapshot.config.append_only:
        raise AppendOnlyViolationError(
            f"{snapshot.storage.root_uri} only allows appends (delta.appendOnly=true): DELETE is refused "
            f"(DELTA_CANNOT_MODIFY_APPEND_ONLY). Unset delta.appendOnly on the table if deleting rows is "
            f"intended."
        )
    predicate = parse_predicate(snapshot, options.predicate, options.parameters)
    if predicate is None:
        return metadata_plan(snapshot, None, snapshot.files(), started)
    if predicate.columns and predicate.columns <= set(snapshot.partition_columns):
        # Only the selected partitions are replayed; the whole snapshot stays the commit's.
        selected = snapshot.with_partition_filter(PartitionFilter(predicate, snapshot.partition_columns))
        return metadata_plan(snapshot, predicate, selected.files(), started)
    files = snapshot.files()
    may_match = pa.array(files_matching(snapshot, predicate))
    values = snapshot.partition_values()
    candidates = Candidates(
        files.filter(may_match), values.filter(may_match) if values.num_columns else values
    )
    log.info(
        "DELETE from %s at version %d: reading %d of %d file(s) for rows where %s.",
        snapshot.storage.root_uri,
        snapshot.version,
        candidates.files.num_rows,
        files.num_rows,
        predicate.text,
    )
    matcher = match_rows or functools.partial(match_rows_locally, max_workers=options.max_workers)
    matched = checked_matches(candidates, matcher(snapshot, predicate, candidates))
    reader = FileReader(snapshot, options.max_workers)
    scan = Scan(snapshot, predicate, candidates, matched, reader, Timer(started, time.monotonic()))
    if deletion_vectors_writable(snapshot.protocol, snapshot.metadata):
        return deletion_vector_plan(scan)
    check_supported(snapshot.protocol, snapshot.metadata, Operation.COPY_ON_WRITE_DELETE)
    return copy_on_write_plan(scan)


# --- the commit ------------------------------------------------------------------------------


def commit_delete(
    plan: DeletePlan, options: DeleteOptions, post_commit_hooks: Sequence[PostCommitHook] = ()
) -> DeleteResult:
    """Commit a plan: one ``DELETE`` commit, checked against what others committed since the plan's
    snapshot (Delta's conflict rules, :mod:`.conflicts`). When the commit is refused, or a
    concurrent run of the same application already committed, the plan's files are deleted.

    :raises ConcurrentAppendError: a concurrent commit added files the predicate may select.
    :raises ConcurrentDeleteReadError: a concurrent commit removed a file this DELETE read.
    :raises ConcurrentDeleteDeleteError: a concurrent commit removed a file this DELETE removes.
    """
    snapshot = plan.snapshot
    if plan.commit is None:
        log.info(
            "DELETE from %s: no row matches %s at version %d; nothing was written.",
            snapshot.storage.root_uri,
            plan.predicate,
            snapshot.version,
        )
        return DeleteResult(plan.predicate, snapshot.version, None, plan.mode, num_deleted_rows=0)
    transaction = OptimisticTransaction(
        snapshot.storage, read_snapshot=snapshot, properties=options, post_commit_hooks=post_commit_hooks
    )
    try:
        result = transaction.commit(plan.commit)
    except BaseException as err:
        discard_written(snapshot, plan.written, f"commit was refused ({type(err).__name__})")
        raise
    if not result.committed:
        discard_written(snapshot, plan.written, "application was committed concurrently")
        return DeleteResult(plan.predicate, snapshot.version, result, plan.mode)
    log.info(
        "DELETE from %s committed at version %d (%s): %s row(s) deleted, %d file(s) removed, %d added, "
        "%d deletion vector(s) written.",
        snapshot.storage.root_uri,
        result.version,
        plan.mode,
        "unknown" if plan.num_deleted_rows is None else plan.num_deleted_rows,
        plan.metrics["numRemovedFiles"],
        plan.metrics.get("numAddedFiles", 0),
        plan.metrics["numDeletionVectorsAdded"],
    )
    return DeleteResult(
        plan.predicate, snapshot.version, result, plan.mode, dict(plan.metrics), plan.num_deleted_rows
    )


def delete(
    snapshot: Snapshot,
    options: DeleteOptions | None = None,
    post_commit_hooks: Sequence[PostCommitHook] = (),
    *,
    match_rows: RowMatcher | None = None,
) -> DeleteResult:
    """Plan and commit a DELETE of ``snapshot`` (see :meth:`DeltaTable.delete`).

    With ``app_id`` / ``app_version`` already recorded by the table, nothing is read or written.
    """
    options = options or DeleteOptions()
    transaction = OptimisticTransaction(snapshot.storage, read_snapshot=snapshot, properties=options)
    done = transaction.already_committed(DELETE)
    if done is not None:
        return DeleteResult(options.predicate, snapshot.version, done)
    plan = plan_delete(snapshot, options, match_rows=match_rows)
    return commit_delete(plan, options, post_commit_hooks)
