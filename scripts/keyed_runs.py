"""Test runs of partitioned DAGs: ``dag.test()`` with a partition key, for the demo and the tests.

Airflow (3.2+) gives a run a ``partition_key`` when its scheduler, a backfill or the REST API
creates it; ``dag.test()`` takes no key and creates its run without one. :func:`keyed_test` gives
the run ``dag.test()`` creates the key (and its partition date) before any task runs, so the tasks
see what a scheduled run of that partition sees: ``dag_run.partition_key``, the context's
``partition_key`` (3.3), and asset events carrying the key.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator
    from datetime import datetime


@contextmanager
def runs_keyed(key: str, partition_date: datetime | None = None) -> Iterator[None]:
    """Within the block, the run ``dag.test()`` creates carries ``key``."""
    import airflow.models.dagrun as dagrun_module

    create = dagrun_module.get_or_create_dagrun

    def keyed(**kwargs: Any) -> Any:
        run = create(**kwargs)
        run.partition_key, run.partition_date = key, partition_date
        kwargs["session"].commit()
        return run

    dagrun_module.get_or_create_dagrun = keyed
    try:
        yield
    finally:
        dagrun_module.get_or_create_dagrun = create


def keyed_test(dag: Any, key: str, **kwargs: Any) -> Any:
    """``dag.test(**kwargs)`` as a run of partition ``key`` (no logical date, as a partitioned run)."""
    kwargs.setdefault("logical_date", None)
    with runs_keyed(key):
        return dag.test(**kwargs)
