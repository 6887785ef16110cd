"""ADLS Gen2 and Azure Blob Storage (``abfs://``, ``abfss://``, ``az://``) through adlfs.

Put-if-absent is a blob upload with ``If-None-Match: *`` (adlfs's ``overwrite=False``): the
service answers 409 ``BlobAlreadyExists`` when the name is taken, in the same request that
would create it. Deletions are bounded concurrent single-blob DELETEs (Azurite
rejects Blob Batch requests, so those could not be proven here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.storage.cloud import ConditionalObjectStore

if TYPE_CHECKING:
    import fsspec


def is_azure_filesystem(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether ``fs`` is adlfs's blob filesystem (the store needs its service client)."""
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return bool({"abfs", "az"} & set(protocol)) and hasattr(fs, "service_client")


class AzureStore(ConditionalObjectStore):
    """A table in an Azure storage account's container (Blob or ADLS Gen2 endpoint)."""

    store_name = "Azure Storage"
    extra = "azure"

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
