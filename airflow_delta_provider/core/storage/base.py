"""The LogStore interface: what the core needs from a storage system, and nothing more.

One implementation per scheme family (:mod:`.local`, :mod:`.s3`, :mod:`.memory`,
:mod:`.generic`); :func:`~airflow_delta_provider.core.storage.open_store` picks one. Paths
given to and returned by a store are its filesystem paths (no scheme for local and S3);
:class:`~airflow_delta_provider.core.storage.paths.TablePath` converts them.
"""

from __future__ import annotations

import errno
import itertools
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.storage.deletes import DELETED, MISSING, delete_paths, describe, run_blocking
from airflow_delta_provider.core.storage.progress import Progress
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence

    import fsspec
    import pyarrow as pa
    import pyarrow.fs as pafs

    from airflow_delta_provider.core.storage.paths import TablePath

log = get_logger(__name__)

#: Objects per delete request (the S3 ``DeleteObjects`` maximum) and per local work item.
DELETE_BATCH = 1000
#: Concurrent listing requests of an object store's tree (one prefix each).
LIST_WORKERS = 8
#: Levels of "directories" an object store's tree listing descends with delimiter listings to
#: find prefixes to list in parallel (partition directories: ``p=a/``, ``p=a/q=b/``).
LIST_EXPAND_DEPTH = 3


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One listed object.

    :param path: the filesystem path (the store's form, no scheme for local and S3).
    :param size: size in bytes.
    :param modification_time: last modification, milliseconds since the epoch (UTC).
    """

    path: str
    size: int
    modification_time: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]

    @property
    def is_link(self) -> bool:
        """Whether the listing found a symbolic link here (only local walks tell; see ``LocalStore.walk``)."""
        return False


@dataclass
class TreeListing:
    """The visible content of a directory tree, for VACUUM.

    :param files: ``(relative path, size, modification ms)``; files the caller asked to
        ``skip`` may be left out (they need no size or age).
    :param directories: relative paths of the visible directories.
    :param empty_directories: those with nothing at all (not even hidden entries) below them.
    """

    files: list[tuple[str, int, int]] = field(default_factory=list)
    directories: list[str] = field(default_factory=list)
    empty_directories: list[str] = field(default_factory=list)


class LogStore(ABC):
    """The storage of one table: reads, listings, atomic commits and deletions.

    :param path: the table root.
    :param storage_options: the options the filesystem was built from (for stores that build
        one lazily).
    :param filesystem: an already configured fsspec filesystem, else one is built on first use.
    """

    #: Whether "directories" are key prefixes that vanish with their last object.
    prefix_directories = False

    def __init__(
        self,
        path: TablePath,
        storage_options: Mapping[str, Any] | None = None,
        *,
        filesystem: fsspec.AbstractFileSystem | None = None,
    ) -> None:
        self.path = path
        self.storage_options = dict(storage_options or {})
        self._filesystem = filesystem

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.path.uri!r})"

    # --- identity (the TablePath's, for brevity at call sites) -------------------------------

    @property
    def scheme(self) -> str:
        return self.path.scheme

    @property
    def root(self) -> str:
        return self.path.root

    @property
    def root_uri(self) -> str:
        return self.path.uri

    @property
    def log_dir(self) -> str:
        return self.path.log_dir

    def log_path(self, name: str) -> str:
        return self.path.log_path(name)

    def join(self, *relative: str) -> str:
        return self.path.join(*relative)

    def to_uri(self, path: str) -> str:
        return self.path.to_uri(path)

    @property
    def is_local(self) -> bool:
        """Whether paths are local paths that ``open()`` and pyarrow's local filesystem read."""
        return False

    # --- filesystems -----------------------------------------------------------------------

    @cached_property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem (built on first use)."""
        if self._filesystem is not None:
            return self._filesystem
        return self._build_filesystem()

    @abstractmethod
    def _build_filesystem(self) -> fsspec.AbstractFileSystem: ...

    @cached_property
    def arrow_fs(self) -> pafs.FileSystem:
        """A pyarrow filesystem over the same storage, for Parquet reads."""
        import pyarrow.fs as pafs

        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    def open_input(self, path: str) -> str | pa.NativeFile:
        """What pyarrow's Parquet reader should open for ``path`` (a local path or a file)."""
        return self.arrow_fs.open_input_file(path)

    # --- reads ----------------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a file; ``FileNotFoundError`` when it does not exist."""
        return bytes(self.fs.cat_file(path))

    def read_range(self, path: str, start: int, length: int) -> bytes:
        return bytes(self.fs.cat_file(path, start=start, end=start + length))

    def read_joined(self, paths: Sequence[str], *, max_workers: int = 16) -> tuple[bytearray, list[int]]:
        """The contents of many files in one text, one newline between two, and where each starts
        (``starts[i]`` to ``starts[i + 1] - 1`` is file ``i``); ``FileNotFoundError`` naming the
        first missing one (``filename``). Remote stores read at most ``max_workers`` at a time."""

        def read(path: str) -> bytes:
            try:
                return self.read_bytes(path)
            except FileNotFoundError as err:
                if err.filename == path:
                    raise
                raise FileNotFoundError(errno.ENOENT, f"No such file: {path}", path) from err

        if max_workers <= 1 or len(paths) < 8:
            contents = [read(path) for path in paths]
        else:
            with ThreadPoolExecutor(min(max_workers, len(paths)), thread_name_prefix="delta-read") as pool:
                contents = list(pool.map(read, paths))
        starts = list(itertools.accumulate((len(data) + 1 for data in contents), initial=0))
        return bytearray(b"\n").join(contents), starts

    def read_ranges(
        self, paths: Sequence[str], starts: Sequence[int], lengths: Sequence[int], *, max_workers: int
    ) -> list[bytes | Exception]:
        """One byte range of each of many files, at most ``max_workers`` requests at a time.

        Asynchronous filesystems (S3, Azure, GCS) send the requests from their event loop, the
        others use threads. A range that cannot be read gives its exception in its place, so the
        caller can name the file.
        """
        if not self.is_local and getattr(self.fs, "async_impl", False):
            ends = [start + length for start, length in zip(starts, lengths, strict=True)]
            found = self.fs.cat_ranges(
                list(paths), list(starts), ends, batch_size=max_workers, on_error="return"
            )
            return [bytes(b) if isinstance(b, bytes | bytearray | memoryview) else b for b in found]

        def read(path: str, start: int, length: int) -> bytes | Exception:
            try:
                return self.read_range(path, start, length)
            except Exception as err:  # handed back: the caller names the file
                return err

        if max_workers <= 1 or len(paths) <= 1:
            return [read(*job) for job in zip(paths, starts, lengths, strict=True)]
        with ThreadPoolExecutor(min(max_workers, len(paths)), thread_name_prefix="delta-read") as pool:
            return list(pool.map(read, paths, starts, lengths))

    def exists(self, path: str) -> bool:
        return self.info(path) is not None

    def info(self, path: str) -> FileInfo | None:
        """Size and modification time of one file, or None when it does not exist."""
        try:
            return file_info(self.fs.info(path))
        except FileNotFoundError:
            return None

    @abstractmethod
    def list_from(self, directory: str, start: str = "") -> list[FileInfo]:
        """Files directly in ``directory`` whose name is ``>= start``, sorted by name.

        Subdirectories are not returned. A missing directory lists as empty.

        :param directory: filesystem path of the directory.
        :param start: the first name of interest (e.g. a zero-padded version).
        """

    def list_log(self, start: str = "", *, stat: bool = True) -> list[FileInfo]:
        """``_delta_log`` entries from a name on (see :meth:`list_from`).

        :param stat: False when the caller needs the size and time of only a few entries (the
            log segment: of its checkpoint and checksum files). A store whose listing does not
            give them for free (a local directory: one ``stat`` per file) may then read each on
            first access; a file gone by then reads as empty and modified at 0.
        """
        return self.list_from(self.log_dir, start)

    def walk(self, directory: str | None = None) -> Iterator[FileInfo]:
        """Every file under a directory (default: the table root), recursively; links to directories
        are not followed."""
        try:
            entries = self.fs.find(directory or self.root, detail=True)
        except FileNotFoundError:
            return
        for entry in entries.values():
            if entry.get("type") != "directory":
                yield file_info(entry)

    def list_tree(self, hidden: Callable[[str], bool], skip: Container[str] = frozenset()) -> TreeListing:
        """The table root, recursively, without hidden names (at every level) and what they hold.

        On object stores (``prefix_directories``) the listing runs in parallel over prefixes:
        delimiter listings descend the partition directories until there are enough prefixes
        for :data:`LIST_WORKERS` requests at a time, then each prefix is listed whole; hidden
        prefixes (``_delta_log/``) are never listed.

        :param hidden: whether a path component is hidden.
        :param skip: relative paths of files that need no size or age; a store may leave them out.
        """
        if self.prefix_directories:
            return self._list_tree_by_prefix(hidden)
        fs = self.fs
        root = self.root.rstrip("/")
        prefix = root + "/"
        try:
            fs.invalidate_cache(root)
        except Exception:  # a cache is an optimisation; a store without one is fine
            log.debug("No listing cache to invalidate for %s.", self.root_uri)
        try:
            entries = fs.find(root, withdirs=True, detail=True)
        except FileNotFoundError:
            entries = {}
        listing = TreeListing()
        nonempty: set[str] = set()
        for name, entry in entries.items():
            name = name.rstrip("/")
            if not name.startswith(prefix):
                continue
            relative = name[len(prefix) :]
            parts = relative.split("/")
            # Whatever exists below a directory (hidden or not) keeps it.
            for i in range(1, len(parts)):
                nonempty.add("/".join(parts[:i]))
            if any(hidden(part) for part in parts):
                continue
            if entry.get("type") == "directory":
                if not self.prefix_directories:
                    listing.directories.append(relative)
                continue
            info = file_info(entry)
            listing.files.append((relative, info.size, info.modification_time))
        # On object stores a "directory" is a key prefix: it disappears with its last object,
        # and deleting a prefix would mean a recursive delete. Directories are left to the store.
        listing.empty_directories = [d for d in listing.directories if d not in nonempty]
        return listing

    def _list_tree_by_prefix(self, hidden: Callable[[str], bool]) -> TreeListing:
        root = self.root.rstrip("/")
        listing = TreeListing()
        progress = Progress(self.root_uri, 0, verb="Listing")

        def visible(relative: str) -> bool:
            return not any(hidden(part) for part in relative.split("/"))

        def keep(found: Iterable[FileInfo]) -> None:
            count = 0
            for info in found:
                relative = info.path[len(root) + 1 :]
                if info.path.startswith(root + "/") and relative and visible(relative):
                    listing.files.append((relative, info.size, info.modification_time))
                count += 1
            progress.advance(count)

        with ThreadPoolExecutor(max_workers=LIST_WORKERS, thread_name_prefix="delta-list") as pool:
            frontier = [root]
            for _ in range(LIST_EXPAND_DEPTH):
                children: list[str] = []
                for files, directories in pool.map(self._list_level, frontier):
                    keep(files)
                    children.extend(
                        d for d in directories if d.startswith(root + "/") and visible(d[len(root) + 1 :])
                    )
                frontier = children
                if not frontier or len(frontier) >= 4 * LIST_WORKERS:
                    break
            for files in pool.map(self._list_prefix, frontier):
                keep(files)
        progress.finish()
        return listing

    def _list_level(self, directory: str) -> tuple[list[FileInfo], list[str]]:
        """The files directly in ``directory`` and its subdirectories' paths (a delimiter listing)."""
        try:
            entries = self.fs.ls(directory, detail=True, refresh=True)
        except FileNotFoundError:
            return [], []
        files = [file_info(e) for e in entries if e.get("type") != "directory"]
        directories = [str(e["name"]).rstrip("/") for e in entries if e.get("type") == "directory"]
        return files, directories

    def _list_prefix(self, directory: str) -> list[FileInfo]:
        """Every file under ``directory``, recursively (one flat listing of the prefix)."""
        try:
            entries = self.fs.find(directory, detail=True)
        except FileNotFoundError:
            return []
        return [file_info(e) for e in entries.values() if e.get("type") != "directory"]

    # --- writes ---------------------------------------------------------------------------

    @abstractmethod
    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically, only if it does not exist yet.

        :raises CommitFileExistsError: the file exists (another writer got there first).
        :raises StorageError: this store has no safe put-if-absent.
        """

    def put(self, path: str, data: bytes | memoryview) -> None:
        """Write ``path`` whole, replacing any previous content (readers see old or new, never half)."""
        self.fs.pipe_file(path, bytes(data))

    # --- deletes (scheduled by :mod:`.deletes`; a store supplies one batch) -----------------

    #: Paths per delete request (S3's ``DeleteObjects`` maximum) or per blocking work item.
    delete_batch_size = DELETE_BATCH
    #: Whether the store can delete one object alone (:meth:`_delete_one`): refused objects of a
    #: batch are retried that way, and a store whose service refuses batches falls back to it.
    single_deletes = False
    #: Why batch requests are not used (set when the service refused one), else None.
    batch_refused: str | None = None
    #: Who answers deletions, and what to check when it refuses some (error messages).
    store_name = "The filesystem"
    delete_advice = "Check that the credentials may delete these files and run again."

    @cached_property
    def delete_requests(self) -> dict[str, int]:
        """Delete requests sent so far: ``{"batch": n, "single": n}`` (for figures and tests;
        counted on the event loop thread, so without a lock)."""
        return {"batch": 0, "single": 0}

    def delete_many(self, paths: Sequence[str], *, max_workers: int | None = None) -> int:
        """Delete files through the one delete scheduler (:mod:`.deletes`); returns how many were
        deleted. Batches of :attr:`delete_batch_size`, ``max_workers`` of them in flight (default:
        by store), progress logged on long runs.

        Missing files are skipped (stores that cannot tell count them as deleted). Paths are
        deleted as given: confining them to the table is the caller's (``TablePath.contains``,
        VACUUM's ``check_under_root``).

        :raises DeleteFilesError: some files could not be deleted, each named with its reason;
            the others were.
        """
        if not paths:
            return 0
        try:
            return delete_paths(self, paths, max_workers)
        finally:
            self._deleted()

    def _deleted(self) -> None:
        """After deletions: forget cached listings (object stores' filesystems cache them)."""
        if self.prefix_directories:
            self.fs.invalidate_cache()

    def _delete_concurrency(self, paths: Sequence[str]) -> int:
        """Batches in flight when the caller does not say."""
        return 8

    def _delete_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the delete scheduler runs on: an asynchronous filesystem's own (its
        client lives there); None for the others (a loop of the caller's own, for the run)."""
        fs: Any = self.fs if self.prefix_directories else None
        loop: asyncio.AbstractEventLoop | None = fs.loop if getattr(fs, "async_impl", False) else None
        return loop

    def _delete_groups(self, paths: list[str]) -> list[list[str]]:
        """The paths in groups no batch may mix: one per bucket or container on object stores."""
        if not self.prefix_directories:
            return [paths]
        bucket = self.root.partition("/")[0] + "/"
        if all(path.startswith(bucket) for path in paths):
            return [paths]  # the usual case: the table's own bucket
        groups: dict[str, list[str]] = {}
        for path in paths:
            groups.setdefault(path.partition("/")[0], []).append(path)
        return list(groups.values())

    async def _send_delete_batch(self, paths: Sequence[str]) -> Mapping[str, str]:
        """Delete one batch; per path :data:`~.deletes.DELETED`, :data:`~.deletes.MISSING` or the
        reason it was refused. The default deletes the paths one by one in a thread."""
        return await run_blocking(self._delete_batch, paths)

    def _delete_batch(self, batch: Sequence[str]) -> dict[str, str]:
        """Blocking: delete each path (:meth:`_remove_file`), a refusal (``OSError``) becoming its outcome."""
        outcomes: dict[str, str] = {}
        for path in batch:
            try:
                self._remove_file(path)
            except FileNotFoundError:
                outcomes[path] = MISSING
            except OSError as err:
                outcomes[path] = describe(err)
            else:
                outcomes[path] = DELETED
        return outcomes

    def _remove_file(self, path: str) -> None:
        self.fs.rm_file(path)

    async def _delete_one(self, path: str) -> bool:
        """Delete one object; False when it did not exist (stores with :attr:`single_deletes`)."""
        raise NotImplementedError(f"{type(self).__name__} has no single-object delete.")

    def delete_empty_directories(self, directories: Iterable[str]) -> int:
        """Delete empty directories (deepest first); one that is no longer empty is left alone."""
        deleted = 0
        for directory in directories:
            try:
                self._remove_directory(directory)
            except FileNotFoundError:
                continue
            except OSError as err:
                if _not_empty(err):
                    log.info("Keeping %s: a file appeared in it.", self.to_uri(directory))
                    continue
                raise
            deleted += 1
        return deleted

    def _remove_directory(self, directory: str) -> None:
        self.fs.rmdir(directory)


def _not_empty(err: OSError) -> bool:
    import errno

    return err.errno in (errno.ENOTEMPTY, errno.EEXIST) or "not empty" in str(err).lower()


def to_millis(value: Any) -> int:
    """Milliseconds since the epoch from a datetime or a number of seconds."""
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    return int(float(value) * 1000)


def file_info(entry: Mapping[str, Any]) -> FileInfo:
    """A :class:`FileInfo` from an fsspec ``info``/``ls`` entry, whatever its time field is called."""
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        mtime = to_millis(value)
        break
    else:
        mtime = 0
    return FileInfo(entry["name"], int(entry.get("size") or 0), mtime)
