"""The data's lifecycle: DELETE (:mod:`.delete`: whole files, deletion vectors or copy-on-write,
planned in :mod:`.delete_plan` from the rows a predicate selects, :mod:`.delete_rows`),
RESTORE to a version, a time or before a run (:mod:`.restore`), REORG PURGE of deleted rows
and dropped columns (:mod:`.purge`), and data retention policies run as DELETEs
(:mod:`.data_retention`). Each commits through the transaction, with Delta's metrics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.lifecycle.data_retention import (
        DataRetentionDecision,
        DataRetentionOptions,
        DataRetentionResult,
        apply_data_retention,
        data_retention_due,
    )
    from airflow_delta_provider.core.lifecycle.delete import (
        DeleteOptions,
        DeleteResult,
        RowMatcher,
        check_predicate_text,
    )
    from airflow_delta_provider.core.lifecycle.delete_rows import Candidates
    from airflow_delta_provider.core.lifecycle.purge import REORG, PurgeOptions, plan_purge
    from airflow_delta_provider.core.lifecycle.restore import (
        RestoreOptions,
        RestoreResult,
        TaggedCommits,
        find_tagged_commits,
        recorded_restore,
    )

_LAZY = {
    "apply_data_retention": "airflow_delta_provider.core.lifecycle.data_retention",
    "Candidates": "airflow_delta_provider.core.lifecycle.delete_rows",
    "check_predicate_text": "airflow_delta_provider.core.lifecycle.delete",
    "data_retention_due": "airflow_delta_provider.core.lifecycle.data_retention",
    "DataRetentionDecision": "airflow_delta_provider.core.lifecycle.data_retention",
    "DataRetentionOptions": "airflow_delta_provider.core.lifecycle.data_retention",
    "DataRetentionResult": "airflow_delta_provider.core.lifecycle.data_retention",
    "DeleteOptions": "airflow_delta_provider.core.lifecycle.delete",
    "DeleteResult": "airflow_delta_provider.core.lifecycle.delete",
    "find_tagged_commits": "airflow_delta_provider.core.lifecycle.restore",
    "plan_purge": "airflow_delta_provider.core.lifecycle.purge",
    "PurgeOptions": "airflow_delta_provider.core.lifecycle.purge",
    "recorded_restore": "airflow_delta_provider.core.lifecycle.restore",
    "REORG": "airflow_delta_provider.core.lifecycle.purge",
    "RestoreOptions": "airflow_delta_provider.core.lifecycle.restore",
    "RestoreResult": "airflow_delta_provider.core.lifecycle.restore",
    "RowMatcher": "airflow_delta_provider.core.lifecycle.delete",
    "TaggedCommits": "airflow_delta_provider.core.lifecycle.restore",
}

__all__ = [
    "REORG",
    "Candidates",
    "DataRetentionDecision",
    "DataRetentionOptions",
    "DataRetentionResult",
    "DeleteOptions",
    "DeleteResult",
    "PurgeOptions",
    "RestoreOptions",
    "RestoreResult",
    "RowMatcher",
    "TaggedCommits",
    "apply_data_retention",
    "check_predicate_text",
    "data_retention_due",
    "find_tagged_commits",
    "plan_purge",
    "recorded_restore",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
