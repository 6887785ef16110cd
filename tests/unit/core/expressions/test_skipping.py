"""File skipping for a read's filter: partition values exactly, statistics as a necessary condition.

The guarantee is that a skipped file holds no row the filter selects; it is checked against the
rows themselves (each file read alone with the core), for many filters, on tables with every
kind of statistics the rules treat apart.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions.predicate import Predicate
from airflow_delta_provider.core.expressions.skipping import files_matching
from airflow_delta_provider.core.protocol.actions import AddFile
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan

if TYPE_CHECKING:
    from airflow_delta_provider.core.log.snapshot import Snapshot

CORPUS = Path(__file__).parents[3] / "conformance" / "corpus" / "tables" / "delta-kernel-rs"
UTC = dt.UTC
SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("x", pa.float64()),
        ("ds", pa.date32()),
    ]
)


def _table(root: Path) -> DeltaTable:
    """Three files per partition of ``ds``: ids 0-9 / 10-19 / nulls only, with statistics as Delta
    Spark writes them (timestamp maxima truncated to milliseconds, below the microsecond values;
    float bounds that leave a NaN out, as Arrow's footers do)."""
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["ds"])
    base = dt.datetime(2024, 1, 1, 10, 0, 0, 500_999, tzinfo=UTC)
    adds = []
    for day in (1, 2):
        ds = f"2024-01-0{day}"
        (root / f"ds={ds}").mkdir()
        for n, ids in enumerate([list(range(0, 10)), list(range(10, 20)), [None] * 3]):
            data = pa.table(
                {
                    "id": pa.array(ids, pa.int64()),
                    "name": [None if i is None else f"n{i:02d}" for i in ids],
                    "ts": pa.array(
                        [None if i is None else base + dt.timedelta(seconds=i) for i in ids],
                        SCHEMA.field("ts").type,
                    ),
                    "x": [float("nan") if i == 5 else (None if i is None else float(i)) for i in ids],
                }
            )
            relative = f"ds={ds}/{n}.parquet"
            pq.write_table(data, root / relative)
            adds.append(
                AddFile(
                    relative,
                    partition_values={"ds": ds},
                    size=(root / relative).stat().st_size,
                    modification_time=1,
                    stats=_delta_stats(data),
                )
            )
    OptimisticTransaction(table.storage, read_snapshot=table.snapshot()).commit(
        CommitPlan("WRITE", adds=tuple(adds))
    )
    return table


def _delta_stats(data: pa.Table) -> str:
    present = [i for i in data.column("id").to_pylist() if i is not None]
    stats: dict[str, object] = {
        "numRecords": data.num_rows,
        "nullCount": {c: data.column(c).null_count for c in ("id", "name", "ts", "x")},
    }
    if present:
        low, high = min(present), max(present)
        times = [t for t in data.column("ts").to_pylist() if t is not None]

        def millis(value: dt.datetime) -> str:  # truncated, as Delta Spark writes both bounds
            return (
                value.replace(microsecond=value.microsecond // 1000 * 1000).strftime("%Y-%m-%dT%H:%M:%S.%f")[
                    :-3
                ]
                + "Z"
            )

        floats = [v for v in data.column("x").to_pylist() if v is not None and v == v]
        stats["minValues"] = {"id": low, "name": f"n{low:02d}", "ts": millis(min(times)), "x": min(floats)}
        stats["maxValues"] = {"id": high, "name": f"n{high:02d}", "ts": millis(max(times)), "x": max(floats)}
    return json.dumps(stats)


def _matching_files(snapshot: Snapshot, text: str) -> set[str]:
    """Files that hold at least one row the filter selects, read one by one."""
    predicate = _predicate(snapshot, text)
    found = set()
    for path in snapshot.files().column("path").to_pylist():
        rows = snapshot.to_pyarrow_table(paths=[path])
        if rows.filter(predicate.expression(rows.schema)).num_rows:
            found.add(path)
    return found


def _predicate(snapshot: Snapshot, text: str) -> Predicate:
    partitions = snapshot.partition_columns
    return Predicate(
        text, partitions, data_columns=[f.name for f in snapshot.schema if f.name not in partitions]
    )


def _kept(snapshot: Snapshot, text: str) -> set[str]:
    mask = files_matching(snapshot, _predicate(snapshot, text))
    return {p for p, keep in zip(snapshot.files().column("path").to_pylist(), mask, strict=True) if keep}


FILTERS = [
    "ds = '2024-01-02'",
    "id = 15",
    "id > 9",
    "id >= 19",
    "id < 10 AND ds = '2024-01-01'",
    "id <= 0",
    "id IS NULL",
    "id IS NOT NULL",
    "NOT id IS NULL",
    "id != 3",
    "NOT (id < 10 OR id IS NULL)",
    "id IN (3, 30)",
    "id NOT IN (3, 30)",
    "id BETWEEN 5 AND 12",
    "name >= 'n15'",
    "name = 'n03' OR ds = '2024-01-02'",
    # Timestamps: the log's maxima are milliseconds; 10:00:19.500999 lies above the max 10:00:19.500.
    "ts = TIMESTAMP '2024-01-01 10:00:19.500999Z'",
    "ts > '2024-01-01T10:00:19.500500Z'",
    "ts <= '2024-01-01 10:00:09.500999+00:00'",
    "x > 100",  # NaN > 100 in Spark's order: a maximum may leave NaN out
    "x < 3",
    "x = 5",
    "x IN (5, 15)",
    "id = NULL",
    "id <=> NULL",
    "NOT id <=> 3",
]


@pytest.mark.parametrize("text", FILTERS)
def test_no_file_with_a_matching_row_is_skipped(tmp_path: Path, text: str) -> None:
    snapshot = _table(tmp_path / "t").snapshot()
    assert _matching_files(snapshot, text) <= _kept(snapshot, text)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "ds = '2024-01-02'",
            {"ds=2024-01-02/0.parquet", "ds=2024-01-02/1.parquet", "ds=2024-01-02/2.parquet"},
        ),
        ("id = 15", {"ds=2024-01-01/1.parquet", "ds=2024-01-02/1.parquet"}),
        ("id IS NULL AND ds = '2024-01-01'", {"ds=2024-01-01/2.parquet"}),
        ("id IS NOT NULL AND ds = '2024-01-01'", {"ds=2024-01-01/0.parquet", "ds=2024-01-01/1.parquet"}),
        ("name > 'n12' AND ds = '2024-01-01'", {"ds=2024-01-01/1.parquet"}),
        ("ts > '2024-01-01T10:00:19.500500Z'", {"ds=2024-01-01/1.parquet", "ds=2024-01-02/1.parquet"}),
        ("ts > '2024-01-01T10:00:19.501Z'", set()),
        ("id = NULL", set()),
        # NaN > 100 in Spark's order, and the maxima leave NaN out: only the all-null file goes.
        ("x > 100 AND ds = '2024-01-01'", {"ds=2024-01-01/0.parquet", "ds=2024-01-01/1.parquet"}),
        ("x < 3 AND ds = '2024-01-01'", {"ds=2024-01-01/0.parquet"}),
        ("x IN (12, 300) AND ds = '2024-01-01'", {"ds=2024-01-01/1.parquet"}),
        ("id != 3 AND ds = '2024-01-01'", {"ds=2024-01-01/0.parquet", "ds=2024-01-01/1.parquet"}),
    ],
)
def test_files_are_skipped_by_partition_values_and_statistics(
    tmp_path: Path, text: str, kept: set[str]
) -> None:
    assert _kept(_table(tmp_path / "t").snapshot(), text) == kept


def test_files_without_statistics_are_kept(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": [1, 2]}), root / "a.parquet")
    add = AddFile(
        "a.parquet", partition_values={}, size=(root / "a.parquet").stat().st_size, modification_time=1
    )
    OptimisticTransaction(table.storage, read_snapshot=None).commit(CommitPlan("WRITE", adds=(add,)))
    assert _kept(table.snapshot(), "id = 100") == {"a.parquet"}


def test_statistics_of_a_widened_column_are_not_used() -> None:
    """Files written before a type change keep statistics of the old type: no skipping on them (the
    conformance table's two files have int_long maxima 2 and 2**63-1)."""
    root = CORPUS / "type-widening"
    snapshot = DeltaTable(str(root)).snapshot()
    assert len(_kept(snapshot, "int_long > 1000")) == snapshot.num_files() == 2
