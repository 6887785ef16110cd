"""The ``source=`` arguments of DeltaPySparkOperator and ``@task.delta_pyspark``: templated, checked
at parse time when literal and at run time when rendered, and a bad value never changes a table.

Per class of bad rendered value (blank, the rendered ``None`` where it is no default, a word that is no
value, a number out of range, credentials in a location), the argument is rendered from ``params`` as
a task run does, and ``execute`` must raise an error naming the argument, with the target's and the
source's version, active files and ``_delta_log`` listing unchanged. The source has a version the
target's cursor has not consumed, so a run with good values would commit. No Spark is needed: every
refusal comes before the session starts.
"""

from __future__ import annotations

import os
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import DAG

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.table.consumer import consumer_app_id
from airflow_delta_provider.core.transaction.commit_plan import CursorAdvance
from airflow_delta_provider.decorators.pyspark import delta_pyspark_task
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

TEMPLATE = "{{ params.value }}"


def consume(spark: Any = None, changes: Any = None, source_versions: Any = None) -> Any:
    raise AssertionError("the callable must not run: the arguments are refused first")


def write(root: Path, name: str, ids: list[int]) -> str:
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), root / name)
    return name


@pytest.fixture
def tables(tmp_path: Path) -> tuple[str, str]:
    """A source at version 1 and a target whose cursor (of task ``d``/``o``) is at version 0."""
    source = DeltaTable.create(str(tmp_path / "source"), pa.schema([("id", pa.int64())]))
    source.commit_files([write(tmp_path / "source", "a.parquet", [1])])
    target = DeltaTable.create(str(tmp_path / "target"), pa.schema([("id", pa.int64())]))
    app_id = consumer_app_id(source.snapshot().metadata.id, "airflow/d/o")
    target.commit_files([write(tmp_path / "target", "b.parquet", [1])], cursors=[CursorAdvance(app_id, 0)])
    return source.uri, target.uri


def state(uri: str) -> tuple[int, list[str], list[str]]:
    snapshot = DeltaTable(uri).snapshot()
    root = snapshot.storage.root
    return (
        snapshot.version,
        sorted(snapshot.files().column("path").to_pylist()),
        sorted(os.listdir(os.path.join(root, "_delta_log"))),
    )


def operator(source_uri: str, target: str, **kwargs: Any) -> DeltaPySparkOperator:
    """The operator consuming ``source_uri`` into ``target``; ``kwargs`` override (``source`` too)."""
    arguments = {"source": source_uri, **kwargs}
    return DeltaPySparkOperator(task_id="o", python_callable=consume, table_uri=target, **arguments)


#: (argument templated, the operator's other arguments)
ARGUMENTS: dict[str, dict[str, Any]] = {
    "source": {"source": TEMPLATE},
    "source_starting_version": {"source_starting_version": TEMPLATE},
    "source_reset": {"source_reset": TEMPLATE},
    "source_storage_conn_id": {"source_storage_conn_id": TEMPLATE},
    "spark_source_uri": {"spark_source_uri": TEMPLATE},
}
BLANK = ["", " ", "\t "]
CASES = [
    *[(name, value) for name in ARGUMENTS for value in BLANK],
    ("source", "None"),
    ("source", "s3://AKIDEXAMPLE:s3cr3t@bucket/events"),
    ("source_starting_version", "soon"),
    ("source_starting_version", "-1"),
    ("source_starting_version", "1.5"),
    ("source_starting_version", str(2**63)),
    ("source_reset", "maybe"),
    ("source_reset", "None"),
    ("source_reset", "2"),
]


@pytest.mark.parametrize(("name", "value"), CASES, ids=[f"{n}={v!r}" for n, v in CASES])
def test_a_bad_rendered_value_is_refused_and_no_table_changes(
    tables: tuple[str, str], name: str, value: str, task_context: Callable[..., dict[str, Any]]
) -> None:
    source, target = tables
    op = operator(source, target, **ARGUMENTS[name])
    context = task_context(op, params={"value": value})
    op.render_template_fields(context)
    before = (state(source), state(target))
    with pytest.raises(ValueError, match=name) as caught:
        op.execute(context)
    message = str(caught.value)
    assert "s3cr3t" not in message
    if "@" not in value:
        assert repr(value) in message or repr(value.strip()) in message
    assert (state(source), state(target)) == before


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"source": 42}, "source must be a non-empty string"),
        ({"source": ""}, "source must be a non-empty string"),
        ({"source": "None"}, "the template found nothing"),
        ({"source": "s3://AKIDEXAMPLE:s3cr3t@bucket/events"}, "carries credentials"),
        ({"source_storage_options": "key=value"}, "source_storage_options must be a mapping"),
        ({"source_starting_version": "soon"}, "source_starting_version"),
        ({"source_starting_version": -3}, "source_starting_version"),
        ({"source_reset": "maybe"}, "source_reset"),
        ({"source": None, "source_starting_version": 3}, "apply to a source table"),
        ({"source": None, "source_reset": True}, "apply to a source table"),
    ],
)
def test_literal_bad_values_are_refused_when_the_dag_is_parsed(
    tables: tuple[str, str], kwargs: dict[str, Any], message: str
) -> None:
    source, target = tables
    with pytest.raises(ValueError, match=message) as caught:
        operator(source, target, **kwargs)
    assert "s3cr3t" not in str(caught.value)


def test_a_callable_without_changes_is_refused(tables: tuple[str, str]) -> None:
    source, target = tables

    def ingest(spark: Any = None) -> Any:
        return spark.range(1)

    with pytest.raises(ValueError, match=r"takes no such argument\. Add a parameter .changes."):
        DeltaPySparkOperator(task_id="o", python_callable=ingest, table_uri=target, source=source)

    def anything(spark: Any = None, **kwargs: Any) -> Any:
        return spark.range(1)

    DeltaPySparkOperator(task_id="o", python_callable=anything, table_uri=target, source=source)


def test_templated_source_arguments_are_template_fields(tables: tuple[str, str]) -> None:
    source, target = tables
    op = operator(source, target, source_starting_version="{{ params.start }}", source_reset="{{ params.r }}")
    assert {
        "source",
        "source_storage_conn_id",
        "source_starting_version",
        "source_reset",
        "spark_source_uri",
    } <= set(op.template_fields)


def test_the_decorator_injects_changes_and_source_versions(tables: tuple[str, str]) -> None:
    source, target = tables
    with DAG("decorated", schedule=None, start_date=datetime(2026, 11, 1)):

        @delta_pyspark_task(table_uri=target, source=source)
        def silver(spark: Any, changes: Any, source_versions: Any) -> Any:
            return changes

        op = silver().operator
    assert isinstance(op, DeltaPySparkOperator) and op.source == source
    parameters = op.python_callable.__signature__.parameters
    assert [parameters[n].default for n in ("spark", "changes", "source_versions")] == [None, None, None]
