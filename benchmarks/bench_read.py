"""Snapshot-load benchmark: the core against delta-rs and the floor, on the tables of generate.py.

Each measurement runs in a fresh Python process: imports first, then the timed load.
Reported: the median wall time over ``--repeat`` runs, and the peak RSS growth of the
process during the load (``ru_maxrss`` after minus RSS before, MB).

Contenders:
- ``core``: ``DeltaTable(uri).snapshot().files()`` (the full file list as Arrow).
- ``delta-rs``: ``deltalake.DeltaTable(uri).get_add_actions(flatten=False)``.
- ``floor``: pyarrow reads the checkpoint's ``add`` column and the tail JSON, nothing else.
- ``core-meta`` / ``delta-rs-meta`` (table a): protocol, metadata and one txn.

Layouts: ``a`` and ``c`` hold checkpoints shaped as the core writes them; ``a-rs`` and
``a-spark`` are table ``a`` with checkpoints as delta-rs and Spark write them (see generate.py).

Usage: ``python benchmarks/bench_read.py [--tables a,b,c,a-rs,a-spark] [--repeat 5] [--write-readme]``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
README = HERE / "README.md"

_PRELUDE = """
import json, resource, sys, time, glob, os
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
uri = sys.argv[1]
"""

LOADS = {
    "core": """
from airflow_delta_provider.core import DeltaTable
before = rss_mb(); start = time.perf_counter()
n = DeltaTable(uri).snapshot().files().num_rows
""",
    "delta-rs": """
import deltalake
before = rss_mb(); start = time.perf_counter()
n = deltalake.DeltaTable(uri).get_add_actions(flatten=False).num_rows
""",
    "floor": """
import pyarrow.parquet as pq, pyarrow.json as pj, io
before = rss_mb(); start = time.perf_counter()
log = uri + "/_delta_log"
checkpoints = sorted(glob.glob(log + "/*.checkpoint.parquet"))
n = 0
since = -1
if checkpoints:
    n = pq.read_table(checkpoints[-1], columns=["add"]).num_rows
    since = int(os.path.basename(checkpoints[-1])[:20])
commits = [p for p in sorted(glob.glob(log + "/*.json")) if int(os.path.basename(p)[:20]) > since]
tail = b"".join(open(p, "rb").read() for p in commits)
n += pj.read_json(io.BytesIO(tail)).num_rows if tail else 0
""",
    "core-meta": """
from airflow_delta_provider.core import DeltaTable
before = rss_mb(); start = time.perf_counter()
snapshot = DeltaTable(uri).snapshot()
snapshot.protocol, snapshot.metadata
n = snapshot.app_transaction_version("bench-app-3")
""",
    "delta-rs-meta": """
import deltalake
before = rss_mb(); start = time.perf_counter()
table = deltalake.DeltaTable(uri)  # without_files is deprecated and ignored in 1.6
table.metadata(), table.protocol()
n = table.transaction_version("bench-app-3")
""",
}

_EPILOGUE = """
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "peak_mb": peak - before, "result": str(n)}))
"""

CASES = {
    "a": ["core", "delta-rs", "floor", "core-meta", "delta-rs-meta"],
    "b": ["core", "delta-rs", "floor"],
    "c": ["core", "delta-rs", "floor"],
    "a-rs": ["core", "delta-rs", "floor", "core-meta", "delta-rs-meta"],
    "a-spark": ["core", "delta-rs", "floor", "core-meta", "delta-rs-meta"],
}
DESCRIPTIONS = {
    "a": "1M files in a checkpoint + 100 commits x 100 adds",
    "b": "10,000 JSON commits, no checkpoint",
    "c": "100k files, 20-column stats",
    "a-rs": "(a) with a delta-rs-written checkpoint (one 1M-row group)",
    "a-spark": "(a) with a Spark-like checkpoint (one row group, optional fields, small rows last)",
}


def measure(table: str, contender: str, repeat: int) -> dict[str, float]:
    """Median seconds and median peak-RSS growth of one contender on one table."""
    code = _PRELUDE + LOADS[contender] + _EPILOGUE
    runs = []
    for _ in range(repeat):
        output = subprocess.run(
            [sys.executable, "-c", code, str(DATA / table)], check=True, capture_output=True, text=True
        ).stdout
        runs.append(json.loads(output.strip().splitlines()[-1]))
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "peak_mb": statistics.median(r["peak_mb"] for r in runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="a,b,c,a-rs,a-spark")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()
    lines = [
        f"Machine: {platform.machine()}, {_cpus()} CPUs, Python {platform.python_version()}; "
        f"median of {args.repeat} fresh processes.",
        "",
        "| table | contender | median s | peak MB | vs delta-rs | vs floor |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for table in args.tables.split(","):
        results = {c: measure(table, c, args.repeat) for c in CASES[table]}
        for contender, result in results.items():
            base = "delta-rs-meta" if contender.endswith("-meta") else "delta-rs"
            ratio = result["seconds"] / results[base]["seconds"]
            floor = (
                ""
                if contender.endswith("-meta")
                else f"{result['seconds'] / results['floor']['seconds']:.2f}x"
            )
            lines.append(
                f"| {table}: {DESCRIPTIONS[table]} | {contender} | {result['seconds']:.3f} | "
                f"{result['peak_mb']:.0f} | {ratio:.2f}x | {floor} |"
            )
        if "core-meta" in results:
            share = results["core-meta"]["seconds"] / results["core"]["seconds"]
            lines.append(f"| {table} | core-meta / core | {share:.1%} | | | |")
        print("\n".join(lines[-len(results) - 1 :]), flush=True)
    report = "\n".join(lines)
    print(report)
    if args.write_readme:
        text = README.read_text()
        start, end = "<!-- results:start -->", "<!-- results:end -->"
        head, _, rest = text.partition(start)
        _, _, tail = rest.partition(end)
        README.write_text(f"{head}{start}\n{report}\n{end}{tail}")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
