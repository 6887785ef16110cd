"""Checkpoints written by the core, read by delta-rs (the oracle) and by the core itself.

After the core checkpoints a table, the JSON commits the checkpoint covers are deleted, so
that a reader can only get the state from the checkpoint; delta-rs must then load the same
version, files, stats, protocol, metadata and app transactions as it did from the JSON log,
and the core must read back the same snapshot.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import time
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import CommitProperties, Transaction, write_deltalake

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import CorruptLogError, UnsupportedFeatureError
from airflow_delta_provider.core.protocol.features import Operation, Support, supports

CORPUS = Path(__file__).resolve().parents[1] / "conformance" / "corpus"
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())


# --- helpers ----------------------------------------------------------------------------


def core_state(root: Path) -> dict[str, Any]:
    snapshot = DeltaTable(str(root)).snapshot()
    return {
        "version": snapshot.version,
        "protocol": snapshot.protocol,
        "metadata": snapshot.metadata,
        "transactions": snapshot.transactions,
        "domains": snapshot.domain_metadata,
        # dataChange aside: a checkpoint stores false, as Spark's state does.
        "files": snapshot.files().drop_columns(["data_change"]).sort_by("path").to_pylist(),
        "tombstones": snapshot.tombstones().drop_columns(["data_change"]).sort_by("path").to_pylist(),
    }


def delta_rs_state(root: Path, app_ids: tuple[str, ...] = ()) -> dict[str, Any]:
    table = deltalake.DeltaTable(str(root))
    actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()
    columns = [c for c in actions if c not in ("data_change", "modification_time")]
    rows = sorted(zip(*(actions[c] for c in columns), strict=True), key=lambda r: r[columns.index("path")])
    protocol = table.protocol()
    metadata = table.metadata()
    return {
        "version": table.version(),
        "columns": columns,
        "files": rows,
        "protocol": (
            protocol.min_reader_version,
            protocol.min_writer_version,
            sorted(protocol.reader_features or []),
            sorted(protocol.writer_features or []),
        ),
        "metadata": (
            metadata.id,
            metadata.partition_columns,
            metadata.configuration,
            json.loads(table.schema().to_json()),
        ),
        "transactions": {app: table.transaction_version(app) for app in app_ids},
    }


def delta_rs_rows(root: Path) -> list[dict[str, Any]]:
    """The table's rows through delta-rs's file list (its pyarrow dataset refuses v2Checkpoint)."""
    table = deltalake.DeltaTable(str(root))
    partitions = table.metadata().partition_columns
    frames = []
    for action in pa.table(table.get_add_actions(flatten=False)).to_pylist():
        frame = pq.read_table(root / action["path"])
        for column in partitions:
            frame = frame.append_column(column, pa.array([action["partition"][column]] * frame.num_rows))
        frames.append(frame)
    rows = pa.concat_tables(frames).to_pylist() if frames else []
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def drop_commits_through(root: Path, version: int) -> None:
    for path in (root / "_delta_log").glob("*.json"):
        if path.name[:20].isdigit() and int(path.name[:20]) <= version and "compacted" not in path.name:
            path.unlink()


def build_table(root: Path, configuration: dict[str, str] | None = None, *, v2: bool = False) -> None:
    """A partitioned table delta-rs wrote: appends with app transactions, then an overwrite of one
    partition (tombstones), then more appends."""
    now = int(time.time() * 1000)

    def batch(start: int, part: str) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(range(start, start + 5), pa.int64()),
                "name": pa.array([f"n{i}" for i in range(start, start + 5)]),
                "day": pa.array([part] * 5),
            }
        )

    write_deltalake(str(root), batch(0, "2024-01-01"), partition_by=["day"], configuration=configuration)
    if v2:
        deltalake.DeltaTable(str(root)).alter.add_feature(
            [deltalake.TableFeatures.V2Checkpoint], allow_protocol_versions_increase=True
        )
    for index, part in enumerate(["2024-01-01", "2024-01-02", "2024-01-03"], start=1):
        write_deltalake(
            str(root),
            batch(index * 10, part),
            mode="append",
            partition_by=["day"],
            commit_properties=CommitProperties(app_transactions=[Transaction("app-a", index, now)]),
        )
    write_deltalake(
        str(root),
        batch(100, "2024-01-02"),
        mode="overwrite",
        partition_by=["day"],
        predicate="day = '2024-01-02'",
    )
    write_deltalake(
        str(root),
        batch(200, "2024-01-04"),
        mode="append",
        partition_by=["day"],
        commit_properties=CommitProperties(app_transactions=[Transaction("app-b", 9, now)]),
    )


# --- tables delta-rs wrote ------------------------------------------------------------------


CASES = {
    "classic": ({}, False, {}),
    "multipart": ({}, False, {"parts": 3}),
    "stats-as-struct-only": (
        {"delta.checkpoint.writeStatsAsStruct": "true", "delta.checkpoint.writeStatsAsJson": "false"},
        False,
        {},
    ),
    "stats-as-json-and-struct": ({"delta.checkpoint.writeStatsAsStruct": "true"}, False, {}),
    "v2-inline": ({"delta.checkpointPolicy": "v2"}, True, {}),
    "v2-sidecars": ({"delta.checkpointPolicy": "v2"}, True, {"parts": 2}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_delta_rs_reads_the_core_checkpoint(tmp_path: Path, case: str):
    configuration, v2, options = CASES[case]
    root = tmp_path / "table"
    build_table(root, configuration or None, v2=v2)
    apps = ("app-a", "app-b", "never")
    rs_before = delta_rs_state(root, apps)
    rows_before = delta_rs_rows(root)
    core_before = core_state(root)
    assert core_before["tombstones"], "the overwrite left tombstones"

    result = DeltaTable(str(root)).checkpoint(**options)
    assert result.version == rs_before["version"] == (6 if v2 else 5)
    drop_commits_through(root, result.version)

    rs_after = delta_rs_state(root, apps)
    assert rs_after == rs_before
    assert rs_after["transactions"] == {"app-a": 3, "app-b": 9, "never": None}
    assert delta_rs_rows(root) == rows_before
    assert _normal_state(core_state(root)) == _normal_state(core_before)
    # Parsed stats: delta-rs gets the record counts from the checkpoint, JSON or struct.
    counts = dict(zip(rs_after["columns"], zip(*rs_after["files"], strict=True), strict=True))["num_records"]
    assert set(counts) == {5}


def test_core_checkpoint_matches_delta_rs_checkpoint(tmp_path: Path):
    """The same table checkpointed by delta-rs and by the core: the same actions."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    build_table(ours)
    shutil.copytree(ours, theirs)
    DeltaTable(str(ours)).checkpoint()
    deltalake.DeltaTable(str(theirs)).create_checkpoint()
    name = f"{5:020d}.checkpoint.parquet"
    mine = pq.read_table(ours / "_delta_log" / name)
    other = pq.read_table(theirs / "_delta_log" / name)

    def paths(table: pa.Table, column: str) -> list[str]:
        values = pc.struct_field(table.column(column), "path")
        return sorted(v for v in values.to_pylist() if v is not None)

    assert paths(mine, "add") == paths(other, "add")
    assert paths(mine, "remove") == paths(other, "remove")

    def rows(table: pa.Table, column: str) -> list[Any]:
        return sorted(
            (json.dumps(r, sort_keys=True, default=str) for r in table.column(column).to_pylist() if r),
            key=str,
        )

    assert rows(mine, "txn") == rows(other, "txn")
    ours_meta = [r for r in mine.column("metaData").to_pylist() if r]
    their_meta = [r for r in other.column("metaData").to_pylist() if r]
    assert [(m["id"], m["schemaString"], m["partitionColumns"]) for m in ours_meta] == [
        (m["id"], m["schemaString"], m["partitionColumns"]) for m in their_meta
    ]
    add_stats = {r["path"]: r["stats"] for r in mine.column("add").to_pylist() if r is not None}
    their_stats = {r["path"]: r["stats"] for r in other.column("add").to_pylist() if r is not None}
    assert {p: json.loads(s) for p, s in add_stats.items()} == {
        p: json.loads(s) for p, s in their_stats.items()
    }


# --- the conformance corpus -------------------------------------------------------------------


READABLE = [entry for entry in MANIFEST if entry["expect"]["kind"] in ("read", "read-or-refuse")]

#: Tables whose version checksum contradicts their log on purpose (a checksum-parsing fixture):
#: Delta refuses to checkpoint a state that does not match its checksum, and so does the core.
CHECKSUM_CONTRADICTS_LOG = {"crc-full"}


@pytest.mark.parametrize("entry", READABLE, ids=[e["name"] for e in READABLE])
def test_conformance_tables_read_back_from_the_core_checkpoint(tmp_path: Path, entry: dict[str, Any]):
    root = tmp_path / "table"
    shutil.copytree(CORPUS / "tables" / entry["table_root"], root)
    try:
        before = core_state(root)
    except UnsupportedFeatureError as err:
        # Only features the registry still refuses to read (docs/features.md says why).
        assert supports(err.feature, Operation.READ) is Support.NO, err.feature
        pytest.skip(f"the core refuses to read this table ({err.feature}, listed as refused)")
    if entry["name"] in CHECKSUM_CONTRADICTS_LOG:
        with pytest.raises(CorruptLogError, match="does not match its checksum"):
            DeltaTable(str(root)).checkpoint()
        return
    try:
        rs_before: dict[str, Any] | None = delta_rs_state(root)
    except Exception:  # delta-rs cannot open every corpus table (see the manifest)
        rs_before = None
    try:
        result = DeltaTable(str(root)).checkpoint()
    except UnsupportedFeatureError as err:
        pytest.skip(f"the core refuses to checkpoint this table ({err.feature})")
    assert result.version == before["version"]
    drop_commits_through(root, result.version)
    after = core_state(root)
    assert _normal_state(after) == _normal_state(before)
    if rs_before is not None:
        rs_after = delta_rs_state(root)
        assert rs_after["version"] == rs_before["version"]
        assert rs_after["protocol"] == rs_before["protocol"]
        assert rs_after["metadata"] == rs_before["metadata"]
        # delta-rs reads the core's file list. (Where delta-rs and Delta disagreed on the JSON
        # log, e.g. a remove of "file:/x" for an add of "/x", it now agrees with Delta.)
        assert sorted(r[0] for r in rs_after["files"]) == sorted(f["path"] for f in before["files"])


def _normal_state(state: dict[str, Any]) -> dict[str, Any]:
    """The state with each file's stats compared by value, not by JSON spelling.

    When a table keeps stats only as structs (``writeStatsAsJson=false``), the read path
    renders them back to JSON, and a timestamp may come back with or without its ``Z``, a
    decimal as a number or a string, an absent column as null.
    """
    files = [{**f, "stats": _normal_stats(f["stats"])} for f in state["files"]]
    return {**state, "files": files}


def _normal_stats(text: str | None) -> Any:
    if text is None:
        return None

    def normal(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: normal(v) for k, v in value.items() if v is not None}
        if isinstance(value, str):
            try:
                return Decimal(value)
            except InvalidOperation:
                pass
            try:
                parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                return value
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
        if isinstance(value, float | int) and not isinstance(value, bool):
            return Decimal(str(value))
        return value

    return normal(json.loads(text, parse_float=Decimal))


@pytest.mark.spark
def test_small_actions_of_a_parquet_mr_file_read_page_by_page(tmp_path: Path):
    """A checkpoint-shaped file Spark's parquet-mr writes (every field optional, its page index,
    PLAIN_DICTIONARY pages, 20,000-row pages): the page route gives what pyarrow decodes whole."""
    pyspark = pytest.importorskip("pyspark.sql")
    from airflow_delta_provider.core.log.checkpoint_pages import CheckpointPages
    from airflow_delta_provider.core.storage import open_store

    spark = (
        pyspark.SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    rows = 60_000
    try:
        frame = spark.range(rows).selectExpr(
            "named_struct('path', concat('f', id), 'size', id) AS add",
            "IF(id = 59990, named_struct('minReaderVersion', 3, 'minWriterVersion', 7, "
            "'readerFeatures', array('deletionVectors'), "
            "'writerFeatures', CAST(array() AS ARRAY<STRING>)), NULL) AS protocol",
            "IF(id = 59991, named_struct('id', 't', 'name', CAST(NULL AS STRING), 'format', "
            "named_struct('provider', 'parquet', 'options', CAST(map() AS MAP<STRING, STRING>)), "
            "'schemaString', '{}', "
            "'partitionColumns', array('a'), 'configuration', map('k', 'v', 'k2', CAST(NULL AS STRING)), "
            "'createdTime', CAST(1 AS BIGINT)), NULL) AS metaData",
            "IF(id IN (5, 30000, 59999), named_struct('appId', concat('app-', id), 'version', id, "
            "'lastUpdated', IF(id = 5, NULL, id)), NULL) AS txn",
        )
        frame.coalesce(1).write.parquet(str(tmp_path / "out"))
    finally:
        spark.stop()
    [path] = list((tmp_path / "out").glob("*.parquet"))
    parquet = pq.ParquetFile(path)
    assert parquet.metadata.row_group(0).column(0).has_offset_index  # parquet-mr's page index
    pages = CheckpointPages(open_store(str(tmp_path)), str(path), parquet)
    for name in ("protocol", "metaData", "txn"):
        column = parquet.read(columns=[name]).column(0).combine_chunks()
        present = pc.indices_nonzero(column.is_valid())
        expected = list(
            zip(present.to_pylist(), column.take(present).to_pylist(maps_as_pydicts="lossy"), strict=True)
        )
        got = [
            row
            for group in range(parquet.metadata.num_row_groups)
            for row in pages.action_rows(name, group) or [None]
        ]
        assert got == expected, name
