"""The faster paths of issue 32 against the slower ones they replace, on every layout they meet.

- Change rows: ``changes(a, b).to_pyarrow_table()`` reads every file of a range in one scan, with the
  log's constant columns as slices of one array per value; here it equals the same changes read
  scan by scan by a reader written apart (one file at a time, ``pyarrow.parquet``), on the
  delta-kernel-rs change-feed fixtures (deletion vectors that grow and shrink, change-data files,
  column mapping in both modes), on change-feed tables delta-rs writes (updates, deletes, merges;
  partitioned by strings and by typed values with nulls), for every range.
"""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import TYPE_CHECKING

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from changes_support import delta_rs_history, every_range, normalised, unpack_kernel_fixtures

from airflow_delta_provider.core import DeltaError, DeltaTable

if TYPE_CHECKING:
    from airflow_delta_provider.core.changes import Changes


@pytest.fixture(scope="module")
def kernel_tables(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    root = unpack_kernel_fixtures(tmp_path_factory.mktemp("kernel"))
    return sorted(p.parent for p in root.rglob("_delta_log"))


def _scan_by_scan(changes: Changes, columns: list[str] | None) -> pa.Table:
    """The slow path, written apart from the core's reader: each scan's file read alone with
    ``pyarrow.parquet`` (physical names, a missing column null), its counted rows taken, the log's
    values (change type, version, commit time, partition values cast from their strings) repeated
    over them, the columns renamed to their logical names."""
    logical, physical = changes.data_schema, changes._physical
    partitions = set(changes.partition_columns)
    parts = []
    for scan in changes.row_scans():
        local = changes.storage.path.decode(scan.path)
        with changes.storage.arrow_fs.open_input_file(local) as source:
            rows = pq.read_table(source)
        if not scan.whole:
            selected = changes.selected_rows(scan).astype(np.int64)
            selected = selected[selected < rows.num_rows]
            if scan.include is None:  # all but the marked rows
                keep = np.ones(rows.num_rows, dtype=bool)
                keep[selected] = False
                selected = np.flatnonzero(keep)
            rows = rows.take(pa.array(selected))
        n = rows.num_rows
        out: dict[str, pa.Array] = {}
        for name, field in zip(logical.names, physical, strict=True):
            if name in partitions:
                raw = (scan.partition_values or {}).get(field.name)
                out[name] = pa.array([raw] * n, pa.string()).cast(field.type)
            elif field.name in rows.column_names:
                out[name] = rows.column(field.name).cast(field.type)
            else:
                out[name] = pa.nulls(n, field.type)
        kind = rows.column("_change_type") if scan.change_type is None else pa.array([scan.change_type] * n)
        out["_change_type"] = kind
        out["_commit_version"] = pa.array([scan.version] * n, pa.int64())
        timestamps = pa.array([scan.timestamp * 1000] * n, pa.int64())
        out["_commit_timestamp"] = timestamps.cast(pa.timestamp("us", tz="UTC"))
        parts.append(pa.table(out, schema=changes.schema))
    table = pa.concat_tables(parts) if parts else changes.schema.empty_table()
    return table.select(columns) if columns is not None else table


def _assert_every_range_reads_as_scan_by_scan(root: Path, columns: list[str] | None = None) -> int:
    table = DeltaTable(str(root))
    checked = 0
    for start, end in every_range(0, table.version()):
        try:
            changes = table.changes(start, end)
            fast = changes.to_pyarrow_table(columns)
        except DeltaError:
            continue
        fast.validate(full=True)
        slow = _scan_by_scan(changes, columns)
        assert fast.schema == slow.schema, (root, start, end)
        assert normalised(fast, timestamps=True) == normalised(slow, timestamps=True), (root, start, end)
        # A consumer's operations on the shared constant arrays.
        assert normalised(fast.combine_chunks(), timestamps=True) == normalised(slow, timestamps=True)
        if fast.num_rows:
            fast.take(pa.array([0, fast.num_rows - 1])).validate(full=True)
        checked += 1
    return checked


def test_change_rows_of_the_kernel_fixtures_read_as_scan_by_scan(kernel_tables: list[Path]) -> None:
    assert len(kernel_tables) >= 14
    assert sum(_assert_every_range_reads_as_scan_by_scan(root) for root in kernel_tables) > 50
    for root in kernel_tables:
        _assert_every_range_reads_as_scan_by_scan(root, columns=["_change_type", "_commit_version"])


@pytest.mark.parametrize("partitioned", [True, False])
def test_change_rows_of_delta_rs_feeds_read_as_scan_by_scan(tmp_path: Path, partitioned: bool) -> None:
    root = tmp_path / "t"
    for _ in delta_rs_history(root, partitioned=partitioned, feed=True):
        pass
    assert _assert_every_range_reads_as_scan_by_scan(root) > 20
    _assert_every_range_reads_as_scan_by_scan(root, columns=["part", "_change_type", "id"])


def test_change_rows_of_typed_partitions_with_nulls_read_as_scan_by_scan(tmp_path: Path) -> None:
    """Partition values of several types, nulls among them, repeated across files and commits:
    each value's shared array serves every scan that holds it."""
    root = str(tmp_path / "t")

    def frame(first: int) -> pa.Table:
        ids = list(range(first, first + 12))
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "d": pa.array([dt.date(2024, 1, 1 + i % 2) if i % 5 else None for i in ids], pa.date32()),
                "dec": pa.array(
                    [decimal.Decimal(i % 3) / 2 if i % 4 else None for i in ids], pa.decimal128(5, 2)
                ),
                "flag": pa.array([i % 2 == 0 for i in ids], pa.bool_()),
            }
        )

    feed = {"delta.enableChangeDataFeed": "true"}
    deltalake.write_deltalake(root, frame(0), partition_by=["d", "dec", "flag"], configuration=feed)
    deltalake.write_deltalake(root, frame(12), mode="append")
    deltalake.DeltaTable(root).delete("id % 3 = 0")
    deltalake.write_deltalake(root, frame(24), mode="append")
    assert _assert_every_range_reads_as_scan_by_scan(Path(root)) == 10
