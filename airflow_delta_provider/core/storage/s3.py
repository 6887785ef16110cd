"""S3 (and S3-compatible stores) through s3fs's botocore client.

Put-if-absent is a conditional ``PUT`` with ``If-None-Match: *``; before its first commit to a bucket
a process checks that the store honours it and refuses commits when it does not (docs/storage.md).
Deletions are ``DeleteObjects`` of up to 1,000 keys. VACUUM's tree listing runs every prefix listing
concurrently on s3fs's event loop and reads each page's ``<Contents>`` from the raw response body,
which costs a fraction of botocore's per-object parsing (benchmarks/vacuum.md).
"""

from __future__ import annotations

import asyncio
import html
import os
import re
import threading
import uuid
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote_plus

from airflow_delta_provider.core.errors import CommitFileExistsError, StorageError
from airflow_delta_provider.core.storage.base import (
    LIST_EXPAND_DEPTH,
    FileInfo,
    LogStore,
    TreeListing,
    to_millis,
)
from airflow_delta_provider.core.storage.deletes import DELETED, BatchRefused
from airflow_delta_provider.core.storage.progress import Progress
from airflow_delta_provider.core.storage.sdk_compat import s3_call
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Coroutine, Iterator, Mapping, Sequence

    import fsspec


log = get_logger(__name__)

#: Name prefix of the object that tests a store's conditional writes (hidden: starts with a dot).
PROBE_PREFIX = ".put-if-absent-probe-"
#: Error codes of stores that reject the ``If-None-Match`` header instead of honouring it.
_CONDITION_REFUSED = frozenset({"NotImplemented", "InvalidArgument", "InvalidRequest"})
#: Error codes of S3-compatible stores that do not implement ``DeleteObjects``.
_BATCH_REFUSED = frozenset({"NotImplemented", "MethodNotAllowed"})
#: (endpoint, bucket) -> None when the store honours conditional writes, else why not.
_conditional_writes: dict[tuple[str, str], str | None] = {}
_probe_lock = threading.Lock()
#: Concurrent ``ListObjectsV2`` requests of a tree listing (one prefix each).
LIST_CONCURRENCY = 32
#: Keys per ``ListObjectsV2`` page (S3's maximum).
LIST_PAGE_KEYS = 1000
#: Concurrent ``DeleteObjects`` requests (of :data:`~.base.DELETE_BATCH` keys each).
DELETE_CONCURRENCY = 16
#: The raw ``ListObjectsV2`` body of the current listing request, for :func:`_keep_raw_listing`.
_RAW_LISTING: ContextVar[list[bytes] | None] = ContextVar("_RAW_LISTING", default=None)
_RAW_HANDLER_ID = "airflow-delta-provider-raw-listing"
#: The body of the current ``DeleteObjects`` request, for :func:`_use_delete_body`.
_DELETE_BODY: ContextVar[bytes | None] = ContextVar("_DELETE_BODY", default=None)
_BODY_HANDLER_ID = "airflow-delta-provider-delete-body"
_DROP_HANDLER_ID = "airflow-delta-provider-drop-deleted"
_DELETED = re.compile(rb"<Deleted>.*?</Deleted>", re.DOTALL)
_S3_XMLNS = "http://s3.amazonaws.com/doc/2006-03-01/"
_CONTENTS = re.compile(rb"<Contents>.*?</Contents>", re.DOTALL)
# Element text holds no "<" (XML escapes it): [^<]* scans twice as fast as a lazy .*?; a page
# whose elements do not match (CDATA) fails the count check below instead of losing keys.
_KEY = re.compile(rb"<Key>([^<]*)</Key>")
_MODIFIED = re.compile(rb"<LastModified>([^<]*)</LastModified>")
_SIZE = re.compile(rb"<Size>(\d+)</Size>")
#: Elements of a ``ListObjectsV2`` page other than its objects.
_PAGE_TAGS = (
    b"<CommonPrefixes>",
    b"<IsTruncated>",
    b"<NextContinuationToken>",
    b"<KeyCount>",
    b"<Name>",
    b"<Prefix>",
    b"<EncodingType>",
)


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

        options = dict(self.storage_options)
        # botocore's connection pool holds 10 connections unless told otherwise: the listing's
        # LIST_CONCURRENCY requests (and DELETE_CONCURRENCY deletes) would wait for one of them.
        config = dict(options.get("config_kwargs") or {})
        config.setdefault("max_pool_connections", max(LIST_CONCURRENCY, DELETE_CONCURRENCY))
        options["config_kwargs"] = config
        try:
            return fsspec.filesystem("s3", **options)
        except ImportError as err:
            raise StorageError(
                "Reading s3:// tables needs s3fs: pip install 'airflow-delta-provider[s3]'."
            ) from err

    def _call(self, method: str, **kwargs: Any) -> Any:
        from fsspec.asyn import sync

        fs: Any = self.fs
        return sync(fs.loop, s3_call, fs, method, **kwargs)

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

    def list_tree(self, hidden: Callable[[str], bool], skip: Container[str] = frozenset()) -> TreeListing:
        """The table root without hidden names; every prefix listed concurrently (see the module)."""
        self.fs.invalidate_cache()
        listing: TreeListing = self._run(self._list_tree_async(hidden))
        return listing

    def _run(self, coroutine: Coroutine[Any, Any, Any]) -> Any:
        """Run a coroutine on s3fs's event loop (from a thread that is not that loop's)."""
        from fsspec.asyn import sync

        fs: Any = self.fs

        async def run() -> Any:
            return await coroutine

        return sync(fs.loop, run)

    async def _list_tree_async(self, hidden: Callable[[str], bool]) -> TreeListing:
        fs: Any = self.fs
        await fs.set_session()
        # On "before-parse.*", botocore calls it before its own S3 hooks, which parse the body once
        # more (to look for an error in a 200 answer) and then get the page without its objects.
        fs.s3.meta.events.register("before-parse.*", _keep_raw_listing, unique_id=_RAW_HANDLER_ID)
        root = self.root.rstrip("/")
        bucket, _, root_key = root.partition("/")
        key_prefix = root_key + "/" if root_key else ""
        cut = len(key_prefix)
        listing = TreeListing()
        files = listing.files
        progress = Progress(self.root_uri, 0, verb="Listing")
        limit = asyncio.Semaphore(LIST_CONCURRENCY)
        visible_directories: dict[str, bool] = {"": True}
        stamps: dict[bytes, int] = {}

        def visible_directory(directory: str) -> bool:
            known = visible_directories.get(directory)
            if known is None:
                parent, _, name = directory.rpartition("/")
                known = visible_directory(parent) and not hidden(name)
                visible_directories[directory] = known
            return known

        # Names that do not start with one of these are not hidden (HiddenNames says so); any
        # other rule is asked for every name.
        may_hide: tuple[str, ...] = getattr(hidden, "hidden_starts", None) or ("",)

        def keep(keys: list[str], sizes: list[int], modified: list[bytes], within: tuple[str, ...]) -> None:
            # Once per listed object (a million on large tables): the directory's visibility is
            # asked once per run of keys in it (pages are sorted), times parsed once per value.
            last_directory, last_visible = None, False
            for key, size, raw_time in zip(keys, sizes, modified, strict=True):
                if not key.startswith(within):
                    continue
                directory, _, name = key.rpartition("/")
                if not name or (name.startswith(may_hide) and hidden(name)):
                    continue  # a "directory" marker, or a hidden name
                if directory != last_directory:
                    last_directory, last_visible = directory, visible_directory(directory[cut:])
                if not last_visible:
                    continue
                stamp = stamps.get(raw_time)
                if stamp is None:
                    stamp = stamps[raw_time] = _millis(raw_time)
                files.append((key[cut:], size, stamp))
            progress.advance(len(keys))

        async def pages(prefixes: list[str], delimiter: bool) -> list[str]:
            """Every page of neighbouring prefixes (sorted), as one key range; returns the common
            prefixes (delimiter listings, one prefix)."""
            first, last = prefixes[0], prefixes[-1]
            # A key prefix, character by character (not a path): "t/p=1" and "t/p=2" share "t/p=".
            common = os.path.commonprefix(prefixes)  # noqa: RUF071
            kwargs: dict[str, Any] = {"Prefix": common, "MaxKeys": LIST_PAGE_KEYS}
            if len(prefixes) > 1:
                kwargs["StartAfter"] = first[:-1] + chr(ord(first[-1]) - 1)  # below every key of `first`
            if delimiter:
                kwargs["Delimiter"] = "/"
            end = last[:-1] + chr(ord(last[-1]) + 1)  # above every key of `last`
            within = (key_prefix,) if delimiter else tuple(prefixes)
            folders: list[str] = []
            while True:
                async with limit:
                    page, raw = await self._list_page(bucket, kwargs)
                keys, sizes, modified = _page_objects(page, raw)
                keep(keys, sizes, modified, within)
                folders.extend(p["Prefix"] for p in page.get("CommonPrefixes") or ())
                if not page.get("IsTruncated") or (keys and keys[-1] >= end):
                    return folders
                kwargs["ContinuationToken"] = page["NextContinuationToken"]
                kwargs.pop("StartAfter", None)

        frontier = [key_prefix]
        for _ in range(LIST_EXPAND_DEPTH):
            levels = await asyncio.gather(*(pages([prefix], True) for prefix in frontier))
            frontier = [
                folder
                for folders in levels
                for folder in folders
                if folder.startswith(key_prefix) and visible_directory(folder[cut:].rstrip("/"))
            ]
            if not frontier or len(frontier) >= LIST_CONCURRENCY:
                break
        # Neighbouring prefixes are listed together as one key range (LIST_CONCURRENCY ranges):
        # full pages, where 100 prefixes of 1,010 keys would cost 200 requests listed one by one.
        frontier.sort()
        size = max(1, -(-len(frontier) // LIST_CONCURRENCY))
        ranges = [frontier[i : i + size] for i in range(0, len(frontier), size)]
        await asyncio.gather(*(pages(prefixes, False) for prefixes in ranges))
        progress.finish()
        return listing

    async def _list_page(self, bucket: str, kwargs: dict[str, Any]) -> tuple[dict[str, Any], bytes | None]:
        """One ``ListObjectsV2`` page and its raw body (None when the hook did not see it)."""
        fs: Any = self.fs
        holder: list[bytes] = []
        token = _RAW_LISTING.set(holder)
        try:
            page: dict[str, Any] = await s3_call(fs, "list_objects_v2", Bucket=bucket, **kwargs)
        finally:
            _RAW_LISTING.reset(token)
        return page, holder[-1] if holder else None

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

    # --- deletes: DeleteObjects batches (scheduled by :mod:`.deletes`) -----------------------

    store_name = "S3"
    single_deletes = True
    delete_advice = (
        "Check the credentials' s3:DeleteObject permission (and any object lock or legal hold) and run again."
    )

    def _delete_concurrency(self, paths: Sequence[str]) -> int:
        return DELETE_CONCURRENCY

    async def _send_delete_batch(self, paths: Sequence[str]) -> Mapping[str, str]:
        """One ``DeleteObjects`` (``Quiet``: S3 names only the keys it refused; S3 deletes are
        idempotent and do not say whether a key existed, so the others count as deleted)."""
        fs: Any = self.fs
        await fs.set_session()
        events = fs.s3.meta.events
        events.register("before-call.s3.DeleteObjects", _use_delete_body, unique_id=_BODY_HANDLER_ID)
        events.register("before-parse.s3.DeleteObjects", _drop_deleted, unique_id=_DROP_HANDLER_ID)
        bucket = paths[0].partition("/")[0]
        keys = [path[len(bucket) + 1 :] for path in paths]
        # botocore validates and serialises 1,000 keys in ~20 ms of CPU per request (ElementTree);
        # the body is written here in one join instead, and botocore is handed a one-key request
        # whose body the hook replaces before botocore computes the checksum and signs it.
        token = _DELETE_BODY.set(delete_objects_body(keys))
        try:
            response = await s3_call(
                fs, "delete_objects", Bucket=bucket, Delete={"Objects": [{"Key": keys[0]}], "Quiet": True}
            )
        except OSError as err:  # s3fs's form of a ClientError; the response is the cause
            response_of = getattr(err.__cause__, "response", None) or {}
            code = response_of.get("Error", {}).get("Code")
            status = response_of.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if code in _BATCH_REFUSED or status in (405, 501):
                # An S3-compatible store without DeleteObjects (GCS's XML API, some gateways).
                raise BatchRefused(f"DeleteObjects answered {status} {code}") from err
            raise
        finally:
            _DELETE_BODY.reset(token)
        answers = dict.fromkeys(paths, DELETED)
        for error in response.get("Errors") or ():
            answers[f"{bucket}/{error.get('Key')}"] = f"{error.get('Code')}: {error.get('Message')}"
        return answers

    async def _delete_one(self, path: str) -> bool:
        fs: Any = self.fs
        bucket, _, key = path.partition("/")
        await s3_call(fs, "delete_object", Bucket=bucket, Key=key)
        return True

    def _remove_directory(self, directory: str) -> None:
        """Key prefixes vanish with their last object; there is nothing to remove."""


def _objects(bucket: str, page: Mapping[str, Any]) -> Iterator[FileInfo]:
    """The objects of one ``ListObjectsV2`` page (without "directory" marker keys)."""
    for obj in page.get("Contents", []):
        key = obj["Key"]
        if not key.endswith("/"):
            yield FileInfo(f"{bucket}/{key}", int(obj["Size"]), to_millis(obj["LastModified"]))


def delete_objects_body(keys: Sequence[str]) -> bytes:
    """The ``DeleteObjects`` body (``Quiet``) for ``keys``, byte for byte as botocore writes it
    (its serialiser, then its ``escape_xml_payload`` for ``\\r`` and ``\\n``)."""
    objects = "".join(f"<Object><Key>{_xml_text(key)}</Key></Object>" for key in keys)
    return f'<Delete xmlns="{_S3_XMLNS}">{objects}<Quiet>true</Quiet></Delete>'.encode()


def _xml_text(text: str) -> str:
    if "&" in text or "<" in text or ">" in text:
        text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    if "\r" in text or "\n" in text:
        text = text.replace("\r", "&#xD;").replace("\n", "&#xA;")
    return text


def _use_delete_body(params: dict[str, Any], model: Any = None, **_: Any) -> None:
    """botocore ``before-call`` hook: the core's own ``DeleteObjects`` requests (the context holds
    a body) get the body :func:`delete_objects_body` wrote; the checksum and the signature are
    computed after this, from it."""
    body = _DELETE_BODY.get()
    if body is not None and getattr(model, "name", None) == "DeleteObjects":
        params["body"] = body


def _drop_deleted(response_dict: dict[str, Any], **_: Any) -> None:
    """botocore ``before-parse`` hook: the answer to the core's own (``Quiet``) ``DeleteObjects``
    keeps only its ``<Error>`` elements. S3 sends nothing else in quiet mode; stores that list
    every deleted key anyway (moto) would cost ~15 ms of botocore parsing per 1,000 keys."""
    body = response_dict.get("body")
    if _DELETE_BODY.get() is None or response_dict.get("status_code") != 200 or not isinstance(body, bytes):
        return
    if b"<Deleted>" in body:
        response_dict["body"] = _DELETED.sub(b"", body)


def _keep_raw_listing(response_dict: dict[str, Any], operation_model: Any = None, **_: Any) -> None:
    """botocore ``before-parse`` hook: for the core's own ``ListObjectsV2`` requests (the context
    holds a sink), keep the body and leave botocore only the page without its objects."""
    sink = _RAW_LISTING.get()
    body = response_dict.get("body")
    if (
        sink is None
        or getattr(operation_model, "name", None) != "ListObjectsV2"
        or response_dict.get("status_code") != 200
        or not isinstance(body, bytes)
    ):
        return
    sink.append(body)
    first, last = body.find(b"<Contents>"), body.rfind(b"</Contents>")
    if first < 0 or last < 0:
        return
    end = last + len(b"</Contents>")
    stripped = body[:first] + body[end:]
    response_dict["body"] = stripped if _only_contents(body, first, end) else _CONTENTS.sub(b"", body)


def _only_contents(body: bytes, first: int, end: int) -> bool:
    """Whether ``body[first:end]`` holds nothing but ``<Contents>`` elements (no other element
    of the page sits between them), checked without parsing."""
    return all(body.find(tag, first, end) < 0 for tag in _PAGE_TAGS)


def _page_objects(page: Mapping[str, Any], raw: bytes | None) -> tuple[list[str], list[int], list[bytes]]:
    """(keys, sizes, raw LastModified values) of one ``ListObjectsV2`` page.

    From the raw body when there is one (keys XML-unescaped, then URL-decoded when the page
    says ``EncodingType`` url, as botocore would), else from botocore's parsed page.
    """
    if raw is None:
        contents = page.get("Contents") or ()
        return (
            [obj["Key"] for obj in contents],
            [int(obj["Size"]) for obj in contents],
            [obj["LastModified"].isoformat().encode() for obj in contents],
        )
    keys = _KEY.findall(raw)
    modified = _MODIFIED.findall(raw)
    sizes = _SIZE.findall(raw)
    count = raw.count(b"<Contents>")
    if not len(keys) == len(modified) == len(sizes) == count:
        raise StorageError(
            f"Unexpected ListObjectsV2 page from S3: {count} <Contents> with {len(keys)} <Key>, "
            f"{len(modified)} <LastModified> and {len(sizes)} <Size>. Report this store's response format."
        )
    url = b"<EncodingType>url</EncodingType>" in raw
    directories: dict[bytes, str] = {}
    names = []
    for key in keys:
        directory, slash, name = key.rpartition(b"/")
        decoded = directories.get(directory)
        if decoded is None:
            decoded = directories[directory] = _decode_key(directory, url) + "/" if slash else ""
        names.append(decoded + _decode_key(name, url))
    return names, list(map(int, sizes)), modified


def _decode_key(raw: bytes, url: bool) -> str:
    """A key (or part of one) as it is: XML entities resolved, then URL-decoded (as botocore
    does for ``EncodingType`` url)."""
    text = raw.decode()
    if "&" in text:
        text = html.unescape(text)
    if url and ("%" in text or "+" in text):
        text = unquote_plus(text)
    return text


def _millis(value: bytes) -> int:
    """Epoch milliseconds of an ISO 8601 ``LastModified`` (``2026-11-23T17:00:00.000Z``)."""
    text = value.decode().strip()
    return to_millis(datetime.fromisoformat(text.replace("Z", "+00:00")))
