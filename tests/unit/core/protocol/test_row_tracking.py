"""Row tracking: baseRowId / defaultRowCommitVersion on every add, the high-water mark, retries.

Every written action is checked field by field against PROTOCOL.md § Row Tracking, and
delta-rs reads the tables.
"""

from __future__ import annotations

import itertools
import json
import os
import uuid

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import InvalidLogValueError, RowTrackingError
from airflow_delta_provider.core.protocol.actions import AddFile, DomainMetadata
from airflow_delta_provider.core.protocol.row_tracking import assign_row_ids
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.string())])
TRACKED = {"delta.enableRowTracking": "true"}


def part(table: DeltaTable, ds: str, n: int) -> str:
    relative = f"w-{uuid.uuid4().hex[:8]}/ds={ds}/part-0.parquet"
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(range(n), pa.int64())}), path)
    return relative


def commit_lines(table: DeltaTable, version: int) -> list[dict]:
    with open(os.path.join(table.storage.log_dir, f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f]


def adds(table: DeltaTable, version: int) -> list[dict]:
    return [a["add"] for a in commit_lines(table, version) if "add" in a]


def marks(table: DeltaTable, version: int) -> list[int]:
    return [
        json.loads(a["domainMetadata"]["configuration"])["rowIdHighWaterMark"]
        for a in commit_lines(table, version)
        if "domainMetadata" in a and a["domainMetadata"]["domain"] == "delta.rowTracking"
    ]


def ranges(table: DeltaTable) -> list[tuple[int, int]]:
    """(first, last) row id of every live file, from the snapshot."""
    files = table.snapshot().files()
    out = []
    for base, stats in zip(files["base_row_id"].to_pylist(), files["stats"].to_pylist(), strict=True):
        out.append((base, base + json.loads(stats)["numRecords"] - 1))
    return sorted(out)


def assert_disjoint(spans: list[tuple[int, int]]) -> None:
    for (_, last), (first, _) in itertools.pairwise(spans):
        assert first > last, spans


@pytest.fixture
def table(tmp_path):
    return DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"], properties=TRACKED)


def test_create_lists_row_tracking_and_domain_metadata(table):
    protocol, metadata = commit_lines(table, 0)[1]["protocol"], commit_lines(table, 0)[2]["metaData"]
    assert protocol == {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["domainMetadata", "rowTracking"],
    }
    config = metadata["configuration"]
    assert config["delta.enableRowTracking"] == "true"
    assert config["delta.rowTracking.materializedRowIdColumnName"].startswith("_row-id-col-")
    assert config["delta.rowTracking.materializedRowCommitVersionColumnName"].startswith(
        "_row-commit-version-col-"
    )


def test_appends_assign_consecutive_ranges_above_the_mark(table):
    table.commit_files([part(table, "a", 3), part(table, "b", 4)])
    table.commit_files([part(table, "a", 5)])
    first, second = adds(table, 1), adds(table, 2)
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in first] == [(0, 1), (3, 1)]
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in second] == [(7, 2)]
    assert (marks(table, 1), marks(table, 2)) == ([6], [11])
    # The domain comes before the file actions, and the snapshot knows the mark.
    kinds = [next(iter(a)) for a in commit_lines(table, 1)]
    assert kinds == ["commitInfo", "domainMetadata", "add", "add"]
    assert json.loads(table.snapshot().domain_metadata["delta.rowTracking"].configuration) == {
        "rowIdHighWaterMark": 11
    }
    assert deltalake.DeltaTable(table.uri).to_pyarrow_table().num_rows == 12
    # The version checksum lists the live domain (a reader trusts the list as complete).
    with open(os.path.join(table.storage.log_dir, f"{2:020d}.crc")) as f:
        assert json.load(f)["domainMetadata"] == [
            {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":11}', "removed": False}
        ]


def test_overwrite_removes_keep_the_fields_of_their_adds(table):
    table.commit_files([part(table, "a", 2)])
    table.commit_files([part(table, "a", 3)], mode="overwrite")
    removes = [a["remove"] for a in commit_lines(table, 2) if "remove" in a]
    assert [(r["baseRowId"], r["defaultRowCommitVersion"]) for r in removes] == [(0, 1)]
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds(table, 2)] == [(2, 2)]
    assert marks(table, 2) == [4]


def test_a_retry_over_a_concurrent_winner_renumbers_above_the_winners_mark(table, monkeypatch):
    table.commit_files([part(table, "a", 2)])
    loser = DeltaTable(table.uri)
    snapshot = loser.snapshot()
    monkeypatch.setattr(loser, "snapshot", lambda *a, **k: snapshot)
    table.commit_files([part(table, "b", 10)])  # the winner takes version 2 and ids 2..11
    result = loser.commit_files([part(loser, "a", 3)])
    assert (result.version, result.attempts) == (3, 2)
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds(table, 3)] == [(12, 3)]
    assert marks(table, 3) == [14]
    assert_disjoint(ranges(table))


def test_the_checkpoint_carries_the_fields_and_the_domain(table):
    table.commit_files([part(table, "a", 2)])
    table.commit_files([part(table, "b", 3)])
    table.checkpoint()
    checkpoint = pq.read_table(os.path.join(table.storage.log_dir, f"{2:020d}.checkpoint.parquet"))
    rows = checkpoint.to_pylist()
    added = sorted((r["add"]["baseRowId"], r["add"]["defaultRowCommitVersion"]) for r in rows if r.get("add"))
    assert added == [(0, 1), (2, 2)]
    domains = [r["domainMetadata"] for r in rows if r.get("domainMetadata")]
    assert domains == [
        {"domain": "delta.rowTracking", "configuration": '{"rowIdHighWaterMark":4}', "removed": False}
    ]
    reread = DeltaTable(table.uri).snapshot()
    assert sorted(reread.files()["base_row_id"].to_pylist()) == [0, 2]
    assert deltalake.DeltaTable(table.uri).to_pyarrow_table().num_rows == 5


def test_a_commit_that_creates_a_tracked_table_assigns_from_zero(tmp_path):
    table = DeltaTable(str(tmp_path / "t"))
    table.commit_files([part(table, "a", 4)], partition_by=["ds"], properties=TRACKED)
    assert [(a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds(table, 0)] == [(0, 0)]
    assert marks(table, 0) == [3]


def test_suspended_row_tracking_assigns_nothing(tmp_path):
    properties = {"delta.feature.rowTracking": "supported", "delta.rowTrackingSuspended": "true"}
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"], properties=properties)
    table.commit_files([part(table, "a", 2)])
    assert "baseRowId" not in adds(table, 1)[0]
    assert marks(table, 1) == []


def test_supported_but_not_enabled_still_assigns(tmp_path):
    properties = {"delta.feature.rowTracking": "supported"}
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"], properties=properties)
    assert "domainMetadata" in table.snapshot().protocol.writer_features
    table.commit_files([part(table, "a", 2)])
    assert adds(table, 1)[0]["baseRowId"] == 0


def test_an_add_without_num_records_is_refused_and_nothing_is_written(table, log_state):
    before = log_state(table.storage.root)
    add = AddFile(
        path="x.parquet", partition_values={"ds": "a"}, size=1, modification_time=1, data_change=True
    )
    with pytest.raises(RowTrackingError, match=r"without row count statistics.*x\.parquet"):
        OptimisticTransaction(table.storage).commit(CommitPlan("WRITE", adds=(add,)))
    assert log_state(table.storage.root) == before


def test_a_hand_written_mark_is_refused():
    domain = DomainMetadata("delta.rowTracking", '{"rowIdHighWaterMark":99}')
    with pytest.raises(RowTrackingError, match="Manually setting the Row ID high water mark is not allowed"):
        assign_row_ids([domain], high_water_mark=-1, version=1)


# --- the mark is a Delta long: a commit that would push it past 2^63 - 1 is refused -----------------

LONG_MAX = 2**63 - 1


def foreign_mark(table: DeltaTable, version: int, mark: int) -> None:
    """A commit by another writer that assigned row ids up to ``mark`` (a legal long)."""
    domain = {"domain": "delta.rowTracking", "configuration": json.dumps({"rowIdHighWaterMark": mark})}
    lines = [
        {"commitInfo": {"timestamp": 1, "operation": "WRITE"}},
        {"domainMetadata": {**domain, "removed": False}},
    ]
    with open(os.path.join(table.storage.log_dir, f"{version:020d}.json"), "x") as f:
        f.write("\n".join(json.dumps(line) for line in lines) + "\n")


def table_state(table: DeltaTable, log_state) -> tuple:
    fresh = DeltaTable(table.uri)
    return fresh.version(), sorted(fresh.snapshot().files().column("path").to_pylist()), log_state(table.uri)


def test_a_commit_whose_row_ids_would_pass_the_largest_long_is_refused(table, log_state):
    foreign_mark(table, 1, LONG_MAX - 2)  # room for two more rows
    path = part(table, "a", 5)
    before = table_state(table, log_state)
    with pytest.raises(
        InvalidLogValueError,
        match=rf"rowIdHighWaterMark .* is {LONG_MAX + 3}, outside the allowed range of a non-negative Delta "
        rf"long: 0 to {LONG_MAX}\. The commit would assign row ids past the largest Delta long",
    ):
        table.commit_files([path])
    assert table_state(table, log_state) == before


def test_row_ids_up_to_the_largest_long_are_assigned_and_none_beyond(table, log_state):
    foreign_mark(table, 1, LONG_MAX - 5)
    table.commit_files([part(table, "a", 5)])  # ids LONG_MAX - 4 .. LONG_MAX: the last ones there are
    assert [a["baseRowId"] for a in adds(table, 2)] == [LONG_MAX - 4]
    assert marks(table, 2) == [LONG_MAX]
    assert deltalake.DeltaTable(table.uri).to_pyarrow_table().num_rows == 5
    before = table_state(table, log_state)
    with pytest.raises(InvalidLogValueError, match=rf"rowIdHighWaterMark .* is {LONG_MAX + 1}, outside"):
        table.commit_files([part(table, "b", 1)])
    assert table_state(table, log_state) == before


def test_a_retry_renumbered_past_the_largest_long_is_refused(table, log_state, monkeypatch):
    table.commit_files([part(table, "a", 2)])
    loser = DeltaTable(table.uri)
    snapshot = loser.snapshot()
    monkeypatch.setattr(loser, "snapshot", lambda *a, **k: snapshot)
    foreign_mark(table, 2, LONG_MAX - 1)  # the winner: the loser's first attempt fits, its retry does not
    path = part(loser, "a", 3)
    before = table_state(table, log_state)
    with pytest.raises(InvalidLogValueError, match=r"rowIdHighWaterMark .*past the largest Delta long"):
        loser.commit_files([path])
    assert table_state(table, log_state) == before
