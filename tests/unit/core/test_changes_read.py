"""Reading the changed rows (changes_read): files VACUUM deleted are errors naming the file, the
version that needs it and the retention that removed it; the file-level changes stay readable."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ChangeDataFileNotFoundError

from .changes_support import CORPUS, unpack_kernel_fixtures

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
    assert "(2 days, 0:00:00; table property)" in str(info.value)
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
