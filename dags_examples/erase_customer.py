"""Erase one customer's rows from a Delta table on request (a GDPR erasure), exactly once per run.

Trigger with ``{"customer_id": 42}``. The DELETE marks the rows in deletion vectors when the table
enables them (``delta.enableDeletionVectors``), else rewrites the files holding them; either way the
rows are gone for every reader at the committed version. The bytes stay in older files until they
are rewritten without them and VACUUM removes those files after the table's retention.

A run without a customer fails before anything is written: the predicate renders to
``customer_id = None``, which is no condition, and a blank predicate is refused too, so a missing
parameter can never empty the table. The ``erase`` task's XCom holds Delta's DELETE metrics.
"""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any

from airflow.sdk import DAG, Param, task

from airflow_delta_provider.operators.delete import DeltaDeleteOperator

#: Where the example DAGs keep their tables.
DEMO_ROOT = Path(os.environ.get("DELTA_DEMO_ROOT", Path(__file__).resolve().parent.parent / ".demo"))
#: The table to erase from (a literal location: the task's asset is known when the DAG is parsed).
ORDERS = os.environ.get("DELTA_ORDERS_TABLE", str(DEMO_ROOT / "orders"))

# [START howto_operator_delta_delete]
with DAG(
    dag_id="delta_erase_customer",
    description="Delete one customer's rows from a Delta table, once per request.",
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

    @task
    def report(result: dict[str, Any]) -> dict[str, Any]:
        """One line for the audit trail: which version erased how many rows, and how."""
        rows = result["num_deleted_rows"]
        print(
            f"{result['table_uri']}: version {result['version']} ({result['reason'] or result['mode']}): "
            f"{'an unknown number of' if rows is None else rows} row(s) of customer deleted, "
            f"{result['num_removed_files']} file(s) removed, "
            f"{result['num_deletion_vectors_added']} deletion vector(s) written."
        )
        return {"version": result["version"], "deleted_rows": rows, "committed": result["committed"]}

    report(erase.output)
# [END howto_operator_delta_delete]
