"""The three plans of a DELETE (see :mod:`.delete`): whole files removed, rows marked in deletion
vectors, or files rewritten without their deleted rows; each a :class:`DeletePlan` holding the
commit, Delta's metrics and the files written for it.
"""

from __future__ import annotations

import json
import posixpath
import time
import uuid
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import DeltaError
from airflow_delta_provider.core.expressions.stats import read_footers
from airflow_delta_provider.core.expressions.stats_encoding import stats_json
from airflow_delta_provider.core.expressions.stats_parsed import record_counts
from airflow_delta_provider.core.lifecycle.delete_rows import FileReader
from airflow_delta_provider.core.log.deletion_vectors import (
    deletion_vector_file_bytes,
    encode_deletion_vector_file_id,
    serialize_deletion_vector,
)
from airflow_delta_provider.core.maintenance.vacuum.discard import discard_uncommitted
from airflow_delta_provider.core.protocol.actions import AddCDCFile, AddFile, RemoveFile
from airflow_delta_provider.core.protocol.features import Operation, change_data_feed_enabled
from airflow_delta_provider.core.protocol.partitions import partition_path
from airflow_delta_provider.core.protocol.schema import physical_name
from airflow_delta_provider.core.storage.paths import has_scheme
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan, ReadSet
from airflow_delta_provider.core.transaction.create import remove_actions
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.expressions.predicate import Predicate
    from airflow_delta_provider.core.lifecycle.delete_rows import Candidates
    from airflow_delta_provider.core.log.snapshot import Snapshot

__all__ = [
    "COPY_ON_WRITE",
    "DELETE",
    "DELETION_VECTORS",
    "METADATA",
    "DeletePlan",
    "Scan",
    "Timer",
    "checked_matches",
    "copy_on_write_plan",
    "deletion_vector_plan",
    "discard_written",
    "metadata_plan",
]

log = get_logger(__name__)

DELETE = "DELETE"
#: How the rows are deleted (:attr:`DeletePlan.mode`).
METADATA = "metadata"
DELETION_VECTORS = "deletion_vectors"
COPY_ON_WRITE = "copy_on_write"


@dataclass(frozen=True)
class DeletePlan:
    """What a DELETE of one snapshot commits, with the files it wrote for that.

    :param snapshot: the snapshot planned on (the commit is checked against what others
        committed since).
    :param predicate: the predicate's text (None: every row).
    :param mode: ``metadata``, ``deletion_vectors`` or ``copy_on_write``.
    :param commit: the commit; None when no row matched.
    :param metrics: Delta's DELETE ``operationMetrics``, as they will be committed.
    :param written: the files the plan wrote (filesystem paths): deletion vectors, rewritten data,
        change data.
    :param num_deleted_rows: None when unknown (whole files removed without row counts).
    :param num_files_scanned: the files read (0 for a metadata-only delete).
    """

    snapshot: Snapshot
    predicate: str | None
    mode: str
    commit: CommitPlan | None
    metrics: dict[str, int]
    written: tuple[str, ...]
    num_deleted_rows: int | None
    num_files_scanned: int = 0


@dataclass(frozen=True)
class Timer:
    """When the DELETE started and when its scan for matching rows ended (monotonic seconds)."""

    started: float
    scanned: float

    def metrics(self, *, rewrote: bool) -> dict[str, int]:
        now = time.monotonic()
        return {
            "executionTimeMs": _ms(now - self.started),
            "scanTimeMs": _ms(self.scanned - self.started),
            "rewriteTimeMs": _ms(now - self.scanned) if rewrote else 0,
        }


@dataclass(frozen=True)
class Scan:
    """What a row-level DELETE read, for the plan built on it.

    :param matched: per candidate file (``add.path``), the positions of its matching rows.
    :param reader: reads (and writes) the table's data files.
    :param timer: when the DELETE started and when its scan ended.
    """

    snapshot: Snapshot
    predicate: Predicate
    candidates: Candidates
    matched: Mapping[str, npt.NDArray[np.uint64]]
    reader: FileReader
    timer: Timer


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


def checked_matches(
    candidates: Candidates, matched: Mapping[str, npt.NDArray[np.uint64]]
) -> dict[str, npt.NDArray[np.uint64]]:
    """The matcher's answer, each file's rows sorted and unique; refuses a file it was not given."""
    known = set(candidates.paths)
    unknown = sorted(set(matched) - known)
    if unknown:
        raise DeltaError(
            f"The row matcher reported {len(unknown)} file(s) the DELETE did not ask about (e.g. "
            f"{unknown[0]!r}); refusing to delete rows of files it did not plan on."
        )
    return {path: np.unique(np.asarray(rows, dtype=np.uint64)) for path, rows in matched.items() if len(rows)}


def metadata_plan(
    snapshot: Snapshot, predicate: Predicate | None, removed: pa.Table, started: float
) -> DeletePlan:
    """Remove whole files, reading none: every row, or the partitions a predicate selects."""
    deleted = _logical_records(removed)
    metrics = _metrics(
        removed_files=removed.num_rows,
        deleted_rows=deleted or 0,
        removed_bytes=int(pc.sum(removed.column("size")).as_py() or 0),
        dvs_removed=int(pc.sum(removed.column("deletion_vector").is_valid()).as_py() or 0),
        timing=Timer(started, time.monotonic()).metrics(rewrote=False),
    )
    removes = tuple(_removes(removed))
    read = ReadSet.matching(predicate, removed.column("path").to_pylist())
    plan = _commit_plan(snapshot, predicate, removes, (), (), read, metrics, Operation.DELETE)
    return DeletePlan(snapshot, _text(predicate), METADATA, plan, metrics, (), deleted)


def _logical_records(files: pa.Table) -> int | None:
    """The rows the files hold (``numRecords`` less each deletion vector's cardinality), or None
    when a file's statistics lack ``numRecords``."""
    if files.num_rows == 0:
        return 0
    records = record_counts(files.column("stats"))
    if records.null_count:
        return None
    dvs = files.column("deletion_vector")
    cardinality = pc.fill_null(pc.struct_field(dvs, "cardinality"), 0)
    return int(pc.sum(records).as_py() or 0) - int(pc.sum(cardinality).as_py() or 0)


def _removes(files: pa.Table, now: int | None = None) -> list[RemoveFile]:
    """Tombstones of active files (from :meth:`Snapshot.files`) with their statistics, as Delta's
    ``removeWithTimestamp`` writes them (change-data readers need every field)."""
    return remove_actions(files, now if now is not None else int(time.time() * 1000), stats=True)


def _text(predicate: Predicate | None) -> str | None:
    return predicate.text if predicate is not None else None


def _commit_plan(
    snapshot: Snapshot,
    predicate: Predicate | None,
    removes: Sequence[RemoveFile],
    adds: Sequence[AddFile],
    cdc: Sequence[AddCDCFile],
    read: ReadSet,
    metrics: Mapping[str, int],
    kind: Operation,
) -> CommitPlan | None:
    if not removes and not adds:
        return None
    return CommitPlan(
        DELETE,
        {"predicate": [predicate.text] if predicate is not None else []},
        metrics,
        removes=tuple(removes),
        adds=tuple(adds),
        cdc=tuple(cdc),
        read=read,
        kind=kind,
    )


def _metrics(
    *,
    timing: Mapping[str, int],
    removed_files: int = 0,
    added_files: int = 0,
    deleted_rows: int = 0,
    copied_rows: int = 0,
    removed_bytes: int = 0,
    added_bytes: int = 0,
    change_files: int = 0,
    dvs_added: int = 0,
    dvs_removed: int = 0,
    dvs_updated: int = 0,
) -> dict[str, int]:
    """Delta's DELETE ``operationMetrics`` (``DeltaOperations.Delete``): a vector that replaced
    another counts as added and removed too; the row counts and ``numAddedFiles`` are left out when
    files were removed but no row was counted (whole files without row counts)."""
    metrics = {
        "numAddedFiles": added_files,
        "numRemovedFiles": removed_files,
        "numDeletionVectorsAdded": dvs_added + dvs_updated,
        "numDeletionVectorsRemoved": dvs_removed + dvs_updated,
        "numDeletionVectorsUpdated": dvs_updated,
        "numAddedChangeFiles": change_files,
        "numDeletedRows": deleted_rows,
        "numCopiedRows": copied_rows,
        "numRemovedBytes": removed_bytes,
        "numAddedBytes": added_bytes,
        **timing,
    }
    if deleted_rows == 0 and removed_files != 0:
        for name in ("numDeletedRows", "numCopiedRows", "numAddedFiles"):
            del metrics[name]
    return metrics


# --- deletion vectors ---------------------------------------------------------------------------


@dataclass
class _Touched:
    """A candidate file with rows to delete: its row in the candidates, the rows its deletion
    vector already marks and the rows newly deleted."""

    index: int
    old: npt.NDArray[np.uint64]
    new: npt.NDArray[np.uint64]


def _touched(scan: Scan) -> list[_Touched]:
    """The files whose matching rows are not all deleted already (Delta's ``isUnchanged``)."""
    index = {path: i for i, path in enumerate(scan.candidates.paths)}
    dvs = scan.candidates.files.column("deletion_vector")
    touched = []
    for path, rows in scan.matched.items():
        i = index[path]
        old = scan.reader.deleted_rows(dvs[i].as_py())
        new = np.setdiff1d(rows, old, assume_unique=True).astype(np.uint64)
        if new.size:
            touched.append(_Touched(i, old, new))
    return sorted(touched, key=lambda t: t.index)


def deletion_vector_plan(scan: Scan) -> DeletePlan:
    """Mark the matching rows in each file's deletion vector (one new DV file for the commit)."""
    snapshot, predicate, candidates, timer = scan.snapshot, scan.predicate, scan.candidates, scan.timer
    touched = _touched(scan)
    files = candidates.files.take(pa.array([t.index for t in touched], pa.int64()))
    stats = _physical_stats(snapshot, files)
    rows = files.to_pylist()
    full: list[tuple[int, npt.NDArray[np.uint64]]] = []
    partial: list[tuple[int, npt.NDArray[np.uint64]]] = []
    for position, (item, row) in enumerate(zip(touched, rows, strict=True)):
        records = _num_records(stats[position])
        union = np.union1d(item.old, item.new)
        if union.size and int(union[-1]) >= records:
            raise DeltaError(
                f"Row {int(union[-1])} of {row['path']} was matched for deletion, but the file holds "
                f"{records} rows; refusing to write a deletion vector beyond it."
            )
        (full if union.size == records else partial).append((position, union))
    written: list[str] = []
    now = int(time.time() * 1000)
    try:
        descriptors = _write_deletion_vectors(snapshot, [union for _, union in partial], written)
    except BaseException:
        discard_written(snapshot, written, "writing its deletion vectors failed")
        raise
    removes = _removes(files.take(pa.array([p for p, _ in full], pa.int64())), now)
    adds = []
    dvs = {"added": 0, "updated": 0}
    for (position, _), descriptor in zip(partial, descriptors, strict=True):
        row = rows[position]
        removes += _removes(files.slice(position, 1), now)
        adds.append(_with_deletion_vector(row, descriptor, stats[position]))
        dvs["updated" if row["deletion_vector"] is not None else "added"] += 1
    metrics = _metrics(
        removed_files=len(full),
        deleted_rows=sum(int(t.new.size) for t in touched),
        dvs_added=dvs["added"],
        dvs_updated=dvs["updated"],
        dvs_removed=sum(1 for p, _ in full if rows[p]["deletion_vector"] is not None),
        timing=timer.metrics(rewrote=False),
    )
    read = ReadSet.matching(predicate, candidates.paths)
    plan = _commit_plan(snapshot, predicate, removes, adds, (), read, metrics, Operation.DELETE)
    deleted = metrics.get("numDeletedRows", 0)
    return DeletePlan(
        snapshot,
        predicate.text,
        DELETION_VECTORS,
        plan,
        metrics,
        tuple(written),
        deleted,
        candidates.files.num_rows,
    )


def _physical_stats(snapshot: Snapshot, files: pa.Table) -> list[dict[str, Any]]:
    """Each file's statistics (decimals exact); read from its footer where the log has no
    ``numRecords`` (a deletion vector's file must have them, as Delta computes them)."""
    parsed: list[dict[str, Any]] = []
    missing = []
    for position, text in enumerate(files.column("stats").to_pylist()):
        stats = json.loads(text, parse_float=Decimal) if text else {}
        if not isinstance(stats, dict) or not isinstance(stats.get("numRecords"), int):
            missing.append(position)
            stats = {}
        parsed.append(stats)
    if missing:
        storage = snapshot.storage
        reader = FileReader(snapshot)
        paths = files.column("path").take(pa.array(missing, pa.int64())).to_pylist()
        footers = read_footers(
            storage, [storage.path.decode(p) for p in paths], stats_columns=reader.stats_columns()
        )
        for position, footer in zip(missing, footers, strict=True):
            parsed[position] = json.loads(footer.stats, parse_float=Decimal)
    return parsed


def _num_records(stats: Mapping[str, Any]) -> int:
    return int(stats["numRecords"])


def _write_deletion_vectors(
    snapshot: Snapshot, row_sets: Sequence[npt.NDArray[np.uint64]], written: list[str]
) -> list[dict[str, Any]]:
    """Write the vectors to one ``deletion_vector_<uuid>.bin`` under the root; their descriptors."""
    if not row_sets:
        return []
    bitmaps = [serialize_deletion_vector(rows) for rows in row_sets]
    file_id = uuid.uuid4()
    storage = snapshot.storage
    path = storage.join(f"deletion_vector_{file_id}.bin")
    written.append(path)
    storage.put(path, deletion_vector_file_bytes(bitmaps))
    descriptors = []
    offset = 1  # after the format version byte
    for rows, bitmap in zip(row_sets, bitmaps, strict=True):
        descriptors.append(
            {
                "storageType": "u",
                "pathOrInlineDv": encode_deletion_vector_file_id(file_id),
                "offset": offset,
                "sizeInBytes": len(bitmap),
                "cardinality": int(rows.size),
            }
        )
        offset += 4 + len(bitmap) + 4  # size, bitmap, checksum
    return descriptors


def _with_deletion_vector(
    row: Mapping[str, Any], descriptor: dict[str, Any], stats: Mapping[str, Any]
) -> AddFile:
    """The file added again with its new vector: every other field kept (Delta's ``removeRows``),
    its statistics made wide (Delta's ``updateStatsToWideBounds``)."""
    old = row["deletion_vector"]
    return AddFile(
        path=row["path"],
        partition_values=dict(row["partition_values"] or {}),
        size=row["size"],
        modification_time=row["modification_time"],
        data_change=True,
        stats=_wide_bounds(stats, int(old["cardinality"] or 0) if old else 0),
        tags=dict(row["tags"]) if row.get("tags") else None,
        deletion_vector=descriptor,
        base_row_id=row.get("base_row_id"),
        default_row_commit_version=row.get("default_row_commit_version"),
        clustering_provider=row.get("clustering_provider"),
    )


def _wide_bounds(stats: Mapping[str, Any], old_cardinality: int) -> str:
    """``tightBounds: false``; where the bounds were tight, a column all of whose rows left were
    null gets the physical row count as its null count (Delta's ``updateStatsToWideBounds``)."""
    out = dict(stats)
    records = out.get("numRecords")
    nulls = out.get("nullCount")
    if out.get("tightBounds") is True and isinstance(records, int) and isinstance(nulls, dict):
        out["nullCount"] = _all_null_counts(nulls, records - old_cardinality, records)
    out["tightBounds"] = False
    return stats_json(out)


def _all_null_counts(counts: Mapping[str, Any], logical: int, physical: int) -> dict[str, Any]:
    return {
        name: _all_null_counts(value, logical, physical)
        if isinstance(value, dict)
        else (physical if value == logical else value)
        for name, value in counts.items()
    }


# --- copy-on-write --------------------------------------------------------------------------


def copy_on_write_plan(scan: Scan) -> DeletePlan:
    """Rewrite each file holding a matching row without it (and record the deleted rows)."""
    snapshot, predicate, candidates, timer = scan.snapshot, scan.predicate, scan.candidates, scan.timer
    touched = _touched(scan)
    chosen = candidates.take([t.index for t in touched])
    written: list[str] = []
    try:
        rewrite = _rewrite(snapshot, chosen, touched, scan.reader, written)
    except BaseException:
        discard_written(snapshot, written, "rewriting its files failed")
        raise
    adds, cdc, copied = rewrite
    removed = chosen.files
    metrics = _metrics(
        removed_files=removed.num_rows,
        added_files=len(adds),
        deleted_rows=sum(int(t.new.size) for t in touched),
        copied_rows=copied,
        removed_bytes=int(pc.sum(removed.column("size")).as_py() or 0),
        added_bytes=sum(a.size for a in adds),
        change_files=len(cdc),
        dvs_removed=int(pc.sum(removed.column("deletion_vector").is_valid()).as_py() or 0),
        timing=timer.metrics(rewrote=True),
    )
    read = ReadSet.matching(predicate, candidates.paths)
    plan = _commit_plan(
        snapshot, predicate, _removes(removed), adds, cdc, read, metrics, Operation.COPY_ON_WRITE_DELETE
    )
    deleted = metrics.get("numDeletedRows", 0)
    return DeletePlan(
        snapshot,
        predicate.text,
        COPY_ON_WRITE,
        plan,
        metrics,
        tuple(written),
        deleted,
        candidates.files.num_rows,
    )


@dataclass(frozen=True)
class _Rewritten:
    """What the rewrite of one file wrote: its replacement (none when no row is left), its change
    data (when the feed is on) and the rows it copied."""

    add: AddFile | None
    change: AddCDCFile | None
    copied: int


def _rewrite(
    snapshot: Snapshot,
    chosen: Candidates,
    touched: Sequence[_Touched],
    reader: FileReader,
    written: list[str],
) -> tuple[list[AddFile], list[AddCDCFile], int]:
    """Each touched file's remaining rows as a new file beside it, and its deleted rows as change
    data when the feed is on (files rewritten in the reading threads): the adds, the cdc actions and
    the rows copied. Every file written is in ``written`` as soon as it is (to discard on failure)."""
    record_changes = change_data_feed_enabled(snapshot.metadata)
    rows_of = chosen.files.select(["path", "partition_values"]).to_pylist()
    now = int(time.time() * 1000)

    def rewrite(position: int, rows: pa.Table) -> _Rewritten:
        item, file = touched[position], rows_of[position]
        values = dict(file["partition_values"] or {})
        count = rows.num_rows
        gone = np.zeros(count, dtype=bool)
        gone[_within(item.new, count)] = True
        keep = ~gone
        keep[_within(item.old, count)] = False
        add = change = None
        if keep.any():
            add, path = reader.write_data(
                rows.filter(pa.array(keep)), _directory(snapshot, file), values, now
            )
            written.append(path)
        if record_changes:
            change, path = reader.write_changes(rows.filter(pa.array(gone)), values, position)
            written.append(path)
        return _Rewritten(add, change, int(keep.sum()))

    adds: list[AddFile] = []
    cdc: list[AddCDCFile] = []
    copied = 0
    columns = [f.name for f in reader.data_fields]
    for number, done in enumerate(reader.map(chosen, columns, rewrite), 1):
        adds += [done.add] if done.add is not None else []
        cdc += [done.change] if done.change is not None else []
        copied += done.copied
        if number % 100 == 0:
            log.info("Rewrote %d of %d file(s) of %s.", number, len(touched), snapshot.storage.root_uri)
    return adds, cdc, copied


def _within(rows: npt.NDArray[np.uint64], count: int) -> npt.NDArray[np.intp]:
    """Row positions of a file with ``count`` rows (a position beyond it is refused)."""
    if rows.size and int(rows[-1]) >= count:
        raise DeltaError(f"Row {int(rows[-1])} was marked for deletion in a file of {count} rows.")
    return rows.astype(np.intp)


def _directory(snapshot: Snapshot, file: Mapping[str, Any]) -> str:
    """Where a file's rewrite goes: beside it, or in its partition's directory when it lies
    elsewhere (an absolute path)."""
    path = str(file["path"])
    if not has_scheme(path) and not path.startswith("/"):
        return posixpath.dirname(unquote(path))
    keys = [physical_name(snapshot.schema.field(c)) for c in snapshot.partition_columns]
    return partition_path(dict(file["partition_values"] or {}), keys)


def discard_written(snapshot: Snapshot, paths: Sequence[str], why: str) -> None:
    if paths:
        discard_uncommitted(snapshot.storage, paths, reason=f"the DELETE's {why}")
