"""What a VACUUM did (or, in a dry run, would do)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from airflow_delta_provider.core.protocol.table_config import Setting


class VacuumStatus(enum.StrEnum):
    DRY_RUN = "DRY_RUN"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


@dataclass(frozen=True)
class VacuumResult:
    """What a VACUUM deleted, or (dry run) would delete.

    :param table_uri: the table root.
    :param version: the table version whose state protected the files.
    :param mode: ``full`` or ``lite``.
    :param dry_run: True when nothing was deleted or committed.
    :param retention: the retention used and where it came from (``argument``, ``table
        property``, ``provider config`` or ``default``).
    :param delete_before: files older than this (and tombstones removed before it) could go.
    :param files: absolute URIs of the files deleted (or to delete), sorted.
    :param num_files: ``len(files)``.
    :param num_bytes: their total size.
    :param directories: absolute URIs of the empty directories deleted (or to delete).
    :param num_directories: ``len(directories)``.
    :param num_deleted: files and directories actually deleted (0 in a dry run; files already
        gone when the deletion reached them are not counted).
    :param start_version: the ``VACUUM START`` commit, None when none was written.
    :param end_version: the ``VACUUM END`` commit, None when none was written.
    :param status: ``DRY_RUN`` or ``COMPLETED`` (a failed run raises instead).
    :param eligible_start_version: LITE: the first commit read; None for FULL.
    :param eligible_end_version: LITE: the last commit read; None for FULL.
    :param last_vacuum_version: the ``latestCommitVersionOutsideOfRetentionWindow`` written to
        ``_delta_log/_last_vacuum_info`` (None when the file was left as it was).
    """

    table_uri: str
    version: int
    mode: str
    dry_run: bool
    retention: Setting[timedelta]
    delete_before: datetime
    files: tuple[str, ...]
    num_files: int
    num_bytes: int
    directories: tuple[str, ...] = ()
    num_directories: int = 0
    num_deleted: int = 0
    start_version: int | None = None
    end_version: int | None = None
    status: str = VacuumStatus.DRY_RUN.value
    eligible_start_version: int | None = None
    eligible_end_version: int | None = None
    last_vacuum_version: int | None = None
    enforce_retention_duration: bool = True

    def to_dict(self) -> dict[str, Any]:
        """A JSON-native form (for XCom): retention in seconds, ``delete_before`` in ISO-8601."""
        return {
            "table_uri": self.table_uri,
            "version": self.version,
            "mode": self.mode,
            "dry_run": self.dry_run,
            "retention": self.retention.to_dict(),
            "delete_before": self.delete_before.isoformat(),
            "files": list(self.files),
            "num_files": self.num_files,
            "num_bytes": self.num_bytes,
            "directories": list(self.directories),
            "num_directories": self.num_directories,
            "num_deleted": self.num_deleted,
            "start_version": self.start_version,
            "end_version": self.end_version,
            "status": self.status,
            "eligible_start_version": self.eligible_start_version,
            "eligible_end_version": self.eligible_end_version,
            "last_vacuum_version": self.last_vacuum_version,
            "enforce_retention_duration": self.enforce_retention_duration,
        }
