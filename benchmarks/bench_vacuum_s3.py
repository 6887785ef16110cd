"""VACUUM on an S3 server: the core against delta-rs ``vacuum()`` in the same run.

The server is the tests' moto S3 server, started here on loopback, threaded (the tests run it
single-threaded so that conditional PUTs are atomic; no commit races here, and a
single-threaded server would serialise every client's requests, hiding what concurrency does).

The table: version 0 creates it, version 1 adds 1,000 live files (10 per partition, 100
partitions); then ``--objects`` untracked files (orphans of failed jobs, the files a FULL
VACUUM exists for) are uploaded across the same 100 partition directories. Both contenders run
FULL with retention 0 (the check switched off: the orphans are seconds old), in a fresh Python
process each (imports excluded from the timing):

- ``core``: ``DeltaTable(uri, options).vacuum(retention=0, enforce_retention_duration=False)``:
  listing in parallel over the partition prefixes, ``DeleteObjects`` of 1,000 keys, 8 at a time.
- ``delta-rs``: ``DeltaTable(uri, storage_options).vacuum(retention_hours=0,
  enforce_retention_duration=False, full=True)``.

Dry runs (listing only) are repeated in interleaved pairs on the same objects; each real run
deletes the orphans, so they are uploaded again before every real run (pairs interleaved, the
order alternating). Every run is checked: all orphans listed (dry run) or gone (real), the
1,000 live files left.

Usage: ``python benchmarks/bench_vacuum_s3.py [--objects 100000] [--repeat 3] [--write]``
(``--write`` appends the results to the S3 section of ``benchmarks/README.md``).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
SECTION = "## VACUUM on an S3 server (object-store listing and deletes)"
PARTITIONS = 100
LIVE_PER_PARTITION = 10
BUCKET = "bench"
PREFIX = "events"

_SERVER = """
import sys
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server
app = DomainDispatcherApplication(create_backend_app)
server = make_server("127.0.0.1", int(sys.argv[1]), app, threaded=True)
print("ready", flush=True)
server.serve_forever()
"""

_RUN = """
import json, sys, time
endpoint, uri, dry, who = sys.argv[1], sys.argv[2], sys.argv[3] == "dry", sys.argv[4]
if who == "core":
    from airflow_delta_provider.core import DeltaTable
    options = {"key": "testing", "secret": "testing",
               "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
    table = DeltaTable(uri, options)
    start = time.perf_counter()
    result = table.vacuum(retention=0, enforce_retention_duration=False, dry_run=dry)
    n = result.num_files
else:
    import deltalake
    options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
    table = deltalake.DeltaTable(uri, storage_options=options)
    start = time.perf_counter()
    n = len(table.vacuum(retention_hours=0, enforce_retention_duration=False, dry_run=dry, full=True))
print(json.dumps({"seconds": time.perf_counter() - start, "files": n}))
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


def upload_orphans(endpoint: str, count: int) -> float:
    client = _client(endpoint)
    keys = [f"{PREFIX}/p={i % PARTITIONS:03d}/orphan-{i:07d}.parquet" for i in range(count)]
    start = time.perf_counter()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda key: client.put_object(Bucket=BUCKET, Key=key, Body=b"x"), keys, chunksize=256))
    return time.perf_counter() - start


def count_objects(endpoint: str) -> tuple[int, int]:
    """(orphans, live data files) in the bucket."""
    paginator = _client(endpoint).get_paginator("list_objects_v2")
    orphans = live = 0
    for page in paginator.paginate(Bucket=BUCKET, Prefix=f"{PREFIX}/p="):
        for obj in page.get("Contents", []):
            name = obj["Key"].rsplit("/", 1)[-1]
            orphans += name.startswith("orphan-")
            live += name.startswith("live-")
    return orphans, live


def run(endpoint: str, who: str, dry: bool) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", _RUN, endpoint, f"s3://{BUCKET}/{PREFIX}", "dry" if dry else "real", who],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--objects", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--real", type=int, default=1, help="real (deleting) runs per contender")
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()

    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-c", _SERVER, str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert server.stdout is not None and server.stdout.readline().strip() == b"ready"
    endpoint = f"http://127.0.0.1:{port}"
    results: dict[tuple[str, bool], list[float]] = {}
    try:
        _client(endpoint).create_bucket(Bucket=BUCKET)
        create_table(endpoint)
        upload = upload_orphans(endpoint, args.objects)
        print(f"uploaded {args.objects} orphans in {upload:.1f} s", flush=True)
        for i in range(args.repeat):
            for who in ("core", "delta-rs") if i % 2 == 0 else ("delta-rs", "core"):
                r = run(endpoint, who, dry=True)
                assert r["files"] == args.objects, (who, r)
                results.setdefault((who, True), []).append(r["seconds"])
                print(f"dry  {who:8s} {r['seconds']:.2f} s", flush=True)
        for i in range(args.real):
            for who in ("core", "delta-rs") if i % 2 == 0 else ("delta-rs", "core"):
                if count_objects(endpoint)[0] != args.objects:
                    upload_orphans(endpoint, args.objects)
                r = run(endpoint, who, dry=False)
                assert r["files"] == args.objects, (who, r)
                assert count_objects(endpoint) == (0, PARTITIONS * LIVE_PER_PARTITION), who
                results.setdefault((who, False), []).append(r["seconds"])
                print(f"real {who:8s} {r['seconds']:.2f} s", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)

    rows = []
    for dry in (True, False):
        core = statistics.median(results[("core", dry)])
        theirs = statistics.median(results[("delta-rs", dry)])
        rows.append(
            f"| {args.objects:,} | {'dry run' if dry else 'real'} | {core:.2f} s | {theirs:.2f} s | "
            f"**{core / theirs:.2f}x** | {len(results[('core', dry)])} |"
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
partition prefixes plus 1,000 live files, on the tests' moto S3 server (threaded) on loopback,
core vs delta-rs `vacuum(full=True)` in the same run, each in a fresh process, pairs
interleaved. Medians; ratio = core / delta-rs (goal <= 0.5x). Noisy 2-core machine shared
with other jobs.

"""
_HEADER = """\
| objects | run | core | delta-rs | ratio | runs |
|---|---|---|---|---|---|
"""


if __name__ == "__main__":
    main()
