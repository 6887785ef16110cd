"""Roll the ``events`` table back to before a bad run, in one Delta ``RESTORE`` commit.

Trigger it by hand with the run to undo, e.g. ``{"bad_run_id": "scheduled__2026-11-03T00:00:00+00:00"}``
(the Delta view's history shows each run's restore target). The table comes back to the version before
that run's first commit to it; every commit after it, of any run, is undone too. Nothing is deleted
from storage: the removed files stay until VACUUM, so a rollback can itself be rolled back.

Refused, with nothing committed: a run that never wrote the table, a version whose files VACUUM
already deleted (the error names them), one older than the table's ``delta.deletedFileRetentionDuration``.
A retry after the restore landed commits nothing.

Configuration: the Airflow Variable ``delta_examples_root``, where the example DAGs keep their
tables (e.g. ``s3://lake/examples``; Admin > Variables in the UI), read when this file is parsed
because the tables are the DAGs' assets; unset, ``.demo/`` beside this folder, where ``make demo``
runs them. Object-store credentials: the workers' own, or ``storage_conn_id=`` on the tasks.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Param, Variable

from airflow_delta_provider.operators.restore import DeltaRestoreOperator

#: Where the example DAGs keep their tables (the module docstring says how to set it).
EXAMPLES_ROOT = str(
    Variable.get("delta_examples_root", default=Path(__file__).resolve().parent.parent / ".demo")
).rstrip("/")
#: The table ``daily_ingest.py`` writes.
EVENTS_TABLE = f"{EXAMPLES_ROOT}/events"

# [START howto_operator_delta_restore]
with DAG(
    dag_id="delta_rollback",
    description="Restore the events table to the version before a bad run.",
    schedule=None,
    start_date=datetime(2026, 11, 1),
    catchup=False,
    max_active_runs=1,
    params={
        "bad_run_id": Param(type="string", minLength=1, description="The run whose commits to undo."),
        "bad_dag_id": Param("delta_daily_ingest", type="string", description="The DAG of that run."),
    },
    tags=["delta", "example"],
    doc_md=__doc__,
) as dag:
    DeltaRestoreOperator(
        task_id="restore_before_bad_run",
        table_uri=EVENTS_TABLE,
        before_run_id="{{ params.bad_run_id }}",
        before_dag_id="{{ params.bad_dag_id }}",
        retries=2,
        retry_delay=timedelta(minutes=1),
    )
# [END howto_operator_delta_restore]
