"""DeltaTableHook with Azure and Google storage connections, without the Azure or Google Airflow provider.

The hook builds adlfs / gcsfs itself from ``wasb`` / ``adls`` / ``azure_data_lake`` and
``google_cloud_platform`` connections (``storage_options_from_connection``). Commits and reads run
on Azurite and fake-gcs-server; Google service account keys get their tokens from a loopback
OAuth2 endpoint, which counts the grants (so the key is proven used). delta-rs reads the Azure
result back; it cannot list fake-gcs-server (see tests/integration/test_write_concurrency.py), so
on GCS the core does.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.hooks.delta import DeltaTableHook, StorageConnectionError
from airflow_delta_provider.operators.commit import DeltaCommitOperator

if TYPE_CHECKING:
    from collections.abc import Callable

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.string())])


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


def put_parquet(hook: DeltaTableHook, relative: str, ids: list[int]) -> None:
    """A Parquet file under the table root, written through the hook's filesystem."""
    fs = hook.filesystem
    assert fs is not None
    root = hook.table_uri.split("://", 1)[1]
    with fs.open(f"{root}/{relative}", "wb") as out:
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), out)


def commit_through(
    uri: str, conn_id: str, task_context: Callable[..., dict[str, Any]]
) -> tuple[dict[str, Any], DeltaTableHook]:
    """Files put and committed through the connection (the operator creates the table)."""
    hook = DeltaTableHook(table_uri=uri, storage_conn_id=conn_id)
    put_parquet(hook, "incoming/ds=2026-11-01/part-0.parquet", [1, 2, 3])
    op = DeltaCommitOperator(
        task_id="commit", table_uri=uri, storage_conn_id=conn_id, prefix="incoming", partition_by=["ds"]
    )
    return op.execute(task_context(op)), hook


def test_the_storage_providers_are_not_installed():
    """What these tests prove is the hook's own mapping: no Airflow filesystem for abfs/gs here."""
    from airflow.sdk.io import has_fs

    assert not has_fs("abfs") and not has_fs("gs")


# --- Azure --------------------------------------------------------------------------------------------


def azure_shapes(endpoint: str, account: str, key: str, sas: str) -> dict[str, dict[str, Any]]:
    """Connection fields of each supported Azure shape, on Azurite."""
    connection_string = (
        f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};BlobEndpoint={endpoint};"
    )
    return {
        "wasb login/password/account URL": {
            "conn_type": "wasb",
            "login": account,
            "password": key,
            "host": endpoint,
        },
        "wasb prefixed connection_string extra": {
            "conn_type": "wasb",
            "extra": {"extra__wasb__connection_string": connection_string},
        },
        "wasb sas_token extra": {
            "conn_type": "wasb",
            "login": account,
            "host": endpoint,
            "extra": {"sas_token": sas},
        },
        "adls account name, key, account_url": {
            "conn_type": "adls",
            "host": account,
            "password": key,
            "extra": {"account_url": endpoint},
        },
        "azure_data_lake account_name + account_key extras": {
            "conn_type": "azure_data_lake",
            "extra": {"account_name": account, "account_key": key, "account_url": endpoint},
        },
    }


AZURE_SHAPES = [
    "wasb login/password/account URL",
    "wasb prefixed connection_string extra",
    "wasb sas_token extra",
    "adls account name, key, account_url",
    "azure_data_lake account_name + account_key extras",
]


@pytest.mark.azure
@pytest.mark.parametrize("shape", AZURE_SHAPES)
def test_commit_and_read_through_an_azure_connection_on_azurite(
    shape, azurite_endpoint, azure_container, azure_rs_options, azurite_sas, monkeypatch, task_context
):
    from adlfs import AzureBlobFileSystem
    from deltalake import DeltaTable as RsDeltaTable

    account, key = (
        azure_rs_options["AZURE_STORAGE_ACCOUNT_NAME"],
        azure_rs_options["AZURE_STORAGE_ACCOUNT_KEY"],
    )
    connection(monkeypatch, "lake_azure", **azure_shapes(azurite_endpoint, account, key, azurite_sas)[shape])
    uri = f"az://{azure_container}/events"

    result, hook = commit_through(uri, "lake_azure", task_context)

    assert isinstance(hook.filesystem, AzureBlobFileSystem)
    assert (result["version"], result["rows"], result["table_uri"]) == (0, 3, uri)
    table = DeltaTableHook(table_uri=uri, storage_conn_id="lake_azure").get_table()
    assert table.snapshot().to_pyarrow_table().column("id").to_pylist() == [1, 2, 3]
    rs = RsDeltaTable(uri, storage_options=azure_rs_options)
    assert rs.version() == 0
    assert sorted(rs.to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]


def test_an_azure_service_principal_becomes_adlfs_options():
    """A service principal cannot be proven on Azurite (Azure AD tokens need https and an identity
    provider); the options adlfs gets are asserted instead, and no secret is in the error paths."""
    from airflow.sdk import Connection

    from airflow_delta_provider.hooks.delta import storage_options_from_connection

    conn = Connection(
        conn_id="sp",
        conn_type="wasb",
        login="client-1",
        password="client-s3cret-value",
        host="https://acct.blob.core.windows.net",
        extra=json.dumps({"tenant_id": "tenant-1"}),
    )
    assert storage_options_from_connection(conn, "abfss") == (
        "abfs",
        {
            "account_name": "acct",
            "tenant_id": "tenant-1",
            "client_id": "client-1",
            "client_secret": "client-s3cret-value",
            "account_host": "acct.blob.core.windows.net",
        },
    )
    adls = Connection(
        conn_id="sp2",
        conn_type="adls",
        host="acct2",
        extra=json.dumps(
            {"extra__adls__tenant_id": "t", "client_id": "c", "client_secret": "client-s3cret-value"}
        ),
    )
    assert storage_options_from_connection(adls, "az")[1] == {
        "account_name": "acct2",
        "tenant_id": "t",
        "client_id": "c",
        "client_secret": "client-s3cret-value",
    }


@pytest.mark.parametrize(
    ("fields", "options"),
    [
        pytest.param(
            {"conn_type": "wasb", "login": "acct", "password": "k3y-value"},
            {"account_name": "acct", "account_key": "k3y-value"},
            id="wasb-login-password",
        ),
        pytest.param(
            {
                "conn_type": "wasb",
                "login": "x",
                "host": "acct.blob.core.windows.net",
                "password": "k3y-value",
            },
            {"account_name": "acct", "account_key": "k3y-value"},
            id="wasb-dns-host-names-the-account",
        ),
        pytest.param(
            {"conn_type": "wasb", "login": "acct", "extra": {"extra__wasb__sas_token": "?sv=1&sig=abc"}},
            {"account_name": "acct", "sas_token": "?sv=1&sig=abc"},
            id="wasb-prefixed-sas",
        ),
        pytest.param(
            {"conn_type": "wasb", "login": "public", "extra": {"anon": "true"}},
            {"account_name": "public", "anon": True},
            id="wasb-anonymous",
        ),
        pytest.param(
            {"conn_type": "adls", "host": "acct", "extra": {"account_key": "", "connection_string": ""}},
            {"account_name": "acct"},
            id="adls-ambient-identity-empty-fields-unset",
        ),
    ],
)
def test_azure_connection_fields_become_adlfs_options(fields, options):
    from airflow.sdk import Connection

    from airflow_delta_provider.hooks.delta import storage_options_from_connection

    extra = fields.pop("extra", None)
    conn = Connection(conn_id="c", extra=json.dumps(extra) if extra else None, **fields)
    assert storage_options_from_connection(conn, "abfss") == ("abfs", options)


# --- Google -------------------------------------------------------------------------------------------


@pytest.mark.gcs
@pytest.mark.parametrize("shape", ["keyfile_dict", "prefixed key_path", "is_anonymous"])
def test_commit_and_read_through_a_google_connection_on_fake_gcs(
    shape, gcs_endpoint, gcs_bucket, gcp_service_account_key, gcp_grants, tmp_path, monkeypatch, task_context
):
    from gcsfs import GCSFileSystem

    extra: dict[str, Any] = {"gcs.endpoint": gcs_endpoint, "project": "test"}
    if shape == "keyfile_dict":
        extra["keyfile_dict"] = json.dumps(gcp_service_account_key)
    elif shape == "prefixed key_path":
        key_file = tmp_path / "key.json"
        key_file.write_text(json.dumps(gcp_service_account_key))
        extra["extra__google_cloud_platform__key_path"] = str(key_file)
    else:
        extra["is_anonymous"] = True
    connection(monkeypatch, "lake_gcp", conn_type="google_cloud_platform", extra=extra)
    uri = f"gs://{gcs_bucket}/events"

    result, hook = commit_through(uri, "lake_gcp", task_context)

    assert isinstance(hook.filesystem, GCSFileSystem)
    assert (result["version"], result["rows"], result["table_uri"]) == (0, 3, uri)
    table = DeltaTableHook(table_uri=uri, storage_conn_id="lake_gcp").get_table()
    assert table.snapshot().to_pyarrow_table().column("id").to_pylist() == [1, 2, 3]
    granted = gcp_grants(gcp_service_account_key["client_email"])
    assert granted >= 1 if shape != "is_anonymous" else granted == 0


# --- connections that cannot serve the table: refused, the table unchanged ------------------------------

BAD_SHAPES = [
    pytest.param(
        "az",
        {"conn_type": "wasb", "password": "{secret}"},
        "names no storage account: set Login (the account name)",
        id="wasb-without-account",
        marks=pytest.mark.azure,
    ),
    pytest.param(
        "az",
        {"conn_type": "wasb", "login": "client", "host": "acct", "extra": {"tenant_id": "t"}},
        "sets tenant_id (a service principal) but no client secret",
        id="wasb-tenant-without-secret",
        marks=pytest.mark.azure,
    ),
    pytest.param(
        "az",
        {
            "conn_type": "adls",
            "login": "client",
            "password": "{secret}",
            "extra": {"tenant_id": "t", "account_url": "http://127.0.0.1:1/acct"},
        },
        "Azure AD tokens are sent over https only",
        id="adls-service-principal-over-http",
        marks=pytest.mark.azure,
    ),
    pytest.param(
        "az",
        {"conn_type": "aws", "login": "AKIA", "password": "{secret}"},
        "holds credentials for s3:// tables, not for az:// tables",
        id="aws-for-azure",
        marks=pytest.mark.azure,
    ),
    pytest.param(
        "az",
        {"conn_type": "http", "host": "example.com", "password": "{secret}"},
        "is of type 'http'",
        id="unknown-type",
        marks=pytest.mark.azure,
    ),
    pytest.param(
        "gs",
        {"conn_type": "google_cloud_platform", "extra": {"key_secret_name": "projects/p/secrets/s"}},
        "sets key_secret_name, which only the Google provider resolves",
        id="gcp-secret-manager-key",
        marks=pytest.mark.gcs,
    ),
    pytest.param(
        "gs",
        {"conn_type": "google_cloud_platform", "extra": {"keyfile_dict": "{key}", "is_anonymous": True}},
        "sets keyfile_dict and is_anonymous; they are mutually exclusive",
        id="gcp-two-credentials",
        marks=pytest.mark.gcs,
    ),
    pytest.param(
        "gs",
        {"conn_type": "google_cloud_platform", "extra": {"keyfile_dict": "not json {secret}"}},
        "The keyfile_dict of connection 'bad' is not a JSON object",
        id="gcp-keyfile-not-json",
        marks=pytest.mark.gcs,
    ),
    pytest.param(
        "gs",
        {"conn_type": "google_cloud_platform", "extra": {"keyfile_dict": {"private_key": "{secret}"}}},
        "the keyfile_dict is no usable service account key",
        id="gcp-keyfile-not-a-service-account",
        marks=pytest.mark.gcs,
    ),
    pytest.param(
        "gs",
        {"conn_type": "google_cloud_platform", "extra": {"key_path": "/nonexistent/key.json"}},
        "key_path '/nonexistent/key.json' is not a readable JSON key file",
        id="gcp-missing-key-file",
        marks=pytest.mark.gcs,
    ),
    pytest.param(
        "gs",
        {"conn_type": "wasb", "login": "acct", "password": "{secret}"},
        "holds credentials for abfs://, abfss:// or az:// tables, not for gs:// tables",
        id="wasb-for-gcs",
        marks=pytest.mark.gcs,
    ),
]


@pytest.mark.parametrize(("scheme", "fields", "expected"), BAD_SHAPES)
def test_an_unusable_connection_is_refused_and_the_table_is_unchanged(
    scheme, fields, expected, request, monkeypatch, task_context, gcp_service_account_key
):
    """Each refusal names the connection and the field (never the secret); nothing is written."""
    secret = f"Pl4nted-{request.node.callspec.id}-s3cret"
    key = json.dumps({**gcp_service_account_key, "private_key": secret})
    filled = json.loads(json.dumps(fields).replace("{secret}", secret).replace('"{key}"', json.dumps(key)))
    connection(monkeypatch, "bad", **filled)
    if scheme == "az":
        container = request.getfixturevalue("azure_container")
        uri, options = f"az://{container}/t", request.getfixturevalue("azure_storage_options")
    else:
        bucket = request.getfixturevalue("gcs_bucket")
        uri, options = f"gs://{bucket}/t", request.getfixturevalue("gcs_storage_options")
    table = DeltaTable.create(uri, SCHEMA, partition_by=["ds"], storage_options=options)
    storage = table.storage
    with storage.fs.open(f"{storage.root}/incoming/ds=2026-11-01/part-0.parquet", "wb") as out:
        pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), out)

    log_before = [f.name for f in storage.list_log()]
    op = DeltaCommitOperator(task_id="c", table_uri=uri, storage_conn_id="bad", prefix="incoming")
    with pytest.raises(ValueError) as raised:
        op.execute(task_context(op))

    message = str(raised.value)
    assert isinstance(raised.value, StorageConnectionError) or "JSON object" in message
    assert expected in message and "'bad'" in message
    assert secret not in message and secret not in repr(raised.value)
    assert DeltaTable(uri, options).version() == 0
    assert [f.name for f in table.storage.list_log()] == log_before


@pytest.mark.azure
def test_a_wrong_key_in_a_wasb_connection_fails_without_showing_it(
    azurite_endpoint, azure_container, azure_storage_options, monkeypatch, task_context, caplog
):
    """A well-formed but wrong account key: Azurite refuses it; the key reaches neither the error, its
    traceback nor the log, and nothing is written."""
    import base64
    import logging
    import traceback
    import uuid

    from airflow_delta_provider.core.storage import open_store

    planted = base64.b64encode(f"Pl4nted-{uuid.uuid4().hex}".encode()).decode()
    connection(
        monkeypatch,
        "wrong_key",
        conn_type="wasb",
        login="devstoreaccount1",
        password=planted,
        host=azurite_endpoint,
    )
    uri = f"az://{azure_container}/t"
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as raised:
        DeltaTableHook(table_uri=uri, storage_conn_id="wrong_key").create_table(SCHEMA)
    text = "".join(traceback.format_exception(raised.value)) + repr(raised.value) + caplog.text
    assert "AuthenticationFailed" in text or "authenticat" in text.lower(), text[-2000:]
    assert planted not in text and planted[:20] not in text
    assert open_store(uri, azure_storage_options).list_log() == []
