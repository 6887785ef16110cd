"""A consumer of one partition at a time (core/table/consumer.py with a ConsumerPartition): a cursor per
partition, each partition's source versions delivered once whatever order the partitions arrive in,
and a cursor-less first read judged on the partition's slice of the target."""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ConsumerCursorError
from airflow_delta_provider.core.expressions import slice_filter
from airflow_delta_provider.core.table.consumer import (
    ConsumerPartition,
    SourceRead,
    consumer_app_id,
    consumer_partition,
    parse_consumer_app_id,
    plan_read,
)

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.date32())])
CONSUMER = "airflow/dag/task"


def write(table: DeltaTable, ds: str, ids: list[int], *, replace: bool = False) -> int:
    """Commit one file of ``ids`` in partition ``ds`` (replacing the partition when asked)."""
    relative = f"ds={ds}/part-{uuid.uuid4().hex[:8]}.parquet"
    os.makedirs(os.path.join(table.storage.root, f"ds={ds}"), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), os.path.join(table.storage.root, relative))
    if replace:
        return table.commit_files([relative], mode="overwrite", replace_where=f"ds = '{ds}'").version
    return table.commit_files([relative]).version


def partition(ds: str, *, target_slice: bool = True) -> ConsumerPartition:
    chosen = slice_filter(["ds"], [ds])
    return ConsumerPartition(ds, chosen, chosen if target_slice else None)


@pytest.fixture
def source(tmp_path: Path) -> DeltaTable:
    return DeltaTable.create(str(tmp_path / "source"), SCHEMA, partition_by=["ds"])  # version 0


@pytest.fixture
def target(tmp_path: Path) -> DeltaTable:
    return DeltaTable.create(str(tmp_path / "target"), SCHEMA, partition_by=["ds"])


def delivered(read: SourceRead) -> list[tuple[int, int]]:
    """(id, version) of every row the read delivers: the snapshot's rows, or the changes' inserts."""
    if read.snapshot is not None:
        rows = read.snapshot.to_pyarrow_table().to_pylist()
        return sorted(
            (r["id"], read.snapshot.version)
            for r in rows
            if read.partition is None or str(r["ds"]) == read.partition.key
        )
    if read.changes is not None:
        rows = read.changes.to_pyarrow_table().to_pylist()
        return sorted((r["id"], r["_commit_version"]) for r in rows if r["_change_type"] == "insert")
    return []


def consume(source: DeltaTable, target: DeltaTable, ds: str, **kwargs: object) -> SourceRead:
    """Plan the read of one partition and commit its rows into the target's slice with the cursor."""
    read = plan_read(source, target.snapshot(), CONSUMER, partition=partition(ds), **kwargs)  # type: ignore[arg-type]
    ids = [i for i, _ in delivered(read)]
    if read.advance is not None:
        files = []
        if ids:
            relative = f"ds={ds}/c-{uuid.uuid4().hex[:8]}.parquet"
            os.makedirs(os.path.join(target.storage.root, f"ds={ds}"), exist_ok=True)
            pq.write_table(
                pa.table({"id": pa.array(ids, pa.int64())}), os.path.join(target.storage.root, relative)
            )
            files = [relative]
        target.commit_files(files, app_id=f"run-{uuid.uuid4()}", app_version=0, cursors=[read.advance])
    return read


def test_each_partition_has_its_own_cursor_and_app_id(source: DeltaTable, target: DeltaTable) -> None:
    table_id = source.snapshot().metadata.id
    app_id = consumer_app_id(table_id, CONSUMER, "2026-03-01|a b/%")
    assert app_id == f"delta-source/{table_id}/airflow/dag/task?partition=2026-03-01%7Ca%20b%2F%25"
    assert parse_consumer_app_id(app_id) == (table_id, CONSUMER)
    assert consumer_partition(app_id) == "2026-03-01|a b/%"
    assert consumer_partition(consumer_app_id(table_id, CONSUMER)) is None
    write(source, "2026-03-01", [1])
    write(source, "2026-03-02", [2])
    first, second = consume(source, target, "2026-03-01"), consume(source, target, "2026-03-02")
    assert first.app_id != second.app_id
    cursors = target.snapshot().transactions
    consumers = [a for a in cursors if parse_consumer_app_id(a) is not None]
    assert sorted(consumer_partition(a) or "" for a in consumers) == ["2026-03-01", "2026-03-02"]


def test_partitions_arriving_out_of_order_are_each_consumed_exactly_once(
    source: DeltaTable, target: DeltaTable
) -> None:
    v1 = write(source, "2026-03-02", [20])
    v2 = write(source, "2026-03-01", [10])  # an older partition, backfilled later
    # The events arrive in any order; each run reads up to its event's version.
    assert delivered(consume(source, target, "2026-03-01", up_to=v2)) == [(10, v2)]
    assert delivered(consume(source, target, "2026-03-02", up_to=v1)) == [(20, v1)]
    v3 = write(source, "2026-03-02", [21, 22], replace=True)  # a re-run (clear) of one partition
    again = consume(source, target, "2026-03-02", up_to=v3)
    assert delivered(again) == [(21, v3), (22, v3)] and again.versions == (v1 + 1, v3)
    # Nothing new in 2026-03-01 since its cursor: nothing delivered, the cursor stays, no commit.
    before = target.version()
    quiet = consume(source, target, "2026-03-01")
    assert (quiet.versions, quiet.advance, quiet.cursor) == (None, None, v2)
    assert target.version() == before
    # Every source row of each partition reached the target once.
    rows = target.snapshot().to_pyarrow_table().to_pylist()
    assert sorted((str(r["ds"]), r["id"]) for r in rows) == [
        ("2026-03-01", 10),
        ("2026-03-02", 20),
        ("2026-03-02", 21),
        ("2026-03-02", 22),
    ]


def test_a_partition_without_data_yet_commits_nothing(source: DeltaTable, target: DeltaTable) -> None:
    write(source, "2026-03-01", [1])
    read = consume(source, target, "2026-03-05")
    assert (read.versions, read.advance, read.snapshot) == (None, None, None)
    assert target.version() == 0


def test_a_first_read_is_judged_on_the_partitions_slice(source: DeltaTable, target: DeltaTable) -> None:
    write(source, "2026-03-01", [1])
    write(source, "2026-03-02", [2])
    consume(source, target, "2026-03-01")  # the target holds 2026-03-01 with its cursor
    # Another partition's data in the target is no reason to refuse 2026-03-02's first read.
    assert delivered(consume(source, target, "2026-03-02")) == [(2, 2)]
    # Data in the slice without the partition's cursor is refused, as for a whole table.
    write(target, "2026-03-03", [99])
    write(source, "2026-03-03", [3])
    with pytest.raises(ConsumerCursorError, match="slice of partition '2026-03-03'"):
        plan_read(source, target.snapshot(), CONSUMER, partition=partition("2026-03-03"))
    # Without a slice to judge, the whole target is: it holds data.
    with pytest.raises(ConsumerCursorError):
        plan_read(source, target.snapshot(), CONSUMER, partition=partition("2026-03-04", target_slice=False))


def test_a_partition_key_the_source_cannot_hold_is_refused(source: DeltaTable, target: DeltaTable) -> None:
    from airflow_delta_provider.core.expressions import PredicateError

    write(source, "2026-03-01", [1])
    with pytest.raises(PredicateError, match="comparison of ds with :p0 is refused"):
        plan_read(source, target.snapshot(), CONSUMER, partition=partition("not-a-date"))
