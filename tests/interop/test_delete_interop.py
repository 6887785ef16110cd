"""DELETE interoperability: the core deleting from tables Spark and delta-rs wrote (deletion vectors
they wrote merged with ours), typed predicates against delta-rs's own ``delete()`` on a copy, and
checkpoints of tables with the core's deletion vectors read by delta-rs."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from decimal import Decimal
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from delete_support import CORPUS, DV_TABLES, core_column_rows, rs_column_rows

from airflow_delta_provider.core import DeltaTable


@pytest.mark.parametrize("name", sorted(DV_TABLES))
def test_deleting_from_spark_written_deletion_vector_tables(tmp_path: Path, name: str) -> None:
    root = tmp_path / "t"
    shutil.copytree(CORPUS / name, root)
    table = DeltaTable(str(root))
    column = DV_TABLES[name]
    columns = table.snapshot().schema.names
    before = core_column_rows(table, columns)
    assert before == rs_column_rows(str(root), columns)
    index = columns.index(column)
    values = sorted({row[index] for row in before if row[index] is not None})
    doomed = values[::3]
    result = table.delete(f"{column} IN ({', '.join(str(v) for v in doomed)})")
    expected = [row for row in before if row[index] not in set(doomed)]
    assert result.committed and result.mode == "deletion_vectors"
    assert result.num_deleted_rows == len(before) - len(expected)
    assert core_column_rows(table, columns) == expected == rs_column_rows(str(root), columns)
    # The changes of the DELETE are exactly the deleted rows (the table's own vectors merged in).
    if table.snapshot().properties.get("delta.enableChangeDataFeed") == "true":
        changed = table.changes(result.version, result.version).to_pyarrow_table(columns)
        assert len(changed) == len(before) - len(expected)


TYPES = pa.schema(
    [
        ("i", pa.int32()),
        ("l", pa.int64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(10, 2)),
        ("b", pa.bool_()),
        ("f", pa.float64()),
        ("p", pa.string()),
    ]
)


def typed_rows(count: int) -> pa.Table:
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    return pa.table(
        {
            "i": [None if n % 11 == 5 else n for n in range(count)],
            "l": [n * 1_000_000_007 for n in range(count)],
            "s": [None if n % 13 == 7 else f"s{n:03d}" for n in range(count)],
            "d": [dt.date(2024, 1, 1) + dt.timedelta(days=n) for n in range(count)],
            "ts": [start + dt.timedelta(hours=n, microseconds=n) for n in range(count)],
            "dec": [Decimal(n) / 4 for n in range(count)],
            "b": [n % 2 == 0 for n in range(count)],
            "f": [n / 3 for n in range(count)],
            "p": ["a" if n % 3 else "b" for n in range(count)],
        },
        schema=TYPES,
    )


PREDICATES = [
    "i < 10 OR i > 50",
    "i IS NULL",
    "NOT (i BETWEEN 5 AND 60)",
    "l >= 30000000210 AND p = 'a'",
    "s IN ('s001', 's010', 's020') OR s IS NULL",
    "s > 's050'",
    "d = DATE '2024-01-15' OR d >= '2024-02-20'",
    # (delta-rs refuses a TIMESTAMP literal against a UTC column: a string it casts)
    # (a text without a zone is refused: Spark would read it in its session's time zone)
    "ts < '2024-01-02 00:00:00Z' OR ts >= '2024-01-04T12:00:00+00:00'",
    "dec <= 3.25",
    "b = true AND i != 4",
    "f > 10.5",
    "p = 'b'",
]


@pytest.mark.parametrize("properties", [{}, {"delta.enableDeletionVectors": "true"}], ids=["cow", "dv"])
@pytest.mark.parametrize("predicate", PREDICATES)
def test_typed_predicates_delete_what_delta_rs_deletes(
    tmp_path: Path, predicate: str, properties: dict
) -> None:
    data = typed_rows(90)
    theirs = tmp_path / "theirs"
    deltalake.write_deltalake(str(theirs), data, partition_by=["p"])
    deltalake.DeltaTable(str(theirs)).delete(predicate)
    ours = DeltaTable.create(str(tmp_path / "ours"), TYPES, partition_by=["p"], properties=properties)
    deltalake.write_deltalake(ours.uri, data, mode="append")
    result = ours.delete(predicate)
    assert result.committed
    columns = TYPES.names
    expected = rs_column_rows(str(theirs), columns)
    assert core_column_rows(ours, columns) == expected == rs_column_rows(ours.uri, columns)
    assert 0 < len(expected) < 90


def test_checkpoints_carry_the_deletion_vectors(tmp_path: Path) -> None:
    table = DeltaTable.create(
        str(tmp_path / "t"),
        pa.schema([("id", pa.int64())]),
        properties={"delta.enableDeletionVectors": "true"},
    )
    deltalake.write_deltalake(table.uri, pa.table({"id": list(range(100))}), mode="append")
    for n in range(12):  # a checkpoint at version 10 (delta.checkpointInterval) holds vectors
        table.delete(f"id = {n * 7}")
    assert (Path(table.storage.root) / "_delta_log" / "_last_checkpoint").exists()
    expected = sorted(((i,) for i in range(100) if i % 7 or i >= 84), key=repr)
    assert core_column_rows(table, ["id"]) == expected == rs_column_rows(table.uri, ["id"])
    checkpoint = json.loads((Path(table.storage.root) / "_delta_log" / "_last_checkpoint").read_text())
    assert checkpoint["version"] == 10
