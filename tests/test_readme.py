"""Every Python example of the README runs as written (against moto's S3 on loopback)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

README = Path(__file__).resolve().parents[1] / "README.md"
BUCKET = "bucket"


def python_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


@pytest.fixture
def readme_s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The README's ``s3://bucket/events``: moto stands in for S3 through the standard AWS
    environment variables, so the example's code runs unchanged."""
    import boto3

    for name, value in {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
    }.items():
        monkeypatch.setenv(name, value)
    client = boto3.client("s3", region_name="eu-west-1")
    client.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": "eu-west-1"})
    yield
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for item in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=item["Key"])
    client.delete_bucket(Bucket=BUCKET)


def test_the_readme_has_a_core_example() -> None:
    assert any("DeltaTable(" in example for example in python_examples())


@pytest.mark.s3
def test_the_core_example_runs_as_written(readme_s3: None) -> None:
    import s3fs

    from airflow_delta_provider.core import DeltaTable

    fs = s3fs.S3FileSystem()
    DeltaTable.create(
        f"s3://{BUCKET}/events",
        pa.schema([("id", pa.int64()), ("ds", pa.string())]),
        partition_by=["ds"],
        storage_options={"AWS_REGION": "eu-west-1"},
    )
    for day in ("2024-01-01", "2024-01-02"):
        with fs.open(f"{BUCKET}/events/runs/{day}/ds={day}/part-0.parquet", "wb") as f:
            pq.write_table(pa.table({"id": [1, 2, 3]}), f)

    (example,) = [e for e in python_examples() if "DeltaTable(" in e]
    namespace: dict[str, object] = {}
    exec(compile(example, str(README), "exec"), namespace)

    table = namespace["table"]
    assert isinstance(table, DeltaTable)
    history = table.history()
    assert [h["operation"] for h in history][:2] == ["WRITE", "WRITE"]
    assert table.snapshot().app_transaction_version("ingest") == 20240101
    assert table.snapshot().to_pyarrow_table().num_rows == 6
