"""Data retention as a policy: delete the rows older than ``now - keep`` through the core's DELETE.

A policy (:class:`~.table_config.DataRetentionPolicy`) comes from the caller or from the table's
``airflow.dataRetention`` property, so that it travels with the table. A run checks the column
against the table, builds the DELETE's predicate (on the partition column itself, or on a date
partition generated from the column: whole files, none read; else row-level), counts the rows it
selects and refuses a run above ``max_deleted_fraction``, then deletes on the snapshot it decided
on, handing over the rows it counted, in one ``DELETE`` tagged ``airflow.dataRetention``.
docs/lifecycle.md (data retention) has the rules.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.errors import DataRetentionError, DataRetentionLimitError
from airflow_delta_provider.core.expressions.skipping import files_matching
from airflow_delta_provider.core.expressions.stats import read_footers
from airflow_delta_provider.core.expressions.stats_parsed import record_counts
from airflow_delta_provider.core.lifecycle.delete import DeleteOptions, delete, parse_predicate
from airflow_delta_provider.core.lifecycle.delete_rows import Candidates, FileReader, match_rows_locally
from airflow_delta_provider.core.protocol.table_config import (
    DATA_RETENTION,
    DataRetentionPolicy,
    Setting,
    interval_text,
)
from airflow_delta_provider.core.transaction.commit_plan import CommitProperties
from airflow_delta_provider.core.utils.arguments import check_bool
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.expressions.predicate import Predicate
    from airflow_delta_provider.core.lifecycle.delete import DeleteResult
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

__all__ = [
    "DATA_RETENTION_TAG",
    "DataRetentionDecision",
    "DataRetentionOptions",
    "DataRetentionResult",
    "apply_data_retention",
    "data_retention_due",
]

log = get_logger(__name__)

#: The commitInfo tag of a retention run's DELETE: the policy and the cutoff, as JSON.
DATA_RETENTION_TAG = DATA_RETENTION
#: The marker of the cutoff in a retention run's predicate.
CUTOFF = "cutoff"
_GENERATION = "delta.generationExpression"
#: A generated date partition of a column: CAST(c AS DATE), to_date(c), date(c).
_DATE_OF = re.compile(
    r"^\s*(?:cast\s*\(\s*(?P<cast>`(?:[^`]|``)+`|\w+)\s+as\s+date\s*\)"
    r"|(?:to_date|date)\s*\(\s*(?P<call>`(?:[^`]|``)+`|\w+)\s*\))\s*$",
    re.IGNORECASE,
)
_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True, kw_only=True)
class DataRetentionOptions(CommitProperties):
    """Every option of a retention run (``DeltaTable.apply_data_retention``), beside the
    :class:`~.commit_plan.CommitProperties` every commit takes.

    :param policy: the policy (a :class:`~.table_config.DataRetentionPolicy`, a mapping or its JSON:
        ``{"column": "ds", "keep": "interval 90 days"}``); None: the table's ``airflow.dataRetention``.
    :param dry_run: decide and count only; delete nothing.
    :param now: the clock (an aware ``datetime``; naive means UTC); default: now.
    """

    policy: DataRetentionPolicy | Mapping[str, Any] | str | None = None
    dry_run: bool = False
    now: datetime | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        check_bool("dry_run", self.dry_run)
        if self.now is not None and not isinstance(self.now, datetime):
            raise ValueError(f"now must be a datetime, got {self.now!r}.")


@dataclass(frozen=True)
class DataRetentionDecision:
    """What a data retention run of a table deletes (:func:`.data_retention.data_retention_due`).

    :param due: rows older than the cutoff exist and the policy's limit allows deleting them.
    :param reason: why (not), in words.
    :param policy: the policy and where it came from (the argument or the table's
        ``airflow.dataRetention``); its value is None when there is none.
    :param version: the version decided on (the DELETE commits against it).
    :param cutoff: rows older than this go (``now - keep``).
    :param predicate: the DELETE's predicate (None without a policy), its cutoff a marker
        (``"`ds` < :cutoff"``) bound to ``parameters``.
    :param parameters: the predicate's bound values (``{"cutoff": ...}``: a date, an aware
        datetime, or text for a string or timestamp_ntz column).
    :param metadata_only: whole files go, none is read: the column is a partition column, or a
        date partition column is generated from it (the cutoff then falls on a day boundary).
    :param num_rows: the table's rows.
    :param num_rows_to_delete: the rows the predicate selects.
    :param num_files: the files whose rows it selects (removed whole when ``metadata_only``).
    :param limit_exceeded: more than ``max_deleted_fraction`` of the rows would go: refused.
    """

    due: bool
    reason: str
    policy: Setting[DataRetentionPolicy | None]
    version: int
    cutoff: datetime | None = None
    predicate: str | None = None
    parameters: Mapping[str, Any] = field(default_factory=dict)
    metadata_only: bool = False
    num_rows: int = 0
    num_rows_to_delete: int = 0
    num_files: int = 0
    limit_exceeded: bool = False
    #: per file read, the positions of the rows the predicate selects (handed to the DELETE, so the
    #: rows are read once)
    matches: Mapping[str, npt.NDArray[np.uint64]] = field(default_factory=dict, compare=False, repr=False)

    @property
    def fraction(self) -> float:
        """The share of the table's rows the run deletes."""
        return self.num_rows_to_delete / self.num_rows if self.num_rows else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "due": self.due,
            "reason": self.reason,
            "policy": self.policy.to_dict(),
            "version": self.version,
            "cutoff": self.cutoff.isoformat() if self.cutoff is not None else None,
            "predicate": self.predicate,
            "parameters": {
                k: v.isoformat() if hasattr(v, "isoformat") else v for k, v in self.parameters.items()
            },
            "metadata_only": self.metadata_only,
            "num_rows": self.num_rows,
            "num_rows_to_delete": self.num_rows_to_delete,
            "num_files": self.num_files,
            "fraction": round(self.fraction, 6),
            "limit_exceeded": self.limit_exceeded,
        }


@dataclass(frozen=True)
class DataRetentionResult:
    """What a data retention run did: its decision, and the DELETE it committed (None on a dry run
    or when nothing was due)."""

    decision: DataRetentionDecision
    delete: DeleteResult | None = None
    dry_run: bool = False

    @property
    def committed(self) -> bool:
        return self.delete is not None and self.delete.committed

    @property
    def num_deleted_rows(self) -> int | None:
        """Rows deleted (None when the DELETE could not count them); 0 when nothing ran."""
        return self.delete.num_deleted_rows if self.delete is not None else 0

    def to_dict(self) -> dict[str, Any]:
        delete = self.delete.to_dict() if self.delete is not None else None
        if delete is not None:
            delete.pop("commit", None)
        return {
            "dry_run": self.dry_run,
            "committed": self.committed,
            "version": self.delete.version if self.delete is not None else self.decision.version,
            "num_deleted_rows": self.num_deleted_rows,
            "num_removed_files": self.delete.num_removed_files if self.delete is not None else 0,
            "decision": self.decision.to_dict(),
            "delete": delete,
        }


@dataclass(frozen=True)
class _Target:
    """The predicate a policy becomes on one table: ``column < :cutoff``, the cutoff bound (as the
    column's type reads it: no text of a timestamp left for a session time zone to interpret)."""

    column: str
    value: Any
    cutoff: datetime
    metadata_only: bool

    @property
    def predicate(self) -> str:
        return f"{_quoted(self.column)} < :{CUTOFF}"

    @property
    def parameters(self) -> dict[str, Any]:
        return {CUTOFF: self.value}

    @property
    def shown(self) -> str:
        return self.value.isoformat() if hasattr(self.value, "isoformat") else str(self.value)


def data_retention_due(
    snapshot: Snapshot, policy: Any = None, *, now: datetime | None = None
) -> DataRetentionDecision:
    """What a retention run of ``snapshot`` would delete under ``policy`` (default: the table's).

    Reads the policy column of the files whose statistics allow old rows only for a row-level
    condition; nothing for a partition column.

    :raises RetentionError: the policy is malformed (``InvalidTablePropertyError`` for the property).
    :raises DataRetentionError: the policy does not fit the table (unknown column, wrong type).
    """
    setting: Setting[DataRetentionPolicy | None] = snapshot.config.resolve(DATA_RETENTION, policy)
    chosen = setting.value
    if chosen is None:
        reason = f"no data retention policy (no argument, no {DATA_RETENTION} table property)"
        return DataRetentionDecision(False, reason, setting, snapshot.version)
    now = _utc(now or datetime.now(UTC))
    target = _target(snapshot, chosen, now - chosen.keep)
    predicate = parse_predicate(snapshot, target.predicate, target.parameters)
    assert predicate is not None
    files = snapshot.files()
    total = _live_rows(snapshot, files)
    matches: dict[str, npt.NDArray[np.uint64]] = {}
    if target.metadata_only:
        removed = files.filter(predicate.mask(snapshot.partition_values())) if files.num_rows else files
        doomed, num_files = _live_rows(snapshot, removed), removed.num_rows
    else:
        matches, doomed = _matching_rows(snapshot, predicate)
        num_files = len(matches)
    decision = {
        "policy": setting,
        "version": snapshot.version,
        "cutoff": target.cutoff,
        "predicate": target.predicate,
        "parameters": target.parameters,
        "metadata_only": target.metadata_only,
        "num_rows": total,
        "num_rows_to_delete": doomed,
        "num_files": num_files,
        "matches": matches,
    }
    what = (
        f"{doomed} of {total} row(s) ({_percent(doomed, total)}) in {num_files} file(s) are older than "
        f"{target.cutoff.isoformat()} ({target.predicate}, {CUTOFF} = {target.shown}; keep "
        f"{interval_text(chosen.keep)} from the {setting.source})"
    )
    if total and doomed / total > chosen.max_deleted_fraction:
        reason = f"{what}: more than max_deleted_fraction={chosen.max_deleted_fraction}"
        return DataRetentionDecision(False, reason, limit_exceeded=True, **decision)
    if not doomed:
        return DataRetentionDecision(False, f"{what}: nothing to delete", **decision)
    return DataRetentionDecision(True, what, **decision)


def apply_data_retention(
    snapshot: Snapshot, options: DataRetentionOptions, post_commit_hooks: Sequence[PostCommitHook] = ()
) -> DataRetentionResult:
    """Decide (:func:`data_retention_due`) and delete the rows older than the cutoff in one
    ``DELETE`` commit tagged ``airflow.dataRetention``; on a dry run, decide only.

    :raises DataRetentionLimitError: the run would delete more than the policy's
        ``max_deleted_fraction`` of the rows (on a dry run too); nothing is deleted.
    :raises DataRetentionError: the policy does not fit the table; nothing is deleted.
    """
    decision = data_retention_due(snapshot, options.policy, now=options.now)
    root = snapshot.storage.root_uri
    if decision.limit_exceeded:
        policy = decision.policy.value
        assert policy is not None
        raise DataRetentionLimitError(
            f"Data retention of {root} refused: {decision.reason}. A typo in the column or the interval "
            f"must never empty a table, so nothing was deleted. Check the policy ({decision.policy.source}: "
            f"{json.dumps(policy.to_dict())}); if deleting that much is intended, raise its "
            f"max_deleted_fraction (at most 1)."
        )
    if options.dry_run or not decision.due:
        log.info(
            "Data retention of %s%s: %s.", root, " (dry run)" if options.dry_run else "", decision.reason
        )
        return DataRetentionResult(decision, None, dry_run=options.dry_run)
    policy = decision.policy.value
    assert policy is not None and decision.cutoff is not None
    tag = json.dumps({**policy.to_dict(), "cutoff": decision.cutoff.isoformat()}, separators=(",", ":"))
    delete_options = DeleteOptions(
        decision.predicate,
        parameters=decision.parameters,
        app_id=options.app_id,
        app_version=options.app_version,
        user_metadata=options.user_metadata,
        tags={**(options.tags or {}), DATA_RETENTION_TAG: tag},
        max_attempts=options.max_attempts,
        auto_checkpoint=options.auto_checkpoint,
        cleanup_expired_logs=options.cleanup_expired_logs,
    )
    matches = decision.matches

    def counted(_: Snapshot, __: Predicate, candidates: Candidates) -> dict[str, npt.NDArray[np.uint64]]:
        return {p: matches[p] for p in candidates.paths if p in matches}

    result = delete(snapshot, delete_options, post_commit_hooks, match_rows=counted)
    log.info("Data retention of %s: %s; deleted at version %d.", root, decision.reason, result.version)
    return DataRetentionResult(decision, result)


# --- the predicate ---------------------------------------------------------------------------


def _target(snapshot: Snapshot, policy: DataRetentionPolicy, cutoff: datetime) -> _Target:
    """The DELETE's predicate for ``policy`` on this table (see the module docstring)."""
    schema = snapshot.schema
    column = policy.column
    if column not in schema.names:
        near = [n for n in schema.names if n.lower() == column.lower()]
        hint = f" (did you mean {near[0]!r}? names are case-sensitive)" if near else ""
        raise DataRetentionError(
            f"The data retention column {column!r} is not a column of {snapshot.storage.root_uri}{hint}; "
            f"its columns are {schema.names}. Nothing was deleted."
        )
    kind = schema.field(column).type
    if column in snapshot.partition_columns:
        if pa.types.is_string(kind) or pa.types.is_large_string(kind):
            _check_iso_dates(snapshot, column)
            day = cutoff.date()
            return _Target(column, day.isoformat(), _midnight(day), True)
        return _Target(column, _older_than(column, kind, cutoff, snapshot), _effective(kind, cutoff), True)
    generated = _generated_date_partition(snapshot, column)
    if generated is not None and (pa.types.is_date(kind) or pa.types.is_timestamp(kind)):
        # Whole days older than the cutoff; Spark casts a zoned timestamp in its session's zone,
        # which may put a row up to a day earlier: one more day is kept.
        margin = timedelta(days=1) if pa.types.is_timestamp(kind) and kind.tz is not None else timedelta()
        day = (cutoff - margin).date()
        return _Target(generated, day, _midnight(day), True)
    return _Target(column, _older_than(column, kind, cutoff, snapshot), _effective(kind, cutoff), False)


def _effective(kind: pa.DataType, cutoff: datetime) -> datetime:
    """The cutoff a comparison with a column of ``kind`` applies: a date column's is a midnight."""
    return _midnight(cutoff.date()) if pa.types.is_date(kind) else cutoff


def _older_than(
    column: str, kind: pa.DataType, cutoff: datetime, snapshot: Snapshot
) -> date | datetime | str:
    """The cutoff's value for ``column < :cutoff``: a date, the instant (an aware datetime) for a
    timestamp, its UTC wall clock as text for a timestamp_ntz (a naive datetime would be read in
    a process's zone)."""
    if pa.types.is_date(kind):
        return cutoff.date()
    if pa.types.is_timestamp(kind):
        return cutoff if kind.tz is not None else cutoff.replace(tzinfo=None).isoformat(sep=" ")
    raise DataRetentionError(
        f"The data retention column {column!r} of {snapshot.storage.root_uri} is {kind}: it must hold a "
        f"date or a timestamp (or be a partition column of ISO dates, 'YYYY-MM-DD'). Nothing was deleted."
    )


def _generated_date_partition(snapshot: Snapshot, column: str) -> str | None:
    """A date partition column generated from ``column`` (``CAST(column AS DATE)`` ...), if any."""
    fields = snapshot.metadata.schema_json.get("fields", [])
    partitions = set(snapshot.partition_columns)
    for item in fields:
        expression = (item.get("metadata") or {}).get(_GENERATION)
        if (
            item.get("name") not in partitions
            or item.get("type") != "date"
            or not isinstance(expression, str)
        ):
            continue
        match = _DATE_OF.match(expression)
        source = match and (match["cast"] or match["call"])
        if source and _unquoted(source) == column:
            return str(item["name"])
    return None


def _check_iso_dates(snapshot: Snapshot, column: str) -> None:
    """Refuse a string partition column whose values are not ISO dates: compared as text, other
    formats (``01/31/2024``) would not be compared by time."""
    values = snapshot.partition_values()
    if not values.num_rows:
        return
    distinct = pc.unique(values.column(column).drop_null()).to_pylist()
    for value in distinct:
        if not _ISO_DATE.match(value) or not _is_date(value[:10]):
            raise DataRetentionError(
                f"The data retention column {column!r} of {snapshot.storage.root_uri} is a string partition "
                f"column holding {value!r}, which is no ISO date ('YYYY-MM-DD'); compared as text, its "
                f"values would not be compared by time. Nothing was deleted."
            )


def _is_date(text: str) -> bool:
    try:
        date.fromisoformat(text)
    except ValueError:
        return False
    return True


# --- counting ------------------------------------------------------------------------------


def _live_rows(snapshot: Snapshot, files: pa.Table) -> int:
    """The rows of ``files``: ``numRecords`` (their footers where the statistics lack it) less what
    their deletion vectors delete."""
    if not files.num_rows:
        return 0
    records = record_counts(files.column("stats"))
    total = int(pc.sum(records).as_py() or 0)
    missing = [i for i, value in enumerate(records.is_null().to_pylist()) if value]
    if missing:
        storage = snapshot.storage
        indices = pa.array(missing, pa.int64())
        paths = [storage.path.decode(p) for p in files.column("path").take(indices).to_pylist()]
        sizes = files.column("size").take(indices).to_pylist()
        total += sum(f.num_records for f in read_footers(storage, paths, stats_columns=[], sizes=sizes))
    cardinality = pc.fill_null(pc.struct_field(files.column("deletion_vector"), "cardinality"), 0)
    return total - int(pc.sum(cardinality).as_py() or 0)


def _matching_rows(snapshot: Snapshot, predicate: Predicate) -> tuple[dict[str, npt.NDArray[np.uint64]], int]:
    """Per file the predicate may select (after skipping), the positions of its matching rows; and
    how many of them are not deleted already."""
    files = snapshot.files()
    may_match = pa.array(files_matching(snapshot, predicate))
    values = snapshot.partition_values()
    candidates = Candidates(
        files.filter(may_match), values.filter(may_match) if values.num_columns else values
    )
    matches = match_rows_locally(snapshot, predicate, candidates)
    reader = FileReader(snapshot)
    vectors = dict(zip(candidates.paths, candidates.files.column("deletion_vector").to_pylist(), strict=True))
    live = 0
    for path, rows in matches.items():
        live += int(np.setdiff1d(rows, reader.deleted_rows(vectors[path]), assume_unique=True).size)
    return matches, live


def _quoted(column: str) -> str:
    return "`" + column.replace("`", "``") + "`"


def _unquoted(name: str) -> str:
    return name[1:-1].replace("``", "`") if name.startswith("`") else name


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _midnight(day: date) -> datetime:
    return datetime(day.year, day.month, day.day, tzinfo=UTC)


def _percent(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "0%"
