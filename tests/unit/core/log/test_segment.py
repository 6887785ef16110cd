from __future__ import annotations

import os
import shutil

import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from airflow_delta_provider.core import (
    CorruptLogError,
    DeltaTable,
    MissingCheckpointError,
    TableNotFoundError,
    VersionGapError,
    VersionNotFoundError,
)
from airflow_delta_provider.core.log.segment import build_segment
from airflow_delta_provider.core.storage import open_store


def _delta_rs_table(root, commits: int, checkpoint_at: int | None = None) -> None:
    import pyarrow as pa

    for version in range(commits):
        write_deltalake(str(root), pa.table({"id": [version]}), mode="append")
        if version == checkpoint_at:
            RsTable(str(root)).create_checkpoint()


def test_segment_without_checkpoint_replays_from_zero(log_writer):
    log_writer.basic(3)
    segment = build_segment(open_store(str(log_writer.root)))
    assert segment.version == 2 and segment.checkpoint is None
    assert [c.version for c in segment.commits] == [0, 1, 2]


def test_segment_starts_at_the_hinted_checkpoint(tmp_path):
    _delta_rs_table(tmp_path, 5, checkpoint_at=2)
    segment = build_segment(open_store(str(tmp_path)))
    assert segment.checkpoint_version == 2
    assert [c.version for c in segment.commits] == [3, 4]


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"version": 99, "size": 3}'])
def test_bad_or_dangling_last_checkpoint_falls_back_to_listing(tmp_path, content, caplog):
    _delta_rs_table(tmp_path, 4, checkpoint_at=1)
    (tmp_path / "_delta_log" / "_last_checkpoint").write_bytes(content)
    snapshot = DeltaTable(str(tmp_path)).snapshot()
    assert snapshot.version == 3
    assert snapshot.segment.checkpoint_version == 1
    assert snapshot.files().num_rows == 4
    assert "_last_checkpoint" in caplog.text


def test_stale_hint_uses_the_newer_checkpoint(tmp_path):
    _delta_rs_table(tmp_path, 4, checkpoint_at=1)
    stale = (tmp_path / "_delta_log" / "_last_checkpoint").read_bytes()
    RsTable(str(tmp_path)).create_checkpoint()  # at version 3
    (tmp_path / "_delta_log" / "_last_checkpoint").write_bytes(stale)
    assert build_segment(open_store(str(tmp_path))).checkpoint_version == 3


def test_hint_at_a_missing_checkpoint_uses_an_older_one(tmp_path):
    _delta_rs_table(tmp_path, 6, checkpoint_at=1)
    RsTable(str(tmp_path)).create_checkpoint()  # at 5, hinted
    (tmp_path / "_delta_log" / "00000000000000000005.checkpoint.parquet").unlink()
    snapshot = DeltaTable(str(tmp_path)).snapshot()
    assert snapshot.segment.checkpoint_version == 1
    assert snapshot.version == 5 and snapshot.files().num_rows == 6


def test_incomplete_multipart_checkpoint_is_ignored(tmp_path, caplog):
    _delta_rs_table(tmp_path, 3, checkpoint_at=1)
    log = tmp_path / "_delta_log"
    shutil.copy(
        log / "00000000000000000001.checkpoint.parquet",
        log / "00000000000000000002.checkpoint.0000000001.0000000002.parquet",
    )
    segment = build_segment(open_store(str(tmp_path)))
    assert segment.checkpoint_version == 1
    assert "incomplete multi-part checkpoint at version 2" in caplog.text


def test_zero_byte_checkpoint_is_ignored(tmp_path):
    _delta_rs_table(tmp_path, 3, checkpoint_at=1)
    (tmp_path / "_delta_log" / "00000000000000000002.checkpoint.parquet").write_bytes(b"")
    assert build_segment(open_store(str(tmp_path))).checkpoint_version == 1


def test_truncated_checkpoint_falls_back_to_an_older_checkpoint(tmp_path, caplog):
    _delta_rs_table(tmp_path, 4, checkpoint_at=1)
    RsTable(str(tmp_path)).create_checkpoint()
    path = tmp_path / "_delta_log" / "00000000000000000003.checkpoint.parquet"
    path.write_bytes(path.read_bytes()[:50])
    snapshot = DeltaTable(str(tmp_path)).snapshot()
    assert snapshot.segment.checkpoint_version == 1 and snapshot.files().num_rows == 4
    assert "00000000000000000003.checkpoint.parquet" in caplog.text


def test_truncated_checkpoint_without_fallback_names_the_file(tmp_path):
    _delta_rs_table(tmp_path, 3, checkpoint_at=2)
    for version in (0, 1):
        (tmp_path / "_delta_log" / f"{version:020d}.json").unlink()
    path = tmp_path / "_delta_log" / "00000000000000000002.checkpoint.parquet"
    path.write_bytes(path.read_bytes()[:50])
    with pytest.raises(CorruptLogError, match=r"00000000000000000002\.checkpoint\.parquet") as info:
        DeltaTable(str(tmp_path)).snapshot()
    assert info.value.path.endswith("00000000000000000002.checkpoint.parquet")


def test_version_gap_after_checkpoint_names_the_missing_version(tmp_path):
    _delta_rs_table(tmp_path, 5, checkpoint_at=1)
    (tmp_path / "_delta_log" / "00000000000000000003.json").unlink()
    with pytest.raises(VersionGapError, match="version 3") as info:
        DeltaTable(str(tmp_path)).snapshot()
    assert info.value.missing_version == 3
    assert info.value.path.endswith("00000000000000000003.json")


def test_missing_commit_zero_without_checkpoint(log_writer):
    log_writer.basic(3)
    (log_writer.log / "00000000000000000000.json").unlink()
    with pytest.raises(VersionGapError, match="version 0 is missing"):
        DeltaTable(str(log_writer.root)).snapshot()


def test_only_incomplete_checkpoint_and_no_commit_zero(log_writer):
    log_writer.basic(3)
    (log_writer.log / "00000000000000000000.json").unlink()
    log_writer.raw("00000000000000000001.checkpoint.0000000001.0000000002.parquet", b"x")
    with pytest.raises(MissingCheckpointError, match="incomplete"):
        DeltaTable(str(log_writer.root)).snapshot()


def test_no_log_is_table_not_found(tmp_path):
    with pytest.raises(TableNotFoundError, match="No Delta table"):
        DeltaTable(str(tmp_path)).snapshot()
    (tmp_path / "_delta_log").mkdir()
    (tmp_path / "_delta_log" / "00000000000000000000.crc").write_text("junk")
    with pytest.raises(TableNotFoundError):
        DeltaTable(str(tmp_path)).version()


def test_stray_files_in_the_log_are_ignored(log_writer):
    log_writer.basic(2)
    log_writer.raw(".00000000000000000001.json.crc", b"junk")
    log_writer.raw("00000000000000000002.json.tmp", b"junk")
    (log_writer.log / "_staged_commits").mkdir()
    log_writer.raw("_staged_commits/00000000000000000002.uuid.json", b"junk")
    assert DeltaTable(str(log_writer.root)).version() == 1


def test_time_travel_to_a_missing_version(log_writer):
    log_writer.basic(2)
    with pytest.raises(VersionNotFoundError, match="latest version is 1"):
        DeltaTable(str(log_writer.root)).snapshot(version=5)


def test_time_travel_before_cleaned_up_history(tmp_path):
    _delta_rs_table(tmp_path, 5, checkpoint_at=2)
    for version in (0, 1):
        (tmp_path / "_delta_log" / f"{version:020d}.json").unlink()
    table = DeltaTable(str(tmp_path))
    assert table.snapshot(version=2).files().num_rows == 3
    with pytest.raises(VersionNotFoundError, match="cannot be reconstructed"):
        table.snapshot(version=1)


# --- the segment's listing reads sizes only where it needs them -------------------------------------------


def test_a_lazy_listing_gives_the_same_files_sizes_and_times(tmp_path):
    _delta_rs_table(tmp_path, 5, checkpoint_at=2)
    (tmp_path / "_delta_log" / "00000000000000000003.crc").write_bytes(b"")
    store = open_store(str(tmp_path))
    full = store.list_log()
    lazy = store.list_log(stat=False)
    assert [f.path for f in lazy] == [f.path for f in full]
    assert [(f.size, f.modification_time) for f in lazy] == [(f.size, f.modification_time) for f in full]
    assert store.list_log("00000000000000000003", stat=False)[0].name.startswith("00000000000000000003")


def test_the_segment_stats_only_its_checkpoint_and_checksum(tmp_path, monkeypatch):
    _delta_rs_table(tmp_path, 6, checkpoint_at=2)
    (tmp_path / "_delta_log" / "00000000000000000005.crc").write_bytes(b"{}")
    stated: list[str] = []
    real_stat = os.stat

    def stat(path, *args, **kwargs):
        stated.append(os.path.basename(str(path)))
        return real_stat(path, *args, **kwargs)

    monkeypatch.setattr(os, "stat", stat)
    segment = build_segment(open_store(str(tmp_path)))
    monkeypatch.undo()
    assert segment.checkpoint_version == 2 and segment.checksum is not None
    assert [c.version for c in segment.commits] == [3, 4, 5]
    assert not [name for name in stated if name.endswith(".json")], stated
    assert "00000000000000000002.checkpoint.parquet" in stated


def test_a_checkpoint_gone_between_listing_and_use_counts_as_absent(tmp_path):
    _delta_rs_table(tmp_path, 4, checkpoint_at=2)
    store = open_store(str(tmp_path))
    listed = store.list_log(stat=False)
    checkpoint = next(f for f in listed if f.name.endswith(".checkpoint.parquet"))
    os.remove(checkpoint.path)
    assert (checkpoint.size, checkpoint.modification_time) == (0, 0)
    snapshot = DeltaTable(str(tmp_path)).snapshot()  # no checkpoint now: replayed from version 0
    assert snapshot.version == 3 and snapshot.segment.checkpoint is None
