"""One URI, one table: the core and delta-rs read a percent-escaped location as the same table.

``s3://bucket/a%20b`` is the key ``a b`` and ``file:///x/100%25`` the directory ``100%``, for the
core as for delta-rs (and Hadoop); a table's own URI (``TablePath.uri``) names it again. Checked
on local disk and on a real S3 server (moto), both ways: the core writes and delta-rs reads, and
delta-rs writes and the core reads.
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.storage.paths import TablePath

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64())])
#: (the directory or key on storage, the same location escaped in a URI)
NAMES = [("a b", "a%20b"), ("100%", "100%25"), ("c d%e", "c%20d%25e")]


def core_writes(uri: str, options: dict[str, Any] | None, put: Any) -> DeltaTable:
    """A table at ``uri`` with one committed file (written through ``put``)."""
    table = DeltaTable.create(uri, SCHEMA, storage_options=options)
    buffer = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": [1, 2]}), buffer)
    put(table, "part-0.parquet", buffer.getvalue().to_pybytes())
    table.commit_files(["part-0.parquet"])
    return table


@pytest.mark.parametrize(("name", "escaped"), NAMES, ids=[n for n, _ in NAMES])
def test_local_uris_name_the_same_table_for_the_core_and_delta_rs(
    tmp_path: Path, name: str, escaped: str
) -> None:
    uri = f"file://{tmp_path}/{escaped}"

    def put(table: DeltaTable, relative: str, data: bytes) -> None:
        with open(table.storage.join(relative), "wb") as out:
            out.write(data)

    table = core_writes(uri, None, put)
    assert table.storage.root == f"{tmp_path}/{name}" and os.path.isdir(tmp_path / name / "_delta_log")
    assert sorted(os.listdir(tmp_path)) == [name]
    rs = deltalake.DeltaTable(uri)
    assert rs.version() == 1 and sorted(rs.to_pyarrow_table().column("id").to_pylist()) == [1, 2]
    # The table's own URI names it again, for the core and for delta-rs.
    own = table.storage.root_uri
    assert TablePath.parse(own).root == table.storage.root
    assert DeltaTable(own).version() == 1 and deltalake.DeltaTable(own).version() == 1

    other = f"file://{tmp_path}/rs-{escaped}"
    deltalake.write_deltalake(other, pa.table({"id": [3]}))
    assert os.path.isdir(tmp_path / f"rs-{name}" / "_delta_log")
    assert DeltaTable(other).snapshot().to_pyarrow_table().column("id").to_pylist() == [3]


def test_a_plain_local_path_is_taken_literally(tmp_path: Path) -> None:
    """Not a URI: ``%20`` in a plain path is three characters of a directory name."""
    table = DeltaTable.create(str(tmp_path / "x%20y"), SCHEMA)
    assert table.storage.root == f"{tmp_path}/x%20y" and os.path.isdir(tmp_path / "x%20y" / "_delta_log")
    # Its URI escapes the literal '%', and names the same directory.
    assert table.storage.root_uri == f"file://{tmp_path}/x%2520y"
    assert DeltaTable(table.storage.root_uri).version() == 0


@pytest.mark.s3
@pytest.mark.parametrize(("name", "escaped"), NAMES, ids=[n for n, _ in NAMES])
def test_s3_uris_name_the_same_table_for_the_core_and_delta_rs(
    s3_bucket: str,
    s3_storage_options: dict[str, Any],
    s3_rs_options: dict[str, str],
    s3_client: Any,
    name: str,
    escaped: str,
) -> None:
    rs_options, client = s3_rs_options, s3_client
    prefix = uuid.uuid4().hex[:8]
    uri = f"s3://{s3_bucket}/{prefix}/{escaped}"

    def put(table: DeltaTable, relative: str, data: bytes) -> None:
        table.storage.put(table.storage.join(relative), data)

    table = core_writes(uri, s3_storage_options, put)
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket, Prefix=prefix)["Contents"]}
    assert f"{prefix}/{name}/part-0.parquet" in keys
    assert f"{prefix}/{name}/_delta_log/00000000000000000001.json" in keys
    rs = deltalake.DeltaTable(uri, storage_options=rs_options)
    assert rs.version() == 1 and sorted(rs.to_pyarrow_table().column("id").to_pylist()) == [1, 2]
    own = table.storage.root_uri
    assert DeltaTable(own, s3_storage_options).version() == 1
    assert deltalake.DeltaTable(own, storage_options=rs_options).version() == 1

    other = f"s3://{s3_bucket}/{prefix}/rs-{escaped}"
    deltalake.write_deltalake(other, pa.table({"id": [3]}), storage_options=rs_options)
    keys = {o["Key"] for o in client.list_objects_v2(Bucket=s3_bucket, Prefix=f"{prefix}/rs-")["Contents"]}
    assert f"{prefix}/rs-{name}/_delta_log/00000000000000000000.json" in keys
    assert DeltaTable(other, s3_storage_options).snapshot().to_pyarrow_table().column("id").to_pylist() == [3]
