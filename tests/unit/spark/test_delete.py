"""The Spark row matcher of DELETE on a real local SparkSession: the same rows as the core's own
evaluation, on partitioned, column-mapped and deletion-vector tables, and the DELETE it drives."""

from __future__ import annotations

from typing import Any

import pytest
from delete_support import CDF_PROPERTIES, DV_PROPERTIES, core_rows, ids, make_table

from airflow_delta_provider.core.expressions.skipping import files_matching
from airflow_delta_provider.core.lifecycle.delete import DeleteOptions, parse_predicate
from airflow_delta_provider.core.lifecycle.delete_rows import Candidates, match_rows_locally
from airflow_delta_provider.spark.delete import spark_row_matcher

pytestmark = pytest.mark.spark

FILES = {"a": [range(0, 10), range(10, 20)], "b b%/=é": [range(20, 30)]}


@pytest.fixture(scope="module")
def spark(local_spark: Any) -> Any:
    return local_spark


def candidates_of(table, predicate_text: str) -> tuple[Any, Candidates]:
    import pyarrow as pa

    snapshot = table.snapshot()
    predicate = parse_predicate(snapshot, predicate_text)
    mask = pa.array(files_matching(snapshot, predicate))
    values = snapshot.partition_values()
    return predicate, Candidates(snapshot.files().filter(mask), values.filter(mask))


@pytest.mark.parametrize(
    "properties",
    [
        {},
        DV_PROPERTIES,
        {"delta.columnMapping.mode": "name"},
        {"delta.columnMapping.mode": "id", **DV_PROPERTIES},
    ],
    ids=["plain", "deletion-vectors", "name-mapping", "id-mapping-dv"],
)
@pytest.mark.parametrize("predicate", ["id IN (1, 12, 25)", "v IS NULL OR p = 'a' AND id > 15", "v != 'v3'"])
def test_spark_finds_the_rows_the_core_finds(tmp_path, spark, properties, predicate):
    table = make_table(tmp_path / "t", FILES, properties)
    if properties.get("delta.enableDeletionVectors"):
        table.delete("id IN (2, 21)")  # files that already carry a vector
    parsed, candidates = candidates_of(table, predicate)
    ours = match_rows_locally(table.snapshot(), parsed, candidates)
    theirs = spark_row_matcher(spark)(table.snapshot(), parsed, candidates)
    assert {p: r.tolist() for p, r in theirs.items()} == {p: r.tolist() for p, r in ours.items()}
    assert ours


@pytest.mark.parametrize("properties", [{}, DV_PROPERTIES], ids=["copy-on-write", "deletion-vectors"])
def test_a_delete_whose_rows_spark_found(tmp_path, spark, properties):
    ours = make_table(tmp_path / "ours", FILES, properties)
    theirs = make_table(tmp_path / "theirs", FILES, properties)
    predicate = "id >= 5 AND id < 22"
    ours.delete(predicate)
    result = theirs.delete(predicate, match_rows=spark_row_matcher(spark))
    assert result.committed and result.num_deleted_rows == 17
    assert core_rows(theirs) == core_rows(ours)
    assert ids(core_rows(theirs)) == [0, 1, 2, 3, 4, *range(22, 30)]
    assert DeleteOptions(predicate).predicate == predicate


@pytest.mark.parametrize(
    "properties",
    [CDF_PROPERTIES, {**CDF_PROPERTIES, **DV_PROPERTIES}],
    ids=["copy-on-write-cdc", "deletion-vectors"],
)
def test_spark_reads_exactly_the_deleted_rows_as_changes(tmp_path, spark, properties):
    from airflow_delta_provider.spark import read_changes

    table = make_table(tmp_path / "t", FILES, properties)
    before = set(core_rows(table))
    result = table.delete("id IN (1, 12, 25) OR v IS NULL")
    deleted = sorted(("delete", *row) for row in before - set(core_rows(table)))
    frame = read_changes(spark, table.uri, result.version, result.version)
    rows = sorted((r["_change_type"], r["id"], r["v"], r["p"]) for r in frame.collect())
    assert rows == deleted and len(deleted) == 7  # 1, 12, 25 and the null v of 6, 13, 20, 27
