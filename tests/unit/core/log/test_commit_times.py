"""One rule for when a version was committed (core/log/timeline.py, CommitTimeRule), whoever asks:
time travel, the change feed's ``_commit_timestamp`` and its timestamp bounds, the history, the
watcher, the consumer, VACUUM LITE and RESTORE's retention check.

The rule is Delta's (``DeltaHistoryManager``): ``commitInfo.inCommitTimestamp`` only for the versions
at or after ``delta.inCommitTimestampEnablementVersion`` while the table's latest metadata enables
in-commit timestamps; the commit file's modification time made strictly increasing everywhere else.
Each table below holds in-commit timestamps where they are not in force, an hour or ten days off
their file's time, so that a reader taking them would give another time (and select another
version when the time is given back).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.lifecycle.restore import check_retention
from airflow_delta_provider.core.log.timeline import CommitTimeRule, commit_times
from airflow_delta_provider.core.maintenance.vacuum.plan import latest_commit_at_or_before
from airflow_delta_provider.core.table.consumer import commit_time
from airflow_delta_provider.core.table.watch import CommitFilter, poll

if TYPE_CHECKING:
    from pathlib import Path

BASE = 1_700_000_000_000
HOUR = 3_600_000
DAY = 24 * HOUR
VERSIONS = 7
ICT_ON = {"delta.enableInCommitTimestamps": "true"}


def file_time(version: int) -> int:
    return BASE + 10_000 * version


def write_table(log_writer: Any, configurations: dict[int, dict[str, str]], icts: dict[int, int]) -> Path:
    """Versions 0 to 6 of a one-column table, each adding one file; ``configurations``: the metaData
    a version writes (version 0 always writes one); ``icts``: the in-commit timestamps commits carry.
    Commit file ``v`` was written at :func:`file_time` ``(v)``."""
    root = log_writer.root
    for version in range(VERSIONS):
        pq.write_table(pa.table({"id": pa.array([version], pa.int64())}), root / f"f{version}.parquet")
        size = (root / f"f{version}.parquet").stat().st_size
        info = {"commitInfo": {"timestamp": file_time(version), "operation": "WRITE"}}
        if version in icts:
            info["commitInfo"]["inCommitTimestamp"] = icts[version]
        actions = [info]
        if version == 0:
            actions.append(log_writer.protocol(1, 2))
        if version in configurations or version == 0:
            actions.append(
                log_writer.metadata({"delta.enableChangeDataFeed": "true", **configurations.get(version, {})})
            )
        actions.append(log_writer.add(f"f{version}.parquet", size=size))
        path = log_writer.commit(version, *actions)
        os.utime(path, ns=(file_time(version) * 1_000_000,) * 2)
    return root


#: name -> (metaData configurations by version, in-commit timestamps by version, expected times)
SHAPES = {
    # A writer that puts inCommitTimestamp into commits of a table without the feature.
    "never-enabled": (
        {},
        {2: file_time(2) - HOUR, 4: file_time(4) - 10 * DAY},
        {v: file_time(v) for v in range(VERSIONS)},
    ),
    # Enabled at version 3: the timestamps versions 1 and 2 carry are not commit times.
    "enabled-at-3": (
        {3: {**ICT_ON, "delta.inCommitTimestampEnablementVersion": "3"}},
        {
            1: file_time(1) - HOUR,
            2: file_time(2) - 10 * DAY,
            **{v: file_time(v) + 5_000 for v in range(3, 7)},
        },
        {**{v: file_time(v) for v in range(3)}, **{v: file_time(v) + 5_000 for v in range(3, 7)}},
    ),
    # Enabled at version 2, disabled at version 5: no version is dated by in-commit timestamp.
    "enabled-then-disabled": (
        {
            2: {**ICT_ON, "delta.inCommitTimestampEnablementVersion": "2"},
            5: {"delta.enableInCommitTimestamps": "false"},
        },
        {2: file_time(2) - 10 * DAY, 3: file_time(3) - HOUR, 4: file_time(4) - HOUR, 6: file_time(6) - HOUR},
        {v: file_time(v) for v in range(VERSIONS)},
    ),
    # Enabled from the start: every version is dated by its in-commit timestamp.
    "enabled-from-0": (
        {0: ICT_ON},
        {v: file_time(v) + 3_000 for v in range(VERSIONS)},
        {v: file_time(v) + 3_000 for v in range(VERSIONS)},
    ),
}


def feed_times(table: DeltaTable, start: int = 0) -> dict[int, int]:
    """``_commit_timestamp`` per version of the change feed's rows (ms)."""
    rows = table.changes(start).to_pyarrow_table(["_commit_version", "_commit_timestamp"]).to_pylist()
    return {r["_commit_version"]: int(r["_commit_timestamp"].timestamp() * 1000) for r in rows}


@pytest.mark.parametrize("shape", SHAPES)
def test_every_reader_dates_a_version_by_the_one_rule(log_writer: Any, shape: str) -> None:
    configurations, icts, expected = SHAPES[shape]
    table = DeltaTable(str(write_table(log_writer, configurations, icts)))
    latest = table.snapshot()
    assert {s.version: s.timestamp for s in table.commit_timestamps()} == expected
    assert feed_times(table) == expected
    for start in range(1, VERSIONS):  # a range's times do not depend on where it starts
        assert feed_times(table, start) == {v: t for v, t in expected.items() if v >= start}
    assert {e["version"]: e["timestamp"] for e in table.history()} == expected
    assert {s.version: s.timestamp for s in poll(table, None).matched} == expected
    assert {
        v: s.timestamp
        for v, s in commit_times(latest.storage, range(VERSIONS), CommitTimeRule(latest)).items()
    } == expected
    for version, when in expected.items():
        assert commit_time(latest, version) == when
        assert latest_commit_at_or_before(latest, when) == version


@pytest.mark.parametrize("shape", SHAPES)
def test_a_commit_timestamp_given_back_selects_its_version(log_writer: Any, shape: str) -> None:
    """A row's ``_commit_timestamp`` as a starting or ending timestamp, a time travel target or a
    watcher's ``after_timestamp`` selects the version the row came from."""
    configurations, icts, _ = SHAPES[shape]
    table = DeltaTable(str(write_table(log_writer, configurations, icts)))
    for version, when in feed_times(table).items():
        moment = dt.datetime.fromtimestamp(when / 1000, dt.UTC)
        changes = table.changes(starting_timestamp=moment)
        assert changes.start_version == version
        assert table.changes(starting_version=0, ending_timestamp=moment).end_version == version
        assert table.version_at(moment).version == version
        assert table.snapshot(timestamp=moment).version == version
        after = poll(table, None, CommitFilter(after_timestamp=when)).matched
        assert [s.version for s in after] == list(range(version, VERSIONS))


def test_the_rule_reads_the_tables_own_properties_from_its_latest_metadata(log_writer: Any) -> None:
    configurations, icts, _ = SHAPES["enabled-then-disabled"]
    table = DeltaTable(str(write_table(log_writer, configurations, icts)))
    assert CommitTimeRule(table.snapshot()).ict_since is None
    assert CommitTimeRule(table.snapshot(4)).ict_since == 2  # what it was before version 5
    # Provider-wide defaults do not switch a table's in-commit timestamps on.
    defaulted = DeltaTable(table.uri, provider_defaults={"delta.enableInCommitTimestamps": "true"})
    assert {s.version: s.timestamp for s in defaulted.commit_timestamps()} == SHAPES["enabled-then-disabled"][
        2
    ]


def test_restore_dates_its_target_by_the_rule(log_writer: Any) -> None:
    """Version 2 of the enabled-then-disabled table carries an in-commit timestamp ten days old: the
    retention check dates it by its file (a day old), as time travel does, and lets it be restored."""
    configurations, icts, _ = SHAPES["enabled-then-disabled"]
    table = DeltaTable(str(write_table(log_writer, configurations, icts)))
    check_retention(table.snapshot(), table.snapshot(2), now_ms=file_time(2) + DAY)


def test_file_times_are_made_increasing_over_the_whole_log_whoever_reads(log_writer: Any) -> None:
    """Commit 0's file is dated after 120 later commits (a clock ahead): every later version's time
    is raised above it by the same 1 ms steps, whether the change feed reads its range (which Delta
    monotonizes from 100 versions before it) or time travel the whole log."""
    root = log_writer.root
    count = 121
    for version in range(count):
        actions = [log_writer.commit_info()]
        if version == 0:
            actions += [log_writer.protocol(1, 2), log_writer.metadata()]
        actions.append(log_writer.add(f"f{version}.parquet"))
        path = log_writer.commit(version, *actions)
        os.utime(path, ns=((BASE + (HOUR if version == 0 else version)) * 1_000_000,) * 2)
    table = DeltaTable(str(root))
    expected = {v: BASE + HOUR + v for v in range(count)}
    assert {s.version: s.timestamp for s in table.commit_timestamps()} == expected
    files = table.changes(count - 1).files()
    when = files["_commit_timestamp"].to_pylist()[0]
    assert int(when.timestamp() * 1000) == expected[count - 1]
    assert table.changes(starting_timestamp=when).start_version == count - 1
