"""Checkpoint benchmark: the core against delta-rs on a 1,000,000-file table, in the same run.

Table (a) of ``generate.py`` (1,000,000 files in a checkpoint, then 100 commits of 100
adds with txns) is copied afresh for every measurement, and each contender checkpoints the
latest version (101, 1,010,000 files) in a fresh Python process (imports excluded from the
timing, as in ``bench_read.py``):

- ``core``: ``DeltaTable(uri).checkpoint()``: load, replay, write the checkpoint and
  ``_last_checkpoint``.
- ``delta-rs``: ``deltalake.DeltaTable(uri)`` then ``create_checkpoint()``; the load and the
  checkpoint are timed separately and together.
- ``floor``: pyarrow alone reads the existing checkpoint's ``add`` column and writes those
  rows to a Parquet file: the least any checkpoint of this table can cost.

Reported: the median wall time over ``--repeat`` runs and the peak RSS growth (MB).

Usage: ``python benchmarks/bench_checkpoint.py [--repeat 3] [--write]`` (``--write`` puts the
table into ``benchmarks/checkpoint.md``).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
REPORT = HERE / "checkpoint.md"

_PRELUDE = """
import json, os, resource, sys, time
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
uri = sys.argv[1]
marks = {}
"""

RUNS = {
    "core": """
from airflow_delta_provider.core import DeltaTable
before = rss_mb(); start = time.perf_counter()
result = DeltaTable(uri).checkpoint()
n = result.num_add_files
""",
    "delta-rs": """
import deltalake
before = rss_mb(); start = time.perf_counter()
table = deltalake.DeltaTable(uri)
marks["load"] = time.perf_counter() - start
table.create_checkpoint()
marks["checkpoint"] = time.perf_counter() - start - marks["load"]
n = json.load(open(uri + "/_delta_log/_last_checkpoint"))["numOfAddFiles"]
""",
    "floor": """
import pyarrow.parquet as pq, pyarrow as pa
before = rss_mb(); start = time.perf_counter()
log = uri + "/_delta_log/"
adds = pq.read_table(log + "00000000000000000001.checkpoint.parquet", columns=["add"])
pq.write_table(adds, log + "floor.parquet")
n = adds.num_rows
""",
}

_EPILOGUE = """
elapsed = time.perf_counter() - start
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "peak_mb": peak - before, "result": n, **marks}))
"""


def measure(contender: str, repeat: int) -> dict[str, float]:
    """Medians of one contender over ``repeat`` fresh copies of table (a)."""
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-checkpoint-") as tmp:
            root = Path(tmp) / "a"
            shutil.copytree(DATA / "a", root)
            output = subprocess.run(
                [sys.executable, "-c", _PRELUDE + RUNS[contender] + _EPILOGUE, str(root)],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            run = json.loads(output.strip().splitlines()[-1])
            if contender != "floor":
                _check(root, contender, run)
            runs.append(run)
    keys = [k for k in runs[0] if k != "result"]
    return {k: statistics.median(r[k] for r in runs) for k in keys}


def _check(root: Path, contender: str, run: dict) -> None:
    """Both checkpoints must hold the 1,010,000 files of version 101, and delta-rs must load ours."""
    hint = json.loads((root / "_delta_log" / "_last_checkpoint").read_text())
    if (hint["version"], hint["numOfAddFiles"], run["result"]) != (101, 1_010_000, 1_010_000):
        raise SystemExit(f"{contender}: unexpected checkpoint {hint}")
    if contender == "core":
        import deltalake
        import pyarrow as pa

        for commit in (root / "_delta_log").glob("*.json"):
            commit.unlink()  # delta-rs can only use the core's checkpoint now
        table = deltalake.DeltaTable(str(root))
        files = pa.table(table.get_add_actions(flatten=False)).num_rows
        if (table.version(), files) != (101, 1_010_000):
            raise SystemExit(f"delta-rs reads the core's checkpoint as {table.version()} / {files} files")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write", action="store_true")
    args = parser.parse_args()
    if not (DATA / "a" / ".complete").exists():
        subprocess.run([sys.executable, str(HERE / "generate.py"), "--tables", "a"], check=True)
    results = {c: measure(c, args.repeat) for c in RUNS}
    rs = results["delta-rs"]
    core = results["core"]
    lines = [
        f"Machine: {platform.machine()}, {_cpus()} CPUs, Python {platform.python_version()}; "
        f"median of {args.repeat} fresh processes, each on a fresh copy of table (a).",
        "",
        "| contender | what is timed | median s | peak MB | vs delta-rs (load + checkpoint) |",
        "|---|---|---:|---:|---:|",
        f"| core | load + replay + write checkpoint + `_last_checkpoint` | {core['seconds']:.2f} | "
        f"{core['peak_mb']:.0f} | {core['seconds'] / rs['seconds']:.2f}x |",
        f"| delta-rs | `DeltaTable(uri)` (load) | {rs['load']:.2f} | | |",
        f"| delta-rs | `create_checkpoint()` | {rs['checkpoint']:.2f} | | |",
        f"| delta-rs | load + checkpoint | {rs['seconds']:.2f} | {rs['peak_mb']:.0f} | 1.00x |",
        f"| floor | pyarrow reads the `add` column and writes it | {results['floor']['seconds']:.2f} | "
        f"{results['floor']['peak_mb']:.0f} | {results['floor']['seconds'] / rs['seconds']:.2f}x |",
        "",
        f"core / delta-rs `create_checkpoint()` alone: {core['seconds'] / rs['checkpoint']:.2f}x; "
        f"core / floor: {core['seconds'] / results['floor']['seconds']:.2f}x.",
    ]
    report = "\n".join(lines)
    print(report)
    if args.write:
        REPORT.write_text(
            "# Checkpoint benchmark\n\n"
            "`benchmarks/bench_checkpoint.py`: checkpoint of the 1,010,000-file version 101 of table (a)\n"
            "(`generate.py`), the core against delta-rs 1.6.6 in the same run. Goal (issue 4): at most\n"
            "half of delta-rs's time.\n\n" + report + "\n"
        )


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
