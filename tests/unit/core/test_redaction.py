from __future__ import annotations

import pytest

from airflow_delta_provider.core.errors import CorruptLogError, DeltaError, InvalidPathError
from airflow_delta_provider.core.redaction import (
    has_credentials,
    is_sensitive_option,
    redact,
    register_secret,
    register_secrets_in,
    split_credentials,
)


@pytest.mark.parametrize(
    ("uri", "clean", "credentials"),
    [
        pytest.param("s3://KEY:SECRET@bucket/t", "s3://bucket/t", "KEY:SECRET", id="s3-user-password"),
        pytest.param("s3a://KEY@bucket/t", "s3a://bucket/t", "KEY", id="s3-bare-user"),
        pytest.param("gs://KEY@bucket/t", "gs://bucket/t", "KEY", id="gcs-bare-user"),
        pytest.param("s3://AK:ab/c+d@bucket/t", "s3://bucket/t", "AK:ab/c+d", id="secret-with-slash"),
        pytest.param("file://user:pw@host/p", "file://host/p", "user:pw", id="file"),
        pytest.param("abfss://u:p@acct.dfs.core.windows.net/t", "abfss://acct.dfs.core.windows.net/t", "u:p"),
        pytest.param(
            "abfss://container@acct.dfs.core.windows.net/t",
            "abfss://container@acct.dfs.core.windows.net/t",
            None,
            id="azure-container-is-a-location",
        ),
        pytest.param("hdfs://nn:8020/a@b/t", "hdfs://nn:8020/a@b/t", None, id="port-and-at-in-path"),
        pytest.param("s3://bucket/p@x/t", "s3://bucket/p@x/t", None, id="at-in-s3-key"),
        pytest.param("/data/a@b/t", "/data/a@b/t", None, id="local-path"),
    ],
)
def test_credentials_are_split_from_locations(uri: str, clean: str, credentials: str | None) -> None:
    assert split_credentials(uri) == (clean, credentials)
    assert has_credentials(uri) is (credentials is not None)


@pytest.mark.parametrize(
    "text",
    [
        "Invalid location s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/t, retry",
        "'file://admin:wJalrXUtnFEMI@host/p'",
        'abfss://user:wJalrXUtnFEMI@acct.dfs.core.windows.net/t"',
        "gs://wJalrXUtnFEMI@bucket/t",
    ],
)
def test_redact_masks_uri_credentials_in_text(text: str) -> None:
    redacted = redact(text)
    assert "wJalrXUtnFEMI" not in redacted
    assert "***@" in redacted


def test_redact_keeps_locations_that_carry_no_credentials() -> None:
    text = "abfss://container@acct.dfs.core.windows.net/t and s3://bucket/p@x"
    assert redact(text) == text


def test_registered_secrets_are_masked_in_every_encoding() -> None:
    secret = "x9/Secret+Value=="
    register_secret(secret)
    assert redact(f"a {secret} b") == "a *** b"
    assert "Secret" not in redact("a x9%2FSecret%2BValue%3D%3D b")


def test_the_secrets_inside_a_connection_string_are_masked_on_their_own() -> None:
    """A connection string's account key and SAS, and a SAS token's signature, are hidden wherever
    they appear without the rest of the string (an SDK quoting only the key or the signed URL)."""
    key, signature = "Q2FjY291bnQta2V5LXJlZGFjdA+/==", "c2lnbmF0dXJlLXJlZGFjdA%3D%3D"
    register_secret(
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={key};"
        f"SharedAccessSignature=sv=2024-01-01&ss=b&sig={signature};BlobEndpoint=https://acct/"
    )
    assert redact(f"key {key} url https://acct/c?sv=2024-01-01&ss=b&sig={signature}") == (
        "key *** url https://acct/c?***"
    )
    assert redact("signature c2lnbmF0dXJlLXJlZGFjdA== decoded") == "signature *** decoded"
    assert redact("AccountName=acct") == "AccountName=acct"


def test_sensitive_options_are_registered_nested() -> None:
    register_secrets_in(
        {"endpoint_url": "http://x", "client_kwargs": {"aws_secret_access_key": "nested-s3cr3t"}}
    )
    assert redact("nested-s3cr3t") == "***"
    assert redact("http://x") == "http://x"


@pytest.mark.parametrize(
    ("name", "sensitive"),
    [
        ("secret", True),
        ("key", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("AWS_SESSION_TOKEN", True),
        ("account_key", True),
        ("sas_token", True),
        ("password", True),
        ("endpoint_url", False),
        ("region_name", False),
        ("AWS_ALLOW_HTTP", False),
    ],
)
def test_sensitive_option_names(name: str, sensitive: bool) -> None:
    assert is_sensitive_option(name) is sensitive


@pytest.mark.parametrize("error_type", [DeltaError, InvalidPathError])
def test_core_error_messages_are_redacted_when_made(error_type: type[DeltaError]) -> None:
    err = error_type("Cannot open s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/t.")
    assert "wJalrXUtnFEMI" not in str(err)
    assert "wJalrXUtnFEMI" not in repr(err)


def test_keyword_errors_are_redacted_too() -> None:
    err = CorruptLogError(
        "s3://K:wJalrXUtnFEMI@b/_delta_log/0.json is corrupt", path="s3://b/_delta_log/0.json"
    )
    assert "wJalrXUtnFEMI" not in str(err)


def test_provider_loggers_redact_messages_and_tracebacks(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from airflow_delta_provider.core.redaction import get_logger

    secret = "logged-s3cr3t-value"
    register_secret(secret)
    log = get_logger("airflow_delta_provider.core.test_logging")
    with caplog.at_level(logging.INFO, logger="airflow_delta_provider.core.test_logging"):
        log.info("Opening %s with %s", "s3://AKIA:wJalrXUtnFEMI@bucket/t", secret)
        try:
            raise OSError(f"cannot open {secret}")
        except OSError:
            log.exception("failed")
    assert "wJalrXUtnFEMI" not in caplog.text and secret not in caplog.text
    assert "s3://***@bucket/t" in caplog.text
    assert all(secret not in (r.exc_text or "") for r in caplog.records)
