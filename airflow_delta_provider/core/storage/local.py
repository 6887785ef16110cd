"""Local disks: plain system calls, and a hard link as the atomic put-if-absent."""

from __future__ import annotations

import contextlib
import itertools
import os
import uuid
from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import CommitFileExistsError, StorageError
from airflow_delta_provider.core.storage.base import FileInfo, LogStore, TreeListing

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterator, Mapping, Sequence

    import fsspec
    import pyarrow as pa
    import pyarrow.fs as pafs


class LocalStore(LogStore):
    """A table on a local (or locally mounted) filesystem.

    Put-if-absent: a fully written and synced temp file is hard-linked to its final name
    (``link`` fails if the name exists, so a reader never sees a partial commit).
    """

    @property
    def is_local(self) -> bool:
        return True

    def _build_filesystem(self) -> fsspec.AbstractFileSystem:
        import fsspec

        return fsspec.filesystem("file")

    @property
    def arrow_fs(self) -> pafs.FileSystem:
        import pyarrow.fs as pafs

        return pafs.LocalFileSystem()

    def open_input(self, path: str) -> str | pa.NativeFile:
        return path

    def real_path_inside(self, path: str, *, allow_root: bool = False) -> bool:
        """Whether ``path``, symbolic links resolved, is strictly below the real table root
        (or is the root itself, with ``allow_root``)."""
        real_root = os.path.realpath(self.root)
        real = os.path.realpath(path)
        return (allow_root and real == real_root) or real.startswith(real_root.rstrip(os.sep) + os.sep)

    # --- reads ----------------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        # os.read on a descriptor: about a third less than open().read() on small files (no
        # buffered file object), which adds up over the thousands of commits of a long log.
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            chunks = []
            while chunk := os.read(fd, 1 << 20):
                chunks.append(chunk)
        finally:
            os.close(fd)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def read_joined(self, paths: Sequence[str], *, max_workers: int = 16) -> tuple[bytearray, list[int]]:
        """As the base class, each file read straight into its place in the one text: one copy
        of the bytes instead of two (a read, then the join), which matters little per file but
        is ~1 ms per MB of fresh memory here (100 commits of a 10,000-line tail: 3.8 MB)."""
        sizes = [os.stat(path).st_size for path in paths]  # FileNotFoundError names the path
        starts = list(itertools.accumulate((size + 1 for size in sizes), initial=0))
        text = bytearray(b"\n") * max(starts[-1] - 1, 0)
        view = memoryview(text)
        try:
            for path, start, size in zip(paths, starts[:-1], sizes, strict=True):
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
                try:
                    read = os.readv(fd, [view[start : start + size]]) if size else 0
                    # A commit file is never rewritten; one that changed size since the stat is
                    # not one to splice (a rewrite of a stray file): read them all plainly.
                    changed = read != size or os.read(fd, 1)
                finally:
                    os.close(fd)
                if changed:
                    break
            else:
                return text, starts
        finally:
            view.release()
        return super().read_joined(paths, max_workers=max_workers)

    #: Ranged reads (Parquet footers, deletion vectors) open files with ``O_NOATIME`` until the
    #: kernel refuses it (a file owned by another user): a read that updates the access time
    #: dirties the inode in the filesystem's journal, which under concurrent writers blocks the
    #: read and makes the commit's fsync flush a thousand inodes (1,000 footers: 0.85x the time).
    _noatime = getattr(os, "O_NOATIME", 0)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        flags = os.O_RDONLY | self._noatime
        try:
            descriptor = os.open(path, flags)
        except PermissionError:
            if flags == os.O_RDONLY:
                raise
            self._noatime = 0  # not this process's files: plain reads from now on
            descriptor = os.open(path, os.O_RDONLY)
        try:
            return os.pread(descriptor, length, start)
        finally:
            os.close(descriptor)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)

    def info(self, path: str) -> FileInfo | None:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return FileInfo(path, st.st_size, int(st.st_mtime * 1000))

    def list_from(self, directory: str, start: str = "") -> list[FileInfo]:
        try:
            entries = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        files = []
        with entries:
            for entry in entries:
                if entry.name < start:
                    continue
                try:
                    if not entry.is_file():
                        continue
                    st = entry.stat()
                except FileNotFoundError:  # deleted while listing (log cleanup)
                    continue
                files.append(FileInfo(f"{directory}/{entry.name}", st.st_size, int(st.st_mtime * 1000)))
        files.sort(key=lambda f: f.name)
        return files

    def list_log(self, start: str = "", *, stat: bool = True) -> list[FileInfo]:
        if stat:
            return self.list_from(self.log_dir, start)
        directory = self.log_dir
        try:
            entries = os.scandir(directory)
        except (FileNotFoundError, NotADirectoryError):
            return []
        with entries:
            # is_file() reads the entry's type from the directory listing: no system call.
            names = sorted(e.name for e in entries if e.name >= start and _is_file(e))
        return [StatOnAccess(f"{directory}/{name}") for name in names]

    def walk(self, directory: str | None = None) -> Iterator[FileInfo]:
        """Every file under a directory, top-down, as ``os.walk`` lists them: symbolic links to
        directories are not followed (nor listed), links to files are listed with their target's
        size; unreadable directories and dangling links are skipped. One ``scandir`` per directory
        and one ``stat`` per file (``os.walk`` and a path join per file cost twice the time). A link
        to a file is a :class:`LinkInfo` (``is_link``), told from the listing's entry type."""
        pending = [directory or self.root]
        while pending:
            try:
                entries = os.scandir(pending.pop())
            except OSError:
                continue
            subdirectories = []
            with entries:
                for entry in entries:
                    if _is_directory(entry):
                        if not _is_link(entry):
                            subdirectories.append(entry.path)
                        continue
                    try:
                        st = entry.stat()
                    except FileNotFoundError:  # deleted while listing, or a dangling link
                        continue
                    # The entry's type comes with the listing: no system call tells a link apart.
                    info = LinkInfo if entry.is_symlink() else FileInfo
                    yield info(entry.path, st.st_size, int(st.st_mtime * 1000))
            pending.extend(reversed(subdirectories))

    def list_tree(self, hidden: Callable[[str], bool], skip: Container[str] = frozenset()) -> TreeListing:
        """Scan the root level by level. Files in ``skip`` are seen but not ``stat``-ed: on a
        large live table most files are protected and cost no system call."""
        root = self.root
        listing = TreeListing()
        # Per directory: has it any entry that is not a visible directory, and its visible subdirs.
        occupied: dict[str, bool] = {}
        children: dict[str, list[str]] = {}

        def scan(relative: str) -> tuple[str, list[tuple[str, int, int]], list[str], bool] | None:
            absolute = f"{root}/{relative}" if relative else root
            prefix = f"{relative}/" if relative else ""
            found: list[tuple[str, int, int]] = []
            subdirs: list[str] = []
            has_other = False
            try:
                entries = os.scandir(absolute)
            except (FileNotFoundError, NotADirectoryError):
                return None
            with entries:
                for entry in entries:
                    name = entry.name
                    # Only `_`/`.` names and UniForm's `metadata` can be hidden: skip the call for others.
                    if (name[0] in "._" or name == "metadata") and hidden(name):
                        has_other = True
                        continue
                    path = prefix + name
                    try:
                        # Symlinks are never followed: a link to a directory must not lead the
                        # listing (and the deletions) out of the table root; the link is a file.
                        if entry.is_dir(follow_symlinks=False):
                            subdirs.append(path)
                            continue
                        has_other = True
                        if path in skip:
                            continue
                        stat = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # deleted while listing
                        continue
                    found.append((path, stat.st_size, int(stat.st_mtime * 1000)))
            return relative, found, subdirs, has_other

        # Breadth first. (Threads do not help: the per-entry work holds the GIL longer than the
        # ``stat`` call releases it; measured slower with 2-8 threads on 100,000 files.)
        level = [""]
        while level:
            results = [scan(directory) for directory in level]
            level = []
            for item in results:
                if item is None:
                    continue
                relative, found, subdirs, has_other = item
                listing.files.extend(found)
                occupied[relative] = has_other
                children[relative] = subdirs
                listing.directories.extend(subdirs)
                level.extend(subdirs)
        listing.empty_directories = _empty_directories(listing.directories, occupied, children)
        return listing

    # --- writes ---------------------------------------------------------------------------

    def put_if_absent(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = _write_temp(path, data)
        try:
            os.link(tmp, path)
        except FileExistsError:
            raise CommitFileExistsError(f"{path} already exists.") from None
        except OSError as err:
            raise StorageError(
                f"Cannot commit {path}: this filesystem does not support hard links ({err}), which "
                f"the core uses for an atomic put-if-absent."
            ) from err
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
        _fsync_dir(os.path.dirname(path))

    def put(self, path: str, data: bytes | memoryview) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = _write_temp(path, data)
        try:
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
            raise

    store_name = "The local filesystem"
    delete_advice = "Check the permissions of these files and of their directories and run again."

    def _delete_concurrency(self, paths: Sequence[str]) -> int:
        # Unlinks in one directory serialise on it: threads only help across directories.
        directories = {p.rpartition("/")[0] for p in paths[:DIRECTORY_SAMPLE]}
        return 1 if len(directories) == 1 else 4

    def _remove_file(self, path: str) -> None:
        os.remove(path)

    def _remove_directory(self, directory: str) -> None:
        os.rmdir(directory)


#: Paths looked at to tell whether a deletion spans several directories.
DIRECTORY_SAMPLE = 2000


def _empty_directories(
    directories: list[str], occupied: Mapping[str, bool], children: Mapping[str, list[str]]
) -> list[str]:
    is_empty: dict[str, bool] = {}
    # Deepest first: a directory is empty when it holds nothing but empty directories.
    for directory in sorted(directories, key=lambda d: -d.count("/")):
        is_empty[directory] = not occupied.get(directory, True) and all(
            is_empty.get(child, False) for child in children.get(directory, [])
        )
    return [d for d in directories if is_empty[d]]


def _write_temp(path: str, data: bytes | memoryview) -> str:
    """A fully written, synced temp file beside ``path``, with a hidden name readers skip."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{uuid.uuid4().hex}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
    os.close(fd)
    return tmp


def _fsync_dir(directory: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _is_directory(entry: os.DirEntry[str]) -> bool:
    """``os.walk``'s test: an entry that cannot be examined is not a directory."""
    try:
        return entry.is_dir()
    except OSError:
        return False


def _is_link(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_symlink()
    except OSError:
        return False


def _is_file(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_file()
    except OSError:  # deleted while listing (log cleanup)
        return False


class LinkInfo(FileInfo):
    """A walked file that is a symbolic link (its size and time are the target's)."""

    __slots__ = ()

    @property
    def is_link(self) -> bool:
        return True


class StatOnAccess(FileInfo):
    """A listed local file whose size and modification time are read on first access (one
    ``stat``); a file gone by then reads as empty and modified at 0 (an empty file is never a
    usable checkpoint or checksum)."""

    __slots__ = ("_stat",)
    _stat: tuple[int, int] | None

    def __init__(self, path: str) -> None:
        object.__setattr__(self, "path", path)
        object.__setattr__(self, "_stat", None)

    def _read_stat(self) -> tuple[int, int]:
        found: tuple[int, int] | None = self._stat
        if found is None:
            try:
                st = os.stat(self.path)
                found = (st.st_size, int(st.st_mtime * 1000))
            except FileNotFoundError:
                found = (0, 0)
            object.__setattr__(self, "_stat", found)
        return found

    @property
    def size(self) -> int:
        return self._read_stat()[0]

    @property
    def modification_time(self) -> int:
        return self._read_stat()[1]
