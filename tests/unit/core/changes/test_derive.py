"""What each commit changed (changes_derive): exact without a change data feed wherever Delta's
derivation is exact, refused where a rewrite may hide copied rows.

Tables the provider writes (appends, overwrites, replace_where, CREATE OR REPLACE, OPTIMIZE),
Spark's deletion-vector DELETEs of the conformance corpus and delta-rs' appends, overwrites and
partition deletes are checked over every version range: the inserts minus the deletes are the
difference of the two snapshots. Rewrites (UPDATE, copy-on-write DELETE, MERGE) without cdc files
are refused, naming the version and the operation; hand-written commits pin each rule.
"""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from changes_support import (
    CORPUS,
    SnapshotRows,
    delta_rs_history,
    every_range,
    log_state,
    normalised,
    unpack_kernel_fixtures,
)

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ChangeDataNotRecordedError, CorruptLogError

from ..conftest import LogWriter, add, commit_info, metadata, protocol, remove

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())])


def write_file(root: Path, relative: str, ids: list[int]) -> str:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}), path)
    return relative


def assert_every_range_is_exact(
    root: Path, columns: list[str], refused: dict[int, str | None] | None = None, *, all_ranges: bool = True
) -> None:
    """Every range without a refused version gives the snapshot difference; every range with one
    is refused, naming the first refused version of the range and its operation.

    :param all_ranges: False for a long log: every single version, every range from the first
        version and every range to the latest.
    """
    table = DeltaTable(str(root))
    rows = SnapshotRows(table, columns)
    refused = refused or {}
    first = min(int(p.name[:20]) for p in (root / "_delta_log").glob("*.json") if p.name[:20].isdigit())
    latest = table.version()
    ranges = list(every_range(first, latest))
    if not all_ranges:
        ranges = [(s, e) for s, e in ranges if s in (e, first) or e == latest]
    for start, end in ranges:
        inside = sorted(v for v in refused if start <= v <= end)
        if not inside:
            rows.assert_changes_are_the_difference(start, end)
            continue
        with pytest.raises(ChangeDataNotRecordedError) as info:
            table.changes(start, end)
        assert (info.value.version, info.value.operation) == (inside[0], refused[inside[0]])
        assert f"Version {inside[0]} of" in str(info.value)


# --- tables the provider writes ------------------------------------------------------------------


def test_every_range_of_a_provider_table_without_a_feed_is_exact(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"])  # v0
    table.commit_files(
        [write_file(root, "p=a/1.parquet", [1, 2, 3]), write_file(root, "p=b/1.parquet", [4, 5])]
    )
    table.commit_files([write_file(root, "p=a/2.parquet", [6, 7])])  # v2
    table.commit_files([write_file(root, "p=a/3.parquet", [1, 8])], mode="overwrite", replace_where="p = 'a'")
    table.commit_files([write_file(root, "p=c/1.parquet", [9]), write_file(root, "p=b/2.parquet", [4])])  # v4
    table.optimize(target_file_size="1mb", min_file_size=1 << 20)  # v5: dataChange=false
    assert table.history(1)[0]["operation"] == "OPTIMIZE"
    table.commit_files([write_file(root, "p=b/3.parquet", [10, 11])], mode="overwrite")  # v6
    table.commit_files([write_file(root, "p=a/4.parquet", [12, 12])])  # v7: duplicate rows
    DeltaTable.create(str(root), SCHEMA, partition_by=["p"], mode="overwrite")  # v8: CREATE OR REPLACE
    table.commit_files([write_file(root, "p=a/5.parquet", [13])])  # v9
    assert table.version() == 9

    assert_every_range_is_exact(root, ["id", "name", "p"])
    optimized = table.changes(5, 5)
    assert optimized.files().num_rows == 0 and optimized.to_pyarrow_table().num_rows == 0
    # An overwrite with replace_where removes whole files: its deletes are exactly partition a.
    replaced = table.changes(3, 3).to_pyarrow_table(["id", "p", "_change_type"]).to_pylist()
    assert sorted((r["_change_type"], r["id"]) for r in replaced) == [
        ("delete", 1),
        ("delete", 2),
        ("delete", 3),
        ("delete", 6),
        ("delete", 7),
        ("insert", 1),
        ("insert", 8),
    ]


# --- tables Spark and delta-rs write -------------------------------------------------------------

#: Conformance tables without a change data feed (deletion-vector DELETEs by Spark, delta-rs
#: rewrites) and the versions that must be refused, with their operations.
CORPUS_TABLES: dict[str, dict[int, str | None]] = {
    "delta-kernel-rs/table-with-dv-small": {},
    "delta-kernel-rs/dv-partitioned-with-checkpoint/delta": {},
    "delta-kernel-rs/dv-with-columnmapping/delta": {},
    "delta-kernel-rs/log-replay-dv-key-cases/delta": {},
    "delta/basic-dv-with-checkpoint": {},
    "delta-rs/table_with_deletion_logs": {},
    "delta-rs/simple_table": {1: "MERGE", 3: "UPDATE", 4: "DELETE"},
}


@pytest.mark.parametrize("name", list(CORPUS_TABLES))
def test_every_range_of_corpus_tables_without_a_feed_is_exact_or_refused(name: str) -> None:
    root = CORPUS / "tables" / name
    columns = DeltaTable(str(root)).snapshot().schema.names
    # basic-dv-with-checkpoint: 25 commits (and 4 checkpoints) of one-row DELETEs.
    assert_every_range_is_exact(
        root, columns, CORPUS_TABLES[name], all_ranges=name != "delta/basic-dv-with-checkpoint"
    )


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_delta_rs_rewrites_without_a_feed_are_refused_and_the_rest_is_exact(
    tmp_path: Path, partitioned: bool
) -> None:
    root = tmp_path / "rs"
    operations = list(delta_rs_history(root, partitioned=partitioned, feed=False))
    refused = {version: operation for version, operation in enumerate(operations) if version in (2, 3, 4)}
    if not partitioned:  # "DELETE id > 14" rewrote a file that kept other rows
        refused[5] = "DELETE"
    before = log_state(root)
    assert_every_range_is_exact(root, ["id", "name", "part"], refused)
    assert log_state(root) == before


# --- the rules, on hand-written commits ------------------------------------------------------------

PARTITIONED_SCHEMA = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
            {"name": "p", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
)


def hand_table(root: Path, *, feed: bool = False) -> LogWriter:
    """v0: a.parquet (ids 0-4) in partition p=a."""
    log = LogWriter(root)
    write_file(root, "p=a/a.parquet", [0, 1, 2, 3, 4])
    configuration = {"delta.enableChangeDataFeed": "true"} if feed else {}
    log.commit(
        0,
        commit_info("CREATE TABLE"),
        protocol(),
        metadata(configuration, ["p"], PARTITIONED_SCHEMA),
        _add(root, "p=a/a.parquet"),
    )
    return log


def _add(root: Path, path: str, **extra: Any) -> dict[str, Any]:
    return add(path, size=(root / path).stat().st_size, partitionValues={"p": "a"}, **extra)


def _remove(root: Path, path: str, **extra: Any) -> dict[str, Any]:
    return remove(
        path,
        size=(root / path).stat().st_size,
        partitionValues={"p": "a"},
        extendedFileMetadata=True,
        **extra,
    )


def rewrite(log: LogWriter, info: dict[str, Any] | None, *extra: dict[str, Any]) -> None:
    """v1: a.parquet replaced by b.parquet (ids 0-2 copied, 9 new): rows 3 and 4 deleted, 9 inserted."""
    write_file(log.root, "p=a/b.parquet", [0, 1, 2, 9])
    actions = [info] if info is not None else []
    log.commit(1, *actions, *extra, _remove(log.root, "p=a/a.parquet"), _add(log.root, "p=a/b.parquet"))


EXACT_REWRITES = {
    "overwrite": commit_info(operationParameters={"mode": "Overwrite"}),
    "replaceWhere on a partition (SQL)": commit_info(
        operationParameters={"mode": "Overwrite", "predicate": "p = 'a'"}
    ),
    "replaceWhere on a partition (JSON list)": commit_info(
        operationParameters={"mode": "Overwrite", "predicate": json.dumps(["(p = 'a')"])}
    ),
    "replaceWhere on a partition (provider's list)": commit_info(
        operationParameters={"mode": "Overwrite", "predicate": ["p = 'a'"]}
    ),
    "replaceWhere that copied no row": commit_info(
        operationParameters={"mode": "Overwrite", "predicate": "id > 2"},
        operationMetrics={"numCopiedRows": "0"},
    ),
    "CREATE OR REPLACE": commit_info("CREATE OR REPLACE TABLE AS SELECT"),
    "RESTORE": commit_info("RESTORE"),
    "complete-mode stream": commit_info("STREAMING UPDATE", operationParameters={"outputMode": "Complete"}),
}
REFUSED_REWRITES = {
    "UPDATE": (commit_info("UPDATE"), "UPDATE"),
    "copy-on-write DELETE": (commit_info("DELETE", operationMetrics={"numCopiedRows": "3"}), "DELETE"),
    "MERGE": (commit_info("MERGE", operationMetrics={"numTargetRowsUpdated": "1"}), "MERGE"),
    "replaceWhere on data": (
        commit_info(operationParameters={"mode": "Overwrite", "predicate": "id > 2"}),
        "WRITE",
    ),
    "replaceWhere that copied rows": (
        commit_info(
            operationParameters={"mode": "Overwrite", "predicate": "p = 'a'"},
            operationMetrics={"numCopiedRows": "3"},
        ),
        "WRITE",
    ),
    "INSERT REPLACE ON": (
        commit_info(operationParameters={"mode": "Overwrite", "replaceOnCond": "id = 1"}),
        "WRITE",
    ),
    "append-mode stream": (
        commit_info("STREAMING UPDATE", operationParameters={"outputMode": "Append"}),
        "STREAMING UPDATE",
    ),
    "no commitInfo": (None, None),
}
ALL_OF_A_AND_B = [("delete", i) for i in range(5)] + [("insert", i) for i in (0, 1, 2, 9)]


def changed_rows(root: Path, start: int, end: int | None = None) -> list[tuple[str, int]]:
    data = DeltaTable(str(root)).changes(start, end).to_pyarrow_table(["_change_type", "id"])
    return sorted((r["_change_type"], r["id"]) for r in data.to_pylist())


@pytest.mark.parametrize("info", list(EXACT_REWRITES.values()), ids=list(EXACT_REWRITES))
def test_rewrites_that_replace_what_they_remove_give_their_deletes_and_inserts(
    tmp_path: Path, info: Any
) -> None:
    log = hand_table(tmp_path / "t")
    rewrite(log, info)
    assert changed_rows(log.root, 1) == ALL_OF_A_AND_B
    assert changed_rows(log.root, 0) == sorted([("insert", i) for i in range(5)] + ALL_OF_A_AND_B)


@pytest.mark.parametrize("case", list(REFUSED_REWRITES.values()), ids=list(REFUSED_REWRITES))
def test_rewrites_without_change_data_are_refused_naming_version_and_operation(
    tmp_path: Path, case: Any
) -> None:
    info, operation = case
    log = hand_table(tmp_path / "t")
    rewrite(log, info)
    before = log_state(log.root)
    for start in (0, 1):
        with pytest.raises(ChangeDataNotRecordedError) as raised:
            DeltaTable(str(log.root)).changes(start)
        error = raised.value
        assert (error.version, error.operation) == (1, operation)
        message = str(error)
        assert "Version 1 of" in message and (operation or "a commit") in message
        assert "delta.enableChangeDataFeed" in message and "from version 2 on" in message
        assert error.delta_error_class == "DELTA_MISSING_CHANGE_DATA"
    assert changed_rows(log.root, 0, 0) == [("insert", i) for i in range(5)]  # before it: fine
    assert log_state(log.root) == before


_DEEP_TEXT = "[" * 100_000 + "]" * 100_000
#: commitInfo as other engines write it (lists and text where Delta writes objects, no operation
#: name, texts nested past any stack) -> the operation the refusal names (None: the commit replaced
#: what it removed, its changes are exact; "nothing": a MERGE whose metrics report no change).
FREE_FORM_COMMIT_INFO = {
    "metrics as a list": (commit_info("MERGE", operationMetrics=[0, 0, 0]), "MERGE"),
    "metrics as text nested too deep": (commit_info("MERGE", operationMetrics="{" + _DEEP_TEXT), "MERGE"),
    "no-op metrics as JSON text": (
        commit_info(
            "MERGE",
            operationMetrics=json.dumps(
                {"numTargetRowsInserted": "0", "numTargetRowsUpdated": "0", "numTargetRowsDeleted": "0"}
            ),
        ),
        "nothing",
    ),
    "parameters as plain text": (commit_info(operationParameters="mode=Overwrite"), "WRITE"),
    "parameters as JSON text": (commit_info(operationParameters=json.dumps({"mode": "Overwrite"})), None),
    "parameters as a list": (commit_info(operationParameters=["mode", "Overwrite"]), "WRITE"),
    "copied rows as a list": (
        commit_info(operationParameters={"mode": "Overwrite"}, operationMetrics={"numCopiedRows": [3]}),
        "WRITE",
    ),
    "operation as an object": (commit_info({"name": "WRITE"}), "a commit"),
    "operation as a list": (commit_info(["RESTORE"]), "a commit"),
    "operation as a number": (commit_info(7), "a commit"),
    "predicate as an object": (
        commit_info(operationParameters={"mode": "Overwrite", "predicate": {"p": "a"}}),
        "WRITE",
    ),
    "predicate as JSON text nested too deep": (
        commit_info(operationParameters={"mode": "Overwrite", "predicate": _DEEP_TEXT}),
        "WRITE",
    ),
    "predicate of 10,000 conditions": (
        commit_info(
            operationParameters={"mode": "Overwrite", "predicate": " OR ".join(["p = 'a'"] * 10_000)}
        ),
        "WRITE",
    ),
    "predicate nested 10,000 deep": (
        commit_info(
            operationParameters={"mode": "Overwrite", "predicate": "(" * 10_000 + "p = 'a'" + ")" * 10_000}
        ),
        "WRITE",
    ),
}


@pytest.mark.parametrize("case", list(FREE_FORM_COMMIT_INFO.values()), ids=list(FREE_FORM_COMMIT_INFO))
@pytest.mark.parametrize("feed", [False, True], ids=["feed off", "feed on"])
def test_free_form_commit_info_is_read_by_its_shape(
    tmp_path: Path, case: Any, feed: bool, table_state: Any
) -> None:
    """commitInfo is free-form: a shape Delta does not write is no operation, metric or parameter
    (never an AttributeError, a TypeError or a RecursionError); the rules then decide as for a
    commit without it, and the table is left as it was."""
    info, refused = case
    log = hand_table(tmp_path / "t", feed=feed)
    rewrite(log, info)
    before = table_state(log.root)
    if refused == "nothing":
        assert changed_rows(log.root, 1) == []
    elif refused is None or feed:
        assert changed_rows(log.root, 1) == ALL_OF_A_AND_B
    else:
        with pytest.raises(ChangeDataNotRecordedError) as raised:
            DeltaTable(str(log.root)).changes(1)
        assert raised.value.operation == (None if refused == "a commit" else refused)
        assert f"({refused} without change data files" in str(raised.value)
        assert len(str(raised.value)) < 2000
    assert table_state(log.root) == before


def test_a_rewrite_while_the_feed_is_on_is_read_as_delta_reads_it(tmp_path: Path) -> None:
    # A writer must record an UPDATE's changes in cdc files when the feed is on; without them
    # Delta reads the commit's removes and adds, and so does the core.
    log = hand_table(tmp_path / "t", feed=True)
    rewrite(log, commit_info("UPDATE"))
    assert changed_rows(log.root, 1) == ALL_OF_A_AND_B
    # The same, when the commit itself turns the feed on.
    other = hand_table(tmp_path / "u")
    enabling = metadata({"delta.enableChangeDataFeed": "true"}, ["p"], PARTITIONED_SCHEMA)
    rewrite(other, commit_info("UPDATE"), enabling)
    assert changed_rows(other.root, 1) == ALL_OF_A_AND_B


def test_a_merge_reporting_no_changed_row_contributes_nothing(tmp_path: Path) -> None:
    log = hand_table(tmp_path / "t")
    metrics = {"numTargetRowsInserted": "0", "numTargetRowsUpdated": "0", "numTargetRowsDeleted": "0"}
    rewrite(log, commit_info("MERGE", operationMetrics=metrics))
    changes = DeltaTable(str(log.root)).changes(1)
    assert changes.files().num_rows == 0 and changes.to_pyarrow_table().num_rows == 0


def test_data_change_false_contributes_nothing(tmp_path: Path) -> None:
    log = hand_table(tmp_path / "t")
    write_file(log.root, "p=a/c.parquet", [0, 1, 2, 3, 4])
    log.commit(
        1,
        commit_info("OPTIMIZE"),
        _remove(log.root, "p=a/a.parquet", dataChange=False),
        _add(log.root, "p=a/c.parquet", dataChange=False),
    )
    changes = DeltaTable(str(log.root)).changes(1)
    assert changes.files().num_rows == 0 and changes.to_pyarrow_table().num_rows == 0


def test_a_file_removed_and_added_again_without_a_deletion_vector_is_malformed(tmp_path: Path) -> None:
    log = hand_table(tmp_path / "t")
    log.commit(1, commit_info("WRITE"), _remove(log.root, "p=a/a.parquet"), _add(log.root, "p=a/a.parquet"))
    with pytest.raises(CorruptLogError, match=r"removes and adds p=a/a.parquet .* no deletion vector"):
        DeltaTable(str(log.root)).changes(1)


def test_a_file_added_twice_in_one_commit_is_malformed(tmp_path: Path) -> None:
    log = hand_table(tmp_path / "t")
    write_file(log.root, "p=a/b.parquet", [7])
    log.commit(1, commit_info(), _add(log.root, "p=a/b.parquet"), _add(log.root, "p=a/b.parquet"))
    with pytest.raises(CorruptLogError, match=r"two add actions .* p=a/b.parquet"):
        DeltaTable(str(log.root)).changes(1)


def test_a_remove_without_partition_values_cannot_give_its_partition(tmp_path: Path) -> None:
    log = hand_table(tmp_path / "t")
    log.commit(1, commit_info("DELETE"), remove("p=a/a.parquet"))
    with pytest.raises(ChangeDataNotRecordedError, match="DELTA_REMOVE_FILE_CDC_MISSING_EXTENDED_METADATA"):
        DeltaTable(str(log.root)).changes(1)


# --- deletion vectors without a change data feed ----------------------------------------------------


def test_deletion_vector_changes_without_a_feed_are_exact_unless_rows_go_both_ways(tmp_path: Path) -> None:
    """delta-kernel-rs' cdf-table-with-dv with its feed turned off. Its commits (no commitInfo):
    1 deletes rows 0 and 9 (a DV added), 2 restores them (the DV dropped), 3 deletes 0, 1, 4, 5,
    4 restores 1 and 4 (the DV shrinks), 5 restores 0 and 5 and deletes 3, 6 restores 3. Only 5
    moves rows both ways; every other range reads as the feed does."""
    unpack_kernel_fixtures(tmp_path / "kernel")
    with_feed = tmp_path / "kernel" / "cdf-table-with-dv"
    root = tmp_path / "no-feed"
    shutil.copytree(with_feed, root)
    first = root / "_delta_log" / f"{0:020d}.json"
    first.write_text(
        first.read_text().replace(
            '"delta.enableChangeDataFeed":"true"', '"delta.enableChangeDataFeed":"false"'
        )
    )
    table, oracle = DeltaTable(str(root)), DeltaTable(str(with_feed))
    for start, end in every_range(0, 6):
        if start <= 5 <= end:
            with pytest.raises(ChangeDataNotRecordedError) as info:
                table.changes(start, end)
            assert (info.value.version, info.value.operation) == (5, None)
        else:
            assert normalised(table.changes(start, end).to_pyarrow_table()) == normalised(
                oracle.changes(start, end).to_pyarrow_table()
            )
