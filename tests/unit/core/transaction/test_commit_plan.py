"""A commit as a plan: what every operation hands the one transaction, and the properties every
commit takes. The plan carries more than a write uses (other applications' txns, change-data
files): what the next commit kinds (DELETE, RESTORE, a consumer's cursor) build on."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import InvalidLogValueError
from airflow_delta_provider.core.expressions.predicate import Predicate
from airflow_delta_provider.core.expressions.stats import read_footer
from airflow_delta_provider.core.protocol.actions import AddCDCFile, AddFile, Transaction
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan, CommitProperties, ReadSet

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.string())])


@pytest.fixture
def table(tmp_path) -> DeltaTable:
    return DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"])


def add_file(table: DeltaTable, relative: str, ids: list[int]) -> AddFile:
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), path)
    footer = read_footer(table.storage, path, stats_columns=[("id",)])
    return AddFile(relative, {"ds": "a"}, os.path.getsize(path), 1, stats=footer.stats)


def lines(table: DeltaTable, version: int) -> list[dict]:
    with open(os.path.join(table.storage.log_dir, f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f]


def test_a_plan_commits_its_txns_and_change_data_files_with_the_commits_own_txn(table):
    add = add_file(table, "ds=a/part-0.parquet", [1, 2])
    cdc = AddCDCFile("_change_data/ds=a/cdc-0.parquet", {"ds": "a"}, 10)
    cursor = Transaction("source-table-cursor", 7, last_updated=1)
    plan = CommitPlan("WRITE", {"mode": "Append"}, {"numFiles": 1}, txns=(cursor,), adds=(add,), cdc=(cdc,))
    transaction = OptimisticTransaction(
        table.storage, properties=CommitProperties(app_id="job", app_version=3)
    )
    result = transaction.commit(plan)
    assert (result.committed, result.version, result.app_id, result.app_version) == (True, 1, "job", 3)
    written = lines(table, 1)
    assert [next(iter(a)) for a in written] == ["commitInfo", "txn", "txn", "add", "cdc"]
    assert written[1]["txn"]["appId"] == "job" and written[2]["txn"] == cursor.to_json()
    assert written[4]["cdc"]["dataChange"] is False
    assert written[0]["commitInfo"]["isBlindAppend"] is False  # Delta: a cdc file is a file action
    snapshot = table.snapshot()
    assert snapshot.app_transaction_version("job") == 3
    assert snapshot.app_transaction_version("source-table-cursor") == 7
    assert RsDeltaTable(table.uri).to_pyarrow_table().column("id").to_pylist() == [1, 2]


def test_the_commits_own_txn_makes_a_second_commit_of_the_plan_a_no_op(table, log_state):
    plan = CommitPlan("WRITE", adds=(add_file(table, "ds=a/part-0.parquet", [1]),))
    properties = CommitProperties(app_id="job", app_version=1)
    assert OptimisticTransaction(table.storage, properties=properties).commit(plan).committed
    before = log_state(table.storage.root)
    again = OptimisticTransaction(table.storage, properties=properties).commit(plan)
    assert (again.committed, again.already_committed, again.version, again.operation) == (
        False,
        True,
        1,
        "WRITE",
    )
    assert log_state(table.storage.root) == before


def test_a_bad_change_data_file_is_refused_before_anything_is_written(table, log_state):
    before = log_state(table.storage.root)
    plan = CommitPlan("WRITE", cdc=(AddCDCFile("_change_data/x.parquet", {"ds": "a"}, -1),))
    with pytest.raises(InvalidLogValueError, match=r"cdc\.size .*-1"):
        OptimisticTransaction(table.storage).commit(plan)
    assert log_state(table.storage.root) == before


def test_what_a_transaction_read_is_public_and_canonical(table):
    transaction = OptimisticTransaction(table.storage)
    assert transaction.app_transaction_version("job") is None
    transaction.record_read(ReadSet.files(["ds=a/a%20b.parquet"]))
    predicate = Predicate("ds = 'a'", ["ds"])
    transaction.record_read(ReadSet.matching(predicate, ["ds=a/c.parquet"]))
    read = transaction.read_set
    assert read.app_ids == {"job"}
    assert read.paths == {table.storage.path.canonical("ds=a/a%20b.parquet"), "ds=a/c.parquet"}
    assert (read.predicates, read.whole_table, read.reads_by_predicate) == ((predicate,), False, True)
    assert ReadSet.matching(None, []).whole_table
    assert not ReadSet.files(["x"]).reads_by_predicate  # OPTIMIZE: a concurrent append never conflicts


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"app_id": "job"}, "both app_id and app_version"),
        ({"app_version": 1}, "both app_id and app_version"),
        ({"app_id": "", "app_version": 1}, "app_id"),
        ({"app_id": "job", "app_version": -1}, "app_version"),
        ({"max_attempts": 0}, "max_attempts must be a positive integer, got 0"),
        ({"auto_checkpoint": "yes"}, "auto_checkpoint must be True or False, got 'yes'"),
        ({"cleanup_expired_logs": "no"}, "cleanup_expired_logs must be True or False, got 'no'"),
    ],
)
def test_commit_properties_refuse_each_class_of_bad_value_naming_it(table, log_state, arguments, message):
    before = log_state(table.storage.root)
    with pytest.raises(ValueError, match=message):
        CommitProperties(**arguments)
    with pytest.raises(ValueError, match=message):  # every operation takes them: a commit of files ...
        table.commit_files([], **arguments)
    with pytest.raises(ValueError, match=message):  # ... and an OPTIMIZE
        table.optimize(**arguments)
    assert log_state(table.storage.root) == before
