"""The Delta view's app as the API server mounts it, for the tests of ``tests/unit/plugins``.

The plugin's own app is mounted at ``/delta`` beside Airflow's auth manager (SimpleAuthManager,
subclassed so that one user may read no asset and another only some assets and connections);
the metadata DB is a real, migrated SQLite. Each test module writes its own tables and records
them as Airflow does: an asset with the commit operator's event, or a ``delta`` connection.
"""

from __future__ import annotations

import os
import sys
import uuid
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

AUTH_MODULE = "delta_view_test_auth"
_AUTH_SOURCE = '''
from airflow.api_fastapi.auth.managers.simple.simple_auth_manager import SimpleAuthManager


class PartialAuthManager(SimpleAuthManager):
    """Airflow's simple auth manager, except that the user "noassets" may read no asset and the user
    "partial" (an op) neither the assets in ``denied_assets`` nor the connections named private_*."""

    denied_assets: set = set()

    def is_authorized_asset(self, *, method, user, details=None):
        if user.get_name() == "noassets":
            return False
        if user.get_name() == "partial" and details is not None and details.id in self.denied_assets:
            return False
        return super().is_authorized_asset(method=method, user=user, details=details)

    def is_authorized_connection(self, *, method, user, details=None):
        conn_id = (details.conn_id if details is not None else None) or ""
        if user.get_name() == "partial" and conn_id.startswith("private_"):
            return False
        return super().is_authorized_connection(method=method, user=user, details=details)
'''
USERS = (("admin", "admin"), ("viewer", "viewer"), ("noassets", "admin"), ("partial", "op"))


class View:
    """What the tests use: the client, a token per user, the tables' ids and the secrets to look for."""

    def __init__(self, client: Any, tokens: dict[str, str]) -> None:
        self.client = client
        self.tokens = tokens
        self.ids: dict[str, str] = {}
        self.secrets: list[str] = []

    def get(self, path: str, user: str | None = "admin", **params: Any) -> Any:
        headers = {"Authorization": f"Bearer {self.tokens[user]}"} if user else {}
        response = self.client.get(f"/delta{path}", headers=headers, params=params)
        self.assert_clean(response)
        return response

    def ok(self, path: str, user: str = "admin", **params: Any) -> dict[str, Any]:
        response = self.get(path, user, **params)
        assert response.status_code == 200, response.text
        return dict(response.json())

    def assert_clean(self, response: Any) -> None:
        """Whatever the status: JSON (or the page), no traceback, no secret."""
        leaked = [s for s in self.secrets if s in response.text]
        assert leaked == [], response.text
        assert "Traceback" not in response.text
        if response.status_code != 200 or "/api/" in str(response.url):
            assert response.headers["content-type"].startswith("application/json"), response.text

    def asset(
        self,
        uri: str,
        result: dict[str, Any] | None,
        run_id: str = "run_1",
        name: str | None = None,
        extra: dict[str, Any] | None = None,
        *,
        api: bool = False,
    ) -> str:
        """Record what Airflow records when a commit task succeeds: the asset and its event (none
        when ``result`` is None: an asset of someone else; ``extra``: an event another producer
        emitted; ``api``: posted through Airflow's REST API, as anyone allowed to post asset events
        may do: an event with no source task)."""
        from airflow.models.asset import AssetEvent, AssetModel
        from airflow.utils.session import create_session
        from sqlalchemy import select

        from airflow_delta_provider.assets.delta import asset_event_extra

        with create_session() as session:
            asset = session.scalar(select(AssetModel).where(AssetModel.uri == uri))
            if asset is None:
                asset = AssetModel(name=name or uri, uri=uri, group="asset")
                session.add(asset)
                session.flush()
            if result is None and extra is None:
                return str(asset.id)
            source = {
                "source_dag_id": "ingest_dag",
                "source_task_id": "ingest",
                "source_run_id": run_id,
                "source_map_index": -1,
            }
            session.add(
                AssetEvent(
                    asset_id=asset.id,
                    extra=extra if extra is not None else asset_event_extra(result or {}, uri),
                    **({} if api else source),
                )
            )
            session.flush()
            return str(asset.id)

    def connection(self, conn_id: str, **fields: Any) -> None:
        """Add a connection (``conn_type`` delta unless given)."""
        from airflow.models.connection import Connection
        from airflow.utils.session import create_session

        with create_session() as session:
            session.add(Connection(conn_id=conn_id, **{"conn_type": "delta", **fields}))


@pytest.fixture(scope="module")
def delta_view(tmp_path_factory: pytest.TempPathFactory) -> Iterator[View]:
    """The app and its auth manager, per test module (the SQLite metadata DB is the session's)."""
    from airflow.api_fastapi.app import init_auth_manager
    from airflow.api_fastapi.auth.managers.simple.user import SimpleAuthManagerUser
    from airflow.utils import db
    from fastapi import FastAPI
    from fastapi.testclient import TestClient

    from airflow_delta_provider.plugins.plugin import DeltaViewPlugin

    auth_dir: Path = tmp_path_factory.mktemp("auth")
    (auth_dir / f"{AUTH_MODULE}.py").write_text(_AUTH_SOURCE)
    sys.path.insert(0, str(auth_dir))
    settings = {
        "AIRFLOW__CORE__AUTH_MANAGER": f"{AUTH_MODULE}.PartialAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(f"{u}:{r}" for u, r in USERS),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(auth_dir / "passwords.json"),
        "AIRFLOW__API_AUTH__JWT_SECRET": uuid.uuid4().hex * 2,
        "AIRFLOW__API_AUTH__JWT_ISSUER": "delta-view-tests",
    }
    saved = {k: os.environ.get(k) for k in settings}
    os.environ.update(settings)
    try:
        db.initdb()
        server = FastAPI()
        manager = init_auth_manager(server)
        for plugin_app in DeltaViewPlugin.fastapi_apps:
            server.mount(plugin_app["url_prefix"], plugin_app["app"])
        tokens = {
            name: manager.generate_jwt(SimpleAuthManagerUser(username=name, role=role))
            for name, role in USERS
        }
        yield View(TestClient(server), tokens)
    finally:
        from airflow.api_fastapi import app as api_app

        api_app.purge_cached_app()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        sys.path.remove(str(auth_dir))
        sys.modules.pop(AUTH_MODULE, None)


@pytest.fixture
def denied_assets() -> Iterator[set[str]]:
    """The asset ids the user "partial" may not read (empty again after the test)."""
    denied: set[str] = sys.modules[AUTH_MODULE].PartialAuthManager.denied_assets
    yield denied
    denied.clear()
