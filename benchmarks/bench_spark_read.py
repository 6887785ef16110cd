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
from airflow_delta_provider.core.actions import AddFile, RemoveFile
from airflow_delta_provider.core.deletion_vectors import (
    deletion_vector_file,
    encode_deletion_vector_file_id,
    serialize_deletion_vector,
)
from airflow_delta_provider.core.transaction import OptimisticTransaction

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
    actions: list[Any] = []
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
        actions.append(RemoveFile(add["path"], deletion_timestamp=1, **common))
        actions.append(AddFile(add["path"], modification_time=1, deletion_vector=descriptor, **common))
    OptimisticTransaction(tables["dv"].storage, read_snapshot=snapshot).commit(actions, operation="DELETE")
    return str(plain), str(dv)


def spark_scan(spark: Any, uri: str) -> float:
    """One scan that reads every value of every row: an aggregate over all columns (the ``noop``
    sink would never read the values Spark decodes lazily)."""
    from pyspark.sql import functions as F

    from airflow_delta_provider.spark import read_delta

    start = time.perf_counter()
    read_delta(spark, uri).agg(
        F.count("*"), F.sum("id"), F.sum("value"), F.max("name"), F.max("day")
    ).collect()
    return time.perf_counter() - start


def rs_scan(uri: str) -> float:
    from deltalake import DeltaTable as RsDeltaTable
    from deltalake import QueryBuilder

    start = time.perf_counter()
    reader = QueryBuilder().register("t", RsDeltaTable(uri)).execute("SELECT * FROM t")
    for _ in reader:
        pass
    return time.perf_counter() - start


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
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory(prefix="bench-spark-read-") as work:
        plain, dv = build(Path(work), args.files, args.rows, args.deleted)
        assert spark.read.parquet(plain).count() == args.files * args.rows
        spark_scan(spark, plain), spark_scan(spark, dv)  # warm-up: JIT, the session's caches
        times: dict[str, list[float]] = {"plain": [], "dv": [], "rs-plain": [], "rs-dv": []}
        for _ in range(args.repeat):
            times["plain"].append(spark_scan(spark, plain))
            times["dv"].append(spark_scan(spark, dv))
            times["rs-plain"].append(rs_scan(plain))
            times["rs-dv"].append(rs_scan(dv))
        ratios = [d / p for d, p in zip(times["dv"], times["plain"], strict=True)]
        rs_ratios = [d / p for d, p in zip(times["rs-dv"], times["rs-plain"], strict=True)]
    spark.stop()
    load = os.getloadavg()
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"Spark {spark.version} local[2]; load average at the end "
        f"{load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}.",
        f"{args.files} files x {args.rows:,} rows (id, value, name, day), {args.deleted:.0%} of each "
        f"file's rows deleted by its deletion vector; {args.repeat} pairs after a warm-up.",
        "",
        "| scan | median s (min-max) | dv / plain per pair: median (min-max) |",
        "|---|---:|---:|",
        _row("read_delta, plain", times["plain"], None),
        _row("read_delta, deletion vectors", times["dv"], ratios),
        _row("delta-rs, plain", times["rs-plain"], None),
        _row("delta-rs, deletion vectors", times["rs-dv"], rs_ratios),
    ]
    text = "\n".join(lines)
    print(text)
    if args.write_readme:
        _write_readme(text)


def _row(name: str, values: list[float], ratios: list[float] | None) -> str:
    spread = f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
    ratio = (
        "" if ratios is None else f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f})"
    )
    return f"| {name} | {spread} | {ratio} |"


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
