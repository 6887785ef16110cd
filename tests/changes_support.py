"""Shared helpers of the change-feed tests: the delta-rs oracle, row normalisation, fixtures."""

from __future__ import annotations

import collections
import io
import os
import tarfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa

if TYPE_CHECKING:
    from collections.abc import Iterator

    from airflow_delta_provider.core import DeltaTable

CORPUS = Path(__file__).resolve().parent / "conformance" / "corpus"
KERNEL_FIXTURES = (
    Path(__file__).resolve().parent / "unit" / "core" / "changes" / "changes_data" / "delta-kernel-rs"
)
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
    reader = deltalake.DeltaTable(str(path)).load_cdf(starting_version=start, ending_version=end)
    return pa.table(reader.read_all())


def every_range(first: int, last: int) -> Iterator[tuple[int, int]]:
    for start in range(first, last + 1):
        for end in range(start, last + 1):
            yield start, end


class SnapshotRows:
    """The rows of each version of a table as multisets (empty before version 0), read once."""

    def __init__(self, table: DeltaTable, columns: list[str]) -> None:
        self.table = table
        self.columns = columns
        self._rows: dict[int, collections.Counter[tuple[Any, ...]]] = {}

    def __call__(self, version: int) -> collections.Counter[tuple[Any, ...]]:
        if version < 0:
            return collections.Counter()
        if version not in self._rows:
            data = self.table.snapshot(version).to_pyarrow_table(self.columns)
            self._rows[version] = collections.Counter(
                zip(*(data.column(c).to_pylist() for c in self.columns), strict=True)
            )
        return self._rows[version]

    def net_changes(
        self, start: int, end: int
    ) -> tuple[collections.Counter[tuple[Any, ...]], collections.Counter[tuple[Any, ...]]]:
        """(inserted, deleted) rows of a range, as multisets."""
        data = self.table.changes(start, end).to_pyarrow_table([*self.columns, "_change_type"])
        inserted: collections.Counter[tuple[Any, ...]] = collections.Counter()
        deleted: collections.Counter[tuple[Any, ...]] = collections.Counter()
        for row in data.to_pylist():
            key = tuple(row[c] for c in self.columns)
            if row["_change_type"] in ("insert", "update_postimage"):
                inserted[key] += 1
            else:
                deleted[key] += 1
        return inserted, deleted

    def assert_changes_are_the_difference(self, start: int, end: int) -> None:
        """snapshot(start - 1) + inserts - deletes == snapshot(end), as multisets, and every
        deleted row was there to delete."""
        inserted, deleted = self.net_changes(start, end)
        before, after = self(start - 1), self(end)
        assert not (deleted - (before + inserted)), (
            f"versions {start}-{end} delete rows that were never there"
        )
        assert before + inserted - deleted == after, f"versions {start}-{end}"


def log_state(root: str | Path) -> dict[str, bytes]:
    """Every file of ``_delta_log`` with its content."""
    log = Path(root) / "_delta_log"
    return {name: (log / name).read_bytes() for name in sorted(os.listdir(log)) if (log / name).is_file()}


def delta_rs_history(root: Path, *, partitioned: bool, feed: bool) -> Iterator[str]:
    """Build a table with delta-rs: appends, an overwrite, deletes, updates and merges; yield the
    operation of each version."""
    configuration = {"delta.enableChangeDataFeed": "true"} if feed else None
    partition_by = ["part"] if partitioned else None

    def frame(ids: list[int]) -> pa.Table:
        return pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "name": [f"n{i}" for i in ids],
                "part": [f"p{i % 3}" for i in ids],
            }
        )

    uri = str(root)
    deltalake.write_deltalake(
        uri, frame(list(range(10))), partition_by=partition_by, configuration=configuration
    )
    yield "CREATE"
    deltalake.write_deltalake(uri, frame(list(range(10, 16))), mode="append")
    yield "WRITE"
    table = deltalake.DeltaTable(uri)
    table.delete("id = 3")
    yield "DELETE"
    table.update(updates={"name": "'updated'"}, predicate="id >= 12")
    yield "UPDATE"
    source = frame([1, 2, 20, 21])
    (
        table.merge(source, predicate="t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_update(updates={"name": "s.name || '-merged'"})
        .when_not_matched_insert_all()
        .execute()
    )
    yield "MERGE"
    table.delete("part = 'p2'" if partitioned else "id > 14")
    yield "DELETE"
    deltalake.write_deltalake(uri, frame([100, 101, 102]), mode="overwrite")
    yield "WRITE"
    deltalake.write_deltalake(uri, frame([103, 104]), mode="append")
    yield "WRITE"
