"""The core commits on top of every conformance table it may write to, and refuses the others.

Each writable table (copied first: the corpus is read-only) gets an append of one file
made from its own rows; the core and, where delta-rs reads the table, delta-rs then agree
on the version and the row count. Tables with deletion vectors are also overwritten: the
removes must carry each file's deletion vector, or readers would resurrect deleted rows.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import QueryBuilder

from airflow_delta_provider.core import DeltaTable, ProtocolError, UnsupportedFeatureError
from airflow_delta_provider.core.errors import ConstraintViolationError
from airflow_delta_provider.core.protocol.column_mapping import column_mapping_mode, physical_data
from airflow_delta_provider.core.protocol.constraints import identity_columns
from airflow_delta_provider.core.protocol.features import Operation, check_supported
from airflow_delta_provider.core.protocol.partitions import partition_path, serialize_partition_value
from airflow_delta_provider.core.protocol.schema import arrow_type_to_delta

CORPUS = Path(
    os.environ.get("DELTA_CONFORMANCE_DIR", Path(__file__).resolve().parents[1] / "conformance" / "corpus")
)
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
READABLE = [t for t in MANIFEST if t["expect"]["kind"] == "read"]


def _copy(entry: dict, tmp_path: Path) -> DeltaTable:
    target = tmp_path / "table"
    shutil.copytree(CORPUS / "tables" / entry["table_root"], target)
    return DeltaTable(str(target))


def _writable(table: DeltaTable) -> bool:
    snapshot = table.snapshot()
    try:
        check_supported(snapshot.protocol, snapshot.metadata, Operation.WRITE)
    except (UnsupportedFeatureError, ProtocolError) as err:
        assert str(err)  # refused with a message, naming what is wrong
        return False
    return True


def _mapped(table: DeltaTable) -> bool:
    snapshot = table.snapshot()
    return column_mapping_mode(snapshot.protocol, snapshot.metadata) != "none"


def _delta_rs_reads(table: DeltaTable) -> bool:
    """Whether delta-rs reads this table at all (its reader lacks some features the core has)."""
    try:
        _delta_rs_rows(table)
    except Exception:
        return False
    return True


def _delta_rs_rows(table: DeltaTable) -> pa.Table:
    """delta-rs's rows: its pyarrow dataset, or, under column mapping (which that dataset reads
    as NULLs), its DataFusion reader, which resolves physical names and deletion vectors."""
    theirs = deltalake.DeltaTable(table.uri)
    if not _mapped(table):
        return theirs.to_pyarrow_dataset().to_table()
    return pa.table(QueryBuilder().register("t", theirs).execute("select * from t").read_all())


def _sorted_rows(rows: pa.Table, names: list[str]) -> list[str]:
    return sorted(json.dumps(row, sort_keys=True, default=str) for row in rows.select(names).to_pylist())


def _has_data(entry: dict) -> bool:
    return entry["expect"].get("num_rows") is not None


def _append_own_rows(table: DeltaTable, with_data: bool) -> int:
    """Commit one Parquet file in the table's partition layout: a few of its own rows, or
    (for log-only tables) an empty file with its schema in the null partition."""
    snapshot = table.snapshot()
    partition_columns = snapshot.partition_columns
    if with_data:
        rows = snapshot.to_pyarrow_table().slice(0, 3)
    else:
        rows = pa.Table.from_pylist([], schema=snapshot.schema)
    values: dict[str, str | None] = {c: None for c in partition_columns}
    if partition_columns and rows.num_rows:
        first = rows.slice(0, 1)
        for column in partition_columns:
            delta_type = arrow_type_to_delta(snapshot.schema.field(column).type)
            values[column] = serialize_partition_value(first[column][0].as_py(), delta_type)
            rows = (
                rows.filter(pc.equal(rows[column], first[column][0])) if first[column][0].is_valid else rows
            )
    directory = "appended" + ("/" + partition_path(values, partition_columns) if partition_columns else "")
    path = Path(table.storage.root) / directory / "part-0.parquet"
    path.parent.mkdir(parents=True)
    data = rows.drop_columns(partition_columns)
    if _mapped(table):  # physical names (and field ids), as Delta writes them
        data = physical_data(data, snapshot.schema)
    pq.write_table(data, path)
    result = table.commit_files([f"{directory}/part-0.parquet"], app_id="conformance", app_version=1)
    assert result.committed and result.version == snapshot.version + 1
    return rows.num_rows


@pytest.mark.parametrize("entry", READABLE, ids=[t["name"] for t in READABLE])
def test_commit_on_top_of_every_writable_table(entry, tmp_path):
    table = _copy(entry, tmp_path)
    if not _writable(table):
        data = tmp_path / "table" / "x.parquet"
        pq.write_table(pa.table({"x": [1]}), data)
        before = table.version()
        with pytest.raises((UnsupportedFeatureError, ProtocolError)):
            table.commit_files(["x.parquet"])
        assert table.version() == before
        return
    rs_reads = _delta_rs_reads(table)
    rs_files_before = len(deltalake.DeltaTable(table.uri).file_uris()) if rs_reads else 0
    before = table.snapshot()
    if any(not c.allow_explicit_insert for c in identity_columns(before.metadata)):
        # GENERATED ALWAYS identity: files carrying the column's values are refused (only the
        # PySpark operator, which generates them, may write), and nothing changes.
        with pytest.raises(ConstraintViolationError, match="GENERATED ALWAYS"):
            _append_own_rows(table, _has_data(entry))
        assert table.version() == before.version
        return
    with_data = _has_data(entry)
    rows_before = before.to_pyarrow_table().num_rows if with_data else 0
    added = _append_own_rows(table, with_data)
    after = table.snapshot()
    assert after.version == before.version + 1
    assert after.num_files() == before.num_files() + 1
    if with_data:
        assert after.to_pyarrow_table().num_rows == rows_before + added
    if rs_reads:
        theirs = deltalake.DeltaTable(table.uri)
        assert theirs.version() == after.version
        assert len(theirs.file_uris()) == rs_files_before + 1
        assert theirs.transaction_version("conformance") == 1
        if with_data:
            ours = after.to_pyarrow_table()
            assert _sorted_rows(_delta_rs_rows(table), ours.column_names) == _sorted_rows(
                ours, ours.column_names
            )


DV_TABLES = [t for t in READABLE if "deletion" in json.dumps(t).lower() and _has_data(t)]


@pytest.mark.parametrize("entry", DV_TABLES, ids=[t["name"] for t in DV_TABLES])
def test_overwrite_removes_carry_deletion_vectors(entry, tmp_path):
    table = _copy(entry, tmp_path)
    if not _writable(table):
        pytest.skip("the core refuses writes to this table (tested above)")
    rs_reads = _delta_rs_reads(table)
    snapshot = table.snapshot()
    files = snapshot.files().to_pylist()
    with_dv = {f["path"]: f["deletion_vector"] for f in files if f["deletion_vector"]}
    directory = "fresh/" + (
        partition_path({c: "1" for c in snapshot.partition_columns}, snapshot.partition_columns)
        if snapshot.partition_columns
        else ""
    )
    data = snapshot.to_pyarrow_table().slice(0, 1).drop_columns(snapshot.partition_columns)
    if _mapped(table):
        data = physical_data(data, snapshot.schema)
    path = Path(table.storage.root) / directory.rstrip("/") / "part-0.parquet"
    path.parent.mkdir(parents=True)
    pq.write_table(data, path)
    result = table.commit_files([str(path)], mode="overwrite")
    log = (Path(table.storage.log_dir) / f"{result.version:020d}.json").read_text().splitlines()
    removes = {r["remove"]["path"]: r["remove"] for r in map(json.loads, log) if "remove" in r}
    assert len(removes) == len(files)
    for path_key, dv in with_dv.items():
        carried = removes[path_key]["deletionVector"]
        assert {k: v for k, v in dv.items() if v is not None} == carried
    assert table.snapshot().to_pyarrow_table().num_rows == data.num_rows  # 0 for an empty table
    if rs_reads:
        assert _delta_rs_rows(table).num_rows == data.num_rows
