"""read_delta on Spark as it is deployed: the standalone cluster (its executors read the files) and
Spark Connect (the plan travels over gRPC; ``_metadata`` resolves on the server), for a
representative subset of the conformance tables (deletion vectors, column mapping in both modes,
typed and ISO-8601 partition values, widened types, timestamp_ntz) and the table of awkward paths,
with ``version=`` and ``filter=``. ``tests/spark_servers.py`` starts both servers once per session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from spark_reads import core_rows, odd_table, rows
from spark_servers import SparkCluster, leave_classic_mode, leave_connect_mode

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.spark import read_changes, read_delta

if TYPE_CHECKING:
    from collections.abc import Iterator

    from spark_servers import SparkConnectServer

pytestmark = pytest.mark.spark

CORPUS = Path(__file__).resolve().parents[2] / "conformance" / "corpus"
MANIFEST = {e["name"]: e for e in json.loads((CORPUS / "MANIFEST.json").read_text())}
SUBSET = [
    ("basic-dv-with-checkpoint", None, "id >= 400"),
    ("dv-with-columnmapping", 14, "part = 0 OR col1 IS NULL"),
    ("table-with-columnmapping-mode-id", None, "IntegerType > 0 OR StringType IS NULL"),
    ("data-reader-partition-values", None, "as_int >= 1"),
    ("kernel-timestamp-partition-col-ISO8601", None, "ts > TIMESTAMP '2024-01-01T10:00:00Z'"),
    ("type-widening", 1, None),
    ("data-reader-timestamp_ntz", None, "tsNtzPartition IS NOT NULL"),
]


@pytest.fixture(scope="module", params=["connect", "cluster"])
def session(
    request: pytest.FixtureRequest, spark_cluster: SparkCluster, spark_connect: SparkConnectServer
) -> Iterator[Any]:
    """A Spark Connect session, then a classic session on the cluster (module-scoped, Connect first:
    once a process started a Spark JVM, building a Connect session needs its master cleared)."""
    from pyspark.sql import SparkSession

    if request.param == "connect":
        leave_classic_mode()
        spark = SparkSession.builder.remote(spark_connect.url).getOrCreate()
    else:
        builder = SparkSession.builder.master(spark_cluster.master_url).appName("read-delta-tests")
        for key, value in SparkCluster.app_conf().items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
    try:
        yield spark
    finally:
        spark.stop()
        leave_connect_mode()


@pytest.mark.parametrize(("name", "version", "text"), SUBSET, ids=[s[0] for s in SUBSET])
def test_conformance_tables_read_as_the_core_reads_them(
    session: Any, name: str, version: int | None, text: str | None
) -> None:
    root = CORPUS / "tables" / MANIFEST[name]["table_root"]
    snapshot = DeltaTable(str(root)).snapshot(version=version)
    frame = read_delta(session, str(root), version=version, filter=text)
    assert rows(frame.toArrow()) == rows(core_rows(snapshot, filter=text))


def test_awkward_paths_and_a_deletion_vector(session: Any, tmp_path: Path) -> None:
    table = odd_table(tmp_path / "dir with space %41 ü" / "t")
    expected = core_rows(table.snapshot())
    assert rows(read_delta(session, table).toArrow()) == rows(expected)
    picked = read_delta(session, table, columns=["p", "id"], filter="id < 3 OR p = 'plus+hash#'").toArrow()
    assert rows(picked) == rows(core_rows(table.snapshot(), ["p", "id"], "id < 3 OR p = 'plus+hash#'"))


def test_changes_with_deletion_vectors_and_change_data_files(session: Any, tmp_path: Path) -> None:
    """delta-kernel-rs' fixture whose commits hold change-data files and deletion vectors that grow
    and shrink: from two starts, the core's rows."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "unit" / "core"))
    from changes_support import normalised, unpack_kernel_fixtures

    root = next(
        p.parent for p in unpack_kernel_fixtures(tmp_path).rglob("_delta_log") if "cdc-and-dvs" in str(p)
    )
    for start in (0, 10):
        expected = DeltaTable(str(root)).changes(start).to_pyarrow_table()
        got = read_changes(session, str(root), start).toArrow()
        assert normalised(got, timestamps=True) == normalised(expected, timestamps=True)
