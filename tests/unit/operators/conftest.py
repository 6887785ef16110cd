"""One local SparkSession shared by the operator tests that run Spark.

Each execution of a PySpark-based operator builds its session with ``getOrCreate()`` and stops it
when the task ends, as in a task process. In one test process that would start and stop a
SparkContext per execution; with :func:`local_spark` in use, every ``getOrCreate()`` finds the
same local session (every module uses the same configuration) and the operators' ``stop()`` is
held until the test session ends. What the tests observe (files, commits, the runs of the
callables) does not depend on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from airflow_delta_provider.operators.spark_output import routed_spark_output

if TYPE_CHECKING:
    from collections.abc import Iterator

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
