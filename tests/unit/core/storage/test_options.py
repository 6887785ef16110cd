from __future__ import annotations

import pytest

from airflow_delta_provider.core.errors import StorageError
from airflow_delta_provider.core.storage import open_store
from airflow_delta_provider.core.storage.options import fsspec_options


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        pytest.param({"region": "eu-west-1"}, {"client_kwargs": {"region_name": "eu-west-1"}}, id="readme"),
        pytest.param(
            {
                "AWS_ACCESS_KEY_ID": "AKIA",
                "AWS_SECRET_ACCESS_KEY": "s3cr3t",
                "AWS_REGION": "us-east-1",
                "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
                "AWS_ALLOW_HTTP": "true",
            },
            {
                "key": "AKIA",
                "secret": "s3cr3t",
                "client_kwargs": {"region_name": "us-east-1", "endpoint_url": "http://127.0.0.1:9000"},
            },
            id="delta-rs",
        ),
        pytest.param(
            {"aws_session_token": "tok", "aws_skip_signature": "true"},
            {"token": "tok", "anon": True},
            id="lower-case-object-store-keys",
        ),
        pytest.param(
            {"key": "AKIA", "secret": "s", "client_kwargs": {"endpoint_url": "http://x"}},
            {"key": "AKIA", "secret": "s", "client_kwargs": {"endpoint_url": "http://x"}},
            id="fsspec-native",
        ),
        pytest.param(
            {"AWS_REGION": "us-east-1", "client_kwargs": {"region_name": "us-east-1"}},
            {"client_kwargs": {"region_name": "us-east-1"}},
            id="same-value-twice",
        ),
        pytest.param(
            {"AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false"},
            {"config_kwargs": {"s3": {"addressing_style": "path"}}},
            id="addressing-style",
        ),
    ],
)
def test_s3_options_from_delta_rs_and_fsspec(options, expected):
    assert fsspec_options("s3", options) == expected


@pytest.mark.parametrize(
    ("options", "match"),
    [
        pytest.param({"regoin": "eu-west-1"}, "Unknown storage option 'regoin'", id="typo"),
        pytest.param(
            {"AWS_REGION": "us-east-1", "region": "eu-west-1"},
            "both set client_kwargs.region_name",
            id="clash",
        ),
        pytest.param({"AWS_SKIP_SIGNATURE": "maybe"}, "true or false", id="bad-flag"),
    ],
)
def test_bad_s3_options_are_refused_naming_the_key(options, match):
    with pytest.raises(StorageError, match=match):
        fsspec_options("s3", options)


def test_the_readme_region_option_builds_a_filesystem():
    store = open_store("s3://bucket/events", {"region": "eu-west-1"})
    assert store.fs.client_kwargs == {"region_name": "eu-west-1"}


def test_azure_keys_map_to_adlfs_options():
    assert fsspec_options(
        "abfss", {"AZURE_STORAGE_ACCOUNT_NAME": "acct", "azure_storage_account_key": "k", "sas_token": "t"}
    ) == {"account_name": "acct", "account_key": "k", "sas_token": "t"}


def test_gcs_service_account_key_is_parsed():
    assert fsspec_options("gs", {"GOOGLE_SERVICE_ACCOUNT_KEY": '{"type": "service_account"}'}) == {
        "token": {"type": "service_account"}
    }
