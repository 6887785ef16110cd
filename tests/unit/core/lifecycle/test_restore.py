"""RESTORE in the core: the commit against Delta's (a Spark-written RESTORE commit reproduced
field by field), deletion vectors, column mapping, partitions, the refusals (vacuumed files,
retention, bounds, bad arguments: nothing committed), races, idempotency, and the commits of a
run ("restore to before run X").

Rows are compared as multisets; the target's rows are read by time travel with the same core,
and delta-rs reads the restored tables in ``tests/interop/test_restore_interop.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    ConcurrentTransactionError,
    ConcurrentWriteError,
    MetadataChangedError,
    RestoreMissingFilesError,
    RestoreTimestampEarlierError,
    RestoreTimestampGreaterError,
    RestoreVersionNotFoundError,
    TaggedCommitsNotFoundError,
    TimeTravelBeyondRetentionError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.lifecycle.restore import (
    NO_OP,
    RestoreOptions,
    commit_restore,
    plan_restore,
)
from airflow_delta_provider.core.log.deletion_vectors import inline_deletion_vector
from airflow_delta_provider.core.protocol.actions import Metadata, Protocol
from airflow_delta_provider.core.protocol.column_mapping import physical_data
from airflow_delta_provider.core.protocol.constraints import merged_identity_schema
from airflow_delta_provider.core.protocol.features import merge_protocols

CORPUS = Path(__file__).resolve().parents[3] / "conformance" / "corpus" / "tables"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())])


# --- helpers ------------------------------------------------------------------------------


def write_file(root: Path, relative: str, ids: list[int]) -> str:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), path)
    return relative


def partitioned(root: Path, **properties: Any) -> DeltaTable:
    """v0 create; v1 append p=a; v2 append p=b; v3 replace p=a with other rows."""
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"], properties=properties or None)
    table.commit_files([write_file(root, "p=a/f1.parquet", [1, 2, 3])])
    table.commit_files([write_file(root, "p=b/f2.parquet", [4, 5])])
    table.commit_files(
        [write_file(root, "p=a/f3.parquet", [100, 101])], mode="overwrite", replace_where="p = 'a'"
    )
    return table


def rows(table: DeltaTable, version: int | None = None) -> list[tuple[Any, ...]]:
    data = table.snapshot(version).to_pyarrow_table()
    return sorted(map(tuple, (r.values() for r in data.to_pylist())), key=repr)


def actions(root: Path, version: int) -> list[dict[str, Any]]:
    text = (root / "_delta_log" / f"{version:020d}.json").read_text()
    return [json.loads(line) for line in text.splitlines()]


def of(kind: str, found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [a[kind] for a in found if kind in a]


def files_of(table: DeltaTable) -> list[tuple[str, Any]]:
    files = table.snapshot().files().select(["path", "deletion_vector"]).to_pylist()
    return sorted((f["path"], json.dumps(f["deletion_vector"], sort_keys=True)) for f in files)


def state(table: DeltaTable, root: Path, log_state: Any) -> tuple[Any, ...]:
    return table.version(), files_of(table), log_state(root)


def copy_corpus(name: str, destination: Path) -> Path:
    """A corpus table copied with fresh modification times (its commits are years old: a restore
    of them is beyond any retention unless the copy is dated now)."""
    shutil.copytree(CORPUS / name, destination, copy_function=shutil.copy)
    for stray in (destination / "_delta_log").glob("*.crc"):
        stray.unlink()
    return destination


def age(root: Path, versions: range, days: float) -> None:
    """Date the commit files of ``versions`` ``days`` ago, one second apart (oldest first)."""
    start = time.time() - days * 86400
    for offset, version in enumerate(versions):
        path = root / "_delta_log" / f"{version:020d}.json"
        os.utime(path, (start + offset, start + offset))


# --- what a restore commits ---------------------------------------------------------------


def test_restore_brings_back_the_target_and_commits_what_delta_commits(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    target = table.snapshot(2)
    f1 = next(f for f in target.files().to_pylist() if f["path"].endswith("f1.parquet"))
    f3 = next(f for f in table.snapshot().files().to_pylist() if f["path"].endswith("f3.parquet"))

    result = table.restore(2)

    assert (result.version, result.restored_version, result.committed, result.reason) == (4, 2, True, None)
    assert (result.num_restored_files, result.num_removed_files) == (1, 1)
    assert rows(table) == rows(table, 2)
    committed = actions(root, 4)
    info = of("commitInfo", committed)[0]
    assert info["operation"] == "RESTORE"
    assert info["operationParameters"] == {"version": "2"}
    assert info["readVersion"] == 3 and info["isBlindAppend"] is False
    assert info["operationMetrics"] == {
        "numRestoredFiles": "1",
        "restoredFilesSize": str(f1["size"]),
        "numRemovedFiles": "1",
        "removedFilesSize": str(f3["size"]),
        "numOfFilesAfterRestore": "2",
        "tableSizeAfterRestore": str(sum(f["size"] for f in target.files().to_pylist())),
    }
    [add] = of("add", committed)
    assert add == {
        "path": f1["path"],
        "partitionValues": {"p": "a"},
        "size": f1["size"],
        "modificationTime": f1["modification_time"],
        "dataChange": True,
        "stats": f1["stats"],
    }
    [remove] = of("remove", committed)
    assert remove["deletionTimestamp"] >= int(time.time() * 1000) - 60_000
    assert {k: v for k, v in remove.items() if k != "deletionTimestamp"} == {
        "path": f3["path"],
        "dataChange": True,
        "extendedFileMetadata": True,
        "partitionValues": {"p": "a"},
        "size": f3["size"],
        "stats": f3["stats"],
    }
    assert Metadata.from_json(of("metaData", committed)[0]) == target.metadata
    assert Protocol.from_json(of("protocol", committed)[0]) == target.protocol


def test_a_restore_commit_spark_wrote_is_reproduced_field_by_field(tmp_path: Path) -> None:
    """basic-with-inserts-overwrite-restore: Spark restored version 1 at version 3. On a copy
    without that commit, the core's restore commits the same actions (timestamps aside)."""
    root = copy_corpus("delta-kernel-rs/basic-with-inserts-overwrite-restore/delta", tmp_path / "t")
    spark = actions(root, 3)
    for name in ("00000000000000000003.json", "00000000000000000003.checkpoint.parquet", "_last_checkpoint"):
        (root / "_delta_log" / name).unlink()
    table = DeltaTable(str(root))

    table.restore(1)

    ours = actions(root, 3)

    def without_time(found: list[dict[str, Any]], kind: str) -> list[str]:
        return sorted(
            json.dumps({k: v for k, v in a.items() if k != "deletionTimestamp"}, sort_keys=True)
            for a in of(kind, found)
        )

    for kind in ("add", "remove", "metaData", "protocol"):
        assert without_time(ours, kind) == without_time(spark, kind), kind
    spark_info, our_info = of("commitInfo", spark)[0], of("commitInfo", ours)[0]
    assert our_info["operation"] == spark_info["operation"] == "RESTORE"
    assert our_info["operationMetrics"] == spark_info["operationMetrics"]
    assert int(our_info["operationParameters"]["version"]) == spark_info["operationParameters"]["version"]
    assert rows(table) == rows(table, 1)


@pytest.mark.parametrize("target", [0, 1, 2])
def test_a_file_whose_deletion_vector_changed_is_removed_and_added_back_with_the_old_one(
    tmp_path: Path, target: int
) -> None:
    """log-replay-dv-key-cases: one file, a new deletion vector at every version. Restoring an older
    version removes (path, current DV) and adds (path, the target's DV or none): a diff by path
    alone would commit nothing and keep the newer deletes."""
    root = copy_corpus("delta-kernel-rs/log-replay-dv-key-cases/delta", tmp_path / "t")
    table = DeltaTable(str(root))
    [current] = table.snapshot().files().to_pylist()
    [wanted] = table.snapshot(target).files().to_pylist()

    table.restore(target)

    committed = actions(root, 4)
    [remove], [add] = of("remove", committed), of("add", committed)
    assert remove["path"] == add["path"] == current["path"]
    assert remove["deletionVector"] == {k: v for k, v in current["deletion_vector"].items() if v is not None}
    expected_dv = wanted["deletion_vector"]
    assert add.get("deletionVector") == (
        {k: v for k, v in expected_dv.items() if v is not None} if expected_dv else None
    )
    assert add["stats"] == wanted["stats"] and add["dataChange"] is True
    assert rows(table) == rows(table, target)
    assert len(rows(table)) == 50 - target


@pytest.mark.parametrize(
    ("name", "target"),
    [
        ("delta-kernel-rs/dv-partitioned-with-checkpoint/delta", 0),
        ("delta-kernel-rs/dv-partitioned-with-checkpoint/delta", 7),
        ("delta-kernel-rs/dv-with-columnmapping/delta", 3),
        ("delta/basic-dv-with-checkpoint", 5),
        ("delta-rs/table_with_deletion_logs", 3),
    ],
)
def test_corpus_tables_with_deletion_vectors_come_back_to_the_target_rows(
    tmp_path: Path, name: str, target: int
) -> None:
    root = copy_corpus(name, tmp_path / "t")
    table = DeltaTable(str(root))
    latest = table.version()
    assert rows(table) != rows(table, target)

    result = table.restore(target)

    assert result.version == latest + 1 and result.restored_version == target
    assert rows(table) == rows(table, target)
    assert files_of(table) == sorted(
        (f["path"], json.dumps(f["deletion_vector"], sort_keys=True))
        for f in table.snapshot(target).files().select(["path", "deletion_vector"]).to_pylist()
    )


def test_an_inline_deletion_vector_is_dropped_when_the_target_had_none(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root), pa.schema([("id", pa.int64())]), properties={"delta.enableDeletionVectors": "true"}
    )
    pq.write_table(pa.table({"id": [1, 2, 3, 4]}), root / "f.parquet")
    table.commit_files(["f.parquet"])
    [add] = of("add", actions(root, 1))
    dv = inline_deletion_vector([0, 2])
    deleted = [
        {"commitInfo": {"timestamp": 1, "operation": "DELETE"}},
        {
            "remove": {
                **{k: add[k] for k in ("path", "partitionValues", "size")},
                "deletionTimestamp": 1,
                "dataChange": True,
                "extendedFileMetadata": True,
            }
        },
        {"add": {**add, "deletionVector": dv}},
    ]
    (root / "_delta_log" / f"{2:020d}.json").write_text("\n".join(json.dumps(a) for a in deleted) + "\n")
    assert rows(table) == [(2,), (4,)]

    table.restore(1)

    [remove], [back] = of("remove", actions(root, 3)), of("add", actions(root, 3))
    assert remove["deletionVector"] == dv and "deletionVector" not in back
    assert rows(table) == [(1,), (2,), (3,), (4,)]


def test_a_column_mapped_table_is_restored_with_its_physical_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64()), ("name", pa.string())]),
        properties={"delta.columnMapping.mode": "name"},
    )
    schema = table.snapshot().schema
    for n, ids in enumerate(([1, 2], [3], [4, 5, 6])):
        data = physical_data(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), schema)
        pq.write_table(data, root / f"f{n}.parquet")
        table.commit_files([f"f{n}.parquet"], mode="overwrite" if n == 2 else "append")

    table.restore(2)

    assert rows(table) == [(1, "n1"), (2, "n2"), (3, "n3")]
    assert Metadata.from_json(of("metaData", actions(root, 4))[0]) == table.snapshot(2).metadata


def test_restored_files_keep_their_row_ids_and_the_high_water_mark_is_never_lowered(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root), SCHEMA, partition_by=["p"], properties={"delta.enableRowTracking": "true"}
    )
    table.commit_files([write_file(root, "p=a/f1.parquet", [1, 2, 3])])
    table.commit_files([write_file(root, "p=a/f2.parquet", [4, 5])], mode="overwrite")
    before = table.snapshot(1).files().to_pylist()[0]
    mark = table.snapshot().domain_metadata["delta.rowTracking"]

    table.restore(1)

    [add] = of("add", actions(root, 3))
    assert (add["baseRowId"], add["defaultRowCommitVersion"]) == (before["base_row_id"], 1)
    assert not of("domainMetadata", actions(root, 3))  # nothing renumbered: the mark stays
    assert table.snapshot().domain_metadata["delta.rowTracking"] == mark


# --- metadata, protocol and domains ---------------------------------------------------------


def test_the_protocol_is_never_downgraded_and_the_target_metadata_comes_back(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": [1]}), root / "f.parquet")
    table.commit_files(["f.parquet"])
    upgraded = table.snapshot().metadata.to_json()
    upgraded["configuration"] = {"delta.enableDeletionVectors": "true"}
    features = {"readerFeatures": ["deletionVectors"], "writerFeatures": ["deletionVectors"]}
    lines = [
        {"commitInfo": {"timestamp": 1, "operation": "SET TBLPROPERTIES"}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, **features}},
        {"metaData": upgraded},
    ]
    (root / "_delta_log" / f"{2:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")

    table.restore(1)

    committed = actions(root, 3)
    protocol = Protocol.from_json(of("protocol", committed)[0])
    assert protocol == Protocol(
        3, 7, frozenset({"deletionVectors"}), frozenset({"deletionVectors", "appendOnly", "invariants"})
    )
    assert of("metaData", committed)[0]["configuration"] == {}
    assert not of("add", committed) and not of("remove", committed)


#: The writer features a legacy (2, 5) protocol implies.
WRITER_2_5 = (
    "appendOnly",
    "invariants",
    "checkConstraints",
    "changeDataFeed",
    "generatedColumns",
    "columnMapping",
)


@pytest.mark.parametrize(
    ("protocols", "expected"),
    [
        ([Protocol(1, 2), Protocol(1, 4)], Protocol(1, 4)),
        ([Protocol(2, 5), Protocol(1, 2)], Protocol(2, 5)),
        (
            [Protocol(1, 7, None, frozenset({"rowTracking", "domainMetadata"})), Protocol(1, 3)],
            Protocol(
                1,
                7,
                None,
                frozenset({"rowTracking", "domainMetadata", "appendOnly", "invariants", "checkConstraints"}),
            ),
        ),
        (
            [Protocol(2, 5), Protocol(1, 7, None, frozenset({"timestampNtz"}))],
            Protocol(
                2,
                7,
                None,
                frozenset({"timestampNtz", *WRITER_2_5}),
            ),
        ),
        (
            [Protocol(3, 7, frozenset({"deletionVectors"}), frozenset({"deletionVectors"})), Protocol(2, 5)],
            Protocol(
                3,
                7,
                frozenset({"deletionVectors", "columnMapping"}),
                frozenset({"deletionVectors", *WRITER_2_5}),
            ),
        ),
    ],
)
def test_protocols_merge_to_every_feature_of_both(protocols: list[Protocol], expected: Protocol) -> None:
    assert merge_protocols(*protocols) == expected
    assert merge_protocols(*reversed(protocols)) == expected


def identity_metadata(
    mark: int | None, *, step: int = 1, start: int = 1, physical: str | None = None
) -> Metadata:
    meta: dict[str, Any] = {
        "delta.identity.start": start,
        "delta.identity.step": step,
        "delta.identity.allowExplicitInsert": False,
    }
    if mark is not None:
        meta["delta.identity.highWaterMark"] = mark
    if physical is not None:
        meta["delta.columnMapping.physicalName"] = physical
    fields = [
        {"name": "id", "type": "long", "nullable": True, "metadata": meta},
        {"name": "v", "type": "string", "nullable": True, "metadata": {}},
    ]
    return Metadata("t", json.dumps({"type": "struct", "fields": fields}))


@pytest.mark.parametrize(
    ("restored", "current", "expected"),
    [
        (identity_metadata(10), identity_metadata(20), 20),  # values up to 20 were generated since
        (identity_metadata(30), identity_metadata(20), 30),  # never lowered
        (identity_metadata(None), identity_metadata(7), 7),
        (identity_metadata(10), identity_metadata(None), 10),
        (identity_metadata(-10, step=-2, start=-2), identity_metadata(-20, step=-2, start=-2), -20),
        (
            identity_metadata(10, physical="col-1"),
            identity_metadata(20, physical="col-2"),
            10,
        ),  # another column
    ],
)
def test_identity_high_water_marks_are_merged_as_delta_merges_them(
    restored: Metadata, current: Metadata, expected: int
) -> None:
    merged = json.loads(merged_identity_schema(restored, current))
    assert merged["fields"][0]["metadata"].get("delta.identity.highWaterMark") == expected


def clustered_log(root: Path, versions: list[list[dict[str, Any]]]) -> DeltaTable:
    """A table with the clustering feature; each entry of ``versions`` is one commit's extra actions."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    features = {"readerFeatures": [], "writerFeatures": ["clustering", "domainMetadata"]}
    schema = json.dumps(
        {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    )
    for version, extra in enumerate(versions):
        pq.write_table(pa.table({"id": [version]}), root / f"f{version}.parquet")
        lines: list[dict[str, Any]] = [{"commitInfo": {"timestamp": 1, "operation": "WRITE"}}]
        if version == 0:
            lines += [
                {
                    "protocol": {
                        "minReaderVersion": 1,
                        "minWriterVersion": 7,
                        "writerFeatures": features["writerFeatures"],
                    }
                },
                {
                    "metaData": {
                        "id": "c",
                        "format": {"provider": "parquet", "options": {}},
                        "schemaString": schema,
                        "partitionColumns": [],
                        "configuration": {},
                        "createdTime": 1,
                    }
                },
            ]
        size = (root / f"f{version}.parquet").stat().st_size
        lines += [
            *extra,
            {
                "add": {
                    "path": f"f{version}.parquet",
                    "partitionValues": {},
                    "size": size,
                    "modificationTime": 1,
                    "dataChange": True,
                }
            },
        ]
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    return DeltaTable(str(root))


def clustering(*columns: str) -> dict[str, Any]:
    configuration = json.dumps(
        {"clusteringColumns": [[c] for c in columns], "domainName": "delta.clustering"}
    )
    return {
        "domainMetadata": {"domain": "delta.clustering", "configuration": configuration, "removed": False}
    }


def test_the_clustering_domain_gets_the_target_columns_and_other_domains_stay(tmp_path: Path) -> None:
    user = {"domainMetadata": {"domain": "app.owner", "configuration": '{"team":"a"}', "removed": False}}
    table = clustered_log(tmp_path / "t", [[clustering("id")], [clustering(), user]])

    table.restore(0)

    [domain] = of("domainMetadata", actions(tmp_path / "t", 2))
    assert domain == clustering("id")["domainMetadata"]
    assert table.snapshot().domain_metadata["app.owner"].configuration == '{"team":"a"}'


def test_clustering_added_after_the_target_is_cleared_not_dropped(tmp_path: Path) -> None:
    table = clustered_log(tmp_path / "t", [[], [clustering("id")]])

    table.restore(0)

    [domain] = of("domainMetadata", actions(tmp_path / "t", 2))
    assert json.loads(domain["configuration"]) == {"clusteringColumns": [], "domainName": "delta.clustering"}


# --- refusals: nothing is committed --------------------------------------------------------


def test_a_restore_past_a_vacuum_is_refused_naming_the_missing_file(tmp_path: Path, log_state: Any) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    vacuumed = table.vacuum(retention=0, enforce_retention_duration=False)
    assert any(f.endswith("f1.parquet") for f in vacuumed.files)
    before = state(table, root, log_state)

    with pytest.raises(RestoreMissingFilesError, match=r"p=a/f1\.parquet is missing") as caught:
        table.restore(2)

    assert caught.value.missing == ["p=a/f1.parquet"] and caught.value.version == 2
    assert state(table, root, log_state) == before


def test_a_vacuumed_deletion_vector_file_is_named_too(tmp_path: Path, log_state: Any) -> None:
    root = copy_corpus("delta-kernel-rs/log-replay-dv-key-cases/delta", tmp_path / "t")
    (root / "deletion_vector_37d10da3-70a1-4730-bc58-3b44f9617505.bin").unlink()  # version 1's DV
    table = DeltaTable(str(root))
    before = state(table, root, log_state)

    with pytest.raises(RestoreMissingFilesError, match="deletion_vector_37d10da3") as caught:
        table.restore(1)

    assert len(caught.value.missing) == 1
    assert state(table, root, log_state) == before
    assert table.restore(2).committed  # version 2's DV file is there


def test_at_most_the_first_hundred_missing_files_are_named(tmp_path: Path, log_state: Any) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    names = [f"f{n:03d}.parquet" for n in range(120)]
    for name in names:
        pq.write_table(pa.table({"id": [1]}), root / name)
    table.commit_files(names)
    pq.write_table(pa.table({"id": [2]}), root / "new.parquet")
    table.commit_files(["new.parquet"], mode="overwrite")
    for name in names:
        (root / name).unlink()
    before = state(table, root, log_state)

    with pytest.raises(RestoreMissingFilesError, match=r"f000\.parquet.* and 90 more") as caught:
        table.restore(1)

    assert len(caught.value.missing) == 100
    assert state(table, root, log_state) == before


def test_a_target_beyond_the_deleted_file_retention_is_refused(tmp_path: Path, log_state: Any) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    age(root, range(0, 3), days=8)
    before = state(table, root, log_state)

    with pytest.raises(
        TimeTravelBeyondRetentionError, match=r"delta\.deletedFileRetentionDuration \(168 HOURS"
    ) as caught:
        table.restore(2)

    assert (
        caught.value.delta_error_class
        == "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION"
    )
    assert state(table, root, log_state) == before
    # The files are all there: with the check switched off the restore is allowed.
    assert table.restore(2, enforce_retention_duration=False).committed
    assert rows(table) == rows(table, 2)


def test_the_retention_is_the_tables_own_property(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = partitioned(root, **{"delta.deletedFileRetentionDuration": "interval 30 days"})
    age(root, range(0, 3), days=8)

    assert table.restore(2).committed


def test_a_retention_set_by_the_provider_default_applies_too(tmp_path: Path) -> None:
    root = tmp_path / "t"
    partitioned(root)
    age(root, range(0, 3), days=2)
    table = DeltaTable(str(root), provider_defaults={"delta.deletedFileRetentionDuration": "interval 1 day"})

    with pytest.raises(TimeTravelBeyondRetentionError, match=r"\(24 HOURS, provider config\)"):
        table.restore(2)


def test_restoring_the_current_version_commits_nothing(tmp_path: Path, log_state: Any) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    before = state(table, root, log_state)

    result = table.restore(3)

    assert (result.version, result.restored_version, result.committed, result.reason) == (3, 3, False, NO_OP)
    assert result.to_dict()["num_restored_files"] == 0
    assert state(table, root, log_state) == before


def test_timestamps_resolve_to_the_last_commit_at_or_before_them(tmp_path: Path, log_state: Any) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    start = time.time() - 3600
    for version in range(4):
        os.utime(root / "_delta_log" / f"{version:020d}.json", (start + 10 * version,) * 2)
    at = datetime.fromtimestamp(start, tz=UTC)
    before = state(table, root, log_state)

    with pytest.raises(RestoreTimestampEarlierError, match="before the earliest version") as early:
        table.restore(timestamp=at - timedelta(seconds=1))
    with pytest.raises(RestoreTimestampGreaterError, match="after the latest version") as late:
        table.restore(timestamp=at + timedelta(seconds=31))
    assert early.value.delta_error_class == "DELTA_CANNOT_RESTORE_TIMESTAMP_EARLIER"
    assert late.value.delta_error_class == "DELTA_CANNOT_RESTORE_TIMESTAMP_GREATER"
    assert state(table, root, log_state) == before
    assert table.restore(timestamp=at + timedelta(seconds=30)).reason == NO_OP  # exactly the last commit

    result = table.restore(timestamp=(at + timedelta(seconds=25)).isoformat())

    assert result.restored_version == 2 and rows(table) == rows(table, 2)
    stamp = of("commitInfo", actions(root, 4))[0]["operationParameters"]
    assert stamp == {"timestamp": (at + timedelta(seconds=25)).isoformat(timespec="milliseconds")}


@pytest.mark.parametrize("version", [4, 99])
def test_a_version_outside_the_history_is_refused_naming_the_available_range(
    tmp_path: Path, log_state: Any, version: int
) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    before = state(table, root, log_state)

    with pytest.raises(RestoreVersionNotFoundError, match=r"Available versions: \[0, 3\]") as caught:
        table.restore(version)

    assert caught.value.delta_error_class == "DELTA_CANNOT_RESTORE_TABLE_VERSION"
    assert state(table, root, log_state) == before


@pytest.mark.parametrize(
    ("arguments", "fragment"),
    [
        ({}, "Either the version or the timestamp"),
        ({"version": 1, "timestamp": "2026-01-01T00:00:00Z"}, "not both"),
        ({"version": -1}, "non-negative integer"),
        ({"version": True}, "non-negative integer"),
        ({"version": "1"}, "non-negative integer"),
        ({"version": 1.0}, "non-negative integer"),
        ({"timestamp": "yesterday"}, "Cannot parse the timestamp"),
        ({"timestamp": True}, "Not a timestamp"),
        (
            {"version": 1, "enforce_retention_duration": "no"},
            "enforce_retention_duration must be True or False",
        ),
        ({"version": 1, "app_id": "a"}, "both app_id and app_version"),
        ({"version": 1, "app_id": "a", "app_version": -1}, "app_version"),
    ],
)
def test_bad_arguments_are_refused_before_anything_is_read_or_written(
    tmp_path: Path, log_state: Any, arguments: dict[str, Any], fragment: str
) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    before = state(table, root, log_state)

    with pytest.raises(ValueError, match=fragment):
        table.restore(**arguments)

    assert state(table, root, log_state) == before


def test_a_restore_to_a_protocol_this_core_cannot_write_is_refused(tmp_path: Path, log_state: Any) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": [1]}), root / "f.parquet")
    table.commit_files(["f.parquet"])
    lines = [
        {"commitInfo": {"timestamp": 1, "operation": "ADD FEATURE"}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["someFutureFeature"]}},
    ]
    (root / "_delta_log" / f"{2:020d}.json").write_text("\n".join(json.dumps(a) for a in lines) + "\n")
    before = log_state(root)

    with pytest.raises(UnsupportedFeatureError, match="someFutureFeature"):
        table.restore(1)

    assert log_state(root) == before


# --- races and idempotency -----------------------------------------------------------------


def test_a_restore_that_loses_a_race_with_an_append_is_refused_and_the_append_kept(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    options = RestoreOptions(2)
    plan = plan_restore(table.snapshot(), table.snapshot(2), options)
    table.commit_files([write_file(root, "p=c/late.parquet", [7])])  # the concurrent append wins
    appended = rows(table)

    with pytest.raises(ConcurrentWriteError, match=r"version 4: WRITE") as caught:
        commit_restore(plan, options)

    assert caught.value.delta_error_class == "DELTA_CONCURRENT_WRITE" and caught.value.version == 4
    assert table.version() == 4 and rows(table) == appended
    # Run again, the restore also undoes the append.
    assert table.restore(2).version == 5 and rows(table) == rows(table, 2)


def test_a_winner_that_changed_nothing_the_restore_read_is_retried_past(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    options = RestoreOptions(2)
    plan = plan_restore(table.snapshot(), table.snapshot(2), options)
    table.commit_files([], app_id="another-app", app_version=1)  # only a txn: no data, no metadata

    result = commit_restore(plan, options)

    assert (result.version, result.commit.attempts) == (5, 2)
    assert rows(table) == rows(table, 2)
    assert table.snapshot().app_transaction_version("another-app") == 1


def _append_many(root: str, first: int, count: int, results: Any) -> None:
    table = DeltaTable(root)
    for n in range(first, first + count):
        path = write_file(Path(root), f"p=x/a{n}.parquet", [n])
        while True:
            try:
                results.put(("append", table.commit_files([path]).version, n))
                break
            except MetadataChangedError:  # a RESTORE (it commits metaData) won: Delta refuses, retry
                continue


def _restore_until_it_lands(root: str, target: int, results: Any) -> None:
    refused = 0
    while True:
        try:
            results.put(("restore", DeltaTable(root).restore(target).version, refused))
            return
        except ConcurrentWriteError:
            refused += 1


def test_a_restore_racing_appends_in_other_processes_undoes_exactly_what_came_before_it(
    tmp_path: Path,
) -> None:
    """Two processes append 15 files each while a third restores version 2 (retrying each refusal).
    Whatever the interleaving, the table ends as version 2 plus exactly the appends committed
    after the restore: no append before it survives, none after it is lost."""
    import multiprocessing

    root = tmp_path / "t"
    table = partitioned(root)
    results: Any = multiprocessing.Queue()
    appenders = [
        multiprocessing.Process(target=_append_many, args=(str(root), first, 15, results))
        for first in (1000, 2000)
    ]
    restorer = multiprocessing.Process(target=_restore_until_it_lands, args=(str(root), 2, results))
    for process in [*appenders, restorer]:
        process.start()
    for process in [*appenders, restorer]:
        process.join(timeout=300)
        assert process.exitcode == 0
    outcomes = [results.get(timeout=10) for _ in range(31)]

    [(_, restored_at, refused)] = [o for o in outcomes if o[0] == "restore"]
    appends = {version: n for kind, version, n in outcomes if kind == "append"}
    assert len(appends) == 30 and restored_at not in appends
    after = sorted((n, f"n{n}", "x") for version, n in appends.items() if version > restored_at)
    assert rows(table) == sorted([*rows(table, 2), *after], key=repr)
    assert table.version() == 3 + 31
    # A refused attempt committed nothing: the restore is the one RESTORE commit of the log.
    restores = [v for v in range(4, 35) if of("commitInfo", actions(root, v))[0]["operation"] == "RESTORE"]
    assert restores == [restored_at], f"{refused} refused attempts"


def test_an_optimize_racing_a_restore_refuses_it_only_when_it_rewrote_files_the_restore_removes(
    tmp_path: Path,
) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"])
    table.commit_files([write_file(root, "p=a/f1.parquet", [1])])
    for n in range(3):
        table.commit_files([write_file(root, f"p=b/g{n}.parquet", [10 + n])])
    target = table.version()
    replacement = [write_file(root, "p=a/f3.parquet", [100]), write_file(root, "p=a/f4.parquet", [101])]
    table.commit_files(replacement, mode="overwrite", replace_where="p = 'a'")
    options = RestoreOptions(target)

    plan = plan_restore(table.snapshot(), table.snapshot(target), options)
    assert table.optimize(partition_filter="p = 'a'").committed  # compacts files the restore removes
    with pytest.raises(ConcurrentWriteError, match="OPTIMIZE"):
        commit_restore(plan, options)

    plan = plan_restore(table.snapshot(), table.snapshot(target), options)
    assert table.optimize(partition_filter="p = 'b'").committed  # compacts only files the restore keeps
    result = commit_restore(plan, options)

    assert result.committed and result.commit is not None and result.commit.attempts == 2
    assert rows(table) == rows(table, target)


def test_a_winner_that_set_the_same_domain_refuses_the_restore(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = clustered_log(root, [[clustering("id")], [clustering()]])
    options = RestoreOptions(0)
    plan = plan_restore(table.snapshot(), table.snapshot(0), options)
    winner = [{"commitInfo": {"timestamp": 1, "operation": "CLUSTER BY"}}, clustering("id")]
    (root / "_delta_log" / f"{2:020d}.json").write_text("\n".join(json.dumps(a) for a in winner) + "\n")

    with pytest.raises(
        ConcurrentWriteError, match=r"conflicting metadata domain delta\.clustering"
    ) as caught:
        commit_restore(plan, options)

    assert isinstance(caught.value.__cause__, ConcurrentTransactionError)
    assert table.version() == 2


def test_a_restore_with_an_app_id_is_done_once(tmp_path: Path, log_state: Any) -> None:
    root = tmp_path / "t"
    table = partitioned(root)
    first = table.restore(2, app_id="rollback", app_version=7)
    before = state(table, root, log_state)

    again = table.restore(2, app_id="rollback", app_version=7)

    assert first.committed and not again.committed and again.already_committed
    assert (again.version, again.restored_version, again.reason) == (4, 2, "already_committed")
    assert again.metrics == first.metrics
    assert state(table, root, log_state) == before


# --- the commits of a run ------------------------------------------------------------------


def run_tags(run_id: str, logical_date: str | None = None, dag_id: str = "ingest") -> dict[str, str]:
    tags = {"airflow.dag_id": dag_id, "airflow.run_id": run_id, "airflow.task_id": "load"}
    if logical_date is not None:
        tags["airflow.logical_date"] = logical_date
    return tags


def tagged_table(root: Path) -> DeltaTable:
    """v0 create; v1 run A; v2 run B; v3 run C; v4 run B again (a cleared task)."""
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"])
    for n, run in enumerate(["A", "B", "C", "B"], 1):
        table.commit_files([write_file(root, f"p={run}/f{n}.parquet", [n])], tags=run_tags(run))
    return table


def test_the_version_before_a_run_is_the_one_before_its_first_commit(tmp_path: Path) -> None:
    table = tagged_table(tmp_path / "t")

    found = table.tagged_commits(run_tags("B"))

    assert [c.version for c in found.commits] == [2, 4] and found.version_before == 1
    assert found.first.operation == "WRITE" and found.searched_from == 0
    table.restore(found.version_before)
    assert rows(table) == [(1, "n1", "A")]


def test_a_run_that_never_wrote_or_that_created_the_table_has_no_version_before(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = tagged_table(root)
    with pytest.raises(TaggedCommitsNotFoundError, match=r"No commit .* airflow\.run_id='Z'"):
        table.tagged_commits(run_tags("Z"))
    creator = DeltaTable.create(str(tmp_path / "c"), SCHEMA, tags=run_tags("A"))
    with pytest.raises(TaggedCommitsNotFoundError, match=r"Version 0 .* created the table"):
        creator.tagged_commits(run_tags("A"))


def cleaned(root: Path) -> DeltaTable:
    """Versions 0-1 at a day ago, then a checkpoint at 2 and the commits before it deleted."""
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"])
    table.commit_files(
        [write_file(root, "p=A/f1.parquet", [1])], tags=run_tags("A", "2020-01-01T00:00:00+00:00")
    )
    table.commit_files(
        [write_file(root, "p=B/f2.parquet", [2])], tags=run_tags("B", "2020-01-01T00:00:00+00:00")
    )
    age(root, range(0, 3), days=1)
    table.checkpoint(2)
    for version in (0, 1):
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    return table


def test_a_cleaned_log_refuses_to_guess_the_first_commit_of_a_run(tmp_path: Path) -> None:
    table = cleaned(tmp_path / "t")
    logical = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    table.commit_files([write_file(tmp_path / "t", "p=D/f3.parquet", [3])], tags=run_tags("D", logical))

    with pytest.raises(TaggedCommitsNotFoundError, match="cleaned up and may have held earlier ones"):
        table.tagged_commits(run_tags("D"))
    # Its logical date is after every cleaned commit: none of them can be the run's.
    found = table.tagged_commits(run_tags("D"), not_before_tag="airflow.logical_date")
    assert [c.version for c in found.commits] == [3] and found.searched_from == 3
    # Run B's logical date is older than the retained log: its first commit cannot be told.
    with pytest.raises(TaggedCommitsNotFoundError, match="cleaned up"):
        table.tagged_commits(run_tags("B"), not_before_tag="airflow.logical_date")


def test_a_logical_date_after_the_runs_own_commit_is_no_bound(tmp_path: Path) -> None:
    table = cleaned(tmp_path / "t")
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    table.commit_files([write_file(tmp_path / "t", "p=E/f3.parquet", [3])], tags=run_tags("E", future))

    with pytest.raises(TaggedCommitsNotFoundError, match="cleaned up"):
        table.tagged_commits(run_tags("E"), not_before_tag="airflow.logical_date")


def skewed_run(root: Path, r_offsets: tuple[float, float], *, other_at: float = -7200.0) -> DeltaTable:
    """v0 create and v1 run A, both at ``other_at`` seconds from run R's logical date (a day ago);
    v2 run R, v3 run C, v4 run R again: R's commits at ``r_offsets`` seconds from its logical date (a
    store clock behind the scheduler's gives negative ones), C's between them."""
    logical = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
    table = DeltaTable.create(str(root), SCHEMA, partition_by=["p"])
    for n, run in enumerate(["A", "R", "C", "R"], 1):
        tags = run_tags(run, logical.isoformat())
        table.commit_files([write_file(root, f"p={run}/f{n}.parquet", [n])], tags=tags)
    at = {0: other_at - 1, 1: other_at, 2: r_offsets[0], 3: sum(r_offsets) / 2, 4: r_offsets[1]}
    for version, offset in at.items():
        moment = logical.timestamp() + offset
        os.utime(root / "_delta_log" / f"{version:020d}.json", (moment, moment))
    return table


@pytest.mark.parametrize(
    ("r_offsets", "searched_from"),
    [
        pytest.param((5.0, 10.0), 2, id="clocks-agree"),
        pytest.param((-3.0, 10.0), 2, id="store-3s-behind"),
        pytest.param((-59 * 60.0, -50 * 60.0), 2, id="store-59min-behind"),
        # Every commit of R before its logical date by more than the margin: no bound, all is read.
        pytest.param((-3 * 3600.0, -2.5 * 3600.0), 0, id="store-3h-behind"),
        pytest.param((3600.0, 3700.0), 2, id="store-1h-ahead"),
    ],
)
def test_a_runs_commits_are_found_by_their_tags_whatever_the_stores_clock(
    tmp_path: Path, r_offsets: tuple[float, float], searched_from: int
) -> None:
    """Run R's commits carry its logical date, by the scheduler's clock; the store dates them by its
    own. A commit dated before the logical date is the run's all the same: restoring to before the
    run must undo it. Run A's commit, two hours before R's first, ends the search."""
    table = skewed_run(tmp_path / "t", r_offsets, other_at=min(r_offsets[0], 0) - 7200)
    found = table.tagged_commits(run_tags("R"), not_before_tag="airflow.logical_date")
    assert [c.version for c in found.commits] == [2, 4] and found.version_before == 1
    assert found.searched_from == searched_from
    table.restore(found.version_before)
    assert rows(table) == [(1, "n1", "A")]


def test_a_log_cleaned_up_within_the_margin_before_a_run_is_refused(tmp_path: Path, log_state: Any) -> None:
    """Run R's first retained commit is 3 s before its logical date; the log before it was cleaned up,
    and a commit 30 minutes before the logical date (within the margin) may have been R's too."""
    root = tmp_path / "t"
    table = skewed_run(root, (-3.0, 10.0), other_at=-1800.0)
    table.checkpoint(2)
    for version in (0, 1):
        (root / "_delta_log" / f"{version:020d}.json").unlink()
    before = state(table, root, log_state)
    with pytest.raises(TaggedCommitsNotFoundError, match="cleaned up and may have held earlier ones"):
        table.tagged_commits(run_tags("R"), not_before_tag="airflow.logical_date")
    assert state(table, root, log_state) == before
    # The log keeps a commit older than the margin (run A's, 3 h before): R's first commit is certain.
    kept = skewed_run(tmp_path / "kept", (-3.0, 10.0), other_at=-3 * 3600.0)
    kept.checkpoint(1)
    (tmp_path / "kept" / "_delta_log" / f"{0:020d}.json").unlink()
    found = kept.tagged_commits(run_tags("R"), not_before_tag="airflow.logical_date")
    assert [c.version for c in found.commits] == [2, 4] and found.searched_from == 2


def test_a_version_whose_log_was_cleaned_up_is_refused_naming_the_earliest(
    tmp_path: Path, log_state: Any
) -> None:
    table = cleaned(tmp_path / "t")
    before = state(table, tmp_path / "t", log_state)

    with pytest.raises(RestoreVersionNotFoundError, match=r"Available versions: \[2, 2\]\..*cleaned up"):
        table.restore(1)

    assert state(table, tmp_path / "t", log_state) == before
