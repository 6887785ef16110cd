"""The storage layer against a real S3-compatible server (moto, on loopback)."""

from __future__ import annotations

import uuid
from concurrent.futures import ProcessPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import CommitFileExistsError, StorageError
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


# --- stores that cannot put-if-absent -------------------------------------------------------


def _s3rver_options(endpoint: str) -> dict[str, object]:
    return {"key": "S3RVER", "secret": "S3RVER", "client_kwargs": {"endpoint_url": endpoint}}


@pytest.fixture
def s3rver_bucket(s3rver_endpoint: str) -> str:
    import boto3

    name = f"test-{uuid.uuid4().hex[:12]}"
    boto3.client(
        "s3",
        endpoint_url=s3rver_endpoint,
        aws_access_key_id="S3RVER",
        aws_secret_access_key="S3RVER",
        region_name="us-east-1",
    ).create_bucket(Bucket=name)
    return name


def test_a_store_ignoring_conditional_writes_is_refused_for_commits(s3rver_endpoint, s3rver_bucket):
    """s3rver (a real S3-compatible server) answers 200 to a second ``If-None-Match: *`` PUT of a key:
    two writers could both "win" a version. Commits are refused with the reason; the log is untouched."""
    options = _s3rver_options(s3rver_endpoint)
    uri = f"s3://{s3rver_bucket}/t"
    with pytest.raises(StorageError) as raised:
        DeltaTable.create(uri, pa.schema([("id", pa.int64())]), storage_options=options)
    message = str(raised.value)
    assert (
        f"The S3 store at {s3rver_endpoint} (bucket {s3rver_bucket!r}) ignores conditional writes" in message
    )
    assert "If-None-Match: *" in message and "412" in message and "refused" in message
    storage = open_store(uri, options)
    assert storage.list_log() == []  # no commit, and the probe object was deleted

    # A table another tool committed there stays readable; committing to it is refused too.
    storage.put(storage.log_path("00000000000000000000.json"), _COMMIT_0)
    table = DeltaTable(uri, options)
    assert table.version() == 0
    pq.write_table(
        pa.table({"id": pa.array([1], pa.int64())}), storage.join("part-0.parquet"), filesystem=storage.fs
    )
    with pytest.raises(StorageError, match="ignores conditional writes"):
        table.commit_files(["part-0.parquet"])
    assert [f.name for f in storage.list_log()] == ["00000000000000000000.json"]


def test_a_store_honouring_conditional_writes_keeps_no_probe_object(s3_bucket, s3_storage_options):
    table = DeltaTable.create(
        f"s3://{s3_bucket}/t", pa.schema([("id", pa.int64())]), storage_options=s3_storage_options
    )
    assert table.version() == 0
    names = [f.name for f in table.storage.list_log()]
    assert names == ["00000000000000000000.crc", "00000000000000000000.json"]


_COMMIT_0 = (
    b'{"protocol":{"minReaderVersion":1,"minWriterVersion":2}}\n'
    b'{"metaData":{"id":"6f1c1a8e-0000-4000-8000-000000000000","format":{"provider":"parquet","options":{}},'
    b'"schemaString":"{\\"type\\":\\"struct\\",\\"fields\\":[{\\"name\\":\\"id\\",\\"type\\":\\"long\\",'
    b'\\"nullable\\":true,\\"metadata\\":{}}]}","partitionColumns":[],"configuration":{},"createdTime":0}}\n'
)
