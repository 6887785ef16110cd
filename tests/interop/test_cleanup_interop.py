"""After the core's log cleanup, delta-rs and the core load every retained version alike."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import deltalake
import pyarrow as pa

from airflow_delta_provider.core import DeltaTable

NOW = datetime(2026, 6, 15, tzinfo=UTC)


def test_every_retained_version_loads_in_both(tmp_path):
    uri = str(tmp_path / "t")
    for i in range(12):
        mode = "overwrite" if i % 5 == 4 else "append"
        deltalake.write_deltalake(
            uri, pa.table({"id": [i], "p": [f"x{i % 3}"]}), partition_by=["p"], mode=mode
        )
        if i in (5, 9):
            deltalake.DeltaTable(uri).create_checkpoint()
    log_dir = os.path.join(uri, "_delta_log")
    for name in os.listdir(log_dir):
        if name[:20].isdigit():
            version = int(name[:20])
            stamp = (NOW - timedelta(days=40 if version < 10 else 1)).timestamp()
            os.utime(os.path.join(log_dir, name), (stamp, stamp))
    table = DeltaTable(uri)
    result = table.cleanup_logs(now=NOW)
    assert result.earliest_retained_version == 9
    assert min(int(n[:20]) for n in os.listdir(log_dir) if n.endswith(".json")) == 9
    for version in range(9, 12):
        ours = sorted(table.snapshot(version).to_pyarrow_table()["id"].to_pylist())
        theirs = sorted(deltalake.DeltaTable(uri, version=version).to_pyarrow_table()["id"].to_pylist())
        assert ours == theirs
