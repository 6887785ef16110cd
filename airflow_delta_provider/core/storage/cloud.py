"""Object stores reached through fsspec whose own precondition gives an atomic put-if-absent.

One base for Azure (:mod:`.azure`) and GCS (:mod:`.gcs`): keys are flat (a "directory" is a
prefix), the tree listing runs in parallel over prefixes (:meth:`LogStore.list_tree`), a
commit is one create-only upload whose lost precondition is a
:class:`~airflow_delta_provider.core.errors.CommitFileExistsError`, and deletions are the
service's batch requests (:meth:`~ConditionalObjectStore._send_delete_batch`: Azure Blob Batch,
GCS JSON batch), scheduled by :mod:`.deletes`, with one ``DELETE`` per object where the service
refuses batches. Never list-then-write.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import CommitFileExistsError, StorageError
from airflow_delta_provider.core.storage.generic import FsspecStore

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Mapping, Sequence

    import fsspec

    from airflow_delta_provider.core.storage.base import TreeListing


#: Batch delete requests in flight (Blob Batch of 256, GCS batch of 100 objects each).
DELETE_CONCURRENCY = 32


class ConditionalObjectStore(FsspecStore):
    """An object store with a create-only upload (the store checks the precondition)."""

    prefix_directories = True
    #: The store's name and the provider extra that installs its fsspec filesystem.
    store_name = ""
    extra = ""

    def _build_filesystem(self) -> fsspec.AbstractFileSystem:
        try:
            return super()._build_filesystem()
        except ImportError as err:
            raise StorageError(
                f"Reading {self.scheme}:// tables needs {err.name or 'its fsspec filesystem'}: "
                f"pip install 'airflow-delta-provider[{self.extra}]'."
            ) from err

    def put_if_absent(self, path: str, data: bytes) -> None:
        try:
            self._create(path, data)
        except FileExistsError:
            raise CommitFileExistsError(f"{self.to_uri(path)} already exists.") from None
        finally:
            self.fs.invalidate_cache(path)

    @abstractmethod
    def _create(self, path: str, data: bytes) -> None:
        """Upload ``path`` only if it does not exist, checked by the store in the same request.

        :raises FileExistsError: the precondition failed (the object exists).
        """

    def read_bytes(self, path: str) -> bytes:
        self.fs.invalidate_cache(path)
        return super().read_bytes(path)

    def list_tree(self, hidden: Callable[[str], bool], skip: Container[str] = frozenset()) -> TreeListing:
        self.fs.invalidate_cache()  # a listing cached before other writers' uploads would miss them
        return super().list_tree(hidden, skip)

    def info(self, path: str) -> Any:
        self.fs.invalidate_cache(path)
        return super().info(path)

    def _remove_directory(self, directory: str) -> None:
        """Key prefixes vanish with their last object; there is nothing to remove."""

    # --- deletes: batch requests (:mod:`.deletes` schedules them), one DELETE as the fallback ---

    single_deletes = True
    delete_advice = "Check that the credentials may delete objects and run again."

    def _delete_concurrency(self, paths: Sequence[str]) -> int:
        return DELETE_CONCURRENCY

    @abstractmethod
    async def _send_delete_batch(self, paths: Sequence[str]) -> Mapping[str, str]:
        """Delete ``paths`` (one container or bucket, at most :attr:`delete_batch_size`) in one
        batch request.

        :returns: per path :data:`~.deletes.DELETED`, :data:`~.deletes.MISSING` or the service's
            reason for refusing it; a path without an answer is retried alone.
        :raises BatchRefused: the service does not accept the batch request (nothing was deleted).
        """

    @abstractmethod
    async def _delete_one(self, path: str) -> bool:
        """Delete one object; False when it did not exist."""
