"""THE delete scheduler: how every store deletes many files.

One asynchronous loop for every store, called only by :meth:`LogStore.delete_many
<airflow_delta_provider.core.storage.base.LogStore.delete_many>`. A store supplies just "send one
batch of paths and say, per path, what happened" (:meth:`~BatchDeleter._send_delete_batch`); the
concurrency, progress, per-object outcomes and retries, the fallback from refused batch requests
to single deletes, stopping and the one :class:`~airflow_delta_provider.core.errors.DeleteFilesError`
are decided here, the same way for every store (docs/storage.md, "Deletes"). Which paths may be
deleted at all is decided before they get here (:class:`~airflow_delta_provider.core.storage.paths.TablePath`,
:func:`~airflow_delta_provider.core.maintenance.vacuum.plan.check_under_root`).
"""

from __future__ import annotations

import asyncio
import contextvars
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from airflow_delta_provider.core.errors import DeleteFilesError
from airflow_delta_provider.core.storage.progress import Progress
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine, Mapping, Sequence

log = get_logger(__name__)

T = TypeVar("T")

#: The answer for one object of a batch: deleted, or it did not exist (not counted).
DELETED = "deleted"
MISSING = "missing"
#: Single-object deletes in flight (retries of refused objects, or a store without batches).
SINGLE_CONCURRENCY = 32


class BatchRefused(Exception):
    """The service refused a batch request as a whole (unsupported here); the text says how."""


def refusal_status(status: int | None) -> bool:
    """Whether an HTTP status for a whole batch request means the service does not serve batches
    here (bad request, no such endpoint, method not allowed, a conflicting account feature, not
    implemented), rather than a passing or per-object failure."""
    return status in (400, 404, 405, 409, 501)


def describe(err: BaseException) -> str:
    """A refused object's reason: the error's type and first line (not an XML or JSON body)."""
    first_line = (str(err).strip().splitlines() or [""])[0]
    return f"{type(err).__name__}: {first_line}"


class BatchDeleter(Protocol):
    """What a store gives the scheduler (:class:`~.base.LogStore` has a default for each)."""

    #: Paths per batch request (the service's maximum; a thread's share for blocking stores).
    delete_batch_size: int
    #: Whether :meth:`_delete_one` exists (object stores: one ``DELETE`` per object).
    single_deletes: bool
    #: Why batch requests are not used (set when the service refused one), else None.
    batch_refused: str | None
    #: Who answers (``S3``, ``Azure Storage``, ...) and what to check when it refuses.
    store_name: str
    delete_advice: str

    @property
    def root_uri(self) -> str: ...

    @property
    def delete_requests(self) -> dict[str, int]: ...

    def to_uri(self, path: str) -> str: ...

    def _delete_concurrency(self, paths: Sequence[str]) -> int: ...

    def _delete_loop(self) -> asyncio.AbstractEventLoop | None: ...

    def _delete_groups(self, paths: list[str]) -> list[list[str]]: ...

    async def _send_delete_batch(self, paths: Sequence[str]) -> Mapping[str, str]: ...

    async def _delete_one(self, path: str) -> bool: ...


@dataclass
class _Run:
    """The state of one :func:`delete_paths` run (touched on the event loop thread only)."""

    store: BatchDeleter
    progress: Progress
    batches: asyncio.Semaphore
    singles: asyncio.Semaphore
    deleted: int = 0
    failed: list[tuple[str, str]] = field(default_factory=list)
    not_attempted: int = 0
    stopped: bool = False


class _Threads:
    """The threads of one run's blocking batches (made on first use, sized to the concurrency)."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.pool: ThreadPoolExecutor | None = None

    def get(self) -> ThreadPoolExecutor:
        if self.pool is None:
            self.pool = ThreadPoolExecutor(self.workers, thread_name_prefix="delta-delete")
        return self.pool


_THREADS: contextvars.ContextVar[_Threads | None] = contextvars.ContextVar("_THREADS", default=None)


async def run_blocking(function: Callable[..., T], *args: Any) -> T:
    """Run a blocking batch (local disk, a synchronous fsspec filesystem) in one of the run's
    threads, so that ``max_workers`` of them proceed at once."""
    threads = _THREADS.get()
    pool = threads.get() if threads is not None else None
    return await asyncio.get_running_loop().run_in_executor(pool, function, *args)


def delete_paths(store: BatchDeleter, paths: Sequence[str], max_workers: int | None = None) -> int:
    """Delete ``paths`` (see the module); returns how many were deleted (missing ones not counted).

    :raises DeleteFilesError: some objects could not be deleted (each named, with its reason);
        every other object of their batches was.
    """
    unique = list(dict.fromkeys(paths))
    if not unique:
        return 0
    workers = max(1, max_workers or store._delete_concurrency(unique))
    return _run_on(store._delete_loop(), _delete_all(store, unique, workers))


def _run_on(loop: asyncio.AbstractEventLoop | None, coroutine: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on ``loop`` (another thread's) and wait, an interrupted wait cancelling
    it; without a loop, on a new one in this thread (``asyncio.run`` cancels on Ctrl-C), or in a
    helper thread when this thread already runs one."""
    try:
        running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if loop is None:
        if running is None:
            return asyncio.run(coroutine)
        with ThreadPoolExecutor(1, thread_name_prefix="delta-delete") as helper:
            return helper.submit(asyncio.run, coroutine).result()
    if running is loop:
        coroutine.close()
        raise RuntimeError(
            "delete_many cannot wait on its own event loop's thread; call it from another thread."
        )
    future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()  # an interrupted caller: batches not yet sent are not sent
        raise


async def _delete_all(store: BatchDeleter, paths: list[str], workers: int) -> int:
    size = max(1, store.delete_batch_size)
    batches = [
        group[i : i + size] for group in store._delete_groups(paths) for i in range(0, len(group), size)
    ]
    run = _Run(
        store,
        Progress(store.root_uri, len(paths)),
        asyncio.Semaphore(workers),
        asyncio.Semaphore(SINGLE_CONCURRENCY),
    )
    threads = _Threads(workers)
    token = _THREADS.set(threads)
    try:
        tasks = [asyncio.ensure_future(_batch(run, batch)) for batch in batches]
    finally:
        _THREADS.reset(token)
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    finally:
        if threads.pool is not None:
            threads.pool.shutdown(wait=False, cancel_futures=True)
    run.progress.finish()
    if run.failed:
        raise _error(run, len(paths))
    return run.deleted


async def _batch(run: _Run, batch: list[str]) -> None:
    async with run.batches:
        if run.stopped:
            run.not_attempted += len(batch)
            return
        deleted, failed = await _send(run, batch)
    run.deleted += deleted
    run.failed.extend(failed)
    run.progress.advance(len(batch))
    if failed and len(failed) == len(batch) and not run.stopped:
        run.stopped = True
        log.warning(
            "%s could delete none of the %d file(s) of a batch of %s (e.g. %s: %s); "
            "no further batch is sent.",
            run.store.store_name,
            len(batch),
            run.store.root_uri,
            run.store.to_uri(failed[0][0]),
            failed[0][1],
        )


async def _send(run: _Run, batch: list[str]) -> tuple[int, list[tuple[str, str]]]:
    """One batch: its request, then the objects it did not delete alone (where the store can)."""
    store = run.store
    answers: Mapping[str, str] = {}
    if store.batch_refused is None or not store.single_deletes:
        try:
            store.delete_requests["batch"] += 1
            answers = await store._send_delete_batch(batch)
        except BatchRefused as err:
            _note_refused(store, str(err))
        except Exception as err:
            if not store.single_deletes:
                raise
            log.warning(
                "A batch delete request to %s failed (%s); deleting its %d object(s) one by one.",
                store.store_name,
                describe(err),
                len(batch),
            )
    if len(answers) == len(batch):  # the usual answer: every path deleted or missing
        outcomes = list(answers.values())
        deleted = outcomes.count(DELETED)
        if deleted + outcomes.count(MISSING) == len(batch):
            return deleted, []
    deleted = sum(1 for path in batch if answers.get(path) == DELETED)
    retry = [(path, answers.get(path, "")) for path in batch if answers.get(path) not in (DELETED, MISSING)]
    if not store.single_deletes:
        return deleted, [(path, reason or "no answer") for path, reason in retry]

    async def alone(path: str, reason: str) -> tuple[int, tuple[str, str] | None]:
        async with run.singles:
            store.delete_requests["single"] += 1
            try:
                return (1 if await store._delete_one(path) else 0), None
            except Exception as err:
                single = describe(err)
                return 0, (path, f"{reason}; alone: {single}" if reason else single)

    results = await asyncio.gather(*(alone(path, reason) for path, reason in retry))
    failed = [failure for _, failure in results if failure is not None]
    busy = any(reason.startswith(("429", "5")) for _, reason in retry)
    if answers and not busy and deleted == 0 and len(retry) == len(batch) and len(failed) < len(retry):
        # Every sub-request failed (not throttled), yet single deletes of the same objects
        # worked: the service does not serve batches here, whatever its per-object answer.
        _note_refused(store, f"every sub-request of a batch failed, e.g. {retry[0][1]}")
    return deleted + sum(count for count, _ in results), failed


def _note_refused(store: BatchDeleter, reason: str) -> None:
    if store.batch_refused is None:
        store.batch_refused = reason
        log.warning(
            "%s does not accept batch delete requests for %s (%s); deleting one object per "
            "request from now on.",
            store.store_name,
            store.root_uri,
            reason,
        )


def _error(run: _Run, total: int) -> DeleteFilesError:
    store = run.store
    path, reason = run.failed[0]
    skipped = (
        f"; {run.not_attempted} other file(s) were not attempted after a batch failed whole"
        if run.not_attempted
        else ""
    )
    return DeleteFilesError(
        f"{store.store_name} refused to delete {len(run.failed)} of {total} file(s) of {store.root_uri}, "
        f"e.g. {store.to_uri(path)} ({reason}){skipped}. {store.delete_advice}",
        failed=run.failed,
    )
