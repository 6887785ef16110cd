"""Concurrent writer processes on a row-tracking table: row id ranges never overlap.

Each writer is a separate Python process running the core's ``commit_files``; they are
released together, so their commits race for the same versions and the losers renumber
their rows above the winners' high-water mark. The log is then checked action by action
against PROTOCOL.md § Row Tracking, and delta-rs reads every row.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable

pytestmark = pytest.mark.slow

PROCESSES = 4
APPENDS_PER_PROCESS = 4

_WRITER = r"""
import json, sys
from airflow_delta_provider.core import DeltaTable

uri, files = sys.argv[1], json.loads(sys.argv[2])
table = DeltaTable(uri)
print("ready", flush=True)
sys.stdin.readline()
for name in files:
    result = table.commit_files([name])
    print(json.dumps({"version": result.version, "attempts": result.attempts}), flush=True)
"""


def test_concurrent_writers_get_disjoint_row_id_ranges(tmp_path):
    root = str(tmp_path / "t")
    schema = pa.schema([("writer", pa.int64()), ("n", pa.int64())])
    DeltaTable.create(root, schema, properties={"delta.enableRowTracking": "true"})
    plans: list[list[str]] = []
    expected_rows = 0
    for writer in range(PROCESSES):
        names = []
        for job in range(APPENDS_PER_PROCESS):
            rows = 1 + writer + job  # every file a different size: overlapping ranges would show
            name = f"w{writer}/part-{job}.parquet"
            os.makedirs(os.path.join(root, f"w{writer}"), exist_ok=True)
            pq.write_table(
                pa.table({"writer": [writer] * rows, "n": list(range(rows))}, schema=schema),
                os.path.join(root, name),
            )
            expected_rows += rows
            names.append(name)
        plans.append(names)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, root, json.dumps(names)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for names in plans
    ]
    try:
        for process in processes:
            assert process.stdout is not None and process.stdout.readline().strip() == "ready"
        for process in processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        outputs = [process.communicate(timeout=300)[0] for process in processes]
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
    assert all(process.returncode == 0 for process in processes)
    results = [json.loads(line) for out in outputs for line in out.splitlines()]
    assert len(results) == PROCESSES * APPENDS_PER_PROCESS
    assert any(r["attempts"] > 1 for r in results), "the writers never raced; the test proves nothing"

    # Field by field, commit by commit.
    log_dir = os.path.join(root, "_delta_log")
    spans: list[tuple[int, int]] = []
    previous_mark = -1
    for version in range(1, PROCESSES * APPENDS_PER_PROCESS + 1):
        with open(os.path.join(log_dir, f"{version:020d}.json")) as f:
            actions = [json.loads(line) for line in f]
        domains = [a["domainMetadata"] for a in actions if "domainMetadata" in a]
        (add,) = [a["add"] for a in actions if "add" in a]
        records = json.loads(add["stats"])["numRecords"]
        assert add["defaultRowCommitVersion"] == version
        assert add["baseRowId"] == previous_mark + 1
        assert domains == [
            {
                "domain": "delta.rowTracking",
                "configuration": json.dumps(
                    {"rowIdHighWaterMark": previous_mark + records}, separators=(",", ":")
                ),
                "removed": False,
            }
        ]
        spans.append((add["baseRowId"], add["baseRowId"] + records - 1))
        previous_mark += records
    assert previous_mark == expected_rows - 1
    ordered = sorted(spans)
    assert all(b[0] > a[1] for a, b in itertools.pairwise(ordered))
    assert deltalake.DeltaTable(root).to_pyarrow_table().num_rows == expected_rows
