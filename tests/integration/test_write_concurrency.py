"""Many real writer processes committing to one table at once, locally and on S3 (moto).

Each writer is a separate Python process (``subprocess``) running the core's
``commit_files``; they are released together once all of them have imported everything,
so their commits really race for the same versions. delta-rs judges the result.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ConcurrentAppendError
from airflow_delta_provider.core.log.logfiles import LogFileKind, parse_log_file

if TYPE_CHECKING:
    from collections.abc import Callable

    from airflow_delta_provider.core.log.snapshot import Snapshot

pytestmark = pytest.mark.slow

PROCESSES = 8
APPENDS_PER_PROCESS = 25
ROWS_PER_FILE = 3
SCHEMA = pa.schema([("key", pa.string()), ("submitter", pa.int64()), ("row", pa.int64()), ("p", pa.string())])

# A writer process. argv[1]: JSON {"uri", "options", "jobs": [...], "hold": bool}. With
# "hold", the writer loads its read snapshot, prints "ready" and waits for a line on stdin
# before committing (so that racing writers start from the same snapshot); without it, it
# prints "ready" after its imports and waits for "go" before its first job. It prints one
# JSON line per job: the CommitResult, or the error's class, version and operation.
_WRITER = r"""
import json, sys
from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ConcurrentModificationError

config = json.loads(sys.argv[1])


class HeldTable(DeltaTable):
    # Hold the writer between reading its snapshot and committing, once.
    held = False

    def snapshot(self, *args, **kwargs):
        snapshot = super().snapshot(*args, **kwargs)
        if config.get("hold") and not HeldTable.held:
            HeldTable.held = True
            print("ready", snapshot.version, flush=True)
            sys.stdin.readline()
        return snapshot


table = HeldTable(config["uri"], config["options"])
if not config.get("hold"):
    print("ready", flush=True)
    sys.stdin.readline()
for job in config["jobs"]:
    try:
        result = table.commit_files(
            job["files"],
            mode=job.get("mode", "append"),
            replace_where=job.get("replace_where"),
            app_id=job.get("app_id"),
            app_version=job.get("app_version"),
        )
        out = {"ok": True, **result.to_dict()}
    except ConcurrentModificationError as err:
        out = {"ok": False, "error": type(err).__name__, "version": err.version,
               "operation": err.operation, "message": str(err)}
    print(json.dumps({"job": job, **out}), flush=True)
"""


class Writers:
    """Writer processes started together; ``run()`` releases them and collects their results."""

    def __init__(self, configs: list[dict[str, Any]]) -> None:
        self.processes = [
            subprocess.Popen(
                [sys.executable, "-c", _WRITER, json.dumps(config)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for config in configs
        ]
        # Every writer has imported the core (and, when holding, read its snapshot).
        self.ready = [self._readline(p).split()[1:] for p in self.processes]

    @staticmethod
    def _readline(process: subprocess.Popen[str]) -> str:
        assert process.stdout is not None
        line = process.stdout.readline()
        assert line.startswith("ready"), f"writer {process.pid} did not start (exit code {process.poll()})"
        return line

    def run(self, timeout: float = 600) -> list[list[dict[str, Any]]]:
        for process in self.processes:
            assert process.stdin is not None
            process.stdin.write("go\n")
            process.stdin.flush()
        results = []
        for process in self.processes:
            out, _ = process.communicate(timeout=timeout)
            assert process.returncode == 0, f"writer {process.pid} failed with exit code {process.returncode}"
            results.append([json.loads(line) for line in out.splitlines() if line.startswith("{")])
        return results


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path) -> dict[str, Any]:
    """Where the table lives: uri, core storage options, delta-rs storage options."""
    if request.param == "local":
        return {"uri": str(tmp_path / "t"), "options": None, "rs_options": None}
    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket")
    return {
        "uri": f"s3://{bucket}/t",
        "options": request.getfixturevalue("s3_storage_options"),
        "rs_options": {
            "AWS_ENDPOINT_URL": endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_REGION": "us-east-1",
            "AWS_ALLOW_HTTP": "true",
        },
    }


def write_file(table: DeltaTable, partition: str, key: str, submitter: int, rows: int = ROWS_PER_FILE) -> str:
    """One small Parquet file in the partition's directory; returns its path relative to the root."""
    relative = f"p={partition}/part-{uuid.uuid4()}.parquet"
    data = pa.table(
        {
            "key": [key] * rows,
            "submitter": pa.array([submitter] * rows, pa.int64()),
            "row": pa.array(range(rows), pa.int64()),
        }
    )
    path = table.storage.join(relative)
    if table.storage.is_local:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(data, path)
    else:
        pq.write_table(data, path, filesystem=table.storage.fs)
    return relative


def commits(table: DeltaTable) -> dict[int, list[dict[str, Any]]]:
    """Every commit file in the log, parsed: version -> actions."""
    out = {}
    for info in table.storage.list_log():
        log_file = parse_log_file(info)
        if log_file is not None and log_file.kind is LogFileKind.COMMIT:
            data = table.storage.read_bytes(table.storage.log_path(info.name))
            out[log_file.version] = [json.loads(line) for line in data.decode().splitlines() if line]
    return out


def rs_table(table: DeltaTable, backend: dict[str, Any]) -> deltalake.DeltaTable:
    return deltalake.DeltaTable(table.uri, storage_options=backend["rs_options"])


def rows_by_key(rows: pa.Table) -> dict[str, list[tuple[int, int]]]:
    out: dict[str, list[tuple[int, int]]] = {}
    for row in rows.select(["key", "submitter", "row"]).to_pylist():
        out.setdefault(row["key"], []).append((row["submitter"], row["row"]))
    return out


# --- 8 processes x 25 idempotent appends ---------------------------------------------------


def schedule(
    table: DeltaTable, appends: int = APPENDS_PER_PROCESS
) -> tuple[list[list[dict[str, Any]]], set[tuple[str, int]]]:
    """Each writer's jobs, and the distinct (app_id, app_version) among them.

    Every third job re-submits a key already submitted: alternately the writer's own
    previous key (already committed: found in the read snapshot) and the neighbour's
    previous key (likely in flight at the same moment: found among the winners, or
    committed by us first so that the neighbour skips). Each app_id has one version, so
    the order of the commits cannot make a distinct key be skipped.
    """
    jobs: list[list[dict[str, Any]]] = []
    keys: set[tuple[str, int]] = set()
    for writer in range(PROCESSES):
        own = []
        for j in range(appends):
            if j % 3 == 2:
                source = writer if (j // 3) % 2 == 0 else (writer + 1) % PROCESSES
                app_id, app_version = f"task-{source}-{j - 1}", j
            else:
                app_id, app_version = f"task-{writer}-{j}", j + 1
                keys.add((app_id, app_version))
            path = write_file(table, str(writer % 2), app_id, writer)
            own.append({"files": [path], "app_id": app_id, "app_version": app_version})
        jobs.append(own)
    return jobs, keys


def test_eight_writers_append_idempotently_at_once(backend):
    prove_eight_writers_append_idempotently(backend, APPENDS_PER_PROCESS)


@pytest.fixture(params=["azure", "gcs"])
def cloud_backend(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A table on Azurite (``az://``) or fake-gcs-server (``gs://``), like :func:`backend`.

    delta-rs reads Azurite through its blob endpoint; it cannot list fake-gcs-server (object_store
    lists through GCS's XML API, which the emulator does not serve), so on GCS the core alone
    reads the result back."""
    if request.param == "azure":
        container = request.getfixturevalue("azure_container")
        return {
            "uri": f"az://{container}/t",
            "options": request.getfixturevalue("azure_storage_options"),
            "rs_options": request.getfixturevalue("azure_rs_options"),
        }
    return {
        "uri": f"gs://{request.getfixturevalue('gcs_bucket')}/t",
        "options": request.getfixturevalue("gcs_storage_options"),
        "rs_options": None,
    }


#: Appends per writer on the emulators: fewer than on S3 to keep the tier's time down; with 8
#: writers every version is still raced for and a third of the submissions are duplicates.
CLOUD_APPENDS_PER_PROCESS = 6


def test_eight_writers_append_idempotently_on_azure_and_gcs(cloud_backend):
    prove_eight_writers_append_idempotently(cloud_backend, CLOUD_APPENDS_PER_PROCESS)


def prove_eight_writers_append_idempotently(backend: dict[str, Any], appends: int) -> None:
    table = DeltaTable.create(backend["uri"], SCHEMA, partition_by=["p"], storage_options=backend["options"])
    jobs, keys = schedule(table, appends)
    assert sum(len(j) for j in jobs) == PROCESSES * appends
    assert PROCESSES * appends - len(keys) >= PROCESSES * appends // 3 - 3

    writers = Writers([{"uri": table.uri, "options": backend["options"], "jobs": own} for own in jobs])
    results = [r for per_writer in writers.run() for r in per_writer]

    assert all(r["ok"] for r in results), [r for r in results if not r["ok"]]
    committed = [r for r in results if r["committed"]]
    skipped = [r for r in results if r["skipped"]]
    assert len(committed) == len(keys)
    assert len(skipped) == len(results) - len(keys)
    assert sorted(r["version"] for r in committed) == list(range(1, len(keys) + 1))

    # The log: versions 0..N without a gap, each key's txn written exactly once, with its file.
    log = commits(table)
    assert sorted(log) == list(range(len(keys) + 1))
    txns = Counter(
        (a["txn"]["appId"], a["txn"]["version"]) for actions in log.values() for a in actions if "txn" in a
    )
    assert set(txns) == keys
    assert set(txns.values()) == {1}
    recorded_at = {
        (a["txn"]["appId"], a["txn"]["version"]): version
        for version, actions in log.items()
        for a in actions
        if "txn" in a
    }
    for result in committed:
        assert recorded_at[(result["app_id"], result["app_version"])] == result["version"]
    for result in skipped:
        # The skip names the version holding the key's txn (or a later one, past a checkpoint).
        assert result["version"] >= recorded_at[(result["app_id"], result["app_version"])]
    assert sum(1 for actions in log.values() for a in actions if "add" in a) == len(keys)
    assert max(r["attempts"] for r in committed) > 1  # the writers did race for versions

    # The data: each key's rows exactly once, all from one submitter's file.
    snapshot = table.snapshot()
    ours = snapshot.to_pyarrow_table()
    assert snapshot.version == len(keys)
    assert ours.num_rows == len(keys) * ROWS_PER_FILE
    by_key = rows_by_key(ours)
    assert set(by_key) == {app_id for app_id, _ in keys}
    for key_rows in by_key.values():
        assert len({submitter for submitter, _ in key_rows}) == 1
        assert sorted(row for _, row in key_rows) == list(range(ROWS_PER_FILE))
    for app_id, app_version in keys:
        assert snapshot.app_transaction_version(app_id) == app_version

    assert_checksums_match(table, log)

    if backend["rs_options"] is None and not table.storage.is_local:
        return  # delta-rs cannot reach this emulator (see cloud_backend)
    theirs = rs_table(table, backend)
    assert theirs.version() == snapshot.version
    their_rows = pa.table(theirs.to_pyarrow_table())
    assert their_rows.num_rows == ours.num_rows
    assert rows_by_key(their_rows) == by_key
    for app_id, app_version in sorted(keys)[:: len(keys) // 10]:
        assert theirs.transaction_version(app_id) == app_version


def assert_checksums_match(table: DeltaTable, log: dict[int, list[dict[str, Any]]]) -> None:
    """Every ``.crc`` the racing writers left belongs to its commit and matches that version's state."""
    checked = 0
    for info in table.storage.list_log():
        log_file = parse_log_file(info)
        if log_file is None or log_file.kind is not LogFileKind.CHECKSUM:
            continue
        version = log_file.version
        checksum = json.loads(table.storage.read_bytes(table.storage.log_path(info.name)))
        commit_info = next(a["commitInfo"] for a in log[version] if "commitInfo" in a)
        assert checksum["txnId"] == commit_info["txnId"], version
        snapshot = table.snapshot(version)
        files = snapshot.files()
        assert checksum["numFiles"] == files.num_rows, version
        assert checksum["tableSizeBytes"] == sum(files["size"].to_pylist()), version
        their_txns = {t["appId"]: t["version"] for t in checksum.get("setTransactions", [])}
        assert their_txns == {app: t.version for app, t in snapshot.transactions.items()}, version
        checked += 1
    assert checked >= 1  # at least version 0's; later ones only while the chain was unbroken


# --- replaceWhere racing other writes -------------------------------------------------------


@pytest.fixture
def seeded(backend) -> DeltaTable:
    """Version 1: one file in partition a, one in partition b."""
    table = DeltaTable.create(backend["uri"], SCHEMA, partition_by=["p"], storage_options=backend["options"])
    table.commit_files([write_file(table, "a", "seed-a", 0), write_file(table, "b", "seed-b", 0)])
    return table


class Interloper(DeltaTable):
    """A table whose first ``snapshot()`` call runs ``then`` right after reading: a concurrent writer."""

    def __init__(self, table: DeltaTable, options: dict[str, Any] | None, then: Callable[[], None]) -> None:
        super().__init__(table.uri, options)
        self._then: Callable[[], None] | None = then

    def snapshot(self, *args: Any, **kwargs: Any) -> Snapshot:
        snapshot = super().snapshot(*args, **kwargs)
        then, self._then = self._then, None
        if then is not None:
            then()
        return snapshot


def in_another_process(backend: dict[str, Any], table: DeltaTable, job: dict[str, Any]) -> Callable[[], None]:
    """A callable committing ``job`` from a separate writer process, and checking it succeeded."""

    def run() -> None:
        (results,) = Writers([{"uri": table.uri, "options": backend["options"], "jobs": [job]}]).run()
        assert results[0]["ok"] and results[0]["committed"], results

    return run


def keys_of(table: DeltaTable, backend: dict[str, Any]) -> list[str]:
    ours = sorted(table.snapshot().to_pyarrow_table()["key"].to_pylist())
    assert sorted(pa.table(rs_table(table, backend).to_pyarrow_table())["key"].to_pylist()) == ours
    return ours


def test_replace_where_loses_to_an_append_into_its_partition(seeded, backend):
    """The overwrite read version 1; an append to partition a commits version 2 before it commits."""
    append = {"files": [write_file(seeded, "a", "appended", 1)]}
    overwrite = Interloper(seeded, backend["options"], in_another_process(backend, seeded, append))
    replacement = write_file(seeded, "a", "replacement", 2)
    with pytest.raises(ConcurrentAppendError) as raised:
        overwrite.commit_files([replacement], mode="overwrite", replace_where="p = 'a'")
    assert raised.value.version == 2
    assert raised.value.operation == "WRITE"
    assert "version 2" in str(raised.value) and "WRITE" in str(raised.value)
    assert "p = 'a'" in str(raised.value)
    # Nothing committed is lost, nothing of the loser is in the table.
    assert seeded.version() == 2
    assert keys_of(seeded, backend) == sorted(["appended"] * 3 + ["seed-a"] * 3 + ["seed-b"] * 3)


def test_append_read_before_a_replace_where_still_lands(seeded, backend):
    """The append read version 1; the overwrite of partition a commits version 2; the blind append retries."""
    overwrite = {
        "files": [write_file(seeded, "a", "replacement", 2)],
        "mode": "overwrite",
        "replace_where": "p = 'a'",
    }
    append = Interloper(seeded, backend["options"], in_another_process(backend, seeded, overwrite))
    result = append.commit_files([write_file(seeded, "a", "appended", 1)])
    assert (result.version, result.read_version, result.attempts) == (3, 1, 2)
    assert keys_of(seeded, backend) == sorted(["appended"] * 3 + ["replacement"] * 3 + ["seed-b"] * 3)


def test_replace_where_on_different_partitions_both_succeed(seeded, backend):
    other = {
        "files": [write_file(seeded, "b", "new-b", 2)],
        "mode": "overwrite",
        "replace_where": "p = 'b'",
    }
    ours = Interloper(seeded, backend["options"], in_another_process(backend, seeded, other))
    result = ours.commit_files(
        [write_file(seeded, "a", "new-a", 1)], mode="overwrite", replace_where="p = 'a'"
    )
    assert (result.version, result.read_version, result.num_removed_files) == (3, 1, 1)
    assert keys_of(seeded, backend) == sorted(["new-a"] * 3 + ["new-b"] * 3)


def test_replace_where_racing_an_append_from_the_same_snapshot(seeded, backend):
    """Two processes hold the same read snapshot, then commit at once: the outcome fits one serial order."""
    writers = Writers(
        [
            {
                "uri": seeded.uri,
                "options": backend["options"],
                "hold": True,
                "jobs": [{"files": [write_file(seeded, "a", "appended", 1)]}],
            },
            {
                "uri": seeded.uri,
                "options": backend["options"],
                "hold": True,
                "jobs": [
                    {
                        "files": [write_file(seeded, "a", "replacement", 2)],
                        "mode": "overwrite",
                        "replace_where": "p = 'a'",
                    }
                ],
            },
        ]
    )
    assert writers.ready == [["1"], ["1"]]  # both read version 1
    [append], [overwrite] = writers.run()
    assert append["ok"] and append["committed"]
    if overwrite["ok"]:
        # The overwrite won version 2; the blind append does not depend on what it replaced.
        assert (overwrite["version"], append["version"]) == (2, 3)
        expected = ["appended"] * 3 + ["replacement"] * 3 + ["seed-b"] * 3
    else:
        assert overwrite["error"] == "ConcurrentAppendError"
        assert (append["version"], overwrite["version"], overwrite["operation"]) == (2, 2, "WRITE")
        expected = ["appended"] * 3 + ["seed-a"] * 3 + ["seed-b"] * 3
    assert seeded.version() == 3 if overwrite["ok"] else 2
    assert keys_of(seeded, backend) == sorted(expected)


def test_replace_where_racing_replace_where_on_another_partition_from_the_same_snapshot(seeded, backend):
    writers = Writers(
        [
            {
                "uri": seeded.uri,
                "options": backend["options"],
                "hold": True,
                "jobs": [
                    {
                        "files": [write_file(seeded, part, f"new-{part}", n)],
                        "mode": "overwrite",
                        "replace_where": f"p = '{part}'",
                    }
                ],
            }
            for n, part in enumerate("ab")
        ]
    )
    assert writers.ready == [["1"], ["1"]]
    results = [r for per_writer in writers.run() for r in per_writer]
    assert all(r["ok"] and r["committed"] for r in results), results
    assert sorted(r["version"] for r in results) == [2, 3]
    assert keys_of(seeded, backend) == sorted(["new-a"] * 3 + ["new-b"] * 3)
