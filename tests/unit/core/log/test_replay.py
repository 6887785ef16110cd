from __future__ import annotations

import time

import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from airflow_delta_provider.core import (
    CorruptLogError,
    DeltaTable,
    UnsupportedFeatureError,
)


def _files(root) -> list[str]:
    return sorted(DeltaTable(str(root)).snapshot().files().column("path").to_pylist())


def test_corrupt_json_line_names_file_and_line(log_writer):
    log_writer.basic(1)
    log_writer.raw("00000000000000000001.json", b'{"commitInfo":{}}\n{"add": {"path": "x"\n')
    with pytest.raises(
        CorruptLogError, match=r"Line 2 of .*00000000000000000001\.json is not valid JSON"
    ) as info:
        DeltaTable(str(log_writer.root)).snapshot().files()
    assert info.value.path.endswith("00000000000000000001.json")


def test_corrupt_non_file_line_fails_at_open(log_writer):
    log_writer.basic(1)
    log_writer.raw("00000000000000000001.json", b'{"commitInfo":\n')
    with pytest.raises(CorruptLogError, match=r"00000000000000000001\.json"):
        DeltaTable(str(log_writer.root)).snapshot()


def test_empty_commit_is_corrupt(log_writer):
    log_writer.basic(1)
    log_writer.raw("00000000000000000001.json", b"\n")
    with pytest.raises(CorruptLogError, match=r"00000000000000000001\.json is empty"):
        DeltaTable(str(log_writer.root)).snapshot()


def test_missing_protocol(log_writer):
    log_writer.commit(0, log_writer.metadata(), log_writer.add("a"))
    with pytest.raises(CorruptLogError, match="No protocol action") as info:
        DeltaTable(str(log_writer.root)).snapshot()
    assert info.value.path.endswith("_delta_log")


def test_missing_metadata(log_writer):
    log_writer.commit(0, log_writer.protocol(), log_writer.add("a"))
    with pytest.raises(CorruptLogError, match="No metaData action"):
        DeltaTable(str(log_writer.root)).snapshot()


def test_unknown_reader_version_is_refused(log_writer):
    log_writer.basic(1)
    log_writer.commit(1, log_writer.protocol(reader=4, writer=7))
    with pytest.raises(UnsupportedFeatureError, match="reader version 4"):
        DeltaTable(str(log_writer.root)).snapshot()
    # Time travel to before the upgrade still works.
    assert DeltaTable(str(log_writer.root)).snapshot(version=0).files().num_rows == 1


def test_unknown_fields_and_actions_are_tolerated(log_writer):
    log_writer.commit(
        0,
        {"commitInfo": {"operation": "X", "someFutureField": [1, 2]}},
        log_writer.protocol(),
        {"metaData": {**log_writer.metadata()["metaData"], "futureField": True}},
        {"add": {**log_writer.add("a")["add"], "futureField": {"x": 1}}},
        {"someFutureAction": {"x": 1}},
        {"cdc": {"path": "_change_data/x", "partitionValues": {}, "size": 1, "dataChange": False}},
    )
    assert _files(log_writer.root) == ["a"]


def test_remove_cancels_add_and_readd_wins(log_writer):
    log_writer.basic(1)
    log_writer.commit(1, log_writer.add("b"), log_writer.add("c"))
    log_writer.commit(2, log_writer.remove("b"), log_writer.remove("f0.parquet"))
    log_writer.commit(3, log_writer.add("b", size=99))
    files = DeltaTable(str(log_writer.root)).snapshot().files()
    assert sorted(files.column("path").to_pylist()) == ["b", "c"]
    assert (
        dict(zip(files.column("path").to_pylist(), files.column("size").to_pylist(), strict=True))["b"] == 99
    )


def test_files_are_keyed_by_path_and_deletion_vector(log_writer):
    dv1 = {
        "storageType": "u",
        "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
        "offset": 1,
        "sizeInBytes": 36,
        "cardinality": 2,
    }
    dv2 = {**dv1, "offset": 50}
    log_writer.commit(
        0,
        log_writer.protocol(3, 7, readerFeatures=["deletionVectors"], writerFeatures=["deletionVectors"]),
        log_writer.metadata(),
        log_writer.add("a"),
    )
    log_writer.commit(1, log_writer.remove("a"), log_writer.add("a", deletionVector=dv1))
    log_writer.commit(2, log_writer.remove("a", deletionVector=dv1), log_writer.add("a", deletionVector=dv2))
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    files = snapshot.files()
    assert files.num_rows == 1
    assert files.column("deletion_vector")[0].as_py()["offset"] == 50
    from airflow_delta_provider.core import DeletionVectorError

    with pytest.raises(DeletionVectorError, match="deletion vectors"):
        snapshot.file_uris()


def test_checkpoint_rows_superseded_by_tail(tmp_path):
    write_deltalake(str(tmp_path), pa.table({"id": [1]}))
    write_deltalake(str(tmp_path), pa.table({"id": [2]}), mode="append")
    RsTable(str(tmp_path)).create_checkpoint()
    write_deltalake(str(tmp_path), pa.table({"id": [3]}), mode="overwrite")
    snapshot = DeltaTable(str(tmp_path)).snapshot()
    assert snapshot.segment.checkpoint_version == 1
    expected = sorted(uri.rsplit("/", 1)[-1] for uri in RsTable(str(tmp_path)).file_uris())
    assert sorted(snapshot.files().column("path").to_pylist()) == expected
    assert snapshot.to_pyarrow_table().column("id").to_pylist() == [3]


def test_paths_compared_after_canonicalisation(log_writer):
    root = str(log_writer.root)
    log_writer.basic(1)
    log_writer.commit(1, log_writer.add("a%20b.parquet"), log_writer.add(f"{root}/c.parquet"))
    log_writer.commit(2, log_writer.remove("a b.parquet"), log_writer.remove(f"file://{root}/c.parquet"))
    assert _files(log_writer.root) == ["f0.parquet"]


def test_tombstones_expire_per_retention(log_writer):
    now = int(time.time() * 1000)
    log_writer.commit(
        0,
        log_writer.protocol(),
        log_writer.metadata({"delta.deletedFileRetentionDuration": "interval 1 hours"}),
        log_writer.add("a"),
        log_writer.add("b"),
    )
    log_writer.commit(
        1,
        log_writer.remove("a", deletion_timestamp=now - 2 * 3600_000),
        log_writer.remove("b", deletion_timestamp=now - 60_000),
    )
    tombstones = DeltaTable(str(log_writer.root)).snapshot().tombstones()
    assert tombstones.column("path").to_pylist() == ["b"]


def test_txn_latest_wins_and_expires_as_delta_does(log_writer):
    now = int(time.time() * 1000)
    log_writer.commit(
        0,
        log_writer.protocol(),
        log_writer.metadata({"delta.setTransactionRetentionDuration": "interval 1 days"}),
        log_writer.txn("fresh", 1, now),
        log_writer.txn("old", 1, now - 3 * 86400_000),
        log_writer.txn("undated", 1),
    )
    log_writer.commit(1, log_writer.txn("fresh", 2, now))
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.app_transaction_version("fresh") == 2
    assert snapshot.app_transaction_version("old") is None
    assert snapshot.app_transaction_version("undated") is None


def test_txns_never_expire_without_retention(log_writer):
    log_writer.commit(0, log_writer.protocol(), log_writer.metadata(), log_writer.txn("undated", 7))
    assert DeltaTable(str(log_writer.root)).snapshot().app_transaction_version("undated") == 7


def test_domain_metadata_latest_wins_and_removed_drops(log_writer):
    log_writer.commit(
        0,
        log_writer.protocol(),
        log_writer.metadata(),
        {"domainMetadata": {"domain": "a", "configuration": "1", "removed": False}},
        {"domainMetadata": {"domain": "b", "configuration": "1", "removed": False}},
    )
    log_writer.commit(
        1,
        {"domainMetadata": {"domain": "a", "configuration": "2", "removed": False}},
        {"domainMetadata": {"domain": "b", "configuration": "1", "removed": True}},
    )
    domains = DeltaTable(str(log_writer.root)).snapshot().domain_metadata
    assert {k: v.configuration for k, v in domains.items()} == {"a": "2"}


def test_latest_protocol_and_metadata_win(log_writer):
    log_writer.basic(1)
    log_writer.commit(1, log_writer.metadata({"k": "v"}), log_writer.protocol(1, 3))
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.properties == {"k": "v"} and snapshot.protocol.min_writer_version == 3


def test_absolute_deletion_vector_path_is_resolved(tmp_path):
    """A 'p' deletion vector names its file by absolute URI; rows it deletes are dropped."""
    from airflow_delta_provider.core.log.deletion_vectors import (
        deletion_vector_file,
        serialize_deletion_vector,
    )

    write_deltalake(str(tmp_path), pa.table({"id": [0, 1, 2, 3]}))
    table = DeltaTable(str(tmp_path))
    data_file = table.snapshot().files().column("path")[0].as_py()
    bitmap = serialize_deletion_vector([1, 3])
    dv_file = tmp_path / "dv dir" / "my dv.bin"
    dv_file.parent.mkdir()
    dv_file.write_bytes(deletion_vector_file(bitmap))
    dv = {
        "storageType": "p",
        "pathOrInlineDv": dv_file.as_uri(),
        "offset": 1,
        "sizeInBytes": len(bitmap),
        "cardinality": 2,
    }
    log = tmp_path / "_delta_log"
    (log / "00000000000000000000.json").write_text(
        (log / "00000000000000000000.json")
        .read_text()
        .replace(
            '"minReaderVersion":1,"minWriterVersion":2',
            '"minReaderVersion":3,"minWriterVersion":7,"readerFeatures":["deletionVectors"],'
            '"writerFeatures":["deletionVectors"]',
        )
    )
    import json

    (log / "00000000000000000001.json").write_text(
        json.dumps({"remove": {"path": data_file, "deletionTimestamp": 1, "dataChange": True}})
        + "\n"
        + json.dumps(
            {
                "add": {
                    "path": data_file,
                    "partitionValues": {},
                    "size": 1,
                    "modificationTime": 1,
                    "dataChange": True,
                    "deletionVector": dv,
                }
            }
        )
        + "\n"
    )
    snapshot = DeltaTable(str(tmp_path)).snapshot()
    assert snapshot.protocol.min_reader_version == 3
    assert snapshot.to_pyarrow_table().column("id").to_pylist() == [0, 2]


@pytest.mark.parametrize("touch", [True, False], ids=["touching", "new-files-only"])
@pytest.mark.parametrize("checkpointed", [3, 300], ids=["checkpoint-smaller-than-tail", "checkpoint-larger"])
def test_a_long_tail_drops_the_checkpoint_rows_it_touches(log_writer, checkpointed, touch):
    """A tail long enough for the columnar route removes one checkpoint file and adds another
    again: those checkpoint rows go, whichever side (checkpoint or tail) is the smaller one the
    overlap is looked up from; delta-rs lists the same files."""
    log_writer.commit(
        0,
        log_writer.commit_info("CREATE TABLE"),
        log_writer.protocol(),
        log_writer.metadata(),
        *(log_writer.add(f"cp-{i}.parquet") for i in range(checkpointed)),
    )
    DeltaTable(str(log_writer.root)).checkpoint()
    new = [f"tail-{i}.parquet" for i in range(200)]
    log_writer.commit(
        1,
        log_writer.commit_info(),
        *([log_writer.remove("cp-0.parquet"), log_writer.add("cp-1.parquet", size=99)] if touch else []),
        *(log_writer.add(path) for path in new),
    )
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    assert snapshot.segment.checkpoint_version == 0
    files = {row["path"]: row["size"] for row in snapshot.files().select(["path", "size"]).to_pylist()}
    expected = {f"cp-{i}.parquet": 10 for i in range(checkpointed)}
    if touch:
        expected = {path: size for path, size in expected.items() if path != "cp-0.parquet"} | {
            "cp-1.parquet": 99
        }
    assert files == expected | dict.fromkeys(new, 10)
    assert snapshot.num_files() == len(files)
    assert sorted(u.rsplit("/", 1)[-1] for u in RsTable(str(log_writer.root)).file_uris()) == sorted(files)
