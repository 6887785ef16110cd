"""Optimistic concurrency: Delta's conflict rules when another writer commits first.

A "stale" writer is a table object whose transaction reads a snapshot taken before the
winner committed, exactly the state a concurrent writer is in when its put-if-absent
finds the version taken.
"""

from __future__ import annotations

import json
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    CommitFileExistsError,
    ConcurrentAppendError,
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    ConcurrentTransactionError,
    MaxCommitAttemptsExceededError,
    MetadataChangedError,
    ProtocolChangedError,
)
from airflow_delta_provider.core.protocol.actions import AddFile, RemoveFile
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan, CommitProperties, CursorAdvance

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.string())])


def part(table: DeltaTable, ds: str, ids: list[int], extra: dict | None = None) -> str:
    relative = f"w-{uuid.uuid4().hex[:8]}/ds={ds}/part-0.parquet"
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), **(extra or {})}), path)
    return relative


@pytest.fixture
def table(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"])
    table.commit_files([part(table, "a", [1]), part(table, "b", [2])])
    return table


def stale(table: DeltaTable, monkeypatch) -> DeltaTable:
    """Another handle on the table that keeps reading the current version, whatever is committed after."""
    other = DeltaTable(table.uri)
    snapshot = other.snapshot()
    monkeypatch.setattr(other, "snapshot", lambda *a, **k: snapshot)
    return other


def ids(table: DeltaTable) -> list[int]:
    return sorted(table.snapshot().to_pyarrow_table()["id"].to_pylist())


def test_blind_appends_never_conflict(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])])
    result = loser.commit_files([part(loser, "a", [4])])
    assert (result.version, result.attempts, result.read_version) == (3, 2, 1)
    assert ids(table) == [1, 2, 3, 4]


def test_replace_where_conflicts_with_an_append_to_its_partition(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])])
    with pytest.raises(ConcurrentAppendError, match="committed at version 2") as info:
        loser.commit_files([part(loser, "a", [9])], mode="overwrite", replace_where="ds = 'a'")
    assert (info.value.version, info.value.operation) == (2, "WRITE")
    assert info.value.delta_error_class == "DELTA_CONCURRENT_APPEND"
    assert ids(table) == [1, 2, 3]  # nothing lost


def test_replace_where_ignores_appends_to_other_partitions(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "b", [3])])
    loser.commit_files([part(loser, "a", [9])], mode="overwrite", replace_where="ds = 'a'")
    assert ids(table) == [2, 3, 9]


def test_write_serializable_lets_blind_appends_through(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])])
    loser.commit_files(
        [part(loser, "a", [9])],
        mode="overwrite",
        replace_where="ds = 'a'",
        isolation_level="WriteSerializable",
    )
    assert ids(table) == [2, 3, 9]  # Delta's WriteSerializable: the concurrent blind append survives


def test_full_overwrite_conflicts_with_any_append(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "z", [3])])
    with pytest.raises(ConcurrentAppendError):
        loser.commit_files([part(loser, "a", [9])], mode="overwrite")


def test_files_removed_under_a_reader_raise_delete_read(table, monkeypatch):
    loser = stale(table, monkeypatch)
    # The winner removes partition a (and writes only b), so nothing it adds matches ds = 'a'.
    table.commit_files([part(table, "b", [5])], mode="overwrite", replace_where="ds = 'a' OR ds = 'b'")
    with pytest.raises(ConcurrentDeleteReadError, match="removed data"):
        loser.commit_files([part(loser, "a", [9])], mode="overwrite", replace_where="ds = 'a'")


def test_removing_the_same_file_twice_raises_delete_delete(table, monkeypatch):
    loser = stale(table, monkeypatch)
    victim = table.snapshot().files().to_pylist()[0]
    table.commit_files([part(table, "c", [5])], mode="overwrite")
    transaction = OptimisticTransaction(loser.storage, read_snapshot=loser.snapshot())
    remove = RemoveFile(path=victim["path"], deletion_timestamp=1, data_change=False, size=victim["size"])
    with pytest.raises(ConcurrentDeleteDeleteError):
        transaction.commit(CommitPlan("OPTIMIZE", removes=(remove,), data_change=False))


def test_metadata_change_by_the_winner(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3], {"extra": [1.0]})], schema_mode="merge")
    with pytest.raises(MetadataChangedError, match="metadata of the Delta table has been changed"):
        loser.commit_files([part(loser, "a", [4])])


def test_protocol_change_by_the_winner_to_an_unsupported_feature(table, monkeypatch):
    loser = stale(table, monkeypatch)
    features = ["allowColumnDefaults"]
    protocol = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": features}}
    with open(os.path.join(table.storage.log_dir, f"{2:020d}.json"), "w") as f:
        f.write(
            json.dumps({"commitInfo": {"operation": "UPGRADE PROTOCOL"}}) + "\n" + json.dumps(protocol) + "\n"
        )
    with pytest.raises(ProtocolChangedError, match="allowColumnDefaults") as info:
        loser.commit_files([part(loser, "a", [4])])
    assert info.value.operation == "UPGRADE PROTOCOL"


def test_a_winner_with_our_app_transaction_makes_us_skip(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])], app_id="job", app_version=5)
    result = loser.commit_files([part(loser, "a", [3])], app_id="job", app_version=5)
    assert (result.committed, result.version) == (False, 2)
    assert ids(table) == [1, 2, 3]


def test_a_winner_with_an_older_version_of_our_app_makes_us_recheck_and_commit(table, monkeypatch):
    """The commit's own appId is blind: its only read is "is my version recorded?". A winner that
    recorded a lower version of it (another run's, e.g. an earlier try) changes nothing this commit
    read: it asks again of the winner and commits at the next version."""
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])], app_id="job", app_version=5)
    result = loser.commit_files([part(loser, "a", [4])], app_id="job", app_version=6)
    assert (result.committed, result.version, result.attempts) == (True, 3, 2)
    assert table.snapshot().app_transaction_version("job") == 6
    assert ids(table) == [1, 2, 3, 4]


def test_a_winner_with_a_later_version_of_our_app_leaves_nothing_to_commit(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])], app_id="job", app_version=6)
    before = (table.version(), ids(table), sorted(os.listdir(table.storage.log_dir)))
    result = loser.commit_files([part(loser, "a", [4])], app_id="job", app_version=5)
    assert (result.committed, result.reason, result.version) == (False, "already_committed", 2)
    assert (table.version(), ids(table), sorted(os.listdir(table.storage.log_dir))) == before


def test_one_app_id_with_two_versions_from_the_same_stale_snapshot_both_land_in_order(table, monkeypatch):
    """Two writers of one app_id, both planned on version 1, the lower one first: the higher one
    retries and lands (it did before the consumer cursors came; issue 30's regression)."""
    first, second = stale(table, monkeypatch), stale(table, monkeypatch)
    low = first.commit_files([part(first, "a", [3])], app_id="job", app_version=1)
    high = second.commit_files([part(second, "a", [4])], app_id="job", app_version=2)
    assert (low.version, high.version, high.committed) == (2, 3, True)
    assert table.snapshot().app_transaction_version("job") == 2 and ids(table) == [1, 2, 3, 4]


def test_an_app_id_we_read_explicitly_stays_a_conflict_even_when_it_is_our_own(table, monkeypatch):
    """A builder that reads its own appId through the transaction (a compare-and-set of its own)
    keeps Delta's rule: a winner recording it conflicts."""
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])], app_id="job", app_version=5)
    transaction = OptimisticTransaction(
        loser.storage,
        read_snapshot=loser.snapshot(),
        properties=CommitProperties(app_id="job", app_version=6),
    )
    assert transaction.app_transaction_version("job") is None
    add = AddFile(path=part(loser, "a", [4]), partition_values={"ds": "a"}, size=1, modification_time=1)
    with pytest.raises(ConcurrentTransactionError, match="'job' was committed concurrently at version 5"):
        transaction.commit(CommitPlan("WRITE", adds=(add,)))
    assert table.snapshot().app_transaction_version("job") == 5 and ids(table) == [1, 2, 3]


def test_a_winner_with_an_app_id_we_only_read_conflicts(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])], app_id="stream", app_version=1)
    transaction = OptimisticTransaction(loser.storage, read_snapshot=loser.snapshot())
    assert transaction.app_transaction_version("stream") is None
    add = AddFile(path=part(loser, "a", [4]), partition_values={"ds": "a"}, size=1, modification_time=1)
    with pytest.raises(ConcurrentTransactionError):
        transaction.commit(CommitPlan("WRITE", adds=(add,)))


def test_max_attempts(table, monkeypatch):
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])])
    with pytest.raises(MaxCommitAttemptsExceededError, match="after 1 attempts"):
        loser.commit_files([part(loser, "a", [4])], max_attempts=1)


def test_racing_creators(tmp_path):
    uri = str(tmp_path / "t")
    DeltaTable.create(uri, SCHEMA)
    late = OptimisticTransaction(DeltaTable(uri).storage, new_table=True)
    with pytest.raises(ProtocolChangedError, match="multiple writers are writing to an empty directory"):
        late.commit(CommitPlan("CREATE TABLE"))


def test_lost_response_is_recognised_by_txn_id(table, monkeypatch):
    """The put landed but the writer was told it failed (an S3 retry answered 412).

    A fault that cannot be produced for real on a local filesystem, so the storage call
    is wrapped to first write, then report the conflict a retried request would.
    """
    storage = table.storage
    real_put = storage.put_if_absent

    def put_then_report_exists(path: str, data: bytes) -> None:
        real_put(path, data)
        raise CommitFileExistsError(f"{path} already exists.")

    monkeypatch.setattr(storage, "put_if_absent", put_then_report_exists)
    result = table.commit_files([part(table, "a", [3])])
    assert (result.committed, result.version, result.attempts) == (True, 2, 1)
    assert table.version() == 2
    assert ids(table) == [1, 2, 3]


# --- cursors: application transactions a commit advances as a compare-and-set -------------------


def test_a_cursor_is_recorded_in_the_same_commit_beside_the_own_txn(table):
    result = table.commit_files(
        [part(table, "a", [3])],
        app_id="task",
        app_version=0,
        cursors=[CursorAdvance("consumer", 7, expected=None)],
    )
    assert (result.committed, result.app_id, result.app_version) == (True, "task", 0)
    snapshot = table.snapshot()
    assert snapshot.app_transaction_version("consumer") == 7
    assert snapshot.app_transaction_version("task") == 0
    with open(os.path.join(table.storage.log_dir, f"{result.version:020d}.json")) as f:
        txns = [json.loads(line)["txn"] for line in f if '"txn"' in line]
    assert [(t["appId"], t["version"]) for t in txns] == [("task", 0), ("consumer", 7)]
    assert all(isinstance(t["lastUpdated"], int) for t in txns)


def test_a_cursor_that_moved_since_it_was_read_is_refused(table):
    table.commit_files([part(table, "a", [3])], cursors=[CursorAdvance("consumer", 4)])
    before = (table.version(), ids(table), sorted(os.listdir(table.storage.log_dir)))
    with pytest.raises(ConcurrentTransactionError, match="'consumer' read version None of its txn"):
        table.commit_files([part(table, "a", [9])], cursors=[CursorAdvance("consumer", 6, expected=None)])
    with pytest.raises(ConcurrentTransactionError, match=r"read version 2 of its txn, but .* now holds 4"):
        table.commit_files([part(table, "a", [9])], cursors=[CursorAdvance("consumer", 6, expected=2)])
    assert (table.version(), ids(table), sorted(os.listdir(table.storage.log_dir))) == before
    table.commit_files([part(table, "a", [5])], cursors=[CursorAdvance("consumer", 6, expected=4)])
    assert table.snapshot().app_transaction_version("consumer") == 6


@pytest.mark.parametrize(("winner", "ours"), [(4, 6), (6, 6), (9, 6)])
def test_a_winner_that_advanced_the_same_cursor(table, monkeypatch, winner, ours):
    """Two consumers read the same cursor: the loser never commits past the winner's work. A winner
    at our version or later did our work (nothing is written); below it, the loser must redo its work."""
    loser = stale(table, monkeypatch)
    table.commit_files([part(table, "a", [3])], cursors=[CursorAdvance("consumer", winner)])
    if winner < ours:
        with pytest.raises(ConcurrentTransactionError, match="'consumer' was committed concurrently"):
            loser.commit_files([part(loser, "a", [4])], cursors=[CursorAdvance("consumer", ours)])
    else:
        result = loser.commit_files([part(loser, "a", [4])], cursors=[CursorAdvance("consumer", ours)])
        assert (result.committed, result.reason, result.version) == (False, "already_committed", 2)
    assert table.snapshot().app_transaction_version("consumer") == winner
    assert ids(table) == [1, 2, 3]


@pytest.mark.parametrize(
    ("cursors", "message"),
    [
        ([CursorAdvance("a", 1), CursorAdvance("a", 2)], "repeat an application"),
        ("not a list", "sequence of CursorAdvance"),
        ([("a", 1)], "sequence of CursorAdvance"),
    ],
)
def test_bad_cursors_are_refused_before_anything_is_written(table, cursors, message):
    before = (table.version(), sorted(os.listdir(table.storage.log_dir)))
    with pytest.raises(ValueError, match=message):
        table.commit_files([part(table, "a", [3])], cursors=cursors)
    with pytest.raises(ValueError, match="repeat an application"):
        table.commit_files(
            [part(table, "a", [3])], app_id="a", app_version=1, cursors=[CursorAdvance("a", 1)]
        )
    assert (table.version(), sorted(os.listdir(table.storage.log_dir))) == before


@pytest.mark.parametrize(("app_id", "version", "expected"), [("", 1, None), ("a", -1, None), ("a", 1, -2)])
def test_a_cursor_holds_only_values_a_txn_can(app_id, version, expected):
    with pytest.raises(ValueError):
        CursorAdvance(app_id, version, expected)
