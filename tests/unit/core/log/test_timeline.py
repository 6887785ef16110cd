"""commit_counts: what each commit added and removed, whoever wrote it and whatever metrics it kept.

The expected counts come from another source than the metrics read: the row counts in the data
files' Parquet footers, the sizes on disk, the actions in the commit file.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.log.timeline import commit_counts

CORPUS = Path(__file__).resolve().parents[3] / "conformance" / "corpus" / "tables"


def entries(table: DeltaTable) -> dict[int, dict[str, object]]:
    return {entry["version"]: entry for entry in table.history()}


def footer_rows(root: Path, version: int) -> int:
    """The rows of the files a commit added, from their Parquet footers."""
    lines = (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    adds = [json.loads(line)["add"] for line in lines if line.startswith('{"add"')]
    return sum(pq.ParquetFile(root / add["path"]).metadata.num_rows for add in adds)


def test_the_cores_own_commit_is_counted_from_deltas_metrics(tmp_path: Path) -> None:
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": [1, 2, 3]}), tmp_path / "a.parquet")
    table.commit_files(["a.parquet"])
    counts = commit_counts(table.storage, entries(table)[1])
    assert counts == {  # an append records nothing removed, as Spark's WRITE does
        "rows_added": 3,
        "files_added": 1,
        "files_removed": None,
        "bytes_added": (tmp_path / "a.parquet").stat().st_size,
        "bytes_removed": None,
    }


def test_a_delta_rs_append_is_counted_from_its_own_metric_names(tmp_path: Path) -> None:
    """delta-rs writes ``num_added_rows`` / ``num_added_files``, not Delta's ``numOutputRows``."""
    import deltalake

    rows = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "ds": ["x"] * 4})
    deltalake.write_deltalake(str(tmp_path), rows, partition_by=["ds"])
    deltalake.write_deltalake(str(tmp_path), rows, mode="append", partition_by=["ds"])
    entry = entries(DeltaTable(str(tmp_path)))[1]
    assert "numOutputRows" not in entry["operationMetrics"]
    counts = commit_counts(DeltaTable(str(tmp_path)).storage, entry)
    assert (counts["rows_added"], counts["files_added"], counts["files_removed"]) == (
        footer_rows(tmp_path, 1),
        1,
        0,
    )
    assert counts["rows_added"] == 4


def test_spark_metrics_written_as_strings_are_read() -> None:
    root = CORPUS / "delta-rs" / "delta-0.8.0-partitioned"
    table = DeltaTable(str(root))
    spark_writes = {
        version: entry
        for version, entry in entries(table).items()
        if isinstance((entry.get("operationMetrics") or {}).get("numOutputRows"), str)
    }
    assert spark_writes, "the corpus table holds Spark commits with string metrics"
    for version, entry in spark_writes.items():
        assert commit_counts(table.storage, entry)["rows_added"] == footer_rows(root, version)


@pytest.mark.parametrize("version", [0, 1])
def test_a_commit_written_without_metrics_is_counted_from_its_actions(version: int) -> None:
    """delta-kernel-rs (and older delta-rs) write no ``operationMetrics``: the rows come from the
    added files' statistics, which the Parquet footers confirm."""
    root = CORPUS / "delta-kernel-rs" / "app-txn-no-checkpoint"
    table = DeltaTable(str(root))
    entry = entries(table)[version]
    assert not entry.get("operationMetrics")
    counts = commit_counts(table.storage, entry)
    added = [
        p
        for p in root.rglob("*.parquet")
        if p.name in (root / "_delta_log" / f"{version:020d}.json").read_text()
    ]
    assert counts == {
        "rows_added": footer_rows(root, version),
        "files_added": len(added),
        "files_removed": 0,
        "bytes_added": sum(p.stat().st_size for p in added),
        "bytes_removed": 0,
    }


def test_without_statistics_or_sizes_a_count_is_unknown_not_zero() -> None:
    """delta-rs 0.2's commits have no metrics, adds without stats and removes without a size."""
    root = CORPUS / "delta-rs" / "simple_table"
    table = DeltaTable(str(root))
    counts = commit_counts(table.storage, entries(table)[2])  # an overwrite
    assert (counts["rows_added"], counts["bytes_removed"]) == (None, None)
    assert (counts["files_added"], counts["files_removed"]) == (6, 22)


@pytest.mark.parametrize("metrics", [["numOutputRows", 4], "numOutputRows=4", 4])
def test_metrics_of_another_shape_are_not_guessed_at(tmp_path: Path, metrics: object) -> None:
    """The protocol leaves commitInfo free-form: metrics that are no object count as unknown."""
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    entry = {**entries(table)[0], "operationMetrics": metrics}
    assert set(commit_counts(table.storage, entry).values()) == {None}


def test_counts_that_are_no_count_are_unknown(tmp_path: Path) -> None:
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    metrics = {"numOutputRows": "-1", "numAddedFiles": True, "numRemovedFiles": "many", "numOutputBytes": 7.5}
    counts = commit_counts(table.storage, {**entries(table)[0], "operationMetrics": metrics})
    assert counts == dict.fromkeys(counts)


@pytest.mark.parametrize(
    "value",
    [
        2**63,  # past Delta's long
        10**40,
        1e300,  # integral, but no long
        -0.5,
        float("nan"),
        float("inf"),
        "9" * 40,
        "\u0661\u0662",  # Arabic-Indic digits: int() reads them, no writer writes them
        "1_000",  # int() reads it too
        "0x10",
        "1e3",
        "NaN",
        "",
        [1],
        {"value": 1},
        None,
    ],
    ids=repr,
)
def test_a_metric_that_is_no_long_count_is_unknown(tmp_path: Path, value: object) -> None:
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    metrics = {"numOutputRows": value, "numFiles": value, "numRemovedBytes": value}
    counts = commit_counts(table.storage, {**entries(table)[0], "operationMetrics": metrics})
    assert (counts["rows_added"], counts["files_added"], counts["bytes_removed"]) == (None, None, None)


@pytest.mark.parametrize(
    ("value", "count"), [(2**63 - 1, 2**63 - 1), ("+7", 7), (' "12" ', 12), (-0.0, 0), (3.0, 3)], ids=repr
)
def test_a_metric_that_is_a_long_count_is_read(tmp_path: Path, value: object, count: int) -> None:
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    metrics = {"numOutputRows": value}
    assert (
        commit_counts(table.storage, {**entries(table)[0], "operationMetrics": metrics})["rows_added"]
        == count
    )


def test_metrics_written_as_json_text_or_integral_numbers_are_read(tmp_path: Path) -> None:
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    text = json.dumps({"numOutputRows": '"3"', "numFiles": 2.0})
    counts = commit_counts(table.storage, {**entries(table)[0], "operationMetrics": text})
    assert (counts["rows_added"], counts["files_added"]) == (3, 2)


def test_a_commit_whose_actions_cannot_be_read_is_counted_as_unknown(tmp_path: Path) -> None:
    """Another writer's commit without metrics and with a malformed ``add``: its history entry is
    shown, its counts are unknown (loading the version reports the corruption, naming the file)."""
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    lines = [{"commitInfo": {"operation": "WRITE"}}, {"add": {"path": 5, "size": "big"}}]
    (tmp_path / "_delta_log" / f"{1:020d}.json").write_text("\n".join(map(json.dumps, lines)) + "\n")
    entry = entries(table)[1]
    assert entry["operation"] == "WRITE"
    assert set(commit_counts(table.storage, entry).values()) == {None}
