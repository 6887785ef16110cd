"""The main job, end to end on one machine: build a small Delta table, read it, show its history.

Run it with ``make demo``. The table lives under ``.demo/`` in the repository.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute
from deltalake import write_deltalake

from airflow_delta_provider.core import DeltaTable

ROOT = Path(__file__).resolve().parent.parent / ".demo" / "events"


def build_table(root: Path) -> None:
    """Three commits written by delta-rs: create, append, overwrite of one partition."""
    shutil.rmtree(root, ignore_errors=True)
    day1 = pa.table({"ds": ["2026-11-01"] * 3, "user": ["a", "b", "c"], "clicks": [1, 2, 3]})
    day2 = pa.table({"ds": ["2026-11-02"] * 2, "user": ["a", "d"], "clicks": [5, 8]})
    write_deltalake(str(root), day1, partition_by=["ds"])
    write_deltalake(str(root), day2, partition_by=["ds"], mode="append")
    fixed = pa.table({"ds": ["2026-11-01"] * 2, "user": ["a", "b"], "clicks": [1, 2]})
    write_deltalake(str(root), fixed, partition_by=["ds"], mode="overwrite", predicate="ds = '2026-11-01'")


def main() -> None:
    build_table(ROOT)
    table = DeltaTable(str(ROOT))
    snapshot = table.snapshot()
    print(f"Table {table.uri} at version {snapshot.version}")
    print(f"  schema: {', '.join(f'{f.name} {f.type}' for f in snapshot.schema)}")
    print(f"  partitioned by: {snapshot.partition_columns}")
    files = snapshot.files()
    print(f"  {files.num_rows} active files, {pa.compute.sum(files.column('size')).as_py()} bytes")
    rows = snapshot.to_pyarrow_table().sort_by([("ds", "ascending"), ("user", "ascending")])
    print(f"  {rows.num_rows} rows:")
    for row in rows.to_pylist():
        print(f"    {row['ds']}  {row['user']:<3} clicks={row['clicks']}")
    print("History (newest first):")
    for entry in table.history():
        params = entry.get("operationParameters", {})
        print(f"  version {entry['version']}: {entry.get('operation', '?'):<12} {params}")


if __name__ == "__main__":
    main()
