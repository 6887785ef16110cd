"""Fixtures shared by the unit tests: a task's context (the local SparkSession, ``local_spark``,
is in ``tests/conftest.py``, shared with the differential tests)."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable


@pytest.fixture
def task_context() -> Callable[..., dict[str, Any]]:
    """Build the context of one try of a task instance: the Task SDK's own ``RuntimeTaskInstance``
    with the fields the scheduler sets, the task, and outlet event accessors; ``extra`` is merged in
    (``params=...``, ``logical_date=...``)."""
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    def make(
        op: Any,
        *,
        dag_id: str = "d",
        run_id: str = "manual__1",
        try_number: int = 1,
        max_tries: int = 0,
        **extra: Any,
    ) -> dict[str, Any]:
        ti = RuntimeTaskInstance.model_construct(
            id=uuid.uuid4(),
            dag_id=dag_id,
            task_id=op.task_id,
            run_id=run_id,
            map_index=-1,
            try_number=try_number,
            max_tries=max_tries,
            task=op,
        )
        return {"ti": ti, "task": op, "outlet_events": OutletEventAccessors(), **extra}

    return make
