"""Builders for hand-written Delta logs: the bad inputs real writers rarely produce."""

from __future__ import annotations

import datetime as dt
import io
import json
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.storage import AzureStore, GcsStore

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA_STRING = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)

#: A deletion vector descriptor (stored in a file, with an offset).
DV = {
    "storageType": "u",
    "pathOrInlineDv": "ab^-aqEH.-t@S}K{vb[*k^",
    "offset": 1,
    "sizeInBytes": 36,
    "cardinality": 2,
}


def protocol(reader: int = 1, writer: int = 2, **features: Any) -> dict[str, Any]:
    return {"protocol": {"minReaderVersion": reader, "minWriterVersion": writer, **features}}


def metadata(
    configuration: dict[str, str] | None = None,
    partition_columns: list[str] | None = None,
    schema_string: str = SCHEMA_STRING,
) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "test-table",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_string,
            "partitionColumns": partition_columns or [],
            "configuration": configuration or {},
            "createdTime": 1,
        }
    }


def add(path: str, size: int = 10, **extra: Any) -> dict[str, Any]:
    return {
        "add": {
            "path": path,
            "partitionValues": {},
            "size": size,
            "modificationTime": 1,
            "dataChange": True,
            **extra,
        }
    }


def remove(path: str, deletion_timestamp: int = 1, **extra: Any) -> dict[str, Any]:
    return {"remove": {"path": path, "deletionTimestamp": deletion_timestamp, "dataChange": True, **extra}}


def txn(app_id: str, version: int, last_updated: int | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"appId": app_id, "version": version}
    if last_updated is not None:
        payload["lastUpdated"] = last_updated
    return {"txn": payload}


def commit_info(operation: str = "WRITE", **extra: Any) -> dict[str, Any]:
    return {"commitInfo": {"timestamp": 1, "operation": operation, **extra}}


class LogWriter:
    """Writes commit files (and raw bytes) into ``<root>/_delta_log``."""

    protocol = staticmethod(protocol)
    metadata = staticmethod(metadata)
    add = staticmethod(add)
    remove = staticmethod(remove)
    txn = staticmethod(txn)
    commit_info = staticmethod(commit_info)

    def __init__(self, root: Path) -> None:
        self.root = root
        self.log = root / "_delta_log"
        self.log.mkdir(parents=True, exist_ok=True)

    def commit(self, version: int, *actions: dict[str, Any]) -> Path:
        return self.raw(f"{version:020d}.json", "\n".join(json.dumps(a) for a in actions).encode() + b"\n")

    def raw(self, name: str, data: bytes) -> Path:
        path = self.log / name
        path.write_bytes(data)
        return path

    def basic(self, versions: int = 1) -> None:
        """Commit 0 creates the table with one file; each further commit adds one file."""
        self.commit(0, commit_info("CREATE TABLE"), protocol(), metadata(), add("f0.parquet"))
        for version in range(1, versions):
            self.commit(version, commit_info(), add(f"f{version}.parquet"))


@pytest.fixture
def log_writer(tmp_path: Path) -> LogWriter:
    return LogWriter(tmp_path / "table")


def _log_state(root: Path | str) -> dict[str, bytes]:
    import os

    log = os.path.join(str(root), "_delta_log")
    state = {}
    for directory, _, names in os.walk(log):
        for name in names:
            path = os.path.join(directory, name)
            with open(path, "rb") as f:
                state[os.path.relpath(path, log)] = f.read()
    return state


@pytest.fixture
def log_state() -> Any:
    """``log_state(root)``: every file under ``<root>/_delta_log`` (subdirectories too) with its
    content; two equal states mean nothing in the log was written, replaced or deleted."""
    return _log_state


@pytest.fixture
def table_state() -> Any:
    """``table_state(root)``: what a refused or failed operation must leave as it was: the table's
    version and active files (or the name of the error loading them), every file of ``_delta_log``
    with its content, and every file beside the root (outside the table) with its size and time."""
    from pathlib import Path

    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.core.errors import DeltaError

    def state(root: Path | str) -> tuple[Any, dict[str, bytes], dict[str, tuple[int, int]]]:
        root = Path(root)
        try:
            snapshot = DeltaTable(str(root)).snapshot()
            loaded: Any = (snapshot.version, sorted(snapshot.files().column("path").to_pylist()))
        except DeltaError as err:
            loaded = type(err).__name__
        outside = {
            str(p.relative_to(root.parent)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.parent.rglob("*")
            if p.is_file() and root not in p.parents
        }
        return loaded, _log_state(root), outside

    return state


# --- Parquet files for the footer statistics tests -------------------------------------

#: A string longer than Delta's 32-character prefix, ending in characters that need U+10FFFF.
LONG = "k" * 40
LONG_MAX = "z" * 31 + "\U0010ffff" * 3 + "\u00e9tail"
UTC = dt.UTC


def _rows(n: int, offset: int) -> pa.Table:
    base = dt.datetime(2024, 5, 6, 7, 8, 9, 987654)
    return pa.table(
        {
            "i": pa.array([offset + k if k % 3 else None for k in range(n)], pa.int64()),
            "small": pa.array([k - 5 for k in range(n)], pa.int8()),
            "u": pa.array([2**32 - 1 - k for k in range(n)], pa.uint32()),
            "s": [f"{LONG}{offset + k}" if k % 2 else LONG_MAX for k in range(n)],
            "d": pa.array([Decimal(f"{offset + k}.{k:02d}") for k in range(n)], pa.decimal128(9, 2)),
            "big": pa.array(
                [Decimal(f"-12345678901234567890.{k:09d}") for k in range(n)], pa.decimal128(38, 9)
            ),
            "day": pa.array([dt.date(999 + k, 1, 2) for k in range(n)], pa.date32()),
            "ts": pa.array(
                [base + dt.timedelta(microseconds=k) for k in range(n)], pa.timestamp("us", tz="UTC")
            ),
            "ns": pa.array([base + dt.timedelta(microseconds=k) for k in range(n)], pa.timestamp("ns")),
            "ms": pa.array([base for _ in range(n)], pa.timestamp("ms")),
            "flag": pa.array([k % 2 == 0 for k in range(n)]),
            "raw": pa.array([b"x%d" % k for k in range(n)], pa.binary()),
            "nested": pa.array(
                [{"a": k, "b": {"c": f"c{k}"}, "tags": [str(k)]} for k in range(n)],
                pa.struct(
                    [
                        ("a", pa.int32()),
                        ("b", pa.struct([("c", pa.string())])),
                        ("tags", pa.list_(pa.string())),
                    ]
                ),
            ),
            "empty": pa.array([None] * n, pa.string()),
        }
    )


@pytest.fixture(scope="session")
def varied_parquet() -> dict[str, bytes]:
    """name -> Parquet bytes: each file a different shape of footer (footer statistics tests)."""
    files: dict[str, bytes] = {}

    def write(name: str, table: pa.Table, **options: object) -> None:
        sink = io.BytesIO()
        pq.write_table(table, sink, **options)
        files[name] = sink.getvalue()

    write("plain.parquet", _rows(7, 0))
    write("row-groups.parquet", _rows(9, 100), row_group_size=2)
    write("dict-off.parquet", _rows(5, 200), use_dictionary=False, store_decimal_as_integer=True)
    write("no-stats.parquet", _rows(3, 300), write_statistics=["i", "s"])
    int96 = pa.table({"t": pa.array([dt.datetime(2024, 1, 1), None], pa.timestamp("us")), "n": [1, 2]})
    write("int96.parquet", int96, use_deprecated_int96_timestamps=True)
    write("floats.parquet", pa.table({"f": [1.0, float("nan")], "n": [1, 2]}))
    # Much more data than one tail read: the footer is found at the end of a partial read.
    write(
        "large.parquet",
        pa.table({"i": pa.array(range(0, 40_000_000, 199), pa.int64())}),
        use_dictionary=False,
    )
    # ARROW:schema holds the schema's metadata: a footer much larger than one 64 KiB tail read.
    big = _rows(4, 400).replace_schema_metadata({"padding": "p" * 200_000})
    write("big-footer.parquet", big)
    return files


@pytest.fixture(scope="session")
def varied_stats_columns() -> list[tuple[str, ...]]:
    """Stats columns of the table the varied files belong to (some absent from some files)."""
    return [
        ("i",),
        ("small",),
        ("u",),
        ("s",),
        ("d",),
        ("big",),
        ("day",),
        ("ts",),
        ("ns",),
        ("ms",),
        ("flag",),
        ("raw",),
        ("nested", "a"),
        ("nested", "b", "c"),
        ("nested", "tags"),
        ("empty",),
        ("missing",),
        ("t",),
        ("n",),
        ("f",),
    ]


@pytest.fixture(params=["azure", "gcs"])
def cloud(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A fresh table location on one emulator (Azurite, fake-gcs-server): uri, options, the
    store class expected, and the container or bucket."""
    if request.param == "azure":
        container = request.getfixturevalue("azure_container")
        options = request.getfixturevalue("azure_storage_options")
        return {"uri": f"az://{container}/t", "options": options, "store": AzureStore, "bucket": container}
    bucket = request.getfixturevalue("gcs_bucket")
    options = request.getfixturevalue("gcs_storage_options")
    return {"uri": f"gs://{bucket}/t", "options": options, "store": GcsStore, "bucket": bucket}
