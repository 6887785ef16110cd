"""DeltaCommitOperator(partition_key_columns=...): a run's asset partition key names the slice of the
table it replaces, on real local tables.

The run's key reaches a task as ``context["partition_key"]`` (Airflow 3.3) or as its DAG run's
``partition_key`` (3.2); both are tested. Each bad input (a key of the wrong shape, a key that does
not fit its column, rows outside the slice, a data column named) leaves the table as it was: its
version, its active files and its ``_delta_log`` listing.
"""

from __future__ import annotations

import json
import os
import uuid
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import Asset

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions import PredicateError
from airflow_delta_provider.core.protocol import partition_path
from airflow_delta_provider.operators.commit import DeltaCommitOperator, RunIdentity

from .test_commit import context_for

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.date32()), ("region", pa.string())])
KEY = "2026-03-01|us"


def land(root: Path, prefix: str, values: dict[str, str], ids: list[int]) -> str:
    """One Parquet file under ``prefix`` in the partition directory of ``values`` (escaped as Delta does)."""
    directory = root / prefix / partition_path(values, list(values))
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), directory / f"{uuid.uuid4().hex}.parquet")
    return prefix


def keyed(op: Any, key: str | None, *, style: str = "context", **kwargs: Any) -> dict[str, Any]:
    """A task context of a run with ``key``: as Airflow 3.3 hands it (``context["partition_key"]``)
    or as 3.2 does (only on the DAG run)."""
    context = context_for(op, **kwargs)
    if style == "context":
        context["partition_key"] = key
    context["dag_run"] = SimpleNamespace(partition_key=key)
    return context


def table_state(root: Path) -> tuple[int, list[str], list[str]]:
    snapshot = DeltaTable(str(root)).snapshot()
    return (
        snapshot.version,
        sorted(snapshot.files().column("path").to_pylist()),
        sorted(os.listdir(root / "_delta_log")),
    )


def rows(root: Path) -> list[tuple[Any, ...]]:
    data = DeltaTable(str(root)).snapshot().to_pyarrow_table().to_pylist()
    return sorted((str(r["ds"]), r["region"], r["id"]) for r in data)


@pytest.fixture
def table(tmp_path: Path) -> Path:
    """A table partitioned by (ds, region) holding three slices."""
    root = tmp_path / "t"
    DeltaTable.create(str(root), SCHEMA, partition_by=["ds", "region"])
    for n, (ds, region) in enumerate((("2026-03-01", "us"), ("2026-03-01", "eu"), ("2026-03-02", "us"))):
        land(root, f"seed-{n}", {"ds": ds, "region": region}, [n])
        DeltaTable(str(root)).commit_files(prefix=f"seed-{n}")
    return root


def op_for(root: Path, prefix: str, **kwargs: Any) -> DeltaCommitOperator:
    kwargs.setdefault("partition_key_columns", ["ds", "region"])
    return DeltaCommitOperator(task_id="commit", table_uri=str(root), prefix=prefix, retries=1, **kwargs)


@pytest.mark.parametrize("style", ["context", "dag_run"])
def test_a_composite_key_replaces_exactly_its_slice_and_a_clear_replaces_it_again(
    table: Path, style: str
) -> None:
    op = op_for(table, land(table, "run-1", {"ds": "2026-03-01", "region": "us"}, [10, 11]))
    context = keyed(op, KEY, style=style)
    result = op.execute(context)
    assert result["committed"] and result["operation"] == "WRITE" and result["removed_files"] == 1
    assert rows(table) == [
        ("2026-03-01", "eu", 1),
        ("2026-03-01", "us", 10),
        ("2026-03-01", "us", 11),
        ("2026-03-02", "us", 2),
    ]
    info = DeltaTable(str(table)).history(1)[0]
    # Delta records each operation parameter as JSON, the predicate with the key's values in place.
    assert json.loads(info["operationParameters"]["predicate"]) == ["`ds` = '2026-03-01' AND `region` = 'us'"]
    assert info["tags"]["airflow.partition_key"] == KEY
    assert result["app_id"] == f"airflow/ingest_dag/commit/{context['run_id']}?partition=2026-03-01%7Cus"
    # A retry finds its commit; a clear (first try of a new generation) replaces the slice again.
    assert op.execute(keyed(op, KEY, style=style, try_number=2))["skipped"]
    again = op_for(table, land(table, "run-2", {"ds": "2026-03-01", "region": "us"}, [12]))
    assert again.execute(keyed(again, KEY, style=style, try_number=3, max_tries=4))["committed"]
    assert rows(table) == [("2026-03-01", "eu", 1), ("2026-03-01", "us", 12), ("2026-03-02", "us", 2)]


def test_the_asset_event_carries_the_key(table: Path) -> None:
    op = op_for(table, land(table, "run-1", {"ds": "2026-03-01", "region": "us"}, [10]))
    context = keyed(op, KEY)
    op.execute(context)
    accessor = context["outlet_events"][Asset(uri=op.outlets[0].uri, name=op.outlets[0].name)]
    assert accessor.extra["partition_key"] == KEY
    assert accessor.partition_keys == {KEY}  # explicit on Airflow 3.3+ (3.2 gives the run's key)


def test_two_runs_of_one_logical_date_with_different_keys_commit_each(table: Path) -> None:
    first = op_for(table, land(table, "a", {"ds": "2026-03-01", "region": "us"}, [20]))
    second = op_for(table, land(table, "b", {"ds": "2026-03-01", "region": "eu"}, [21]))
    assert first.execute(keyed(first, "2026-03-01|us"))["committed"]
    assert second.execute(keyed(second, "2026-03-01|eu"))["committed"]
    assert rows(table) == [("2026-03-01", "eu", 21), ("2026-03-01", "us", 20), ("2026-03-02", "us", 2)]


def test_a_run_without_a_key_writes_as_it_would_without_partitions(table: Path) -> None:
    op = op_for(table, land(table, "run-1", {"ds": "2026-03-01", "region": "us"}, [10]))
    result = op.execute(keyed(op, None))  # Airflow 3.1, or a schedule without partitions
    assert result["mode"] == "append" and result["removed_files"] == 0
    assert ("2026-03-01", "us", 0) in rows(table) and ("2026-03-01", "us", 10) in rows(table)
    assert "?partition=" not in result["app_id"]
    assert "airflow.partition_key" not in DeltaTable(str(table)).history(1)[0]["tags"]


@pytest.mark.parametrize(
    ("key", "columns", "error", "message"),
    [
        ("2026-03-01", ["ds", "region"], ValueError, "has 1 part(s) separated by '|'"),
        ("2026-03-01|us|x", ["ds", "region"], ValueError, "has 3 part(s)"),
        ("not-a-date|us", ["ds", "region"], PredicateError, "'not-a-date|us'"),
        ("2026-03-01|3", ["ds", "id"], PredicateError, "['id'] are not partition columns"),
    ],
)
def test_a_key_that_names_no_slice_is_refused_and_the_table_is_unchanged(
    table: Path, key: str, columns: list[str], error: type[Exception], message: str
) -> None:
    op = op_for(
        table, land(table, "run-1", {"ds": "2026-03-01", "region": "us"}, [10]), partition_key_columns=columns
    )
    before = table_state(table)
    with pytest.raises(error) as info:
        op.execute(keyed(op, key))
    assert message in str(info.value)
    assert table_state(table) == before


def test_a_key_that_does_not_fit_its_column_names_key_and_column(table: Path) -> None:
    op = op_for(table, land(table, "run-1", {"ds": "2026-03-01", "region": "us"}, [10]))
    before = table_state(table)
    with pytest.raises(PredicateError) as info:
        op.execute(keyed(op, "2026-13-45|us"))
    text = str(info.value)
    assert "'2026-13-45|us'" in text and "comparison of ds with :p0" in text and "key_format" in text
    assert table_state(table) == before


def test_rows_outside_the_slice_are_refused_naming_the_first_offending_value(table: Path) -> None:
    prefix = land(table, "run-1", {"ds": "2026-03-01", "region": "us"}, [10])
    land(table, "run-1", {"ds": "2026-03-05", "region": "us"}, [11])
    op = op_for(table, prefix)
    before = table_state(table)
    with pytest.raises(PredicateError) as info:
        op.execute(keyed(op, KEY))
    assert "ds='2026-03-05'" in str(info.value) and "region='us'" in str(info.value)
    assert table_state(table) == before


def test_a_key_whose_characters_need_escaping_in_a_partition_path(tmp_path: Path) -> None:
    root = tmp_path / "t"
    DeltaTable.create(str(root), pa.schema([("id", pa.int64()), ("k", pa.string())]), partition_by=["k"])
    key = "a b/c:d%41=e#{x}?ü"
    land(root, "seed", {"k": "other"}, [0])
    DeltaTable(str(root)).commit_files(prefix="seed")
    op = op_for(root, land(root, "run-1", {"k": key}, [1]), partition_key_columns=["k"])
    assert op.execute(keyed(op, key))["committed"]
    again = op_for(root, land(root, "run-2", {"k": key}, [2]), partition_key_columns=["k"])
    again.execute(keyed(again, key, run_id="manual__2"))
    data = DeltaTable(str(root)).snapshot().to_pyarrow_table().to_pylist()
    assert sorted((r["k"], r["id"]) for r in data) == [(key, 2), ("other", 0)]
    assert RunIdentity.from_context(keyed(op, key)).app_id.endswith(
        "?partition=a%20b%2Fc%3Ad%2541%3De%23%7Bx%7D%3F%C3%BC"
    )


def test_templated_columns_render_as_a_list(table: Path) -> None:
    op = op_for(
        table,
        land(table, "run-1", {"ds": "2026-03-01", "region": "us"}, [10]),
        partition_key_columns="{{ params.columns | tojson }}",
    )
    assert "partition_key_columns" in op.template_fields
    op.partition_key_columns = '["ds", "region"]'  # as Airflow renders the template
    assert op.execute(keyed(op, KEY))["removed_files"] == 1


def test_columns_named_twice_are_refused_when_the_dag_is_parsed(table: Path) -> None:
    with pytest.raises(ValueError, match="names a column twice"):
        op_for(table, "p", partition_key_columns=["ds", "DS"])


def test_add_partitions_declares_every_partition_the_commit_touched(tmp_path: Path) -> None:
    # A PartitionedAtRuntime producer: the run has no key; its output spans three days.
    root = tmp_path / "t"
    DeltaTable.create(str(root), SCHEMA, partition_by=["ds", "region"])
    prefix = "run-1"
    for ds in ("2026-03-01", "2026-03-02", "2026-03-03"):
        land(root, prefix, {"ds": ds, "region": "us"}, [1])
    op = DeltaCommitOperator(
        task_id="commit",
        table_uri=str(root),
        prefix=prefix,
        partition_key_columns=["ds"],
        add_partitions=True,
    )
    context = keyed(op, None)
    op.execute(context)
    accessor = context["outlet_events"][op.outlets[0]]
    assert accessor.partition_keys == {"2026-03-01", "2026-03-02", "2026-03-03"}
    # By default every partition column, joined with '|'.
    op.partition_key_columns = None
    context = keyed(op, None, try_number=2)
    op.execute(context)  # already committed: the recorded commit's partitions are declared
    assert context["outlet_events"][op.outlets[0]].partition_keys == {
        "2026-03-01|us",
        "2026-03-02|us",
        "2026-03-03|us",
    }


def test_add_partitions_through_an_alias_is_refused_when_the_dag_is_parsed() -> None:
    with pytest.raises(ValueError, match="alias 'delta-connection/lake'"):
        DeltaCommitOperator(task_id="commit", delta_conn_id="lake", prefix="p", add_partitions=True)


@pytest.mark.parametrize(
    ("column", "key", "stored", "refused"),
    [
        # CronPartitionTimetable's default key_format on a DATE column: Spark's cast drops the time.
        (pa.date32(), "2026-03-01T00:00:00", "2026-03-01", None),
        # A TIMESTAMP needs a zone in the key ("%Y-%m-%dT%H:%M:%S%z"): Spark would read it in the
        # session's time zone otherwise.
        (pa.timestamp("us", tz="UTC"), "2026-03-01T00:00:00+0000", "2026-03-01 00:00:00", None),
        (pa.timestamp("us", tz="UTC"), "2026-03-01T00:00:00", None, "has no zone"),
        (pa.int32(), "7", "7", None),
        (pa.int32(), "2026-03-01", None, "is not a whole number"),
    ],
)
def test_a_key_is_typed_as_spark_types_a_string_bound_to_its_column(
    tmp_path: Path, column: pa.DataType, key: str, stored: str | None, refused: str | None
) -> None:
    root = tmp_path / "t"
    DeltaTable.create(str(root), pa.schema([("id", pa.int64()), ("k", column)]), partition_by=["k"])
    op = op_for(root, land(root, "run-1", {"k": stored or "0"}, [1]), partition_key_columns=["k"])
    before = table_state(root)
    if refused is not None:
        with pytest.raises(PredicateError, match=refused):
            op.execute(keyed(op, key))
        assert table_state(root) == before
        return
    assert op.execute(keyed(op, key))["committed"]
    (row,) = DeltaTable(str(root)).snapshot().files().to_pylist()
    assert dict(row["partition_values"]) == {"k": stored}
