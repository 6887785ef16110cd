"""Reading the changed rows (changes_read): files VACUUM deleted are errors naming the file, the
version that needs it and the retention that removed it; the file-level changes stay readable."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from changes_support import CORPUS, unpack_kernel_fixtures

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ChangeDataFileNotFoundError, DeltaError, InvalidPathError

if TYPE_CHECKING:
    from pathlib import Path


def assert_names_the_vanished_file(
    error: ChangeDataFileNotFoundError, path: Path, version: int, what: str
) -> None:
    message = str(error)
    assert error.version == version and error.path.endswith(path.name)
    assert f"The {what} " in message and path.name in message and f"version {version} " in message
    assert "delta.deletedFileRetentionDuration" in message and "VACUUM" in message
    assert error.delta_error_class == "DELTA_FILE_NOT_FOUND"


def test_a_removed_data_file_vacuum_deleted_is_named(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64())]),
        properties={"delta.deletedFileRetentionDuration": "interval 2 days"},
    )
    for name, ids in (("a.parquet", [1, 2]), ("b.parquet", [3])):
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), root / name)
    table.commit_files(["a.parquet"])  # v1
    table.commit_files(["b.parquet"], mode="overwrite")  # v2 removes a.parquet
    (root / "a.parquet").unlink()  # what VACUUM does once a.parquet is older than the retention

    changes = table.changes(2)
    assert sorted(changes.files().column("_change_type").to_pylist()) == ["add", "remove"]
    with pytest.raises(ChangeDataFileNotFoundError) as info:
        changes.to_pyarrow_table()
    assert_names_the_vanished_file(info.value, root / "a.parquet", 2, "data file")
    assert "(interval 2 days; table property)" in str(info.value)
    with pytest.raises(ChangeDataFileNotFoundError) as info:
        table.changes(1, 1).to_pyarrow_table()  # the add of v1 needs it too
    assert info.value.version == 1


def test_a_vacuumed_change_data_file_is_named(tmp_path: Path) -> None:
    root = tmp_path / "cdf-table"
    shutil.copytree(CORPUS / "tables" / "delta-rs" / "cdf-table", root)
    (cdc,) = [f["path"] for f in DeltaTable(str(root)).changes(3, 3).files().to_pylist()]
    (root / cdc).unlink()
    with pytest.raises(ChangeDataFileNotFoundError) as info:
        DeltaTable(str(root)).changes(2).to_pyarrow_table()
    assert_names_the_vanished_file(info.value, root / cdc, 3, "change data file")
    assert DeltaTable(str(root)).changes(1, 2).to_pyarrow_table().num_rows == 12


def test_a_vacuumed_deletion_vector_file_is_named(tmp_path: Path) -> None:
    unpack_kernel_fixtures(tmp_path / "kernel")
    root = tmp_path / "kernel" / "cdf-table-with-dv"
    (dv,) = root.glob("deletion_vector_*.bin")
    dv.unlink()
    with pytest.raises(ChangeDataFileNotFoundError) as info:
        DeltaTable(str(root)).changes(1, 1).to_pyarrow_table()
    assert_names_the_vanished_file(info.value, dv, 1, "deletion vector")
    assert DeltaTable(str(root)).changes(3, 3).to_pyarrow_table().num_rows == 4  # inline DVs only


# --- hostile paths in the range: changes() reads what the snapshot reads -----------------------------


def _outcome(read: Any) -> Any:
    """The rows a read returns (without the change feed's columns), or the class of its error."""
    try:
        table = read()
    except DeltaError as err:
        return type(err).__name__
    return sorted(table.select(["id"]).column(0).to_pylist())


def _hostile_table(
    root: Path, outside: Path, path: str, dv: dict[str, Any] | None, kind: str = "add"
) -> None:
    """v0 creates the table, v1 adds own.parquet; v2 adds ``path`` (with ``dv``, a deletion vector on
    it), or records it as a change data file (``kind="cdc"``)."""
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), root / "own.parquet")
    table.commit_files(["own.parquet"])
    add: dict[str, Any] = {
        "path": path,
        "partitionValues": {},
        "size": outside.stat().st_size,
        "modificationTime": 1,
        "dataChange": True,
    }
    if dv is not None:
        add["deletionVector"] = dv
    if kind == "cdc":
        add = {"path": path, "partitionValues": {}, "size": add["size"], "dataChange": False}
    lines = [{"commitInfo": {"operation": "WRITE"}}, {kind: add}]
    (root / "_delta_log" / f"{2:020d}.json").write_text("\n".join(map(json.dumps, lines)) + "\n")


@pytest.mark.parametrize(
    "logged",
    [
        "{outside}",  # absolute: kept as it is, by the protocol
        "file://{outside}",
        "../outside.parquet",
        "%2e%2e/outside.parquet",
        "%2E%2E%2Foutside.parquet",
        "a/../../outside.parquet",
        "..%2foutside.parquet",
        "s3://bucket/outside.parquet",
        "memory://outside.parquet",
        "http://127.0.0.1:9/outside.parquet",
    ],
)
@pytest.mark.parametrize("where", ["data file", "change data file", "deletion vector"])
def test_a_hostile_path_is_read_as_the_snapshot_reads_it(
    tmp_path: Path, logged: str, where: str, table_state: Any
) -> None:
    """Every path changes() reads (an added file, its deletion vector) is decided by the snapshot
    reader's rule: relative paths that climb out of the root are corrupt, paths on another store
    are refused, absolute paths on the table's store are read as the protocol says."""
    outside = tmp_path / "outside.parquet"
    pq.write_table(pa.table({"id": pa.array([666], pa.int64())}), outside)
    path = logged.format(outside=outside)
    dv = None
    if where == "deletion vector":
        dv = {"storageType": "p", "pathOrInlineDv": path, "offset": 1, "sizeInBytes": 30, "cardinality": 1}
        path = "own.parquet"
    root = tmp_path / "t"
    _hostile_table(root, outside, path, dv, "cdc" if where == "change data file" else "add")
    if where == "change data file":  # the snapshot reads no cdc file: the same path as an added one
        _hostile_table(tmp_path / "u", outside, path, None)
    before = table_state(root)
    table = DeltaTable(str(root))
    from_changes = _outcome(lambda: table.changes(2).to_pyarrow_table())
    if where == "change data file":
        table = DeltaTable(str(tmp_path / "u"))
    from_snapshot = _outcome(lambda: table.snapshot().to_pyarrow_table())
    if isinstance(from_snapshot, list) and where != "deletion vector":  # without v1's own.parquet
        from_snapshot = sorted(set(from_snapshot) - {1, 2})
    assert from_changes == from_snapshot
    assert from_changes in ([666], "CorruptLogError", "InvalidPathError", "DeletionVectorError")
    assert table_state(root) == before


def test_a_path_on_another_store_is_not_read_from_the_tables_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``s3://bucket/x.parquet`` in a local table's log once read the local file bucket/x.parquet,
    relative to the process's working directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bucket").mkdir()
    outside = tmp_path / "bucket" / "x.parquet"
    pq.write_table(pa.table({"id": pa.array([666], pa.int64())}), outside)
    root = tmp_path / "t"
    _hostile_table(root, outside, "s3://bucket/x.parquet", None)
    table = DeltaTable(str(root))
    for read in (lambda: table.changes(2).to_pyarrow_table(), lambda: table.snapshot().to_pyarrow_table()):
        with pytest.raises(InvalidPathError, match=r"'s3://bucket/x.parquet', on another store \(s3\)"):
            read()
    with pytest.raises(InvalidPathError):
        table.snapshot().file_uris()
    assert table.changes(2).files().column("path").to_pylist() == ["s3://bucket/x.parquet"]
