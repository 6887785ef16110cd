"""Change-feed benchmark: ``DeltaTable.changes()`` against delta-rs ``load_cdf``, in the same run.

Two questions (issue 25):

- **log**: the changes of the last 10 commits of a table of 1k to 1M files (``generate.py``'s
  tables ``a-1k`` .. ``a``: a checkpoint, then 100 commits of 100 adds; log only). ``core`` is
  ``DeltaTable(uri).changes(v - 9).files()`` (the range's file-level changes, from nothing);
  ``delta-rs`` is ``deltalake.DeltaTable(uri).load_cdf(starting_version=v - 9)``, which plans
  the same scan without reading data (and loads the table's file list first).
- **rows**: the changed rows of a range, ``changes(s, e).to_pyarrow_table()`` against
  ``load_cdf(s, e).read_all()``, on change-data-feed tables delta-rs writes here (appends,
  updates, deletes and merges; see ``generate_rows_tables``): ``rows-big`` (21 commits of
  200,000 rows in 4 partitions, cdc files from an UPDATE, a DELETE and a MERGE) and
  ``rows-many`` (200 commits of 2,000 rows, one file each).

Each measurement runs in a fresh process (imports before the timer: for the core's rows also
``pyarrow.dataset``, which the first read imports and which imports pandas; the ``core imports``
column shows them); the core and delta-rs
alternate within each round, and the median of ``--repeat`` rounds is reported with the load
average of the machine: wall time, and the CPU time of the process (user + system, all
threads), which a loaded machine disturbs less.

The ``Arrow pool`` column names the pool the core's reads allocate from (``core/utils/memory.py``: the
system allocator unless ``ARROW_DEFAULT_MEMORY_POOL`` names one; on a VM with transparent huge
pages, mimalloc's first large allocations of a fresh process cost much system time, see
docs/read-api.md, "Cold processes"); delta-rs allocates outside Arrow's pools.

Usage: ``python benchmarks/bench_changes.py [--part log,rows] [--repeat 5] [--write-readme]``
(``python benchmarks/generate.py --tables a-1k,a-10k,a-100k,a`` first).
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
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"

_PRELUDE = """
import json, resource, sys, time
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
uri, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
imports_start = time.perf_counter()
"""
_EPILOGUE = """
seconds = time.perf_counter() - start_time
import pyarrow
# The pool the reads allocate from (after the timer: deltalake needs no pyarrow): the core's
# read pool where the core ran, else the process's default.
memory = sys.modules.get("airflow_delta_provider.core.utils.memory")
pool = (memory.READ_POOL if memory else pyarrow.default_memory_pool()).backend_name
print(json.dumps({"seconds": seconds, "cpu": cpu() - start_cpu, "imports": imports, "n": n, "pool": pool}))
"""
CODE = {
    "log-core": """
from airflow_delta_provider.core import DeltaTable
imports = time.perf_counter() - imports_start; start_cpu = cpu(); start_time = time.perf_counter()
n = DeltaTable(uri).changes(start, end).files().num_rows
""",
    "log-delta-rs": """
import deltalake
imports = time.perf_counter() - imports_start; start_cpu = cpu(); start_time = time.perf_counter()
reader = deltalake.DeltaTable(uri).load_cdf(starting_version=start, ending_version=end)
n = -1
""",
    "rows-core": """
from airflow_delta_provider.core import DeltaTable
import pyarrow.dataset  # imported by the first read (it imports pandas): an import, not the work
imports = time.perf_counter() - imports_start; start_cpu = cpu(); start_time = time.perf_counter()
n = DeltaTable(uri).changes(start, end).to_pyarrow_table().num_rows
""",
    "rows-delta-rs": """
import deltalake
imports = time.perf_counter() - imports_start; start_cpu = cpu(); start_time = time.perf_counter()
n = deltalake.DeltaTable(uri).load_cdf(starting_version=start, ending_version=end).read_all().num_rows
""",
}
LOG_TABLES = {"a-1k": "1k files", "a-10k": "10k files", "a-100k": "100k files", "a": "1M files"}


def generate_rows_tables() -> None:
    """The change-data-feed tables of the ``rows`` part, written by delta-rs (kept when present)."""
    import deltalake
    import numpy as np
    import pyarrow as pa

    def frame(first: int, count: int) -> pa.Table:
        ids = np.arange(first, first + count, dtype=np.int64)
        return pa.table(
            {
                "id": ids,
                "name": pa.array([f"name-{i}" for i in ids.tolist()]),
                "value": ids.astype(np.float64) / 7,
                "part": pa.array([f"p{i % 4}" for i in ids.tolist()]),
            }
        )

    feed = {"delta.enableChangeDataFeed": "true"}
    big = DATA / "rows-big"
    if not (big / ".complete").exists():
        shutil.rmtree(big, ignore_errors=True)
        uri = str(big)
        deltalake.write_deltalake(uri, frame(0, 200_000), partition_by=["part"], configuration=feed)
        for version in range(1, 21):
            if version == 8:
                deltalake.DeltaTable(uri).update(updates={"name": "'updated'"}, predicate="id % 10 = 1")
            elif version == 12:
                deltalake.DeltaTable(uri).delete("id % 10 = 2")
            elif version == 16:
                source = frame(150_000, 100_000)
                table = deltalake.DeltaTable(uri)
                (
                    table.merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
                    .when_matched_update(updates={"value": "s.value + 1"})
                    .when_not_matched_insert_all()
                    .execute()
                )
            else:
                deltalake.write_deltalake(uri, frame(version * 200_000, 200_000), mode="append")
        (big / ".complete").touch()
    many = DATA / "rows-many"
    if not (many / ".complete").exists():
        shutil.rmtree(many, ignore_errors=True)
        uri = str(many)
        deltalake.write_deltalake(uri, frame(0, 2_000), configuration=feed)
        for version in range(1, 200):
            deltalake.write_deltalake(uri, frame(version * 2_000, 2_000), mode="append")
        (many / ".complete").touch()


def run(case: str, table: Path, start: int, end: int) -> dict[str, Any]:
    code = _PRELUDE + CODE[case] + _EPILOGUE
    # Run from the data directory: ``python -c`` puts the working directory first on the path.
    output = subprocess.run(
        [sys.executable, "-c", code, str(table), str(start), str(end)],
        check=True,
        capture_output=True,
        text=True,
        cwd=DATA,
    ).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def paired(
    part: str, table: Path, start: int, end: int, repeat: int
) -> tuple[dict[str, float], dict[str, float]]:
    """Median core and delta-rs results, the two alternating within each round."""
    core, rs = [], []
    for _ in range(repeat):
        core.append(run(f"{part}-core", table, start, end))
        rs.append(run(f"{part}-delta-rs", table, start, end))

    def median(runs: list[dict[str, Any]]) -> dict[str, Any]:
        found = {k: statistics.median(r[k] for r in runs) for k in ("seconds", "cpu", "imports", "n")}
        return {**found, "pool": runs[0]["pool"]}

    return median(core), median(rs)


def latest_version(table: Path) -> int:
    return max(int(p.name[:20]) for p in (table / "_delta_log").glob("*.json") if p.name[:20].isdigit())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", default="log,rows")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()
    parts = args.part.split(",")
    load = os.getloadavg()
    lines = [
        f"Machine: {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, Python "
        f"{platform.python_version()}; median of {args.repeat} paired rounds of fresh processes; load "
        f"average at the start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.",
        "",
        "| part | table | range | core s | delta-rs s | core / delta-rs | core CPU s | delta-rs CPU s | "
        "CPU ratio | core result | core imports s | Arrow pool |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    cases: list[tuple[str, str, Path, int, int]] = []
    if "log" in parts:
        for name, label in LOG_TABLES.items():
            table = DATA / name
            if not (table / ".complete").exists():
                raise SystemExit(f"{table} is missing: run benchmarks/generate.py --tables {name}")
            latest = latest_version(table)
            cases.append(("log", f"{name}: {label}", table, latest - 9, latest))
    if "rows" in parts:
        generate_rows_tables()
        for name in ("rows-big", "rows-many"):
            table = DATA / name
            latest = latest_version(table)
            cases.append(("rows", name, table, 0, latest))
            cases.append(("rows", name, table, latest - 9, latest))
    for part, label, table, start, end in cases:
        core, rs = paired(part, table, start, end, args.repeat)
        what = "files" if part == "log" else "rows"
        line = (
            f"| {part} | {label} | {start}-{end} | {core['seconds']:.3f} | {rs['seconds']:.3f} | "
            f"{core['seconds'] / rs['seconds']:.2f}x | {core['cpu']:.3f} | {rs['cpu']:.3f} | "
            f"{core['cpu'] / rs['cpu']:.2f}x | {int(core['n']):,} {what} | {core['imports']:.3f} | "
            f"{core['pool']} |"
        )
        print(line, flush=True)
        lines.append(line)
    end_load = os.getloadavg()
    lines.append("")
    lines.append(f"Load average at the end {end_load[0]:.1f} / {end_load[1]:.1f} / {end_load[2]:.1f}.")
    report = "\n".join(lines)
    print(report)
    if args.write_readme:
        from bench_read import write_readme_section

        write_readme_section("changes", report)


if __name__ == "__main__":
    main()
