"""DeltaDeleteOperator: the core's DELETE in a task, exactly once per task instance; templated and
refused predicates; the asset event and lineage of the commit operators; rows matched on Spark."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest
from delete_support import DV_PROPERTIES, append, commit_actions, core_rows, ids, kind, make_table, state

from airflow_delta_provider.assets.delta import delta_table_asset
from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.operators.delete import DeltaDeleteOperator

if TYPE_CHECKING:
    from pathlib import Path

RUN = "scheduled__2026-11-01T00:00:00+00:00"
FILES = {"a": [range(0, 10), range(10, 20)], "b": [range(20, 30)]}
SPARK_CONF = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture
def context_for(task_context: Any) -> Any:
    """The context of one try of the task instance (the shared ``task_context``, in the gdpr DAG)."""

    def make(op: Any, *, try_number: int = 1, max_tries: int | None = None, **extra: Any) -> dict[str, Any]:
        tries = op.retries if max_tries is None else max_tries
        return task_context(op, dag_id="gdpr", run_id=RUN, try_number=try_number, max_tries=tries, **extra)

    return make


def operator(root: Path, **kwargs: Any) -> DeltaDeleteOperator:
    kwargs.setdefault("task_id", "erase")
    kwargs.setdefault("retries", 2)
    return DeltaDeleteOperator(table_uri=str(root), **kwargs)


@pytest.mark.parametrize("properties", [{}, DV_PROPERTIES], ids=["copy-on-write", "deletion-vectors"])
def test_deletes_once_per_task_instance_and_reports_delta_metrics(
    tmp_path: Path, context_for: Any, properties: dict
) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES, properties)
    op = operator(root, predicate="id IN (3, 12, 25)")
    context = context_for(op)
    result = op.execute(context)
    assert (result["committed"], result["skipped"], result["reason"], result["operation"]) == (
        True,
        False,
        None,
        "DELETE",
    )
    assert result["num_deleted_rows"] == 3 and result["metrics"]["numDeletedRows"] == 3
    assert result["mode"] == ("deletion_vectors" if properties else "copy_on_write")
    assert result["app_id"] == f"airflow/gdpr/erase/{RUN}" and result["app_version"] == 1
    assert ids(core_rows(table)) == sorted(set(range(30)) - {3, 12, 25})
    info = kind(commit_actions(table, result["version"]), "commitInfo")[0]
    assert info["tags"]["airflow.task_id"] == "erase" and '"dag_id":"gdpr"' in info["userMetadata"]
    extra = context["outlet_events"][delta_table_asset(str(root))].extra
    assert (extra["version"], extra["committed"], extra["operation"]) == (result["version"], True, "DELETE")

    # A retry of the same task instance after the commit: nothing read, nothing written.
    append(table, [[3, 12]], "a")  # rows the first try would have deleted arrive meanwhile
    before = state(table)
    retry = operator(root, predicate="id IN (3, 12, 25)")
    again = retry.execute(context_for(retry, try_number=2))
    assert (again["committed"], again["skipped"], again["reason"], again["version"]) == (
        False,
        True,
        "already_committed",
        result["version"],
    )
    assert again["metrics"] == result["metrics"]
    assert again["num_deleted_rows"] == 3
    assert state(table) == before

    # A clear runs it again: the new rows go.
    cleared = operator(root, predicate="id IN (3, 12, 25)")
    third = cleared.execute(context_for(cleared, try_number=3, max_tries=4))
    assert third["committed"] and third["app_version"] == 3 and third["num_deleted_rows"] == 2


def test_no_matching_row_writes_nothing(tmp_path: Path, context_for: Any) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES)
    before = state(table)
    op = operator(root, predicate="id > 1000")
    result = op.execute(context_for(op))
    assert (result["committed"], result["reason"], result["version"]) == (False, "nothing_to_delete", 2)
    assert state(table) == before


def test_a_literal_none_deletes_every_row(tmp_path: Path, context_for: Any) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES)
    op = operator(root, predicate=None)
    result = op.execute(context_for(op))
    assert result["mode"] == "metadata" and result["num_deleted_rows"] == 30
    assert core_rows(table) == []


@pytest.mark.parametrize("rendered", ["", "   ", "None", "none"], ids=["empty", "blank", "None", "none"])
def test_a_template_rendering_nothing_never_empties_the_table(
    tmp_path: Path, context_for: Any, rendered: str
) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES)
    before = state(table)
    op = operator(root, predicate="{{ params.condition }}")
    context = context_for(op, params={"condition": rendered})
    op.render_template_fields(context)
    with pytest.raises(ValueError, match="empty"):
        op.execute(context)
    assert state(table) == before


def test_a_templated_predicate(tmp_path: Path, context_for: Any) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES)
    op = operator(root, predicate="id = {{ params.customer }} OR p = '{{ params.partition }}'")
    context = context_for(op, params={"customer": 4, "partition": "b"})
    op.render_template_fields(context)
    result = op.execute(context)
    assert result["predicate"] == "id = 4 OR p = 'b'"
    assert ids(core_rows(table)) == sorted(set(range(20)) - {4})


def test_parameters_are_rendered_as_native_values_and_bound(tmp_path: Path, context_for: Any) -> None:
    """``{{ params.customer }}`` renders to the int 4 whatever the DAG's rendering mode, bound to
    ``:customer``; the commit records the text with its markers, never the erased values."""
    root = tmp_path / "orders"
    table = make_table(root, FILES)
    op = operator(
        root,
        predicate="id = :customer OR p = :partition",
        parameters={"customer": "{{ params.customer }}", "partition": "{{ params.partition }}"},
    )
    context = context_for(op, params={"customer": 4, "partition": "b"})
    op.render_template_fields(context)
    assert op.parameters == {"customer": 4, "partition": "b"}
    result = op.execute(context)
    assert result["predicate"] == "id = :customer OR p = :partition"
    assert ids(core_rows(table)) == sorted(set(range(20)) - {4})
    info = kind(commit_actions(table, result["version"]), "commitInfo")[0]
    assert info["operationParameters"]["predicate"] == json.dumps(["id = :customer OR p = :partition"])


def test_a_bound_value_cannot_change_the_predicate_a_rendered_one_can(
    tmp_path: Path, context_for: Any
) -> None:
    hostile = "x' OR id >= '0"
    root = tmp_path / "orders"
    table = make_table(root, FILES)
    bound = operator(root, predicate="v = :name", parameters={"name": "{{ params.name }}"})
    context = context_for(bound, params={"name": hostile})
    bound.render_template_fields(context)
    assert bound.execute(context)["reason"] == "nothing_to_delete"
    assert len(core_rows(table)) == 30
    # The danger the docs warn of: the same value rendered into the text deletes every row.
    rendered = operator(root, task_id="rendered", predicate="v = '{{ params.name }}'")
    context = context_for(rendered, params={"name": hostile})
    rendered.render_template_fields(context)
    assert rendered.execute(context)["num_deleted_rows"] == 30


@pytest.mark.parametrize("value", [None, ""], ids=["None", "empty"])
def test_a_parameter_rendering_nothing_fails_the_task_and_changes_nothing(
    tmp_path: Path, context_for: Any, value: Any
) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES)
    before = state(table)
    op = operator(root, predicate="v = :name", parameters={"name": "{{ params.name }}"})
    context = context_for(op, params={"name": value})
    op.render_template_fields(context)
    with pytest.raises(ValueError, match="rendered nothing"):
        op.execute(context)
    assert state(table) == before


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        pytest.param(
            {"predicate": None, "parameters": {"a": 1}}, ValueError, "predicate=None", id="no-predicate"
        ),
        pytest.param(
            {"predicate": "id = :a", "parameters": ["a"]}, ValueError, "must map", id="not-a-mapping"
        ),
        pytest.param({"predicate": ""}, ValueError, "empty", id="empty"),
        pytest.param({"predicate": " \n"}, ValueError, "empty", id="blank"),
        pytest.param({"predicate": "None"}, ValueError, "empty", id="none-text"),
        pytest.param({"predicate": 7}, ValueError, "must be a SQL condition", id="not-text"),
        pytest.param({"predicate": "id = 1", "app_version": -1}, ValueError, "non-negative", id="version"),
        pytest.param(
            {"predicate": "id = 1", "evaluate_on_spark": "perhaps"},
            ValueError,
            "evaluate_on_spark",
            id="spark",
        ),
        pytest.param({}, TypeError, "predicate", id="missing"),
    ],
)
def test_bad_arguments_are_refused_when_the_dag_is_parsed(tmp_path: Path, kwargs, error, message) -> None:
    with pytest.raises(error, match=message):
        operator(tmp_path / "t", **kwargs)


@pytest.mark.parametrize(
    ("predicate", "parameters", "message"),
    [
        ("nope = 1", None, "not a column"),
        ("id = 'x'", None, "'x' is not a whole number"),
        ("id = = 1", None, "Cannot parse"),
        ("id = :a", {"a": 1, "b": 2}, "not used"),
        ("id = :a", {"A": 1}, "no parameter binds"),
        ("id = ?", None, "positional parameter markers"),
    ],
)
def test_a_bad_predicate_fails_the_task_and_changes_nothing(
    tmp_path: Path, context_for: Any, predicate: str, parameters: Any, message: str
) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES)
    before = state(table)
    op = operator(root, predicate=predicate, parameters=parameters)
    with pytest.raises(ValueError, match=message):
        op.execute(context_for(op))
    assert state(table) == before


def test_openlineage_names_the_table_at_the_deleting_version(tmp_path: Path, context_for: Any) -> None:
    root = tmp_path / "orders"
    make_table(root, FILES)
    op = operator(root, predicate="id < 5")
    result = op.execute(context_for(op))
    (dataset,) = op.get_openlineage_facets_on_complete(None).outputs
    assert (dataset.namespace, dataset.name) == ("file", str(root))
    assert dataset.facets["version"].datasetVersion == str(result["version"])
    assert dataset.facets["storage"].storageLayer == "delta"


def test_the_table_is_the_default_outlet(tmp_path: Path) -> None:
    op = operator(tmp_path / "orders", predicate="id = 1")
    assert [o.uri for o in op.outlets] == [delta_table_asset(str(tmp_path / "orders")).uri]
    templated = DeltaDeleteOperator(task_id="x", table_uri="{{ params.t }}", predicate="id = 1")
    assert templated.outlets == []


# --- rows matched on Spark ----------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.usefixtures("local_spark")
@pytest.mark.parametrize("properties", [{}, DV_PROPERTIES], ids=["copy-on-write", "deletion-vectors"])
def test_rows_matched_on_spark_and_a_retry_without_spark(
    tmp_path: Path, context_for: Any, properties: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("pyspark")
    root = tmp_path / "orders"
    table = make_table(root, FILES, properties)
    op = operator(
        root, predicate="id >= 8 AND id < 21", evaluate_on_spark=True, config_kwargs=dict(SPARK_CONF)
    )
    result = op.execute(context_for(op))
    assert result["committed"] and result["num_deleted_rows"] == 13
    assert ids(core_rows(table)) == [*range(8), *range(21, 30)]

    from pyspark.sql import SparkSession

    def no_spark(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a retry of a committed DELETE must not start Spark")

    monkeypatch.setattr(SparkSession.Builder, "getOrCreate", no_spark)
    retry = operator(root, predicate="id >= 8 AND id < 21", evaluate_on_spark=True)
    again = retry.execute(context_for(retry, try_number=2))
    assert again["reason"] == "already_committed" and DeltaTable(str(root)).version() == result["version"]
