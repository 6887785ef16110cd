"""What an OPTIMIZE (or REORG PURGE) rewrite may report, and what its failure says.

A rewrite engine (the pyarrow one, Spark, a caller's own) reports the files it wrote per bin; the
commit may only hold new files under the root that carry exactly the bins' rows, and a clean-up
after a failure may only delete those (:mod:`airflow_delta_provider.core.maintenance.vacuum.discard`). The
checks are here, apart from the plan and the commit (:mod:`airflow_delta_provider.core.maintenance.optimize`):
:func:`sort_outputs` / :func:`check_outputs` for the paths, :func:`check_row_counts` for the rows,
and :func:`rewrite_failure` for the error of a rewrite that failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import InvalidPathError, OptimizeRewriteError
from airflow_delta_provider.core.transaction.datafiles import relative_path

if TYPE_CHECKING:
    from airflow_delta_provider.core.expressions.stats import FooterInfo
    from airflow_delta_provider.core.log.snapshot import Snapshot

__all__ = [
    "check_outputs",
    "check_row_counts",
    "excerpt",
    "refusal",
    "rewrite_failure",
    "rows_per_bin",
    "sort_outputs",
]


class Bin(Protocol):
    """What the checks read of a bin (:class:`airflow_delta_provider.core.maintenance.optimize.Bin`)."""

    @property
    def index(self) -> int: ...

    @property
    def partition_values(self) -> dict[str, str | None]: ...

    @property
    def files(self) -> pa.Table: ...


class OptimizePlan(Protocol):
    """What the checks read of a plan (:class:`~.optimize.OptimizePlan`)."""

    @property
    def snapshot(self) -> Snapshot: ...

    @property
    def bins(self) -> Sequence[Bin]: ...

    @property
    def num_files(self) -> int: ...

    @property
    def operation(self) -> str: ...


def sort_outputs(
    plan: OptimizePlan, written: Mapping[int, Sequence[str]]
) -> tuple[dict[int, list[str]], list[str]]:
    """The files a rewrite reports, relative to the root, per bin; and why each one it may not
    commit was refused (none refused: all may be committed).

    A reported path may be committed, and so discarded when the commit fails, when it is a new file
    under the root: not outside it (``..``, an absolute path or a URI elsewhere, another scheme),
    not hidden (``_``/``.`` names, ``_delta_log``), not an active file of the planned snapshot, not
    reported twice, and for a bin of the plan.
    """
    storage = plan.snapshot.storage
    partition_columns = list(plan.snapshot.partition_columns)
    bins = {b.index for b in plan.bins}
    outputs: dict[int, list[str]] = {}
    refused: list[str] = []
    seen: dict[str, str] = {}  # relative -> as reported
    for index, paths in written.items():
        if index not in bins:
            refused.append(f"files were reported for bin {index!r}, which the plan does not hold")
        for path in [paths] if isinstance(paths, str) else paths:
            if not isinstance(path, str):
                refused.append(f"{path!r} (for bin {index!r}) is not a path")
                continue
            try:
                relative = relative_path(storage, path, partition_columns)
            except InvalidPathError as err:
                refused.append(str(err).rstrip("."))
                continue
            if relative in seen:
                refused.append(f"{path!r} is reported twice")
                continue
            seen[relative] = path
            outputs.setdefault(index, []).append(relative)
    for relative in _active_files_among(plan.snapshot, sorted(seen)):
        refused.append(
            f"{seen[relative]!r} is an active file of the table at version {plan.snapshot.version}, not a "
            f"new file"
        )
        for paths in outputs.values():
            if relative in paths:
                paths.remove(relative)
    return outputs, refused


def check_outputs(plan: OptimizePlan, written: Mapping[int, Sequence[str]]) -> dict[int, list[str]]:
    """The files a rewrite reports, relative to the root, per bin (see :func:`sort_outputs`).

    :raises InvalidPathError: naming each reported path that may not be committed, and why.
    """
    if not isinstance(written, Mapping):
        raise InvalidPathError(
            f"The rewrite of an {plan.operation} of {plan.snapshot.storage.root_uri} returned "
            f"{type(written).__name__}, not a mapping of bin index to the files written for it."
        )
    outputs, refused = sort_outputs(plan, written)
    if refused:
        raise refusal(plan, refused)
    return outputs


def refusal(plan: OptimizePlan, refused: Sequence[str]) -> InvalidPathError:
    """The error naming what :func:`sort_outputs` refused."""
    more = f" (and {len(refused) - 1} more: {'; '.join(refused[1:4])})" if len(refused) > 1 else ""
    return InvalidPathError(
        f"{plan.operation} of {plan.snapshot.storage.root_uri} refuses what its rewrite reported: "
        f"{refused[0]}{more}. Nothing was committed, and no refused path was touched. A rewrite must "
        f"return, per bin of the plan, the new files it wrote under the table root, outside hidden "
        f"directories."
    )


def _active_files_among(snapshot: Snapshot, relatives: Sequence[str]) -> list[str]:
    """Those of ``relatives`` (URL-decoded, relative to the root) that are active files of ``snapshot``."""
    if not relatives:
        return []
    paths = snapshot.files().column("path")
    wanted = set(relatives)
    value_set = pa.array(sorted(wanted), pa.string())
    found = {p for p in paths.filter(pc.is_in(paths, value_set=value_set)).to_pylist() if p in wanted}
    # Paths the log holds URL-encoded, absolute or as URIs: compared in their canonical form.
    unusual = paths.filter(pc.match_substring_regex(paths, r"^/|[%:]"))
    canonical = snapshot.storage.path.canonical
    found.update(c for c in map(canonical, unusual.to_pylist()) if c in wanted)
    return sorted(found)


def rows_per_bin(bin_of: Sequence[Bin], footers: Sequence[FooterInfo]) -> dict[int, int]:
    """The rows of the written files, per bin (``bin_of[i]`` holds ``footers[i]``'s file)."""
    rows: dict[int, int] = {}
    for bin_, footer in zip(bin_of, footers, strict=True):
        rows[bin_.index] = rows.get(bin_.index, 0) + footer.num_records
    return rows


def check_row_counts(plan: OptimizePlan, written_rows: Mapping[int, int]) -> None:
    """Refuse a rewrite whose files for a bin hold other than the bin's live rows (its inputs'
    ``numRecords`` less their deletion vectors' cardinality): committing it would lose or duplicate
    rows. A bin whose inputs lack ``numRecords`` is not checked.

    :raises OptimizeRewriteError: naming the bin, both counts and its partition.
    """
    for bin_ in plan.bins:
        expected = _live_rows(bin_)
        written = written_rows.get(bin_.index, 0)
        if expected is not None and written != expected:
            raise OptimizeRewriteError(
                f"{plan.operation} of {plan.snapshot.storage.root_uri} refuses the rewrite of bin "
                f"{bin_.index} (partition {bin_.partition_values or 'none'}): its files hold {written} "
                f"row(s), the {bin_.files.num_rows} input file(s) {expected} (deletion vectors applied). "
                f"Committing it would {'lose' if written < expected else 'duplicate'} rows. Nothing was "
                f"committed."
            )


def _live_rows(bin_: Bin) -> int | None:
    """The rows of a bin's inputs less those their deletion vectors delete; None when a file's
    statistics do not say."""
    total = 0
    files = bin_.files
    for stats, dv in zip(
        files.column("stats").to_pylist(), files.column("deletion_vector").to_pylist(), strict=True
    ):
        try:
            parsed = json.loads(stats) if stats else None
        except ValueError:
            return None
        records = parsed.get("numRecords") if isinstance(parsed, dict) else None
        if not isinstance(records, int) or isinstance(records, bool):
            return None
        total += records - int((dv or {}).get("cardinality") or 0)
    return total


#: Words of an engine's error that say a file it had to read does not exist (Python, Hadoop, Spark).
_MISSING_FILE_MARKERS = ("FileNotFound", "FILE_NOT_EXIST", "No such file", "does not exist")


def rewrite_failure(plan: OptimizePlan, err: BaseException) -> str:
    """What happened to a failed rewrite, and what to do."""
    snapshot = plan.snapshot
    message = (
        f"{plan.operation} of {snapshot.storage.root_uri} failed while rewriting {plan.num_files} file(s) in "
        f"{len(plan.bins)} bin(s) planned at version {snapshot.version}: {excerpt(err)}. Nothing was "
        f"committed and the files this attempt wrote were removed: the table is unchanged."
    )
    if isinstance(err, FileNotFoundError) or any(m in str(err) for m in _MISSING_FILE_MARKERS):
        return message + (
            " A file the plan read is missing from storage: a concurrent commit removed it and VACUUM "
            f"(with a short retention) deleted it, or it was deleted by hand. Run {plan.operation} again (it "
            "plans on the latest version); if the latest version still lists a missing file, the table "
            "needs repair: put the file back, or RESTORE a version whose files all exist."
        )
    return message + f" Fix the cause and run {plan.operation} again."


def excerpt(err: BaseException) -> str:
    """An error's type and first line (an engine's errors run to pages of stack trace)."""
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    first = lines[0] if lines else ""
    return f"{type(err).__name__}: {first[:500]}" if first else type(err).__name__
