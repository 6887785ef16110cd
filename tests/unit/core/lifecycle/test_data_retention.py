"""Data retention as a policy: the rows older than ``now - keep`` deleted through DELETE (whole files
for a partition column or a date partition generated from the column, rows otherwise), the policy
from the argument or the table property, the typed decision and report, the fraction refusal, and
every class of bad value refused with the table unchanged."""

from __future__ import annotations

import json
import os
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delete_support import commit_actions, kind, state

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    DataRetentionError,
    DataRetentionLimitError,
    InvalidTablePropertyError,
    RetentionError,
)
from airflow_delta_provider.core.lifecycle.data_retention import data_retention_due
from airflow_delta_provider.core.protocol.actions import AddFile
from airflow_delta_provider.core.protocol.table_config import DATA_RETENTION
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan, CommitProperties

if TYPE_CHECKING:
    from pathlib import Path

NOW = datetime(2026, 4, 11, 12, 0, tzinfo=UTC)
FIRST = date(2026, 1, 1)
#: Ten days of events, ten days apart (2026-01-01 ... 2026-03-22), three rows each.
DAYS = [FIRST + timedelta(days=10 * k) for k in range(10)]
SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us", tz="UTC")), ("ds", pa.string())])
KEEP_75 = {"column": "ds", "keep": "interval 75 days"}  # cutoff 2026-01-26: the first three days go


def events(root: Path, properties: dict[str, str] | None = None, *, partitioned: bool = True) -> DeltaTable:
    schema = SCHEMA if partitioned else pa.schema([f for f in SCHEMA if f.name != "ds"])
    table = DeltaTable.create(
        str(root), schema, partition_by=["ds"] if partitioned else [], properties=properties or {}
    )
    files = []
    for k, day in enumerate(DAYS):
        directory = f"ds={day.isoformat()}/" if partitioned else ""
        os.makedirs(root / directory, exist_ok=True)
        start = datetime(day.year, day.month, day.day, tzinfo=UTC)
        rows = {"id": [3 * k, 3 * k + 1, 3 * k + 2], "ts": [start + timedelta(hours=h) for h in (1, 12, 23)]}
        pq.write_table(
            pa.table(rows, schema=pa.schema([SCHEMA.field("id"), SCHEMA.field("ts")])),
            root / f"{directory}part-{k}.parquet",
        )
        files.append(f"{directory}part-{k}.parquet")
    table.commit_files(files)
    return table


def ids(table: DeltaTable) -> list[int]:
    return sorted(table.snapshot().to_pyarrow_table().column("id").to_pylist())


def rs_ids(table: DeltaTable) -> list[int]:
    rs = deltalake.DeltaTable(table.uri)
    data = deltalake.QueryBuilder().register("t", rs).execute("select id from t").read_all()
    return sorted(pa.table(data).column(0).to_pylist())


# --- what a run deletes ----------------------------------------------------------------------


def test_a_partition_column_deletes_whole_files_without_reading_them(tmp_path: Path) -> None:
    table = events(tmp_path / "t")
    # The files of the days that go are unreadable: a metadata-only delete never opens them.
    for k in range(3):
        (tmp_path / "t" / f"ds={DAYS[k].isoformat()}" / f"part-{k}.parquet").write_bytes(b"gone")

    result = table.apply_data_retention(policy=KEEP_75, now=NOW)

    assert result.committed and result.num_deleted_rows == 9
    decision = result.decision
    assert (decision.metadata_only, decision.num_rows, decision.num_rows_to_delete) == (True, 30, 9)
    assert (decision.predicate, decision.parameters) == ("`ds` < :cutoff", {"cutoff": "2026-01-26"})
    assert decision.cutoff == datetime(2026, 1, 26, tzinfo=UTC)
    assert ids(table) == list(range(9, 30)) == rs_ids(table)
    actions = commit_actions(table, result.delete.version)  # type: ignore[union-attr]
    info = kind(actions, "commitInfo")[0]
    assert info["operation"] == "DELETE"
    assert info["operationParameters"]["predicate"] == json.dumps(["`ds` < :cutoff"])  # the tag has the value
    tag = json.loads(info["tags"][DATA_RETENTION])
    assert (tag["column"], tag["keep"], tag["cutoff"]) == (
        "ds",
        "interval 75 days",
        "2026-01-26T00:00:00+00:00",
    )
    assert len(kind(actions, "remove")) == 3 and kind(actions, "add") == []
    report = result.to_dict()
    assert (report["committed"], report["num_deleted_rows"], report["num_removed_files"]) == (True, 9, 3)
    assert report["decision"]["policy"]["source"] == "argument"
    assert report["delete"]["mode"] == "metadata"


@pytest.mark.parametrize(
    "properties", [{}, {"delta.enableDeletionVectors": "true"}], ids=["copy-on-write", "dv"]
)
def test_a_timestamp_data_column_deletes_the_older_rows(tmp_path: Path, properties: dict[str, str]) -> None:
    table = events(tmp_path / "t", properties, partitioned=False)
    # Cutoff 2026-01-21T13:00Z: that day's rows at 01:00 and 12:00 go, its 23:00 row stays.
    policy = {"column": "ts", "keep": "interval 79 days 23 hours"}
    result = table.apply_data_retention(policy=policy, now=NOW)
    assert result.decision.cutoff == datetime(2026, 1, 21, 13, 0, tzinfo=UTC)
    assert not result.decision.metadata_only and result.num_deleted_rows == 8
    assert ids(table) == [8, *range(9, 30)] == rs_ids(table)
    expected = "deletion_vectors" if properties else "copy_on_write"
    assert result.delete is not None and result.delete.mode == expected


def test_rows_already_deleted_are_not_counted_again(tmp_path: Path) -> None:
    table = events(tmp_path / "t", {"delta.enableDeletionVectors": "true"}, partitioned=False)
    table.delete("id IN (0, 1)")
    decision = data_retention_due(table.snapshot(), {"column": "ts", "keep": "interval 85 days"}, now=NOW)
    assert (decision.num_rows, decision.num_rows_to_delete) == (28, 4)


@pytest.mark.parametrize(
    ("column_type", "partition_day", "kept_from"),
    # A zone-less timestamp casts to its own date: the days before the cutoff's go. A zoned one is
    # cast in Spark's session zone, which may put a row a day earlier: one more day is kept.
    [("timestamp_ntz", "2026-01-22", 9), ("timestamp", "2026-01-21", 6)],
)
def test_a_date_partition_generated_from_the_column_deletes_whole_days(
    tmp_path: Path, column_type: str, partition_day: str, kept_from: int
) -> None:
    generated = {"delta.generationExpression": "CAST(`ts` AS DATE)"}
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "ts", "type": column_type, "nullable": True, "metadata": {}},
            {"name": "d", "type": "date", "nullable": True, "metadata": generated},
        ],
    }
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), json.dumps(schema), partition_by=["d"])
    adds = []
    for k, day in enumerate(DAYS):
        os.makedirs(root / f"d={day}", exist_ok=True)
        start = datetime(day.year, day.month, day.day)
        stamps = pa.array([start + timedelta(hours=h) for h in (1, 12, 23)], pa.timestamp("us"))
        path = root / f"d={day}/part-{k}.parquet"
        pq.write_table(pa.table({"id": [3 * k, 3 * k + 1, 3 * k + 2], "ts": stamps}), path)
        stats = json.dumps({"numRecords": 3})
        adds.append(
            AddFile(f"d={day}/part-{k}.parquet", {"d": str(day)}, path.stat().st_size, 1, stats=stats)
        )
    # Committed as Spark would (the core checks a generated column of a zoned timestamp only on Spark).
    transaction = OptimisticTransaction(
        table.storage, read_snapshot=table.snapshot(), properties=CommitProperties()
    )
    transaction.commit(CommitPlan("WRITE", adds=tuple(adds)))
    before = state(table)

    # Cutoff 2026-01-22T12:00Z.
    decision = data_retention_due(table.snapshot(), {"column": "ts", "keep": "interval 79 days"}, now=NOW)
    assert decision.metadata_only and decision.predicate == "`d` < :cutoff"
    assert decision.parameters == {"cutoff": date.fromisoformat(partition_day)}
    assert decision.num_rows_to_delete == kept_from
    if column_type == "timestamp_ntz":  # (a zoned timestamp's files would need Spark to be written)
        result = table.apply_data_retention(policy={"column": "ts", "keep": "interval 79 days"}, now=NOW)
        assert ids(table) == list(range(kept_from, 30))
        assert result.delete is not None and result.delete.mode == "metadata"
    else:
        assert state(table) == before


def test_the_table_property_is_the_policy(tmp_path: Path) -> None:
    table = events(tmp_path / "t", {DATA_RETENTION: json.dumps(KEEP_75)})
    result = table.apply_data_retention(now=NOW)
    assert result.committed and result.num_deleted_rows == 9
    assert result.decision.policy.to_dict()["source"] == "table property"
    # An argument wins over the property.
    other = table.apply_data_retention(
        policy={"column": "ds", "keep": "interval 60 days"}, now=NOW, dry_run=True
    )
    assert other.decision.policy.to_dict()["source"] == "argument" and other.decision.num_rows_to_delete == 3


def test_the_property_travels_with_the_table_through_delta_rs_commits(tmp_path: Path) -> None:
    """delta-rs keeps the provider's property through its own commits (an append, a property of its
    own set), and the policy still applies; delta-rs then reads what the run left."""
    table = events(tmp_path / "t", {DATA_RETENTION: json.dumps(KEEP_75)})
    late = pa.table({"id": [100], "ts": [NOW], "ds": [NOW.date().isoformat()]}, schema=SCHEMA)
    deltalake.write_deltalake(table.uri, late, mode="append")
    deltalake.DeltaTable(table.uri).alter.set_table_properties(
        {"delta.logRetentionDuration": "interval 60 days"}
    )
    assert json.loads(deltalake.DeltaTable(table.uri).metadata().configuration[DATA_RETENTION]) == KEEP_75

    result = table.apply_data_retention(now=NOW)

    assert result.decision.policy.to_dict()["source"] == "table property" and result.num_deleted_rows == 9
    assert ids(table) == [*range(9, 30), 100] == rs_ids(table)


def test_without_a_policy_nothing_is_due(tmp_path: Path) -> None:
    table = events(tmp_path / "t")
    before = state(table)
    result = table.apply_data_retention(now=NOW)
    assert (result.committed, result.decision.due, result.decision.policy.value) == (False, False, None)
    assert "no data retention policy" in result.decision.reason
    assert state(table) == before


def test_a_dry_run_counts_and_deletes_nothing(tmp_path: Path) -> None:
    table = events(tmp_path / "t")
    before = state(table)
    result = table.apply_data_retention(policy=KEEP_75, now=NOW, dry_run=True)
    assert (result.dry_run, result.committed, result.decision.due, result.decision.num_rows_to_delete) == (
        True,
        False,
        True,
        9,
    )
    assert result.to_dict()["num_deleted_rows"] == 0
    assert state(table) == before


def test_a_second_run_finds_nothing_and_writes_nothing(tmp_path: Path) -> None:
    table = events(tmp_path / "t")
    table.apply_data_retention(policy=KEEP_75, now=NOW)
    before = state(table)
    again = table.apply_data_retention(policy=KEEP_75, now=NOW + timedelta(hours=1))
    assert (again.committed, again.decision.due, again.decision.num_rows_to_delete) == (False, False, 0)
    assert "nothing to delete" in again.decision.reason
    assert state(table) == before


# --- refusals: the table is unchanged ----------------------------------------------------------


def test_more_than_the_fraction_is_refused_and_raising_it_allows_the_run(tmp_path: Path) -> None:
    table = events(tmp_path / "t")
    before = state(table)
    typo = {"column": "ds", "keep": "interval 7 days"}  # meant 70: every day would go
    for dry_run in (True, False):
        with pytest.raises(
            DataRetentionLimitError, match=r"30 of 30 row\(s\) \(100.0%\).*max_deleted_fraction=0.5"
        ):
            table.apply_data_retention(policy=typo, now=NOW, dry_run=dry_run)
    assert state(table) == before
    decision = data_retention_due(table.snapshot(), typo, now=NOW)
    assert decision.limit_exceeded and not decision.due
    result = table.apply_data_retention(policy={**typo, "max_deleted_fraction": 1}, now=NOW)
    assert result.num_deleted_rows == 30 and ids(table) == []


@pytest.mark.parametrize(
    ("policy", "error", "match"),
    [
        (
            {"column": "dss", "keep": "interval 75 days"},
            DataRetentionError,
            r"'dss' is not a column.*\['id', 'ts', 'ds'\]",
        ),
        ({"column": "DS", "keep": "interval 75 days"}, DataRetentionError, "did you mean 'ds'"),
        ({"column": "id", "keep": "interval 75 days"}, DataRetentionError, "must hold a date or a timestamp"),
        ({"column": "ds", "keep": "75"}, RetentionError, "is not an interval"),
        ({"column": "ds", "keep": 75}, RetentionError, "with its unit"),
        ({"column": "ds", "keep": "interval 75 dayz"}, RetentionError, "unit 'dayz'"),
        ({"column": "ds", "keep": "interval 3 months"}, RetentionError, "unit 'months'"),
        ({"column": "ds", "keep": "interval 0 days"}, RetentionError, "keeps nothing"),
        ({"column": "ds", "keep": "-5 days"}, RetentionError, "negative"),
        ({"column": "ds"}, RetentionError, "needs 'keep'"),
        ({"keep": "interval 75 days"}, RetentionError, "needs 'column'"),
        ({"column": " ", "keep": "interval 75 days"}, RetentionError, "needs 'column'"),
        ({"colum": "ds", "keep": "interval 75 days"}, RetentionError, r"unknown key\(s\) \['colum'\]"),
        ({**KEEP_75, "max_deleted_fraction": 1.5}, RetentionError, "above 0 and at most 1"),
        ({**KEEP_75, "max_deleted_fraction": 0}, RetentionError, "above 0 and at most 1"),
        ({**KEEP_75, "max_deleted_fraction": True}, RetentionError, "above 0 and at most 1"),
        ({**KEEP_75, "max_deleted_fraction": "0.9"}, RetentionError, "above 0 and at most 1"),
        ('{"column": "ds", "keep": ', RetentionError, "must be a policy"),
        ("ds 75 days", RetentionError, "must be a policy"),
        (["ds", "75 days"], RetentionError, "must be a policy"),
    ],
    ids=[
        "unknown-column",
        "wrong-case",
        "not-a-time",
        "bare-number-text",
        "bare-number",
        "bad-unit",
        "months",
        "zero",
        "negative",
        "no-keep",
        "no-column",
        "blank-column",
        "unknown-key",
        "fraction-above-1",
        "fraction-0",
        "fraction-bool",
        "fraction-text",
        "bad-json",
        "not-json",
        "not-a-mapping",
    ],
)
def test_every_class_of_bad_policy_is_refused_and_the_table_is_unchanged(
    tmp_path: Path, policy: Any, error: type[Exception], match: str
) -> None:
    table = events(tmp_path / "t")
    before = state(table)
    for dry_run in (True, False):
        with pytest.raises(error, match=match):
            table.apply_data_retention(policy=policy, now=NOW, dry_run=dry_run)
    assert state(table) == before


def test_a_bad_table_property_is_refused_naming_it(tmp_path: Path) -> None:
    table = events(tmp_path / "t", {DATA_RETENTION: '{"column": "ds", "keep": "90"}'})
    before = state(table)
    with pytest.raises(
        InvalidTablePropertyError, match=r"The table property airflow.dataRetention keep='90'"
    ):
        table.apply_data_retention(now=NOW)
    assert state(table) == before


def test_a_string_data_column_and_a_partition_of_other_formats_are_refused(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.int64()), ("day", pa.string()), ("ds", pa.string())])
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), schema, partition_by=["ds"])
    os.makedirs(root / "ds=01%2F02%2F2026", exist_ok=True)
    pq.write_table(pa.table({"id": [1], "day": ["2026-01-02"]}), root / "ds=01%2F02%2F2026" / "p.parquet")
    table.commit_files(["ds=01%2F02%2F2026/p.parquet"], partition_values={"ds": "01/02/2026"})
    before = state(table)
    with pytest.raises(DataRetentionError, match="'01/02/2026', which is no ISO date"):
        table.apply_data_retention(policy={"column": "ds", "keep": "interval 1 days"}, now=NOW)
    with pytest.raises(DataRetentionError, match=r"'day' .* is string"):
        table.apply_data_retention(policy={"column": "day", "keep": "interval 1 days"}, now=NOW)
    assert state(table) == before


def test_files_without_readable_statistics_count_their_rows(tmp_path: Path) -> None:
    """A file without statistics, or with statistics that do not parse, once counted 0 rows (a
    missing struct's leaves read as zeros), which lowered the share a run deletes below the
    policy's limit. Their rows are counted from their footers."""
    table = events(tmp_path / "t", partitioned=False)
    log = tmp_path / "t" / "_delta_log" / f"{1:020d}.json"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    adds = [line["add"] for line in lines if "add" in line]
    del adds[0]["stats"]
    adds[1]["stats"] = "{"
    adds[2]["stats"] = json.dumps({"numRecords": 3, "minValues": {"id": "x"}})  # the row-by-row parse
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    decision = data_retention_due(table.snapshot(), {"column": "ts", "keep": "interval 75 days"}, now=NOW)
    assert decision.num_rows == 30
    assert decision.num_rows_to_delete == 9
