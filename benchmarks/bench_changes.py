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
def usage():
    found = resource.getrusage(resource.RUSAGE_SELF)
    return found.ru_utime, found.ru_stime, found.ru_minflt
uri, start, end = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
columns = json.loads(sys.argv[4]) if len(sys.argv) > 4 else None
imports_start = time.perf_counter()
"""
_EPILOGUE = """
seconds = time.perf_counter() - start_time
user, system, faults = (after - before for after, before in zip(usage(), start_usage))
import pyarrow
# The pool the reads allocate from (after the timer: deltalake needs no pyarrow): the core's
# read pool where the core ran, else the process's default.
memory = sys.modules.get("airflow_delta_provider.core.utils.memory")
pool = (memory.READ_POOL if memory else pyarrow.default_memory_pool()).backend_name
print(json.dumps({"seconds": seconds, "cpu": user + system, "user": user, "sys": system, "faults": faults,
                  "imports": imports, "n": n, "pool": pool}))
"""
CODE = {
    "log-core": """
from airflow_delta_provider.core import DeltaTable
imports = time.perf_counter() - imports_start; start_usage = usage(); start_time = time.perf_counter()
n = DeltaTable(uri).changes(start, end).files().num_rows
""",
    "log-delta-rs": """
import deltalake
imports = time.perf_counter() - imports_start; start_usage = usage(); start_time = time.perf_counter()
reader = deltalake.DeltaTable(uri).load_cdf(starting_version=start, ending_version=end)
n = -1
""",
    "rows-core": """
from airflow_delta_provider.core import DeltaTable
import pyarrow.dataset  # imported by the first read (it imports pandas): an import, not the work
imports = time.perf_counter() - imports_start; start_usage = usage(); start_time = time.perf_counter()
n = DeltaTable(uri).changes(start, end).to_pyarrow_table(columns).num_rows
""",
    "rows-delta-rs": """
import deltalake
imports = time.perf_counter() - imports_start; start_usage = usage(); start_time = time.perf_counter()
reader = deltalake.DeltaTable(uri).load_cdf(starting_version=start, ending_version=end, columns=columns)
n = reader.read_all().num_rows
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


def run(case: str, table: Path, start: int, end: int, columns: list[str] | None = None) -> dict[str, Any]:
    code = _PRELUDE + CODE[case] + _EPILOGUE
    argv = [str(table), str(start), str(end)] + ([json.dumps(columns)] if columns is not None else [])
    # Run from the data directory: ``python -c`` puts the working directory first on the path.
    output = subprocess.run(
        [sys.executable, "-c", code, *argv], check=True, capture_output=True, text=True, cwd=DATA
    ).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def paired(
    part: str, table: Path, start: int, end: int, repeat: int, columns: list[str] | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The core's and delta-rs's runs, the two alternating within each round."""
    core, rs = [], []
    for _ in range(repeat):
        core.append(run(f"{part}-core", table, start, end, columns))
        rs.append(run(f"{part}-delta-rs", table, start, end, columns))
    return core, rs


def _median_min(runs: list[dict[str, Any]], key: str, form: str = "{:.3f}") -> str:
    values = [r[key] for r in runs]
    return f"{form.format(statistics.median(values))} ({form.format(min(values))})"


def _ratio(core: list[dict[str, Any]], rs: list[dict[str, Any]], key: str) -> str:
    """Core / delta-rs per round: median (min)."""
    ratios = [c[key] / r[key] for c, r in zip(core, rs, strict=True)]
    return f"{statistics.median(ratios):.2f}x ({min(ratios):.2f})"


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
        f"{platform.python_version()}; {args.repeat} paired rounds of fresh processes, median (min); "
        f"ratios per round; load average at the start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.",
        "",
        "| part | table | range | core s | delta-rs s | core / delta-rs | core CPU s | delta-rs CPU s | "
        "CPU ratio | core user / sys s | delta-rs user / sys s | core / delta-rs minor faults (k) | "
        "core result | core imports s | Arrow pool |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    cases: list[tuple[str, str, Path, int, int, list[str] | None]] = []
    if "log" in parts:
        for name, label in LOG_TABLES.items():
            table = DATA / name
            if not (table / ".complete").exists():
                raise SystemExit(f"{table} is missing: run benchmarks/generate.py --tables {name}")
            latest = latest_version(table)
            cases.append(("log", f"{name}: {label}", table, latest - 9, latest, None))
    if "rows" in parts:
        generate_rows_tables()
        for name in ("rows-big", "rows-many"):
            table = DATA / name
            latest = latest_version(table)
            cases.append(("rows", name, table, 0, latest, None))
            cases.append(("rows", name, table, latest - 9, latest, None))
            if name == "rows-big":  # projection: a consumer that asks for two columns decodes one
                cases.append(("rows", f"{name}, [id, _change_type]", table, latest - 9, latest, PROJECTION))
    for part, label, table, start, end, columns in cases:
        core, rs = paired(part, table, start, end, args.repeat, columns)
        what = "files" if part == "log" else "rows"
        user_sys = "{:.3f} / {:.3f}"
        line = (
            f"| {part} | {label} | {start}-{end} | {_median_min(core, 'seconds')} | "
            f"{_median_min(rs, 'seconds')} | {_ratio(core, rs, 'seconds')} | {_median_min(core, 'cpu')} | "
            f"{_median_min(rs, 'cpu')} | {_ratio(core, rs, 'cpu')} | "
            f"{user_sys.format(*_medians(core, 'user', 'sys'))} | "
            f"{user_sys.format(*_medians(rs, 'user', 'sys'))} | "
            f"{statistics.median(r['faults'] for r in core) / 1000:.0f} / "
            f"{statistics.median(r['faults'] for r in rs) / 1000:.0f} | "
            f"{int(core[0]['n']):,} {what} | {statistics.median(r['imports'] for r in core):.3f} | "
            f"{core[0]['pool']} |"
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


#: The columns of the projection row.
PROJECTION = ["id", "_change_type"]


def _medians(runs: list[dict[str, Any]], *keys: str) -> list[float]:
    return [statistics.median(r[key] for r in runs) for key in keys]


if __name__ == "__main__":
    main()
