"""Secrets at the Airflow boundary: credential-free locations, refusals, and registration for masking.

The end-to-end proof (one planted secret, every output channel, local and S3) is in
tests/unit/test_secrets_at_boundaries.py.
"""

from __future__ import annotations

import uuid

import pytest

from airflow_delta_provider.core.errors import DeltaError
from airflow_delta_provider.core.utils.redaction import redact, sensitive_options
from airflow_delta_provider.utils.secrets import (
    credential_free,
    describe_error,
    mask_connection,
    mask_options,
    mask_uri,
    refuse_credentials,
    refuse_secret_options,
)


def fresh_secret() -> str:
    return f"s3cr3t-{uuid.uuid4().hex}"


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        pytest.param("s3://AKIDEXAMPLE:s3cr3t@bucket/t", "s3://bucket/t", id="userinfo"),
        pytest.param("s3://TOKENONLY@bucket/t", "s3://bucket/t", id="s3-any-userinfo"),
        pytest.param("s3://KEY:abc/def@bucket/t", "s3://bucket/t", id="secret-with-slash"),
        pytest.param("file://user:pw@host/p", "file://host/p", id="file-userinfo"),
        pytest.param("s3://bucket/t", "s3://bucket/t", id="plain"),
        pytest.param(
            "abfss://c@a.dfs.core.windows.net/t?sv=2024&sig=s3cr3t",
            "abfss://c@a.dfs.core.windows.net/t?sv=2024",
            id="sas",
        ),
        pytest.param("s3://bucket/t?X-Amz-Signature=s3cr3t", "s3://bucket/t", id="presigned"),
        pytest.param("/data/a@b/t", "/data/a@b/t", id="local-path-with-at"),
        pytest.param(
            "abfss://container@acct.dfs.core.windows.net/t",
            "abfss://container@acct.dfs.core.windows.net/t",
            id="azure-container-is-a-location",
        ),
    ],
)
def test_reports_never_show_credentials_in_uris(uri: str, shown: str) -> None:
    assert credential_free(uri) == shown


@pytest.mark.parametrize(
    "uri",
    [
        "s3://AKIAPLANTED:{secret}@bucket/t",
        "s3a://AKIAPLANTED:{secret}@bucket/t",
        "gs://{secret}@bucket/t",
        "file://user:{secret}@localhost/tmp/t",
        "abfss://user:{secret}@acct.dfs.core.windows.net/t",
        "s3://AKIAPLANTED:{secret}@bucket/{{{{ ds }}}}",
        "abfss://c@acct.dfs.core.windows.net/t?sv=2024-01-01&sp=rl&sig={secret}",
        "s3://bucket/t?X-Amz-Credential=AKIA%2F1&X-Amz-Signature={secret}",
        "gs://bucket/t?X-Goog-Signature={secret}",
        "https://acct.blob.core.windows.net/c/t?token={secret}",
    ],
)
def test_locations_with_credentials_are_refused_without_showing_them(uri: str) -> None:
    secret = fresh_secret()
    location = uri.format(secret=secret)
    with pytest.raises(ValueError, match="carries credentials") as caught:
        refuse_credentials(location, argument="table_uri", owner="DeltaCommitOperator")
    message = str(caught.value)
    assert secret not in message
    assert "storage_conn_id" in message and "table_uri=" in message
    # The secret is registered: wherever it shows up later, the core's redact() hides it.
    assert secret not in redact(f"boom: {secret}")


@pytest.mark.parametrize(
    "uri", ["s3://bucket/t", "/data/t", "abfss://c@a.dfs.core.windows.net/t", "{{ var.value.table }}", None]
)
def test_locations_without_credentials_pass(uri: str | None) -> None:
    refuse_credentials(uri, argument="table_uri", owner="x")


def test_secret_storage_options_are_refused_by_name_never_showing_values() -> None:
    secret = fresh_secret()
    options = {
        "endpoint_url": "http://127.0.0.1:9000",
        "secret": secret,
        "client_kwargs": {"region_name": "us-east-1", "aws_session_token": secret + "-token"},
        "token": None,  # no value, no secret
    }
    assert [name for name, _ in sensitive_options(options)] == ["secret", "client_kwargs.aws_session_token"]
    with pytest.raises(
        ValueError, match=r"storage_options 'secret', 'client_kwargs.aws_session_token'"
    ) as caught:
        refuse_secret_options(options, owner="DeltaTableVersionTrigger", reason="they are stored")
    assert secret not in str(caught.value)
    assert "storage_conn_id" in str(caught.value)
    refuse_secret_options({"endpoint_url": "http://x", "anon": True}, owner="t", reason="r")


def test_secrets_from_options_connections_and_uris_are_registered_with_the_core_and_airflow() -> None:
    from airflow.sdk._shared.secrets_masker import _secrets_masker

    from_option, from_password, from_extra, from_uri = (fresh_secret() for _ in range(4))
    mask_options({"key": "AKIA", "nested": {"secret": from_option}, "endpoint_url": "http://not-secret"})

    class Connection:
        password = from_password
        extra_dejson = {"aws_secret_access_key": from_extra, "region_name": "eu-west-1"}

    mask_connection(Connection())
    mask_uri(f"s3://AKIA:{from_uri}@bucket/t")
    from_query = fresh_secret()
    mask_uri(f"abfss://c@a.dfs.core.windows.net/t?sv=1&sig={from_query}")
    for secret in (from_option, from_password, from_extra, from_uri, from_query):
        assert secret not in redact(f"text with {secret} in it")
        assert secret not in _secrets_masker().redact(f"log line with {secret}")
    assert "http://not-secret" in redact("http://not-secret")
    assert "eu-west-1" in redact("eu-west-1")


def test_errors_are_described_redacted() -> None:
    secret = fresh_secret()
    mask_options({"secret": secret})
    assert describe_error(OSError(f"Invalid bucket name {secret!r}")) == "OSError: Invalid bucket name '***'"
    assert describe_error(KeyError("s3://K:pw-1234@b/t")) == "KeyError: 's3://***@b/t'"
    assert secret not in str(DeltaError(f"cannot read {secret}"))
