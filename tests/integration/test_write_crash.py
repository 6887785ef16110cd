"""Crash safety: a writer process killed (SIGKILL) at the worst moments leaves no partial commit.

Each writer is a real process running the core's ``commit_files``. A small hook in the
child stops it at a chosen point of the commit (after its data files are written, in the
middle of writing the commit's temporary file, between that file and the hard link that
publishes it, in the middle of the S3 upload of the commit); the parent waits until the
child is there and kills it. Then the core and delta-rs must read the previous version, and
the next commit must land at the version the dead writer was after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.log.logfiles import commit_name

SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.string())])

# The writer. argv[1]: JSON {"uri", "options", "partition", "ids", "stop", "endpoint"}.
# It writes its data file, then commits it; the hook named by "stop" prints "stopped" and
# hangs at that point, for the parent to kill the process.
_WRITER = r"""
import json, os, sys, time, uuid
import pyarrow as pa, pyarrow.parquet as pq
from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.storage import local as local_store, s3 as s3_store

config = json.loads(sys.argv[1])
stop = config["stop"]


def hang():
    print("stopped", flush=True)
    while True:
        time.sleep(60)


if stop == "before_put":
    # Data files written, stats read, commit payload built: die before any log write.
    for store in (local_store.LocalStore, s3_store.S3Store):
        store.put_if_absent = lambda self, path, data: hang()
elif stop == "mid_temp_write":
    real_write = os.write

    def half_write(fd, data):
        view = memoryview(data)
        real_write(fd, view[: len(view) // 2])
        os.fsync(fd)
        hang()

    local_store.os.write = half_write
elif stop == "before_link":
    local_store.os.link = lambda src, dst: hang()
elif stop == "mid_s3_upload":
    import http.client
    from urllib.parse import urlsplit
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    def partial_put(self, path, data):
        # The commit's conditional PUT, signed as S3 wants it, of which only half the
        # body is sent before the process dies.
        url = config["endpoint"] + "/" + path
        request = AWSRequest(method="PUT", url=url, data=data,
                             headers={"If-None-Match": "*", "Content-Length": str(len(data))})
        S3SigV4Auth(Credentials("testing", "testing"), "s3", "us-east-1").add_auth(request)
        split = urlsplit(url)
        connection = http.client.HTTPConnection(split.hostname, split.port)
        connection.putrequest("PUT", split.path, skip_accept_encoding=True)
        for name, value in request.headers.items():
            connection.putheader(name, value)
        connection.endheaders()
        connection.send(data[: len(data) // 2])
        hang()

    s3_store.S3Store.put_if_absent = partial_put

table = DeltaTable(config["uri"], config["options"])
relative = f"p={config['partition']}/part-{uuid.uuid4()}.parquet"
path = table.storage.join(relative)
data = pa.table({"id": pa.array(config["ids"], pa.int64())})
if table.storage.is_local:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(data, path)
else:
    pq.write_table(data, path, filesystem=table.storage.fs)
print("data", relative, flush=True)
table.commit_files([relative], app_id="crashing-writer", app_version=1)
print("committed", flush=True)
"""


def rs_options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


@pytest.fixture
def local() -> dict[str, Any]:
    return {"options": None, "rs_options": None, "endpoint": None}


@pytest.fixture
def s3(s3_endpoint: str, s3_storage_options: dict[str, Any], s3_bucket: str) -> dict[str, Any]:
    return {
        "options": s3_storage_options,
        "rs_options": rs_options(s3_endpoint),
        "endpoint": s3_endpoint,
        "bucket": s3_bucket,
    }


def make_table(uri: str, backend: dict[str, Any]) -> DeltaTable:
    """Version 1 of a table: ids 1 and 2 in partition a."""
    table = DeltaTable.create(uri, SCHEMA, partition_by=["p"], storage_options=backend["options"])
    relative = f"p=a/part-{uuid.uuid4()}.parquet"
    path = table.storage.join(relative)
    if table.storage.is_local:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), path)
    else:
        pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), path, filesystem=table.storage.fs)
    assert table.commit_files([relative]).version == 1
    return table


def kill_writer(table: DeltaTable, backend: dict[str, Any], stop: str) -> str:
    """Run a writer to ``stop``, SIGKILL it there; returns the data file it wrote."""
    config = {
        "uri": table.uri,
        "options": backend["options"],
        "partition": "a",
        "ids": [100, 101, 102],
        "stop": stop,
        "endpoint": backend["endpoint"],
    }
    process = subprocess.Popen(
        [sys.executable, "-c", _WRITER, json.dumps(config)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        data_line = process.stdout.readline().split()
        assert data_line[:1] == ["data"], f"the writer failed before writing data (exit {process.poll()})"
        assert process.stdout.readline().strip() == "stopped", (
            f"the writer did not stop (exit {process.poll()})"
        )
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    return data_line[1]


def assert_at_version_1(table: DeltaTable, backend: dict[str, Any], orphan: str) -> None:
    """Core and delta-rs read version 1 as before; the dead writer's file is not in the table."""
    assert not table.storage.exists(table.storage.log_path(commit_name(2)))
    assert not table.storage.exists(table.storage.log_path("00000000000000000002.crc"))
    assert table.storage.exists(table.storage.join(orphan))  # written, never committed
    snapshot = table.snapshot()
    assert snapshot.version == 1
    assert sorted(snapshot.to_pyarrow_table()["id"].to_pylist()) == [1, 2]
    assert orphan not in snapshot.files()["path"].to_pylist()
    assert snapshot.app_transaction_version("crashing-writer") is None
    theirs = deltalake.DeltaTable(table.uri, storage_options=backend["rs_options"])
    assert theirs.version() == 1
    assert sorted(pa.table(theirs.to_pyarrow_table())["id"].to_pylist()) == [1, 2]
    assert theirs.transaction_version("crashing-writer") is None


def assert_next_commit_lands_at_2(table: DeltaTable, backend: dict[str, Any], orphan: str) -> None:
    """The retried task commits the dead writer's file at version 2; delta-rs reads it."""
    result = table.commit_files([orphan], app_id="crashing-writer", app_version=1)
    assert (result.version, result.committed, result.attempts) == (2, True, 1)
    assert sorted(table.snapshot().to_pyarrow_table()["id"].to_pylist()) == [1, 2, 100, 101, 102]
    theirs = deltalake.DeltaTable(table.uri, storage_options=backend["rs_options"])
    assert theirs.version() == 2
    assert sorted(pa.table(theirs.to_pyarrow_table())["id"].to_pylist()) == [1, 2, 100, 101, 102]
    assert theirs.transaction_version("crashing-writer") == 1
    assert [h["operation"] for h in theirs.history()] == ["WRITE", "WRITE", "CREATE TABLE"]


def hidden_leftovers(table: DeltaTable) -> list[str]:
    return sorted(f for f in os.listdir(table.storage.log_dir) if f.startswith("."))


def test_killed_after_writing_data_before_the_commit_local(tmp_path, local):
    table = make_table(str(tmp_path / "t"), local)
    orphan = kill_writer(table, local, "before_put")
    assert hidden_leftovers(table) == []
    assert_at_version_1(table, local, orphan)
    assert_next_commit_lands_at_2(table, local, orphan)


@pytest.mark.parametrize("stop", ["mid_temp_write", "before_link"])
def test_killed_while_writing_the_commit_file_local(tmp_path, local, stop):
    table = make_table(str(tmp_path / "t"), local)
    orphan = kill_writer(table, local, stop)
    # A real crash leaves the hidden temporary file of the commit behind; readers skip it.
    (leftover,) = hidden_leftovers(table)
    assert leftover.startswith(f".{commit_name(2)}.") and leftover.endswith(".tmp")
    with open(os.path.join(table.storage.log_dir, leftover), "rb") as file:
        leftover_bytes = file.read()
    assert leftover_bytes  # the commit content (or half of it) is in there
    if stop == "mid_temp_write":
        with pytest.raises(json.JSONDecodeError):
            [json.loads(line) for line in leftover_bytes.decode().splitlines()]
    else:
        assert any("txn" in json.loads(line) for line in leftover_bytes.decode().splitlines())
    assert_at_version_1(table, local, orphan)
    assert_next_commit_lands_at_2(table, local, orphan)
    assert len(hidden_leftovers(table)) == 1  # the new commit cleaned up its own temporary file


@pytest.mark.s3
def test_killed_after_writing_data_before_the_commit_s3(s3):
    table = make_table(f"s3://{s3['bucket']}/t", s3)
    orphan = kill_writer(table, s3, "before_put")
    assert_at_version_1(table, s3, orphan)
    assert_next_commit_lands_at_2(table, s3, orphan)


@pytest.mark.s3
def test_killed_during_the_upload_of_the_commit_s3(s3):
    table = make_table(f"s3://{s3['bucket']}/t", s3)
    orphan = kill_writer(table, s3, "mid_s3_upload")
    # S3 stores an object only once its whole body arrived: there is no partial commit to see.
    assert_at_version_1(table, s3, orphan)
    assert_next_commit_lands_at_2(table, s3, orphan)
