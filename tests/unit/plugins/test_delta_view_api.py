"""The Delta view's API, through FastAPI's TestClient on the plugin's own app.

The app is mounted as the API server mounts it (``/delta``), beside Airflow's auth manager
(SimpleAuthManager, subclassed so that one user may not see assets); the metadata DB is a real,
migrated SQLite; the tables are real: written by the provider's commit operator (the run identity
in commitInfo, an idempotent skip on a retry), vacuumed and checkpointed by the core, one on the
moto S3 server whose credentials only a ``delta`` connection holds.
"""

from __future__ import annotations

import json
import os
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.features import Operation

if TYPE_CHECKING:
    from collections.abc import Iterator

SECRET = "ui-s3cr3t-" + uuid.uuid4().hex[:8]
KEY = "AKIDUIVIEW"
AUTH_MODULE = "delta_view_test_auth"
_AUTH_SOURCE = '''
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


class DenyAssetsAuthManager(SimpleAuthManager):
    """Airflow's simple auth manager, except that the user "noassets" may see no asset."""

    def is_authorized_asset(self, *, method, user, details=None):
        if user.get_name() == "noassets":
            return False
        return super().is_authorized_asset(method=method, user=user, details=details)
'''

ASSET_ROUTES = ("history", "health", "vacuum-dry-run", "maintenance")


class View:
    """What the tests use: the client, tokens per user, the tables and their ids."""

    def __init__(self, client: Any, tokens: dict[str, str], root: Path) -> None:
        self.client = client
        self.tokens = tokens
        self.root = root
        self.ids: dict[str, str] = {}

    def get(self, path: str, user: str | None = "admin", **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        return self.client.get(f"/delta{path}", headers=headers, params=params)

    def ok(self, path: str, user: str = "admin", **params: Any) -> dict[str, Any]:
        response = self.get(path, user, **params)
        assert response.status_code == 200, response.text
        assert SECRET not in response.text and KEY not in response.text
        return dict(response.json())


def _parquet(root: Path, prefix: str, ids: list[int], day: str) -> None:
    directory = root / prefix / f"ds={day}"
    directory.mkdir(parents=True, exist_ok=True)
    table = pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]})
    pq.write_table(table, directory / f"part-{uuid.uuid4().hex}.parquet")


def _commit(root: Path, run_id: str, try_number: int, prefix: str, day: str, **kwargs: Any) -> dict[str, Any]:
    """One try of the provider's commit operator (the run identity goes into commitInfo)."""
    import uuid as _uuid

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
        **kwargs,
    )
    ti = RuntimeTaskInstance.model_construct(
        id=_uuid.uuid4(),
        dag_id="ingest_dag",
        task_id="ingest",
        run_id=run_id,
        map_index=-1,
        try_number=try_number,
        max_tries=2,
        task=op,
    )
    return dict(op.execute({"ti": ti, "task": op, "outlet_events": OutletEventAccessors()}))


def _record_event(session: Any, uri: str, result: dict[str, Any], run_id: str, try_number: int) -> int:
    """What Airflow records when the task succeeds: the asset and its event (with the task's try)."""
    from airflow.models.asset import AssetEvent, AssetModel
    from sqlalchemy import select

    from airflow_delta_provider.assets.delta import asset_event_extra

    asset = session.scalar(select(AssetModel).where(AssetModel.uri == uri))
    if asset is None:
        asset = AssetModel(name=uri, uri=uri, group="asset")
        session.add(asset)
        session.flush()
    session.add(
        AssetEvent(
            asset_id=asset.id,
            extra=asset_event_extra(result, uri),
            source_dag_id="ingest_dag",
            source_task_id="ingest",
            source_run_id=run_id,
            source_map_index=-1,
        )
    )
    session.flush()
    return int(asset.id)


@pytest.fixture(scope="module")
def view(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> Iterator[View]:
    from airflow.utils import db

    auth_dir = tmp_path_factory.mktemp("auth")
    (auth_dir / f"{AUTH_MODULE}.py").write_text(_AUTH_SOURCE)
    sys.path.insert(0, str(auth_dir))
    settings = {
        "AIRFLOW__CORE__AUTH_MANAGER": f"{AUTH_MODULE}.DenyAssetsAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,viewer:viewer,noassets:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(auth_dir / "passwords.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex * 2,
        "AIRFLOW__API_AUTH__JWT_ISSUER": "delta-view-tests",
    }
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        db.initdb()
        yield _build(tmp_path_factory.mktemp("tables"), s3_endpoint)
    finally:
        from airflow.api_fastapi import app as api_app

        api_app.purge_cached_app()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        sys.path.remove(str(auth_dir))


def _build(root: Path, s3_endpoint: str) -> View:
    import boto3
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.models.connection import Connection
    from airflow.utils.session import create_session
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from airflow_delta_provider.plugins.plugin import DeltaViewPlugin

    # The tables. events: two runs commit, a retry of the second commits nothing, a third run's
    # second try commits (its first try was lost before the commit), VACUUM and a checkpoint.
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

    # A consumer's target: its cursor on events is a txn beside the task instance's own.
    from airflow_delta_provider.core.commit_plan import CursorAdvance
    from airflow_delta_provider.core.consumer import consumer_app_id

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

    ids: dict[str, str] = {}
    with create_session() as session:
        ids["events"] = str(_record_event(session, uri, first, "run_1", 1))
        _record_event(session, uri, second, "run_2", 1)
        _record_event(session, uri, skipped, "run_2", 2)
        _record_event(session, uri, third, "run_3", 2)
        s3_result = {"version": 0, "operation": "CREATE TABLE", "committed": True}
        ids["s3"] = str(_record_event(session, s3_uri, s3_result, "run_1", 1))
        ids["missing"] = str(_record_event(session, f"file://{missing}", s3_result, "run_1", 1))
        ids["corrupt"] = str(_record_event(session, f"file://{corrupt}", s3_result, "run_1", 1))
        ids["silver"] = str(_record_event(session, f"file://{silver}", s3_result, "run_1", 1))
        from airflow.models.asset import AssetModel

        other = AssetModel(name="not-delta", uri="file:///somewhere/else", group="asset")
        session.add(other)
        session.flush()
        ids["other"] = str(other.id)
        session.add(
            Connection(
                conn_id="s3_lake",
                conn_type="delta",
                host=s3_uri,
                password=json.dumps({"key": KEY, "secret": SECRET}),
                extra=json.dumps(
                    {"storage_options": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"}}
                ),
            )
        )
        session.add(Connection(conn_id="missing_lake", conn_type="delta", host=str(missing)))
    # The TI of the skip: try 2 of run_2 (what Airflow's own table says).
    server = FastAPI()
    manager = init_auth_manager(server)
    for plugin_app in DeltaViewPlugin.fastapi_apps:
        server.mount(plugin_app["url_prefix"], plugin_app["app"])
    tokens = {
        name: manager.generate_jwt(SimpleAuthManagerUser(username=name, role=role))
        for name, role in (("admin", "admin"), ("viewer", "viewer"), ("noassets", "admin"))
    }
    built = View(TestClient(server), tokens, root)
    built.ids = ids
    return built


# --- auth ------------------------------------------------------------------------------------------


def _all_paths(view: View) -> list[str]:
    paths = ["/api/tables"]
    paths += [f"/api/assets/{view.ids['events']}/{r}" for r in ASSET_ROUTES]
    paths += [f"/api/connections/s3_lake/{r}" for r in ASSET_ROUTES]
    return paths


def test_every_route_needs_a_login(view: View) -> None:
    for path in _all_paths(view):
        response = view.get(path, user=None)
        assert response.status_code == 401, path
    # The page itself is static and holds no data (Airflow 3.1's UI sends no cookie with it).
    page = view.get("/", user=None)
    assert page.status_code == 200 and "events" not in page.text


def test_a_user_who_may_not_see_assets_sees_no_table(view: View) -> None:
    for path in _all_paths(view):
        response = view.get(path, user="noassets")
        assert response.status_code == 403, path
        assert "events" not in response.text


def test_connections_need_read_access_to_connections(view: View) -> None:
    listed = view.ok("/api/tables", user="viewer")["tables"]
    assert {t["kind"] for t in listed} == {"asset"}
    for route in ASSET_ROUTES:
        assert view.get(f"/api/connections/s3_lake/{route}", user="viewer").status_code == 403
    # The viewer may read the assets.
    assert view.ok(f"/api/assets/{view.ids['events']}/health", user="viewer")["active_files"] == 2


def test_the_page_and_its_chart_library_are_served_from_the_plugin(view: View) -> None:
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


def test_nothing_in_the_api_can_modify_a_table(view: View) -> None:
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


def test_the_list_holds_the_provider_assets_and_the_delta_connections(view: View) -> None:
    listed = view.ok("/api/tables")["tables"]
    assets = {t["id"]: t for t in listed if t["kind"] == "asset"}
    assert view.ids["events"] in assets and view.ids["s3"] in assets
    assert view.ids["other"] not in assets  # no event of a Delta commit: not the provider's
    connections = {t["id"]: t for t in listed if t["kind"] == "connection"}
    assert set(connections) == {"s3_lake", "missing_lake"}
    assert connections["s3_lake"]["uri"].startswith("s3://ui-")


def test_history_shows_who_committed_the_retries_and_the_skip(view: View) -> None:
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


def test_history_reads_only_the_commits_shown(view: View) -> None:
    corrupt = view.ids["corrupt"]
    # Version 0's commit file is garbage: the newest page does not read it...
    page = view.ok(f"/api/assets/{corrupt}/history", limit=2)
    assert [e["version"] for e in page["entries"]] == [2, 1] and page["next_before"] == 1
    # ... the page that shows it says what is wrong.
    response = view.get(f"/api/assets/{corrupt}/history", limit=2, before=1)
    assert response.status_code == 422
    assert "cannot be read" in response.json()["detail"] and "00000000000000000000.json" in response.text


@pytest.mark.parametrize("route", ["health", "maintenance", "vacuum-dry-run"])
def test_a_corrupt_or_missing_table_gives_a_clear_message(view: View, route: str) -> None:
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


def test_health_counts_the_active_files_and_describes_the_protocol(view: View) -> None:
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


def test_health_lists_the_cursors_of_the_consumers_committing_into_the_table(view: View) -> None:
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


def test_the_vacuum_dry_run_deletes_nothing(view: View) -> None:
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


def test_maintenance_names_the_last_checkpoint_vacuum_and_when_each_is_next_due(view: View) -> None:
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
    bad = view.get(f"/api/assets/{view.ids['events']}/maintenance", vacuum_interval="soon")
    assert bad.status_code == 400 and "soon" in bad.json()["detail"]


def test_a_table_on_s3_is_read_with_its_connections_credentials_and_never_shows_them(view: View) -> None:
    for route in ASSET_ROUTES:
        by_connection = view.ok(f"/api/connections/s3_lake/{route}")
        by_asset = view.ok(f"/api/assets/{view.ids['s3']}/{route}")
        assert by_connection["table"] == by_asset["table"]
        assert by_connection["table"].startswith("s3://ui-")
    assert view.ok("/api/connections/s3_lake/history")["entries"][0]["operation"] == "CREATE TABLE"
