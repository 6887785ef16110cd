"""Row tracking: fresh row ids and row commit versions on every add (PROTOCOL.md § Row Tracking).

On a table with the ``rowTracking`` feature, each new ``add`` gets a ``baseRowId`` above the
high-water mark of the ``delta.rowTracking`` domain (moved in the same commit) and a
``defaultRowCommitVersion``. Both depend on the version the commit lands at, so the transaction calls
:func:`assign_row_ids` again on every attempt, as Delta's ``ConflictChecker`` reassigns them.
docs/write-api.md ("Row tracking") has the rules.
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import RowTrackingError
from airflow_delta_provider.core.protocol.actions import AddFile, DomainMetadata, Metadata, Protocol
from airflow_delta_provider.core.protocol.features import writer_features

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence


__all__ = [
    "MARK_KEY",
    "ROW_TRACKING_DOMAIN",
    "assign_row_ids",
    "assigns_row_ids",
    "high_water_mark",
    "new_table_properties",
    "winner_high_water_mark",
]

ROW_TRACKING_DOMAIN = "delta.rowTracking"
#: The key of the high-water mark in the domain's configuration.
MARK_KEY = "rowIdHighWaterMark"
_ROW_ID_COLUMN = "delta.rowTracking.materializedRowIdColumnName"
_COMMIT_VERSION_COLUMN = "delta.rowTracking.materializedRowCommitVersionColumnName"


def assigns_row_ids(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether commits to the table must assign row ids: ``rowTracking`` is supported, not suspended."""
    suspended = (metadata.configuration.get("delta.rowTrackingSuspended") or "").strip().lower() == "true"
    return "rowTracking" in writer_features(protocol) and not suspended


def new_table_properties(properties: Mapping[str, str]) -> dict[str, str]:
    """A new table's properties, with the materialized column names row tracking needs when enabled.

    Enabling row tracking requires both names in the configuration (PROTOCOL.md § Writer
    Requirements for Row Tracking); Spark names them ``_row-id-col-<uuid>`` and
    ``_row-commit-version-col-<uuid>`` (``MaterializedRowTrackingColumn``).
    """
    out = dict(properties)
    if (out.get("delta.enableRowTracking") or "").strip().lower() == "true":
        out.setdefault(_ROW_ID_COLUMN, f"_row-id-col-{uuid.uuid4()}")
        out.setdefault(_COMMIT_VERSION_COLUMN, f"_row-commit-version-col-{uuid.uuid4()}")
    return out


def high_water_mark(domains: Mapping[str, DomainMetadata]) -> int:
    """The ``rowIdHighWaterMark`` of the live ``delta.rowTracking`` domain (-1 when there is none)."""
    domain = domains.get(ROW_TRACKING_DOMAIN)
    if domain is None or domain.removed:
        return -1
    return _parse_mark(domain.configuration, "the table's delta.rowTracking domain")


def winner_high_water_mark(actions: Iterable[Mapping[str, Any]], current: int) -> int:
    """The mark after a concurrent winner's actions (its ``delta.rowTracking`` domain, if any)."""
    for action in actions:
        domain = action.get("domainMetadata")
        if isinstance(domain, dict) and domain.get("domain") == ROW_TRACKING_DOMAIN:
            if domain.get("removed"):
                continue
            current = _parse_mark(str(domain.get("configuration")), "a concurrent commit's delta.rowTracking")
    return current


def _parse_mark(configuration: str, where: str) -> int:
    try:
        value = json.loads(configuration)[MARK_KEY]
    except (ValueError, KeyError, TypeError):
        raise RowTrackingError(
            f"{where} domain has no readable {MARK_KEY}: {configuration[:200]!r}. The table's row tracking "
            f"state is damaged; repair it with Spark before writing."
        ) from None
    if not isinstance(value, int) or isinstance(value, bool):
        raise RowTrackingError(f"{where} domain has a {MARK_KEY} that is not an integer: {value!r}.")
    return value


def _num_records(add: AddFile) -> int:
    try:
        value = json.loads(add.stats or "{}").get("numRecords")
    except ValueError:
        value = None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        # Delta's DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS.
        raise RowTrackingError(
            f"Cannot assign row IDs without row count statistics: the add of {add.path!r} has no numRecords "
            f"in its stats. The table has the 'rowTracking' feature, so every new file needs its row "
            f"count; commit the file with its statistics (the core reads them from the Parquet footer)."
        )
    return value


def assign_row_ids(actions: Sequence[Any], *, high_water_mark: int, version: int) -> list[Any]:
    """The commit's actions for an attempt at ``version`` over the mark ``high_water_mark``.

    Adds without ``baseRowId`` get consecutive ranges above the mark, adds without
    ``defaultRowCommitVersion`` get ``version``; when the mark moved, the ``delta.rowTracking``
    domain with the new mark is put first among the actions that follow protocol and metadata.

    :raises RowTrackingError: an add lacks ``numRecords``, or the actions set the domain themselves.
    """
    if any(isinstance(a, DomainMetadata) and a.domain == ROW_TRACKING_DOMAIN for a in actions):
        raise RowTrackingError(
            "Manually setting the Row ID high water mark is not allowed: the commit carries a "
            f"{ROW_TRACKING_DOMAIN!r} domainMetadata action. Leave it out; the core assigns row ids."
        )
    mark = high_water_mark
    out: list[Any] = []
    for action in actions:
        if isinstance(action, AddFile):
            base = action.base_row_id
            if base is None:
                base = mark + 1
                mark += _num_records(action)
            commit_version = action.default_row_commit_version
            if commit_version is None:
                commit_version = version
            action = dataclasses.replace(action, base_row_id=base, default_row_commit_version=commit_version)
        out.append(action)
    if mark != high_water_mark:
        domain = DomainMetadata(ROW_TRACKING_DOMAIN, json.dumps({MARK_KEY: mark}, separators=(",", ":")))
        # After protocol/metaData (a reader wants them first), before the file actions.
        position = next((i for i, a in enumerate(out) if not isinstance(a, Protocol | Metadata)), len(out))
        out.insert(position, domain)
    return out
