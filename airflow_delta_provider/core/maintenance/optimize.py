"""OPTIMIZE (bin-packing compaction): the plan, and the commit of what an engine rewrote.

As Delta's ``OptimizeExecutor``: small files and files with deletion vectors are packed into bins
of at most ``delta.targetFileSize``, an engine rewrites each bin into one file (:func:`rewrite_locally`
with pyarrow here, Spark in the Airflow layer), and :func:`commit_optimize` commits the swap with
``dataChange=false`` under the inputs as its read set. What a rewrite reports is checked before the
commit (:func:`check_outputs`), and the files of an attempt that does not land, and only those,
are deleted by VACUUM's rules. docs/maintenance.md ("OPTIMIZE") has the rules.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import DeltaError, OptimizeRewriteError, SchemaError
from airflow_delta_provider.core.expressions.predicate import Predicate
from airflow_delta_provider.core.expressions.stats import indexed_columns, read_footers
from airflow_delta_provider.core.maintenance.optimize_outputs import (
    check_outputs,
    check_row_counts,
    excerpt,
    refusal,
    rewrite_failure,
    rows_per_bin,
    sort_outputs,
)
from airflow_delta_provider.core.maintenance.vacuum.discard import discard_uncommitted
from airflow_delta_provider.core.protocol.actions import AddFile, RemoveFile
from airflow_delta_provider.core.protocol.column_mapping import (
    column_mapping_mode,
    logical_file_schema,
    physical_data,
    physical_path,
)
from airflow_delta_provider.core.protocol.features import Operation, check_supported
from airflow_delta_provider.core.protocol.partitions import partition_path
from airflow_delta_provider.core.protocol.schema import check_schema_compatible, physical_name
from airflow_delta_provider.core.protocol.table_config import TARGET_FILE_SIZE, Setting
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import (
    NO_FILES,
    CommitPlan,
    CommitProperties,
    CommitResult,
    ReadSet,
)
from airflow_delta_provider.core.transaction.create import remove_actions
from airflow_delta_provider.core.transaction.datafiles import collect_files
from airflow_delta_provider.core.utils.arguments import check_bool, check_positive_int
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

__all__ = [
    "OPTIMIZE",
    "Bin",
    "OptimizeOptions",
    "OptimizePlan",
    "OptimizeResult",
    "RewriteOptions",
    "already_rewritten",
    "check_outputs",
    "commit_optimize",
    "optimize",
    "pack_bins",
    "plan_optimize",
    "rewrite_and_commit",
    "rewrite_locally",
    "select_partitions",
]

log = get_logger(__name__)

OPTIMIZE = "OPTIMIZE"
#: Where :func:`rewrite_locally` writes under the table root: "" puts each bin's file in its
#: partition directory, as Delta does (never a hidden directory: VACUUM must see what stays).
DEFAULT_WRITE_SUBDIR = ""

#: An engine: writes each bin's rows as new files and returns, per bin index, the paths (relative to
#: the table root) of the files it wrote for it. One that fails removes what it wrote before raising
#: (the local and the Spark engines do; what stays, VACUUM removes).
Rewriter = Callable[["OptimizePlan"], Mapping[int, Sequence[str]]]


@dataclass(frozen=True, kw_only=True)
class RewriteOptions(CommitProperties):
    """What every rewrite of files into bins takes (OPTIMIZE, and REORG PURGE in :mod:`.purge`),
    beside the :class:`~.commit_plan.CommitProperties` every commit takes (with ``app_id`` and
    ``app_version`` the rewrite is idempotent).

    :param partition_filter: a SQL predicate on partition columns (Delta's ``OPTIMIZE ... WHERE``,
        ``REORG TABLE ... WHERE``); only the partitions it selects are rewritten.
    :param target_file_size: bytes; overrides ``delta.targetFileSize`` (default 1 GiB), the most a
        bin holds.
    :param dry_run: plan only; rewrite and commit nothing.
    """

    partition_filter: str | None = None
    target_file_size: int | str | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("dry_run", self.dry_run)
        if self.partition_filter is not None and not isinstance(self.partition_filter, str):
            raise ValueError(
                "partition_filter must be a SQL predicate on partition columns, got "
                f"{self.partition_filter!r}."
            )


@dataclass(frozen=True, kw_only=True)
class OptimizeOptions(RewriteOptions):
    """Every option of an OPTIMIZE (``DeltaTable.optimize``): those of :class:`RewriteOptions`, and

    :param min_file_size: files at least this big are left alone (default: the target size,
        as Delta's ``optimize.minFileSize`` and ``maxFileSize`` are both 1 GiB).
    """

    min_file_size: int | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive_int("min_file_size", self.min_file_size)


@dataclass(frozen=True)
class Bin:
    """Files of one partition that are rewritten into one file.

    :param index: the bin's number in the plan (0, 1, ...).
    :param partition_values: the partition's values, as the log serialises them.
    :param files: the input files (rows of :meth:`Snapshot.files`).
    """

    index: int
    partition_values: dict[str, str | None]
    files: pa.Table

    @property
    def paths(self) -> list[str]:
        """The inputs' ``add.path`` values."""
        return [str(p) for p in self.files.column("path").to_pylist()]

    @property
    def size(self) -> int:
        return int(pc.sum(self.files.column("size")).as_py() or 0)

    @property
    def num_deletion_vectors(self) -> int:
        return int(pc.sum(self.files.column("deletion_vector").is_valid()).as_py() or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "partition_values": dict(self.partition_values),
            "num_files": self.files.num_rows,
            "size": self.size,
            "num_deletion_vectors": self.num_deletion_vectors,
        }


@dataclass(frozen=True)
class OptimizePlan:
    """What an OPTIMIZE of one snapshot rewrites.

    :param snapshot: the snapshot planned on (the commit is checked against what others
        committed since).
    :param bins: the bins to rewrite, each into one file.
    :param target_file_size: the bin size limit and where it came from.
    :param min_file_size: files at least this big were left alone.
    :param partition_filter: the predicate that selected the partitions, if any.
    :param num_files_considered: active files in the selected partitions.
    :param num_candidates: files small enough or with a deletion vector (REORG PURGE: the files
        it selects, see :mod:`.purge`).
    :param operation: ``OPTIMIZE``, or ``REORG`` for a purge: the commit's operation and
        parameters.
    """

    snapshot: Snapshot
    bins: tuple[Bin, ...]
    target_file_size: Setting[int]
    min_file_size: int
    partition_filter: str | None
    num_files_considered: int
    num_candidates: int
    operation: str = OPTIMIZE

    @classmethod
    def empty(cls, snapshot: Snapshot, operation: str = OPTIMIZE) -> OptimizePlan:
        """A plan of nothing (the OPTIMIZE or REORG was already committed)."""
        return cls(snapshot, (), snapshot.config.target_file_size, 0, None, 0, 0, operation)

    @property
    def num_files(self) -> int:
        """Input files to rewrite."""
        return sum(b.files.num_rows for b in self.bins)

    @property
    def size(self) -> int:
        return sum(b.size for b in self.bins)

    @property
    def input_paths(self) -> list[str]:
        return [p for b in self.bins for p in b.paths]

    def to_dict(self) -> dict[str, Any]:
        return {
            "operation": self.operation,
            "version": self.snapshot.version,
            "partition_filter": self.partition_filter,
            "target_file_size": self.target_file_size.to_dict(),
            "min_file_size": self.min_file_size,
            "num_files_considered": self.num_files_considered,
            "num_candidates": self.num_candidates,
            "num_bins": len(self.bins),
            "num_files": self.num_files,
            "num_bytes": self.size,
            "num_deletion_vectors": sum(b.num_deletion_vectors for b in self.bins),
        }


@dataclass(frozen=True)
class OptimizeResult:
    """What an OPTIMIZE did.

    :param plan: the plan (a summary of it in :meth:`to_dict`).
    :param commit: the commit's result; None for a dry run or when there was nothing to compact.
    :param metrics: Delta's OPTIMIZE ``operationMetrics`` (as committed; empty when nothing was).
    :param written: the files the rewrite wrote, relative to the root.
    """

    plan: OptimizePlan
    commit: CommitResult | None
    metrics: dict[str, int] = field(default_factory=dict)
    written: tuple[str, ...] = ()
    dry_run: bool = False

    @property
    def committed(self) -> bool:
        return self.commit is not None and self.commit.committed

    @property
    def version(self) -> int:
        """The committed version (or the one recording this rewrite's ``app_id``; else the one read)."""
        return self.commit.version if self.commit is not None else self.plan.snapshot.version

    @property
    def reason(self) -> str | None:
        """None when committed; else ``dry_run``, ``no_files`` or the commit's reason."""
        if self.dry_run:
            return "dry_run"
        if self.commit is None:
            return NO_FILES
        return self.commit.reason

    def to_dict(self) -> dict[str, Any]:
        return {
            "committed": self.committed,
            "reason": self.reason,
            "operation": self.plan.operation,
            "version": self.version,
            "plan": self.plan.to_dict(),
            "metrics": dict(self.metrics),
            "written": list(self.written),
            "commit": self.commit.to_dict() if self.commit is not None else None,
        }


# --- plan --------------------------------------------------------------------------------


def plan_optimize(snapshot: Snapshot, options: OptimizeOptions | None = None) -> OptimizePlan:
    """Which files of which partitions to bin-pack (Delta's ``OptimizeExecutor`` rules, see above).

    :raises PredicateError: ``partition_filter`` is not a predicate on partition columns.
    :raises UnsupportedFeatureError: the table uses a feature this OPTIMIZE cannot honour (the
        feature registry's ``Operation.OPTIMIZE`` entries: what a write refuses, row tracking).
    """
    options = options or OptimizeOptions()
    files, predicate, target = select_partitions(snapshot, options)
    min_size = options.min_file_size if options.min_file_size is not None else target.value
    has_dv = files.column("deletion_vector").is_valid()
    candidates = files.filter(pc.or_(pc.less(files.column("size"), min_size), has_dv))
    plan = OptimizePlan(
        snapshot=snapshot,
        bins=pack_bins(candidates, target.value, rewrite_single=False),
        target_file_size=target,
        min_file_size=min_size,
        partition_filter=predicate.text if predicate is not None else None,
        num_files_considered=files.num_rows,
        num_candidates=candidates.num_rows,
    )
    log_plan(plan)
    return plan


def select_partitions(
    snapshot: Snapshot, options: RewriteOptions
) -> tuple[pa.Table, Predicate | None, Setting[int]]:
    """The active files of the partitions ``options.partition_filter`` selects (every file without
    one), the parsed filter, and the bin size limit, after checking the table allows a rewrite."""
    check_supported(snapshot.protocol, snapshot.metadata, Operation.OPTIMIZE)
    target = snapshot.config.resolve(TARGET_FILE_SIZE, options.target_file_size)
    files = snapshot.files()
    predicate = None
    if options.partition_filter is not None:
        predicate = Predicate(options.partition_filter, snapshot.partition_columns)
        if snapshot.partition_columns and files.num_rows:
            files = files.filter(predicate.mask(snapshot.partition_values()))
    return files, predicate, target


def pack_bins(candidates: pa.Table, target: int, *, rewrite_single: bool) -> tuple[Bin, ...]:
    """Delta's ``groupFilesIntoBins``: per partition, the candidates sorted by size are packed into
    bins of at most ``target`` bytes. A bin of one file is kept only when ``rewrite_single`` (a
    REORG rewrites every file it selects) or when that file has a deletion vector: rewriting it
    alone would change nothing else."""
    groups: dict[tuple[tuple[str, str | None], ...], list[int]] = {}
    for row, mapping in enumerate(candidates.column("partition_values").to_pylist()):
        key = tuple(sorted(dict(mapping or {}).items()))
        groups.setdefault(key, []).append(row)
    sizes = candidates.column("size").to_pylist()
    dvs = candidates.column("deletion_vector").is_valid().to_pylist()
    bins: list[Bin] = []
    for key in sorted(groups, key=lambda k: [(c, v is None, v or "") for c, v in k]):
        packed: list[list[int]] = []
        current: list[int] = []
        current_size = 0
        for row in sorted(groups[key], key=lambda r: (sizes[r], r)):
            if current and current_size + sizes[row] > target:
                packed.append(current)
                current, current_size = [], 0
            current.append(row)
            current_size += sizes[row]
        if current:
            packed.append(current)
        for members in packed:
            if len(members) > 1 or rewrite_single or dvs[members[0]]:
                bins.append(Bin(len(bins), dict(key), candidates.take(pa.array(members, pa.int64()))))
    return tuple(bins)


def log_plan(plan: OptimizePlan) -> None:
    snapshot = plan.snapshot
    log.info(
        "%s plan for %s at version %d: %d of %d file(s) are candidates; %d bin(s) of %d file(s), "
        "%d bytes, target %d bytes (%s).",
        plan.operation,
        snapshot.storage.root_uri,
        snapshot.version,
        plan.num_candidates,
        plan.num_files_considered,
        len(plan.bins),
        plan.num_files,
        plan.size,
        plan.target_file_size.value,
        plan.target_file_size.source,
    )


# --- commit ------------------------------------------------------------------------------


def optimize_metrics(removes: Sequence[RemoveFile], adds: Sequence[AddFile]) -> dict[str, int]:
    """Delta's OPTIMIZE ``operationMetrics``: counts, bytes, and the sizes of the added files
    (min, 25th/50th/75th percentile, max; nearest rank on the sorted sizes)."""
    sizes = sorted(a.size for a in adds)

    def percentile(p: float) -> int:
        return sizes[max(0, math.ceil(p * len(sizes)) - 1)] if sizes else 0

    return {
        "numRemovedFiles": len(removes),
        "numRemovedBytes": sum(r.size or 0 for r in removes),
        "numAddedFiles": len(adds),
        "numAddedBytes": sum(sizes),
        "minFileSize": sizes[0] if sizes else 0,
        "p25FileSize": percentile(0.25),
        "p50FileSize": percentile(0.5),
        "p75FileSize": percentile(0.75),
        "maxFileSize": sizes[-1] if sizes else 0,
        "numDeletionVectorsRemoved": sum(1 for r in removes if r.deletion_vector is not None),
    }


def commit_optimize(
    store: LogStore,
    plan: OptimizePlan,
    written: Mapping[int, Sequence[str]],
    options: CommitProperties | None = None,
    post_commit_hooks: Sequence[PostCommitHook] = (),
) -> OptimizeResult:
    """Commit the files an engine wrote for ``plan``'s bins, replacing the bins' inputs, as one
    ``OPTIMIZE`` commit (or ``REORG`` for a purge plan).

    :param written: per bin index, the files written for it (relative to the root, or URIs
        under it); a bin whose rows were all deleted may have none.
    :raises SchemaError: a written file does not fit the table schema (nothing is committed).
    :raises InvalidPathError: a written file is outside the root, hidden, an active file of the
        table, missing, listed twice, or written for a bin the plan does not hold
        (:func:`check_outputs`).
    :raises OptimizeRewriteError: the files of a bin hold other than its rows (:func:`check_row_counts`).
    :raises ConcurrentDeleteReadError: a concurrent commit removed an input (the error names it).
    :raises ConcurrentDeleteDeleteError: a concurrent commit removed the same inputs (another OPTIMIZE).
    """
    options = options or CommitProperties()
    outputs = check_outputs(plan, written)
    transaction = OptimisticTransaction(
        store, read_snapshot=plan.snapshot, properties=options, post_commit_hooks=post_commit_hooks
    )
    done = transaction.already_committed(plan.operation)
    if done is not None:
        return OptimizeResult(plan, done)
    if not plan.bins:
        return OptimizeResult(plan, None)
    adds, paths = _rewritten_files(store, plan, outputs)
    now = int(time.time() * 1000)
    removes = tuple(
        dataclasses.replace(r, data_change=False) for b in plan.bins for r in remove_actions(b.files, now)
    )
    metrics = optimize_metrics(removes, adds)
    commit = CommitPlan(
        plan.operation,
        _parameters(plan),
        metrics,
        removes=removes,
        adds=adds,
        read=ReadSet.files(plan.input_paths),
        data_change=False,
        kind=Operation.OPTIMIZE,
    )
    result = transaction.commit(commit)
    if result.committed:
        log.info(
            "%s of %s committed at version %d: %d file(s) (%d bytes) rewritten into %d (%d bytes).",
            plan.operation,
            store.root_uri,
            result.version,
            len(removes),
            metrics["numRemovedBytes"],
            len(adds),
            metrics["numAddedBytes"],
        )
    return OptimizeResult(plan, result, metrics if result.committed else {}, tuple(paths))


def _parameters(plan: OptimizePlan) -> dict[str, str]:
    """Delta's ``operationParameters`` (``DeltaOperations.Optimize`` / ``Reorg``), JSON-encoded as
    Delta writes them."""
    parameters: dict[str, Any] = {"predicate": [plan.partition_filter] if plan.partition_filter else []}
    if plan.operation == OPTIMIZE:
        parameters.update(zOrderBy=[], clusterBy=[], auto=False)
    else:
        parameters["applyPurge"] = True
    return {k: json.dumps(v, separators=(",", ":")) for k, v in parameters.items()}


def _rewritten_files(
    store: LogStore, plan: OptimizePlan, outputs: Mapping[int, Sequence[str]]
) -> tuple[tuple[AddFile, ...], list[str]]:
    """The adds of the files written for the bins (``dataChange=false``, statistics from their
    footers), after checking that each fits the table schema and that each bin's files hold its
    rows; and their paths."""
    snapshot = plan.snapshot
    partition_columns = list(snapshot.partition_columns)
    bin_of: list[Bin] = []
    paths: list[str] = []
    by_index = {b.index: b for b in plan.bins}
    for index in sorted(outputs):
        for path in outputs[index]:
            bin_of.append(by_index[index])
            paths.append(path)
    data_files = collect_files(store, files=paths, partition_columns=partition_columns)
    data_schema = pa.schema([f for f in snapshot.schema if f.name not in set(partition_columns)])
    mapping = column_mapping_mode(snapshot.protocol, snapshot.metadata)
    stats_columns = indexed_columns(data_schema, snapshot.properties)
    if mapping != "none":  # the log keys statistics by physical name
        stats_columns = [physical_path(data_schema, path) for path in stats_columns]
    footers = read_footers(
        store, [f.path for f in data_files], stats_columns=stats_columns, sizes=[f.size for f in data_files]
    )
    for data_file, footer in zip(data_files, footers, strict=True):
        try:
            # Under column mapping a file names its columns physically (ids in id mode): checked
            # under the logical names they stand for, as every commit checks them.
            columns = (
                footer.schema
                if mapping == "none"
                else logical_file_schema(snapshot.schema, footer.schema, mapping)
            )
            check_schema_compatible(
                data_schema, pa.schema([f for f in columns if f.name not in set(partition_columns)])
            )
        except SchemaError as err:
            raise type(err)(f"{store.to_uri(data_file.path)}: {err}") from None
    check_row_counts(plan, rows_per_bin(bin_of, footers))
    adds = tuple(
        AddFile(
            path=f.add_path,
            partition_values=dict(b.partition_values),
            size=f.size,
            modification_time=f.modification_time,
            data_change=False,
            stats=footer.stats,
        )
        for f, b, footer in zip(data_files, bin_of, footers, strict=True)
    )
    return adds, paths


# --- the local engine --------------------------------------------------------------------


def output_name() -> str:
    """A data file name as Spark writes them (``part-00000-<uuid>-c000.snappy.parquet``)."""
    return f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"


def read_bin(plan: OptimizePlan, bin_: Bin) -> pa.Table:
    """The rows of one bin as a file of the table holds them: deletion vectors applied, without
    partition columns, physical column names (and field ids) under column mapping. Columns the
    table no longer has (dropped under column mapping) are not read."""
    snapshot = plan.snapshot
    rows = snapshot.to_pyarrow_table(paths=bin_.paths)
    partition_columns = set(snapshot.partition_columns)
    rows = rows.select([n for n in rows.column_names if n not in partition_columns])
    if column_mapping_mode(snapshot.protocol, snapshot.metadata) == "none":
        return rows
    return physical_data(rows, snapshot.schema)


def partition_directory(snapshot: Snapshot, partition_values: Mapping[str, str | None]) -> str:
    """A partition's directory (``p=a/q=1``; physical names under column mapping, as the log keys
    partition values by them)."""
    keys = [physical_name(snapshot.schema.field(c)) for c in snapshot.partition_columns]
    return partition_path(dict(partition_values), keys)


def rewrite_locally(plan: OptimizePlan, *, write_subdir: str = DEFAULT_WRITE_SUBDIR) -> dict[int, list[str]]:
    """Rewrite every bin with pyarrow in this process: one Parquet file per bin (none when all of
    its rows were deleted), in ``[<write_subdir>/]<partition directories>/`` under the root.

    When a bin cannot be rewritten (an input is missing from storage ...), the files already
    written are deleted before the error is raised."""
    import pyarrow.parquet as pq

    snapshot = plan.snapshot
    storage = snapshot.storage
    written: dict[int, list[str]] = {}
    try:
        for number, bin_ in enumerate(plan.bins, 1):
            rows = read_bin(plan, bin_)
            written[bin_.index] = []
            if rows.num_rows == 0:
                continue
            directory = partition_directory(snapshot, bin_.partition_values)
            parts = (write_subdir.strip("/"), directory, output_name())
            relative = "/".join(p for p in parts if p)
            sink = pa.BufferOutputStream()
            pq.write_table(rows, sink, compression="snappy")
            written[bin_.index].append(relative)  # before the write: a failed put may leave a part
            storage.put(storage.join(relative), sink.getvalue().to_pybytes())
            if number % 100 == 0:
                log.info("Rewrote %d of %d bin(s) of %s.", number, len(plan.bins), storage.root_uri)
    except BaseException as err:
        paths = [storage.join(p) for files in written.values() for p in files]
        discard_uncommitted(storage, paths, reason=f"the {plan.operation} rewrite failed ({excerpt(err)})")
        raise
    return written


def optimize(
    snapshot: Snapshot,
    options: OptimizeOptions | None = None,
    post_commit_hooks: Sequence[PostCommitHook] = (),
    *,
    rewrite: Rewriter | None = None,
) -> OptimizeResult:
    """Plan, rewrite (``rewrite``, default :func:`rewrite_locally`) and commit an OPTIMIZE
    (see :func:`rewrite_and_commit`)."""
    options = options or OptimizeOptions()
    done = already_rewritten(snapshot, options, OPTIMIZE)
    if done is not None:
        return done
    plan = plan_optimize(snapshot, options)
    return rewrite_and_commit(plan, options, post_commit_hooks, rewrite=rewrite)


def already_rewritten(snapshot: Snapshot, options: RewriteOptions, operation: str) -> OptimizeResult | None:
    """The result of a rewrite whose ``app_id`` / ``app_version`` the table already holds (checked
    before planning and rewriting: a retry whose commit landed does nothing again); else None."""
    transaction = OptimisticTransaction(snapshot.storage, read_snapshot=snapshot, properties=options)
    done = transaction.already_committed(operation)
    return OptimizeResult(OptimizePlan.empty(snapshot, operation), done) if done is not None else None


def rewrite_and_commit(
    plan: OptimizePlan,
    options: RewriteOptions,
    post_commit_hooks: Sequence[PostCommitHook] = (),
    *,
    rewrite: Rewriter | None = None,
) -> OptimizeResult:
    """Rewrite a plan's bins (``rewrite``, default :func:`rewrite_locally`) and commit them
    (nothing on a dry run or an empty plan): OPTIMIZE's and REORG PURGE's execution.

    Nothing of a failed attempt stays in the table: when the rewrite reports files it may not
    commit, or the commit is refused (a conflict, a schema mismatch) or finds the ``app_id`` /
    ``app_version`` already committed by a concurrent run, the files the rewrite wrote are deleted
    (by VACUUM's rules: never outside the root, never a file the table references).

    :raises OptimizeRewriteError: the rewrite failed (e.g. an input is missing from storage);
        nothing was committed.
    :raises InvalidPathError: the rewrite reported a path it may not commit (see :func:`check_outputs`).
    """
    if options.dry_run or not plan.bins:
        return OptimizeResult(plan, None, dry_run=options.dry_run)
    store = plan.snapshot.storage
    written = _rewrite(plan, rewrite or rewrite_locally)
    if not isinstance(written, Mapping):
        check_outputs(plan, written)  # raises: we cannot know what it wrote
    outputs, refused = sort_outputs(plan, written)
    paths = [store.join(p) for files in outputs.values() for p in files]
    operation = plan.operation
    if refused:
        discard_uncommitted(
            store, paths, reason=f"its rewrite also reported paths {operation} may not commit"
        )
        raise refusal(plan, refused)
    try:
        result = commit_optimize(store, plan, outputs, options, post_commit_hooks)
    except (DeltaError, ValueError) as err:
        discard_uncommitted(store, paths, reason=f"the {operation} commit was refused: {excerpt(err)}")
        raise
    if not result.committed:
        # A concurrent run with the same app_id and app_version committed first.
        discard_uncommitted(
            store, paths, reason=f"the table already holds this {operation} ({result.reason})"
        )
    return result


def _rewrite(plan: OptimizePlan, rewrite: Rewriter) -> Mapping[int, Sequence[str]]:
    """``rewrite(plan)``, a failure other than the core's own becoming an :class:`OptimizeRewriteError`."""
    try:
        return rewrite(plan)
    except DeltaError:
        raise
    except Exception as err:
        raise OptimizeRewriteError(rewrite_failure(plan, err)) from err
