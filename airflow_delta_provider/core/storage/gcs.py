"""Google Cloud Storage (``gs://``, ``gcs://``) through gcsfs.

Put-if-absent is an upload with ``ifGenerationMatch=0`` (gcsfs's ``mode="create"``): the
service answers 412 when the name exists, in the same request that would create it.
Deletions are bounded concurrent single-object DELETEs (fake-gcs-server rejects JSON API
batch requests, so those could not be proven here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.storage.cloud import ConditionalObjectStore

if TYPE_CHECKING:
    import fsspec


def is_gcs_filesystem(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether ``fs`` is gcsfs (the store needs its create-only upload)."""
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "gs" in protocol and hasattr(fs, "_rm_files")


class GcsStore(ConditionalObjectStore):
    """A table in a GCS bucket."""

    store_name = "GCS"
    extra = "gcs"

    def _create(self, path: str, data: bytes) -> None:
        # gcsfs adds ifGenerationMatch=0 for mode="create" and raises FileExistsError on 412.
        self.fs.pipe_file(path, data, mode="create")

    async def _delete_one(self, path: str) -> bool:
        fs: Any = self.fs
        try:
            await fs._rm_file(path)
        except FileNotFoundError:
            return False
        return True
