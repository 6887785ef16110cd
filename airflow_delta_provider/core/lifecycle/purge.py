"""REORG TABLE ... APPLY (PURGE): rewrite the files whose rows deletion vectors delete, so that a
later VACUUM can remove the deleted rows' bytes.

As Delta's ``DeltaReorgTableCommand``, a purge is OPTIMIZE with another file selection (Delta's
``DeltaPurgeOperation``): files whose deletion vector deletes rows, files with a vector but no
``numRecords``, and files holding columns dropped under column mapping (footers read only where a
column can have been dropped). The bins (single files included), the rewrite engines, the checks
of what they wrote and the commit are OPTIMIZE's (:mod:`.optimize`); the commit is a ``REORG``
with ``applyPurge=true``, ``dataChange=false``, refused when a concurrent commit removed a file it
rewrote. docs/lifecycle.md (PURGE) has the rules.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.expressions.stats import read_footers
from airflow_delta_provider.core.expressions.stats_parsed import record_counts
from airflow_delta_provider.core.maintenance.optimize import (
    OptimizePlan,
    OptimizeResult,
    RewriteOptions,
    already_rewritten,
    log_plan,
    pack_bins,
    rewrite_and_commit,
    select_partitions,
)
from airflow_delta_provider.core.protocol.column_mapping import (
    column_dropped,
    column_mapping_mode,
    extra_columns,
)
from airflow_delta_provider.core.protocol.schema import physical_schema
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.maintenance.optimize import Rewriter
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

__all__ = ["REORG", "PurgeOptions", "plan_purge", "purge"]

log = get_logger(__name__)

#: The commit's operation (Delta's ``DeltaOperations.Reorg``).
REORG = "REORG"


@dataclass(frozen=True, kw_only=True)
class PurgeOptions(RewriteOptions):
    """Every option of a purge (``DeltaTable.purge``): the :class:`~.commit_plan.CommitProperties`
    every commit takes (with ``app_id`` / ``app_version`` a purge is idempotent), and

    :param partition_filter: a SQL predicate on partition columns (Delta's ``REORG TABLE t WHERE
        ...``); only the partitions it selects are purged.
    :param target_file_size: bytes; the most one rewritten file gathers (default
        ``delta.targetFileSize``, 1 GiB).
    :param dry_run: plan only: say which files would be rewritten.
    """


def plan_purge(snapshot: Snapshot, options: PurgeOptions | None = None) -> OptimizePlan:
    """Which files a purge of ``snapshot`` rewrites, in which bins (see the module docstring).

    :raises PredicateError: ``partition_filter`` is not a predicate on partition columns.
    :raises UnsupportedFeatureError: the table uses a feature a rewrite cannot honour (the feature
        registry's ``Operation.OPTIMIZE`` entries).
    """
    options = options or PurgeOptions()
    files, predicate, target = select_partitions(snapshot, options)
    selected = pc.or_(_deletes_rows(files), _holds_dropped_columns(snapshot, files))
    candidates = files.filter(selected)
    plan = OptimizePlan(
        snapshot=snapshot,
        bins=pack_bins(candidates, target.value, rewrite_single=True),
        target_file_size=target,
        min_file_size=0,  # Delta's REORG runs OPTIMIZE with minFileSize=0: size never selects
        partition_filter=predicate.text if predicate is not None else None,
        num_files_considered=files.num_rows,
        num_candidates=candidates.num_rows,
        operation=REORG,
    )
    log_plan(plan)
    return plan


def _deletes_rows(files: pa.Table) -> pa.Array:
    """Per file: it has a deletion vector that deletes rows, or one and no ``numRecords`` (Delta
    rewrites those too: the rewritten file gets statistics)."""
    vectors = files.column("deletion_vector")
    has_vector = pc.fill_null(vectors.is_valid(), False)
    cardinality = pc.fill_null(pc.struct_field(vectors, "cardinality"), 0)
    records = record_counts(files.column("stats"))
    selected = pc.and_(has_vector, pc.or_(pc.greater(cardinality, 0), records.is_null()))
    return selected.combine_chunks() if isinstance(selected, pa.ChunkedArray) else selected


def _holds_dropped_columns(snapshot: Snapshot, files: pa.Table) -> pa.Array:
    """Per file: it holds a physical column the schema no longer has. Read from the footers of
    the files not already selected, and only where a column can have been dropped."""
    none = pa.array([False] * files.num_rows, pa.bool_())
    mode = column_mapping_mode(snapshot.protocol, snapshot.metadata)
    if mode == "none" or not files.num_rows or not column_dropped(snapshot.schema, snapshot.properties):
        return none
    unread = pc.invert(_deletes_rows(files))
    rows = [i for i, flag in enumerate(unread.to_pylist()) if flag]
    paths = files.column("path").take(pa.array(rows, pa.int64())).to_pylist()
    storage = snapshot.storage
    log.info(
        "PURGE of %s: a column was dropped from the table; reading the footers of %d file(s) for it.",
        storage.root_uri,
        len(paths),
    )
    table_physical = physical_schema(snapshot.schema, mode)
    sizes = files.column("size").take(pa.array(rows, pa.int64())).to_pylist()
    footers = read_footers(storage, [storage.path.decode(p) for p in paths], stats_columns=[], sizes=sizes)
    flags = [False] * files.num_rows
    for row, footer in zip(rows, footers, strict=True):
        flags[row] = bool(extra_columns(footer.schema, table_physical))
    return pa.array(flags, pa.bool_())


def purge(
    snapshot: Snapshot,
    options: PurgeOptions | None = None,
    post_commit_hooks: Sequence[PostCommitHook] = (),
    *,
    rewrite: Rewriter | None = None,
) -> OptimizeResult:
    """Plan, rewrite (``rewrite``, default pyarrow in this process) and commit a purge of
    ``snapshot`` (see :meth:`DeltaTable.purge`).

    With ``app_id`` / ``app_version`` already recorded by the table, nothing is read or written.
    """
    options = options or PurgeOptions()
    done = already_rewritten(snapshot, options, REORG)
    if done is not None:
        return done
    return rewrite_and_commit(plan_purge(snapshot, options), options, post_commit_hooks, rewrite=rewrite)
