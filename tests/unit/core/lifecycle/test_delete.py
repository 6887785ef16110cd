"""DELETE against its Delta definition: rows after it (core and delta-rs), actions field by field,
Delta's metrics, deletion vectors, copy-on-write, refusals that leave the table unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delete_support import (
    DV_PROPERTIES,
    commit_actions,
    core_rows,
    ids,
    kind,
    make_table,
    rs_rows,
    state,
)

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    AppendOnlyViolationError,
    DeltaError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.expressions.predicate import PredicateError
from airflow_delta_provider.core.lifecycle.delete import DeleteOptions, commit_delete, plan_delete
from airflow_delta_provider.core.log.deletion_vectors import deletion_vector_path
from airflow_delta_provider.core.log.scan import deletion_vector_rows
from airflow_delta_provider.core.protocol.actions import AddFile
from airflow_delta_provider.core.protocol.schema import physical_name
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan

FILES = {"a": [range(0, 10), range(10, 20)], "b": [range(20, 30), range(30, 40)]}

DELTA_METRICS = {
    "numAddedFiles",
    "numRemovedFiles",
    "numDeletionVectorsAdded",
    "numDeletionVectorsRemoved",
    "numDeletionVectorsUpdated",
    "numAddedChangeFiles",
    "numDeletedRows",
    "numCopiedRows",
    "executionTimeMs",
    "scanTimeMs",
    "rewriteTimeMs",
    "numRemovedBytes",
    "numAddedBytes",
}


def commit_info(table: DeltaTable, version: int) -> dict:
    return kind(commit_actions(table, version), "commitInfo")[0]


def metrics(table: DeltaTable, version: int) -> dict[str, int]:
    return {k: int(v) for k, v in commit_info(table, version)["operationMetrics"].items()}


def assert_full_remove(remove: dict, add: dict) -> None:
    """What change-data readers need of a remove: Delta's ``removeWithTimestamp``."""
    assert remove["dataChange"] is True
    assert remove["extendedFileMetadata"] is True
    for field in ("partitionValues", "size", "stats"):
        assert remove[field] == add[field], field
    assert remove.get("deletionVector") == add.get("deletionVector")


def active(table: DeltaTable) -> dict[str, dict]:
    files = table.snapshot().files().to_pylist()
    return {f["path"]: f for f in files}


# --- whole files ------------------------------------------------------------------------------


def test_no_predicate_removes_every_file_with_its_metadata_and_counts_rows_from_stats(tmp_path):
    table = make_table(tmp_path / "t", FILES)
    before = active(table)
    result = table.delete()
    assert (result.committed, result.version, result.mode) == (True, 3, "metadata")
    assert core_rows(table) == [] and rs_rows(table.uri) == []
    actions = commit_actions(table, 3)
    removes = {r["path"]: r for r in kind(actions, "remove")}
    assert set(removes) == set(before) and not kind(actions, "add") and not kind(actions, "cdc")
    for path, remove in removes.items():
        add = before[path]
        assert_full_remove(
            remove,
            {"partitionValues": dict(add["partition_values"]), "size": add["size"], "stats": add["stats"]},
        )
    info = commit_info(table, 3)
    assert info["operation"] == "DELETE" and info["operationParameters"] == {"predicate": "[]"}
    assert info["isBlindAppend"] is False
    got = metrics(table, 3)
    assert set(got) == DELTA_METRICS
    assert (got["numRemovedFiles"], got["numDeletedRows"], got["numAddedFiles"]) == (4, 40, 0)
    assert got["numRemovedBytes"] == sum(f["size"] for f in before.values())
    assert result.num_deleted_rows == 40 and result.num_removed_files == 4


def test_a_partition_predicate_removes_whole_files_without_reading_them(tmp_path):
    table = make_table(tmp_path / "t", FILES)
    # The data of partition a is unreadable: a metadata-only delete never opens it.
    for path in active(table):
        if path.startswith("p=a/"):
            Path(table.storage.join(path)).write_bytes(b"not parquet at all")
    result = table.delete("p = 'a'")
    assert result.mode == "metadata"
    removes = kind(commit_actions(table, result.version), "remove")
    assert sorted(r["path"].split("/")[0] for r in removes) == ["p=a", "p=a"]
    assert ids(core_rows(table)) == list(range(20, 40)) == ids(rs_rows(table.uri))
    assert commit_info(table, result.version)["operationParameters"] == {"predicate": "[\"p = 'a'\"]"}
    assert metrics(table, result.version)["numDeletedRows"] == 20


def test_whole_files_without_row_counts_report_no_row_metrics_as_delta_does(tmp_path):
    table = make_table(tmp_path / "t", {"a": [range(3)]})
    # A file committed without stats (as some writers do).
    path = "p=a/nostats.parquet"
    pq.write_table(pa.table({"id": [7, 8], "v": ["x", "y"]}), table.storage.join(path))
    size = Path(table.storage.join(path)).stat().st_size
    transaction = OptimisticTransaction(table.storage)
    transaction.commit(CommitPlan("WRITE", adds=(AddFile(path, {"p": "a"}, size, 1),)))
    result = table.delete("p = 'a'")
    got = metrics(table, result.version)
    assert got["numRemovedFiles"] == 2
    for dropped in ("numDeletedRows", "numCopiedRows", "numAddedFiles"):
        assert dropped not in got
    assert result.num_deleted_rows is None
    assert core_rows(table) == []


# --- copy-on-write ----------------------------------------------------------------------------


def test_copy_on_write_rewrites_only_the_files_holding_matches(tmp_path):
    table = make_table(tmp_path / "t", FILES)
    before = active(table)
    result = table.delete("id IN (3, 4, 25)")
    assert result.mode == "copy_on_write"
    actions = commit_actions(table, result.version)
    removes, adds = kind(actions, "remove"), kind(actions, "add")
    touched = {r["path"] for r in removes}
    assert len(touched) == 2 and {p.split("/")[0] for p in touched} == {"p=a", "p=b"}
    for remove in removes:
        add = before[remove["path"]]
        assert_full_remove(
            remove,
            {"partitionValues": dict(add["partition_values"]), "size": add["size"], "stats": add["stats"]},
        )
    assert len(adds) == 2
    for add in adds:
        assert add["dataChange"] is True and "deletionVector" not in add
        stats = json.loads(add["stats"])
        assert stats["numRecords"] in (8, 9)  # from the new file's footer
        directory = add["path"].rsplit("/", 1)[0]
        assert directory in {r["path"].rsplit("/", 1)[0] for r in removes}  # beside the file it replaces
        assert pq.ParquetFile(table.storage.join(add["path"])).metadata.num_rows == stats["numRecords"]
    remaining = sorted(set(range(40)) - {3, 4, 25})
    assert ids(core_rows(table)) == remaining == ids(rs_rows(table.uri))
    got = metrics(table, result.version)
    assert set(got) == DELTA_METRICS
    assert (got["numRemovedFiles"], got["numAddedFiles"], got["numDeletedRows"], got["numCopiedRows"]) == (
        2,
        2,
        3,
        17,
    )
    assert got["numAddedBytes"] == sum(a["size"] for a in adds)
    assert got["numRemovedBytes"] == sum(r["size"] for r in removes)
    assert (result.num_removed_files, result.num_added_files, result.num_deletion_vectors_added) == (2, 2, 0)


def test_a_file_whose_every_row_is_deleted_is_removed_without_a_replacement(tmp_path):
    table = make_table(tmp_path / "t", {"a": [range(0, 5), range(5, 10)]})
    result = table.delete("id < 5")
    actions = commit_actions(table, result.version)
    assert len(kind(actions, "remove")) == 1 and kind(actions, "add") == []
    assert ids(core_rows(table)) == list(range(5, 10))


def test_nulls_follow_sql(tmp_path):
    table = make_table(tmp_path / "t", [range(14)])  # v is null for ids 6 and 13
    table.delete("v != 'v1'")  # null is not "different": kept
    assert ids(core_rows(table)) == [1, 6, 13]
    table.delete("v IS NULL")
    assert core_rows(table) == [(1, "v1")] == rs_rows(table.uri)


def test_statistics_skip_files_that_cannot_match_without_reading_them(tmp_path):
    table = make_table(tmp_path / "t", [range(0, 10), range(100, 110)])
    far = next(p for p, f in active(table).items() if '"minValues":{"id":100' in f["stats"])
    Path(table.storage.join(far)).write_bytes(b"unreadable")  # never opened
    result = table.delete("id < 5")
    assert result.committed
    assert far not in {r["path"] for r in kind(commit_actions(table, result.version), "remove")}


def test_nothing_matching_writes_nothing(tmp_path):
    table = make_table(tmp_path / "t", FILES)
    before = state(table)
    result = table.delete("id > 1000")
    assert (result.committed, result.reason, result.version, result.num_deleted_rows) == (
        False,
        "nothing_to_delete",
        before[0],
        0,
    )
    assert state(table) == before


def test_delta_rs_delete_on_a_copy_agrees(tmp_path):
    import deltalake

    predicate = "id > 5 AND id <= 27 AND v IS NOT NULL"
    ours = make_table(tmp_path / "ours", FILES)
    theirs = make_table(tmp_path / "theirs", FILES)
    ours.delete(predicate)
    deltalake.DeltaTable(theirs.uri).delete(predicate)
    assert core_rows(ours) == rs_rows(theirs.uri) == rs_rows(ours.uri) == core_rows(theirs)


# --- deletion vectors -------------------------------------------------------------------------


def dv_rows(table: DeltaTable, dv: dict) -> list[int]:
    return deletion_vector_rows(table.storage, dv).tolist()


def test_deletion_vectors_mark_rows_in_place(tmp_path):
    table = make_table(tmp_path / "t", FILES, DV_PROPERTIES)
    before = active(table)
    result = table.delete("id IN (1, 2, 23)")
    assert result.mode == "deletion_vectors"
    actions = commit_actions(table, result.version)
    removes = {r["path"]: r for r in kind(actions, "remove")}
    adds = {a["path"]: a for a in kind(actions, "add")}
    assert set(removes) == set(adds) and len(adds) == 2
    for path, add in adds.items():
        old = before[path]
        remove = removes[path]
        assert "deletionVector" not in remove and remove["stats"] == old["stats"]
        assert (add["size"], add["modificationTime"], add["partitionValues"], add["dataChange"]) == (
            old["size"],
            old["modification_time"],
            dict(old["partition_values"]),
            True,
        )
        stats = json.loads(add["stats"])
        assert stats["numRecords"] == 10 and stats["tightBounds"] is False  # the physical count
        dv = add["deletionVector"]
        assert dv["storageType"] == "u" and dv["offset"] >= 1
        file = Path(deletion_vector_path(dv, table.storage.root))
        assert file.name.startswith("deletion_vector_") and file.parent == Path(table.storage.root)
        assert dv["cardinality"] == len(dv_rows(table, dv))
    assert sorted(r for a in adds.values() for r in dv_rows(table, a["deletionVector"])) == [1, 2, 3]
    # One DV file for the commit, two vectors in it.
    assert len({a["deletionVector"]["pathOrInlineDv"] for a in adds.values()}) == 1
    got = metrics(table, result.version)
    assert set(got) == DELTA_METRICS
    vectors = (got["numDeletionVectorsAdded"], got["numDeletionVectorsUpdated"], got["numRemovedFiles"])
    assert vectors == (2, 0, 0)
    assert (got["numDeletedRows"], got["numAddedFiles"], got["numCopiedRows"]) == (3, 0, 0)
    expected = sorted(set(range(40)) - {1, 2, 23})
    assert ids(core_rows(table)) == expected == ids(rs_rows(table.uri))


def test_a_second_delete_merges_into_the_existing_vector(tmp_path):
    table = make_table(tmp_path / "t", {"a": [range(10)]}, DV_PROPERTIES)
    first = table.delete("id < 2")
    first_dv = kind(commit_actions(table, first.version), "add")[0]["deletionVector"]
    second = table.delete("id IN (1, 5)")  # 1 is gone already: only 5 is new
    actions = commit_actions(table, second.version)
    remove, add = kind(actions, "remove")[0], kind(actions, "add")[0]
    assert remove["deletionVector"] == first_dv
    assert dv_rows(table, add["deletionVector"]) == [0, 1, 5]
    assert json.loads(add["stats"])["numRecords"] == 10
    got = metrics(table, second.version)
    assert (got["numDeletedRows"], got["numDeletionVectorsUpdated"]) == (1, 1)
    assert (got["numDeletionVectorsAdded"], got["numDeletionVectorsRemoved"]) == (1, 1)  # Delta's sums
    assert ids(core_rows(table)) == [2, 3, 4, 6, 7, 8, 9] == ids(rs_rows(table.uri))


def test_a_file_left_without_rows_is_removed_keeping_its_old_vector(tmp_path):
    table = make_table(tmp_path / "t", {"a": [range(4), range(4, 8)]}, DV_PROPERTIES)
    first = table.delete("id < 2")
    old = kind(commit_actions(table, first.version), "add")[0]["deletionVector"]
    second = table.delete("id < 5")
    actions = commit_actions(table, second.version)
    removes = kind(actions, "remove")
    full = [r for r in removes if r.get("deletionVector") == old]
    assert len(full) == 1 and not any(a["path"] == full[0]["path"] for a in kind(actions, "add"))
    got = metrics(table, second.version)
    assert (got["numRemovedFiles"], got["numDeletedRows"], got["numDeletionVectorsRemoved"]) == (1, 3, 1)
    assert got["numDeletionVectorsAdded"] == 1  # the other file's new vector
    assert ids(core_rows(table)) == [5, 6, 7] == ids(rs_rows(table.uri))


def test_only_rows_newly_deleted_count_and_a_repeated_delete_changes_nothing(tmp_path):
    table = make_table(tmp_path / "t", {"a": [range(10)]}, DV_PROPERTIES)
    table.delete("id < 3")
    before = state(table)
    again = table.delete("id < 3")
    assert again.reason == "nothing_to_delete" and state(table) == before


def test_row_tracking_ids_stay_with_their_rows(tmp_path):
    properties = {**DV_PROPERTIES, "delta.enableRowTracking": "true"}
    table = make_table(tmp_path / "t", {"a": [range(10)]}, properties)
    base = active(table)
    result = table.delete("id = 3")
    add = kind(commit_actions(table, result.version), "add")[0]
    old = next(iter(base.values()))
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (
        old["base_row_id"],
        old["default_row_commit_version"],
    )


def test_a_copy_on_write_delete_is_refused_where_row_ids_are_promised(tmp_path):
    table = make_table(tmp_path / "t", {"a": [range(10)]}, {"delta.enableRowTracking": "true"})
    before = state(table)
    with pytest.raises(UnsupportedFeatureError, match="rowTracking") as info:
        table.delete("id = 3")
    assert "delta.enableDeletionVectors" in str(info.value)
    assert state(table) == before
    table.delete("p = 'a'")  # whole files: no row is copied
    assert core_rows(table) == []


# --- column mapping ---------------------------------------------------------------------------


@pytest.mark.parametrize("properties", [{}, DV_PROPERTIES], ids=["copy-on-write", "deletion-vectors"])
@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_tables(tmp_path, mode, properties):
    table = make_table(tmp_path / "t", FILES, {"delta.columnMapping.mode": mode, **properties})
    result = table.delete("id >= 15 AND id < 25")
    expected = sorted(set(range(40)) - set(range(15, 25)))
    assert ids(core_rows(table)) == expected == ids(rs_rows(table.uri))
    schema = table.snapshot().schema
    physical = {f.name: physical_name(f) for f in schema}
    for add in kind(commit_actions(table, result.version), "add"):
        if "deletionVector" in add:
            continue
        file_schema = pq.read_schema(table.storage.join(add["path"]))
        assert file_schema.names == [physical["id"], physical["v"]]
        assert all(f.metadata and b"PARQUET:field_id" in f.metadata for f in file_schema)
        assert set(json.loads(add["stats"])["minValues"]) == {physical["id"], physical["v"]}


# --- refusals ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("predicate", "message"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("nope = 1", "'nope', which is not a column of the table"),
        ("id = ", "Cannot parse"),
        ("id = 1 AND", "Cannot parse"),
        ("id == 'abc'", "comparison of id with 'abc' is refused"),
        ("p = 5 AND v = 1.5e", "not a number Spark SQL reads"),
    ],
    ids=["empty", "blank", "unknown-column", "dangling", "dangling-and", "type-mismatch", "bad-number"],
)
@pytest.mark.parametrize("properties", [{}, DV_PROPERTIES], ids=["copy-on-write", "deletion-vectors"])
def test_a_bad_predicate_is_refused_before_anything_is_written(tmp_path, predicate, message, properties):
    table = make_table(tmp_path / "t", FILES, properties)
    before = state(table)
    with pytest.raises(PredicateError, match=message):
        table.delete(predicate)
    assert state(table) == before


@pytest.mark.parametrize("properties", [{}, DV_PROPERTIES], ids=["copy-on-write", "deletion-vectors"])
def test_parameters_are_bound_and_the_commit_records_the_markers(tmp_path, properties):
    """The erased values never reach the log: operationParameters.predicate keeps the text with
    its markers (Delta records resolved literals; a GDPR erasure must not)."""
    table = make_table(tmp_path / "t", FILES, properties)
    result = table.delete("id IN (:ids) OR v = :value", parameters={"ids": [3, 12], "value": "v25"})
    assert result.num_deleted_rows == 3 and result.predicate == "id IN (:ids) OR v = :value"
    info = kind(commit_actions(table, result.version), "commitInfo")[0]
    assert info["operationParameters"]["predicate"] == json.dumps(["id IN (:ids) OR v = :value"])
    log = (tmp_path / "t" / "_delta_log" / f"{result.version:020d}.json").read_text()
    assert "v25" not in log


@pytest.mark.parametrize(
    ("predicate", "parameters", "message"),
    [
        ("id = :id", {"id": 1, "other": 2}, "not used"),
        ("id = :id", {}, "no parameter binds"),
        ("id = :id", {"id": None}, "is None"),
        ("id = :id", {"id": "one"}, "not a whole number"),
        (None, {"id": 1}, "without a predicate"),
    ],
    ids=["unused", "unbound", "none", "not-a-number", "no-predicate"],
)
def test_a_bad_binding_is_refused_before_anything_is_written(tmp_path, predicate, parameters, message):
    table = make_table(tmp_path / "t", FILES, DV_PROPERTIES)
    before = state(table)
    with pytest.raises(PredicateError, match=message):
        table.delete(predicate, parameters=parameters)
    assert state(table) == before


def test_a_predicate_that_is_no_string_is_refused(tmp_path):
    table = make_table(tmp_path / "t", FILES)
    before = state(table)
    with pytest.raises(PredicateError, match="must be a SQL condition"):
        table.delete(42)  # type: ignore[arg-type]
    with pytest.raises(PredicateError, match="empty"):
        DeleteOptions("")
    assert state(table) == before


def test_a_comparison_on_a_nested_column_is_refused(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("s", pa.struct([("x", pa.int64())]))])
    table = DeltaTable.create(str(tmp_path / "t"), schema)
    before = state(table)
    with pytest.raises(PredicateError, match="nested type"):
        table.delete("s = 1")
    assert state(table) == before


def test_append_only_tables_refuse_delete(tmp_path):
    table = make_table(tmp_path / "t", FILES, {"delta.appendOnly": "true"})
    before = state(table)
    for predicate in (None, "p = 'a'", "id = 1"):
        with pytest.raises(AppendOnlyViolationError, match="appendOnly"):
            table.delete(predicate)
    assert state(table) == before


# --- idempotency, matchers --------------------------------------------------------------------


@pytest.mark.parametrize("properties", [{}, DV_PROPERTIES], ids=["copy-on-write", "deletion-vectors"])
def test_a_retry_with_the_same_app_version_commits_nothing(tmp_path, properties):
    table = make_table(tmp_path / "t", FILES, properties)
    first = table.delete("id = 1", app_id="erase-42", app_version=7)
    assert first.committed
    txn = kind(commit_actions(table, first.version), "txn")[0]
    assert (txn["appId"], txn["version"]) == ("erase-42", 7)
    before = state(table)
    again = table.delete("id = 2", app_id="erase-42", app_version=7)
    assert (again.committed, again.reason, again.version) == (False, "already_committed", first.version)
    assert state(table) == before


def test_another_engine_may_find_the_rows(tmp_path):
    table = make_table(tmp_path / "t", [range(10)], DV_PROPERTIES)
    asked = []

    def match_rows(snapshot, predicate, candidates):
        asked.append((predicate.text, candidates.paths))
        return {candidates.paths[0]: np.array([9, 0], dtype=np.uint64)}

    result = table.delete("id < 100", match_rows=match_rows)
    assert asked and result.num_deleted_rows == 2
    assert ids(core_rows(table)) == list(range(1, 9))


@pytest.mark.parametrize("properties", [{}, DV_PROPERTIES], ids=["copy-on-write", "deletion-vectors"])
@pytest.mark.parametrize("answer", ["unknown-file", "beyond-the-file"])
def test_a_matcher_answer_outside_the_plan_is_refused(tmp_path, properties, answer):
    table = make_table(tmp_path / "t", [range(10)], properties)
    before = state(table)

    def match_rows(snapshot, predicate, candidates):
        if answer == "unknown-file":
            return {"elsewhere.parquet": np.array([0], dtype=np.uint64)}
        return {candidates.paths[0]: np.array([10], dtype=np.uint64)}

    with pytest.raises(DeltaError, match=r"did not ask about|holds 10 rows|file of 10 rows"):
        table.delete("id < 100", match_rows=match_rows)
    assert state(table) == before


# --- the plan on its own (what PURGE and retention build on) -----------------------------------


def test_a_plan_that_is_not_committed_leaves_no_file_behind_when_its_commit_is_refused(tmp_path):
    from airflow_delta_provider.core.errors import ConcurrentDeleteReadError

    table = make_table(tmp_path / "t", {"a": [range(10)]}, DV_PROPERTIES)
    options = DeleteOptions("id = 1")
    plan = plan_delete(table.snapshot(), options)
    assert plan.written and all(Path(p).exists() for p in plan.written)
    table.delete("p = 'a'")  # a concurrent DELETE removes the file the plan read
    with pytest.raises(ConcurrentDeleteReadError):
        commit_delete(plan, options)
    assert not any(Path(p).exists() for p in plan.written)
