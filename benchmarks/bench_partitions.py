"""Changes of one partition: ``DeltaTable.changes(..., partition_filter=...)`` costs what the partition's
files cost, not what the table's do (issue 33).

The table (``generate_table``, under ``benchmarks/data/partitions-1m``): partitioned by ``ds``,
1,000 commits of 1,000 adds each, one day per commit (a daily producer's log), so 1,000,000 active
files, and a checkpoint every 100 versions; Spark-like JSON statistics on three columns. The log
is complete; only the data files of
the day measured exist (1,000 Parquet files of 10 rows), so a read that opened another day's file
would fail. The baseline (``partitions-1k``) is a table holding that day alone: one commit of the
same 1,000 files (hard links).

Cases, each in a fresh process (imports before the timer), the median of ``--repeat`` runs:

- **files**: the file-level changes, ``changes(start, partition_filter="ds = :day").files()``;
- **rows**: the changed rows, ``....to_pyarrow_table()``;
- over the whole range (all 1,000 commits: every file of the table in the log read) and over the
  last 10 commits (a consumer's usual read: 10,000 files), against the same read of the
  one-day table and against ``changes(start).files()`` without a filter (the rows of every day
  cannot be read: their files do not exist).

Usage: ``python benchmarks/bench_partitions.py [--repeat 5] [--write-readme]``.
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
from typing import Any

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
BIG = DATA / "partitions-1m"
SMALL = DATA / "partitions-1k"
DAYS = 1000
FILES_PER_DAY = 1000
#: The day measured: one in the middle of the log.
DAY_INDEX = 500

_CODE = """
import json, resource, sys, time
def cpu():
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime
uri, start, day, what = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
filtered = sys.argv[5] == "1"
from airflow_delta_provider.core import DeltaTable
import pyarrow.dataset  # the first read imports it (and pandas): an import, not the work
start_cpu, start_time = cpu(), time.perf_counter()
kwargs = {"partition_filter": "ds = :day", "parameters": {"day": day}} if filtered else {}
changes = DeltaTable(uri).changes(start, **kwargs)
n = changes.files().num_rows if what == "files" else changes.to_pyarrow_table().num_rows
seconds = time.perf_counter() - start_time
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"seconds": seconds, "cpu": cpu() - start_cpu, "n": n, "peak_mb": peak}))
"""


def day_of(index: int) -> str:
    import datetime as dt

    return (dt.date(2024, 1, 1) + dt.timedelta(days=index)).isoformat()


def _stats(n: int) -> str:
    return (
        f'{{"numRecords":10,"minValues":{{"id":{n},"v":{n},"w":"a{n}"}},'
        f'"maxValues":{{"id":{n + 9},"v":{n + 9},"w":"z{n}"}},"nullCount":{{"id":0,"v":0,"w":0}}}}'
    )


def _metadata_lines() -> list[str]:
    schema = {
        "type": "struct",
        "fields": [
            {"name": name, "type": kind, "nullable": True, "metadata": {}}
            for name, kind in (("id", "long"), ("v", "long"), ("w", "string"), ("ds", "string"))
        ],
    }
    return [
        json.dumps({"commitInfo": {"timestamp": 1_790_000_000_000, "operation": "CREATE TABLE"}}),
        json.dumps({"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}),
        json.dumps(
            {
                "metaData": {
                    "id": "partitions-benchmark",
                    "format": {"provider": "parquet", "options": {}},
                    "schemaString": json.dumps(schema),
                    "partitionColumns": ["ds"],
                    "configuration": {},
                    "createdTime": 1_790_000_000_000,
                }
            }
        ),
    ]


def _add(day: str, n: int) -> str:
    path = f"ds={day}/part-{n:07d}.parquet"
    return json.dumps(
        {
            "add": {
                "path": path,
                "partitionValues": {"ds": day},
                "size": 600,
                "modificationTime": 1_790_000_000_000,
                "dataChange": True,
                "stats": _stats(n),
            }
        },
        separators=(",", ":"),
    )


def generate_table() -> None:
    """The two tables (kept when their ``.complete`` marker exists)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    if (BIG / ".complete").exists() and (SMALL / ".complete").exists():
        return
    import shutil

    shutil.rmtree(BIG, ignore_errors=True)
    shutil.rmtree(SMALL, ignore_errors=True)
    log = BIG / "_delta_log"
    log.mkdir(parents=True)
    (log / f"{0:020d}.json").write_text("\n".join(_metadata_lines()) + "\n")
    write = json.dumps({"commitInfo": {"timestamp": 1_790_000_000_000, "operation": "WRITE"}})
    for index in range(DAYS):
        day = day_of(index)
        lines = [write, *(_add(day, index * FILES_PER_DAY + n) for n in range(FILES_PER_DAY))]
        (log / f"{index + 1:020d}.json").write_text("\n".join(lines) + "\n")
    day = day_of(DAY_INDEX)
    (BIG / f"ds={day}").mkdir()
    for n in range(FILES_PER_DAY):
        first = DAY_INDEX * FILES_PER_DAY + n
        pq.write_table(
            pa.table({"id": list(range(first, first + 10)), "v": list(range(10)), "w": ["x"] * 10}),
            BIG / f"ds={day}" / f"part-{first:07d}.parquet",
        )
    from airflow_delta_provider.core import DeltaTable

    for version in range(100, DAYS + 1, 100):  # as a table of 1,000 commits has them
        DeltaTable(str(BIG)).checkpoint(version)
    (BIG / ".complete").touch()
    small_log = SMALL / "_delta_log"
    small_log.mkdir(parents=True)
    (small_log / f"{0:020d}.json").write_text("\n".join(_metadata_lines()) + "\n")
    lines = [write, *(_add(day, DAY_INDEX * FILES_PER_DAY + n) for n in range(FILES_PER_DAY))]
    (small_log / f"{1:020d}.json").write_text("\n".join(lines) + "\n")
    (SMALL / f"ds={day}").mkdir()
    for name in os.listdir(BIG / f"ds={day}"):
        os.link(BIG / f"ds={day}" / name, SMALL / f"ds={day}" / name)
    (SMALL / ".complete").touch()


def run(table: Path, start: int, day: str, what: str, *, filtered: bool) -> dict[str, Any]:
    output = subprocess.run(
        [sys.executable, "-c", _CODE, str(table), str(start), day, what, "1" if filtered else "0"],
        check=True,
        capture_output=True,
        text=True,
        cwd=DATA,
    ).stdout
    result: dict[str, Any] = json.loads(output.strip().splitlines()[-1])
    return result


def median(table: Path, start: int, day: str, what: str, *, filtered: bool, repeat: int) -> dict[str, Any]:
    runs = [run(table, start, day, what, filtered=filtered) for _ in range(repeat)]
    return {k: statistics.median(r[k] for r in runs) for k in ("seconds", "cpu", "n", "peak_mb")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()
    generate_table()
    load = os.getloadavg()
    lines = [
        f"Machine: {platform.machine()}, {len(os.sched_getaffinity(0))} CPUs, Python "
        f"{platform.python_version()}; median of {args.repeat} fresh processes; load average at the "
        f"start {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.",
        "",
        "| read | range | table | result | median s | CPU s | peak MB |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    cases = [
        ("files, one day", 1, "files", True, BIG, "1M files"),
        ("files, one day", 1, "files", True, SMALL, "the day alone"),
        ("files, every day", 1, "files", False, BIG, "1M files"),
        ("rows, one day", 1, "rows", True, BIG, "1M files"),
        ("rows, one day", 1, "rows", True, SMALL, "the day alone"),
        ("files, one day", DAYS - 9, "files", True, BIG, "1M files"),
        ("files, every day", DAYS - 9, "files", False, BIG, "1M files"),
    ]
    for label, start, what, filtered, table, name in cases:
        # Over the last 10 commits, a day among them (its files' actions; no rows: they do not exist).
        day = day_of(DAY_INDEX if start == 1 else DAYS - 5)
        found = median(table, start, day, what, filtered=filtered, repeat=args.repeat)
        last = DAYS if table is BIG else 1
        unit = "file actions" if what == "files" else "rows"
        line = (
            f"| {label} | {start}-{last} | {name} | {int(found['n']):,} {unit} | {found['seconds']:.3f} | "
            f"{found['cpu']:.3f} | {found['peak_mb']:.0f} |"
        )
        print(line, flush=True)
        lines.append(line)
    end = os.getloadavg()
    lines += ["", f"Load average at the end {end[0]:.1f} / {end[1]:.1f} / {end[2]:.1f}."]
    report = "\n".join(lines)
    print(report)
    if args.write_readme:
        from bench_read import write_readme_section

        write_readme_section("partitions", report)


if __name__ == "__main__":
    main()
