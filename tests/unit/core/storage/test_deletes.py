"""Batch deletes on Azure (Blob Batch) and GCS (JSON API batch), against Azurite and fake-gcs-server.

Exact accounting (deleted, missing, refused, by name), nothing outside the given paths touched,
a real partial failure (a blob under a lease), the fallback to single deletes when the service
refuses batches, and VACUUM through the batch path.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import DeleteFilesError
from airflow_delta_provider.core.storage import AzureStore, open_store
from airflow_delta_provider.core.storage.deletes import DELETED, MISSING

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

#: Names a batch body and its URLs must carry as written: partition values with ``=``, spaces,
#: percent signs (already-encoded-looking too), ``+``, ``#``, ``?``, ``&`` and non-ASCII.
AWKWARD = ["p=a b/part %d.parquet", "p=50%25/x%%y-%d.parquet", "q=ü+é/a#b?c&d-%d.parquet"]


def names(count: int) -> list[str]:
    return [AWKWARD[i % len(AWKWARD)].replace("%d", str(i)) for i in range(count)]


def listed(storage: Any, bucket: str) -> set[str]:
    storage.fs.invalidate_cache()
    return {path.removeprefix(bucket + "/") for path in storage.fs.find(bucket)}


def test_a_few_hundred_objects_go_in_batches_and_only_those_are_deleted(cloud):
    storage = open_store(cloud["uri"], cloud["options"])
    bucket = cloud["bucket"]
    doomed = names(260)  # more than one batch on both (256, 100)
    kept_inside = ["p=a b/keep.parquet", "_delta_log/00000000000000000000.json"]
    kept_outside = ["other/p=a b/part 0.parquet", "t2/p=a b/part 1.parquet"]
    storage.fs.pipe(
        {storage.join(n): b"x" for n in [*doomed, *kept_inside]}
        | {f"{bucket}/{n}": b"x" for n in kept_outside}
    )
    paths = [storage.join(n) for n in doomed]
    paths.insert(150, storage.join("p=a b/never-existed.parquet"))  # missing: already deleted

    assert storage.delete_many(paths) == len(doomed)

    assert listed(storage, bucket) == {f"t/{n}" for n in kept_inside} | set(kept_outside)
    size = type(storage).delete_batch_size
    assert storage.delete_requests == {"batch": math.ceil(len(paths) / size), "single": 0}
    assert storage.batch_refused is None


def test_a_leased_blob_is_named_and_the_rest_of_its_batch_deleted(azure_container, azure_storage_options):
    """A real partial failure: Azurite answers 412 LeaseIdMissing for a blob under an active
    lease, inside a batch whose other deletes succeed (and again when retried alone)."""
    from azure.storage.blob import BlobServiceClient

    storage = open_store(f"az://{azure_container}/t", azure_storage_options)
    doomed = names(5)
    storage.fs.pipe({storage.join(n): b"x" for n in doomed})
    blob = BlobServiceClient.from_connection_string(
        azure_storage_options["connection_string"]
    ).get_blob_client(azure_container, f"t/{doomed[2]}")
    lease = blob.acquire_lease(-1)
    try:
        with pytest.raises(DeleteFilesError) as raised:
            storage.delete_many([storage.join(n) for n in doomed])
        assert [path for path, _ in raised.value.failed] == [storage.join(doomed[2])]
        reason = raised.value.failed[0][1]
        assert "412 LeaseIdMissing" in reason and "alone:" in reason
        message = str(raised.value)
        assert storage.to_uri(storage.join(doomed[2])) in message
        assert "refused to delete 1 of 5 file(s)" in message and "run again" in message
        assert listed(storage, azure_container) == {f"t/{doomed[2]}"}
        assert storage.delete_requests == {"batch": 1, "single": 1}
        assert storage.batch_refused is None  # one refused blob is not a refused batch
    finally:
        lease.release()
    assert storage.delete_many([storage.join(doomed[2])]) == 1
    assert listed(storage, azure_container) == set()


class _SdkBatchStore(AzureStore):
    """Sends its batches with the SDK's own async ``ContainerClient.delete_blobs``, whose body
    Azurite refuses as a whole (400 InvalidInput): a real service answer meaning "no batches"."""

    async def _send_delete_batch(self, paths: Sequence[str]) -> Mapping[str, str]:
        fs: Any = self.fs
        client = fs.service_client.get_container_client(fs.split_path(paths[0])[0])
        parts = await client.delete_blobs(*(fs.split_path(p)[1] for p in paths), raise_on_any_failure=False)
        answers = {}
        async for path, part in _zip(paths, parts):
            ok = {202: DELETED, 404: MISSING}
            answers[path] = ok.get(
                part.status_code, f"{part.status_code} {part.headers.get('x-ms-error-code')}"
            )
        return answers


async def _zip(paths: Sequence[str], parts: Any) -> Any:
    index = 0
    async for part in parts:
        if index < len(paths):
            yield paths[index], part
        index += 1


def test_a_service_refusing_batches_gets_single_deletes_and_a_warning(
    azure_container, azure_storage_options, caplog
):
    storage = _SdkBatchStore(
        open_store(f"az://{azure_container}/t", azure_storage_options).path, azure_storage_options
    )
    storage.fs.pipe({storage.join(n): b"x" for n in names(12)})
    first, second = names(12)[:6], names(12)[6:]

    assert storage.delete_many([storage.join(n) for n in first]) == 6
    assert storage.batch_refused is not None and "400 InvalidInput" in storage.batch_refused
    assert "does not accept batch delete requests" in caplog.text
    assert storage.delete_requests == {"batch": 1, "single": 6}
    # From then on: one request per object, no batch tried.
    assert storage.delete_many([storage.join(n) for n in second]) == 6
    assert storage.delete_requests == {"batch": 1, "single": 12}
    assert listed(storage, azure_container) == set()


def test_vacuum_through_the_batch_path_deletes_what_it_planned(cloud):
    """Tombstoned files and orphans with awkward names: the dry run's plan is exactly what
    disappears, in batch requests; the log, hidden files and the live file stay; the table reads."""
    schema = pa.schema([("id", pa.int64())])
    table = DeltaTable.create(cloud["uri"], schema, storage_options=cloud["options"])
    storage = table.storage
    for version in range(4):
        relative = f"d v {version % 2}/part-{version}.parquet"
        with storage.fs.open(storage.join(relative), "wb") as out:
            pq.write_table(pa.table({"id": pa.array([version], pa.int64())}), out)
        table.commit_files([relative], mode="overwrite" if version == 3 else "append")
    orphans = names(40)
    storage.fs.pipe({storage.join(f"orphans/{n}"): b"o" for n in orphans} | {storage.join("_tmp/x"): b"h"})
    before = listed(storage, cloud["bucket"])
    later = datetime.now(tz=UTC) + timedelta(minutes=5)

    plan = table.vacuum(retention="0 hours", enforce_retention_duration=False, now=later, dry_run=True)
    result = table.vacuum(retention="0 hours", enforce_retention_duration=False, now=later, log_commits=False)

    # The files as URIs (a literal '%' escaped as '%25'): decoded, the names on storage.
    planned = {unquote(f.removeprefix(cloud["uri"] + "/")) for f in plan.files}
    assert planned == {f"d v {v % 2}/part-{v}.parquet" for v in range(3)} | {f"orphans/{n}" for n in orphans}
    assert set(result.files) == set(plan.files) and result.num_deleted == len(planned)
    vacuum_info = "t/_delta_log/_last_vacuum_info"
    assert listed(storage, cloud["bucket"]) == (before - {f"t/{p}" for p in planned}) | {vacuum_info}
    assert storage.delete_requests["single"] == 0 and storage.delete_requests["batch"] >= 1
    assert table.snapshot().to_pyarrow_table()["id"].to_pylist() == [3]


def test_a_new_commit_is_listed_at_once_by_the_same_store(cloud):
    """adlfs caches directory listings and ignores ``refresh=True``; the store must not serve a
    log listing from before a commit (a second commit through one table would conflict)."""
    storage = open_store(cloud["uri"], cloud["options"])
    storage.put_if_absent(storage.log_path("00000000000000000000.json"), b"{}")
    assert [f.name for f in storage.list_log()] == ["00000000000000000000.json"]
    storage.put_if_absent(storage.log_path("00000000000000000001.json"), b"{}")
    assert [f.name for f in storage.list_log()] == ["00000000000000000000.json", "00000000000000000001.json"]


def test_a_gcs_batch_answer_is_read_per_object_by_content_id():
    """A synthetic response (fake-gcs-server can only fail a delete with 404, see its
    ``deleteObject``, so a refused object cannot be produced there): answers are matched by
    ``Content-ID`` whatever their order, and a refusal keeps the service's message."""
    from airflow_delta_provider.core.storage.gcs import _answers

    paths = ["b/t/a", "b/t/b", "b/t/c", "b/t/d"]
    boundary = "xyz"
    parts = [
        ("2", "HTTP/1.1 404 Not Found\r\n\r\n"),
        ("0", "HTTP/1.1 204 No Content\r\n\r\n"),
        (
            "1",
            'HTTP/1.1 403 Forbidden\r\nContent-Type: application/json\r\n\r\n{"error": {"code": 403, '
            '"message": "x@y.iam.gserviceaccount.com does not have storage.objects.delete access"}}',
        ),
    ]
    text = (
        "".join(
            f"--{boundary}\r\nContent-Type: application/http\r\nContent-ID: <response-{i}>\r\n\r\n{body}\r\n"
            for i, body in parts
        )
        + f"--{boundary}--\r\n"
    )
    answers = _answers(paths, f"multipart/mixed; boundary={boundary}", text)
    assert answers == {
        "b/t/a": DELETED,
        "b/t/b": "403 x@y.iam.gserviceaccount.com does not have storage.objects.delete access",
        "b/t/c": MISSING,
    }  # b/t/d had no answer: the store retries it alone
