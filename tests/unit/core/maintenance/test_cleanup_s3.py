"""Log cleanup on S3 (a real moto server on loopback): server-set times, batched parallel deletes."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pyarrow as pa
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import PostCommitHookProperties, write_deltalake

from airflow_delta_provider.core import DeltaTable

pytestmark = pytest.mark.s3


def cleaned(result: Any) -> list[str]:
    """The files a cleanup deleted (planned), relative to ``_delta_log`` (the result has URIs)."""
    return [uri.split("/_delta_log/", 1)[1] for uri in result.files]


NO_HOOKS = PostCommitHookProperties(create_checkpoint=False, cleanup_expired_logs=False)


def rs_options(endpoint: str) -> dict[str, str]:
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


def log_keys(endpoint: str, bucket: str) -> set[str]:
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    listed = s3.list_objects_v2(Bucket=bucket, Prefix="t/_delta_log/").get("Contents", [])
    return {o["Key"].removeprefix("t/_delta_log/") for o in listed}


def append(uri: str, value: int, endpoint: str) -> None:
    data = pa.table({"id": pa.array([value], pa.int64())})
    options = rs_options(endpoint)
    write_deltalake(uri, data, mode="append", storage_options=options, post_commithook_properties=NO_HOOKS)
    # S3 times have one-second resolution; Delta adjusts equal times and an adjusted checkpoint
    # ends no group, so the versions are written in different seconds (no timing is asserted).
    time.sleep(1.05)


def test_cleanup_on_s3_deletes_the_expired_group_and_delta_rs_reads_on(
    s3_bucket: str, s3_storage_options: dict[str, Any], s3_endpoint: str
) -> None:
    uri = f"s3://{s3_bucket}/t"
    for value in range(3):
        append(uri, value, s3_endpoint)
    table = DeltaTable(uri, s3_storage_options)
    table.checkpoint(2)
    time.sleep(1.05)
    append(uri, 3, s3_endpoint)
    later = datetime.now(tz=UTC) + timedelta(days=31)  # versions 0-2 are past the 30-day retention then

    plan = table.cleanup_logs(now=later, dry_run=True)
    assert plan.checkpoint_version == 2 and plan.earliest_retained_version == 2
    assert set(cleaned(plan)) == {f"{v:020d}.json" for v in (0, 1)}
    assert {f"{v:020d}.json" for v in (0, 1)} <= log_keys(s3_endpoint, s3_bucket)

    result = table.cleanup_logs(now=later, max_workers=4)
    assert cleaned(result) == cleaned(plan)
    left = log_keys(s3_endpoint, s3_bucket)
    assert not {f"{v:020d}.json" for v in (0, 1)} & left
    assert {f"{2:020d}.json", f"{2:020d}.checkpoint.parquet", "_last_checkpoint"} <= left
    rows = RsDeltaTable(uri, storage_options=rs_options(s3_endpoint)).to_pyarrow_table()
    assert sorted(rows["id"].to_pylist()) == [0, 1, 2, 3]
    again = DeltaTable(uri, s3_storage_options)
    assert sorted(again.snapshot(2).to_pyarrow_table()["id"].to_pylist()) == [0, 1, 2]
