"""DeltaOptimizeOperator(purge=True) on a real local SparkSession: Delta's REORG PURGE rewritten on
Spark and committed by the core, rows unchanged for the core and delta-rs, column-mapped tables
(OPTIMIZE and PURGE) keeping physical names and field ids, a retry that starts no Spark."""

from __future__ import annotations

import dataclasses
import json
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq
import pytest
from delete_support import DV_PROPERTIES, core_rows, ids, make_table, rs_rows

from airflow_delta_provider.core.log.commits import read_commit
from airflow_delta_provider.core.protocol.schema import physical_name
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan, CommitProperties
from airflow_delta_provider.operators.optimize import DeltaOptimizeOperator

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_delta_provider.core import DeltaTable

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("local_spark")]
pytest.importorskip("pyspark")

SPARK_CONF = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.session.timeZone": "UTC",
}
FILES = {"a": [range(0, 10), range(10, 20)], "b": [range(20, 30)], "c": [range(30, 40)]}


def make(root: Path, **kwargs: Any) -> DeltaOptimizeOperator:
    kwargs.setdefault("task_id", "purge")
    kwargs.setdefault("retries", 2)
    return DeltaOptimizeOperator(table_uri=str(root), config_kwargs=dict(SPARK_CONF), **kwargs)


def commit_info(table: DeltaTable, version: int) -> dict[str, Any]:
    commit = read_commit(table.storage, version)
    assert commit is not None and commit.commit_info is not None
    return commit.commit_info


def test_purge_on_spark_rewrites_every_file_with_deleted_rows_and_retries_without_spark(
    tmp_path: Path, task_context: Any
) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES, DV_PROPERTIES)
    table.delete("id IN (1, 2, 25)")  # two vectors: partition a's first file, b's only file
    before = core_rows(table)

    op = make(root, purge=True)
    result = op.execute(task_context(op, max_tries=2))

    assert (result["operation"], result["committed"], result["version"]) == ("REORG", True, 5)
    assert result["metrics"]["numDeletionVectorsRemoved"] == 2
    assert result["metrics"]["numRemovedFiles"] == 2 and result["metrics"]["numAddedFiles"] == 2
    assert result["plan"]["num_bins"] == 2  # one file per bin: single-file bins are rewritten
    assert core_rows(table) == before == rs_rows(table.uri)
    assert all(f["deletion_vector"] is None for f in table.snapshot().files().to_pylist())
    info = commit_info(table, 5)
    assert info["operation"] == "REORG"
    assert info["operationParameters"] == {"predicate": "[]", "applyPurge": "true"}
    assert info["tags"]["airflow.task_id"] == "purge"

    retry = make(root, purge=True)
    again = retry.execute(task_context(retry, try_number=2, max_tries=2))
    assert (again["committed"], again["reason"], again["version"], again["operation"]) == (
        False,
        "already_committed",
        5,
        "REORG",
    )
    assert table.version() == 5


@pytest.mark.parametrize("mode", ["name", "id"])
def test_column_mapped_tables_are_compacted_and_purged_on_spark_under_physical_names(
    tmp_path: Path, task_context: Any, mode: str
) -> None:
    root = tmp_path / "orders"
    table = make_table(root, FILES, {**DV_PROPERTIES, "delta.columnMapping.mode": mode})
    schema = table.snapshot().schema
    physical = {f.name: physical_name(f) for f in schema}
    ids_of = {f.name: int(f.metadata[b"delta.columnMapping.id"]) for f in schema}

    compacted = make(root, task_id="optimize", target_file_size="1mb")
    assert compacted.execute(task_context(compacted))["committed"]

    # Drop a column (as ALTER TABLE DROP COLUMN does under column mapping: the files keep it).
    snapshot = table.snapshot()
    fields = json.loads(snapshot.metadata.schema_string)
    fields["fields"] = [f for f in fields["fields"] if f["name"] != "v"]
    metadata = dataclasses.replace(snapshot.metadata, schema_string=json.dumps(fields))
    transaction = OptimisticTransaction(table.storage, read_snapshot=snapshot, properties=CommitProperties())
    assert transaction.commit(CommitPlan("DROP COLUMNS", metadata=metadata)).committed
    table.delete("id = 33")
    before = core_rows(table)

    op = make(root, purge=True)
    result = op.execute(task_context(op))

    # Every file held the dropped column: each is rewritten without it, c's with its vector applied.
    assert result["committed"] and result["plan"]["num_files"] == 3
    assert core_rows(table) == before == rs_rows(table.uri)
    assert 33 not in ids(before)
    for path in table.snapshot().files().column("path").to_pylist():
        file_schema = pq.read_schema(table.storage.join(path))
        assert file_schema.names == [physical["id"]]
        assert file_schema.field(0).metadata[b"PARQUET:field_id"] == str(ids_of["id"]).encode()


def test_a_purge_takes_no_minimum_file_size() -> None:
    with pytest.raises(ValueError, match="min_file_size=5 does not apply to a purge"):
        DeltaOptimizeOperator(task_id="purge", table_uri="/tmp/t", purge=True, min_file_size=5)
