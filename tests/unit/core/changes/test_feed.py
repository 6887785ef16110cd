"""DeltaTable.changes() against the oracles: delta-rs ``load_cdf`` on every change-data-feed table
of the conformance corpus and on tables delta-rs writes, for every version range; delta-kernel-rs'
expected rows on its change-feed fixtures (deletion vectors, column mapping, files named with
``%``, which delta-rs 1.6 cannot read). Commit timestamps follow Delta (in-commit timestamp, else
the commit file's time made increasing), where delta-rs takes ``commitInfo.timestamp``: rows are
compared without them, and the timestamps on their own.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest
from changes_support import (
    CORPUS,
    KERNEL_FIXTURES,
    delta_rs_changes,
    delta_rs_history,
    every_range,
    normalised,
    unpack_kernel_fixtures,
)

from airflow_delta_provider.core import DeltaTable

if TYPE_CHECKING:
    from pathlib import Path

MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())
#: The corpus tables with a change data feed and data files (deltalog-getChanges is log only:
#: its paths are fake; its files are checked below).
CDF_TABLES = [t for t in MANIFEST if "cdf" in t["features"] and t["expect"].get("num_rows")]
KERNEL_EXPECTED = json.loads((KERNEL_FIXTURES / "expected.json").read_text())


@pytest.fixture(scope="module")
def kernel_tables(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unpack_kernel_fixtures(tmp_path_factory.mktemp("kernel"))


def first_commit(root: Path) -> int:
    return min(
        int(n[:20]) for n in os.listdir(root / "_delta_log") if n.endswith(".json") and n[:20].isdigit()
    )


def assert_same_as_delta_rs(root: Path, start: int, end: int) -> None:
    ours = DeltaTable(str(root)).changes(start, end).to_pyarrow_table()
    assert normalised(ours) == normalised(delta_rs_changes(root, start, end)), f"versions {start}-{end}"


# --- the conformance corpus ----------------------------------------------------------------------


def test_the_corpus_has_change_data_feed_tables() -> None:
    assert {t["name"] for t in CDF_TABLES} >= {
        "cdf-table",
        "cdc_ict_table",
        "checkpoint-cdf-table",
        "compacted-log-files-table",
        "commit-info-containing-arbitrary-operationParams-types",
    }


@pytest.mark.parametrize("entry", CDF_TABLES, ids=[t["name"] for t in CDF_TABLES])
def test_every_range_of_every_corpus_cdf_table_equals_delta_rs(entry: dict[str, Any]) -> None:
    root = CORPUS / "tables" / entry["table_root"]
    latest = DeltaTable(str(root)).version()
    for start, end in every_range(first_commit(root), latest):
        assert_same_as_delta_rs(root, start, end)


def test_in_commit_timestamps_are_the_commit_times_as_delta_rs_has_them() -> None:
    root = CORPUS / "tables" / "delta-rs" / "cdc_ict_table"
    ours = DeltaTable(str(root)).changes(0).to_pyarrow_table()
    theirs = delta_rs_changes(root, 0)
    ours_times = {(r["_commit_version"], r["_commit_timestamp"]) for r in ours.to_pylist()}
    their_times = {
        (r["_commit_version"], r["_commit_timestamp"].replace(tzinfo=dt.UTC)) for r in theirs.to_pylist()
    }
    assert ours_times == their_times
    assert {v for v, _ in ours_times} == {1, 2, 3}  # the in-commit-timestamp commits


def test_without_in_commit_timestamps_a_commit_time_is_its_file_time_made_increasing(tmp_path: Path) -> None:
    # Delta's commit time (not commitInfo.timestamp, which delta-rs reports and a writer may set
    # to anything): the commit file's modification time, raised to previous + 1 ms when not above it.
    root = tmp_path / "cdf-table"
    source = CORPUS / "tables" / "delta-rs" / "cdf-table"
    _copy_tree(source, root)
    log = root / "_delta_log"
    times = {0: 1_700_000_000_000, 1: 1_700_000_005_000, 2: 1_700_000_005_000, 3: 1_699_999_999_000}
    for version, ms in times.items():
        os.utime(log / f"{version:020d}.json", ns=(ms * 1_000_000, ms * 1_000_000))
    expected = {0: times[0], 1: times[1], 2: times[1] + 1, 3: times[1] + 2}
    for start in range(4):
        data = DeltaTable(str(root)).changes(start).to_pyarrow_table(["_commit_version", "_commit_timestamp"])
        found = {r["_commit_version"]: r["_commit_timestamp"] for r in data.to_pylist()}
        assert found == {
            v: dt.datetime.fromtimestamp(ms / 1000, dt.UTC) for v, ms in expected.items() if v >= start
        }
    files = DeltaTable(str(root)).changes(0).files()
    assert set(
        zip(files["_commit_version"].to_pylist(), files["_commit_timestamp"].to_pylist(), strict=True)
    ) == {(v, dt.datetime.fromtimestamp(ms / 1000, dt.UTC)) for v, ms in expected.items()}


def _copy_tree(source: Path, target: Path) -> None:
    import shutil

    shutil.copytree(source, target)


def test_files_lists_the_cdc_files_of_a_commit_that_has_them_else_its_data_changes() -> None:
    root = CORPUS / "tables" / "delta-kernel-rs" / "deltalog-getChanges" / "delta"  # log-only table
    files = DeltaTable(str(root)).changes(0).files()
    assert files.schema.names == [
        "_change_type",
        "path",
        "partition_values",
        "size",
        "deletion_vector",
        "_commit_version",
        "_commit_timestamp",
    ]
    rows = [{k: v for k, v in r.items() if k != "_commit_timestamp"} for r in files.to_pylist()]
    # v0 adds fake/path/1; v1 has a cdc file, so its remove of fake/path/1 is no change of its own;
    # v2 only records a txn.
    assert rows == [
        {
            "_change_type": "add",
            "path": "fake/path/1",
            "partition_values": [],
            "size": 1,
            "deletion_vector": None,
            "_commit_version": 0,
        },
        {
            "_change_type": "cdc",
            "path": "fake/path/2",
            "partition_values": [("partition_foo", "partition_bar")],
            "size": 1,
            "deletion_vector": None,
            "_commit_version": 1,
        },
    ]


def test_files_and_rows_of_a_deletion_vector_commit() -> None:
    root = CORPUS / "tables" / "delta-kernel-rs" / "compacted-log-files-table"
    changes = DeltaTable(str(root)).changes(2, 2)  # a DELETE with deletion vectors, no cdc file
    files = changes.files().to_pylist()
    assert [(f["_change_type"], f["path"]) for f in files] == [
        ("remove", "part-00000-1a76f841-9a83-44cf-ad2b-a022d9462f78.c000.snappy.parquet"),
        ("add", "part-00000-1a76f841-9a83-44cf-ad2b-a022d9462f78.c000.snappy.parquet"),
    ]
    assert files[0]["deletion_vector"] is None and files[1]["deletion_vector"]["cardinality"] == 1
    rows = changes.to_pyarrow_table(["id", "_change_type"]).to_pylist()
    assert rows == [{"id": 3, "_change_type": "delete"}]


# --- delta-kernel-rs' fixtures and expected rows ----------------------------------------------------


def _render(value: Any) -> str:
    """A value as Arrow's pretty printer renders it (delta-kernel-rs' expected tables)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_render(v)}" for k, v in value.items()) + "}"
    return str(value)


@pytest.mark.parametrize(
    "case", KERNEL_EXPECTED, ids=[f"{c['table']}-{c['start']}-{c['end']}" for c in KERNEL_EXPECTED]
)
def test_delta_kernel_rs_fixtures_give_its_expected_rows(case: dict[str, Any], kernel_tables: Path) -> None:
    changes = DeltaTable(str(kernel_tables / case["table"])).changes(case["start"], case["end"])
    data = changes.to_pyarrow_table(case["columns"])
    rendered = sorted([_render(row[c]) for c in case["columns"]] for row in data.to_pylist())
    assert rendered == sorted(case["rows"])


KERNEL_TABLES_DELTA_RS_READS = [
    "cdf-table",
    "cdf-table-non-partitioned",
    "cdf-table-with-cdc-and-dvs",
    "cdf-table-with-dv",
]


@pytest.mark.parametrize("name", KERNEL_TABLES_DELTA_RS_READS)
def test_every_range_of_the_kernel_fixtures_delta_rs_reads_equals_delta_rs(
    name: str, kernel_tables: Path
) -> None:
    root = kernel_tables / name
    for start, end in every_range(0, DeltaTable(str(root)).version()):
        assert_same_as_delta_rs(root, start, end)


# --- tables delta-rs writes ----------------------------------------------------------------------


@pytest.mark.parametrize("partitioned", [False, True], ids=["unpartitioned", "partitioned"])
def test_every_range_of_a_cdf_table_delta_rs_writes_equals_delta_rs(
    tmp_path: Path, partitioned: bool
) -> None:
    root = tmp_path / "rs"
    operations = list(delta_rs_history(root, partitioned=partitioned, feed=True))
    latest = DeltaTable(str(root)).version()
    assert latest == len(operations) - 1
    for start, end in every_range(0, latest):
        assert_same_as_delta_rs(root, start, end)
    # The feed has every change type: the updates and merges wrote cdc files.
    kinds = set(DeltaTable(str(root)).changes(0).to_pyarrow_table(["_change_type"]).column(0).to_pylist())
    assert kinds == {"insert", "delete", "update_preimage", "update_postimage"}


def test_columns_selects_and_orders_the_columns(tmp_path: Path) -> None:
    root = CORPUS / "tables" / "delta-rs" / "cdf-table"
    changes = DeltaTable(str(root)).changes(1, 1)
    data = changes.to_pyarrow_table(["_commit_version", "name", "birthday"])
    assert data.schema.names == ["_commit_version", "name", "birthday"]
    full = changes.to_pyarrow_table()
    assert full.schema == changes.schema
    assert full.schema.names == [
        "id",
        "name",
        "birthday",
        "_change_type",
        "_commit_version",
        "_commit_timestamp",
    ]
    assert full.schema.field("_commit_version").type == pa.int64()
    assert full.schema.field("_commit_timestamp").type == pa.timestamp("us", tz="UTC")
    assert sorted(data.to_pylist(), key=repr) == sorted(
        (
            {"_commit_version": r["_commit_version"], "name": r["name"], "birthday": r["birthday"]}
            for r in full.to_pylist()
        ),
        key=repr,
    )
    for bad in (["nope"], "name", [1]):
        with pytest.raises(ValueError, match=r"nope|column"):
            changes.to_pyarrow_table(bad)  # type: ignore[arg-type]
