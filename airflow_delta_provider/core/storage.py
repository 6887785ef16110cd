"""Storage for one Delta table: an fsspec filesystem plus the table root.

Everything the core reads or writes goes through :class:`TableStorage`. It hides
the differences between schemes that matter to Delta:

- **Listing from a key.** The log is listed lexicographically from a version
  (``_delta_log/00000000000000000042``), never in full when a checkpoint hint
  says where to start. S3 uses ``StartAfter``; local directories are scanned.
- **Atomic put-if-absent**, the commit primitive. Local: a fully written and
  synced temp file is hard-linked to its final name (``link`` fails if the name
  exists, so a reader never sees a partial commit). S3: a conditional
  ``PUT`` with ``If-None-Match: *``. Memory: a check-and-set under a lock (tests).
  Other schemes have no safe primitive here, so commits to them are refused.
- **Path resolution.** Data-file paths in the log are relative (to the table
  root) or absolute URIs, URL-encoded as the protocol says.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import threading
import uuid
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import fsspec

from airflow_delta_provider.core.errors import CommitFileExistsError, InvalidPathError, StorageError

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    import pyarrow.fs as pafs

log = logging.getLogger(__name__)

LOG_DIR = "_delta_log"

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
_S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
_LOCAL_SCHEMES = frozenset({"file", "local"})
_memory_lock = threading.Lock()


@dataclass(frozen=True, slots=True)
class FileInfo:
    """One listed object.

    :param path: the filesystem path (fsspec form, no scheme for local and S3).
    :param size: size in bytes.
    :param modification_time: last modification, milliseconds since the epoch (UTC).
    """

    path: str
    size: int
    modification_time: int

    @property
    def name(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def has_scheme(path: str) -> bool:
    """True for ``s3://b/k`` or ``file:/x``; False for plain relative or absolute paths."""
    return bool(_SCHEME_RE.match(path)) and not _is_windows_drive(path)


def _is_windows_drive(path: str) -> bool:
    return len(path) >= 2 and path[1] == ":" and path[0].isalpha() and (len(path) == 2 or path[2] in "/\\")


def normalize_table_uri(uri: str) -> tuple[str, str]:
    """Split a table location into (scheme, filesystem path of the root).

    Plain paths and ``file:`` URIs become absolute local paths; ``s3a``/``s3n`` are
    S3; a trailing slash is dropped.

    :param uri: the table location as a user writes it.
    """
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidPathError(f"A table location must be a non-empty string, got {uri!r}.")
    uri = uri.strip()
    if not has_scheme(uri):
        return "file", os.path.abspath(os.path.expanduser(uri))
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme in _LOCAL_SCHEMES:
        if parts.netloc not in ("", "localhost"):
            raise InvalidPathError(f"Cannot use a file URI with a remote host: {uri!r}.")
        return "file", os.path.abspath(unquote(parts.path)) if parts.path else "/"
    if scheme in _S3_SCHEMES:
        if not parts.netloc:
            raise InvalidPathError(f"An S3 table location needs a bucket: {uri!r}.")
        key = parts.path.strip("/")
        return "s3", f"{parts.netloc}/{key}" if key else parts.netloc
    if scheme == "memory":
        path = "/" + (parts.netloc + parts.path).strip("/")
        return "memory", path
    # Any other fsspec scheme: let fsspec decide what its path looks like.
    return scheme, uri.rstrip("/")


class TableStorage:
    """The filesystem of one table and the operations the log needs from it.

    :param uri: table root: a local path, ``file://``, ``s3://``, ``memory://`` or any
        other fsspec URL (readable; commits need local, S3 or memory).
    :param storage_options: fsspec options for the filesystem (credentials, endpoint...).
    :param filesystem: an already configured fsspec filesystem to use instead of
        building one from the URI (the Airflow layer passes connection-backed ones).
    """

    def __init__(
        self,
        uri: str,
        storage_options: Mapping[str, Any] | None = None,
        *,
        filesystem: fsspec.AbstractFileSystem | None = None,
    ) -> None:
        self.scheme, self.root = normalize_table_uri(uri)
        self.storage_options = dict(storage_options or {})
        self._filesystem = filesystem

    def __repr__(self) -> str:
        return f"TableStorage({self.root_uri!r})"

    # --- identity --------------------------------------------------------------------

    @property
    def root_uri(self) -> str:
        """The table root as a URI (``file:///abs``, ``s3://bucket/key``, ``memory://x``)."""
        if self.scheme == "file":
            return "file://" + self.root
        if self.scheme == "s3":
            return "s3://" + self.root
        if self.scheme == "memory":
            return "memory://" + self.root
        return self.root

    @property
    def log_dir(self) -> str:
        return self.join(LOG_DIR)

    def join(self, *relative: str) -> str:
        """A filesystem path under the table root."""
        return "/".join([self.root.rstrip("/"), *(r.strip("/") for r in relative)])

    def log_path(self, name: str) -> str:
        return f"{self.log_dir}/{name}"

    def to_uri(self, path: str) -> str:
        """The URI of a filesystem path of this storage."""
        if self.scheme == "file":
            return "file://" + path
        if self.scheme in ("s3", "memory"):
            return f"{self.scheme}://{path.lstrip('/') if self.scheme == 's3' else path}"
        return path

    # --- filesystems -----------------------------------------------------------------

    @cached_property
    def fs(self) -> fsspec.AbstractFileSystem:
        if self._filesystem is not None:
            return self._filesystem
        if self.scheme == "file":
            return fsspec.filesystem("file")
        if self.scheme == "s3":
            try:
                return fsspec.filesystem("s3", **self.storage_options)
            except ImportError as err:
                raise StorageError(
                    "Reading s3:// tables needs s3fs: pip install 'airflow-delta-provider[s3]'."
                ) from err
        if self.scheme == "memory":
            return fsspec.filesystem("memory")
        fs, _ = fsspec.core.url_to_fs(self.root, **self.storage_options)
        self.root = fs._strip_protocol(self.root).rstrip("/")
        return fs

    @cached_property
    def arrow_fs(self) -> pafs.FileSystem:
        """A pyarrow filesystem over the same storage, for Parquet reads."""
        import pyarrow.fs as pafs

        if self.scheme == "file" and self._filesystem is None:
            return pafs.LocalFileSystem()
        return pafs.PyFileSystem(pafs.FSSpecHandler(self.fs))

    @property
    def is_local(self) -> bool:
        return self.scheme == "file" and self._filesystem is None

    # --- reads -----------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        """The whole content of a file; ``FileNotFoundError`` when it does not exist."""
        if self.is_local:
            with open(path, "rb") as f:
                return f.read()
        return self.fs.cat_file(path)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        if self.is_local:
            with open(path, "rb") as f:
                f.seek(start)
                return f.read(length)
        return self.fs.cat_file(path, start=start, end=start + length)

    def exists(self, path: str) -> bool:
        if self.is_local:
            return os.path.exists(path)
        if self.scheme == "s3":
            return self._s3_head(path) is not None
        return self.fs.exists(path)

    def info(self, path: str) -> FileInfo | None:
        """Size and modification time of one file, or None when it does not exist."""
        if self.is_local:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                return None
            return FileInfo(path, st.st_size, int(st.st_mtime * 1000))
        if self.scheme == "s3":
            head = self._s3_head(path)
            if head is None:
                return None
            return FileInfo(path, int(head["ContentLength"]), _to_millis(head["LastModified"]))
        try:
            return _file_info(self.fs.info(path))
        except FileNotFoundError:
            return None

    def list_from(self, directory: str, start: str = "") -> list[FileInfo]:
        """Files directly in ``directory`` whose name is ``>= start``, sorted by name.

        Subdirectories are not returned. A missing directory lists as empty.

        :param directory: filesystem path of the directory.
        :param start: the first name of interest (e.g. a zero-padded version).
        """
        if self.is_local:
            return self._list_local(directory, start)
        if _is_s3fs(self.fs):
            return self._list_s3(directory, start)
        try:
            entries = self.fs.ls(directory, detail=True, refresh=True)
        except FileNotFoundError:
            return []
        except TypeError:
            entries = self.fs.ls(directory, detail=True)
        files = [_file_info(e) for e in entries if e.get("type") != "directory"]
        return sorted((f for f in files if f.name >= start), key=lambda f: f.name)

    def list_log(self, start: str = "") -> list[FileInfo]:
        """``_delta_log`` entries from a name on (see :meth:`list_from`)."""
        return self.list_from(self.log_dir, start)

    def walk(self, directory: str | None = None) -> Iterable[FileInfo]:
        """Every file under a directory (default: the table root), recursively."""
        top = directory or self.root
        if self.is_local:
            for dirpath, _dirnames, filenames in os.walk(top):
                for name in filenames:
                    path = os.path.join(dirpath, name)
                    with contextlib.suppress(FileNotFoundError):
                        st = os.stat(path)
                        yield FileInfo(path, st.st_size, int(st.st_mtime * 1000))
            return
        for entry in self.fs.find(top, detail=True).values():
            if entry.get("type") != "directory":
                yield _file_info(entry)

    def _list_local(self, directory: str, start: str) -> list[FileInfo]:
        try:
            entries = os.scandir(directory)
        except FileNotFoundError:
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

    def _list_s3(self, directory: str, start: str) -> list[FileInfo]:
        from fsspec.asyn import sync

        bucket, _, prefix = directory.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
        if start:
            # StartAfter is exclusive: start just below `start` (its last character
            # decremented); the few names between that and `start` are dropped below.
            kwargs["StartAfter"] = prefix + start[:-1] + chr(ord(start[-1]) - 1)
        files: list[FileInfo] = []
        while True:
            page = sync(self.fs.loop, self.fs._call_s3, "list_objects_v2", **kwargs)
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key.endswith("/"):
                    continue
                files.append(FileInfo(f"{bucket}/{key}", int(obj["Size"]), _to_millis(obj["LastModified"])))
            if not page.get("IsTruncated"):
                break
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
            kwargs.pop("StartAfter", None)
        return sorted((f for f in files if f.name >= start), key=lambda f: f.name)

    def _s3_head(self, path: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError
        from fsspec.asyn import sync

        bucket, _, key = path.partition("/")
        try:
            return sync(self.fs.loop, self.fs._call_s3, "head_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    # --- writes ----------------------------------------------------------------------

    def put_if_absent(self, path: str, data: bytes) -> None:
        """Create ``path`` with ``data`` atomically, only if it does not exist yet.

        :raises CommitFileExistsError: the file exists (another writer got there first).
        :raises StorageError: this scheme has no safe put-if-absent.
        """
        if self.is_local or self._is_local_filesystem():
            self._put_if_absent_local(path, data)
        elif self.scheme == "s3" or _is_s3fs(self.fs):
            self._put_if_absent_s3(path, data)
        elif self.scheme == "memory":
            with _memory_lock:
                if self.fs.exists(path):
                    raise CommitFileExistsError(f"{self.to_uri(path)} already exists.")
                self.fs.pipe_file(path, data)
        else:
            raise StorageError(
                f"Committing to {self.scheme}:// tables is not supported: the core has no atomic "
                f"put-if-absent for this storage, and writing without one can lose commits when two "
                f"writers race. Use a local path, s3:// or memory://."
            )

    def _is_local_filesystem(self) -> bool:
        """An explicitly passed fsspec LocalFileSystem: local paths all the same."""
        from fsspec.implementations.local import LocalFileSystem

        return self.scheme == "file" and isinstance(self._filesystem, LocalFileSystem)

    def put(self, path: str, data: bytes) -> None:
        """Write ``path`` whole, replacing any previous content (readers see old or new, never half)."""
        if self.is_local or self._is_local_filesystem():
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = self._write_local_temp(path, data)
            os.replace(tmp, path)
            return
        self.fs.pipe_file(path, data)

    def delete(self, paths: Iterable[str]) -> None:
        """Delete files (missing ones are ignored). Directories are never removed recursively."""
        batch = list(paths)
        if not batch:
            return
        if self.is_local:
            for path in batch:
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
            return
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(batch, recursive=False)

    def _write_local_temp(self, path: str, data: bytes) -> str:
        directory, name = os.path.split(path)
        # Hidden name: readers of the log and VACUUM both skip dot-files.
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

    def _put_if_absent_local(self, path: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = self._write_local_temp(path, data)
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

    def _put_if_absent_s3(self, path: str, data: bytes) -> None:
        from botocore.exceptions import ClientError
        from fsspec.asyn import sync

        bucket, _, key = path.partition("/")
        try:
            sync(
                self.fs.loop,
                self.fs._call_s3,
                "put_object",
                Bucket=bucket,
                Key=key,
                Body=data,
                IfNoneMatch="*",
            )
        except (ClientError, OSError) as err:
            # s3fs translates botocore errors into OSError subclasses; the response is the cause.
            cause = err if isinstance(err, ClientError) else err.__cause__
            response = getattr(cause, "response", None) or {}
            code = response.get("Error", {}).get("Code")
            status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            # 412: the object exists. 409: a concurrent conditional write to the same key is
            # in flight; AWS asks the loser to retry, and for a commit that means "lost".
            conflict = code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412)
            if conflict or isinstance(err, FileExistsError):
                raise CommitFileExistsError(f"s3://{path} already exists.") from None
            raise
        finally:
            self.fs.invalidate_cache(path)


def _fsync_dir(directory: str) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _is_s3fs(fs: fsspec.AbstractFileSystem) -> bool:
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "s3" in protocol and hasattr(fs, "_call_s3")


def _to_millis(value: Any) -> int:
    if hasattr(value, "timestamp"):
        return int(value.timestamp() * 1000)
    return int(float(value) * 1000)


def _file_info(entry: Mapping[str, Any]) -> FileInfo:
    for key in ("mtime", "LastModified", "last_modified", "updated", "created"):
        value = entry.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            from datetime import datetime

            value = datetime.fromisoformat(value.replace("Z", "+00:00"))
        mtime = _to_millis(value)
        break
    else:
        mtime = 0
    return FileInfo(entry["name"], int(entry.get("size") or 0), mtime)


def resolve_path(storage: TableStorage, path: str) -> str:
    """The filesystem path of a data-file path as written in the log.

    Relative paths are URL-decoded and joined to the table root; absolute URIs are
    URL-decoded; ``file:`` URIs become local paths.
    """
    if has_scheme(path):
        parts = urlsplit(path)
        scheme = parts.scheme.lower()
        decoded = unquote(parts.path)
        if scheme in _LOCAL_SCHEMES:
            return decoded
        if scheme in _S3_SCHEMES:
            return f"{parts.netloc}/{decoded.lstrip('/')}"
        if scheme == "memory":
            return "/" + (parts.netloc + decoded).strip("/")
        return path
    decoded = unquote(path)
    if decoded.startswith("/"):
        return decoded
    return f"{storage.root}/{decoded}"
