"""Maintenance of the log and of the data, each safe by default: checkpoints (:mod:`.checkpoint`:
classic, multi-part and V2, Spark's part placement, the ``_last_checkpoint`` hint), expired-log
cleanup (:mod:`.cleanup`, Delta's MetadataCleanup), VACUUM (:mod:`.vacuum`: what may be
deleted whoever lists and deletes, never outside the table's root, and the discard of files an
attempt wrote and did not commit) and OPTIMIZE (:mod:`.optimize`, the files it wrote checked in
:mod:`.optimize_outputs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.maintenance.checkpoint import (
        CheckpointOptions,
        CheckpointResult,
        should_checkpoint,
        write_checkpoint,
    )
    from airflow_delta_provider.core.maintenance.cleanup import CleanupOptions, CleanupResult, cleanup_logs
    from airflow_delta_provider.core.maintenance.optimize import (
        OPTIMIZE,
        OptimizeOptions,
        OptimizePlan,
        OptimizeResult,
        RewriteOptions,
        Rewriter,
        already_rewritten,
        log_plan,
        pack_bins,
        plan_optimize,
        rewrite_and_commit,
        select_partitions,
    )
    from airflow_delta_provider.core.maintenance.vacuum import (
        VacuumEngine,
        VacuumOptions,
        VacuumResult,
        VacuumRules,
    )
    from airflow_delta_provider.core.maintenance.vacuum.discard import discard_uncommitted
    from airflow_delta_provider.core.maintenance.vacuum.distributed import (
        DELETED_SCHEMA,
        FILE,
        LISTING_SCHEMA,
        DeleteFiles,
        ListSubtrees,
        listing_from_rows,
        split_listing,
    )
    from airflow_delta_provider.core.maintenance.vacuum.record import (
        LAST_VACUUM_INFO,
        VACUUM_END,
        read_last_vacuum_info,
    )

_LAZY = {
    "already_rewritten": "airflow_delta_provider.core.maintenance.optimize",
    "CheckpointOptions": "airflow_delta_provider.core.maintenance.checkpoint",
    "CheckpointResult": "airflow_delta_provider.core.maintenance.checkpoint",
    "cleanup_logs": "airflow_delta_provider.core.maintenance.cleanup",
    "CleanupOptions": "airflow_delta_provider.core.maintenance.cleanup",
    "CleanupResult": "airflow_delta_provider.core.maintenance.cleanup",
    "DELETED_SCHEMA": "airflow_delta_provider.core.maintenance.vacuum.distributed",
    "DeleteFiles": "airflow_delta_provider.core.maintenance.vacuum.distributed",
    "discard_uncommitted": "airflow_delta_provider.core.maintenance.vacuum.discard",
    "FILE": "airflow_delta_provider.core.maintenance.vacuum.distributed",
    "LAST_VACUUM_INFO": "airflow_delta_provider.core.maintenance.vacuum.record",
    "listing_from_rows": "airflow_delta_provider.core.maintenance.vacuum.distributed",
    "LISTING_SCHEMA": "airflow_delta_provider.core.maintenance.vacuum.distributed",
    "ListSubtrees": "airflow_delta_provider.core.maintenance.vacuum.distributed",
    "log_plan": "airflow_delta_provider.core.maintenance.optimize",
    "OPTIMIZE": "airflow_delta_provider.core.maintenance.optimize",
    "OptimizeOptions": "airflow_delta_provider.core.maintenance.optimize",
    "OptimizePlan": "airflow_delta_provider.core.maintenance.optimize",
    "OptimizeResult": "airflow_delta_provider.core.maintenance.optimize",
    "pack_bins": "airflow_delta_provider.core.maintenance.optimize",
    "plan_optimize": "airflow_delta_provider.core.maintenance.optimize",
    "read_last_vacuum_info": "airflow_delta_provider.core.maintenance.vacuum.record",
    "rewrite_and_commit": "airflow_delta_provider.core.maintenance.optimize",
    "RewriteOptions": "airflow_delta_provider.core.maintenance.optimize",
    "Rewriter": "airflow_delta_provider.core.maintenance.optimize",
    "select_partitions": "airflow_delta_provider.core.maintenance.optimize",
    "should_checkpoint": "airflow_delta_provider.core.maintenance.checkpoint",
    "split_listing": "airflow_delta_provider.core.maintenance.vacuum.distributed",
    "VACUUM_END": "airflow_delta_provider.core.maintenance.vacuum.record",
    "VacuumEngine": "airflow_delta_provider.core.maintenance.vacuum",
    "VacuumOptions": "airflow_delta_provider.core.maintenance.vacuum",
    "VacuumResult": "airflow_delta_provider.core.maintenance.vacuum",
    "VacuumRules": "airflow_delta_provider.core.maintenance.vacuum",
    "write_checkpoint": "airflow_delta_provider.core.maintenance.checkpoint",
}

__all__ = [
    "DELETED_SCHEMA",
    "FILE",
    "LAST_VACUUM_INFO",
    "LISTING_SCHEMA",
    "OPTIMIZE",
    "VACUUM_END",
    "CheckpointOptions",
    "CheckpointResult",
    "CleanupOptions",
    "CleanupResult",
    "DeleteFiles",
    "ListSubtrees",
    "OptimizeOptions",
    "OptimizePlan",
    "OptimizeResult",
    "RewriteOptions",
    "Rewriter",
    "VacuumEngine",
    "VacuumOptions",
    "VacuumResult",
    "VacuumRules",
    "already_rewritten",
    "cleanup_logs",
    "discard_uncommitted",
    "listing_from_rows",
    "log_plan",
    "pack_bins",
    "plan_optimize",
    "read_last_vacuum_info",
    "rewrite_and_commit",
    "select_partitions",
    "should_checkpoint",
    "split_listing",
    "write_checkpoint",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
