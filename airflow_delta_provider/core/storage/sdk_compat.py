"""The private APIs of the storage SDKs that the stores rely on, in one place.

Each does what no public API of its SDK does; ``tests/unit/core/storage/test_sdk_compat.py`` pins,
against the services' emulators, the behaviour relied on, so that an SDK release that changes
one fails there, naming it:

- s3fs ``S3FileSystem._call_s3``: a botocore call with s3fs's session, credentials, retries and
  its translation of ``ClientError`` into ``OSError`` (the bare client ``fs.s3`` has none of it);
- gcsfs ``GCSFileSystem._call``: an authenticated request to any JSON API URL (the batch
  endpoint), and ``_rm_file``, fsspec's coroutine behind ``rm_file`` (the stores delete from
  inside the filesystem's event loop, where the blocking form would deadlock);
- azure-storage-blob: the Blob Batch request exactly as ``ContainerClient.delete_blobs`` builds
  it, but with a ``batch_<uuid>`` boundary (the async client's unquoted ``===...==`` one is
  refused by Azurite), sent through the client's own pipeline.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["azure_batch_request", "azure_send", "gcs_call", "gcs_remove", "s3_call"]


async def s3_call(fs: Any, method: str, **kwargs: Any) -> Any:
    """``method`` of the S3 API through s3fs (a ``ClientError`` arrives as ``OSError``, its
    response on ``__cause__``)."""
    return await fs._call_s3(method, **kwargs)


async def gcs_call(fs: Any, method: str, url: str, **kwargs: Any) -> tuple[Any, bytes]:
    """``(headers, body)`` of an authenticated request to ``url`` through gcsfs (errors as gcsfs
    raises them: ``FileNotFoundError`` for 404, ``ValueError`` for 400, ``HttpError`` else)."""
    headers, content = await fs._call(method, url, **kwargs)
    return headers, content


async def gcs_remove(fs: Any, path: str) -> None:
    """Delete one object (``FileNotFoundError`` when there is none)."""
    await fs._rm_file(path)


def azure_batch_request(client: Any, blobs: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """The Blob Batch request ``ContainerClient.delete_blobs`` sends for ``blobs``, with a
    ``batch_<uuid>`` boundary, and the options to send it with (see :func:`azure_send`)."""
    from azure.storage.blob._container_client_helpers import _generate_delete_blobs_options
    from azure.storage.blob._shared.policies import StorageHeadersPolicy

    kwargs: dict[str, Any] = {"url_prepend": client.account_name} if client._is_localhost else {}
    requests, options = _generate_delete_blobs_options(
        client._query_str, client.container_name, client._client, *blobs, **kwargs
    )
    options.pop("raise_on_any_failure", None)
    url = (
        f"{client.scheme}://{client.primary_hostname}/{options.pop('path', '')}?"
        f"{options.pop('restype', '')}comp=batch{options.pop('sas', '')}{options.pop('timeout', '')}"
    )
    request = client._client._client.post(url=url, headers={"x-ms-version": client.api_version})
    policies: list[Any] = [StorageHeadersPolicy()]
    if client._credential_policy:
        policies.append(client._credential_policy)
    request.set_multipart_mixed(
        *requests, policies=policies, enforce_https=False, boundary=f"batch_{uuid.uuid4()}"
    )
    return request, options


async def azure_send(client: Any, request: Any, options: dict[str, Any]) -> Any:
    """Send a request built by :func:`azure_batch_request` through ``client``'s pipeline (its
    signing and retry policies); the HTTP response."""
    return (await client._pipeline.run(request, **options)).http_response
