"""DeltaTable.changes(partition_filter=...): the changes of the selected partitions, decided from the
file actions' partition values before any row is read.

The oracle is delta-rs ``load_cdf`` on change-data-feed tables it writes, its rows kept where the
partition column holds a selected value (in Python, not through the core's predicate); without a
feed, each partition's net change equals the difference of its two snapshots. Other partitions'
data files are deleted from disk to show that the filtered read never opens them.
"""

from __future__ import annotations

import collections
import re
import shutil
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from changes_support import delta_rs_changes, delta_rs_history, every_range, log_state, normalised

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ChangeDataFileNotFoundError, ChangeDataNotRecordedError
from airflow_delta_provider.core.expressions import PredicateError

from ..conftest import LogWriter, add, commit_info, metadata, protocol, remove

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

FILTERS: dict[str, Callable[[Any], bool]] = {
    "part = 'p0'": lambda v: v == "p0",
    "part IN ('p0', 'p2')": lambda v: v in ("p0", "p2"),
    "part <> 'p1'": lambda v: v is not None and v != "p1",
    "NOT part >= 'p1'": lambda v: v is not None and v < "p1",
}


@pytest.fixture(scope="module")
def feed_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("feed") / "t"
    list(delta_rs_history(root, partitioned=True, feed=True))
    return root


@pytest.fixture(scope="module")
def plain_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("plain") / "t"
    list(delta_rs_history(root, partitioned=True, feed=False))
    return root


@pytest.mark.parametrize("text", FILTERS)
def test_every_range_equals_delta_rs_changes_of_the_selected_partitions(feed_table: Path, text: str) -> None:
    table = DeltaTable(str(feed_table))
    selected = FILTERS[text]
    for start, end in every_range(0, table.version()):
        ours = table.changes(start, end, partition_filter=text).to_pyarrow_table()
        theirs = normalised(delta_rs_changes(feed_table, start, end))
        kept = [row for row in theirs if selected(dict(row)["part"])]
        assert normalised(ours) == kept, f"{text}, versions {start}-{end}"


@pytest.mark.parametrize("text", FILTERS)
def test_the_file_level_changes_are_those_of_the_selected_partitions(feed_table: Path, text: str) -> None:
    table = DeltaTable(str(feed_table))
    selected = FILTERS[text]
    every = table.changes(0).files().to_pylist()
    ours = table.changes(0, partition_filter=text).files().to_pylist()
    assert ours == [f for f in every if selected(dict(f["partition_values"]).get("part"))]
    assert ours and len(ours) < len(every)


def test_without_a_feed_each_partition_changes_by_the_difference_of_its_snapshots(plain_table: Path) -> None:
    # delta-rs' UPDATE and MERGE rewrite files without change data: the whole-table changes of a
    # range holding them are refused; a partition is judged on its own files.
    table = DeltaTable(str(plain_table))
    latest = table.version()
    # v4, the MERGE, updates rows of p1 and p2 and only inserts into p0.
    with pytest.raises(ChangeDataNotRecordedError):
        table.changes(4, 4)
    assert table.changes(4, 4, partition_filter="part = 'p0'").to_pyarrow_table().num_rows == 1
    for part in ("p0", "p1", "p2"):
        for start, end in every_range(0, latest):
            try:
                changes = table.changes(start, end, partition_filter=f"part = '{part}'")
            except ChangeDataNotRecordedError as err:
                # refused only for a rewrite inside this partition: its rows changed at that version
                assert _rows(table, err.version - 1, part) != _rows(table, err.version, part)
                continue
            inserted, deleted = collections.Counter(), collections.Counter()
            for row in changes.to_pyarrow_table(["id", "name", "part", "_change_type"]).to_pylist():
                assert row["part"] == part
                key = (row["id"], row["name"], row["part"])
                (inserted if row["_change_type"] == "insert" else deleted)[key] += 1
            before = _rows(table, start - 1, part)
            assert not deleted - (before + inserted)
            assert before + inserted - deleted == _rows(table, end, part), f"{part}, versions {start}-{end}"


def _rows(table: DeltaTable, version: int, part: str) -> collections.Counter[tuple[Any, ...]]:
    if version < 0:
        return collections.Counter()
    data = table.snapshot(version).to_pyarrow_table(["id", "name", "part"]).to_pylist()
    return collections.Counter((r["id"], r["name"], r["part"]) for r in data if r["part"] == part)


def test_the_other_partitions_files_are_never_read(feed_table: Path, tmp_path: Path) -> None:
    root = tmp_path / "t"
    shutil.copytree(feed_table, root)
    removed = [d for d in [*root.glob("part=*"), *root.glob("_change_data/part=*")] if d.name != "part=p0"]
    assert len(removed) == 4
    for directory in removed:
        shutil.rmtree(directory)
    table = DeltaTable(str(root))
    rows = table.changes(0, partition_filter="part = 'p0'").to_pyarrow_table(["part"])
    assert set(rows.column("part").to_pylist()) == {"p0"} and rows.num_rows > 0
    with pytest.raises(ChangeDataFileNotFoundError):
        table.changes(0).to_pyarrow_table()


def test_markers_are_bound_from_parameters(feed_table: Path) -> None:
    table = DeltaTable(str(feed_table))
    bound = table.changes(0, partition_filter="`part` = :part", parameters={"part": "p1"})
    literal = table.changes(0, partition_filter="part = 'p1'")
    assert bound.files().to_pylist() == literal.files().to_pylist()
    assert normalised(bound.to_pyarrow_table()) == normalised(literal.to_pyarrow_table())


@pytest.mark.parametrize(
    ("text", "parameters", "message"),
    [
        ("id = 3", None, "names 'id', which is not a partition column"),
        ("part = 'p0' AND name = 'x'", None, "names 'name', which is not a partition column"),
        ("nope = 1", None, "not a column of the table"),
        ("part = ", None, "Cannot parse"),
        ("part = :p", None, "which no parameter binds"),
        ("part = 'p0'", {"p": "x"}, "not used by the predicate"),
    ],
)
def test_a_filter_the_partitions_cannot_decide_is_refused(
    feed_table: Path, text: str, parameters: dict[str, Any] | None, message: str
) -> None:
    before = log_state(feed_table)
    with pytest.raises(PredicateError, match=re.escape(message)):
        DeltaTable(str(feed_table)).changes(0, partition_filter=text, parameters=parameters)
    table = DeltaTable(str(feed_table))
    times = [c.timestamp for c in table.commit_timestamps()]
    with pytest.raises(PredicateError):  # an empty range (between two commits) refuses it alike
        table.changes(
            starting_timestamp=times[1] + 1,
            ending_timestamp=times[2] - 1,
            partition_filter=text,
            parameters=parameters,
        )
    assert log_state(feed_table) == before


def _schema_string(schema: pa.Schema) -> str:
    from airflow_delta_provider.core.protocol import schema_to_delta_json

    return schema_to_delta_json(schema)


def test_a_value_that_does_not_fit_its_partition_column_is_refused(tmp_path: Path) -> None:
    writer = LogWriter(tmp_path / "t")
    schema = pa.schema([("id", pa.int64()), ("n", pa.int32())])
    writer.commit(
        0, protocol(), metadata(partition_columns=["n"], schema_string=_schema_string(schema)), commit_info()
    )
    with pytest.raises(PredicateError, match="comparison of n with 'seven' is refused"):
        DeltaTable(str(writer.root)).changes(0, partition_filter="n = 'seven'")


def test_an_unpartitioned_table_has_no_partition_to_filter_on(tmp_path: Path) -> None:
    root = tmp_path / "t"
    list(delta_rs_history(root, partitioned=False, feed=True))
    with pytest.raises(PredicateError, match="part"):
        DeltaTable(str(root)).changes(0, partition_filter="part = 'p0'")


def test_parameters_without_a_filter_are_refused(feed_table: Path) -> None:
    with pytest.raises(ValueError, match="partition_filter"):
        DeltaTable(str(feed_table)).changes(0, parameters={"p": "x"})


def test_a_rewrite_in_another_partition_does_not_refuse_the_selected_one(tmp_path: Path) -> None:
    # v1 rewrites a file of p=b (remove and add, no feed, an UPDATE): refused for the whole table and
    # for p=b; p=a's changes are read.
    root = tmp_path / "t"
    writer = LogWriter(root)
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    files = {"p=a/1.parquet": [1], "p=b/2.parquet": [2], "p=b/3.parquet": [2, 3], "p=a/4.parquet": [4]}
    for name, ids in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), root / name)
    writer.commit(
        0,
        commit_info(),
        protocol(),
        metadata(partition_columns=["p"], schema_string=_schema_string(schema)),
        add("p=a/1.parquet", partitionValues={"p": "a"}),
        add("p=b/2.parquet", partitionValues={"p": "b"}),
    )
    writer.commit(
        1,
        commit_info("MERGE"),
        remove("p=b/2.parquet", partitionValues={"p": "b"}),
        add("p=b/3.parquet", partitionValues={"p": "b"}),
        add("p=a/4.parquet", partitionValues={"p": "a"}),
    )
    table = DeltaTable(str(root))
    with pytest.raises(ChangeDataNotRecordedError):
        table.changes(1)
    with pytest.raises(ChangeDataNotRecordedError):
        table.changes(1, partition_filter="p = 'b'")
    rows = table.changes(1, partition_filter="p = 'a'").to_pyarrow_table(["id", "p", "_change_type"])
    assert rows.to_pylist() == [{"id": 4, "p": "a", "_change_type": "insert"}]


def _hand_written(root: Path, values: list[str | None]) -> DeltaTable:
    """A table whose commit v (1..) adds one file of partition ``values[v - 1]``, written by
    ``json.dumps`` (spaces after colons, non-ASCII as ``\\u`` escapes), the data files on disk."""
    writer = LogWriter(root)
    schema = pa.schema([("id", pa.int64()), ("p", pa.string())])
    writer.commit(
        0, commit_info(), protocol(), metadata(partition_columns=["p"], schema_string=_schema_string(schema))
    )
    for version, value in enumerate(values, 1):
        name = f"f{version}.parquet"
        pq.write_table(pa.table({"id": pa.array([version], pa.int64())}), root / name)
        writer.commit(version, commit_info(), add(name, partitionValues={"p": value}))
    return DeltaTable(str(root))


@pytest.mark.parametrize(
    "values",
    [
        ["ü", "a b", "{x}", "ü"],  # escaped non-ASCII, a space, braces (the text cannot say: parsed)
        ['quo"te', "back\\slash", None, 'quo"te'],  # escaped quotes and backslashes, a null
    ],
)
def test_commits_passed_over_unparsed_are_exactly_those_without_the_partition(
    tmp_path: Path, values: list[str | None]
) -> None:
    table = _hand_written(tmp_path / "t", values)
    for value in {v for v in values if v is not None}:
        got = table.changes(1, partition_filter="p = :v", parameters={"v": value}).files().to_pylist()
        assert [f["_commit_version"] for f in got] == [v for v, x in enumerate(values, 1) if x == value]
    nulls = table.changes(1, partition_filter="p IS NULL").files().to_pylist()
    assert [f["_commit_version"] for f in nulls] == [v for v, x in enumerate(values, 1) if x is None]


def test_a_remove_without_partition_values_is_never_passed_over(tmp_path: Path) -> None:
    # Without partition values, a remove's partition is unknown: the filtered read refuses the
    # commit as the whole read does, though another line of it names partition b only.
    table = _hand_written(tmp_path / "t", ["a", "b"])
    LogWriter(tmp_path / "t").commit(
        3,
        commit_info("DELETE"),
        remove("f1.parquet"),
        add("f2b.parquet", partitionValues={"p": "b"}, tags={"partitionValues": "x"}),
    )
    for text in ("p = 'a'", "p = 'z'"):
        with pytest.raises(ChangeDataNotRecordedError, match="without its partition values"):
            table.changes(3, partition_filter=text)


def test_only_the_commits_that_may_hold_the_partition_are_parsed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_delta_provider.core.log.commits import CommitActions

    table = _hand_written(tmp_path / "t", ["a", "b", "a", "{x}", "b"])
    parsed: list[int] = []
    original = CommitActions.file_actions

    def spy(self: CommitActions) -> list[dict[str, Any]]:
        parsed.append(self.version)
        return original(self)

    monkeypatch.setattr(CommitActions, "file_actions", spy)
    got = table.changes(1, partition_filter="p = 'a'").files().column("_commit_version").to_pylist()
    assert got == [1, 3]
    assert parsed == [1, 3, 4]  # "{x}": the text cannot say, so its lines are parsed
