"""Any other fsspec filesystem: readable, but no commits without a safe put-if-absent."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import StorageError
from airflow_delta_provider.core.storage.base import FileInfo, LogStore, file_info

if TYPE_CHECKING:
    import fsspec


class FsspecStore(LogStore):
    """A table on a filesystem the core knows only through fsspec's generic interface."""

    def _build_filesystem(self) -> fsspec.AbstractFileSystem:
        import fsspec

        fs, _ = fsspec.core.url_to_fs(self.root_uri, **self.storage_options)
        return fs

    def list_from(self, directory: str, start: str = "") -> list[FileInfo]:
        try:
            entries = self.fs.ls(directory, detail=True, refresh=True)
        except FileNotFoundError:
            return []
        except TypeError:  # implementations without the refresh keyword
            entries = self.fs.ls(directory, detail=True)
        files = [file_info(e) for e in entries if e.get("type") != "directory"]
        return sorted((f for f in files if f.name >= start), key=lambda f: f.name)

    def put_if_absent(self, path: str, data: bytes) -> None:
        raise StorageError(
            f"Committing to {self.scheme}:// tables is not supported: the core has no atomic "
            f"put-if-absent for this storage, and writing without one can lose commits when two "
            f"writers race. Use a local path, s3://, abfss:// (az://), gs:// or memory://."
        )
