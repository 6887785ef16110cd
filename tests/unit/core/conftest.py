"""Builders for hand-written Delta logs: the bad inputs real writers rarely produce."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import pytest

from airflow_delta_provider.core.storage import AzureStore, GcsStore

if TYPE_CHECKING:
    from pathlib import Path

SCHEMA_STRING = json.dumps(
    {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
)


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
