"""The version range of a change feed, and when each of its commits happened, as Delta Spark decides them.

Bounds follow Delta's batch change data feed (``CDCReaderBase.getCDCRelation``): a start is
required; a starting timestamp resolves to the first commit at or after it, an ending timestamp
to the last commit at or before it; an end past the latest version is capped, a start past it is
an error, and two timestamps between the same two commits give an empty range. A commit's
timestamp is the one time travel gives it (:class:`~.timeline.CommitTimeRule`: the in-commit
timestamp where in-commit timestamps are in force, else the commit file's modification time made
strictly increasing over the log), so a ``_commit_timestamp`` given back as a starting timestamp
selects its version. Only the commits of the range (and one listing of the log) are read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import (
    CommitsCleanedUpError,
    CorruptLogError,
    InvalidChangeRangeError,
    TimestampLaterThanLatestCommitError,
    VersionGapError,
)
from airflow_delta_provider.core.log.logfiles import LogFileKind, commit_name
from airflow_delta_provider.core.log.segment import list_log_files
from airflow_delta_provider.core.log.timeline import (
    commit_timestamps,
    describe_timestamp,
    file_times,
    format_ms,
    to_millis,
    version_at,
)
from airflow_delta_provider.core.protocol.delta_types import LONG_MAX

if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime

    from airflow_delta_provider.core.log.commits import CommitActions
    from airflow_delta_provider.core.log.logfiles import LogFile
    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.log.timeline import CommitTimeRule, CommitTimestamp

    Timestamp = datetime | str | int | float

#: The latest (and, negated, earliest) commit time in milliseconds that ``_commit_timestamp``, a
#: timestamp in microseconds held in a long, can hold: about 292,000 years either side of 1970.
MAX_COMMIT_MILLIS = LONG_MAX // 1000


@dataclass(frozen=True, slots=True)
class ChangeRange:
    """The versions of a change feed: ``start`` to ``end`` inclusive (empty when ``end < start``)."""

    start: int
    end: int
    latest: int

    @property
    def versions(self) -> range:
        return range(self.start, self.end + 1)


def resolve_range(
    latest: Snapshot,
    starting_version: int | None,
    ending_version: int | None,
    starting_timestamp: Timestamp | None,
    ending_timestamp: Timestamp | None,
) -> ChangeRange:
    """The versions the bounds select, as Delta's batch change data feed resolves them.

    :param latest: the table's latest snapshot.
    :raises InvalidChangeRangeError: no start, a version and a timestamp for the same bound, a
        version that is not a non-negative integer, a start past the latest version, an end
        before the start (Delta's error names in the message).
    :raises TimestampLaterThanLatestCommitError: a starting timestamp after the latest commit, or
        an ending timestamp after it.
    :raises TimestampEarlierThanRetentionError: an ending timestamp before the earliest version.
    """
    for bound, version, timestamp in (
        ("starting", starting_version, starting_timestamp),
        ("ending", ending_version, ending_timestamp),
    ):
        if version is not None and timestamp is not None:
            raise InvalidChangeRangeError(
                f"Multiple {bound} arguments provided for a change read (DELTA_MULTIPLE_CDC_BOUNDARY): "
                f"{bound}_version={version!r} and {bound}_timestamp={timestamp!r}. Pass one of them.",
                delta_error_class="DELTA_MULTIPLE_CDC_BOUNDARY",
            )
        if version is not None:
            _check_version(f"{bound}_version", version)
    if starting_version is None and starting_timestamp is None:
        raise InvalidChangeRangeError(
            "No starting_version or starting_timestamp provided for a change read "
            "(DELTA_NO_START_FOR_CDC_READ). Pass the first version (or time) whose changes you want.",
            delta_error_class="DELTA_NO_START_FOR_CDC_READ",
        )
    stamps = commit_timestamps(latest) if starting_timestamp is not None else None
    start = starting_version
    if starting_timestamp is not None:
        start = _first_version_at_or_after(latest, starting_timestamp, stamps)
    end = latest.version if ending_version is None else min(ending_version, latest.version)
    if ending_timestamp is not None:
        end = version_at(latest, ending_timestamp).version
    assert start is not None
    if start > latest.version:
        raise InvalidChangeRangeError(
            f"Start version {start} for change data feed exceeds the latest table version {latest.version} "
            f"of {latest.storage.root_uri} (DELTA_CDC_START_VERSION_AFTER_LATEST). Nothing has been "
            f"committed since; ask again once the table's version is at least {start}.",
            delta_error_class="DELTA_CDC_START_VERSION_AFTER_LATEST",
        )
    if starting_timestamp is not None and ending_timestamp is not None:
        if to_millis(starting_timestamp) > to_millis(ending_timestamp):
            raise _end_before_start(start, end)
        if end == start - 1:  # both bounds between the same two commits: nothing changed
            return ChangeRange(start, end, latest.version)
    if end < start:
        raise _end_before_start(start, end)
    return ChangeRange(start, end, latest.version)


def _check_version(name: str, version: object) -> None:
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise InvalidChangeRangeError(
            f"The provided version ({version!r}) is not a valid version (DELTA_VERSION_INVALID): {name} "
            f"must be a non-negative integer.",
            delta_error_class="DELTA_VERSION_INVALID",
        )


def _end_before_start(start: int, end: int) -> InvalidChangeRangeError:
    return InvalidChangeRangeError(
        f"Change range from start {start} to end {end} was invalid. End cannot be before start "
        f"(DELTA_INVALID_CDC_RANGE).",
        delta_error_class="DELTA_INVALID_CDC_RANGE",
    )


def _first_version_at_or_after(
    latest: Snapshot, timestamp: Timestamp, stamps: list[CommitTimestamp] | None
) -> int:
    """The first version committed at or after ``timestamp`` (the earliest one when all are after),
    as Delta's ``DeltaSource.getStartingVersionFromTimestamp``.

    :raises TimestampLaterThanLatestCommitError: every commit is before ``timestamp``.
    """
    target = to_millis(timestamp)
    stamps = stamps if stamps is not None else commit_timestamps(latest)
    for stamp in stamps:
        if stamp.timestamp >= target:
            return stamp.version
    last = stamps[-1] if stamps else None
    committed = format_ms(last.timestamp) if last else "never"
    raise TimestampLaterThanLatestCommitError(
        f"The provided timestamp ({describe_timestamp(timestamp, target)}) is after the latest version "
        f"of {latest.storage.root_uri} (version {latest.version}, committed {committed}) "
        f"(DELTA_TIMESTAMP_GREATER_THAN_COMMIT). Use a starting timestamp at or before {committed}."
    )


def range_commit_files(latest: Snapshot, changes: ChangeRange) -> tuple[list[LogFile], dict[int, int]]:
    """The commit files of the range, in version order, and each one's modification time made
    strictly increasing over the log (:func:`~.timeline.file_times`, as time travel has them: a
    listing of the log from its first commit, whose times are read up to the range's end).

    :raises CommitsCleanedUpError: a commit of the range is no longer in the log (log cleanup).
    :raises VersionGapError: a commit of the range is missing between two that are there.
    """
    listing = [f for f in list_log_files(latest.storage, 0, stat=False) if f.kind is LogFileKind.COMMIT]
    times = file_times(listing, changes.end)
    by_version = {f.version: f for f in listing}
    files = []
    for version in changes.versions:
        found = by_version.get(version)
        if found is None:
            raise _missing_commit(latest, version, [f.version for f in listing])
        files.append(found)
    return files, times


def commit_time(commit: CommitActions, times: Mapping[int, int], rule: CommitTimeRule) -> int:
    """When a commit of the range happened, in milliseconds, by the table's ``rule``: its
    in-commit timestamp where they are in force, else its file's modification time made
    increasing (``times``, from :func:`range_commit_files`).

    :raises CorruptLogError: the in-commit timestamp lies outside what a timestamp can hold.
    """
    return checked_commit_time(
        rule.stamp(commit.version, times[commit.version], commit.commit_info), commit.path
    )


def checked_commit_time(stamp: CommitTimestamp, path: str) -> int:
    """``stamp``'s time, refused when it is an in-commit timestamp no ``_commit_timestamp`` holds.

    :param path: the commit file, named in the error.
    :raises CorruptLogError: the in-commit timestamp lies outside what a timestamp can hold.
    """
    ict = stamp.timestamp
    if stamp.source != "inCommitTimestamp" or -MAX_COMMIT_MILLIS <= ict <= MAX_COMMIT_MILLIS:
        return ict
    raise CorruptLogError(
        f"Version {stamp.version} of the table has commitInfo.inCommitTimestamp {ict} "
        f"({format_ms(ict)}), a time no timestamp holds (microseconds in a long reach about "
        f"292,000 years either side of 1970), so its changes cannot be given a _commit_timestamp. "
        f"The commit {path} is corrupt; read the changes of the versions before or after it.",
        path=path,
    )


def _missing_commit(latest: Snapshot, version: int, listed: list[int]) -> Exception:
    storage = latest.storage
    if any(v < version for v in listed):
        return VersionGapError(
            f"The Delta log of {storage.root_uri} has no commit for version {version} although later and "
            f"earlier commits are there. The log is incomplete; restore {commit_name(version)}.",
            missing_version=version,
            path=storage.to_uri(storage.log_path(commit_name(version))),
        )
    earliest = min((v for v in listed if v > version), default=None)
    retention = latest.config.log_retention
    after = (
        f"The earliest version still in the log is {earliest}: read changes from version {earliest} on"
        if earliest is not None
        else "No commit of that range is left in the log: read the changes from a later version"
    )
    return CommitsCleanedUpError(
        f"The changes of version {version} of {storage.root_uri} are no longer available: its commit file "
        f"was removed from the log by log cleanup, which deletes commits older than "
        f"{retention.describe()}. {after}, or start again from a full snapshot "
        f"(DeltaTable.snapshot()). To keep changes longer, raise {retention.name} on the table.",
        version=version,
        earliest_version=earliest,
    )
