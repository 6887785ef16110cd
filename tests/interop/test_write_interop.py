"""delta-rs (``deltalake``) as the judge of what the core writes, and the core on delta-rs tables."""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from decimal import Decimal
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ds", pa.date32()),
        ("region", pa.string()),
    ]
)


def data(ids: list[int]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"name-{i}" for i in ids],
            "amount": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(hours=i) for i in ids], pa.timestamp("us", tz="UTC")
            ),
        }
    )


def spark_file(table: DeltaTable, ds: str, region: str | None, ids: list[int]) -> str:
    """One data file in Spark's partitionBy layout (partition columns only in the path)."""
    region_dir = region if region is not None else "__HIVE_DEFAULT_PARTITION__"
    name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    relative = f"out-{uuid.uuid4().hex[:6]}/ds={ds}/region={region_dir}/{name}"
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(data(ids), path)
    return relative


def assert_same_as_delta_rs(table: DeltaTable) -> deltalake.DeltaTable:
    theirs = deltalake.DeltaTable(table.uri)
    snapshot = table.snapshot()
    assert theirs.version() == snapshot.version
    ours_rows = snapshot.to_pyarrow_table().sort_by("id")
    their_rows = theirs.to_pyarrow_table().sort_by("id")
    assert their_rows.schema.names == ours_rows.schema.names
    assert their_rows.cast(ours_rows.schema).to_pylist() == ours_rows.to_pylist()
    their_fields = [
        (f["name"], f["type"], f["nullable"]) for f in json.loads(theirs.schema().to_json())["fields"]
    ]
    our_fields = [
        (f["name"], f["type"], f["nullable"]) for f in json.loads(snapshot.metadata.schema_string)["fields"]
    ]
    assert their_fields == our_fields
    assert theirs.metadata().partition_columns == snapshot.partition_columns
    their_adds = pa.table(theirs.get_add_actions(flatten=True))
    assert sorted(unquote(p) for p in their_adds["path"].to_pylist()) == sorted(
        unquote(p) for p in snapshot.files()["path"].to_pylist()
    )
    their_partitions = sorted(tuple(sorted(p.items())) for p in theirs.partitions())
    our_partitions = sorted(
        tuple(sorted((k, v) for k, v in dict(p).items()))
        for p in snapshot.files()["partition_values"].to_pylist()
    )
    assert their_partitions == sorted(set(our_partitions))
    ours_history = [h["operation"] for h in table.history()]
    assert [h["operation"] for h in theirs.history()] == ours_history
    for app_id, txn in snapshot.transactions.items():
        assert theirs.transaction_version(app_id) == txn.version
    return theirs


@pytest.fixture
def table(tmp_path):
    return DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds", "region"], name="events")


def test_every_mode_reads_the_same_in_delta_rs(table):
    assert_same_as_delta_rs(table)
    table.commit_files(
        [spark_file(table, "2024-01-01", "eu", [1, 2]), spark_file(table, "2024-01-02", None, [3])],
        app_id="ingest",
        app_version=1,
    )
    assert_same_as_delta_rs(table)
    assert table.commit_files(
        [spark_file(table, "2024-01-01", "eu", [1])], app_id="ingest", app_version=1
    ).skipped
    table.commit_files(
        [spark_file(table, "2024-01-01", "eu", [10, 11])], mode="overwrite", replace_where="ds = '2024-01-01'"
    )
    theirs = assert_same_as_delta_rs(table)
    assert sorted(theirs.to_pyarrow_table()["id"].to_pylist()) == [3, 10, 11]
    table.commit_files([spark_file(table, "2024-01-03", "us", [20])], mode="overwrite")
    theirs = assert_same_as_delta_rs(table)
    assert theirs.to_pyarrow_table()["id"].to_pylist() == [20]
    # delta-rs skips files with the core's stats: a filter outside every file's range reads nothing.
    assert theirs.to_pyarrow_table(filters=[("id", ">", 1000)]).num_rows == 0


def test_delta_rs_uses_the_core_stats_for_data_skipping(table):
    table.commit_files(
        [spark_file(table, "2024-01-01", "eu", [1, 2]), spark_file(table, "2024-01-01", "eu", [50, 60])]
    )
    theirs = deltalake.DeltaTable(table.uri)
    actions = pa.table(theirs.get_add_actions(flatten=True)).to_pylist()
    bounds = sorted((a["min.id"], a["max.id"], a["null_count.id"], a["num_records"]) for a in actions)
    assert bounds == [(1, 2, 0, 2), (50, 60, 0, 2)]


def test_schema_evolution_reads_the_same(table):
    table.commit_files([spark_file(table, "2024-01-01", "eu", [1])])
    relative = "evolved/ds=2024-01-02/region=eu/part-0.parquet"
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(data([2]).append_column("score", pa.array([0.5])), path)
    table.commit_files([relative], schema_mode="merge")
    theirs = assert_same_as_delta_rs(table)
    assert theirs.schema().to_arrow().names[-1] == "score"


def test_core_commits_onto_delta_rs_tables(tmp_path):
    uri = str(tmp_path / "rs")
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "part": ["x", "y", "x"]})
    deltalake.write_deltalake(uri, first, partition_by=["part"])
    deltalake.write_deltalake(
        uri, first.slice(0, 1), partition_by=["part"], mode="overwrite", predicate="part = 'x'"
    )
    theirs = deltalake.DeltaTable(uri)
    theirs.create_checkpoint()
    deltalake.write_deltalake(uri, first.slice(1, 1), partition_by=["part"], mode="append")
    table = DeltaTable(uri)
    relative = "core/part=z/file.parquet"
    os.makedirs(os.path.join(uri, "core", "part=z"))
    pq.write_table(pa.table({"id": pa.array([100], pa.int64())}), os.path.join(uri, relative))
    result = table.commit_files([relative], app_id="core", app_version=1)
    assert result.version == 3
    theirs = deltalake.DeltaTable(uri)
    assert theirs.version() == 3
    assert sorted(theirs.to_pyarrow_table()["id"].to_pylist()) == [1, 2, 2, 100]
    assert theirs.transaction_version("core") == 1
    os.makedirs(os.path.join(uri, "core", "part=x"))
    pq.write_table(
        pa.table({"id": pa.array([7], pa.int64())}), os.path.join(uri, "core", "part=x", "f.parquet")
    )
    table.commit_files(["core/part=x/f.parquet"], mode="overwrite", replace_where="part = 'x'")
    theirs = deltalake.DeltaTable(uri)
    assert sorted(theirs.to_pyarrow_table()["id"].to_pylist()) == [2, 2, 7, 100]
    assert [h["operation"] for h in theirs.history()][:2] == ["WRITE", "WRITE"]


def test_delta_rs_commits_onto_core_tables(table):
    table.commit_files([spark_file(table, "2024-01-01", "eu", [1])])
    extra = (
        data([2])
        .append_column("ds", pa.array([dt.date(2024, 1, 5)]))
        .append_column("region", pa.array(["us"]))
    )
    deltalake.write_deltalake(table.uri, extra, mode="append")
    snapshot = table.snapshot()
    assert snapshot.version == 2
    assert sorted(snapshot.to_pyarrow_table()["id"].to_pylist()) == [1, 2]
