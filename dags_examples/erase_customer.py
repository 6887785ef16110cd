"""Erase one customer's rows from a Delta table on request (a GDPR erasure): DELETE, PURGE, VACUUM.

Trigger with ``{"customer_id": 42}``. The sequence (``docs/lifecycle.md``, the erasure sequence):

1. ``erase``: the DELETE marks the rows in deletion vectors when the table enables them
   (``delta.enableDeletionVectors``), else rewrites the files holding them; either way the rows are
   gone for every reader at the committed version, but their bytes are still in files;
2. ``purge_and_vacuum``: one maintenance step: PURGE rewrites every file whose deletion vector
   deletes rows without them (Delta's REORG PURGE), then VACUUM deletes the files no version within
   the table's retention needs (``delta.deletedFileRetentionDuration``, default 7 days): the files
   the erasure replaced go with the first VACUUM after the retention has passed;
3. ``report``: one line for the audit trail, and when the last byte of the rows leaves storage.

A run without a customer fails before anything is written: the predicate renders to
``customer_id = None``, which is no condition, and a blank predicate is refused too, so a missing
parameter can never empty the table. For tables too big for a worker, purge on Spark with
``DeltaOptimizeOperator(purge=True)`` and vacuum with ``DeltaVacuumOperator`` instead of step 2.

Configuration: the Airflow Variable ``delta_examples_root``, where the example DAGs keep their
tables (e.g. ``s3://lake/examples``; Admin > Variables in the UI), read when this file is parsed
because the tables are the DAGs' assets; unset, ``.demo/`` beside this folder, where ``make demo``
runs them. Object-store credentials: the workers' own, or ``storage_conn_id=`` on the tasks.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, Variable, task

from airflow_delta_provider.operators.delete import DeltaDeleteOperator
from airflow_delta_provider.operators.maintenance import DeltaMaintenanceOperator

#: Where the example DAGs keep their tables (the module docstring says how to set it).
EXAMPLES_ROOT = str(
    Variable.get("delta_examples_root", default=Path(__file__).resolve().parent.parent / ".demo")
).rstrip("/")
#: The table to erase from (a literal location: the task's asset is known when the DAG is parsed).
ORDERS = f"{EXAMPLES_ROOT}/orders"

# [START howto_operator_delta_delete]
with DAG(
    dag_id="delta_erase_customer",
    description="Erase one customer's rows from a Delta table: DELETE, PURGE and VACUUM, once per request.",
    schedule=None,
    start_date=datetime(2026, 1, 1),
    catchup=False,
    params={
        "customer_id": Param(None, type=["null", "integer"], description="The customer to erase."),
    },
    tags=["delta", "delete", "example"],
    doc_md=__doc__,
) as dag:
    erase = DeltaDeleteOperator(
        task_id="erase",
        table_uri=ORDERS,
        predicate="customer_id = {{ params.customer_id }}",
        # A retry after the commit commits nothing; a re-run (a new DAG run) deletes again.
        retries=2,
    )

    # The erasure's storage side as one policy step: PURGE, then VACUUM on every run.
    purge_and_vacuum = DeltaMaintenanceOperator(
        task_id="purge_and_vacuum",
        tables=[ORDERS],
        run_data_retention=False,
        run_purge=True,
        run_checkpoint=False,
        run_cleanup=False,
        vacuum_interval=None,
    )

    @task
    def report(erased: dict[str, Any], ti: Any = None) -> dict[str, Any]:
        """The audit trail: which version erased how many rows, what PURGE rewrote, what VACUUM
        removed, and from when no file under the table's root holds the rows."""
        maintained = ti.xcom_pull(task_ids="purge_and_vacuum", key="maintenance_report")["tables"][0]
        purge = maintained["steps"]["purge"]
        vacuum = maintained["steps"]["vacuum"].get("result") or {}
        retention = timedelta(seconds=(vacuum.get("retention") or {}).get("seconds") or 0)
        # The files the erasure replaced were removed now; VACUUM deletes them once older than the
        # retention (already, when the retention is zero: this run's VACUUM did).
        gone_by = datetime.now(UTC) + retention if retention else None
        rows = erased["num_deleted_rows"]
        summary = {
            "table": erased["table_uri"],
            "deleted_at_version": erased["version"],
            "deleted_rows": rows,
            "mode": erased["mode"],
            "purged_files": maintained["files_purged"],
            "purge": purge["status"],
            "vacuumed_files": maintained["files_removed"],
            "retention_seconds": retention.total_seconds(),
            "bytes_gone_by": gone_by.isoformat(timespec="seconds") if gone_by else "now",
        }
        print(
            f"{summary['table']}: version {erased['version']} ({erased['reason'] or erased['mode']}): "
            f"{'an unknown number of' if rows is None else rows} row(s) of the customer deleted; PURGE "
            f"{purge['status']} ({summary['purged_files']} file(s) rewritten); VACUUM removed "
            f"{summary['vacuumed_files']} file(s). "
            + (
                "No file under the table's root holds the rows any more."
                if gone_by is None
                else f"The files the erasure replaced are deleted by the first VACUUM after "
                f"{summary['bytes_gone_by']} (delta.deletedFileRetentionDuration)."
            )
        )
        return summary

    report(erase.output) << purge_and_vacuum
    erase >> purge_and_vacuum
# [END howto_operator_delta_delete]
