"""Reading data files (core/log/scan.py): each file once for all the row selections it serves, the
selections exact at batch and row-group edges, only the row groups a few named rows need (a
corrupt row group elsewhere is never touched), constant columns as runs, and every buffer from
the read pool (core/utils/memory.py)."""

from __future__ import annotations

import decimal
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.log.scan import FileRead, RowSelection, constant_chunks, read_files, runs
from airflow_delta_provider.core.storage import open_store
from airflow_delta_provider.core.utils.memory import READ_POOL

if TYPE_CHECKING:
    from pathlib import Path

    from airflow_delta_provider.core.storage import LogStore

ODD_NAME = "part 1 %41 ü=[x]#.parquet"
ODD_LOG_PATH = "part%201%20%2541%20%C3%BC%3D%5Bx%5D%23.parquet"  # as the log writes it


def _store(root: Path) -> LogStore:
    root.mkdir(parents=True, exist_ok=True)
    return open_store(root.as_uri())


def _write(root: Path, name: str, rows: int, row_group_size: int) -> pa.Table:
    table = pa.table({"id": np.arange(rows, dtype=np.int64), "name": [f"n{i}" for i in range(rows)]})
    pq.write_table(table, root / name, row_group_size=row_group_size)
    return table


def _keep(rows: list[int]) -> RowSelection:
    return RowSelection(np.array(rows, dtype=np.uint64), keep=True)


def _drop(rows: list[int]) -> RowSelection:
    return RowSelection(np.array(rows, dtype=np.uint64), keep=False)


def test_each_selection_gets_exactly_its_rows_across_row_groups_and_batches(tmp_path: Path) -> None:
    store = _store(tmp_path / "t")
    _write(tmp_path / "t", ODD_NAME, 1000, row_group_size=300)
    few_runs = [0, 1, 299, 300, 301, 999]  # row-group edges: a few runs, sliced
    scattered = list(range(3, 1000, 7))  # many runs: filtered
    selections = (None, _drop(few_runs), _drop(scattered), _keep([1, 299, 300, 999, 5000]), _keep([]))
    (tables,) = read_files(store, [FileRead(ODD_LOG_PATH, selections)], pa.schema([("id", pa.int64())]))
    every = list(range(1000))
    assert tables[0].column("id").to_pylist() == every
    assert tables[1].column("id").to_pylist() == [i for i in every if i not in few_runs]
    assert tables[2].column("id").to_pylist() == [i for i in every if i not in scattered]
    assert tables[3].column("id").to_pylist() == [1, 299, 300, 999]  # row 5000 is past the end: ignored
    assert tables[4].num_rows == 0 and tables[4].schema == pa.schema([("id", pa.int64())])
    # The selections share the file's buffers: the whole read and the sliced one hold the same data.
    whole, sliced = tables[0].column("id").chunk(0), tables[1].column("id").chunk(0)
    assert whole.buffers()[1].address == sliced.buffers()[1].address


def test_a_few_named_rows_read_only_their_row_groups(tmp_path: Path) -> None:
    """Row group 1 of the file is made unreadable: a whole read fails, a selection of rows in groups
    0 and 2 never reads it."""
    root = tmp_path / "t"
    store = _store(root)
    _write(root, "f.parquet", 300, row_group_size=100)
    column = pq.ParquetFile(root / "f.parquet").metadata.row_group(1).column(0)
    data = bytearray((root / "f.parquet").read_bytes())
    start = column.dictionary_page_offset or column.data_page_offset
    data[start : start + column.total_compressed_size] = b"\xff" * column.total_compressed_size
    (root / "f.parquet").write_bytes(bytes(data))
    schema = pa.schema([("id", pa.int64())])

    ((picked,),) = read_files(store, [FileRead("f.parquet", (_keep([5, 250, 299]),))], schema)
    assert picked.column("id").to_pylist() == [5, 250, 299]
    with pytest.raises(OSError):
        read_files(store, [FileRead("f.parquet", (None,))], schema)
    with pytest.raises(OSError):  # a selection that keeps all but some rows reads every group
        read_files(store, [FileRead("f.parquet", (_drop([1]),))], schema)


def test_many_files_missing_columns_and_narrower_types(tmp_path: Path) -> None:
    root = tmp_path / "t"
    store = _store(root)
    for n in range(5):
        pq.write_table(pa.table({"id": pa.array([n * 10, n * 10 + 1], pa.int32())}), root / f"{n}.parquet")
    schema = pa.schema([("id", pa.int64()), ("absent", pa.string())])
    files = [FileRead(f"{n}.parquet", (None, _drop([0]))) for n in range(5)]
    tables = read_files(store, files, schema)
    assert [[t.column("id").to_pylist() for t in per] for per in tables] == [
        [[n * 10, n * 10 + 1], [n * 10 + 1]] for n in range(5)
    ]
    assert all(t.schema == schema and t.column("absent").null_count == t.num_rows for p in tables for t in p)
    # No columns at all: the rows are still counted (a read of the log's columns only).
    assert [t.num_rows for (t,) in read_files(store, [FileRead("0.parquet")], pa.schema([]))] == [2]


def test_a_file_no_selection_keeps_a_row_of_is_not_opened(tmp_path: Path) -> None:
    store = _store(tmp_path / "t")
    ((empty,),) = read_files(store, [FileRead("never-written.parquet", (_keep([]),))], pa.schema([]))
    assert empty.num_rows == 0
    with pytest.raises(FileNotFoundError):
        read_files(store, [FileRead("never-written.parquet")], pa.schema([]))


@pytest.mark.parametrize(
    "values",
    [
        pa.array([1, None, 3], pa.int64()),
        pa.array([1.5, 2.5, 3.5]),
        pa.array(["a", None, "ccc"]),
        pa.array([b"x", b"", b"z"]),
        pa.array([True, None, False]),
        pa.array([decimal.Decimal("1.5"), None, decimal.Decimal("-3.5")], pa.decimal128(5, 1)),
        pa.array([0, 1, 2], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
        pa.array([0, 1, 2], pa.int32()).cast(pa.date32()),
        pa.array([7, 8, 9, 10], pa.int16()).slice(1),
        pa.chunked_array([pa.array([1], pa.int8()), pa.array([2, 3], pa.int8())]),
    ],
)
def test_runs_repeat_each_value_by_its_length(values: pa.Array | pa.ChunkedArray) -> None:
    lengths = np.array([2, 0, 3], dtype=np.int64)
    expected = [v for v, n in zip(values.to_pylist(), lengths, strict=True) for _ in range(n)]
    got = runs(values, lengths)
    got.validate(full=True)
    assert got.type == values.type and got.to_pylist() == expected


@pytest.mark.parametrize(
    "values",
    [
        pa.array([1, None, 1, 3, 1], pa.int64()),
        pa.array([0.0, -0.0, float("nan"), 0.0, float("nan")]),
        pa.array(["a", None, "a", "ccc", None]),
        pa.array([b"x", b"", b"x", b"z", b""]),
        pa.array([True, None, False, True, True]),
        pa.array(
            [decimal.Decimal("1.5"), None, decimal.Decimal("1.5"), decimal.Decimal("-3.5"), None],
            pa.decimal128(5, 1),
        ),
        # Timestamps Python cannot hold: the values are compared by their bytes, never converted.
        pa.array([2**62, -(2**62), 2**62, 0, None], pa.int64()).cast(pa.timestamp("ns", tz="UTC")),
        pa.array([0, 1, 0, 2, 1], pa.int32()).cast(pa.date32()),
        pa.array([[1], [1], None, [2], [1]], pa.list_(pa.int64())),
        pa.array([None] * 5, pa.string()),
        pa.array([7, 8, 9, 7, 8, 9, 10], pa.int16()).slice(1, 5),
        pa.chunked_array([pa.array([1], pa.int8()), pa.array([2, 1, 2, 1], pa.int8())]),
    ],
)
def test_constant_chunks_hold_the_values_runs_hold_sharing_one_array_per_value(
    values: pa.Array | pa.ChunkedArray,
) -> None:
    """The change feed's constant columns as slices of one array per distinct value: the same
    values as :func:`runs` (each value its own bits: -0.0 is not 0.0, a NaN stays a NaN), the same
    type, every operation a consumer applies working on the slices."""
    lengths = np.array([2, 0, 3, 1, 4], dtype=np.int64)
    expected = runs(values, lengths)
    got = constant_chunks(values, lengths)
    got.validate(full=True)
    assert got.type == expected.type
    assert got.combine_chunks().equals(expected) or _same_bits(got.combine_chunks(), expected)
    combined = pa.concat_tables([pa.table({"x": got}), pa.table({"x": got})]).combine_chunks()
    combined.validate(full=True)
    picked = got.take(pa.array([0, 9, 5]))
    assert _same_bits(picked.combine_chunks(), expected.take(pa.array([0, 9, 5])))
    mask = pa.array(np.arange(len(got)) % 2 == 0)
    assert _same_bits(got.filter(mask).combine_chunks(), expected.filter(mask))


def _same_bits(a: pa.Array, b: pa.Array) -> bool:
    """Equal values, NaN equal to NaN, -0.0 apart from 0.0."""
    if pa.types.is_floating(a.type):
        return a.is_valid().equals(b.is_valid()) and np.array_equal(
            a.fill_null(0).to_numpy().view(np.int64), b.fill_null(0).to_numpy().view(np.int64)
        )
    return a.equals(b)


def test_constant_chunks_share_one_buffer_per_value() -> None:
    """A value that repeats over many scans is built once, as long as its longest run; values
    that hardly repeat are one array, built in one pass."""
    values = pa.array(["insert", "delete", "insert", "insert"])
    got = constant_chunks(values, np.array([5, 2, 9, 1], dtype=np.int64))
    buffers = {chunk.buffers()[2].address for chunk in got.chunks}
    assert len(buffers) == 2 and [len(c) for c in got.chunks] == [5, 2, 9, 1]
    assert got.chunks[2].to_pylist() == ["insert"] * 9
    distinct = constant_chunks(pa.array([1, 2, 3], pa.int64()), np.array([2, 2, 2], dtype=np.int64))
    assert distinct.num_chunks == 1 and distinct.to_pylist() == [1, 1, 2, 2, 3, 3]


def test_reads_allocate_from_the_read_pool(tmp_path: Path) -> None:
    store = _store(tmp_path / "t")
    _write(tmp_path / "t", "f.parquet", 200_000, row_group_size=50_000)
    default_before, read_before = pa.default_memory_pool().bytes_allocated(), READ_POOL.bytes_allocated()
    ((table,),) = read_files(
        store, [FileRead("f.parquet", (_drop([5]),))], pa.schema([("name", pa.string())])
    )
    assert READ_POOL.bytes_allocated() - read_before >= table.nbytes
    if READ_POOL.backend_name != pa.default_memory_pool().backend_name:
        # The rows are not in the default pool (its reader may hold scratch buffers there at times).
        assert pa.default_memory_pool().bytes_allocated() - default_before < table.nbytes


@pytest.mark.parametrize("damage", ["not parquet at all", "truncated"])
@pytest.mark.parametrize("read", ["snapshot", "changes", "delete"])
def test_a_damaged_data_file_is_the_cores_error_and_the_table_is_unchanged(tmp_path, damage, read):
    """A file the log references that is not Parquet (a foreign file, a truncated copy): every read
    of data raises InvalidDataFileError naming the file and what to do, and nothing is committed."""
    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.core.errors import InvalidDataFileError

    table = DeltaTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    file = tmp_path / "t" / "a.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3]}), file)
    table.commit_files(["a.parquet"])
    content = file.read_bytes()
    file.write_bytes(
        b"not parquet at all" if damage == "not parquet at all" else content[: len(content) // 2]
    )
    log_before = sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir())
    reads = {
        "snapshot": lambda: table.snapshot().to_pyarrow_table(),
        "changes": lambda: table.changes(0).to_pyarrow_table(),
        "delete": lambda: table.delete("id = 2"),
    }
    with pytest.raises(InvalidDataFileError, match=r"cannot be read as Parquet: .*a\.parquet.*RESTORE"):
        reads[read]()
    assert table.version() == 1
    assert sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir()) == log_before
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["_delta_log", "a.parquet"]
