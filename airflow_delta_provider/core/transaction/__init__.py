"""The transaction: every change to a table is one commit of a plan. An operation builds a
:class:`CommitPlan` (what it changes, what it read; :mod:`.commit_plan`);
:mod:`.commit` commits it (validation, put-if-absent, Delta's conflict rules in
:mod:`.conflicts`, retries, txn ids, ``.crc``), exactly once per ``(appId, version)``
(:mod:`.idempotency`). CREATE TABLE (:mod:`.create`) and commits of existing Parquet files
(:mod:`.write`, files found by :mod:`.datafiles`) are its first two operations.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.transaction.commit import (
        LandedCommit,
        OptimisticTransaction,
        PostCommitHook,
    )
    from airflow_delta_provider.core.transaction.commit_plan import (
        DEFAULT_MAX_ATTEMPTS,
        NO_FILES,
        CommitPlan,
        CommitProperties,
        CommitResult,
        CursorAdvance,
        ReadSet,
    )
    from airflow_delta_provider.core.transaction.create import (
        CreateMode,
        CreateOptions,
        create_table,
        remove_actions,
    )
    from airflow_delta_provider.core.transaction.datafiles import (
        DataFile,
        collect_files,
        is_hidden,
        relative_path,
    )
    from airflow_delta_provider.core.transaction.idempotency import already_committed
    from airflow_delta_provider.core.transaction.write import CommitOptions, WriteMode, commit_files

_LAZY = {
    "already_committed": "airflow_delta_provider.core.transaction.idempotency",
    "collect_files": "airflow_delta_provider.core.transaction.datafiles",
    "commit_files": "airflow_delta_provider.core.transaction.write",
    "CommitOptions": "airflow_delta_provider.core.transaction.write",
    "CommitPlan": "airflow_delta_provider.core.transaction.commit_plan",
    "CommitProperties": "airflow_delta_provider.core.transaction.commit_plan",
    "CommitResult": "airflow_delta_provider.core.transaction.commit_plan",
    "create_table": "airflow_delta_provider.core.transaction.create",
    "CreateMode": "airflow_delta_provider.core.transaction.create",
    "CreateOptions": "airflow_delta_provider.core.transaction.create",
    "CursorAdvance": "airflow_delta_provider.core.transaction.commit_plan",
    "DataFile": "airflow_delta_provider.core.transaction.datafiles",
    "DEFAULT_MAX_ATTEMPTS": "airflow_delta_provider.core.transaction.commit_plan",
    "is_hidden": "airflow_delta_provider.core.transaction.datafiles",
    "LandedCommit": "airflow_delta_provider.core.transaction.commit",
    "NO_FILES": "airflow_delta_provider.core.transaction.commit_plan",
    "OptimisticTransaction": "airflow_delta_provider.core.transaction.commit",
    "PostCommitHook": "airflow_delta_provider.core.transaction.commit",
    "ReadSet": "airflow_delta_provider.core.transaction.commit_plan",
    "relative_path": "airflow_delta_provider.core.transaction.datafiles",
    "remove_actions": "airflow_delta_provider.core.transaction.create",
    "WriteMode": "airflow_delta_provider.core.transaction.write",
}

__all__ = [
    "DEFAULT_MAX_ATTEMPTS",
    "NO_FILES",
    "CommitOptions",
    "CommitPlan",
    "CommitProperties",
    "CommitResult",
    "CreateMode",
    "CreateOptions",
    "CursorAdvance",
    "DataFile",
    "LandedCommit",
    "OptimisticTransaction",
    "PostCommitHook",
    "ReadSet",
    "WriteMode",
    "already_committed",
    "collect_files",
    "commit_files",
    "create_table",
    "is_hidden",
    "relative_path",
    "remove_actions",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
