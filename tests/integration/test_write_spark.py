"""Committing what a real local SparkSession writes (INT96 timestamps, snappy, _SUCCESS, .crc files)."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import deltalake
import pytest

from airflow_delta_provider.core import DeltaTable

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    pyspark = pytest.importorskip("pyspark.sql")
    session = (
        pyspark.SparkSession.builder.master("local[1]")
        .appName("airflow-delta-provider-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()


def test_spark_output_commits_and_reads_back_everywhere(spark, tmp_path):
    uri = str(tmp_path / "events")
    rows = [
        (1, "a", Decimal("1.50"), dt.datetime(2024, 1, 1, 10, 0, 0, 123000), dt.date(2024, 1, 1), "eu"),
        (2, None, Decimal("2.25"), None, dt.date(2024, 1, 1), None),
        (3, "c" * 50, Decimal("-3.00"), dt.datetime(2024, 1, 2, 0, 0), dt.date(2024, 1, 2), "us"),
    ]
    frame = spark.createDataFrame(
        rows, "id LONG, name STRING, amount DECIMAL(10,2), ts TIMESTAMP, ds DATE, region STRING"
    )
    frame.write.partitionBy("ds", "region").parquet(os.path.join(uri, "run-1"))
    assert os.path.exists(os.path.join(uri, "run-1", "_SUCCESS"))

    table = DeltaTable(uri)
    result = table.commit_files(
        prefix="run-1",
        schema=frame.schema.json(),
        partition_by=["ds", "region"],
        app_id="spark",
        app_version=1,
    )
    assert (result.version, result.num_output_rows) == (0, 3)
    snapshot = table.snapshot()
    assert [str(f.type) for f in snapshot.schema] == [
        "int64",
        "string",
        "decimal128(10, 2)",
        "timestamp[us, tz=UTC]",
        "date32[day]",
        "string",
    ]
    paths = snapshot.files()["path"].to_pylist()
    assert all(p.startswith("run-1/ds=") and p.endswith(".parquet") for p in paths)
    ours = sorted(snapshot.to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    theirs = deltalake.DeltaTable(uri).to_pyarrow_table()
    theirs = sorted(theirs.cast(snapshot.to_pyarrow_table().schema).to_pylist(), key=lambda r: r["id"])
    assert ours == theirs
    assert [r["region"] for r in ours] == ["eu", None, "us"]
    assert ours[0]["ts"] == dt.datetime(2024, 1, 1, 10, 0, 0, 123000, tzinfo=dt.UTC)

    # Spark (without Delta's jars) reads the committed files back as plain Parquet.
    committed = spark.read.parquet(*[os.path.join(uri, p) for p in paths])
    assert committed.count() == 3
