"""DeltaPySparkOperator with ``source=``: another table's changes consumed exactly once, on a real
local SparkSession, with the source written by delta-rs (a foreign writer) and by the core.

The callables append the change rows they get to the target (a ledger), so that replaying the
target gives the source's rows exactly when every source version was consumed once
(``tests/consumer_checks.py``). Task instances are the Task SDK's ``RuntimeTaskInstance``.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pytest
from airflow.sdk import Asset
from airflow.sdk.execution_time.comms import AssetEventDagRunReferenceResult
from airflow.sdk.execution_time.context import OutletEventAccessors, TriggeringAssetEventsAccessor
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from consumer_checks import check_exactly_once, consumed_versions

from airflow_delta_provider.core import (
    CommitsCleanedUpError,
    ConsumerCursorError,
    DeltaTable,
    SourceIsTargetError,
)
from airflow_delta_provider.core.table.consumer import consumer_app_id
from airflow_delta_provider.core.transaction.commit_plan import CursorAdvance
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("local_spark")]
pytest.importorskip("pyspark")

SPARK_CONF = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.session.timeZone": "UTC",
}
COLUMNS = ["id", "v"]
CONSUMER = "airflow/daily/silver"


def context_for(op: Any, run: str, *, try_number: int = 1, events: list[dict] | None = None) -> dict:
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        dag_id="daily",
        task_id=op.task_id,
        run_id=run,
        map_index=-1,
        try_number=try_number,
        max_tries=op.retries,
        task=op,
    )
    context: dict[str, Any] = {"ti": ti, "task": op, "outlet_events": OutletEventAccessors(), "run_id": run}
    if events is not None:
        context["triggering_asset_events"] = TriggeringAssetEventsAccessor.build(
            AssetEventDagRunReferenceResult.model_validate(
                {
                    "asset": {"name": e["uri"], "uri": e["uri"], "extra": {}},
                    "extra": e["extra"],
                    "source_task_id": None,
                    "source_dag_id": None,
                    "source_run_id": None,
                    "source_map_index": None,
                    "source_aliases": [],
                    "timestamp": datetime.now(UTC),
                }
            )
            for e in events
        )
    return context


class Ledger:
    """A consuming callable: appends every change row it gets; records each call's arguments."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, ...] | None] = []
        self.before_return: Any = None

    def __call__(self, spark: Any = None, changes: Any = None, source_versions: Any = None) -> Any:
        self.calls.append(source_versions)
        assert changes.columns == [*COLUMNS, "_change_type", "_commit_version", "_commit_timestamp"]
        if self.before_return is not None:
            hook, self.before_return = self.before_return, None
            hook()
        return changes.select(*COLUMNS, "_change_type", "_commit_version")


def make(source: str, target: Path, job: Any, **kwargs: Any) -> DeltaPySparkOperator:
    kwargs.setdefault("task_id", "silver")
    return DeltaPySparkOperator(
        python_callable=job, source=source, table_uri=str(target), config_kwargs=dict(SPARK_CONF), **kwargs
    )


def append(uri: str, ids: list[int], *, mode: str = "append") -> None:
    table = pa.table({"id": pa.array(ids, pa.int64()), "v": [f"v{i}" for i in ids]})
    deltalake.write_deltalake(uri, table, mode=mode, configuration={"delta.enableChangeDataFeed": "true"})


def log_listing(root: Path) -> list[str]:
    return sorted(os.listdir(root / "_delta_log")) if (root / "_delta_log").exists() else []


def cursor(target: Path, source: str) -> int | None:
    table_id = DeltaTable(source).snapshot().metadata.id
    return DeltaTable(str(target)).snapshot().app_transaction_version(consumer_app_id(table_id, CONSUMER))


@pytest.fixture
def source(tmp_path: Path) -> str:
    uri = str(tmp_path / "bronze")
    append(uri, [1, 2, 3])  # 0
    append(uri, [4])  # 1
    return uri


def test_the_first_run_reads_the_snapshot_then_each_run_the_new_versions(source: str, tmp_path: Path) -> None:
    target = tmp_path / "silver"
    job = Ledger()
    op = make(source, target, job)
    context = context_for(op, "run-1")
    first = op.execute(context)
    assert job.calls == [(0, 1)]
    assert first["committed"] and first["rows"] == 4
    assert first["source"] == {
        "table_uri": f"file://{source}",
        "app_id": consumer_app_id(DeltaTable(source).snapshot().metadata.id, CONSUMER),
        "versions": [0, 1],
        "cursor": 1,
        "previous_cursor": None,
        "rounds": 1,
    }
    extra = context["outlet_events"][Asset(uri=f"file://{target}")].extra
    assert (extra["from_version"], extra["to_version"]) == (first["version"],) * 2
    assert (extra["source_table_uri"], extra["source_from_version"], extra["source_to_version"]) == (
        f"file://{source}",
        0,
        1,
    )
    # The cursor is a txn of the target's log, in the commit of the rows: any engine sees it.
    assert deltalake.DeltaTable(str(target)).transaction_version(first["source"]["app_id"]) == 1
    check_exactly_once(source, str(target), COLUMNS)

    # A foreign writer (delta-rs) appends, deletes and updates (change data feed on).
    append(source, [5, 6])  # 2
    deltalake.DeltaTable(source).delete("id = 2")  # 3
    deltalake.DeltaTable(source).update(updates={"v": "'changed'"}, predicate="id = 4")  # 4
    second = op.execute(context_for(op, "run-2"))
    assert job.calls[-1] == (2, 4)
    assert second["source"]["versions"] == [2, 4] and cursor(target, source) == 4
    check_exactly_once(source, str(target), COLUMNS)
    assert set(consumed_versions(str(target))) == {1, 2, 3, 4}  # the snapshot's rows carry version 1


def test_nothing_new_commits_nothing_and_the_callable_gets_none(source: str, tmp_path: Path) -> None:
    target = tmp_path / "silver"
    op = make(source, target, Ledger())
    op.execute(context_for(op, "run-1"))
    before = log_listing(target)
    seen: list[Any] = []

    def quiet(spark: Any = None, changes: Any = None, source_versions: Any = None) -> Any:
        seen.append((source_versions, changes.count(), changes.columns[-3:]))
        return None

    idle = make(source, target, quiet)
    result = idle.execute(context_for(idle, "run-2"))
    assert seen == [(None, 0, ["_change_type", "_commit_version", "_commit_timestamp"])]
    assert (result["committed"], result["reason"], result["source"]["versions"]) == (False, "no_files", None)
    assert log_listing(target) == before
    # An empty DataFrame from the callable is no reason for a commit either.
    ledger = make(source, target, Ledger())
    assert not ledger.execute(context_for(ledger, "run-3"))["committed"]
    assert log_listing(target) == before


def test_a_retry_after_the_commit_consumes_nothing_and_does_not_start_spark(
    source: str, tmp_path: Path
) -> None:
    target = tmp_path / "silver"
    job = Ledger()
    op = make(source, target, job)
    op.execute(context_for(op, "run-1"))
    append(source, [7])
    retry = op.execute(context_for(op, "run-1", try_number=2))
    assert (retry["skipped"], retry["reason"], len(job.calls)) == (True, "already_committed", 1)
    assert cursor(target, source) == 1  # version 2 waits for the next run
    nxt = op.execute(context_for(op, "run-2"))
    assert nxt["source"]["versions"] == [2, 2]
    check_exactly_once(source, str(target), COLUMNS)


def test_a_run_bounded_by_its_triggering_event_reads_up_to_that_version(source: str, tmp_path: Path) -> None:
    target = tmp_path / "silver"
    job = Ledger()
    op = make(source, target, job)
    op.execute(context_for(op, "run-1"))  # cursor 1
    for ids in ([5], [6], [7]):  # 2, 3, 4
        append(source, ids)
    asset_uri = f"file://{source}"
    events = [
        {"uri": asset_uri, "extra": {"version": 2, "from_version": 2, "to_version": 2}},
        {"uri": asset_uri, "extra": {"from_trigger": True, "payload": {"version": 3, "to_version": 3}}},
        {"uri": f"file://{tmp_path / 'elsewhere'}", "extra": {"version": 9}},
    ]
    bounded = op.execute(context_for(op, "run-2", events=events))
    assert bounded["source"]["versions"] == [2, 3] and job.calls[-1] == (2, 3)
    stale = op.execute(context_for(op, "run-3", events=events[:1]))  # an event already consumed
    assert stale["source"]["versions"] is None and not stale["committed"]
    rest = op.execute(context_for(op, "run-4"))
    assert rest["source"]["versions"] == [4, 4]
    check_exactly_once(source, str(target), COLUMNS)


def test_a_concurrent_run_that_moves_the_cursor_first_makes_this_one_redo_its_work(
    source: str, tmp_path: Path
) -> None:
    """Two runs read the same cursor; the other commits while this one computes. This one's commit
    is refused (the cursor's compare-and-set), and it reads the cursor again and runs again on what
    is left: each version lands once."""
    target = tmp_path / "silver"
    job = Ledger()
    op = make(source, target, job)
    op.execute(context_for(op, "run-1"))  # cursor 1
    append(source, [5])  # 2
    append(source, [6])  # 3
    app_id = consumer_app_id(DeltaTable(source).snapshot().metadata.id, CONSUMER)

    def other_run_commits_version_2() -> None:
        rows = (
            DeltaTable(source)
            .changes(2, 2)
            .to_pyarrow_table(columns=[*COLUMNS, "_change_type", "_commit_version"])
        )
        path = target / "other-run" / "part-0.parquet"
        path.parent.mkdir()
        import pyarrow.parquet as pq

        pq.write_table(rows, path)
        DeltaTable(str(target)).commit_files(
            ["other-run/part-0.parquet"],
            app_id="airflow/daily/silver/other-run",
            app_version=0,
            cursors=[CursorAdvance(app_id, 2, expected=1)],
        )

    job.before_return = other_run_commits_version_2
    result = op.execute(context_for(op, "run-2"))
    assert job.calls[-2:] == [(2, 3), (3, 3)]
    assert (result["committed"], result["source"]["rounds"], result["source"]["versions"]) == (
        True,
        2,
        [3, 3],
    )
    assert cursor(target, source) == 3
    check_exactly_once(source, str(target), COLUMNS)
    # The refused round's files were removed; only committed files are under the target.
    referenced = {
        os.path.relpath(u, target)
        for u in (p.removeprefix("file://") for p in DeltaTable(str(target)).snapshot().file_uris())
    }
    written = {str(p.relative_to(target)) for p in target.rglob("*.parquet") if "_delta_log" not in p.parts}
    assert written == referenced


def test_versions_lost_to_log_cleanup_fail_clearly_and_a_reset_rebuilds(source: str, tmp_path: Path) -> None:
    target = tmp_path / "silver"
    op = make(source, target, Ledger())
    op.execute(context_for(op, "run-1"))  # cursor 1
    for ids in ([5], [6]):  # 2, 3
        append(source, ids)
    DeltaTable(source).checkpoint()
    for version in range(3):  # log cleanup: commits before the checkpoint of version 3 are gone
        os.remove(os.path.join(source, "_delta_log", f"{version:020d}.json"))
    before = (DeltaTable(str(target)).version(), log_listing(target))
    with pytest.raises(CommitsCleanedUpError) as info:
        op.execute(context_for(op, "run-2"))
    message = str(info.value)
    assert "version 2" in message and "This task consumed" in message and "up to version 1" in message
    assert "source_reset=True and mode='overwrite'" in message and "source_starting_version=3" in message
    assert (DeltaTable(str(target)).version(), log_listing(target)) == before

    rebuild = make(source, target, Ledger(), source_reset="{{ params.reset }}", mode="overwrite")
    rebuild.source_reset = "true"  # as rendered from a template
    result = rebuild.execute(context_for(rebuild, "run-3"))
    assert result["source"]["versions"] == [0, 3] and result["removed_files"] >= 1
    check_exactly_once(source, str(target), COLUMNS)
    again = make(source, target, Ledger())
    assert again.execute(context_for(again, "run-4"))["source"]["versions"] is None


def test_a_target_with_data_but_no_cursor_is_refused(source: str, tmp_path: Path) -> None:
    target = tmp_path / "silver"
    deltalake.write_deltalake(
        str(target),
        pa.table(
            {"id": pa.array([1], pa.int64()), "v": ["x"], "_change_type": ["insert"], "_commit_version": [0]}
        ),
    )
    before = log_listing(target)
    job = Ledger()
    op = make(source, target, job)
    with pytest.raises(ConsumerCursorError, match="holds data but no cursor") as info:
        op.execute(context_for(op, "run-1"))
    assert "Pass source_starting_version" in str(info.value)
    assert job.calls == [] and log_listing(target) == before
    start = make(source, target, job, source_starting_version="1")
    assert start.execute(context_for(start, "run-2"))["source"]["versions"] == [1, 1]


@pytest.mark.parametrize("through", ["same-location", "symlink", "dot-dot"])
def test_a_source_that_is_the_target_is_refused(source: str, tmp_path: Path, through: str) -> None:
    bronze = tmp_path / "bronze"
    if through == "symlink":
        target = tmp_path / "silver-link"
        target.symlink_to(bronze)
    elif through == "dot-dot":
        (tmp_path / "other").mkdir()
        target = tmp_path / "other" / ".." / "bronze"
    else:
        target = bronze
    before = (DeltaTable(source).snapshot().version, log_listing(bronze))
    job = Ledger()
    op = make(source, target, job)
    with pytest.raises(SourceIsTargetError, match="cannot consume its own commits"):
        op.execute(context_for(op, "run-1"))
    assert job.calls == []
    assert (DeltaTable(source).snapshot().version, log_listing(bronze)) == before


def test_a_source_named_by_a_delta_connection(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_BRONZE", json.dumps({"conn_type": "delta", "host": source}))
    target = tmp_path / "silver"
    op = make("bronze", target, Ledger())
    assert op.execute(context_for(op, "run-1"))["source"]["table_uri"] == f"file://{source}"
    check_exactly_once(source, str(target), COLUMNS)


def test_a_concurrent_run_that_wins_the_same_version_slot_makes_this_one_read_again(
    source: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The other run commits between this run's read of the target and its put of the next version:
    the put loses, the winner already holds the cursor at this run's end, so this run committed
    nothing, reads the cursor again and finds nothing new.

    Only the moment is arranged (a real commit through the core, made when this run's put of the
    commit file starts): it cannot be hit reliably with two processes.
    """
    from airflow_delta_provider.core.storage.local import LocalStore

    target = tmp_path / "silver"
    job = Ledger()
    op = make(source, target, job)
    op.execute(context_for(op, "run-1"))  # cursor 1
    append(source, [5])  # 2
    app_id = consumer_app_id(DeltaTable(source).snapshot().metadata.id, CONSUMER)
    real_put = LocalStore.put_if_absent
    raced: list[int] = []

    def put_after_a_winner(store: LocalStore, path: str, data: bytes) -> None:
        if not raced and path.endswith(f"{1:020d}.json") and str(target) in path:
            raced.append(1)
            rows = (
                DeltaTable(source)
                .changes(2, 2)
                .to_pyarrow_table(columns=[*COLUMNS, "_change_type", "_commit_version"])
            )
            import pyarrow.parquet as pq

            (target / "winner").mkdir()
            pq.write_table(rows, target / "winner" / "part-0.parquet")
            DeltaTable(str(target)).commit_files(
                ["winner/part-0.parquet"],
                app_id="other-run",
                app_version=0,
                cursors=[CursorAdvance(app_id, 2, 1)],
            )
        real_put(store, path, data)

    monkeypatch.setattr(LocalStore, "put_if_absent", put_after_a_winner)
    result = op.execute(context_for(op, "run-2"))
    assert raced == [1] and job.calls[-1] is None  # the second round found nothing new
    assert (result["committed"], result["source"]["rounds"], result["source"]["versions"]) == (False, 2, None)
    assert cursor(target, source) == 2
    check_exactly_once(source, str(target), COLUMNS)
