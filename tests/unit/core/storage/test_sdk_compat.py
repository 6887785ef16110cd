"""What the stores take from their SDKs' private APIs (``core/storage/sdk_compat.py``), pinned
against the services' emulators: an SDK release that changes one fails here, naming it."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from fsspec.asyn import sync

from airflow_delta_provider.core.storage import open_store
from airflow_delta_provider.core.storage.sdk_compat import (
    azure_batch_request,
    azure_send,
    gcs_call,
    gcs_remove,
    s3_call,
)


@pytest.mark.s3
def test_s3_call_answers_as_botocore_and_raises_client_errors_as_os_errors(s3_bucket, s3_storage_options):
    fs: Any = open_store(f"s3://{s3_bucket}/t", s3_storage_options).fs
    fs.pipe(f"{s3_bucket}/t/a", b"x")
    page = sync(fs.loop, s3_call, fs, "list_objects_v2", Bucket=s3_bucket, Prefix="t/")
    assert [o["Key"] for o in page["Contents"]] == ["t/a"]
    with pytest.raises(OSError) as raised:  # what the batched delete reads a refusal from
        sync(
            fs.loop,
            s3_call,
            fs,
            "delete_objects",
            Bucket=f"missing-{uuid.uuid4().hex[:8]}",
            Delete={"Objects": [{"Key": "a"}], "Quiet": True},
        )
    assert raised.value.__cause__.response["Error"]["Code"] == "NoSuchBucket"


def test_gcs_call_sends_an_authenticated_batch_and_gcs_remove_names_a_missing_object(
    gcs_bucket, gcs_storage_options
):
    fs: Any = open_store(f"gs://{gcs_bucket}/t", gcs_storage_options).fs
    fs.pipe(f"{gcs_bucket}/t/a", b"x")
    boundary = f"batch_{uuid.uuid4().hex}"
    body = (
        f"--{boundary}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n"
        f"Content-ID: <0>\r\n\r\nDELETE /storage/v1/b/{gcs_bucket}/o/t%2Fa HTTP/1.1\r\n"
        f"Content-Length: 0\r\n\r\n\r\n"
        f"--{boundary}--\r\n"
    )
    headers, content = sync(
        fs.loop,
        gcs_call,
        fs,
        "POST",
        fs.batch_url_base,
        headers={"Content-Type": f"multipart/mixed; boundary={boundary}"},
        data=body.encode(),
    )
    assert headers.get("Content-Type", "").startswith("multipart/mixed")
    assert re.search(r"HTTP/1\.1 20[04]", content.decode())
    fs.invalidate_cache()
    assert not fs.exists(f"{gcs_bucket}/t/a")
    with pytest.raises(FileNotFoundError):
        sync(fs.loop, gcs_remove, fs, f"{gcs_bucket}/t/a")


def test_azure_batch_request_is_what_azurite_accepts(azure_container, azure_storage_options):
    """The SDK's own async ``delete_blobs`` body is refused by Azurite (see test_storage_batched):
    the request built here is the same but for its boundary, and goes through the client's pipeline."""
    fs: Any = open_store(f"az://{azure_container}/t", azure_storage_options).fs
    fs.pipe(f"{azure_container}/t/a", b"x")

    async def send() -> tuple[int, list[int]]:
        client = fs.service_client.get_container_client(azure_container)
        request, options = azure_batch_request(client, ["t/a", "t/never-existed"])
        response = await azure_send(client, request, options)
        return response.status_code, [part.status_code async for part in response.parts()]

    assert sync(fs.loop, send) == (202, [202, 404])
    fs.invalidate_cache()
    assert not fs.exists(f"{azure_container}/t/a")
