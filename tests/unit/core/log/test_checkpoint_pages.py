"""Small action rows read page by page, checked against pyarrow decoding the whole column."""

from __future__ import annotations

import json

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.log import checkpoint_reader as reader
from airflow_delta_provider.core.log.checkpoint_pages import CheckpointPages
from airflow_delta_provider.core.parquet.thrift import read_struct
from airflow_delta_provider.core.storage import open_store

_MAP = pa.map_(pa.string(), pa.string())
PROTOCOL = pa.struct(
    [
        pa.field("minReaderVersion", pa.int32(), nullable=False),
        pa.field("minWriterVersion", pa.int32(), nullable=False),
        ("readerFeatures", pa.list_(pa.string())),
        ("writerFeatures", pa.list_(pa.string())),
    ]
)
METADATA = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("createdTime", pa.int64()),
        ("configuration", _MAP),
    ]
)
TXN = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
DOMAIN = pa.struct([("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())])
ADD = pa.struct([("path", pa.string()), ("size", pa.int64())])

PROTOCOLS = [
    {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["deletionVectors"],
        "writerFeatures": [],
    },
    {"minReaderVersion": 1, "minWriterVersion": 2, "readerFeatures": None, "writerFeatures": None},
]
METADATAS = [
    {
        "id": "t-1",
        "name": None,
        "description": "",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": json.dumps({"type": "struct", "fields": []}),
        "partitionColumns": ["a", "b"],
        "createdTime": None,
        "configuration": {"delta.appendOnly": "true", "k": "é" * 40},
    },
    {
        "id": "t-2",
        "name": "n",
        "description": None,
        "format": {"provider": "parquet", "options": None},
        "schemaString": "{}",
        "partitionColumns": [],
        "createdTime": 1,
        "configuration": {},
    },
]


def _checkpoint(path, rows: int, placed: dict[str, list[tuple[int, dict | None]]], **options) -> None:
    """A checkpoint-shaped file: ``rows`` add rows, the small actions at the given rows."""
    columns = {
        "add": pa.array([{"path": f"f{i}", "size": i} for i in range(rows)], ADD),
    }
    for name, kind in (
        ("protocol", PROTOCOL),
        ("metaData", METADATA),
        ("txn", TXN),
        ("domainMetadata", DOMAIN),
    ):
        values: list[dict | None] = [None] * rows
        for row, value in placed.get(name, []):
            values[row] = value
        columns[name] = pa.array(values, kind)
    pq.write_table(pa.table(columns), path, write_page_index=True, **options)


def _by_pyarrow(parquet: pq.ParquetFile, name: str) -> list[tuple[int, dict]]:
    column = parquet.read(columns=[name]).column(0).combine_chunks()
    present = np.flatnonzero(column.is_valid().to_numpy(zero_copy_only=False))
    return list(
        zip(present.tolist(), column.take(pa.array(present)).to_pylist(maps_as_pydicts="lossy"), strict=True)
    )


def _dense_layout() -> dict[str, list[tuple[int, dict | None]]]:
    """Small actions at irregular rows, maps of varied sizes: levels of several bit widths, in
    bit-packed runs between RLE runs."""
    rng = np.random.default_rng(7)
    txn_rows = np.flatnonzero(rng.random(3_000) < 0.3).tolist()
    metadata_rows = sorted(set(rng.integers(0, 3_000, 40).tolist()) - set(txn_rows[:5]))
    return {
        "txn": [
            (row, {"appId": f"app-{row}", "version": row, "lastUpdated": row % 3 or None}) for row in txn_rows
        ],
        "metaData": [
            (
                row,
                {
                    **METADATAS[k % 2],
                    "id": f"t-{row}",
                    "configuration": {f"k{j}": "v" * j for j in range(k % 5)},
                },
            )
            for k, row in enumerate(metadata_rows)
        ],
    }


LAYOUTS = {
    "at-the-end": {
        "protocol": [(2_998, PROTOCOLS[0])],
        "metaData": [(2_999, METADATAS[0])],
        "txn": [
            (0, {"appId": "a", "version": 1, "lastUpdated": None}),
            (2_997, {"appId": "b", "version": 2, "lastUpdated": 5}),
        ],
    },
    "spread": {
        "protocol": [(0, PROTOCOLS[1]), (1_500, PROTOCOLS[0])],
        "metaData": [(1, METADATAS[1]), (2_500, METADATAS[0])],
        "domainMetadata": [(7, {"domain": "d", "configuration": "{}", "removed": False})],
    },
    "none-of-some": {"protocol": [(5, PROTOCOLS[0])], "metaData": [(6, METADATAS[1])]},
    "dense": _dense_layout(),
}
OPTIONS = {
    "defaults": {},
    "small-pages": {"max_rows_per_page": 100},
    "v2-pages-zstd": {"max_rows_per_page": 250, "data_page_version": "2.0", "compression": "zstd"},
    "plain": {"max_rows_per_page": 300, "use_dictionary": False, "compression": "none"},
    "row-groups": {"max_rows_per_page": 200, "row_group_size": 1_000},
}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("options", OPTIONS)
def test_rows_read_page_by_page_are_those_pyarrow_reads(tmp_path, layout, options):
    path = tmp_path / "c.parquet"
    _checkpoint(path, 3_000, LAYOUTS[layout], **OPTIONS[options])
    parquet = pq.ParquetFile(path)
    pages = CheckpointPages(open_store(str(tmp_path)), str(path), parquet)
    for name in ("protocol", "metaData", "txn", "domainMetadata"):
        expected = _by_pyarrow(parquet, name)
        got = []
        for group in range(parquet.metadata.num_row_groups):
            rows = pages.action_rows(name, group)
            assert rows is not None, (name, group)
            start = sum(parquet.metadata.row_group(g).num_rows for g in range(group))
            got += [(start + row, value) for row, value in rows]
        assert got == expected, name


def test_a_checkpoint_delta_rs_wrote_reads_the_same(tmp_path):
    """delta-rs's own checkpoint (parquet-rs, one row group, keys declared required)."""
    root = tmp_path / "t"
    data = pa.table({"id": pa.array([1, 2], pa.int64()), "s": ["a", "b"]})
    for index in range(3):
        deltalake.write_deltalake(
            str(root),
            data,
            mode="append",
            configuration={"delta.appendOnly": "false"} if index == 0 else None,
            commit_properties=deltalake.CommitProperties(
                app_transactions=[deltalake.Transaction("app", index)]
            ),
        )
    table = deltalake.DeltaTable(str(root))
    table.create_checkpoint()
    [checkpoint] = list((root / "_delta_log").glob("*.checkpoint.parquet"))
    parquet = pq.ParquetFile(checkpoint)
    pages = CheckpointPages(open_store(str(root)), str(checkpoint), parquet)
    for name in ("protocol", "metaData", "txn"):
        assert pages.action_rows(name, 0) == _by_pyarrow(parquet, name), name


def test_what_it_cannot_read_gives_none(tmp_path):
    """No page index (pyarrow's default), or a column that is not a struct: None, and the caller
    decodes with pyarrow."""
    path = tmp_path / "c.parquet"
    _checkpoint(path, 100, LAYOUTS["none-of-some"])
    table = pq.read_table(path)
    pq.write_table(table, tmp_path / "no-index.parquet")
    parquet = pq.ParquetFile(tmp_path / "no-index.parquet")
    storage = open_store(str(tmp_path))
    assert (
        CheckpointPages(storage, str(tmp_path / "no-index.parquet"), parquet).action_rows("protocol", 0)
        is None
    )
    pq.write_table(pa.table({"protocol": ["x"] * 5}), tmp_path / "flat.parquet", write_page_index=True)
    flat = pq.ParquetFile(tmp_path / "flat.parquet")
    assert CheckpointPages(storage, str(tmp_path / "flat.parquet"), flat).action_rows("protocol", 0) is None


def test_the_small_state_of_a_large_row_group_is_read_page_by_page(tmp_path, monkeypatch):
    """read_checkpoint_small_actions takes the page route for large row groups (made small
    here) and gives the actions, row numbers and checks of the pyarrow route."""
    path = tmp_path / "_delta_log" / f"{1:020d}.checkpoint.parquet"
    path.parent.mkdir()
    _checkpoint(path, 3_000, LAYOUTS["at-the-end"], max_rows_per_page=100)
    storage = open_store(str(tmp_path))
    from airflow_delta_provider.core.log.segment import complete_checkpoints, list_log_files

    [checkpoint] = complete_checkpoints(list_log_files(storage))
    before = reader.read_checkpoint_small_actions(storage, checkpoint)
    routes = []
    original = CheckpointPages.action_rows

    def spying(self, name, group):
        rows = original(self, name, group)
        routes.append((name, rows is not None))
        return rows

    monkeypatch.setattr(CheckpointPages, "action_rows", spying)
    monkeypatch.setattr(reader, "_PAGED_ROWS", 1_000)
    after = reader.read_checkpoint_small_actions(storage, checkpoint)
    assert after == before
    assert ("protocol", True) in routes and ("metaData", True) in routes and ("txn", True) in routes


def test_rows_are_found_by_the_action_key(tmp_path):
    """The key field (here txn.appId) finds the rows: a txn whose appId is null names no
    application and is not returned; every txn with its key is, whatever else is null."""
    path = tmp_path / "c.parquet"
    keyless = {"appId": None, "version": 9, "lastUpdated": None}
    _checkpoint(
        path,
        3_000,
        {"txn": [(10, {"appId": "a", "version": 1, "lastUpdated": None}), (2_000, keyless)]},
        max_rows_per_page=100,
    )
    parquet = pq.ParquetFile(path)
    rows = CheckpointPages(open_store(str(tmp_path)), str(path), parquet).action_rows("txn", 0)
    assert rows == [(10, {"appId": "a", "version": 1, "lastUpdated": None})]
    assert [row for row, _ in _by_pyarrow(parquet, "txn")] == [10, 2_000]  # pyarrow sees both


def test_a_file_replaced_under_its_name_is_read_anew(tmp_path):
    """What is parsed is kept by the bytes it came from, not by path and size: a file replaced
    by one of the same size and layout gives its own rows."""
    path = tmp_path / "c.parquet"
    storage = open_store(str(tmp_path))
    found = []
    for app in ("app-1", "app-2"):
        _checkpoint(
            path,
            3_000,
            {"txn": [(2_990, {"appId": app, "version": 1, "lastUpdated": None})]},
            max_rows_per_page=100,
            use_dictionary=False,
            compression="none",
        )
        found.append(
            (
                path.stat().st_size,
                CheckpointPages(storage, str(path), pq.ParquetFile(path)).action_rows("txn", 0),
            )
        )
    assert found[0][0] == found[1][0]
    assert [rows for _, rows in found] == [
        [(2_990, {"appId": "app-1", "version": 1, "lastUpdated": None})],
        [(2_990, {"appId": "app-2", "version": 1, "lastUpdated": None})],
    ]


def test_an_unreadable_offset_index_costs_only_its_action_the_page_route(tmp_path):
    """The offset indexes of a row group are decoded together; one that cannot be read (here
    overwritten) leaves its action to pyarrow and the others to the pages."""
    path = tmp_path / "c.parquet"
    _checkpoint(path, 3_000, LAYOUTS["at-the-end"], max_rows_per_page=100)
    parquet = pq.ParquetFile(path)
    data = bytearray(path.read_bytes())
    footer_length = int.from_bytes(data[-8:-4], "little")
    meta, _ = read_struct(bytes(data[-8 - footer_length : -8]), 0, {4: {1: {4: None, 5: None}}})
    txn_version = next(
        i for i in range(parquet.metadata.num_columns) if parquet.schema.column(i).path == "txn.version"
    )
    chunk = meta[4][0][1][txn_version]
    data[chunk[4] : chunk[4] + chunk[5]] = b"\x19\x2c" + b"\x80" * (chunk[5] - 2)
    path.write_bytes(bytes(data))
    pages = CheckpointPages(open_store(str(tmp_path)), str(path), pq.ParquetFile(path))
    assert pages.action_rows("txn", 0) is None
    for name in ("protocol", "metaData"):
        assert pages.action_rows(name, 0) == _by_pyarrow(parquet, name), name
