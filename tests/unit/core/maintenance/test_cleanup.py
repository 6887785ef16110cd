"""Expired-log cleanup: Delta's MetadataCleanup rules, on real tables with controlled file ages.

Delta compares each file's modification time with the file listed before it, so the helpers
give every version its own second (``NOW - days + version s``): equal times would make every
later file "adjusted" and, as in Delta, an adjusted checkpoint does not end a group.
"""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import InvalidPathError, RetentionError, UnsupportedFeatureError
from airflow_delta_provider.core.log.logfiles import parse_log_file
from airflow_delta_provider.core.maintenance.cleanup import cutoff_for, earliest_reconstructable, plan_expired
from airflow_delta_provider.core.storage import FileInfo


def cleaned(result: Any) -> list[str]:
    """The files a cleanup deleted (planned), relative to ``_delta_log`` (the result has URIs)."""
    return [uri.split("/_delta_log/", 1)[1] for uri in result.files]


SCHEMA = pa.schema([("id", pa.int64())])
NOW = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
CUTOFF_30 = datetime(2026, 5, 16, tzinfo=UTC)


def commit(table: DeltaTable, value: int, **kwargs) -> int:
    relative = f"w-{uuid.uuid4().hex[:8]}/p.parquet"
    os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
    pq.write_table(pa.table({"id": [value]}), os.path.join(table.storage.root, relative))
    return table.commit_files([relative], auto_checkpoint=False, **kwargs).version


def stamp(days: float, version: int = 0) -> float:
    return (NOW - timedelta(days=days)).timestamp() + version


def age(table: DeltaTable, days_by_version: dict[int, float], directory: str | None = None) -> None:
    """Every log file of a version was last modified ``days`` before NOW (plus ``version`` seconds)."""
    directory = directory or table.storage.log_dir
    for name in os.listdir(directory):
        if name[:20].isdigit() and int(name[:20]) in days_by_version:
            version = int(name[:20])
            t = stamp(days_by_version[version], version)
            os.utime(os.path.join(directory, name), (t, t))


def touch(path: str, days: float, version: int = 0) -> None:
    t = stamp(days, version)
    os.utime(path, (t, t))


def log_names(table: DeltaTable) -> list[str]:
    return sorted(n for n in os.listdir(table.storage.log_dir) if n[:20].isdigit())


def ids(table: DeltaTable, version: int | None = None) -> list[int]:
    return sorted(table.snapshot(version).to_pyarrow_table()["id"].to_pylist())


@pytest.fixture
def table(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA)
    for i in range(1, 8):
        commit(table, i)
    return table


# --- the cutoff and the retention ------------------------------------------------------


def test_cutoff_is_utc_midnight():
    assert cutoff_for(NOW, timedelta(days=30)) == CUTOFF_30
    # 01:00 at UTC+2 is 23:00 UTC the day before: the UTC day counts.
    local = datetime(2026, 6, 15, 1, 0, tzinfo=timezone(timedelta(hours=2)))
    assert cutoff_for(local, timedelta(days=1)) == datetime(2026, 6, 13, tzinfo=UTC)
    assert cutoff_for(datetime(2026, 6, 15, 12), timedelta(0)) == datetime(2026, 6, 15, tzinfo=UTC)


def test_a_file_is_expired_up_to_midnight_inclusive(table):
    table.checkpoint(6)
    age(table, {**dict.fromkeys(range(6), 40), 6: 1, 7: 1})
    midnight_ms = CUTOFF_30.timestamp()
    for name in log_names(table):  # version 5 (the last before the checkpoint) exactly at the cutoff
        if int(name[:20]) == 5:
            os.utime(os.path.join(table.storage.log_dir, name), (midnight_ms, midnight_ms))
    assert table.cleanup_logs(now=NOW, dry_run=True).checkpoint_version == 6
    for name in log_names(table):
        if int(name[:20]) == 5:
            os.utime(os.path.join(table.storage.log_dir, name), (midnight_ms + 0.001, midnight_ms + 0.001))
    assert table.cleanup_logs(now=NOW, dry_run=True).num_files == 0


def test_retention_precedence_and_dry_run(table):
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 10))
    result = table.cleanup_logs(now=NOW)
    assert result.num_files == 0 and result.retention.source == "default"
    assert result.retention.value == timedelta(days=30)
    configured = DeltaTable(table.uri, provider_defaults={"delta.logRetentionDuration": "interval 5 days"})
    result = configured.cleanup_logs(now=NOW, dry_run=True)
    assert result.retention.source == "provider config" and result.num_files > 0
    result = table.cleanup_logs(now=NOW, retention="interval 2 days", dry_run=True)
    assert result.retention.source == "argument" and result.num_files > 0 and result.dry_run
    assert f"{0:020d}.json" in log_names(table)  # dry run: nothing deleted
    assert result.to_dict()["files"] == result.files and json.dumps(result.to_dict())


def test_the_table_property_beats_the_provider_default(tmp_path):
    table = DeltaTable.create(
        str(tmp_path / "t"), SCHEMA, properties={"delta.logRetentionDuration": "interval 60 days"}
    )
    for i in range(1, 4):
        commit(table, i)
    table.checkpoint(3)
    age(table, dict.fromkeys(range(4), 40))
    configured = DeltaTable(table.uri, provider_defaults={"delta.logRetentionDuration": "1 day"})
    result = configured.cleanup_logs(now=NOW)
    assert result.retention.source == "table property" and result.num_files == 0


@pytest.mark.parametrize("bad", ["1 fortnight", "interval 1 month", "-3 days", "soon"])
def test_bad_retention_is_refused_naming_the_value(table, bad):
    with pytest.raises(RetentionError, match=r"delta\.logRetentionDuration"):
        table.cleanup_logs(retention=bad)


@pytest.mark.parametrize("bad", ["yesterday", 1.5, True])
def test_bad_clock_is_refused(table, bad):
    with pytest.raises(RetentionError, match="now="):
        table.cleanup_logs(now=bad)


def test_now_in_milliseconds(table):
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    result = table.cleanup_logs(now=int(NOW.timestamp() * 1000), dry_run=True)
    assert result.cutoff == CUTOFF_30 and result.checkpoint_version == 6


# --- which files go ----------------------------------------------------------------------


def test_nothing_without_a_checkpoint(table):
    age(table, dict.fromkeys(range(8), 60))
    result = table.cleanup_logs(now=NOW)
    assert result.num_files == 0 and "_last_checkpoint" in result.skipped_reason
    assert result.earliest_retained_version == 0


def test_nothing_without_last_checkpoint_even_with_a_checkpoint(table):
    table.checkpoint(6)
    os.remove(os.path.join(table.storage.log_dir, "_last_checkpoint"))
    age(table, dict.fromkeys(range(8), 60))
    assert table.cleanup_logs(now=NOW).num_files == 0
    assert f"{0:020d}.json" in log_names(table)


def test_whole_groups_before_the_checkpoint_go_and_its_version_stays(table):
    table.checkpoint(3)
    table.checkpoint(6)
    age(table, {**dict.fromkeys(range(7), 40), 7: 1})
    before = ids(table)
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 6 and result.earliest_retained_version == 6
    names = log_names(table)
    assert names[0].startswith(f"{6:020d}")
    assert {f"{6:020d}.json", f"{6:020d}.crc", f"{6:020d}.checkpoint.parquet"} <= set(names)
    assert set(cleaned(result)) == {f"{v:020d}.{ext}" for v in range(6) for ext in ("json", "crc")} | {
        f"{3:020d}.checkpoint.parquet"
    }
    assert result.num_bytes > 0 and not os.path.exists(
        os.path.join(table.storage.log_dir, cleaned(result)[0])
    )
    assert ids(table) == before
    assert ids(table, 6) == before[:-1]


def test_a_young_commit_before_a_checkpoint_keeps_its_group(table):
    table.checkpoint(3)
    table.checkpoint(6)
    age(table, {**dict.fromkeys(range(5), 40), 5: 2, 6: 2, 7: 1})
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 3 and result.earliest_retained_version == 3
    assert log_names(table)[0].startswith(f"{3:020d}")


def test_checkpoints_after_last_checkpoint_do_not_count(table):
    """``_last_checkpoint`` names version 3 (stale): the checkpoint at 6 cannot end a deleted group."""
    table.checkpoint(6)
    hint = os.path.join(table.storage.log_dir, "_last_checkpoint")
    with open(hint, "rb") as f:
        stale = f.read()
    table.checkpoint(3)  # never moves _last_checkpoint back ...
    with open(hint, "wb") as f:  # ... so put a stale hint in place by hand
        f.write(stale.replace(b'"version":6', b'"version":3'))
    age(table, dict.fromkeys(range(8), 40))
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 3
    assert log_names(table)[0].startswith(f"{3:020d}")
    assert ids(table) == list(range(1, 8))


def test_modification_times_are_made_monotonic(table):
    """A recent file followed by "older" ones of higher versions: each counts as one millisecond newer
    than the file before it, so no group after the recent one is old enough."""
    table.checkpoint(6)
    for name in log_names(table):  # one file per version, so every later file is adjusted
        if name.endswith(".crc"):
            os.remove(os.path.join(table.storage.log_dir, name))
    age(table, {**dict.fromkeys(range(8), 40), 2: 1})
    result = table.cleanup_logs(now=NOW)
    assert result.num_files == 0 and result.earliest_retained_version == 0


def test_the_adjustment_chain_stops_at_a_second_file_of_a_version(table):
    """As in Delta: a file is adjusted only against a lower version's file, and the file before the
    next one is then the unadjusted second file of the version (``N.crc`` then ``N.json``)."""
    table.checkpoint(6)
    age(table, {**dict.fromkeys(range(8), 40), 2: 1})
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 6 and f"{2:020d}.json" in cleaned(result)
    assert ids(table) == list(range(1, 8))


def test_files_of_one_version_are_not_compared_with_each_other(table):
    """A checkpoint written long after its commit does not make the later log look young (Delta compares
    a file only with a lower version's file), so the group it starts still goes."""
    table.checkpoint(3)
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    touch(os.path.join(table.storage.log_dir, f"{3:020d}.checkpoint.parquet"), 1)
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 6
    assert log_names(table)[0].startswith(f"{6:020d}")


def test_a_checkpoint_no_newer_than_the_file_before_it_ends_no_group(table):
    """Delta adjusts such a checkpoint's time and buffers it like a commit (e.g. one-second S3 times)."""
    table.checkpoint(3)
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    t = stamp(40, 5)  # checkpoint 6 as old as commit 5
    os.utime(os.path.join(table.storage.log_dir, f"{6:020d}.checkpoint.parquet"), (t, t))
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 3
    assert log_names(table)[0].startswith(f"{3:020d}")


def test_multipart_and_crc_files_go_too(table):
    table.checkpoint(2, parts=2)
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    result = table.cleanup_logs(now=NOW)
    gone = set(cleaned(result))
    assert {f"{2:020d}.checkpoint.{p:010d}.{2:010d}.parquet" for p in (1, 2)} <= gone
    assert {f"{2:020d}.crc", f"{5:020d}.crc"} <= gone
    assert ids(table) == list(range(1, 8))


def test_a_multipart_checkpoint_ends_a_group_only_when_complete(table):
    table.checkpoint(2)
    table.checkpoint(4, parts=2)
    table.checkpoint(6)
    part1, part2 = (f"{4:020d}.checkpoint.{p:010d}.{2:010d}.parquet" for p in (1, 2))
    os.remove(os.path.join(table.storage.log_dir, part2))
    age(table, {**dict.fromkeys(range(5), 40), 5: 1, 6: 1, 7: 1})
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 2  # the incomplete set at 4 ends nothing
    age(table, dict.fromkeys(range(8), 40))
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 6
    # Delta never selects the parts of an incomplete set: the stray part stays.
    assert part1 not in cleaned(result) and part1 in log_names(table)
    assert ids(table) == list(range(1, 8))


def test_empty_checkpoint_files_end_no_group(table):
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    path = os.path.join(table.storage.log_dir, f"{3:020d}.checkpoint.parquet")
    open(path, "wb").close()
    touch(path, 40, 3)
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 6 and f"{3:020d}.checkpoint.parquet" in cleaned(result)


def test_uuid_checkpoints_go_too(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA, properties={"delta.checkpointPolicy": "v2"})
    for i in range(1, 8):
        commit(table, i)
    table.checkpoint(3, parts=2)
    table.checkpoint(6, parts=2)
    uuid_named = [n for n in log_names(table) if n.startswith(f"{3:020d}.checkpoint.") and n.count(".") == 3]
    assert uuid_named, log_names(table)
    age(table, dict.fromkeys(range(8), 40))
    result = table.cleanup_logs(now=NOW)
    assert set(uuid_named) <= set(cleaned(result))
    assert ids(table) == list(range(1, 8))


def test_unreferenced_sidecars_go_when_a_checkpoint_goes(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA, properties={"delta.checkpointPolicy": "v2"})
    for i in range(1, 8):
        commit(table, i)
    old = table.checkpoint(3, parts=2).files
    new = table.checkpoint(6, parts=2).files
    sidecar_dir = os.path.join(table.storage.log_dir, "_sidecars")
    old_sidecars = {f for f in old if f.startswith("_sidecars/")}
    new_sidecars = {f for f in new if f.startswith("_sidecars/")}
    assert old_sidecars and new_sidecars
    age(table, dict.fromkeys(range(8), 40))
    for name in os.listdir(sidecar_dir):  # every sidecar is old; only the referenced ones may stay
        touch(os.path.join(sidecar_dir, name), 40)
    stray = os.path.join(sidecar_dir, "stray-in-progress.parquet")
    open(stray, "wb").close()  # young and unreferenced: an in-progress checkpoint's; kept
    result = table.cleanup_logs(now=NOW)
    assert old_sidecars <= set(cleaned(result))
    assert not new_sidecars & set(cleaned(result))
    assert sorted(os.listdir(sidecar_dir)) == sorted([n.split("/")[1] for n in new_sidecars] + [stray[-25:]])
    assert ids(table) == list(range(1, 8))


def test_expired_compacted_logs_go_without_blocking_the_groups(table):
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    log_dir = table.storage.log_dir
    old = os.path.join(log_dir, f"{1:020d}.{3:020d}.compacted.json")
    young = os.path.join(log_dir, f"{4:020d}.{5:020d}.compacted.json")
    after = os.path.join(log_dir, f"{7:020d}.{7:020d}.compacted.json")
    for path in (old, young, after):
        with open(path, "w") as f:
            f.write('{"commitInfo":{}}\n')
    touch(old, 40)
    touch(after, 40)  # starts after _last_checkpoint: readers may still use it
    result = table.cleanup_logs(now=NOW)  # the young compacted file is not part of the groups
    assert result.checkpoint_version == 6
    assert os.path.basename(old) in cleaned(result)
    assert os.path.exists(young) and os.path.exists(after)


def test_staged_commits_go_up_to_the_newest_deleted_commit(table):
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    staged = os.path.join(table.storage.log_dir, "_staged_commits")
    os.makedirs(staged)
    names = [f"{v:020d}.{uuid.uuid4()}.json" for v in (2, 5, 6)]
    for name in names:
        open(os.path.join(staged, name), "w").close()
    result = table.cleanup_logs(now=NOW)
    assert {f"_staged_commits/{n}" for n in names[:2]} <= set(cleaned(result))
    assert os.listdir(staged) == [names[2]]


def test_only_log_files_are_touched(table):
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    data = sorted(p for p in os.listdir(table.storage.root) if p != "_delta_log")
    stray = os.path.join(table.storage.log_dir, "notes.txt")
    open(stray, "w").close()
    touch(stray, 400)
    result = table.cleanup_logs(now=NOW)
    assert result.num_files > 0
    assert sorted(p for p in os.listdir(table.storage.root) if p != "_delta_log") == data
    assert os.path.exists(stray) and os.path.exists(os.path.join(table.storage.log_dir, "_last_checkpoint"))


def test_a_foreign_path_from_the_listing_is_refused(table, monkeypatch):
    """A listing that names a file outside _delta_log (a broken store adapter) deletes nothing."""
    from airflow_delta_provider.core.maintenance import cleanup

    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    real = cleanup.log_files_of

    def log_files_of(listing):
        return [
            parse_log_file(
                FileInfo(f.file.path.replace("/_delta_log/", "/x/"), f.file.size, f.file.modification_time)
            )
            if f.version == 0
            else f
            for f in real(listing)
        ]

    monkeypatch.setattr(cleanup, "log_files_of", log_files_of)
    with pytest.raises(InvalidPathError, match="not inside"):
        table.cleanup_logs(now=NOW)
    monkeypatch.undo()
    assert f"{0:020d}.json" in log_names(table) and f"{1:020d}.json" in log_names(table)


def test_unknown_writer_features_are_refused(log_writer):
    log_writer.commit(
        0,
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["futureX"]}},
        log_writer.metadata(),
    )
    with pytest.raises(UnsupportedFeatureError, match="futureX") as err:
        DeltaTable(str(log_writer.root)).cleanup_logs()
    assert err.value.feature == "futureX"


# --- checkpointProtection ----------------------------------------------------------------


def protected_table(log_writer, before_version: int, versions: int = 8) -> DeltaTable:
    log_writer.commit(
        0,
        log_writer.commit_info("CREATE TABLE"),
        {
            "protocol": {
                "minReaderVersion": 1,
                "minWriterVersion": 7,
                "writerFeatures": ["checkpointProtection", "appendOnly", "invariants"],
            }
        },
        log_writer.metadata({"delta.requireCheckpointProtectionBeforeVersion": str(before_version)}),
    )
    table = DeltaTable(str(log_writer.root))
    for i in range(1, versions):
        commit(table, i)
    return table


@pytest.mark.parametrize("before_version", [2, 6])
def test_protection_allows_removing_everything_below_the_version(log_writer, before_version):
    table = protected_table(log_writer, before_version)
    table.checkpoint(3)
    table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    assert table.cleanup_logs(now=NOW).checkpoint_version == 6


def test_protection_allows_stopping_at_a_checkpoint(log_writer):
    """Delta's second rule: the run stops short of the protected version but at a checkpoint."""
    table = protected_table(log_writer, 7)
    table.checkpoint(3)
    table.checkpoint(6)
    age(table, {**dict.fromkeys(range(5), 40), 5: 2, 6: 2, 7: 1})
    assert table.cleanup_logs(now=NOW).checkpoint_version == 3


def gap_before_checkpoint(table: DeltaTable) -> None:
    """Commit 3 missing, checkpoint at 4: a run deleting 0-2 ends where no checkpoint is.

    The hand-written commit 0 left no ``.crc`` files; write the ones Delta would read."""
    table.checkpoint(4)
    protocol = table.snapshot().protocol.to_json()
    for version in range(4):
        with open(os.path.join(table.storage.log_dir, f"{version:020d}.crc"), "w") as f:
            json.dump({"tableSizeBytes": 0, "numFiles": version, "protocol": protocol}, f)
    os.remove(os.path.join(table.storage.log_dir, f"{3:020d}.json"))
    age(table, dict.fromkeys(range(8), 40))


def test_protection_refuses_a_partial_run_it_cannot_verify(log_writer):
    table = protected_table(log_writer, 6)
    gap_before_checkpoint(table)
    os.remove(os.path.join(table.storage.log_dir, f"{3:020d}.crc"))
    result = table.cleanup_logs(now=NOW)
    assert result.num_files == 0 and "checkpointProtection" in result.skipped_reason
    assert f"{0:020d}.json" in log_names(table)


def test_protection_accepts_a_partial_run_when_every_crc_protocol_is_supported(log_writer):
    table = protected_table(log_writer, 6)
    gap_before_checkpoint(table)
    result = table.cleanup_logs(now=NOW)
    assert result.checkpoint_version == 4
    assert f"{0:020d}.json" not in log_names(table)


def test_protection_refuses_when_a_crc_names_an_unsupported_protocol(log_writer):
    table = protected_table(log_writer, 6)
    gap_before_checkpoint(table)
    crc = os.path.join(table.storage.log_dir, f"{1:020d}.crc")
    with open(crc) as f:
        payload = json.load(f)
    payload["protocol"] = {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["futureR"]}
    payload["protocol"]["writerFeatures"] = ["futureR"]
    with open(crc, "w") as f:
        json.dump(payload, f)
    touch(crc, 40, 1)
    assert "checkpointProtection" in table.cleanup_logs(now=NOW).skipped_reason


# --- automatic cleanup after checkpoints ---------------------------------------------------


def due_for_cleanup(tmp_path, **properties: str) -> tuple[DeltaTable, str]:
    """A table whose versions 0-9 are 5 days old (retention 1 day), and a file whose commit
    lands on version 10: the post-commit checkpoint, then the cleanup of everything before it."""
    table = DeltaTable.create(
        str(tmp_path / "t"),
        SCHEMA,
        properties={"delta.logRetentionDuration": "interval 1 days", **properties},
    )
    for i in range(1, 10):
        commit(table, i)
    age(table, dict.fromkeys(range(10), 5))
    relative = "last/p.parquet"
    os.makedirs(os.path.join(table.storage.root, "last"))
    pq.write_table(pa.table({"id": [10]}), os.path.join(table.storage.root, relative))
    return table, relative


def test_post_commit_checkpoint_cleans_expired_logs(tmp_path):
    table, relative = due_for_cleanup(tmp_path)
    table.commit_files([relative])  # version 10: checkpoint, then cleanup of everything before it
    assert log_names(table)[0].startswith(f"{10:020d}")
    assert ids(table) == list(range(1, 11))


def test_disabled_expired_log_cleanup_gates_only_the_automatic_run(tmp_path):
    table, relative = due_for_cleanup(tmp_path, **{"delta.enableExpiredLogCleanup": "false"})
    table.commit_files([relative])
    assert log_names(table)[0].startswith(f"{0:020d}")  # checkpoint written, nothing cleaned
    assert table.cleanup_logs().checkpoint_version == 10  # an explicit call still cleans


@pytest.mark.parametrize(("enabled", "argument", "cleans"), [("false", True, True), ("true", False, False)])
def test_cleanup_expired_logs_decides_the_automatic_run_for_one_commit(tmp_path, enabled, argument, cleans):
    table, relative = due_for_cleanup(tmp_path, **{"delta.enableExpiredLogCleanup": enabled})
    table.commit_files([relative], cleanup_expired_logs=argument)
    first = 10 if cleans else 0  # the checkpoint at version 10 is written either way
    assert log_names(table)[0].startswith(f"{first:020d}")
    assert ids(table) == list(range(1, 11))


# --- the selection itself, on synthetic listings -------------------------------------------


def listing(*entries: tuple[str, int], size: int = 10) -> list:
    return [parse_log_file(FileInfo(f"/t/_delta_log/{name}", size, mtime)) for name, mtime in entries]


def names(files) -> list[str]:
    return [f.name for f in files]


def test_plan_follows_deltas_example():
    """Delta's BufferingLogDeletionIterator example: times 0, 5, 10, 7, 8, 14 adjust to 0, 5, 10, 11, 12, 14;
    with checkpoints at every version, version 2 anchors 3 and 4, so they go together or not at all."""
    times = [0, 5, 10, 7, 8, 14]
    files = listing(*[(f"{v:020d}.checkpoint.parquet", t) for v, t in enumerate(times)])
    for cutoff, expected in [(9, 2), (11, 2), (12, 5), (14, 5)]:
        plan = plan_expired(files, cutoff, 6)
        assert names(plan.expired) == [f"{v:020d}.checkpoint.parquet" for v in range(expected)], cutoff
    # Adjusted checkpoints (3, 4) are buffered like commits: the group of 2 ends only at 5.
    assert plan_expired(files, 12, 6).checkpoint_version == 5


def test_plan_respects_the_last_checkpoint_version():
    files = listing(
        *[(f"{v:020d}.json", v) for v in range(6)],
        (f"{3:020d}.checkpoint.parquet", 3),
        (f"{5:020d}.checkpoint.parquet", 5),
    )
    files.sort(key=lambda f: f.name)
    assert plan_expired(files, 100, 3).checkpoint_version == 3
    assert plan_expired(files, 100, 5).checkpoint_version == 5
    assert plan_expired(files, 100, 2).expired == []


def test_earliest_reconstructable():
    def versions(*entries: str) -> list:
        return listing(*[(e, 1) for e in entries])

    assert earliest_reconstructable(versions(f"{0:020d}.json", f"{1:020d}.json")) == 0
    assert (
        earliest_reconstructable(
            versions(f"{3:020d}.checkpoint.parquet", f"{3:020d}.json", f"{4:020d}.json", f"{6:020d}.json")
        )
        is None
    )
    assert (
        earliest_reconstructable(
            versions(
                f"{3:020d}.checkpoint.parquet",
                f"{3:020d}.json",
                f"{5:020d}.checkpoint.parquet",
                f"{5:020d}.json",
                f"{6:020d}.json",
            )
        )
        == 5
    )
    assert earliest_reconstructable([]) is None


# --- temp files of killed writers ----------------------------------------------------------------


def _temp(directory: str, name: str, days: float) -> str:
    path = os.path.join(directory, name)
    with open(path, "wb") as f:
        f.write(b"half a commit")
    touch(path, days)
    return name


HEX = uuid.uuid4().hex
DASHED = str(uuid.uuid4())
#: (id, name, days old, expired): temp names of every put target, and look-alikes that are not temp files.
TEMP_FILES = [
    ("commit", f".{3:020d}.json.{HEX}.tmp", 40, True),
    ("last-checkpoint", f"._last_checkpoint.{HEX}.tmp", 40, True),
    ("checksum", f".{3:020d}.crc.{HEX}.tmp", 40, True),
    ("checkpoint", f".{6:020d}.checkpoint.parquet.{HEX}.tmp", 40, True),
    ("spark-dashed-uuid", f".{3:020d}.json.{DASHED}.tmp", 40, True),
    ("young", f".{7:020d}.json.{uuid.uuid4().hex}.tmp", 0.1, False),
    ("hadoop-crc", f".{3:020d}.json.crc", 40, False),
    ("no-uuid", f".{3:020d}.json.tmp", 40, False),
    ("other-dot-file", ".keep", 40, False),
    ("dot-dot-target", f"..{3:020d}.json.{HEX}.tmp", 40, False),
]


@pytest.mark.parametrize("with_hint", [True, False], ids=["with-last-checkpoint", "without-last-checkpoint"])
@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
def test_expired_temp_files_of_killed_writers_go(table, log_state, with_hint, dry_run):
    if with_hint:
        table.checkpoint(6)
    age(table, dict.fromkeys(range(8), 40))
    planned = table.cleanup_logs(now=NOW, dry_run=True)  # Delta's plan, before any temp file exists
    log = table.storage.log_dir
    for _, name, days, _ in TEMP_FILES:
        _temp(log, name, days)
    expired = sorted(name for _, name, _, gone in TEMP_FILES if gone)
    version, files = table.version(), ids(table)
    before = log_state(table.storage.root)

    result = table.cleanup_logs(now=NOW, dry_run=dry_run)

    assert sorted(n for n in cleaned(result) if n.startswith(".")) == expired
    # Delta's rules are untouched: the same log files, the same reason when there are none.
    assert [n for n in cleaned(result) if not n.startswith(".")] == cleaned(planned)
    assert result.skipped_reason == planned.skipped_reason
    assert (result.skipped_reason is None) is with_hint
    assert result.num_bytes == planned.num_bytes + len(expired) * len(b"half a commit")
    remaining = set(os.listdir(log))
    if dry_run:
        assert log_state(table.storage.root) == before
    else:
        assert not remaining & set(expired)
        assert {name for _, name, _, gone in TEMP_FILES if not gone} <= remaining
    assert table.version() == version and ids(table) == files


def test_temp_files_within_the_retention_stay(table, log_state):
    table.checkpoint(6)
    name = _temp(table.storage.log_dir, f".{8:020d}.json.{uuid.uuid4().hex}.tmp", 10)
    result = table.cleanup_logs(now=NOW)
    assert name not in cleaned(result) and os.path.exists(os.path.join(table.storage.log_dir, name))


def test_sidecar_temp_files_go_on_v2_tables(tmp_path):
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA, properties={"delta.checkpointPolicy": "v2"})
    if "v2Checkpoint" not in (table.snapshot().protocol.writer_features or ()):
        pytest.skip("the core does not create v2Checkpoint tables from the policy property")
    commit(table, 1)
    sidecars = os.path.join(table.storage.log_dir, "_sidecars")
    os.makedirs(sidecars, exist_ok=True)
    name = _temp(sidecars, f".{uuid.uuid4()}.parquet.{uuid.uuid4().hex}.tmp", 40)
    result = table.cleanup_logs(now=NOW)
    assert f"_sidecars/{name}" in cleaned(result) and not os.path.exists(os.path.join(sidecars, name))
