"""VACUUM as a Spark job (``DeltaSparkVacuumOperator``) against the core's own VACUUM.

One table holds every case the rules decide (live files, a tombstone older and one younger than the
retention, deletion-vector files, an untracked file younger than the retention, hidden names at
every level, ``_change_data``, empty directories); two copies of it are vacuumed, one by the core
in this process and one by the operator on the standalone cluster (and, dry, on Spark Connect):
the same files and directories go, the same records are written.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from typing import TYPE_CHECKING, Any

import pytest
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from spark_servers import leave_classic_mode, leave_connect_mode

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import VacuumRetentionTooShortError
from airflow_delta_provider.core.log.deletion_vectors import (
    deletion_vector_path,
    encode_deletion_vector_file_id,
)
from airflow_delta_provider.core.maintenance.vacuum import LAST_VACUUM_INFO
from airflow_delta_provider.operators.spark_vacuum import DeltaSparkVacuumOperator

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from spark_servers import SparkCluster, SparkConnectServer

pytestmark = pytest.mark.spark

HOUR = 3_600_000
DAY = 24 * HOUR
NOW = int(time.time() * 1000)

#: Untracked, hidden: never listed, never deleted.
HIDDEN = ["_SUCCESS", "ds=1/.part-9.parquet.crc", "_temporary/0/part-1.parquet", "ds=1/_started_1/x.parquet"]
#: What VACUUM deletes: an expired tombstone, its DV file, old orphans (root, partition, CDC).
GONE = ["ds=1/old.parquet", "orphan-root.parquet", "ds=3/orphan.parquet", "_change_data/cdc-1.parquet"]
#: What stays: live files, a tombstone within the retention, a young untracked file.
KEPT = ["ds=1/live-a.parquet", "ds=2/live-b.parquet", "ds=2/fresh.parquet", "ds=1/young.parquet"]
EMPTY_DIRECTORIES = ["ds=4", "deep/er"]


def touch(root: Path, relative: str, age_ms: int) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * (len(relative) + 10))
    stamp = (NOW - age_ms) / 1000
    os.utime(path, (stamp, stamp))


def dv() -> dict[str, Any]:
    return {
        "storageType": "u",
        "pathOrInlineDv": encode_deletion_vector_file_id(uuid.uuid4(), "ab"),
        "offset": 1,
        "sizeInBytes": 10,
        "cardinality": 1,
    }


def build(root: Path) -> dict[str, str]:
    """The table; returns the relative paths of its live and its expired deletion-vector files."""
    live_dv, expired_dv = dv(), dv()
    dv_files = {
        name: os.path.relpath(deletion_vector_path(descriptor, str(root)), root)
        for name, descriptor in (("live", live_dv), ("expired", expired_dv))
    }
    for relative in [*HIDDEN, *GONE, *KEPT, *dv_files.values()]:
        touch(root, relative, 10 * DAY)
    touch(root, "ds=1/young.parquet", HOUR)
    for directory in EMPTY_DIRECTORIES:
        (root / directory).mkdir(parents=True)

    def add(path: str, **extra: Any) -> dict[str, Any]:
        return {
            "add": {
                "path": path,
                "partitionValues": {"ds": path.split("/")[0].split("=")[1]},
                "size": 10,
                "modificationTime": NOW - 10 * DAY,
                "dataChange": True,
                **extra,
            }
        }

    def remove(path: str, age_ms: int, **extra: Any) -> dict[str, Any]:
        return {"remove": {"path": path, "deletionTimestamp": NOW - age_ms, "dataChange": True, **extra}}

    field = {"nullable": True, "metadata": {}}
    schema = {
        "type": "struct",
        "fields": [{"name": "id", "type": "long", **field}, {"name": "ds", "type": "string", **field}],
    }
    metadata = {
        "id": str(uuid.uuid4()),
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps(schema),
        "partitionColumns": ["ds"],
        "configuration": {},
        "createdTime": NOW - 10 * DAY,
    }
    features = {"readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}
    commits = [
        [
            {"commitInfo": {"timestamp": NOW - 10 * DAY, "operation": "WRITE"}},
            {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, **features}},
            {"metaData": metadata},
            add("ds=1/live-a.parquet"),
            add("ds=2/live-b.parquet", deletionVector=live_dv),
            add("ds=1/old.parquet", deletionVector=expired_dv),
            add("ds=2/fresh.parquet"),
        ],
        [
            {"commitInfo": {"timestamp": NOW - DAY, "operation": "DELETE"}},
            remove("ds=1/old.parquet", 8 * DAY, deletionVector=expired_dv),
            remove("ds=2/fresh.parquet", DAY),
        ],
    ]
    log = root / "_delta_log"
    log.mkdir()
    for version, actions in enumerate(commits):
        path = log / f"{version:020d}.json"
        path.write_text("".join(json.dumps(a) + "\n" for a in actions))
        stamp = (NOW - (10 - 9 * version) * DAY) / 1000
        os.utime(path, (stamp, stamp))
    return dv_files


def tree(root: Path) -> tuple[set[str], set[str]]:
    """(files, directories) under the root, the log aside."""
    files, directories = set(), set()
    for path in root.rglob("*"):
        relative = str(path.relative_to(root))
        if relative.startswith("_delta_log"):
            continue
        (directories if path.is_dir() else files).add(relative)
    return files, directories


def relative_names(root: Path, uris: list[str] | tuple[str, ...]) -> set[str]:
    prefix = root.as_uri().rstrip("/") + "/"
    return {u.removeprefix(prefix) for u in uris}


def records(root: Path) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """The VACUUM START/END commits: operation, parameters and metrics."""
    found = []
    for entry in DeltaTable(str(root)).history():
        info = entry
        if str(info.get("operation", "")).startswith("VACUUM"):
            found.append(
                (info["operation"], info.get("operationParameters", {}), info.get("operationMetrics", {}))
            )
    return found


@pytest.fixture(scope="module")
def connections(spark_cluster: SparkCluster, spark_connect: SparkConnectServer) -> Iterator[None]:
    names = {"AIRFLOW_CONN_SPARK_VACUUM_CLUSTER": spark_cluster.connection_uri}
    names["AIRFLOW_CONN_SPARK_VACUUM_CONNECT"] = spark_connect.connection_uri
    os.environ.update(names)
    try:
        yield
    finally:
        for name in names:
            os.environ.pop(name, None)


def run(op: DeltaSparkVacuumOperator) -> dict[str, Any]:
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        dag_id="maintenance",
        task_id=op.task_id,
        run_id="manual__1",
        map_index=-1,
        try_number=1,
        max_tries=0,
        task=op,
    )
    result: dict[str, Any] = op.execute({"ti": ti, "task": op, "outlet_events": OutletEventAccessors()})
    return result


def operator(root: Path, conn_id: str, cluster: SparkCluster, **kwargs: Any) -> DeltaSparkVacuumOperator:
    return DeltaSparkVacuumOperator(
        task_id="vacuum",
        table_uri=str(root),
        conn_id=conn_id,
        config_kwargs=cluster.app_conf() if conn_id.endswith("cluster") else {},
        parallelism=2,
        **kwargs,
    )


def test_the_connect_server_refuses_a_short_retention_and_plans_what_the_core_plans(
    connections: None, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    """On Spark Connect (run first: a classic session in this process would block Connect ones)."""
    leave_classic_mode()
    root = tmp_path / "table"
    build(root)
    before = tree(root), sorted(os.listdir(root / "_delta_log"))
    with pytest.raises(VacuumRetentionTooShortError):
        run(operator(root, "spark_vacuum_connect", spark_cluster, retention="1 hour"))
    dry = run(operator(root, "spark_vacuum_connect", spark_cluster, dry_run=True))
    core = DeltaTable(str(root)).vacuum(dry_run=True)
    assert (tree(root), sorted(os.listdir(root / "_delta_log"))) == before
    assert dry["files"] == list(core.files) and dry["directories"] == list(core.directories)
    assert (dry["num_bytes"], dry["status"]) == (core.num_bytes, "DRY_RUN")
    leave_connect_mode()


def test_the_cluster_deletes_what_the_core_deletes_and_records_it_the_same_way(
    connections: None, spark_cluster: SparkCluster, tmp_path: Path
) -> None:
    source = tmp_path / "source"
    dv_files = build(source)
    by_core, by_spark = tmp_path / "core", tmp_path / "spark"
    shutil.copytree(source, by_core, symlinks=True)
    shutil.copytree(source, by_spark, symlinks=True)

    dry = run(operator(by_spark, "spark_vacuum_cluster", spark_cluster, dry_run=True))
    assert relative_names(by_spark, dry["files"]) == {*GONE, dv_files["expired"]}
    # `deep` holds only the empty `deep/er`: it goes too (deepest first), as in the core.
    assert relative_names(by_spark, dry["directories"]) == {*EMPTY_DIRECTORIES, "deep"}
    assert tree(by_spark) == tree(source)

    core = DeltaTable(str(by_core)).vacuum()
    spark = run(operator(by_spark, "spark_vacuum_cluster", spark_cluster))
    assert relative_names(by_spark, spark["files"]) == relative_names(by_core, core.files)
    assert (spark["num_deleted"], spark["num_bytes"], spark["status"]) == (
        core.num_deleted,
        core.num_bytes,
        "COMPLETED",
    )
    assert (spark["start_version"], spark["end_version"]) == (core.start_version, core.end_version) == (2, 3)
    files, directories = tree(by_spark)
    assert (files, directories) == tree(by_core)
    assert set(KEPT) | set(HIDDEN) | {dv_files["live"]} == files
    assert not set(EMPTY_DIRECTORIES) & directories
    assert records(by_spark) == records(by_core)
    assert (by_spark / "_delta_log" / LAST_VACUUM_INFO).read_bytes() == (
        by_core / "_delta_log" / LAST_VACUUM_INFO
    ).read_bytes()
