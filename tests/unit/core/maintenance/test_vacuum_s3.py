"""VACUUM on S3 (a real moto server on loopback): batched deletes, no commits by default, LITE."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import PostCommitHookProperties, write_deltalake

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    DeleteFilesError,
    StorageError,
    VacuumDeleteError,
    VacuumRetentionTooShortError,
)
from airflow_delta_provider.core.maintenance.vacuum import DELETE_BATCH
from airflow_delta_provider.core.maintenance.vacuum.plan import hidden_name_rule
from airflow_delta_provider.core.storage import S3Store, open_store
from airflow_delta_provider.core.storage import s3 as s3_module
from airflow_delta_provider.core.storage.base import LogStore

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.s3

NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def rs_options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def client(endpoint: str) -> Any:
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


def keys(endpoint: str, bucket: str, prefix: str) -> set[str]:
    paginator = client(endpoint).get_paginator("list_objects_v2")
    return {
        obj["Key"].removeprefix(prefix)
        for page in paginator.paginate(Bucket=bucket, Prefix=prefix)
        for obj in page.get("Contents", [])
    }


@pytest.fixture
def s3_table(s3_bucket: str, s3_endpoint: str) -> tuple[str, str]:
    """Three appends then an overwrite (three tombstones), partitioned, plus strays; returns (uri, prefix)."""
    uri = f"s3://{s3_bucket}/events"
    for version in range(4):
        write_deltalake(
            uri,
            pa.table({"id": pa.array([version], pa.int64()), "p": [f"v={version % 2}"]}),
            partition_by=["p"],
            mode="overwrite" if version == 3 else "append",
            storage_options=rs_options(s3_endpoint),
            post_commithook_properties=NO_HOOKS,
        )
    s3 = client(s3_endpoint)
    for key in ("stray/part-0.parquet", "_temporary/x.parquet", "p=v%3D0/.crc"):
        s3.put_object(Bucket=s3_bucket, Key=f"events/{key}", Body=b"stray")
    return uri, "events/"


def test_dry_run_on_s3_matches_delta_rs(
    s3_table: tuple[str, str], s3_storage_options: dict[str, Any], s3_endpoint: str
) -> None:
    uri, _ = s3_table
    future = datetime.now(tz=UTC) + timedelta(days=8)  # every object is older than a week by then
    result = DeltaTable(uri, s3_storage_options).vacuum(now=future, dry_run=True)
    prefix = uri + "/"
    # The core lists URIs (a literal '%' escaped as '%25'), delta-rs the keys: decoded, the same.
    core = {unquote(f.removeprefix(prefix)) for f in result.files}
    rs = set(
        RsDeltaTable(uri, storage_options=rs_options(s3_endpoint)).vacuum(
            retention_hours=0, dry_run=True, enforce_retention_duration=False, full=True
        )
    )
    # delta-rs (retain 0 now) and the core (7 days, 8 days later) see the same old objects; the
    # nested hidden checksum file is the documented difference (delta-rs would delete it).
    assert rs - core == {"p=v%3D0/.crc"}
    assert core == rs - {"p=v%3D0/.crc"}
    assert len(core) == 3 + 1  # three overwritten files and the stray
    assert result.directories == ()  # prefixes are not directories on S3


def test_real_vacuum_on_s3_deletes_in_batches_and_commits_nothing(
    s3_table: tuple[str, str], s3_storage_options: dict[str, Any], s3_endpoint: str, s3_bucket: str
) -> None:
    uri, prefix = s3_table
    table = DeltaTable(uri, s3_storage_options)
    version = table.version()
    with pytest.raises(VacuumRetentionTooShortError):
        table.vacuum(retention="0 hours")
    result = table.vacuum(retention="0 hours", enforce_retention_duration=False)
    assert result.num_files == 4 and result.num_deleted == 4
    # Delta writes no VACUUM START/END on S3 (not one of its logged schemes) ...
    assert (result.start_version, result.end_version) == (None, None)
    assert table.version() == version
    remaining = keys(s3_endpoint, s3_bucket, prefix)
    assert not any(
        k.removeprefix(prefix) in remaining
        for k in (unquote(f.removeprefix(uri + "/")) for f in result.files)
    )
    assert {"_temporary/x.parquet", "p=v%3D0/.crc"} <= remaining
    assert "_delta_log/_last_vacuum_info" in remaining
    rows = RsDeltaTable(uri, storage_options=rs_options(s3_endpoint)).to_pyarrow_table()
    assert rows["id"].to_pylist() == [3]
    # ... unless asked to.
    again = table.vacuum(retention="0 hours", enforce_retention_duration=False, log_commits=True)
    assert again.files == () and (again.start_version, again.end_version) == (version + 1, version + 2)
    assert [h["operation"] for h in table.history(2)] == ["VACUUM END", "VACUUM START"]


def test_many_files_on_s3_go_in_several_delete_requests(
    s3_bucket: str, s3_storage_options: dict[str, Any], s3_endpoint: str
) -> None:
    uri = f"s3://{s3_bucket}/wide"
    write_deltalake(
        uri,
        pa.table({"id": pa.array([1], pa.int64())}),
        storage_options=rs_options(s3_endpoint),
        post_commithook_properties=NO_HOOKS,
    )
    s3 = client(s3_endpoint)
    count = DELETE_BATCH * 2 + 7
    for i in range(count):
        s3.put_object(Bucket=s3_bucket, Key=f"wide/orphans/[x]{i:05d}.parquet", Body=b"o")
    # A name with glob characters must be deleted as written, never expanded.
    s3.put_object(Bucket=s3_bucket, Key="wide/orphans/x1.parquet", Body=b"o")
    result = DeltaTable(uri, s3_storage_options).vacuum(
        retention="0 hours",
        enforce_retention_duration=False,
        now=datetime.now(tz=UTC) + timedelta(minutes=5),
        max_workers=3,
        log_commits=False,
    )
    assert result.num_files == count + 1
    remaining = keys(s3_endpoint, s3_bucket, "wide/")
    assert not any(k.startswith("orphans/") for k in remaining)
    assert RsDeltaTable(uri, storage_options=rs_options(s3_endpoint)).to_pyarrow_table().num_rows == 1


def test_lite_on_s3(s3_table: tuple[str, str], s3_storage_options: dict[str, Any], s3_endpoint: str) -> None:
    uri, _ = s3_table
    table = DeltaTable(uri, s3_storage_options)
    result = table.vacuum(mode="lite", retention="0 hours", enforce_retention_duration=False)
    assert result.num_files == 3 and result.eligible_start_version == 0
    assert result.last_vacuum_version == table.version()
    rows = RsDeltaTable(uri, storage_options=rs_options(s3_endpoint)).to_pyarrow_table()
    assert rows["id"].to_pylist() == [3]


# --- the concurrent tree listing and the async bulk deletes (core/storage/s3.py) ---------------


def test_concurrent_raw_listing_matches_the_parsed_listing(
    s3_bucket: str, s3_storage_options: dict[str, Any], s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every prefix listed concurrently from the raw page bodies gives exactly what botocore's
    parsed pages give (the base class's listing), names with entities, spaces, + and % included."""
    uri = f"s3://{s3_bucket}/names"
    write_deltalake(
        uri,
        pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a b", "c&d"]}),
        partition_by=["p"],
        storage_options=rs_options(s3_endpoint),
        post_commithook_properties=NO_HOOKS,
    )
    s3 = client(s3_endpoint)
    odd = ["x+y.parquet", "50%.parquet", "<tag>&'\".parquet", "ünï cödé.parquet", "dir/", "_hidden.parquet"]
    for p in ("p=a b", "p=c&d", "p=e%3Df", "other/deep/er"):
        for name in odd:
            s3.put_object(Bucket=s3_bucket, Key=f"names/{p}/{name}", Body=b"o")
    s3.put_object(Bucket=s3_bucket, Key="names/_tmp/x.parquet", Body=b"o")
    s3.put_object(Bucket=s3_bucket, Key="names-sibling/p=a b/x.parquet", Body=b"o")  # outside the root
    table = DeltaTable(uri, s3_storage_options)
    storage = table.snapshot().storage
    hidden = hidden_name_rule(table.snapshot())
    # A file beside the prefixes, sorting between two of them (read twice by a key range).
    s3.put_object(Bucket=s3_bucket, Key="names/p=c&d.parquet", Body=b"o")
    monkeypatch.setattr(s3_module, "LIST_PAGE_KEYS", 2)  # several pages per prefix
    concurrent = storage.list_tree(hidden)
    parsed = LogStore.list_tree(storage, hidden)
    assert sorted(concurrent.files) == sorted(parsed.files)
    monkeypatch.setattr(s3_module, "LIST_CONCURRENCY", 2)  # neighbouring prefixes as key ranges
    assert sorted(storage.list_tree(hidden).files) == sorted(parsed.files)
    names = {relative for relative, _, _ in concurrent.files}
    assert "p=c&d/<tag>&'\".parquet" in names and "other/deep/er/x+y.parquet" in names
    assert not any(n.startswith("_") or "/_" in n or n.endswith("/") for n in names)
    assert len(names) == 4 * 4 + 2 + 1  # 4 visible odd names in 4 prefixes, 2 data files, 1 beside


def test_raw_listing_leaves_botocore_the_page_without_its_objects() -> None:
    page = (
        b'<?xml version="1.0"?><ListBucketResult><Name>b</Name><IsTruncated>false</IsTruncated>'
        b"<Contents><Key>t/a</Key><LastModified>2026-01-02T03:04:05.000Z</LastModified><Size>3</Size></Contents>"
        b"<CommonPrefixes><Prefix>t/p/</Prefix></CommonPrefixes>"
        b"<Contents><Key>t/b</Key><LastModified>2026-01-02T03:04:06.000Z</LastModified><Size>4</Size></Contents>"
        b"</ListBucketResult>"
    )
    sink: list[bytes] = []
    token = s3_module._RAW_LISTING.set(sink)
    try:
        response = {"status_code": 200, "body": page}
        s3_module._keep_raw_listing(response, operation_model=type("Op", (), {"name": "ListObjectsV2"})())
        refused = {"status_code": 500, "body": page}
        s3_module._keep_raw_listing(refused, operation_model=type("Op", (), {"name": "ListObjectsV2"})())
    finally:
        s3_module._RAW_LISTING.reset(token)
    assert sink == [page] and refused["body"] == page  # errors are botocore's to parse
    # A prefix between the objects: the objects are cut out one by one, the prefix stays.
    assert b"<Contents>" not in response["body"] and b"<Prefix>t/p/</Prefix>" in response["body"]
    keys, sizes, stamps = s3_module._page_objects({}, page)
    assert (keys, sizes) == (["t/a", "t/b"], [3, 4])
    assert [s3_module._millis(s) for s in stamps] == [1767323045000, 1767323046000]
    with pytest.raises(StorageError, match="Unexpected ListObjectsV2 page"):
        s3_module._page_objects({}, page.replace(b"<Size>4</Size>", b""))


def test_concurrent_bulk_deletes_delete_what_the_sequential_path_deletes(
    s3_bucket: str, s3_storage_options: dict[str, Any], s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    s3 = client(s3_endpoint)
    monkeypatch.setattr(S3Store, "delete_batch_size", 3)  # 8 batches of 3 (and one of 1)
    results = {}
    for run, workers in (("sequential", 1), ("concurrent", 8)):
        uri = f"s3://{s3_bucket}/{run}"
        write_deltalake(
            uri,
            pa.table({"id": pa.array([1], pa.int64()), "p": ["a"]}),
            partition_by=["p"],
            storage_options=rs_options(s3_endpoint),
            post_commithook_properties=NO_HOOKS,
        )
        for i in range(25):
            s3.put_object(Bucket=s3_bucket, Key=f"{run}/p={'ab'[i % 2]}/orphan-{i:02d}.parquet", Body=b"o")
        s3.put_object(Bucket=s3_bucket, Key=f"{run}-outside/p=a/orphan-00.parquet", Body=b"o")
        result = DeltaTable(uri, s3_storage_options).vacuum(
            retention=0, enforce_retention_duration=False, max_workers=workers
        )
        assert result.num_deleted == 25
        left = {
            "p=a/<data file>" if k.startswith("p=a/part-") else k
            for k in keys(s3_endpoint, s3_bucket, f"{run}/")
        }
        results[run] = (left, keys(s3_endpoint, s3_bucket, f"{run}-outside/"))
        assert RsDeltaTable(uri, storage_options=rs_options(s3_endpoint)).to_pyarrow_table().num_rows == 1
    assert results["sequential"] == results["concurrent"]
    remaining, outside = results["concurrent"]
    assert remaining == {
        "p=a/<data file>",
        "_delta_log/00000000000000000000.json",
        "_delta_log/_last_vacuum_info",
    }
    assert outside == {"p=a/orphan-00.parquet"}


@pytest.fixture(scope="module")
def refusing_s3_endpoint() -> Iterator[str]:
    """moto in this process behind a server that refuses to delete keys containing ``locked``, in
    ``DeleteObjects`` and alone (as S3 does for objects under a legal hold), answering the rest as
    S3 would."""
    import re
    import threading

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.s3.models import s3_backends
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)

    def refusing(environ: dict[str, Any], start_response: Any) -> Any:
        if environ["REQUEST_METHOD"] == "DELETE" and "locked" in environ["PATH_INFO"]:
            answer = (
                b'<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>legal hold</Message></Error>'
            )
            start_response(
                "403 Forbidden", [("Content-Type", "application/xml"), ("Content-Length", str(len(answer)))]
            )
            return [answer]
        if environ["REQUEST_METHOD"] != "POST" or "delete" not in environ.get("QUERY_STRING", ""):
            return app(environ, start_response)
        if environ["PATH_INFO"].strip("/") == "nobatch":  # a store without DeleteObjects
            answer = b'<?xml version="1.0"?><Error><Code>NotImplemented</Code><Message>no</Message></Error>'
            start_response("501 Not Implemented", [("Content-Type", "application/xml")])
            return [answer]
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        bucket = environ["PATH_INFO"].strip("/")
        errors = []
        for key in re.findall(rb"<Key>(.*?)</Key>", body):
            name = key.decode()
            if "locked" in name:
                errors.append(
                    f"<Error><Key>{name}</Key><Code>AccessDenied</Code><Message>legal hold</Message></Error>"
                )
            else:
                s3_backends[DEFAULT_ACCOUNT_ID]["global"].delete_object(bucket, name)
        answer = f'<?xml version="1.0"?><DeleteResult>{"".join(errors)}</DeleteResult>'.encode()
        start_response("200 OK", [("Content-Type", "application/xml"), ("Content-Length", str(len(answer)))])
        return [answer]

    server = make_server("127.0.0.1", 0, refusing, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)


def test_refused_bulk_deletes_are_reported_and_live_files_stay(refusing_s3_endpoint: str) -> None:
    endpoint = refusing_s3_endpoint
    s3 = client(endpoint)
    s3.create_bucket(Bucket="refusing")
    uri = "s3://refusing/t"
    write_deltalake(
        uri,
        pa.table({"id": pa.array([1, 2], pa.int64()), "p": ["a", "b"]}),
        partition_by=["p"],
        storage_options=rs_options(endpoint),
        post_commithook_properties=NO_HOOKS,
    )
    live = keys(endpoint, "refusing", "t/")
    for i in range(40):
        s3.put_object(Bucket="refusing", Key=f"t/p=a/orphan-{i:02d}.parquet", Body=b"o")
    s3.put_object(Bucket="refusing", Key="t/p=b/orphan-locked.parquet", Body=b"o")
    options = {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }
    with pytest.raises(VacuumDeleteError, match=r"refused to delete 1 of .*orphan-locked") as raised:
        DeltaTable(uri, options).vacuum(retention=0, enforce_retention_duration=False, max_workers=4)
    assert raised.value.failed[0][0] == "refusing/t/p=b/orphan-locked.parquet"
    remaining = keys(endpoint, "refusing", "t/")
    assert live <= remaining  # the table's files and log are untouched
    assert "p=b/orphan-locked.parquet" in remaining
    assert RsDeltaTable(uri, storage_options=rs_options(endpoint)).to_pyarrow_table().num_rows == 2


def _s3_options(endpoint: str) -> dict[str, Any]:
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }


def test_a_batch_refused_whole_stops_the_run_and_says_what_was_not_attempted(
    refusing_s3_endpoint: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The delete scheduler's stop rule: once no object of a batch could be deleted (here: all
    under a legal hold, in the batch and alone), no further batch is sent; every refused object
    is named and the others are counted as not attempted, untouched."""
    endpoint = refusing_s3_endpoint
    s3 = client(endpoint)
    s3.create_bucket(Bucket="stopping")
    names = [f"t/a/locked-{i}" for i in range(3)] + [f"t/b/free-{i}" for i in range(6)]
    for name in [*names, "outside/x"]:
        s3.put_object(Bucket="stopping", Key=name, Body=b"o")
    storage = open_store("s3://stopping/t", _s3_options(endpoint))
    monkeypatch.setattr(S3Store, "delete_batch_size", 3)
    with pytest.raises(DeleteFilesError) as raised:
        storage.delete_many([f"stopping/{n}" for n in names], max_workers=1)
    assert sorted(path for path, _ in raised.value.failed) == [f"stopping/t/a/locked-{i}" for i in range(3)]
    assert all("AccessDenied" in reason and "alone:" in reason for _, reason in raised.value.failed)
    message = str(raised.value)
    assert "refused to delete 3 of 9 file(s)" in message and "6 other file(s) were not attempted" in message
    assert "s3://stopping/t/a/locked-0" in message and "s3:DeleteObject" in message
    assert keys(endpoint, "stopping", "") == {*names, "outside/x"}
    assert storage.delete_requests == {"batch": 1, "single": 3}


def test_a_store_without_delete_objects_gets_single_deletes(
    refusing_s3_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An S3-compatible store answering ``DeleteObjects`` with 501 NotImplemented: a warning,
    then one ``DeleteObject`` per key, every key deleted, the listing cache forgotten."""
    endpoint = refusing_s3_endpoint
    s3 = client(endpoint)
    s3.create_bucket(Bucket="nobatch")
    for name in ("t/a", "t/b", "t/c", "t/keep", "t2/a"):
        s3.put_object(Bucket="nobatch", Key=name, Body=b"o")
    storage = open_store("s3://nobatch/t", _s3_options(endpoint))
    assert storage.delete_many(["nobatch/t/a", "nobatch/t/b", "nobatch/t/b", "nobatch/t/c"]) == 3
    assert storage.batch_refused is not None and "NotImplemented" in storage.batch_refused
    assert "does not accept batch delete requests" in caplog.text
    assert storage.delete_requests == {"batch": 1, "single": 3}  # the path given twice: deleted once
    assert storage.delete_many(["nobatch/t/keep"]) == 1
    assert storage.delete_requests == {"batch": 1, "single": 4}  # no batch tried again
    assert keys(endpoint, "nobatch", "") == {"t2/a"}


def test_the_delete_body_is_botocores_byte_for_byte() -> None:
    """The ``DeleteObjects`` body the store writes equals what botocore's serialiser (and its
    ``escape_xml_payload``) sends for the same keys, awkward ones included; captured before
    sending, from a client with no server."""
    import botocore.session

    keys = ["p=a b/x+y.parquet", "<tag>&'\".parquet", "ünï cödé", "line\nbreak\r", "50%25/[x]"]
    s3 = botocore.session.get_session().create_client(
        "s3",
        endpoint_url="http://127.0.0.1:9",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    sent: list[bytes] = []

    def capture(request: Any, **_: Any) -> None:
        sent.append(request.body)
        raise KeyboardInterrupt  # stop before the network

    s3.meta.events.register("before-send.s3.DeleteObjects", capture)
    with pytest.raises(KeyboardInterrupt):
        s3.delete_objects(Bucket="b", Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True})
    assert s3_module.delete_objects_body(keys) == sent[0]


def test_awkward_keys_are_deleted_through_the_written_body(
    s3_bucket: str, s3_storage_options: dict[str, Any], s3_endpoint: str
) -> None:
    s3 = client(s3_endpoint)
    names = ["a&b<c>.parquet", "ü é+x.parquet", "50%25/[x]'\".parquet", "keep.parquet"]
    for name in names:
        s3.put_object(Bucket=s3_bucket, Key=f"awkward/{name}", Body=b"o")
    storage = open_store(f"s3://{s3_bucket}/awkward", s3_storage_options)
    assert storage.delete_many([f"{s3_bucket}/awkward/{n}" for n in names[:-1]]) == 3
    assert keys(s3_endpoint, s3_bucket, "awkward/") == {"keep.parquet"}
    assert storage.delete_requests == {"batch": 1, "single": 0}


def test_a_quiet_delete_answer_keeps_only_its_errors_for_botocore() -> None:
    """moto lists every deleted key although the request is quiet; the hook leaves botocore the
    errors only (for the core's own requests), so refused keys are still read and named."""
    answer = (
        b'<?xml version="1.0"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<Deleted><Key>t/a</Key></Deleted><Error><Key>t/b</Key><Code>AccessDenied</Code>"
        b"<Message>legal hold</Message></Error><Deleted><Key>t/c</Key></Deleted></DeleteResult>"
    )
    response = {"status_code": 200, "body": answer}
    s3_module._drop_deleted(response)  # not the core's request: untouched
    assert response["body"] == answer
    token = s3_module._DELETE_BODY.set(b"<Delete/>")
    try:
        s3_module._drop_deleted(response)
    finally:
        s3_module._DELETE_BODY.reset(token)
    assert response["body"] == (
        b'<?xml version="1.0"?><DeleteResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
        b"<Error><Key>t/b</Key><Code>AccessDenied</Code><Message>legal hold</Message></Error></DeleteResult>"
    )


def test_the_s3_connection_pool_holds_the_listing_concurrency(s3_storage_options: dict[str, Any]) -> None:
    """botocore's pool (10 connections by default) would queue the listing's concurrent requests;
    a pool size the caller sets is kept."""
    store = open_store("s3://pool/t", s3_storage_options)
    assert store.fs.config_kwargs["max_pool_connections"] >= s3_module.LIST_CONCURRENCY
    mine = open_store("s3://pool/t", {**s3_storage_options, "config_kwargs": {"max_pool_connections": 3}})
    assert mine.fs.config_kwargs["max_pool_connections"] == 3
