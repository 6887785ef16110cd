"""Shared helpers of the change-feed tests: the delta-rs oracle, row normalisation, fixtures."""

from __future__ import annotations

import collections
import io
import os
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    from collections.abc import Iterator

    from airflow_delta_provider.core import DeltaTable

CORPUS = Path(__file__).resolve().parents[2] / "conformance" / "corpus"
KERNEL_FIXTURES = Path(__file__).resolve().parent / "changes_data" / "delta-kernel-rs"
CDC = ("_change_type", "_commit_version", "_commit_timestamp")


def unpack_kernel_fixtures(target: Path) -> Path:
    """Unpack every delta-kernel-rs fixture tarball into ``target`` (tar keeps file times)."""
    for archive in sorted(KERNEL_FIXTURES.glob("*.tar.zst")):
        with pa.input_stream(str(archive), compression="zstd") as stream:
            data = stream.read()
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(target, filter="data")
    return target


def normalised(table: pa.Table, *, timestamps: bool = False) -> list[tuple[tuple[str, Any], ...]]:
    """The rows as sorted tuples of (column, value), delta-rs's types mapped to Delta's (string
    views to strings, UInt64 versions to int64); ``_commit_timestamp`` dropped unless asked."""
    columns = {}
    for name in sorted(table.column_names):
        if name == "_commit_timestamp" and not timestamps:
            continue
        column = table.column(name)
        if pa.types.is_string_view(column.type) or pa.types.is_large_string(column.type):
            column = column.cast(pa.string())
        if name == "_commit_version":
            column = column.cast(pa.int64())
        columns[name] = column
    rows = pa.table(columns).to_pylist()
    return sorted((tuple(row.items()) for row in rows), key=repr)


def delta_rs_changes(path: str | Path, start: int, end: int | None = None) -> pa.Table:
    import deltalake

    reader = deltalake.DeltaTable(str(path)).load_cdf(starting_version=start, ending_version=end)
    return pa.table(reader.read_all())


def every_range(first: int, last: int) -> Iterator[tuple[int, int]]:
    for start in range(first, last + 1):
        for end in range(start, last + 1):
            yield start, end


def snapshot_rows(
    table: DeltaTable, version: int, columns: list[str]
) -> collections.Counter[tuple[Any, ...]]:
    """The rows of a version as a multiset (the empty multiset before version 0)."""
    if version < 0:
        return collections.Counter()
    data = table.snapshot(version).to_pyarrow_table(columns)
    return collections.Counter(zip(*(data.column(c).to_pylist() for c in columns), strict=True))


def net_changes(
    table: DeltaTable, start: int, end: int, columns: list[str]
) -> tuple[collections.Counter[tuple[Any, ...]], collections.Counter[tuple[Any, ...]]]:
    """(inserted, deleted) rows of a range as multisets."""
    data = table.changes(start, end).to_pyarrow_table([*columns, "_change_type"])
    inserted: collections.Counter[tuple[Any, ...]] = collections.Counter()
    deleted: collections.Counter[tuple[Any, ...]] = collections.Counter()
    for row in data.to_pylist():
        key = tuple(row[c] for c in columns)
        if row["_change_type"] in ("insert", "update_postimage"):
            inserted[key] += 1
        else:
            deleted[key] += 1
    return inserted, deleted


def assert_changes_are_the_snapshot_difference(
    table: DeltaTable, start: int, end: int, columns: list[str]
) -> None:
    """snapshot(start - 1) + inserts - deletes == snapshot(end), as multisets, and every deleted
    row was there to delete."""
    inserted, deleted = net_changes(table, start, end, columns)
    before = snapshot_rows(table, start - 1, columns)
    after = snapshot_rows(table, end, columns)
    assert not (deleted - (before + inserted)), f"versions {start}-{end} delete rows that were never there"
    assert before + inserted - deleted == after, f"versions {start}-{end}"


def log_state(root: str | Path) -> dict[str, bytes]:
    """Every file of ``_delta_log`` with its content."""
    log = Path(root) / "_delta_log"
    return {name: (log / name).read_bytes() for name in sorted(os.listdir(log)) if (log / name).is_file()}
