"""What a retried commit task costs before it knows it has nothing to do, against delta-rs.

A retry of ``DeltaPySparkOperator`` / ``DeltaCommitOperator`` whose commit already landed must
find its txn and the version holding it, without starting Spark. On table ``a`` of
``generate.py`` (1,000,000 files in a checkpoint, then 100 commits each with a txn) each run, in a
fresh process (imports excluded from the timing), answers "has ``bench-app-3`` committed version
93, and in which table version?":

- ``core``: ``already_committed(DeltaTable(uri), app_id, 93)``, the operators' own check
  (protocol, metadata and txns of the latest snapshot; the recording commit from the tail).
- ``delta-rs``: ``deltalake.DeltaTable(uri).transaction_version(app_id)`` (the txn version only;
  delta-rs has no "which version recorded it").

``--append a-1k,a`` measures instead the idempotent append that lands (``bench_read.py``'s
``core-append``: one new file under a new app version, on a hard-linked copy of the log made
before the timer) on each table in turn, round after round (A B A B ...), and reports each
table's median and the median of the per-round ratios to the first table: the goal "within 20%
of the 1k-file commit on every layout" is a ratio, and on a shared machine only paired rounds
keep it meaningful.

``--inprocess a-rs-tail-1k,a-rs-tail`` measures in one process, interleaved (table after table,
round after round), the three small-state operations of issue 23 on each pair of tables: an
idempotent append that lands (a hard-linked copy of the log per run), a *duplicate* append
(``commit_files`` of ``bench-old-3`` version 3, which the checkpoint records: skipped as already
committed) and a metadata-only snapshot (protocol, metadata, a txn). It reports the minimum CPU
time of each and its ratio to the first table of the pair (the goal: within 20%). CPU time, not
wall time: on a shared machine it is the steadier of the two; the minimum of ``--repeat``. With
``--uncached`` the core's parse caches of checkpoint footers and page indexes (kept by content)
are emptied before every run: what the first read of a checkpoint in a process pays.

Usage: ``python benchmarks/bench_retry.py [--repeat 5] [--append a-1k,a,a-100k]
[--inprocess a-rs-tail-1k,a-rs-tail [--uncached]]`` (run ``generate.py`` first).
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
TABLE = HERE / "data" / "a"
APP_ID, APP_VERSION = "bench-app-3", 93

_PRELUDE = """
import json, os, sys, time
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
uri, app_id, app_version = sys.argv[1], sys.argv[2], int(sys.argv[3])
"""

CHECKS = {
    "core": """
from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.operators.commit import already_committed
before = rss_mb(); start = time.perf_counter()
done = already_committed(DeltaTable(uri), app_id, app_version)
answer = [done.version, done.app_version] if done else None
""",
    "delta-rs": """
import deltalake
before = rss_mb(); start = time.perf_counter()
answer = [None, deltalake.DeltaTable(uri).transaction_version(app_id)]
""",
}

_REPORT = """
elapsed = time.perf_counter() - start
import resource
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": elapsed, "peak_mb": max(0.0, peak - before), "answer": answer}))
"""


def run_once(name: str) -> dict[str, float]:
    code = _PRELUDE + CHECKS[name] + _REPORT
    out = subprocess.run(
        [sys.executable, "-c", code, str(TABLE), APP_ID, str(APP_VERSION)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def append_rounds(tables: list[str], repeat: int) -> None:
    """The idempotent append on each table, interleaved; medians and per-round ratios."""
    from bench_read import _EPILOGUE, _PRELUDE, DATA, LOADS

    code = _PRELUDE + LOADS["core-append"] + _EPILOGUE
    runs: dict[str, list[dict[str, float]]] = {t: [] for t in tables}
    for _ in range(repeat):
        for table in tables:
            out = subprocess.run(
                [sys.executable, "-c", code, str(DATA / table)],
                check=True,
                capture_output=True,
                text=True,
                cwd=DATA,  # never the checkout the command was started in (see bench_read.py)
            ).stdout
            runs[table].append(json.loads(out.strip().splitlines()[-1]))
    first = runs[tables[0]]
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    print(
        f"Machine: {platform.machine()}, Python {platform.python_version()}; {repeat} rounds, "
        f"load average {load}."
    )
    print(f"| table | median s | peak MB | median of per-round ratios to {tables[0]} |")
    print("|---|---:|---:|---:|")
    for table, rows in runs.items():
        ratio = statistics.median(r["seconds"] / f["seconds"] for r, f in zip(rows, first, strict=True))
        print(
            f"| {table} | {statistics.median(r['seconds'] for r in rows):.3f} | "
            f"{statistics.median(r['peak_mb'] for r in rows):.0f} | {ratio:.2f} |"
        )


def inprocess_rounds(tables: list[str], repeat: int, uncached: bool = False) -> None:
    """Append, duplicate append and metadata-only load on each table, in this process."""
    import gc
    import os
    import shutil
    import tempfile
    import time

    import pyarrow as pa
    import pyarrow.parquet as pq
    from bench_read import DATA

    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.core.log import checkpoint_pages

    def copy_log(uri: str) -> str:
        copy = tempfile.mkdtemp(prefix="bench-inprocess-")
        os.mkdir(f"{copy}/_delta_log")
        for name in os.listdir(f"{uri}/_delta_log"):
            source, target = f"{uri}/_delta_log/{name}", f"{copy}/_delta_log/{name}"
            if name.endswith((".json", ".parquet")):
                os.link(source, target)
            else:
                shutil.copyfile(source, target)
        os.makedirs(f"{copy}/part=0")
        pq.write_table(
            pa.table({f"c{i}": pa.array([1, 2], pa.int64()) for i in range(3)}), f"{copy}/part=0/n.parquet"
        )
        return copy

    def append(uri: str) -> float:
        copy = copy_log(uri)
        start = time.process_time()
        result = DeltaTable(copy).commit_files(
            ["part=0/n.parquet"], app_id="bench-new", app_version=1, auto_checkpoint=False
        )
        elapsed = time.process_time() - start
        shutil.rmtree(copy)
        assert result.committed
        return elapsed

    def duplicate(uri: str) -> float:
        start = time.process_time()
        result = DeltaTable(uri).commit_files(
            ["part=0/never-read.parquet"], app_id="bench-old-3", app_version=3
        )
        elapsed = time.process_time() - start
        assert not result.committed
        return elapsed

    def metadata_only(uri: str) -> float:
        start = time.process_time()
        snapshot = DeltaTable(uri).snapshot()
        _ = snapshot.protocol, snapshot.metadata
        snapshot.app_transaction_version("bench-old-3")
        return time.process_time() - start

    operations = {"append": append, "duplicate": duplicate, "metadata-only": metadata_only}
    runs: dict[tuple[str, str], list[float]] = {}
    for _ in range(repeat):
        for name, operation in operations.items():
            for table in tables:
                gc.collect()
                if uncached:
                    checkpoint_pages.clear_caches()
                runs.setdefault((name, table), []).append(operation(str(DATA / table)))
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    caches = "parse caches emptied before each run" if uncached else "parse caches kept"
    print(f"In one process, interleaved, min CPU of {repeat} ({caches}); load average {load}.")
    print("| operation | " + " | ".join(tables) + " | ratio to the first |")
    print("|---|" + "---:|" * (len(tables) + 1))
    for name in operations:
        best = [min(runs[(name, table)]) for table in tables]
        ratios = ", ".join(f"{b / best[0]:.2f}x" for b in best[1:])
        print(f"| {name} | " + " | ".join(f"{b * 1000:.1f} ms" for b in best) + f" | {ratios} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--append", default=None, help="tables for the paired append (e.g. a-1k,a)")
    parser.add_argument(
        "--inprocess", default=None, help="tables measured in this process (e.g. a-rs-tail-1k,a-rs-tail)"
    )
    parser.add_argument(
        "--uncached", action="store_true", help="with --inprocess: empty the parse caches before each run"
    )
    args = parser.parse_args()
    if args.inprocess:
        inprocess_rounds(args.inprocess.split(","), args.repeat, args.uncached)
        return
    if args.append:
        append_rounds(args.append.split(","), args.repeat)
        return
    if not (TABLE / "_delta_log").is_dir():
        raise SystemExit(f"No table at {TABLE}; run benchmarks/generate.py first.")
    results: dict[str, dict[str, float]] = {}
    for name in CHECKS:
        runs = [run_once(name) for _ in range(args.repeat)]
        answers = {json.dumps(r["answer"]) for r in runs}
        results[name] = {
            "seconds": statistics.median(r["seconds"] for r in runs),
            "peak_mb": statistics.median(r["peak_mb"] for r in runs),
            "answer": json.loads(answers.pop()),
        }
    base = results["delta-rs"]["seconds"]
    print(
        f"Machine: {platform.machine()}, Python {platform.python_version()}; "
        f"median of {args.repeat} processes."
    )
    print("| contender | median s | peak MB | vs delta-rs | answer (recording version, txn version) |")
    print("|---|---:|---:|---:|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['seconds']:.3f} | {r['peak_mb']:.0f} | {r['seconds'] / base:.2f}x "
            f"| {r['answer']} |"
        )


if __name__ == "__main__":
    main()
