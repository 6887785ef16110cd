"""DeltaRestoreOperator against real local tables: the restore, its XCom, asset event and lineage;
idempotency per task instance (a retry after the commit reads no file list and commits nothing, a
clear restores again); "restore to before run X" by the run identity the commit operators record;
templated and bad arguments (nothing committed).
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import Asset

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import RestoreMissingFilesError, TaggedCommitsNotFoundError
from airflow_delta_provider.core.log.snapshot import Snapshot
from airflow_delta_provider.operators.commit import DeltaCommitOperator
from airflow_delta_provider.operators.restore import DeltaRestoreOperator

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

    #: ``context_for(op, **fields)``: the context of one try of ``op``'s task instance.
    ContextFor = Callable[..., dict[str, Any]]

RUN_1 = "scheduled__2026-11-01T00:00:00+00:00"
RUN_2 = "scheduled__2026-11-02T00:00:00+00:00"
RUN_3 = "scheduled__2026-11-03T00:00:00+00:00"


def ingest(
    context_for: ContextFor,
    root: Path,
    run_id: str,
    ids: list[int],
    *,
    dag_id: str = "ingest",
    mode: str = "append",
    task_id: str = "load",
    **extra: Any,
) -> int:
    """One run of an ingest DAG committing a file with DeltaCommitOperator; the version it wrote.

    :param extra: more of the context (``logical_date=...``).
    """
    landing = f"landing-{uuid.uuid4().hex[:8]}"
    (root / landing).mkdir(parents=True)
    pq.write_table(pa.table({"id": ids}), root / landing / "part-0.parquet")
    op = DeltaCommitOperator(task_id=task_id, table_uri=str(root), prefix=landing, mode=mode)
    return int(op.execute(context_for(op, run_id=run_id, dag_id=dag_id, **extra))["version"])


def ids(root: Path, version: int | None = None) -> list[int]:
    return sorted(DeltaTable(str(root)).snapshot(version).to_pyarrow_table().column("id").to_pylist())


def log_listing(root: Path) -> list[str]:
    return sorted(os.listdir(root / "_delta_log"))


def restore_op(root: Path, **kwargs: Any) -> DeltaRestoreOperator:
    kwargs.setdefault("task_id", "restore")
    kwargs.setdefault("retries", 2)
    return DeltaRestoreOperator(table_uri=str(root), **kwargs)


@pytest.fixture
def context_for(task_context: ContextFor) -> ContextFor:
    """The shared ``task_context`` with this module's defaults: a run of the rollback DAG, its
    first try (``max_tries`` as the scheduler sets it before any clear)."""

    def make(op: Any, **kwargs: Any) -> dict[str, Any]:
        kwargs.setdefault("dag_id", "rollback")
        kwargs.setdefault("run_id", RUN_1)
        kwargs.setdefault("max_tries", op.retries)
        return task_context(op, **kwargs)

    return make


@pytest.fixture
def table(tmp_path: Path, context_for: ContextFor) -> Path:
    """Three ingest runs: version 0 (run 1), 1 (run 2), 2 (run 3)."""
    root = tmp_path / "events"
    for run, rows in ((RUN_1, [1]), (RUN_2, [2]), (RUN_3, [3])):
        ingest(context_for, root, run, rows)
    return root


def test_restore_by_version_reports_and_emits_the_restore(table: Path, context_for: ContextFor) -> None:
    op = restore_op(table, version=0)
    assert op.outlets == [Asset(uri=f"file://{table}")]
    context = context_for(op)

    result = op.execute(context)

    assert ids(table) == [1]
    assert {k: result[k] for k in ("version", "restored_version", "committed", "skipped", "reason")} == {
        "version": 3,
        "restored_version": 0,
        "committed": True,
        "skipped": False,
        "reason": None,
    }
    assert (result["operation"], result["num_restored_files"], result["num_removed_files"]) == (
        "RESTORE",
        0,
        2,
    )
    assert result["metrics"]["numOfFilesAfterRestore"] == 1 and result["before_run"] is None
    json.dumps(result)
    extra = context["outlet_events"][Asset(uri=f"file://{table}")].extra
    assert (extra["version"], extra["operation"], extra["committed"]) == (3, "RESTORE", True)
    assert extra["metrics"]["num_removed_files"] == 2
    info = DeltaTable(str(table)).history(1)[0]
    assert info["operation"] == "RESTORE" and info["operationParameters"] == {"version": "0"}
    assert info["tags"]["airflow.dag_id"] == "rollback" and info["tags"]["airflow.task_id"] == "restore"
    assert json.loads(info["userMetadata"])["airflow"]["run_id"] == RUN_1


def test_a_retry_after_the_restore_landed_reads_no_file_list_and_commits_nothing(
    table: Path, context_for: ContextFor, monkeypatch: pytest.MonkeyPatch
) -> None:
    op = restore_op(table, version=0)
    first = op.execute(context_for(op))
    listing = log_listing(table)

    def no_files(self: Snapshot) -> pa.Table:
        raise AssertionError("a retry must not read the table's file list")

    monkeypatch.setattr(Snapshot, "files", no_files)
    again = op.execute(context_for(op, try_number=2))

    assert (again["committed"], again["reason"], again["version"]) == (False, "already_committed", 3)
    assert again["restored_version"] == 0 and again["metrics"] == first["metrics"]
    assert log_listing(table) == listing


def test_a_cleared_restore_restores_again(table: Path, context_for: ContextFor) -> None:
    op = restore_op(table, version=1)
    context = context_for(op)
    op.execute(context)
    ingest(context_for, table, "manual__late", [4])
    assert ids(table) == [1, 2, 4]

    cleared = context_for(op, try_number=2, max_tries=1 + op.retries)
    result = op.execute(cleared)

    assert result["committed"] and result["version"] == 5 and ids(table) == [1, 2]


def test_restore_before_a_run_restores_the_version_before_its_first_commit(
    table: Path, context_for: ContextFor
) -> None:
    again = ingest(context_for, table, RUN_2, [22], task_id="load_late")  # run 2 writes again later
    assert again == 3

    op = restore_op(table, before_run_id=RUN_2, before_dag_id="ingest")
    result = op.execute(context_for(op))

    assert result["restored_version"] == 0 and ids(table) == [1]
    assert result["before_run"]["versions"] == [1, 3] and result["before_run"]["version_before"] == 0


def dated_runs(context_for: ContextFor, root: Path, r_first_at: float, a_at: float) -> datetime:
    """Run 1 (version 0, ``a_at`` seconds from run 2's logical date), run 2 (version 1 at
    ``r_first_at``, version 3 at +10 s), run 3 (version 2, between them), each with its logical date
    as Airflow gives it; the commit files dated by a store clock that may lag the scheduler's."""
    logical = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    for run, rows, day, task in ((RUN_1, [1], -1, "load"), (RUN_2, [2], 0, "load"), (RUN_3, [3], 1, "load")):
        ingest(context_for, root, run, rows, task_id=task, logical_date=logical + timedelta(days=day))
    ingest(context_for, root, RUN_2, [22], task_id="load_late", logical_date=logical)
    for version, offset in {0: a_at, 1: r_first_at, 2: (r_first_at + 10) / 2, 3: 10.0}.items():
        moment = logical.timestamp() + offset
        os.utime(root / "_delta_log" / f"{version:020d}.json", (moment, moment))
    return logical


def test_restore_before_a_run_the_store_dated_before_its_logical_date_undoes_all_of_it(
    tmp_path: Path, context_for: ContextFor
) -> None:
    """Run 2's first commit is dated 3 s before its logical date (the store's clock behind the
    scheduler's): it is the run's all the same, and the restore undoes it."""
    root = tmp_path / "events"
    dated_runs(context_for, root, r_first_at=-3.0, a_at=-7200.0)
    op = restore_op(root, before_run_id=RUN_2, before_dag_id="ingest")
    result = op.execute(context_for(op))
    assert result["before_run"]["versions"] == [1, 3] and result["restored_version"] == 0
    assert ids(root) == [1]


def test_restore_before_a_run_whose_first_commit_may_have_been_cleaned_up_is_refused(
    tmp_path: Path, context_for: ContextFor
) -> None:
    """The log before run 2's first retained commit was cleaned up, and the cleaned commit was made
    within the clock-skew margin of run 2's logical date: it may have been run 2's."""
    root = tmp_path / "events"
    dated_runs(context_for, root, r_first_at=-3.0, a_at=-1800.0)
    table = DeltaTable(str(root))
    table.checkpoint(1)
    (root / "_delta_log" / f"{0:020d}.json").unlink()
    before = (table.version(), sorted(table.snapshot().files().column("path").to_pylist()), log_listing(root))
    op = restore_op(root, before_run_id=RUN_2, before_dag_id="ingest")
    with pytest.raises(TaggedCommitsNotFoundError, match="cleaned up and may have held earlier ones"):
        op.execute(context_for(op))
    after = (table.version(), sorted(table.snapshot().files().column("path").to_pylist()), log_listing(root))
    assert after == before


def test_a_run_id_that_runs_of_two_dags_share_needs_the_dag(table: Path, context_for: ContextFor) -> None:
    ingest(context_for, table, RUN_2, [20], dag_id="other")
    listing = log_listing(table)

    op = restore_op(table, before_run_id=RUN_2)
    with pytest.raises(ValueError, match=r"several DAGs .*: ingest, other\. Pass before_dag_id"):
        op.execute(context_for(op))
    assert log_listing(table) == listing

    named = restore_op(table, before_run_id=RUN_2, before_dag_id="other")
    assert named.execute(context_for(named))["restored_version"] == 2
    assert ids(table) == [1, 2, 3]


def test_a_run_that_never_wrote_the_table_is_refused(table: Path, context_for: ContextFor) -> None:
    listing = log_listing(table)
    op = restore_op(table, before_run_id="manual__never")
    with pytest.raises(TaggedCommitsNotFoundError, match="manual__never"):
        op.execute(context_for(op))
    assert log_listing(table) == listing


def test_templated_arguments_are_rendered_and_coerced(table: Path, context_for: ContextFor) -> None:
    op = restore_op(table, version="{{ params.v }}", enforce_retention_duration="{{ params.enforce }}")
    context = {**context_for(op), "params": {"v": "1", "enforce": "false"}}
    op.render_template_fields(context)

    assert op.execute(context)["restored_version"] == 1 and ids(table) == [1, 2]

    stamp = DeltaTable(str(table)).commit_timestamps()[0].timestamp
    by_time = restore_op(table, task_id="by_time", timestamp="{{ params.ts }}")
    context = {
        **context_for(by_time),
        "params": {"ts": datetime.fromtimestamp(stamp / 1000, UTC).isoformat()},
    }
    by_time.render_template_fields(context)
    assert by_time.execute(context)["restored_version"] == 0 and ids(table) == [1]


def test_a_template_that_renders_no_version_is_refused_before_anything_is_read(
    table: Path, context_for: ContextFor
) -> None:
    listing = log_listing(table)
    op = restore_op(table, version="{{ params.v }}")
    context = {**context_for(op), "params": {"v": None}}
    op.render_template_fields(context)
    with pytest.raises(ValueError, match="after rendering it got none of them"):
        op.execute(context)
    assert log_listing(table) == listing


def test_restoring_the_current_version_commits_nothing(table: Path, context_for: ContextFor) -> None:
    op = restore_op(table, version=2)
    result = op.execute(context_for(op))
    assert (result["committed"], result["reason"], result["version"]) == (False, "no_op", 2)


def test_a_refusal_of_the_core_reaches_the_task_and_leaves_the_table(
    table: Path, context_for: ContextFor
) -> None:
    first = DeltaTable(str(table)).snapshot(0).files().column("path")[0].as_py()
    ingest(context_for, table, "manual__replace", [9], mode="overwrite")
    (table / first).unlink()  # as VACUUM would, once the overwrite removed it
    listing = log_listing(table)
    op = restore_op(table, version=0)

    with pytest.raises(RestoreMissingFilesError, match="is missing"):
        op.execute(context_for(op))

    assert log_listing(table) == listing and ids(table) == [9]


def test_openlineage_reports_the_restored_table_as_overwritten(table: Path, context_for: ContextFor) -> None:
    op = restore_op(table, version=1)
    result = op.execute(context_for(op))
    (dataset,) = op.get_openlineage_facets_on_complete(None).outputs
    assert (dataset.namespace, dataset.name) == ("file", str(table))
    assert dataset.facets["version"].datasetVersion == str(result["version"])
    assert dataset.facets["lifecycleStateChange"].lifecycleStateChange.value == "OVERWRITE"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({}, "exactly one of version, timestamp or before_run_id", id="none"),
        pytest.param({"version": 1, "timestamp": "2026-01-01T00:00:00Z"}, "got version, timestamp", id="two"),
        pytest.param({"version": 1, "before_dag_id": "d"}, "pass before_run_id too", id="dag-alone"),
        pytest.param({"version": -1}, "version must be an integer >= 0", id="negative"),
        pytest.param({"version": "latest"}, "version must be an integer >= 0", id="text"),
        pytest.param({"timestamp": "yesterday"}, "timestamp must be a point in time", id="bad-time"),
        pytest.param({"before_run_id": "  "}, "before_run_id must be a non-empty string", id="blank-run"),
        pytest.param(
            {"version": 1, "enforce_retention_duration": "maybe"}, "enforce_retention_duration", id="bool"
        ),
        pytest.param({"version": 1, "app_version": "soon"}, "app_version", id="app-version"),
        pytest.param({"version": 1, "table_uri": None}, "table_uri or delta_conn_id", id="no-table"),
    ],
)
def test_bad_arguments_are_refused_at_parse_time(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"task_id": "r", "table_uri": str(tmp_path), **kwargs}
    with pytest.raises(ValueError, match=message):
        DeltaRestoreOperator(**arguments)
