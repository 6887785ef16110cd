"""RESTORE judged by delta-rs: it reads the restored tables as the target version, its own
``restore()`` on a copy of the same table ends with the same files and rows (a second oracle),
and where the two differ the core is the one that follows Delta: a vacuumed deletion-vector
file, the current version, the retention window.

delta-rs 1.6's plain pyarrow reader refuses deletion vectors; its DataFusion reader
(``QueryBuilder``) applies them, and is the reader here.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import QueryBuilder

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import RestoreMissingFilesError

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus" / "tables"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())])


def copy_corpus(name: str, destination: Path) -> Path:
    """A corpus table dated now (its commits are years old, beyond any retention)."""
    shutil.copytree(CORPUS / name, destination, copy_function=shutil.copy)
    return destination


def their_rows(root: Path, version: int | None = None) -> list[str]:
    table = deltalake.DeltaTable(str(root), version=version)
    data = pa.table(QueryBuilder().register("t", table).execute("select * from t").read_all())
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in data.to_pylist())


def our_rows(root: Path, version: int | None = None) -> list[str]:
    data = DeltaTable(str(root)).snapshot(version).to_pyarrow_table()
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in data.to_pylist())


def active(root: Path) -> list[tuple[str, str]]:
    """The active (path, deletion vector) pairs, replayed by the core (delta-rs's add actions do not
    show deletion vectors); with the rows above, this compares the two restores' file sets."""
    files = DeltaTable(str(root)).snapshot().files().select(["path", "deletion_vector"]).to_pylist()
    return sorted((f["path"], json.dumps(f["deletion_vector"], sort_keys=True)) for f in files)


def partitioned(root: Path) -> DeltaTable:
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"])
    for n, (part, ids, mode) in enumerate(
        [("a", [1, 2, 3], "append"), ("b", [4, 5], "append"), ("a", [100], "overwrite")], 1
    ):
        relative = f"p={part}/f{n}.parquet"
        (root / f"p={part}").mkdir(exist_ok=True)
        pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), root / relative)
        table.commit_files([relative], mode=mode, replace_where="p = 'a'" if mode == "overwrite" else None)
    return table


CASES = [
    ("own-partitioned", 2),
    ("delta-kernel-rs/log-replay-dv-key-cases/delta", 1),
    ("delta-kernel-rs/log-replay-dv-key-cases/delta", 0),
    ("delta-kernel-rs/dv-partitioned-with-checkpoint/delta", 5),
    ("delta-kernel-rs/dv-with-columnmapping/delta", 3),
    ("delta/basic-dv-with-checkpoint", 3),
]


def build(name: str, root: Path) -> Path:
    if name == "own-partitioned":
        partitioned(root)
        return root
    return copy_corpus(name, root)


@pytest.mark.parametrize(("name", "target"), CASES)
def test_delta_rs_reads_the_restored_table_as_the_target_and_its_restore_agrees(
    tmp_path: Path, name: str, target: int
) -> None:
    ours, theirs = build(name, tmp_path / "ours"), build(name, tmp_path / "theirs")
    latest = DeltaTable(str(ours)).version()
    expected = their_rows(ours, target)

    DeltaTable(str(ours)).restore(target)
    deltalake.DeltaTable(str(theirs)).restore(target)

    assert deltalake.DeltaTable(str(ours)).version() == latest + 1
    assert their_rows(ours) == expected == our_rows(ours) == our_rows(ours, target)
    assert their_rows(theirs) == expected
    assert active(ours) == active(theirs)
    # Each reads the other's RESTORE commit too.
    assert our_rows(theirs) == expected


def test_delta_rs_writes_on_top_of_a_restore(tmp_path: Path) -> None:
    root = tmp_path / "t"
    partitioned(root)
    DeltaTable(str(root)).restore(2)

    deltalake.write_deltalake(
        str(root), pa.table({"id": [9], "name": ["n9"], "p": ["c"]}), mode="append", partition_by=["p"]
    )

    assert DeltaTable(str(root)).version() == 5
    assert len(our_rows(root)) == len(their_rows(root, 2)) + 1 == len(their_rows(root))


def test_a_vacuumed_deletion_vector_file_is_refused_where_delta_rs_commits_a_broken_table(
    tmp_path: Path,
) -> None:
    """delta-rs checks only the data files it adds back; the deletion-vector file of the restored
    version is gone, so its RESTORE commits a table no reader can read. The core refuses."""
    name = "delta-kernel-rs/log-replay-dv-key-cases/delta"
    ours, theirs = copy_corpus(name, tmp_path / "ours"), copy_corpus(name, tmp_path / "theirs")
    for root in (ours, theirs):
        (root / "deletion_vector_37d10da3-70a1-4730-bc58-3b44f9617505.bin").unlink()  # version 1's

    with pytest.raises(RestoreMissingFilesError, match="deletion_vector_37d10da3"):
        DeltaTable(str(ours)).restore(1)
    deltalake.DeltaTable(str(theirs)).restore(1)

    assert deltalake.DeltaTable(str(ours)).version() == 3
    assert deltalake.DeltaTable(str(theirs)).version() == 4
    with pytest.raises(Exception, match=r"File not found: .*deletion_vector_37d10da3"):
        their_rows(theirs)


def test_restoring_the_current_version_is_a_no_op_where_delta_rs_refuses(tmp_path: Path) -> None:
    root = tmp_path / "t"
    partitioned(root)

    assert DeltaTable(str(root)).restore(3).reason == "no_op"
    with pytest.raises(Exception, match=r"Version to restore 3 should be less"):
        deltalake.DeltaTable(str(root)).restore(3)
    assert deltalake.DeltaTable(str(root)).version() == 3
