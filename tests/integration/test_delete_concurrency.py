"""DELETE racing appends, each writer a separate process: no row lost, none resurrected.

A deleter process deletes ten ranges of ids from partition ``x``, one DELETE each, retrying when a
concurrent commit conflicts (as a user retries Delta's ``ConcurrentAppendException``); appender
processes commit files into ``x`` (with ids the ranges select) and into ``y`` (never touched) at the
same time. Afterwards every row is judged by the versions in the log: a row of a range is gone
exactly when its file was in the table version the successful DELETE read, and no file the DELETE
should have read was added between its read and its commit. delta-rs reads the same rows.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable

pytestmark = pytest.mark.slow

APPENDERS = 3
APPENDS = 10
RANGES = 10
SCHEMA = pa.schema([("key", pa.string()), ("id", pa.int64()), ("p", pa.string())])

_PROCESS = r"""
import json, sys, time
from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ConcurrentModificationError

config = json.loads(sys.argv[1])
table = DeltaTable(config["uri"])
print("ready", flush=True)
sys.stdin.readline()
for job in config["jobs"]:
    if "files" in job:
        time.sleep(job.get("pause", 0))
        result = table.commit_files(job["files"])
        print(json.dumps({"append": job["files"], "version": result.version}), flush=True)
        continue
    errors = []
    while True:
        try:
            result = table.delete(job["predicate"])
            break
        except ConcurrentModificationError as err:
            errors.append(type(err).__name__)
    print(json.dumps({"delete": job["predicate"], "version": result.version, "errors": errors,
                      "committed": result.committed}), flush=True)
"""


def write_file(root: str, partition: str, ids: list[int]) -> tuple[str, str]:
    """A data file of rows ``(key, id)``; its path and key."""
    key = uuid.uuid4().hex
    relative = f"p={partition}/part-{key}.parquet"
    os.makedirs(os.path.join(root, f"p={partition}"), exist_ok=True)
    pq.write_table(
        pa.table({"key": [key] * len(ids), "id": pa.array(ids, pa.int64())}), os.path.join(root, relative)
    )
    return relative, key


def run(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", _PROCESS, json.dumps(c)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for c in configs
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline().startswith("ready")
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    out = []
    for process in processes:
        stdout, _ = process.communicate(timeout=900)
        assert process.returncode == 0, f"process {process.pid} failed ({process.returncode})"
        out += [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return out


def commit_info(table: DeltaTable, version: int) -> dict[str, Any]:
    data = table.storage.read_bytes(table.storage.log_path(f"{version:020d}.json"))
    return next(json.loads(line)["commitInfo"] for line in data.decode().splitlines() if "commitInfo" in line)


def added_version(table: DeltaTable) -> dict[str, int]:
    """Each data file's first add: path -> version."""
    out: dict[str, int] = {}
    for version in range(table.version() + 1):
        data = table.storage.read_bytes(table.storage.log_path(f"{version:020d}.json"))
        for line in data.decode().splitlines():
            action = json.loads(line)
            if "add" in action:
                out.setdefault(action["add"]["path"], version)
    return out


@pytest.mark.parametrize("properties", [{}, {"delta.enableDeletionVectors": "true"}], ids=["cow", "dv"])
def test_deletes_racing_appends_lose_and_resurrect_nothing(tmp_path, properties):
    root = str(tmp_path / "t")
    table = DeltaTable.create(root, SCHEMA, partition_by=["p"], properties=properties)
    initial = [write_file(root, "x", list(range(i, 100, 7))) for i in range(7)]
    initial.append(write_file(root, "y", list(range(100))))
    table.commit_files([path for path, _ in initial])
    keys = {path: key for path, key in initial}
    jobs: list[list[dict[str, Any]]] = []
    for writer in range(APPENDERS):
        own = []
        for n in range(APPENDS):
            partition = "x" if (writer + n) % 2 else "y"
            path, key = write_file(root, partition, [(writer * 37 + n * 11 + k) % 100 for k in range(3)])
            keys[path] = key
            # Spread over the deleter's run, so that appends land before, during and after DELETEs.
            own.append({"files": [path], "pause": 0.05 + 0.1 * ((writer + n) % 3)})
        jobs.append(own)
    ranges = [(i * 10, i * 10 + 10) for i in range(RANGES)]
    deletes = [{"predicate": f"p = 'x' AND id >= {low} AND id < {high}"} for low, high in ranges]
    results = run([{"uri": root, "jobs": deletes}, *({"uri": root, "jobs": own} for own in jobs)])

    done = [r for r in results if "delete" in r]
    assert len(done) == RANGES and all(r["committed"] for r in done)
    errors = [e for r in done for e in r["errors"]]
    assert set(errors) <= {"ConcurrentAppendError"}
    read = {r["delete"]: commit_info(table, r["version"])["readVersion"] for r in done}
    committed = {r["delete"]: r["version"] for r in done}
    added = added_version(table)
    expected = set()
    for path, key in keys.items():
        partition = path.split("/")[0][2:]
        for row in pq.read_table(os.path.join(root, path)).to_pylist():
            ident = row["id"]
            if partition == "x":
                low = ident // 10 * 10
                predicate = f"p = 'x' AND id >= {low} AND id < {low + 10}"
                # Never between the DELETE's read and its commit: it would have had to read it.
                assert not read[predicate] < added[path] < committed[predicate], (path, predicate)
                if added[path] <= read[predicate]:
                    continue  # in the version the DELETE read: deleted
            expected.add((key, ident, partition))
    rows = table.snapshot().to_pyarrow_table()
    got = sorted(zip(*(rows.column(c).to_pylist() for c in ("key", "id", "p")), strict=True))
    assert got == sorted(expected)
    # The race was real: appends into x landed after DELETEs read (their rows survive) or between a
    # read and a commit (the DELETE was refused and retried).
    assert any(p == "x" for _, _, p in expected) or errors
    rs = deltalake.DeltaTable(root)
    theirs = pa.table(
        deltalake.QueryBuilder().register("t", rs).execute("select key, id, p from t").read_all()
    )
    columns = [
        theirs.column("key").cast(pa.string()),
        theirs.column("id"),
        theirs.column("p").cast(pa.string()),
    ]
    assert sorted(zip(*(c.to_pylist() for c in columns), strict=True)) == got


def test_appends_to_a_partition_the_deletes_cannot_touch_never_fail_them(tmp_path):
    root = str(tmp_path / "t")
    table = DeltaTable.create(root, SCHEMA, partition_by=["p"])
    table.commit_files([write_file(root, "x", list(range(100)))[0]])
    jobs = [
        [{"files": [write_file(root, "y", [n, writer])[0]]} for n in range(APPENDS)]
        for writer in range(APPENDERS)
    ]
    deletes = [{"predicate": f"p = 'x' AND id < {i * 10}"} for i in range(1, RANGES + 1)]
    results = run([{"uri": root, "jobs": deletes}, *({"uri": root, "jobs": own} for own in jobs)])
    done = [r for r in results if "delete" in r]
    assert [r["errors"] for r in done] == [[]] * RANGES
    rows = table.snapshot().to_pyarrow_table()
    assert set(rows.column("p").to_pylist()) == {"y"}  # every row of x deleted
    assert rows.num_rows == APPENDERS * APPENDS * 2  # every append kept
