"""Maintenance operators against real local Delta tables written by delta-rs.

Expired logs are made by moving the log files' modification times into the past (Delta's
cleanup reads those); expired tombstones by a table whose ``delta.deletedFileRetentionDuration``
is zero, or by turning VACUUM's safety check off, exactly as a user would.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import PostCommitHookProperties, write_deltalake

from airflow_delta_provider.core import DeltaTable, RetentionError, TableNotFoundError
from airflow_delta_provider.core.table.maintenance_due import checkpoint_due
from airflow_delta_provider.operators.maintenance import (
    DeltaCheckpointOperator,
    DeltaLogCleanupOperator,
    DeltaMaintenanceError,
    DeltaMaintenanceOperator,
    DeltaVacuumOperator,
)

DAY = 86_400
NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)
ZERO_FILE_RETENTION = {"delta.deletedFileRetentionDuration": "interval 0 hours"}


# --- building real tables ------------------------------------------------------------------


def write_table(
    root: Path,
    *,
    commits: int,
    overwrite_at: tuple[int, ...] = (),
    properties: dict[str, str] | None = None,
) -> str:
    """A delta-rs table of ``commits`` one-row versions; versions in ``overwrite_at`` replace the data."""
    for version in range(commits):
        data = pa.table({"id": pa.array([version], pa.int64()), "name": [f"row-{version}"]})
        mode = "overwrite" if version in overwrite_at else "append"
        write_deltalake(
            str(root),
            data,
            mode=mode,
            configuration=properties if version == 0 else None,
            # No automatic checkpoints or cleanup from delta-rs: the operators under test do that.
            post_commithook_properties=NO_HOOKS,
        )
    return str(root)


def age_log(root: str | Path, days: float) -> None:
    """Move every ``_delta_log`` file ``days`` into the past, keeping version order (one second apart)."""
    log = Path(root) / "_delta_log"
    base = time.time() - days * DAY
    for index, path in enumerate(sorted(p for p in log.iterdir() if p.is_file())):
        os.utime(path, (base + index, base + index))


def age_data(root: str | Path, days: float) -> None:
    """Move the data files' modification times ``days`` into the past (VACUUM's age check reads them)."""
    base = time.time() - days * DAY
    for path in Path(root).rglob("*.parquet"):
        if "_delta_log" not in path.parts:
            os.utime(path, (base, base))


def tree(root: str | Path) -> dict[str, tuple[int, int]]:
    """Every file under ``root`` with its size and modification time: the table as storage sees it."""
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in Path(root).rglob("*")
        if p.is_file()
    }


def commit_files(root: str | Path) -> list[str]:
    return sorted(p.name for p in (Path(root) / "_delta_log").glob("*.json"))


def rows(root: str | Path) -> list[int]:
    return sorted(RsDeltaTable(str(root)).to_pyarrow_table()["id"].to_pylist())


def render(operator: Any, **context: Any) -> None:
    """Render the operator's template fields the way a task run does."""
    operator.render_template_fields(context)


# --- arguments -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "cls", [DeltaCheckpointOperator, DeltaLogCleanupOperator, DeltaVacuumOperator], ids=lambda c: c.__name__
)
def test_single_table_operators_need_a_table(cls: type) -> None:
    with pytest.raises(ValueError, match="needs table_uri or delta_conn_id"):
        cls(task_id="t")


def test_maintenance_operator_needs_tables() -> None:
    with pytest.raises(ValueError, match="needs tables"):
        DeltaMaintenanceOperator(task_id="t")
    with pytest.raises(ValueError, match="needs tables"):
        DeltaMaintenanceOperator(task_id="t", tables=[])


@pytest.mark.parametrize(
    ("cls", "kwargs", "match"),
    [
        pytest.param(
            DeltaVacuumOperator,
            {"dry_run": "maybe"},
            "dry_run must be true or false, got 'maybe'",
            id="dry-run",
        ),
        pytest.param(
            DeltaVacuumOperator,
            {"mode": "medium"},
            "mode must be one of 'full', 'lite', got 'medium'",
            id="mode",
        ),
        pytest.param(
            DeltaVacuumOperator, {"retention": -3}, r"retention=-3 \(hours\) is negative", id="negative"
        ),
        pytest.param(
            DeltaVacuumOperator, {"retention": [7]}, r"retention must be a timedelta.*got \[7\]", id="list"
        ),
        pytest.param(
            DeltaVacuumOperator,
            {"retention": timedelta(days=3_000_000)},
            r"retention=datetime.timedelta\(days=3000000\) is too long an interval: at most 365000 days",
            id="huge-timedelta",
        ),
        pytest.param(
            DeltaLogCleanupOperator,
            {"retention": 10**9},
            r"retention=1000000000 \(hours\) is too long an interval",
            id="huge-hours",
        ),
        pytest.param(
            DeltaVacuumOperator,
            {"max_workers": 0},
            "max_workers must be an integer >= 1, got 0",
            id="workers",
        ),
        pytest.param(
            DeltaVacuumOperator,
            {"enforce_retention_duration": "no"},
            "enforce_retention_duration must be True or False, got 'no'",
            id="enforce",
        ),
        pytest.param(
            DeltaCheckpointOperator, {"version": -1}, "version must be an integer >= 0, got -1", id="version"
        ),
        pytest.param(
            DeltaCheckpointOperator, {"version": 1.5}, "version must be an integer >= 0, got 1.5", id="float"
        ),
        pytest.param(
            DeltaCheckpointOperator, {"parts": 0}, "parts must be an integer >= 1, got 0", id="parts"
        ),
        pytest.param(
            DeltaLogCleanupOperator, {"dry_run": 2}, "dry_run must be true or false, got 2", id="cleanup"
        ),
    ],
)
def test_bad_arguments_are_refused_at_init(cls: type, kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cls(task_id="t", table_uri="/tmp/never-read", **kwargs)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        pytest.param(
            {"vacuum_interval": "fortnightly"},
            "vacuum_interval='fortnightly' is not an interval",
            id="interval",
        ),
        pytest.param(
            {"vacuum_interval": "interval 400000 days"},
            r"vacuum_interval='interval 400000 days' is too long an interval",
            id="huge-interval-string",
        ),
        pytest.param(
            {"vacuum_retention": timedelta(days=3_000_000)},
            r"vacuum_retention=datetime.timedelta\(days=3000000\) is too long an interval",
            id="huge-retention",
        ),
        pytest.param(
            {"log_retention": 10**9}, r"log_retention=1000000000 \(hours\) is too long", id="huge-hours"
        ),
        pytest.param({"vacuum_mode": "LITEST"}, "mode must be one of", id="mode"),
        pytest.param({"run_vacuum": "yes"}, "run_vacuum must be True or False", id="flag"),
        pytest.param(
            {"tables": [""]}, "tables must be a string or a list of non-empty strings", id="empty-uri"
        ),
        pytest.param({"tables": "[not json"}, "tables is not a valid JSON list", id="json"),
    ],
)
def test_bad_maintenance_arguments_are_refused_at_init(kwargs: dict[str, Any], match: str) -> None:
    kwargs.setdefault("tables", ["/tmp/never-read"])
    with pytest.raises((ValueError, RetentionError), match=match):
        DeltaMaintenanceOperator(task_id="t", **kwargs)


def test_no_io_in_init(tmp_path: Path) -> None:
    """Building an operator (DAG parsing) touches no storage: a missing table is an error at run time."""
    missing = tmp_path / "not-yet"
    operator = DeltaCheckpointOperator(task_id="t", table_uri=str(missing))
    assert not missing.exists()
    with pytest.raises(TableNotFoundError):
        operator.execute({})


def test_templated_values_are_validated_after_rendering(tmp_path: Path) -> None:
    root = write_table(tmp_path / "t", commits=2)
    operator = DeltaCheckpointOperator(task_id="t", table_uri="{{ params.root }}", version="{{ params.v }}")
    render(operator, params={"root": root, "v": "latest"})
    assert operator.table_uri == root
    with pytest.raises(ValueError, match="version must be an integer >= 0, got 'latest'"):
        operator.execute({})
    assert not (Path(root) / "_delta_log" / "_last_checkpoint").exists()


def test_template_fields_cover_what_users_template() -> None:
    assert {"table_uri", "delta_conn_id", "storage_conn_id", "retention", "dry_run", "mode"} <= set(
        DeltaVacuumOperator.template_fields
    )
    assert {"table_uri", "retention", "dry_run"} <= set(DeltaLogCleanupOperator.template_fields)
    assert {"table_uri", "version"} <= set(DeltaCheckpointOperator.template_fields)
    assert {
        "tables",
        "delta_conn_ids",
        "log_retention",
        "vacuum_retention",
        "vacuum_interval",
        "dry_run",
    } <= set(DeltaMaintenanceOperator.template_fields)


# --- checkpoint ----------------------------------------------------------------------------


def test_checkpoint_operator_writes_a_checkpoint_delta_rs_reads(tmp_path: Path) -> None:
    root = write_table(tmp_path / "t", commits=4)
    result = DeltaCheckpointOperator(task_id="t", table_uri=root).execute({})

    assert result["written"] is True
    assert result["version"] == 3
    assert result["num_add_files"] == 4
    json.dumps(result)  # XCom-able
    last = json.loads((Path(root) / "_delta_log" / "_last_checkpoint").read_text())
    assert last["version"] == 3
    assert DeltaTable(root).snapshot().segment.checkpoint_version == 3
    # delta-rs starts from the checkpoint once the commits before it are gone.
    for name in commit_files(root)[:3]:
        (Path(root) / "_delta_log" / name).unlink()
    assert rows(root) == [0, 1, 2, 3]


def test_checkpoint_of_a_templated_version(tmp_path: Path) -> None:
    root = write_table(tmp_path / "t", commits=4)
    operator = DeltaCheckpointOperator(task_id="t", table_uri=root, version="{{ params.version }}")
    render(operator, params={"version": 2})
    result = operator.execute({})
    assert result["version"] == 2
    assert result["num_add_files"] == 3


def test_checkpoint_only_if_due(tmp_path: Path) -> None:
    few = write_table(tmp_path / "few", commits=4)
    result = DeltaCheckpointOperator(task_id="t", table_uri=few, only_if_due=True).execute({})
    assert result["written"] is False
    assert "3 commit(s) since version 0" in result["reason"]
    assert "fewer than the checkpoint interval 10" in result["reason"]
    assert not (Path(few) / "_delta_log" / "_last_checkpoint").exists()

    due = write_table(tmp_path / "due", commits=4, properties={"delta.checkpointInterval": "3"})
    result = DeltaCheckpointOperator(task_id="t", table_uri=due, only_if_due=True).execute({})
    assert result["written"] is True
    assert result["version"] == 3


def test_checkpoint_due_policy(tmp_path: Path) -> None:
    root = write_table(tmp_path / "t", commits=4)
    snapshot = DeltaTable(root).snapshot()
    assert checkpoint_due(snapshot).due is False
    # The provider-wide default applies when the table sets nothing...
    assert checkpoint_due(
        DeltaTable(root, provider_defaults={"delta.checkpointInterval": "3"}).snapshot()
    ).due
    assert not checkpoint_due(
        DeltaTable(root, provider_defaults={"delta.checkpointInterval": None}).snapshot()
    ).due

    pinned = write_table(tmp_path / "p", commits=4, properties={"delta.checkpointInterval": "50"})
    # ...and the table's own property wins over it.
    three = {"delta.checkpointInterval": "3"}
    assert checkpoint_due(DeltaTable(pinned, provider_defaults=three).snapshot()).due is False

    DeltaCheckpointOperator(task_id="t", table_uri=root).execute({})
    decision = checkpoint_due(
        DeltaTable(root, provider_defaults={"delta.checkpointInterval": "1"}).snapshot()
    )
    due, reason = decision.due, decision.reason
    assert (due, reason) == (False, "version 3 already has a checkpoint")


# --- log cleanup -------------------------------------------------------------------------------


def checkpointed_old_table(root: Path, *, commits: int = 6, **kwargs: Any) -> str:
    """A table whose log is 40 days old, with a checkpoint at its latest version."""
    uri = write_table(root, commits=commits, **kwargs)
    DeltaCheckpointOperator(task_id="c", table_uri=uri).execute({})
    age_log(uri, days=40)
    return uri


def test_log_cleanup_deletes_expired_logs_and_keeps_the_table_readable(tmp_path: Path) -> None:
    root = checkpointed_old_table(tmp_path / "t")
    before = rows(root)
    result = DeltaLogCleanupOperator(task_id="t", table_uri=root).execute({})

    assert result["table_uri"].endswith("/t")
    assert result["dry_run"] is False
    assert result["num_files"] >= 5
    assert result["earliest_retained_version"] == 5
    assert commit_files(root) == [f"{5:020d}.json"]
    assert all(not (Path(root) / "_delta_log" / Path(name).name).exists() for name in result["files"])
    assert rows(root) == before
    assert DeltaTable(root).version() == 5
    json.dumps(result)


def test_log_cleanup_dry_run_deletes_nothing(tmp_path: Path) -> None:
    root = checkpointed_old_table(tmp_path / "t")
    before = tree(root)
    operator = DeltaLogCleanupOperator(task_id="t", table_uri=root, dry_run="{{ params.dry }}")
    render(operator, params={"dry": "True"})
    result = operator.execute({})
    assert result["dry_run"] is True
    assert result["num_files"] >= 5
    assert tree(root) == before


def test_log_cleanup_keeps_logs_within_retention(tmp_path: Path) -> None:
    root = write_table(tmp_path / "t", commits=6)
    DeltaCheckpointOperator(task_id="c", table_uri=root).execute({})
    age_log(root, days=10)
    before = tree(root)
    result = DeltaLogCleanupOperator(task_id="t", table_uri=root).execute({})
    assert result["num_files"] == 0
    assert tree(root) == before
    # An explicit, shorter retention does reach them.
    result = DeltaLogCleanupOperator(task_id="t", table_uri=root, retention="interval 2 days").execute({})
    assert result["num_files"] >= 5
    assert commit_files(root) == [f"{5:020d}.json"]


# --- vacuum ------------------------------------------------------------------------------------


def overwritten_table(root: Path, **kwargs: Any) -> str:
    """Versions 0-1 appended, version 2 overwrote them: two data files are tombstones now."""
    uri = write_table(root, commits=3, overwrite_at=(2,), **kwargs)
    age_data(uri, days=1)
    return uri


def removed_files(root: str) -> set[str]:
    live = {Path(p).name for p in RsDeltaTable(root).file_uris()}
    return {p.name for p in Path(root).glob("*.parquet")} - live


def test_vacuum_refuses_a_retention_shorter_than_the_table_s(tmp_path: Path) -> None:
    root = overwritten_table(tmp_path / "t")
    before = tree(root)
    with pytest.raises(RetentionError, match=r"(?i)retention"):
        DeltaVacuumOperator(task_id="t", table_uri=root, retention=0).execute({})
    assert tree(root) == before


def test_vacuum_default_retention_keeps_fresh_tombstones(tmp_path: Path) -> None:
    root = overwritten_table(tmp_path / "t")
    before = tree(root)
    result = DeltaVacuumOperator(task_id="t", table_uri=root).execute({})
    assert result["num_files"] == 0
    assert {k: v for k, v in tree(root).items() if not k.startswith("_delta_log")} == {
        k: v for k, v in before.items() if not k.startswith("_delta_log")
    }


def test_vacuum_with_the_safety_check_off_deletes_only_unreferenced_files(tmp_path: Path) -> None:
    root = overwritten_table(tmp_path / "t")
    removed = removed_files(root)
    assert len(removed) == 2
    result = DeltaVacuumOperator(
        task_id="t", table_uri=root, retention="interval 0 hours", enforce_retention_duration=False
    ).execute({})

    assert result["dry_run"] is False
    assert result["num_files"] == 2
    assert {Path(f).name for f in result["files"]} == removed
    assert not any((Path(root) / name).exists() for name in removed)
    assert rows(root) == [2]
    json.dumps(result)


def test_vacuum_dry_run_lists_and_keeps(tmp_path: Path) -> None:
    root = overwritten_table(tmp_path / "t", properties=ZERO_FILE_RETENTION)
    removed = removed_files(root)
    before = tree(root)
    result = DeltaVacuumOperator(task_id="t", table_uri=root, dry_run=True).execute({})
    assert result["dry_run"] is True
    assert {Path(f).name for f in result["files"]} == removed
    assert tree(root) == before


def test_vacuum_lite_mode_reads_the_log(tmp_path: Path) -> None:
    root = overwritten_table(tmp_path / "t", properties=ZERO_FILE_RETENTION)
    # A stray file no commit ever named: FULL finds it, LITE (log only) cannot.
    stray = Path(root) / "stray-from-a-crashed-job.parquet"
    stray.write_bytes(b"not committed")
    age_data(root, days=1)
    removed = removed_files(root) - {stray.name}
    result = DeltaVacuumOperator(task_id="t", table_uri=root, mode="lite").execute({})
    assert result["mode"] == "lite"
    assert {Path(f).name for f in result["files"]} == removed
    assert stray.exists()
    result = DeltaVacuumOperator(task_id="t", table_uri=root, mode="full").execute({})
    assert {Path(f).name for f in result["files"]} == {stray.name}
    assert rows(root) == [2]


# --- the policy --------------------------------------------------------------------------------


def neglected_table(root: Path) -> str:
    """12 versions, the last an overwrite; 40-day-old log; tombstones expire at once (table property)."""
    uri = write_table(root, commits=12, overwrite_at=(11,), properties=ZERO_FILE_RETENTION)
    age_log(uri, days=40)
    age_data(uri, days=1)
    return uri


def test_maintenance_runs_each_step_when_due(tmp_path: Path) -> None:
    root = neglected_table(tmp_path / "neglected")
    removed_bytes = sum((Path(root) / name).stat().st_size for name in removed_files(root))
    report = DeltaMaintenanceOperator(task_id="m", tables=[root]).execute({})

    assert report["failed"] == []
    (entry,) = report["tables"]
    steps = entry["steps"]
    assert entry["status"] == "success"
    assert entry["version"] == 11
    assert steps["checkpoint"]["status"] == "ran"
    assert (
        "11 commit(s) since version 0 (no checkpoint yet), checkpoint interval 10"
        in steps["checkpoint"]["reason"]
    )
    assert steps["checkpoint"]["result"]["version"] == 11
    assert steps["cleanup"]["status"] == "ran"
    assert steps["vacuum"]["status"] == "ran"
    assert "no completed VACUUM since" in steps["vacuum"]["reason"]
    # 11 appended files were replaced by the overwrite at version 11.
    assert entry["files_removed"] == 11
    assert entry["bytes_removed"] == removed_bytes
    assert entry["log_files_removed"] >= 11
    assert entry["earliest_retained_version"] == 11
    # Versions 11 (the checkpoint) to 13 (VACUUM START and END, which Delta writes on local storage).
    assert entry["latest_version"] == 13
    assert entry["versions_retained"] == 3
    assert report["totals"]["files_removed"] == 11
    assert rows(root) == [11]
    assert len(list(Path(root).glob("*.parquet"))) == 1
    json.dumps(report)


def test_maintenance_second_run_finds_nothing_due(tmp_path: Path) -> None:
    root = neglected_table(tmp_path / "neglected")
    DeltaMaintenanceOperator(task_id="m", tables=root).execute({})
    version = DeltaTable(root).version()
    before = tree(root)

    report = DeltaMaintenanceOperator(task_id="m", tables=root).execute({})
    steps = report["tables"][0]["steps"]
    assert steps["checkpoint"]["status"] == "not due"
    assert steps["cleanup"]["status"] == "not due"
    assert steps["vacuum"]["status"] == "not due"
    assert "last vacuumed by VACUUM END" in steps["vacuum"]["reason"]
    assert DeltaTable(root).version() == version
    assert tree(root) == before


def test_maintenance_without_vacuum_interval_vacuums_every_run(tmp_path: Path) -> None:
    root = neglected_table(tmp_path / "neglected")
    DeltaMaintenanceOperator(task_id="m", tables=root).execute({})
    report = DeltaMaintenanceOperator(task_id="m", tables=root, vacuum_interval=None).execute({})
    vacuum = report["tables"][0]["steps"]["vacuum"]
    assert vacuum["status"] == "ran"
    assert "VACUUM on every run" in vacuum["reason"]
    assert vacuum["result"]["num_files"] == 0


def test_maintenance_dry_run_changes_nothing(tmp_path: Path) -> None:
    root = neglected_table(tmp_path / "neglected")
    before = tree(root)
    operator = DeltaMaintenanceOperator(
        task_id="m", tables="{{ params.tables | tojson }}", dry_run="{{ params.dry }}"
    )
    render(operator, params={"tables": [root], "dry": True})
    report = operator.execute({})

    assert tree(root) == before
    assert report["dry_run"] is True
    steps = report["tables"][0]["steps"]
    assert steps["checkpoint"]["status"] == "due"
    assert "dry run, nothing written" in steps["checkpoint"]["reason"]
    # Without the checkpoint, cleanup has nothing it may delete; VACUUM still lists its candidates.
    assert steps["vacuum"]["status"] == "due"
    assert steps["vacuum"]["result"]["num_files"] == 11


def test_maintenance_respects_disabled_log_cleanup(tmp_path: Path) -> None:
    root = write_table(tmp_path / "t", commits=12, properties={"delta.enableExpiredLogCleanup": "false"})
    age_log(root, days=40)
    report = DeltaMaintenanceOperator(task_id="m", tables=[root], run_vacuum=False).execute({})
    steps = report["tables"][0]["steps"]
    assert steps["checkpoint"]["status"] == "ran"
    assert steps["cleanup"] == {
        "status": "disabled",
        "reason": "the table sets delta.enableExpiredLogCleanup=false",
        "decision": {
            "due": False,
            "reason": "the table sets delta.enableExpiredLogCleanup=false",
            "enabled": {"name": "delta.enableExpiredLogCleanup", "value": False, "source": "table property"},
        },
    }
    assert steps["vacuum"] == {"status": "disabled", "reason": "run_vacuum=False"}
    assert len(commit_files(root)) == 12


def test_one_failing_table_does_not_stop_the_others(tmp_path: Path) -> None:
    neglected = neglected_table(tmp_path / "neglected")
    fresh = write_table(tmp_path / "fresh", commits=3)
    missing = str(tmp_path / "missing")
    operator = DeltaMaintenanceOperator(task_id="m", tables=[neglected, missing, fresh])

    with pytest.raises(DeltaMaintenanceError) as caught:
        operator.execute({})

    message = str(caught.value)
    assert "Maintenance failed for 1 of 3 tables" in message and ".." not in message
    assert "missing" in message
    assert "TableNotFoundError" in message
    report = caught.value.report
    by_table = {Path(entry["table"]).name: entry for entry in report["tables"]}
    assert [Path(t).name for t in report["failed"]] == ["missing"]
    assert by_table["missing"]["status"] == "failed"
    assert by_table["missing"]["error"].startswith("open failed: TableNotFoundError")
    assert {s["status"] for s in by_table["missing"]["steps"].values()} == {"skipped"}
    # The tables before and after the failing one were maintained.
    assert by_table["neglected"]["status"] == "success"
    assert by_table["neglected"]["files_removed"] == 11
    assert by_table["fresh"]["status"] == "success"
    assert by_table["fresh"]["steps"]["checkpoint"]["status"] == "not due"
    assert by_table["fresh"]["steps"]["cleanup"]["status"] == "not due"
    # Nothing was cleaned up: every version from 0 on is retained.
    assert by_table["fresh"]["earliest_retained_version"] == 0
    assert by_table["fresh"]["versions_retained"] == by_table["fresh"]["latest_version"] + 1
    assert rows(neglected) == [11]
    assert rows(fresh) == [0, 1, 2]


def test_a_failing_step_skips_the_table_s_later_steps(tmp_path: Path) -> None:
    """A table whose log cannot be read gets no destructive step after the failure."""
    root = write_table(tmp_path / "t", commits=12, properties=ZERO_FILE_RETENTION)
    (Path(root) / "_delta_log" / f"{5:020d}.json").write_text("{not json\n")
    before = tree(root)
    with pytest.raises(DeltaMaintenanceError) as caught:
        DeltaMaintenanceOperator(task_id="m", tables=[root]).execute({})
    entry = caught.value.report["tables"][0]
    assert entry["status"] == "failed"
    # The first step reading the snapshot fails (it looks for the table's data retention policy).
    assert entry["steps"]["data_retention"]["status"] == "failed"
    for later in ("checkpoint", "cleanup", "vacuum"):
        assert entry["steps"][later] == {"status": "skipped", "reason": "data_retention failed"}
    assert tree(root) == before


def test_tables_rendered_as_a_json_list_are_deduplicated(tmp_path: Path) -> None:
    a = write_table(tmp_path / "a", commits=2)
    b = write_table(tmp_path / "b", commits=2)
    operator = DeltaMaintenanceOperator(task_id="m", tables="{{ params.tables }}", run_vacuum=False)
    render(operator, params={"tables": json.dumps([a, b, a])})
    report = operator.execute({})
    assert [Path(entry["table"]).name for entry in report["tables"]] == ["a", "b"]


def test_vacuum_interval_accepts_hours_and_intervals() -> None:
    """The value is kept as given and coerced when the task runs (see tests/unit/utils/test_coercion.py)."""
    operator = DeltaMaintenanceOperator(task_id="m", tables=["/x"], vacuum_interval=36)
    assert operator.vacuum_interval == 36


# --- S3 (a real moto server on loopback) ---------------------------------------------------------

SECRET = "s3cr3t-maintenance-7f3a"


def s3_table(bucket: str, endpoint: str, *, commits: int, **kwargs: Any) -> tuple[str, dict[str, Any]]:
    """A delta-rs table on the moto server, and the fsspec options the operators use for it."""
    uri = f"s3://{bucket}/events"
    rs_options = {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "AKIAMAINTENANCE",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }
    for version in range(commits):
        write_deltalake(
            uri,
            pa.table({"id": pa.array([version], pa.int64())}),
            mode="overwrite" if version in kwargs.get("overwrite_at", ()) else "append",
            configuration=kwargs.get("properties") if version == 0 else None,
            storage_options=rs_options,
            post_commithook_properties=NO_HOOKS,
        )
    options = {
        "key": "AKIAMAINTENANCE",
        "secret": SECRET,
        "client_kwargs": {"endpoint_url": endpoint, "region_name": "us-east-1"},
    }
    return uri, options


@pytest.mark.s3
def test_checkpoint_on_s3_keeps_secrets_out_of_xcom_and_logs(
    s3_bucket: str, s3_endpoint: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    uri, options = s3_table(s3_bucket, s3_endpoint, commits=3)
    result = DeltaCheckpointOperator(task_id="t", table_uri=uri, storage_options=options).execute({})
    assert result["version"] == 2
    assert result["table_uri"] == uri
    assert DeltaTable(uri, options).snapshot().segment.checkpoint_version == 2
    output = capsys.readouterr()
    assert SECRET not in json.dumps(result) + output.out + output.err + caplog.text


@pytest.mark.s3
def test_maintenance_on_s3(
    s3_bucket: str, s3_endpoint: str, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    uri, options = s3_table(
        s3_bucket, s3_endpoint, commits=12, overwrite_at=(11,), properties=ZERO_FILE_RETENTION
    )
    missing = f"s3://{s3_bucket}/missing"
    operator = DeltaMaintenanceOperator(task_id="m", tables=[uri, missing], storage_options=options)
    with pytest.raises(DeltaMaintenanceError) as caught:
        operator.execute({})
    report = caught.value.report
    by_table = {entry["table"]: entry for entry in report["tables"]}
    assert by_table[uri]["status"] == "success"
    assert by_table[uri]["steps"]["checkpoint"]["status"] == "ran"
    assert by_table[uri]["files_removed"] == 11
    assert by_table[missing]["status"] == "failed"
    assert DeltaTable(uri, options).snapshot().to_pyarrow_table()["id"].to_pylist() == [11]
    output = capsys.readouterr()
    assert SECRET not in json.dumps(report) + str(caught.value) + output.out + output.err + caplog.text


# --- when was the table last vacuumed ------------------------------------------------------------


def vacuum_commit(root: str, status: str) -> None:
    """A VACUUM START / VACUUM END pair as Delta writes them (empty commits, dataChange false)."""
    from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
    from airflow_delta_provider.core.transaction.commit_plan import CommitPlan

    table = DeltaTable(root)
    OptimisticTransaction(table.storage).commit(CommitPlan("VACUUM START", data_change=False))
    OptimisticTransaction(table.storage).commit(
        CommitPlan("VACUUM END", {"status": status}, data_change=False)
    )


def test_last_vacuum_reads_the_newest_completed_vacuum_end(tmp_path: Path) -> None:
    from airflow_delta_provider.core.table.maintenance_due import last_vacuum

    root = write_table(tmp_path / "t", commits=3)
    week_ago = datetime.now(UTC) - timedelta(days=7)
    assert last_vacuum(DeltaTable(root), week_ago) is None

    vacuum_commit(root, "FAILED")
    # A VACUUM that failed part-way did not vacuum the table.
    assert last_vacuum(DeltaTable(root), week_ago) is None

    vacuum_commit(root, "COMPLETED")
    write_table(tmp_path / "t", commits=2)  # later writes do not hide it
    found = last_vacuum(DeltaTable(root), week_ago)
    assert found is not None
    stamp, reason = found.timestamp, found.description
    assert reason.startswith("VACUUM END at version 6 (")
    assert abs((datetime.now(UTC) - stamp).total_seconds()) < 600


def test_last_vacuum_ignores_a_vacuum_older_than_the_window(tmp_path: Path) -> None:
    from airflow_delta_provider.core.table.maintenance_due import last_vacuum

    root = write_table(tmp_path / "t", commits=2)
    vacuum_commit(root, "COMPLETED")
    age_log(root, days=10)
    assert last_vacuum(DeltaTable(root), datetime.now(UTC) - timedelta(days=7)) is None
    assert last_vacuum(DeltaTable(root), datetime.now(UTC) - timedelta(days=11)) is not None


def test_last_vacuum_falls_back_to_last_vacuum_info(tmp_path: Path) -> None:
    """On S3 Delta writes no VACUUM commits; ``_last_vacuum_info`` still says when VACUUM last ran."""
    from airflow_delta_provider.core.table.maintenance_due import last_vacuum

    root = write_table(tmp_path / "t", commits=2)
    info = Path(root) / "_delta_log" / "_last_vacuum_info"
    info.write_text(json.dumps({"latestCommitVersionOutsideOfRetentionWindow": 0}))
    found = last_vacuum(DeltaTable(root), datetime.now(UTC) - timedelta(days=7))
    assert found is not None
    assert found.description.startswith("_last_vacuum_info written ")
    old = time.time() - 8 * DAY
    os.utime(info, (old, old))
    assert last_vacuum(DeltaTable(root), datetime.now(UTC) - timedelta(days=7)) is None


# --- tables from `delta` connections --------------------------------------------------------------


def delta_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, table_uri: str) -> None:
    """A real Airflow connection from the environment (``AIRFLOW_CONN_*``), as a deployment defines it."""
    monkeypatch.setenv(
        f"AIRFLOW_CONN_{conn_id.upper()}",
        json.dumps({"conn_type": "delta", "extra": {"table_uri": table_uri}}),
    )


def test_checkpoint_of_a_table_named_by_a_delta_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_table(tmp_path / "t", commits=3)
    delta_connection(monkeypatch, "delta_events", root)
    result = DeltaCheckpointOperator(task_id="t", delta_conn_id="delta_events").execute({})
    assert result["version"] == 2
    assert Path(result["table_uri"]).name == "t"


def test_maintenance_over_uris_and_delta_connections(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    by_uri = write_table(tmp_path / "by_uri", commits=12)
    by_conn = write_table(tmp_path / "by_conn", commits=12)
    delta_connection(monkeypatch, "delta_orders", by_conn)
    report = DeltaMaintenanceOperator(
        task_id="m", tables=[by_uri], delta_conn_ids=["delta_orders"], run_cleanup=False, run_vacuum=False
    ).execute({})
    assert [Path(entry["table"]).name for entry in report["tables"]] == ["by_uri", "by_conn"]
    assert [entry["steps"]["checkpoint"]["status"] for entry in report["tables"]] == ["ran", "ran"]
    assert DeltaTable(by_conn).snapshot().segment.checkpoint_version == 11


def test_an_unknown_delta_connection_fails_only_its_table(tmp_path: Path) -> None:
    root = write_table(tmp_path / "t", commits=12)
    operator = DeltaMaintenanceOperator(
        task_id="m", tables=[root], delta_conn_ids=["delta_nowhere"], run_cleanup=False, run_vacuum=False
    )
    with pytest.raises(DeltaMaintenanceError, match="connection 'delta_nowhere'") as caught:
        operator.execute({})
    first, second = caught.value.report["tables"]
    assert first["status"] == "success"
    assert second["table"] == "connection 'delta_nowhere'"
    assert second["status"] == "failed"
    assert "delta_nowhere" in second["error"]


# --- provider-wide defaults ([delta] configuration) ----------------------------------------------


def test_the_delta_config_section_sets_the_checkpoint_interval(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_table(tmp_path / "t", commits=4)
    monkeypatch.setenv("AIRFLOW__DELTA__CHECKPOINT_INTERVAL", "3")
    result = DeltaCheckpointOperator(task_id="t", table_uri=root, only_if_due=True).execute({})
    assert result["written"] is True
    assert result["version"] == 3


def test_the_delta_config_section_sets_the_vacuum_retention(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = overwritten_table(tmp_path / "t")
    removed = removed_files(root)
    # Without the provider default, the tombstones are younger than Delta's 7 days.
    assert DeltaVacuumOperator(task_id="t", table_uri=root, dry_run=True).execute({})["num_files"] == 0
    monkeypatch.setenv("AIRFLOW__DELTA__DELETED_FILE_RETENTION_DURATION", "interval 0 hours")
    result = DeltaVacuumOperator(task_id="t", table_uri=root).execute({})
    assert result["retention"]["source"] != "argument"
    assert {Path(f).name for f in result["files"]} == removed
    assert rows(root) == [2]
