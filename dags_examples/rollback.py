"""Roll the ``events`` table back to before a bad run, in one Delta ``RESTORE`` commit.

Trigger it by hand with the run to undo, e.g. ``{"bad_run_id": "scheduled__2026-11-03T00:00:00+00:00"}``
(the Delta view's history shows each run's restore target). The table comes back to the version before
that run's first commit to it; every commit after it, of any run, is undone too. Nothing is deleted
from storage: the removed files stay until VACUUM, so a rollback can itself be rolled back.

Refused, with nothing committed: a run that never wrote the table, a version whose files VACUUM
already deleted (the error names them), one older than the table's ``delta.deletedFileRetentionDuration``.
A retry after the restore landed commits nothing.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Param

from airflow_delta_provider.operators.restore import DeltaRestoreOperator

#: Where the example DAGs keep their tables.
DEMO_ROOT = Path(os.environ.get("DELTA_DEMO_ROOT", Path(__file__).resolve().parent.parent / ".demo"))
#: The table ``daily_ingest.py`` writes.
EVENTS_TABLE = os.environ.get("DELTA_EVENTS_TABLE", str(DEMO_ROOT / "events"))

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
