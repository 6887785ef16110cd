"""DeltaTableVersionSensor: poke, deferral and resumption on real tables."""

from __future__ import annotations

import datetime as dt
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.providers.common.compat.sdk import AirflowException, TaskDeferred

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.sensors.delta import DeltaTableVersionSensor
from airflow_delta_provider.triggers.delta import DeltaTableVersionTrigger

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.string())])


def commit(table: DeltaTable, ds: str = "a") -> None:
    relative = f"w-{uuid.uuid4().hex[:8]}/ds={ds}/p.parquet"
    os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
    pq.write_table(pa.table({"id": [1]}), os.path.join(table.storage.root, relative))
    table.commit_files([relative])


@pytest.fixture
def table(tmp_path):
    return DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"])


def test_poke_is_done_on_a_newer_commit_and_pushes_it(table):
    sensor = DeltaTableVersionSensor(task_id="wait", table_uri=table.uri, after_version="0")
    assert sensor.poke({}) is False
    commit(table)
    found = sensor.poke({})
    assert found.is_done
    assert found.xcom_value["version"] == 1
    assert found.xcom_value["operation"] == "WRITE"
    assert found.xcom_value["commit_timestamp"] > 0


def test_after_timestamp_and_partition_filter(table):
    commit(table, "a")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1)
    sensor = DeltaTableVersionSensor(
        task_id="wait", table_uri=table.uri, after_timestamp=later.isoformat(), partition_values={"ds": "b"}
    )
    assert sensor.poke({}) is False
    commit(table, "a")
    assert sensor.poke({}) is False  # wrong partition (and maybe too early)
    import time

    time.sleep(max(0.0, (later - dt.datetime.now(dt.UTC)).total_seconds()) + 0.05)
    commit(table, "b")
    assert sensor.poke({}).xcom_value["version"] == 3


def test_deferrable_defers_with_the_trigger_and_resumes(table):
    sensor = DeltaTableVersionSensor(
        task_id="wait",
        table_uri=table.uri,
        after_version=0,
        deferrable=True,
        data_changes_only=True,
        timeout=60,
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    trigger = deferred.value.trigger
    assert isinstance(trigger, DeltaTableVersionTrigger)
    assert trigger.serialize()[1]["after_version"] == 0 and trigger.data_changes_only
    assert deferred.value.method_name == "execute_complete"
    event = {"status": "success", "version": 1, "versions": [1], "table_uri": table.uri}
    assert sensor.execute_complete({}, event) == event
    with pytest.raises(AirflowException, match="cannot be read"):
        sensor.execute_complete({}, {"status": "error", "message": "The Delta table cannot be read: boom"})


def test_deferrable_returns_at_once_when_already_satisfied(table):
    commit(table)
    sensor = DeltaTableVersionSensor(task_id="wait", table_uri=table.uri, after_version=0, deferrable=True)
    assert sensor.execute({})["version"] == 1


def test_bad_arguments(table):
    with pytest.raises(ValueError, match="table_uri or delta_conn_id"):
        DeltaTableVersionSensor(task_id="x")
    with pytest.raises(ValueError, match="after_version='soon'"):
        DeltaTableVersionSensor(task_id="x", table_uri=table.uri, after_version="soon").poke({})


def test_templated_fields():
    assert {"table_uri", "after_version", "after_timestamp", "partition_values"} <= set(
        DeltaTableVersionSensor.template_fields
    )


# --- [delta] poll_interval --------------------------------------------------------------------


def test_the_delta_poll_interval_applies_when_the_sensor_sets_no_poke_interval(table, monkeypatch):
    monkeypatch.setenv("AIRFLOW__DELTA__POLL_INTERVAL", "7.5")
    sensor = DeltaTableVersionSensor(task_id="wait", table_uri=table.uri, after_version=0, deferrable=True)
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert sensor.poke_interval == 7.5
    assert deferred.value.trigger.poll_interval == 7.5


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({"poke_interval": 30}, id="argument"),
        pytest.param({"poke_interval": dt.timedelta(seconds=30)}, id="timedelta"),
        pytest.param({"default_args": {"poke_interval": 30}}, id="default-args"),
    ],
)
def test_an_explicit_poke_interval_wins_over_the_config(table, monkeypatch, kwargs):
    monkeypatch.setenv("AIRFLOW__DELTA__POLL_INTERVAL", "7.5")
    sensor = DeltaTableVersionSensor(
        task_id="wait", table_uri=table.uri, after_version=0, deferrable=True, **kwargs
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert sensor.poke_interval == 30
    assert deferred.value.trigger.poll_interval == 30


def test_a_poking_sensor_polls_at_the_configured_interval(table, monkeypatch):
    """BaseSensorOperator's poke loop sleeps ``poke_interval`` between pokes: the configured one."""
    import threading

    monkeypatch.setenv("AIRFLOW__DELTA__POLL_INTERVAL", "0.05")
    sensor = DeltaTableVersionSensor(task_id="wait", table_uri=table.uri, after_version=0, timeout=20)
    timer = threading.Timer(0.3, commit, args=(table,))
    timer.start()
    try:
        assert sensor.execute({})["version"] == 1
    finally:
        timer.join()
    assert sensor.poke_interval == 0.05


@pytest.mark.parametrize("value", ["soon", "0", "-1", ""])
def test_a_bad_poll_interval_config_names_the_option(table, monkeypatch, value):
    monkeypatch.setenv("AIRFLOW__DELTA__POLL_INTERVAL", value)
    sensor = DeltaTableVersionSensor(
        task_id="wait", table_uri=table.uri, after_version=0, deferrable=True, timeout=5
    )
    with pytest.raises(ValueError, match=r"\[delta\] poll_interval must be a positive number of seconds"):
        sensor.execute({})


def test_the_tables_asset_among_the_outlets_gets_the_versions_found(table):
    """So a DAG scheduled on the table's asset learns which versions a foreign writer committed."""
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import OutletEventAccessors

    from airflow_delta_provider.assets.delta import delta_table_asset, event_version_range

    asset = delta_table_asset(table.uri)
    other = Asset(uri="s3://bucket/other")
    sensor = DeltaTableVersionSensor(
        task_id="wait", table_uri=table.uri, after_version=0, outlets=[asset, other]
    )
    commit(table)
    commit(table)
    context = {"outlet_events": OutletEventAccessors()}
    found = sensor.poke(context)
    extra = context["outlet_events"][asset].extra
    assert (extra["from_version"], extra["to_version"], extra["versions"]) == (1, 2, [1, 2])
    assert event_version_range(extra) == (1, 2) and extra["table_uri"] == found.xcom_value["table_uri"]
    assert "commits" not in extra and "status" not in extra
    assert context["outlet_events"][other].extra == {}
    # The deferred path: the trigger's event, when the sensor resumes.
    resumed = {"outlet_events": OutletEventAccessors()}
    event = {**found.xcom_value, "status": "success"}
    sensor.execute_complete(resumed, event)
    assert event_version_range(resumed["outlet_events"][asset].extra) == (1, 2)


def test_a_partition_filter_waits_for_a_commit_that_changed_those_partitions(table):
    sensor = DeltaTableVersionSensor(
        task_id="wait", table_uri=table.uri, after_version=0, partition_filter="ds = '{{ ds }}'"
    )
    assert "partition_filter" in sensor.template_fields
    sensor.partition_filter = "ds = 'b'"  # as rendered
    commit(table, "a")
    assert sensor.poke({}) is False
    commit(table, "b")
    found = sensor.poke({})
    assert found.xcom_value["versions"] == [2]
    assert found.xcom_value["partitions"] == [{"ds": "b"}]
    assert found.xcom_value["partition_keys"] == ["b"]


def test_a_partition_filter_the_table_cannot_judge_fails_before_waiting(table):
    from airflow_delta_provider.core.expressions import PredicateError

    sensor = DeltaTableVersionSensor(
        task_id="wait", table_uri=table.uri, after_version=0, partition_filter="id = 1", timeout=1
    )
    with pytest.raises(PredicateError, match="not a partition column"):
        sensor.execute({})


def test_the_deferred_trigger_gets_the_partition_filter(table):
    sensor = DeltaTableVersionSensor(
        task_id="wait", table_uri=table.uri, after_version=0, partition_filter="ds = 'b'", deferrable=True
    )
    with pytest.raises(TaskDeferred) as deferred:
        sensor.execute({})
    assert deferred.value.trigger.serialize()[1]["partition_filter"] == "ds = 'b'"
