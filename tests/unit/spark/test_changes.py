"""read_changes on a real local SparkSession: the rows of the core's ``changes().to_pyarrow_table()``
on every delta-kernel-rs change-feed fixture (deletion-vector differences, change-data files,
column mapping in both modes) for every start version, on the corpus' CDF tables, and on a table
the provider writes without the change feed (appends, a replacing overwrite, a DELETE by deletion
vector that grows).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaError, DeltaTable
from airflow_delta_provider.core.log.deletion_vectors import inline_deletion_vector
from airflow_delta_provider.core.protocol.actions import AddFile, RemoveFile
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan
from airflow_delta_provider.spark import read_changes

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "core"))
from changes_support import CORPUS, normalised, unpack_kernel_fixtures
from spark_reads import add_deletion_vectors

if TYPE_CHECKING:
    from collections.abc import Iterator

pytestmark = pytest.mark.spark

CDF_TABLES = [
    e["table_root"]
    for e in json.loads((CORPUS / "MANIFEST.json").read_text())
    if "cdf" in e["features"] and e["expect"]["kind"] == "read"
]


@pytest.fixture(scope="module")
def spark(local_spark: Any) -> Any:
    return local_spark


@pytest.fixture(scope="module")
def kernel_tables(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    root = unpack_kernel_fixtures(tmp_path_factory.mktemp("cdf"))
    tables = {p.parent.name if p.parent != root else p.name: p.parent for p in root.rglob("_delta_log")}
    yield tables


def _same(spark: Any, root: Path | str, start: int, end: int | None = None) -> None:
    table = DeltaTable(str(root))
    try:
        expected = table.changes(start, end).to_pyarrow_table()
    except DeltaError as err:
        with pytest.raises(type(err)):
            read_changes(spark, table, start, end).collect()
        return
    got = read_changes(spark, str(root), start, end).toArrow()
    assert normalised(got, timestamps=True) == normalised(expected, timestamps=True), (root, start, end)


def test_every_kernel_fixture_from_every_start(spark: Any, kernel_tables: dict[str, Path]) -> None:
    assert len(kernel_tables) >= 14
    for _name, root in sorted(kernel_tables.items()):
        latest = DeltaTable(str(root)).version()
        for start in range(latest + 1):
            _same(spark, root, start)
        if latest >= 2:
            _same(spark, root, 1, latest - 1)


@pytest.mark.parametrize("table_root", CDF_TABLES)
def test_corpus_change_feeds(spark: Any, table_root: str) -> None:
    root = CORPUS / "tables" / table_root
    latest = DeltaTable(str(root)).version()
    for start in range(latest + 1):
        _same(spark, root, start)


def test_a_provider_table_without_the_feed(spark: Any, tmp_path: Path) -> None:
    """Appends, an overwrite of a partition and a DELETE whose deletion vector then grows: every
    range, the same rows as the core (inserts, deletes, only the newly deleted rows)."""
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64()), ("p", pa.string())]),
        partition_by=["p"],
        properties={"delta.enableDeletionVectors": "true"},
    )
    for n, p in enumerate(["a b", "c%d", "a b"]):
        relative = f"p={p.replace('%', '%25')}/part-{n}.parquet"
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": list(range(n * 10, n * 10 + 6))}), root / relative)
        table.commit_files(
            [relative],
            mode="overwrite" if n == 2 else "append",
            replace_where="p = 'a b'" if n == 2 else None,
        )
    for deleted in ([1], [1, 4]):
        snapshot = table.snapshot()
        first = next(f for f in snapshot.files().to_pylist() if f["path"].startswith("p=c"))
        common = {
            "partition_values": dict(first["partition_values"]),
            "size": first["size"],
            "stats": first["stats"],
        }
        remove = RemoveFile(first["path"], deletion_timestamp=1, deletion_vector=_descriptor(first), **common)
        add = AddFile(
            first["path"], modification_time=1, deletion_vector=inline_deletion_vector(deleted), **common
        )
        OptimisticTransaction(table.storage, read_snapshot=snapshot).commit(
            CommitPlan("DELETE", removes=(remove,), adds=(add,))
        )
    latest = table.version()
    assert latest == 5
    for start in range(latest + 1):
        for end in range(start, latest + 1):
            _same(spark, root, start, end)
    newly = read_changes(spark, table, 5).toArrow()
    assert newly.select(["id", "_change_type"]).to_pylist() == [{"id": 14, "_change_type": "delete"}]


def _descriptor(add: dict[str, Any]) -> dict[str, Any] | None:
    dv = add["deletion_vector"]
    return None if dv is None else {k: v for k, v in dv.items() if v is not None}


def test_deletion_vectors_that_grow_and_shrink_by_many_rows(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file's deletion vector grows from 40 to 120 rows, then a RESTORE sets it to 20 others: the
    newly deleted and the reinserted rows are bitmaps on Spark, the same rows as the core for every
    range; a row of a file Spark names otherwise than predicted fails the query."""
    root = tmp_path / "t %41 ü"
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64())]),
        properties={"delta.enableDeletionVectors": "true"},
    )
    for n in range(2):
        pq.write_table(pa.table({"id": list(range(n * 1000, n * 1000 + 300))}), root / f"part {n}.parquet")
    table.commit_files(["part 0.parquet", "part 1.parquet"])
    first_dv = set(range(0, 200, 5))
    for deleted in (first_dv, first_dv | set(range(1, 200, 2)), set(range(100, 140, 2))):
        snapshot = table.snapshot()
        first = next(
            f
            for f in snapshot.files().to_pylist()
            if table.storage.path.decode(f["path"]).endswith("part 0.parquet")
        )
        common = {"partition_values": {}, "size": first["size"], "stats": first["stats"]}
        remove = RemoveFile(first["path"], deletion_timestamp=1, deletion_vector=_descriptor(first), **common)
        add = AddFile(
            first["path"],
            modification_time=1,
            deletion_vector=inline_deletion_vector(sorted(deleted)),
            **common,
        )
        operation = "RESTORE" if len(deleted) == 20 else "DELETE"
        OptimisticTransaction(table.storage, read_snapshot=snapshot).commit(
            CommitPlan(operation, removes=(remove,), adds=(add,))
        )
    latest = table.version()
    assert latest == 4
    for start in range(latest + 1):
        for end in range(start, latest + 1):
            _same(spark, root, start, end)
    grown = read_changes(spark, table, 3, 3).toArrow()
    assert sorted(grown.column("id").to_pylist()) == sorted(set(range(1, 200, 2)) - first_dv)  # 80 rows
    assert set(grown.column("_change_type").to_pylist()) == {"delete"}
    import airflow_delta_provider.spark.files as files_module

    monkeypatch.setattr(files_module, "metadata_file_path", lambda path: "file:/elsewhere")
    with pytest.raises(Exception, match="names differently"):
        read_changes(spark, table, 0).collect()


@pytest.mark.parametrize("table_root", CDF_TABLES)
def test_a_snapshot_as_change_feed_inserts(spark: Any, table_root: str) -> None:
    """A consumer's first read (Delta's streaming source starts with the snapshot): the snapshot's
    rows, each an insert at the snapshot's version and commit time; and the empty frame of
    "nothing new" has the same columns and types as the changes."""
    import datetime as dt

    from airflow_delta_provider.core.table.consumer import commit_time
    from airflow_delta_provider.spark.changes import empty_changes, read_snapshot_changes

    snapshot = DeltaTable(str(CORPUS / "tables" / table_root)).snapshot()
    committed_at = commit_time(snapshot)
    got = read_snapshot_changes(spark, snapshot, committed_at).toArrow()
    expected = snapshot.to_pyarrow_table()
    count = expected.num_rows
    when = dt.datetime.fromtimestamp(committed_at / 1000, dt.UTC)
    expected = (
        expected.append_column("_change_type", pa.array(["insert"] * count))
        .append_column("_commit_version", pa.array([snapshot.version] * count, pa.int64()))
        .append_column("_commit_timestamp", pa.array([when] * count, pa.timestamp("us", tz="UTC")))
    )
    assert normalised(got, timestamps=True) == normalised(expected, timestamps=True)
    changes = read_changes(spark, snapshot.storage.root_uri, snapshot.version)
    empty = empty_changes(spark, snapshot)
    assert empty.count() == 0 and empty.schema == changes.schema


def test_a_partition_filter_reads_the_core_changes_of_those_partitions(spark: Any, tmp_path: Path) -> None:
    """read_changes(partition_filter=...) on Spark: the core's filtered changes, and only the
    selected partitions' files are handed to Spark; the first read of a consumer (the snapshot as
    inserts) restricted alike."""
    from changes_support import delta_rs_history

    from airflow_delta_provider.core.table.consumer import commit_time
    from airflow_delta_provider.spark.changes import read_snapshot_changes

    root = tmp_path / "t"
    list(delta_rs_history(root, partitioned=True, feed=True))
    table = DeltaTable(str(root))
    for start in range(table.version() + 1):
        for text, parameters in (("part = :p", {"p": "p1"}), ("part IN ('p0', 'p2')", None)):
            expected = table.changes(start, partition_filter=text, parameters=parameters)
            frame = read_changes(spark, table, start, partition_filter=text, parameters=parameters)
            got = frame.toArrow()
            assert normalised(got, timestamps=True) == normalised(
                expected.to_pyarrow_table(), timestamps=True
            ), (text, start)
            whole = table.changes(start).to_pyarrow_table()
            assert got.num_rows <= whole.num_rows
    snapshot = table.snapshot()
    inserts = read_snapshot_changes(
        spark, snapshot, commit_time(snapshot), partition_filter="part = :p", parameters={"p": "p0"}
    ).toArrow()
    expected_rows = [r for r in snapshot.to_pyarrow_table().to_pylist() if r["part"] == "p0"]
    assert sorted(r["id"] for r in inserts.to_pylist()) == sorted(r["id"] for r in expected_rows)
    assert set(inserts.column("_change_type").to_pylist()) == {"insert"}


def test_files_sharing_a_size_and_files_of_their_own(spark: Any, tmp_path: Path) -> None:
    """Rows are keyed to their file by its size, or by its path where another file of the scan has
    the same size (the same bytes under two names): inserts of all, then a deletion vector on one of
    the twins and on the file of its own size, read as the core reads them for every range."""
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root), pa.schema([("id", pa.int64())]), properties={"delta.enableDeletionVectors": "true"}
    )
    twin = pa.table({"id": list(range(100))})
    pq.write_table(twin, root / "twin-a.parquet")
    pq.write_table(twin, root / "twin-b.parquet")
    pq.write_table(pa.table({"id": list(range(1000, 1250))}), root / "own.parquet")
    table.commit_files(["twin-a.parquet", "twin-b.parquet", "own.parquet"])
    sizes = table.snapshot().files().column("size").to_pylist()
    assert len(set(sizes)) == 2
    add_deletion_vectors(table, {"twin-a.parquet": [3, 7], "own.parquet": list(range(0, 250, 3))})
    add_deletion_vectors(table, {"twin-a.parquet": [3, 7, 8]})
    latest = table.version()
    for start in range(latest + 1):
        for end in range(start, latest + 1):
            _same(spark, root, start, end)
