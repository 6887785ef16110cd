"""A table's history: when each version was committed (one rule, :class:`CommitTimeRule`, for
time travel, the change feed, the history, watchers, consumers, RESTORE and VACUUM), commitInfo,
and what each commit added and removed.

Log-level reads below the facade: VACUUM (the latest commit outside the retention window),
time travel, ``DeltaTable.history`` and the Delta view all ask these.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import (
    CorruptLogError,
    TimestampEarlierThanRetentionError,
    TimestampLaterThanLatestCommitError,
    VersionNotFoundError,
)
from airflow_delta_provider.core.log.commits import commit_info_of, read_commit, read_commit_bytes
from airflow_delta_provider.core.log.logfiles import LogFileKind
from airflow_delta_provider.core.log.segment import build_segment, complete_checkpoints, list_log_files
from airflow_delta_provider.core.protocol.delta_types import LONG_MAX, LONG_MIN

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Mapping

    from airflow_delta_provider.core.log.logfiles import LogFile
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore

__all__ = [
    "CommitTimeRule",
    "CommitTimestamp",
    "commit_counts",
    "commit_info",
    "commit_times",
    "commit_timestamps",
    "describe_timestamp",
    "file_times",
    "format_ms",
    "history",
    "info_integer",
    "info_object",
    "to_millis",
    "version_at",
]


@dataclass(frozen=True, slots=True)
class CommitTimestamp:
    """When a version was committed, as Delta's time travel sees it."""

    version: int
    #: milliseconds since the epoch (UTC)
    timestamp: int
    #: ``"inCommitTimestamp"`` or ``"modificationTime"``
    source: str


class CommitTimeRule:
    """Where a version's commit time comes from, as Delta's ``DeltaHistoryManager`` decides it.

    ``commitInfo.inCommitTimestamp`` for the versions at or after
    ``delta.inCommitTimestampEnablementVersion`` while the table's latest metadata enables in-commit
    timestamps; for every other version, its commit file's modification time made strictly
    increasing over the log (:func:`file_times`). An in-commit timestamp outside that span (written
    on a table without the feature, before it was enabled or after it was disabled) is not the
    commit time: a ``_commit_timestamp`` given back as a time selects the version it came from.

    :param latest: the table's latest snapshot, or what loads it (``DeltaTable.snapshot``): then
        the metadata is read only when a commit to date carries an in-commit timestamp.
    """

    def __init__(self, latest: Snapshot | Callable[[], Snapshot]) -> None:
        self._latest = latest

    @cached_property
    def ict_since(self) -> int | None:
        """The first version whose in-commit timestamp is its commit time; None: no version's is."""
        latest = self._latest() if callable(self._latest) else self._latest
        config = latest.metadata.config  # the table's own properties: provider defaults do not apply
        return config.in_commit_timestamp_enablement_version if config.in_commit_timestamps else None

    def takes_ict(self, version: int) -> bool:
        """Whether ``version``'s in-commit timestamp (when it has one) is its commit time."""
        return self.ict_since is not None and version >= self.ict_since

    def stamp(self, version: int, file_time: int, info: Mapping[str, Any] | None) -> CommitTimestamp:
        """``version``'s commit time from its increasing file time and its commitInfo (None: not read,
        or the rule does not take its in-commit timestamp). A version the rule dates by in-commit
        timestamp but whose commit carries none (a writer that ignored the feature) keeps its file time.
        """
        ict = (info or {}).get("inCommitTimestamp")
        if isinstance(ict, int) and not isinstance(ict, bool) and self.takes_ict(version):
            return CommitTimestamp(version, ict, "inCommitTimestamp")
        return CommitTimestamp(version, file_time, "modificationTime")


def file_times(commits: Iterable[LogFile], last: int | None = None) -> dict[int, int]:
    """Each commit file's modification time made strictly increasing (ms), by version: a time not
    above the previous commit's becomes that one's plus 1 ms, as Delta's time travel does.

    :param commits: the log's commit files in version order, from the first one in the log (every
        reader starts at the same file, so a version has one time whoever asks).
    :param last: stop after this version (its later files' times are not read).
    """
    times: dict[int, int] = {}
    previous = -1
    for commit in commits:
        if last is not None and commit.version > last:
            break  # (a listing without stat reads a file's time only when asked)
        previous = max(commit.file.modification_time, previous + 1)
        times[commit.version] = previous
    return times


def _commit_files(storage: LogStore, *, stat: bool = True) -> list[LogFile]:
    return [f for f in list_log_files(storage, 0, stat=stat) if f.kind is LogFileKind.COMMIT]


def commit_timestamps(latest: Snapshot) -> list[CommitTimestamp]:
    """Timestamps of every reconstructable version, oldest first, as Delta's time travel uses them
    (:class:`CommitTimeRule`).

    :param latest: the table's latest snapshot (its properties say whether in-commit
        timestamps are on).
    """
    storage = latest.storage
    files = list_log_files(storage, 0)
    commits = [f for f in files if f.kind is LogFileKind.COMMIT]
    if not commits:
        build_segment(storage)  # raises the precise error
    checkpoints = complete_checkpoints(files)
    earliest = 0 if commits and commits[0].version == 0 else None
    if earliest is None:
        earliest = checkpoints[0].version if checkpoints else commits[0].version
    rule = CommitTimeRule(latest)
    return [
        rule.stamp(version, stamp, commit_info(storage, version) if rule.takes_ict(version) else None)
        for version, stamp in file_times(commits).items()
        if version >= earliest
    ]


def commit_times(
    storage: LogStore,
    versions: Collection[int],
    rule: CommitTimeRule,
    infos: Mapping[int, Mapping[str, Any] | None] | None = None,
) -> dict[int, CommitTimestamp]:
    """When each of ``versions`` was committed, by the table's ``rule``: one listing of the log, and
    the commitInfo of the versions whose in-commit timestamp counts. A version whose commit file is
    not in the log (cleaned up, or not written yet) is left out.

    :param infos: commitInfos already read, by version (the others are read when the rule needs them).
    """
    if not versions:
        return {}
    times = file_times(_commit_files(storage, stat=False), max(versions))
    found = {}
    for version in sorted(set(versions) & times.keys()):
        if infos is not None and version in infos:
            info = infos[version]
        else:
            info = commit_info(storage, version) if rule.takes_ict(version) else None
        found[version] = rule.stamp(version, times[version], info)
    return found


def commit_info(storage: LogStore, version: int) -> dict[str, Any] | None:
    """The ``commitInfo`` of one commit (None when the commit file does not exist)."""
    found = read_commit_bytes(storage, version)
    return None if found is None else commit_info_of(version, *found)


def history(
    storage: LogStore, latest: int, limit: int | None = None, *, rule: CommitTimeRule
) -> list[dict[str, Any]]:
    """Commit history, newest first: each commit's ``commitInfo`` plus ``version`` and ``timestamp``.

    Only the last ``limit`` commit files are read (and one listing of the log). ``timestamp`` is
    the version's commit time by ``rule`` (:class:`CommitTimeRule`, as time travel dates it).
    Versions whose commit was cleaned up are not listed.

    :param latest: the latest version.
    :param limit: the number of most recent commits to return; None for all.
    :param rule: the table's rule (built on what loads the latest snapshot, it reads the metadata
        only when a commit shown carries an in-commit timestamp).
    """
    times = file_times(_commit_files(storage, stat=False), latest)
    entries: list[dict[str, Any]] = []
    version = latest
    while version in times and (limit is None or len(entries) < limit):
        details = commit_info(storage, version) or {}
        stamp = rule.stamp(version, times[version], details)
        entries.append({**details, "version": version, "timestamp": stamp.timestamp})
        version -= 1
    return entries


#: The ``operationMetrics`` each count is read from, first found wins: the names Delta (Spark) writes
#: for its operations (WRITE ``numFiles``/``numOutputRows``, DELETE ``numAddedFiles``..., VACUUM
#: ``numDeletedFiles``/``sizeOfDataToDelete``), then delta-rs's (``num_added_rows``, OPTIMIZE
#: ``numFilesAdded``); RESTORE's (Delta's ``numRestoredFiles``/``restoredFilesSize``, delta-rs's
#: singular ``numRestoredFile``/``numRemovedFile``).
_COUNT_METRICS = {
    "rows_added": ("numOutputRows", "num_added_rows"),
    "files_added": (
        "numAddedFiles",
        "numFiles",
        "num_added_files",
        "numFilesAdded",
        "numRestoredFiles",
        "numRestoredFile",
    ),
    "files_removed": (
        "numRemovedFiles",
        "numDeletedFiles",
        "num_removed_files",
        "numFilesRemoved",
        "numRemovedFile",
    ),
    "bytes_added": ("numOutputBytes", "numAddedBytes", "num_added_bytes", "restoredFilesSize"),
    "bytes_removed": ("numRemovedBytes", "sizeOfDataToDelete", "num_removed_bytes", "removedFilesSize"),
}


def commit_counts(storage: LogStore, entry: Mapping[str, Any]) -> dict[str, int | None]:
    """Rows, files and bytes a commit added and removed; None for a count the log does not give.

    From the commit's ``operationMetrics`` under the names Delta and delta-rs write them. A commit
    written without metrics (``operationMetrics`` absent or empty, as some writers leave it) is
    counted from its ``add``/``remove`` actions: files and bytes of all of them, rows from the
    ``numRecords`` of the added files that change data (unknown when one has no statistics or a
    deletion vector). Metrics are read by shape (:func:`info_object`, :func:`info_integer`): a
    count that is no non-negative Delta long is unknown, never guessed at.

    :param entry: a :func:`history` entry (its ``commitInfo`` and ``version``).
    """
    raw = entry.get("operationMetrics")
    metrics = info_object(raw)
    if metrics:
        return {
            count: next((found for n in names if (found := _count(metrics.get(n))) is not None), None)
            for count, names in _COUNT_METRICS.items()
        }
    if (raw is None or metrics == {}) and isinstance(entry.get("version"), int):
        return _counts_from_actions(storage, entry["version"])
    return dict.fromkeys(_COUNT_METRICS)


def info_object(value: Any) -> dict[str, Any] | None:
    """A commitInfo field Delta writes as a JSON object (``operationMetrics``,
    ``operationParameters``, ``tags``), read by its shape: commitInfo is free-form, and other
    engines write these as the JSON text of an object, as lists or as plain strings.

    :returns: the object, or the object a JSON text holds; None for anything else (absent, another
        type, text that is no JSON object, or nested too deeply to parse).
    """
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except (ValueError, RecursionError):
            return None
    return value if isinstance(value, dict) else None


def info_integer(value: Any) -> int | None:
    """A free-form integer of commitInfo or of an event (a metric, a version, a timestamp): a JSON
    integer, an integral float, or ASCII decimal text (quoted, as Spark writes metrics, or signed);
    None for anything else, and for a value outside Delta's long."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and len(value) <= 40:
        text = value.strip().strip('"')
        digits = text[1:] if text[:1] in ("-", "+") else text
        value = int(text) if digits.isascii() and digits.isdigit() else None
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value if LONG_MIN <= value <= LONG_MAX else None


def _count(value: Any) -> int | None:
    """A metric's count (Spark writes them as quoted text, delta-rs as numbers); None for anything
    that is no non-negative long."""
    count = info_integer(value)
    return count if count is not None and count >= 0 else None


def _counts_from_actions(storage: LogStore, version: int) -> dict[str, int | None]:
    try:
        commit = read_commit(storage, version)
        actions = [] if commit is None else commit.file_actions()
    except CorruptLogError:  # reported by whatever loads the version; a count is no reason to fail
        commit = None
    if commit is None:  # cleaned up since it was listed, or unreadable
        return dict.fromkeys(_COUNT_METRICS)
    adds = [a["add"] for a in actions if "add" in a]
    removes = [a["remove"] for a in actions if "remove" in a]
    records = [_records(add) for add in adds if add.get("dataChange", True)]
    sizes = [_count(r.get("size")) for r in removes]  # optional in a remove
    return {
        "rows_added": None if None in records else sum(r for r in records if r is not None),
        "files_added": len(adds),
        "files_removed": len(removes),
        "bytes_added": sum(int(a["size"]) for a in adds),
        "bytes_removed": None if None in sizes else sum(s for s in sizes if s is not None),
    }


def _records(add: Mapping[str, Any]) -> int | None:
    """The rows an added file holds, from its statistics; None when they do not say, or when a
    deletion vector hides some of them."""
    if add.get("deletionVector"):
        return None
    try:
        stats = json.loads(add.get("stats") or "{}")
    except (ValueError, RecursionError):
        return None
    return _count(stats.get("numRecords")) if isinstance(stats, dict) else None


def version_at(latest: Snapshot, timestamp: datetime | str | float) -> CommitTimestamp:
    """The latest version committed at or before ``timestamp`` (Delta's ``getActiveCommitAtTime``).

    Any integer is a timestamp, however far from today (it simply lies before or after every
    commit); so is any datetime and any ISO-8601 string, years beyond 9999 included.

    :param latest: the table's latest snapshot.
    :raises TimestampEarlierThanRetentionError: before the earliest reconstructable version.
    :raises TimestampLaterThanLatestCommitError: after the latest commit.
    :raises VersionNotFoundError: the log holds no commit file to time travel by.
    :raises ValueError: ``timestamp`` is not a timestamp (a bool, NaN, an unparseable string).
    """
    uri = latest.storage.root_uri
    target = to_millis(timestamp)
    stamps = commit_timestamps(latest)
    given = describe_timestamp(timestamp, target)
    if not stamps:
        raise VersionNotFoundError(
            f"Cannot time travel to {given} in {uri}: its log holds no commit file to date a "
            f"version by (only checkpoints). Load a version by number instead."
        )
    eligible = [s for s in stamps if s.timestamp <= target]
    if not eligible:
        raise TimestampEarlierThanRetentionError(
            f"The provided timestamp ({given}) is before the earliest version available "
            f"to {uri} (version {stamps[0].version}, committed {format_ms(stamps[0].timestamp)}). "
            f"Use a timestamp at or after {format_ms(stamps[0].timestamp)}."
        )
    if target > stamps[-1].timestamp and eligible[-1] is stamps[-1]:
        # Delta refuses a timestamp past the last commit rather than guess the future.
        raise TimestampLaterThanLatestCommitError(
            f"The provided timestamp ({given}) is after the latest version available to "
            f"{uri} (version {stamps[-1].version}, committed {format_ms(stamps[-1].timestamp)}). "
            f"Use a timestamp at or before {format_ms(stamps[-1].timestamp)}, or load the latest "
            f"version."
        )
    return eligible[-1]


def to_millis(value: datetime | str | float) -> int:
    """Milliseconds since the epoch from a datetime (naive = UTC), an ISO-8601 string or a number.

    Every datetime and every ISO-8601 date converts, whatever its year (expanded years such
    as ``+275760-09-13`` too); numbers are milliseconds (a fraction is floored), however large.

    :raises ValueError: not a timestamp (a bool, NaN or infinity, an unparseable string,
        another type), naming the value.
    """
    if isinstance(value, bool):
        raise ValueError(
            f"Not a timestamp: {value!r}; pass a datetime, an ISO-8601 string or epoch milliseconds."
        )
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"Not a timestamp: {value!r}; epoch milliseconds must be a finite number.")
        return math.floor(value)
    if isinstance(value, str):
        return _iso_millis(value)
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        # Integer arithmetic on a timedelta: exact, and no overflow at either end of datetime's range.
        return (value - _EPOCH) // timedelta(milliseconds=1)
    raise ValueError(
        f"Not a timestamp: {_short(repr(value))}; pass a datetime, an ISO-8601 string or epoch milliseconds."
    )


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: The Gregorian calendar repeats every 400 years, which hold exactly this many days.
_DAYS_PER_400_YEARS = 146_097
_EXPANDED_YEAR = re.compile(r"^([+-]?)(\d{4,})(-.*)$")


def _iso_millis(text: str) -> int:
    """An ISO-8601 timestamp string in epoch milliseconds, for any year."""
    stripped = text.strip()
    normalised = stripped[:-1] + "+00:00" if stripped[-1:] in ("Z", "z") else stripped
    match = _EXPANDED_YEAR.match(normalised)
    try:
        if match is None:
            return to_millis(datetime.fromisoformat(normalised))
        sign, digits, rest = match.groups()
        year = -int(digits) if sign == "-" else int(digits)
        # Parse within 2000-2399 and shift by whole 400-year cycles: exact for any year.
        cycles, offset = divmod(year - 2000, 400)
        parsed = datetime.fromisoformat(f"{2000 + offset:04d}{rest}")
        return to_millis(parsed) + cycles * _DAYS_PER_400_YEARS * 86_400_000
    except ValueError:
        raise ValueError(
            f"Cannot parse the timestamp {_short(repr(text))}; use ISO-8601, e.g. '2026-11-22T10:00:00Z'."
        ) from None


def format_ms(ms: int) -> str:
    """An ISO-8601 UTC rendering of epoch milliseconds, or the number itself outside years 1-9999."""
    try:
        return (_EPOCH + timedelta(milliseconds=ms)).isoformat(timespec="milliseconds")
    except OverflowError:
        return f"{_short(str(ms))} ms since the epoch (outside the years 1-9999)"


def describe_timestamp(value: Any, ms: int) -> str:
    """The timestamp as the caller gave it, and the time it stands for."""
    formatted = format_ms(ms)
    if isinstance(value, int | float):
        return (
            formatted
            if formatted.endswith("9999)")
            else f"{_short(repr(value))} ms since the epoch = {formatted}"
        )
    given = _short(repr(value)) if isinstance(value, str) else _short(str(value))
    return f"{given} = {formatted}"


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
