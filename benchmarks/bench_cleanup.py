"""Log cleanup benchmark: 10,000 expired log files, the core against delta-rs in the same run.

The table has 10,000 JSON commits (one small add each) and a classic checkpoint at version
10,000; the log files are 60 days old (one second apart, increasing with the version), so
with the default 30-day retention everything before the checkpoint is expired. Each
contender gets a fresh copy and runs in a fresh process (imports excluded), timed from
opening the table to the end of the cleanup:

- ``core``: ``DeltaTable(uri).cleanup_logs()``
- ``delta-rs``: ``deltalake.DeltaTable(uri).cleanup_metadata()``

Both must leave the same set of commit files (versions >= 10,000).

Usage: ``python benchmarks/bench_cleanup.py [--repeat 3] [--write]``.
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
REPORT = HERE / "cleanup.md"
COMMITS = 10_000

RUNS = {
    "core": "from airflow_delta_provider.core import DeltaTable\n"
    "start = time.perf_counter(); r = DeltaTable(uri).cleanup_logs(); n = r.num_files",
    "delta-rs": "import deltalake\n"
    "start = time.perf_counter(); deltalake.DeltaTable(uri).cleanup_metadata(); n = -1",
}


def build(root: Path) -> None:
    sys.path.insert(0, str(HERE.parent))
    import pyarrow as pa

    from airflow_delta_provider.core import DeltaTable

    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    log = root / "_delta_log"
    os.remove(log / f"{0:020d}.crc")
    for version in range(1, COMMITS + 1):
        info = {
            "commitInfo": {"timestamp": 1, "operation": "WRITE", "operationParameters": {"mode": "Append"}}
        }
        add = {
            "add": {
                "path": f"f{version}.parquet",
                "partitionValues": {},
                "size": 100,
                "modificationTime": 1,
                "dataChange": True,
                "stats": '{"numRecords":1}',
            }
        }
        (log / f"{version:020d}.json").write_text(json.dumps(info) + "\n" + json.dumps(add) + "\n")
    table.checkpoint(COMMITS)
    # As written over time: each version one second after the one before, the newest 60 days ago.
    # (Equal times would make Delta's algorithm, and the core's, treat the checkpoint as adjusted.)
    newest = time.time() - 60 * 86400
    for name in os.listdir(log):
        if name[:20].isdigit():
            stamp = newest - (COMMITS - int(name[:20]))
            os.utime(log / name, (stamp, stamp))


def measure(name: str, source: Path) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "t"
        shutil.copytree(source, copy)
        code = f"import sys, time\nuri = {str(copy)!r}\n{RUNS[name]}\nprint(time.perf_counter() - start)"
        out = subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, cwd=HERE.parent
        ).stdout.split()
        left = sorted(p for p in os.listdir(copy / "_delta_log") if p.endswith(".json"))
        assert left[0] == f"{COMMITS:020d}.json", (name, left[:3])
        return float(out[-1]), len(left)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "source"
        build(source)
        results = {name: [measure(name, source)[0] for _ in range(args.repeat)] for name in RUNS}
    medians = {name: statistics.median(times) for name, times in results.items()}
    lows = {name: min(times) for name, times in results.items()}
    rows = [
        f"| {name} | {medians[name]:.3f} | {lows[name]:.3f} | {medians[name] / medians['delta-rs']:.2f}x "
        f"| {lows[name] / lows['delta-rs']:.2f}x |"
        for name in RUNS
    ]
    table = "\n".join(
        [
            f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; "
            f"median of {args.repeat} fresh processes, each on a fresh copy.",
            "",
            "| contender | median s (open + cleanup of 10,000 expired commits) | min s | median vs delta-rs "
            "| min vs delta-rs |",
            "|---|---:|---:|---:|---:|",
            *rows,
        ]
    )
    print(table)
    if args.write:
        REPORT.write_text(
            "# Log cleanup benchmark\n\n" + (__doc__ or "").split("\n\n", 1)[1] + "\n" + table + "\n"
        )


if __name__ == "__main__":
    main()
