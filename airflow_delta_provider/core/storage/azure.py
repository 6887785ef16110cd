"""ADLS Gen2 and Azure Blob Storage (``abfs://``, ``abfss://``, ``az://``) through adlfs.

Put-if-absent is a blob upload with ``If-None-Match: *`` (adlfs's ``overwrite=False``): the
service answers 409 ``BlobAlreadyExists`` when the name is taken, in the same request that
would create it. Deletions go in Blob Batch requests (``POST ?restype=container&comp=batch``,
up to 256 ``Delete Blob`` sub-requests each; 202 deleted, 404 missing), scheduled by :mod:`.deletes`,
with single-blob DELETEs where the account refuses batches (Microsoft announced the API without
hierarchical-namespace support).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.storage.cloud import ConditionalObjectStore
from airflow_delta_provider.core.storage.deletes import DELETED, MISSING, BatchRefused, refusal_status
from airflow_delta_provider.core.storage.sdk_compat import azure_batch_request, azure_send

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import fsspec

    from airflow_delta_provider.core.storage.base import FileInfo


def is_azure_filesystem(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether ``fs`` is adlfs's blob filesystem (the store needs its service client)."""
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return bool({"abfs", "az"} & set(protocol)) and hasattr(fs, "service_client")


class AzureStore(ConditionalObjectStore):
    """A table in an Azure storage account's container (Blob or ADLS Gen2 endpoint)."""

    store_name = "Azure Storage"
    extra = "azure"
    #: Sub-requests per Blob Batch request (the service's maximum).
    delete_batch_size = 256

    def list_from(self, directory: str, start: str = "") -> list[FileInfo]:
        # adlfs's ls takes invalidate_cache=, not refresh= (which it ignores): without this, a
        # log listing cached before a commit (ours or another writer's) would not show it.
        self.fs.invalidate_cache(directory.rstrip("/"))
        return super().list_from(directory, start)

    def _create(self, path: str, data: bytes) -> None:
        # adlfs sends If-None-Match: * for overwrite=False and raises FileExistsError on 409.
        self.fs.pipe_file(path, data, overwrite=False)

    async def _delete_one(self, path: str) -> bool:
        from azure.core.exceptions import ResourceNotFoundError

        fs: Any = self.fs
        container, blob, _ = fs.split_path(path)
        async with fs.service_client.get_blob_client(container, blob) as client:
            try:
                await client.delete_blob()
            except ResourceNotFoundError:
                return False
        return True

    async def _send_delete_batch(self, paths: Sequence[str]) -> Mapping[str, str]:
        """One Blob Batch request through adlfs's async container client.

        ``ContainerClient.delete_blobs`` would send it, but the async client writes the multipart
        body with an unquoted ``===...==`` boundary that Azurite rejects (400 InvalidInput for the
        whole batch), so the request is built as the SDK does (same sub-requests, same signing
        policies) with a ``batch_<uuid>`` boundary, the form the SDK's sync client sends
        (:func:`~.sdk_compat.azure_batch_request`).
        """
        from azure.core.exceptions import HttpResponseError

        fs: Any = self.fs
        container = fs.split_path(paths[0])[0]
        blobs = [fs.split_path(path)[1] for path in paths]
        client = fs.service_client.get_container_client(container)
        try:
            request, options = azure_batch_request(client, blobs)
        except (ImportError, AttributeError, TypeError) as err:  # an azure-storage-blob we do not know
            raise BatchRefused(
                f"azure-storage-blob's batch internals changed: {type(err).__name__}: {err}"
            ) from err
        try:
            response = await azure_send(client, request, options)
        except HttpResponseError as err:
            if refusal_status(err.status_code):
                raise BatchRefused(
                    f"{err.status_code} {getattr(err, 'error_code', None) or err.reason}"
                ) from err
            raise
        if response.status_code != 202:
            if refusal_status(response.status_code):
                raise BatchRefused(
                    f"{response.status_code} {response.headers.get('x-ms-error-code') or response.reason}"
                )
            raise HttpResponseError(response=response)
        answers: dict[str, str] = {}
        parts = [part async for part in response.parts()]
        # One part per sub-request, in order; a path without one is retried alone.
        for path, part in zip(paths, parts, strict=False):
            if part.status_code == 202:
                answers[path] = DELETED
            elif part.status_code == 404:
                answers[path] = MISSING
            else:
                answers[path] = f"{part.status_code} {part.headers.get('x-ms-error-code') or part.reason}"
        return answers
