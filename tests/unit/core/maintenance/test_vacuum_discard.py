"""discard_uncommitted: an attempt's files go, by VACUUM's rules; nothing else does.

Per class of path: outside the root (``..``, absolute elsewhere, a sibling sharing the root's
prefix, through a symbolic link), inside ``_delta_log``, an active file, a tombstone; locally and
on a real S3 server (moto).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.maintenance.vacuum.discard import (
    OUTSIDE_ROOT,
    REFERENCED,
    discard_uncommitted,
)
from airflow_delta_provider.core.storage import open_store

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64())])


def parquet(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": [1]}), path)


@pytest.fixture
def table(tmp_path: Path) -> DeltaTable:
    """``lake/t`` with one active file, one tombstone (removed by an overwrite) and two uncommitted
    files; beside it a loose file and a directory sharing the root's prefix."""
    root = tmp_path / "lake" / "t"
    created = DeltaTable.create(str(root), SCHEMA)
    parquet(root / "old.parquet")
    created.commit_files(["old.parquet"])
    parquet(root / "live.parquet")
    created.commit_files(["live.parquet"], mode="overwrite")
    for name in ("attempt/a.parquet", "attempt/b.parquet"):
        parquet(root / name)
    parquet(tmp_path / "lake" / "outside.parquet")
    parquet(tmp_path / "lake" / "t-copy" / "x.parquet")
    return created


def test_only_unreferenced_files_under_the_root_are_deleted(table: DeltaTable) -> None:
    storage = table.storage
    root = storage.root
    lake = os.path.dirname(root)
    log_before = sorted(os.listdir(f"{root}/_delta_log"))
    paths = {
        f"{root}/attempt/a.parquet": "deleted",
        f"{root}/attempt/b.parquet": "deleted",
        f"{root}/../outside.parquet": OUTSIDE_ROOT,
        f"{lake}/outside.parquet": OUTSIDE_ROOT,
        f"{root}-copy/x.parquet": OUTSIDE_ROOT,
        f"{root}/_delta_log/00000000000000000000.json": OUTSIDE_ROOT,
        f"{root}/_delta_log": OUTSIDE_ROOT,
        f"{root}/live.parquet": REFERENCED,
        f"{root}/old.parquet": REFERENCED,  # a tombstone: time travel to version 1 reads it
    }

    result = discard_uncommitted(storage, list(paths), reason="a test")

    assert result.deleted == 2
    assert dict(result.kept) == {p: why for p, why in paths.items() if why != "deleted"}
    for path, why in paths.items():
        assert os.path.exists(path) == (why != "deleted"), path
    assert sorted(os.listdir(f"{root}/_delta_log")) == log_before
    assert table.snapshot(1).to_pyarrow_table().num_rows == 1


def test_a_parent_linking_outside_the_root_is_not_followed(table: DeltaTable, tmp_path: Path) -> None:
    root = table.storage.root
    os.symlink(tmp_path / "lake" / "t-copy", f"{root}/linked")
    result = discard_uncommitted(table.storage, [f"{root}/linked/x.parquet"], reason="a test")
    assert result.deleted == 0 and dict(result.kept) == {f"{root}/linked/x.parquet": OUTSIDE_ROOT}
    assert (tmp_path / "lake" / "t-copy" / "x.parquet").exists()


def test_without_a_table_confined_files_are_deleted(tmp_path: Path) -> None:
    """A first write whose commit failed: no log, so nothing references its files."""
    root = tmp_path / "new"
    parquet(root / "attempt" / "x.parquet")
    parquet(tmp_path / "outside.parquet")
    storage = open_store(str(root))
    result = discard_uncommitted(
        storage, [f"{storage.root}/attempt/x.parquet", f"{storage.root}/../outside.parquet"], reason="a test"
    )
    assert result.deleted == 1 and not (root / "attempt" / "x.parquet").exists()
    assert (tmp_path / "outside.parquet").exists()


def test_on_s3_nothing_outside_the_root_prefix_or_referenced_is_deleted(
    s3_bucket: str, s3_storage_options: dict[str, object]
) -> None:
    import s3fs

    fs = s3fs.S3FileSystem(**s3_storage_options)
    uri = f"s3://{s3_bucket}/t"
    table = DeltaTable.create(uri, SCHEMA, storage_options=s3_storage_options)
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": [1]}), buffer)
    for key in ("t/live.parquet", "t/attempt/a.parquet", "t-copy/x.parquet", "other/y.parquet"):
        fs.pipe(f"{s3_bucket}/{key}", buffer.getvalue().to_pybytes())
    table.commit_files(["live.parquet"])
    root = table.storage.root

    result = discard_uncommitted(
        table.storage,
        [
            f"{root}/attempt/a.parquet",
            f"{root}/live.parquet",
            f"{root}-copy/x.parquet",
            f"{root}/../other/y.parquet",
            f"{root}/_delta_log/00000000000000000000.json",
        ],
        reason="a test",
    )

    assert result.deleted == 1
    fs.invalidate_cache()
    assert sorted(fs.find(s3_bucket)) == sorted(
        f"{s3_bucket}/{key}"
        for key in (
            "t/live.parquet",
            "t-copy/x.parquet",
            "other/y.parquet",
            "t/_delta_log/00000000000000000000.json",
            "t/_delta_log/00000000000000000001.json",
            "t/_delta_log/00000000000000000000.crc",
            "t/_delta_log/00000000000000000001.crc",
        )
    )
