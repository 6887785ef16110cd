"""The version checksum (``.crc``) as a source of protocol, metadata, txns and domains.

``checksum_answers`` alone decides whether the checksum of a snapshot's version may answer;
these tests drive it through real tables (written by the core, or by hand where a case needs
a log no writer produces) and compare every answer with the one the log gives without the
checksum.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import CorruptLogError

CORPUS = Path(__file__).resolve().parents[3] / "conformance" / "corpus"


def _write_parquet(root: str, name: str) -> str:
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), os.path.join(root, name))
    return name


def _build(root: Path, tail: int) -> None:
    """A core table: an append with a txn, a checkpoint at version 2, then ``tail`` appends
    (the last one with a txn of ``app-tail``); the core writes a ``.crc`` for every version."""
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    base = table.storage.root
    table.commit_files(
        [_write_parquet(base, "f1.parquet")], app_id="app", app_version=7, auto_checkpoint=False
    )
    table.commit_files([_write_parquet(base, "f2.parquet")], auto_checkpoint=False)
    table.checkpoint()
    for i in range(tail):
        txn = {"app_id": "app-tail", "app_version": i} if i == tail - 1 else {}
        table.commit_files([_write_parquet(base, f"g{i}.parquet")], auto_checkpoint=False, **txn)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """The tables of :func:`_build` with 0, 2 and 3 appends after the checkpoint, built once."""
    roots = {}
    for tail in (0, 2, 3):
        roots[tail] = tmp_path_factory.mktemp(f"tail{tail}") / "t"
        _build(roots[tail], tail)
    return roots


@pytest.fixture
def make_table(tmp_path: Path, built: dict[int, Path]) -> Any:
    """``make_table(tail=2)``: a private copy of a built table."""

    def make(tail: int = 2) -> DeltaTable:
        target = tmp_path / "t"
        shutil.copytree(built[tail], target)
        return DeltaTable(str(target))

    return make


def _crc_path(table: DeltaTable, version: int) -> Path:
    return Path(table.storage.log_dir) / f"{version:020d}.crc"


def _edit_crc(table: DeltaTable, version: int, change: Any) -> None:
    path = _crc_path(table, version)
    checksum = json.loads(path.read_text())
    change(checksum)
    path.write_text(json.dumps(checksum))


def _without_checksums(table: DeltaTable, target: Path) -> DeltaTable:
    """A copy of the table's log (and sidecars) with every version checksum left out."""
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(
        table.storage.log_dir,
        target / "_delta_log",
        ignore=lambda _d, names: [n for n in names if n.endswith(".crc") and not n.startswith(".")],
    )
    return DeltaTable(str(target))


def _answers(snapshot: Any) -> tuple[Any, ...]:
    return (
        snapshot.version,
        snapshot.protocol,
        snapshot.metadata,
        snapshot.transactions,
        snapshot.domain_metadata,
    )


def _files(snapshot: Any) -> list[str]:
    return sorted(snapshot.files().column("path").to_pylist())


# --- used when it may answer ------------------------------------------------------------------------


def test_a_valid_checksum_answers_and_agrees_with_the_log(make_table, tmp_path):
    table = make_table()
    snapshot = DeltaTable(table.uri).snapshot()
    assert snapshot.state.checksum_version == snapshot.version == 4
    plain = _without_checksums(table, tmp_path / "plain").snapshot()
    assert plain.state.checksum_version is None
    assert _answers(snapshot) == _answers(plain)
    assert snapshot.app_transaction_version("app") == 7 and snapshot.app_transaction_version("app-tail") == 1
    assert DeltaTable(table.uri).already_committed("app", 7).version == 1  # type: ignore[union-attr]
    assert _files(snapshot) == _files(plain)


def test_the_checksum_spares_the_checkpoint_whose_small_rows_are_then_checked_on_files(
    make_table, tmp_path, log_state
):
    table = make_table()
    checkpoint = Path(table.storage.log_dir) / f"{2:020d}.checkpoint.parquet"
    rows = pq.read_table(checkpoint)
    index = rows.schema.get_field_index("txn")
    txns = [dict(t, appId=None) if t else None for t in rows.column("txn").to_pylist()]
    pq.write_table(rows.set_column(index, "txn", pa.array(txns, rows.schema.field(index).type)), checkpoint)
    for version in (0, 1):  # nothing older to fall back to
        (Path(table.storage.log_dir) / f"{version:020d}.json").unlink()
    before = log_state(table.storage.root)
    snapshot = DeltaTable(table.uri).snapshot()
    # The checksum answered: the malformed txn row of the checkpoint was not read.
    assert snapshot.state.checksum_version == 4 and snapshot.app_transaction_version("app") == 7
    with pytest.raises(
        CorruptLogError, match=r"Row \d+ of the checkpoint .*00000000000000000002\.checkpoint"
    ):
        snapshot.files()
    assert log_state(table.storage.root) == before


def test_time_travel_uses_the_checksum_of_the_version_asked_for(make_table, tmp_path):
    table = make_table(tail=3)
    snapshot = DeltaTable(table.uri).snapshot(version=3)
    assert snapshot.state.checksum_version == 3
    assert snapshot.app_transaction_version("app-tail") is None  # recorded at version 5
    assert _answers(snapshot) == _answers(_without_checksums(table, tmp_path / "plain").snapshot(version=3))


def test_a_checksum_without_txns_or_domains_answers_protocol_and_metadata_only(make_table, tmp_path):
    table = make_table()
    _edit_crc(table, 4, lambda c: (c.pop("setTransactions"), c.pop("domainMetadata")))
    snapshot = DeltaTable(table.uri).snapshot()
    assert snapshot.state.checksum_version == 4
    # The txn only the checkpoint holds is still found: the checkpoint answered txns.
    assert snapshot.app_transaction_version("app") == 7
    assert _answers(snapshot) == _answers(_without_checksums(table, tmp_path / "plain").snapshot())


def test_a_checksum_at_the_checkpoint_version_is_trusted_as_spark_does(make_table, tmp_path, caplog):
    """Deviation check: the checkpoint is not read for protocol and metadata, so a checksum
    that disagrees only with the checkpoint (no later commit to compare) answers, as in Spark;
    the disagreement is reported once the file list reads the checkpoint."""
    table = make_table(tail=0)
    _edit_crc(table, 2, lambda c: c["metadata"]["configuration"].update({"delta.appendOnly": "false"}))
    snapshot = DeltaTable(table.uri).snapshot()
    assert snapshot.state.checksum_version == 2
    assert snapshot.properties == {"delta.appendOnly": "false"}
    with caplog.at_level(logging.WARNING):
        assert _files(snapshot) == ["f1.parquet", "f2.parquet"]
    assert "disagrees with its checkpoint" in caplog.text


# --- ignored when it may not -------------------------------------------------------------------------


def _plain_answers(table: DeltaTable, tmp_path: Path) -> tuple[Any, ...]:
    return _answers(_without_checksums(table, tmp_path / "plain").snapshot())


def _ignored(table: DeltaTable, tmp_path: Path, caplog: Any, fragment: str | None) -> None:
    with caplog.at_level(logging.WARNING):
        snapshot = DeltaTable(table.uri).snapshot()
    assert snapshot.state.checksum_version is None
    assert _answers(snapshot) == _plain_answers(table, tmp_path)
    if fragment is not None:
        assert "Ignoring the checksum file" in caplog.text and fragment in caplog.text


DISAGREEING: list[tuple[str, Any, str]] = [
    (
        "txn-version",
        lambda c: [t.update(version=99) for t in c["setTransactions"] if t["appId"] == "app-tail"],
        "txn of 'app-tail' in commit 4",
    ),
    (
        "txn-missing",
        lambda c: c.update(setTransactions=[t for t in c["setTransactions"] if t["appId"] != "app-tail"]),
        "txn of 'app-tail'",
    ),
]


@pytest.mark.parametrize(
    ("change", "fragment"), [d[1:] for d in DISAGREEING], ids=[d[0] for d in DISAGREEING]
)
def test_a_checksum_that_disagrees_with_a_later_commit_is_ignored(
    make_table, tmp_path, caplog, change, fragment
):
    table = make_table()
    _edit_crc(table, 4, change)
    _ignored(table, tmp_path, caplog, fragment)


def _append_commit(table: DeltaTable, version: int, actions: list[dict[str, Any]]) -> None:
    info = {"commitInfo": {"timestamp": 1_700_000_000_000 + version, "operation": "MANUAL"}}
    lines = [json.dumps(a) for a in [info, *actions]]
    (Path(table.storage.log_dir) / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _copy_crc(table: DeltaTable, source: int, target: int, change: Any = None) -> None:
    checksum = json.loads(_crc_path(table, source).read_text())
    if change is not None:
        change(checksum)
    _crc_path(table, target).write_text(json.dumps(checksum))


def test_a_checksum_that_disagrees_with_a_later_metadata_or_protocol_is_ignored(make_table, tmp_path, caplog):
    table = make_table(tail=0)
    metadata = json.loads(_crc_path(table, 2).read_text())["metadata"]
    changed = dict(metadata, configuration={"delta.appendOnly": "true"})
    _append_commit(table, 3, [{"metaData": changed}])
    _copy_crc(table, 2, 3)  # still the old metadata
    _ignored(table, tmp_path, caplog, "metadata differs from the one commit 3 sets")
    assert DeltaTable(table.uri).snapshot().properties == {"delta.appendOnly": "true"}

    _append_commit(table, 4, [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 3}}])
    _copy_crc(table, 3, 4, lambda c: c.update(metadata=changed))  # the old protocol
    _ignored(table, tmp_path, caplog, "protocol differs from the one commit 4 sets")

    _copy_crc(table, 4, 4, lambda c: c.update(protocol={"minReaderVersion": 1, "minWriterVersion": 3}))
    assert DeltaTable(table.uri).snapshot().state.checksum_version == 4  # now it agrees


def test_a_checksum_that_disagrees_with_a_later_domain_is_ignored(make_table, tmp_path, caplog):
    table = make_table(tail=0)
    _edit_crc(table, 2, lambda c: c["protocol"].update(minWriterVersion=7, writerFeatures=["domainMetadata"]))
    protocol = json.loads(_crc_path(table, 2).read_text())["protocol"]
    _append_commit(
        table,
        3,
        [
            {"protocol": protocol},
            {"domainMetadata": {"domain": "app.x", "configuration": "{}", "removed": False}},
        ],
    )
    _copy_crc(table, 2, 3)  # no domain listed: disagrees
    _ignored(table, tmp_path, caplog, "domain 'app.x' in commit 3")
    _copy_crc(
        table,
        3,
        3,
        lambda c: c.update(domainMetadata=[{"domain": "app.x", "configuration": "{}", "removed": False}]),
    )
    snapshot = DeltaTable(table.uri).snapshot()
    assert snapshot.state.checksum_version == 3 and set(snapshot.domain_metadata) == {"app.x"}
    _append_commit(
        table, 4, [{"domainMetadata": {"domain": "app.x", "configuration": "{}", "removed": True}}]
    )
    _copy_crc(table, 3, 4)  # still lists the removed domain
    _ignored(table, tmp_path, caplog, "domain 'app.x' in commit 4")
    _copy_crc(table, 4, 4, lambda c: c.update(domainMetadata=[]))
    snapshot = DeltaTable(table.uri).snapshot()
    assert snapshot.state.checksum_version == 4 and snapshot.domain_metadata == {}


def test_a_checksum_of_another_version_is_never_used(make_table, tmp_path, caplog):
    table = make_table()
    _crc_path(table, 4).unlink()  # the newest version has none; version 3's must not answer
    _ignored(table, tmp_path, caplog, None)


def test_a_checksum_named_for_the_version_but_holding_another_versions_state_is_caught_by_the_tail(
    make_table, tmp_path, caplog
):
    table = make_table()
    _crc_path(table, 4).write_text(_crc_path(table, 3).read_text())  # lacks version 4's txn
    _ignored(table, tmp_path, caplog, "txn of 'app-tail' in commit 4")


CORRUPT: list[tuple[str, Any, str | None]] = [
    ("truncated", lambda p: p.write_text(p.read_text()[:40]), "it is not valid JSON"),
    ("empty", lambda p: p.write_bytes(b""), None),
    ("not-an-object", lambda p: p.write_text("[1, 2]"), None),
    ("not-utf8", lambda p: p.write_bytes(b"\xff\xfe{"), "it is not valid JSON"),
    ("no-protocol", lambda p: _rewrite(p, lambda c: c.pop("protocol")), "it has no protocol"),
    ("no-metadata", lambda p: _rewrite(p, lambda c: c.pop("metadata")), "it has no metaData"),
    (
        "protocol-string-version",
        lambda p: _rewrite(p, lambda c: c["protocol"].update(minReaderVersion="1")),
        "protocol is malformed",
    ),
    (
        "metadata-without-schema",
        lambda p: _rewrite(p, lambda c: c["metadata"].pop("schemaString")),
        "metaData is malformed",
    ),
    (
        "txn-without-app",
        lambda p: _rewrite(p, lambda c: c["setTransactions"][0].pop("appId")),
        "setTransactions is malformed",
    ),
    (
        "txn-twice",
        lambda p: _rewrite(p, lambda c: c["setTransactions"].append(c["setTransactions"][0])),
        "lists 'app' twice",
    ),
    ("txns-not-a-list", lambda p: _rewrite(p, lambda c: c.update(setTransactions={"a": 1})), "not a list"),
    (
        "domain-not-a-string",
        lambda p: _rewrite(
            p, lambda c: c.update(domainMetadata=[{"domain": 1, "configuration": "", "removed": False}])
        ),
        "domainMetadata is malformed",
    ),
]


def _rewrite(path: Path, change: Any) -> None:
    checksum = json.loads(path.read_text())
    change(checksum)
    path.write_text(json.dumps(checksum))


@pytest.mark.parametrize(("corrupt", "fragment"), [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_a_corrupt_or_partial_checksum_is_ignored_never_an_error(
    make_table, tmp_path, caplog, log_state, corrupt, fragment
):
    table = make_table()
    corrupt(_crc_path(table, 4))
    before = log_state(table.storage.root)
    _ignored(table, tmp_path, caplog, fragment)
    assert _files(DeltaTable(table.uri).snapshot()) == _files(
        _without_checksums(table, tmp_path / "p2").snapshot()
    )
    assert DeltaTable(table.uri).already_committed("app", 7) is not None
    assert log_state(table.storage.root) == before


def test_a_fake_checkpoint_under_a_valid_checksum_is_still_read_around(make_table, tmp_path):
    """The checksum spares reading the checkpoint's rows, not checking that it is one."""
    table = make_table()
    checkpoint = Path(table.storage.log_dir) / f"{2:020d}.checkpoint.parquet"
    pq.write_table(pa.table({"id": [1]}), checkpoint)
    snapshot = DeltaTable(table.uri).snapshot()
    assert snapshot.segment.checkpoint is None
    assert _files(snapshot) == ["f1.parquet", "f2.parquet", "g0.parquet", "g1.parquet"]


# --- real tables ------------------------------------------------------------------------------------


def _corpus_tables_with_checksum() -> list[Path]:
    """Corpus tables with a checkpoint and a ``.crc`` at their newest commit (the route applies)."""
    found = []
    for log_dir in sorted((CORPUS / "tables").glob("*/*/_delta_log")):
        names = os.listdir(log_dir)
        commits = [int(n[:20]) for n in names if n.endswith(".json") and n[:20].isdigit() and len(n) == 25]
        has_checkpoint = any(".checkpoint." in n and not n.startswith(".") for n in names)
        if commits and has_checkpoint and f"{max(commits):020d}.crc" in names:
            found.append(log_dir.parent)
    return found


CORPUS_TABLES = _corpus_tables_with_checksum()


def test_the_corpus_exercises_the_checksum_route():
    assert len(CORPUS_TABLES) >= 5


@pytest.mark.parametrize("root", CORPUS_TABLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_corpus_answers_are_the_same_with_and_without_the_checksum(tmp_path, root):
    with_crc = DeltaTable(str(root)).snapshot()
    assert with_crc.state.checksum_version == with_crc.version
    plain = _without_checksums(DeltaTable(str(root)), tmp_path / "plain").snapshot()
    assert plain.state.checksum_version is None
    assert _answers(with_crc) == _answers(plain)
    assert _files(with_crc) == _files(plain)


def test_no_checksum_is_derived_when_the_table_size_would_pass_a_long():
    """``tableSizeBytes`` is a Delta long: past it, no ``.crc`` (optional) rather than a wrong one."""
    from airflow_delta_provider.core.log.checksum import next_checksum
    from airflow_delta_provider.core.protocol.actions import AddFile, Metadata, Protocol

    metadata = Metadata("t", json.dumps({"type": "struct", "fields": []}))
    previous = {"tableSizeBytes": 2**63 - 6, "numFiles": 1, "numMetadata": 1, "numProtocol": 1}

    def after(size: int) -> dict[str, Any] | None:
        add = AddFile(path="a.parquet", partition_values={}, size=size, modification_time=1)
        return next_checksum(
            previous, [add], protocol=Protocol(1, 2), metadata=metadata, txn_id=None, in_commit_timestamp=None
        )

    fits = after(5)
    assert fits is not None and fits["tableSizeBytes"] == 2**63 - 1
    assert after(6) is None
