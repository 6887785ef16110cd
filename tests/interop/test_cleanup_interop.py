"""After the core's log cleanup, delta-rs and the core load every retained version alike; and where
the core (following Delta) and delta-rs ``cleanup_metadata()`` choose different files, the
difference is the documented one (docs/maintenance.md, "Log cleanup")."""

from __future__ import annotations

import os
import shutil
import time
import uuid
from datetime import UTC, datetime
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable


def cleaned(result: Any) -> list[str]:
    """The files a cleanup deleted (planned), relative to ``_delta_log`` (the result has URIs)."""
    return [uri.split("/_delta_log/", 1)[1] for uri in result.files]


NOW = datetime(2026, 6, 15, tzinfo=UTC)


def delta_rs_table(uri: str) -> None:
    """12 delta-rs commits (appends and overwrites, partitioned), checkpoints at 5 and 9."""
    for i in range(12):
        mode = "overwrite" if i % 5 == 4 else "append"
        deltalake.write_deltalake(
            uri, pa.table({"id": [i], "p": [f"x{i % 3}"]}), partition_by=["p"], mode=mode
        )
        if i in (5, 9):
            deltalake.DeltaTable(uri).create_checkpoint()


def age(uri: str, now: float, days_by_version) -> None:
    """Each version's log files ``days`` before ``now``, a second apart per version."""
    log_dir = os.path.join(uri, "_delta_log")
    for name in os.listdir(log_dir):
        if name[:20].isdigit():
            version = int(name[:20])
            stamp = now - days_by_version(version) * 86400 + version
            os.utime(os.path.join(log_dir, name), (stamp, stamp))


def log_names(uri: str) -> set[str]:
    return {n for n in os.listdir(os.path.join(uri, "_delta_log")) if n[:20].isdigit()}


def assert_versions_load_alike(uri: str, versions: range) -> None:
    table = DeltaTable(uri)
    for version in versions:
        ours = sorted(table.snapshot(version).to_pyarrow_table()["id"].to_pylist())
        theirs = sorted(deltalake.DeltaTable(uri, version=version).to_pyarrow_table()["id"].to_pylist())
        assert ours == theirs, version


def test_every_retained_version_loads_in_both(tmp_path):
    uri = str(tmp_path / "t")
    delta_rs_table(uri)
    age(uri, NOW.timestamp(), lambda v: 40 if v < 10 else 1)
    result = DeltaTable(uri).cleanup_logs(now=NOW)
    assert result.earliest_retained_version == 9 and result.checkpoint_version == 9
    assert min(int(n[:20]) for n in log_names(uri) if n.endswith(".json")) == 9
    assert_versions_load_alike(uri, range(9, 12))
    with pytest.raises(Exception):  # noqa: B017 - delta-rs's error types vary by version
        deltalake.DeltaTable(uri, version=8)


def test_same_files_as_delta_rs_on_a_plain_delta_rs_table(tmp_path):
    """Commits and classic checkpoints only, times increasing: both select the same files."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    delta_rs_table(ours)
    age(ours, time.time(), lambda v: 40 if v < 10 else 1)  # delta-rs uses the real clock
    shutil.copytree(ours, theirs)
    before = log_names(ours)
    result = DeltaTable(ours).cleanup_logs()
    deltalake.DeltaTable(theirs).cleanup_metadata()
    assert before - log_names(ours) == before - log_names(theirs) == set(cleaned(result))
    assert_versions_load_alike(ours, range(9, 12))


def test_a_young_commit_inside_an_old_group_goes_unlike_delta_rs(tmp_path):
    """Documented difference: commit 3 was touched yesterday. Delta decides per group by the group's
    last file, with times made monotonic only across single files (the chain restarts at version 5,
    which has a checkpoint and a commit): the group 0-8 before the checkpoint at 9 ends with an old
    commit and goes whole. delta-rs wants every file before the checkpoint expired and keeps all."""
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    delta_rs_table(ours)
    age(ours, time.time(), lambda v: 1 if v in (3, 10, 11) else 40)
    shutil.copytree(ours, theirs)
    result = DeltaTable(ours).cleanup_logs()
    deltalake.DeltaTable(theirs).cleanup_metadata()
    assert result.checkpoint_version == 9 and f"{3:020d}.json" in cleaned(result)
    assert min(int(n[:20]) for n in log_names(theirs)) == 0
    assert_versions_load_alike(ours, range(9, 12))
    assert_versions_load_alike(theirs, range(12))


def core_table(uri: str) -> None:
    """Written by the core: .crc files, a multi-part checkpoint at 3 and a classic one at 7."""
    table = DeltaTable.create(uri, pa.schema([("id", pa.int64())]))
    for i in range(1, 10):
        relative = f"w-{uuid.uuid4().hex[:8]}/p.parquet"
        os.makedirs(os.path.join(uri, os.path.dirname(relative)))
        pq.write_table(pa.table({"id": [i]}), os.path.join(uri, relative))
        mode = "overwrite" if i == 5 else "append"
        table.commit_files([relative], mode=mode, auto_checkpoint=False)
        if i == 3:
            table.checkpoint(parts=2)
        if i == 7:
            table.checkpoint()


def test_core_removes_crc_and_multipart_files_delta_rs_leaves(tmp_path):
    ours, theirs = str(tmp_path / "ours"), str(tmp_path / "theirs")
    core_table(ours)
    age(ours, time.time(), lambda v: 40 if v < 8 else 1)
    shutil.copytree(ours, theirs)
    result = DeltaTable(ours).cleanup_logs()
    deltalake.DeltaTable(theirs).cleanup_metadata()
    assert result.checkpoint_version == 7
    assert not {n for n in log_names(ours) if int(n[:20]) < 7}  # every kind of file before 7 is gone
    left_by_delta_rs = {n for n in log_names(theirs) if int(n[:20]) < 7}
    assert {n for n in left_by_delta_rs if n.endswith(".crc")}  # delta-rs keeps the .crc files
    assert not {n for n in left_by_delta_rs if n.endswith(".json")}  # both remove the commits
    assert_versions_load_alike(ours, range(7, 10))
