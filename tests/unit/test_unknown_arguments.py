"""A misspelt argument is a TypeError naming it, wherever a user passes one: every operator, the
sensor, ``@task.delta_pyspark`` and the core's facade, and it is reported before anything else
is checked (a misspelt ``prefx=`` is not "no prefix"). Nothing is read or written on the way."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import DAG

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.decorators.pyspark import delta_pyspark_task
from airflow_delta_provider.operators.commit import DeltaCommitOperator
from airflow_delta_provider.operators.maintenance import (
    DeltaCheckpointOperator,
    DeltaLogCleanupOperator,
    DeltaMaintenanceOperator,
    DeltaVacuumOperator,
)
from airflow_delta_provider.operators.optimize import DeltaOptimizeOperator
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator
from airflow_delta_provider.operators.restore import DeltaRestoreOperator
from airflow_delta_provider.operators.spark_vacuum import DeltaSparkVacuumOperator
from airflow_delta_provider.sensors.delta import DeltaTableVersionSensor

if TYPE_CHECKING:
    from pathlib import Path


def _frame(spark: Any = None) -> Any:
    return spark.range(1)


#: Each class with the arguments it needs, and a misspelling of one it takes.
OPERATORS: list[tuple[type[Any], dict[str, Any], str]] = [
    (DeltaCommitOperator, {}, "prefx"),  # the misspelt argument is the one the operator needs
    (DeltaCommitOperator, {"prefix": "out"}, "partiton_by"),
    (DeltaPySparkOperator, {"python_callable": _frame}, "replace_wehre"),
    (DeltaCheckpointOperator, {}, "only_if_dew"),
    (DeltaLogCleanupOperator, {}, "dryrun"),
    (DeltaVacuumOperator, {}, "retension"),
    (DeltaSparkVacuumOperator, {}, "paralellism"),
    (DeltaOptimizeOperator, {}, "target_filesize"),
    (DeltaTableVersionSensor, {}, "after_versoin"),
    (DeltaRestoreOperator, {}, "verison"),  # the misspelt argument is the one the operator needs
    (DeltaRestoreOperator, {"version": 1}, "before_dag"),
]


@pytest.mark.parametrize(
    ("operator", "needed", "typo"), OPERATORS, ids=[f"{o.__name__}-{t}" for o, _, t in OPERATORS]
)
def test_an_operator_names_a_misspelt_argument(
    tmp_path: Path, operator: type[Any], needed: dict[str, Any], typo: str
) -> None:
    with pytest.raises(TypeError, match=rf"\b{typo}\b"):
        operator(task_id="t", table_uri=str(tmp_path), **needed, **{typo: "x"})
    assert list(tmp_path.iterdir()) == []


def test_the_maintenance_operator_names_a_misspelt_argument(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match=r"\bvacuum_intervall\b"):
        DeltaMaintenanceOperator(task_id="t", tables=[str(tmp_path)], vacuum_intervall="interval 1 day")


def test_the_decorator_names_a_misspelt_argument(tmp_path: Path) -> None:
    with DAG("typo", schedule=None, start_date=datetime(2026, 11, 1)):

        @delta_pyspark_task(table_uri=str(tmp_path), mergeschema=True)
        def ingest(spark: Any = None) -> Any:
            return spark.range(1)

        with pytest.raises(TypeError, match=r"\bmergeschema\b"):
            ingest()


def test_the_facade_names_a_misspelt_option_and_commits_nothing(tmp_path: Path) -> None:
    """``DeltaTable.commit_files(prefx=...)``: the option is named (a TypeError however the facade
    declares its options), and the table is unchanged."""
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    (tmp_path / "out").mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "out" / "part-0.parquet")
    log = sorted(p.name for p in (tmp_path / "_delta_log").iterdir())
    with pytest.raises(TypeError, match=r"\bprefx\b"):
        table.commit_files(prefx="out")
    assert table.version() == 0 and table.snapshot().num_files() == 0
    assert sorted(p.name for p in (tmp_path / "_delta_log").iterdir()) == log
