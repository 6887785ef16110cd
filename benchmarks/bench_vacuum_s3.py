"""VACUUM on an S3 server: the core against delta-rs ``vacuum()`` in the same run.

The server is moto's S3 (the tests' server) on loopback, threaded, run by this script in its
own process (``--serve``, see :func:`serve`): its backend is filled in-process (1M objects in
minutes instead of hours of PUTs), ``ListObjectsV2`` is answered from a sorted index (moto's
own listing costs O(objects) per page) and the hot requests (``ListObjectsV2``,
``DeleteObjects``) by lean handlers whose answers a self-check compares with moto's before
every run (``--server indexed`` or ``moto`` for the earlier servers), and ``--latency-ms``
makes every request wait like a remote store's. The same server answers both contenders; it
reports its requests and CPU time per run: when it is busy for most of a run it, not the
client, sets the time.

The table: version 0 creates it, version 1 adds 1,000 live files (10 per partition, 100
partitions); then ``--objects`` untracked files (orphans of failed jobs, the files a FULL
VACUUM exists for) are created across the same 100 partition directories. Both contenders run
FULL with retention 0 (the check switched off: the orphans are seconds old), in a fresh Python
process each; imports and the first table load are excluded from the timing (delta-rs loads
the table in its constructor; the core loads it once before the timer and again, warm, inside
``vacuum()``):

- ``core``: ``DeltaTable(uri, options).vacuum(retention=0, enforce_retention_duration=False)``:
  every prefix listed concurrently on s3fs's event loop, ``DeleteObjects`` of 1,000 keys, 16
  at a time.
- ``delta-rs``: ``DeltaTable(uri, storage_options).vacuum(retention_hours=0,
  enforce_retention_duration=False, full=True)``.

Dry runs (listing only) are repeated in interleaved pairs on the same objects; each real run
deletes the orphans, so they are created again before every real run (pairs interleaved, the
order alternating). Every run is checked: all orphans listed (dry run) or gone (real), the
1,000 live files left.

Usage: ``python benchmarks/bench_vacuum_s3.py [--objects 100000] [--repeat 3] [--real 1]
[--latency-ms 0] [--server lean|indexed|moto] [--flat] [--profile DIR] [--write]``
(``--write`` appends the rows to the S3 section of ``benchmarks/README.md``; ``--profile``
samples the server with py-spy during each run).
"""

from __future__ import annotations

import argparse
import json
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
SECTION = "## VACUUM on an S3 server (object-store listing and deletes)"
PARTITIONS = 100
LIVE_FILES = 1000
BUCKET = "bench"
PREFIX = "events"


SERVER_MODES = ("lean", "indexed", "moto")


def serve(port: int, latency_ms: float, mode: str) -> None:
    """The S3 server: moto's app on a threaded werkzeug server, in this process, with commands on stdin.

    moto's backend lives in this process (as in ``moto.server.ThreadedMotoServer``), so the
    orphans are created in it directly (``fill``), without one HTTP request each, and counted the
    same way (``count``). ``stats`` reports the requests served and the server's CPU seconds
    since the last ``stats``: a server busy for the whole run is what bounds both contenders.
    ``mode`` switches the lean handlers below at run time (``mode lean|indexed|moto``: the
    benchmark's self-check compares their answers with moto's own).

    :param latency_ms: wait this long in every request before answering (without holding the
        GIL), as a remote store's per-request latency; 0 on loopback.
    :param mode: ``moto``: moto answers everything (its listing scans and sorts every key of the
        bucket for every page, O(objects) per page: listing 1M objects takes hours and measures
        moto's algorithm instead of the clients). ``indexed``: ``ListObjectsV2`` from a sorted
        index of the keys (bisect to the prefix and the token, O(page), as S3). ``lean``
        (default): also each object's ``<Contents>`` element written once (moto formats the
        time and hashes the body per object and page: ~80% of a page's CPU), and
        ``DeleteObjects`` parsed with one expression and answered as S3 does (moto parses the
        body with xmltodict and serialises every ``<Deleted>`` through its botocore-model
        serializer even when ``Quiet``: ~70 ms of CPU per 1,000 keys); the objects are still
        deleted by moto's backend (``delete_objects``). Requests these handlers do not cover
        (versions, policies, CDATA, other operations) go to moto unchanged.
    """
    import bisect
    import gc
    import hashlib
    import html
    import io
    import logging
    import re
    import threading
    import urllib.parse
    from xml.sax.saxutils import escape

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.s3.models import FakeDeleteMarker, s3_backends
    from werkzeug.serving import WSGIRequestHandler, make_server

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    lock = threading.Lock()
    state: dict[str, Any] = {"requests": 0, "generation": 0, "mode": mode, "lean": 0, "latency": latency_ms}
    index: dict[str, tuple[int, list[str]]] = {}
    tokens: dict[str, str] = {}
    # Each object's <Contents> element (plain and url-encoded key), written once per object
    # (checked against the object itself, so a rewritten key gets a new one): S3 pays no per
    # request formatting of times and ETags.
    contents: dict[str, tuple[Any, str, str]] = {}
    xmlns = "http://s3.amazonaws.com/doc/2006-03-01/"

    def names(bucket: Any) -> list[str]:
        with lock:
            generation = state["generation"]
            cached = index.get(bucket.name)
            if cached is not None and cached[0] == generation:
                return cached[1]
        listed = sorted(bucket.keys.keys())
        with lock:
            index[bucket.name] = (generation, listed)
        return listed

    def element(key: Any, url: bool) -> str:
        cached = contents.get(key.name)
        if cached is None or cached[0] is not key:
            checksum = key.checksum_algorithm
            tail = (
                f"</Key><LastModified>{key.last_modified_ISO8601}</LastModified><ETag>{escape(key.etag)}</ETag>"
                + (f"<ChecksumAlgorithm>{checksum}</ChecksumAlgorithm>" if checksum else "")
                + f"<Size>{key.size}</Size><StorageClass>{key.storage_class}</StorageClass></Contents>"
            )
            cached = contents[key.name] = (
                key,
                f"<Contents><Key>{escape(key.name)}{tail}",
                f"<Contents><Key>{escape(urllib.parse.quote(key.name))}{tail}",
            )
        return cached[2] if url else cached[1]

    def list_page(
        bucket: Any, prefix: str, delimiter: str, after: str, max_keys: int
    ) -> tuple[list[Any], list[str], str | None]:
        """(keys, common prefixes, last name when truncated) of one page, from the sorted index."""
        keys = names(bucket)
        position = bisect.bisect_left(keys, prefix)
        if after:
            position = max(position, bisect.bisect_right(keys, after))
            if delimiter and after.endswith(delimiter):  # a common prefix: skip what it holds
                position = max(position, bisect.bisect_left(keys, after[:-1] + chr(ord(delimiter) + 1)))
        found: list[Any] = []
        folders: list[str] = []
        last = ""
        if not delimiter:  # the keys in order, those deleted since the index was built skipped
            end = bisect.bisect_left(keys, prefix[:-1] + chr(ord(prefix[-1]) + 1)) if prefix else len(keys)
            store = bucket.keys
            while position < end:
                if len(found) == max_keys:
                    return found, folders, last
                for name in keys[position : min(end, position + max_keys - len(found))]:
                    position += 1
                    versions = dict.get(store, name)  # moto's own .get costs three Python calls
                    if versions and not isinstance(versions[-1], FakeDeleteMarker):
                        found.append(versions[-1])
                        last = name
            return found, folders, None
        while position < len(keys) and keys[position].startswith(prefix):
            if len(found) + len(folders) == max_keys:
                return found, folders, last
            name = keys[position]
            rest = name[len(prefix) :]
            if delimiter and delimiter in rest:
                last = prefix + rest.split(delimiter, 1)[0] + delimiter
                folders.append(last)
                position = bisect.bisect_left(keys, last[:-1] + chr(ord(delimiter) + 1), position)
                continue
            position += 1
            versions = dict.get(bucket.keys, name)  # moto's own .get costs three Python calls
            key = versions[-1] if versions else None
            if key is None or isinstance(key, FakeDeleteMarker):
                continue
            found.append(key)
            last = name
        return found, folders, None

    def answer(start_response: Any, body: bytes) -> list[bytes]:
        start_response("200 OK", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]

    def list_objects_v2(environ: dict[str, Any], start_response: Any) -> list[bytes] | None:
        """ListObjectsV2 answered from the index, the XML written directly (moto's serializer
        costs ~0.25 ms of CPU per listed object); None for anything else."""
        query = urllib.parse.parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        path = environ.get("PATH_INFO", "").strip("/")
        if (
            environ.get("REQUEST_METHOD") != "GET"
            or query.get("list-type") != ["2"]
            or not path
            or "/" in path
        ):
            return None
        try:
            bucket = backend.get_bucket(path)
        except Exception:
            return None
        first = {k: v[0] for k, v in query.items()}
        prefix, delimiter = first.get("prefix", ""), first.get("delimiter", "")
        token = first.get("continuation-token")
        after = tokens.get(token, "") if token else first.get("start-after", "")
        max_keys = int(first.get("max-keys", "1000"))
        url = first.get("encoding-type") == "url"

        def text(value: str) -> str:
            return escape(urllib.parse.quote(value) if url else value)

        found, folders, last = list_page(bucket, prefix, delimiter, after, max_keys)
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>'
            f'<ListBucketResult xmlns="{xmlns}">'
            f"<Name>{escape(bucket.name)}</Name><Prefix>{text(prefix)}</Prefix>"
            f"<KeyCount>{len(found) + len(folders)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>"
            + (f"<Delimiter>{escape(delimiter)}</Delimiter>" if delimiter else "")
            + ("<EncodingType>url</EncodingType>" if url else "")
            + f"<IsTruncated>{'true' if last else 'false'}</IsTruncated>"
            + (f"<StartAfter>{escape(after)}</StartAfter>" if after and not token else "")  # as moto
        ]
        if last:
            next_token = hashlib.md5(last.encode()).hexdigest()
            tokens[next_token] = last
            parts.append(f"<NextContinuationToken>{next_token}</NextContinuationToken>")
        if state["mode"] == "lean":
            parts.extend(element(k, url) for k in found)
        else:  # as before the lean handlers: formatted per object and page
            parts.extend(
                f"<Contents><Key>{text(k.name)}</Key><LastModified>{k.last_modified_ISO8601}</LastModified>"
                f"<ETag>{escape(k.etag)}</ETag><Size>{k.size}</Size><StorageClass>{k.storage_class}</StorageClass>"
                "</Contents>"
                for k in found
            )
        parts.extend(f"<CommonPrefixes><Prefix>{text(f)}</Prefix></CommonPrefixes>" for f in folders)
        parts.append("</ListBucketResult>")
        return answer(start_response, "".join(parts).encode())

    delete_key = re.compile(rb"<Object>\s*<Key>([^<]*)</Key>\s*</Object>")
    quiet_true = re.compile(rb"<Quiet>\s*true\s*</Quiet>", re.IGNORECASE)

    def delete_objects(environ: dict[str, Any], start_response: Any) -> list[bytes] | None:
        """DeleteObjects of an unversioned bucket without a policy: the keys read with one
        expression, deleted by moto's backend, answered as S3 does (``Quiet``: only errors).
        None (the body put back) for anything else."""
        query = environ.get("QUERY_STRING", "")
        path = environ.get("PATH_INFO", "").strip("/")
        length = environ.get("CONTENT_LENGTH")
        if (
            environ.get("REQUEST_METHOD") != "POST"
            or query not in ("delete", "delete=")
            or not path
            or "/" in path
            or not length
            or "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "")
            or "aws-chunked" in environ.get("HTTP_CONTENT_ENCODING", "")
        ):
            return None
        body = environ["wsgi.input"].read(int(length))
        environ["wsgi.input"] = io.BytesIO(body)  # for moto, should this not be ours
        try:
            bucket = backend.get_bucket(path)
        except Exception:
            return None
        keys = [html.unescape(k.decode()) for k in delete_key.findall(body)]
        if (
            bucket.is_versioned
            or bucket.policy
            or getattr(bucket, "object_lock_enabled", False)
            or not keys
            or len(keys) != body.count(b"<Object>")
            or b"<![CDATA[" in body
        ):
            return None
        deleted, refused = backend.delete_objects(bucket.name, [{"Key": k} for k in keys])
        parts = ['<?xml version="1.0" encoding="UTF-8"?>', f'<DeleteResult xmlns="{xmlns}">']
        if not quiet_true.search(body):
            parts.extend(f"<Deleted><Key>{escape(name)}</Key></Deleted>" for name, _, _ in deleted)
        parts.extend(
            f"<Error><Key>{escape(name)}</Key><Code>AccessDenied</Code>"
            "<Message>Access Denied because object protected by object lock.</Message></Error>"
            for name in refused
        )
        parts.append("</DeleteResult>")
        return answer(start_response, "".join(parts).encode())

    app = DomainDispatcherApplication(create_backend_app)

    def counted(environ: dict[str, Any], start_response: Any) -> Any:
        method = environ.get("REQUEST_METHOD")
        # Deletions leave the sorted index valid (a listed name no longer in the bucket is
        # skipped); only writes that may add keys rebuild it (a sort of every key), so a listing
        # that overlaps deletions pays no rebuild per page.
        deleting = method == "DELETE" or (method == "POST" and "delete" in environ.get("QUERY_STRING", ""))
        with lock:
            state["requests"] += 1
            if method not in ("GET", "HEAD") and not deleting:
                state["generation"] += 1
            current, latency = state["mode"], state["latency"]
        if latency:
            time.sleep(latency / 1000)
        if current != "moto":
            listed = list_objects_v2(environ, start_response)
            if listed is not None:
                return listed
        if current == "lean":
            done = delete_objects(environ, start_response)
            if done is not None:
                with lock:
                    state["lean"] += 1
                return done
        return app(environ, start_response)

    # No access log line per request (formatted and written under the logging lock).
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = make_server(
        "127.0.0.1", port, counted, threaded=True, request_handler=_handler(WSGIRequestHandler)
    )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("ready", flush=True)
    cpu = time.process_time()
    for line in sys.stdin:
        command, *arguments = line.split()
        if command == "fill":  # fill BUCKET PREFIX COUNT PARTITIONS
            bucket_name, prefix, count, partitions = (
                arguments[0],
                arguments[1],
                int(arguments[2]),
                int(arguments[3]),
            )
            started = time.perf_counter()
            for i in range(count):
                name = (
                    f"{prefix}/p={i % partitions:03d}/orphan-{i:07d}.parquet"
                    if partitions
                    else f"{prefix}/orphan-{i:07d}.parquet"
                )
                backend.put_object(bucket_name, name, b"x")
            with lock:
                state["generation"] += 1
            # The sorted index and the objects' elements are built here, not by the next run's
            # first listing: otherwise whoever runs first after a fill pays for them (1-3 s of
            # server CPU at 1M objects).
            bucket = backend.get_bucket(bucket_name)
            for name in names(bucket):
                key = bucket.keys.get(name)
                if key is not None and not isinstance(key, FakeDeleteMarker):
                    element(key, False)
            # The garbage collector's full passes over millions of objects (seconds of CPU) would
            # fall on whichever run triggers one: collected here, the filled objects frozen out.
            gc.collect()
            gc.freeze()
            reply: dict[str, Any] = {"seconds": time.perf_counter() - started, "rss_mb": _rss_mb()}
        elif command == "count":  # count BUCKET PREFIX: (orphans, live data files)
            bucket = backend.get_bucket(arguments[0])
            names_now = [n for n in list(bucket.keys.keys()) if n.startswith(arguments[1] + "/")]
            files = [n.rsplit("/", 1)[-1] for n in names_now]
            reply = {
                "orphans": sum(f.startswith("orphan-") for f in files),
                "live": sum(f.startswith("live-") for f in files),
            }
        elif command == "latency":  # latency MS (the table is made before the wait is switched on)
            with lock:
                state["latency"] = float(arguments[0])
            reply = {"latency": state["latency"]}
        elif command == "mode":  # mode lean|indexed|moto
            with lock:
                state["mode"] = arguments[0]
            reply = {"mode": arguments[0]}
        elif command == "stats":
            now = time.process_time()
            with lock:
                reply = {
                    "requests": state["requests"],
                    "lean_deletes": state["lean"],
                    "server_cpu": now - cpu,
                }
                state["requests"] = state["lean"] = 0
            cpu = now
        else:
            reply = {"error": f"unknown command {command!r}"}
        print(json.dumps(reply), flush=True)
    server.shutdown()


def _handler(base: Any) -> Any:
    """werkzeug's request handler speaking HTTP/1.1: connections are kept alive between requests,
    as S3's are (werkzeug's default, HTTP/1.0, makes every request a new TCP connection and a
    new server thread, for both clients)."""

    class KeepAlive(base):  # type: ignore[misc, valid-type]
        protocol_version = "HTTP/1.1"

    return KeepAlive


def _rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


_RUN = """
import json, sys, time
endpoint, uri, dry, who = sys.argv[1], sys.argv[2], sys.argv[3] == "dry", sys.argv[4]
if who == "core":
    from airflow_delta_provider.core import DeltaTable
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    table = DeltaTable(uri, options)
    table.snapshot()  # as delta-rs's constructor: the table loaded (and the client made) untimed
    start, cpu = time.perf_counter(), time.process_time()
    result = table.vacuum(retention=0, enforce_retention_duration=False, dry_run=dry)
    files = result.files
else:
    import deltalake
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    table = deltalake.DeltaTable(uri, storage_options=options)
    start, cpu = time.perf_counter(), time.process_time()
    files = table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=dry, full=True)
seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
# The same files, whoever listed them: a digest of the names relative to the table root.
import hashlib
root = uri.rstrip("/") + "/"
names = sorted(f[len(root):] if f.startswith(root) else f for f in files)
digest = hashlib.sha256("\\n".join(names).encode()).hexdigest()
print(json.dumps({"seconds": seconds, "cpu": cpu, "files": len(names), "digest": digest}))
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _client(endpoint: str) -> Any:
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
        config=Config(max_pool_connections=32),
    )


def create_table(endpoint: str, partitions: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import s3fs

    from airflow_delta_provider.core import DeltaTable

    options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}
    table = DeltaTable.create(
        f"s3://{BUCKET}/{PREFIX}",
        pa.schema([("id", pa.int64()), ("p", pa.string())]),
        partition_by=["p"] if partitions else [],
        storage_options=options,
    )
    fs = s3fs.S3FileSystem(**options)
    files = []
    for p in range(partitions or 1):
        for i in range(LIVE_FILES // (partitions or 1)):
            relative = f"p={p:03d}/live-{i:02d}.parquet" if partitions else f"live-{i:04d}.parquet"
            pq.write_table(
                pa.table({"id": pa.array([i], pa.int64())}), f"{BUCKET}/{PREFIX}/{relative}", filesystem=fs
            )
            files.append(relative)
    table.commit_files(files)


class Server:
    """The server process (:func:`serve`) and its stdin commands."""

    def __init__(self, latency_ms: float, mode: str, partitions: int = PARTITIONS) -> None:
        self.port = _free_port()
        self.partitions = partitions
        self.process = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--serve",
                str(self.port),
                "--latency-ms",
                str(latency_ms),
                "--server",
                mode,
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None and self.process.stdout.readline().strip() == "ready"
        self.endpoint = f"http://127.0.0.1:{self.port}"

    def command(self, *words: object) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(" ".join(map(str, words)) + "\n")
        self.process.stdin.flush()
        return dict(json.loads(self.process.stdout.readline()))

    def fill(self, count: int) -> dict[str, Any]:
        return self.command("fill", BUCKET, PREFIX, count, self.partitions)

    def count(self) -> tuple[int, int]:
        reply = self.command("count", BUCKET, PREFIX)
        return int(reply["orphans"]), int(reply["live"])

    def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _profile(pid: int, directory: Path | None, name: str) -> subprocess.Popen[bytes] | None:
    """py-spy sampling the server process (every thread, idle ones left out) until SIGINT."""
    if directory is None:
        return None
    directory.mkdir(parents=True, exist_ok=True)
    existing = len(list(directory.glob(f"{name}-*.txt")))
    process = subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(pid),
            "--format",
            "raw",
            "--rate",
            "250",
            "--output",
            str(directory / f"{name}-{existing}.txt"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)  # attached before the run starts
    return process


def run(endpoint: str, who: str, dry: bool) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _RUN, endpoint, f"s3://{BUCKET}/{PREFIX}", "dry" if dry else "real", who],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


SELF_CHECK_KEYS = [
    "t/a b/x+y.parquet",
    "t/a b/50%.parquet",
    "t/c&d/<tag>&'\".parquet",
    "t/c&d/\u00fcn\u00ef c\u00f6d\u00e9.parquet",
    "t/dir/",
    "t/deep/er/z.parquet",
    "t/p=1/a.parquet",
    "t/p=1/b.parquet",
    "t/p=2/a.parquet",
    "t/top.parquet",
    "u/outside.parquet",
]


def self_check(server: Server) -> None:
    """The lean handlers answer what moto itself answers (as the clients see it on the wire):
    every ``ListObjectsV2`` page (with and without url encoding, delimiter, start-after, 3-key
    pages) and ``DeleteObjects`` (quiet and not, keys that exist and keys that do not, awkward
    names): the same elements and the same objects left. Only a quiet delete differs, as S3
    differs from moto: no ``<Deleted>`` list."""
    import urllib.request
    import xml.etree.ElementTree as ET

    s3 = _client(server.endpoint)
    bucket = "selfcheck"
    s3.create_bucket(Bucket=bucket)
    ns = "{http://s3.amazonaws.com/doc/2006-03-01/}"

    def fill() -> None:
        for key in SELF_CHECK_KEYS:
            s3.put_object(Bucket=bucket, Key=key, Body=key.encode())

    def page_elements(xml: bytes) -> list[tuple[str, str]]:
        elements = []
        for child in ET.fromstring(xml):
            tag = child.tag.replace(ns, "")
            if tag in ("NextContinuationToken", "ContinuationToken"):
                continue
            inner = tuple((c.tag.replace(ns, ""), c.text or "") for c in child)
            elements.append((tag, repr(inner) if inner else (child.text or "")))
        return sorted(elements)

    def listing(query: str) -> list[list[tuple[str, str]]]:
        pages, token = [], ""
        while True:
            url = f"{server.endpoint}/{bucket}?list-type=2&max-keys=3&{query}"
            if token:
                url += "&continuation-token=" + urllib.parse.quote(token)
            with urllib.request.urlopen(url) as response:
                body = response.read()
            pages.append(page_elements(body))
            found = ET.fromstring(body).find(f"{ns}NextContinuationToken")
            if found is None:
                return pages
            token = found.text or ""

    def deletion(quiet: bool) -> tuple[list[Any], list[Any], list[str]]:
        fill()
        objects = [{"Key": k} for k in [*SELF_CHECK_KEYS[:6], "t/missing.parquet"]]
        answer = s3.delete_objects(Bucket=bucket, Delete={"Objects": objects, "Quiet": quiet})
        left = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))
        deleted = sorted((d["Key"], d.get("VersionId")) for d in answer.get("Deleted", []))
        errors = sorted((e["Key"], e["Code"]) for e in answer.get("Errors", []))
        return deleted, errors, left

    import urllib.parse

    fill()
    queries = [
        q + e
        for q in (
            "prefix=t/",
            "prefix=t/&delimiter=/",
            "prefix=t/p%3D&start-after=t/p%3D1/a.parquet",
            "prefix=",
        )
        for e in ("", "&encoding-type=url")
    ]
    answers: dict[str, list[Any]] = {}
    for mode in ("moto", "lean"):  # listings first (nothing changes), then deletions
        server.command("mode", mode)
        parsed = s3.list_objects_v2(Bucket=bucket, Prefix="t/", Delimiter="/")
        parsed.pop("ResponseMetadata")
        answers[mode] = [[listing(q) for q in queries], parsed]
    for mode in ("moto", "lean"):
        server.command("mode", mode)
        answers[mode] += [deletion(False), deletion(True)]
    server.command("mode", "lean")
    moto, lean = answers["moto"], answers["lean"]
    for q, theirs, ours in zip(queries, moto[0], lean[0], strict=True):
        assert theirs == ours, f"ListObjectsV2 {q}: moto {theirs} != lean {ours}"
    assert moto[1] == lean[1], (moto[1], lean[1])
    assert moto[2] == lean[2], f"DeleteObjects: moto {moto[2]} != lean {lean[2]}"
    (_, moto_errors, moto_left), (lean_deleted, lean_errors, lean_left) = moto[3], lean[3]
    assert (moto_errors, moto_left) == (lean_errors, lean_left) and lean_deleted == [], (moto[3], lean[3])
    assert len(moto[2][0]) == 7 and len(moto[2][2]) == len(SELF_CHECK_KEYS) - 6, moto[2]
    print(
        f"self-check: lean answers = moto's for {len(queries)} listings "
        f"({sum(map(len, lean[0]))} pages) and 2 DeleteObjects",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="dry-run pairs")
    parser.add_argument("--real", type=int, default=1, help="real (deleting) runs per contender")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="server wait per request")
    parser.add_argument(
        "--server", choices=SERVER_MODES, default="lean", help="the server's handlers (see serve())"
    )
    parser.add_argument("--flat", action="store_true", help="an unpartitioned table (one prefix)")
    parser.add_argument("--write", action="store_true")
    parser.add_argument(
        "--profile", type=Path, help="py-spy the server during each run: collapsed stacks in this directory"
    )
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency_ms, args.server)
        return

    partitions = 0 if args.flat else PARTITIONS
    server = Server(0, args.server, partitions)
    endpoint = server.endpoint
    results: dict[tuple[str, bool], list[dict[str, Any]]] = {}
    listed: dict[str, str] = {}

    def timed(who: str, dry: bool) -> None:
        server.command("stats")
        profiler = _profile(server.process.pid, args.profile, f"{'dry' if dry else 'real'}-{who}")
        r = run(endpoint, who, dry)
        r.update(server.command("stats"))
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait()
        assert r["files"] == args.objects, (who, r)
        listed[who] = r["digest"]
        assert len(set(listed.values())) == 1, f"the contenders listed different files: {listed}"
        if not dry:
            assert server.count() == (0, LIVE_FILES), who
        results.setdefault((who, dry), []).append(r)
        print(
            f"{'dry ' if dry else 'real'} {who:8s} {r['seconds']:7.2f} s  client cpu {r['cpu']:6.2f} s  "
            f"server: {r['requests']} requests ({r['lean_deletes']} lean DeleteObjects), "
            f"cpu {r['server_cpu']:.2f} s",
            flush=True,
        )

    try:
        if args.server == "lean":
            self_check(server)
        _client(endpoint).create_bucket(Bucket=BUCKET)
        create_table(endpoint, partitions)
        filled = server.fill(args.objects)
        seconds, rss = filled["seconds"], filled["rss_mb"]
        print(f"created {args.objects} orphans in {seconds:.1f} s (server rss {rss:.0f} MB)", flush=True)
        server.command("latency", args.latency_ms)
        for i in range(args.repeat):
            for who in ("core", "delta-rs") if i % 2 == 0 else ("delta-rs", "core"):
                timed(who, dry=True)
        for i in range(args.real):
            for who in ("core", "delta-rs") if i % 2 == 0 else ("delta-rs", "core"):
                if server.count()[0] != args.objects:
                    server.fill(args.objects)
                timed(who, dry=False)
    finally:
        server.stop()

    rows = []
    for dry in (True, False):
        mine, theirs = results.get(("core", dry)), results.get(("delta-rs", dry))
        if not mine or not theirs:
            continue
        core = statistics.median(r["seconds"] for r in mine)
        rs = statistics.median(r["seconds"] for r in theirs)
        busy = statistics.median(r["server_cpu"] / r["seconds"] for r in mine + theirs)

        def cpu(runs: list[dict[str, Any]], field: str) -> str:
            low, high = min(r[field] for r in runs), max(r[field] for r in runs)
            return f"{low:.2f} s" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f} s"

        rows.append(
            f"| {args.objects:,}{' flat' if args.flat else ''} | {args.latency_ms:g} ms | "
            f"{'dry run' if dry else 'real'} | {core:.2f} s | "
            f"{rs:.2f} s | **{core / rs:.2f}x** | {len(mine)} | "
            f"{statistics.median(r['requests'] for r in mine):.0f} / "
            f"{statistics.median(r['requests'] for r in theirs):.0f} | "
            f"{cpu(mine, 'cpu')} / {cpu(theirs, 'cpu')} | "
            f"{cpu(mine, 'server_cpu')} / {cpu(theirs, 'server_cpu')} | "
            f"{busy:.0%} |"
        )
    print("\n".join(rows))
    if args.write:
        write(rows)


def write(rows: list[str]) -> None:
    text = README.read_text()
    if SECTION not in text:
        text = text.rstrip("\n") + "\n\n" + SECTION + "\n\n" + _INTRO + _HEADER
    README.write_text(text.rstrip("\n") + "\n" + "\n".join(rows) + "\n")


_INTRO = """\
`bench_vacuum_s3.py`: VACUUM FULL (retention 0, the check off) of N orphan objects across 100
partition prefixes plus 1,000 live files, on moto's S3 (threaded werkzeug server, its backend
filled in-process, lean `ListObjectsV2` and `DeleteObjects` handlers checked against moto's) on
loopback, core vs delta-rs
`vacuum(full=True)` in the same run, each in a fresh process, pairs interleaved. Medians;
ratio = core / delta-rs (goal <= 0.5x); latency = the server's wait per request; server busy =
server CPU / run time. See [vacuum.md](vacuum.md) for the reading.

"""
_HEADER = (
    "| objects | latency | run | core | delta-rs | ratio | runs | requests core / delta-rs | "
    "client CPU core / delta-rs | server CPU core / delta-rs | server busy |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|\n"
)


if __name__ == "__main__":
    main()
