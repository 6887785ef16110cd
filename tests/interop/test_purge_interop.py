"""PURGE interoperability: the core purging tables Spark and delta-rs wrote with deletion vectors
(their vectors, partitions, checkpoints and column mapping), the rows unchanged for the core and
for delta-rs, and delta-rs reading every rewritten file."""

from __future__ import annotations

import json
import shutil
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pytest
from delete_support import CORPUS, DV_TABLES, core_column_rows, rs_column_rows

from airflow_delta_provider.core import DeltaTable

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize("name", sorted(DV_TABLES))
def test_purging_spark_written_deletion_vector_tables(tmp_path: Path, name: str) -> None:
    root = tmp_path / "t"
    shutil.copytree(CORPUS / name, root)
    table = DeltaTable(str(root))
    columns = table.snapshot().schema.names
    # A delete of our own first, so that every table has rows deleted by vectors (theirs and ours).
    column = DV_TABLES[name]
    values = sorted({r[columns.index(column)] for r in core_column_rows(table, columns)} - {None})
    table.delete(f"{column} IN ({', '.join(str(v) for v in values[::4])})")
    before = core_column_rows(table, columns)
    assert before == rs_column_rows(str(root), columns)
    files = table.snapshot().files()
    vectors = files.column("deletion_vector").to_pylist()
    expected = sum(1 for v in vectors if v is not None and v["cardinality"])

    result = table.purge()

    assert result.committed and result.metrics["numDeletionVectorsRemoved"] == expected
    assert core_column_rows(table, columns) == before == rs_column_rows(str(root), columns)
    assert all(v is None for v in table.snapshot().files().column("deletion_vector").to_pylist())
    info = table.history(limit=1)[0]
    assert info["operation"] == "REORG"
    assert info["operationParameters"] == {"predicate": "[]", "applyPurge": "true"}
    # delta-rs sees the same version and the REORG's files with their statistics.
    rs = deltalake.DeltaTable(str(root))
    assert rs.version() == result.version
    theirs = pa.table(rs.get_add_actions(flatten=True))
    records = dict(
        zip(theirs.column("path").to_pylist(), theirs.column("num_records").to_pylist(), strict=True)
    )
    for add in _adds(root, result.version):
        assert records[add["path"]] == json.loads(add["stats"])["numRecords"]


def _adds(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line)["add"] for line in text.splitlines() if '"add"' in line[:8]]
