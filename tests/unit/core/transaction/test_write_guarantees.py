"""Bad input never changes a table, and a landed commit is reported as landed.

One parametrised set per class of hostile input (issue 10). Every refusal asserts the error
*and* that the table's version, active files and ``_delta_log`` listing are unchanged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import uuid
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    CorruptLogError,
    EmptyOverwriteError,
    InvalidLogValueError,
    InvalidPartitionValueError,
    InvalidPathError,
    SchemaError,
    SchemaMismatchError,
    TableNotFoundError,
)
from airflow_delta_provider.core.protocol.actions import AddFile, Metadata, Protocol, RemoveFile, Transaction
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ("ds", pa.string()),
    ]
)


def write_file(root: str, relative: str, data: pa.Table | None = None) -> str:
    path = os.path.join(root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if data is None:
        data = pa.table({"id": pa.array([1], pa.int64())})
    pq.write_table(data, path)
    return relative


def part(table: DeltaTable, ds: str = "a", ids: tuple[int, ...] = (1,)) -> str:
    return write_file(
        table.storage.root,
        f"w-{uuid.uuid4().hex[:8]}/ds={ds}/part-0.parquet",
        pa.table({"id": pa.array(ids, pa.int64())}),
    )


def state(table: DeltaTable) -> tuple[int, list[str], list[str]]:
    """What must not change: version, active files, the _delta_log listing."""
    snapshot = table.snapshot()
    return (
        snapshot.version,
        sorted(snapshot.files().column("path").to_pylist()),
        sorted(os.listdir(table.storage.log_dir)),
    )


@pytest.fixture
def table(tmp_path) -> DeltaTable:
    table = DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds"])
    table.commit_files([part(table, "a", (1, 2)), part(table, "b", (3,))])
    return table


# --- 1. empty overwrites and empty appends ------------------------------------------------------


def _empty_dir(table: DeltaTable, *hidden: str) -> str:
    name = f"empty-{uuid.uuid4().hex[:6]}"
    os.makedirs(os.path.join(table.storage.root, name))
    for item in hidden:
        with open(os.path.join(table.storage.root, name, item), "w"):
            pass
    return name


EMPTY_OVERWRITES = {
    "files-empty-list": lambda t: {"files": []},
    "prefix-empty-directory": lambda t: {"prefix": _empty_dir(t)},
    "prefix-only-hidden-files": lambda t: {"prefix": _empty_dir(t, "_SUCCESS", ".part-0.crc")},
    "replace-where-matching-data": lambda t: {"files": [], "replace_where": "ds = 'a'"},
    "replace-where-with-app-id": lambda t: {
        "files": [],
        "replace_where": "ds IN ('a', 'b')",
        "app_id": "job",
        "app_version": 1,
    },
}


@pytest.mark.parametrize("case", list(EMPTY_OVERWRITES))
def test_an_overwrite_that_would_only_remove_data_is_refused(table, case):
    before = state(table)
    with pytest.raises(EmptyOverwriteError, match="allow_empty_overwrite=True"):
        table.commit_files(mode="overwrite", **EMPTY_OVERWRITES[case](table))
    assert state(table) == before


@pytest.mark.parametrize("case", list(EMPTY_OVERWRITES))
def test_allow_empty_overwrite_removes_the_selected_data(table, case):
    result = table.commit_files(mode="overwrite", allow_empty_overwrite=True, **EMPTY_OVERWRITES[case](table))
    snapshot = table.snapshot()
    assert result.committed and result.num_added_files == 0 and result.num_removed_files > 0
    remaining = sorted(snapshot.to_pyarrow_table()["ds"].to_pylist())
    assert remaining == (["b"] if case == "replace-where-matching-data" else [])


EMPTY_APPENDS = {
    "files-empty-list": lambda t: {"files": []},
    "prefix-empty-directory": lambda t: {"prefix": _empty_dir(t)},
    "prefix-only-success-marker": lambda t: {"prefix": _empty_dir(t, "_SUCCESS")},
    "overwrite-matching-nothing": lambda t: {"files": [], "mode": "overwrite", "replace_where": "ds = 'zzz'"},
}


@pytest.mark.parametrize("case", list(EMPTY_APPENDS))
def test_an_empty_append_writes_no_commit_and_says_why(table, case):
    before = state(table)
    result = table.commit_files(**EMPTY_APPENDS[case](table))
    assert (result.committed, result.skipped, result.reason) == (False, True, "no_files")
    assert result.version == before[0]
    assert result.to_dict()["reason"] == "no_files"
    assert state(table) == before


@pytest.mark.parametrize("case", list(EMPTY_APPENDS))
def test_an_empty_run_with_an_app_id_is_recorded_so_a_retry_is_recognised(table, case):
    before = state(table)
    result = table.commit_files(app_id="daily", app_version=7, **EMPTY_APPENDS[case](table))
    assert result.committed and result.version == before[0] + 1
    assert (result.num_added_files, result.num_removed_files) == (0, 0)
    snapshot = table.snapshot()
    assert snapshot.app_transaction_version("daily") == 7
    assert sorted(snapshot.files().column("path").to_pylist()) == before[1]
    retry = table.commit_files(app_id="daily", app_version=7, **EMPTY_APPENDS[case](table))
    assert (retry.committed, retry.reason, retry.version, retry.version_exact) == (
        False,
        "already_committed",
        result.version,
        True,
    )


def test_a_prefix_that_does_not_exist_is_refused(table):
    before = state(table)
    for mode in ("append", "overwrite"):
        with pytest.raises(InvalidPathError, match="does not exist"):
            table.commit_files(prefix="no-such-output", mode=mode, allow_empty_overwrite=True)
    assert state(table) == before


def test_a_new_table_without_files_needs_a_schema(tmp_path):
    target = DeltaTable(str(tmp_path / "new"))
    with pytest.raises(SchemaError, match="pass schema="):
        target.commit_files([], partition_by=["ds"])
    assert not os.path.exists(tmp_path / "new" / "_delta_log")
    result = target.commit_files([], schema=SCHEMA, partition_by=["ds"], app_id="c", app_version=0)
    assert (result.version, result.operation, result.num_added_files) == (0, "CREATE TABLE AS SELECT", 0)
    assert target.snapshot().app_transaction_version("c") == 0


# --- 2. column names that differ from the table's only in case -------------------------------------


def _case_file(table: DeltaTable, kind: str) -> tuple[str, tuple[str, str]]:
    root = table.storage.root
    base = f"c-{uuid.uuid4().hex[:6]}"
    if kind == "top-level":
        return write_file(root, f"{base}/ds=a/p.parquet", pa.table({"ID": pa.array([1], pa.int64())})), (
            "ID",
            "id",
        )
    if kind == "nested":
        data = pa.table({"id": pa.array([1], pa.int64()), "s": pa.array([{"A": 1, "b": "x"}])})
        return write_file(root, f"{base}/ds=a/p.parquet", data), ("s.A", "s.a")
    if kind == "partition-directory":
        return write_file(root, f"{base}/DS=a/p.parquet"), ("DS", "ds")
    if kind == "partition-column-in-file":
        data = pa.table({"id": pa.array([1], pa.int64()), "DS": ["a"]})
        return write_file(root, f"{base}/ds=a/p.parquet", data), ("DS", "ds")
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["top-level", "nested", "partition-directory", "partition-column-in-file"])
@pytest.mark.parametrize("schema_mode", ["enforce", "merge"])
def test_names_differing_from_the_table_only_in_case_are_refused(table, kind, schema_mode):
    path, (theirs, ours) = _case_file(table, kind)
    before = state(table)
    with pytest.raises(SchemaMismatchError) as info:
        table.commit_files([path], schema_mode=schema_mode)
    message = str(info.value)
    assert repr(theirs) in message or f" {theirs} " in message
    assert repr(ours) in message or f" {ours} " in message
    assert "case" in message
    assert state(table) == before
    assert table.snapshot().schema.names == ["id", "s", "ds"]  # merge added no 'ID' beside 'id'


# --- 3. symbolic links ------------------------------------------------------------------------------


def _outside(tmp_path) -> str:
    """A directory outside the table whose file is *not* Parquet: reading it would raise
    InvalidDataFileError, so an InvalidPathError proves the link was refused unread."""
    directory = tmp_path / f"outside-{uuid.uuid4().hex[:6]}"
    (directory / "ds=a").mkdir(parents=True)
    (directory / "ds=a" / "secret.parquet").write_bytes(b"not parquet, never to be read")
    return str(directory)


def _link(table: DeltaTable, relative: str, target: str) -> str:
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(target, path)
    return relative


SYMLINKS = {
    # name: (what to commit, the path the error names)
    "file-to-outside": lambda t, tmp: (
        {"files": [_link(t, "l1/ds=a/p.parquet", _outside(tmp) + "/ds=a/secret.parquet")]},
        "l1/ds=a/p.parquet",
    ),
    "file-under-directory-to-outside": lambda t, tmp: (
        {"files": [_link(t, "l2", _outside(tmp)) + "/ds=a/secret.parquet"]},
        "l2/ds=a/secret.parquet",
    ),
    "prefix-directory-to-outside": lambda t, tmp: ({"prefix": _link(t, "l3", _outside(tmp))}, "l3"),
    "prefix-holding-a-file-to-outside": lambda t, tmp: (
        {"prefix": _link(t, "l4/ds=a/p.parquet", _outside(tmp) + "/ds=a/secret.parquet").split("/")[0]},
        "l4/ds=a/p.parquet",
    ),
    "absolute-path-to-outside": lambda t, tmp: (
        {
            "files": [
                t.storage.root + "/" + _link(t, "l5/ds=a/p.parquet", _outside(tmp) + "/ds=a/secret.parquet")
            ]
        },
        "l5/ds=a/p.parquet",
    ),
    "dangling-link": lambda t, tmp: (
        {"files": [_link(t, "l6/ds=a/p.parquet", str(tmp / "gone.parquet"))]},
        "l6/ds=a/p.parquet",
    ),
    "file-to-inside": lambda t, tmp: (
        {"files": [_link(t, "l7/ds=a/p.parquet", os.path.join(t.storage.root, part(t)))]},
        "l7/ds=a/p.parquet",
    ),
    "prefix-directory-to-inside": lambda t, tmp: (
        {"prefix": _link(t, "l8", os.path.join(t.storage.root, part(t).split("/")[0]))},
        "l8",
    ),
}


@pytest.mark.parametrize("case", list(SYMLINKS))
@pytest.mark.parametrize("mode", ["append", "overwrite"])
def test_symbolic_links_are_refused_unread(table, tmp_path, case, mode):
    arguments, named = SYMLINKS[case](table, tmp_path)
    before = state(table)
    with pytest.raises(InvalidPathError, match="symbolic link") as info:
        table.commit_files(mode=mode, **arguments)
    assert named in str(info.value)
    if "outside" in case or case == "dangling-link":
        assert "outside the table root" in str(info.value)
    else:
        assert "VACUUM" in str(info.value)  # why a link inside the root is refused too
    assert state(table) == before


def test_a_table_root_reached_through_a_link_is_fine(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    os.symlink(real, tmp_path / "alias")
    table = DeltaTable.create(str(tmp_path / "alias" / "t"), SCHEMA, partition_by=["ds"])
    result = table.commit_files([part(table)])
    assert result.committed and table.snapshot().num_files() == 1


# --- 4. numbers and typed values that go into the log -----------------------------------------------

LONG_MAX = 2**63 - 1

BAD_ARGUMENTS = [
    (
        {"app_id": "job", "app_version": 2**63},
        r"txn\.version \(app_version\).*9223372036854775808.*0 to 9223372036854775807",
    ),
    ({"app_id": "job", "app_version": 2**70}, r"outside the allowed range"),
    ({"app_id": "job", "app_version": -1}, r"non-negative"),
    ({"app_id": "job", "app_version": True}, r"must be an integer"),
    ({"app_id": "job", "app_version": "7"}, r"must be an integer"),
    ({"app_id": "", "app_version": 1}, r"non-empty string"),
]


@pytest.mark.parametrize(("kwargs", "message"), BAD_ARGUMENTS)
def test_txn_values_outside_their_delta_types_are_refused(table, kwargs, message):
    before = state(table)
    with pytest.raises(ValueError, match=message):
        table.commit_files([part(table)], **kwargs)
    with pytest.raises(ValueError, match=message):
        table.already_committed(kwargs["app_id"], kwargs["app_version"])
    assert state(table) == before


PARTITION_TYPES = pa.schema(
    [
        ("id", pa.int64()),
        ("b", pa.int8()),
        ("sh", pa.int16()),
        ("i", pa.int32()),
        ("l", pa.int64()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("dec", pa.decimal128(5, 2)),
    ]
)
GOOD = {"b": "1", "sh": "1", "i": "1", "l": "1", "d": "2024-01-01", "ts": "2024-01-01 00:00:00", "dec": "1.5"}


@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        (
            "i",
            "99999999999",
            r"'99999999999' of column 'i' is not a valid integer.*-2147483648 to 2147483647",
        ),
        ("i", "abc", r"'abc' of column 'i' is not a valid integer"),
        ("b", "128", r"not a valid byte.*-128 to 127"),
        ("sh", "-32769", r"not a valid short.*-32768 to 32767"),
        ("l", "9223372036854775808", r"not a valid long.*9223372036854775807"),
        ("d", "2024-13-01", r"not a valid date"),
        ("ts", "yesterday", r"not a valid timestamp"),
        ("dec", "1234.5", r"not a valid decimal\(5,2\).*before the point"),
        ("dec", "1.234", r"not a valid decimal\(5,2\).*after the point"),
    ],
)
@pytest.mark.parametrize("source", ["path", "mapping"])
def test_partition_values_outside_their_type_are_refused(tmp_path, column, value, message, source):
    table = DeltaTable.create(str(tmp_path / "t"), PARTITION_TYPES, partition_by=list(GOOD))
    table.commit_files([write_file(table.storage.root, "ok/p.parquet")], partition_values=GOOD)
    values = {**GOOD, column: value}
    before = state(table)
    with pytest.raises(InvalidPartitionValueError, match=message):
        if source == "path":
            from airflow_delta_provider.core.protocol.partitions import partition_path

            directory = partition_path(values, list(GOOD))
            table.commit_files([write_file(table.storage.root, f"{directory}/p.parquet")])
        else:
            table.commit_files([write_file(table.storage.root, "bad/p.parquet")], partition_values=values)
    assert state(table) == before


@pytest.mark.parametrize("value", [5, 2.5, b"a", True])
def test_partition_values_given_as_non_strings_are_refused(table, value):
    before = state(table)
    with pytest.raises(InvalidPartitionValueError, match="must be a string"):
        table.commit_files([write_file(table.storage.root, "x/p.parquet")], partition_values={"ds": value})
    assert state(table) == before


def _stats(**extra) -> str:
    return json.dumps({"numRecords": 1, **extra})


# Actions built directly: every writer (commits, CREATE, VACUUM records) goes through the
# transaction's one gate, so a value no commit path produces today is still refused there.
GATE = {
    "add.size-negative": (lambda: [AddFile("x.parquet", {"ds": "a"}, -1, 1)], r"add\.size .* -1"),
    "add.size-over-long": (
        lambda: [AddFile("x.parquet", {"ds": "a"}, 2**63, 1)],
        r"add\.size .* 9223372036854775808",
    ),
    "add.modificationTime-over-long": (
        lambda: [AddFile("x.parquet", {"ds": "a"}, 1, 2**64)],
        r"add\.modificationTime .*is 18446744073709551616, .*-9223372036854775808 to 9223372036854775807",
    ),
    "add.partition-missing": (lambda: [AddFile("x.parquet", {}, 1, 1)], r"partition columns \['ds'\]"),
    "add.stats-numRecords": (
        lambda: [AddFile("x.parquet", {"ds": "a"}, 1, 1, stats=json.dumps({"numRecords": 2**63}))],
        r"numRecords .* 9223372036854775808",
    ),
    "add.stats-nullCount-over-records": (
        lambda: [AddFile("x.parquet", {"ds": "a"}, 1, 1, stats=_stats(nullCount={"id": 2}))],
        r"nullCount\.id .* is 2, outside the allowed range .* 0 to 1",
    ),
    "add.stats-min-int": (
        lambda: [AddFile("x.parquet", {"ds": "a"}, 1, 1, stats=_stats(minValues={"s": {"a": 2**31}}))],
        r"minValues\.s\.a .*is 2147483648, .*-2147483648 to 2147483647",
    ),
    "add.stats-max-string-type": (
        lambda: [AddFile("x.parquet", {"ds": "a"}, 1, 1, stats=_stats(maxValues={"s": {"b": 5}}))],
        r"maxValues\.s\.b .* must be a string",
    ),
    "add.stats-nan": (
        lambda: [AddFile("x.parquet", {"ds": "a"}, 1, 1, stats='{"numRecords":1,"minValues":{"id":NaN}}')],
        r"stats of 'x\.parquet' is not valid JSON",
    ),
    "add.stats-not-json": (
        lambda: [AddFile("x.parquet", {"ds": "a"}, 1, 1, stats="{")],
        r"not valid JSON",
    ),
    "remove.deletionTimestamp": (
        lambda: [RemoveFile("x.parquet", 2**63, partition_values={"ds": "a"}, size=1)],
        r"remove\.deletionTimestamp .* 9223372036854775808",
    ),
    "remove.size": (
        lambda: [RemoveFile("x.parquet", 1, partition_values={"ds": "a"}, size=-5)],
        r"remove\.size .* -5",
    ),
    "txn.lastUpdated": (lambda: [Transaction("app", 1, 2**63)], r"txn\.lastUpdated .* 9223372036854775808"),
    "txn.version": (lambda: [Transaction("app", 2**63)], r"txn\.version \(app_version\)"),
    "protocol.minWriterVersion": (lambda: [Protocol(1, 2**31)], r"protocol\.minWriterVersion .* 2147483647"),
    "metaData.createdTime": (
        lambda: [Metadata("id", json.dumps({"type": "struct", "fields": []}), (), {}, created_time=2**63)],
        r"metaData\.createdTime .* 9223372036854775808",
    ),
}


def _plan(operation: str, actions: list[Any]) -> CommitPlan:
    """The plan committing ``actions`` (each case builds actions of one kind)."""
    by_kind: dict[str, Any] = {}
    for action in actions:
        if isinstance(action, Protocol | Metadata):
            by_kind["protocol" if isinstance(action, Protocol) else "metadata"] = action
        else:
            kind = {AddFile: "adds", RemoveFile: "removes", Transaction: "txns"}[type(action)]
            by_kind[kind] = (*by_kind.get(kind, ()), action)
    return CommitPlan(operation, **by_kind)


@pytest.mark.parametrize("case", list(GATE))
def test_the_transaction_refuses_values_outside_their_delta_types(table, case):
    build, message = GATE[case]
    before = state(table)
    with pytest.raises(InvalidLogValueError, match=message):
        OptimisticTransaction(table.storage).commit(_plan("WRITE", build()))
    assert state(table) == before


def test_create_refuses_values_outside_their_types_and_creates_nothing(tmp_path):
    target = DeltaTable(str(tmp_path / "new"))
    from airflow_delta_provider.core.protocol.schema import schema_to_delta_json

    metadata = Metadata("id", schema_to_delta_json(SCHEMA), created_time=2**63)
    with pytest.raises(InvalidLogValueError, match="createdTime"):
        OptimisticTransaction(target.storage, new_table=True).commit(
            CommitPlan("CREATE TABLE", protocol=Protocol(1, 2), metadata=metadata)
        )
    with pytest.raises(TableNotFoundError):
        target.version()


def test_an_in_commit_timestamp_that_would_overflow_is_refused(tmp_path):
    """Another writer left inCommitTimestamp = 2^63 - 1; ours would be one more: refused, nothing written."""
    table = DeltaTable.create(
        str(tmp_path / "t"), SCHEMA, properties={"delta.enableInCommitTimestamps": "true"}
    )
    log_file = os.path.join(table.storage.log_dir, "00000000000000000001.json")
    with open(log_file, "w") as f:
        f.write(
            json.dumps({"commitInfo": {"inCommitTimestamp": LONG_MAX, "timestamp": 1, "operation": "WRITE"}})
        )
        f.write("\n")
    before = state(table)
    with pytest.raises(InvalidLogValueError, match=r"commitInfo\.inCommitTimestamp .* 9223372036854775808"):
        table.commit_files([write_file(table.storage.root, "x/p.parquet")])
    untracked = write_file(table.storage.root, "untracked/p.parquet")
    with pytest.raises(InvalidLogValueError, match="inCommitTimestamp"):  # VACUUM START, refused
        table.vacuum(retention="0 hours", enforce_retention_duration=False, log_commits=True)
    assert os.path.exists(os.path.join(table.storage.root, untracked))
    assert state(table) == before


# --- 5. a landed commit is reported as landed ---------------------------------------------------------


def _fill(table: DeltaTable, up_to: int) -> None:
    while table.version() < up_to:
        table.commit_files([part(table)])


def _landed(table: DeltaTable, result, version: int, step: str, error: str, caplog, files: int) -> None:
    """The commit of one more file landed at ``version``; ``step`` failed after it with ``error``."""
    assert result.committed and result.version == version
    assert table.version() == version  # the commit exists, once
    assert any(e.startswith(f"{step} after version {version}: {error}") for e in result.post_commit_errors), (
        result.post_commit_errors
    )
    assert result.to_dict()["post_commit_errors"] == list(result.post_commit_errors)
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and "is committed" in r.getMessage()
    ]
    assert any(error in r.getMessage() for r in warnings)
    assert table.snapshot().num_files() == files + 1  # readable, the file added once


def test_a_directory_in_the_checkpoints_place(table, caplog):
    _fill(table, 8)
    os.mkdir(os.path.join(table.storage.log_dir, "00000000000000000010.checkpoint.parquet"))
    table.commit_files([part(table)])
    files = table.snapshot().num_files()
    result = table.commit_files([part(table)])  # version 10: Delta's policy checkpoints it
    _landed(table, result, 10, "checkpoint", "IsADirectoryError", caplog, files)
    assert table.commit_files([part(table)]).version == 11


def test_a_directory_at_the_checksum_name(table, caplog):
    os.mkdir(os.path.join(table.storage.log_dir, "00000000000000000002.crc"))
    result = table.commit_files([part(table)])
    _landed(table, result, 2, "checksum", "IsADirectoryError", caplog, 2)
    # The next commit finds a directory where version 2's checksum should be: an unreadable
    # checksum is ignored (named in a warning), so it lands with nothing to report.
    caplog.clear()
    result = table.commit_files([part(table)])
    assert result.committed and result.version == 3 and not result.post_commit_errors
    assert "Ignoring the checksum file of version 2" in caplog.text
    assert table.snapshot().num_files() == 4


def test_post_commit_errors_are_redacted(tmp_path, caplog):
    """The error of a post-commit step names the path, which here holds a registered secret:
    neither the warning nor the result shows it."""
    from airflow_delta_provider.core.utils.redaction import register_secret

    secret = f"s3cr3t-{uuid.uuid4().hex}"
    register_secret(secret)
    table = DeltaTable.create(str(tmp_path / secret / "t"), SCHEMA, partition_by=["ds"])
    os.mkdir(os.path.join(table.storage.log_dir, "00000000000000000001.crc"))
    result = table.commit_files([part(table)])
    assert result.committed and result.post_commit_errors
    assert "***" in result.post_commit_errors[0]
    assert secret not in " ".join(result.post_commit_errors)
    assert secret not in caplog.text and "IsADirectoryError" in caplog.text


def test_a_txn_that_overflows_is_refused_before_anything_is_written(table):
    """A txn version of 2^63 committed by another writer (this core refuses to write one) would
    make every later checkpoint fail with OverflowError: the reader refuses the log instead, so
    no commit is built on it, naming file and line."""
    log_file = os.path.join(table.storage.log_dir, "00000000000000000002.json")
    with open(log_file, "w") as f:
        f.write(json.dumps({"commitInfo": {"timestamp": 1, "operation": "WRITE"}}) + "\n")
        f.write(json.dumps({"txn": {"appId": "other", "version": 2**63, "lastUpdated": 1}}) + "\n")
    before = sorted(os.listdir(table.storage.log_dir))
    with pytest.raises(CorruptLogError, match=r"Line 2 of .*00000000000000000002\.json.*txn\.version"):
        table.commit_files([part(table)])
    assert sorted(os.listdir(table.storage.log_dir)) == before


def test_an_immutable_last_checkpoint(table, caplog):
    """``chattr +i`` makes replacing ``_last_checkpoint`` fail with a real PermissionError (EPERM,
    even for root) after the checkpoint itself is written."""
    _fill(table, 5)
    table.checkpoint()
    hint = os.path.join(table.storage.log_dir, "_last_checkpoint")
    if (
        shutil.which("chattr") is None
        or subprocess.run(["chattr", "+i", hint], capture_output=True).returncode
    ):
        pytest.skip("chattr +i is not available here (needs CAP_LINUX_IMMUTABLE on ext4/xfs/btrfs)")
    try:
        _fill(table, 9)
        result = table.commit_files([part(table)])
        _landed(table, result, 10, "checkpoint", "PermissionError", caplog, 10)
    finally:
        subprocess.run(["chattr", "-i", hint], check=False)


@pytest.fixture
def small_tmpfs(tmp_path):
    """A 1 MiB tmpfs: a real full filesystem (skipped where mounting needs privileges we lack)."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount_point)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs CAP_SYS_ADMIN): {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def test_a_full_filesystem_after_the_commit(small_tmpfs, caplog):
    table = DeltaTable.create(str(small_tmpfs / "t"), SCHEMA, partition_by=["ds"])
    _fill(table, 9)
    last = part(table)
    # Fill the filesystem until three pages are left: enough for the commit (one page) and
    # its checksum (one), not for the checkpoint after it.
    stat = os.statvfs(small_tmpfs)
    filler = os.open(small_tmpfs / "filler", os.O_WRONLY | os.O_CREAT)
    with contextlib.suppress(OSError):
        os.write(filler, b"\0" * ((stat.f_bavail - 3) * stat.f_bsize))
    os.close(filler)
    result = table.commit_files([last])
    _landed(table, result, 10, "checkpoint", "OSError", caplog, 9)
    assert "No space left on device" in result.post_commit_errors[-1]


# --- 6. which version recorded a skipped txn ---------------------------------------------------------


def test_a_skip_reports_the_recording_version_after_a_checkpoint(table):
    first = table.commit_files([part(table)], app_id="job", app_version=1)
    _fill(table, 12)  # checkpoint at 10
    assert table.snapshot().segment.checkpoint_version == 10
    before = state(table)
    again = table.commit_files([part(table)], app_id="job", app_version=1)
    assert (again.committed, again.reason, again.version, again.version_exact) == (
        False,
        "already_committed",
        first.version,
        True,
    )
    assert table.already_committed("job", 1) == again
    assert table.already_committed("job", 2) is None
    assert state(table) == before


def test_a_skip_whose_recording_commit_was_cleaned_up_is_an_upper_bound(table):
    table.commit_files([part(table)], app_id="job", app_version=1)
    _fill(table, 12)
    for version in range(10):  # what log cleanup removes before the checkpoint
        os.remove(os.path.join(table.storage.log_dir, f"{version:020d}.json"))
    again = table.commit_files([part(table)], app_id="job", app_version=1)
    assert (again.committed, again.version, again.version_exact) == (False, 10, False)
    assert again.to_dict()["version_exact"] is False


def test_already_committed_on_a_missing_table(tmp_path):
    assert DeltaTable(str(tmp_path / "none")).already_committed("job", 1) is None


def _long_log(log_writer, versions: int, txn_at: int, last_updated: int | None) -> DeltaTable:
    """A hand-written log of ``versions`` commits, one file each, the txn at ``txn_at``, commit
    file times one second apart (as a busy table's), then a checkpoint."""
    log_writer.commit(0, log_writer.commit_info("CREATE TABLE"), log_writer.protocol(), log_writer.metadata())
    base = 1_700_000_000_000
    for version in range(1, versions):
        actions = [log_writer.commit_info(), log_writer.add(f"f{version}.parquet")]
        if version == txn_at:
            actions.append(log_writer.txn("job", 5, last_updated))
        log_writer.commit(version, *actions)
    for version in range(versions):
        stamp = (base + version * 1000) / 1000
        os.utime(log_writer.log / f"{version:020d}.json", (stamp, stamp))
    table = DeltaTable(str(log_writer.root))
    table.checkpoint()
    return table


@pytest.mark.parametrize(
    ("txn_at", "skew_ms", "most_reads"),
    [(37, 0, 2), (37, 500, 1), (37, 1500, 3), (150, -3000, 8), (1, 0, 2), (299, 0, 2)],
)
def test_the_recording_commit_is_found_reading_few_commits(
    log_writer, monkeypatch, txn_at, skew_ms, most_reads
):
    """The txn's lastUpdated (here skewed against the file times, as a writer's clock against
    the store's) narrows a binary search over commit times; only a few commits are read."""
    table = _long_log(log_writer, 300, txn_at, 1_700_000_000_000 + txn_at * 1000 + skew_ms)
    snapshot = table.snapshot()
    reads: list[str] = []
    real_read = type(table.storage).read_bytes
    monkeypatch.setattr(
        type(table.storage), "read_bytes", lambda self, path: reads.append(path) or real_read(self, path)
    )
    result = table.already_committed("job", 5, snapshot=snapshot)
    assert (result.version, result.version_exact) == (txn_at, True)
    assert len([r for r in reads if r.endswith(".json")]) <= most_reads  # of 300


def test_a_txn_without_last_updated_is_looked_for_just_before_the_checkpoint(log_writer):
    near = _long_log(log_writer, 40, 35, None)
    assert near.already_committed("job", 5).version == 35
    assert near.already_committed("job", 5).version_exact


def test_a_txn_without_last_updated_far_before_the_checkpoint_is_bounded(log_writer):
    far = _long_log(log_writer, 60, 3, None)
    result = far.already_committed("job", 5)
    assert (result.version, result.version_exact) == (59, False)


# --- the same rules on an object store (moto S3): no directories, only keys ----------------------


def _s3_state(table: DeltaTable) -> tuple[int, list[str], list[str]]:
    snapshot = table.snapshot()
    return (
        snapshot.version,
        sorted(snapshot.files().column("path").to_pylist()),
        sorted(f.name for f in table.storage.list_log()),
    )


def test_empty_inputs_on_s3(s3_bucket, s3_storage_options):
    """On S3 an output "directory" exists only through its keys: one holding only ``_SUCCESS``
    is an empty job output; a prefix with no key at all does not exist."""
    uri = f"s3://{s3_bucket}/t"
    table = DeltaTable.create(uri, SCHEMA, partition_by=["ds"], storage_options=s3_storage_options)
    fs = table.storage.fs
    fs.pipe_file(f"{s3_bucket}/t/out/ds=a/part-0.parquet", _parquet_bytes())
    table.commit_files(prefix="out")
    fs.pipe_file(f"{s3_bucket}/t/empty/_SUCCESS", b"")
    before = _s3_state(table)
    with pytest.raises(EmptyOverwriteError, match="allow_empty_overwrite"):
        table.commit_files(prefix="empty", mode="overwrite")
    with pytest.raises(InvalidPathError, match="does not exist"):
        table.commit_files(prefix="never-written")
    result = table.commit_files(prefix="empty")
    assert (result.committed, result.reason) == (False, "no_files")
    assert _s3_state(table) == before
    recorded = table.commit_files(prefix="empty", app_id="job", app_version=3)
    assert recorded.committed and recorded.num_added_files == 0
    assert table.already_committed("job", 3).version == recorded.version


def _parquet_bytes() -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), sink)
    return sink.getvalue().to_pybytes()
