"""S3 (and S3-compatible stores) through s3fs's botocore client.

Listing from a key uses ``StartAfter``; put-if-absent is a conditional ``PUT`` with
``If-None-Match: *``; deletions are ``DeleteObjects`` requests of up to 1,000 keys, keys
used verbatim (no glob expansion).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import CommitFileExistsError, DeleteFilesError, StorageError
from airflow_delta_provider.core.storage.base import FileInfo, LogStore, to_millis

if TYPE_CHECKING:
    from collections.abc import Sequence

    import fsspec


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

    def list_from(self, directory: str, start: str = "") -> list[FileInfo]:
        bucket, _, prefix = directory.partition("/")
        prefix = prefix.rstrip("/") + "/" if prefix else ""
        kwargs: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "Delimiter": "/"}
        if start:
            # StartAfter is exclusive: start just below `start` (its last character
            # decremented); the few names between that and `start` are dropped below.
            kwargs["StartAfter"] = prefix + start[:-1] + chr(ord(start[-1]) - 1)
        files: list[FileInfo] = []
        while True:
            page = self._call("list_objects_v2", **kwargs)
            for obj in page.get("Contents", []):
                key = obj["Key"]
                if key.endswith("/"):
                    continue
                files.append(FileInfo(f"{bucket}/{key}", int(obj["Size"]), to_millis(obj["LastModified"])))
            if not page.get("IsTruncated"):
                break
            kwargs["ContinuationToken"] = page["NextContinuationToken"]
            kwargs.pop("StartAfter", None)
        return sorted((f for f in files if f.name >= start), key=lambda f: f.name)

    # --- writes ---------------------------------------------------------------------------

    def put_if_absent(self, path: str, data: bytes) -> None:
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
            raise
        finally:
            self.fs.invalidate_cache(path)

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
