"""DeltaPySparkOperator with Airflow partitions, on a real local SparkSession: a keyed run writes and
replaces its slice; with ``source=`` it consumes only its partition of the source, with a cursor
per partition, whatever order the partitions' runs come in.

The run's key reaches the task as ``context["partition_key"]`` (Airflow 3.3's context key).
"""

from __future__ import annotations

import os
import uuid
from typing import TYPE_CHECKING, Any

import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions import PredicateError
from airflow_delta_provider.core.table import consumer_partition, parse_consumer_app_id
from airflow_delta_provider.decorators.pyspark import delta_pyspark_task
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator

from ...conftest import SPARK_CONF

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("local_spark")]
pytest.importorskip("pyspark")


@pytest.fixture
def keyed(task_context: Callable[..., dict[str, Any]]) -> Callable[..., dict[str, Any]]:
    """``keyed(op, key)``: the context of a try of ``op`` in a run whose partition key is ``key``."""

    def make(op: Any, key: str | None, *, run_id: str | None = None) -> dict[str, Any]:
        run_id = run_id or f"run-{key}-{uuid.uuid4().hex[:6]}"
        return task_context(op, dag_id="daily", run_id=run_id, partition_key=key)

    return make


class Day:
    """A producer's callable: ``rows`` events of the run's day (or of ``day``), counted per call."""

    def __init__(self, rows: int, day: str | None = None) -> None:
        self.rows, self.day, self.calls = rows, day, 0

    def __call__(self, spark: Any = None, partition_key: str | None = None) -> Any:
        self.calls += 1
        day = self.day or partition_key
        return spark.sql(
            f"SELECT id, CAST(id * 10 AS LONG) AS amount, DATE'{day}' AS ds FROM range({self.rows})"
        )


def producer(root: Path, job: Any, **kwargs: Any) -> DeltaPySparkOperator:
    return DeltaPySparkOperator(
        task_id="produce",
        python_callable=job,
        table_uri=str(root),
        partition_by=["ds"],
        partition_key_columns=["ds"],
        config_kwargs=dict(SPARK_CONF),
        **kwargs,
    )


def aggregate(spark: Any = None, changes: Any = None, source_versions: Any = None) -> Any:
    """The consumer: the partition's day total. Its producer replaces the whole day in each commit,
    so the day's rows are the inserts of the newest commit among the changes."""
    from pyspark.sql import functions as F

    if source_versions is None:
        return None
    newest = changes.agg(F.max("_commit_version")).first()[0]
    rows = changes.filter((F.col("_commit_version") == newest) & (F.col("_change_type") == "insert"))
    return rows.groupBy("ds").agg(F.count("*").alias("events"), F.sum("amount").alias("amount"))


def consumer(source: Path, target: Path) -> DeltaPySparkOperator:
    return DeltaPySparkOperator(
        task_id="aggregate",
        python_callable=aggregate,
        source=str(source),
        table_uri=str(target),
        partition_by=["ds"],
        partition_key_columns=["ds"],
        config_kwargs=dict(SPARK_CONF),
    )


def state(root: Path) -> tuple[int, list[str], list[str]]:
    snapshot = DeltaTable(str(root)).snapshot()
    return (
        snapshot.version,
        sorted(snapshot.files().column("path").to_pylist()),
        sorted(os.listdir(root / "_delta_log")),
    )


def per_day(root: Path) -> dict[str, tuple[int, int]]:
    """Per day: (rows, total amount) of a producer table, or the consumer's (events, amount)."""
    data = DeltaTable(str(root)).snapshot().to_pyarrow_table().to_pylist()
    if data and "events" in data[0]:
        return {str(r["ds"]): (r["events"], r["amount"]) for r in data}
    found: dict[str, tuple[int, int]] = {}
    for row in data:
        count, total = found.get(str(row["ds"]), (0, 0))
        found[str(row["ds"])] = (count + 1, total + row["amount"])
    return found


def test_a_keyed_run_replaces_its_day_and_a_clear_replaces_it_again(
    tmp_path: Path, keyed: Callable[..., dict[str, Any]]
) -> None:
    root = tmp_path / "events"
    producer(root, Day(3)).execute(keyed(producer(root, Day(3)), "2026-03-01"))
    producer(root, Day(2)).execute(keyed(producer(root, Day(2)), "2026-03-02"))
    rerun = producer(root, Day(5))
    result = rerun.execute(keyed(rerun, "2026-03-01"))
    assert result["committed"] and result["removed_files"] >= 1
    assert per_day(root) == {"2026-03-01": (5, 100), "2026-03-02": (2, 10)}
    assert DeltaTable(str(root)).history(1)[0]["tags"]["airflow.partition_key"] == "2026-03-01"


def one_day(tmp_path: Path, keyed: Callable[..., dict[str, Any]]) -> Path:
    """A table holding one day, written by a keyed run."""
    root = tmp_path / "events"
    first = producer(root, Day(1))
    first.execute(keyed(first, "2026-03-01"))
    return root


def test_rows_outside_the_runs_day_are_refused_and_the_attempt_discarded(
    tmp_path: Path, keyed: Callable[..., dict[str, Any]]
) -> None:
    root = one_day(tmp_path, keyed)
    before = state(root)
    wrong = producer(root, Day(2, day="2026-03-09"))
    with pytest.raises(PredicateError, match="ds='2026-03-09'"):
        wrong.execute(keyed(wrong, "2026-03-01"))
    assert state(root) == before
    assert not [p for p in (root / "airflow").rglob("*.parquet") if "2026-03-09" in str(p)]


def test_a_key_that_does_not_fit_the_column_is_refused_before_spark_runs(
    tmp_path: Path, keyed: Callable[..., dict[str, Any]]
) -> None:
    root = one_day(tmp_path, keyed)
    before = state(root)
    job = Day(1, day="2026-03-01")
    bad = producer(root, job)
    with pytest.raises(PredicateError, match="'yesterday'"):
        bad.execute(keyed(bad, "yesterday"))
    assert job.calls == 0 and state(root) == before


def test_a_consumer_reads_its_partition_once_whatever_order_the_partitions_come_in(
    tmp_path: Path, keyed: Callable[..., dict[str, Any]]
) -> None:
    source, target = tmp_path / "events", tmp_path / "daily"
    for day, rows in (("2026-03-02", 2), ("2026-03-01", 3)):  # an older day backfilled after a newer one
        op = producer(source, Day(rows))
        op.execute(keyed(op, day))
    first = consumer(source, target)
    report = first.execute(keyed(first, "2026-03-01"))
    assert report["source"]["partition_key"] == "2026-03-01"
    second = consumer(source, target)
    second.execute(keyed(second, "2026-03-02"))
    assert per_day(target) == per_day(source) == {"2026-03-01": (3, 30), "2026-03-02": (2, 10)}
    cursors = {
        consumer_partition(app_id): txn.version
        for app_id, txn in DeltaTable(str(target)).snapshot().transactions.items()
        if parse_consumer_app_id(app_id) is not None
    }
    assert set(cursors) == {"2026-03-01", "2026-03-02"}
    # A clear of one producer day: the consumer's run of that day reads only that re-run.
    rerun = producer(source, Day(4))
    rerun.execute(keyed(rerun, "2026-03-02"))
    again = consumer(source, target)
    report = again.execute(keyed(again, "2026-03-02"))
    assert report["source"]["versions"] == [cursors["2026-03-02"] + 1, DeltaTable(str(source)).version()]
    assert per_day(target) == per_day(source) == {"2026-03-01": (3, 30), "2026-03-02": (4, 60)}
    # The other day has no new data since its cursor: nothing is committed.
    before = state(target)
    quiet = consumer(source, target)
    result = quiet.execute(keyed(quiet, "2026-03-01"))
    assert not result["committed"] and result["source"]["versions"] is None
    assert state(target) == before


def test_the_decorator_takes_the_partition_arguments(
    tmp_path: Path, keyed: Callable[..., dict[str, Any]]
) -> None:
    from airflow.sdk import DAG

    root = tmp_path / "events"
    with DAG("decorated", schedule=None):

        @delta_pyspark_task(
            table_uri=str(root),
            partition_by=["ds"],
            partition_key_columns=["ds"],
            config_kwargs=dict(SPARK_CONF),
        )
        def daily(spark: Any, partition_key: str | None = None) -> Any:
            return spark.sql(f"SELECT 1 AS id, CAST(5 AS LONG) AS amount, DATE'{partition_key}' AS ds")

        op = daily().operator
    assert "partition_key_columns" in op.template_fields
    op.execute(keyed(op, "2026-03-04"))
    op.execute(keyed(op, "2026-03-04", run_id="again"))
    assert per_day(root) == {"2026-03-04": (1, 5)}
