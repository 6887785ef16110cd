"""VACUUM on an S3 server: the core against delta-rs ``vacuum()`` in the same run.

The server is moto's S3 (the tests' server) on loopback, threaded, run by this script in its
own process (``--serve``, see :func:`serve`): its backend is filled in-process (1M objects in
minutes instead of hours of PUTs), ``ListObjectsV2`` is answered from a sorted index (moto's
own listing costs O(objects) per page; ``--plain-listing`` keeps it), and ``--latency-ms``
makes every request wait like a remote store's. The server reports its requests and CPU time
per run: when it is busy for most of a run it, not the client, sets the time.

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
[--latency-ms 0] [--plain-listing] [--write]`` (``--write`` appends the rows to the S3
section of ``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import json
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
LIVE_PER_PARTITION = 10
BUCKET = "bench"
PREFIX = "events"


def serve(port: int, latency_ms: float, indexed: bool) -> None:
    """The S3 server: moto's app on a threaded werkzeug server, in this process, with commands on stdin.

    moto's backend lives in this process (as in ``moto.server.ThreadedMotoServer``), so the
    orphans are created in it directly (``fill``), without one HTTP request each, and counted the
    same way (``count``). ``stats`` reports the requests served and the server's CPU seconds
    since the last ``stats``: a server busy for the whole run is what bounds both contenders.

    :param latency_ms: wait this long in every request before answering (without holding the
        GIL), as a remote store's per-request latency; 0 on loopback.
    :param indexed: answer ``ListObjectsV2`` from a sorted index of the bucket's keys (bisect to
        the prefix and the continuation token, O(page)), as S3 does; moto itself scans and sorts
        every key of the bucket for every page, O(objects) per page, which makes listing 1M
        objects take hours and would measure moto's algorithm instead of the clients.
    """
    import bisect
    import hashlib
    import threading
    import urllib.parse
    from xml.sax.saxutils import escape

    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from moto.s3.models import FakeDeleteMarker, s3_backends
    from werkzeug.serving import make_server

    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    lock = threading.Lock()
    state = {"requests": 0, "generation": 0}
    index: dict[str, tuple[int, list[str]]] = {}
    tokens: dict[str, str] = {}
    # Keys as EncodingType url lists them (botocore always asks for it, object_store never),
    # computed once per name, at fill time for the orphans: S3 pays no such cost per request.
    quoted_names: dict[str, str] = {}

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
            key = bucket.keys.get(name)
            if key is None or isinstance(key, FakeDeleteMarker):
                continue
            found.append(key)
            last = name
        return found, folders, None

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
            if not url:
                return escape(value)
            quoted = quoted_names.get(value)
            if quoted is None:
                quoted = quoted_names[value] = escape(urllib.parse.quote(value))
            return quoted

        found, folders, last = list_page(bucket, prefix, delimiter, after, max_keys)
        parts = [
            '<?xml version="1.0" encoding="UTF-8"?>'
            '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">'
            f"<Name>{escape(bucket.name)}</Name><Prefix>{text(prefix)}</Prefix>"
            f"<KeyCount>{len(found) + len(folders)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>"
            + (f"<Delimiter>{escape(delimiter)}</Delimiter>" if delimiter else "")
            + ("<EncodingType>url</EncodingType>" if url else "")
            + f"<IsTruncated>{'true' if last else 'false'}</IsTruncated>"
        ]
        if last:
            next_token = hashlib.md5(last.encode()).hexdigest()
            tokens[next_token] = last
            parts.append(f"<NextContinuationToken>{next_token}</NextContinuationToken>")
        parts.extend(
            f"<Contents><Key>{text(k.name)}</Key><LastModified>{k.last_modified_ISO8601}</LastModified>"
            f"<ETag>{escape(k.etag)}</ETag><Size>{k.size}</Size><StorageClass>STANDARD</StorageClass></Contents>"
            for k in found
        )
        parts.extend(f"<CommonPrefixes><Prefix>{text(f)}</Prefix></CommonPrefixes>" for f in folders)
        parts.append("</ListBucketResult>")
        body = "".join(parts).encode()
        start_response("200 OK", [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
        return [body]

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
        if latency_ms:
            time.sleep(latency_ms / 1000)
        if indexed:
            answer = list_objects_v2(environ, start_response)
            if answer is not None:
                return answer
        return app(environ, start_response)

    server = make_server("127.0.0.1", port, counted, threaded=True)
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
                name = f"{prefix}/p={i % partitions:03d}/orphan-{i:07d}.parquet"
                backend.put_object(bucket_name, name, b"x")
                quoted_names.setdefault(name, escape(urllib.parse.quote(name)))
            with lock:
                state["generation"] += 1
            # The sorted index is built here, not by the next run's first listing: otherwise
            # whoever runs first after a fill pays the sort (1-3 s of server CPU at 1M objects).
            names(backend.get_bucket(bucket_name))
            reply: dict[str, Any] = {"seconds": time.perf_counter() - started, "rss_mb": _rss_mb()}
        elif command == "count":  # count BUCKET PREFIX: (orphans, live data files)
            bucket = backend.get_bucket(arguments[0])
            names_now = [n for n in list(bucket.keys.keys()) if n.startswith(arguments[1] + "/p=")]
            files = [n.rsplit("/", 1)[-1] for n in names_now]
            reply = {
                "orphans": sum(f.startswith("orphan-") for f in files),
                "live": sum(f.startswith("live-") for f in files),
            }
        elif command == "stats":
            now = time.process_time()
            with lock:
                reply = {"requests": state["requests"], "server_cpu": now - cpu}
                state["requests"] = 0
            cpu = now
        else:
            reply = {"error": f"unknown command {command!r}"}
        print(json.dumps(reply), flush=True)
    server.shutdown()


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
    n = result.num_files
else:
    import deltalake
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    table = deltalake.DeltaTable(uri, storage_options=options)
    start, cpu = time.perf_counter(), time.process_time()
    n = len(table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=dry, full=True))
print(json.dumps({"seconds": time.perf_counter() - start, "cpu": time.process_time() - cpu, "files": n}))
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


def create_table(endpoint: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    import s3fs

    from airflow_delta_provider.core import DeltaTable

    options = {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}
    table = DeltaTable.create(
        f"s3://{BUCKET}/{PREFIX}",
        pa.schema([("id", pa.int64()), ("p", pa.string())]),
        partition_by=["p"],
        storage_options=options,
    )
    fs = s3fs.S3FileSystem(**options)
    files = []
    for p in range(PARTITIONS):
        for i in range(LIVE_PER_PARTITION):
            relative = f"p={p:03d}/live-{i:02d}.parquet"
            pq.write_table(
                pa.table({"id": pa.array([i], pa.int64())}), f"{BUCKET}/{PREFIX}/{relative}", filesystem=fs
            )
            files.append(relative)
    table.commit_files(files)


class Server:
    """The server process (:func:`serve`) and its stdin commands."""

    def __init__(self, latency_ms: float, indexed: bool) -> None:
        self.port = _free_port()
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--serve", str(self.port), "--latency-ms", str(latency_ms)]
            + ([] if indexed else ["--plain-listing"]),
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
        return self.command("fill", BUCKET, PREFIX, count, PARTITIONS)

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


def run(endpoint: str, who: str, dry: bool) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _RUN, endpoint, f"s3://{BUCKET}/{PREFIX}", "dry" if dry else "real", who],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3, help="dry-run pairs")
    parser.add_argument("--real", type=int, default=1, help="real (deleting) runs per contender")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="server wait per request")
    parser.add_argument("--plain-listing", action="store_true", help="moto's own O(objects) listing")
    parser.add_argument("--write", action="store_true")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency_ms, not args.plain_listing)
        return

    server = Server(args.latency_ms, not args.plain_listing)
    endpoint = server.endpoint
    results: dict[tuple[str, bool], list[dict[str, Any]]] = {}

    def timed(who: str, dry: bool) -> None:
        server.command("stats")
        r = run(endpoint, who, dry)
        r.update(server.command("stats"))
        assert r["files"] == args.objects, (who, r)
        if not dry:
            assert server.count() == (0, PARTITIONS * LIVE_PER_PARTITION), who
        results.setdefault((who, dry), []).append(r)
        print(
            f"{'dry ' if dry else 'real'} {who:8s} {r['seconds']:7.2f} s  client cpu {r['cpu']:6.2f} s  "
            f"server: {r['requests']} requests, cpu {r['server_cpu']:.2f} s",
            flush=True,
        )

    try:
        _client(endpoint).create_bucket(Bucket=BUCKET)
        create_table(endpoint)
        filled = server.fill(args.objects)
        seconds, rss = filled["seconds"], filled["rss_mb"]
        print(f"created {args.objects} orphans in {seconds:.1f} s (server rss {rss:.0f} MB)", flush=True)
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
        rows.append(
            f"| {args.objects:,} | {args.latency_ms:g} ms | {'dry run' if dry else 'real'} | {core:.2f} s | "
            f"{rs:.2f} s | **{core / rs:.2f}x** | {len(mine)} | "
            f"{statistics.median(r['requests'] for r in mine):.0f} / "
            f"{statistics.median(r['requests'] for r in theirs):.0f} | "
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
filled in-process, `ListObjectsV2` from a sorted index) on loopback, core vs delta-rs
`vacuum(full=True)` in the same run, each in a fresh process, pairs interleaved. Medians;
ratio = core / delta-rs (goal <= 0.5x); latency = the server's wait per request; server busy =
server CPU / run time. See [vacuum.md](vacuum.md) for the reading.

"""
_HEADER = """\
| objects | latency | run | core | delta-rs | ratio | runs | requests core / delta-rs | server busy |
|---|---|---|---|---|---|---|---|---|
"""


if __name__ == "__main__":
    main()
