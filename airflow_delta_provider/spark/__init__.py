"""The Spark adapter: read a Delta table's snapshot (or its changes) with PySpark, without Delta's jars.

It imports PySpark, never Airflow; the core imports neither. The public names are imported on
first use (PEP 562), so that :mod:`.paths`, which the Airflow operators use to hand a table to
Spark, can be imported without PySpark::

    from airflow_delta_provider.spark import read_delta

    frame = read_delta(spark, "s3://lake/events", filter="ds >= '2024-06-01'")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_delta_provider.spark.changes import read_change_set, read_changes
    from airflow_delta_provider.spark.read import read_delta, read_snapshot

#: Public name -> the module defining it, imported when the name is first asked for.
_LAZY = {
    "read_change_set": "airflow_delta_provider.spark.changes",
    "read_changes": "airflow_delta_provider.spark.changes",
    "read_delta": "airflow_delta_provider.spark.read",
    "read_snapshot": "airflow_delta_provider.spark.read",
}

__all__ = ["read_change_set", "read_changes", "read_delta", "read_snapshot"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
