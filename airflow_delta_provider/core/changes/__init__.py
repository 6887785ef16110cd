"""What changed between two versions, as Delta's Change Data Feed defines it, and a consumer's
next read of it. :mod:`.feed` reads only the commits of the range (never the table's file
list) and gives :class:`Changes`: the file-level changes at once, the changed rows on demand
(:mod:`.rows`). The range and each commit's time follow Delta Spark (:mod:`.bounds`), so do
what each commit contributes (:mod:`.derive`) and the schema the rows are read with
(:mod:`.read_schema`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.changes.bounds import ChangeRange, range_commit_files
    from airflow_delta_provider.core.changes.feed import Changes, load_changes
    from airflow_delta_provider.core.changes.read_schema import (
        CHANGE_TYPE,
        COMMIT_TIMESTAMP,
        COMMIT_VERSION,
        check_no_reserved_columns,
    )
    from airflow_delta_provider.core.changes.rows import RowScan, vanished_file_error

_LAZY = {
    "CHANGE_TYPE": "airflow_delta_provider.core.changes.read_schema",
    "ChangeRange": "airflow_delta_provider.core.changes.bounds",
    "Changes": "airflow_delta_provider.core.changes.feed",
    "check_no_reserved_columns": "airflow_delta_provider.core.changes.read_schema",
    "COMMIT_TIMESTAMP": "airflow_delta_provider.core.changes.read_schema",
    "COMMIT_VERSION": "airflow_delta_provider.core.changes.read_schema",
    "load_changes": "airflow_delta_provider.core.changes.feed",
    "range_commit_files": "airflow_delta_provider.core.changes.bounds",
    "RowScan": "airflow_delta_provider.core.changes.rows",
    "vanished_file_error": "airflow_delta_provider.core.changes.rows",
}

__all__ = [
    "CHANGE_TYPE",
    "COMMIT_TIMESTAMP",
    "COMMIT_VERSION",
    "ChangeRange",
    "Changes",
    "RowScan",
    "check_no_reserved_columns",
    "load_changes",
    "range_commit_files",
    "vanished_file_error",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
