"""The Delta view's API (``plugins/app.py``), through FastAPI's TestClient on the plugin's own app.

The app is mounted as the API server mounts it, beside Airflow's auth manager (``conftest.py``);
the tables are real: written by the provider's commit operator (the run identity in commitInfo,
an idempotent skip on a retry), vacuumed and checkpointed by the core, one on the moto S3 server
whose credentials only a ``delta`` connection holds, one on an S3 endpoint nothing listens on.
Every response is checked for the planted secrets and for a traceback (``View.assert_clean``).
"""

from __future__ import annotations

import json
import socket
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.protocol.features import Operation

if TYPE_CHECKING:
    from collections.abc import Iterator

SECRET = "ui-s3cr3t-" + uuid.uuid4().hex[:8]
KEY = "AKIDUIVIEW"
#: The signature of a SAS token in a location (no connection registers it: its name is enough).
SAS_SIGNATURE = "sAsS1g" + uuid.uuid4().hex[:10]
SAS_LOCATION = f"abfss://lake@account.dfs.core.windows.net/t?sv=2024-01-01&sp=rl&sig={SAS_SIGNATURE}"

ASSET_ROUTES = ("history", "health", "vacuum-dry-run", "maintenance")


def _parquet(root: Path, prefix: str, ids: list[int], day: str) -> None:
    directory = root / prefix / f"ds={day}"
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})
    pq.write_table(table, directory / f"part-{uuid.uuid4().hex}.parquet")


def _commit(root: Path, run_id: str, try_number: int, prefix: str, day: str) -> dict[str, Any]:
    """One try of the provider's commit operator (the run identity goes into commitInfo)."""
    from airflow.sdk.execution_time.context import OutletEventAccessors
    from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance

    from airflow_delta_provider.operators.commit import DeltaCommitOperator

    op = DeltaCommitOperator(
        task_id="ingest",
        table_uri=str(root),
        prefix=prefix,
        retries=2,
        mode="overwrite",
        replace_where=f"ds = '{day}'",
        partition_by=["ds"],
    )
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        dag_id="ingest_dag",
        task_id="ingest",
        run_id=run_id,
        map_index=-1,
        try_number=try_number,
        max_tries=2,
        task=op,
    )
    return dict(op.execute({"ti": ti, "task": op, "outlet_events": OutletEventAccessors()}))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def view(delta_view: Any, tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[Any]:
    import boto3

    root = tmp_path_factory.mktemp("tables")
    delta_view.root = root
    delta_view.secrets += [SECRET, KEY, SAS_SIGNATURE]
    ids = delta_view.ids

    # events: two runs commit, a retry of the second commits nothing, a third run's second try
    # commits (its first try was lost before the commit), VACUUM and a checkpoint.
    events = root / "events"
    _parquet(events, "p1", [1, 2, 3], "2026-11-01")
    first = _commit(events, "run_1", 1, "p1", "2026-11-01")
    _parquet(events, "p2", [4, 5], "2026-11-02")
    second = _commit(events, "run_2", 1, "p2", "2026-11-02")
    skipped = _commit(events, "run_2", 2, "p2", "2026-11-02")
    assert skipped["skipped"] and skipped["version"] == second["version"]
    _parquet(events, "p3", [6], "2026-11-02")
    third = _commit(events, "run_3", 2, "p3", "2026-11-02")
    table = DeltaTable(str(events))
    table.vacuum(retention=0, enforce_retention_duration=False)
    table.checkpoint()
    uri = table.uri
    ids["events"] = delta_view.asset(uri, first, "run_1")
    delta_view.asset(uri, second, "run_2")
    delta_view.asset(uri, skipped, "run_2")
    delta_view.asset(uri, third, "run_3")
    delta_view.connection("events_lake", host=str(events))

    # On S3: only the delta connection holds the credentials.
    bucket = f"ui-{uuid.uuid4().hex[:10]}"
    boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id=KEY,
        aws_secret_access_key=SECRET,
        region_name="us-east-1",
    ).create_bucket(Bucket=bucket)
    s3_uri = f"s3://{bucket}/lake"
    options = {"key": KEY, "secret": SECRET, "endpoint_url": s3_endpoint, "region_name": "us-east-1"}
    DeltaTable.create(s3_uri, pa.schema([("id", pa.int64())]), storage_options=options)
    created = {"version": 0, "operation": "CREATE TABLE", "committed": True}
    ids["s3"] = delta_view.asset(s3_uri, created)
    extra = {"storage_options": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}
    secret_options = json.dumps({"key": KEY, "secret": SECRET})
    delta_view.connection("s3_lake", host=s3_uri, password=secret_options, extra=json.dumps(extra))

    # A consumer's target: its cursor on events is a txn beside the task instance's own.
    from airflow_delta_provider.core.table.consumer import consumer_app_id
    from airflow_delta_provider.core.transaction.commit_plan import CursorAdvance

    silver = root / "silver"
    _parquet(silver, "s", [1], "2026-11-01")
    cursor = CursorAdvance(consumer_app_id(table.snapshot().metadata.id, "airflow/silver_dag/silver"), 4)
    DeltaTable(str(silver)).commit_files(
        prefix="s",
        partition_by=["ds"],
        app_id="airflow/silver_dag/silver/run_1",
        app_version=0,
        cursors=[cursor],
    )

    # Missing and corrupt tables.
    missing = root / "missing"
    corrupt = root / "corrupt"
    _parquet(corrupt, "p", [1], "2026-11-01")
    DeltaTable(str(corrupt)).commit_files(prefix="p", partition_by=["ds"])
    _parquet(corrupt, "q", [2], "2026-11-01")
    DeltaTable(str(corrupt)).commit_files(prefix="q")
    _parquet(corrupt, "r", [3], "2026-11-01")
    DeltaTable(str(corrupt)).commit_files(prefix="r")
    (corrupt / "_delta_log" / f"{0:020d}.json").write_text("{not json\n")
    ids["missing"] = delta_view.asset(f"file://{missing}", created)
    ids["corrupt"] = delta_view.asset(f"file://{corrupt}", created)
    delta_view.connection("missing_lake", host=str(missing))

    ids["silver"] = delta_view.asset(f"file://{silver}", created)

    # Not the provider's: an asset no Delta commit emitted an event for.
    ids["other"] = delta_view.asset("file:///somewhere/else", None)

    # A location holding a SAS token: a connection's host and an asset's URI.
    delta_view.connection("sas_lake", host=SAS_LOCATION)
    forged = {"table_uri": SAS_LOCATION, "version": 0}  # an event posted through the REST API
    ids["sas"] = delta_view.asset(SAS_LOCATION, created, name="sas table", extra=forged)

    # A connection the user "partial" may not read.
    private = root / "private"
    DeltaTable.create(str(private), pa.schema([("id", pa.int64())]))
    delta_view.connection("private_lake", host=str(private))

    # An S3 endpoint nothing listens on (one attempt, so that the test does not wait for retries).
    down = {
        "storage_options": {
            "endpoint_url": f"http://127.0.0.1:{_closed_port()}",
            "region_name": "us-east-1",
            "config_kwargs": {"retries": {"max_attempts": 1}, "connect_timeout": 2},
        }
    }
    down_uri = f"s3://{bucket}-down/lake"
    delta_view.connection("down_lake", host=down_uri, password=secret_options, extra=json.dumps(down))
    ids["down"] = delta_view.asset(down_uri, created)
    yield delta_view


# --- auth ------------------------------------------------------------------------------------------


def _all_paths(view: Any) -> list[str]:
    paths = ["/api/tables"]
    paths += [f"/api/assets/{view.ids['events']}/{r}" for r in ASSET_ROUTES]
    paths += [f"/api/connections/s3_lake/{r}" for r in ASSET_ROUTES]
    return paths


def test_every_route_needs_a_login(view: Any) -> None:
    for path in _all_paths(view):
        response = view.get(path, user=None)
        assert response.status_code == 401, path
    # The page itself is static and holds no data (Airflow 3.1's UI sends no cookie with it).
    page = view.get("/", user=None)
    assert page.status_code == 200 and "events" not in page.text


def test_a_user_who_may_not_see_assets_sees_no_table(view: Any) -> None:
    for path in _all_paths(view):
        response = view.get(path, user="noassets")
        assert response.status_code == 403, path
        assert "events" not in response.text


def test_connections_need_read_access_to_connections(view: Any) -> None:
    listed = view.ok("/api/tables", user="viewer")["tables"]
    assert {t["kind"] for t in listed} == {"asset"}
    for route in ASSET_ROUTES:
        assert view.get(f"/api/connections/s3_lake/{route}", user="viewer").status_code == 403
    # The viewer may read the assets.
    assert view.ok(f"/api/assets/{view.ids['events']}/health", user="viewer")["active_files"] == 2


def test_the_page_and_its_chart_library_are_served_from_the_plugin(view: Any) -> None:
    page = view.get("/")
    assert page.status_code == 200 and "static/delta.js" in page.text
    for name in ("uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE", "delta.js", "delta.css"):
        response = view.get(f"/static/{name}", user=None)
        assert response.status_code == 200 and response.content, name
    # Nothing is fetched from elsewhere: the page works offline.
    static = Path(__file__).resolve().parents[3] / "airflow_delta_provider" / "plugins" / "static"
    for name in ("index.html", "delta.js", "delta.css"):
        text = (static / name).read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, name


def test_nothing_in_the_api_can_modify_a_table(view: Any) -> None:
    from fastapi.routing import APIRoute

    from airflow_delta_provider.plugins.app import app

    methods = {m for route in app.routes if isinstance(route, APIRoute) for m in route.methods}
    assert methods == {"GET"}
    for path in _all_paths(view)[1:2]:
        assert (
            view.client.post(
                f"/delta{path}", headers={"Authorization": f"Bearer {view.tokens['admin']}"}
            ).status_code
            == 405
        )


# --- the tables ------------------------------------------------------------------------------------


def test_the_list_holds_the_provider_assets_and_the_delta_connections(view: Any) -> None:
    listed = view.ok("/api/tables")["tables"]
    assets = {t["id"]: t for t in listed if t["kind"] == "asset"}
    assert view.ids["events"] in assets and view.ids["s3"] in assets
    assert view.ids["other"] not in assets  # no event of a Delta commit: not the provider's
    connections = {t["id"]: t for t in listed if t["kind"] == "connection"}
    assert {"s3_lake", "missing_lake", "events_lake", "private_lake", "sas_lake"} <= set(connections)
    assert connections["s3_lake"]["uri"].startswith("s3://ui-")


def test_history_shows_who_committed_the_retries_and_the_skip(view: Any) -> None:
    page = view.ok(f"/api/assets/{view.ids['events']}/history")
    entries = {e["version"]: e for e in page["entries"]}
    latest = page["latest_version"]
    assert [e["version"] for e in page["entries"]] == list(range(latest, -1, -1))
    first, second, third = entries[0], entries[1], entries[2]
    assert first["airflow"] == {
        "dag_id": "ingest_dag",
        "task_id": "ingest",
        "run_id": "run_1",
        "logical_date": None,
        "map_index": -1,
        "try_number": 1,
        "partition_key": None,
    }
    assert (first["kind"], first["operation"], first["rows_added"], first["files_added"]) == (
        "commit",
        "CREATE TABLE AS SELECT",
        3,
        1,
    )
    assert (second["kind"], second["airflow"]["run_id"]) == ("commit", "run_2")
    assert (third["kind"], third["airflow"]["try_number"], third["files_removed"]) == ("retry", 2, 1)
    vacuums = [e for e in page["entries"] if e["operation"].startswith("VACUUM")]
    assert {e["kind"] for e in vacuums} == {"maintenance"} and len(vacuums) == 2
    assert page["checkpoints"] == [latest]
    (skip,) = page["skips"]
    assert skip["version"] == 1 and skip["airflow"]["run_id"] == "run_2"


def test_history_reads_only_the_commits_shown(view: Any) -> None:
    corrupt = view.ids["corrupt"]
    # Version 0's commit file is garbage: the newest page does not read it...
    page = view.ok(f"/api/assets/{corrupt}/history", limit=2)
    assert [e["version"] for e in page["entries"]] == [2, 1] and page["next_before"] == 1
    # ... the page that shows it says what is wrong.
    response = view.get(f"/api/assets/{corrupt}/history", limit=2, before=1)
    assert response.status_code == 422
    assert "cannot be read" in response.json()["detail"] and "00000000000000000000.json" in response.text


@pytest.mark.parametrize("route", ["health", "maintenance", "vacuum-dry-run"])
def test_a_corrupt_or_missing_table_gives_a_clear_message(view: Any, route: str) -> None:
    response = view.get(f"/api/assets/{view.ids['corrupt']}/{route}")
    assert response.status_code == 422, response.text
    assert response.json()["detail"].startswith(
        f"The Delta log of file://{view.root / 'corrupt'} cannot be read"
    )
    for path in (f"/api/assets/{view.ids['missing']}/{route}", f"/api/connections/missing_lake/{route}"):
        response = view.get(path)
        assert response.status_code == 404, response.text
        assert response.json()["detail"].startswith(f"No Delta table at file://{view.root / 'missing'}")
    assert view.get(f"/api/assets/{view.ids['other']}/{route}").status_code == 404
    unknown = view.get(f"/api/connections/nope/{route}")
    assert unknown.status_code == 404 and "no delta connection 'nope'" in unknown.json()["detail"]


def test_health_counts_the_active_files_and_describes_the_protocol(view: Any) -> None:
    health = view.ok(f"/api/assets/{view.ids['events']}/health")
    snapshot = DeltaTable(str(view.root / "events")).snapshot()
    sizes = snapshot.files().column("size").to_pylist()
    assert (health["active_files"], health["active_bytes"]) == (len(sizes), sum(sizes))
    assert sum(b["files"] for b in health["histogram"]) == len(sizes)
    assert health["small_files"] == len(sizes)  # all far below Delta's 1 GiB target
    assert health["target_file_size"] == {
        "name": "delta.targetFileSize",
        "value": 1024**3,
        "source": "default",
    }
    assert (health["partition_columns"], health["partitions"]) == (["ds"], 2)
    assert health["commits_since_checkpoint"] == 0 and health["last_checkpoint_version"] == snapshot.version
    assert health["versions_retained"] == snapshot.version + 1
    assert health["protocol"]["min_reader_version"] == snapshot.protocol.min_reader_version
    for feature in health["features"]:
        assert list(feature["operations"]) == [op.value for op in Operation]


def test_health_lists_the_cursors_of_the_consumers_committing_into_the_table(view: Any) -> None:
    events_id = DeltaTable(str(view.root / "events")).snapshot().metadata.id
    (cursor,) = view.ok(f"/api/assets/{view.ids['silver']}/health")["consumers"]
    assert cursor["app_id"] == f"delta-source/{events_id}/airflow/silver_dag/silver"
    assert (cursor["source_table_id"], cursor["consumer"], cursor["version"]) == (
        events_id,
        "airflow/silver_dag/silver",
        4,
    )
    assert cursor["last_updated"].startswith("20")
    # The task instances' own txns are no cursors.
    assert view.ok(f"/api/assets/{view.ids['events']}/health")["consumers"] == []


def test_the_vacuum_dry_run_deletes_nothing(view: Any) -> None:
    root = view.root / "events"
    _parquet(root, "orphan", [99], "2026-11-09")  # a file no version references
    before = sorted(str(p) for p in root.rglob("*"))
    version = DeltaTable(str(root)).version()
    dry = view.ok(f"/api/assets/{view.ids['events']}/vacuum-dry-run")
    assert dry["num_files"] == 0  # the orphan is newer than the 7-day retention
    assert dry["retention"] == {
        "name": "delta.deletedFileRetentionDuration",
        "seconds": 604800.0,
        "source": "default",
    }
    assert sorted(str(p) for p in root.rglob("*")) == before
    assert DeltaTable(str(root)).version() == version


def test_maintenance_names_the_last_checkpoint_vacuum_and_when_each_is_next_due(view: Any) -> None:
    maintenance = view.ok(f"/api/assets/{view.ids['events']}/maintenance")
    latest = maintenance["version"]
    checkpoint = maintenance["checkpoint"]
    assert checkpoint["last"]["version"] == latest and checkpoint["due"] is False
    assert checkpoint["next_due_at_version"] == latest + 10
    vacuum = maintenance["vacuum"]
    assert vacuum["due"] is False and vacuum["last"]["version"] == latest  # the VACUUM END
    assert vacuum["next_due"] and vacuum["interval_seconds"] == 7 * 86400
    assert [e["operation"] for e in vacuum["recent"]] == ["VACUUM END", "VACUUM START"]
    assert vacuum["recent"][0]["parameters"]["status"] == "COMPLETED"
    cleanup = maintenance["cleanup"]
    assert cleanup["earliest_retained_version"] == 0 and cleanup["cleaned_up"] is False
    assert cleanup["retention"]["name"] == "delta.logRetentionDuration"
    # Another VACUUM interval, from the page.
    daily = view.ok(f"/api/assets/{view.ids['events']}/maintenance", vacuum_interval="interval 1 hours")
    assert daily["vacuum"]["interval_seconds"] == 3600
    for hostile in ("soon", "interval 9999999999 weeks", "1e308", "nan", "inf", "-1", "\x00"):
        bad = view.get(f"/api/assets/{view.ids['events']}/maintenance", vacuum_interval=hostile)
        assert bad.status_code == 400, (hostile, bad.text)
        assert bad.json()["detail"].startswith("vacuum_interval")


def test_a_table_on_s3_is_read_with_its_connections_credentials_and_never_shows_them(view: Any) -> None:
    for route in ASSET_ROUTES:
        by_connection = view.ok(f"/api/connections/s3_lake/{route}")
        by_asset = view.ok(f"/api/assets/{view.ids['s3']}/{route}")
        assert by_connection["table"] == by_asset["table"]
        assert by_connection["table"].startswith("s3://ui-")
    assert view.ok("/api/connections/s3_lake/history")["entries"][0]["operation"] == "CREATE TABLE"


# --- who sees what: per asset and per connection ------------------------------------------------------


def test_the_list_holds_only_the_connections_and_assets_the_user_may_read(
    view: Any, denied_assets: set[str]
) -> None:
    """ "partial" may read connections in general, but not the private_* ones, nor (here) one asset:
    the auth manager is asked about each, as Airflow's own connection list and routes ask it."""
    private_root = str(view.root / "private")
    everything = view.get("/api/tables").text
    assert "private_lake" in everything and private_root in everything

    denied_assets.add(view.ids["events"])
    response = view.get("/api/tables", user="partial")
    assert response.status_code == 200
    listed = response.json()["tables"]
    assert "private_lake" not in response.text and private_root not in response.text
    assert {t["id"] for t in listed if t["kind"] == "connection"} >= {"s3_lake", "events_lake"}
    assets = {t["id"] for t in listed if t["kind"] == "asset"}
    assert view.ids["s3"] in assets and view.ids["events"] not in assets
    for route in ASSET_ROUTES:
        assert view.get(f"/api/connections/private_lake/{route}", user="partial").status_code == 403
        assert view.get(f"/api/assets/{view.ids['events']}/{route}", user="partial").status_code == 403
    # The connection to the same table opens, without the skips recorded on the asset it may not read.
    assert len(view.ok("/api/connections/events_lake/history")["skips"]) == 1
    assert view.ok("/api/connections/events_lake/history", user="partial")["skips"] == []


# --- secrets in locations --------------------------------------------------------------------------


def test_a_sas_token_in_a_location_is_never_shown(view: Any) -> None:
    """The signature is found by its parameter name: nothing registered it."""
    listed = {(t["kind"], t["id"]): t for t in view.ok("/api/tables")["tables"]}
    shown = "abfss://lake@account.dfs.core.windows.net/t?sv=2024-01-01&sp=rl"
    assert listed["connection", "sas_lake"]["uri"] == shown
    assert listed["asset", view.ids["sas"]]["uri"].endswith("&sig=***")
    for route in ASSET_ROUTES:
        for path in (f"/api/connections/sas_lake/{route}", f"/api/assets/{view.ids['sas']}/{route}"):
            response = view.get(path)  # View.get asserts the signature appears nowhere
            assert response.status_code == 422, response.text
            assert "carries credentials" in response.json()["detail"]


# --- what the view opens -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "location",
    ["http://169.254.169.254/latest/meta-data", "file:///etc", "s3://someone-elses-bucket/lake", "a table"],
)
def test_an_event_posted_through_the_rest_api_never_makes_an_asset_a_table(view: Any, location: str) -> None:
    """Anyone allowed to post asset events could otherwise have the API server open any asset's
    location: a metadata endpoint, its own disk, a bucket through a delta connection's credentials,
    a real table no task of the deployment wrote."""
    uri = location
    if location == "a table":
        uri = DeltaTable.create(
            str(view.root / f"posted-{uuid.uuid4().hex[:6]}"), pa.schema([("id", pa.int64())])
        ).uri
    forged = {"table_uri": uri, "version": 0, "operation": "CREATE TABLE"}
    asset_id = view.asset(uri, None, name=f"posted {uuid.uuid4().hex[:6]}", extra=forged, api=True)
    listed = {(t["kind"], t["id"]) for t in view.ok("/api/tables")["tables"]}
    assert ("asset", asset_id) not in listed
    for route in ASSET_ROUTES:
        response = view.get(f"/api/assets/{asset_id}/{route}")
        assert response.status_code == 404, response.text
        assert "is not a Delta table this deployment knows" in response.json()["detail"]


@pytest.mark.parametrize(
    ("storage_conn_id", "expected"),
    [
        ("no_such_connection", ("a connection it needs does not exist", "no_such_connection")),
        (5, ("The storage_conn_id extra of connection 'dangling_", "must be a non-blank string, got int")),
    ],
)
def test_a_storage_connection_that_does_not_exist_is_a_clear_422(
    view: Any, storage_conn_id: Any, expected: tuple[str, str]
) -> None:
    name = f"dangling_{uuid.uuid4().hex[:6]}"
    extra = json.dumps({"storage_conn_id": storage_conn_id})
    view.connection(name, host=f"s3://bucket-{uuid.uuid4().hex[:6]}/lake", extra=extra)
    for route in ASSET_ROUTES:
        response = view.get(f"/api/connections/{name}/{route}")
        assert response.status_code == 422, response.text
        detail = response.json()["detail"]
        assert all(fragment in detail for fragment in expected), detail


def test_credentials_in_table_properties_and_parameters_are_masked(view: Any) -> None:
    """Table properties are anyone's text: one named like a credential is shown masked in health,
    and in the history's CREATE TABLE parameters (Delta writes the properties there as JSON text)."""
    secret = "pr0p-" + uuid.uuid4().hex
    view.secrets.append(secret)
    root = view.root / f"props-{uuid.uuid4().hex[:6]}"
    properties = {"fs.azure.sas.token": secret, "my.password": secret, "delta.appendOnly": "false"}
    table = DeltaTable.create(str(root), pa.schema([("id", pa.int64())]), properties=properties)
    created = {"version": 0, "operation": "CREATE TABLE", "committed": True}
    asset_id = view.asset(table.uri, created)
    health = view.ok(f"/api/assets/{asset_id}/health")  # View.get asserts the secret appears nowhere
    assert health["properties"] == {
        "delta.appendOnly": "false",
        "fs.azure.sas.token": "***",
        "my.password": "***",
    }
    (entry,) = view.ok(f"/api/assets/{asset_id}/history")["entries"]
    assert json.loads(entry["parameters"]["properties"]) == health["properties"]


# --- every failure is a JSON message ----------------------------------------------------------------


@pytest.mark.parametrize("asset_id", [0, -1, 2**31, 2**63, 10**30])
def test_an_asset_id_no_database_holds_is_not_found(view: Any, asset_id: int) -> None:
    response = view.get(f"/api/assets/{asset_id}/health")
    assert response.status_code == 404
    assert response.json()["detail"].startswith(
        f"Asset {asset_id} is not a Delta table this deployment knows"
    )


@pytest.mark.parametrize("connection_id", ["x" * 300, "a\x00b", "tab\tid"])
def test_a_connection_id_no_connection_can_have_is_not_found(view: Any, connection_id: str) -> None:
    from urllib.parse import quote

    for route in ASSET_ROUTES:
        response = view.get(f"/api/connections/{quote(connection_id, safe='')}/{route}")
        assert response.status_code == 404, response.text
        assert "There is no delta connection" in response.json()["detail"]


def test_history_pages_out_of_range_are_empty(view: Any) -> None:
    for before in (-(10**30), 0, 10**30):
        page = view.ok(f"/api/assets/{view.ids['events']}/history", before=before)
        assert page["latest_version"] >= 0
        assert page["entries"] == [] if before <= 0 else page["entries"]


def test_an_unreachable_object_store_is_a_bad_gateway(view: Any) -> None:
    for path in (
        "/api/connections/down_lake/health",
        "/api/connections/down_lake/history",
        f"/api/assets/{view.ids['down']}/health",  # opened with down_lake, which names its location
    ):
        response = view.get(path)
        assert response.status_code == 502, response.text
        detail = response.json()["detail"]
        assert detail.startswith("The storage of s3://ui-") and "-down/lake cannot be read" in detail
        assert "127.0.0.1" in detail and "reachable" in detail


# --- restore to before a run -----------------------------------------------------------------------


def test_history_offers_each_runs_restore_target_and_the_api_finds_it(view: Any) -> None:
    asset = view.ids["events"]
    entries = view.ok(f"/api/assets/{asset}/history")["entries"]
    offered = {e["version"]: e["restore_target"] for e in entries if "restore_target" in e}
    # On each run's oldest commit on the page (run_3 committed once, at its second try).
    assert offered == {
        0: {"dag_id": "ingest_dag", "run_id": "run_1"},
        1: {"dag_id": "ingest_dag", "run_id": "run_2"},
        2: {"dag_id": "ingest_dag", "run_id": "run_3"},
    }

    found = view.ok(f"/api/assets/{asset}/restore-target", dag_id="ingest_dag", run_id="run_3")

    assert (found["version_before"], found["first_version"], found["versions"]) == (1, 2, [2])
    assert found["table"] == f"file://{view.root / 'events'}"
    # A run that never wrote the table, or that created it, has no target: a clear message.
    for run_id, fragment in (("run_9", "No commit"), ("run_1", "created the table")):
        response = view.get(f"/api/assets/{asset}/restore-target", dag_id="ingest_dag", run_id=run_id)
        assert response.status_code == 422 and fragment in response.json()["detail"]


def test_the_restore_target_route_needs_the_same_access_as_the_history(view: Any) -> None:
    params = {"dag_id": "ingest_dag", "run_id": "run_2"}
    path = f"/api/assets/{view.ids['events']}/restore-target"
    assert view.get(path, user=None, **params).status_code == 401
    assert view.get(path, user="noassets", **params).status_code == 403
    assert view.get("/api/connections/s3_lake/restore-target", user="viewer", **params).status_code == 403
