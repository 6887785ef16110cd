"""Data retention as a policy, through the nightly maintenance example DAG (``dag.test()`` on a real
SQLite metadata DB): a table carrying ``airflow.dataRetention`` loses its old rows each night, a dry
run changes nothing, a policy whose typo would delete most of the table fails its run and leaves the
table whole, and a second run deletes nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pytest
from delete_support import events_by_day, state

from airflow_delta_provider.core.protocol.table_config import DATA_RETENTION

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    from airflow_delta_provider.core import DeltaTable

pytestmark = pytest.mark.system

DAG_ID = "delta_nightly_maintenance"
#: (``dag.test`` keeps the last run's conf in the DAG's params: each run says what it is.)
REAL_RUN = {"dry_run": False}


@pytest.fixture(scope="module")
def maintenance_dag(load_example: Callable[[str], ModuleType]) -> ModuleType:
    return load_example("nightly_maintenance.py")


def events(root: Path, keep: str) -> DeltaTable:
    """A table of days (today and 10 ... 90 days ago, 30 rows) whose policy keeps ``keep`` of it."""
    return events_by_day(root, {DATA_RETENTION: json.dumps({"column": "ds", "keep": keep})})


def ids(table: DeltaTable) -> list[int]:
    data = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(table.uri)).execute("select id from t")
    return sorted(pa.table(data.read_all()).column(0).to_pylist())


def report_of(dag_run: Any, xcom_value: Callable[..., Any]) -> dict[str, Any]:
    report = xcom_value(dag_run, "maintain_tables", key="maintenance_report")
    assert report is not None
    return report


def test_the_policy_deletes_the_old_rows_and_a_second_run_deletes_nothing(
    maintenance_dag: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xcom_value: Any
) -> None:
    table = events(tmp_path / "events", "interval 65 days")
    monkeypatch.setenv("AIRFLOW_VAR_DELTA_MAINTENANCE_TABLES", json.dumps([table.uri]))

    dag_run = maintenance_dag.dag.test(run_conf=REAL_RUN)

    assert str(dag_run.state) == "success"
    report = report_of(dag_run, xcom_value)
    (entry,) = report["tables"]
    step = entry["steps"]["data_retention"]
    assert step["status"] == "ran" and step["decision"]["policy"]["source"] == "table property"
    assert entry["rows_deleted"] == 9 == report["totals"]["rows_deleted"]
    assert ids(table) == list(range(21))  # delta-rs reads what is left

    # The next night: nothing is older than the cutoff any more; no DELETE is committed.
    rows_before, files_before = ids(table), state(table)[1]
    again = maintenance_dag.dag.test(run_conf=REAL_RUN)
    assert str(again.state) == "success"
    step = report_of(again, xcom_value)["tables"][0]["steps"]["data_retention"]
    assert step["status"] == "not due" and "nothing to delete" in step["reason"]
    assert ids(table) == rows_before and state(table)[1] == files_before
    operations = [c["operation"] for c in table.history()]
    assert operations.count("DELETE") == 1


def test_a_dry_run_reports_what_would_go_and_changes_nothing(
    maintenance_dag: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xcom_value: Any
) -> None:
    table = events(tmp_path / "events", "interval 65 days")
    monkeypatch.setenv("AIRFLOW_VAR_DELTA_MAINTENANCE_TABLES", json.dumps([table.uri]))
    before = state(table)

    dag_run = maintenance_dag.dag.test(run_conf={"dry_run": True})

    assert str(dag_run.state) == "success"
    step = report_of(dag_run, xcom_value)["tables"][0]["steps"]["data_retention"]
    assert step["status"] == "due" and step["decision"]["num_rows_to_delete"] == 9
    assert state(table) == before


def test_a_typo_that_would_empty_the_table_fails_the_run_and_deletes_nothing(
    maintenance_dag: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, xcom_value: Any
) -> None:
    typo = events(tmp_path / "typo", "interval 6 days")  # meant 60: all but today would go
    fine = events(tmp_path / "fine", "interval 65 days")
    monkeypatch.setenv("AIRFLOW_VAR_DELTA_MAINTENANCE_TABLES", json.dumps([typo.uri, fine.uri]))
    before = state(typo)

    dag_run = maintenance_dag.dag.test(run_conf=REAL_RUN)

    assert str(dag_run.state) == "failed"
    report = report_of(dag_run, xcom_value)
    assert report["failed"] == [typo.uri]
    by_table = {Path(e["table"]).name: e for e in report["tables"]}
    step = by_table["typo"]["steps"]["data_retention"]
    assert step["status"] == "failed"
    assert "27 of 30 row(s) (90.0%)" in step["reason"] and "max_deleted_fraction=0.5" in step["reason"]
    assert by_table["typo"]["steps"]["vacuum"]["status"] == "skipped"
    assert state(typo) == before and len(ids(typo)) == 30
    # The other table was maintained.
    assert by_table["fine"]["rows_deleted"] == 9
