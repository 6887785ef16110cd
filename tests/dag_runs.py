"""Reading what a finished ``dag.test()`` run left in the metadata DB (the system tier's helpers)."""

from __future__ import annotations

from typing import Any


def xcom(dag_run: Any, task_id: str) -> Any:
    """The return value a task of a finished run pushed, read from the metadata DB."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.scalars(
            XComModel.get_many(
                run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key="return_value"
            )
        ).all()
        return XComModel.deserialize_value(rows[-1]) if rows else None
