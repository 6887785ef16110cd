"""Shared helpers of the DELETE (and PURGE) tests: tables built through the core, their state, the
oracles, and the corpus tables other writers wrote with deletion vectors."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.protocol.column_mapping import physical_data

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string()), ("p", pa.string())])
DV_PROPERTIES = {"delta.enableDeletionVectors": "true"}
CDF_PROPERTIES = {"delta.enableChangeDataFeed": "true"}


def make_table(
    root: str | Path,
    files: Mapping[str, Sequence[Iterable[int]]] | Sequence[Iterable[int]],
    properties: Mapping[str, str] | None = None,
    *,
    schema: pa.Schema = SCHEMA,
) -> DeltaTable:
    """A table at ``root``, partitioned by ``p`` when ``files`` maps partitions to files; each file
    given by its ids (``v`` is ``"v<id>"``), committed one commit per partition."""
    partitioned = isinstance(files, dict)
    data_schema = schema if partitioned else pa.schema([f for f in schema if f.name != "p"])
    table = DeltaTable.create(
        str(root), data_schema, partition_by=["p"] if partitioned else [], properties=dict(properties or {})
    )
    groups = files.items() if isinstance(files, dict) else [(None, files)]
    for partition, ids in groups:
        append(table, [list(i) for i in ids], partition)
    return table


def append(table: DeltaTable, files: Sequence[Sequence[int]], partition: str | None = None) -> list[str]:
    """Write and commit files of the given ids; their paths relative to the root."""
    written = [write_file(table, ids, partition) for ids in files]
    table.commit_files(written)
    return written


def write_file(table: DeltaTable, ids: Sequence[int], partition: str | None = None) -> str:
    """One Parquet file of ``ids`` (physical names under column mapping), not committed."""
    directory = f"p={partition}" if partition is not None else ""
    relative = "/".join(p for p in (directory, f"part-{uuid.uuid4()}.parquet") if p)
    data = pa.table(
        {"id": pa.array(ids, pa.int64()), "v": pa.array([None if i % 7 == 6 else f"v{i}" for i in ids])}
    )
    schema = table.snapshot().schema
    if any(b"delta.columnMapping.physicalName" in (f.metadata or {}) for f in schema):
        data = physical_data(data, schema)
    path = table.storage.join(relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(data, path)
    return relative


def core_rows(table: DeltaTable, version: int | None = None) -> list[tuple[Any, ...]]:
    """The rows the core reads, as sorted (id, v[, p]) tuples."""
    data = table.snapshot(version).to_pyarrow_table()
    return sorted(zip(*(data.column(c).to_pylist() for c in data.column_names), strict=True), key=repr)


def rs_rows(uri: str | Path) -> list[tuple[Any, ...]]:
    """The rows delta-rs reads (deletion vectors applied by its query engine)."""
    rs = deltalake.DeltaTable(str(uri))
    data = pa.table(deltalake.QueryBuilder().register("t", rs).execute("select * from t").read_all())
    columns = {}
    for name in data.column_names:
        column = data.column(name)
        if pa.types.is_string_view(column.type) or pa.types.is_large_string(column.type):
            column = column.cast(pa.string())
        columns[name] = column
    data = pa.table(columns)
    names = [n for n in ("id", "v", "p") if n in data.column_names]
    return sorted(zip(*(data.column(c).to_pylist() for c in names), strict=True), key=repr)


def ids(rows: Iterable[tuple[Any, ...]]) -> list[int]:
    return sorted(r[0] for r in rows)


def state(table: DeltaTable) -> tuple[int, list[tuple[str, str | None]], list[str], list[str]]:
    """What must not change when a DELETE is refused: the version, the active files (with their
    deletion vectors), the ``_delta_log`` listing and every file under the root."""
    snapshot = table.snapshot()
    files = sorted(
        (row["path"], json.dumps(row["deletion_vector"], sort_keys=True) if row["deletion_vector"] else None)
        for row in snapshot.files().select(["path", "deletion_vector"]).to_pylist()
    )
    root = Path(table.storage.root)
    log = sorted(p.name for p in (root / "_delta_log").iterdir())
    everything = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    return snapshot.version, files, log, everything


def commit_actions(table: DeltaTable, version: int) -> list[dict[str, Any]]:
    data = table.storage.read_bytes(table.storage.log_path(f"{version:020d}.json"))
    return [json.loads(line) for line in data.decode().splitlines() if line]


def kind(actions: Iterable[Mapping[str, Any]], name: str) -> list[dict[str, Any]]:
    return [a[name] for a in actions if name in a]


# --- the corpus: tables other writers wrote with deletion vectors -----------------------------

CORPUS = Path(__file__).resolve().parent / "conformance" / "corpus" / "tables"
#: Spark-written tables with deletion vectors (and one delta-rs table), and an integer column.
DV_TABLES = {
    "delta-rs/table_with_deletion_logs": "id",
    "delta-kernel-rs/table-with-dv-small": "value",
    "delta-kernel-rs/dv-partitioned-with-checkpoint/delta": "col1",
    "delta-kernel-rs/dv-with-columnmapping/delta": "col1",
    "delta-kernel-rs/log-replay-dv-key-cases/delta": "id",
    "delta/basic-dv-with-checkpoint": "id",
}


def rs_column_rows(uri: str, columns: list[str]) -> list[tuple[Any, ...]]:
    """The rows delta-rs reads, as sorted tuples of ``columns``."""
    rs = deltalake.DeltaTable(uri)
    names = ", ".join(f'"{c}"' for c in columns)
    data = pa.table(deltalake.QueryBuilder().register("t", rs).execute(f"select {names} from t").read_all())
    values = []
    for column in data.columns:
        if pa.types.is_string_view(column.type) or pa.types.is_large_string(column.type):
            column = column.cast(pa.string())
        values.append(column.to_pylist())
    return sorted(zip(*values, strict=True), key=repr)


def core_column_rows(table: DeltaTable, columns: list[str]) -> list[tuple[Any, ...]]:
    """The rows the core reads, as sorted tuples of ``columns``."""
    data = table.snapshot().to_pyarrow_table(columns)
    return sorted(zip(*(data.column(c).to_pylist() for c in columns), strict=True), key=repr)


# --- data retention: a table of days ---------------------------------------------------------

#: Days of events, one partition each: today and 10, 20, ... 90 days ago; three rows per day.
AGES = range(0, 100, 10)


def events_by_day(root: Path, properties: Mapping[str, str] | None = None) -> DeltaTable:
    """A table partitioned by ``ds`` (ISO dates), one file of three rows per day of :data:`AGES`
    (ids ``3n .. 3n+2`` for the n-th day, today first)."""
    schema = pa.schema([("id", pa.int64()), ("ds", pa.string())])
    table = DeltaTable.create(str(root), schema, partition_by=["ds"], properties=dict(properties or {}))
    today = datetime.now(UTC).date()
    files = []
    for n, age in enumerate(AGES):
        day = (today - timedelta(days=age)).isoformat()
        os.makedirs(root / f"ds={day}", exist_ok=True)
        pq.write_table(pa.table({"id": [3 * n, 3 * n + 1, 3 * n + 2]}), root / f"ds={day}/part-{n}.parquet")
        files.append(f"ds={day}/part-{n}.parquet")
    table.commit_files(files)
    return table
