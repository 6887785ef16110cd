"""``@task.delta_pyspark``: the decorated task is a DeltaPySparkOperator with the callable's signature fixed.

The end-to-end run (Spark, commit, asset event) is in ``tests/system/test_ingest_dags.py``; here the
skip path runs for real without Spark: a table that already holds the task instance's txn.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import DAG, Asset
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.decorators.pyspark import delta_pyspark_task
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator

if TYPE_CHECKING:
    from pathlib import Path


def build(root: Path, calls: list[str], **kwargs: Any) -> DeltaPySparkOperator:
    with DAG("decorated", schedule=None, start_date=datetime(2026, 11, 1)):

        @delta_pyspark_task(table_uri=str(root), **kwargs)
        def ingest(spark: Any, ds: str | None = None) -> Any:
            calls.append(ds or "")
            return spark.range(1)

        return ingest().operator


def test_the_decorator_makes_a_delta_pyspark_operator_with_the_table_as_outlet(tmp_path: Path) -> None:
    op = build(tmp_path / "events", [], mode="overwrite", replace_where="ds = '{{ ds }}'", partition_by="ds")
    assert isinstance(op, DeltaPySparkOperator)
    assert op.custom_operator_name == "@task.delta_pyspark"
    assert op.outlets == [Asset(uri=f"file://{tmp_path / 'events'}")]
    assert {"table_uri", "replace_where", "app_id", "app_version", "conn_id"} <= set(op.template_fields)
    assert op.partition_by == ["ds"]
    # `spark` is injected, so the callable's `spark` parameter got a default, as in @task.pyspark.
    assert op.python_callable.__signature__.parameters["spark"].default is None


def test_a_retry_of_a_committed_task_skips_without_calling_the_function(tmp_path: Path) -> None:
    root = tmp_path / "events"
    (root / "seed").mkdir(parents=True)
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), root / "seed" / "part-0.parquet")
    logical_date = datetime(2026, 11, 1, tzinfo=UTC)
    app_id = f"airflow/decorated/ingest/{logical_date.isoformat()}"
    committed = DeltaTable(str(root)).commit_files(prefix="seed", app_id=app_id, app_version=0)
    calls: list[str] = []
    op = build(root, calls)
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        dag_id="decorated",
        task_id=op.task_id,
        run_id="scheduled__2026-11-01",
        map_index=-1,
        try_number=2,
        max_tries=op.retries,
        task=op,
    )
    context = {"ti": ti, "task": op, "outlet_events": OutletEventAccessors(), "logical_date": logical_date}
    result = op.execute(context)
    assert calls == []
    assert (result["skipped"], result["version"], result["app_id"]) == (True, committed.version, app_id)
    assert context["outlet_events"][op.outlets[0]].extra["skipped"] is True


def test_bad_arguments_fail_when_the_dag_is_parsed(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="use it with mode='overwrite'"):
        build(tmp_path / "events", [], replace_where="ds = '2026-11-01'")
