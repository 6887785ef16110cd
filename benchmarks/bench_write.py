"""Write benchmark: idempotent appends and footer statistics, the core against delta-rs in the same run.

**Idempotent append of 10 files.** Two log-only tables built once into ``benchmarks/data/``
with ``generate.py``'s helpers, shaped as real tables are: a classic checkpoint at version 1
holding N active files (N = 1,000 and 1,000,000), then commits 2-10 of 10 adds and a
``txn`` each. Ten real Parquet files (1,000 rows each) wait under ``part=7/`` for the
append. Each contender appends them as application ``bench-airflow`` version 1, on a fresh
copy of the table, in a fresh Python process (imports excluded from the timing):

- ``core``: ``DeltaTable(uri).commit_files(files, app_id=..., app_version=1)``: reads
  protocol, metadata and the appId's txn, the 10 footers (size, stats), commits version 11.
- ``delta-rs``: ``deltalake.DeltaTable(uri)``, ``transaction_version(app_id)``, then
  ``create_write_transaction(actions=[AddAction x 10], mode="append", ...)`` with the
  ``txn`` in ``CommitProperties(app_transactions=...)``. Its AddActions carry the same
  stats as the core's, computed before the timing: delta-rs does not read footers here.
- ``core skip`` / ``delta-rs skip``: the same call once the append is committed (a retried
  Airflow task): nothing is written.

**Footer statistics of 1,000 files.** 1,000 Parquet files (one per ``part`` directory, 1,000
rows each: id, value, name, ts) written once with pyarrow; then, each in a fresh process
(imports excluded from the timing; peak memory is the process's peak RSS):

- ``core``: ``DeltaTable(uri).commit_files(prefix="out", schema=..., partition_by=["part"])``:
  lists the files, reads the 1,000 footers (ranged tail reads), creates the table with their stats.
- ``delta-rs``: ``convert_to_deltalake(uri + "/out", partition_by=..., partition_strategy="hive")``
  on the same files: the comparable call (lists, reads the footers, commits their stats). (Until
  2026-11-23 this row was ``write_deltalake`` of the same rows, which also writes the data.)
- ``floor``: ``pyarrow.parquet.read_metadata`` of the 1,000 files, one after the other.

**Footer statistics on S3** (``--part stats-s3``): the same on the VACUUM benchmark's moto S3
server (``bench_vacuum_s3.Server``: moto's app, threaded, on loopback, with an indexed, S3-like
listing; started and stopped here) with 1,000 and 10,000 files (100 ``part`` directories, 100
rows each); the floor there is listing the files plus concurrent ranged reads of their last
64 KiB (s3fs ``cat_ranges``, 32 at a time), the I/O any reader must do. The server's requests
and CPU seconds per run are printed under the table: the server shares the 2 cores.

Every run is checked (version, files, rows, the txn), and delta-rs reads the core's
commits. Usage: ``python benchmarks/bench_write.py [--repeat 5] [--part all|append|stats|stats-s3]
[--s3-files 1000,10000] [--write]`` (``--write`` puts the tables into ``benchmarks/write.md``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
REPORT = HERE / "write.md"
SIZES = {"1k": 1_000, "1M": 1_000_000}
#: Where the checkpoint puts protocol, metadata and txns: it decides what reading them costs.
LAYOUTS = {
    "core": "checkpoint at version 10 written by the core (its post-commit checkpoint): the non-file "
    "actions in a row group of their own, ahead of the adds",
    "mixed": "checkpoint at version 1 from `generate.py`: protocol and metadata in the first 100,000-row "
    "group with adds (Spark's and delta-rs's checkpoints mix them too), txns in the commits after it",
}
NEW_FILES = 10
ROWS_PER_FILE = 1_000
APP_ID = "bench-airflow"
STATS_FILES = 1_000
START = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)

# The modules a commit imports lazily, imported before the timing like every other import.
_CORE_IMPORTS = (
    "import airflow_delta_provider.core.transaction.write, airflow_delta_provider.core.maintenance.checkpoint"
)

_PRELUDE = """
import json, resource, sys, time
uri = sys.argv[1]
spec = json.loads(open(sys.argv[2]).read())
marks = {}

def _cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of the process
    return usage.ru_utime + usage.ru_stime
"""

APPEND_RUNS = {
    "core": """
from airflow_delta_provider.core import DeltaTable
CORE_IMPORTS
start = time.perf_counter()
result = DeltaTable(uri).commit_files(spec["paths"], app_id=spec["app_id"], app_version=1)
elapsed = time.perf_counter() - start
out = {"version": result.version, "committed": result.committed}
""",
    "core skip": """
from airflow_delta_provider.core import DeltaTable
CORE_IMPORTS
DeltaTable(uri).commit_files(spec["paths"], app_id=spec["app_id"], app_version=1)
start = time.perf_counter()
result = DeltaTable(uri).commit_files(spec["paths"], app_id=spec["app_id"], app_version=1)
elapsed = time.perf_counter() - start
out = {"version": result.version, "committed": result.committed}
""",
    "delta-rs": """
import deltalake, pyarrow as pa
from deltalake import CommitProperties, Transaction
from deltalake.transaction import AddAction
adds = [AddAction(a["path"], a["size"], a["partition_values"], a["modification_time"], True, a["stats"])
        for a in spec["adds"]]
schema = pa.schema([("part", pa.int32()), ("c0", pa.int64()), ("c1", pa.int64()), ("c2", pa.int64())])
start = time.perf_counter()
table = deltalake.DeltaTable(uri)
marks["load"] = time.perf_counter() - start
assert table.transaction_version(spec["app_id"]) is None
table.create_write_transaction(
    adds, mode="append", schema=schema, partition_by=["part"],
    commit_properties=CommitProperties(app_transactions=[Transaction(spec["app_id"], 1)]),
)
elapsed = time.perf_counter() - start
out = {"version": deltalake.DeltaTable(uri).version(), "committed": True}
""",
    "delta-rs skip": """
import deltalake, pyarrow as pa
from deltalake import CommitProperties, Transaction
from deltalake.transaction import AddAction
adds = [AddAction(a["path"], a["size"], a["partition_values"], a["modification_time"], True, a["stats"])
        for a in spec["adds"]]
schema = pa.schema([("part", pa.int32()), ("c0", pa.int64()), ("c1", pa.int64()), ("c2", pa.int64())])
deltalake.DeltaTable(uri).create_write_transaction(
    adds, mode="append", schema=schema, partition_by=["part"],
    commit_properties=CommitProperties(app_transactions=[Transaction(spec["app_id"], 1)]),
)
start = time.perf_counter()
table = deltalake.DeltaTable(uri)
skipped = table.transaction_version(spec["app_id"]) == 1
elapsed = time.perf_counter() - start
out = {"version": table.version(), "committed": not skipped}
""",
}

_STATS_SCHEMA = """
import pyarrow as pa
schema = pa.schema([("part", pa.int64()), ("id", pa.int64()), ("value", pa.float64()),
                    ("name", pa.string()), ("ts", pa.timestamp("us", tz="UTC"))])
"""

STATS_RUNS = {
    "core": _STATS_SCHEMA
    + """
from airflow_delta_provider.core import DeltaTable
CORE_IMPORTS
start = time.perf_counter()
result = DeltaTable(uri).commit_files(prefix="out", schema=schema, partition_by=["part"])
elapsed = time.perf_counter() - start
out = {"files": result.num_added_files, "rows": result.num_output_rows}
""",
    "delta-rs": """
import deltalake
partitions = deltalake.Schema([deltalake.Field("part", "long")])
start = time.perf_counter()
deltalake.convert_to_deltalake(uri + "/out", partition_by=partitions, partition_strategy="hive")
elapsed = time.perf_counter() - start
adds = deltalake.DeltaTable(uri + "/out").get_add_actions(flatten=True)
out = {"files": len(adds), "rows": sum(adds.column("num_records").to_pylist())}
""",
    "floor": """
import glob, pyarrow.parquet as pq
paths = sorted(glob.glob(uri + "/out/*/*.parquet"))
start = time.perf_counter()
rows = sum(pq.read_metadata(p).num_rows for p in paths)
elapsed = time.perf_counter() - start
out = {"files": len(paths), "rows": rows}
""",
}

_S3_OPTIONS = """
endpoint = spec["endpoint"]
core_options = {"key": "testing", "secret": "testing",
                "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"}}
rs_options = {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "testing",
              "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}
"""

S3_STATS_RUNS = {
    "core": _STATS_SCHEMA
    + _S3_OPTIONS
    + """
from airflow_delta_provider.core import DeltaTable
CORE_IMPORTS
import s3fs
start = time.perf_counter()
result = DeltaTable(uri, core_options).commit_files(prefix="out", schema=schema, partition_by=["part"])
elapsed = time.perf_counter() - start
out = {"files": result.num_added_files, "rows": result.num_output_rows}
""",
    "delta-rs": _S3_OPTIONS
    + """
import deltalake
partitions = deltalake.Schema([deltalake.Field("part", "long")])
start = time.perf_counter()
deltalake.convert_to_deltalake(uri + "/out", partition_by=partitions, partition_strategy="hive",
                               storage_options=rs_options)
elapsed = time.perf_counter() - start
adds = deltalake.DeltaTable(uri + "/out", storage_options=rs_options).get_add_actions(flatten=True)
out = {"files": len(adds), "rows": sum(adds.column("num_records").to_pylist())}
""",
    "floor": _S3_OPTIONS
    + """
import s3fs
fs = s3fs.S3FileSystem(**core_options)
start = time.perf_counter()
found = fs.find(uri.removeprefix("s3://") + "/out", detail=True)
paths = [p for p, e in found.items() if p.endswith(".parquet") and "/_delta_log/" not in p]
sizes = [found[p]["size"] for p in paths]
starts = [max(0, size - 65536) for size in sizes]
tails = fs.cat_ranges(paths, starts, sizes, batch_size=32)
elapsed = time.perf_counter() - start
out = {"files": len(tails), "rows": spec["rows"]}
""",
}

_EPILOGUE = """
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec, from the forked benchmark process.
with open("/proc/self/status") as status:
    peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
print(json.dumps({"seconds": elapsed, "peak_mb": peak, **marks, **out}))
"""


# --- tables ------------------------------------------------------------------------------


def _generate() -> Any:
    sys.path.insert(0, str(HERE))
    import generate  # the read benchmark's log writers

    return generate


def build_append_table(layout: str, name: str, files: int) -> Path:
    """Checkpoint of ``files`` adds at version 1, commits 2-10 (10 adds + a txn), 10 new data files.

    With ``layout="core"``, the core then checkpoints version 10 and the version 1 checkpoint
    is dropped.
    """
    root = DATA / f"write-{layout}-{name}"
    if (root / ".complete").exists():
        return root
    generate = _generate()
    shutil.rmtree(root, ignore_errors=True)
    log = root / "_delta_log"
    log.mkdir(parents=True)
    generate._create(log, 3)
    generate._write_checkpoint(log, 1, files, 3)
    for version in range(2, 11):
        txn = {
            "txn": {"appId": f"bench-app-{version % 3}", "version": version, "lastUpdated": generate.NOW_MS}
        }
        generate._commit(log, version, [txn, *(generate._add(k, 3, version * 10 + k) for k in range(10))])
    if layout == "core":
        from airflow_delta_provider.core import DeltaTable

        DeltaTable(str(root)).checkpoint(10)
        (log / "00000000000000000001.checkpoint.parquet").unlink()
    paths = []
    for index in range(NEW_FILES):
        relative = f"part=7/new-{index:02d}.parquet"
        base = index * ROWS_PER_FILE
        columns = {f"c{c}": pa.array(range(base + c, base + c + ROWS_PER_FILE), pa.int64()) for c in range(3)}
        (root / "part=7").mkdir(exist_ok=True)
        pq.write_table(pa.table(columns), root / relative)
        paths.append(relative)
    # The same adds for delta-rs, with the core's own stats: the commit is the only difference.
    from airflow_delta_provider.core.expressions import read_footers
    from airflow_delta_provider.core.storage import open_store

    storage = open_store(str(root))
    columns = [(f"c{c}",) for c in range(3)]
    footers = read_footers(storage, [storage.join(p) for p in paths], stats_columns=columns)
    adds = [
        {
            "path": p,
            "size": (root / p).stat().st_size,
            "partition_values": {"part": "7"},
            "modification_time": int((root / p).stat().st_mtime * 1000),
            "stats": f.stats,
        }
        for p, f in zip(paths, footers, strict=True)
    ]
    spec = {"app_id": APP_ID, "paths": paths, "adds": adds, "active_files": files + 90}
    (root / "spec.json").write_text(json.dumps(spec))
    (root / ".complete").touch()
    return root


def build_stats_files() -> Path:
    """1,000 Parquet files, one per ``part`` directory, 1,000 rows each (no Delta log)."""
    root = DATA / "write-stats"
    if (root / ".complete").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    for part in range(STATS_FILES):
        directory = root / "out" / f"part={part}"
        directory.mkdir(parents=True)
        base = part * ROWS_PER_FILE
        ids = range(base, base + ROWS_PER_FILE)
        pq.write_table(
            pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "value": pa.array([i * 0.5 for i in ids], pa.float64()),
                    "name": [f"name-{i:09d}" for i in ids],
                    "ts": pa.array(
                        [dt.datetime(2024, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i) for i in ids],
                        pa.timestamp("us", tz="UTC"),
                    ),
                }
            ),
            directory / "part-00000.parquet",
        )
    (root / "spec.json").write_text("{}")
    (root / ".complete").touch()
    return root


# --- measuring ---------------------------------------------------------------------------


def _run(code: str, root: Path | str, spec: Path, pythonpath: str | None = None) -> dict[str, Any]:
    code = code.replace("CORE_IMPORTS", _CORE_IMPORTS)
    # The CPU seconds of the timed call too (all threads): steadier than wall time on a busy machine.
    code = code.replace("start = time.perf_counter()\n", "start = time.perf_counter()\ncpu_start = _cpu()\n")
    code = code.replace(
        "elapsed = time.perf_counter() - start\n",
        "elapsed = time.perf_counter() - start\nmarks['cpu'] = _cpu() - cpu_start\n",
    )
    code = _PRELUDE + code + _EPILOGUE
    env = {**os.environ, "PYTHONPATH": pythonpath} if pythonpath is not None else None
    output = subprocess.run(
        [sys.executable, "-c", code, str(root), str(spec)],
        check=True,
        capture_output=True,
        text=True,
        env=env,
        cwd=DATA,  # never the checkout the command was started in (see bench_read.py)
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def measure_append(source: Path, contender: str, repeat: int, check_with_delta_rs: bool) -> dict[str, float]:
    runs = []
    spec = json.loads((source / "spec.json").read_text())
    # The core's runs take milliseconds and their fsyncs are noisy: three times as many.
    for attempt in range(repeat if contender.startswith("delta-rs") else 3 * repeat):
        with tempfile.TemporaryDirectory(prefix="bench-write-") as tmp:
            root = Path(tmp) / "t"
            shutil.copytree(source, root)
            run = _run(APPEND_RUNS[contender], root, source / "spec.json")
            expected = (11, not contender.endswith("skip"))
            if (run["version"], run["committed"]) != expected:
                raise SystemExit(
                    f"{contender} on {source.name}: {run}, expected version/committed {expected}"
                )
            if check_with_delta_rs and attempt == 0 and contender == "core":
                _check_append(root, spec)
            runs.append(run)
    keys = [k for k in runs[0] if isinstance(runs[0][k], float)]
    medians = {k: statistics.median(r[k] for r in runs) for k in keys}
    return {**medians, "min": min(r["seconds"] for r in runs)}


def _check_append(root: Path, spec: dict[str, Any]) -> None:
    """delta-rs reads the core's version 11: every file, the 10 new ones, the txn."""
    import deltalake

    table = deltalake.DeltaTable(str(root))
    paths = set(pa.table(table.get_add_actions(flatten=True))["path"].to_pylist())
    if table.version() != 11 or len(paths) != spec["active_files"] + NEW_FILES:
        raise SystemExit(f"delta-rs reads the core's append as version {table.version()}, {len(paths)} files")
    if not set(spec["paths"]) <= paths or table.transaction_version(APP_ID) != 1:
        raise SystemExit("delta-rs does not see the core's 10 files or its txn")


def measure_stats(source: Path, repeat: int) -> dict[str, list[dict[str, Any]]]:
    """Every contender ``repeat`` times, interleaved (core, delta-rs, floor, then the next round)."""
    runs: dict[str, list[dict[str, Any]]] = {contender: [] for contender in STATS_RUNS}
    for _ in range(repeat):
        for contender, code in STATS_RUNS.items():
            with tempfile.TemporaryDirectory(prefix="bench-write-stats-") as tmp:
                root = Path(tmp) / "t"
                shutil.copytree(source, root)
                # The files exist before a commit in real life: their writes must not be flushed by
                # the first fsync inside the timing (the core's commit fsyncs; delta-rs does not).
                os.sync()
                run = _run(code, root, source / "spec.json")
                if (run["files"], run["rows"]) != (STATS_FILES, STATS_FILES * ROWS_PER_FILE):
                    raise SystemExit(f"{contender}: {run}")
                if contender == "core":
                    import deltalake

                    table = deltalake.DeltaTable(str(root))
                    if table.version() != 0 or table.count() != STATS_FILES * ROWS_PER_FILE:
                        raise SystemExit("delta-rs does not read the core's 1,000-file table")
                runs[contender].append(run)
    return runs


def _stats_rows(runs: dict[str, list[dict[str, Any]]], what: dict[str, str], label: str) -> list[str]:
    medians = {c: statistics.median(r["seconds"] for r in rs) for c, rs in runs.items()}
    lines = []
    cpus = {c: statistics.median(r["cpu"] for r in rs) for c, rs in runs.items()}
    for contender, results in runs.items():
        seconds, cpu = medians[contender], cpus[contender]
        peak = statistics.median(r["peak_mb"] for r in results)
        low = min(r["seconds"] for r in results)
        lines.append(
            f"| {label} | {contender} | {what[contender]} | {seconds:.3f} | {low:.3f} | {cpu:.3f} | "
            f"{peak:.0f} | "
            f"{seconds / medians['delta-rs']:.2f}x ({cpu / cpus['delta-rs']:.2f}x) | "
            f"{seconds / medians['floor']:.2f}x ({cpu / cpus['floor']:.2f}x) |"
        )
    return lines


_STATS_HEADER = [
    "| files | contender | what is timed | median s | min s | cpu s | peak MB | vs delta-rs: wall (cpu) "
    "| vs floor: wall (cpu) |",
    "|---:|---|---|---:|---:|---:|---:|---:|---:|",
]


def stats_report(repeat: int) -> list[str]:
    source = build_stats_files()
    runs = measure_stats(source, repeat)
    what = {
        "core": '`commit_files(prefix="out")`: list, read 1,000 footers, create the table',
        "delta-rs": "`convert_to_deltalake` of the same files: list, read the footers, commit",
        "floor": "`pq.read_metadata` of the 1,000 files, serially",
    }
    return [
        "Footer statistics of 1,000 local files (1,000,000 rows, 4 columns); contenders interleaved;",
        "peak MB is the whole process's peak RSS (interpreter and imports included):",
        "",
        *_STATS_HEADER,
        *_stats_rows(runs, what, f"{STATS_FILES:,}"),
    ]


# --- footer statistics on S3 -------------------------------------------------------------

S3_BUCKET = "bench-footers"
S3_PARTITIONS = 100
S3_ROWS_PER_FILE = 100


def _s3_helpers() -> Any:
    sys.path.insert(0, str(HERE))
    import bench_vacuum_s3  # the tests' moto server, threaded, and its client

    return bench_vacuum_s3


def upload_stats_files(endpoint: str, files: int) -> str:
    """``files`` small Parquet files under ``s3://bench-footers/stats-<files>/out/part=<p>/``."""
    import io
    from concurrent.futures import ThreadPoolExecutor

    client = _s3_helpers()._client(endpoint)
    prefix = f"stats-{files}"

    def put(index: int) -> None:
        base = index * S3_ROWS_PER_FILE
        ids = range(base, base + S3_ROWS_PER_FILE)
        table = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "value": pa.array([i * 0.5 for i in ids], pa.float64()),
                "name": [f"name-{i:09d}" for i in ids],
                "ts": pa.array([START + dt.timedelta(seconds=i) for i in ids], pa.timestamp("us", tz="UTC")),
            }
        )
        sink = io.BytesIO()
        pq.write_table(table, sink)
        key = f"{prefix}/out/part={index % S3_PARTITIONS}/part-{index:06d}.parquet"
        client.put_object(Bucket=S3_BUCKET, Key=key, Body=sink.getvalue())

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, range(files)))
    return f"s3://{S3_BUCKET}/{prefix}"


def _drop_logs(endpoint: str, uri: str) -> None:
    """Delete both contenders' ``_delta_log`` objects: every run creates its table afresh."""
    client = _s3_helpers()._client(endpoint)
    prefix = uri.removeprefix(f"s3://{S3_BUCKET}/")
    for log_prefix in (f"{prefix}/_delta_log/", f"{prefix}/out/_delta_log/"):
        listed = client.list_objects_v2(Bucket=S3_BUCKET, Prefix=log_prefix).get("Contents", [])
        if listed:
            client.delete_objects(Bucket=S3_BUCKET, Delete={"Objects": [{"Key": o["Key"]} for o in listed]})


def stats_s3_report(repeat: int, sizes: list[int]) -> list[str]:
    helpers = _s3_helpers()
    # The VACUUM benchmark's server: moto's app, threaded, with an indexed (S3-like) listing.
    server = helpers.Server(latency_ms=0.0, indexed=True)
    endpoint = server.endpoint
    lines = [
        "Footer statistics on the moto S3 server (`bench_vacuum_s3.Server`: threaded, loopback, indexed",
        "listing; 100 rows per file, 100 `part` directories); contenders interleaved, each run on a fresh",
        "table; the server's requests and CPU per run are under the table:",
        "",
        *_STATS_HEADER,
    ]
    what = {
        "core": '`commit_files(prefix="out")` (S3Store)',
        "delta-rs": "`convert_to_deltalake(storage_options=...)`",
        "floor": "list + concurrent ranged reads of each file's 64 KiB tail (s3fs `cat_ranges`, 32 at once)",
    }
    notes: list[str] = []
    try:
        helpers._client(endpoint).create_bucket(Bucket=S3_BUCKET)
        for files in sizes:
            uri = upload_stats_files(endpoint, files)
            with tempfile.TemporaryDirectory(prefix="bench-write-s3-") as tmp:
                spec = Path(tmp) / "spec.json"
                spec.write_text(json.dumps({"endpoint": endpoint, "rows": files * S3_ROWS_PER_FILE}))
                runs: dict[str, list[dict[str, Any]]] = {contender: [] for contender in S3_STATS_RUNS}
                for _ in range(repeat):
                    for contender, code in S3_STATS_RUNS.items():
                        _drop_logs(endpoint, uri)
                        server.command("stats")
                        run = _run(code, uri, spec)
                        served = server.command("stats")
                        run["server_cpu"], run["requests"] = served["server_cpu"], served["requests"]
                        if (run["files"], run["rows"]) != (files, files * S3_ROWS_PER_FILE):
                            raise SystemExit(f"{contender} on S3 ({files} files): {run}")
                        runs[contender].append(run)
                        print(
                            f"s3 {files} {contender}: {run['seconds']:.2f} s, client cpu {run['cpu']:.2f} s, "
                            f"server cpu {run['server_cpu']:.2f} s",
                            flush=True,
                        )
            lines += _stats_rows(runs, what, f"{files:,}")
            served = ", ".join(
                f"{contender} {statistics.median(r['requests'] for r in results):,.0f} requests, "
                f"{statistics.median(r['server_cpu'] for r in results):.1f} s CPU"
                for contender, results in runs.items()
            )
            notes.append(f"- {files:,} files, the server per run (median): {served}.")
    finally:
        server.stop()
    return [*lines, "", *notes]


# --- which committed files keep bounds, per column type and writer (issue 23) --------------------

BOUNDS_FILES = 100
BOUNDS_ROWS = 1_000
BOUNDS_LAYOUTS = ("pyarrow", "delta-rs", "Spark")
_BOUNDS_SCHEMA = """
import pyarrow as pa
schema = pa.schema([("part", pa.int64()), ("id", pa.int64()), ("n", pa.int32()), ("x", pa.float64()),
                    ("s", pa.string()), ("d", pa.date32()), ("ts", pa.timestamp("us", tz="UTC"))])
"""
BOUNDS_RUN = (
    _BOUNDS_SCHEMA
    + """
import json
from airflow_delta_provider.core import DeltaTable
CORE_IMPORTS
start = time.perf_counter()
table = DeltaTable(uri)
result = table.commit_files(prefix="out", schema=schema, partition_by=["part"])
elapsed = time.perf_counter() - start
stats = [json.loads(s) for s in table.snapshot().files().column("stats").to_pylist()]
columns = ("id", "n", "x", "s", "d", "ts")
out = {"files": result.num_added_files,
       "bounded": {c: sum(c in s.get("minValues", {}) for s in stats) for c in columns}}
"""
)


def _bounds_table(part: int) -> pa.Table:
    ids = range(part * BOUNDS_ROWS, (part + 1) * BOUNDS_ROWS)
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "n": pa.array([i % 1000 for i in ids], pa.int32()),
            "x": pa.array([i * 0.25 for i in ids], pa.float64()),
            "s": [f"name-{i:09d}" for i in ids],
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 400) for i in ids], pa.date32()),
            "ts": pa.array([START + dt.timedelta(seconds=i) for i in ids], pa.timestamp("us", tz="UTC")),
        }
    )


def build_bounds_files(layout: str) -> Path:
    """``BOUNDS_FILES`` files under ``out/part=k/`` written by pyarrow, delta-rs or Spark (its
    default INT96 timestamps), without a Delta log."""
    root = DATA / f"bounds-{layout.lower()}"
    if (root / ".complete").exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    if layout == "Spark":
        _spark_bounds_files(root)
    for part in range(BOUNDS_FILES if layout != "Spark" else 0):
        directory = root / "out" / f"part={part}"
        directory.mkdir(parents=True)
        if layout == "pyarrow":
            pq.write_table(_bounds_table(part), directory / "part-00000.parquet")
        else:  # delta-rs's writer (parquet-rs): its file, without its log
            import deltalake

            scratch = root / "scratch"
            deltalake.write_deltalake(str(scratch), _bounds_table(part))
            [written] = scratch.glob("*.parquet")
            written.rename(directory / "part-00000.parquet")
            shutil.rmtree(scratch)
    (root / "spec.json").write_text("{}")
    (root / ".complete").touch()
    return root


def _spark_bounds_files(root: Path) -> None:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        frame = spark.createDataFrame(
            pa.concat_tables(_bounds_table(p) for p in range(BOUNDS_FILES)).to_pandas()
        )
        frame = frame.withColumn("part", (frame["id"] / BOUNDS_ROWS).cast("long"))
        frame = frame.withColumn("n", frame["n"].cast("int"))  # pandas widened it
        frame.repartition(BOUNDS_FILES, "part").write.partitionBy("part").parquet(str(root / "out"))
    finally:
        spark.stop()
    for litter in root.glob("out/**/*"):
        if litter.name.startswith(("_", ".")):
            litter.unlink()


def bounds_report(repeat: int, before: str | None) -> list[str]:
    """Per writer: the share of committed files with bounds per column type, this checkout and
    (``before``, a checkout's path) another one, and the commit's median time."""
    checkouts = {"this": None, **({"before": before} if before else {})}
    lines = [
        f"{BOUNDS_FILES} files of {BOUNDS_ROWS:,} rows per writer (no NaN), committed with "
        '`commit_files(prefix="out")`; the share of files whose stats have bounds for the column:',
        "",
        "| writer | code | long | int | double | string | date | timestamp | median s |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for layout in BOUNDS_LAYOUTS:
        source = build_bounds_files(layout)
        for label, path in checkouts.items():
            runs = []
            for _ in range(repeat):
                with tempfile.TemporaryDirectory(prefix="bench-bounds-") as tmp:
                    root = Path(tmp) / "t"
                    shutil.copytree(source, root)
                    env_path = path or os.environ.get("PYTHONPATH", "")
                    runs.append(_run(BOUNDS_RUN, root, source / "spec.json", pythonpath=env_path))
            shares = runs[0]["bounded"]
            cells = " | ".join(
                f"{100 * shares[c] / runs[0]['files']:.0f}%" for c in ("id", "n", "x", "s", "d", "ts")
            )
            seconds = statistics.median(r["seconds"] for r in runs)
            lines.append(f"| {layout} | {label} | {cells} | {seconds:.3f} |")
    return lines


SECTIONS = ("append", "stats", "stats-s3", "bounds")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--part", choices=["all", *SECTIONS], default="all")
    parser.add_argument("--s3-files", default="1000,10000", help="file counts of the S3 part")
    parser.add_argument("--before", default=None, help="bounds part: another checkout to compare with")
    parser.add_argument(
        "--write", action="store_true", help="replace the part's section(s) of benchmarks/write.md"
    )
    args = parser.parse_args()
    machine = (
        f"Machine: {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, Python "
        f"{platform.python_version()}; median of {args.repeat} fresh processes"
    )
    parts = SECTIONS if args.part == "all" else (args.part,)
    for part in parts:
        if part == "append":
            lines = [f"{machine} ({3 * args.repeat} for the core's appends), each on a fresh copy.", ""]
            lines += append_report(args.repeat)
        elif part == "stats":
            lines = [f"{machine}, each on a fresh copy; ratios of medians.", "", *stats_report(args.repeat)]
        elif part == "bounds":
            lines = [f"{machine}, each on a fresh copy.", "", *bounds_report(args.repeat, args.before)]
        else:
            sizes = [int(n) for n in args.s3_files.split(",")]
            lines = [f"{machine}; ratios of medians.", "", *stats_s3_report(args.repeat, sizes)]
        print("\n".join(lines), flush=True)
        if args.write:
            _write_section(part, lines)


def _write_section(part: str, lines: list[str]) -> None:
    """Replace one part's figures in write.md (between its ``<!-- part:start/end -->`` markers)."""
    text = REPORT.read_text()
    start, end = f"<!-- {part}:start -->", f"<!-- {part}:end -->"
    if start not in text or end not in text:
        raise SystemExit(f"{REPORT} has no {start} ... {end} section to replace.")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    REPORT.write_text(head + start + "\n" + "\n".join(lines) + "\n" + end + tail)


def append_report(repeat: int) -> list[str]:
    tables = {
        (layout, name): build_append_table(layout, name, files)
        for layout in LAYOUTS
        for name, files in SIZES.items()
    }
    append = {
        (*key, contender): measure_append(root, contender, repeat, check_with_delta_rs=True)
        for key, root in tables.items()
        for contender in APPEND_RUNS
    }
    lines = [
        "Idempotent append of 10 files (commit version 11). Checkpoint layouts:",
        "",
        *(f"- **{layout}**: {text}." for layout, text in LAYOUTS.items()),
        "",
        "| checkpoint | active files | contender | median s | min s | vs delta-rs | vs same at 1k |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for layout in LAYOUTS:
        for name, files in SIZES.items():
            for contender in APPEND_RUNS:
                seconds = append[(layout, name, contender)]["seconds"]
                rs_name = "delta-rs skip" if contender.endswith("skip") else "delta-rs"
                rs = append[(layout, name, rs_name)]["seconds"]
                at_1k = append[(layout, "1k", contender)]["seconds"]
                ratios = f"{seconds / rs:.3f}x | {seconds / at_1k:.2f}x"
                low = append[(layout, name, contender)]["min"]
                row = f"| {layout} | {files + 90:,} | {contender} | {seconds:.4f} | {low:.4f} | {ratios} |"
                lines.append(row)
            load = append[(layout, name, "delta-rs")]["load"]
            what = "delta-rs: `DeltaTable(uri)` alone"
            lines.append(f"| {layout} | {files + 90:,} | {what} | {load:.4f} | | | |")
    return lines


if __name__ == "__main__":
    main()
