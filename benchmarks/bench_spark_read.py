"""A Spark scan of a table with deletion vectors against the same scan of the table without them.

Two tables hold the same Parquet files (hard links): ``plain`` and ``dv``, where every file carries
a deletion vector (stored in a DV file, as Spark writes them) deleting ``--deleted`` of its rows
at random. ``read_delta`` scans each on one local SparkSession, aggregating every column of every
row; the two scans alternate, pair by pair, after a warm-up, and the
ratio dv / plain is taken per pair. For scale, delta-rs (``deltalake``, its DataFusion reader,
which applies deletion vectors too) scans both tables in the same run.

Goal (issue 25): the scan with deletion vectors at most 1.3x the scan without.

    .venv/bin/python benchmarks/bench_spark_read.py [--files 8 --rows 500000 --deleted 0.03 --repeat 5]
    .venv/bin/python benchmarks/bench_spark_read.py --write-readme
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.log import (
    deletion_vector_file,
    encode_deletion_vector_file_id,
    serialize_deletion_vector,
)
from airflow_delta_provider.core.protocol import AddFile, RemoveFile
from airflow_delta_provider.core.transaction import CommitPlan, OptimisticTransaction

README = Path(__file__).resolve().parent / "README.md"
MARKERS = ("<!-- spark-read:start -->", "<!-- spark-read:end -->")


def build(root: Path, files: int, rows: int, deleted: float) -> tuple[str, str]:
    """The two tables under ``root``: ``plain`` and ``dv`` (same files, deletion vectors added)."""
    rng = np.random.default_rng(25)
    plain, dv = root / "plain", root / "dv"
    schema = pa.schema(
        [("id", pa.int64()), ("value", pa.float64()), ("name", pa.string()), ("day", pa.date32())]
    )
    tables = {
        "plain": DeltaTable.create(str(plain), schema),
        "dv": DeltaTable.create(str(dv), schema, properties={"delta.enableDeletionVectors": "true"}),
    }
    names = []
    for n in range(files):
        ids = np.arange(n * rows, (n + 1) * rows, dtype=np.int64)
        data = pa.table(
            {
                "id": ids,
                "value": rng.random(rows),
                "name": pa.array([f"name-{i % 1000:04d}" for i in range(rows)]),
                "day": pa.array((ids % 365).astype("int32"), pa.int32()).cast(pa.date32()),
            }
        )
        name = f"part-{n:05d}.parquet"
        pq.write_table(data, plain / name, row_group_size=128 * 1024)
        os.link(plain / name, dv / name)
        names.append(name)
    for table in tables.values():
        table.commit_files(names)
    snapshot = tables["dv"].snapshot()
    removes: list[RemoveFile] = []
    adds: list[AddFile] = []
    for add in snapshot.files().to_pylist():
        victims = np.sort(rng.choice(rows, size=int(rows * deleted), replace=False)).astype(np.uint64)
        bitmap = serialize_deletion_vector(victims)
        file_id = uuid.uuid4()
        (dv / f"deletion_vector_{file_id}.bin").write_bytes(deletion_vector_file(bitmap))
        descriptor = {
            "storageType": "u",
            "pathOrInlineDv": encode_deletion_vector_file_id(file_id),
            "offset": 1,
            "sizeInBytes": len(bitmap),
            "cardinality": len(victims),
        }
        common = {"partition_values": {}, "size": add["size"], "stats": add["stats"]}
        removes.append(RemoveFile(add["path"], deletion_timestamp=1, **common))
        adds.append(AddFile(add["path"], modification_time=1, deletion_vector=descriptor, **common))
    OptimisticTransaction(tables["dv"].storage, read_snapshot=snapshot).commit(
        CommitPlan("DELETE", removes=tuple(removes), adds=tuple(adds))
    )
    return str(plain), str(dv)


def spark_scan(spark: Any, uri: str) -> tuple[float, float, list[Any]]:
    """One scan that reads every value of every row: an aggregate over all columns (the ``noop``
    sink would never read the values Spark decodes lazily). Returns the wall time, the CPU time
    of the driver's Python process and of the JVM (local mode: the executors' threads, the JIT
    and the garbage collector included), and the aggregate."""
    from pyspark.sql import functions as F

    from airflow_delta_provider.spark import read_delta

    jvm = _jvm_pid(spark)
    start, cpu = time.perf_counter(), _cpu_seconds(os.getpid()) + _cpu_seconds(jvm)
    result = (
        read_delta(spark, uri)
        .agg(F.count("*"), F.sum("id"), F.sum("value"), F.max("name"), F.max("day"))
        .collect()
    )
    return time.perf_counter() - start, _cpu_seconds(os.getpid()) + _cpu_seconds(jvm) - cpu, result


def _jvm_pid(spark: Any) -> int:
    return int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process, all its threads (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rs_scan(uri: str) -> tuple[float, float]:
    """delta-rs's scan of every column and row (its batches consumed), wall and CPU time."""
    from deltalake import DeltaTable as RsDeltaTable
    from deltalake import QueryBuilder

    start, cpu = time.perf_counter(), _cpu_seconds(os.getpid())
    reader = QueryBuilder().register("t", RsDeltaTable(uri)).execute("SELECT * FROM t")
    for _ in reader:
        pass
    return time.perf_counter() - start, _cpu_seconds(os.getpid()) - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--deleted", type=float, default=0.03)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-readme", action="store_true")
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="bench-spark-read-") as work:
        plain, dv = build(Path(work), args.files, args.rows, args.deleted)
        assert spark.read.parquet(plain).count() == args.files * args.rows
        spark_scan(spark, plain), spark_scan(spark, dv)  # warm-up: JIT, the session's caches
        runs: dict[str, list[tuple[float, float]]] = {"plain": [], "dv": [], "rs-plain": [], "rs-dv": []}
        loads = []
        for _ in range(args.repeat):
            loads.append(os.getloadavg()[0])
            *measured, plain_rows = spark_scan(spark, plain)
            runs["plain"].append((measured[0], measured[1]))
            *measured, dv_rows = spark_scan(spark, dv)
            runs["dv"].append((measured[0], measured[1]))
            runs["rs-plain"].append(rs_scan(plain))
            runs["rs-dv"].append(rs_scan(dv))
        expected = args.files * (args.rows - int(args.rows * args.deleted))  # as build() deletes
        assert plain_rows[0][0] == args.files * args.rows and dv_rows[0][0] == expected, (plain_rows, dv_rows)
    spark.stop()
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"Spark {spark.version} local[2]; load average (1 min) during the pairs {min(loads):.1f}-"
        f"{max(loads):.1f}.",
        f"{args.files} files x {args.rows:,} rows (id, value, name, day), {args.deleted:.0%} of each "
        f"file's rows deleted by its deletion vector; {args.repeat} pairs after a warm-up. CPU: the "
        f"JVM's and the driver's user + system time (Spark), the process's (delta-rs).",
        "",
        "| scan | wall s median (min) | CPU s median (min) | dv / plain per pair, wall: median (min) | "
        "CPU: median (min) |",
        "|---|---:|---:|---:|---:|",
        _row("read_delta, plain", runs["plain"], None),
        _row("read_delta, deletion vectors", runs["dv"], runs["plain"]),
        _row("delta-rs, plain", runs["rs-plain"], None),
        _row("delta-rs, deletion vectors", runs["rs-dv"], runs["rs-plain"]),
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_readme:
        _write_readme(text)


def _row(name: str, runs: list[tuple[float, float]], base: list[tuple[float, float]] | None) -> str:
    walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
    cells = [
        f"{statistics.median(walls):.2f} ({min(walls):.2f})",
        f"{statistics.median(cpus):.2f} ({min(cpus):.2f})",
    ]
    if base is None:
        cells += ["", ""]
    else:
        for index in (0, 1):
            ratios = [r[index] / b[index] for r, b in zip(runs, base, strict=True)]
            cells.append(f"{statistics.median(ratios):.2f}x ({min(ratios):.2f})")
    return f"| {name} | " + " | ".join(cells) + " |"


def _write_readme(text: str) -> None:
    readme = README.read_text()
    start, end = MARKERS
    block = f"{start}\n{text}\n{end}"
    if start in readme:
        readme = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, readme, flags=re.S)
    else:
        readme = readme.rstrip("\n") + "\n\n" + block + "\n"
    README.write_text(readme)


if __name__ == "__main__":
    main()
