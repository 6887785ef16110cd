"""Storage: where a table lives and how its files are read, listed, written and deleted.

:class:`TablePath` (:mod:`.paths`) parses a location and owns normalisation and root
confinement; :func:`open_store` maps the storage options (delta-rs / object_store keys or
fsspec's, :mod:`.options`) and picks one :class:`LogStore` per scheme family, each with a real
put-if-absent (local hard links, S3 ``If-None-Match: *``, Azure, GCS generations); any other
fsspec scheme is readable and refuses commits. Many deletes go through one scheduler
(:mod:`.deletes`). Nothing here imports pyarrow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.storage.azure import AzureStore, is_azure_filesystem
from airflow_delta_provider.core.storage.base import FileInfo, LogStore, TreeListing
from airflow_delta_provider.core.storage.gcs import GcsStore, is_gcs_filesystem
from airflow_delta_provider.core.storage.generic import FsspecStore
from airflow_delta_provider.core.storage.local import LocalStore
from airflow_delta_provider.core.storage.memory import MemoryStore
from airflow_delta_provider.core.storage.options import fsspec_options
from airflow_delta_provider.core.storage.paths import LOG_DIR, TablePath, escapes_root, has_scheme
from airflow_delta_provider.core.storage.s3 import S3Store, is_s3_filesystem
from airflow_delta_provider.core.utils.redaction import register_secrets_in

if TYPE_CHECKING:
    from collections.abc import Mapping

    import fsspec

__all__ = [
    "LOG_DIR",
    "AzureStore",
    "FileInfo",
    "FsspecStore",
    "GcsStore",
    "LocalStore",
    "LogStore",
    "MemoryStore",
    "S3Store",
    "TablePath",
    "TreeListing",
    "escapes_root",
    "fsspec_options",
    "has_scheme",
    "open_store",
]


#: Schemes of the Azure (adlfs) and GCS (gcsfs) stores.
AZURE_SCHEMES = frozenset({"abfs", "abfss", "az"})
GCS_SCHEMES = frozenset({"gs", "gcs"})


def open_store(
    location: str | TablePath,
    storage_options: Mapping[str, Any] | None = None,
    *,
    filesystem: fsspec.AbstractFileSystem | None = None,
) -> LogStore:
    """The store of a table (no I/O yet).

    :param location: the table root: a local path, ``file://``, ``s3://``, ``memory://`` or any
        other fsspec URL; or an already parsed :class:`TablePath`.
    :param storage_options: credentials, endpoint, region ... as delta-rs / object_store keys or
        as the fsspec filesystem's own options (see :mod:`.options`).
    :param filesystem: an already configured fsspec filesystem (the Airflow hook passes one built
        from a connection); ``storage_options`` are then not used.
    :raises InvalidPathError: the location is malformed or carries credentials.
    :raises StorageError: an unknown storage option.
    """
    path = location if isinstance(location, TablePath) else TablePath.parse(location)
    register_secrets_in(storage_options)
    if filesystem is not None:
        return _store_for_filesystem(path, filesystem)
    options = fsspec_options(path.scheme, storage_options)
    if path.scheme == "file":
        return LocalStore(path, options)
    if path.scheme == "s3":
        return S3Store(path, options)
    if path.scheme == "memory":
        return MemoryStore(path, options)
    if path.scheme in AZURE_SCHEMES:
        return AzureStore(path, options)
    if path.scheme in GCS_SCHEMES:
        return GcsStore(path, options)
    return FsspecStore(path, options)


def _store_for_filesystem(path: TablePath, filesystem: fsspec.AbstractFileSystem) -> LogStore:
    from fsspec.implementations.local import LocalFileSystem
    from fsspec.implementations.memory import MemoryFileSystem

    if path.scheme == "file" and isinstance(filesystem, LocalFileSystem):
        return LocalStore(path, filesystem=filesystem)
    if is_s3_filesystem(filesystem):
        return S3Store(path, filesystem=filesystem)
    if is_azure_filesystem(filesystem):
        return AzureStore(path, filesystem=filesystem)
    if is_gcs_filesystem(filesystem):
        return GcsStore(path, filesystem=filesystem)
    if isinstance(filesystem, MemoryFileSystem):
        return MemoryStore(path, filesystem=filesystem)
    return FsspecStore(path, filesystem=filesystem)
