"""The Delta log core: a pure-Python Delta Lake implementation on pyarrow and fsspec.

It never imports Airflow or PySpark; use it from any Python process::

    from airflow_delta_provider.core import DeltaTable

    snapshot = DeltaTable("s3://bucket/events").snapshot()

The error classes are imported with the package; the other public names (``DeltaTable``,
``Snapshot`` and the operations' results) are imported on first use (PEP 562), so that a
process importing one module of the core (``core.paths``, ``core.snapshot``, the Airflow
hook, sensor or trigger) does not pay for the writers, OPTIMIZE, VACUUM and pyarrow it does
not use. ``from airflow_delta_provider.core import DeltaTable`` works as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import *  # noqa: F403
from airflow_delta_provider.core.errors import __all__ as _errors_all
from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    # The same names, for type checkers and for tests/test_architecture.py, which reads these
    # imports as the package's edges of the import graph (every entry of _LAZY is one of them).
    from airflow_delta_provider.core.lifecycle.restore import RestoreResult
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.maintenance.checkpoint import CheckpointResult
    from airflow_delta_provider.core.maintenance.cleanup import CleanupResult
    from airflow_delta_provider.core.maintenance.vacuum import VacuumResult
    from airflow_delta_provider.core.table.delta_table import DeltaTable
    from airflow_delta_provider.core.transaction.commit_plan import CommitResult

#: Public name -> the module defining it, imported when the name is first asked for.
_LAZY = {
    "CheckpointResult": "airflow_delta_provider.core.maintenance.checkpoint",
    "CleanupResult": "airflow_delta_provider.core.maintenance.cleanup",
    "CommitResult": "airflow_delta_provider.core.transaction.commit_plan",
    "RestoreResult": "airflow_delta_provider.core.lifecycle.restore",
    "DeltaTable": "airflow_delta_provider.core.table.delta_table",
    "Snapshot": "airflow_delta_provider.core.log.snapshot",
    "VacuumResult": "airflow_delta_provider.core.maintenance.vacuum",
}

__all__ = [
    "CheckpointResult",
    "CleanupResult",
    "CommitResult",
    "DeltaTable",
    "RestoreResult",
    "Snapshot",
    "VacuumResult",
    *_errors_all,
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
