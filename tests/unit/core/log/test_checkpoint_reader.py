"""Reading a checkpoint: each question answered from only the columns (and row groups) it needs."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.log import checkpoint_reader
from airflow_delta_provider.core.log import replay as replay_module


def _big_checkpointed_table(root, rows_per_group: int = 1000) -> None:
    """A table whose checkpoint holds many add rows in their own row groups."""
    write_deltalake(str(root), pa.table({"id": [0]}))
    for i in range(1, 4):
        write_deltalake(str(root), pa.table({"id": [i]}), mode="append")
    RsTable(str(root)).create_checkpoint()


def test_metadata_questions_never_read_the_add_column(tmp_path, monkeypatch):
    _big_checkpointed_table(tmp_path)
    checkpoint = tmp_path / "_delta_log" / "00000000000000000003.checkpoint.parquet"
    # Rewrite the checkpoint with add rows isolated in their own row groups, as in a large table.
    table = pq.read_table(checkpoint)
    order = pa.compute.sort_indices(pa.compute.is_valid(table.column("add")))
    pq.write_table(table.take(order), checkpoint, row_group_size=2)
    read_columns: list[tuple[str, ...]] = []

    def spy(method):
        original = getattr(pq.ParquetFile, method)

        def read(self, *args, columns=None, **kwargs):
            read_columns.append(tuple(columns or ("<every column>",)))
            return original(self, *args, columns=columns, **kwargs)

        monkeypatch.setattr(pq.ParquetFile, method, read)

    for method in ("read", "read_row_group", "read_row_groups", "iter_batches"):
        spy(method)
    monkeypatch.setattr(replay_module, "replay_files", lambda *a, **k: pytest.fail("file replay ran"))
    snapshot = DeltaTable(str(tmp_path)).snapshot()
    assert snapshot.app_transaction_version("nobody") is None
    assert snapshot.schema.names == ["id"]
    assert read_columns and all("add" not in cols and "<every column>" not in cols for cols in read_columns)
    groups = checkpoint_reader.row_groups_with_values(
        pq.ParquetFile(checkpoint), ["protocol", "metaData", "txn"]
    )
    assert groups == [0]  # the add-only row groups are skipped by their statistics


@pytest.mark.parametrize("required_leaves", [True, False], ids=["delta-rs-schema", "spark-like-schema"])
@pytest.mark.parametrize("where", ["first", "last", "spread"])
def test_small_actions_found_anywhere_in_a_large_row_group(tmp_path, required_leaves, where):
    """Protocol, metaData and txns mixed into one large row group (delta-rs, Spark) are all found,
    whichever rows hold them and whether or not the schema declares their keys required."""
    root = tmp_path / "t"
    write_deltalake(str(root), pa.table({"id": [0]}), commit_properties=_txn("app-a", 1))
    write_deltalake(str(root), pa.table({"id": [1]}), mode="append", commit_properties=_txn("app-b", 2))
    RsTable(str(root)).create_checkpoint()
    checkpoint = root / "_delta_log" / "00000000000000000001.checkpoint.parquet"
    table = pq.read_table(checkpoint)
    if not required_leaves:
        table = table.cast(pa.schema([_optional(f) for f in table.schema]))
    # 20,000 more add rows (more than the reader decodes at a time) around the small ones.
    filler = _more_adds(table, 20_000)
    pieces = {
        "first": [table, filler],
        "last": [filler, table],
        "spread": [filler.slice(0, 9_000), table.slice(0, 2), filler.slice(9_000), table.slice(2)],
    }[where]
    pq.write_table(pa.concat_tables(pieces), checkpoint, row_group_size=1_000_000)
    snapshot = DeltaTable(str(root)).snapshot()
    assert snapshot.version == 1
    assert snapshot.schema.names == ["id"]
    assert (snapshot.app_transaction_version("app-a"), snapshot.app_transaction_version("app-b")) == (1, 2)
    assert snapshot.files().num_rows == 20_002


def _more_adds(table: pa.Table, count: int) -> pa.Table:
    """``count`` rows copied from ``table``'s first add row, each with a path of its own."""
    first = pa.compute.index(pa.compute.is_valid(table.column("add")), True).as_py()
    rows = table.take(pa.array([first] * count))
    add = rows.column("add").combine_chunks()
    fields = list(add.type)
    children = [add.field(i) for i in range(len(fields))]
    children[add.type.get_field_index("path")] = pa.array([f"filler-{i}.parquet" for i in range(count)])
    renamed = pa.StructArray.from_arrays(children, fields=fields)
    return rows.set_column(rows.schema.get_field_index("add"), rows.schema.field("add"), renamed)


def _txn(app_id: str, version: int):
    from deltalake import CommitProperties, Transaction

    return CommitProperties(app_transactions=[Transaction(app_id=app_id, version=version, last_updated=1)])


def _optional(field: pa.Field) -> pa.Field:
    """``field`` with every nested field nullable, as Spark writes checkpoints."""
    data_type = field.type
    if pa.types.is_struct(data_type):
        data_type = pa.struct([_optional(child) for child in data_type])
    return pa.field(field.name, data_type, nullable=True)


@pytest.mark.parametrize("with_crc", [False, True], ids=["checkpoint", "checkpoint-and-crc"])
def test_a_load_reads_each_checkpoint_footer_once(tmp_path, monkeypatch, with_crc):
    """The small state and the file list open the checkpoint once each, its footer read once
    (with a ``.crc`` answering the small state, the checkpoint is opened for its shape, then
    read for its small rows and files at the first question about files)."""
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    for i in range(3):
        pq.write_table(pa.table({"id": pa.array([i], pa.int64())}), tmp_path / f"f{i}.parquet")
        table.commit_files([f"f{i}.parquet"], auto_checkpoint=False)
        if i == 1:
            table.checkpoint()
    if not with_crc:
        for crc in tmp_path.glob("_delta_log/*.crc"):
            crc.unlink()
    footers_read: list[str] = []
    real = checkpoint_reader.pq.ParquetFile

    def counting(source, *args, **kwargs):
        if kwargs.get("metadata") is None and str(source).endswith(".checkpoint.parquet"):
            footers_read.append(str(source))
        return real(source, *args, **kwargs)

    monkeypatch.setattr(checkpoint_reader.pq, "ParquetFile", counting)
    snapshot = DeltaTable(str(tmp_path)).snapshot()
    assert sorted(snapshot.files().column("path").to_pylist()) == ["f0.parquet", "f1.parquet", "f2.parquet"]
    assert snapshot.segment.checkpoint_version == 2
    assert (snapshot.state.checksum_version is not None) is with_crc
    assert len(footers_read) == 1, footers_read
