"""Spark scans of tables with deletion vectors against the same scans of the tables without them.

Tables hold the same Parquet files (hard links), with and without deletion vectors (in DV files,
as Spark writes them, each deleting ``--deleted`` of its file's rows at random). Four pairs:

- ``unpartitioned``: 8 files x 500,000 rows, a deletion vector on every file;
- ``partitioned, half``: the same files in 4 partitions, a deletion vector on every other file
  (the files without one are read without row indexes);
- ``200 files``: 200 files x 10,000 rows, a deletion vector on every file (the per-file plan cost);
- ``OPTIMIZE read``: the rows an OPTIMIZE rewrite on Spark keeps of 8 files with deletion vectors
  (``operators/optimize._surviving_rows``: one keyed scan) against the former route (one read and
  one broadcast anti-join of the deleted rows, made in Python, per file).

``read_delta`` (or the OPTIMIZE frame) aggregates every column of every row. Each of
``--processes`` fresh processes opens a local SparkSession, warms every scan up once (JIT, the
session's caches), then times each pair once, the two sides one after the other; the ratio is
taken per process, and the min and median over the processes are reported, in wall time and in
CPU time (the JVM's and the driver's user + system time). delta-rs scans the unpartitioned pair
in the same processes, for scale. Goal (issue 32): the scan with deletion vectors at most 1.3x.

    .venv/bin/python benchmarks/bench_spark_read.py [--processes 5] [--write-readme]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
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

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
DATA = HERE / "data" / "spark-read"
MARKERS = ("<!-- spark-read:start -->", "<!-- spark-read:end -->")
#: Marks the child process's result line (Spark may print to stdout too).
_RESULT = "RESULT "
SCHEMA = pa.schema([("id", pa.int64()), ("value", pa.float64()), ("name", pa.string()), ("day", pa.date32())])
#: pair name -> (plain table, table with deletion vectors)
PAIRS = {
    "unpartitioned": ("plain", "dv"),
    "partitioned, half": ("part-plain", "part-dv"),
    "200 files": ("many-plain", "many-dv"),
}


def build(
    root: Path, files: int, rows: int, deleted: float, *, partitions: int = 0, every: int = 1
) -> tuple[str, str]:
    """Two tables under ``root``: ``plain`` and ``dv``, the same files; in ``dv`` every
    ``every``-th file has a deletion vector. With ``partitions``, partitioned by ``part``."""
    rng = np.random.default_rng(25)
    plain, dv = root / "plain", root / "dv"
    schema = SCHEMA.append(pa.field("part", pa.string())) if partitions else SCHEMA
    by = ["part"] if partitions else []
    tables = {
        "plain": DeltaTable.create(str(plain), schema, partition_by=by),
        "dv": DeltaTable.create(
            str(dv), schema, partition_by=by, properties={"delta.enableDeletionVectors": "true"}
        ),
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
        name = f"part={n % partitions}/part-{n:05d}.parquet" if partitions else f"part-{n:05d}.parquet"
        for table_root in (plain, dv):
            (table_root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(data, plain / name, row_group_size=128 * 1024)
        os.link(plain / name, dv / name)
        names.append(name)
    for table in tables.values():
        table.commit_files(names)
    snapshot = tables["dv"].snapshot()
    removes: list[RemoveFile] = []
    adds: list[AddFile] = []
    chosen = set(names[::every])
    for add in snapshot.files().to_pylist():
        if tables["dv"].storage.path.relative(tables["dv"].storage.path.decode(add["path"])) not in chosen:
            continue
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
        common = {
            "partition_values": dict(add["partition_values"]),
            "size": add["size"],
            "stats": add["stats"],
        }
        removes.append(RemoveFile(add["path"], deletion_timestamp=1, **common))
        adds.append(AddFile(add["path"], modification_time=1, deletion_vector=descriptor, **common))
    OptimisticTransaction(tables["dv"].storage, read_snapshot=snapshot).commit(
        CommitPlan("DELETE", removes=tuple(removes), adds=tuple(adds))
    )
    return str(plain), str(dv)


def build_all(files: int, rows: int, deleted: float) -> dict[str, str]:
    """Every table of the pairs, under :data:`DATA` (rebuilt each run)."""
    shutil.rmtree(DATA, ignore_errors=True)
    out: dict[str, str] = {}
    out["plain"], out["dv"] = build(DATA / "flat", files, rows, deleted)
    out["part-plain"], out["part-dv"] = build(DATA / "part", files, rows, deleted, partitions=4, every=2)
    out["many-plain"], out["many-dv"] = build(DATA / "many", 200, 10_000, deleted)
    return out


def _timed(spark: Any, action: Any) -> tuple[float, float, Any]:
    """Wall time, CPU time (the driver's Python process and the JVM: local mode runs the executors'
    threads, the JIT and the garbage collector there) and the result of ``action()``."""
    jvm = _jvm_pid(spark)
    start, cpu = time.perf_counter(), _cpu_seconds(os.getpid()) + _cpu_seconds(jvm)
    result = action()
    return time.perf_counter() - start, _cpu_seconds(os.getpid()) + _cpu_seconds(jvm) - cpu, result


def _aggregate(frame: Any) -> list[Any]:
    """An aggregate that reads every value of every row (the ``noop`` sink would never read the
    values Spark decodes lazily)."""
    from pyspark.sql import functions as F

    return list(
        frame.agg(F.count("*"), F.sum("id"), F.sum("value"), F.max("name"), F.max("day")).collect()[0]
    )


def read_all(spark: Any, uri: str) -> list[Any]:
    """``read_delta`` of every column and row, aggregated."""
    from airflow_delta_provider.spark import read_delta

    return _aggregate(read_delta(spark, uri))


def optimize_frames(spark: Any, uri: str) -> dict[str, Any]:
    """The rows an OPTIMIZE keeps of the table's files (all with a deletion vector), one bin: the
    operator's keyed scan (``new``) and the former per-file anti-joins (``old``), as callables."""
    from functools import reduce

    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    from airflow_delta_provider.core.log import deletion_vector_rows
    from airflow_delta_provider.operators.optimize import BIN_COLUMN, _file_schema, _surviving_rows
    from airflow_delta_provider.spark.paths import spark_file_paths, spark_path

    snapshot = DeltaTable(uri).snapshot()
    schema_json = _file_schema(snapshot)
    root = spark_path(snapshot.storage.root_uri).rstrip("/")
    rows = snapshot.files().select(["path", "size", "deletion_vector"]).to_pylist()

    def new() -> list[Any]:
        return _aggregate(_surviving_rows(spark, snapshot, schema_json, root, [(0, r) for r in rows]))

    def old() -> list[Any]:
        parts = []
        paths = spark_file_paths(snapshot.storage.path, [r["path"] for r in rows], root)
        for row, path in zip(rows, paths, strict=True):
            frame = spark.read.schema(StructType.fromJson(schema_json)).parquet(path)
            dv = {k: v for k, v in row["deletion_vector"].items() if v is not None}
            deleted = [int(i) for i in deletion_vector_rows(snapshot.storage, dv).tolist()]
            frame = frame.select("*", F.col("_metadata.row_index").alias("__row"))
            indexes = spark.createDataFrame([(i,) for i in deleted], "__row LONG")
            parts.append(frame.join(F.broadcast(indexes), "__row", "left_anti").drop("__row"))
        return _aggregate(reduce(lambda a, b: a.unionByName(b), parts).withColumn(BIN_COLUMN, F.lit(0)))

    return {"old": old, "new": new}


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


def child(tables: dict[str, str]) -> dict[str, Any]:
    """One fresh process: every scan warmed up once, then each pair timed once. Returns
    ``{scan name: [wall, cpu]}`` and the row counts."""
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
    optimize = optimize_frames(spark, tables["dv"])
    scans: dict[str, Any] = {name: functools.partial(read_all, spark, uri) for name, uri in tables.items()}
    scans.update({f"optimize-{k}": v for k, v in optimize.items()})
    for action in scans.values():  # warm-up
        action()
    out: dict[str, Any] = {"times": {}, "rows": {}}
    for name, action in scans.items():
        wall, cpu, result = _timed(spark, action)
        out["times"][name] = [wall, cpu]
        out["rows"][name] = result[0]
    spark.stop()
    for name in ("plain", "dv"):
        out["times"][f"rs-{name}"] = list(rs_scan(tables[name]))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--rows", type=int, default=500_000)
    parser.add_argument("--deleted", type=float, default=0.03)
    parser.add_argument("--processes", type=int, default=5)
    parser.add_argument("--write-readme", action="store_true")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(_RESULT + json.dumps(child(json.loads(args.child))))
        return
    tables = build_all(args.files, args.rows, args.deleted)
    loads = [os.getloadavg()]
    runs = []
    for _ in range(args.processes):
        output = subprocess.run(
            [sys.executable, __file__, "--child", json.dumps(tables)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        runs.append(json.loads(next(x for x in output.splitlines() if x.startswith(_RESULT))[len(_RESULT) :]))
        loads.append(os.getloadavg())
    shutil.rmtree(DATA, ignore_errors=True)
    rows = runs[0]["rows"]
    expected = args.files * (args.rows - int(args.rows * args.deleted))  # as build() deletes
    assert rows["plain"] == args.files * args.rows and rows["dv"] == expected, rows
    assert rows["optimize-old"] == rows["optimize-new"] == expected, rows
    assert rows["part-dv"] == args.files * args.rows - (args.files // 2) * int(args.rows * args.deleted), rows
    text = report(runs, args, loads)
    print(text)
    if args.write_readme:
        _write_readme(text)


def report(runs: list[dict[str, Any]], args: argparse.Namespace, loads: list[tuple[float, ...]]) -> str:
    from pyspark import __version__ as spark_version

    def times(name: str) -> list[list[float]]:
        return [r["times"][name] for r in runs]

    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"Spark {spark_version} local[2]; load average (1 min) {loads[0][0]:.1f} at the start, "
        f"{min(x[0] for x in loads):.1f}-{max(x[0] for x in loads):.1f} over the run.",
        f"{args.processes} fresh processes, each: every scan warmed up once, then each pair timed once. "
        f"{args.deleted:.0%} of each deletion vector's file deleted. CPU: the JVM's and the driver's "
        f"user + system time (Spark), the process's (delta-rs).",
        "",
        "| pair | scan | wall s median (min) | CPU s median (min) | ratio per process, wall: median (min) | "
        "CPU: median (min) |",
        "|---|---|---:|---:|---:|---:|",
    ]
    pairs = [
        (label, f"read_delta, {plain}", plain, f"read_delta, {dv}", dv)
        for label, (plain, dv) in PAIRS.items()
    ]
    pairs.append(
        (
            "OPTIMIZE read, 8 DV files",
            "former per-file anti-joins",
            "optimize-old",
            "keyed scan",
            "optimize-new",
        )
    )
    pairs.append(("unpartitioned (delta-rs)", "delta-rs, plain", "rs-plain", "delta-rs, dv", "rs-dv"))
    for label, base_name, base, name, measured in pairs:
        lines.append(_row(label, base_name, times(base), None))
        lines.append(_row(label, name, times(measured), times(base)))
    return "\n".join(lines)


def _row(pair: str, name: str, runs: list[list[float]], base: list[list[float]] | None) -> str:
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
    return f"| {pair} | {name} | " + " | ".join(cells) + " |"


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
