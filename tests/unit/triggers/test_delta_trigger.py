"""DeltaTableVersionTrigger: real polling of a real table that another thread commits to."""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
import types
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import Asset, AssetWatcher

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.triggers.delta import CURSOR_KEY, DeltaTableVersionTrigger

SCHEMA = pa.schema([("id", pa.int64())])


def commit(table: DeltaTable) -> None:
    relative = f"w-{uuid.uuid4().hex[:8]}/p.parquet"
    os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
    pq.write_table(pa.table({"id": [1]}), os.path.join(table.storage.root, relative))
    table.commit_files([relative])


class StateStore:
    """An in-memory asset state store with Airflow 3.3's async interface."""

    def __init__(self, values=None):
        self.values = dict(values or {})

    async def aget(self, key):
        return self.values.get(key)

    async def aset(self, key, value):
        self.values[key] = value


class BlockingStateStore:
    """Airflow 3.3.1's ``AssetStateStoreAccessors``: ``get``/``set`` only, no ``aget``/``aset``."""

    def __init__(self):
        self.values = {}

    def get(self, key, default=None):
        return self.values.get(key, default)

    def set(self, key, value):
        self.values[key] = value


async def next_event(trigger, timeout=10.0):
    async with contextlib.aclosing(trigger.run()) as events:
        return await asyncio.wait_for(events.__anext__(), timeout)


def test_serialize_round_trips():
    trigger = DeltaTableVersionTrigger(
        table_uri="s3://b/t",
        storage_conn_id="aws",
        after_version=3,
        operations=["WRITE"],
        partition_values={"ds": "1"},
        partition_filter="ds = '1'",
    )
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_delta_provider.triggers.delta.DeltaTableVersionTrigger"
    assert DeltaTableVersionTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_usable_in_an_asset_watcher():
    trigger = DeltaTableVersionTrigger(table_uri="s3://b/t")
    asset = Asset("s3://b/t", watchers=[AssetWatcher(name="commits", trigger=trigger)])
    assert asset.watchers[0].trigger is trigger


@pytest.mark.asyncio
async def test_fires_when_another_writer_commits(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    trigger = DeltaTableVersionTrigger(table_uri=table.uri, after_version=0, poll_interval=0.05)
    timer = threading.Timer(0.3, commit, args=(table,))
    timer.start()
    event = await next_event(trigger)
    timer.join()
    assert event.payload["status"] == "success"
    assert event.payload["version"] == 1 and event.payload["previous_version"] == 0
    assert event.payload["operation"] == "WRITE"


@pytest.mark.asyncio
async def test_waits_for_a_missing_table(tmp_path):
    uri = str(tmp_path / "later")
    trigger = DeltaTableVersionTrigger(table_uri=uri, poll_interval=0.05)
    timer = threading.Timer(0.3, DeltaTable.create, args=(uri, SCHEMA))
    timer.start()
    event = await next_event(trigger)
    timer.join()
    assert event.payload["version"] == 0


@pytest.mark.asyncio
async def test_an_unreadable_table_gives_an_error_event(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    with open(os.path.join(table.storage.log_dir, f"{1:020d}.json"), "w") as f:
        f.write("garbage\n")
    event = await next_event(
        DeltaTableVersionTrigger(table_uri=table.uri, after_version=0, poll_interval=0.05)
    )
    assert event.payload["status"] == "error"
    assert "00000000000000000001.json" in event.payload["message"]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    "make_store",
    [
        pytest.param(StateStore, id="airflow-3.3.2-aget-aset"),
        # 3.3.1 hands the trigger accessors without aget/aset (the trigger crashed in a loop on them).
        pytest.param(BlockingStateStore, id="airflow-3.3.1-get-set"),
    ],
)
async def test_cursor_in_the_asset_state_store_survives_a_restart(tmp_path, make_store):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    commit(table)
    store = make_store()
    first = DeltaTableVersionTrigger(table_uri=table.uri, poll_interval=0.05)
    first.asset_state_store = store
    event = await next_event(first)
    assert event.payload["versions"] == [0, 1]
    assert store.values[CURSOR_KEY] == "1"  # saved before the event went out
    restarted = DeltaTableVersionTrigger(table_uri=table.uri, poll_interval=0.05)
    restarted.asset_state_store = store
    timer = threading.Timer(0.3, commit, args=(table,))
    timer.start()
    event = await next_event(restarted)
    timer.join()
    assert event.payload["versions"] == [2]  # versions 0 and 1 are not emitted again


@pytest.mark.asyncio
async def test_without_poll_interval_the_delta_config_applies(tmp_path, monkeypatch):
    """With a hard-coded 60 s the second poll would come after the 10 s the test waits for an event."""
    monkeypatch.setenv("AIRFLOW__DELTA__POLL_INTERVAL", "0.05")
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    trigger = DeltaTableVersionTrigger(table_uri=table.uri, after_version=0)
    assert trigger.serialize()[1]["poll_interval"] is None  # read by the triggerer, not stored
    timer = threading.Timer(0.3, commit, args=(table,))
    timer.start()
    event = await next_event(trigger)
    timer.join()
    assert event.payload["version"] == 1


@pytest.mark.asyncio
async def test_a_deferred_task_s_trigger_ends_after_its_event(tmp_path):
    """Left running, the triggerer would cancel it as a "user action" and call on_kill."""
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    trigger = DeltaTableVersionTrigger(table_uri=table.uri, poll_interval=0.05)
    # What the triggerer sets for a deferred task (a task instance; its ids are all a trigger reads).
    trigger.task_instance = types.SimpleNamespace(task_id="wait", dag_id="d", run_id="r", map_index=-1)
    events = [event async for event in trigger.run()]  # ends by itself
    assert [e.payload["versions"] for e in events] == [[0]]


@pytest.mark.asyncio
async def test_a_partition_filter_fires_on_those_partitions_with_their_keys(tmp_path):
    schema = pa.schema([("id", pa.int64()), ("ds", pa.string()), ("region", pa.string())])
    table = DeltaTable.create(str(tmp_path / "t"), schema, partition_by=["ds", "region"])

    def write(ds, region):
        relative = f"w-{uuid.uuid4().hex[:8]}/ds={ds}/region={region}/p.parquet"
        os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
        pq.write_table(pa.table({"id": [1]}), os.path.join(table.storage.root, relative))
        table.commit_files([relative])

    write("2026-03-01", "eu")  # 1: not watched
    trigger = DeltaTableVersionTrigger(
        table_uri=table.uri, after_version=0, partition_filter="region = 'us'", poll_interval=0.05
    )
    timer = threading.Timer(0.3, write, args=("2026-03-02", "us"))
    timer.start()
    event = await next_event(trigger)
    timer.join()
    assert event.payload["versions"] == [2]
    assert event.payload["partitions"] == [{"ds": "2026-03-02", "region": "us"}]
    assert event.payload["partition_keys"] == ["2026-03-02|us"]


@pytest.mark.asyncio
async def test_a_partition_filter_the_table_cannot_judge_is_an_error_event(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    event = await next_event(
        DeltaTableVersionTrigger(table_uri=table.uri, partition_filter="id = 1", poll_interval=0.05)
    )
    assert event.payload["status"] == "error"
    assert "partition filter" in event.payload["message"] and "id" in event.payload["message"]
