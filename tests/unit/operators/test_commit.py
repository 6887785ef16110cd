"""DeltaCommitOperator and the idempotency key, against real local tables and Parquet files.

The task instances are the Task SDK's own ``RuntimeTaskInstance`` with the fields the scheduler
sets (``try_number``, ``max_tries``); a clear is what Airflow does to them: ``max_tries`` becomes
the last try number plus ``retries`` and the next try runs.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk import Asset, AssetAlias
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from deltalake import DeltaTable as RsDeltaTable

from airflow_delta_provider.core import DeltaTable, SchemaMismatchError
from airflow_delta_provider.operators.commit import (
    DEFAULT_SET_TRANSACTION_RETENTION,
    DeltaCommitOperator,
    RunIdentity,
    default_app_version,
    resolve_idempotency_key,
)

if TYPE_CHECKING:
    from pathlib import Path

RUN_1 = "scheduled__2026-11-01T00:00:00+00:00"
RUN_2 = "scheduled__2026-11-02T00:00:00+00:00"


# --- helpers: real task instances, real Parquet files -------------------------------------------


def context_for(
    op: Any,
    *,
    run_id: str = RUN_1,
    try_number: int = 1,
    max_tries: int | None = None,
    map_index: int = -1,
    dag_id: str = "ingest_dag",
) -> dict[str, Any]:
    """The parts of a task context a commit reads, for one try of one task instance."""
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        dag_id=dag_id,
        task_id=op.task_id,
        run_id=run_id,
        map_index=map_index,
        try_number=try_number,
        max_tries=op.retries if max_tries is None else max_tries,
        task=op,
    )
    return {"ti": ti, "task": op, "outlet_events": OutletEventAccessors(), "run_id": run_id}


def cleared(context: dict[str, Any]) -> dict[str, Any]:
    """The context of the first try after Airflow clears a finished task instance."""
    ti = context["ti"]
    op = context["task"]
    return context_for(
        op,
        run_id=ti.run_id,
        try_number=ti.try_number + 1,
        max_tries=ti.try_number + op.retries,
        map_index=ti.map_index,
        dag_id=ti.dag_id,
    )


def write_parquet(
    root: Path, relative: str, ids: list[int], ds: str | None = None, **extra: list[Any]
) -> str:
    """One Parquet file under the table root (in ``ds=`` directories when ``ds`` is given)."""
    directory = root / relative / (f"ds={ds}" if ds is not None else "")
    directory.mkdir(parents=True, exist_ok=True)
    columns: dict[str, Any] = {"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}
    columns.update(extra)
    path = directory / f"part-{uuid.uuid4().hex}.parquet"
    pq.write_table(pa.table(columns), path)
    return relative


def rows(root: Path) -> list[tuple[Any, ...]]:
    table = DeltaTable(str(root)).snapshot().to_pyarrow_table()
    keys = [c for c in ("ds", "id") if c in table.column_names]
    return sorted(tuple(r[k] for k in keys) for r in table.to_pylist())


def operator(root: Path, **kwargs: Any) -> DeltaCommitOperator:
    kwargs.setdefault("task_id", "commit")
    kwargs.setdefault("retries", 2)
    if "files" not in kwargs:
        kwargs.setdefault("prefix", "landing-1")
    return DeltaCommitOperator(table_uri=str(root), **kwargs)


# --- the run identity ----------------------------------------------------------------------------


def test_identity_names_the_task_instance_and_maps_each_index_apart(tmp_path: Path) -> None:
    op = operator(tmp_path / "t")
    plain = RunIdentity.from_context(context_for(op))
    mapped = RunIdentity.from_context(context_for(op, map_index=3))
    assert plain.app_id == f"airflow/ingest_dag/commit/{RUN_1}"
    assert mapped.app_id == f"airflow/ingest_dag/commit/{RUN_1}/3"
    assert RunIdentity.from_context(context_for(op, run_id=RUN_2)).app_id != plain.app_id
    assert mapped.tags()["airflow.map_index"] == "3"
    assert json.loads(plain.user_metadata())["airflow"]["run_id"] == RUN_1


def test_the_logical_date_names_the_run_when_there_is_one(tmp_path: Path) -> None:
    """A run deleted and created again for its date (a new run id) is the same run for Delta."""
    from datetime import UTC, datetime

    op = operator(tmp_path / "t")
    day = datetime(2026, 11, 1, tzinfo=UTC)
    first = RunIdentity.from_context({**context_for(op, run_id="manual__a"), "logical_date": day})
    again = RunIdentity.from_context({**context_for(op, run_id="manual__b"), "logical_date": day})
    assert first.app_id == again.app_id == "airflow/ingest_dag/commit/2026-11-01T00:00:00+00:00"
    assert first.tags()["airflow.logical_date"] == "2026-11-01T00:00:00+00:00"
    assert first.tags()["airflow.run_id"] == "manual__a"
    without = RunIdentity.from_context({**context_for(op, run_id="asset_triggered__x"), "logical_date": None})
    assert without.app_id == "airflow/ingest_dag/commit/asset_triggered__x"


def test_retries_share_the_version_and_a_clear_raises_it(tmp_path: Path) -> None:
    """Airflow's first try of the clear generation: max_tries - retries + 1."""
    op = operator(tmp_path / "t", retries=3)
    first = context_for(op)
    retries = [context_for(op, try_number=n) for n in (2, 3, 4)]
    after_clear = cleared(retries[-1])
    versions = [RunIdentity.from_context(c).first_try for c in (first, *retries)]
    assert versions == [1, 1, 1, 1]
    assert RunIdentity.from_context(after_clear).first_try == 5
    assert RunIdentity.from_context(context_for(op, try_number=6, max_tries=7)).first_try == 5
    identity = RunIdentity.from_context(after_clear)
    assert default_app_version(identity, "append") == 0
    assert default_app_version(identity, "overwrite") == 5


def test_one_idempotency_key_for_every_committing_operator(tmp_path: Path) -> None:
    """The commit operators and OPTIMIZE resolve the txn the same way: the task's own (rendered)
    app_id / app_version, else the task instance's, the version by the mode."""
    op = operator(tmp_path / "t", retries=3)
    context = cleared(context_for(op, try_number=4))
    identity, app_id, app_version = resolve_idempotency_key(context, None, None, "overwrite")
    assert (app_id, app_version) == (identity.app_id, 5)
    assert resolve_idempotency_key(context, None, None, "append")[1:] == (identity.app_id, 0)
    assert resolve_idempotency_key(context, "job", "7", "append")[1:] == ("job", 7)
    assert op.idempotency_key(context) == (identity, identity.app_id, 0)


def test_a_context_without_a_task_instance_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no task instance"):
        RunIdentity.from_context({})


# --- commits ---------------------------------------------------------------------------------------


def test_first_commit_creates_the_table_with_a_bounded_txn_retention(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1, 2], ds="2026-11-01")
    op = operator(root, partition_by=["ds"])
    context = context_for(op)
    result = op.execute(context)

    assert (result["version"], result["committed"], result["skipped"]) == (0, True, False)
    assert (result["files"], result["rows"]) == (1, 2)
    assert result["bytes"] == sum(f.stat().st_size for f in (root / "landing-1").rglob("*.parquet"))
    assert result["app_id"] == f"airflow/ingest_dag/commit/{RUN_1}" and result["app_version"] == 0
    snapshot = DeltaTable(str(root)).snapshot()
    assert snapshot.partition_columns == ["ds"]
    assert snapshot.properties["delta.setTransactionRetentionDuration"] == DEFAULT_SET_TRANSACTION_RETENTION
    assert snapshot.app_transaction_version(result["app_id"]) == 0
    info = DeltaTable(str(root)).history()[0]
    assert info["tags"]["airflow.dag_id"] == "ingest_dag" and info["tags"]["airflow.try_number"] == "1"
    assert json.loads(info["userMetadata"])["airflow"]["task_id"] == "commit"
    # delta-rs (the interop oracle) reads the same rows.
    assert sorted(RsDeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == [1, 2]


def test_user_table_properties_win_over_the_provider_default(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1])
    props = {"delta.setTransactionRetentionDuration": "interval 7 days", "delta.appendOnly": True}
    operator(root, table_properties=props).execute(context_for(operator(root)))
    properties = DeltaTable(str(root)).snapshot().properties
    assert properties["delta.setTransactionRetentionDuration"] == "interval 7 days"
    assert properties["delta.appendOnly"] == "true"


def test_retry_after_the_commit_landed_commits_nothing_and_reports_the_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Idempotency 1: any later try of the same task instance is a no-op."""
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1, 2])
    op = operator(root)
    first = op.execute(context_for(op))
    # Another writer commits in between: the retry must still name the version holding its commit.
    write_parquet(root, "other", [9])
    DeltaTable(str(root)).commit_files(prefix="other")
    for try_number in (2, 3):
        capsys.readouterr()
        again = op.execute(context_for(op, try_number=try_number))
        assert (again["skipped"], again["committed"], again["version"]) == (True, False, first["version"])
        # It reports what the recorded commit did, not an empty WRITE.
        assert first["operation"] == "CREATE TABLE AS SELECT"
        assert (
            (again["operation"], again["files"], again["rows"], again["bytes"])
            == (
                first["operation"],
                first["files"],
                first["rows"],
                first["bytes"],
            )
            == ("CREATE TABLE AS SELECT", 1, 2, first["bytes"])
        )
        assert again["reason"] == "already_committed"
        # The task log (Airflow's structured logger writes it to stdout here) says so plainly, and
        # does not claim a job it never runs.
        out = capsys.readouterr().out
        assert "Nothing to commit" in out and "CREATE TABLE AS SELECT, 1 file, 2 rows" in out
        assert "job" not in out
    assert rows(root) == [(1,), (2,), (9,)]
    assert DeltaTable(str(root)).version() == 1


def test_clear_in_append_mode_is_a_plain_no_op(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Idempotency 3 (append): a cleared task instance re-runs without duplicating."""
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1, 2])
    op = operator(root)
    context = context_for(op)
    op.execute(context)
    capsys.readouterr()
    result = op.execute(cleared(context))
    assert result["skipped"] and result["version"] == 0
    assert "already holds this task instance's commit" in capsys.readouterr().out
    assert rows(root) == [(1,), (2,)]


def test_clear_in_replace_mode_replaces_the_slice_and_retries_stay_no_ops(tmp_path: Path) -> None:
    """Idempotency 3 (overwrite/replace): the re-run replaces its partition; other partitions stay."""
    root = tmp_path / "events"
    write_parquet(root, "day-0", [100], ds="2026-10-31")
    DeltaTable(str(root)).commit_files(prefix="day-0", partition_by=["ds"])
    write_parquet(root, "landing-1", [1, 2], ds="2026-11-01")
    op = operator(root, mode="overwrite", replace_where="ds = '2026-11-01'")
    first_context = context_for(op)
    first = op.execute(first_context)
    assert first["app_version"] == 1 and first["removed_files"] == 0

    # Upstream data was fixed; the user clears the task and it writes new output.
    write_parquet(root, "landing-2", [1, 2, 3], ds="2026-11-01")
    op2 = operator(root, prefix="landing-2", mode="overwrite", replace_where="ds = '2026-11-01'")
    after_clear = cleared(first_context)
    second = op2.execute(
        {**after_clear, "task": op2, "ti": after_clear["ti"].model_copy(update={"task": op2})}
    )
    assert second["committed"] and second["app_version"] == 2 and second["removed_files"] == 1
    assert rows(root) == [("2026-10-31", 100), ("2026-11-01", 1), ("2026-11-01", 2), ("2026-11-01", 3)]

    # A retry of the cleared execution (its commit landed) is a no-op again.
    retry = context_for(op2, try_number=3, max_tries=after_clear["ti"].max_tries)
    assert op2.execute(retry)["skipped"]
    assert DeltaTable(str(root)).version() == second["version"]


@pytest.mark.parametrize(
    "order",
    [pytest.param([RUN_1, RUN_2], id="in-order"), pytest.param([RUN_2, RUN_1], id="backfill-after-newer")],
)
def test_each_run_commits_exactly_once_in_any_order(tmp_path: Path, order: list[str]) -> None:
    """Idempotency 2: runs in any order, each retried, commit once each."""
    root = tmp_path / "events"
    for run_id in order:
        day = run_id[11:21]
        write_parquet(root, f"landing-{day}", [int(day[-2:])], ds=day)
    for run_id in order:
        day = run_id[11:21]
        op = operator(root, prefix=f"landing-{day}", partition_by=["ds"])
        assert op.execute(context_for(op, run_id=run_id))["committed"]
    for run_id in order:  # every run retried once more
        day = run_id[11:21]
        op = operator(root, prefix=f"landing-{day}", partition_by=["ds"])
        assert op.execute(context_for(op, run_id=run_id, try_number=2))["skipped"]
    assert rows(root) == [("2026-11-01", 1), ("2026-11-02", 2)]
    assert len(DeltaTable(str(root)).snapshot().transactions) == 2


def test_mapped_task_instances_commit_once_each(tmp_path: Path) -> None:
    root = tmp_path / "events"
    for index in range(3):
        write_parquet(root, f"part-{index}", [index])
    results = []
    for index in range(3):
        op = operator(root, prefix=f"part-{index}")
        results.append(op.execute(context_for(op, map_index=index)))
        assert op.execute(context_for(op, map_index=index, try_number=2))["skipped"]
    assert [r["version"] for r in results] == [0, 1, 2]
    assert len({r["app_id"] for r in results}) == 3
    assert rows(root) == [(0,), (1,), (2,)]


def test_user_app_id_and_templated_app_version(tmp_path: Path) -> None:
    """Idempotency 4: the user's own sequencing as Delta's txnAppId / txnVersion."""
    root = tmp_path / "events"
    write_parquet(root, "batch-7", [7])
    write_parquet(root, "batch-6", [6])
    op = operator(root, prefix="batch-{{ params.batch }}", app_id="loader", app_version="{{ params.batch }}")
    context = {**context_for(op), "params": {"batch": 7}}
    op.render_template_fields(context)
    assert op.execute(context)["app_version"] == 7
    late = operator(
        root, prefix="batch-{{ params.batch }}", app_id="loader", app_version="{{ params.batch }}"
    )
    late_context = {**context_for(late, run_id=RUN_2), "params": {"batch": 6}}
    late.render_template_fields(late_context)
    result = late.execute(late_context)
    assert result["skipped"] and result["app_id"] == "loader"
    assert rows(root) == [(7,)]


def test_expired_txns_leave_the_table_state(tmp_path: Path) -> None:
    """Idempotency 5: with a retention, old task instances' txns are dropped from the state."""
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1])
    write_parquet(root, "landing-2", [2])
    retention = {"delta.setTransactionRetentionDuration": "interval 1 seconds"}
    op = operator(root, table_properties=retention)
    op.execute(context_for(op))
    assert len(DeltaTable(str(root)).snapshot().transactions) == 1
    time.sleep(1.1)  # let the first txn expire (a retention, not a performance threshold)
    op2 = operator(root, prefix="landing-2")
    op2.execute(context_for(op2, run_id=RUN_2))
    assert list(DeltaTable(str(root)).snapshot().transactions) == [f"airflow/ingest_dag/commit/{RUN_2}"]


def test_files_list_and_schema_merge(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(root, "a", [1])
    operator(root, prefix="a").execute(context_for(operator(root, prefix="a")))
    write_parquet(root, "b", [2], score=pa.array([0.5]))
    strict = operator(root, prefix="b")
    with pytest.raises(SchemaMismatchError):
        strict.execute(context_for(strict, run_id=RUN_2))
    files = [str(p.relative_to(root)) for p in (root / "b").rglob("*.parquet")]
    merging = operator(root, files=json.dumps(files), merge_schema=True)
    merging.execute(context_for(merging, run_id=RUN_2))
    assert DeltaTable(str(root)).snapshot().schema.names == ["id", "name", "score"]


# --- assets and lineage -------------------------------------------------------------------------------


def test_the_table_is_the_default_outlet_and_the_event_carries_the_commit(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1, 2, 3])
    op = operator(root)
    assert op.outlets == [Asset(uri=f"file://{root}")]
    context = context_for(op)
    result = op.execute(context)
    extra = context["outlet_events"][Asset(uri=f"file://{root}")].extra
    assert extra["version"] == result["version"] == 0
    assert extra["operation"] == "CREATE TABLE AS SELECT" and extra["skipped"] is False
    assert extra["metrics"]["num_output_rows"] == 3 and extra["metrics"]["num_added_files"] == 1
    json.dumps(extra)  # JSON-native


def test_templated_tables_have_no_static_outlet_but_feed_an_alias(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1])
    plain = DeltaCommitOperator(task_id="c", table_uri=str(tmp_path) + "/{{ params.t }}", prefix="landing-1")
    assert plain.outlets == []
    alias = AssetAlias("delta-tables")
    op = DeltaCommitOperator(
        task_id="c", table_uri=str(tmp_path) + "/{{ params.t }}", prefix="landing-1", outlets=[alias]
    )
    context = {**context_for(op), "params": {"t": "events"}}
    op.render_template_fields(context)
    op.execute(context)
    events = context["outlet_events"][alias].asset_alias_events
    assert [e.dest_asset_key.uri for e in events] == [f"file://{root}"]
    assert events[0].extra["version"] == 0


def test_openlineage_names_the_table_by_storage_and_reports_the_commit(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1, 2], ds="2026-11-01")
    op = operator(root, partition_by=["ds"])
    result = op.execute(context_for(op))
    lineage = op.get_openlineage_facets_on_complete(None)
    (dataset,) = lineage.outputs
    assert (dataset.namespace, dataset.name) == ("file", str(root))
    assert (dataset.facets["storage"].storageLayer, dataset.facets["storage"].fileFormat) == (
        "delta",
        "parquet",
    )
    assert dataset.facets["version"].datasetVersion == str(result["version"])
    assert [(f.name, f.type) for f in dataset.facets["schema"].fields] == [
        ("id", "long"),
        ("name", "string"),
        ("ds", "string"),
    ]
    stats = dataset.outputFacets["outputStatistics"]
    assert (stats.rowCount, stats.size, stats.fileCount) == (2, result["bytes"], 1)


# --- bad input ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"table_uri": None}, "table_uri or delta_conn_id", id="no-table"),
        pytest.param({"mode": "upsert"}, "mode must be", id="bad-mode"),
        pytest.param({"replace_where": "ds = '1'"}, "use it with mode='overwrite'", id="replace-append"),
        pytest.param({"mode": "overwrite", "replace_where": "  "}, "replace_where is empty", id="empty-pred"),
        pytest.param({"app_version": -1}, "non-negative integer", id="negative-version"),
        pytest.param({"app_version": "soon"}, "non-negative integer", id="text-version"),
        pytest.param({"app_version": True}, "non-negative integer", id="bool-version"),
        pytest.param({"files": ["a.parquet"]}, "exactly one of prefix", id="prefix-and-files"),
        pytest.param({"prefix": None}, "exactly one of prefix", id="neither"),
        pytest.param({"partition_by": [""]}, "partition_by must be", id="empty-column"),
        pytest.param({"tags": {"a": 1}}, "tags must map strings", id="bad-tags"),
        pytest.param({"merge_schema": "maybe"}, "merge_schema must be", id="bad-merge"),
        pytest.param(
            {"allow_empty_overwrite": "yes"}, "allow_empty_overwrite must be True or False", id="bad-opt-in"
        ),
        pytest.param({"app_version": 2**63}, "app_version must be an integer <= ", id="version-beyond-long"),
        pytest.param({"app_id": "  "}, "app_id must be a non-empty string", id="blank-app-id"),
    ],
)
def test_bad_arguments_are_refused_at_parse_time(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    arguments: dict[str, Any] = {"task_id": "c", "table_uri": str(tmp_path), "prefix": "x", **kwargs}
    with pytest.raises(ValueError, match=message):
        DeltaCommitOperator(**arguments)


def test_bad_rendered_values_are_refused_before_any_write(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1])
    op = operator(root, mode="{{ params.mode }}", app_version="{{ params.v }}")
    context = {**context_for(op), "params": {"mode": "merge", "v": "1"}}
    op.render_template_fields(context)
    with pytest.raises(ValueError, match="mode must be 'append' or 'overwrite', got 'merge'"):
        op.execute(context)
    assert not (root / "_delta_log").exists()


def test_a_prefix_outside_the_root_or_hidden_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(tmp_path, "elsewhere", [1])
    write_parquet(root, "_staging", [1])
    from airflow_delta_provider.core import InvalidPathError

    for prefix in (str(tmp_path / "elsewhere"), "_staging", "../elsewhere"):
        op = operator(root, prefix=prefix)
        with pytest.raises(InvalidPathError):
            op.execute(context_for(op))
    assert not (root / "_delta_log").exists()


# --- an overwrite that adds nothing -----------------------------------------------------------------


def log_listing(root: Path) -> list[str]:
    return sorted(p.name for p in (root / "_delta_log").iterdir())


@pytest.mark.parametrize(
    ("kwargs", "params"),
    [
        pytest.param({"files": "{{ params.files | tojson }}"}, {"files": []}, id="files-render-empty-list"),
        pytest.param({"files": "{{ params.files }}"}, {"files": "[]"}, id="files-render-json-empty"),
        pytest.param({"files": []}, {}, id="files-empty-list"),
        pytest.param({"prefix": "{{ params.dir }}"}, {"dir": "empty-dir"}, id="prefix-empty-dir"),
        pytest.param(
            {"files": "{{ params.files | tojson }}", "replace_where": "ds = '2026-11-01'"},
            {"files": []},
            id="replace-where",
        ),
    ],
)
def test_an_overwrite_that_adds_nothing_is_refused_and_the_table_is_unchanged(
    tmp_path: Path, kwargs: dict[str, Any], params: dict[str, Any]
) -> None:
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1, 2], ds="2026-11-01")
    seed = operator(root, partition_by=["ds"])
    seed.execute(context_for(seed))
    (root / "empty-dir").mkdir()
    before = (DeltaTable(str(root)).version(), rows(root), log_listing(root))
    op = operator(root, mode="overwrite", **kwargs)
    context = {**context_for(op, run_id=RUN_2), "params": params}
    op.render_template_fields(context)
    with pytest.raises(ValueError, match="allow_empty_overwrite=True"):
        op.execute(context)
    assert (DeltaTable(str(root)).version(), rows(root), log_listing(root)) == before


def test_an_empty_overwrite_runs_when_the_user_opts_in(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1, 2])
    seed = operator(root)
    seed.execute(context_for(seed))
    op = operator(root, files="{{ params.files | tojson }}", mode="overwrite", allow_empty_overwrite=True)
    context = {**context_for(op, run_id=RUN_2), "params": {"files": []}}
    op.render_template_fields(context)
    result = op.execute(context)
    assert (result["committed"], result["files"], result["removed_files"]) == (True, 0, 1)
    assert rows(root) == []


# --- S3 (a real moto server on loopback) ----------------------------------------------------------


@pytest.mark.s3
def test_commit_on_s3_names_the_table_by_its_s3_uri_and_keeps_secrets_out(
    s3_bucket: str, s3_storage_options: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    from airflow_delta_provider.core.storage import open_store

    uri = f"s3://{s3_bucket}/lake/events"
    storage = open_store(uri, s3_storage_options)
    with storage.fs.open(f"{s3_bucket}/lake/events/incoming/ds=2026-11-01/part-0.parquet", "wb") as out:
        pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), out)
    options = {**s3_storage_options, "secret": "do-not-leak-me"}  # moto accepts any secret
    op = DeltaCommitOperator(
        task_id="commit", table_uri=uri, prefix="incoming", storage_options=options, partition_by=["ds"]
    )
    assert op.outlets == [Asset(uri=uri)]
    context = context_for(op)
    result = op.execute(context)
    assert (result["version"], result["rows"], result["table_uri"]) == (0, 2, uri)
    assert op.execute(context_for(op, try_number=2))["skipped"]
    snapshot = DeltaTable(uri, s3_storage_options).snapshot()
    assert snapshot.files().column("path").to_pylist()[0].startswith("incoming/ds=2026-11-01/")
    (dataset,) = op.get_openlineage_facets_on_complete(None).outputs
    assert (dataset.namespace, dataset.name) == (f"s3://{s3_bucket}", "lake/events")
    extra = context["outlet_events"][Asset(uri=uri)].extra
    history = DeltaTable(uri, s3_storage_options).history()
    leaked = [
        where
        for where, text in (
            ("xcom", json.dumps(result)),
            ("asset event", json.dumps(extra)),
            ("commitInfo", json.dumps(history)),
            ("task log", capsys.readouterr().out),
        )
        if "do-not-leak-me" in text
    ]
    assert leaked == []


def test_a_table_named_by_a_connection_gets_its_asset_through_the_connection_alias(tmp_path, monkeypatch):
    """Given only delta_conn_id, the operator still emits the table's asset event (resolved at run time)."""
    import json

    from airflow.sdk import AssetAlias

    from airflow_delta_provider.operators.commit import DeltaCommitOperator, connection_asset_alias

    root = tmp_path / "events"
    write_parquet(root, "landing-1", [1, 2])
    monkeypatch.setenv("AIRFLOW_CONN_EVENTS_CONN", json.dumps({"conn_type": "delta", "host": str(root)}))
    op = DeltaCommitOperator(task_id="commit", delta_conn_id="events_conn", prefix="landing-1")
    assert op.outlets == [connection_asset_alias("events_conn")]
    assert isinstance(op.outlets[0], AssetAlias)
    context = context_for(op)
    result = op.execute(context)
    events = context["outlet_events"][op.outlets[0]].asset_alias_events
    assert [(e.dest_asset_key.uri, e.extra["version"]) for e in events] == [
        (f"file://{root}", result["version"])
    ]
