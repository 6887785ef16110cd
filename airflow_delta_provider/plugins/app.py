"""The Delta view's API and page: a FastAPI app the Airflow API server mounts at ``/delta``.

Tables are the ones the deployment knows: the assets whose events the provider's commit
operators emitted (or that a provider trigger watches) and the ``delta`` connections. Every
route checks the user with Airflow's own auth dependencies: an asset's views need read access
to that asset; a connection's views need read access to the connection and to assets. Each
table is opened with its connection's credentials (a ``delta`` connection naming the asset's
location, else the location alone) and only read: the routes are GETs, and the one that
plans a VACUUM runs it as a dry run. Every response is redacted before it leaves.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow.api_fastapi.common.db.common import SessionDep  # noqa: TC002 - FastAPI reads it at runtime
from airflow.api_fastapi.core_api.security import (
    GetUserDep,
    requires_access_asset,
    requires_access_connection,
)
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from airflow_delta_provider.core.errors import CorruptLogError, DeltaError, TableNotFoundError
from airflow_delta_provider.core.redaction import redact
from airflow_delta_provider.hooks.delta import DeltaTableHook
from airflow_delta_provider.plugins.tables import (
    MAX_HISTORY,
    interval,
    restore_target,
    table_health,
    table_history,
    table_maintenance,
    vacuum_dry_run,
)
from airflow_delta_provider.utils.secrets import describe_error, public_location

if TYPE_CHECKING:
    from collections.abc import Callable

    from sqlalchemy.orm import Session

    from airflow_delta_provider.core.table import DeltaTable

__all__ = ["DEFAULT_VACUUM_INTERVAL", "STATIC", "app"]

STATIC = Path(__file__).resolve().parent / "static"
#: The maintenance DAG's default time between two VACUUMs (the page may ask for another).
DEFAULT_VACUUM_INTERVAL = timedelta(days=7)
#: The trigger class path prefix that marks an asset watched by the provider.
_PROVIDER_PREFIX = "airflow_delta_provider."
#: Asset events read per table for the skips shown on the timeline.
_EVENTS = 200

app = FastAPI(
    title="Delta tables",
    description="Read-only views of the Delta tables behind the provider's assets and delta connections.",
)
app.mount("/static", StaticFiles(directory=STATIC), name="static")


class ServerHook(DeltaTableHook):
    """The hook, resolving connections in the API server (the metadata DB and secrets backends)."""

    @classmethod
    def get_connection(cls, conn_id: str) -> Any:
        from airflow.models.connection import Connection

        return Connection.get_connection_from_secrets(conn_id)


def _json(data: Any, status_code: int = 200) -> Response:
    """A JSON response with every secret the provider knows of replaced."""
    return Response(redact(json.dumps(data, default=str)), status_code, media_type="application/json")


def _fail(status: int, message: str) -> HTTPException:
    return HTTPException(status_code=status, detail=redact(message))


# --- the tables the deployment knows ----------------------------------------------------------


def _delta_connections(session: Session) -> list[Any]:
    from airflow.models.connection import Connection
    from sqlalchemy import select

    return list(session.scalars(select(Connection).where(Connection.conn_type == "delta")))


def _connection_location(conn: Any) -> str | None:
    extra = conn.extra_dejson or {}
    uri = extra.get("table_uri") or conn.host
    if not uri:
        return None
    try:
        return public_location(str(uri))
    except ValueError:
        return None


def _is_provider_asset(session: Session, asset: Any) -> bool:
    """An asset of the provider: the latest of its events came from a Delta commit, or a provider
    trigger watches it."""
    from airflow.models.asset import AssetEvent
    from sqlalchemy import select

    for watcher in getattr(asset, "watchers", None) or []:
        trigger = getattr(watcher, "trigger", None)
        if str(getattr(trigger, "classpath", "")).startswith(_PROVIDER_PREFIX):
            return True
    extra = session.scalar(
        select(AssetEvent.extra)
        .where(AssetEvent.asset_id == asset.id)
        .order_by(AssetEvent.timestamp.desc())
        .limit(1)
    )
    return isinstance(extra, dict) and extra.get("table_uri") == asset.uri and "version" in extra


def _provider_assets(session: Session) -> list[Any]:
    from airflow.models.asset import AssetModel
    from sqlalchemy import select

    assets = session.scalars(select(AssetModel).order_by(AssetModel.uri))
    return [a for a in assets if _is_provider_asset(session, a)]


def _asset(session: Session, asset_id: int) -> Any:
    from airflow.models.asset import AssetModel

    asset = session.get(AssetModel, asset_id)
    if asset is None or not _is_provider_asset(session, asset):
        raise _fail(
            404,
            f"Asset {asset_id} is not a Delta table this deployment knows: pick one from /delta/api/tables "
            f"(assets written by the provider's operators or watched by its trigger, and delta connections).",
        )
    return asset


def _open_location(session: Session, uri: str) -> DeltaTable:
    """The table at an asset's location, with the credentials of a delta connection naming it."""
    for conn in _delta_connections(session):
        if _connection_location(conn) == uri:
            return ServerHook(delta_conn_id=conn.conn_id).get_table()
    return ServerHook(table_uri=uri).get_table()


def _connection_table(session: Session, connection_id: str) -> tuple[DeltaTable, str]:
    conns = {c.conn_id: c for c in _delta_connections(session)}
    if connection_id not in conns:
        raise _fail(
            404,
            f"There is no delta connection {connection_id!r}: add one (type delta, host = the table "
            f"location) or pick one from /delta/api/tables.",
        )
    hook = ServerHook(delta_conn_id=connection_id)
    try:
        return hook.get_table(), hook.table_uri
    except (ValueError, DeltaError) as err:
        raise _fail(
            422, f"Connection {connection_id!r} names no usable table: {describe_error(err)}"
        ) from None


def _read(uri: str, read: Callable[[], dict[str, Any]]) -> Response:
    """Run a read of the table, turning a missing or unreadable table into a clear message."""
    try:
        return _json(read())
    except HTTPException:
        raise
    except TableNotFoundError as err:
        raise _fail(
            404,
            f"No Delta table at {uri}: {describe_error(err)}. Check the location (the asset URI or the "
            f"connection's host); the table appears once its first commit has landed.",
        ) from None
    except CorruptLogError as err:
        raise _fail(
            422,
            f"The Delta log of {uri} cannot be read: {describe_error(err)}. The view shows nothing until "
            f"the log is repaired (see docs/ui.md).",
        ) from None
    except (DeltaError, ValueError, OSError) as err:
        raise _fail(422, f"Cannot read the Delta table at {uri}: {describe_error(err)}") from None


def _skips(session: Session, asset_id: int | None) -> list[dict[str, Any]]:
    """The idempotent skips recorded as the asset's events: executions that committed nothing."""
    if asset_id is None:
        return []
    from airflow.models.asset import AssetEvent
    from airflow.models.taskinstance import TaskInstance
    from sqlalchemy import select

    events = session.scalars(
        select(AssetEvent)
        .where(AssetEvent.asset_id == asset_id)
        .order_by(AssetEvent.timestamp.desc())
        .limit(_EVENTS)
    )
    found = []
    for event in events:
        extra = event.extra if isinstance(event.extra, dict) else {}
        if not extra.get("skipped") or event.source_dag_id is None:
            continue
        map_index = event.source_map_index if event.source_map_index is not None else -1
        try_number = session.scalar(
            select(TaskInstance.try_number).where(
                TaskInstance.dag_id == event.source_dag_id,
                TaskInstance.task_id == event.source_task_id,
                TaskInstance.run_id == event.source_run_id,
                TaskInstance.map_index == map_index,
            )
        )
        found.append(
            {
                "timestamp": event.timestamp.isoformat(timespec="seconds"),
                "version": extra.get("version"),
                "operation": extra.get("operation"),
                "airflow": {
                    "dag_id": event.source_dag_id,
                    "task_id": event.source_task_id,
                    "run_id": event.source_run_id,
                    "map_index": map_index,
                    "try_number": try_number,
                },
            }
        )
    return found


def _asset_id_for(session: Session, uri: str) -> int | None:
    from airflow.models.asset import AssetModel
    from sqlalchemy import select

    return session.scalar(select(AssetModel.id).where(AssetModel.uri == uri).limit(1))


# --- routes -----------------------------------------------------------------------------------


@app.get("/", response_class=HTMLResponse)
def page() -> HTMLResponse:
    """The page: static, no data (it asks the API below, which checks the user, for everything).

    Public like the static files: Airflow 3.1's UI moves its login token from the ``_token``
    cookie into local storage, so the iframe's own request carries no credentials; the page's
    script sends that token with every API call."""
    return HTMLResponse((STATIC / "index.html").read_text())


@app.get("/api/tables", dependencies=[Depends(requires_access_asset("GET"))])
def list_tables(session: SessionDep, user: GetUserDep) -> Response:
    """The Delta tables of the deployment: provider assets and delta connections."""
    from airflow.api_fastapi.app import get_auth_manager

    found = [
        {"kind": "asset", "id": str(a.id), "name": a.name, "uri": a.uri} for a in _provider_assets(session)
    ]
    if get_auth_manager().is_authorized_connection(method="GET", user=user):
        for conn in _delta_connections(session):
            found.append(
                {
                    "kind": "connection",
                    "id": conn.conn_id,
                    "name": conn.conn_id,
                    "uri": _connection_location(conn),
                }
            )
    return _json({"tables": found})


def _vacuum_interval(value: str | None) -> timedelta | None:
    try:
        return interval(value, DEFAULT_VACUUM_INTERVAL)
    except ValueError as err:
        raise _fail(400, f"vacuum_interval: {err}") from None


_ASSET = [Depends(requires_access_asset("GET"))]
_CONNECTION = [Depends(requires_access_connection("GET")), Depends(requires_access_asset("GET"))]
_LIMIT = Query(20, ge=1, le=MAX_HISTORY)


@app.get("/api/assets/{asset_id}/history", dependencies=_ASSET)
def asset_history(
    asset_id: int, session: SessionDep, limit: int = _LIMIT, before: int | None = None
) -> Response:
    asset = _asset(session, asset_id)

    def read() -> dict[str, Any]:
        result = table_history(_open_location(session, asset.uri), limit, before)
        return {"table": asset.uri, **result, "skips": _skips(session, asset.id)}

    return _read(asset.uri, read)


@app.get("/api/assets/{asset_id}/health", dependencies=_ASSET)
def asset_health(asset_id: int, session: SessionDep) -> Response:
    asset = _asset(session, asset_id)
    return _read(asset.uri, lambda: {"table": asset.uri, **table_health(_open_location(session, asset.uri))})


@app.get("/api/assets/{asset_id}/vacuum-dry-run", dependencies=_ASSET)
def asset_vacuum_dry_run(asset_id: int, session: SessionDep) -> Response:
    asset = _asset(session, asset_id)
    return _read(
        asset.uri, lambda: {"table": asset.uri, **vacuum_dry_run(_open_location(session, asset.uri))}
    )


@app.get("/api/assets/{asset_id}/maintenance", dependencies=_ASSET)
def asset_maintenance(asset_id: int, session: SessionDep, vacuum_interval: str | None = None) -> Response:
    asset = _asset(session, asset_id)
    every = _vacuum_interval(vacuum_interval)
    return _read(
        asset.uri,
        lambda: {"table": asset.uri, **table_maintenance(_open_location(session, asset.uri), every)},
    )


@app.get("/api/connections/{connection_id}/history", dependencies=_CONNECTION)
def connection_history(
    connection_id: str, session: SessionDep, limit: int = _LIMIT, before: int | None = None
) -> Response:
    table, uri = _connection_table(session, connection_id)

    def read() -> dict[str, Any]:
        result = table_history(table, limit, before)
        return {"table": uri, **result, "skips": _skips(session, _asset_id_for(session, uri))}

    return _read(uri, read)


@app.get("/api/connections/{connection_id}/health", dependencies=_CONNECTION)
def connection_health(connection_id: str, session: SessionDep) -> Response:
    table, uri = _connection_table(session, connection_id)
    return _read(uri, lambda: {"table": uri, **table_health(table)})


@app.get("/api/connections/{connection_id}/vacuum-dry-run", dependencies=_CONNECTION)
def connection_vacuum_dry_run(connection_id: str, session: SessionDep) -> Response:
    table, uri = _connection_table(session, connection_id)
    return _read(uri, lambda: {"table": uri, **vacuum_dry_run(table)})


@app.get("/api/connections/{connection_id}/maintenance", dependencies=_CONNECTION)
def connection_maintenance(
    connection_id: str, session: SessionDep, vacuum_interval: str | None = None
) -> Response:
    table, uri = _connection_table(session, connection_id)
    every = _vacuum_interval(vacuum_interval)
    return _read(uri, lambda: {"table": uri, **table_maintenance(table, every)})


@app.get("/api/assets/{asset_id}/restore-target", dependencies=_ASSET)
def asset_restore_target(asset_id: int, session: SessionDep, dag_id: str, run_id: str) -> Response:
    """The version before a run's first commit to the table (what a restore "before that run" restores)."""
    asset = _asset(session, asset_id)
    return _read(
        asset.uri,
        lambda: {"table": asset.uri, **restore_target(_open_location(session, asset.uri), dag_id, run_id)},
    )


@app.get("/api/connections/{connection_id}/restore-target", dependencies=_CONNECTION)
def connection_restore_target(connection_id: str, session: SessionDep, dag_id: str, run_id: str) -> Response:
    table, uri = _connection_table(session, connection_id)
    return _read(uri, lambda: {"table": uri, **restore_target(table, dag_id, run_id)})
