"""Generate the read-path benchmark tables under ``benchmarks/data/`` (log only, no data files).

(a) 1,000,000 active files in a classic checkpoint, then 100 JSON commits of 100 adds
    (each with a txn), partitioned by ``part``.
(b) 10,000 JSON commits and no checkpoint.
(c) 100,000 files with 20-column stats in a checkpoint, then 10 JSON commits.
(a-rs) table (a) checkpointed again at version 101 by delta-rs: one row group of 1,010,002
    rows with protocol, metaData and the txns among the adds, keys declared required.
(a-spark) table (a) with its checkpoint rewritten Spark-like: one large row group, every
    field optional, protocol, metaData and txns placed last (the worst place to find them),
    and a ``.crc`` per version as Spark writes them (protocol, metadata, setTransactions,
    domainMetadata); a-rs has none, as delta-rs writes none.
(a-1k/-10k/-100k, a-rs-1k/..., a-spark-1k/...) the same layouts with a checkpoint of 1,000,
    10,000 or 100,000 files (plus the same 100 commits of 100 adds).
(p-core-10k, p-rs-1m, ...) issue 32: a partition of exactly 100 files among 100 equal ones, in the
    core's, delta-rs's and a Spark-like checkpoint layout (see generate_p).

Usage: ``python benchmarks/generate.py [--force] [--tables a,b,c]``. A table whose
``.complete`` marker exists is kept unless ``--force``.
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from collections.abc import Callable

DATA = Path(__file__).resolve().parent / "data"
NOW_MS = 1_790_000_000_000
STRING_MAP = pa.map_(pa.string(), pa.string())
DV_TYPE = pa.struct(
    [
        ("storageType", pa.string()),
        ("pathOrInlineDv", pa.string()),
        ("offset", pa.int32()),
        ("sizeInBytes", pa.int32()),
        ("cardinality", pa.int64()),
    ]
)
PROTOCOL_TYPE = pa.struct([("minReaderVersion", pa.int32()), ("minWriterVersion", pa.int32())])
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", pa.list_(pa.string())),
        ("configuration", STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
REMOVE_TYPE = pa.struct(
    [("path", pa.string()), ("deletionTimestamp", pa.int64()), ("dataChange", pa.bool_())]
)


def _schema_string(columns: int) -> str:
    fields = [{"name": "part", "type": "integer", "nullable": True, "metadata": {}}]
    fields += [{"name": f"c{i}", "type": "long", "nullable": True, "metadata": {}} for i in range(columns)]
    return json.dumps({"type": "struct", "fields": fields})


def _metadata(columns: int) -> dict:
    return {
        "id": "benchmark",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": _schema_string(columns),
        "partitionColumns": ["part"],
        "configuration": {},
        "createdTime": NOW_MS,
    }


def _stats(index: int, columns: int) -> str:
    mins = ",".join(f'"c{c}":{index * 100 + c}' for c in range(columns))
    maxs = ",".join(f'"c{c}":{index * 100 + c + 99}' for c in range(columns))
    nulls = ",".join(f'"c{c}":0' for c in range(columns))
    return f'{{"numRecords":100,"minValues":{{{mins}}},"maxValues":{{{maxs}}},"nullCount":{{{nulls}}}}}'


def _path(part: int) -> str:
    return f"part={part}/part-00000-{uuid.uuid4()}-c000.snappy.parquet"


def _write_checkpoint(
    log: Path, version: int, files: int, columns: int, parts: np.ndarray | None = None
) -> None:
    parts = np.arange(files) % 100 if parts is None else parts
    paths = pa.array([_path(int(p)) for p in parts])
    values = pa.array([str(p) for p in range(int(parts.max()) + 1)]).take(pa.array(parts))
    partition_values = pa.MapArray.from_arrays(
        pa.array(np.arange(files + 1, dtype=np.int32)), pa.array(["part"] * files), values
    )
    add = pa.StructArray.from_arrays(
        [
            paths,
            partition_values,
            pa.array(np.full(files, 123_456, np.int64)),
            pa.array(np.full(files, NOW_MS, np.int64)),
            pa.array(np.ones(files, bool)),
            pa.array([_stats(i, columns) for i in range(files)]),
            pa.nulls(files, STRING_MAP),
            pa.nulls(files, DV_TYPE),
        ],
        names=[
            "path",
            "partitionValues",
            "size",
            "modificationTime",
            "dataChange",
            "stats",
            "tags",
            "deletionVector",
        ],
    )
    rows = files + 2

    def placed(array: pa.Array, at: int) -> pa.Array:
        return pa.concat_arrays(
            [pa.nulls(at, array.type), array, pa.nulls(rows - at - len(array), array.type)]
        )

    table = pa.table(
        {
            "txn": pa.nulls(rows, TXN_TYPE),
            "add": placed(add, 2),
            "remove": pa.nulls(rows, REMOVE_TYPE),
            "metaData": placed(pa.array([_metadata(columns)], METADATA_TYPE), 1),
            "protocol": placed(pa.array([{"minReaderVersion": 1, "minWriterVersion": 2}], PROTOCOL_TYPE), 0),
        }
    )
    pq.write_table(table, log / f"{version:020d}.checkpoint.parquet", row_group_size=100_000)
    (log / "_last_checkpoint").write_text(
        json.dumps({"version": version, "size": rows, "numOfAddFiles": files})
    )


def _commit(log: Path, version: int, actions: list[dict]) -> None:
    info = {
        "commitInfo": {
            "timestamp": NOW_MS + version,
            "operation": "WRITE",
            "operationParameters": {"mode": "Append"},
        }
    }
    lines = [json.dumps(info), *(json.dumps(a, separators=(",", ":")) for a in actions)]
    (log / f"{version:020d}.json").write_text("\n".join(lines) + "\n")


def _add(part: int, columns: int, index: int) -> dict:
    return {
        "add": {
            "path": _path(part),
            "partitionValues": {"part": str(part)},
            "size": 123_456,
            "modificationTime": NOW_MS,
            "dataChange": True,
            "stats": _stats(index, columns),
        }
    }


def _create(log: Path, columns: int) -> None:
    _commit(
        log,
        0,
        [{"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}, {"metaData": _metadata(columns)}],
    )


def _txn(version: int) -> dict:
    return {"appId": f"bench-app-{version % 10}", "version": version, "lastUpdated": NOW_MS}


def generate_a(root: Path, files: int = 1_000_000) -> None:
    log = root / "_delta_log"
    _create(log, 3)
    _write_checkpoint(log, 1, files, 3)
    for version in range(2, 102):
        _commit(log, version, [{"txn": _txn(version)}, *(_add(k, 3, version * 100 + k) for k in range(100))])


def generate_b(root: Path) -> None:
    log = root / "_delta_log"
    _create(log, 3)
    live: list[str] = []
    for version in range(1, 10_000):
        actions = []
        if version % 10 == 0 and live:
            actions.append({"remove": {"path": live.pop(0), "deletionTimestamp": NOW_MS, "dataChange": True}})
        for k in range(3):
            action = _add((version + k) % 100, 3, version * 3 + k)
            live.append(action["add"]["path"])
            actions.append(action)
        _commit(log, version, actions)


def generate_c(root: Path) -> None:
    log = root / "_delta_log"
    _create(log, 20)
    _write_checkpoint(log, 1, 100_000, 20)
    for version in range(2, 12):
        _commit(log, version, [_add(k, 20, version * 10 + k) for k in range(10)])


def generate_a_rs(root: Path, files: int = 1_000_000) -> None:
    import deltalake

    generate_a(root, files)
    deltalake.DeltaTable(str(root)).create_checkpoint()


def generate_a_rs_tail(root: Path, files: int = 1_000_000) -> None:
    """A table delta-rs checkpointed after its small actions had come last, then 100 commits.

    (a-spark) without its ``.crc`` files (delta-rs writes none) and with the txns of ten older
    apps (``bench-old-*``) after the protocol and metaData, checkpointed at version 101 by
    delta-rs: its log replay puts the 100 commits' adds and txns first, then the old
    checkpoint's rows in their order, so protocol, metaData and the old apps' txns land at the
    end of one row group of ~1M rows. Then 100 commits (versions 102-201) of one add and a txn
    of a new app each.
    """
    import deltalake

    generate_a_spark(root, files)
    log = root / "_delta_log"
    for checksum in log.glob("*.crc"):
        checksum.unlink()
    checkpoint = log / f"{1:020d}.checkpoint.parquet"
    pq.write_table(_with_old_txns(pq.read_table(checkpoint)), checkpoint, row_group_size=2_000_000)
    deltalake.DeltaTable(str(root)).create_checkpoint()
    for version in range(102, 202):
        txn = {"appId": f"bench-tail-{version % 10}", "version": version, "lastUpdated": NOW_MS}
        _commit(log, version, [{"txn": txn}, _add(version % 100, 3, version * 100)])


#: The partition of exactly :data:`P_TARGET_FILES` files of the ``p`` tables, whose DELETE is timed.
P_TARGET, P_TARGET_FILES = 100, 100


def generate_p(root: Path, files: int = 1_000_000, layout: str = "core") -> None:
    """A table of ``files`` files in partitions 0-99 (equal) and partition 100 of exactly 100
    files (issue 32: a partition DELETE whose size does not grow with the table), checkpointed at
    version 11 after 10 commits of 10 adds, in one of three layouts:

    - ``core``: the core's checkpoint (sorted by partition, row groups of 32,768 rows,
      ``partitionValues_parsed`` with statistics);
    - ``rs``: delta-rs's (one row group, partitions in replay order, no ``partitionValues_parsed``);
    - ``spark``: the core's rewritten as Spark writes it with ``writeStatsAsStruct``: rows in hash
      order (every partition in every row group), three large row groups, every field optional,
      the page index.
    """
    import deltalake

    from airflow_delta_provider.core import DeltaTable

    log = root / "_delta_log"
    _create(log, 3)
    parts = np.concatenate(
        [np.full(P_TARGET_FILES, P_TARGET), np.arange(files - P_TARGET_FILES) % P_TARGET]
    ).astype(np.int64)
    _write_checkpoint(log, 1, files, 3, parts)
    for version in range(2, 12):
        _commit(log, version, [{"txn": _txn(version)}, *(_add(k, 3, version * 100 + k) for k in range(10))])
    if layout == "rs":
        deltalake.DeltaTable(str(root)).create_checkpoint()
        return
    DeltaTable(str(root)).checkpoint()
    if layout == "spark":
        checkpoint = log / f"{11:020d}.checkpoint.parquet"
        table = pq.read_table(checkpoint)
        table = table.cast(pa.schema([_optional(f) for f in table.schema]))
        order = np.random.default_rng(32).permutation(table.num_rows)
        pq.write_table(
            table.take(pa.array(order)), checkpoint, row_group_size=table.num_rows // 3 + 1, **SPARK_PAGES
        )


def _optional(field: pa.Field) -> pa.Field:
    data_type = field.type
    if pa.types.is_struct(data_type):
        data_type = pa.struct([_optional(child) for child in data_type])
    return pa.field(field.name, data_type, nullable=True)


def generate_a_spark(root: Path, files: int = 1_000_000) -> None:
    import pyarrow.compute as pc

    generate_a(root, files)
    checkpoint = root / "_delta_log" / f"{1:020d}.checkpoint.parquet"
    table = pq.read_table(checkpoint)
    table = table.cast(pa.schema([_optional(f) for f in table.schema]))
    small = pc.invert(pc.is_valid(table.column("add")))
    order = pc.sort_indices(pa.table({"small": small}), sort_keys=[("small", "ascending")])
    pq.write_table(table.take(order), checkpoint, row_group_size=2_000_000, **SPARK_PAGES)
    _write_spark_checksums(root / "_delta_log", files)


#: Pages as Spark's parquet-mr writes them: at most 20,000 rows, with the page index.
SPARK_PAGES = {"max_rows_per_page": 20_000, "write_page_index": True}


def generate_a_spark_nocrc(root: Path, files: int = 1_000_000) -> None:
    """(a-spark) without its ``.crc`` files: the small state comes from the checkpoint, whose
    protocol, metaData and (added here) older apps' txns are last in its one row group."""
    generate_a_spark(root, files)
    log = root / "_delta_log"
    for checksum in log.glob("*.crc"):
        checksum.unlink()
    checkpoint = log / f"{1:020d}.checkpoint.parquet"
    pq.write_table(
        _with_old_txns(pq.read_table(checkpoint)), checkpoint, row_group_size=2_000_000, **SPARK_PAGES
    )


def generate_a_spark_multipart(root: Path, files: int = 1_000_000) -> None:
    """(a-spark-nocrc) with its checkpoint in two parts, split by path as Spark does; the
    non-file actions in the second part, last."""
    import pyarrow.compute as pc

    generate_a_spark_nocrc(root, files)
    log = root / "_delta_log"
    single = log / f"{1:020d}.checkpoint.parquet"
    table = pq.read_table(single)
    single.unlink()
    is_file = pc.is_valid(table.column("add"))
    first = pc.and_(
        is_file, pc.equal(pc.bit_wise_and(pc.utf8_length(pc.struct_field(table.column("add"), "path")), 1), 0)
    )
    parts = [table.filter(first), table.filter(pc.invert(pc.fill_null(first, False)))]
    for number, part in enumerate(parts, start=1):
        name = log / f"{1:020d}.checkpoint.{number:010d}.{len(parts):010d}.parquet"
        pq.write_table(part, name, row_group_size=2_000_000, **SPARK_PAGES)
    (log / "_last_checkpoint").write_text(
        json.dumps({"version": 1, "size": table.num_rows, "parts": len(parts), "numOfAddFiles": files})
    )


def _with_old_txns(table: pa.Table) -> pa.Table:
    """``table`` (a checkpoint) with the txns of ten older apps (``bench-old-*``) appended."""
    old = [{"appId": f"bench-old-{k}", "version": k, "lastUpdated": NOW_MS} for k in range(10)]
    rows = pa.table(
        {
            name: pa.array(old, table.schema.field(name).type) if name == "txn" else pa.nulls(10, field.type)
            for name, field in zip(table.column_names, table.schema, strict=True)
        }
    )
    return pa.concat_tables([table, rows])


def _write_spark_checksums(log: Path, files: int) -> None:
    """A ``.crc`` per version, as Spark writes them after each commit (``VersionChecksum``).

    Spark keeps ``setTransactions`` in the file while there are at most 100 (and no txn
    retention is set) and ``domainMetadata`` while there are at most 10; this table has 10
    apps and no domains. Jackson leaves out absent options; no ``allFiles`` (large table).
    """
    protocol = {"minReaderVersion": 1, "minWriterVersion": 2}
    txns: dict[str, dict] = {}
    for version in range(102):
        if version >= 2:
            txn = _txn(version)
            txns[txn["appId"]] = txn
        count = 0 if version == 0 else files + 100 * max(0, version - 1)
        checksum = {
            "txnId": str(uuid.UUID(int=version)),
            "tableSizeBytes": count * 123_456,
            "numFiles": count,
            "numMetadata": 1,
            "numProtocol": 1,
            "setTransactions": list(txns.values()),
            "domainMetadata": [],
            "metadata": _metadata(3),
            "protocol": protocol,
        }
        (log / f"{version:020d}.crc").write_text(json.dumps(checksum))


#: The checkpoint sizes of the a-rs / a-spark variants (the unsuffixed name is 1M).
SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000}

GENERATORS: dict[str, Callable[[Path], None]] = {
    "a": generate_a,
    "b": generate_b,
    "c": generate_c,
    "a-rs": generate_a_rs,
    "a-spark": generate_a_spark,
    "a-rs-tail": generate_a_rs_tail,
    "a-spark-nocrc": generate_a_spark_nocrc,
    "a-spark-mp": generate_a_spark_multipart,
}
for _layout in ("core", "rs", "spark"):
    for _name, _files in (("10k", 10_000), ("1m", 1_000_000)):
        GENERATORS[f"p-{_layout}-{_name}"] = functools.partial(generate_p, files=_files, layout=_layout)
EXPECTED = {
    "a": (101, 1_010_000),
    "b": (9_999, 9_999 * 3 - 999),
    "c": (11, 100_100),
    "a-rs": (101, 1_010_000),
    "a-spark": (101, 1_010_000),
    "a-rs-tail": (201, 1_010_100),
    "a-spark-nocrc": (101, 1_010_000),
    "a-spark-mp": (101, 1_010_000),
}
for _layout in ("core", "rs", "spark"):
    EXPECTED[f"p-{_layout}-10k"] = (11, 10_100)
    EXPECTED[f"p-{_layout}-1m"] = (11, 1_000_100)
for _suffix, _files in SIZES.items():
    GENERATORS[f"a-{_suffix}"] = functools.partial(generate_a, files=_files)
    EXPECTED[f"a-{_suffix}"] = (101, _files + 10_000)
    GENERATORS[f"a-rs-{_suffix}"] = functools.partial(generate_a_rs, files=_files)
    GENERATORS[f"a-spark-{_suffix}"] = functools.partial(generate_a_spark, files=_files)
    EXPECTED[f"a-rs-{_suffix}"] = EXPECTED[f"a-spark-{_suffix}"] = (101, _files + 10_000)
    GENERATORS[f"a-rs-tail-{_suffix}"] = functools.partial(generate_a_rs_tail, files=_files)
    EXPECTED[f"a-rs-tail-{_suffix}"] = (201, _files + 10_100)
    for _name, _generator in (
        ("a-spark-nocrc", generate_a_spark_nocrc),
        ("a-spark-mp", generate_a_spark_multipart),
    ):
        GENERATORS[f"{_name}-{_suffix}"] = functools.partial(_generator, files=_files)
        EXPECTED[f"{_name}-{_suffix}"] = (101, _files + 10_000)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--tables", default="a,b,c,a-rs,a-spark")
    args = parser.parse_args()
    for name in args.tables.split(","):
        root = DATA / name
        if (root / ".complete").exists() and not args.force:
            print(f"table {name}: present ({root})")
            continue
        shutil.rmtree(root, ignore_errors=True)
        (root / "_delta_log").mkdir(parents=True)
        started = time.perf_counter()
        GENERATORS[name](root)
        _validate(name, root)
        (root / ".complete").touch()
        print(f"table {name}: generated in {time.perf_counter() - started:.1f} s ({root})")


def _validate(name: str, root: Path) -> None:
    """delta-rs must open each table at the expected version with the expected file count."""
    import deltalake

    table = deltalake.DeltaTable(str(root))
    files = table.get_add_actions(flatten=False).num_rows
    expected_version, expected_files = EXPECTED[name]
    if (table.version(), files) != (expected_version, expected_files):
        raise SystemExit(
            f"table {name}: delta-rs sees version {table.version()} with {files} files, "
            f"expected {expected_version} / {expected_files}"
        )


if __name__ == "__main__":
    main()
