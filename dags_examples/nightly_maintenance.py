"""Nightly maintenance of several Delta tables: data retention, PURGE, OPTIMIZE, checkpoint, expired-log
cleanup and VACUUM when due.

Which tables: the Airflow Variable ``delta_maintenance_tables`` (a JSON list of table URIs), or,
when it is unset, every Delta table directly under ``delta_examples_root`` (below), so ``make demo``
maintains the tables the other example DAGs wrote.

A table that carries a data retention policy (its ``airflow.dataRetention`` property, e.g.
``{"column": "ds", "keep": "interval 90 days"}``) loses its rows older than that each night; a run that
would delete more than half of a table's rows is refused for that table. Files whose rows deletion
vectors delete are purged, so VACUUM can remove those rows' bytes once the retention has passed.

Trigger with ``{"dry_run": true}`` to see what would be done without writing or deleting anything.
The per-table report is in the ``maintenance_report`` XCom of ``maintain_tables`` and in the log of
``report``, which runs even when some tables failed.

Configuration: the Airflow Variable ``delta_examples_root``, where the example DAGs keep their
tables (e.g. ``s3://lake/examples``; Admin > Variables in the UI); unset, ``.demo/`` beside this
folder, where ``make demo`` runs them; and ``delta_maintenance_tables`` above. Both are read when
the run starts. Object-store credentials: the workers' own, or ``storage_conn_id=`` on the task.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

# Airflow 3.1 has them in airflow.exceptions, 3.2+ in airflow.sdk.exceptions: the compat provider picks.
from airflow.providers.common.compat.sdk import AirflowFailException, AirflowSkipException
from airflow.sdk import DAG, Param, Variable, task

from airflow_delta_provider.operators.maintenance import DeltaMaintenanceOperator

#: The Variable naming where the example DAGs keep their tables, and where they are when it is unset.
ROOT_VARIABLE = "delta_examples_root"
DEFAULT_ROOT = str(Path(__file__).resolve().parent.parent / ".demo")
#: The Variable holding the tables to maintain (a JSON list of URIs).
TABLES_VARIABLE = "delta_maintenance_tables"

# [START howto_operator_delta_maintenance]
with DAG(
    dag_id="delta_nightly_maintenance",
    description="Apply data retention, purge, compact, checkpoint, clean up logs and VACUUM Delta tables.",
    schedule="0 3 * * *",
    start_date=datetime(2026, 1, 1),
    catchup=False,
    # Two runs of maintenance on the same tables would only race each other. No retries: a failed
    # table is reported by name, and the next night's run tries it again.
    max_active_runs=1,
    params={
        "dry_run": Param(False, type="boolean", description="Report what would be done; change nothing."),
        "optimize_min_files": Param(
            50, type="integer", minimum=1, description="Small files before a table is compacted (OPTIMIZE)."
        ),
        "vacuum_retention": Param(
            None,
            type=["null", "string"],
            description="Override the tables' deleted-file retention, e.g. 'interval 14 days'.",
        ),
    },
    render_template_as_native_obj=True,
    tags=["delta", "maintenance", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def tables_to_maintain() -> list[str]:
        """The Variable's tables, else the Delta tables under the examples' root (read at run time)."""
        from fsspec.core import url_to_fs

        configured = Variable.get(TABLES_VARIABLE, default=None, deserialize_json=True)
        if configured:
            return list(configured)
        root = str(Variable.get(ROOT_VARIABLE, default=DEFAULT_ROOT)).rstrip("/")
        filesystem, path = url_to_fs(root)
        found = sorted(
            f"{root}/{log.rstrip('/').split('/')[-2]}"
            for log in filesystem.glob(f"{path}/*/_delta_log")
            if filesystem.isdir(log)
        )
        if not found:
            raise AirflowSkipException(
                f"No Variable {TABLES_VARIABLE!r} and no Delta table under {root}; nothing to maintain."
            )
        return found

    maintain = DeltaMaintenanceOperator(
        task_id="maintain_tables",
        tables=tables_to_maintain(),
        # PURGE and OPTIMIZE run in the worker (pyarrow); for big tables schedule DeltaOptimizeOperator
        # (purge=True for PURGE) on Spark.
        run_purge=True,
        run_optimize=True,
        optimize_min_files="{{ params.optimize_min_files }}",
        vacuum_interval="interval 7 days",
        vacuum_retention="{{ params.vacuum_retention }}",
        dry_run="{{ params.dry_run }}",
    )

    @task(trigger_rule="all_done")
    def report(ti: Any = None) -> dict[str, Any] | None:
        """Log one line per table; runs when some tables failed too, so the report is never lost.

        It fails when a table failed: as the DAG's last task it decides the run's state, and a night
        with a failed table must not show green.
        """
        result = ti.xcom_pull(task_ids="maintain_tables", key="maintenance_report")
        if not result:
            return None
        for entry in result["tables"]:
            steps = ", ".join(f"{name} {step['status']}" for name, step in entry["steps"].items())
            print(
                f"{entry['table']}: {entry['status']} ({steps}); {entry['rows_deleted']} row(s) past the "
                f"retention deleted, {entry['files_purged']} file(s) purged, {entry['files_compacted']} "
                f"small file(s) compacted into {entry['files_written']}, {entry['files_removed']} data "
                f"file(s) and {entry['log_files_removed']} log file(s) removed, {entry['bytes_removed']} "
                f"bytes; versions retained: {entry['versions_retained']}"
            )
        if result["failed"]:
            raise AirflowFailException(f"Maintenance failed for: {', '.join(result['failed'])}.")
        return result["totals"]

    maintain >> report()
# [END howto_operator_delta_maintenance]
