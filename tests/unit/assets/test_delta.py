"""Table assets (URI = the table's storage URI), their event extras, and OpenLineage naming."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import pytest
from airflow.sdk import Asset

from airflow_delta_provider.assets.delta import (
    asset_event_extra,
    delta_table_asset,
    event_version_range,
    table_asset_uri,
)
from airflow_delta_provider.core.transaction.commit_plan import CommitResult
from airflow_delta_provider.openlineage import dataset_naming, output_dataset

if TYPE_CHECKING:
    from pathlib import Path


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        pytest.param("/data/lake/events/", "file:///data/lake/events", id="abs-path-trailing-slash"),
        pytest.param("file:///data/lake/events", "file:///data/lake/events", id="file-uri"),
        pytest.param("file:/data/lake/events", "file:///data/lake/events", id="file-single-slash"),
        pytest.param("s3://bucket/lake/events/", "s3://bucket/lake/events", id="s3"),
        pytest.param("s3a://bucket/lake/events", "s3://bucket/lake/events", id="s3a-is-s3"),
        pytest.param("gs://bucket/events", "gs://bucket/events", id="gcs"),
        pytest.param(
            "abfss://user:secret@acct.dfs.core.windows.net/t",
            "abfss://acct.dfs.core.windows.net/t",
            id="creds",
        ),
    ],
)
def test_asset_uris_are_normalised_storage_uris(location: str, expected: str) -> None:
    assert table_asset_uri(location) == expected


def test_a_relative_path_is_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert table_asset_uri("events") == f"file://{os.path.join(tmp_path, 'events')}"


@pytest.mark.parametrize("location", ["", "   ", "s3:///key", "/lake/{{ ds }}/events"])
def test_unusable_locations_are_refused(location: str) -> None:
    with pytest.raises(ValueError):  # InvalidPathError is a ValueError too
        table_asset_uri(location)


def test_the_asset_is_the_same_as_a_plain_asset_of_the_uri() -> None:
    asset = delta_table_asset("s3a://bucket/events/")
    assert asset == Asset(uri="s3://bucket/events")
    assert delta_table_asset("s3://bucket/events", name="events").name == "events"


def test_event_extra_is_small_json_and_names_version_operation_metrics() -> None:
    result = CommitResult(
        version=7,
        committed=True,
        operation="WRITE",
        read_version=6,
        app_id="airflow/d/t/r",
        app_version=1,
        num_added_files=3,
        num_output_rows=30,
        num_output_bytes=3000,
        num_removed_files=2,
        num_removed_bytes=2000,
    )
    extra = asset_event_extra(result, "s3://bucket/events")
    assert extra["version"] == 7 and extra["operation"] == "WRITE" and extra["read_version"] == 6
    assert (extra["from_version"], extra["to_version"]) == (7, 7)  # the range the event covers
    assert (extra["committed"], extra["skipped"]) == (True, False)
    assert extra["metrics"] == {
        "num_added_files": 3,
        "num_removed_files": 2,
        "num_output_rows": 30,
        "num_output_bytes": 3000,
        "num_removed_bytes": 2000,
    }
    assert json.loads(json.dumps(extra)) == extra
    skipped = asset_event_extra(
        {**result.to_dict(), "committed": False, "skipped": True}, "s3://bucket/events"
    )
    assert (skipped["committed"], skipped["skipped"]) == (False, True)


@pytest.mark.parametrize(
    ("location", "namespace", "name"),
    [
        pytest.param("/data/events", "file", "/data/events", id="local"),
        pytest.param("s3a://bucket/lake/events", "s3://bucket", "lake/events", id="s3"),
        pytest.param("gs://bucket/events", "gs://bucket", "events", id="gcs"),
        pytest.param(
            "abfss://c@acct.dfs.core.windows.net/lake/t",
            "abfss://c@acct.dfs.core.windows.net",
            "/lake/t",
            id="abfss",
        ),
    ],
)
def test_openlineage_names_follow_the_storage_conventions(location: str, namespace: str, name: str) -> None:
    assert dataset_naming(location) == (namespace, name)


def test_an_overwrite_is_an_overwrite_lifecycle_change() -> None:
    dataset = output_dataset(
        "s3://b/t", version=3, rows=1, size=10, files=1, operation="WRITE", mode="overwrite"
    )
    assert dataset.facets["lifecycleStateChange"].lifecycleStateChange.value == "OVERWRITE"
    created = output_dataset("s3://b/t", version=0, operation="CREATE TABLE AS SELECT")
    assert created.facets["lifecycleStateChange"].lifecycleStateChange.value == "CREATE"
    assert "outputStatistics" not in created.outputFacets


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        pytest.param({"version": 4, "from_version": 4, "to_version": 4}, (4, 4), id="commit-operator"),
        pytest.param({"version": 9, "from_version": 6, "to_version": 9}, (6, 9), id="sensor"),
        pytest.param(
            {"from_trigger": True, "payload": {"version": 9, "from_version": 7, "to_version": 9}},
            (7, 9),
            id="asset-watcher",
        ),
        pytest.param({"version": 3}, (3, 3), id="event-before-ranges"),
        pytest.param({"from_trigger": True, "payload": {"version": 5}}, (5, 5), id="watcher-before-ranges"),
        pytest.param({}, None, id="no-version"),
        pytest.param({"version": "3"}, None, id="not-a-number"),
        pytest.param({"version": True}, None, id="a-bool"),
        pytest.param(None, None, id="no-extra"),
    ],
)
def test_the_version_range_of_any_delta_asset_event(extra: Any, expected: tuple[int, int] | None) -> None:
    assert event_version_range(extra) == expected
