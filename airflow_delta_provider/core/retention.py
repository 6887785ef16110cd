"""Retention settings, as the log layer asked for them before :mod:`.table_config`.

Every decision lives in :mod:`airflow_delta_provider.core.table_config`; these names
forward to it while the callers move over.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.table_config import (
    DELETED_FILE_RETENTION,
    LOG_RETENTION,
    SET_TRANSACTION_RETENTION,
    TableConfig,
    parse_interval,
    to_interval,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import timedelta

__all__ = [
    "DELETED_FILE_RETENTION",
    "LOG_RETENTION",
    "SET_TRANSACTION_RETENTION",
    "parse_interval",
    "property_interval",
    "to_interval",
]


def property_interval(configuration: Mapping[str, str | None] | None, key: str) -> timedelta | None:
    """The interval a table property sets, else Delta's default for it (None when it has none)."""
    value: timedelta | None = TableConfig(configuration).resolve(key).value
    return value
