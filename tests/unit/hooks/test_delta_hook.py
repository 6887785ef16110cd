"""DeltaTableHook: tables from delta connections or URIs plus storage connections, no secret leaks."""

from __future__ import annotations

import json
import logging
import os
from datetime import timedelta

import pyarrow as pa
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.hooks.delta import DeltaTableHook, StorageConnectionError

SCHEMA = pa.schema([("id", pa.int64())])


def _conn(monkeypatch, conn_id: str, **fields) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def test_table_from_a_plain_uri(tmp_path):
    DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    hook = DeltaTableHook(table_uri=str(tmp_path / "t"))
    assert hook.get_table().version() == 0
    # One form everywhere (logs, XCom, events, assets): the normalised URI.
    assert hook.table_uri == f"file://{tmp_path / 't'}"
    assert DeltaTableHook(table_uri=f"{tmp_path / 't'}/").table_uri == hook.table_uri
    assert DeltaTableHook(table_uri=f"file://{tmp_path / 't'}").table_uri == hook.table_uri
    assert DeltaTableHook(table_uri="s3a://bucket/events/").table_uri == "s3://bucket/events"


def test_table_from_a_delta_connection(tmp_path, monkeypatch):
    DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    _conn(monkeypatch, "lake", conn_type="delta", host=str(tmp_path / "t"))
    hook = DeltaTableHook("lake")
    assert hook.get_table().version() == 0
    assert hook.test_connection() == (True, f"Delta table at file://{tmp_path / 't'} is at version 0.")


@pytest.mark.s3
def test_secret_storage_options_live_in_the_password_field(s3_endpoint, s3_bucket, monkeypatch, caplog):
    """The password (masked by Airflow in its form, REST API and logs) holds the secret options as JSON,
    merged over the extra's options, which hold what is no secret."""
    _conn(
        monkeypatch,
        "lake",
        conn_type="delta",
        host=f"s3://{s3_bucket}/events",
        password=json.dumps({"key": "testing", "secret": "testing"}),
        extra={"storage_options": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}},
    )
    caplog.set_level(logging.DEBUG)
    hook = DeltaTableHook("lake")
    assert hook._settings[2] == {
        "endpoint_url": s3_endpoint,
        "region_name": "us-east-1",
        "key": "testing",
        "secret": "testing",
    }
    hook.create_table(SCHEMA)
    ok, message = hook.test_connection()
    assert ok and message == f"Delta table at s3://{s3_bucket}/events is at version 0."
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "clear text" in r.getMessage()]


def test_a_password_that_is_no_json_object_is_refused_without_showing_it(tmp_path, monkeypatch):
    _conn(monkeypatch, "lake", conn_type="delta", host=str(tmp_path / "t"), password="plain-s3cr3t")
    ok, message = DeltaTableHook("lake").test_connection()
    assert not ok
    assert "password of connection 'lake'" in message and "JSON object" in message
    assert "plain-s3cr3t" not in message


@pytest.mark.s3
def test_secrets_in_the_clear_text_extra_are_flagged(s3_endpoint, s3_bucket, monkeypatch):
    """A secret in the clear-text extra still works; the test result says where it belongs."""
    _conn(
        monkeypatch,
        "lake",
        conn_type="delta",
        host=f"s3://{s3_bucket}/events",
        extra={
            "storage_options": {
                "key": "testing",
                "secret": "testing",
                "endpoint_url": s3_endpoint,
                "region_name": "us-east-1",
            }
        },
    )
    hook = DeltaTableHook("lake")
    hook.create_table(SCHEMA)
    ok, message = hook.test_connection()
    assert (
        ok
        and "Warning: the storage_options extra holds key, secret" in message
        and "password field" in message
    )


def test_missing_location_is_a_clear_error(monkeypatch):
    _conn(monkeypatch, "empty", conn_type="delta")
    with pytest.raises(ValueError, match="No table location"):
        DeltaTableHook("empty").get_table()


def test_create_table_sets_the_provider_txn_retention(tmp_path):
    table = DeltaTableHook(table_uri=str(tmp_path / "t")).create_table(SCHEMA, partition_by=())
    assert table.snapshot().properties["delta.setTransactionRetentionDuration"] == "interval 90 days"


def test_the_table_create_table_returns_honours_the_provider_defaults(tmp_path, monkeypatch):
    """It was opened without them: a VACUUM through it used Delta's 7 days, not ``[delta]``'s."""
    monkeypatch.setenv("AIRFLOW__DELTA__DELETED_FILE_RETENTION_DURATION", "interval 3 days")
    monkeypatch.setenv("AIRFLOW__DELTA__SET_TRANSACTION_RETENTION_DURATION", "interval 30 days")
    hook = DeltaTableHook(table_uri=str(tmp_path / "t"))
    created = hook.create_table(SCHEMA)
    retention = created.vacuum(dry_run=True).retention
    assert (retention.value, str(retention.source)) == (timedelta(days=3), "provider config")
    assert (
        created.snapshot().config.deleted_file_retention
        == hook.get_table().snapshot().config.deleted_file_retention
    )
    assert created.snapshot().properties["delta.setTransactionRetentionDuration"] == "interval 30 days"


@pytest.mark.s3
def test_s3_credentials_come_from_the_storage_connection(s3_endpoint, s3_bucket, monkeypatch, caplog):
    _conn(
        monkeypatch,
        "minio",
        conn_type="aws",
        login="testing",
        password="the-secret-key",
        extra={"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
    )
    _conn(
        monkeypatch,
        "lake",
        conn_type="delta",
        host=f"s3://{s3_bucket}/events",
        extra={"storage_conn_id": "minio"},
    )
    caplog.set_level(logging.DEBUG)
    hook = DeltaTableHook("lake")
    hook.create_table(SCHEMA)
    assert hook.get_table().version() == 0
    assert hook.test_connection()[0]
    assert "the-secret-key" not in repr(hook)
    assert all("the-secret-key" not in r.getMessage() for r in caplog.records)


def test_storage_options_from_the_connection_are_used_but_never_shown(tmp_path, monkeypatch):
    DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    _conn(
        monkeypatch,
        "lake",
        conn_type="delta",
        host=str(tmp_path / "t"),
        extra={"storage_options": '{"x": "s3cr3t"}'},
    )
    hook = DeltaTableHook("lake")
    assert hook._settings[2] == {"x": "s3cr3t"}
    assert "s3cr3t" not in repr(hook) and "s3cr3t" not in hook.table_uri


def test_credentials_in_the_uri_are_not_shown():
    hook = DeltaTableHook(table_uri="s3://AKIA:s3cr3t@bucket/events")
    assert hook.table_uri == "s3://bucket/events"


def test_azure_container_at_account_is_kept():
    uri = "abfss://container@account.dfs.core.windows.net/events"
    assert DeltaTableHook(table_uri=uri).table_uri == uri


@pytest.mark.parametrize(
    "extra",
    [
        '{"key": "AKIAPLANTEDSECRET", "secret": "pl4nted"',  # truncated JSON
        "AKIAPLANTEDSECRET:pl4nted",  # a secret pasted instead of JSON
        '\'{"key": "AKIAPLANTEDSECRET"}\'',  # single-quoted
        '["AKIAPLANTEDSECRET"]',  # JSON, but not an object
        '"AKIAPLANTEDSECRET"',
    ],
    ids=["truncated", "not-json", "quoted", "list", "string"],
)
def test_a_malformed_storage_options_extra_names_the_field_never_its_content(tmp_path, monkeypatch, extra):
    DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    log_before = sorted(os.listdir(tmp_path / "t" / "_delta_log"))
    _conn(monkeypatch, "lake", conn_type="delta", host=str(tmp_path / "t"), extra={"storage_options": extra})
    with pytest.raises(ValueError) as raised:
        DeltaTableHook("lake").get_table()
    message = str(raised.value)
    assert "The storage_options extra of connection 'lake'" in message and "JSON object" in message
    assert "AKIAPLANTED" not in message and "pl4nted" not in message
    assert "AKIAPLANTED" not in repr(raised.value)
    ok, tested = DeltaTableHook("lake").test_connection()
    assert not ok and "storage_options extra of connection 'lake'" in tested and "AKIAPLANTED" not in tested
    assert sorted(os.listdir(tmp_path / "t" / "_delta_log")) == log_before


@pytest.mark.s3
@pytest.mark.parametrize(
    ("service_config", "field", "kind"),
    [
        (None, "service_config", "null"),
        ("http://127.0.0.1:1", "service_config", "a string"),
        ([{"s3": {}}], "service_config", "a list"),
        ({"s3": "http://127.0.0.1:1"}, "service_config.s3", "a string"),
        ({"s3": None}, "service_config.s3", "null"),
    ],
    ids=["null", "string", "list", "s3-string", "s3-null"],
)
def test_an_aws_connection_with_a_malformed_service_config_is_refused_clearly(
    s3_bucket, s3_storage_options, monkeypatch, service_config, field, kind
):
    uri = f"s3://{s3_bucket}/events"
    table = DeltaTable.create(uri, SCHEMA, storage_options=s3_storage_options)
    log_before = [f.name for f in table.storage.list_log()]
    _conn(
        monkeypatch,
        "minio",
        conn_type="aws",
        login="testing",
        password="pl4nted-secret",
        extra={"service_config": service_config, "region_name": "us-east-1"},
    )
    with pytest.raises(StorageConnectionError) as raised:
        DeltaTableHook(table_uri=uri, storage_conn_id="minio").get_table().version()
    message = str(raised.value)
    assert f"Connection 'minio' (aws): the {field} extra must be a JSON object" in message
    assert f"got {kind}" in message and "pl4nted" not in message and "127.0.0.1" not in message
    assert [f.name for f in DeltaTable(uri, s3_storage_options).storage.list_log()] == log_before


@pytest.mark.s3
def test_an_aws_connection_reads_the_endpoint_from_service_config(
    s3_endpoint, s3_bucket, s3_storage_options, monkeypatch
):
    uri = f"s3://{s3_bucket}/events"
    DeltaTable.create(uri, SCHEMA, storage_options=s3_storage_options)
    _conn(
        monkeypatch,
        "minio",
        conn_type="aws",
        login="testing",
        password="testing",
        extra={"service_config": {"s3": {"endpoint_url": s3_endpoint}}, "region_name": "us-east-1"},
    )
    assert DeltaTableHook(table_uri=uri, storage_conn_id="minio").get_table().version() == 0


def _airflow_refuses_a_list_extra() -> bool:
    """Airflow before 3.2 refuses such a connection itself, before the hook sees it."""
    from airflow.models.connection import Connection

    try:
        Connection(conn_id="probe", conn_type="delta", extra='["x"]')
    except ValueError:
        return True
    return False


def test_a_connection_whose_extra_is_no_json_object_is_refused(tmp_path, monkeypatch):
    if _airflow_refuses_a_list_extra():
        pytest.skip("this Airflow refuses a connection whose extra is not a JSON object itself")
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE",
        json.dumps({"conn_type": "delta", "host": str(tmp_path / "t"), "extra": '["pl4nted"]'}),
    )
    with pytest.raises(
        StorageConnectionError,
        match=r"The extra of connection 'lake' \(delta\) must be a JSON object, got a list",
    ):
        DeltaTableHook("lake").get_table()


@pytest.mark.parametrize(
    ("extra", "host", "message"),
    [
        (
            {"table_uri": ["s3://b/t"]},
            None,
            r"The table_uri extra of connection 'lake' must be a non-blank string, got list",
        ),
        (
            {"table_uri": 7},
            None,
            r"The table_uri extra of connection 'lake' must be a non-blank string, got int",
        ),
        (
            {"table_uri": "  "},
            None,
            r"The table_uri extra of connection 'lake' must be a non-blank string, got a blank",
        ),
        (
            {"storage_conn_id": 12},
            "/abs/t",
            r"The storage_conn_id extra of connection 'lake' must be .* got int",
        ),
        ({}, "lake/events", r"The table location of connection 'lake' is a relative path"),
        ({"table_uri": "events"}, None, r"The table location of connection 'lake' is a relative path"),
    ],
)
def test_a_connection_location_or_storage_id_of_the_wrong_kind_is_refused_before_any_io(
    tmp_path, monkeypatch, extra, host, message
):
    """A relative location would be resolved against each worker's working directory (another table
    on every worker), a non-string one would be opened as its repr: both refused, nothing created."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AIRFLOW_CONN_LAKE", json.dumps({"conn_type": "delta", "host": host, "extra": extra}))
    with pytest.raises(StorageConnectionError, match=message):
        DeltaTableHook("lake").get_table()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("argument", ["delta_conn_id", "table_uri", "storage_conn_id"])
@pytest.mark.parametrize("value", [12, ["s3://b/t"], {"uri": "x"}])
def test_a_hook_argument_that_is_no_string_is_refused(argument, value):
    with pytest.raises(ValueError, match=rf"{argument} must be a string, got {type(value).__name__}"):
        DeltaTableHook(**{argument: value})
