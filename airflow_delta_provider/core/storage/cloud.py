"""Object stores reached through fsspec whose own precondition gives an atomic put-if-absent.

One base for Azure (:mod:`.azure`) and GCS (:mod:`.gcs`): keys are flat (a "directory" is a
prefix), the tree listing runs in parallel over prefixes (:meth:`LogStore.list_tree`), a
commit is one create-only upload whose lost precondition is a
:class:`~airflow_delta_provider.core.errors.CommitFileExistsError`, and deletions go in the
bounded concurrent requests. Never list-then-write.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import CommitFileExistsError, DeleteFilesError, StorageError
from airflow_delta_provider.core.storage.generic import FsspecStore

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Container, Sequence

    import fsspec

    from airflow_delta_provider.core.storage.base import TreeListing


#: Concurrent DELETE requests per batch of :data:`~.base.DELETE_BATCH` objects.
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

    def _call_async(self, function: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Run a coroutine function on the async filesystem's event loop."""
        from fsspec.asyn import sync

        fs: Any = self.fs
        return sync(fs.loop, function, *args)

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

    def _refused(self, failed: list[tuple[str, str]], count: int) -> DeleteFilesError:
        return DeleteFilesError(
            f"{self.store_name} refused to delete {len(failed)} of {count} file(s) of {self.root_uri}, "
            f"e.g. {self.to_uri(failed[0][0])} ({failed[0][1]}). Check that the credentials may delete "
            f"objects and run again.",
            failed=failed,
        )

    def _remove_directory(self, directory: str) -> None:
        """Key prefixes vanish with their last object; there is nothing to remove."""

    def _delete_batch(self, batch: Sequence[str]) -> int:
        deleted = self._delete_objects(batch)
        self.fs.invalidate_cache()
        return deleted

    def _delete_objects(self, batch: Sequence[str]) -> int:
        """Delete up to :data:`~.base.DELETE_BATCH` objects, :data:`DELETE_CONCURRENCY` single-object
        DELETEs at a time. Azure and GCS override this with batch requests (:mod:`.batched`),
        tested on Azurite and fake-gcs-server."""
        return int(self._call_async(self._delete_concurrently, batch))

    async def _delete_concurrently(self, batch: Sequence[str]) -> int:
        limit = asyncio.Semaphore(DELETE_CONCURRENCY)
        failed: list[tuple[str, str]] = []

        async def delete(path: str) -> int:
            async with limit:
                try:
                    return 1 if await self._delete_one(path) else 0
                except Exception as err:
                    failed.append((path, f"{type(err).__name__}: {err}"))
                    return 0

        deleted = sum(await asyncio.gather(*(delete(path) for path in batch)))
        if failed:
            raise self._refused(failed, len(batch))
        return deleted

    @abstractmethod
    async def _delete_one(self, path: str) -> bool:
        """Delete one object; False when it did not exist."""
