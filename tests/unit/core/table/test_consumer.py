"""A consumer's next read of its source, decided from the cursor its target holds (core/table/consumer.py)."""

from __future__ import annotations

import os
import shutil
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import CommitsCleanedUpError, ConsumerCursorError, SourceIsTargetError
from airflow_delta_provider.core.table.consumer import (
    commit_time,
    consumer_app_id,
    parse_consumer_app_id,
    plan_read,
)
from airflow_delta_provider.core.transaction.commit_plan import CursorAdvance

SCHEMA = pa.schema([("id", pa.int64())])
CONSUMER = "airflow/dag/task"


def write(table: DeltaTable, ids: list[int]) -> str:
    relative = f"part-{uuid.uuid4().hex[:8]}.parquet"
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), os.path.join(table.storage.root, relative))
    return relative


@pytest.fixture
def source(tmp_path) -> DeltaTable:
    table = DeltaTable.create(str(tmp_path / "source"), SCHEMA)  # version 0
    for batch in ([1, 2], [3], [4, 5]):  # versions 1-3
        table.commit_files([write(table, batch)])
    return table


@pytest.fixture
def target(tmp_path) -> DeltaTable:
    return DeltaTable.create(str(tmp_path / "target"), SCHEMA)


def consume(source: DeltaTable, target: DeltaTable, **kwargs):
    """Plan a read and commit its cursor (no rows: the tests look at the cursor and the plan)."""
    read = plan_read(source, target.snapshot(), CONSUMER, **kwargs)
    if read.advance is not None:
        target.commit_files([], app_id=f"run-{uuid.uuid4()}", app_version=0, cursors=[read.advance])
    return read


def test_the_app_id_names_the_source_table_and_the_consumer(source):
    table_id = source.snapshot().metadata.id
    app_id = consumer_app_id(table_id, CONSUMER)
    assert app_id == f"delta-source/{table_id}/airflow/dag/task"
    assert parse_consumer_app_id(app_id) == (table_id, CONSUMER)
    assert parse_consumer_app_id("airflow/dag/task/2026-01-01") is None
    assert parse_consumer_app_id("delta-source/only-an-id") is None
    for bad in ("", "a/b"):
        with pytest.raises(ValueError, match="source table id"):
            consumer_app_id(bad, CONSUMER)
    with pytest.raises(ValueError, match="non-empty name"):
        consumer_app_id(table_id, "")


def test_a_first_read_takes_the_snapshot_then_each_read_the_versions_after_the_cursor(source, target):
    first = consume(source, target)
    assert (first.cursor, first.versions, first.record) == (None, (0, 3), 3)
    assert first.snapshot is not None and first.snapshot.version == 3 and first.changes is None
    assert sorted(first.snapshot.to_pyarrow_table()["id"].to_pylist()) == [1, 2, 3, 4, 5]
    assert target.snapshot().app_transaction_version(first.app_id) == 3

    nothing = consume(source, target)
    assert (nothing.cursor, nothing.versions, nothing.advance) == (3, None, None)

    source.commit_files([write(source, [6])])  # 4
    source.commit_files([write(source, [7])])  # 5
    bounded = consume(source, target, up_to=4)
    assert (bounded.versions, bounded.advance) == ((4, 4), CursorAdvance(first.app_id, 4, 3))
    assert bounded.changes.to_pyarrow_table()["id"].to_pylist() == [6]
    rest = consume(source, target)
    assert rest.versions == (5, 5) and rest.changes.to_pyarrow_table()["id"].to_pylist() == [7]
    # An event older than the cursor brings nothing.
    assert consume(source, target, up_to=2).versions is None


def test_a_first_read_bounded_by_an_event_reads_the_snapshot_at_that_version(source, target):
    read = plan_read(source, target.snapshot(), CONSUMER, up_to=1)
    assert (read.versions, read.snapshot.version, read.latest) == ((0, 1), 1, 3)
    assert sorted(read.snapshot.to_pyarrow_table()["id"].to_pylist()) == [1, 2]


def test_an_explicit_starting_version(source, target):
    read = plan_read(source, target.snapshot(), CONSUMER, starting_version=2)
    assert (read.versions, read.record, read.snapshot) == ((2, 3), 3, None)
    assert sorted(read.changes.to_pyarrow_table()["id"].to_pylist()) == [3, 4, 5]
    ahead = plan_read(source, target.snapshot(), CONSUMER, starting_version=10)
    assert (ahead.versions, ahead.record) == (None, 9)


def test_latest_records_the_current_version_so_the_next_read_starts_after_it(source, target):
    first = consume(source, target, starting_version="latest")
    assert (first.versions, first.record) == (None, 3)
    source.commit_files([write(source, [6])])
    # The starting version applies only without a cursor.
    after = consume(source, target, starting_version="latest")
    assert after.versions == (4, 4) and after.changes.to_pyarrow_table()["id"].to_pylist() == [6]


def test_no_cursor_but_data_in_the_target_is_refused_unless_a_start_is_given(source, target):
    target.commit_files([write(target, [1])])
    with pytest.raises(ConsumerCursorError, match="holds data but no cursor of consumer 'airflow/dag/task'"):
        plan_read(source, target.snapshot(), CONSUMER)
    assert plan_read(source, target.snapshot(), CONSUMER, starting_version=1).versions == (1, 3)
    assert plan_read(source, target.snapshot(), CONSUMER, reset=True).versions == (0, 3)


def test_a_cursor_on_another_source_table_is_refused_unless_reset(source, target, tmp_path):
    consume(source, target)
    recreated = DeltaTable.create(str(tmp_path / "recreated"), SCHEMA)
    recreated.commit_files([write(recreated, [9])])
    with pytest.raises(ConsumerCursorError, match="cursor of consumer 'airflow/dag/task' on another source"):
        plan_read(recreated, target.snapshot(), CONSUMER, starting_version=0)
    read = plan_read(recreated, target.snapshot(), CONSUMER, reset=True)
    assert (read.cursor, read.versions) == (None, (0, 1))
    # Another consumer of the same target is not concerned.
    assert plan_read(recreated, target.snapshot(), "airflow/dag/other").versions == (0, 1)


def test_reset_starts_over_and_still_checks_the_cursor_it_read(source, target):
    first = consume(source, target)
    read = plan_read(source, target.snapshot(), CONSUMER, reset=True, starting_version=1)
    assert (read.versions, read.advance) == ((1, 3), CursorAdvance(first.app_id, 3, 3))


def test_versions_removed_by_log_cleanup_are_the_cores_error(source, target):
    consume(source, target, starting_version="latest")  # cursor 3
    source.commit_files([write(source, [6])])  # 4
    source.commit_files([write(source, [7])])  # 5
    source.checkpoint()
    for version in range(5):  # what log cleanup leaves: the checkpoint and the commits from it on
        os.remove(os.path.join(source.storage.log_dir, f"{version:020d}.json"))
    with pytest.raises(CommitsCleanedUpError) as info:
        plan_read(source, target.snapshot(), CONSUMER)
    assert (info.value.version, info.value.earliest_version) == (4, 5)


def state(table: DeltaTable) -> tuple[int, list[str], list[str]]:
    """What a refused read must leave as it was: version, active files, the log's listing."""
    snapshot = DeltaTable(table.uri).snapshot()
    return (
        snapshot.version,
        sorted(snapshot.files().column("path").to_pylist()),
        sorted(os.listdir(snapshot.storage.log_dir)),
    )


@pytest.mark.parametrize(
    "spelling",
    [
        pytest.param(lambda root, tmp: str(root), id="same-path"),
        pytest.param(lambda root, tmp: f"file://{root}/", id="file-uri-trailing-slash"),
        pytest.param(lambda root, tmp: f"{tmp}/elsewhere/../{root.name}", id="dot-dot"),
        pytest.param(lambda root, tmp: f"{tmp}//{root.name}", id="double-slash"),
        pytest.param(lambda root, tmp: _symlink(root, tmp / "link"), id="symlink"),
        pytest.param(
            lambda root, tmp: _symlink(root.parent, tmp / "parent-link") + f"/{root.name}",
            id="symlinked-parent",
        ),
    ],
)
def test_a_source_that_is_the_target_under_any_spelling_is_refused(source, tmp_path, spelling):
    (tmp_path / "elsewhere").mkdir()
    root = tmp_path / "source"
    target = DeltaTable(spelling(root, tmp_path))
    before = state(source)
    with pytest.raises(SourceIsTargetError, match="are one table") as info:
        plan_read(source, target.snapshot(), CONSUMER)
    assert source.snapshot().metadata.id in str(info.value)
    with pytest.raises(SourceIsTargetError):  # a reset does not make it another table
        plan_read(source, target.snapshot(), CONSUMER, reset=True, starting_version=1)
    assert state(source) == before


def test_a_copy_of_the_source_keeps_its_id_and_is_refused_as_a_target(source, tmp_path):
    shutil.copytree(source.storage.root, tmp_path / "copy")
    copy = DeltaTable(str(tmp_path / "copy"))
    before = state(copy)
    with pytest.raises(SourceIsTargetError, match="a copied table keeps its id"):
        plan_read(source, copy.snapshot(), CONSUMER)
    assert state(copy) == before


def _symlink(to, link) -> str:
    os.symlink(to, link)
    return str(link)


def test_commit_time_is_the_change_feeds_commit_timestamp(source):
    changes = source.changes(3, 3).to_pyarrow_table()
    expected = changes["_commit_timestamp"][0].as_py().timestamp() * 1000
    assert commit_time(source.snapshot()) == int(expected)
