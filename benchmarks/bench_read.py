"""Snapshot-load benchmark: the core against delta-rs and the floor, on the tables of generate.py.

Each measurement runs in a fresh Python process: imports first, then the timed load.
Reported: the median wall time over ``--repeat`` runs, the peak RSS growth of the process
during the load (``ru_maxrss`` after minus RSS before, MB), and the median time of the imports
before the timer (they are not in the load time, and they differ: ``deltalake`` imports no
pyarrow, the core imports pyarrow and its compute, JSON and Parquet modules; a cold process
pays both).

Contenders:
- ``core``: ``DeltaTable(uri).snapshot().files()`` (the full file list as Arrow).
- ``delta-rs``: ``deltalake.DeltaTable(uri).get_add_actions(flatten=False)``.
- ``floor``: pyarrow reads the checkpoint's ``add`` column and the tail JSON, nothing else
  (``ParquetFile.read``: ``pq.read_table`` would import pandas, which is not what the
  work needs).
- ``core-meta`` / ``delta-rs-meta`` (table a): protocol, metadata and one txn.
- ``core-part``: ``snapshot(partition_filter=...).files()``, the files of one partition (``part = 7``,
  1 % of the files, on the a tables; ``part = 100``, exactly 100 files, on the p tables).
- ``core-retry``: ``DeltaTable(uri).already_committed(app, version)`` on a txn the table holds.
- ``core-precheck``: ``commit_files`` of an already committed ``(app_id, app_version)`` (the
  idempotent pre-check: nothing is read beyond the small state, nothing is written).
- ``core-append``: an idempotent append of one new file (a new app version) that lands, on a
  copy of the log made before the timer starts (commits and checkpoints hard-linked, the small
  files copied).

Layouts: ``a`` and ``c`` hold checkpoints shaped as the core writes them; ``a-rs`` and
``a-spark`` are table ``a`` with checkpoints as delta-rs and Spark write them (see generate.py),
``a-spark`` with Spark's ``.crc`` files; ``-1k``/``-10k``/``-100k`` are the same layouts at
smaller checkpoints.

Usage: ``python benchmarks/bench_read.py [--tables a,b,c,a-rs,a-spark] [--cases core,core-meta]
[--repeat 5] [--write-readme]``. The measured processes run in ``benchmarks/data``, so the core
they import is the one ``PYTHONPATH`` names (or the installed one), never the working directory's:
``PYTHONPATH=/path/to/other/checkout`` measures that checkout.
"""

from __future__ import annotations

import argparse
import json
import os
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
imports_start = time.perf_counter()
"""

LOADS = {
    "core": """
from airflow_delta_provider.core import DeltaTable
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
n = DeltaTable(uri).snapshot().files().num_rows
""",
    "delta-rs": """
import deltalake
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
n = deltalake.DeltaTable(uri).get_add_actions(flatten=False).num_rows
""",
    "floor": """
import pyarrow.parquet as pq, pyarrow.json as pj, io
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
log = uri + "/_delta_log"
checkpoints = sorted(glob.glob(log + "/*.checkpoint.parquet"))
n = 0
since = -1
if checkpoints:
    n = pq.ParquetFile(checkpoints[-1]).read(columns=["add"]).num_rows  # no pandas import
    since = int(os.path.basename(checkpoints[-1])[:20])
commits = [p for p in sorted(glob.glob(log + "/*.json")) if int(os.path.basename(p)[:20]) > since]
tail = b"".join(open(p, "rb").read() for p in commits)
n += pj.read_json(io.BytesIO(tail)).num_rows if tail else 0
""",
    "core-part": """
from airflow_delta_provider.core import DeltaTable
import pandas  # what typing the filter's literals imports (pa.scalar of a Python value): an import
# issue 32: the p tables' partition of exactly 100 files; 1 % of the files of the a tables
predicate = "part = 100" if os.path.basename(uri).startswith("p-") else "part = 7"
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
n = DeltaTable(uri).snapshot(partition_filter=predicate).files().num_rows
""",
    "core-meta": """
from airflow_delta_provider.core import DeltaTable
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
snapshot = DeltaTable(uri).snapshot()
snapshot.protocol, snapshot.metadata
n = snapshot.app_transaction_version("bench-app-3")
""",
    "core-retry": """
from airflow_delta_provider.core import DeltaTable
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
n = DeltaTable(uri).already_committed("bench-app-3", 3).version
""",
    "core-precheck": """
from airflow_delta_provider.core import DeltaTable
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
n = DeltaTable(uri).commit_files(["part=0/never-read.parquet"], app_id="bench-app-3", app_version=3).reason
""",
    "core-append": """
import atexit, shutil, tempfile
import pyarrow as pa, pyarrow.parquet as pq
from airflow_delta_provider.core import DeltaTable
copy = tempfile.mkdtemp(prefix="bench-append-")
atexit.register(shutil.rmtree, copy)
os.mkdir(copy + "/_delta_log")
for name in os.listdir(uri + "/_delta_log"):
    source, target = uri + "/_delta_log/" + name, copy + "/_delta_log/" + name
    if name.endswith((".json", ".parquet")):
        os.link(source, target)  # never rewritten in place
    else:
        shutil.copyfile(source, target)  # _last_checkpoint, .crc: copies
os.makedirs(copy + "/part=0")
data = pa.table({f"c{i}": pa.array([1, 2], pa.int64()) for i in range(3)})
pq.write_table(data, copy + "/part=0/new.parquet")
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
result = DeltaTable(copy).commit_files(
    ["part=0/new.parquet"], app_id="bench-new-app", app_version=1, auto_checkpoint=False
)
n = result.version
""",
    "delta-rs-meta": """
import deltalake
before = rss_mb(); start_cpu = time.process_time(); start = time.perf_counter()
table = deltalake.DeltaTable(uri)  # without_files is deprecated and ignored in 1.6
table.metadata(), table.protocol()
n = table.transaction_version("bench-app-3")
""",
}

_EPILOGUE = """
elapsed = time.perf_counter() - start
cpu = time.process_time() - start_cpu
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
imports = start - imports_start
found = {"seconds": elapsed, "cpu": cpu, "peak_mb": peak - before, "imports": imports, "result": str(n)}
print(json.dumps(found))
"""

_SMALL_STATE = ["core-meta", "delta-rs-meta", "core-retry", "core-precheck", "core-append"]
CASES = {
    "a": ["core", "delta-rs", "floor", *_SMALL_STATE],
    "b": ["core", "delta-rs", "floor"],
    "c": ["core", "delta-rs", "floor"],
}
DESCRIPTIONS = {
    "a": "1M files in a checkpoint + 100 commits x 100 adds",
    "b": "10,000 JSON commits, no checkpoint",
    "c": "100k files, 20-column stats",
}
for _layout, _what in (
    ("core", "the core's checkpoint (sorted by partition)"),
    ("rs", "delta-rs's checkpoint (one row group)"),
    ("spark", "a Spark-like checkpoint (hash order)"),
):
    for _size, _label in (("10k", "10k"), ("1m", "1M")):
        CASES[f"p-{_layout}-{_size}"] = ["core", "delta-rs", "core-part"]
        DESCRIPTIONS[f"p-{_layout}-{_size}"] = f"{_label} files, a partition of 100, {_what}"
for _size, _label in (("", "1M"), ("-100k", "100k"), ("-10k", "10k"), ("-1k", "1k")):
    CASES[f"a-rs{_size}"] = CASES[f"a-spark{_size}"] = ["core", "delta-rs", "floor", *_SMALL_STATE]
    if _size:
        CASES[f"a{_size}"] = CASES["a"]
        DESCRIPTIONS[f"a{_size}"] = f"{_label} files, core-like checkpoint, no .crc, 100 commits after it"
    DESCRIPTIONS[f"a-rs{_size}"] = f"{_label} files, delta-rs checkpoint (one row group, no .crc)"
    DESCRIPTIONS[f"a-spark{_size}"] = f"{_label} files, Spark-like checkpoint + .crc, 100 commits after it"
    # Issue 23: the small actions last in one row group, and no .crc to answer for them.
    for _name, _what in (
        ("a-rs-tail", "delta-rs checkpoint (small actions last), 100 commits after it"),
        ("a-spark-nocrc", "Spark-like checkpoint, no .crc, small actions last"),
        ("a-spark-mp", "Spark-like two-part checkpoint, no .crc"),
    ):
        CASES[f"{_name}{_size}"] = ["core", "delta-rs", "floor", *_SMALL_STATE]
        DESCRIPTIONS[f"{_name}{_size}"] = f"{_label} files, {_what}"


for _table, _cases in CASES.items():
    if _table.startswith("a") and "core-part" not in _cases:
        CASES[_table] = [*_cases, "core-part"]


def measure(table: str, contender: str, repeat: int) -> dict[str, float]:
    """Median seconds and median peak-RSS growth of one contender on one table."""
    runs = [run_once(table, contender) for _ in range(repeat)]
    return {
        "seconds": statistics.median(r["seconds"] for r in runs),
        "peak_mb": statistics.median(r["peak_mb"] for r in runs),
        "imports": statistics.median(r["imports"] for r in runs),
    }


def run_once(table: str, contender: str) -> dict[str, float]:
    """One fresh process of one contender on one table."""
    code = _PRELUDE + LOADS[contender] + _EPILOGUE
    # Run from the data directory: ``python -c`` puts the working directory first on the path,
    # which would import the checkout the command was started in whatever PYTHONPATH says.
    output = subprocess.run(
        [sys.executable, "-c", code, str(DATA / table)],
        check=True,
        capture_output=True,
        text=True,
        cwd=DATA,
    ).stdout
    result: dict[str, float] = json.loads(output.strip().splitlines()[-1])
    return result


def growth(tables: list[str], contender: str, repeat: int) -> list[str]:
    """The contender on each table in fresh processes, the tables alternating; min and median of
    wall and CPU time, and each table's ratio to the first (per round: median (min))."""
    runs: dict[str, list[dict[str, float]]] = {t: [] for t in tables}
    for _ in range(repeat):
        for table in tables:
            runs[table].append(run_once(table, contender))
    lines = [
        f"| table | {contender} wall ms median (min) | CPU ms median (min) | / {tables[0]} wall, per round: "
        "median (min) | CPU |",
        "|---|---:|---:|---:|---:|",
    ]
    for table in tables:
        cells = []
        for key in ("seconds", "cpu"):
            values = [r[key] * 1000 for r in runs[table]]
            cells.append(f"{statistics.median(values):.2f} ({min(values):.2f})")
        for key in ("seconds", "cpu"):
            ratios = [r[key] / b[key] for r, b in zip(runs[table], runs[tables[0]], strict=True)]
            cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f})")
        lines.append(f"| {table}: {DESCRIPTIONS[table]} | " + " | ".join(cells) + " |")
    return lines


_INPROCESS = """
import gc, json, sys, time
uri, repeat = sys.argv[1], int(sys.argv[2])
import deltalake
from airflow_delta_provider.core import DeltaTable
def core():
    return DeltaTable(uri).snapshot().files().num_rows
def rs():
    return deltalake.DeltaTable(uri).get_add_actions(flatten=False).num_rows
runs = {"core": [], "delta-rs": []}
assert core() == rs()  # warm: imports, the first read of each
for _ in range(repeat):
    for name, load in (("core", core), ("delta-rs", rs)):
        gc.collect()
        cpu, start = time.process_time(), time.perf_counter()
        load()
        runs[name].append((time.perf_counter() - start, time.process_time() - cpu))
print(json.dumps(runs))
"""


def inprocess(tables: list[str], repeat: int) -> list[str]:
    """The full file list in one process per table, core and delta-rs interleaved ``repeat`` times
    after a warm-up: min and median of wall and CPU time, and the ratio of the minima."""
    lines = [
        "| table | contender | wall ms min | wall ms median | CPU ms min | CPU ms median | core / delta-rs, "
        "wall (min / min) | CPU (min / min) |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for table in tables:
        output = subprocess.run(
            [sys.executable, "-c", _INPROCESS, str(DATA / table), str(repeat)],
            check=True,
            capture_output=True,
            text=True,
            cwd=DATA,
        ).stdout
        runs = json.loads(output.strip().splitlines()[-1])
        minima = {name: (min(r[0] for r in found), min(r[1] for r in found)) for name, found in runs.items()}
        for name, found in runs.items():
            walls, cpus = [r[0] * 1000 for r in found], [r[1] * 1000 for r in found]
            ratio = ["", ""]
            if name == "core":
                ratio = [f"{minima['core'][i] / minima['delta-rs'][i]:.2f}x" for i in (0, 1)]
            lines.append(
                f"| {table}: {DESCRIPTIONS[table]} | {name} | {min(walls):.2f} | "
                f"{statistics.median(walls):.2f} | {min(cpus):.2f} | {statistics.median(cpus):.2f} | "
                f"{ratio[0]} | {ratio[1]} |"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", default="a,b,c,a-rs,a-spark")
    parser.add_argument("--cases", default=None, help="contenders to run (default: all of each table's)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-readme", action="store_true")
    parser.add_argument(
        "--inprocess",
        action="store_true",
        help="core files() vs delta-rs in one process per table (issue 32)",
    )
    parser.add_argument(
        "--growth",
        action="store_true",
        help="one contender (--cases) on --tables in alternating fresh processes",
    )
    args = parser.parse_args()
    load = os.getloadavg()
    if args.inprocess or args.growth:
        tables = args.tables.split(",")
        found = inprocess(tables, args.repeat) if args.inprocess else growth(tables, args.cases, args.repeat)
        end = os.getloadavg()
        what = "one process per table, interleaved" if args.inprocess else "fresh processes, alternating"
        report = "\n".join(
            [
                f"Machine: {platform.machine()}, {_cpus()} CPUs, Python {platform.python_version()}; "
                f"{args.repeat} rounds, {what}; load average {load[0]:.1f} at the start, {end[0]:.1f} "
                "at the end.",
                "",
                *found,
            ]
        )
        print(report)
        if args.write_readme:
            write_readme_section("inprocess" if args.inprocess else f"growth-{args.cases}", report)
        return
    lines = [
        f"Machine: {platform.machine()}, {_cpus()} CPUs, Python {platform.python_version()}; "
        f"median of {args.repeat} fresh processes.",
        "",
        "| table | contender | median s | peak MB | vs delta-rs | vs floor | imports s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for table in args.tables.split(","):
        chosen = args.cases.split(",") if args.cases else CASES[table]
        wanted = [c for c in chosen if c in CASES[table]]
        results = {c: measure(table, c, args.repeat) for c in wanted}
        before = len(lines)
        for contender, result in results.items():
            small = contender in _SMALL_STATE
            base = results.get("delta-rs-meta" if small else "delta-rs")
            ratio = f"{result['seconds'] / base['seconds']:.3f}x" if base else ""
            floor = results.get("floor")
            vs_floor = "" if small or not floor else f"{result['seconds'] / floor['seconds']:.2f}x"
            lines.append(
                f"| {table}: {DESCRIPTIONS[table]} | {contender} | {result['seconds']:.3f} | "
                f"{result['peak_mb']:.0f} | {ratio} | {vs_floor} | {result['imports']:.3f} |"
            )
        if "core-meta" in results and "delta-rs" in results:
            share = results["core-meta"]["seconds"] / results["delta-rs"]["seconds"]
            lines.append(f"| {table} | core-meta / delta-rs full load | {share:.2%} | | | | |")
        print("\n".join(lines[before:]), flush=True)
    report = "\n".join(lines)
    print(report)
    if args.write_readme:
        write_readme_section("results", report)


def write_readme_section(name: str, report: str) -> None:
    """Replace what README.md holds between ``<!-- name:start -->`` and ``<!-- name:end -->``."""
    text = README.read_text()
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    README.write_text(f"{head}{start}\n{report}\n{end}{tail}")


def _cpus() -> int:
    import os

    return len(os.sched_getaffinity(0))


if __name__ == "__main__":
    main()
