"""The Delta log core: a pure-Python Delta Lake implementation on pyarrow and fsspec.

It never imports Airflow or PySpark; use it from any Python process::

    from airflow_delta_provider.core import DeltaTable

    snapshot = DeltaTable("s3://bucket/events").snapshot()
"""

from airflow_delta_provider.core.checkpoint import CheckpointResult
from airflow_delta_provider.core.cleanup import CleanupResult
from airflow_delta_provider.core.errors import *  # noqa: F403
from airflow_delta_provider.core.errors import __all__ as _errors_all
from airflow_delta_provider.core.snapshot import Snapshot
from airflow_delta_provider.core.table import DeltaTable
from airflow_delta_provider.core.transaction import CommitResult
from airflow_delta_provider.core.vacuum import VacuumResult

__all__ = [
    "CheckpointResult",
    "CleanupResult",
    "CommitResult",
    "DeltaTable",
    "Snapshot",
    "VacuumResult",
    *_errors_all,
]
