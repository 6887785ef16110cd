"""VACUUM against delta-rs: the same table and retention give the same candidates, and delta-rs reads
every row of the latest version after the core's real VACUUM.

Deliberate differences (asserted below so that they stay documented):

- **Directories.** The core also lists (and deletes) empty directories, as Delta does; delta-rs
  never removes directories. Only files are compared.
- **Hidden names and ``_``-prefixed partition columns.** Delta hides ``_x``/``.x`` names unless
  they start with ``<partitionCol>=``. delta-rs's source reads as if any name starting with a
  partition column's name were un-hidden (no ``=``); delta-rs 1.6.6 in fact keeps ``_pstats/``
  beside a ``_p`` partition column, as Delta does (checked below).
- **Hidden names below the top level.** Delta applies the rule to every path component, so
  ``p=1/.part-0.parquet.crc`` or ``p=1/_committed_123`` (Spark/Hadoop side files) are never
  deleted; delta-rs tests only the start of the whole relative path and deletes them.
"""

from __future__ import annotations

import os
import shutil
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import PostCommitHookProperties, write_deltalake

from airflow_delta_provider.core import DeltaTable

if TYPE_CHECKING:
    from pathlib import Path

NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
HOUR = 3600.0
NESTED_HIDDEN = "p=plain/.part.crc"


def set_age(path: Path, seconds: float) -> None:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp))


def build(root: Path, partition: str = "p") -> dict[str, Any]:
    """A partitioned delta-rs table with history, special-character partition values and every kind
    of stray entry VACUUM meets in practice. Returns the expected rows of the latest version."""
    values = ["a b", "x/y", "100%", "plain"]
    for version in range(6):
        data = pa.table(
            {
                "id": pa.array([version * 10 + i for i in range(len(values))], pa.int64()),
                partition: values,
            }
        )
        write_deltalake(
            str(root),
            data,
            partition_by=[partition],
            mode="overwrite" if version == 3 else "append",
            post_commithook_properties=NO_HOOKS,
        )
    # Every data file written so far is two hours old.
    for path in root.rglob("*.parquet"):
        set_age(path, 2 * HOUR)
    strays = {
        "crashed-job/part-0.parquet": 2 * HOUR,  # old and untracked: goes
        f"{partition}=plain/orphan.parquet": 2 * HOUR,
        "_delta_index/idx.bin": 2 * HOUR,
        "_change_data/cdc.parquet": 2 * HOUR,
        "in-flight/part-0.parquet": 60.0,  # a writer's uncommitted output, one minute old
        "_SUCCESS": 2 * HOUR,
        "_temporary/0/part.parquet": 2 * HOUR,
        ".hidden.parquet": 2 * HOUR,
        f"{partition}=plain/.part.crc": 2 * HOUR,
    }
    for relative, age in strays.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"stray")
        set_age(path, age)
    (root / "empty" / "nested").mkdir(parents=True)
    rs = RsDeltaTable(str(root))
    return {"version": rs.version(), "rows": sorted(rs.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])}


def core_files(result: Any) -> set[str]:
    # The core lists URIs (a literal '%' of a Hive-escaped directory as '%25'): decoded, as stored.
    prefix = result.table_uri.rstrip("/") + "/"
    return {unquote(f.removeprefix(prefix)) for f in result.files}


def rs_files(root: Path, hours: float) -> set[str]:
    listed = RsDeltaTable(str(root)).vacuum(
        retention_hours=hours, dry_run=True, enforce_retention_duration=False, full=True
    )
    # delta-rs gives paths relative to the root, URL-decoded as on storage.
    return {p.removeprefix(str(root)).lstrip("/") for p in listed}


@pytest.mark.parametrize("hours", [0, 1], ids=["retain-0h", "retain-1h"])
def test_dry_run_lists_the_same_files_as_delta_rs_full(tmp_path: Path, hours: int) -> None:
    root = tmp_path / "table"
    build(root)
    core = DeltaTable(str(root)).vacuum(
        retention=f"{hours} hours", enforce_retention_duration=False, dry_run=True
    )
    rs = rs_files(root, hours)
    # Difference 3: delta-rs also deletes hidden files inside partition directories.
    assert rs - core_files(core) == {NESTED_HIDDEN}
    assert core_files(core) == rs - {NESTED_HIDDEN}
    assert "crashed-job/part-0.parquet" in rs and "_delta_index/idx.bin" in rs
    if hours == 0:
        # Retain 0: the files version 3 overwrote and even the in-flight file go (this is why the
        # safety check exists).
        overwritten = {a["remove"]["path"] for a in _actions(root) if "remove" in a}
        assert len(overwritten) == 3 * 4  # three appends of four partitions
        assert "in-flight/part-0.parquet" in core_files(core)
        assert len(core.files) == len(overwritten) + 5  # and five untracked files
    else:
        # Retain 1 hour: the tombstones are minutes old, so only the old untracked files go.
        assert core_files(core) == {
            "crashed-job/part-0.parquet",
            "p=plain/orphan.parquet",
            "_delta_index/idx.bin",
            "_change_data/cdc.parquet",
        }
    # Difference 1: only the core deletes empty directories (deepest first).
    prefix = core.table_uri + "/"
    assert [d.removeprefix(prefix) for d in core.directories] == ["empty/nested", "empty"]


def test_delta_rs_reads_the_latest_version_in_full_after_a_real_vacuum(tmp_path: Path) -> None:
    root = tmp_path / "table"
    expected = build(root)
    result = DeltaTable(str(root)).vacuum(retention="0 hours", enforce_retention_duration=False)
    assert result.num_files > 0 and result.status == "COMPLETED"
    assert not any((root / f).exists() for f in core_files(result))
    rs = RsDeltaTable(str(root))
    assert rs.version() == expected["version"] + 2  # VACUUM START and VACUUM END
    assert sorted(rs.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == expected["rows"]
    assert [h["operation"] for h in rs.history(2)] == ["VACUUM END", "VACUUM START"]
    # delta-rs finds nothing more on storage to vacuum, but the hidden file Delta keeps (it
    # still names the expired tombstones, whose files are gone).
    assert {f for f in rs_files(root, 0) if (root / f).exists()} == {NESTED_HIDDEN}
    # The core reads the same.
    snapshot = DeltaTable(str(root)).snapshot()
    assert sorted(snapshot.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == expected["rows"]


def test_lite_after_a_delta_rs_checkpoint_then_delta_rs_reads_everything(tmp_path: Path) -> None:
    root = tmp_path / "table"
    expected = build(root)
    RsDeltaTable(str(root)).create_checkpoint()
    result = DeltaTable(str(root)).vacuum(mode="lite", retention="0 hours", enforce_retention_duration=False)
    # LITE deletes exactly the files the log removed: the ones version 3 overwrote.
    removed = {a["remove"]["path"] for a in _actions(root) if "remove" in a}
    assert len(result.files) == len(removed) == 3 * 4
    rs = RsDeltaTable(str(root))
    assert sorted(rs.to_pyarrow_table().to_pylist(), key=lambda r: r["id"]) == expected["rows"]
    # The untracked files are still there: only FULL finds them.
    assert (root / "crashed-job" / "part-0.parquet").exists()


def _actions(root: Path) -> list[dict[str, Any]]:
    import json

    return [
        json.loads(line)
        for path in sorted((root / "_delta_log").glob("*.json"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def test_underscore_partition_columns_and_their_lookalikes(tmp_path: Path) -> None:
    root = tmp_path / "table"
    build(root, partition="_p")
    stats = root / "_pstats" / "x.bin"
    stats.parent.mkdir()
    stats.write_bytes(b"x")
    set_age(stats, 2 * HOUR)
    core = core_files(
        DeltaTable(str(root)).vacuum(retention="1 hours", enforce_retention_duration=False, dry_run=True)
    )
    rs = rs_files(root, 1)
    # `_p=...` directories are vacuumed by both; `_pstats` is hidden for both.
    assert "_pstats/x.bin" not in core | rs
    assert rs - core == {"_p=plain/.part.crc"}
    assert core == rs - {"_p=plain/.part.crc"}
    assert "_p=plain/orphan.parquet" in core


def test_copies_vacuumed_by_both_end_up_identical(tmp_path: Path) -> None:
    original = tmp_path / "original"
    build(original)
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    shutil.copytree(original, ours, symlinks=True)
    shutil.copytree(original, theirs, symlinks=True)
    DeltaTable(str(ours)).vacuum(retention="1 hours", enforce_retention_duration=False, log_commits=False)
    RsDeltaTable(str(theirs)).vacuum(
        retention_hours=1,
        dry_run=False,
        enforce_retention_duration=False,
        full=True,
        post_commithook_properties=NO_HOOKS,
    )

    def data_files(root: Path) -> set[str]:
        return {
            str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts
        }

    assert data_files(ours) == data_files(theirs) | {NESTED_HIDDEN}
    # Directories: the core removed the empty ones, delta-rs left them.
    assert not (ours / "empty").exists() and (theirs / "empty" / "nested").is_dir()
