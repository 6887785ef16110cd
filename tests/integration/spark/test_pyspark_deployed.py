"""DeltaPySparkOperator and ``@task.delta_pyspark`` on Spark as it is deployed: a standalone cluster
reached through the Spark provider's ``spark`` connection, and a Spark Connect server reached with
``sc://`` (``tests/spark_servers.py`` starts both once per session).

The executors of the cluster write the Parquet files (no executor runs in the test process); the
table is on local disk, which driver and executors share here. Each mode runs one day's task
through its lifecycle: the first try, a retry after the commit (Spark is not started again), a
clear with corrected data (the day is replaced) and a backfill of an earlier day. Then the nightly
OPTIMIZE (``DeltaOptimizeOperator``) compacts a table of small files, one of them with a deletion
vector applied on the executors, through the same connections.
"""

from __future__ import annotations

import datetime as dt
import os
import uuid
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import DAG
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from deltalake import DeltaTable as RsDeltaTable
from deltalake import QueryBuilder
from spark_servers import leave_classic_mode, leave_connect_mode

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.log.commits import read_commit
from airflow_delta_provider.core.log.deletion_vectors import inline_deletion_vector
from airflow_delta_provider.core.protocol.actions import AddFile, RemoveFile
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan
from airflow_delta_provider.decorators.pyspark import delta_pyspark_task
from airflow_delta_provider.operators.optimize import DeltaOptimizeOperator
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from spark_servers import SparkCluster, SparkConnectServer

pytestmark = pytest.mark.spark

CONN_IDS = {"cluster": "spark_cluster_test", "connect": "spark_connect_test"}


@pytest.fixture(scope="module", params=["connect", "cluster"])
def spark_mode(
    request: pytest.FixtureRequest, spark_cluster: SparkCluster, spark_connect: SparkConnectServer
) -> Iterator[tuple[str, str]]:
    """``(mode, conn_id)`` with the connection defined in the environment, as a deployment does.

    Module-scoped, so all Connect tests run before the first classic session: once a process has
    started a Spark JVM, PySpark's ``SparkConf()`` reads its ``spark.master`` back and a Connect
    session can no longer be built in that process (an Airflow task is a process of its own).
    """
    mode: str = request.param
    uri = spark_cluster.connection_uri if mode == "cluster" else spark_connect.connection_uri
    name = f"AIRFLOW_CONN_{CONN_IDS[mode].upper()}"
    if mode == "connect":
        leave_classic_mode()
    os.environ[name] = uri
    try:
        yield mode, CONN_IDS[mode]
    finally:
        os.environ.pop(name, None)
        leave_connect_mode()


def context_for(
    op: Any, run_id: str, *, try_number: int = 1, max_tries: int | None = None, **extra: Any
) -> dict:
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        dag_id="daily",
        task_id=op.task_id,
        run_id=run_id,
        map_index=-1,
        try_number=try_number,
        max_tries=op.retries if max_tries is None else max_tries,
        task=op,
    )
    return {"ti": ti, "task": op, "outlet_events": OutletEventAccessors(), "run_id": run_id, **extra}


class Job:
    """One day of events; records each run and the master its session ran on."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids
        self.masters: list[str] = []

    def __call__(self, spark: Any = None, ds: str | None = None) -> Any:
        self.masters.append(spark.conf.get("spark.master"))
        day = dt.date.fromisoformat(ds or "2026-11-01")
        # Enough rows over two partitions that both executors' tasks write.
        frame = spark.createDataFrame(
            [(i, f"user-{i}", day) for i in self.ids], "id LONG, user STRING, ds DATE"
        )
        return frame.repartition(2)


def litter(root: Path) -> list[str]:
    """Anything but data files and the log: Spark's markers, checksums, temporary directories."""
    found = []
    for path in root.rglob("*"):
        relative = path.relative_to(root)
        if relative.parts[0] == "_delta_log":
            continue
        if any(part.startswith(("_", ".")) for part in relative.parts) or (
            path.is_file() and not path.name.endswith(".parquet")
        ):
            found.append(str(relative))
    return found


def rows(root: Path) -> list[tuple[str, int]]:
    table = RsDeltaTable(str(root)).to_pyarrow_table()
    return sorted(
        (str(d), i)
        for d, i in zip(table.column("ds").to_pylist(), table.column("id").to_pylist(), strict=True)
    )


def test_a_daily_task_through_retry_clear_and_backfill(
    spark_mode: tuple[str, str], spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    mode, conn_id = spark_mode
    root = tmp_path / "events"
    job = Job(list(range(6)))

    def make(ds: str) -> DeltaPySparkOperator:
        return DeltaPySparkOperator(
            task_id="ingest",
            python_callable=job,
            table_uri=str(root),
            partition_by=["ds"],
            mode="overwrite",
            replace_where=f"ds = '{ds}'",
            conn_id=conn_id,
            config_kwargs=spark_cluster.app_conf() if mode == "cluster" else {},
            op_kwargs={"ds": ds},
            retries=2,
        )

    day = make("2026-11-02")
    run = "scheduled__2026-11-02T00:00:00+00:00"
    first = day.execute(context_for(day, run))
    # The session ran on the cluster (the Connect server's driver does too): executors wrote the files.
    assert job.masters == [spark_cluster.master_url]
    assert (first["version"], first["committed"], first["rows"]) == (0, True, 6)
    assert first["files"] >= 2
    written = sorted(p.relative_to(root) for p in (root / first["write_dir"]).rglob("*.parquet"))
    assert len(written) == first["files"] and all(str(p.parent).endswith("ds=2026-11-02") for p in written)
    assert litter(root) == []

    # A retry after the commit landed: reported as done, Spark not started.
    retry = day.execute(context_for(day, run, try_number=2))
    assert (retry["skipped"], retry["version"]) == (True, 0) and len(job.masters) == 1

    # The user corrects the source and clears the task: the day is replaced, not appended to.
    job.ids = [10, 11]
    cleared = day.execute(context_for(day, run, try_number=3, max_tries=2 + day.retries))
    assert (cleared["version"], cleared["committed"], cleared["removed_files"]) == (1, True, first["files"])

    # A backfill of an earlier day adds its partition and leaves the other alone.
    job.ids = [1]
    earlier = make("2026-11-01")
    backfill = earlier.execute(context_for(earlier, "backfill__2026-11-01T00:00:00+00:00"))
    assert (backfill["version"], backfill["committed"]) == (2, True)

    assert rows(root) == [("2026-11-01", 1), ("2026-11-02", 10), ("2026-11-02", 11)]
    assert DeltaTable(str(root)).snapshot().to_pyarrow_table().num_rows == 3
    assert litter(root) == []
    assert len(job.masters) == 3


def test_the_decorated_task_commits_through_the_connection(
    spark_mode: tuple[str, str], spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    mode, conn_id = spark_mode
    root = tmp_path / "events"
    masters: list[str] = []
    with DAG("decorated", schedule=None, start_date=dt.datetime(2026, 11, 1)):

        @delta_pyspark_task(
            table_uri=str(root),
            conn_id=conn_id,
            config_kwargs=spark_cluster.app_conf() if mode == "cluster" else {},
        )
        def ingest(spark: Any) -> Any:
            masters.append(spark.conf.get("spark.master"))
            return spark.range(0, 100, numPartitions=2).selectExpr("id", "id % 7 AS bucket")

        op = ingest().operator
    result = op.execute(context_for(op, "manual__1"))
    assert (result["version"], result["rows"], result["files"]) == (0, 100, 2)
    assert masters == [spark_cluster.master_url]
    assert sorted(RsDeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == list(range(100))
    assert litter(root) == []
    # The retry of the committed task does not call the function again.
    again = op.execute(context_for(op, "manual__1", try_number=2, max_tries=1))
    assert again["skipped"] and masters == [spark_cluster.master_url]


def small_files_with_a_deletion_vector(root: Path) -> DeltaTable:
    """Five one-file commits over two partitions (two bins), then a DELETE of rows 0, 2 and 4 of the
    first file as Spark writes it: the file removed and added again with an inline deletion vector."""
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64()), ("user", pa.string()), ("ds", pa.string())]),
        partition_by=["ds"],
        properties={"delta.enableDeletionVectors": "true", "delta.targetFileSize": "1mb"},
    )
    for n, ds in enumerate(["2026-11-01"] * 3 + ["2026-11-02"] * 2):
        relative = f"ds={ds}/part-{n}.parquet"
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        ids = list(range(n * 10, n * 10 + 10))
        pq.write_table(pa.table({"id": ids, "user": [f"user-{i}" for i in ids]}), root / relative)
        table.commit_files([relative])
    snapshot = table.snapshot()
    first = next(f for f in snapshot.files().to_pylist() if f["path"] == "ds=2026-11-01/part-0.parquet")
    common = {
        "partition_values": dict(first["partition_values"]),
        "size": first["size"],
        "stats": first["stats"],
    }
    OptimisticTransaction(table.storage, read_snapshot=snapshot).commit(
        CommitPlan(
            "DELETE",
            removes=(RemoveFile(first["path"], deletion_timestamp=1, **common),),
            adds=(
                AddFile(
                    first["path"],
                    modification_time=1,
                    deletion_vector=inline_deletion_vector([0, 2, 4]),
                    **common,
                ),
            ),
        )
    )
    return table


def rs_rows(root: Path) -> list[tuple[str, int, str]]:
    """The rows as delta-rs reads them (its DataFusion reader applies deletion vectors)."""
    data = (
        QueryBuilder()
        .register("t", RsDeltaTable(str(root)))
        .execute('SELECT ds, id, "user" FROM t')
        .read_all()
    )
    return sorted(zip(*(data.column(c).to_pylist() for c in ("ds", "id", "user")), strict=True))


def test_optimize_compacts_through_the_connection(
    spark_mode: tuple[str, str], spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    mode, conn_id = spark_mode
    root = tmp_path / "events"
    table = small_files_with_a_deletion_vector(root)
    version = table.version()
    before = rs_rows(root)
    assert len(before) == 47

    def make() -> DeltaOptimizeOperator:
        return DeltaOptimizeOperator(
            task_id="optimize",
            table_uri=str(root),
            conn_id=conn_id,
            config_kwargs=spark_cluster.app_conf() if mode == "cluster" else {},
            retries=1,
        )

    op = make()
    run = "scheduled__2026-11-03T00:00:00+00:00"
    result = op.execute(context_for(op, run))
    assert (result["committed"], result["version"]) == (True, version + 1)
    metrics = result["metrics"]
    assert (metrics["numRemovedFiles"], metrics["numAddedFiles"], metrics["numDeletionVectorsRemoved"]) == (
        5,
        2,
        1,
    )
    commit = read_commit(table.storage, version + 1)
    assert commit.commit_info is not None and commit.commit_info["operation"] == "OPTIMIZE"
    changes = commit.file_actions()
    assert len(changes) == 7 and not any(next(iter(a.values()))["dataChange"] for a in changes)
    # The same rows for delta-rs, the deleted ones gone for good: the new files carry no deletion vector.
    assert rs_rows(root) == before
    files = DeltaTable(str(root)).snapshot().files()
    assert files.num_rows == 2 and files.column("deletion_vector").null_count == 2
    assert all(p.startswith(f"{result['write_dir']}/optimize_bin=") for p in files.column("path").to_pylist())
    assert litter(root) == []

    # A retry of the committed task does nothing (Spark is not started) and leaves nothing behind.
    again = make()
    retry = again.execute(context_for(again, run, try_number=2))
    assert (retry["committed"], retry["reason"], retry["version"]) == (
        False,
        "already_committed",
        version + 1,
    )
    assert DeltaTable(str(root)).version() == version + 1
    assert litter(root) == []
