"""A table as a whole: :class:`DeltaTable`, the one entry point (:mod:`.delta_table`: it opens
snapshots, hands options through and wires the post-commit checkpoint and cleanup), and the
questions asked of a table over time by Airflow's sensors, triggers and maintenance steps:
cheap polling for new commits (:mod:`.watch`), a consumer's next exactly-once read of a source
table's changes (:mod:`.consumer`), and whether each maintenance step is due
(:mod:`.maintenance_due`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.table.consumer import (
        ConsumerPartition,
        SourceRead,
        StartingVersion,
        commit_time,
        consumer_app_id,
        consumer_partition,
        parse_consumer_app_id,
        plan_read,
    )
    from airflow_delta_provider.core.table.delta_table import DeltaTable
    from airflow_delta_provider.core.table.maintenance_due import (
        DEFAULT_OPTIMIZE_MIN_FILES,
        DEFAULT_VACUUM_INTERVAL,
        OptimizeDecision,
        PurgeDecision,
        checkpoint_due,
        cleanup_due,
        optimize_due,
        purge_due,
        vacuum_due,
    )
    from airflow_delta_provider.core.table.watch import (
        CommitFilter,
        PollResult,
        check_partition_filter,
        commit_partitions,
        payload,
        poll,
    )

_LAZY = {
    "check_partition_filter": "airflow_delta_provider.core.table.watch",
    "checkpoint_due": "airflow_delta_provider.core.table.maintenance_due",
    "cleanup_due": "airflow_delta_provider.core.table.maintenance_due",
    "commit_partitions": "airflow_delta_provider.core.table.watch",
    "commit_time": "airflow_delta_provider.core.table.consumer",
    "consumer_app_id": "airflow_delta_provider.core.table.consumer",
    "consumer_partition": "airflow_delta_provider.core.table.consumer",
    "ConsumerPartition": "airflow_delta_provider.core.table.consumer",
    "CommitFilter": "airflow_delta_provider.core.table.watch",
    "DEFAULT_OPTIMIZE_MIN_FILES": "airflow_delta_provider.core.table.maintenance_due",
    "DEFAULT_VACUUM_INTERVAL": "airflow_delta_provider.core.table.maintenance_due",
    "DeltaTable": "airflow_delta_provider.core.table.delta_table",
    "optimize_due": "airflow_delta_provider.core.table.maintenance_due",
    "OptimizeDecision": "airflow_delta_provider.core.table.maintenance_due",
    "parse_consumer_app_id": "airflow_delta_provider.core.table.consumer",
    "payload": "airflow_delta_provider.core.table.watch",
    "plan_read": "airflow_delta_provider.core.table.consumer",
    "poll": "airflow_delta_provider.core.table.watch",
    "PollResult": "airflow_delta_provider.core.table.watch",
    "purge_due": "airflow_delta_provider.core.table.maintenance_due",
    "PurgeDecision": "airflow_delta_provider.core.table.maintenance_due",
    "SourceRead": "airflow_delta_provider.core.table.consumer",
    "StartingVersion": "airflow_delta_provider.core.table.consumer",
    "vacuum_due": "airflow_delta_provider.core.table.maintenance_due",
}

__all__ = [
    "DEFAULT_OPTIMIZE_MIN_FILES",
    "DEFAULT_VACUUM_INTERVAL",
    "CommitFilter",
    "ConsumerPartition",
    "DeltaTable",
    "OptimizeDecision",
    "PollResult",
    "PurgeDecision",
    "SourceRead",
    "StartingVersion",
    "check_partition_filter",
    "checkpoint_due",
    "cleanup_due",
    "commit_partitions",
    "commit_time",
    "consumer_app_id",
    "consumer_partition",
    "optimize_due",
    "parse_consumer_app_id",
    "payload",
    "plan_read",
    "poll",
    "purge_due",
    "vacuum_due",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
