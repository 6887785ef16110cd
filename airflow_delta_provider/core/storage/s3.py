"""S3 (and S3-compatible stores) through s3fs's botocore client.

Listing from a key uses ``StartAfter``; put-if-absent is a conditional ``PUT`` with
``If-None-Match: *``; deletions are ``DeleteObjects`` requests of up to 1,000 keys, keys
used verbatim (no glob expansion).

Before its first commit to a bucket, a process checks that the store really honours the
condition (S3-compatible stores that ignore it would let two writers both "win" a version):
a second conditional PUT of a new hidden key under ``_delta_log`` must fail. A store that
fails the check is refused for commits, with the reason.
"""

from __future__ import annotations

import threading
import uuid
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import CommitFileExistsError, DeleteFilesError, StorageError
from airflow_delta_provider.core.redaction import get_logger
from airflow_delta_provider.core.storage.base import FileInfo, LogStore, to_millis

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    import fsspec


log = get_logger(__name__)

#: Name prefix of the object that tests a store's conditional writes (hidden: starts with a dot).
PROBE_PREFIX = ".put-if-absent-probe-"
#: Error codes of stores that reject the ``If-None-Match`` header instead of honouring it.
_CONDITION_REFUSED = frozenset({"NotImplemented", "InvalidArgument", "InvalidRequest"})
#: (endpoint, bucket) -> None when the store honours conditional writes, else why not.
_conditional_writes: dict[tuple[str, str], str | None] = {}
_probe_lock = threading.Lock()


class _ConditionRefused(Exception):
    """The store rejected a conditional PUT (it does not implement the condition)."""


def is_s3_filesystem(fs: fsspec.AbstractFileSystem) -> bool:
    """Whether ``fs`` is s3fs (the store needs its botocore client)."""
    protocol = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return "s3" in protocol and hasattr(fs, "_call_s3")


class S3Store(LogStore):
    """A table on S3 or an S3-compatible store that honours conditional writes."""

    prefix_directories = True

    def _build_filesystem(self) -> fsspec.AbstractFileSystem:
        import fsspec

        try:
            return fsspec.filesystem("s3", **self.storage_options)
        except ImportError as err:
            raise StorageError(
                "Reading s3:// tables needs s3fs: pip install 'airflow-delta-provider[s3]'."
            ) from err

    def _call(self, method: str, **kwargs: Any) -> Any:
        from fsspec.asyn import sync

        fs: Any = self.fs
        return sync(fs.loop, fs._call_s3, method, **kwargs)

    # --- reads ----------------------------------------------------------------------------

    def read_bytes(self, path: str) -> bytes:
        # s3fs answers from its listing cache when it has one: a listing made before another
        # writer's commit (VACUUM's walk caches _delta_log) would make that commit "missing".
        self.fs.invalidate_cache(path)
        return super().read_bytes(path)

    def read_range(self, path: str, start: int, length: int) -> bytes:
        self.fs.invalidate_cache(path)
        return super().read_range(path, start, length)

    def info(self, path: str) -> FileInfo | None:
        head = self._head(path)
        if head is None:
            return None
        return FileInfo(path, int(head["ContentLength"]), to_millis(head["LastModified"]))

    def _head(self, path: str) -> dict[str, Any] | None:
        from botocore.exceptions import ClientError

        bucket, _, key = path.partition("/")
        try:
            result: dict[str, Any] = self._call("head_object", Bucket=bucket, Key=key)
        except FileNotFoundError:
            return None
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return None
            raise
        return result

    def walk(self, directory: str | None = None) -> Iterator[FileInfo]:
        yield from self._list_prefix(directory or self.root)

    def _pages(self, bucket: str, **kwargs: Any) -> Iterator[dict[str, Any]]:
        while True:
            page: dict[str, Any] = self._call("list_objects_v2", Bucket=bucket, **kwargs)
            yield page
            if not page.get("IsTruncated"):
                return
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
            kwargs.pop("StartAfter", None)

    def _list_level(self, directory: str) -> tuple[list[FileInfo], list[str]]:
        bucket, _, prefix = directory.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        files: list[FileInfo] = []
        directories: list[str] = []
        for page in self._pages(bucket, Prefix=prefix, Delimiter="/"):
            files.extend(_objects(bucket, page))
            directories.extend(f"{bucket}/{p['Prefix'].rstrip('/')}" for p in page.get("CommonPrefixes", []))
        return files, directories

    def _list_prefix(self, directory: str) -> list[FileInfo]:
        bucket, _, prefix = directory.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        files: list[FileInfo] = []
        for page in self._pages(bucket, Prefix=prefix):
            files.extend(_objects(bucket, page))
        return files

    def list_from(self, directory: str, start: str = "") -> list[FileInfo]:
        bucket, _, prefix = directory.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        kwargs: dict[str, Any] = {"Prefix": prefix, "Delimiter": "/"}
        if start:
            # StartAfter is exclusive: start just below `start` (its last character
            # decremented); the few names between that and `start` are dropped below.
            kwargs["StartAfter"] = prefix + start[:-1] + chr(ord(start[-1]) - 1)
        files = [f for page in self._pages(bucket, **kwargs) for f in _objects(bucket, page)]
        return sorted((f for f in files if f.name >= start), key=lambda f: f.name)

    # --- writes ---------------------------------------------------------------------------

    def put_if_absent(self, path: str, data: bytes) -> None:
        bucket = path.partition("/")[0]
        self._require_conditional_writes(bucket)
        try:
            self._conditional_put(path, data)
        finally:
            self.fs.invalidate_cache(path)

    def _conditional_put(self, path: str, data: bytes) -> None:
        from botocore.exceptions import ClientError

        bucket, _, key = path.partition("/")
        try:
            self._call("put_object", Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
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
            if code in _CONDITION_REFUSED or status == 501:
                raise _ConditionRefused(f"{code or status}") from err
            raise

    # --- can this store commit? -------------------------------------------------------------

    def _endpoint(self) -> str:
        fs: Any = self.fs
        endpoint = getattr(fs, "endpoint_url", None) or (getattr(fs, "client_kwargs", None) or {}).get(
            "endpoint_url"
        )
        return str(endpoint or "AWS S3")

    def _require_conditional_writes(self, bucket: str) -> None:
        """Refuse commits to a store that cannot put-if-absent (probed once per process and bucket)."""
        key = (self._endpoint(), bucket)
        with _probe_lock:
            if key not in _conditional_writes:
                _conditional_writes[key] = self._probe_conditional_writes(bucket, key[0])
        problem = _conditional_writes[key]
        if problem is not None:
            raise StorageError(problem)

    def _probe_conditional_writes(self, bucket: str, endpoint: str) -> str | None:
        """None when a second conditional PUT of one new key fails, else why commits are unsafe.

        The probe key is hidden (``_delta_log/.put-if-absent-probe-*``: no reader or cleanup
        takes it for a log file) and deleted afterwards.
        """
        probe = self.log_path(f"{PROBE_PREFIX}{uuid.uuid4().hex}")
        where = f"The S3 store at {endpoint} (bucket {bucket!r})"
        unsafe = (
            "so two writers committing the same table version would both succeed and one commit "
            "would be lost without an error. Commits to it are refused. Use a store that honours "
            "conditional writes (PUT with If-None-Match: *), as AWS S3 does, or upgrade this one."
        )
        try:
            try:
                self._conditional_put(probe, b"")
                self._conditional_put(probe, b"")
            except CommitFileExistsError:
                log.debug("%s honours If-None-Match: *.", where)
                return None
            except _ConditionRefused as err:
                return (
                    f"{where} rejects conditional writes (PUT with If-None-Match: * answered {err}), {unsafe}"
                )
            return (
                f"{where} ignores conditional writes: a second PUT of the same new key with "
                f"If-None-Match: * succeeded instead of failing with 412 Precondition Failed, {unsafe}"
            )
        finally:
            try:
                self._call("delete_object", Bucket=bucket, Key=probe.partition("/")[2])
            except Exception as err:  # a leftover hidden probe key is harmless
                log.warning("Could not delete the probe object s3://%s: %s", probe, err)

    def _delete_batch(self, batch: Sequence[str]) -> int:
        by_bucket: dict[str, list[str]] = {}
        for path in batch:
            bucket, _, key = path.partition("/")
            by_bucket.setdefault(bucket, []).append(key)
        deleted = 0
        for bucket, keys in by_bucket.items():
            response = self._call(
                "delete_objects",
                Bucket=bucket,
                Delete={"Objects": [{"Key": k} for k in keys], "Quiet": True},
            )
            errors = response.get("Errors") or []
            if errors:
                failed = [
                    (f"{bucket}/{e.get('Key')}", f"{e.get('Code')}: {e.get('Message')}") for e in errors
                ]
                raise DeleteFilesError(
                    f"S3 refused to delete {len(failed)} of {len(keys)} file(s) of {self.root_uri}, e.g. "
                    f"s3://{failed[0][0]} ({failed[0][1]}). Check the credentials' s3:DeleteObject "
                    f"permission and run again.",
                    failed=failed,
                )
            # S3 deletes are idempotent and do not say whether the key existed.
            deleted += len(keys)
        for path in batch:
            self.fs.invalidate_cache(path)
        return deleted

    def _remove_directory(self, directory: str) -> None:
        """Key prefixes vanish with their last object; there is nothing to remove."""


def _objects(bucket: str, page: Mapping[str, Any]) -> Iterator[FileInfo]:
    """The objects of one ``ListObjectsV2`` page (without "directory" marker keys)."""
    for obj in page.get("Contents", []):
        key = obj["Key"]
        if not key.endswith("/"):
            yield FileInfo(f"{bucket}/{key}", int(obj["Size"]), to_millis(obj["LastModified"]))
