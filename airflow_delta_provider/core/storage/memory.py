"""fsspec's in-memory filesystem, for tests: a check-and-set under a lock as put-if-absent."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import CommitFileExistsError
from airflow_delta_provider.core.storage.generic import FsspecStore

if TYPE_CHECKING:
    import fsspec

_memory_lock = threading.Lock()


class MemoryStore(FsspecStore):
    """A table in fsspec's process-wide ``memory://`` filesystem."""

    def _build_filesystem(self) -> fsspec.AbstractFileSystem:
        import fsspec

        return fsspec.filesystem("memory")

    def put_if_absent(self, path: str, data: bytes) -> None:
        with _memory_lock:
            if self.fs.exists(path):
                raise CommitFileExistsError(f"{self.to_uri(path)} already exists.")
            self.fs.pipe_file(path, data)
