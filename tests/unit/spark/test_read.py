"""read_delta on a real local SparkSession: the core's rows on every conformance table, at the latest
and an earlier version and under a filter; the naive ``spark.read.parquet(root)`` shown wrong on the
same tables; paths with every awkward character; the refusals.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_reads import ODD_FILE, ODD_VALUES, add_deletion_vectors, core_rows, odd_table, rows

from airflow_delta_provider.core import DeltaError, DeltaTable
from airflow_delta_provider.core.expressions.predicate import PredicateError
from airflow_delta_provider.core.protocol.actions import AddFile, RemoveFile
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan
from airflow_delta_provider.spark import read_delta

if TYPE_CHECKING:
    from airflow_delta_provider.core.log.snapshot import Snapshot

pytestmark = pytest.mark.spark

CORPUS = Path(os.environ.get("DELTA_CONFORMANCE_DIR", Path(__file__).parents[2] / "conformance" / "corpus"))
MANIFEST = json.loads((CORPUS / "MANIFEST.json").read_text())


@pytest.fixture(scope="module")
def spark(local_spark: Any) -> Any:
    return local_spark


def _core(root: Path, version: int | None = None) -> tuple[Snapshot | None, type[Exception]]:
    """The snapshot the core reads, or what read_delta must raise where the core cannot read: the
    core's refusal, or any error where the data files are absent (log-only tables)."""
    try:
        snapshot = DeltaTable(str(root)).snapshot(version=version)
        snapshot.to_pyarrow_table()
    except DeltaError as err:
        return None, type(err)
    except FileNotFoundError:
        return None, Exception
    return snapshot, Exception


@pytest.mark.parametrize("entry", MANIFEST, ids=[e["name"] for e in MANIFEST])
def test_every_conformance_table_reads_as_the_core_reads_it(spark: Any, entry: dict[str, Any]) -> None:
    root = CORPUS / "tables" / entry["table_root"]
    snapshot, refusal = _core(root)
    if snapshot is None:
        # What the core refuses to read, Spark is not handed either.
        with pytest.raises(refusal):
            read_delta(spark, str(root)).collect()
        return
    assert rows(read_delta(spark, str(root)).toArrow()) == rows(core_rows(snapshot))
    if snapshot.version > 0:
        earlier, refusal = _core(root, snapshot.version - 1)
        if earlier is None:
            with pytest.raises(refusal):
                read_delta(spark, str(root), version=snapshot.version - 1).collect()
        else:
            got = read_delta(spark, DeltaTable(str(root)), version=earlier.version).toArrow()
            assert rows(got) == rows(core_rows(earlier))
    text = filter_for(snapshot)
    if text is not None:
        got = read_delta(spark, str(root), filter=text).toArrow()
        expected = core_rows(snapshot, filter=text)
        assert rows(got) == rows(expected), text


def filter_for(snapshot: Snapshot) -> str | None:
    """A filter that keeps part of the table: a partition column if there is one (partition pruning),
    else a data column with statistics (file skipping), compared with a value the table holds."""
    table = snapshot.to_pyarrow_table()
    if table.num_rows < 2:
        return None
    fields = [snapshot.schema.field(c) for c in snapshot.partition_columns] + list(snapshot.schema)
    for field in fields:
        values = sorted(v for v in table.column(field.name).to_pylist() if _sortable(v))
        if len(set(values)) < 2:
            continue
        literal = _literal(values[len(values) // 2])
        if literal is not None:
            name = "`" + field.name.replace("`", "``") + "`"
            return f"{name} >= {literal} OR ({name} IS NULL AND NOT {name} = {literal})"
    return None


def _sortable(value: Any) -> bool:
    return value is not None and not isinstance(value, dict | list | bytes | bool | float)


def _literal(value: Any) -> str | None:
    if isinstance(value, int | decimal.Decimal):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, dt.datetime):  # zoned for a timestamp column, wall clock for timestamp_ntz
        return f"TIMESTAMP{'_NTZ' if value.tzinfo is None else ''} '{value.isoformat()}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return None


# --- what spark.read.parquet(root) would have read ----------------------------------------------


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("table-with-dv-small", "deleted rows come back"),
        ("basic-with-inserts-overwrite-restore", "removed files are read"),
        ("table-with-columnmapping-mode-name", "physical names: the logical columns are null"),
        ("data-reader-partition-values", "partition values typed from directory names"),
        ("dv-with-columnmapping", "deletion vectors and column mapping"),
    ],
)
def test_spark_read_parquet_of_the_root_is_wrong_where_read_delta_is_right(
    spark: Any, name: str, why: str
) -> None:
    entry = next(e for e in MANIFEST if e["name"] == name)
    root = CORPUS / "tables" / entry["table_root"]
    expected = rows(core_rows(DeltaTable(str(root)).snapshot()))
    assert rows(read_delta(spark, str(root)).toArrow()) == expected
    try:
        naive = spark.read.parquet(str(root))
        wrong = rows(naive.toArrow())
    except Exception:  # failing is being wrong too
        return
    assert wrong != expected, why


def test_odd_paths_and_values_read_exactly(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "dir with space %41 ü" / "t"
    table = odd_table(root)
    snapshot = table.snapshot()
    expected = core_rows(snapshot)
    assert expected.num_rows == 24  # 6 files x 5 rows, 2 deleted, 1 file replaced by a 1-row file
    frame = read_delta(spark, str(root))
    assert rows(frame.toArrow()) == rows(expected)
    assert sorted(set(frame.toArrow().column("p").to_pylist())) == sorted(ODD_VALUES)
    # The removed file is on disk: reading the root reads it (and the deleted rows).
    naive = spark.read.parquet(str(root)).toArrow()
    assert naive.num_rows == 5 * 6 + 1  # every file on disk, no deletion vector applied
    for value in ODD_VALUES:
        got = read_delta(spark, table, filter=f"p = '{value.replace(chr(39), chr(39) * 2)}'").toArrow()
        assert rows(got) == rows(core_rows(snapshot, filter=f"p = '{value}'")), value
        assert got.num_rows > 0


def test_the_filter_skips_files_before_spark_sees_them(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root), pa.schema([("id", pa.int64()), ("ds", pa.string())]), partition_by=["ds"]
    )
    for n, ds in enumerate(["2024-01-01", "2024-01-02"]):
        for part in range(2):
            relative = f"ds={ds}/part-{part}.parquet"
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            start = n * 100 + part * 10
            pq.write_table(pa.table({"id": list(range(start, start + 10))}), root / relative)
            table.commit_files([relative])
    frame = read_delta(spark, table, filter="ds = '2024-01-02' AND id >= 115", columns=["id"])
    assert [os.path.basename(os.path.dirname(f)) for f in frame.inputFiles()] == ["ds=2024-01-02"]
    assert sorted(frame.toArrow().column("id").to_pylist()) == list(range(115, 120))
    assert frame.columns == ["id"]
    # A comparison with NULL is unknown: nothing matches, and nothing is read.
    empty = read_delta(spark, table, filter="id = NULL")
    assert empty.count() == 0 and empty.columns == ["id", "ds"]


def test_a_partition_filter_reads_only_its_partitions_files(spark: Any, tmp_path: Path) -> None:
    """Each awkward partition value, bound to a marker (never spliced into the text), selects its
    partition's files and nothing else; its rows are the core's rows of that partition."""
    root = tmp_path / "dir with space %41 ü" / "t"
    table = odd_table(root)
    snapshot = table.snapshot()
    for value in ODD_VALUES:
        frame = read_delta(spark, table, partition_filter="p = :value", parameters={"value": value})
        got = frame.toArrow()
        assert got.num_rows > 0 and set(got.column("p").to_pylist()) == {value}
        assert rows(got) == rows(core_rows(snapshot, filter=f"p = '{value.replace(chr(39), chr(39) * 2)}'"))
        in_partition = [f for f in snapshot.files().to_pylist() if dict(f["partition_values"])["p"] == value]
        assert len(frame.inputFiles()) == len(in_partition) == 1
    both = read_delta(spark, table, filter="id >= 3", partition_filter=f"p IN ('{ODD_VALUES[0]}')")
    assert rows(both.toArrow()) == rows(core_rows(snapshot, filter=f"p = '{ODD_VALUES[0]}' AND id >= 3"))


def test_a_long_in_list_is_one_shallow_condition(spark: Any, tmp_path: Path) -> None:
    """A filter with thousands of values (an IN list from an upstream task) nests log2(n) deep on
    Spark, as the core reads it: no stack overflow in the analyzer, the same rows."""
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": list(range(10_000))}), root / "part-0.parquet")
    table.commit_files(["part-0.parquet"])
    wanted = list(range(0, 10_000, 3))
    frame = read_delta(spark, table, filter=f"id IN ({', '.join(map(str, wanted))})")
    assert sorted(frame.toArrow().column("id").to_pylist()) == wanted


def test_a_row_spark_names_differently_fails_the_query(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows are matched to their files by a prediction of ``_metadata.file_path``; were it wrong for
    some filesystem, the query fails naming the file, instead of dropping rows or deletion vectors.
    (The prediction is replaced here: the real one is right for every filesystem Spark runs on here.)"""
    import airflow_delta_provider.spark.files as files_module

    table = odd_table(tmp_path / "t")
    monkeypatch.setattr(files_module, "metadata_file_path", lambda path: "file:/elsewhere")
    with pytest.raises(Exception, match="names differently"):
        read_delta(spark, table).collect()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"filter": "nope = 1"}, PredicateError, "not a column of the table"),
        ({"filter": "id = 'x'"}, PredicateError, "comparison of id with 'x' is refused"),
        ({"filter": "id >"}, PredicateError, "Cannot parse"),
        ({"partition_filter": "id = 1"}, PredicateError, "names 'id', which is not a partition column"),
        ({"partition_filter": "p = :v"}, PredicateError, "no parameter binds"),
        ({"parameters": {"v": "a"}}, PredicateError, "not used by the conditions"),
        ({"columns": ["nope"]}, ValueError, "no column 'nope'"),
        ({"columns": "id"}, TypeError, "list of column names"),
        ({"version": 99}, DeltaError, "99"),
        ({"version": 0, "timestamp": "2020-01-01"}, ValueError, "either version or timestamp"),
    ],
)
def test_bad_arguments_are_refused_before_spark_reads(
    spark: Any, tmp_path: Path, kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    table = odd_table(tmp_path / "t")
    log = sorted(os.listdir(tmp_path / "t" / "_delta_log"))
    with pytest.raises(error, match=message):
        read_delta(spark, table, **kwargs)
    assert sorted(os.listdir(tmp_path / "t" / "_delta_log")) == log


def test_storage_options_belong_to_a_uri(spark: Any, tmp_path: Path) -> None:
    table = odd_table(tmp_path / "t")
    with pytest.raises(ValueError, match="storage_options applies to a table URI"):
        read_delta(spark, table, storage_options={"anon": True})
    with pytest.raises(TypeError, match="table URI or a DeltaTable"):
        read_delta(spark, 42)  # type: ignore[arg-type]


def test_a_file_spark_would_skip_is_refused(spark: Any, tmp_path: Path) -> None:
    """Hadoop leaves names starting with '_' out of a listing, even named explicitly: the read
    refuses rather than return the table without that file's rows."""
    root = tmp_path / "t"
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]))
    pq.write_table(pa.table({"id": [1, 2]}), root / "visible.parquet")
    table.commit_files(["visible.parquet"])
    pq.write_table(pa.table({"id": [3]}), root / "_hidden.parquet")
    # The core's commit refuses hidden names; another writer's log may hold one.
    hidden = AddFile(
        "_hidden.parquet",
        partition_values={},
        size=(root / "_hidden.parquet").stat().st_size,
        modification_time=1,
        stats='{"numRecords": 1}',
    )
    OptimisticTransaction(table.storage, read_snapshot=table.snapshot()).commit(
        CommitPlan("WRITE", adds=(hidden,))
    )
    assert table.snapshot().to_pyarrow_table().num_rows == 3
    with pytest.raises(DeltaError, match="left 1 active file"):
        read_delta(spark, table)


def test_nan_and_empty_tables(spark: Any, tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root), pa.schema([("x", pa.float64()), ("ds", pa.date32())]), partition_by=["ds"]
    )
    assert read_delta(spark, table).count() == 0
    assert read_delta(spark, table).columns == ["x", "ds"]
    (root / "ds=2024-01-01").mkdir()
    pq.write_table(pa.table({"x": [1.0, math.nan, None]}), root / "ds=2024-01-01" / "a.parquet")
    table.commit_files(["ds=2024-01-01/a.parquet"])
    got = read_delta(spark, table, filter="ds = '2024-01-01'").toArrow()
    assert rows(got) == rows(core_rows(table.snapshot()))


def _unpartitionedadd_deletion_vectors(root: Path) -> tuple[DeltaTable, dict[str, list[int]]]:
    """An unpartitioned table of 200-row files with odd names: three without a deletion vector and
    four with one (2 rows: a list; 60 rows from row 130 on: a bitmap not starting at row 0; every
    3rd row: a dense bitmap; rows 63, 64 and 127-199: word edges)."""
    from airflow_delta_provider.core.log.deletion_vectors import inline_deletion_vector

    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64()), ("name", pa.string())]),
        properties={"delta.enableDeletionVectors": "true"},
    )
    deleted = {
        f"dv 0 {ODD_FILE}": [5, 199],
        f"dv 1 {ODD_FILE}": list(range(130, 190)),
        f"dv 2 {ODD_FILE}": list(range(0, 200, 3)),
        f"dv 3 {ODD_FILE}": [63, 64, *range(127, 200)],
    }
    names = [f"plain {n} {ODD_FILE}" for n in range(3)] + list(deleted)
    for n, name in enumerate(names):
        ids = list(range(n * 1000, n * 1000 + 200))
        pq.write_table(pa.table({"id": ids, "name": [f"{name}-{i}" for i in ids]}), root / name)
    table.commit_files(names)
    snapshot = table.snapshot()
    removes: list[RemoveFile] = []
    adds: list[AddFile] = []
    for add in snapshot.files().to_pylist():
        name = os.path.basename(table.storage.path.decode(add["path"]))
        if name not in deleted:
            continue
        common = {"partition_values": {}, "size": add["size"], "stats": add["stats"]}
        dv = inline_deletion_vector(deleted[name])
        removes.append(RemoveFile(add["path"], deletion_timestamp=1, **common))
        adds.append(AddFile(add["path"], modification_time=1, deletion_vector=dv, **common))
    assert len(adds) == 4
    OptimisticTransaction(table.storage, read_snapshot=snapshot).commit(
        CommitPlan("DELETE", removes=tuple(removes), adds=tuple(adds))
    )
    return table, deleted


def test_an_unpartitioned_table_with_some_deletion_vectors_reads_exactly(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Files without a deletion vector are read by a plain scan, the others keyed by their path and
    row index: together the core's rows, under a filter and a column choice too; a row of a file
    Spark names otherwise than predicted still fails the query."""
    root = tmp_path / "dir with space %41 ü" / "t"
    root.mkdir(parents=True)
    table, deleted = _unpartitionedadd_deletion_vectors(root)
    snapshot = table.snapshot()
    expected = core_rows(snapshot)
    assert expected.num_rows == 7 * 200 - sum(len(rows) for rows in deleted.values())
    assert rows(read_delta(spark, str(root)).toArrow()) == rows(expected)
    # The filter skips two plain files; the third (ids 2000-2199) is in the plain half of the split.
    got = read_delta(spark, table, filter="id >= 2100", columns=["name"]).toArrow()
    expected = core_rows(snapshot, columns=["name"], filter="id >= 2100")
    assert rows(got) == rows(expected)
    assert any(name.startswith("plain 2 ") for name in expected.column("name").to_pylist())

    import airflow_delta_provider.spark.files as files_module

    monkeypatch.setattr(files_module, "metadata_file_path", lambda path: "file:/elsewhere")
    with pytest.raises(Exception, match="names differently"):
        read_delta(spark, table).collect()


def test_a_partitioned_table_with_deletion_vectors_on_some_files_and_equal_sizes_reads_exactly(
    spark: Any, tmp_path: Path
) -> None:
    """Rows are keyed to their file by its size where no other file of the scan shares it, else by
    its path: a partitioned table whose files come in pairs of equal size (the same bytes under two
    names, in one partition and across partitions), some with a deletion vector and some without,
    reads as the core reads it, under a filter too."""
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())]),
        partition_by=["p"],
        properties={"delta.enableDeletionVectors": "true"},
    )
    relatives = []
    for n in range(6):
        ids = list(range(n * 100, n * 100 + 100))
        data = pa.table({"id": ids, "name": [f"n{n}-{i}" for i in ids]})
        for copy, partition in enumerate(["a", "b"] if n < 4 else ["a"]):
            relative = f"p={partition}/{n}-{copy} {ODD_FILE}"
            (root / relative).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(data, root / relative)
            relatives.append(relative)
        if n == 1:  # a second copy in the same partition
            pq.write_table(data, root / f"p=a/{n}-again.parquet")
            relatives.append(f"p=a/{n}-again.parquet")
    table.commit_files(relatives)
    sizes = [f["size"] for f in table.snapshot().files().to_pylist()]
    assert len(set(sizes)) < len(sizes)  # the pairs share sizes
    path = table.storage.path
    logged = table.snapshot().files().column("path").to_pylist()
    by_relative = {path.relative(path.decode(p)): p for p in logged}
    add_deletion_vectors(
        table,
        {
            by_relative[f"p=a/0-0 {ODD_FILE}"]: [0, 99],  # its twin in b has none
            by_relative[f"p=a/1-0 {ODD_FILE}"]: list(range(10, 60)),  # its twins have others
            by_relative[f"p=b/1-1 {ODD_FILE}"]: [1, 2, 3],
            by_relative["p=a/1-again.parquet"]: list(range(0, 100, 2)),
            by_relative[f"p=a/4-0 {ODD_FILE}"]: [50],  # a size of its own
        },
    )
    snapshot = table.snapshot()
    assert rows(read_delta(spark, table).toArrow()) == rows(core_rows(snapshot))
    got = read_delta(spark, table, filter="p = 'b' OR id >= 450", columns=["id", "p"]).toArrow()
    assert rows(got) == rows(core_rows(snapshot, columns=["id", "p"], filter="p = 'b' OR id >= 450"))


@pytest.mark.parametrize("deletion_vector", [True, False])
def test_a_log_size_that_is_not_the_files_fails_the_query(
    spark: Any, tmp_path: Path, deletion_vector: bool
) -> None:
    """A file whose size in the log is not its size on storage is matched to no file (its rows are
    keyed by size): the query fails naming it, rather than pairing its rows with another file's
    partition values or deletion vector."""
    root = tmp_path / "t"
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64()), ("p", pa.string())]),
        partition_by=["p"],
        properties={"delta.enableDeletionVectors": "true"},
    )
    (root / "p=a").mkdir()
    pq.write_table(pa.table({"id": [1, 2, 3]}), root / "p=a" / "good.parquet")
    pq.write_table(pa.table({"id": [4, 5, 6, 7]}), root / "p=a" / "bad.parquet")
    table.commit_files(["p=a/good.parquet"])
    size = (root / "p=a" / "bad.parquet").stat().st_size
    wrong = AddFile(
        "p=a/bad.parquet", partition_values={"p": "a"}, size=size + 1, modification_time=1, stats=None
    )
    OptimisticTransaction(table.storage, read_snapshot=table.snapshot()).commit(
        CommitPlan("WRITE", adds=(wrong,))
    )
    if deletion_vector:
        add_deletion_vectors(table, {"p=a/bad.parquet": [0]})
    assert table.snapshot().to_pyarrow_table().num_rows == 7 - deletion_vector
    with pytest.raises(Exception, match="size is not the one the log records"):
        read_delta(spark, table).collect()


def test_a_filter_with_parameters_reads_what_spark_sql_binds(spark: Any, tmp_path: Path) -> None:
    """The same text and values: ``read_delta(filter=, parameters=)`` and ``spark.sql(args=)``."""
    schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.decimal128(10, 2))])
    data = pa.table(
        {
            "id": [1, 2, 3, 4],
            "name": ["it's", "x' OR 'a' = 'a", "b", None],
            "amount": [decimal.Decimal(v) for v in ("1.00", "2.50", "10.00", "0.10")],
        },
        schema=schema,
    )
    table = DeltaTable.create(str(tmp_path / "t"), schema)
    pq.write_table(data, tmp_path / "t" / "0.parquet")
    table.commit_files(["0.parquet"])
    spark.createDataFrame(data).createOrReplaceTempView("bound")
    for text, parameters in [
        ("name = :name", {"name": "x' OR 'a' = 'a"}),
        ("amount >= :least AND id <> :id", {"least": decimal.Decimal("2.5"), "id": 4}),
        ("amount < :most OR name IS NULL", {"most": 1.5}),
        ("name IN (:a, :b)", {"a": "it's", "b": "b"}),
    ]:
        found = sorted(r.id for r in read_delta(spark, table, filter=text, parameters=parameters).collect())
        expected = sorted(
            r.id for r in spark.sql(f"SELECT id FROM bound WHERE {text}", args=parameters).collect()
        )
        assert found == expected, text
    with pytest.raises(PredicateError, match="not used"):
        read_delta(spark, table, filter="id = 1", parameters={"id": 1})
