"""Checkpoints written by the core: content, layout, `_last_checkpoint`, policy and faults.

Tables are built with the ``log_writer`` fixture (raw commits, for the cases real writers
rarely produce) or with delta-rs; the written Parquet is read back with pyarrow and with
the core's own read path, and compared with the state replayed from the JSON commits.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
import shutil
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    CorruptLogError,
    InvalidTablePropertyError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.log.logfiles import LogFileKind
from airflow_delta_provider.core.maintenance.checkpoint import (
    CheckpointResult,
    canonical_json,
    last_checkpoint_checksum,
    should_checkpoint,
    spark_partition_ids,
)
from airflow_delta_provider.core.protocol.table_config import TableConfig

CORPUS = Path(__file__).resolve().parents[3] / "conformance" / "corpus"
NOW = 1_800_000_000_000  # ms: the clock the tests checkpoint at
DAY = 86_400_000


# --- helpers ----------------------------------------------------------------------------


def state(snapshot: Any) -> dict[str, Any]:
    """Everything a checkpoint must preserve, in comparable form (dataChange aside: a
    checkpoint stores false, as Spark's state does)."""
    files = snapshot.files().drop_columns(["data_change"]).sort_by("path")
    tombstones = snapshot.tombstones().drop_columns(["data_change"]).sort_by("path")
    return {
        "version": snapshot.version,
        "protocol": snapshot.protocol,
        "metadata": snapshot.metadata,
        "transactions": snapshot.transactions,
        "domains": snapshot.domain_metadata,
        "files": files.to_pylist(),
        "tombstones": tombstones.to_pylist(),
    }


def drop_commits_through(root: Path, version: int) -> None:
    """Delete the JSON commits up to ``version``: a reader must then use the checkpoint."""
    for path in (root / "_delta_log").glob("*.json"):
        if path.name[:20].isdigit() and int(path.name[:20]) <= version and "compacted" not in path.name:
            path.unlink()


def read_rows(path: Path, column: str) -> list[dict[str, Any]]:
    table = pq.read_table(path)
    return [row for row in table.column(column).to_pylist() if row is not None]


def last_checkpoint(root: Path) -> dict[str, Any]:
    return json.loads((root / "_delta_log" / "_last_checkpoint").read_text())


def partitioned_schema_string() -> str:
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": {}},
        {"name": "day", "type": "date", "nullable": True, "metadata": {}},
    ]
    return json.dumps({"type": "struct", "fields": fields})


# --- _last_checkpoint checksum ------------------------------------------------------------


def test_canonical_json_matches_the_protocol_example():
    payload = json.loads(
        '{"k0":"\'v 0\'", "checksum": "adsaskfljadfkjadfkj", "k1":{"k2": 2, "k3": ["v3", [1, 2], '
        '{"k4": "v4", "k5": ["v5", "v6", "v7"]}]}}'
    )
    assert canonical_json(payload) == (
        '"k0"="%27v%200%27","k1"+"k2"=2,"k1"+"k3"+0="v3","k1"+"k3"+1+0=1,"k1"+"k3"+1+1=2,'
        '"k1"+"k3"+2+"k4"="v4","k1"+"k3"+2+"k5"+0="v5","k1"+"k3"+2+"k5"+1="v6","k1"+"k3"+2+"k5"+2="v7"'
    )
    # The digest PROTOCOL.md gives for this example.
    assert last_checkpoint_checksum(payload) == "6a92d155a59bf2eecbd4b4ec7fd1f875"


def _corpus_hints_with_checksum() -> list[Path]:
    hints = []
    for path in sorted((CORPUS / "tables").rglob("_last_checkpoint")):
        try:
            payload = json.loads(path.read_text())
        except ValueError:
            continue
        if isinstance(payload, dict) and "checksum" in payload:
            hints.append(path)
    return hints


@pytest.mark.parametrize(
    "path", _corpus_hints_with_checksum(), ids=lambda p: str(p.relative_to(CORPUS / "tables").parent.parent)
)
def test_checksum_matches_what_spark_wrote(path: Path):
    payload = json.loads(path.read_text())
    assert last_checkpoint_checksum(payload) == payload["checksum"]


def test_checksum_covers_the_corpus():
    # Spark-written hints with nested v2Checkpoint, checkpointSchema and empty objects.
    assert len(_corpus_hints_with_checksum()) >= 20


def test_checksum_changes_with_any_field_and_ignores_itself():
    payload = {"version": 10, "size": 13, "sizeInBytes": 1234, "numOfAddFiles": 10}
    digest = last_checkpoint_checksum(payload)
    assert last_checkpoint_checksum({**payload, "checksum": "x"}) == digest
    assert last_checkpoint_checksum({**payload, "size": 14}) != digest
    assert last_checkpoint_checksum(dict(reversed(list(payload.items())))) == digest


def test_canonical_json_refuses_non_json_values():
    with pytest.raises(TypeError, match="Cannot canonicalise"):
        canonical_json({"version": object()})


# --- Spark's hash partitioning ----------------------------------------------------------


def test_partition_ids_place_rows_as_spark_did_in_a_corpus_multipart_checkpoint():
    log = CORPUS / "tables" / "delta-kernel-rs" / "multi-part-checkpoint" / "delta" / "_delta_log"
    parts = sorted(log.glob("*.checkpoint.0*.parquet"))
    assert len(parts) == 2
    for number, path in enumerate(parts):
        table = pq.read_table(path)
        add_paths = pa.compute.struct_field(table.column("add"), "path")
        remove_paths = pa.compute.struct_field(table.column("remove"), "path")
        keys = pa.compute.coalesce(add_paths, remove_paths).combine_chunks()
        assert set(spark_partition_ids([keys], 2).tolist()) == {number}


@pytest.mark.spark
def test_murmur3_partition_ids_equal_spark_hash(spark_session):
    from pyspark.sql import functions as F

    values = ["", "a", "ab", "abc", "abcd", "abcde", "part=1/é-ü-😀.parquet", None, "x" * 77, "ÿ"]
    frame = spark_session.createDataFrame([(v,) for v in values], "s string")
    hashes = [row[0] for row in frame.select(F.hash("s")).collect()]
    for parts in (1, 2, 3, 7):
        expected = [((h % parts) + parts) % parts for h in hashes]
        assert spark_partition_ids([pa.array(values, pa.string())], parts).tolist() == expected
    pairs = [("p1", "u1"), ("p2", None), ("p3", "i2@4")]
    frame = spark_session.createDataFrame(pairs, "a string, b string")
    expected = [((h % 5) + 5) % 5 for (h,) in frame.select(F.hash("a", "b")).collect()]
    keys = [pa.array([p[0] for p in pairs]), pa.array([p[1] for p in pairs], pa.string())]
    assert spark_partition_ids(keys, 5).tolist() == expected


@pytest.fixture(scope="module")
def spark_session():
    pyspark = pytest.importorskip("pyspark.sql")
    session = (
        pyspark.SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    yield session
    session.stop()


def test_partition_ids_refuse_zero_parts():
    with pytest.raises(ValueError, match="at least 1"):
        spark_partition_ids([pa.array(["a"])], 0)


# --- automatic checkpoint policy ----------------------------------------------------------


def test_should_checkpoint_follows_delta_default_interval():
    due = [v for v in range(0, 35) if should_checkpoint(v, TableConfig())]
    assert due == [v for v in range(1, 35) if v % 10 == 0]  # Delta's default interval
    assert should_checkpoint(0, TableConfig()) is False


def test_should_checkpoint_uses_the_table_interval():
    config = TableConfig({"delta.checkpointInterval": "3"})
    assert [v for v in range(10) if should_checkpoint(v, config)] == [3, 6, 9]
    assert TableConfig({"delta.checkpointInterval": " 25 "}).checkpoint_interval.value == 25
    assert should_checkpoint(1, TableConfig({"delta.checkpointInterval": "1"}))
    # The provider default where the table sets none; the table's own wins.
    assert should_checkpoint(4, TableConfig({}, {"checkpoint_interval": 2}))
    assert not should_checkpoint(
        4, TableConfig({"delta.checkpointInterval": "3"}, {"checkpoint_interval": 2})
    )


@pytest.mark.parametrize("value", ["0", "-10", "ten", "1.5", "", "10 commits"])
def test_should_checkpoint_refuses_invalid_intervals(value: str):
    with pytest.raises(InvalidTablePropertyError, match=r"delta\.checkpointInterval") as caught:
        should_checkpoint(10, TableConfig({"delta.checkpointInterval": value}))
    assert repr(value) in str(caught.value)


@pytest.mark.parametrize("version", [-1, True, 1.0, "3"])
def test_should_checkpoint_refuses_bad_versions(version: Any):
    with pytest.raises(ValueError, match="version"):
        should_checkpoint(version, TableConfig())


# --- classic checkpoints ------------------------------------------------------------------


def test_classic_checkpoint_holds_the_state_and_reads_back(log_writer):
    w = log_writer
    w.commit(
        0,
        w.commit_info("CREATE TABLE"),
        w.protocol(),
        w.metadata({"delta.checkpointInterval": "5"}, ["day"], partitioned_schema_string()),
        w.add("day=2024-01-01/a.parquet", partitionValues={"day": "2024-01-01"}, stats='{"numRecords":3}'),
        w.add("day=2024-01-02/b.parquet", partitionValues={"day": "2024-01-02"}, tags={"k": "v"}),
    )
    w.commit(1, w.commit_info(), w.txn("app-1", 7, NOW - 5), w.add("day=2024-01-03/c.parquet"))
    w.commit(
        2,
        w.commit_info("DELETE"),
        w.remove(
            "day=2024-01-02/b.parquet", NOW - 1000, extendedFileMetadata=True, size=10, partitionValues={}
        ),
    )
    table = DeltaTable(str(w.root))
    before = state(table.snapshot())
    result = table.checkpoint(now_ms=NOW)

    assert isinstance(result, CheckpointResult)
    assert result.version == 2 and result.kind == "classic"
    assert result.files == ["00000000000000000002.checkpoint.parquet"]
    # protocol + metaData + 1 txn + 2 live files + 1 tombstone
    assert (result.num_actions, result.num_add_files) == (6, 2)
    checkpoint = w.log / result.files[0]
    assert result.size_in_bytes == checkpoint.stat().st_size
    assert pq.read_table(checkpoint).num_rows == 6
    assert result.last_checkpoint_written
    assert json.loads(json.dumps(result.to_dict())) == result.to_dict()

    drop_commits_through(w.root, 2)
    snapshot = DeltaTable(str(w.root)).snapshot()
    assert snapshot.segment.checkpoint is not None and snapshot.segment.checkpoint.version == 2
    assert state(snapshot) == before


def test_classic_checkpoint_schema_and_action_rows(log_writer):
    w = log_writer
    w.commit(0, w.protocol(), w.metadata(), w.add("a.parquet", stats='{"numRecords":1}'))
    w.commit(1, w.remove("gone.parquet", NOW - 10, tags={"t": "x"}, stats='{"numRecords":1}'))
    path = w.log / DeltaTable(str(w.root)).checkpoint(now_ms=NOW).files[0]
    schema = pq.read_schema(path)
    # Spark's column order; no V2 columns in a V1 checkpoint.
    assert schema.names == ["txn", "add", "remove", "metaData", "protocol", "domainMetadata"]
    remove_fields = [f.name for f in schema.field("remove").type]
    assert "stats" not in remove_fields and "tags" not in remove_fields
    add_fields = [f.name for f in schema.field("add").type]
    assert add_fields[-1] == "stats" and add_fields[0] == "path"
    adds = read_rows(path, "add")
    assert [(a["path"], a["dataChange"], a["stats"]) for a in adds] == [
        ("a.parquet", False, '{"numRecords":1}')
    ]
    assert [(r["path"], r["dataChange"]) for r in read_rows(path, "remove")] == [("gone.parquet", False)]
    protocol = read_rows(path, "protocol")
    assert protocol == [
        {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": None, "writerFeatures": None}
    ]
    # The non-file actions have a row group of their own, so metadata-only readers skip the rest.
    metadata = pq.ParquetFile(path).metadata
    assert metadata.num_row_groups == 2 and metadata.row_group(0).num_rows == 2


def _spark_v1_checkpoints() -> list[Path]:
    """Classic V1 checkpoints written by Spark 3 or later in the corpus (Spark 2's layout was older)."""
    found = []
    for path in sorted((CORPUS / "tables").rglob("*.checkpoint.parquet")):
        metadata = pq.ParquetFile(path).metadata
        spark_version = (metadata.metadata or {}).get(b"org.apache.spark.version", b"0").decode()
        if int(spark_version.split(".")[0]) >= 3 and "checkpointMetadata" not in pq.read_schema(path).names:
            found.append(path)
    return found


#: Fields the protocol added over time (or made optional): a Spark version may lack them.
OPTIONAL_FIELDS = {
    "baseRowId",
    "clusteringProvider",
    "defaultRowCommitVersion",
    "deletionVector",
    "lastUpdated",
    "maxRowIndex",
    "partitionValues_parsed",
    "readerFeatures",
    "stats",
    "stats_parsed",
    "tags",
    "writerFeatures",
}


#: Top-level columns some Spark versions wrote and the core does not: an always-null ``cdc``
#: (the protocol never puts cdc actions in checkpoints), a Databricks preview's
#: ``rowIdHighWaterMark``, and the ``unknown`` action of Spark's schema-evolvability test
#: table; ``domainMetadata`` and ``txn`` are absent from older Spark checkpoints.
SPARK_ONLY_COLUMNS = {"cdc", "rowIdHighWaterMark", "unknown", "domainMetadata", "txn"}


@pytest.mark.parametrize(
    "spark_checkpoint", _spark_v1_checkpoints(), ids=lambda p: p.relative_to(CORPUS / "tables").parts[1]
)
def test_checkpoint_schema_matches_what_spark_writes(tmp_path: Path, spark_checkpoint: Path):
    """Column by column, the core's checkpoint has Spark's names, order and types.

    Fields only one side writes must be optional ones the protocol added over time;
    everything both write must agree in order and type, nested fields included.
    """
    spark = pq.read_schema(spark_checkpoint)
    root = tmp_path / "table"
    shutil.copytree(spark_checkpoint.parent.parent, root)
    table = DeltaTable(str(root))
    try:
        result = table.checkpoint(int(spark_checkpoint.name[:20]), now_ms=NOW)
    except UnsupportedFeatureError:
        pytest.skip("the core refuses this table")
    ours = pq.read_schema(root / "_delta_log" / result.files[0])
    assert {"add", "remove", "metaData", "protocol"} <= set(spark.names) & set(ours.names)
    _assert_same_struct(pa.struct(list(ours)), pa.struct(list(spark)), "checkpoint")


def _assert_same_struct(ours: pa.DataType, spark: pa.DataType, where: str) -> None:
    if not (pa.types.is_struct(ours) and pa.types.is_struct(spark)):
        # Parquet list element names differ between writers ("element" vs "item"); not the type.
        assert str(ours).replace("<item:", "<element:") == str(spark).replace("<item:", "<element:"), where
        return
    our_fields = {f.name: f.type for f in ours}
    spark_fields = {f.name: f.type for f in spark}
    shared = [name for name in spark_fields if name in our_fields]
    assert shared == [name for name in our_fields if name in spark_fields], f"{where}: field order"
    assert set(our_fields) ^ set(spark_fields) <= OPTIONAL_FIELDS | SPARK_ONLY_COLUMNS, where
    for name in shared:
        if name not in ("stats_parsed", "partitionValues_parsed"):  # per-table types, tested below
            _assert_same_struct(our_fields[name], spark_fields[name], f"{where}.{name}")


def test_tombstones_expire_per_deleted_file_retention(log_writer):
    w = log_writer
    w.commit(
        0,
        w.protocol(),
        w.metadata({"delta.deletedFileRetentionDuration": "interval 1 days"}),
        w.add("live.parquet"),
    )
    w.commit(
        1,
        w.remove("old.parquet", NOW - DAY - 1),
        w.remove("edge.parquet", NOW - DAY),
        w.remove("fresh.parquet", NOW - DAY + 1),
        w.remove("recent.parquet", NOW - 5),
    )
    path = w.log / DeltaTable(str(w.root)).checkpoint(now_ms=NOW).files[0]
    # Delta keeps a tombstone while deletionTimestamp > now - retention.
    assert sorted(r["path"] for r in read_rows(path, "remove")) == ["fresh.parquet", "recent.parquet"]
    # A later clock expires more; the default retention (7 days) keeps them all.
    later = w.log / DeltaTable(str(w.root)).checkpoint(now_ms=NOW + DAY).files[0]
    assert [r["path"] for r in read_rows(later, "remove")] == []


def test_tombstones_use_the_default_retention_of_seven_days(log_writer):
    w = log_writer
    w.commit(0, w.protocol(), w.metadata(), w.add("live.parquet"))
    w.commit(1, w.remove("a.parquet", NOW - 7 * DAY + 1), w.remove("b.parquet", NOW - 7 * DAY - 1))
    path = w.log / DeltaTable(str(w.root)).checkpoint(now_ms=NOW).files[0]
    assert [r["path"] for r in read_rows(path, "remove")] == ["a.parquet"]


def test_txns_expire_per_set_transaction_retention(log_writer):
    w = log_writer
    w.commit(
        0,
        w.protocol(),
        w.metadata({"delta.setTransactionRetentionDuration": "interval 1 days"}),
        w.txn("old", 1, NOW - 2 * DAY),
        w.txn("fresh", 2, NOW - 1000),
        w.txn("no-timestamp", 3),
    )
    w.commit(1, w.txn("fresh", 5, NOW - 10))
    path = w.log / DeltaTable(str(w.root)).checkpoint(now_ms=NOW).files[0]
    # As Delta: with a retention set, a txn without lastUpdated counts as expired.
    assert read_rows(path, "txn") == [{"appId": "fresh", "version": 5, "lastUpdated": NOW - 10}]


def test_txns_never_expire_without_a_retention(log_writer):
    w = log_writer
    w.commit(0, w.protocol(), w.metadata(), w.txn("old", 1, 1), w.txn("no-timestamp", 3))
    path = w.log / DeltaTable(str(w.root)).checkpoint(now_ms=NOW).files[0]
    assert sorted((r["appId"], r["version"], r["lastUpdated"]) for r in read_rows(path, "txn")) == [
        ("no-timestamp", 3, None),
        ("old", 1, 1),
    ]


def test_domain_metadata_live_ones_only(log_writer):
    w = log_writer
    domain = {"domainMetadata": {"domain": "delta.clustering", "configuration": '{"c":1}', "removed": False}}
    user = {"domainMetadata": {"domain": "app.settings", "configuration": "{}", "removed": False}}
    w.commit(
        0, w.protocol(3, 7, readerFeatures=[], writerFeatures=["domainMetadata"]), w.metadata(), domain, user
    )
    w.commit(1, {"domainMetadata": {"domain": "app.settings", "configuration": "", "removed": True}})
    table = DeltaTable(str(w.root))
    before = state(table.snapshot())
    path = w.log / table.checkpoint(now_ms=NOW).files[0]
    assert read_rows(path, "domainMetadata") == [
        {"domain": "delta.clustering", "configuration": '{"c":1}', "removed": False}
    ]
    protocol = read_rows(path, "protocol")[0]
    assert protocol["readerFeatures"] == [] and protocol["writerFeatures"] == ["domainMetadata"]
    drop_commits_through(w.root, 1)
    assert state(DeltaTable(str(w.root)).snapshot()) == before


def test_deletion_vectors_and_row_tracking_fields_are_carried(log_writer):
    w = log_writer
    dv = {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 4,
        "sizeInBytes": 40,
        "cardinality": 6,
    }
    w.commit(
        0,
        w.protocol(
            3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors", "rowTracking"]
        ),
        w.metadata(),
        w.add("a.parquet", deletionVector=dv, baseRowId=10, defaultRowCommitVersion=0),
    )
    w.commit(1, w.remove("b.parquet", NOW - 1, deletionVector=dv, baseRowId=3))
    table = DeltaTable(str(w.root))
    before = state(table.snapshot())
    table.checkpoint(now_ms=NOW)
    drop_commits_through(w.root, 1)
    after = state(DeltaTable(str(w.root)).snapshot())
    assert after == before
    assert after["files"][0]["deletion_vector"]["cardinality"] == 6
    assert after["files"][0]["base_row_id"] == 10


# --- stats and partition values as structs -------------------------------------------------


STRUCT_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "i", "type": "integer", "nullable": True, "metadata": {}},
            {"name": "s", "type": "string", "nullable": True, "metadata": {}},
            {"name": "d", "type": "date", "nullable": True, "metadata": {}},
            {"name": "ts", "type": "timestamp", "nullable": True, "metadata": {}},
            {"name": "dec", "type": "decimal(10,2)", "nullable": True, "metadata": {}},
            {"name": "f", "type": "double", "nullable": True, "metadata": {}},
            {"name": "b", "type": "boolean", "nullable": True, "metadata": {}},
            {
                "name": "nested",
                "type": {
                    "type": "struct",
                    "fields": [{"name": "x", "type": "long", "nullable": True, "metadata": {}}],
                },
                "nullable": True,
                "metadata": {},
            },
            {"name": "part", "type": "date", "nullable": True, "metadata": {}},
        ],
    }
)
STATS = (
    '{"numRecords":4,"minValues":{"i":1,"s":"a","d":"2024-02-01","ts":"2024-02-01T10:00:00.000Z",'
    '"dec":1.25,"f":-0.5,"nested":{"x":7}},"maxValues":{"i":9,"s":"z","d":"2024-02-09",'
    '"ts":"2024-02-09T10:00:00.500Z","dec":99.99,"f":2.5,"nested":{"x":70}},'
    '"nullCount":{"i":0,"s":1,"d":0,"ts":0,"dec":0,"f":0,"b":2,"nested":{"x":0}},"extra":{"ignored":1}}'
)


def _struct_stats_table(w: Any, **configuration: str) -> None:
    w.commit(
        0,
        w.protocol(),
        w.metadata({"delta.checkpoint.writeStatsAsStruct": "true", **configuration}, ["part"], STRUCT_SCHEMA),
        w.add("part=2024-01-01/a.parquet", partitionValues={"part": "2024-01-01"}, stats=STATS),
        w.add("part=__HIVE_DEFAULT_PARTITION__/b.parquet", partitionValues={"part": None}),
        w.add("part=2024-01-03/c.parquet", partitionValues={"part": "2024-01-03"}, stats='{"numRecords":0}'),
    )


def test_stats_as_struct_parses_every_type(log_writer):
    _struct_stats_table(log_writer)
    path = log_writer.log / DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW).files[0]
    add_type = pq.read_schema(path).field("add").type
    assert [f.name for f in add_type][-3:] == ["stats", "partitionValues_parsed", "stats_parsed"]
    adds = {a["path"]: a for a in read_rows(path, "add")}
    first = adds["part=2024-01-01/a.parquet"]
    assert first["partitionValues_parsed"] == {"part": dt.date(2024, 1, 1)}
    parsed = first["stats_parsed"]
    assert parsed["numRecords"] == 4
    assert parsed["minValues"] == {
        "i": 1,
        "s": "a",
        "d": dt.date(2024, 2, 1),
        "ts": dt.datetime(2024, 2, 1, 10, tzinfo=dt.UTC),
        "dec": Decimal("1.25"),
        "f": -0.5,
        "nested": {"x": 7},
    }
    assert parsed["maxValues"]["ts"] == dt.datetime(2024, 2, 9, 10, 0, 0, 500_000, tzinfo=dt.UTC)
    assert parsed["nullCount"] == {
        "i": 0,
        "s": 1,
        "d": 0,
        "ts": 0,
        "dec": 0,
        "f": 0,
        "b": 2,
        "nested": {"x": 0},
    }
    # Booleans get no min/max (Spark collects none); the partition column is not in the stats.
    assert "b" not in parsed["minValues"] and "part" not in parsed["nullCount"]
    missing = adds["part=__HIVE_DEFAULT_PARTITION__/b.parquet"]
    assert missing["stats_parsed"] is None and missing["partitionValues_parsed"] == {"part": None}
    assert adds["part=2024-01-03/c.parquet"]["stats_parsed"]["minValues"] is None


def test_stats_only_as_struct_read_back_as_json(log_writer):
    _struct_stats_table(log_writer, **{"delta.checkpoint.writeStatsAsJson": "false"})
    table = DeltaTable(str(log_writer.root))
    before = table.snapshot().files().sort_by("path")
    path = log_writer.log / table.checkpoint(now_ms=NOW).files[0]
    assert "stats" not in [f.name for f in pq.read_schema(path).field("add").type]
    drop_commits_through(log_writer.root, 0)
    after = DeltaTable(str(log_writer.root)).snapshot().files().sort_by("path")
    # The read path rebuilds JSON stats from stats_parsed: same numbers, typed values as text.
    for ours, original in zip(
        after.column("stats").to_pylist(), before.column("stats").to_pylist(), strict=True
    ):
        if original is None:
            assert ours is None
            continue
        ours_json, original_json = json.loads(ours), json.loads(original)
        assert ours_json["numRecords"] == original_json["numRecords"]
        if "minValues" in original_json:
            assert ours_json["minValues"]["i"] == original_json["minValues"]["i"]
            assert ours_json["nullCount"] == original_json["nullCount"]


def test_stats_with_values_arrow_cannot_parse_fall_back_per_row(log_writer):
    w = log_writer
    schema = json.dumps(
        {"type": "struct", "fields": [{"name": "f", "type": "double", "nullable": True, "metadata": {}}]}
    )
    w.commit(
        0,
        w.protocol(),
        w.metadata({"delta.checkpoint.writeStatsAsStruct": "true"}, [], schema),
        w.add("nan.parquet", stats='{"numRecords":2,"minValues":{"f":"NaN"},"maxValues":{"f":3.5}}'),
        w.add("bad.parquet", stats="not json"),
        w.add("ok.parquet", stats='{"numRecords":1,"minValues":{"f":1},"nullCount":{"f":0}}'),
    )
    path = w.log / DeltaTable(str(w.root)).checkpoint(now_ms=NOW).files[0]
    parsed = {a["path"]: a["stats_parsed"] for a in read_rows(path, "add")}
    assert parsed["bad.parquet"] is None
    assert parsed["ok.parquet"]["minValues"] == {"f": 1.0} and parsed["ok.parquet"]["nullCount"] == {"f": 0}
    nan = parsed["nan.parquet"]
    assert nan["numRecords"] == 2 and nan["maxValues"] == {"f": 3.5}
    assert nan["minValues"]["f"] != nan["minValues"]["f"]  # NaN


@pytest.mark.parametrize("key", ["delta.checkpoint.writeStatsAsJson", "delta.checkpoint.writeStatsAsStruct"])
def test_invalid_stats_flags_are_refused(log_writer, key: str):
    w = log_writer
    w.commit(0, w.protocol(), w.metadata({key: "yes"}), w.add("a.parquet"))
    with pytest.raises(InvalidTablePropertyError, match=key.replace(".", r"\.")):
        DeltaTable(str(w.root)).checkpoint(now_ms=NOW)
    assert not list(w.log.glob("*.checkpoint*"))


# --- multi-part checkpoints -------------------------------------------------------------


def _many_files(w: Any, count: int, *, tombstones: int = 0) -> None:
    w.commit(0, w.protocol(), w.metadata(), *(w.add(f"f{i:03d}.parquet") for i in range(count)))
    if tombstones:
        w.commit(1, *(w.remove(f"f{i:03d}.parquet", NOW - 10) for i in range(tombstones)))


def test_multipart_checkpoint_clusters_rows_by_spark_hash(log_writer):
    _many_files(log_writer, 40, tombstones=5)
    table = DeltaTable(str(log_writer.root))
    before = state(table.snapshot())
    result = table.checkpoint(parts=3, now_ms=NOW)
    assert result.kind == "multipart"
    assert result.files == [f"{1:020d}.checkpoint.{p:010d}.{3:010d}.parquet" for p in (1, 2, 3)]
    total = 0
    for number, name in enumerate(result.files):
        frame = pq.read_table(log_writer.log / name)
        total += frame.num_rows
        paths = pa.compute.coalesce(
            pa.compute.struct_field(frame.column("add"), "path"),
            pa.compute.struct_field(frame.column("remove"), "path"),
        ).combine_chunks()
        assert set(spark_partition_ids([paths], 3).tolist()) <= {number}
    assert total == result.num_actions == 2 + 35 + 5
    hint = last_checkpoint(log_writer.root)
    assert hint["parts"] == 3 and hint["size"] == result.num_actions
    assert hint["sizeInBytes"] == sum((log_writer.log / n).stat().st_size for n in result.files)
    drop_commits_through(log_writer.root, 1)
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.segment.checkpoint.kind is LogFileKind.MULTIPART_CHECKPOINT
    assert state(snapshot) == before


def test_multipart_when_actions_exceed_the_part_size(log_writer):
    _many_files(log_writer, 10)
    result = DeltaTable(str(log_writer.root)).checkpoint(part_size=4, now_ms=NOW)
    assert result.kind == "multipart" and len(result.files) == 3  # ceil(10 / 4)
    single = DeltaTable(str(log_writer.root)).checkpoint(part_size=4, parts=1, now_ms=NOW)
    assert single.kind == "classic" and "parts" not in last_checkpoint(log_writer.root)


def test_multipart_parts_are_written_even_when_empty(log_writer):
    _many_files(log_writer, 1)
    result = DeltaTable(str(log_writer.root)).checkpoint(parts=4, now_ms=NOW)
    assert len(result.files) == 4
    assert sum(pq.read_metadata(log_writer.log / n).num_rows for n in result.files) == 3
    assert (
        DeltaTable(str(log_writer.root)).snapshot().segment.checkpoint.kind
        is LogFileKind.MULTIPART_CHECKPOINT
    )


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "2"])
def test_bad_part_arguments_are_refused(log_writer, bad: Any):
    log_writer.basic(1)
    table = DeltaTable(str(log_writer.root))
    with pytest.raises(ValueError, match="parts must be a positive integer"):
        table.checkpoint(parts=bad)
    with pytest.raises(ValueError, match="part_size must be a positive integer"):
        table.checkpoint(part_size=bad)


# --- V2 checkpoints -----------------------------------------------------------------------


def _v2_table(w: Any, count: int) -> None:
    w.commit(
        0,
        w.protocol(3, 7, readerFeatures=["v2Checkpoint"], writerFeatures=["v2Checkpoint"]),
        w.metadata({"delta.checkpointPolicy": "v2"}),
        w.txn("app", 3, NOW),
        *(w.add(f"f{i:03d}.parquet") for i in range(count)),
    )
    w.commit(1, w.remove("f000.parquet", NOW - 10))


def test_v2_small_table_gets_a_classic_named_v2_checkpoint(log_writer):
    _v2_table(log_writer, 5)
    table = DeltaTable(str(log_writer.root))
    before = state(table.snapshot())
    result = table.checkpoint(parts=None, now_ms=NOW)
    assert result.kind == "v2" and result.files == [f"{1:020d}.checkpoint.parquet"]
    path = log_writer.log / result.files[0]
    assert read_rows(path, "checkpointMetadata") == [{"version": 1, "tags": None}]
    assert read_rows(path, "sidecar") == []
    assert result.num_actions == 1 + 2 + 1 + 4 + 1  # checkpointMetadata, protocol+metaData, txn, files
    drop_commits_through(log_writer.root, 1)
    assert state(DeltaTable(str(log_writer.root)).snapshot()) == before


def test_v2_large_table_gets_sidecars_never_multipart(log_writer):
    _v2_table(log_writer, 9)
    table = DeltaTable(str(log_writer.root))
    before = state(table.snapshot())
    result = table.checkpoint(part_size=3, now_ms=NOW)  # 8 adds + 1 tombstone -> 3 sidecars
    assert result.kind == "v2"
    top, *sidecars = result.files
    assert (
        top.startswith(f"{1:020d}.checkpoint.") and top.endswith(".parquet") and len(top) == 20 + 12 + 37 + 7
    )
    assert len(sidecars) == 3 and all(s.startswith("_sidecars/") for s in sidecars)
    multipart = re.compile(r"\.checkpoint\.\d{10}\.\d{10}\.parquet$")
    assert not [p for p in log_writer.log.iterdir() if multipart.search(p.name)]
    top_path = log_writer.log / top
    assert read_rows(top_path, "add") == [] and read_rows(top_path, "remove") == []
    actions = read_rows(top_path, "sidecar")
    assert sorted(f"_sidecars/{a['path']}" for a in actions) == sorted(sidecars)
    for action in actions:
        file = log_writer.log / "_sidecars" / action["path"]
        assert action["sizeInBytes"] == file.stat().st_size
        assert pq.read_schema(file).names == ["add", "remove"]
    assert sum(pq.read_metadata(log_writer.log / s).num_rows for s in sidecars) == 9
    assert result.num_actions == 1 + 2 + 1 + 3 + 9
    assert "parts" not in last_checkpoint(log_writer.root)
    drop_commits_through(log_writer.root, 1)
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.segment.checkpoint.kind is LogFileKind.UUID_CHECKPOINT
    assert state(snapshot) == before


# --- _last_checkpoint ---------------------------------------------------------------------


def test_last_checkpoint_fields_and_checksum(log_writer):
    log_writer.basic(3)
    result = DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW)
    hint = last_checkpoint(log_writer.root)
    assert set(hint) == {"version", "size", "sizeInBytes", "numOfAddFiles", "checksum"}  # no "parts"
    assert (hint["version"], hint["size"], hint["numOfAddFiles"]) == (2, 5, 3)
    assert hint["sizeInBytes"] == result.size_in_bytes
    assert hint["checksum"] == hashlib.md5(canonical_json(hint).encode()).hexdigest()


def test_last_checkpoint_never_moves_backwards(log_writer):
    log_writer.basic(6)
    table = DeltaTable(str(log_writer.root))
    assert table.checkpoint(4, now_ms=NOW).last_checkpoint_written
    older = table.checkpoint(2, now_ms=NOW)
    assert older.version == 2 and not older.last_checkpoint_written
    assert (log_writer.log / f"{2:020d}.checkpoint.parquet").exists()
    assert last_checkpoint(log_writer.root)["version"] == 4
    # The same version again rewrites it (checkpoints of one version are interchangeable).
    assert table.checkpoint(4, now_ms=NOW).last_checkpoint_written
    assert table.checkpoint(now_ms=NOW).version == 5
    assert last_checkpoint(log_writer.root)["version"] == 5


def _dangle_missing(log_writer: Any, version: int) -> None:
    pass  # nothing at the hinted version


def _dangle_empty(log_writer: Any, version: int) -> None:
    log_writer.raw(f"{version:020d}.checkpoint.parquet", b"")  # zero bytes: an interrupted write


def _dangle_incomplete_multipart(log_writer: Any, version: int) -> None:
    log_writer.raw(f"{version:020d}.checkpoint.0000000001.0000000002.parquet", b"PAR1")  # part 2 missing


DANGLING_HINTS = [
    ("missing", _dangle_missing, {"version": 100, "size": 3}),
    ("zero-byte", _dangle_empty, {"version": 100, "size": 3}),
    ("incomplete-multipart", _dangle_incomplete_multipart, {"version": 100, "size": 3, "parts": 2}),
    ("far-beyond-a-long", _dangle_missing, {"version": 2**62, "size": 3}),
]


@pytest.mark.parametrize(
    ("dangle", "hint"), [d[1:] for d in DANGLING_HINTS], ids=[d[0] for d in DANGLING_HINTS]
)
def test_a_dangling_last_checkpoint_is_replaced(log_writer, caplog: pytest.LogCaptureFixture, dangle, hint):
    """ "Never move the hint back" is for a hint that names a checkpoint, not a dangling one."""
    log_writer.basic(3)
    expected = state(DeltaTable(str(log_writer.root)).snapshot())
    dangle(log_writer, hint["version"])
    log_writer.raw("_last_checkpoint", json.dumps(hint).encode())
    with caplog.at_level("WARNING"):
        result = DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW)
    assert result.version == 2 and result.last_checkpoint_written
    assert last_checkpoint(log_writer.root)["version"] == 2
    assert any("missing or incomplete; replacing it" in r.getMessage() for r in caplog.records)
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.segment.checkpoint_version == 2 and state(snapshot) == expected


def test_a_dangling_hint_is_replaced_even_by_an_older_checkpoint(log_writer):
    log_writer.basic(5)
    log_writer.raw("_last_checkpoint", json.dumps({"version": 4, "size": 6}).encode())  # no checkpoint at 4
    assert DeltaTable(str(log_writer.root)).checkpoint(2, now_ms=NOW).last_checkpoint_written
    assert last_checkpoint(log_writer.root)["version"] == 2
    # A hint that names a real checkpoint still never moves back.
    DeltaTable(str(log_writer.root)).checkpoint(4, now_ms=NOW)
    assert not DeltaTable(str(log_writer.root)).checkpoint(3, now_ms=NOW).last_checkpoint_written
    assert last_checkpoint(log_writer.root)["version"] == 4


def test_delta_rs_reads_and_writes_after_our_checkpoint_repairs_a_dangling_hint(tmp_path: Path):
    from deltalake import DeltaTable as RsTable
    from deltalake import write_deltalake

    write_deltalake(str(tmp_path), pa.table({"id": [1]}))
    write_deltalake(str(tmp_path), pa.table({"id": [2]}), mode="append")
    (tmp_path / "_delta_log" / "_last_checkpoint").write_text(json.dumps({"version": 100, "size": 3}))
    with pytest.raises(Exception, match=r"(?i)checkpoint"):
        RsTable(str(tmp_path))  # delta-rs cannot even open the table with the dangling hint
    assert DeltaTable(str(tmp_path)).checkpoint().last_checkpoint_written
    assert RsTable(str(tmp_path)).version() == 1
    write_deltalake(str(tmp_path), pa.table({"id": [3]}), mode="append")
    assert sorted(RsTable(str(tmp_path)).to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]
    assert sorted(DeltaTable(str(tmp_path)).snapshot().to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3]


def test_checkpoint_of_an_older_version_holds_that_version(log_writer):
    log_writer.basic(5)
    table = DeltaTable(str(log_writer.root))
    before = state(table.snapshot(2))
    table.checkpoint(2, now_ms=NOW)
    drop_commits_through(log_writer.root, 2)
    assert state(DeltaTable(str(log_writer.root)).snapshot(2)) == before
    assert DeltaTable(str(log_writer.root)).version() == 4


# --- faults ---------------------------------------------------------------------------------


def test_truncated_checkpoint_without_hint_update_falls_back(log_writer):
    """A crash mid-write (a truncated file under the final name, no new _last_checkpoint)."""
    log_writer.basic(3)
    table = DeltaTable(str(log_writer.root))
    table.checkpoint(1, now_ms=NOW)
    full = log_writer.log / f"{1:020d}.checkpoint.parquet"
    expected = state(table.snapshot())
    for length in (full.stat().st_size // 2, full.stat().st_size - 1, 8):
        truncated = log_writer.log / f"{2:020d}.checkpoint.parquet"
        truncated.write_bytes(full.read_bytes()[:length])
        snapshot = DeltaTable(str(log_writer.root)).snapshot()
        assert state(snapshot) == expected
    assert last_checkpoint(log_writer.root)["version"] == 1
    # A new checkpoint replaces the broken file and the hint.
    DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW)
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.segment.checkpoint.version == 2 and state(snapshot) == expected


def test_checkpoint_written_but_hint_not_updated_is_found_by_listing(log_writer):
    """A crash between the checkpoint and _last_checkpoint: the hint is stale, the table fine."""
    log_writer.basic(5)
    table = DeltaTable(str(log_writer.root))
    table.checkpoint(1, now_ms=NOW)
    stale = (log_writer.log / "_last_checkpoint").read_bytes()
    table.checkpoint(3, now_ms=NOW)
    (log_writer.log / "_last_checkpoint").write_bytes(stale)
    expected = state(table.snapshot())
    drop_commits_through(log_writer.root, 3)
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.segment.checkpoint.version == 3 and state(snapshot) == expected
    # The next checkpoint moves the stale hint forward.
    assert DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW).last_checkpoint_written
    assert last_checkpoint(log_writer.root)["version"] == 4


def test_partial_multipart_set_is_ignored(log_writer):
    _many_files(log_writer, 30)
    log_writer.commit(1, log_writer.add("later.parquet"))
    table = DeltaTable(str(log_writer.root))
    table.checkpoint(0, now_ms=NOW)
    expected = state(table.snapshot())
    result = table.checkpoint(1, parts=3, now_ms=NOW)
    (log_writer.log / result.files[1]).unlink()  # a writer died before writing part 2
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.segment.checkpoint.version == 0 and state(snapshot) == expected
    # Rewriting completes the set (hash partitioning: the same rows land in the same parts).
    DeltaTable(str(log_writer.root)).checkpoint(1, parts=3, now_ms=NOW)
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.segment.checkpoint.version == 1 and state(snapshot) == expected


def test_checkpoint_reads_past_a_corrupt_newer_checkpoint(log_writer):
    """Checkpointing a table whose latest checkpoint is corrupt rebuilds from the older state."""
    log_writer.basic(4)
    table = DeltaTable(str(log_writer.root))
    expected = state(table.snapshot())
    table.checkpoint(1, now_ms=NOW)
    (log_writer.log / f"{2:020d}.checkpoint.parquet").write_bytes(b"PAR1 not really parquet PAR1")
    result = DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW)
    assert result.version == 3
    drop_commits_through(log_writer.root, 3)
    assert state(DeltaTable(str(log_writer.root)).snapshot()) == expected


def test_state_contradicting_the_version_checksum_is_refused(log_writer):
    log_writer.basic(2)
    crc = {"tableSizeBytes": 20, "numFiles": 3, "numMetadata": 1, "numProtocol": 1}
    log_writer.raw(f"{1:020d}.crc", json.dumps(crc).encode())
    with pytest.raises(CorruptLogError, match=r"3 files / 20 bytes") as caught:
        DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW)
    assert caught.value.path.endswith(f"{1:020d}.crc")
    assert not list(log_writer.log.glob("*.checkpoint*"))
    log_writer.raw(f"{1:020d}.crc", json.dumps({**crc, "numFiles": 2}).encode())
    DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW)
    log_writer.raw(f"{1:020d}.crc", b"{not json")  # an unreadable checksum is optional: ignored
    assert DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW).version == 1


# --- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("protocol", "feature"),
    [
        (
            {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["someFutureFeature"]},
            "someFutureFeature",
        ),
        (
            {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["appendOnly", "icebergCompatV3"],
            },
            "icebergCompatV3",
        ),
        ({"minReaderVersion": 1, "minWriterVersion": 8}, "writer version 8"),
    ],
)
def test_unsupported_writer_features_are_refused(log_writer, protocol: dict[str, Any], feature: str):
    w = log_writer
    w.commit(0, {"protocol": protocol}, w.metadata(), w.add("a.parquet"))
    with pytest.raises(UnsupportedFeatureError, match=feature) as caught:
        DeltaTable(str(w.root)).checkpoint(now_ms=NOW)
    assert caught.value.feature == feature.replace("writer version ", "minWriterVersion=")
    assert caught.value.operation == "checkpoint"
    assert not list(w.log.glob("*.checkpoint*")) and not (w.log / "_last_checkpoint").exists()


def test_unreadable_tables_are_refused_before_anything_is_written(log_writer):
    w = log_writer
    w.commit(
        0,
        w.protocol(3, 7, readerFeatures=["catalogManaged"], writerFeatures=["catalogManaged"]),
        w.metadata(),
    )
    with pytest.raises(UnsupportedFeatureError, match="catalogManaged"):
        DeltaTable(str(w.root)).checkpoint(now_ms=NOW)
    assert not list(w.log.glob("*.checkpoint*"))


def test_legacy_writer_versions_are_checkpointed(log_writer):
    w = log_writer
    w.commit(0, w.protocol(2, 6), w.metadata(), w.add("a.parquet"))
    assert DeltaTable(str(w.root)).checkpoint(now_ms=NOW).kind == "classic"


# --- logging and S3 -------------------------------------------------------------------------


def test_checkpoint_logs_what_it_wrote(log_writer, caplog: pytest.LogCaptureFixture):
    log_writer.basic(2)
    with caplog.at_level("DEBUG", logger="airflow_delta_provider.core.maintenance.checkpoint"):
        DeltaTable(str(log_writer.root)).checkpoint(now_ms=NOW)
    messages = [r.getMessage() for r in caplog.records]
    assert any("replayed 2 files, 0 tombstones" in m for m in messages)
    assert any("Wrote the classic checkpoint" in m and "version 1" in m for m in messages)


@pytest.mark.s3
def test_checkpoint_on_s3(s3_bucket: str, s3_storage_options: dict[str, Any], log_writer):
    import fsspec

    log_writer.basic(3)
    log_writer.commit(3, log_writer.remove("f0.parquet", NOW - 5))
    fs = fsspec.filesystem("s3", **s3_storage_options)
    for path in log_writer.log.iterdir():
        fs.pipe_file(f"{s3_bucket}/t/_delta_log/{path.name}", path.read_bytes())
    table = DeltaTable(f"s3://{s3_bucket}/t", s3_storage_options)
    expected = state(table.snapshot())
    result = table.checkpoint(parts=2, now_ms=NOW)
    assert {p.rsplit("/", 1)[-1] for p in fs.ls(f"{s3_bucket}/t/_delta_log")} >= set(result.files)
    for version in range(4):
        fs.rm(f"{s3_bucket}/t/_delta_log/{version:020d}.json")
    snapshot = DeltaTable(f"s3://{s3_bucket}/t", s3_storage_options).snapshot()
    assert snapshot.segment.checkpoint.version == 3 and state(snapshot) == expected
    assert json.loads(fs.cat_file(f"{s3_bucket}/t/_delta_log/_last_checkpoint"))["parts"] == 2
