"""The main job, end to end on one machine: build a small Delta table, read it, show its history.

Run it with ``make demo``. The table lives under ``.demo/`` in the repository.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
from deltalake import write_deltalake

from airflow_delta_provider.core.logfiles import parse_log_file
from airflow_delta_provider.core.storage import TableStorage

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
    storage = TableStorage(str(ROOT))
    print(f"Table {storage.root_uri}")
    for entry in storage.list_log():
        log_file = parse_log_file(entry)
        if log_file is None:
            continue
        actions = [json.loads(line) for line in storage.read_bytes(entry.path).splitlines() if line]
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        adds = sum("add" in a for a in actions)
        removes = sum("remove" in a for a in actions)
        print(
            f"  version {log_file.version}: {info.get('operation', '?'):<12} +{adds} files -{removes} files"
        )


if __name__ == "__main__":
    main()
