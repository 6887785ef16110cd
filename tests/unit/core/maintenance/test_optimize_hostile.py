"""OPTIMIZE never deletes outside the root or a live file, and leaves nothing of a failed attempt.

Per class of hostile rewriter output (``..``, absolute paths, other tables, other schemes, active
files, ``_delta_log``, hidden names) and per real fault (an input removed from storage midway, a
concurrent run with the same ``app_id``/``app_version``): the table's version, active files and
``_delta_log`` listing, and every file outside the root, are unchanged; the files the attempt
wrote are gone.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import DeltaError, InvalidPathError, OptimizeRewriteError
from airflow_delta_provider.core.maintenance import optimize as core_optimize
from airflow_delta_provider.core.maintenance.optimize import rewrite_locally

if TYPE_CHECKING:
    from collections.abc import Callable

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())])


def write_file(path: Path, ids: list[int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), path)


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    """``lake/t``: a table of two partitions, three small files each; beside it another table's
    file, a file in a sibling directory sharing the root's prefix, and a loose file."""
    root = tmp_path / "lake" / "t"
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"])
    for n, partition in enumerate(["a", "a", "a", "b", "b", "b"]):
        write_file(root / f"p={partition}/f{n}.parquet", [n])
        table.commit_files([f"p={partition}/f{n}.parquet"])
    write_file(tmp_path / "lake" / "outside.parquet", [100])
    write_file(tmp_path / "lake" / "other" / "part-0.parquet", [101])
    write_file(tmp_path / "lake" / "t-copy" / "part-0.parquet", [102])
    write_file(root / "p=a" / "with space.parquet", [6])
    table.commit_files(["p=a/with space.parquet"])  # in the log as p=a/with%20space.parquet
    write_file(root / "_tmp" / "part-0.parquet", [103])
    return root


def state(root: Path) -> dict[str, Any]:
    """Everything that must not change: the table, its log, and every file with its content."""
    table = DeltaTable(str(root))
    files = {
        str(p.relative_to(root.parent)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.parent.rglob("*")
        if p.is_file()
    }
    return {
        "version": table.version(),
        "active": sorted(table.snapshot().files().column("path").to_pylist()),
        "log": sorted(os.listdir(root / "_delta_log")),
        "files": files,
    }


def reporting(extra: Callable[[Path], str]) -> Callable[[Any], dict[int, list[str]]]:
    """A rewriter that really rewrites every bin, then also reports ``extra(root)`` for bin 0."""

    def rewrite(plan: Any) -> dict[int, list[str]]:
        written = rewrite_locally(plan)
        written[0] = [*written[0], extra(Path(plan.snapshot.storage.root))]
        return written

    return rewrite


HOSTILE: dict[str, Callable[[Path], str]] = {
    "dot-dot": lambda root: "../outside.parquet",
    "dot-dot inside a partition": lambda root: "p=a/../../other/part-0.parquet",
    "absolute path outside": lambda root: str(root.parent / "outside.parquet"),
    "other table, absolute": lambda root: str(root.parent / "other" / "part-0.parquet"),
    "other table, file URI": lambda root: f"file://{root.parent}/other/part-0.parquet",
    "sibling sharing the root's prefix": lambda root: f"{root}-copy/part-0.parquet",
    "another scheme": lambda root: f"s3://bucket{root}/p=a/f0.parquet",
    "memory scheme": lambda root: "memory:///t/p=a/f0.parquet",
    "active file": lambda root: "p=a/f0.parquet",
    "active file as a URI": lambda root: f"file://{root}/p=b/f3.parquet",
    "active file the log holds URL-encoded": lambda root: "p=a/with space.parquet",
    "commit file": lambda root: "_delta_log/00000000000000000000.json",
    "log directory": lambda root: "_delta_log",
    "hidden directory": lambda root: "_tmp/part-0.parquet",
    "empty segment": lambda root: "p=a//f0.parquet",
}


@pytest.mark.parametrize("extra", list(HOSTILE.values()), ids=list(HOSTILE))
def test_a_hostile_output_is_refused_naming_it_and_nothing_but_the_attempts_files_is_deleted(
    lake: Path, extra: Callable[[Path], str]
) -> None:
    before = state(lake)
    hostile = extra(lake)

    with pytest.raises(InvalidPathError) as info:
        DeltaTable(str(lake)).optimize(target_file_size="1mb", rewrite=reporting(extra))

    assert repr(hostile) in str(info.value) or repr(hostile.rstrip("/")) in str(info.value)
    assert "Nothing was committed" in str(info.value)
    # The table, its log and every file (in it and beside it) as they were: the files the rewrite
    # wrote are deleted, the refused path is not.
    assert state(lake) == before


@pytest.mark.parametrize("report", ["p=a/f0.parquet", "p=a/f0.parquet|p=a/f1.parquet"])
def test_a_rewrite_reporting_only_input_files_loses_no_row(lake: Path, report: str) -> None:
    """Committing an input as the bin's output would remove the other inputs' rows; deleting it
    on a refused commit would break the table."""
    before = state(lake)
    with pytest.raises(
        InvalidPathError, match=r"'p=a/f0\.parquet' is an active file of the table at version 7"
    ):
        DeltaTable(str(lake)).optimize(target_file_size="1mb", rewrite=lambda plan: {0: report.split("|")})
    assert state(lake) == before


@pytest.mark.parametrize(
    ("written", "message"),
    [
        ({7: ["p=a/x.parquet"]}, "bin 7"),
        ({0: [None]}, "None"),
        ([["p=a/x.parquet"]], "not a mapping"),
    ],
    ids=["unknown bin", "not a path", "not a mapping"],
)
def test_a_malformed_report_is_refused_and_the_table_is_unchanged(
    lake: Path, written: Any, message: str
) -> None:
    before = state(lake)
    with pytest.raises(InvalidPathError, match=message):
        DeltaTable(str(lake)).optimize(target_file_size="1mb", rewrite=lambda plan: written)
    assert state(lake) == before


def test_an_input_removed_midway_fails_clearly_and_leaves_no_output(
    lake: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = state(lake)
    removed = lake / "p=b" / "f4.parquet"
    written_before_failure: list[str] = []
    read_bin = core_optimize.read_bin

    def read_bin_while_a_file_disappears(plan: Any, bin_: Any) -> Any:
        # Bin 0 (p=a) is rewritten first; an input of bin 1 is removed from storage before it is read.
        if bin_.index == 1:
            written_before_failure.extend(
                str(p.relative_to(lake)) for p in lake.rglob("part-00000-*.parquet")
            )
            removed.unlink()
        return read_bin(plan, bin_)

    monkeypatch.setattr(core_optimize, "read_bin", read_bin_while_a_file_disappears)

    with pytest.raises(OptimizeRewriteError) as info:
        DeltaTable(str(lake)).optimize(target_file_size="1mb")

    message = str(info.value)
    assert "FileNotFoundError" in message and "missing from storage" in message
    assert "Nothing was committed" in message and "RESTORE" in message
    assert isinstance(info.value.__cause__, FileNotFoundError)
    assert len(written_before_failure) == 1  # bin 0's output existed when bin 1 failed ...
    after = state(lake)
    # ... and is gone; nothing else changed but the file removed from under the table.
    before["files"].pop(str(removed.relative_to(lake.parent)))
    assert after == before


def test_the_loser_of_two_runs_with_the_same_app_id_deletes_its_files_and_keeps_the_winners(
    lake: Path,
) -> None:
    app = {"app_id": "airflow/nightly/optimize/run", "app_version": 3}
    before = state(lake)
    ours: list[str] = []

    def rewrite_while_the_other_run_commits(plan: Any) -> dict[int, list[str]]:
        written = rewrite_locally(plan)
        ours.extend(p for paths in written.values() for p in paths)
        winner = DeltaTable(str(lake)).optimize(target_file_size="1mb", **app)
        assert winner.committed
        return written

    result = DeltaTable(str(lake)).optimize(
        target_file_size="1mb", rewrite=rewrite_while_the_other_run_commits, **app
    )

    assert (result.committed, result.reason) == (False, "already_committed")
    assert result.commit is not None and result.commit.version == before["version"] + 1
    after = state(lake)
    assert after["version"] == before["version"] + 1
    ids = DeltaTable(str(lake)).snapshot().to_pyarrow_table().column("id").to_pylist()
    assert sorted(ids) == list(range(7))
    assert len(ours) == 2 and not any((lake / p).exists() for p in ours)  # the loser's files: gone
    winners = [p for p in after["active"] if p.count("part-")]
    assert len(winners) == 2 and all((lake / p).exists() for p in winners)  # the winner's: live
    # Every other file is as it was: the winner's outputs and commit are all that is new.
    new = sorted(set(after["files"]) - set(before["files"]))
    assert new == sorted(
        ["t/_delta_log/00000000000000000008.crc", "t/_delta_log/00000000000000000008.json"]
        + [f"t/{p}" for p in winners]
    )
    assert all(after["files"][k] == v for k, v in before["files"].items())


def test_a_failed_rewrite_of_a_foreign_engine_becomes_a_delta_error(lake: Path) -> None:
    before = state(lake)

    def broken(plan: Any) -> dict[int, list[str]]:
        raise RuntimeError("executor lost\n  at somewhere deep in the engine")

    with pytest.raises(
        OptimizeRewriteError, match=r"RuntimeError: executor lost\. Nothing was committed"
    ) as info:
        DeltaTable(str(lake)).optimize(target_file_size="1mb", rewrite=broken)
    assert isinstance(info.value, DeltaError) and "somewhere deep" not in str(info.value)
    assert "Fix the cause and run OPTIMIZE again" in str(info.value)
    assert state(lake) == before


def lossy(plan: Any) -> dict[int, list[str]]:
    """A rewriter that writes bin 0 without its first row, and nothing for bin 1."""
    storage = plan.snapshot.storage
    rows = core_optimize.read_bin(plan, plan.bins[0]).slice(1)
    relative = f"p=a/{core_optimize.output_name()}"
    (Path(storage.root) / relative).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, Path(storage.root) / relative)
    return {0: [relative], 1: []}


@pytest.mark.parametrize(
    ("rewrite", "message"),
    [
        (lossy, r"bin 0 \(partition \{'p': 'a'\}\): its files hold 3 row\(s\), the 4 input file\(s\) 4"),
        (lambda plan: {}, r"bin 0 .*hold 0 row\(s\).* would lose rows"),
    ],
    ids=["rows dropped", "bins left out"],
)
def test_a_rewrite_that_loses_rows_is_refused_and_its_files_deleted(
    lake: Path, rewrite: Any, message: str
) -> None:
    before = state(lake)
    with pytest.raises(OptimizeRewriteError, match=message):
        DeltaTable(str(lake)).optimize(target_file_size="1mb", rewrite=rewrite)
    assert state(lake) == before
