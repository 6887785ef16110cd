"""Two ways to act on new versions of the ``events`` table that ``daily_ingest.py`` writes.

1. ``delta_events_downstream`` is scheduled on the table's asset (its storage URI): every commit
   of the ingest DAG emits an asset event carrying the version it committed, and the run reads
   the table *at that version*, so it reports exactly what triggered it.
2. ``delta_events_wait_for_version`` waits with ``DeltaTableVersionSensor`` in deferrable mode (the
   wait runs in the triggerer, no worker slot) for a commit newer than ``params.after_version``,
   whoever wrote it (Spark jobs outside Airflow included), then summarises the new version. The
   sensor announces what it found as an event of the table's asset, so the DAGs scheduled on it
   (``silver.py``) run for versions written outside Airflow too.

Configuration: the Airflow Variable ``delta_examples_root``, where the example DAGs keep their
tables (e.g. ``s3://lake/examples``; Admin > Variables in the UI), read when this file is parsed
because the tables are the DAGs' assets; unset, ``.demo/`` beside this folder, where ``make demo``
runs them. Object-store credentials: the workers' own, or ``storage_conn_id=`` on the tasks.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, Variable, task

from airflow_delta_provider.assets.delta import delta_table_asset
from airflow_delta_provider.sensors.delta import DeltaTableVersionSensor

#: Where the example DAGs keep their tables (the module docstring says how to set it).
EXAMPLES_ROOT = str(
    Variable.get("delta_examples_root", default=Path(__file__).resolve().parent.parent / ".demo")
).rstrip("/")
EVENTS_TABLE = f"{EXAMPLES_ROOT}/events"
#: The same asset the ingest task emits events for: ``Asset(uri=<the table's storage URI>)``.
EVENTS = delta_table_asset(EVENTS_TABLE)


def summarize_version(table_uri: str, version: int) -> dict[str, Any]:
    """Rows and clicks per day of the table at ``version`` (read with the provider's core)."""
    import pyarrow.compute as pc

    from airflow_delta_provider.core import DeltaTable

    rows = DeltaTable(table_uri).snapshot(version=version).to_pyarrow_table(columns=["ds", "clicks"])
    per_day = rows.group_by("ds").aggregate([("clicks", "count"), ("clicks", "sum")]).sort_by("ds")
    return {
        "version": version,
        "rows": rows.num_rows,
        "clicks": pc.sum(rows.column("clicks")).as_py() or 0,
        "per_day": {
            day: {"rows": count, "clicks": clicks}
            for day, count, clicks in zip(
                per_day.column("ds").to_pylist(),
                per_day.column("clicks_count").to_pylist(),
                per_day.column("clicks_sum").to_pylist(),
                strict=True,
            )
        },
    }


# [START howto_asset_scheduled_delta]
with DAG(
    dag_id="delta_events_downstream",
    description="Runs on every commit to the events table; reports the committed version.",
    schedule=[EVENTS],
    start_date=datetime(2026, 11, 1),
    catchup=False,
    tags=["delta", "example"],
    doc_md=__doc__,
) as downstream_dag:

    @task(inlets=[EVENTS])
    def report_new_version(triggering_asset_events: Any = None, inlet_events: Any = None) -> dict[str, Any]:
        """The version from the event that triggered the run (else the table's latest event)."""
        events = list(triggering_asset_events[EVENTS]) if triggering_asset_events else []
        if not events:
            events = list(inlet_events[EVENTS])
        if not events:
            raise ValueError(f"No asset event for {EVENTS.uri} yet; run delta_daily_ingest first.")
        extra = events[-1].extra
        # An event from an AssetWatcher holds the trigger's payload; one from a commit, the commit.
        version = extra["payload"]["version"] if "payload" in extra else extra["version"]
        summary = summarize_version(EVENTS_TABLE, int(version))
        print(f"{EVENTS.uri} version {version}: {summary['rows']} rows, per day {summary['per_day']}")
        return summary

    report_new_version()
# [END howto_asset_scheduled_delta]


# [START howto_sensor_delta_version_deferrable]
with DAG(
    dag_id="delta_events_wait_for_version",
    description="Waits (deferred) for a commit newer than params.after_version, then summarises it.",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    catchup=False,
    params={"after_version": Param(-1, type="integer", description="Wait for a version after this.")},
    render_template_as_native_obj=True,
    tags=["delta", "example"],
    doc_md=__doc__,
) as wait_dag:
    wait = DeltaTableVersionSensor(
        task_id="wait_for_new_version",
        table_uri=EVENTS_TABLE,
        after_version="{{ params.after_version }}",
        deferrable=True,
        poke_interval=5,
        timeout=60 * 60,
        # The table's asset event then says which versions were found (from_version, to_version),
        # which schedules the DAGs on the asset (silver.py) for versions written outside Airflow.
        outlets=[EVENTS],
    )

    @task
    def summarize_new_version(ti: Any = None) -> dict[str, Any]:
        found = ti.xcom_pull(task_ids="wait_for_new_version")
        version = found["version"] if isinstance(found, dict) else int(found)
        return summarize_version(EVENTS_TABLE, version)

    wait >> summarize_new_version()
# [END howto_sensor_delta_version_deferrable]
