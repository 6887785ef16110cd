"""DeltaMaintenanceOperator's steps over the rows: data retention (the argument's policy or the
table's ``airflow.dataRetention``) and PURGE, on real local tables: what each run deletes and
reports, dry runs, the fraction refusal, bad policies per class refused with the table unchanged,
and the erasure sequence (DELETE, then PURGE and VACUUM in one run) leaving no erased row on disk."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest
from delete_support import DV_PROPERTIES, make_table, state
from delete_support import events_by_day as events

from airflow_delta_provider.core.errors import RetentionError
from airflow_delta_provider.core.protocol.table_config import DATA_RETENTION
from airflow_delta_provider.operators.maintenance import DeltaMaintenanceError, DeltaMaintenanceOperator

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_delta_provider.core import DeltaTable

ONLY_ROWS = {"run_checkpoint": False, "run_cleanup": False, "run_vacuum": False}


def ids(table: DeltaTable) -> list[int]:
    return sorted(table.snapshot().to_pyarrow_table().column("id").to_pylist())


class _TaskInstance:
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def run(table: DeltaTable, **kwargs: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Execute the operator on the table: the report it returned and its XCom."""
    ti = _TaskInstance()
    report = DeltaMaintenanceOperator(task_id="m", tables=[table.uri], **kwargs).execute({"ti": ti})
    return report, ti.pushed["maintenance_report"]


# --- data retention ---------------------------------------------------------------------------


def test_the_policy_argument_deletes_the_old_partitions_and_reports_them(tmp_path: Path) -> None:
    table = events(tmp_path / "events")
    today = datetime.now(UTC).date()  # read when the run reads it (a module constant goes stale at midnight)
    report, pushed = run(table, data_retention={"column": "ds", "keep": "interval 65 days"}, **ONLY_ROWS)

    assert pushed == report
    (entry,) = report["tables"]
    step = entry["steps"]["data_retention"]
    assert step["status"] == "ran" and "deleted 9 rows" in step["reason"]
    assert step["decision"]["predicate"] == "`ds` < :cutoff"
    assert step["decision"]["parameters"] == {"cutoff": (today - timedelta(days=65)).isoformat()}
    assert step["decision"]["metadata_only"] is True and step["decision"]["policy"]["source"] == "argument"
    assert step["result"]["num_deleted_rows"] == 9 and step["result"]["delete"]["mode"] == "metadata"
    assert entry["rows_deleted"] == 9 and report["totals"]["rows_deleted"] == 9
    assert ids(table) == list(range(21))
    json.dumps(report)


def test_the_table_property_is_applied_without_an_argument_and_a_rerun_finds_nothing(tmp_path: Path) -> None:
    policy = {"column": "ds", "keep": "interval 65 days"}
    table = events(tmp_path / "events", {DATA_RETENTION: json.dumps(policy)})
    report, _ = run(table, **ONLY_ROWS)
    step = report["tables"][0]["steps"]["data_retention"]
    assert step["status"] == "ran" and step["decision"]["policy"]["source"] == "table property"
    assert ids(table) == list(range(21))

    before = state(table)
    again, _ = run(table, **ONLY_ROWS)
    step = again["tables"][0]["steps"]["data_retention"]
    assert step["status"] == "not due" and "nothing to delete" in step["reason"]
    assert again["totals"]["rows_deleted"] == 0
    assert state(table) == before


def test_a_table_without_a_policy_and_run_data_retention_false(tmp_path: Path) -> None:
    table = events(
        tmp_path / "events", {DATA_RETENTION: json.dumps({"column": "ds", "keep": "interval 65 days"})}
    )
    report, _ = run(table, run_data_retention=False, **ONLY_ROWS)
    assert report["tables"][0]["steps"]["data_retention"]["status"] == "disabled"
    plain = events(tmp_path / "plain")
    report, _ = run(plain, **ONLY_ROWS)
    step = report["tables"][0]["steps"]["data_retention"]
    assert step["status"] == "disabled" and "no data retention policy" in step["reason"]
    assert len(ids(table)) == len(ids(plain)) == 30


def test_a_dry_run_reports_what_would_go_and_deletes_nothing(tmp_path: Path) -> None:
    table = events(tmp_path / "events")
    before = state(table)
    report, _ = run(table, data_retention='{"column": "ds", "keep": "interval 65 days"}', dry_run=True)
    step = report["tables"][0]["steps"]["data_retention"]
    assert step["status"] == "due" and "dry run, nothing deleted" in step["reason"]
    assert step["decision"]["num_rows_to_delete"] == 9
    assert state(table) == before


def test_more_than_the_fraction_fails_the_table_and_deletes_nothing(tmp_path: Path) -> None:
    table = events(tmp_path / "events")
    before = state(table)
    typo = {"column": "ds", "keep": "interval 6 days"}  # meant 60: all but today would go
    with pytest.raises(DeltaMaintenanceError) as caught:
        run(table, data_retention=typo)
    entry = caught.value.report["tables"][0]
    assert entry["status"] == "failed"
    step = entry["steps"]["data_retention"]
    assert step["status"] == "failed" and "more than max_deleted_fraction=0.5" in step["reason"]
    assert all(entry["steps"][s]["status"] == "skipped" for s in ("purge", "checkpoint", "cleanup", "vacuum"))
    assert state(table) == before
    # Raised on purpose, it runs.
    report, _ = run(table, data_retention={**typo, "max_deleted_fraction": 0.95}, **ONLY_ROWS)
    assert report["totals"]["rows_deleted"] == 27


@pytest.mark.parametrize(
    ("policy", "match"),
    [
        ({"column": "ds", "keep": "65"}, "is not an interval"),
        ({"column": "ds", "keep": 65}, "with its unit"),
        ({"column": "ds", "keep": "interval 65 dayz"}, "unit 'dayz'"),
        ({"column": "ds", "keep": "interval 0 days"}, "keeps nothing"),
        ({"colum": "ds", "keep": "interval 65 days"}, "unknown key"),
        ({"column": "ds", "keep": "interval 65 days", "max_deleted_fraction": 2}, "at most 1"),
        ("not json", "must be a policy"),
        ("", "must be a policy"),
    ],
    ids=[
        "bare-number-text",
        "bare-number",
        "bad-unit",
        "zero",
        "unknown-key",
        "fraction",
        "not-json",
        "blank",
    ],
)
def test_a_malformed_policy_is_refused_when_the_dag_is_parsed(policy: Any, match: str) -> None:
    with pytest.raises((RetentionError, ValueError), match=match):
        DeltaMaintenanceOperator(task_id="m", tables=["/tmp/t"], data_retention=policy)


@pytest.mark.parametrize(
    ("rendered", "match"),
    [
        ('{"column": "dss", "keep": "interval 65 days"}', "'dss' is not a column"),
        ('{"column": "ds", "keep": "interval 65 dys"}', "unit 'dys'"),
        ("None", None),
    ],
    ids=["unknown-column", "bad-unit", "none"],
)
def test_a_templated_policy_is_checked_after_rendering_and_leaves_the_table_unchanged(
    tmp_path: Path, rendered: str, match: str | None
) -> None:
    table = events(tmp_path / "events")
    before = state(table)
    operator = DeltaMaintenanceOperator(
        task_id="m", tables=[table.uri], data_retention="{{ params.policy }}", **ONLY_ROWS
    )
    operator.render_template_fields({"params": {"policy": rendered}})
    if match is None:
        report = operator.execute({})
        assert report["tables"][0]["steps"]["data_retention"]["status"] == "disabled"
    elif "column" in match:
        with pytest.raises(DeltaMaintenanceError, match=match):
            operator.execute({})
    else:
        with pytest.raises(RetentionError, match=match):
            operator.execute({})
    assert state(table) == before


def test_a_bad_table_property_fails_only_its_table(tmp_path: Path) -> None:
    bad = events(tmp_path / "bad", {DATA_RETENTION: '{"column": "ds", "keep": "65"}'})
    good = events(tmp_path / "good", {DATA_RETENTION: '{"column": "ds", "keep": "interval 65 days"}'})
    before = state(bad)
    with pytest.raises(DeltaMaintenanceError) as caught:
        DeltaMaintenanceOperator(task_id="m", tables=[bad.uri, good.uri], **ONLY_ROWS).execute({})
    report = caught.value.report
    assert report["failed"] == [bad.uri]
    assert "airflow.dataRetention keep='65'" in report["tables"][0]["error"]
    assert report["totals"]["rows_deleted"] == 9
    assert state(bad) == before


# --- PURGE: the erasure sequence as one policy step ---------------------------------------------


def test_purge_and_vacuum_in_one_run_leave_no_erased_row_on_disk(tmp_path: Path) -> None:
    root = tmp_path / "orders"
    files = {"a": [range(0, 10), range(10, 20)], "b": [range(20, 30)]}
    table = make_table(
        root, files, {**DV_PROPERTIES, "delta.deletedFileRetentionDuration": "interval 0 hours"}
    )
    table.delete("id IN (3, 25)")

    dry, _ = run(table, run_purge=True, vacuum_interval=None, dry_run=True)
    step = dry["tables"][0]["steps"]["purge"]
    assert step["status"] == "due" and step["decision"]["deletion_vectors"] == 2

    report, _ = run(table, run_purge=True, vacuum_interval=None)

    entry = report["tables"][0]
    purge = entry["steps"]["purge"]
    assert purge["status"] == "ran" and purge["result"]["operation"] == "REORG"
    assert purge["result"]["metrics"]["numDeletionVectorsRemoved"] == 2
    assert entry["files_purged"] == 2 and report["totals"]["files_purged"] == 2
    assert entry["steps"]["vacuum"]["status"] == "ran" and entry["files_removed"] >= 2
    held = []
    for path in root.rglob("*.parquet"):
        data = pq.read_table(path)
        if "id" in data.column_names:
            held += [i for i in data.column("id").to_pylist() if i in (3, 25)]
    assert held == []
    assert sorted(table.snapshot().to_pyarrow_table().column("id").to_pylist()) == sorted(
        set(range(30)) - {3, 25}
    )
    again, _ = run(table, run_purge=True, vacuum_interval=None)
    assert again["tables"][0]["steps"]["purge"]["status"] == "not due"
