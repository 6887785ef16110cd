"""DeltaPySparkOperator with a real local SparkSession (the operator opens and stops it, as in a task).

The callables count their runs in a file, so "the Spark job did not run again" is observed, not
assumed. Task instances are the Task SDK's ``RuntimeTaskInstance``; a clear raises ``max_tries``
as Airflow does.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest
from airflow.sdk import Asset
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from deltalake import DeltaTable as RsDeltaTable

from airflow_delta_provider.core import DeltaTable, SchemaMismatchError
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator
from airflow_delta_provider.operators.spark_support.attempt import spark_path

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("local_spark")]
pytest.importorskip("pyspark")

SPARK_CONF = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.session.timeZone": "UTC",
}
RUN_1 = "scheduled__2026-11-01T00:00:00+00:00"


def context_for(
    op: Any, *, run_id: str = RUN_1, try_number: int = 1, max_tries: int | None = None, dag_id: str = "daily"
) -> dict:
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        dag_id=dag_id,
        task_id=op.task_id,
        run_id=run_id,
        map_index=-1,
        try_number=try_number,
        max_tries=op.retries if max_tries is None else max_tries,
        task=op,
    )
    return {"ti": ti, "task": op, "outlet_events": OutletEventAccessors(), "run_id": run_id}


class Job:
    """A PySpark callable producing one day of events; counts its runs in a file."""

    def __init__(
        self,
        counter: Path,
        ids: list[int],
        *,
        extra_column: bool = False,
        fail: bool = False,
        columns: str = "id LONG, user STRING, ds DATE",
    ) -> None:
        self.counter = counter
        self.ids = ids
        self.extra_column = extra_column
        self.fail = fail
        self.columns = columns

    def runs(self) -> int:
        return len(self.counter.read_text().splitlines()) if self.counter.exists() else 0

    def __call__(self, spark: Any = None, ds: str | None = None) -> Any:
        with self.counter.open("a") as out:
            out.write("run\n")
        if self.fail:
            raise RuntimeError("the job broke")
        import datetime as dt

        day = dt.date.fromisoformat(ds or "2026-11-01")
        if self.extra_column:
            data = [(i, f"user-{i}", day, float(i)) for i in self.ids]
            return spark.createDataFrame(data, "id LONG, user STRING, ds DATE, score DOUBLE")
        return spark.createDataFrame([(i, f"user-{i}", day) for i in self.ids], self.columns)


def make(root: Path, job: Any, **kwargs: Any) -> DeltaPySparkOperator:
    kwargs.setdefault("task_id", "ingest")
    kwargs.setdefault("retries", 2)
    kwargs.setdefault("op_kwargs", {"ds": "2026-11-01"})
    return DeltaPySparkOperator(
        python_callable=job, table_uri=str(root), config_kwargs=dict(SPARK_CONF), **kwargs
    )


def table_rows(root: Path) -> list[tuple[str, int]]:
    table = DeltaTable(str(root)).snapshot().to_pyarrow_table()
    return sorted((str(r["ds"]), r["id"]) for r in table.to_pylist())


def all_files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts
    )


def test_first_write_creates_the_table_in_spark_layout_without_litter(tmp_path: Path) -> None:
    root = tmp_path / "events"
    job = Job(tmp_path / "runs", [1, 2, 3])
    op = make(root, job, partition_by=["ds"])
    context = context_for(op)
    result = op.execute(context)

    assert (result["version"], result["committed"], result["rows"], result["files"]) == (0, True, 3, 1)
    files = all_files(root)
    # Only Parquet data files: no _SUCCESS, no .crc, nothing hidden, all under the attempt's directory.
    assert files and all(f.endswith(".parquet") for f in files)
    assert all(f.startswith(result["write_dir"] + "/ds=2026-11-01/") for f in files)
    assert not any(part.startswith(("_", ".")) for f in files for part in f.split("/"))
    snapshot = DeltaTable(str(root)).snapshot()
    assert snapshot.partition_columns == ["ds"]
    assert [str(f.type) for f in snapshot.schema] == ["int64", "string", "date32[day]"]
    assert table_rows(root) == [("2026-11-01", 1), ("2026-11-01", 2), ("2026-11-01", 3)]
    assert sorted(RsDeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    assert context["outlet_events"][Asset(uri=f"file://{root}")].extra["version"] == 0


def test_identities_of_airflows_maximum_length_write_and_commit(tmp_path: Path) -> None:
    """dag_id, task_id and run_id of 250 characters each: the attempt's directory names fit the
    255-byte limit of every store (Spark failed with "Mkdirs failed" before)."""
    root = tmp_path / "events"
    op = make(root, Job(tmp_path / "runs", [1, 2]), task_id="t" * 250, partition_by=["ds"])
    run_id = ("manual__2026-11-01T00:00:00+00:00" + "r" * 250)[:250]
    result = op.execute(context_for(op, dag_id="d" * 250, run_id=run_id))
    assert (result["version"], result["committed"], result["rows"]) == (0, True, 2)
    assert table_rows(root) == [("2026-11-01", 1), ("2026-11-01", 2)]
    files = all_files(root)
    assert files and all(len(part.encode()) <= 255 for f in files for part in f.split("/"))


def test_a_retry_after_the_commit_does_not_run_spark_again(tmp_path: Path) -> None:
    """Idempotency 1, the PySpark way: the txn is checked before the callable runs."""
    root = tmp_path / "events"
    job = Job(tmp_path / "runs", [1, 2])
    op = make(root, job, partition_by=["ds"])
    first = op.execute(context_for(op))
    retry = op.execute(context_for(op, try_number=2))
    assert job.runs() == 1
    assert (retry["skipped"], retry["version"], retry["write_dir"]) == (True, first["version"], None)
    assert table_rows(root) == [("2026-11-01", 1), ("2026-11-01", 2)]


def test_replace_where_after_a_clear_replaces_only_its_day(tmp_path: Path) -> None:
    root = tmp_path / "events"
    day1 = make(root, Job(tmp_path / "runs1", [1, 2]), partition_by=["ds"])
    day1.execute(context_for(day1))
    kwargs: dict[str, Any] = {"mode": "overwrite", "replace_where": "ds = '2026-11-02'"}
    job = Job(tmp_path / "runs2", [7, 8])
    day2 = make(root, job, op_kwargs={"ds": "2026-11-02"}, **kwargs)
    run_2 = "scheduled__2026-11-02T00:00:00+00:00"
    day2.execute(context_for(day2, run_id=run_2))

    job.ids = [9]  # the source was corrected; the user clears the day's task
    result = day2.execute(context_for(day2, run_id=run_2, try_number=2, max_tries=1 + day2.retries))
    assert result["committed"] and result["removed_files"] == 1 and job.runs() == 2
    assert table_rows(root) == [("2026-11-01", 1), ("2026-11-01", 2), ("2026-11-02", 9)]


def test_a_failing_job_leaves_nothing_behind_and_the_retry_commits(tmp_path: Path) -> None:
    root = tmp_path / "events"
    make(root, Job(tmp_path / "seed", [1]), partition_by=["ds"]).execute(
        context_for(make(root, Job(tmp_path / "seed", [1])), run_id="manual__seed")
    )
    before = all_files(root)
    job = Job(tmp_path / "runs", [5], fail=True)
    op = make(root, job)
    with pytest.raises(RuntimeError, match="the job broke"):
        op.execute(context_for(op))
    assert all_files(root) == before and DeltaTable(str(root)).version() == 0
    job.fail = False
    assert op.execute(context_for(op, try_number=2))["committed"]
    assert table_rows(root) == [("2026-11-01", 1), ("2026-11-01", 5)]


def test_schema_merge_is_opt_in_and_a_refused_write_leaves_no_files(tmp_path: Path) -> None:
    root = tmp_path / "events"
    seed = make(root, Job(tmp_path / "seed", [1]), partition_by=["ds"])
    seed.execute(context_for(seed, run_id="manual__seed"))
    before = all_files(root)
    strict = make(root, Job(tmp_path / "runs", [2], extra_column=True))
    with pytest.raises(SchemaMismatchError):
        strict.execute(context_for(strict))
    assert all_files(root) == before
    merging = make(root, Job(tmp_path / "runs", [2], extra_column=True), merge_schema=True)
    merging.execute(context_for(merging))
    assert DeltaTable(str(root)).snapshot().schema.names == ["id", "user", "ds", "score"]


def test_partitioning_that_differs_from_the_table_fails_before_spark_runs(tmp_path: Path) -> None:
    root = tmp_path / "events"
    seed = make(root, Job(tmp_path / "seed", [1]), partition_by=["ds"])
    seed.execute(context_for(seed, run_id="manual__seed"))
    job = Job(tmp_path / "runs", [2])
    op = make(root, job, partition_by=["user"])
    with pytest.raises(SchemaMismatchError, match="partition_by"):
        op.execute(context_for(op))
    assert job.runs() == 0


def test_the_callable_must_return_a_dataframe(tmp_path: Path) -> None:
    root = tmp_path / "events"
    op = make(root, lambda spark=None, ds=None: [1, 2, 3])
    with pytest.raises(TypeError, match="must return a Spark DataFrame"):
        op.execute(context_for(op))
    assert not root.exists() or all_files(root) == []


@pytest.mark.parametrize("subdir", ["_staging", ".tmp", "a/../b", "run=1", ""])
def test_hidden_or_partition_like_write_dirs_are_refused(tmp_path: Path, subdir: str) -> None:
    with pytest.raises(ValueError, match="write_subdir"):
        make(tmp_path / "t", Job(tmp_path / "runs", [1]), write_subdir=subdir)


def test_spark_paths_use_hadoop_schemes() -> None:
    assert spark_path("s3://bucket/lake/events") == "s3a://bucket/lake/events"
    assert spark_path("file:///data/events") == "file:///data/events"


def test_openlineage_injection_is_off_by_default_and_never_fails_the_task(tmp_path: Path) -> None:
    """With the Airflow run unknown to OpenLineage, the job runs with the user's settings (the positive
    path, with a real task context, is in tests/system/test_ingest_dags.py)."""
    on = make(tmp_path / "t", Job(tmp_path / "runs", [1]), openlineage_inject_parent_job_info=True)
    off = make(tmp_path / "t", Job(tmp_path / "runs", [1]), task_id="other")
    assert off.spark_config(context_for(off)) == SPARK_CONF
    assert on.spark_config(context_for(on)) == SPARK_CONF


def committed_column_names(root: Path) -> set[tuple[str, ...]]:
    """The column names inside the Parquet files the table references (what every reader matches on)."""
    import pyarrow.parquet as pq

    return {tuple(pq.read_schema(uri).names) for uri in DeltaTable(str(root)).snapshot().file_uris()}


def test_columns_differing_only_by_case_are_written_in_the_table_s_spelling(tmp_path: Path) -> None:
    """As Delta does: Spark resolves ``ID`` to ``id``, but Parquet readers (pyarrow, delta-rs) match
    names exactly and would read NULL for a file whose column is spelled ``ID``."""
    root = tmp_path / "events"
    seed = make(root, Job(tmp_path / "seed", [1]), partition_by=["ds"])
    seed.execute(context_for(seed, run_id="manual__seed"))
    shouting = make(root, Job(tmp_path / "runs", [2, 3], columns="ID LONG, User STRING, DS DATE"))
    result = shouting.execute(context_for(shouting))
    assert result["committed"] and result["rows"] == 2
    assert committed_column_names(root) == {("id", "user")}  # ds is in the directory names
    assert table_rows(root) == [("2026-11-01", 1), ("2026-11-01", 2), ("2026-11-01", 3)]
    assert sorted(RsDeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == [1, 2, 3]
    assert DeltaTable(str(root)).snapshot().schema.names == ["id", "user", "ds"]


#: Runs in its own interpreter: a JVM that ran a classic session keeps ``spark.master`` as a system
#: property, which a new SparkConf reads and Spark Connect then refuses next to ``spark.remote``
#: (one task is one process in Airflow, so this only concerns tests).
_CONNECT_JOB = """
import sys, uuid
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator

def job(spark=None):
    import datetime as dt
    return spark.createDataFrame([(1, "u1", dt.date(2026, 11, 1)), (2, "u2", dt.date(2026, 11, 1))],
                                 "ID LONG, USER STRING, ds DATE")

op = DeltaPySparkOperator(task_id="ingest", python_callable=job, table_uri=sys.argv[1],
                          config_kwargs={"spark.remote": "local[1]", "spark.sql.session.timeZone": "UTC"})
ti = RuntimeTaskInstance.model_construct(id=uuid.uuid4(), dag_id="daily", task_id="ingest", run_id="r",
                                         map_index=-1, try_number=1, max_tries=0, task=op)
result = op.execute({"ti": ti, "task": op, "outlet_events": OutletEventAccessors()})
print("RESULT", result["committed"], result["rows"])
"""


def test_spark_connect_writes_and_commits(tmp_path: Path) -> None:
    """A real Spark Connect session (a local server PySpark starts): Connect rejects the writer mode
    "errorifexists", so the attempt's directory is written with its alias "error"; the DataFrame's
    upper-case columns are renamed to the table's spelling on Connect too."""
    import subprocess
    import sys

    import pyarrow as pa

    root = tmp_path / "events"
    schema = pa.schema([("id", pa.int64()), ("user", pa.string()), ("ds", pa.date32())])
    DeltaTable.create(str(root), schema, partition_by=["ds"])
    done = subprocess.run(
        [sys.executable, "-c", _CONNECT_JOB, str(root)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert "RESULT True 2" in done.stdout, done.stderr[-3000:]
    assert table_rows(root) == [("2026-11-01", 1), ("2026-11-01", 2)]
    assert committed_column_names(root) == {("id", "user")}
