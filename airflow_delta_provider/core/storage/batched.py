"""Batch deletes for the object stores with a multipart batch API (Azure Blob Batch, GCS JSON batch).

:meth:`~airflow_delta_provider.core.storage.base.LogStore.delete_many` hands a store groups of
:data:`~.base.DELETE_BATCH` paths (already confined to the table root). A
:class:`BatchDeletingStore` sends each group as batch requests of :attr:`~BatchDeletingStore.batch_size`
objects (the service's maximum), :data:`BATCH_CONCURRENCY` at a time, and reads the service's
answer for every object: deleted, missing (counts as already deleted, not in the total) or
refused. An object the batch refused is retried once with a single ``DELETE``; only if that fails
too is it reported, by name, in a :class:`~airflow_delta_provider.core.errors.DeleteFilesError`.

When the service refuses batch requests themselves (an account without Blob Batch, such as
hierarchical-namespace ADLS Gen2 accounts in Microsoft's announcement of the API, a proxy or
emulator that does not route the batch endpoint), or fails every sub-request of a batch while
single deletes of the same objects succeed, the store says so in a warning and deletes one object
per request from then on (:data:`~.cloud.DELETE_CONCURRENCY` at a time). Nothing is skipped:
every object ends deleted, missing, or named in the error.
"""

from __future__ import annotations

import asyncio
from abc import abstractmethod
from functools import cached_property
from typing import TYPE_CHECKING

from airflow_delta_provider.core.redaction import get_logger
from airflow_delta_provider.core.storage.cloud import DELETE_CONCURRENCY, ConditionalObjectStore

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

log = get_logger(__name__)

#: Batch requests in flight per group of :data:`~.base.DELETE_BATCH` objects (``delete_many``
#: runs up to 8 groups at a time, so at most 32 batch requests per store).
BATCH_CONCURRENCY = 4

#: The service's answer for one object of a batch: deleted, or it did not exist.
DELETED = "deleted"
MISSING = "missing"


class BatchRefused(Exception):
    """The service refused a batch request as a whole (unsupported here); the text says how."""


class BatchDeletingStore(ConditionalObjectStore):
    """A :class:`~.cloud.ConditionalObjectStore` whose deletions go in batch requests."""

    #: Objects per batch request (the service's maximum).
    batch_size = 100

    #: Why batch requests are not used (set when the service refused one), else None.
    batch_refused: str | None = None

    @cached_property
    def delete_requests(self) -> dict[str, int]:
        """Delete requests sent so far: ``{"batch": n, "single": n}`` (for figures and tests;
        counted on the filesystem's event loop thread, so without a lock)."""
        return {"batch": 0, "single": 0}

    @abstractmethod
    async def _send_batch(self, paths: Sequence[str]) -> Mapping[str, str]:
        """Delete ``paths`` (one container or bucket, at most :attr:`batch_size`) in one batch request.

        :returns: per path :data:`DELETED`, :data:`MISSING` or the service's reason for refusing
            it; a path without an answer is retried alone.
        :raises BatchRefused: the service does not accept the batch request (nothing was deleted).
        """

    def _count(self, kind: str) -> None:
        self.delete_requests[kind] += 1

    def _delete_objects(self, batch: Sequence[str]) -> int:
        deleted, failed = self._call_async(self._delete_in_batches, batch)
        if failed:
            raise self._refused(failed, len(batch))
        return int(deleted)

    async def _delete_in_batches(self, paths: Sequence[str]) -> tuple[int, list[tuple[str, str]]]:
        by_bucket: dict[str, list[str]] = {}
        for path in dict.fromkeys(paths):  # a path listed twice is deleted (and counted) once
            by_bucket.setdefault(path.partition("/")[0], []).append(path)
        chunks = [
            keys[i : i + self.batch_size]
            for keys in by_bucket.values()
            for i in range(0, len(keys), self.batch_size)
        ]
        batches = asyncio.Semaphore(BATCH_CONCURRENCY)
        singles = asyncio.Semaphore(DELETE_CONCURRENCY)
        outcomes = await asyncio.gather(*(self._delete_chunk(chunk, batches, singles) for chunk in chunks))
        failed = [item for _, chunk_failed in outcomes for item in chunk_failed]
        return sum(deleted for deleted, _ in outcomes), failed

    async def _delete_chunk(
        self, chunk: Sequence[str], batches: asyncio.Semaphore, singles: asyncio.Semaphore
    ) -> tuple[int, list[tuple[str, str]]]:
        answers: Mapping[str, str]
        async with batches:
            if self.batch_refused is not None:
                answers = {}
            else:
                try:
                    self._count("batch")
                    answers = await self._send_batch(chunk)
                except BatchRefused as err:
                    self._note_refused(str(err))
                    answers = {}
                except Exception as err:  # a lost connection: each object is tried alone
                    log.warning(
                        "A batch delete request to %s failed (%s: %s); deleting its %d object(s) one by one.",
                        self.store_name,
                        type(err).__name__,
                        err,
                        len(chunk),
                    )
                    answers = {}
        deleted = sum(1 for path in chunk if answers.get(path) == DELETED)
        retry = [
            (path, answers.get(path, "")) for path in chunk if answers.get(path) not in (DELETED, MISSING)
        ]
        if not retry:
            return deleted, []

        async def alone(path: str, reason: str) -> tuple[int, tuple[str, str] | None]:
            async with singles:
                self._count("single")
                try:
                    return (1 if await self._delete_one(path) else 0), None
                except Exception as err:
                    first_line = (str(err).strip().splitlines() or [""])[0]  # not the XML/JSON body
                    single = f"{type(err).__name__}: {first_line}"
                    return 0, (path, f"{reason}; alone: {single}" if reason else single)

        results = await asyncio.gather(*(alone(path, reason) for path, reason in retry))
        failed = [failure for _, failure in results if failure is not None]
        busy = any(reason.startswith(("429", "5")) for _, reason in retry)
        if answers and not busy and deleted == 0 and len(retry) == len(chunk) and len(failed) < len(retry):
            # Every sub-request failed (not throttled), yet single deletes of the same objects
            # worked: the service does not serve batches here, whatever its per-object answer.
            self._note_refused(f"every sub-request of a batch failed, e.g. {retry[0][1]}")
        return deleted + sum(count for count, _ in results), failed

    def _note_refused(self, reason: str) -> None:
        if self.batch_refused is None:
            self.batch_refused = reason
            log.warning(
                "%s does not accept batch delete requests for %s (%s); deleting one object per "
                "request from now on.",
                self.store_name,
                self.root_uri,
                reason,
            )


def refusal_status(status: int | None) -> bool:
    """Whether an HTTP status for a whole batch request means the service does not serve batches
    here (bad request, no such endpoint, method not allowed, a conflicting account feature, not
    implemented), rather than a passing or per-object failure."""
    return status in (400, 404, 405, 409, 501)
