"""VACUUM's retention: which one applies, and Delta's safety check against the table's own."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import VacuumRetentionNegativeError, VacuumRetentionTooShortError
from airflow_delta_provider.core.protocol.table_config import DELETED_FILE_RETENTION, Source, interval_text
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from airflow_delta_provider.core.protocol.table_config import Setting, TableConfig

log = get_logger(__name__)


@dataclass(frozen=True)
class ResolvedVacuumRetention:
    """The retention a VACUUM uses, and the table's own against which it is checked.

    :param effective: the retention used (the argument, else the configured one).
    :param configured: the table's ``delta.deletedFileRetentionDuration`` without the argument.
    """

    effective: Setting[timedelta]
    configured: Setting[timedelta]

    @property
    def explicit(self) -> bool:
        return self.effective.source is Source.ARGUMENT


def resolve_vacuum_retention(
    retention: timedelta | str | float | None, config: TableConfig
) -> ResolvedVacuumRetention:
    """The retention to use and the table's configured one (see :class:`TableConfig`).

    :param retention: the explicit retention (``timedelta``, hours, or a Delta interval).
    :param config: the table's configuration.
    :raises VacuumRetentionNegativeError: the explicit retention is negative.
    :raises RetentionError: a value is not an interval.
    """
    configured = config.deleted_file_retention
    if retention is None:
        return ResolvedVacuumRetention(configured, configured)
    negative = (
        (isinstance(retention, timedelta) and retention < timedelta())
        or (isinstance(retention, int | float) and not isinstance(retention, bool) and retention < 0)
        or (isinstance(retention, str) and "-" in retention)
    )
    if negative:
        raise VacuumRetentionNegativeError(
            f"Retention for VACUUM can't be less than 0, got {retention!r}. Use a retention of at least the "
            f"table's {DELETED_FILE_RETENTION}."
        )
    return ResolvedVacuumRetention(config.resolve(DELETED_FILE_RETENTION, retention), configured)


def check_retention_safety(resolved: ResolvedVacuumRetention, *, enforce: bool, table_uri: str) -> None:
    """Delta's ``checkRetentionPeriodSafety``: refuse (or, with the check off, warn about) a
    retention shorter than the table's.

    :raises VacuumRetentionTooShortError: with Delta's explanation and the hours to use.
    """
    if resolved.effective.value >= resolved.configured.value:
        return
    # Retentions as Delta writes them (``interval 1 week``), not as Python prints a timedelta.
    effective, configured = interval_text(resolved.effective.value), interval_text(resolved.configured.value)
    seconds = resolved.configured.value.total_seconds()
    hours = math.ceil(seconds / 3600)  # Delta rounds the configured hours up
    if enforce:
        raise VacuumRetentionTooShortError(
            f"Are you sure you would like to vacuum files with such a low retention period? The "
            f"retention {effective} is shorter than the {configured} of {table_uri} "
            f"({DELETED_FILE_RETENTION}, from the {resolved.configured.source}). If you have writers that "
            f"are currently writing to this table, there is a risk that you may corrupt the state of "
            f"your Delta table: files they are about to commit, and files that readers of recent "
            f"versions still need, would be deleted.\n\nIf you are certain that there are no operations "
            f"being performed on this table, such as insert/upsert/delete/optimize, then you may turn "
            f"off this check with enforce_retention_duration=False (Delta: "
            f"spark.databricks.delta.retentionDurationCheck.enabled = false).\n\nIf you are not sure, "
            f'please use a value not less than "{hours} hours".'
        )
    log.warning(
        "VACUUM of %s with retention %s, shorter than the table's %s, and the retention safety check "
        "off: files that running writers are about to commit, or that readers of versions newer than "
        "the retention still need, may be deleted.",
        table_uri,
        effective,
        configured,
    )


def millis(value: timedelta) -> int:
    """Whole milliseconds of an interval, as Delta records retentions."""
    return int(value.total_seconds() * 1000)
