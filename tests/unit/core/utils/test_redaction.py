from __future__ import annotations

import traceback

import pytest

from airflow_delta_provider.core.errors import CorruptLogError, DeltaError, InvalidPathError
from airflow_delta_provider.core.utils.redaction import (
    has_credentials,
    is_credential_parameter,
    is_sensitive_option,
    location_secrets,
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
        pytest.param(
            "abfss://c@acct.dfs.core.windows.net/t?sv=2024-01-01&se=2030-01-01&sp=rl&sig=Ab%2Bc%3D",
            "abfss://c@acct.dfs.core.windows.net/t?sv=2024-01-01&se=2030-01-01&sp=rl",
            "sig=Ab%2Bc%3D",
            id="azure-sas",
        ),
        pytest.param(
            "s3://bucket/t?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F20260101"
            "&X-Amz-Security-Token=tok&X-Amz-Signature=f00d",
            "s3://bucket/t?X-Amz-Algorithm=AWS4-HMAC-SHA256",
            "X-Amz-Credential=AKIA%2F20260101&X-Amz-Security-Token=tok&X-Amz-Signature=f00d",
            id="s3-presigned",
        ),
        pytest.param(
            "gs://bucket/t?X-Goog-Credential=sa%40p&X-Goog-Signature=beef",
            "gs://bucket/t",
            "X-Goog-Credential=sa%40p&X-Goog-Signature=beef",
            id="gcs-signed",
        ),
        pytest.param(
            "https://h/t?token=abc;x=1#f", "https://h/t?x=1#f", "token=abc", id="token-and-fragment"
        ),
        pytest.param("s3://K:S@bucket/t?sig=x", "s3://bucket/t", "K:S&sig=x", id="userinfo-and-query"),
        pytest.param("s3://bucket/t?versionId=3", "s3://bucket/t?versionId=3", None, id="harmless-query"),
        pytest.param("/data/t?sig=x", "/data/t?sig=x", None, id="a-local-path-has-no-query"),
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


@pytest.mark.parametrize(
    ("uri", "secrets"),
    [
        ("s3://KEY:S%2Fx@bucket/t", ["S%2Fx", "S/x"]),
        ("gs://TOKEN@bucket/t", ["TOKEN"]),
        ("abfss://c@a.dfs.core.windows.net/t?sv=1&sig=Ab%2Bc", ["Ab%2Bc", "Ab+c"]),
        ("s3://K:pw@b/t?X-Amz-Signature=f00d", ["pw", "f00d"]),
        ("abfss://c@a.dfs.core.windows.net/t", []),
        ("/data/t?sig=x", []),
    ],
)
def test_the_secrets_a_location_carries(uri: str, secrets: list[str]) -> None:
    assert location_secrets(uri) == secrets


@pytest.mark.parametrize(
    ("name", "credential"),
    [
        ("sig", True),
        ("SIG", True),
        ("X-Amz-Signature", True),
        ("X-Amz-Credential", True),
        ("X-Amz-Security-Token", True),
        ("X-Goog-Signature", True),
        ("X-Goog-Credential", True),
        ("token", True),
        ("access_token", True),
        ("AccountKey", True),
        ("SharedAccessSignature", True),
        ("sv", False),
        ("se", False),
        ("sp", False),
        ("X-Amz-Algorithm", False),
        ("X-Amz-Expires", False),
        ("X-Amz-SignedHeaders", False),
        ("versionId", False),
    ],
)
def test_credential_query_parameters(name: str, credential: bool) -> None:
    assert is_credential_parameter(name) is credential


SIGNATURE = "S1gNaTuRe%2Bv4lu3%3D"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        pytest.param(
            f"GET https://acct.blob.core.windows.net/c/t?sv=2024&sig={SIGNATURE} failed",
            "GET https://acct.blob.core.windows.net/c/t?sv=2024&sig=*** failed",
            id="log-line",
        ),
        pytest.param(
            f'{{"uri": "abfss://c@a.dfs.core.windows.net/t?sv=1&sig={SIGNATURE}"}}',
            '{"uri": "abfss://c@a.dfs.core.windows.net/t?sv=1&sig=***"}',
            id="json",
        ),
        pytest.param(
            f"<td>https://a/t?sv=1&amp;sig={SIGNATURE}</td>",
            "<td>https://a/t?sv=1&amp;sig=***</td>",
            id="html",
        ),
        pytest.param(
            f"'s3://b/k?X-Amz-Credential=AKIA%2F1&X-Amz-Signature={SIGNATURE}'",
            "'s3://b/k?X-Amz-Credential=***&X-Amz-Signature=***'",
            id="repr-presigned",
        ),
        pytest.param(
            f"next=https%3A%2F%2Fa%2Ft%3Fsv%3D1%26sig%3D{SIGNATURE}%26se%3D2",
            "next=https%3A%2F%2Fa%2Ft%3Fsv%3D1%26sig%3D***%26se%3D2",
            id="url-encoded-inside-a-url",
        ),
        pytest.param(
            f"AccountName=a;AccountKey={SIGNATURE};EndpointSuffix=x",
            "AccountName=a;AccountKey=***;EndpointSuffix=x",
            id="connection-string",
        ),
        pytest.param(f"sig={SIGNATURE}&sv=1", "sig=***&sv=1", id="a-bare-sas-token"),
    ],
)
def test_redact_masks_query_string_credentials_in_text(text: str, shown: str) -> None:
    """Signed URLs and SAS tokens nobody registered: the parameter's name is enough."""
    assert redact(text) == shown


@pytest.mark.parametrize(
    "text",
    [
        "https://h/t?sv=2024&se=2030&sp=rl",
        "a=b&c=d",
        "AccountName=acct",
        "x?sig=",
        "delta.targetFileSize=1tb",
    ],
)
def test_redact_keeps_query_strings_without_credentials(text: str) -> None:
    assert redact(text) == text


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
    # The SAS's other fields are no secret: registering it does not mask its version everywhere.
    assert redact("sv=2024-01-01") == "sv=2024-01-01"


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

    from airflow_delta_provider.core.utils.redaction import get_logger

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
    assert "OSError: cannot open ***" in caplog.text  # the traceback stays, redacted
    assert all(secret not in (r.exc_text or "") for r in caplog.records)
    # A handler that renders the exception object itself (structlog's) finds none to leak.
    for record in caplog.records:
        if record.exc_info:
            assert secret not in "".join(traceback.format_exception(*record.exc_info))


def test_a_traceback_with_nothing_to_hide_keeps_its_exception(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from airflow_delta_provider.core.utils.redaction import get_logger

    log = get_logger("airflow_delta_provider.core.test_logging")
    with caplog.at_level(logging.INFO, logger="airflow_delta_provider.core.test_logging"):
        try:
            raise OSError("plain failure")
        except OSError:
            log.exception("failed")
    (record,) = caplog.records
    assert record.exc_info is not None and record.getMessage() == "failed"
