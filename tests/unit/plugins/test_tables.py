"""What the Delta view shows of a table (``plugins/tables.py``), through the plugin's app.

``commitInfo`` is free-form: other engines write ``tags`` as a string or a list,
``operationMetrics`` as a list, ``operationParameters`` as a string, a ``userMetadata`` that is no
JSON object or is nested beyond any stack, timestamps no calendar holds. Such commits are
hand-written through the core's store (and one appended by delta-rs with its custom commit
properties); every route must answer them, in JSON a browser parses. ``delta.targetFileSize`` is
read by the core's ``TableConfig``: the view shows what the core decides, refusal included.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import InvalidTablePropertyError
from airflow_delta_provider.core.storage import open_store

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

ROUTES = ("history", "health", "vacuum-dry-run", "maintenance")
CREATED = {"version": 0, "operation": "CREATE TABLE", "committed": True}
SCHEMA = pa.schema([("id", pa.int64())])

#: The commitInfo of versions 1 to 4, as engines other than the provider write it.
FREE_FORM: dict[int, str] = {
    # Lists and strings where Delta writes objects; userMetadata that is no object.
    1: json.dumps(
        {
            "timestamp": 1795000000000,
            "operation": "WRITE",
            "tags": ["airflow.dag_id", "x"],
            "operationMetrics": [1, 2],
            "operationParameters": "mode=Append",
            "userMetadata": "[1, 2, 3]",
            "engineInfo": "Trino/435",
        }
    ),
    # Nested deeper than any stack in userMetadata's text, deep objects in operation and engineInfo.
    2: json.dumps(
        {
            "operation": json.loads("{" + '"a":{' * 100 + "}" * 101),
            "userMetadata": "[" * 100_000 + "]" * 100_000,
            "engineInfo": {"name": [[[[[[[[[["deep"]]]]]]]]]]},
        }
    ),
    # A timestamp past year 9999, numbers as text, userMetadata as an object (a retry's).
    3: json.dumps(
        {
            "inCommitTimestamp": 2**63 - 1,
            "operation": "MERGE",
            "operationParameters": {"predicate": None, "limit": 10, "flag": True},
            "operationMetrics": {"numOutputRows": '"7"', "numAddedFiles": 1.5},
            "userMetadata": {"airflow": {"dag_id": "d", "task_id": "t", "run_id": "r", "try_number": "2"}},
        }
    ),
    # tags and operationParameters as JSON text (as delta-rs writes custom metadata); a long text.
    4: json.dumps(
        {
            "operation": "WRITE",
            "tags": json.dumps({"airflow.dag_id": "dag_s", "airflow.task_id": "t", "airflow.run_id": "r"}),
            "operationParameters": json.dumps({"mode": '"Append"'}),
            "engineInfo": "E" * 100_000,
        }
    ),
}


def _strict_json(text: str) -> Any:
    """Parse as a browser's JSON.parse does: NaN and Infinity are no JSON."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in the response: the page cannot parse it")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def view(delta_view: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from deltalake import CommitProperties, write_deltalake

    root: Path = tmp_path_factory.mktemp("free-form")
    uri = DeltaTable.create(str(root / "t"), SCHEMA).uri
    store = open_store(uri)
    for version, info in FREE_FORM.items():
        store.put(store.log_path(f"{version:020d}.json"), f'{{"commitInfo": {info}}}\n'.encode())
    # Version 5: delta-rs appends two rows; its custom metadata becomes commitInfo fields.
    metadata = {"userMetadata": "[[[1]]]", "tags": "[1, 2]"}
    rows = pa.table({"id": pa.array([1, 2], pa.int64())})
    write_deltalake(uri, rows, mode="append", commit_properties=CommitProperties(custom_metadata=metadata))
    delta_view.ids["free"] = delta_view.asset(uri, CREATED)
    # In-commit timestamps on: version 1's, past year 9999, is its commit time.
    ict_uri = DeltaTable.create(
        str(root / "ict"), SCHEMA, properties={"delta.enableInCommitTimestamps": "true"}
    ).uri
    ict_store = open_store(ict_uri)
    far = json.dumps({"commitInfo": {"inCommitTimestamp": 2**63 - 1, "operation": "WRITE"}})
    ict_store.put(ict_store.log_path(f"{1:020d}.json"), f"{far}\n".encode())
    delta_view.ids["ict"] = delta_view.asset(ict_uri, CREATED)
    # A skip event someone posted through Airflow's REST API, its fields of any shape.
    forged = {"skipped": True, "version": {"v": [1]}, "operation": ["x"] * 1000, "table_uri": uri}
    delta_view.asset(uri, None, extra=forged)
    delta_view.connection("free_form_lake", host=uri)
    delta_view.root = root
    yield delta_view


@pytest.mark.parametrize("route", ROUTES)
def test_every_route_answers_a_log_of_free_form_commit_info(view: Any, route: str) -> None:
    for path in (f"/api/assets/{view.ids['free']}/{route}", f"/api/connections/free_form_lake/{route}"):
        response = view.get(path)
        assert response.status_code == 200, response.text
        _strict_json(response.text)


def test_history_shows_free_form_commit_info_by_its_shape(view: Any) -> None:
    response = view.get(f"/api/assets/{view.ids['free']}/history")
    entries = {e["version"]: e for e in _strict_json(response.text)["entries"]}
    assert sorted(entries) == [0, 1, 2, 3, 4, 5]
    for entry in entries.values():  # the shapes the page relies on
        assert isinstance(entry["operation"], str) and isinstance(entry["parameters"], dict)
        assert all(isinstance(v, str) for v in entry["parameters"].values())
        assert entry["engine"] is None or isinstance(entry["engine"], str)

    lists = entries[1]
    assert (lists["operation"], lists["engine"], lists["airflow"]) == ("WRITE", "Trino/435", None)
    assert lists["parameters"] == {"value": "mode=Append"}
    assert lists["rows_added"] is None and lists["files_added"] is None

    deep = entries[2]
    assert deep["airflow"] is None
    assert deep["operation"] == '{"a":' * 8 + '"..."' + "}" * 8  # cut at eight levels
    assert deep["engine"] == '{"name":[[[[[[["..."]]]]]]]}'

    odd = entries[3]
    # Its inCommitTimestamp is no commit time (in-commit timestamps are off): the file's time is.
    committed = {c.version: c.timestamp for c in DeltaTable(str(view.root / "t")).commit_timestamps()}[3]
    assert odd["timestamp"] == datetime.fromtimestamp(committed / 1000, UTC).isoformat(timespec="seconds")
    far = {e["version"]: e for e in view.ok(f"/api/assets/{view.ids['ict']}/history")["entries"]}[1]
    assert far["timestamp"] is None  # no calendar date: shown as none, not a failure
    assert odd["parameters"] == {"predicate": "", "limit": "10", "flag": "true"}
    assert (odd["rows_added"], odd["files_added"]) == (7, None)
    assert odd["airflow"]["dag_id"] == "d" and odd["airflow"]["try_number"] == 2
    assert odd["kind"] == "retry"

    text = entries[4]
    assert text["airflow"]["dag_id"] == "dag_s" and text["parameters"] == {"mode": "Append"}
    assert text["engine"] == "E" * 500 + "..."

    foreign = entries[5]
    assert foreign["engine"].startswith("delta-rs") and foreign["airflow"] is None
    assert (foreign["rows_added"], foreign["files_added"]) == (2, 1)  # delta-rs's metric names


def test_skip_events_are_read_by_their_shape(view: Any) -> None:
    (skip,) = view.ok(f"/api/assets/{view.ids['free']}/history")["skips"]
    assert skip["version"] is None and skip["operation"] == ('["x",' + '"x",' * 200)[:500] + "..."


def test_maintenance_reads_free_form_operations(view: Any) -> None:
    maintenance = view.ok(f"/api/assets/{view.ids['free']}/maintenance")
    assert maintenance["version"] == 5 and maintenance["vacuum"]["recent"] == []


# --- delta.targetFileSize: the core's parser ---------------------------------------------------------


@pytest.mark.parametrize("value", [None, "134217728", "128mb", "1 GB", "1tb", "2gb", "abc", "0", "-5"])
def test_the_target_file_size_is_the_cores(view: Any, value: str | None) -> None:
    """The view shows the TableConfig's reading of the property, refusal included (with the core's
    message): it has no parser of its own to disagree with."""
    name = f"target-{value}".replace(" ", "_")
    properties = {"delta.targetFileSize": value} if value is not None else {}
    table = DeltaTable.create(str(view.root / name), SCHEMA, properties=properties)
    asset_id = view.asset(table.uri, CREATED)
    response = view.get(f"/api/assets/{asset_id}/health")
    try:
        expected = table.snapshot().config.target_file_size
    except InvalidTablePropertyError as err:
        assert response.status_code == 422, response.text
        assert str(err) in response.json()["detail"]
        return
    assert response.status_code == 200, response.text
    assert response.json()["target_file_size"] == expected.to_dict()
    assert expected.value > 0 and expected.source == ("default" if value is None else "table property")


# --- data retention and PURGE on the Maintenance page ------------------------------------------------


def test_maintenance_shows_the_retention_policy_its_last_run_and_the_last_purge(view: Any) -> None:
    from datetime import UTC, datetime

    import pyarrow.parquet as pq

    from airflow_delta_provider.core.protocol.table_config import DATA_RETENTION

    policy = {"column": "ds", "keep": "interval 30 days"}
    root = view.root / "retained"
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64()), ("ds", pa.string())]),
        partition_by=["ds"],
        properties={DATA_RETENTION: json.dumps(policy), "delta.enableDeletionVectors": "true"},
    )
    for n, day in enumerate(("2026-01-01", "2026-03-01", "2026-03-02")):
        (root / f"ds={day}").mkdir()
        pq.write_table(pa.table({"id": [2 * n, 2 * n + 1]}), root / f"ds={day}/p.parquet")
        table.commit_files([f"ds={day}/p.parquet"])
    asset_id = view.asset(table.uri, CREATED)

    before = view.ok(f"/api/assets/{asset_id}/maintenance")["data_retention"]
    assert before["policy"] == {
        "column": "ds",
        "keep": "interval 30 days",
        "keep_seconds": 2592000.0,
        "max_deleted_fraction": 0.5,
    }
    assert (before["last_run"], before["last_purge"], before["error"]) == (None, None, None)

    ran = table.apply_data_retention(now=datetime(2026, 3, 10, tzinfo=UTC))
    table.delete("id = 2")
    purged = table.purge()
    shown = view.ok(f"/api/assets/{asset_id}/maintenance")["data_retention"]
    run = shown["last_run"]
    assert run["version"] == ran.delete.version and run["deleted_rows"] == 2  # type: ignore[union-attr]
    assert run["files_removed"] == 1 and run["cutoff"] == "2026-02-08T00:00:00+00:00"
    assert run["policy"]["keep"] == "interval 30 days" and run["parameters"]["predicate"]
    purge = shown["last_purge"]
    assert purge["version"] == purged.version and purge["deletion_vectors_removed"] == 1
    history = view.ok(f"/api/assets/{asset_id}/history")["entries"]
    assert history[0]["operation"] == "REORG" and history[0]["kind"] == "maintenance"


def test_maintenance_shows_a_bad_retention_property_as_the_core_refuses_it(view: Any) -> None:
    from airflow_delta_provider.core.protocol.table_config import DATA_RETENTION

    table = DeltaTable.create(
        str(view.root / "bad-retention"),
        SCHEMA,
        properties={DATA_RETENTION: '{"column": "id", "keep": "30"}'},
    )
    asset_id = view.asset(table.uri, CREATED)
    shown = view.ok(f"/api/assets/{asset_id}/maintenance")["data_retention"]
    assert shown["policy"] is None and "airflow.dataRetention keep='30'" in shown["error"]


def test_history_shows_the_partitions_each_version_changed_and_the_runs_partition_key(
    delta_view: Any, tmp_path: Path
) -> None:
    """A keyed run's commit shows its partition key (from the commitInfo tags the provider writes)
    and the partitions it changed; an OPTIMIZE (no data change) none; a consumer's cursor per
    partition is shown with its partition."""
    import pyarrow.parquet as pq

    from airflow_delta_provider.core.table import consumer_app_id
    from airflow_delta_provider.core.transaction import CursorAdvance

    schema = pa.schema([("id", pa.int64()), ("ds", pa.string())])
    table = DeltaTable.create(str(tmp_path / "daily"), schema, partition_by=["ds"])
    for n, ds in enumerate(("2026-03-01", "2026-03-02", "2026-03-01")):
        (tmp_path / "daily" / f"ds={ds}").mkdir(exist_ok=True)
        pq.write_table(
            pa.table({"id": pa.array([n], pa.int64())}), tmp_path / "daily" / f"ds={ds}" / f"{n}.parquet"
        )
    table.commit_files(["ds=2026-03-01/0.parquet", "ds=2026-03-02/1.parquet"])  # 1: two partitions
    key = consumer_app_id("source-id", "airflow/d/t", "2026-03-01")
    table.commit_files(  # 2: a keyed run replacing one day, moving a partition's cursor
        ["ds=2026-03-01/2.parquet"],
        mode="overwrite",
        replace_where="ds = :day",
        parameters={"day": "2026-03-01"},
        tags={
            "airflow.dag_id": "daily",
            "airflow.task_id": "t",
            "airflow.run_id": "r",
            "airflow.partition_key": "2026-03-01",
        },
        cursors=[CursorAdvance(key, 7, None)],
    )
    table.optimize(min_file_size=1 << 30)  # 3 (compacts nothing: one file per partition)
    asset = delta_view.asset(table.uri, CREATED)
    entries = {e["version"]: e for e in delta_view.ok(f"/api/assets/{asset}/history")["entries"]}
    assert entries[1]["partitions"] == [{"ds": "2026-03-01"}, {"ds": "2026-03-02"}]
    assert entries[1]["partitions_count"] == 2 and entries[1]["airflow"] is None
    assert entries[2]["partitions"] == [{"ds": "2026-03-01"}]
    assert entries[2]["airflow"]["partition_key"] == "2026-03-01"
    assert entries[0]["partitions"] == []
    consumers = delta_view.ok(f"/api/assets/{asset}/health")["consumers"]
    assert [(c["consumer"], c["partition"], c["version"]) for c in consumers] == [
        ("airflow/d/t", "2026-03-01", 7)
    ]
