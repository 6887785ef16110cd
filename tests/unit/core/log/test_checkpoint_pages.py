"""Small action rows read page by page, checked against pyarrow decoding the whole column."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import deltalake
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.log import checkpoint_pages as pages
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


# --- the footer: page index locations found in place, or walked ---------------------------------


def _footer_of(path) -> tuple[bytes, int]:
    data = path.read_bytes()
    length = int.from_bytes(data[-8:-4], "little")
    return data[-8 - length : -8], len(data)


def _route_and_result(path) -> tuple[str, object]:
    """Which route a footer takes and what it gives, against the walk of every ColumnChunk."""
    footer, size = _footer_of(path)
    pages.clear_caches()
    before = dict(pages.FOOTER_ROUTES)
    parsed = pages._parsed_footer(footer, size)
    assert parsed == pages._walked_footer(footer)  # the same schema tree and locations
    [route] = [k for k, v in pages.FOOTER_ROUTES.items() if v != before.get(k, 0)]
    return route, parsed


CORPUS_CHECKPOINTS = sorted(
    (Path(__file__).parents[3] / "conformance" / "corpus" / "tables").rglob("*.checkpoint*.parquet")
)


def test_every_corpus_checkpoints_footer_gives_what_the_walk_gives():
    """Checkpoints Spark (parquet-mr, with and without page indexes), delta-rs and delta-kernel
    wrote: the scan finds the locations the walk finds, or the footer is walked."""
    routes = collections.Counter(_route_and_result(path)[0] for path in CORPUS_CHECKPOINTS)
    assert len(CORPUS_CHECKPOINTS) > 20
    assert routes["scan"] > 0, routes


@pytest.mark.parametrize("options", OPTIONS)
def test_pyarrows_footers_are_scanned_and_give_what_the_walk_gives(tmp_path, options):
    path = tmp_path / "c.parquet"
    _checkpoint(path, 3_000, LAYOUTS["spread"], **OPTIONS[options])
    route, (_, indexes) = _route_and_result(path)
    assert route == "scan"
    assert all(offsets is not None and columns is not None for group in indexes for offsets, columns in group)


def test_delta_rs_checkpoint_footers_are_scanned(tmp_path):
    root = tmp_path / "t"
    for _ in range(3):
        deltalake.write_deltalake(str(root), pa.table({"id": pa.array([1, 2], pa.int64())}), mode="append")
    deltalake.DeltaTable(str(root)).create_checkpoint()
    [checkpoint] = list((root / "_delta_log").glob("*.checkpoint.parquet"))
    assert _route_and_result(checkpoint)[0] == "scan"


def test_footers_the_scan_cannot_trust_are_walked(tmp_path):
    """No page index at all; statistics whose bytes hold the very pattern the scan looks for (a
    binary column of such values: one match too many): walked, and the same rows are read."""
    path = tmp_path / "c.parquet"
    _checkpoint(path, 100, LAYOUTS["none-of-some"])
    pq.write_table(pq.read_table(path), tmp_path / "no-index.parquet")
    assert _route_and_result(tmp_path / "no-index.parquet")[0] == "walk"

    hostile = b"\x00\x16\x02\x15\x02\x16\x02\x15\x02\x00"
    table = pq.read_table(path).append_column("evil", pa.array([hostile] * 100, pa.binary()))
    pq.write_table(table, tmp_path / "hostile.parquet", write_page_index=True, max_rows_per_page=10)
    footer, _ = _footer_of(tmp_path / "hostile.parquet")
    assert footer.count(hostile) >= 2  # its min and max statistics
    assert _route_and_result(tmp_path / "hostile.parquet")[0] == "walk"
    parquet = pq.ParquetFile(tmp_path / "hostile.parquet")
    reader_pages = CheckpointPages(open_store(str(tmp_path)), str(tmp_path / "hostile.parquet"), parquet)
    for name in ("protocol", "metaData"):
        assert reader_pages.action_rows(name, 0) == _by_pyarrow(parquet, name)


def test_an_index_that_is_not_its_chunks_is_not_used(tmp_path, monkeypatch):
    """Locations found in place but wrong (here shifted by one row group's): the offset index
    decoded there does not begin at its chunk's first data page, so the action is left to
    pyarrow (None) rather than read from another row group's pages."""
    path = tmp_path / "c.parquet"
    _checkpoint(path, 3_000, LAYOUTS["at-the-end"], max_rows_per_page=100, row_group_size=1_500)
    parquet = pq.ParquetFile(path)
    footer, size = _footer_of(path)
    right = pages._parsed_footer(footer, size)
    pages.clear_caches()
    swapped = (right[0], [right[1][1], right[1][0]])
    monkeypatch.setitem(pages._PARSED, footer, swapped)
    reader_pages = CheckpointPages(open_store(str(tmp_path)), str(path), parquet)
    for name in ("protocol", "metaData", "txn"):
        assert reader_pages.action_rows(name, 1) is None, name


@pytest.mark.parametrize("layout", LAYOUTS)
def test_small_actions_decoded_in_one_read_are_those_decoded_batch_by_batch(tmp_path, monkeypatch, layout):
    """Small row groups have every small action column decoded in one read; larger ones column by
    column, batch by batch: the same actions and row numbers either way."""
    path = tmp_path / "_delta_log" / f"{1:020d}.checkpoint.parquet"
    path.parent.mkdir()
    _checkpoint(path, 3_000, LAYOUTS[layout], row_group_size=1_000)
    storage = open_store(str(tmp_path))
    from airflow_delta_provider.core.log.segment import complete_checkpoints, list_log_files

    [checkpoint] = complete_checkpoints(list_log_files(storage))
    one_read = reader.read_checkpoint_small_actions(storage, checkpoint)
    monkeypatch.setattr(reader, "_ONE_READ_ROWS", 0)
    monkeypatch.setattr(reader, "_SMALL_BATCH", 128)
    assert reader.read_checkpoint_small_actions(storage, checkpoint) == one_read
    expected = sum(len(rows) for rows in LAYOUTS[layout].values())
    assert len(one_read) == expected
