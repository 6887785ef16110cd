"""The main job, end to end on one machine: the example DAGs on local files, local Spark and SQLite.

Run it with ``make demo``. Everything lives under ``.demo/`` in the repository: the Airflow home
(a SQLite metadata DB) and the Delta tables. Each run starts afresh. It:

1. runs ``delta_daily_ingest`` (``dags_examples/daily_ingest.py``, ``@task.delta_pyspark``) for
   three days, then the second day again (the same run: nothing is committed twice), then a
   fourth day whose task fails *after* its commit, so Airflow retries it (the retry commits
   nothing and does not start Spark);
2. runs ``delta_events_downstream`` (scheduled on the table's asset), which reads the version
   the last commit produced, and ``delta_events_silver`` (``silver.py``, ``source=`` the events
   table), which consumes every version so far (the table's snapshot on its first run); its
   re-run consumes nothing again;
3. runs ``delta_events_wait_for_version`` (the deferrable version sensor) waiting for a version that
   does not exist yet: it defers, its trigger polls, and another writer (delta-rs, in a thread)
   commits a fifth day a few seconds later, which resumes it; ``delta_events_silver`` then consumes
   exactly that version, in a run whose first try fails after its commit (the retry consumes
   nothing), and the silver table's totals equal the events table's;
4. runs ``delta_nightly_maintenance`` over the tables under ``.demo/`` (checkpoint and log
   cleanup when due, VACUUM when due), then the same steps with the demo's clock moved forward
   (31 days for the log retention, 8 for VACUUM's 7) on a copy of the table: a checkpoint is
   written, the expired log files before it are deleted, and the data files the clear and the
   retry replaced or left behind are removed. The table itself keeps every commit, so the History
   view the demo points at shows the runs, the retry and the other writer;
5. runs ``delta_erase_customer`` on an orders table with deletion vectors (DELETE, then PURGE and
   VACUUM as one maintenance step) and counts the customer's rows in every file under its root, and
   ``delta_rollback`` on the events table, undoing the failing day's run (and what came after it)
   in one RESTORE;
6. where the installed Airflow has asset partitions (3.2+), runs the partitioned pair
   ``delta_partitioned_orders`` / ``delta_partitioned_totals`` in keyed runs: two days out of
   order, a consumer run per day, one day cleared and consumed again (``demo_partitions.py``);
7. prints the table's history and its rows per day, and where to see it all in Airflow's UI
   (the provider's Delta view, docs/ui.md).

The example DAGs keep their tables under the Airflow Variable ``delta_examples_root``; unset, as
here, under ``.demo/``. The two failures the demo provokes (a task that fails right after its
commit) print one line each; anything else Airflow or Spark reports is printed as it comes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

from demo_partitions import partitions_demo

REPO = Path(__file__).resolve().parent.parent
DEMO = REPO / ".demo"
EXAMPLES = REPO / "dags_examples"
DAYS = [datetime(2026, 11, d, tzinfo=UTC) for d in (1, 2, 3)]
FAILING_DAY = datetime(2026, 11, 4, tzinfo=UTC)
SILVER_RUNS = [datetime(2026, 11, 4, h, tzinfo=UTC) for h in (12, 18)]
#: What the demo's failing task raises right after its commit landed.
SIMULATED_FAILURE = "simulated worker loss after the commit"


def prepare_environment() -> None:
    """An Airflow home under .demo/ whose dags folder is dags_examples/ (set before airflow is imported).

    Its ``airflow.cfg`` holds the settings, so ``airflow api-server`` started on the same home later
    (the last lines say how) reads the same database the same way: a Fernet key of its own (Airflow
    encrypts a deferred sensor's trigger arguments with it; without one it warns and stores them in
    clear), a secret to sign the UI's tokens (without one the API server warns and makes one up), the
    API server on this machine only (the simple auth manager warns on any other address), the
    examples as its DAGs.
    """
    if "airflow" in sys.modules:
        raise RuntimeError("Run the demo as a script: Airflow must not be imported before its home is set.")
    import secrets

    from cryptography.fernet import Fernet

    # The demo's Airflow is its airflow.cfg alone: settings, connections and Variables a shell holds
    # for another Airflow (AIRFLOW__*, AIRFLOW_CONN_*, AIRFLOW_VAR_*, AIRFLOW_HOME) would point it
    # elsewhere. A logging level given for the demo is kept.
    for name in [n for n in os.environ if n.startswith("AIRFLOW") and n != "AIRFLOW__LOGGING__LOGGING_LEVEL"]:
        del os.environ[name]
    shutil.rmtree(DEMO, ignore_errors=True)  # .demo/ is the demo's own; nothing else lives there
    home = DEMO / "airflow"
    home.mkdir(parents=True)
    (home / "airflow.cfg").write_text(
        "[core]\n"
        f"dags_folder = {EXAMPLES}\n"
        "load_examples = False\n"
        f"fernet_key = {Fernet.generate_key().decode()}\n"
        "[api]\n"
        "host = 127.0.0.1\n"  # this machine only: the demo's UI login is the simple auth manager's
        "[api_auth]\n"
        f"jwt_secret = {secrets.token_hex(32)}\n"
    )
    os.environ["AIRFLOW_HOME"] = str(home)
    # The demo prints its own account of each step; Airflow's and Spark's INFO lines would bury it.
    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")


@contextlib.contextmanager
def expected_failure_quiet() -> Iterator[None]:
    """Within the block, the log of the task failure the demo provokes is left out of the output.

    Everything the process writes (file descriptors 1 and 2: Airflow's loggers, Spark's JVM) is kept
    aside, then printed without the one record the simulated failure produces ("Task failed with
    exception" and its traceback, which ends on the simulated error): any other line, a warning
    or another failure, is printed as it was written.
    """
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile() as kept:
        os.dup2(kept.fileno(), 1)
        os.dup2(kept.fileno(), 2)
        try:
            yield
        finally:
            for stream in (sys.stdout, sys.stderr):
                stream.flush()
            for fd, original in zip((1, 2), saved, strict=True):
                os.dup2(original, fd)
                os.close(original)
            kept.seek(0)
            sys.stdout.write(without_simulated_failure(kept.read().decode(errors="replace")))
            sys.stdout.flush()


def without_simulated_failure(output: str) -> str:
    """``output`` less each record of the simulated failure: from its "Task failed with exception"
    line to the traceback's last line, the simulated error."""
    kept: list[str] = []
    record: list[str] = []
    for line in output.splitlines(keepends=True):
        if record or "Task failed with exception" in line:
            record.append(line)
            if line.strip() == f"RuntimeError: {SIMULATED_FAILURE}":
                record = []  # the whole record was the expected failure's
            continue
        kept.append(line)
    return "".join(kept + record)  # a record that did not end on it is another failure: shown


def load(name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"demo_{Path(name).stem}", EXAMPLES / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def return_value(dag_run: Any, task_id: str) -> Any:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(
            XComModel.get_many(
                run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key="return_value"
            )
        ).all()
        return XComModel.deserialize_value(rows[-1]) if rows else None


def describe(result: dict[str, Any] | None) -> str:
    if not result:
        return "no result"
    if result.get("skipped"):
        return f"nothing committed: version {result['version']} already holds this run's commit"
    from airflow_delta_provider.utils.wording import count

    return (
        f"committed version {result['version']} ({result['operation']}): {count(result['rows'], 'row')} in "
        f"{count(result['files'], 'file')}, {count(result['removed_files'], 'file')} replaced"
    )


def consumed(result: dict[str, Any] | None) -> str:
    """What a run of the incremental task consumed, from its XCom."""
    if not result:
        return "no result"
    if result.get("reason") == "already_committed":
        return (
            f"nothing consumed again: silver version {result['version']} already holds this task "
            f"instance's commit"
        )
    source = result.get("source") or {}
    versions = source.get("versions")
    if versions is None:
        return "nothing new: nothing committed"
    first = " (the table's snapshot: the first run)" if source.get("previous_cursor") is None else ""
    return (
        f"consumed events versions {versions[0]} to {versions[1]}{first}, committed as silver version "
        f"{result['version']} ({result['rows']} rows) with the cursor at {source['cursor']}"
    )


def run_failing_after_commit(dag: Any, logical_date: datetime) -> tuple[Any, list[int]]:
    """A run of ``dag``'s single task whose first try fails right after its commit landed."""
    (task,) = dag.tasks
    failures: list[int] = []

    def fail_after_commit(context: Any, result: Any) -> None:
        if context["ti"].try_number == 1:
            failures.append(result["version"])
            raise RuntimeError(SIMULATED_FAILURE)

    saved = (task._post_execute_hook, task.retry_delay)
    task._post_execute_hook, task.retry_delay = fail_after_commit, timedelta(0)
    try:
        with expected_failure_quiet():
            return dag.test(logical_date=logical_date), failures
    finally:
        task._post_execute_hook, task.retry_delay = saved


def foreign_commit(table_uri: str, day: str) -> None:
    """Another writer (delta-rs, outside Airflow) appends a day of events."""
    import deltalake
    import pyarrow as pa

    rows = pa.table(
        {
            "event_id": pa.array(range(4), pa.int64()),
            "user_id": pa.array([1, 2, 3, 4], pa.int32()),
            "page": ["home", "cart", "home", "search"],
            "clicks": pa.array([1, 2, 3, 4], pa.int32()),
            "ds": [day] * 4,
        }
    )
    deltalake.write_deltalake(table_uri, rows, mode="append", partition_by=["ds"])


def print_history(table_uri: str, title: str) -> None:
    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.core.log import commit_counts

    print(f"\n{title}")
    table = DeltaTable(table_uri)
    for entry in table.history():
        counts = commit_counts(table.storage, entry)  # Delta's, delta-rs's or no metrics alike
        rows = "" if counts["rows_added"] is None else f"+{counts['rows_added']} rows"  # VACUUM: none
        tags = entry.get("tags") or {}
        day = tags.get("airflow.logical_date", "")[:10]
        print(
            f"  version {entry['version']:>2}  {entry.get('operation', '?'):<24} "
            f"{'run ' + day if day else '':<15} {rows:<10} "
            f"-{counts['files_removed'] or 0} files  try {tags.get('airflow.try_number', '-')}"
        )


def leave_orphan(table_uri: str) -> str:
    """What a Spark attempt killed before its commit leaves: a data file no version references."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_delta_provider.core import DeltaTable

    root = Path(DeltaTable(table_uri).storage.root)
    orphan = root / "airflow" / "killed-attempt" / "ds=2026-11-02" / "part-00000.parquet"
    orphan.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"event_id": [1]}), orphan)
    return str(orphan.relative_to(root))


def copy_of(table_uri: str) -> str:
    """A copy of the table (its log and files, modification times kept) beside it under .demo/."""
    from airflow_delta_provider.core import DeltaTable

    source = Path(DeltaTable(table_uri).storage.root)
    copy = source.with_name(f"{source.name}_a_month_later")
    shutil.copytree(source, copy)
    return str(copy)


def later_maintenance(table_uri: str) -> None:
    """The maintenance steps under the demo's clock: what the nightly DAG does once retention has passed."""
    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.utils.wording import count

    table = DeltaTable(table_uri)
    print(f"\n== maintenance later (the demo's clock), on a copy: {table_uri} ==")
    checkpoint = table.checkpoint()
    print(f"  checkpoint written at version {checkpoint.version}: {count(len(checkpoint.files), 'file')}")
    month, week = (datetime.now(UTC) + timedelta(days=days) for days in (31, 8))
    cleanup = table.cleanup_logs(now=month)
    orphan = leave_orphan(table_uri)
    vacuum = table.vacuum(now=week)
    for line in (
        f"{month.date()} (log retention 30 days passed): deleted "
        f"{count(cleanup.num_files, 'expired log file')}; earliest retained version "
        f"{cleanup.earliest_retained_version}",
        f"a killed Spark attempt left {orphan}, which no version references",
        f"{week.date()} (deleted-file retention 7 days passed): VACUUM removed "
        f"{count(vacuum.num_files, 'data file')} no version needs ({count(vacuum.num_bytes, 'byte')})",
    ):
        print(f"  {line}")


def main() -> None:
    prepare_environment()
    from airflow.utils import db

    print(f"Airflow home and tables under {DEMO}")
    db.initdb()
    ingest = load("daily_ingest.py")
    table_uri = ingest.EVENTS_TABLE

    print("\n== delta_daily_ingest ==")
    for day in [*DAYS, DAYS[1]]:
        dag_run = ingest.dag.test(logical_date=day)
        print(f"  {day.date()}: run {dag_run.state}; {describe(return_value(dag_run, 'ingest_events'))}")

    dag_run, failures = run_failing_after_commit(ingest.dag, FAILING_DAY)
    failing_run_id = dag_run.run_id
    print(
        f"  {FAILING_DAY.date()}: try 1 committed version {failures[0] if failures else '?'} and then "
        f"failed, as the demo makes it (a worker lost after the commit); Airflow retried it. The "
        f"retry: {describe(return_value(dag_run, 'ingest_events'))}; run {dag_run.state}"
    )

    print("\n== delta_events_downstream (scheduled on the table's asset) ==")
    downstream = load("downstream.py")
    dag_run = downstream.downstream_dag.test()
    summary = return_value(dag_run, "report_new_version") or {}
    print(f"  run {dag_run.state}; saw version {summary.get('version')} with {summary.get('rows')} rows")

    print("\n== delta_events_silver (source=events: each new version consumed exactly once) ==")
    silver = load("silver.py")
    for label in ("first run", "the same run again"):
        dag_run = silver.dag.test(logical_date=SILVER_RUNS[0])
        print(f"  {label}: run {dag_run.state}; {consumed(return_value(dag_run, 'build_silver'))}")

    print("\n== delta_events_wait_for_version (deferrable DeltaTableVersionSensor) ==")
    from airflow_delta_provider.core import DeltaTable

    after = DeltaTable(table_uri).version()
    writer = threading.Timer(5.0, foreign_commit, args=(table_uri, "2026-11-05"))
    writer.start()
    print(f"  waiting for a version after {after}; delta-rs commits day 2026-11-05 in 5 seconds")
    started = time.monotonic()
    dag_run = downstream.wait_dag.test(run_conf={"after_version": after})
    writer.join()
    found = return_value(dag_run, "summarize_new_version") or {}
    print(
        f"  the sensor deferred, its trigger polled, and it resumed after "
        f"{time.monotonic() - started:.0f} s: run {dag_run.state}; found version {found.get('version')} "
        f"({found.get('rows')} rows), announced as an event of the events asset"
    )
    silver_after_sensor(silver)

    print("\n== delta_nightly_maintenance ==")
    try:
        maintenance = load("nightly_maintenance.py")
        dag_run = maintenance.dag.test()
        report = return_value(dag_run, "report")
        print(f"  run {dag_run.state}; {report if report is not None else 'no report'}")
    except Exception as err:  # the demo still shows the table
        print(f"  could not run: {err}")

    print_history(table_uri, "History (newest first):")
    # A month of maintenance cuts the log down to the versions since its checkpoint; the copy takes
    # it, so the table keeps every commit for the History view the last lines point at.
    later = copy_of(table_uri)
    later_maintenance(later)
    print_history(later, "History of the copy after it (the expired commits are gone; newest first):")
    erase_a_customer()
    partitions_demo(load, return_value)

    table = DeltaTable(table_uri)
    snapshot = table.snapshot()
    print(f"\nTable {table.uri} at version {snapshot.version}, partitioned by {snapshot.partition_columns}")
    rows = snapshot.to_pyarrow_table(columns=["ds", "clicks"])
    per_day = rows.group_by("ds").aggregate([("clicks", "count"), ("clicks", "sum")]).sort_by("ds")
    print(f"Rows: {rows.num_rows}")
    for day, count, clicks in zip(
        per_day.column("ds").to_pylist(),
        per_day.column("clicks_count").to_pylist(),
        per_day.column("clicks_sum").to_pylist(),
        strict=True,
    ):
        print(f"  ds={day}: {count} rows, {clicks} clicks")
    # Last, as it undoes the later days: the History view then shows the RESTORE on top.
    roll_back(table_uri, bad_run_id=failing_run_id)
    where_to_look(table.uri)


def silver_after_sensor(silver: Any) -> None:
    """The silver DAG on the version delta-rs wrote: consumed once, though its first try fails after
    the commit; then the silver totals against the events table's."""
    print("\n== delta_events_silver on the version the sensor found ==")
    dag_run, failures = run_failing_after_commit(silver.dag, SILVER_RUNS[1])
    print(
        f"  try 1 committed silver version {failures[0] if failures else '?'} and then failed, as the "
        f"demo makes it; Airflow retried it. The retry: {consumed(return_value(dag_run, 'build_silver'))}; "
        f"run {dag_run.state}"
    )
    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.plugins.tables import consumer_cursors

    for cursor in consumer_cursors(DeltaTable(silver.SILVER_TABLE).snapshot()):
        print(
            f"  cursor in the silver table's log (a txn): {cursor['consumer']} consumed events up to "
            f"version {cursor['version']} (appId {cursor['app_id']})"
        )
    expected, found = (
        silver.totals(silver.EVENTS_TABLE, signed=False),
        silver.totals(silver.SILVER_TABLE, signed=True),
    )
    print(
        f"  silver totals per day and user {'equal' if found == expected else 'DIFFER FROM'} the events "
        f"table's ({len(found)} day-user pairs, {sum(e for e, _ in found.values())} events, "
        f"{sum(c for _, c in found.values())} clicks): each version consumed exactly once"
    )
    if found != expected:
        raise SystemExit(f"silver {found} != events {expected}")


def customer_rows_on_disk(root: Path, customer: int) -> int:
    """Rows of ``customer`` in every Parquet file under ``root``, read as stored (no log applied)."""
    import pyarrow.parquet as pq

    return sum(
        pq.read_table(path, columns=["customer_id"]).column("customer_id").to_pylist().count(customer)
        for path in root.rglob("*.parquet")
    )


def erase_a_customer() -> None:
    """The GDPR erasure example on an orders table with deletion vectors, whose removed files'
    retention is zero (so this run's VACUUM may delete them): the customer's rows before and after."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_delta_provider.core import DeltaTable

    print("\n== delta_erase_customer (DELETE, then PURGE and VACUUM as one maintenance step) ==")
    erase = load("erase_customer.py")
    root = Path(erase.ORDERS)
    table = DeltaTable.create(
        str(root),
        pa.schema([("customer_id", pa.int64()), ("amount", pa.int64())]),
        properties={
            "delta.enableDeletionVectors": "true",
            "delta.deletedFileRetentionDuration": "interval 0 hours",
        },
    )
    for n in range(2):
        pq.write_table(
            pa.table({"customer_id": [1, 2, 3, 4, 5] * 2, "amount": list(range(n * 10, n * 10 + 10))}),
            root / f"part-{n}.parquet",
        )
        table.commit_files([f"part-{n}.parquet"])
    before = customer_rows_on_disk(root, 2)
    dag_run = erase.dag.test(run_conf={"customer_id": 2})
    report = return_value(dag_run, "report") or {}
    print(
        f"  run {dag_run.state}; version {report.get('deleted_at_version')} deleted "
        f"{report.get('deleted_rows')} row(s) of customer 2 ({report.get('mode')}); PURGE rewrote "
        f"{report.get('purged_files')} file(s), VACUUM removed {report.get('vacuumed_files')}"
    )
    print(
        f"  customer 2's rows in the files under {root}: {before} before, "
        f"{customer_rows_on_disk(root, 2)} after; in the table: "
        f"{DeltaTable(str(root)).snapshot().to_pyarrow_table().column('customer_id').to_pylist().count(2)}"
    )


def roll_back(table_uri: str, bad_run_id: str) -> None:
    """The rollback example: undo the failing day's run, and every commit after it, in one RESTORE."""
    from airflow_delta_provider.core import DeltaTable

    print(f"\n== delta_rollback (RESTORE to before run {bad_run_id}) ==")
    rollback = load("rollback.py")
    rows_before = DeltaTable(table_uri).snapshot().to_pyarrow_table(columns=["ds"])
    dag_run = rollback.dag.test(run_conf={"bad_run_id": bad_run_id})
    result = return_value(dag_run, "restore_before_bad_run") or {}
    rows_after = DeltaTable(table_uri).snapshot().to_pyarrow_table(columns=["ds"])
    print(
        f"  run {dag_run.state}; version {result.get('version')} restored version "
        f"{result.get('restored_version')} ({result.get('num_restored_files')} file(s) restored, "
        f"{result.get('num_removed_files')} removed): {rows_before.num_rows} rows -> {rows_after.num_rows}, "
        f"days {sorted(set(rows_after.column('ds').to_pylist()))}"
    )


def where_to_look(table_uri: str) -> None:
    """The last lines: how to see the same history, health and maintenance in Airflow's UI."""
    home = DEMO / "airflow"
    print(
        f"\nSee it in Airflow's UI (the provider's Delta view, docs/ui.md):\n"
        f"  AIRFLOW_HOME={home} {Path(sys.executable).parent / 'airflow'} api-server --port 8080\n"
        f"  then open http://localhost:8080/plugin/delta-tables (user admin; the password is in "
        f"{home / 'simple_auth_manager_passwords.json.generated'})\n"
        f"  and pick the asset {table_uri}: History (each version, the run and try that wrote it, "
        f"the skipped re-run, the RESTORE), Health (files, sizes, VACUUM dry run), Maintenance (checkpoint, "
        f"cleanup, VACUUM and when each is next due); the asset of events_silver shows, under Health, "
        f"its consumer cursor on the events table."
    )


if __name__ == "__main__":
    main()
