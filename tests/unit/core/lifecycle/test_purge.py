"""PURGE (Delta's ``REORG TABLE ... APPLY (PURGE)``) against its Delta definition: which files it
rewrites, its actions field by field, Delta's metrics, rows unchanged in the core and in delta-rs,
column-mapped and partitioned tables, a concurrent DELETE racing it, and refusals that leave the
table unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delete_support import DV_PROPERTIES, commit_actions, core_rows, ids, kind, make_table, rs_rows, state

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    InvalidPathError,
)
from airflow_delta_provider.core.expressions.predicate import PredicateError
from airflow_delta_provider.core.lifecycle.purge import PurgeOptions, plan_purge
from airflow_delta_provider.core.log.deletion_vectors import inline_deletion_vector
from airflow_delta_provider.core.maintenance.optimize import rewrite_locally
from airflow_delta_provider.core.protocol.schema import physical_name
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan, CommitProperties

FILES = {"a": [range(0, 10), range(10, 20)], "b": [range(20, 30)], "c": [range(30, 40)]}
#: Delta's OPTIMIZE metric set, which REORG commits (``DeltaOperationMetrics.OPTIMIZE``).
OPTIMIZE_METRICS = {
    "numAddedFiles",
    "numRemovedFiles",
    "numAddedBytes",
    "numRemovedBytes",
    "minFileSize",
    "p25FileSize",
    "p50FileSize",
    "p75FileSize",
    "maxFileSize",
    "numDeletionVectorsRemoved",
}


def active(table: DeltaTable) -> dict[str, dict[str, Any]]:
    return {f["path"]: f for f in table.snapshot().files().to_pylist()}


def deleted_table(root: Path, properties: dict[str, str] | None = None) -> DeltaTable:
    """Four files in three partitions; rows deleted through deletion vectors from two files of
    partition ``a`` and the file of ``b``; ``c`` untouched."""
    table = make_table(root, FILES, {**DV_PROPERTIES, **(properties or {})})
    table.delete("id IN (1, 2, 15, 25)")
    return table


# --- what it commits --------------------------------------------------------------------------


def test_purge_rewrites_the_files_with_deleted_rows_as_delta_commits_it(tmp_path: Path) -> None:
    table = deleted_table(tmp_path / "t")
    before_rows = core_rows(table)
    before = active(table)
    with_dv = {p for p, f in before.items() if f["deletion_vector"] is not None}
    assert len(with_dv) == 3

    result = table.purge()

    assert result.committed and result.version == 5
    assert core_rows(table) == before_rows == rs_rows(table.uri)
    actions = commit_actions(table, result.version)
    info = kind(actions, "commitInfo")[0]
    assert info["operation"] == "REORG"
    assert info["operationParameters"] == {"predicate": "[]", "applyPurge": "true"}
    assert set(info["operationMetrics"]) == OPTIMIZE_METRICS
    removes, adds = kind(actions, "remove"), kind(actions, "add")
    assert {r["path"] for r in removes} == with_dv
    for remove in removes:
        old = before[remove["path"]]
        assert remove["dataChange"] is False
        assert remove["deletionVector"] == {k: v for k, v in old["deletion_vector"].items() if v is not None}
        assert remove["partitionValues"] == dict(old["partition_values"])
        assert remove["size"] == old["size"]
    # Partition a's two files are one bin; b's single file is a bin of its own, rewritten too.
    assert sorted(a["partitionValues"]["p"] for a in adds) == ["a", "b"]
    for add in adds:
        assert add["dataChange"] is False and "deletionVector" not in add
        stats = json.loads(add["stats"])
        part = add["partitionValues"]["p"]
        assert stats["numRecords"] == len([r for r in before_rows if r[2] == part])
        assert pq.read_metadata(table.storage.join(add["path"])).num_rows == stats["numRecords"]
    metrics = {k: int(v) for k, v in info["operationMetrics"].items()}
    assert metrics["numRemovedFiles"] == 3 and metrics["numAddedFiles"] == 2
    assert metrics["numDeletionVectorsRemoved"] == 3
    assert metrics["numRemovedBytes"] == sum(before[p]["size"] for p in with_dv)
    assert metrics["numAddedBytes"] == sum(a["size"] for a in adds)
    assert metrics["minFileSize"] == min(a["size"] for a in adds)
    assert metrics["maxFileSize"] == max(a["size"] for a in adds)
    assert result.metrics == metrics
    # Untouched: the file of c; no vector is left.
    after = active(table)
    assert [p for p in after if p.startswith("p=c/")] == [p for p in before if p.startswith("p=c/")]
    assert all(f["deletion_vector"] is None for f in after.values())


def test_purge_reads_no_file_without_a_deletion_vector(tmp_path: Path) -> None:
    """The file of partition c is unreadable while the purge runs: it is never opened."""
    table = deleted_table(tmp_path / "t")
    before_rows = core_rows(table)
    (untouched,) = [p for p in active(table) if p.startswith("p=c/")]
    path = Path(table.storage.join(untouched))
    content = path.read_bytes()
    path.write_bytes(b"not parquet")
    try:
        result = table.purge()
    finally:
        path.write_bytes(content)
    assert result.committed
    assert core_rows(table) == before_rows


def test_a_table_without_deleted_rows_has_nothing_to_purge(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FILES, DV_PROPERTIES)
    before = state(table)
    result = table.purge()
    assert (result.committed, result.reason, result.plan.num_files) == (False, "no_files", 0)
    assert state(table) == before


def test_a_second_purge_finds_nothing(tmp_path: Path) -> None:
    table = deleted_table(tmp_path / "t")
    table.purge()
    before = state(table)
    assert table.purge().reason == "no_files"
    assert state(table) == before


def test_dry_run_plans_and_writes_nothing(tmp_path: Path) -> None:
    table = deleted_table(tmp_path / "t")
    before = state(table)
    result = table.purge(dry_run=True)
    assert (result.committed, result.reason) == (False, "dry_run")
    assert result.plan.to_dict()["num_deletion_vectors"] == 3
    assert [len(b.paths) for b in result.plan.bins] == [2, 1]
    assert state(table) == before


def test_partition_filter_purges_only_its_partitions_and_is_recorded(tmp_path: Path) -> None:
    table = deleted_table(tmp_path / "t")
    before_rows = core_rows(table)
    result = table.purge(partition_filter="p = 'b'")
    info = kind(commit_actions(table, result.version), "commitInfo")[0]
    assert info["operationParameters"] == {"predicate": "[\"p = 'b'\"]", "applyPurge": "true"}
    vectors = {
        dict(f["partition_values"])["p"]: f["deletion_vector"] is not None for f in active(table).values()
    }
    assert vectors == {"a": True, "b": False, "c": False}
    assert core_rows(table) == before_rows == rs_rows(table.uri)


def test_idempotent_with_app_id_and_app_version(tmp_path: Path) -> None:
    table = deleted_table(tmp_path / "t")
    first = table.purge(app_id="erasure", app_version=7)
    table.delete("id = 33")  # a new vector: a purge would have work to do
    before = state(table)
    again = table.purge(app_id="erasure", app_version=7)
    assert (again.committed, again.reason, again.version) == (False, "already_committed", first.version)
    assert again.plan.operation == "REORG"
    assert state(table) == before


# --- which files Delta selects ----------------------------------------------------------------


def _table_with_vectors(root: Path, adds: list[dict[str, Any]]) -> DeltaTable:
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    features = {"readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}
    lines = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, **features}},
        {
            "metaData": {
                "id": "x",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {"delta.enableDeletionVectors": "true"},
                "createdTime": 1,
            }
        },
        *({"add": add} for add in adds),
    ]
    (root / "_delta_log").mkdir(parents=True)
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    return DeltaTable(str(root))


def _file(root: Path, name: str, deletion_vector: dict[str, Any] | None, stats: str | None) -> dict[str, Any]:
    root.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(range(10), pa.int64())}), root / name)
    add = {
        "path": name,
        "partitionValues": {},
        "size": (root / name).stat().st_size,
        "modificationTime": 1,
        "dataChange": True,
    }
    if deletion_vector is not None:
        add["deletionVector"] = deletion_vector
    if stats is not None:
        add["stats"] = stats
    return add


def test_files_with_a_vector_but_no_row_count_are_purged_and_an_empty_vector_is_not(tmp_path: Path) -> None:
    root = tmp_path / "t"
    counted = json.dumps({"numRecords": 10})
    adds = [
        _file(root, "deleted.parquet", inline_deletion_vector([1, 2]), counted),
        _file(root, "uncounted.parquet", inline_deletion_vector([3]), None),
        _file(root, "empty-vector.parquet", inline_deletion_vector([]), counted),
        _file(root, "plain.parquet", None, counted),
    ]
    table = _table_with_vectors(root, adds)
    plan = plan_purge(table.snapshot())
    assert sorted(p for b in plan.bins for p in b.paths) == ["deleted.parquet", "uncounted.parquet"]
    before = sorted(table.snapshot().to_pyarrow_table().column("id").to_pylist())
    assert table.purge().committed
    assert sorted(table.snapshot().to_pyarrow_table().column("id").to_pylist()) == before
    paths = set(active(table))
    assert {"empty-vector.parquet", "plain.parquet"} <= paths and "uncounted.parquet" not in paths


def test_a_file_whose_every_row_is_deleted_is_removed_without_a_replacement(tmp_path: Path) -> None:
    root = tmp_path / "t"
    adds = [_file(root, "gone.parquet", inline_deletion_vector(range(10)), json.dumps({"numRecords": 10}))]
    table = _table_with_vectors(root, adds)
    result = table.purge()
    actions = commit_actions(table, result.version)
    assert [r["path"] for r in kind(actions, "remove")] == ["gone.parquet"] and kind(actions, "add") == []
    assert table.snapshot().files().num_rows == 0


# --- column mapping -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_tables_are_purged_under_physical_names(tmp_path: Path, mode: str) -> None:
    table = deleted_table(tmp_path / "t", {"delta.columnMapping.mode": mode})
    before_rows = core_rows(table)
    result = table.purge()
    assert result.committed and core_rows(table) == before_rows == rs_rows(table.uri)
    schema = table.snapshot().schema
    physical = {f.name: physical_name(f) for f in schema}
    for add in kind(commit_actions(table, result.version), "add"):
        file_schema = pq.read_schema(table.storage.join(add["path"]))
        assert file_schema.names == [physical["id"], physical["v"]]
        assert all(f.metadata and b"PARQUET:field_id" in f.metadata for f in file_schema)
        assert set(json.loads(add["stats"])["minValues"]) == {physical["id"], physical["v"]}
        assert set(add["partitionValues"]) == {physical["p"]}


def _drop_column(table: DeltaTable, name: str) -> None:
    """ALTER TABLE DROP COLUMN under column mapping: a new schema without it; files keep it."""
    snapshot = table.snapshot()
    schema = json.loads(snapshot.metadata.schema_string)
    schema["fields"] = [f for f in schema["fields"] if f["name"] != name]
    metadata = dataclasses.replace(snapshot.metadata, schema_string=json.dumps(schema))
    transaction = OptimisticTransaction(table.storage, read_snapshot=snapshot, properties=CommitProperties())
    assert transaction.commit(CommitPlan("DROP COLUMNS", metadata=metadata)).committed


def test_files_holding_a_dropped_column_are_purged_without_it(tmp_path: Path) -> None:
    table = make_table(tmp_path / "t", FILES, {**DV_PROPERTIES, "delta.columnMapping.mode": "name"})
    dropped = physical_name(table.snapshot().schema.field("v"))
    _drop_column(table, "v")
    table.delete("id = 25")  # partition b's file also has a vector
    before_rows = core_rows(table)
    assert all(len(r) == 2 for r in before_rows)

    result = table.purge()

    # Every file held the dropped column: all four are rewritten, each partition into one file.
    assert result.plan.num_files == 4 and result.metrics["numDeletionVectorsRemoved"] == 1
    assert core_rows(table) == before_rows == rs_rows(table.uri)
    for path in active(table):
        assert dropped not in pq.read_schema(table.storage.join(path)).names
    assert table.purge().reason == "no_files"  # nothing holds it any more


# --- concurrency ------------------------------------------------------------------------------


def test_a_concurrent_delete_adding_a_vector_to_a_purged_file_refuses_the_purge(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = deleted_table(root)

    def rewrite_then_delete(plan: Any) -> dict[int, list[str]]:
        written = rewrite_locally(plan)
        # Another writer deletes a row of a file the purge is rewriting: its vector changes.
        DeltaTable(str(root)).delete("id = 3")
        return written

    with pytest.raises(ConcurrentDeleteReadError, match="removed data"):
        table.purge(rewrite=rewrite_then_delete)
    # The DELETE stands, the purge committed nothing and left no file behind.
    after_delete = state(table)
    assert after_delete[0] == 5
    assert 3 not in ids(core_rows(table))
    written = [p for p in after_delete[3] if p.startswith("p=a/") or p.startswith("p=b/")]
    assert len(written) == 3  # the three original data files only
    # Run again: it purges the new vector too, and no deleted row comes back.
    expected = core_rows(table)
    assert table.purge().committed
    assert core_rows(table) == expected == rs_rows(table.uri)
    assert 3 not in ids(expected)


def test_a_concurrent_delete_of_another_file_is_retried_past(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = deleted_table(root)

    def rewrite_then_delete(plan: Any) -> dict[int, list[str]]:
        written = rewrite_locally(plan)
        DeltaTable(str(root)).delete("id = 35")  # partition c: a file the purge does not rewrite
        return written

    result = table.purge(rewrite=rewrite_then_delete)
    assert result.committed and result.commit is not None
    assert (result.version, result.commit.attempts) == (6, 2)
    expected = sorted(set(range(40)) - {1, 2, 15, 25, 35})
    assert ids(core_rows(table)) == expected == ids(rs_rows(table.uri))
    vectors = {
        dict(f["partition_values"])["p"]: f["deletion_vector"] is not None for f in active(table).values()
    }
    assert vectors == {"a": False, "b": False, "c": True}


def test_two_concurrent_purges_commit_once(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = deleted_table(root)
    expected = core_rows(table)

    def rewrite_while_another_purges(plan: Any) -> dict[int, list[str]]:
        written = rewrite_locally(plan)
        assert DeltaTable(str(root)).purge().committed
        return written

    with pytest.raises((ConcurrentDeleteDeleteError, ConcurrentDeleteReadError)):
        table.purge(rewrite=rewrite_while_another_purges)
    assert core_rows(table) == expected == rs_rows(table.uri)
    data = [p for p in state(table)[3] if not p.startswith("_delta_log") and not p.startswith("deletion_")]
    assert len(data) == 1 + 3 + 2  # c's file, the three purged originals, the winner's two outputs


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"partition_filter": "id = 3"}, PredicateError, "id"),
        ({"partition_filter": "p = "}, PredicateError, "Cannot parse"),
        ({"partition_filter": 5}, ValueError, "partition_filter"),
        ({"target_file_size": "lots"}, ValueError, "targetFileSize='lots'"),
        ({"dry_run": "yes"}, ValueError, "dry_run"),
        ({"app_id": "x"}, ValueError, "app_version"),
    ],
    ids=["data-column-filter", "bad-filter", "filter-not-text", "bad-size", "dry-run-not-bool", "half-app"],
)
def test_bad_arguments_are_refused_and_the_table_is_unchanged(
    tmp_path: Path, options: dict[str, Any], error: type[Exception], match: str
) -> None:
    table = deleted_table(tmp_path / "t")
    before = state(table)
    with pytest.raises(error, match=match):
        table.purge(**options)
    assert state(table) == before


def test_a_rewrite_reporting_a_file_outside_the_root_is_refused_and_nothing_is_committed(
    tmp_path: Path,
) -> None:
    table = deleted_table(tmp_path / "t")
    outside = tmp_path / "elsewhere.parquet"
    pq.write_table(pa.table({"id": [1]}), outside)
    before = state(table)
    with pytest.raises(InvalidPathError, match="REORG"):
        table.purge(rewrite=lambda plan: {0: [str(outside)]})
    assert state(table) == before and outside.exists()


def test_purge_options_are_the_rewrite_options() -> None:
    assert {f.name for f in dataclasses.fields(PurgeOptions)} >= {"partition_filter", "dry_run", "app_id"}
    assert "min_file_size" not in {f.name for f in dataclasses.fields(PurgeOptions)}


# --- the erasure sequence: DELETE, PURGE, VACUUM ---------------------------------------------


def _parquet_rows_holding(root: Path, erased: set[int]) -> dict[str, int]:
    """Every Parquet file under the root (data, change data, checkpoints) read as it is stored, no
    log applied: how many rows of each hold an erased id, by physical or logical column name."""
    found = {}
    for path in sorted(root.rglob("*.parquet")):
        data = pq.read_table(path)
        for name in data.column_names:
            column = data.column(name)
            if pa.types.is_integer(column.type):
                hits = sum(1 for value in column.to_pylist() if value in erased)
                if hits:
                    found[str(path.relative_to(root))] = found.get(str(path.relative_to(root)), 0) + hits
    return found


@pytest.mark.parametrize(
    "properties",
    [
        DV_PROPERTIES,
        {**DV_PROPERTIES, "delta.columnMapping.mode": "name"},
        {"delta.enableChangeDataFeed": "true"},
    ],
    ids=["deletion-vectors", "column-mapped", "copy-on-write-with-change-data"],
)
@pytest.mark.parametrize("vacuum_by", ["core", "delta-rs"])
def test_after_delete_purge_and_vacuum_no_file_under_the_root_holds_an_erased_row(
    tmp_path: Path, properties: dict[str, str], vacuum_by: str
) -> None:
    """The sequence with either VACUUM: delta-rs's (full mode, so change data files go too) reads
    the purge's ``remove`` actions as tombstones like the core's own."""
    root = tmp_path / "t"
    table = make_table(root, FILES, properties)
    erased = {3, 15, 25}
    kept = sorted(set(range(40)) - erased)

    deleted = table.delete("id IN (3, 15, 25)")
    assert deleted.num_deleted_rows == 3
    assert ids(core_rows(table)) == kept
    assert _parquet_rows_holding(root, erased)  # the bytes are still there

    purged = table.purge()
    assert purged.committed == (deleted.mode == "deletion_vectors")
    # VACUUM with the retention overridden (no reader or writer runs): the replaced files go now.
    later = table.snapshot().version
    if vacuum_by == "core":
        table.vacuum(retention=0, enforce_retention_duration=False, now=2**41)
    else:
        rs = deltalake.DeltaTable(table.uri)
        rs.vacuum(retention_hours=0, dry_run=False, enforce_retention_duration=False, full=True)
    assert table.version() > later  # VACUUM START / END recorded

    assert _parquet_rows_holding(root, erased) == {}
    assert ids(core_rows(table)) == kept == ids(rs_rows(table.uri))


def test_without_the_purge_vacuum_keeps_the_deleted_rows_bytes(tmp_path: Path) -> None:
    """Why the purge is part of the sequence: a file that only gained a deletion vector stays live."""
    root = tmp_path / "t"
    table = make_table(root, FILES, DV_PROPERTIES)
    table.delete("id IN (3, 15, 25)")
    table.vacuum(retention=0, enforce_retention_duration=False, now=2**41)
    assert sum(_parquet_rows_holding(root, {3, 15, 25}).values()) == 3
