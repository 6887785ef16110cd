"""Footer statistics stay byte-identical whatever route reads them.

``GOLDEN`` holds the ``add.stats`` the per-file route (every footer read, parsed and turned
into stats one after the other, bounds read for every leaf) wrote before the footers were
batched per window, read in the calling thread on local disks and pipelined on object
stores, and before bounds were skipped for columns that get no statistics. Each route
must reproduce it exactly: the sequential local read, the windowed object-store pipeline
(memory store, small windows), and a commit that stores the stats under partition columns
and column mapping's physical names.
"""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions import stats as stats_module
from airflow_delta_provider.core.expressions.stats import read_footers
from airflow_delta_provider.core.storage import open_store

#: Stats column choices: every column of the varied files, the first three only (the rest get
#: no statistics), and a nested path with a timestamp (``delta.dataSkippingStatsColumns``).
COLUMN_CHOICES: dict[str, list[tuple[str, ...]]] = {
    "first-three": [("i",), ("small",), ("u",)],
    "nested-and-ts": [("nested", "b", "c"), ("ts",), ("f",)],
}


def _extra_files() -> dict[str, bytes]:
    """Shapes the shared varied files lack: all-null and NaN-only columns, long strings only,
    mixed row groups where one group holds only nulls, 40 columns (8 beyond the default 32),
    Arrow-written floats without NaN."""
    files: dict[str, bytes] = {}

    def write(name: str, table: pa.Table, **options: object) -> None:
        sink = io.BytesIO()
        pq.write_table(table, sink, **options)
        files[name] = sink.getvalue()

    write(
        "nulls-and-nan.parquet",
        pa.table(
            {
                "i": pa.array([None, None, None], pa.int64()),
                "f": [float("nan")] * 3,
                "s": pa.array([None, "x" * 70, None]),
                "ts": pa.array([None] * 3, pa.timestamp("us")),
            }
        ),
    )
    write(
        "null-group.parquet",
        pa.table(
            {
                "i": pa.array([None, None, 3, 4], pa.int64()),
                "d": pa.array([None, None, Decimal("-1.50"), Decimal("2.25")], pa.decimal128(5, 2)),
                "ts": pa.array(
                    [None, None, dt.datetime(1969, 12, 31, 23, 59, 59, 999999), dt.datetime(2262, 1, 1)],
                    pa.timestamp("us", tz="UTC"),
                ),
            }
        ),
        row_group_size=2,
    )
    write(
        "wide.parquet",
        pa.table({f"c{k:02d}": pa.array([k, k + 1, None], pa.int64()) for k in range(40)}),
    )
    # Arrow-written floats without NaN: their bounds come from the footer once their values
    # (two row groups, plain-encoded pages) are read and hold no NaN.
    write(
        "clean-floats.parquet",
        pa.table({"f": [0.5, None, -2.0, 3.25], "n": [4, 3, 2, 1]}),
        row_group_size=2,
        use_dictionary=False,
    )
    return files


def _paths(directory: Path, varied_parquet: dict[str, bytes]) -> list[str]:
    paths = []
    for name, data in {**varied_parquet, **_extra_files()}.items():
        (directory / name).write_bytes(data)
        paths.append(str(directory / name))
    return paths


def _stats_by_choice(storage, paths: list[str], varied_stats_columns) -> dict[str, list[str]]:
    wide = [(f"c{k:02d}",) for k in range(32)]  # the default: the first 32 leaf columns
    choices = {"all": [*varied_stats_columns, *wide], **COLUMN_CHOICES}
    return {
        choice: [f.stats for f in read_footers(storage, paths, stats_columns=columns)]
        for choice, columns in choices.items()
    }


def _committed_stats(root: Path) -> dict[str, str]:
    """The add.stats of a new table over files under ``ds=`` directories, with column mapping."""
    data = pa.table(
        {
            "id": pa.array([3, None, 1], pa.int64()),
            "name": ["b" * 40, None, "a"],
            "at": pa.array([dt.datetime(2024, 1, 1), None, dt.datetime(2023, 1, 1)], pa.timestamp("us")),
            "s": pa.array([{"x": 5, "y": "q"}, None, {"x": -2, "y": "r"}]),
        }
    )
    for day in ("2024-01-01", "2024-01-02"):
        (root / "out" / f"ds={day}").mkdir(parents=True)
        pq.write_table(data, root / "out" / f"ds={day}" / "part-0.parquet")
    table = DeltaTable(str(root))
    table.commit_files(prefix="out", partition_by=["ds"], properties={"delta.columnMapping.mode": "name"})
    lines = (root / "_delta_log" / f"{0:020d}.json").read_text().splitlines()
    adds = [json.loads(line)["add"] for line in lines if line.startswith('{"add"')]
    return {add["path"]: add["stats"] for add in adds}


def test_local_footers_match_the_per_file_route(tmp_path, varied_parquet, varied_stats_columns):
    paths = _paths(tmp_path, varied_parquet)
    assert _stats_by_choice(open_store(str(tmp_path)), paths, varied_stats_columns) == GOLDEN["footers"]


def test_object_store_windows_match_the_per_file_route(
    tmp_path, monkeypatch, varied_parquet, varied_stats_columns
):
    """The memory store takes the object-store route: windows read while the one before is
    parsed; windows of 4 split the files over several."""
    monkeypatch.setattr(stats_module, "FOOTER_WINDOW", 4)
    local = _paths(tmp_path, varied_parquet)
    storage = open_store(f"memory://stats-routes-{tmp_path.name}")
    paths = []
    for path in local:
        remote = storage.join(Path(path).name)
        storage.put(remote, Path(path).read_bytes())
        paths.append(remote)
    assert not storage.is_local
    assert _stats_by_choice(storage, paths, varied_stats_columns) == GOLDEN["footers"]


def test_committed_stats_under_partitions_and_column_mapping_match(tmp_path):
    assert _committed_stats(tmp_path / "t") == GOLDEN["commit"]


#: Generated with the per-file route (the code before this change), not edited by hand.
GOLDEN: dict[str, dict] = json.loads(
    (Path(__file__).parent / "stats_golden.json").read_text(encoding="utf-8")
)


def test_every_builder_output_passes_the_commits_stats_check(tmp_path, varied_parquet, varied_stats_columns):
    """The stats the builder makes are not checked again at commit (``BuiltStats``): every one it
    makes, on the varied files and on every data file of the conformance corpus whose schema a
    commit would accept, passes :meth:`LogTypes.check_stats` against the table it belongs to."""
    import json as json_module

    from airflow_delta_provider.core.errors import DeltaError, SchemaError
    from airflow_delta_provider.core.expressions.stats import indexed_columns
    from airflow_delta_provider.core.protocol.schema import check_schema_compatible
    from airflow_delta_provider.core.protocol.validation import BuiltStats, log_types

    storage = open_store(str(tmp_path))
    paths = _paths(tmp_path, varied_parquet)
    for infos in [read_footers(storage, paths, stats_columns=varied_stats_columns)]:
        assert all(type(info.stats) is BuiltStats for info in infos)
    corpus = Path(__file__).parents[3] / "conformance" / "corpus"
    checked = 0
    for entry in json_module.loads((corpus / "MANIFEST.json").read_text()):
        if "columnMapping" in " ".join(entry.get("features", [])) or entry["expect"]["kind"] != "read":
            continue
        try:
            snapshot = DeltaTable(str(corpus / "tables" / entry["table_root"])).snapshot()
            files = snapshot.files()
        except DeltaError:
            continue
        store = snapshot.storage
        local = [store.path.decode(p) for p in files.column("path").to_pylist()]
        local = [p for p in local if Path(p).is_file()]
        if not local:
            continue
        partitions = set(snapshot.partition_columns)
        data_schema = pa.schema([f for f in snapshot.schema if f.name not in partitions])
        columns = indexed_columns(data_schema, snapshot.properties)
        infos = read_footers(store, local, stats_columns=columns)
        types = log_types(snapshot.metadata)
        for path, info in zip(local, infos, strict=True):
            try:
                check_schema_compatible(
                    data_schema, pa.schema([f for f in info.schema if f.name not in partitions])
                )
            except SchemaError:
                continue  # a commit refuses this file before its stats matter
            types.check_stats([(path, str(info.stats))])
            checked += 1
    assert checked > 100, checked
