"""OPTIMIZE in the core: the plan (Delta's bin-packing rules), the commit, conflicts, idempotency.

The rewrite is the core's pyarrow engine; the Spark engine is tested with the operator.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    ConcurrentDeleteDeleteError,
    ConcurrentDeleteReadError,
    InvalidTablePropertyError,
    ProtocolChangedError,
    RetentionError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.expressions.predicate import PredicateError
from airflow_delta_provider.core.log.commits import read_commit
from airflow_delta_provider.core.log.deletion_vectors import inline_deletion_vector
from airflow_delta_provider.core.maintenance.optimize import (
    OptimizeOptions,
    optimize_metrics,
    plan_optimize,
    rewrite_locally,
)
from airflow_delta_provider.core.table.watch import CommitFilter, poll

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())])


def write_file(root: Path, relative: str, ids: list[int]) -> str:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), path)
    return relative


def small_table(root: Path, layout: dict[str, int], *, rows: int = 5, properties: Any = None) -> DeltaTable:
    """A table partitioned by ``p`` with ``layout[p]`` single-file appends per partition."""
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"], properties=properties)
    start = 0
    for partition, files in layout.items():
        for n in range(files):
            ids = list(range(start, start + rows))
            start += rows
            table.commit_files([write_file(root, f"p={partition}/f{n}.parquet", ids)])
    return table


def rows(table: DeltaTable, version: int | None = None) -> list[tuple[Any, ...]]:
    data = table.snapshot(version).to_pyarrow_table()
    return sorted(zip(*(data.column(c).to_pylist() for c in ("id", "name", "p")), strict=True))


def log_listing(root: Path) -> list[str]:
    return sorted(os.listdir(root / "_delta_log"))


def data_files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*.parquet") if "_delta_log" not in p.parts)


# --- the plan ----------------------------------------------------------------------------


def test_plan_bins_small_files_per_partition_and_skips_what_needs_no_rewrite(tmp_path: Path) -> None:
    table = small_table(tmp_path / "t", {"a": 3, "b": 1, "c": 2})
    big = write_file(tmp_path / "t", "p=c/big.parquet", list(range(1000, 3000)))
    table.commit_files([big])
    sizes = dict(zip(*table.snapshot().files().select(["path", "size"]).to_pydict().values(), strict=True))
    min_size = sizes[big]  # the big file is exactly at the threshold: left alone

    plan = plan_optimize(table.snapshot(), OptimizeOptions(target_file_size="1mb", min_file_size=min_size))

    assert plan.num_files_considered == 7 and plan.num_candidates == 6
    # b has a single small file: a bin of one file without a DV changes nothing and is skipped.
    assert [(b.partition_values, sorted(b.paths)) for b in plan.bins] == [
        ({"p": "a"}, ["p=a/f0.parquet", "p=a/f1.parquet", "p=a/f2.parquet"]),
        ({"p": "c"}, ["p=c/f0.parquet", "p=c/f1.parquet"]),
    ]
    assert plan.target_file_size.value == 1024**2 and str(plan.target_file_size.source) == "argument"


def test_bins_are_packed_up_to_the_target_size_smallest_first(tmp_path: Path) -> None:
    table = small_table(tmp_path / "t", {"a": 6})
    one = max(table.snapshot().files().column("size").to_pylist())
    # Room for two files per bin: 6 files -> 3 bins.
    plan = plan_optimize(table.snapshot(), OptimizeOptions(target_file_size=2 * one + 1))
    assert [len(b.paths) for b in plan.bins] == [2, 2, 2]
    assert all(b.size <= 2 * one + 1 for b in plan.bins)


def test_target_file_size_comes_from_the_table_property(tmp_path: Path) -> None:
    table = small_table(tmp_path / "t", {"a": 4}, properties={"delta.targetFileSize": "1"})
    plan = plan_optimize(table.snapshot())
    # Every file is bigger than one byte: nothing is small, nothing is planned.
    assert (plan.target_file_size.value, str(plan.target_file_size.source)) == (1, "table property")
    assert plan.bins == ()
    assert plan_optimize(table.snapshot(), OptimizeOptions(target_file_size="10mb")).num_files == 4


def test_partition_filter_selects_partitions(tmp_path: Path) -> None:
    table = small_table(tmp_path / "t", {"a": 2, "b": 2})
    plan = plan_optimize(table.snapshot(), OptimizeOptions(partition_filter="p = 'b'"))
    assert [b.partition_values for b in plan.bins] == [{"p": "b"}]
    assert plan.num_files_considered == 2


# --- bad input leaves the table unchanged -----------------------------------------------------


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        ({"partition_filter": "name = 'x'"}, PredicateError, "name"),
        ({"partition_filter": "p = "}, PredicateError, "'p ='"),
        ({"target_file_size": "big"}, RetentionError, "delta.targetFileSize='big'"),
        ({"target_file_size": -5}, RetentionError, "-5"),
        ({"min_file_size": 0}, ValueError, "min_file_size"),
        ({"app_id": "x"}, ValueError, "app_version"),
    ],
)
def test_bad_options_are_refused_and_the_table_is_unchanged(
    tmp_path: Path, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    root = tmp_path / "t"
    table = small_table(root, {"a": 3})
    before = (table.version(), table.snapshot().files().column("path").to_pylist(), log_listing(root))
    with pytest.raises(error, match=message):
        table.optimize(**options)
    after = (table.version(), table.snapshot().files().column("path").to_pylist(), log_listing(root))
    assert after == before
    assert data_files(root) == ["p=a/f0.parquet", "p=a/f1.parquet", "p=a/f2.parquet"]


def test_a_bad_target_file_size_property_names_the_property(tmp_path: Path) -> None:
    table = small_table(tmp_path / "t", {"a": 2}, properties={"delta.targetFileSize": "lots"})
    with pytest.raises(InvalidTablePropertyError, match=r"delta\.targetFileSize='lots'"):
        table.optimize()
    assert table.version() == 2


@pytest.mark.parametrize(
    ("writer_features", "configuration", "feature", "reason"),
    [
        (["rowTracking", "domainMetadata"], {}, "rowTracking", "row's id and commit version"),
    ],
)
def test_tables_with_features_optimize_cannot_honour_are_refused_by_the_registry_unchanged(
    tmp_path: Path, writer_features: list[str], configuration: dict[str, str], feature: str, reason: str
) -> None:
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    protocol = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": writer_features}
    meta = {
        "id": "x",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(
            {
                "type": "struct",
                "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}],
            }
        ),
        "partitionColumns": [],
        "configuration": configuration,
        "createdTime": 1,
    }
    lines = [{"protocol": protocol}, {"metaData": meta}]
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    with pytest.raises(UnsupportedFeatureError, match=reason) as info:
        DeltaTable(str(root)).optimize()
    # The registry's refusal (features.check_supported, Operation.OPTIMIZE): it names the feature and
    # says what to do.
    assert (info.value.feature, info.value.operation) == (feature, "optimize")
    assert f"{feature!r}" in str(info.value) and "Spark with Delta Lake" in str(info.value)
    assert log_listing(root) == [f"{0:020d}.json"]
    assert DeltaTable(str(root)).version() == 0


# --- the commit ----------------------------------------------------------------------------


def test_optimize_commits_data_change_false_with_delta_metrics_and_same_rows(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = small_table(root, {"a": 3, "b": 2})
    before = rows(table)
    result = table.optimize(target_file_size="1mb")

    assert result.committed and result.commit is not None and result.commit.version == 6
    assert rows(table) == before
    assert RsDeltaTable(str(root)).to_pyarrow_table().num_rows == len(before)
    rs = RsDeltaTable(str(root)).to_pyarrow_table()
    assert (
        sorted(zip(rs["id"].to_pylist(), rs["name"].to_pylist(), rs["p"].to_pylist(), strict=True)) == before
    )

    commit = read_commit(table.storage, 6)
    assert commit is not None
    adds = [a["add"] for a in commit.file_actions() if "add" in a]
    removes = [a["remove"] for a in commit.file_actions() if "remove" in a]
    assert len(adds) == 2 and len(removes) == 5
    assert not any(a["dataChange"] for a in adds + removes)
    assert {tuple(a["partitionValues"].items()) for a in adds} == {(("p", "a"),), (("p", "b"),)}
    assert all(json.loads(a["stats"])["numRecords"] in (15, 10) for a in adds)
    # Each bin's file lands in its partition directory, as Delta writes it.
    assert sorted(a["path"].split("/")[0] for a in adds) == ["p=a", "p=b"]
    info = commit.commit_info or {}
    assert info["operation"] == "OPTIMIZE"
    assert info["operationParameters"] == {
        "predicate": "[]",
        "zOrderBy": "[]",
        "clusterBy": "[]",
        "auto": "false",
    }
    assert info["isBlindAppend"] is False
    metrics = info["operationMetrics"]
    sizes = sorted(a["size"] for a in adds)
    assert metrics["numRemovedFiles"] == "5" and metrics["numAddedFiles"] == "2"
    assert metrics["numRemovedBytes"] == str(sum(r["size"] for r in removes))
    assert metrics["numAddedBytes"] == str(sum(sizes))
    assert (metrics["minFileSize"], metrics["maxFileSize"]) == (str(sizes[0]), str(sizes[1]))
    assert metrics["numDeletionVectorsRemoved"] == "0"

    # A second OPTIMIZE finds one file per partition: nothing to do, no commit.
    again = table.optimize(target_file_size="1mb")
    assert (again.committed, again.reason, table.version()) == (False, "no_files", 6)


def test_metrics_percentiles_are_nearest_rank() -> None:
    from airflow_delta_provider.core.protocol.actions import AddFile

    adds = [
        AddFile(path=f"{s}", partition_values={}, size=s, modification_time=1, data_change=False)
        for s in (4, 1, 3, 2)
    ]
    metrics = optimize_metrics([], adds)
    assert [
        metrics[k] for k in ("minFileSize", "p25FileSize", "p50FileSize", "p75FileSize", "maxFileSize")
    ] == [
        1,
        1,
        2,
        3,
        4,
    ]


def test_watchers_counting_data_changes_do_not_fire_on_optimize(tmp_path: Path) -> None:
    table = small_table(tmp_path / "t", {"a": 3})
    cursor = table.version()
    table.optimize(target_file_size="1mb")
    assert poll(table, cursor, CommitFilter(data_changes_only=True)).matched == []
    everything = poll(table, cursor).matched
    assert [(c.operation, c.data_change) for c in everything] == [("OPTIMIZE", False)]


def test_deletion_vectors_are_applied_and_removed_even_for_a_single_file(tmp_path: Path) -> None:
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    write_file(root, "big.parquet", list(range(10)))
    features = {"readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}
    schema = {
        "type": "struct",
        "fields": [
            {"name": "id", "type": "long", "nullable": True, "metadata": {}},
            {"name": "name", "type": "string", "nullable": True, "metadata": {}},
        ],
    }
    dv = inline_deletion_vector([1, 3, 5])
    lines = [
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, **features}},
        {
            "metaData": {
                "id": "x",
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {"delta.enableDeletionVectors": "true"},
                "createdTime": 1,
            }
        },
        {
            "add": {
                "path": "big.parquet",
                "partitionValues": {},
                "size": (root / "big.parquet").stat().st_size,
                "modificationTime": 1,
                "dataChange": True,
                "deletionVector": dv,
            }
        },
    ]
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    table = DeltaTable(str(root))

    # One big file (at the threshold) but with a DV: it is rewritten alone.
    plan = plan_optimize(table.snapshot(), OptimizeOptions(min_file_size=1))
    assert [b.paths for b in plan.bins] == [["big.parquet"]]
    result = table.optimize(min_file_size=1)

    assert result.metrics["numDeletionVectorsRemoved"] == 1
    assert sorted(table.snapshot().to_pyarrow_table().column("id").to_pylist()) == [0, 2, 4, 6, 7, 8, 9]
    assert table.snapshot().files().column("deletion_vector").null_count == 1
    commit = read_commit(table.storage, 1)
    assert commit is not None
    (removed,) = [a["remove"] for a in commit.file_actions() if "remove" in a]
    assert removed["deletionVector"] == dv and removed["dataChange"] is False


# --- conflicts and retries ---------------------------------------------------------------------


def test_a_concurrent_append_never_fails_optimize(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = small_table(root, {"a": 3})

    def rewrite_then_append(plan: Any) -> dict[int, list[str]]:
        written = rewrite_locally(plan)
        # Another writer appends to the same partition while the rewrite runs.
        DeltaTable(str(root)).commit_files([write_file(root, "p=a/late.parquet", [100, 101])])
        return written

    result = table.optimize(target_file_size="1mb", rewrite=rewrite_then_append)
    assert result.committed and result.commit is not None
    assert (result.commit.version, result.commit.attempts) == (5, 2)
    paths = table.snapshot().files().column("path").to_pylist()
    assert "p=a/late.parquet" in paths and len(paths) == 2
    assert sorted(r[0] for r in rows(table)) == [*range(15), 100, 101]


@pytest.mark.parametrize("concurrent", ["overwrite", "optimize"])
def test_a_concurrent_removal_of_an_input_fails_clearly_and_leaves_nothing(
    tmp_path: Path, concurrent: str
) -> None:
    root = tmp_path / "t"
    table = small_table(root, {"a": 3, "b": 2})

    def rewrite_then_remove(plan: Any) -> dict[int, list[str]]:
        written = rewrite_locally(plan)
        other = DeltaTable(str(root))
        if concurrent == "overwrite":
            other.commit_files(
                [write_file(root, "p=a/new.parquet", [7])], mode="overwrite", replace_where="p = 'a'"
            )
        else:
            other.optimize(target_file_size="1mb", partition_filter="p = 'a'")
        return written

    winner_files: list[str] = []

    expected = ConcurrentDeleteReadError if concurrent == "overwrite" else ConcurrentDeleteDeleteError
    with pytest.raises(expected, match=r"p=a/f\d\.parquet") as info:
        table.optimize(target_file_size="1mb", rewrite=rewrite_then_remove)
    assert "Refresh the table and retry" in str(info.value)
    # The table is what the winner left: version 6, nothing of the failed OPTIMIZE in it or on disk.
    assert table.version() == 6
    winner_files = table.snapshot().files().column("path").to_pylist()
    assert sorted(data_files(root)) == sorted(
        {
            *winner_files,
            "p=a/f0.parquet",
            "p=a/f1.parquet",
            "p=a/f2.parquet",
            "p=b/f0.parquet",
            "p=b/f1.parquet",
        }
    )
    assert read_commit(table.storage, 7) is None


def test_a_concurrent_protocol_change_to_a_feature_optimize_refuses_fails_it_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """A winner that turns on row tracking (which writes support and OPTIMIZE does not: it would
    have to keep the rows' ids) fails the OPTIMIZE over it, judged for OPTIMIZE, not for a write."""
    root = tmp_path / "t"
    table = small_table(root, {"a": 3})
    before = table.version()
    upgrade = {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["appendOnly", "invariants", "domainMetadata", "rowTracking"],
    }

    def rewrite_then_upgrade(plan: Any) -> dict[int, list[str]]:
        written = rewrite_locally(plan)
        winner = [{"commitInfo": {"operation": "UPGRADE PROTOCOL", "timestamp": 1}}, {"protocol": upgrade}]
        name = root / "_delta_log" / f"{before + 1:020d}.json"
        name.write_text("\n".join(json.dumps(line) for line in winner) + "\n")
        return written

    with pytest.raises(ProtocolChangedError, match="rowTracking"):
        table.optimize(target_file_size="1mb", rewrite=rewrite_then_upgrade)
    assert table.version() == before + 1  # the winner, nothing of the OPTIMIZE
    assert read_commit(table.storage, before + 2) is None
    assert sorted(table.snapshot().files().column("path").to_pylist()) == [
        f"p=a/f{n}.parquet" for n in range(3)
    ]


def test_a_retry_after_the_commit_does_nothing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = small_table(root, {"a": 3})
    first = table.optimize(target_file_size="1mb", app_id="airflow/d/t/run", app_version=1)
    assert first.committed
    # New small files arrive; the retry of the same task instance still commits nothing.
    table.commit_files([write_file(root, "p=a/x.parquet", [50])])
    table.commit_files([write_file(root, "p=a/y.parquet", [51])])
    files_before = data_files(root)
    retry = table.optimize(target_file_size="1mb", app_id="airflow/d/t/run", app_version=1)
    assert (retry.committed, retry.reason) == (False, "already_committed")
    assert retry.commit is not None and retry.commit.version == 4
    assert table.version() == 6 and data_files(root) == files_before
