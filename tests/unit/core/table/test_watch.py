"""Polling a table for new commits: filters, cost, cleanup-outrun cursors."""

from __future__ import annotations

import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import CorruptLogError, DeltaTable
from airflow_delta_provider.core.table.watch import CommitFilter, poll

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.string())])


def commit(table: DeltaTable, ds: str, **kwargs) -> None:
    relative = f"w-{uuid.uuid4().hex[:8]}/ds={ds}/p.parquet"
    os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
    pq.write_table(pa.table({"id": [1]}), os.path.join(table.storage.root, relative))
    table.commit_files([relative], **kwargs)


@pytest.fixture
def table(tmp_path):
    return DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"])


class CountingStorage:
    """Counts the storage calls a poll makes (a spy around the real storage)."""

    def __init__(self, storage):
        self.storage, self.calls = storage, []

    def __getattr__(self, name):
        attr = getattr(self.storage, name)
        if name in ("read_bytes", "list_from", "list_log", "info", "exists", "walk"):

            def counted(*args, **kwargs):
                self.calls.append(name)
                return attr(*args, **kwargs)

            return counted
        return attr


def test_nothing_new_costs_two_reads_and_no_listing(table):
    commit(table, "a")
    spy = CountingStorage(table.storage)
    table.storage = spy
    result = poll(table, 1)
    assert result.matched == [] and result.cursor == 1
    assert spy.calls == ["read_bytes", "read_bytes"]  # 2.json (missing) and _last_checkpoint


def test_new_commits_are_returned_oldest_first(table):
    commit(table, "a")
    commit(table, "b")
    result = poll(table, 0)
    assert [c.version for c in result.matched] == [1, 2]
    assert result.cursor == 2
    assert result.matched[0].operation == "WRITE" and result.matched[0].data_change


def test_filters(table):
    commit(table, "a")
    commit(table, "b", app_id="x", app_version=1)
    table.checkpoint()
    assert [c.version for c in poll(table, 0, CommitFilter(partition_values={"ds": "b"})).matched] == [2]
    assert poll(table, 0, CommitFilter(operations=["MERGE"])).matched == []
    assert [c.version for c in poll(table, -1, CommitFilter(operations=["create table"])).matched] == [0]
    assert [c.version for c in poll(table, -1, CommitFilter(data_changes_only=True)).matched] == [1, 2]


def test_vacuum_commits_are_not_data_changes(table):
    commit(table, "a")
    table.vacuum(retention="0 hours", enforce_retention_duration=False)
    versions = [c.version for c in poll(table, 1, CommitFilter(data_changes_only=True)).matched]
    assert versions == []
    assert len(poll(table, 1).matched) == 2  # VACUUM START and END


def test_after_timestamp_without_a_cursor(table):
    commit(table, "a")
    newest = poll(table, 0).matched[-1].timestamp
    result = poll(table, None, CommitFilter(after_timestamp=newest))
    assert [c.version for c in result.matched] == [1]


def test_a_missing_table_waits(tmp_path):
    result = poll(DeltaTable(str(tmp_path / "nothing")), None)
    assert not result.table_exists and result.cursor is None


def test_a_cursor_outrun_by_log_cleanup_resumes_at_the_latest(table):
    for ds in "abc":
        commit(table, ds)
    table.checkpoint()
    for v in range(0, 3):
        os.remove(os.path.join(table.storage.log_dir, f"{v:020d}.json"))
    result = poll(table, 0)
    assert result.cursor == 3 and [c.version for c in result.matched] == [3]


def test_a_corrupt_commit_raises_with_its_name(table):
    with open(os.path.join(table.storage.log_dir, f"{1:020d}.json"), "w") as f:
        f.write("{not json\n")
    with pytest.raises(CorruptLogError, match=r"00000000000000000001\.json"):
        poll(table, 0)


def test_the_payload_says_the_range_the_event_covers(table):
    """From the version after the previous cursor (filtered-out versions included) to the newest match;
    without a cursor, from the first match."""
    from airflow_delta_provider.core.table.watch import payload

    commit(table, "a")  # 1
    commit(table, "b")  # 2
    commit(table, "a")  # 3
    only_a = CommitFilter(partition_values={"ds": "a"})
    event = payload(table.uri, poll(table, 0, only_a), 0)
    assert (event["from_version"], event["to_version"], event["versions"]) == (1, 3, [1, 3])
    event = payload(table.uri, poll(table, 1, only_a), 1)
    assert (event["from_version"], event["to_version"], event["versions"]) == (2, 3, [3])
    event = payload(table.uri, poll(table, None, only_a), None)
    assert (event["from_version"], event["to_version"]) == (1, 3)


# --- partition filters ------------------------------------------------------------------------


def replace(table, ds):
    """Replace partition ``ds`` with one new file (removes and an add)."""
    relative = f"w-{uuid.uuid4().hex[:8]}/ds={ds}/p.parquet"
    os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
    pq.write_table(pa.table({"id": [1]}), os.path.join(table.storage.root, relative))
    table.commit_files([relative], mode="overwrite", replace_where=f"ds = '{ds}'")


def test_a_partition_filter_matches_commits_that_changed_data_there(table):
    from airflow_delta_provider.core.table.watch import payload

    commit(table, "a")  # 1
    commit(table, "b")  # 2
    table.delete("ds = 'a'")  # 3: removes only
    replace(table, "b")  # 4
    only_a = CommitFilter(partition_filter="ds = 'a'")
    result = poll(table, 0, only_a)
    assert [c.version for c in result.matched] == [1, 3]
    assert result.partitions == [{"ds": "a"}]
    event = payload(table.uri, result, 0)
    assert event["partitions"] == [{"ds": "a"}] and not event["partitions_truncated"]
    both = poll(table, 0, CommitFilter(partition_filter="ds IN ('a', 'b') AND ds <> 'a'"))
    assert [c.version for c in both.matched] == [2, 4] and both.partitions == [{"ds": "b"}]
    # Without a filter every commit matches, and the payload lists every partition changed.
    assert poll(table, 0).partitions == [{"ds": "a"}, {"ds": "b"}]


def test_a_commit_that_changes_no_data_touches_no_partition(table):
    commit(table, "a")
    commit(table, "a")
    table.optimize()
    latest = table.version()
    assert table.history(1)[0]["operation"] == "OPTIMIZE"
    assert poll(table, latest - 1, CommitFilter(partition_filter="ds = 'a'")).matched == []


def test_a_partition_filter_the_table_cannot_judge_is_refused_before_any_commit(table, tmp_path):
    from airflow_delta_provider.core.expressions import PredicateError
    from airflow_delta_provider.core.table import check_partition_filter

    for text, message in (
        ("id = 1", "not a partition column"),
        ("nope = 1", "not a column"),
        ("ds =", "Cannot parse"),
    ):
        with pytest.raises(PredicateError, match=message):
            check_partition_filter(table, text)
    check_partition_filter(DeltaTable(str(tmp_path / "later")), "ds = 'a'")  # judged once it exists


def test_at_most_a_hundred_partitions_are_listed(table):
    from airflow_delta_provider.core.table.watch import MAX_PAYLOAD_PARTITIONS, payload

    relatives = []
    for n in range(MAX_PAYLOAD_PARTITIONS + 5):
        relative = f"many/ds={n:03d}/p.parquet"
        os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
        pq.write_table(pa.table({"id": [1]}), os.path.join(table.storage.root, relative))
        relatives.append(relative)
    table.commit_files(relatives)
    event = payload(table.uri, poll(table, 0), 0)
    assert len(event["partitions"]) == MAX_PAYLOAD_PARTITIONS and event["partitions_truncated"]
    assert event["partitions"][0] == {"ds": "000"}
