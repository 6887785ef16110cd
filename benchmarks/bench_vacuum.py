"""VACUUM benchmark: the core against delta-rs on a table with 100,000 expired files, in the same run.

The table (built once into ``benchmarks/data/vacuum``): 100 partitions; versions 0-9 add
100,000 files (10,000 per commit), version 10 removes all of them, version 11 adds 1,000 live
files, and a checkpoint at version 11 (written by delta-rs) drops the expired tombstones, as it
would on any table older than the retention. Data files are 40 days old, commits 35 days old,
so every removed file is past the default 7-day retention. Each contender works on its own
fresh copy, in a fresh Python process (imports excluded from the timing, as in ``bench_read.py``):

- ``core``: ``DeltaTable(uri).vacuum(dry_run=...)``, FULL (the default, as Delta).
- ``delta-rs``: ``DeltaTable(uri).vacuum(dry_run=..., full=True)``: the listing mode, the one
  that finds these files (delta-rs's default lite mode reads only tombstones still in the state).
- ``core lite``: ``....vacuum(mode="lite")``: reads the removes from commits 0-11, lists nothing
  (no delta-rs counterpart finds files whose tombstones left the checkpoint).
- ``floor``: a bare ``os.walk`` that ``lstat``-s every file (and removes the expired ones in a
  real run), knowing nothing of Delta: the kernel work any listing VACUUM must do.

Every run is checked: 100,000 files listed (dry run) or gone (real), the 1,000 live files left,
and delta-rs reads all 1,000 rows afterwards.

Usage: ``python benchmarks/bench_vacuum.py [--repeat 3] [--write]`` (``--write`` puts the table
into ``benchmarks/vacuum.md``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
SOURCE = DATA / "vacuum"
REPORT = HERE / "vacuum.md"
EXPIRED = 100_000
LIVE = 1_000
PARTITIONS = 100
DAY = 86_400
STATS = '{"numRecords":1,"minValues":{"id":1},"maxValues":{"id":1},"nullCount":{"id":0}}'

_PRELUDE = """
import json, os, resource, sys, time
uri = sys.argv[1]
dry = sys.argv[2] == "dry"
"""

RUNS = {
    "core": """
from airflow_delta_provider.core import DeltaTable
start = time.perf_counter()
result = DeltaTable(uri).vacuum(dry_run=dry)
n = result.num_files
""",
    "delta-rs": """
import deltalake
start = time.perf_counter()
listed = deltalake.DeltaTable(uri).vacuum(dry_run=dry, full=True)
n = len(listed)
""",
    "core lite": """
from airflow_delta_provider.core import DeltaTable
start = time.perf_counter()
result = DeltaTable(uri).vacuum(dry_run=dry, mode="lite")
n = result.num_files
""",
    "floor": """
start = time.perf_counter()
n = 0
for directory, _, names in os.walk(uri):
    if "_delta_log" in directory:
        continue
    for name in names:
        path = os.path.join(directory, name)
        os.lstat(path)
        if name.startswith("expired-"):
            n += 1
            if not dry:
                os.remove(path)
""",
}

_EPILOGUE = """
elapsed = time.perf_counter() - start
print(json.dumps({"seconds": elapsed, "result": n}))
"""


def generate() -> None:
    """Build the source table once (about a minute on 2 cores)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if (SOURCE / ".complete").exists():
        return
    shutil.rmtree(SOURCE, ignore_errors=True)
    log = SOURCE / "_delta_log"
    log.mkdir(parents=True)
    template = SOURCE / "template.parquet"
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), template)
    payload = template.read_bytes()
    template.unlink()
    size = len(payload)
    now_ms = int(time.time() * 1000)

    def path_of(kind: str, i: int) -> str:
        return f"part={i % PARTITIONS:03d}/{kind}-{i:06d}.parquet"

    def add(path: str) -> str:
        value = path.split("/")[0].split("=")[1]
        return json.dumps(
            {
                "add": {
                    "path": path,
                    "partitionValues": {"part": value},
                    "size": size,
                    "modificationTime": now_ms - 40 * DAY * 1000,
                    "dataChange": True,
                    "stats": STATS,
                }
            }
        )

    schema = json.dumps(
        {
            "type": "struct",
            "fields": [
                {"name": "id", "type": "long", "nullable": True, "metadata": {}},
                {"name": "part", "type": "string", "nullable": True, "metadata": {}},
            ],
        }
    )
    header = [
        json.dumps({"commitInfo": {"timestamp": now_ms, "operation": "WRITE"}}),
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        json.dumps(
            {
                "metaData": {
                    "id": "bench-vacuum",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": schema,
                    "partitionColumns": ["part"],
                    "configuration": {},
                    "createdTime": now_ms,
                }
            }
        ),
    ]
    per_commit = EXPIRED // 10
    for version in range(10):
        lines = header if version == 0 else [json.dumps({"commitInfo": {"timestamp": now_ms}})]
        paths = [path_of("expired", i) for i in range(version * per_commit, (version + 1) * per_commit)]
        (log / f"{version:020d}.json").write_text("\n".join([*lines, *map(add, paths)]) + "\n")
    removes = [
        json.dumps(
            {
                "remove": {
                    "path": path_of("expired", i),
                    "deletionTimestamp": now_ms - 30 * DAY * 1000,
                    "dataChange": True,
                    "size": size,
                }
            }
        )
        for i in range(EXPIRED)
    ]
    (log / f"{10:020d}.json").write_text(
        "\n".join([json.dumps({"commitInfo": {"timestamp": now_ms, "operation": "DELETE"}}), *removes]) + "\n"
    )
    live = [path_of("live", i) for i in range(LIVE)]
    (log / f"{11:020d}.json").write_text(
        "\n".join([json.dumps({"commitInfo": {"timestamp": now_ms}}), *map(add, live)]) + "\n"
    )
    old = time.time() - 40 * DAY
    for partition in range(PARTITIONS):
        (SOURCE / f"part={partition:03d}").mkdir()
    for path in [path_of("expired", i) for i in range(EXPIRED)] + live:
        target = SOURCE / path
        target.write_bytes(payload)
        os.utime(target, (old, old))
    import deltalake

    deltalake.DeltaTable(str(SOURCE)).create_checkpoint()
    for index, commit in enumerate(sorted(log.iterdir())):
        stamp = time.time() - 35 * DAY + index
        os.utime(commit, (stamp, stamp))
    (SOURCE / ".complete").write_text("ok")


def _copy(target: Path) -> None:
    # `cp -a` keeps modification times and is several times faster than shutil.copytree here.
    subprocess.run(["cp", "-a", str(SOURCE), str(target)], check=True)
    (target / ".complete").unlink()
    os.sync()  # the copy's dirty pages must not be flushed during the timed run


def _run(contender: str, root: Path, dry: bool) -> dict:
    output = subprocess.run(
        [sys.executable, "-c", _PRELUDE + RUNS[contender] + _EPILOGUE, str(root), "dry" if dry else "real"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    run = json.loads(output.strip().splitlines()[-1])
    _check(root, contender, dry, run)
    return run


def measure(repeat: int) -> dict[tuple[str, bool], float]:
    """Median seconds per (contender, dry run). Dry runs share one copy (they change nothing);
    every real run gets its own fresh copy."""
    seconds: dict[tuple[str, bool], list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-vacuum-") as tmp:
        shared = Path(tmp) / "dry"
        _copy(shared)
        for _ in range(repeat):
            for contender in RUNS:
                seconds.setdefault((contender, True), []).append(_run(contender, shared, True)["seconds"])
        shutil.rmtree(shared)
        for index in range(repeat):
            for contender in RUNS:
                root = Path(tmp) / f"real-{index}-{contender.replace(' ', '-')}"
                _copy(root)
                seconds.setdefault((contender, False), []).append(_run(contender, root, False)["seconds"])
                shutil.rmtree(root)
    return {key: statistics.median(values) for key, values in seconds.items()}


def _check(root: Path, contender: str, dry: bool, run: dict) -> None:
    if run["result"] != EXPIRED:
        raise SystemExit(f"{contender}: {run['result']} files instead of {EXPIRED}")
    left = sum(1 for p in root.rglob("*.parquet") if "_delta_log" not in p.parts)
    if left != (EXPIRED + LIVE if dry else LIVE):
        raise SystemExit(f"{contender} ({'dry' if dry else 'real'}): {left} data files left")
    if not dry:
        import deltalake

        rows = deltalake.DeltaTable(str(root)).to_pyarrow_table().num_rows
        if rows != LIVE:
            raise SystemExit(f"after {contender}'s VACUUM delta-rs reads {rows} rows instead of {LIVE}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    generate()
    results = measure(args.repeat)
    lines = [
        f"Machine: {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, Python "
        f"{platform.python_version()}; median of {args.repeat} fresh processes; every real run on a "
        "fresh copy.",
        "",
        "| run | contender | median s | vs delta-rs |",
        "|---|---|---:|---:|",
    ]
    for dry in (True, False):
        rs = results[("delta-rs", dry)]
        for contender in RUNS:
            seconds = results[(contender, dry)]
            lines.append(
                f"| {'dry run' if dry else 'real'} | {contender} | {seconds:.2f} | {seconds / rs:.2f}x |"
            )
    report = "\n".join(lines)
    print(report)
    if args.write:
        REPORT.write_text(
            "# VACUUM benchmark\n\n"
            f"`benchmarks/bench_vacuum.py`: VACUUM of a table with {EXPIRED:,} expired files\n"
            f"(removed 30 days ago, 40 days old) and {LIVE:,} live ones in {PARTITIONS} partitions, the\n"
            "core against delta-rs 1.6.6 (`full=True`) in the same run. Goal (issue 4): at most half of\n"
            "delta-rs's time.\n\n" + report + "\n"
        )


if __name__ == "__main__":
    main()
