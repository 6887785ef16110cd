"""Fixtures shared by the unit tests: a task's context, and one local SparkSession.

Each execution of a PySpark-based operator builds its session with ``getOrCreate()`` and stops it
when the task ends, as in a task process. In one test process that would start and stop a
SparkContext per execution; with :func:`local_spark` in use, every ``getOrCreate()`` finds the
same local session (every module uses the same configuration) and the operators' ``stop()`` is
held until the test session ends. What the tests observe (files, commits, the runs of the
callables) does not depend on it. The Spark adapter's tests (``tests/unit/spark``) read on it too.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator


@pytest.fixture
def task_context() -> Callable[..., dict[str, Any]]:
    """Build the context of one try of a task instance: the Task SDK's own ``RuntimeTaskInstance``
    with the fields the scheduler sets, the task, and outlet event accessors; ``extra`` is merged in
    (``params=...``, ``logical_date=...``)."""
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    def make(
        op: Any,
        *,
        dag_id: str = "d",
        run_id: str = "manual__1",
        try_number: int = 1,
        max_tries: int = 0,
        **extra: Any,
    ) -> dict[str, Any]:
        ti = RuntimeTaskInstance.model_construct(
            id=uuid.uuid4(),
            dag_id=dag_id,
            task_id=op.task_id,
            run_id=run_id,
            map_index=-1,
            try_number=try_number,
            max_tries=max_tries,
            task=op,
        )
        return {"ti": ti, "task": op, "outlet_events": OutletEventAccessors(), **extra}

    return make


#: The configuration of every local session of the operator tests.
SPARK_CONF = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture(scope="session")
def local_spark() -> Iterator[Any]:
    """The shared local SparkSession (its JVM's output logged, as an operator's)."""
    from airflow_delta_provider.operators.spark_support.output import routed_spark_output

    sql = pytest.importorskip("pyspark.sql")
    builder = sql.SparkSession.builder
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    with routed_spark_output():
        session = builder.getOrCreate()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sql.SparkSession, "stop", lambda self: None)
        yield session
    session.stop()
