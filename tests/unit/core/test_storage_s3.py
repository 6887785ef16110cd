"""The storage layer against a real S3-compatible server (moto, on loopback)."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import CommitFileExistsError
from airflow_delta_provider.core.storage import open_store

pytestmark = pytest.mark.s3


def test_put_if_absent_uses_a_conditional_put(s3_bucket, s3_storage_options):
    storage = open_store(f"s3://{s3_bucket}/t", s3_storage_options)
    path = storage.log_path("00000000000000000000.json")
    storage.put_if_absent(path, b"first")
    with pytest.raises(CommitFileExistsError, match="already exists"):
        storage.put_if_absent(path, b"second")
    assert storage.read_bytes(path) == b"first"


def _race(uri: str, options: dict, token: int) -> bool:
    storage = open_store(uri, options)
    try:
        storage.put_if_absent(storage.log_path("00000000000000000001.json"), str(token).encode())
        return True
    except CommitFileExistsError:
        return False


def test_put_if_absent_has_one_winner_across_processes(s3_bucket, s3_storage_options):
    uri = f"s3://{s3_bucket}/race"
    with ProcessPoolExecutor(4) as pool:
        outcomes = list(pool.map(_race, [uri] * 8, [s3_storage_options] * 8, range(8)))
    assert outcomes.count(True) == 1


def test_listing_from_a_version_is_sorted_and_skips_subdirectories(s3_bucket, s3_storage_options):
    storage = open_store(f"s3://{s3_bucket}/t", s3_storage_options)
    for name in [
        "00000000000000000002.json",
        "00000000000000000000.json",
        "00000000000000000001.json",
        "_sidecars/x.parquet",
        "00000000000000000001.checkpoint.parquet",
    ]:
        storage.put(storage.log_path(name), b"{}")
    names = [f.name for f in storage.list_log("00000000000000000001")]
    assert names == [
        "00000000000000000001.checkpoint.parquet",
        "00000000000000000001.json",
        "00000000000000000002.json",
    ]
    info = storage.info(storage.log_path("00000000000000000002.json"))
    assert info is not None and info.size == 2 and info.modification_time > 0
    assert storage.info(storage.log_path("nope.json")) is None


def test_read_a_delta_rs_table_on_s3(s3_bucket, s3_storage_options, s3_endpoint):
    from deltalake import write_deltalake

    uri = f"s3://{s3_bucket}/events"
    rs_options = {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    write_deltalake(
        uri, pa.table({"p": ["a", "b"], "v": [1, 2]}), partition_by=["p"], storage_options=rs_options
    )
    write_deltalake(
        uri, pa.table({"p": ["a"], "v": [3]}), partition_by=["p"], mode="append", storage_options=rs_options
    )
    snapshot = DeltaTable(uri, s3_storage_options).snapshot()
    assert snapshot.version == 1
    assert snapshot.files().num_rows == 3
    assert sorted(snapshot.to_pyarrow_table().column("v").to_pylist()) == [1, 2, 3]
    assert all(u.startswith(f"s3://{s3_bucket}/events/p=") for u in snapshot.file_uris())


def test_a_commit_written_after_a_cached_listing_is_read(s3_bucket, s3_endpoint, s3_storage_options):
    """s3fs keeps directory listings (a recursive walk fills them); a commit another writer puts
    after that must still be read, not reported missing from the stale listing."""
    import boto3

    store = open_store(f"s3://{s3_bucket}/t", s3_storage_options)
    store.put_if_absent(store.log_path("00000000000000000000.json"), b"first\n")
    assert [f.name for f in store.walk()] == ["00000000000000000000.json"]  # caches the listing
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    client.put_object(Bucket=s3_bucket, Key="t/_delta_log/00000000000000000001.json", Body=b"second\n")
    assert store.read_bytes(store.log_path("00000000000000000001.json")) == b"second\n"
    assert store.read_range(store.log_path("00000000000000000001.json"), 0, 6) == b"second"
