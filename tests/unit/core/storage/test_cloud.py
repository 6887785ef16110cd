"""The Azure and GCS stores against real emulators on loopback (Azurite, fake-gcs-server).

The same proofs as on S3: put-if-absent is the store's own precondition (one request), so
of 8 processes racing for one version name exactly one wins; listings, batched deletes.
"""

from __future__ import annotations

import base64
import logging
import traceback
import uuid
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pyarrow as pa
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import CommitFileExistsError
from airflow_delta_provider.core.storage import open_store


def test_put_if_absent_is_the_stores_precondition(cloud):
    storage = open_store(cloud["uri"], cloud["options"])
    assert type(storage) is cloud["store"]
    path = storage.log_path("00000000000000000000.json")
    storage.put_if_absent(path, b"first")
    with pytest.raises(CommitFileExistsError, match=r"00000000000000000000\.json already exists"):
        storage.put_if_absent(path, b"second")
    assert storage.read_bytes(path) == b"first"


def _race(uri: str, options: dict[str, Any], token: int) -> bool:
    storage = open_store(uri, {**options, "skip_instance_cache": True})
    try:
        storage.put_if_absent(storage.log_path("00000000000000000001.json"), str(token).encode() * 1000)
        return True
    except CommitFileExistsError:
        return False


def test_one_winner_among_eight_processes(cloud):
    with ProcessPoolExecutor(8) as pool:
        outcomes = list(pool.map(_race, [cloud["uri"]] * 8, [cloud["options"]] * 8, range(8)))
    assert outcomes.count(True) == 1
    storage = open_store(cloud["uri"], cloud["options"])
    winner = outcomes.index(True)
    assert storage.read_bytes(storage.log_path("00000000000000000001.json")) == str(winner).encode() * 1000


def test_listing_tree_and_batched_deletes(cloud):
    storage = open_store(cloud["uri"], cloud["options"])
    names = [f"p={p}/q={q}/part-{i}.parquet" for p in "ab" for q in "xy" for i in range(3)]
    for name in [*names, "top.parquet", "_delta_log/00000000000000000000.json", "p=a/_hidden/x"]:
        storage.put(storage.join(name), b"data")
    for name in ["00000000000000000002.json", "00000000000000000001.json", "_sidecars/x.parquet"]:
        storage.put(storage.log_path(name), b"{}")
    assert [f.name for f in storage.list_log("00000000000000000001")] == [
        "00000000000000000001.json",
        "00000000000000000002.json",
    ]
    listing = storage.list_tree(lambda part: part.startswith("_"))
    assert sorted(f[0] for f in listing.files) == sorted([*names, "top.parquet"])
    assert all(size == 4 and mtime > 0 for _, size, mtime in listing.files)
    assert listing.empty_directories == []

    doomed = [storage.join(n) for n in names] + [storage.join("p=a/never-existed.parquet")]
    assert storage.delete_many(doomed) == len(names)
    left = storage.list_tree(lambda part: part.startswith("_"))
    assert [f[0] for f in left.files] == ["top.parquet"]
    assert storage.read_bytes(storage.log_path("00000000000000000000.json")) == b"data"


def test_a_wrong_azure_key_fails_without_showing_it(
    azurite_endpoint, azure_container, azure_storage_options, caplog
):
    """Azurite refuses a wrong account key; the planted key reaches neither the error, its
    traceback nor the log, and nothing is written."""
    planted = base64.b64encode(f"Pl4nted-{uuid.uuid4().hex}".encode()).decode()
    options = {
        "connection_string": (
            f"DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey={planted};"
            f"BlobEndpoint={azurite_endpoint};"
        )
    }
    caplog.set_level(logging.DEBUG)
    with pytest.raises(Exception) as raised:
        DeltaTable.create(
            f"az://{azure_container}/t", pa.schema([("id", pa.int64())]), storage_options=options
        )
    text = "".join(traceback.format_exception(raised.value)) + repr(raised.value) + caplog.text
    assert "AuthenticationFailed" in text or "authenticat" in text.lower(), text[-2000:]
    assert planted not in text
    assert planted[:20] not in text
    assert open_store(f"az://{azure_container}/t", azure_storage_options).list_log() == []


def test_ranges_of_many_objects_read_concurrently(cloud):
    """``read_ranges`` (footer statistics): one range of each object, a missing one handed back."""
    storage = open_store(cloud["uri"], cloud["options"])
    paths = [storage.join(f"p={i % 2}/f{i}.parquet") for i in range(6)]
    for i, path in enumerate(paths):
        storage.put(path, bytes(range(i, i + 20)))
    missing = storage.join("p=0/gone.parquet")
    found = storage.read_ranges([*paths, missing], [15] * 7, [5] * 7, max_workers=4)
    assert found[:6] == [bytes(range(i + 15, i + 20)) for i in range(6)]
    assert isinstance(found[6], Exception)
