"""Partition-pruned replay equals the full replay filtered, on every checkpoint layout.

Random histories (hypothesis): adds across partitions of typed columns (int, date, timestamp with a
zone, decimal, boolean, strings with ``/`` and ``=``; nulls among them), removes with and without
``partitionValues``, a path re-added with other partition values, deletion vectors replacing a
file's; a checkpoint in one of the layouts readers meet (the core's, clustered or not and in
parts; V2 sidecars; delta-rs's; Spark's hash order, with or without ``partitionValues_parsed``);
commits after it. For each of a set of filters (``=``, ``IN``, ranges, ``IS NULL``, ``OR``,
``NOT``, nothing, everything): ``snapshot(partition_filter=f).files()`` is the full snapshot's
files that ``f`` selects, row for row; under column mapping too.
"""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import deltalake
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions import Predicate
from airflow_delta_provider.core.log import checkpoint_pages

COLUMNS = ["p_int", "p_date", "p_ts", "p_dec", "p_bool", "p_str"]
TYPES = ["integer", "date", "timestamp", "decimal(5,2)", "boolean", "string"]
DOMAINS: dict[str, list[str | None]] = {
    "p_int": ["1", "2", "3", "-7", None],
    "p_date": ["2024-01-01", "2024-01-02", "2023-12-31", None],
    "p_ts": ["2024-01-01 00:00:00", "2024-01-01 12:30:00.123456", "1999-12-31 23:59:59", None],
    "p_dec": ["0.50", "1.00", "12.25", None],
    "p_bool": ["true", "false", None],
    "p_str": ["a/b", "x=y", "plain", "", None],
}
FILTERS = [
    "p_int = 2",
    "p_int IN (1, 3)",
    "p_int > 1 OR p_str IS NULL",
    "NOT (p_date = DATE '2024-01-02')",
    "p_date >= DATE '2024-01-01' AND p_bool = true",
    "p_dec BETWEEN 0.5 AND 1.00",
    "p_ts > TIMESTAMP '2024-01-01T06:00:00Z'",
    "p_str = 'a/b' OR p_str = 'x=y'",
    "p_str IS NULL",
    "p_bool IS NOT NULL AND p_int <> 3",
    "p_int = 99",
    "p_int IS NULL OR p_int IS NOT NULL",
]
LAYOUTS = ["core", "core-parts", "core-unclustered", "v2", "delta-rs", "spark", "spark-no-parsed", "none"]
NOW = 1_700_000_000_000


def _schema(mapped: bool, columns: list[str]) -> str:
    fields = [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]
    for number, (name, kind) in enumerate(zip(COLUMNS, TYPES, strict=True), start=2):
        if name not in columns:
            continue
        metadata = {}
        if mapped:
            metadata = {"delta.columnMapping.id": number, "delta.columnMapping.physicalName": f"col-{name}-x"}
        fields.append({"name": name, "type": kind, "nullable": True, "metadata": metadata})
    if mapped:
        fields[0]["metadata"] = {"delta.columnMapping.id": 1, "delta.columnMapping.physicalName": "col-id"}
    return json.dumps({"type": "struct", "fields": fields})


class History:
    """A table's log written by hand, action by action."""

    def __init__(
        self, root: Path, *, mapped: bool, dvs: bool, v2: bool, columns: list[str] = COLUMNS
    ) -> None:
        self.root = root
        self.columns = columns
        self.log = root / "_delta_log"
        self.log.mkdir(parents=True)
        self.mapped = mapped
        self.version = -1
        self.live: dict[str, dict[str, Any]] = {}
        self.counter = 0
        reader, writer = (3, 7) if dvs or v2 or mapped else (1, 2)
        protocol: dict[str, Any] = {"minReaderVersion": reader, "minWriterVersion": writer}
        if reader == 3:
            wanted = (("deletionVectors", dvs), ("v2Checkpoint", v2), ("columnMapping", mapped))
            features = [feature for feature, on in wanted if on]
            protocol |= {"readerFeatures": features, "writerFeatures": features}
        configuration = {}
        if mapped:
            configuration |= {"delta.columnMapping.mode": "name", "delta.columnMapping.maxColumnId": "7"}
        if v2:
            configuration["delta.checkpointPolicy"] = "v2"
        metadata = {
            "id": "t",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": _schema(mapped, columns),
            "partitionColumns": columns,
            "configuration": configuration,
            "createdTime": 1,
        }
        self.commit([{"protocol": protocol}, {"metaData": metadata}])

    def key(self, column: str) -> str:
        return f"col-{column}-x" if self.mapped else column

    def commit(self, actions: list[dict[str, Any]]) -> None:
        self.version += 1
        info = {"commitInfo": {"timestamp": NOW + self.version, "operation": "WRITE"}}
        lines = [json.dumps(a) for a in [info, *actions]]
        (self.log / f"{self.version:020d}.json").write_text("\n".join(lines) + "\n")

    def values(self, rng: random.Random) -> dict[str, str | None]:
        return {self.key(c): rng.choice(DOMAINS[c]) for c in self.columns}

    def add_action(self, path: str, values: dict[str, str | None], dv: dict[str, Any] | None = None) -> dict:
        add = {
            "path": path,
            "partitionValues": values,
            "size": 100 + len(path),
            "modificationTime": NOW,
            "dataChange": True,
            "stats": json.dumps({"numRecords": 3}),
        }
        if dv is not None:
            add["deletionVector"] = dv
        self.live[path] = add
        return {"add": add}

    def step(self, rng: random.Random, kind: str, dvs: bool) -> None:
        actions: list[dict[str, Any]] = []
        if kind == "add" or not self.live:
            for _ in range(rng.randint(1, 6)):
                self.counter += 1
                actions.append(self.add_action(f"f{self.counter}.parquet", self.values(rng)))
        elif kind == "remove":
            path = rng.choice(sorted(self.live))
            add = self.live.pop(path)
            remove = {"path": path, "deletionTimestamp": NOW, "dataChange": True}
            if rng.random() < 0.5:
                remove["partitionValues"] = add["partitionValues"]
                remove["size"] = add["size"]
            actions.append({"remove": remove})
        elif kind == "readd":
            path = rng.choice(sorted(self.live))
            actions.append(self.add_action(path, self.values(rng)))  # the same path, other values
        elif kind == "dv" and dvs:
            path = rng.choice(sorted(self.live))
            old = self.live[path]
            # A deletion vector stored beside the table, unique by its offset (never read here).
            self.counter += 1
            dv = {"storageType": "u", "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^", "offset": self.counter}
            dv |= {"sizeInBytes": 36, "cardinality": 2}
            remove = {"path": path, "deletionTimestamp": NOW, "dataChange": True}
            remove["partitionValues"] = old["partitionValues"]
            if "deletionVector" in old:
                remove["deletionVector"] = old["deletionVector"]
            actions += [{"remove": remove}, self.add_action(path, old["partitionValues"], dv)]
        if actions:
            self.commit(actions)


def _checkpoint(root: Path, layout: str) -> None:
    table = DeltaTable(str(root))
    if layout in ("core", "v2"):
        table.checkpoint()
    elif layout == "core-parts":
        table.checkpoint(parts=2)
    elif layout == "core-unclustered":
        table.checkpoint()
        _rewrite(root, table.version(), shuffle=True, keep_parsed=True, keep_layout=True)
    elif layout == "delta-rs":
        deltalake.DeltaTable(str(root)).create_checkpoint()
    elif layout in ("spark", "spark-no-parsed"):
        table.checkpoint()
        _rewrite(root, table.version(), shuffle=True, keep_parsed=layout == "spark", keep_layout=False)


def _rewrite(root: Path, version: int, *, shuffle: bool, keep_parsed: bool, keep_layout: bool) -> None:
    """The checkpoint as another writer lays it out: rows in hash order (the small actions last
    for Spark), every field optional, large row groups with the page index; without
    ``partitionValues_parsed`` when asked."""
    path = root / "_delta_log" / f"{version:020d}.checkpoint.parquet"
    table = pq.read_table(path)
    if not keep_parsed:
        add = table.column("add").combine_chunks()
        fields = [f for f in add.type if f.name != "partitionValues_parsed"]
        children = [add.field(f.name) for f in fields]
        table = table.set_column(
            table.schema.get_field_index("add"),
            "add",
            pa.StructArray.from_arrays(children, fields=fields, mask=add.is_null()),
        )
    order = list(range(table.num_rows))
    if shuffle:
        random.Random(version).shuffle(order)
        if not keep_layout:
            small = pc.invert(pc.is_valid(table.column("add"))).to_pylist()
            order.sort(key=lambda i: small[i])
    table = table.take(pa.array(order))
    if keep_layout:  # the core's small row groups (here of 7 rows), unsorted
        pq.write_table(table, path, row_group_size=7)
    else:
        pq.write_table(table, path, row_group_size=10_000, write_page_index=True, max_rows_per_page=5)


def _rows(table: pa.Table) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def _assert_pruned_equals_full(root: Path, filters: list[str] = FILTERS) -> None:
    checkpoint_pages.clear_caches()
    table = DeltaTable(str(root))
    full = table.snapshot()
    files = full.files()
    values = full.partition_values()
    for text in filters:
        predicate = Predicate(text, full.partition_columns)
        expected = files.filter(predicate.mask(values))
        pruned = table.snapshot(partition_filter=text)
        got = pruned.files()
        assert _rows(got) == _rows(expected), (text, root)
        assert pruned.num_files() == expected.num_rows
        assert _rows(pruned.partition_values()) == _rows(values.filter(predicate.mask(values))), text


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    layout=st.sampled_from(LAYOUTS),
    mapped=st.booleans(),
    seed=st.integers(0, 10_000),
    before=st.lists(st.sampled_from(["add", "add", "remove", "readd", "dv"]), min_size=3, max_size=12),
    after=st.lists(st.sampled_from(["add", "remove", "readd", "dv"]), min_size=0, max_size=6),
)
def test_pruned_replay_equals_the_full_replay_filtered(layout, mapped, seed, before, after):
    if layout == "delta-rs":
        mapped = False  # (delta-rs checkpoints tables it can write; name mapping it cannot)
    root = Path(tempfile.mkdtemp()) / "t"
    try:
        rng = random.Random(seed)
        dvs = layout != "delta-rs"
        history = History(root, mapped=mapped, dvs=dvs, v2=layout == "v2")
        for kind in before:
            history.step(rng, kind, dvs)
        if layout != "none":
            _checkpoint(root, layout)
        for kind in after:
            history.step(rng, kind, dvs)
        _assert_pruned_equals_full(root)
    finally:
        shutil.rmtree(root.parent, ignore_errors=True)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_on_a_fixed_history(tmp_path, layout):
    """The same, on one history per layout, every step kind present before and after the checkpoint."""
    rng = random.Random(7)
    dvs = layout != "delta-rs"
    history = History(tmp_path / "t", mapped=False, dvs=dvs, v2=layout == "v2")
    for kind in ["add"] * 6 + ["remove", "readd", "dv", "add", "remove", "readd", "dv"]:
        history.step(rng, kind, dvs)
    if layout != "none":
        _checkpoint(tmp_path / "t", layout)
    for kind in ["add", "remove", "readd", "dv", "add"]:
        history.step(rng, kind, dvs)
    _assert_pruned_equals_full(tmp_path / "t")


STRING_FILTERS = [
    "p_str = 'a/b'",
    "p_str IN ('plain', 'x=y')",
    "p_str > 'p'",
    "p_str IS NULL",
    "p_str <> 'plain'",
]


@pytest.mark.parametrize("layout", ["delta-rs", "spark-no-parsed", "core", "none"])
def test_one_string_partition_column_is_pruned_by_the_statistics_of_the_maps_values(tmp_path, layout):
    """With a single string partition column, the statistics of ``partitionValues``'s values serve
    where there is no ``partitionValues_parsed`` (delta-rs writes none)."""
    rng = random.Random(11)
    history = History(tmp_path / "t", mapped=False, dvs=False, v2=False, columns=["p_str"])
    for kind in ["add"] * 12 + ["remove", "readd", "add"]:
        history.step(rng, kind, dvs=False)
    if layout != "none":
        _checkpoint(tmp_path / "t", layout)
    for kind in ["add", "remove", "readd"]:
        history.step(rng, kind, dvs=False)
    _assert_pruned_equals_full(tmp_path / "t", STRING_FILTERS)


def test_a_clustered_checkpoint_decodes_only_the_row_groups_of_the_partition(tmp_path, monkeypatch):
    """The core's checkpoint of a partitioned table is sorted by partition, in small row groups
    with typed statistics: a partition's replay skips the other row groups by their statistics
    and decodes the add rows of the groups that hold its files only."""
    from airflow_delta_provider.core.log import checkpoint_reader
    from airflow_delta_provider.core.log.partition_pruning import PartitionPruner
    from airflow_delta_provider.core.maintenance.checkpoint import writer

    monkeypatch.setattr(writer, "PARTITIONED_ROW_GROUP_SIZE", 8)
    rng = random.Random(3)
    history = History(tmp_path / "t", mapped=False, dvs=False, v2=False, columns=["p_int", "p_str"])
    for _ in range(20):
        history.step(rng, "add", dvs=False)
    DeltaTable(str(tmp_path / "t")).checkpoint()
    decoded: list[list[int]] = []
    read_columns = checkpoint_reader._read_columns
    kept: list[list[int]] = []
    row_groups = PartitionPruner.row_groups

    def spying_read(storage, path, parquet, columns, row_groups=None):
        if row_groups is not None:  # (the full replay reads every group)
            decoded.append(list(row_groups))
        return read_columns(storage, path, parquet, columns, row_groups)

    def spying_groups(self, parquet):
        kept.append(row_groups(self, parquet))
        return kept[-1]

    monkeypatch.setattr(checkpoint_reader, "_read_columns", spying_read)
    monkeypatch.setattr(PartitionPruner, "row_groups", spying_groups)
    [checkpoint] = (tmp_path / "t" / "_delta_log").glob("*.checkpoint.parquet")
    total = pq.ParquetFile(checkpoint).metadata.num_row_groups
    assert total > 5
    _assert_pruned_equals_full(tmp_path / "t", ["p_int = 2", "p_int = 2 AND p_str = 'plain'"])
    assert kept and all(len(groups) < total - 1 for groups in kept), (kept, total)
    assert decoded and all(len(groups) < total - 1 for groups in decoded), (decoded, total)
