"""Creating tables and committing existing Parquet files: modes, schema, idempotency, features."""

from __future__ import annotations

import json
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    AppendOnlyViolationError,
    InvalidDataFileError,
    InvalidPartitionValueError,
    InvalidPathError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.expressions.predicate import PredicateError
from airflow_delta_provider.core.log.checksum import read_checksum
from airflow_delta_provider.core.protocol.features import minimum_protocol

SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.string()), ("ds", pa.string())])


def write_parquet(root, relative: str, table: pa.Table) -> str:
    path = os.path.join(str(root), relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(table, path)
    return relative


def batch(root, ds: str, ids: list[int], prefix: str | None = None) -> str:
    """Write one Spark-layout file (partition column in the directory, not the file)."""
    prefix = prefix or f"batch-{uuid.uuid4().hex[:8]}"
    data = pa.table({"id": pa.array(ids, pa.int64()), "value": [f"v{i}" for i in ids]})
    return write_parquet(root, f"{prefix}/ds={ds}/part-00000.parquet", data)


@pytest.fixture
def table(tmp_path):
    return DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"])


def rows(table: DeltaTable, version: int | None = None) -> list[tuple]:
    data = table.snapshot(version).to_pyarrow_table()
    return sorted(zip(data["id"].to_pylist(), data["ds"].to_pylist(), strict=True))


def log_actions(table: DeltaTable, version: int) -> list[dict]:
    with open(os.path.join(table.storage.log_dir, f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f if line.strip()]


# --- create ------------------------------------------------------------------------------


def test_create_writes_protocol_metadata_and_commit_info(table):
    snapshot = table.snapshot()
    assert snapshot.version == 0
    assert snapshot.partition_columns == ["ds"]
    assert snapshot.schema.names == ["id", "value", "ds"]
    assert (snapshot.protocol.min_reader_version, snapshot.protocol.min_writer_version) == (1, 2)
    info = log_actions(table, 0)[0]["commitInfo"]
    assert info["operation"] == "CREATE TABLE"
    assert info["operationParameters"]["partitionBy"] == '["ds"]'
    assert info["engineInfo"].startswith("airflow-delta-provider/")
    assert "readVersion" not in info


def test_create_modes(tmp_path, table):
    with pytest.raises(TableAlreadyExistsError, match="already exists"):
        DeltaTable.create(table.uri, SCHEMA, partition_by=["ds"])
    DeltaTable.create(table.uri, pa.schema([("other", pa.int32())]), mode="ignore")
    DeltaTable.create(table.uri, SCHEMA, partition_by=["ds"], mode="append")
    assert table.version() == 0
    with pytest.raises(SchemaMismatchError, match="partitioned by"):
        DeltaTable.create(table.uri, SCHEMA, mode="append")
    table.commit_files([batch(table.storage.root, "a", [1])])
    replaced = DeltaTable.create(table.uri, pa.schema([("x", pa.int32())]), mode="overwrite")
    snapshot = replaced.snapshot()
    assert snapshot.version == 2
    assert snapshot.schema.names == ["x"]
    assert snapshot.num_files() == 0
    assert snapshot.metadata.id == table.snapshot(0).metadata.id


@pytest.mark.parametrize("auto_checkpoint", [True, False])
def test_a_create_or_replace_takes_the_commit_properties_of_every_commit(table, auto_checkpoint):
    for _ in range(9):
        table.commit_files([batch(table.storage.root, "a", [1])], auto_checkpoint=False)
    DeltaTable.create(
        table.uri,
        SCHEMA,
        mode="overwrite",
        user_metadata="replaced",
        tags={"by": "test"},
        app_id="job",
        app_version=1,
        auto_checkpoint=auto_checkpoint,
    )
    info = log_actions(table, 10)[0]["commitInfo"]
    assert (info["operation"], info["userMetadata"], info["tags"]) == (
        "CREATE OR REPLACE TABLE",
        "replaced",
        {"by": "test"},
    )
    assert table.snapshot().app_transaction_version("job") == 1
    # Delta's post-commit checkpoint at version 10, as after any commit.
    checkpoint = os.path.join(table.storage.log_dir, f"{10:020d}.checkpoint.parquet")
    assert os.path.exists(checkpoint) is auto_checkpoint


def test_create_validates_partition_columns(tmp_path):
    with pytest.raises(Exception, match="not in the schema"):
        DeltaTable.create(str(tmp_path / "a"), SCHEMA, partition_by=["nope"])
    with pytest.raises(Exception, match="at least one data column"):
        DeltaTable.create(str(tmp_path / "b"), pa.schema([("p", pa.string())]), partition_by=["p"])
    assert not os.path.exists(tmp_path / "a" / "_delta_log")


@pytest.mark.parametrize(
    ("schema", "properties", "expected"),
    [
        (SCHEMA, {}, (1, 2, None, None)),
        (SCHEMA, {"delta.appendOnly": "true"}, (1, 2, None, None)),
        (SCHEMA, {"delta.enableChangeDataFeed": "true"}, (1, 4, None, None)),
        (SCHEMA, {"delta.enableInCommitTimestamps": "true"}, (1, 7, None, {"inCommitTimestamp"})),
        (
            pa.schema([("t", pa.timestamp("us"))]),
            {"delta.appendOnly": "true"},
            (3, 7, {"timestampNtz"}, {"timestampNtz", "appendOnly"}),
        ),
        (SCHEMA, {"delta.enableDeletionVectors": "true"}, (3, 7, {"deletionVectors"}, {"deletionVectors"})),
        (SCHEMA, {"delta.columnMapping.mode": "name"}, (2, 5, None, None)),  # as Spark creates it
        (SCHEMA, {"delta.enableTypeWidening": "true"}, (3, 7, {"typeWidening"}, {"typeWidening"})),
    ],
)
def test_minimum_protocol(schema, properties, expected):
    protocol = minimum_protocol(schema, properties)
    reader = set(protocol.reader_features) if protocol.reader_features is not None else None
    writer = set(protocol.writer_features) if protocol.writer_features is not None else None
    assert (protocol.min_reader_version, protocol.min_writer_version, reader, writer) == expected


@pytest.mark.parametrize(
    ("key", "feature"),
    [
        ("delta.enableIcebergCompatV2", "icebergCompatV2"),
        ("delta.enableIcebergCompatV3", "icebergCompatV3"),
    ],
)
def test_properties_needing_unsupported_features_are_refused(tmp_path, key, feature):
    value = "name" if "Mapping" in key else "true"
    with pytest.raises(UnsupportedFeatureError, match=feature) as info:
        DeltaTable.create(str(tmp_path / "t"), SCHEMA, properties={key: value})
    assert info.value.feature == feature
    assert not os.path.exists(tmp_path / "t" / "_delta_log")


# --- append ------------------------------------------------------------------------------


def test_append_commits_files_with_stats_and_partition_values(table):
    paths = [batch(table.storage.root, "2024-01-01", [1, 2]), batch(table.storage.root, "2024-01-02", [3])]
    result = table.commit_files(paths)
    assert (result.version, result.committed, result.num_added_files, result.num_output_rows) == (
        1,
        True,
        2,
        3,
    )
    assert rows(table) == [(1, "2024-01-01"), (2, "2024-01-01"), (3, "2024-01-02")]
    files = sorted(table.snapshot().files().to_pylist(), key=lambda f: dict(f["partition_values"])["ds"])
    assert [dict(f["partition_values"]) for f in files] == [{"ds": "2024-01-01"}, {"ds": "2024-01-02"}]
    stats = json.loads(files[0]["stats"])
    assert stats == {
        "numRecords": 2,
        "minValues": {"id": 1, "value": "v1"},
        "maxValues": {"id": 2, "value": "v2"},
        "nullCount": {"id": 0, "value": 0},
    }
    info = log_actions(table, 1)[0]["commitInfo"]
    assert info["operation"] == "WRITE"
    assert info["operationParameters"] == {"mode": "Append", "partitionBy": '["ds"]'}
    assert info["isBlindAppend"] is True
    assert info["readVersion"] == 0
    assert info["isolationLevel"] == "Serializable"
    assert info["operationMetrics"] == {
        "numFiles": "2",
        "numOutputRows": "3",
        "numOutputBytes": str(result.num_output_bytes),
    }
    assert info["txnId"] == result.txn_id


def test_append_by_prefix(table):
    batch(table.storage.root, "a", [1], prefix="run1")
    batch(table.storage.root, "b", [2], prefix="run1")
    with open(os.path.join(table.storage.root, "run1", "_SUCCESS"), "w"):
        pass
    result = table.commit_files(prefix="run1")
    assert result.num_added_files == 2
    assert rows(table) == [(1, "a"), (2, "b")]


def test_commit_info_carries_tags_and_user_metadata(table):
    table.commit_files(
        [batch(table.storage.root, "a", [1])], tags={"dag_id": "d", "run_id": "r"}, user_metadata="hello"
    )
    info = log_actions(table, 1)[0]["commitInfo"]
    assert info["tags"] == {"dag_id": "d", "run_id": "r"}
    assert info["userMetadata"] == "hello"


# --- idempotency ------------------------------------------------------------------------


def test_idempotent_append_commits_once(table):
    path = batch(table.storage.root, "a", [1, 2])
    first = table.commit_files([path], app_id="job", app_version=7)
    assert first.committed and first.version == 1
    txn = next(a["txn"] for a in log_actions(table, 1) if "txn" in a)
    assert txn["appId"] == "job" and txn["version"] == 7 and txn["lastUpdated"] > 0
    other = batch(table.storage.root, "b", [3])
    table.commit_files([other])  # version 2, unrelated
    again = table.commit_files([path], app_id="job", app_version=7)
    older = table.commit_files([path], app_id="job", app_version=3)
    assert (again.committed, again.skipped, again.version) == (False, True, 1)
    assert older.skipped and older.version == 1
    assert again.already_committed and older.already_committed and not first.already_committed
    assert not table.commit_files([]).already_committed  # skipped for another reason: no files
    assert table.version() == 2
    assert rows(table) == [(1, "a"), (2, "a"), (3, "b")]
    newer = table.commit_files([batch(table.storage.root, "c", [4])], app_id="job", app_version=8)
    assert newer.committed and table.snapshot().app_transaction_version("job") == 8


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"app_id": "x"}, "both app_id and app_version"),
        ({"app_version": 1}, "both app_id and app_version"),
        ({"app_id": "x", "app_version": -1}, "non-negative"),
        ({"app_id": "", "app_version": 1}, "non-empty"),
        ({"mode": "upsert"}, "mode must be"),
        ({"replace_where": "ds = 'a'"}, "mode='overwrite'"),
        ({"schema_mode": "loose"}, "schema_mode"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_written(table, kwargs, message):
    with pytest.raises(ValueError, match=message):
        table.commit_files([batch(table.storage.root, "a", [1])], **kwargs)
    assert table.version() == 0


# --- overwrite and replaceWhere -------------------------------------------------------------


def test_overwrite_replaces_everything(table):
    table.commit_files([batch(table.storage.root, "a", [1]), batch(table.storage.root, "b", [2])])
    result = table.commit_files([batch(table.storage.root, "c", [3])], mode="overwrite")
    assert (result.num_removed_files, result.num_added_files) == (2, 1)
    assert rows(table) == [(3, "c")]
    assert rows(table, 1) == [(1, "a"), (2, "b")]
    actions = log_actions(table, 2)
    info = actions[0]["commitInfo"]
    assert info["operationParameters"]["mode"] == "Overwrite"
    assert info["isBlindAppend"] is False
    assert info["operationMetrics"]["numRemovedFiles"] == "2"
    removes = [a["remove"] for a in actions if "remove" in a]
    assert all(r["dataChange"] and r["extendedFileMetadata"] and r["size"] > 0 for r in removes)
    assert len(table.snapshot().tombstones()) == 2


def test_replace_where_replaces_only_matching_partitions(table):
    table.commit_files([batch(table.storage.root, d, [i]) for i, d in enumerate(["a", "b", "c"])])
    result = table.commit_files(
        [batch(table.storage.root, "b", [10, 11])], mode="overwrite", replace_where="ds = 'b'"
    )
    assert result.num_removed_files == 1
    assert rows(table) == [(0, "a"), (2, "c"), (10, "b"), (11, "b")]
    info = log_actions(table, 2)[0]["commitInfo"]
    assert json.loads(info["operationParameters"]["predicate"]) == ["ds = 'b'"]


def test_replace_where_refuses_data_outside_the_predicate(table):
    with pytest.raises(PredicateError, match="does not conform to the replaceWhere predicate"):
        table.commit_files([batch(table.storage.root, "z", [1])], mode="overwrite", replace_where="ds = 'b'")
    with pytest.raises(PredicateError, match="not a partition column"):
        table.commit_files([batch(table.storage.root, "b", [1])], mode="overwrite", replace_where="id = 1")
    assert table.version() == 0


def test_append_only_tables_refuse_overwrites(tmp_path):
    table = DeltaTable.create(
        str(tmp_path / "t"), SCHEMA, partition_by=["ds"], properties={"delta.appendOnly": True}
    )
    table.commit_files([batch(table.storage.root, "a", [1])])
    with pytest.raises(AppendOnlyViolationError, match=r"delta\.appendOnly"):
        table.commit_files([batch(table.storage.root, "a", [2])], mode="overwrite")
    assert table.version() == 1


# --- schema ------------------------------------------------------------------------------


def test_schema_enforcement_names_the_column_and_types(table):
    bad = write_parquet(
        table.storage.root, "x/ds=a/p.parquet", pa.table({"id": ["not a number"], "value": ["v"]})
    )
    with pytest.raises(
        SchemaMismatchError, match=r"p\.parquet.*column id has type long in the table but string"
    ):
        table.commit_files([bad])
    extra = write_parquet(
        table.storage.root, "y/ds=a/p.parquet", pa.table({"id": [1], "value": ["v"], "new": [1.0]})
    )
    with pytest.raises(SchemaMismatchError, match="new"):
        table.commit_files([extra])
    assert table.version() == 0


def test_missing_nullable_columns_are_fine(table):
    table.commit_files(
        [write_parquet(table.storage.root, "x/ds=a/p.parquet", pa.table({"id": pa.array([5], pa.int64())}))]
    )
    data = table.snapshot().to_pyarrow_table()
    assert data["value"].to_pylist() == [None]


def test_schema_merge_adds_nullable_columns_in_the_same_commit(table):
    extra = write_parquet(
        table.storage.root, "y/ds=a/p.parquet", pa.table({"id": [1], "value": ["v"], "score": [0.5]})
    )
    result = table.commit_files([extra], schema_mode="merge")
    snapshot = table.snapshot()
    assert result.version == 1
    assert snapshot.schema.names == ["id", "value", "ds", "score"]
    assert snapshot.schema.field("score").nullable
    assert any("metaData" in a for a in log_actions(table, 1))
    assert snapshot.to_pyarrow_table()["score"].to_pylist() == [0.5]


def test_non_nullable_columns_accept_files_without_nulls_only(tmp_path):
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("value", pa.string())])
    table = DeltaTable.create(str(tmp_path / "t"), schema)
    table.commit_files(
        [write_parquet(table.storage.root, "a/p.parquet", pa.table({"id": [1], "value": ["x"]}))]
    )
    nulls = write_parquet(
        table.storage.root, "b/p.parquet", pa.table({"id": pa.array([None], pa.int64()), "value": ["x"]})
    )
    with pytest.raises(SchemaMismatchError, match="NOT NULL"):
        table.commit_files([nulls])


# --- bad input ---------------------------------------------------------------------------


def test_bad_files_are_refused_and_nothing_is_written(table, tmp_path):
    root = table.storage.root
    with open(os.path.join(root, "notes.txt"), "w") as f:
        f.write("hello")
    os.makedirs(os.path.join(root, "x", "ds=a"))
    with open(os.path.join(root, "x", "ds=a", "junk.parquet"), "wb") as f:
        f.write(b"PAR1 not really")
    outside = tmp_path / "outside.parquet"
    pq.write_table(pa.table({"id": [1]}), outside)
    with pytest.raises(InvalidDataFileError, match=r"junk\.parquet"):
        table.commit_files(["x/ds=a/junk.parquet"])
    with pytest.raises(InvalidPathError, match="outside the table root"):
        table.commit_files([str(outside)])
    unknown = write_parquet(root, "u/region=eu/p.parquet", pa.table({"id": [1]}))
    with pytest.raises(Exception, match="region"):
        table.commit_files([unknown])
    with pytest.raises(InvalidPathError, match="hidden"):
        table.commit_files(["_delta_log/00000000000000000000.json"])
    assert table.version() == 0
    assert sorted(os.listdir(table.storage.log_dir)) == [
        "00000000000000000000.crc",
        "00000000000000000000.json",
    ]


def test_bad_partition_values_are_refused(tmp_path):
    table = DeltaTable.create(
        str(tmp_path / "t"), pa.schema([("id", pa.int64()), ("d", pa.date32())]), partition_by=["d"]
    )
    path = write_parquet(table.storage.root, "x/d=yesterday/p.parquet", pa.table({"id": [1]}))
    with pytest.raises(SchemaMismatchError, match="'yesterday' of column 'd' is not a valid date"):
        table.commit_files([path])


def test_unsupported_writer_feature_is_refused(tmp_path, log_writer):
    log_writer.commit(
        0,
        {
            "protocol": {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["allowColumnDefaults"],
            }
        },
        log_writer.metadata(),
    )
    table = DeltaTable(str(log_writer.root))
    data = write_parquet(log_writer.root, "x/p.parquet", pa.table({"id": [1]}))
    with pytest.raises(UnsupportedFeatureError, match="allowColumnDefaults") as info:
        table.commit_files([data])
    assert info.value.operation == "write"
    assert table.version() == 0


# --- new tables on first write, in-commit timestamps, checksums ---------------------------


def test_commit_creates_the_table_on_first_write(tmp_path):
    table = DeltaTable(str(tmp_path / "t"))
    path = write_parquet(tmp_path / "t", "x/ds=a/p.parquet", pa.table({"id": [1, 2]}))
    result = table.commit_files([path], partition_by=["ds"], app_id="a", app_version=1)
    assert (result.version, result.operation) == (0, "CREATE TABLE AS SELECT")
    snapshot = table.snapshot()
    assert snapshot.partition_columns == ["ds"]
    assert snapshot.app_transaction_version("a") == 1
    assert rows(table) == [(1, "a"), (2, "a")]


def test_commit_to_missing_table_without_schema_information_fails(tmp_path):
    with pytest.raises(TableNotFoundError):
        DeltaTable(str(tmp_path / "nothing")).commit_files()


def test_in_commit_timestamps_are_written_and_increase(tmp_path):
    table = DeltaTable.create(
        str(tmp_path / "t"), SCHEMA, properties={"delta.enableInCommitTimestamps": "true"}
    )
    for i in range(3):
        table.commit_files([write_parquet(table.storage.root, f"b{i}/p.parquet", pa.table({"id": [i]}))])
    stamps = [log_actions(table, v)[0]["commitInfo"]["inCommitTimestamp"] for v in range(4)]
    assert stamps == sorted(set(stamps))
    assert [h["timestamp"] for h in table.history()] == stamps[::-1]


def test_checksums_match_the_snapshot_after_every_commit(table):
    root = table.storage.root
    table.commit_files([batch(root, "a", [1, 2]), batch(root, "b", [3])], app_id="x", app_version=1)
    table.commit_files([batch(root, "a", [4])], mode="overwrite", replace_where="ds = 'a'")
    table.commit_files([batch(root, "c", [5])], mode="overwrite")
    for version in range(4):
        snapshot = table.snapshot(version)
        checksum = read_checksum(table.storage, version)
        files = snapshot.files()
        assert checksum["numFiles"] == files.num_rows
        assert checksum["tableSizeBytes"] == sum(files.column("size").to_pylist())
        assert checksum["metadata"]["id"] == snapshot.metadata.id
        assert checksum["protocol"]["minWriterVersion"] == snapshot.protocol.min_writer_version
        assert {t["appId"]: t["version"] for t in checksum["setTransactions"]} == {
            k: v.version for k, v in snapshot.transactions.items()
        }


def test_no_checksum_without_the_previous_one(table):
    os.remove(os.path.join(table.storage.log_dir, "00000000000000000000.crc"))
    table.commit_files([batch(table.storage.root, "a", [1])])
    assert read_checksum(table.storage, 1) is None


# --- post-commit checkpoints ------------------------------------------------------------------


def test_every_tenth_version_is_checkpointed_like_spark(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"])
    for i in range(10):
        table.commit_files([batch(table.storage.root, "a", [i])])
    with open(os.path.join(table.storage.log_dir, "_last_checkpoint")) as f:
        assert json.load(f)["version"] == 10
    assert table.snapshot().segment.checkpoint_version == 10
    assert len(rows(table)) == 10


def test_checkpoint_interval_property_and_opt_out(tmp_path):
    table = DeltaTable.create(
        str(tmp_path / "t"), SCHEMA, partition_by=["ds"], properties={"delta.checkpointInterval": "2"}
    )
    table.commit_files([batch(table.storage.root, "a", [1])])
    table.commit_files([batch(table.storage.root, "a", [2])], auto_checkpoint=False)
    assert not os.path.exists(os.path.join(table.storage.log_dir, "_last_checkpoint"))
    table.commit_files([batch(table.storage.root, "a", [3])])
    table.commit_files([batch(table.storage.root, "a", [4])])
    assert table.snapshot().segment.checkpoint_version == 4


def test_explicit_checkpoint(table):
    table.commit_files([batch(table.storage.root, "a", [1])])
    result = table.checkpoint()
    assert result.version == 1 and result.num_add_files == 1
    assert table.snapshot().segment.checkpoint_version == 1


def test_vacuum_through_the_table_deletes_only_the_replaced_file(table):
    old = batch(table.storage.root, "a", [1])
    table.commit_files([old])
    new = batch(table.storage.root, "a", [2])
    table.commit_files([new], mode="overwrite")
    with pytest.raises(Exception, match="retention"):
        table.vacuum(retention="0 hours")
    result = table.vacuum(retention="0 hours", enforce_retention_duration=False)
    assert result.num_files == 1
    assert not os.path.exists(os.path.join(table.storage.root, old))
    assert os.path.exists(os.path.join(table.storage.root, new))
    assert rows(table) == [(2, "a")]


def test_commits_through_an_explicit_local_filesystem(tmp_path):
    import fsspec

    table = DeltaTable.create(
        str(tmp_path / "t"), SCHEMA, partition_by=["ds"], filesystem=fsspec.filesystem("file")
    )
    table.commit_files([batch(table.storage.root, "a", [1])])
    assert table.version() == 1 and rows(table) == [(1, "a")]


def test_partition_values_checked_for_one_table_are_checked_again_for_another(tmp_path):
    """The commit's partition-value check remembers values per table schema (the write's early
    check and the transaction's share it): a value fine for a ``long`` column is still refused
    for an ``int`` column of another table, and nothing is written there."""
    data = pa.table({"id": pa.array([1], pa.int64())})
    for name, part_type in (("wide", pa.int64()), ("narrow", pa.int32())):
        root = tmp_path / name
        (root / "out" / "p=3000000000").mkdir(parents=True)
        pq.write_table(data, root / "out" / "p=3000000000" / "f.parquet")
        schema = pa.schema([("id", pa.int64()), ("p", part_type)])
        table = DeltaTable(str(root))
        if name == "wide":
            assert table.commit_files(prefix="out", schema=schema, partition_by=["p"]).committed
        else:
            with pytest.raises(InvalidPartitionValueError, match="3000000000"):
                table.commit_files(prefix="out", schema=schema, partition_by=["p"])
            assert not (root / "_delta_log").exists()
