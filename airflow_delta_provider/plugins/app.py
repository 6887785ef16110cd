"""The Delta view's API and page: a FastAPI app the Airflow API server mounts at ``/delta``.

Tables are the ones the deployment knows: the assets whose events the provider's commit
operators emitted (or that a provider trigger watches) and the ``delta`` connections. Every
route checks the user with Airflow's own auth dependencies: an asset's views need read access
to that asset; a connection's views need read access to the connection and to assets. The list
holds only the assets and connections the auth manager lets the user read, each asked about
by its id as its own routes ask. Each table is opened with its connection's credentials (a
``delta`` connection naming the asset's location, else the location alone) and only read: the
routes are GETs, and the one that plans a VACUUM runs it as a dry run. Every response is
redacted before it leaves, and every failure is a JSON message naming the table, never a
traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from airflow.api_fastapi.common.db.common import SessionDep  # noqa: TC002 - FastAPI reads it at runtime
from airflow.api_fastapi.core_api.security import (
    GetUserDep,
    requires_access_asset,
    requires_access_connection,
    requires_authenticated,
)
from fastapi import Depends, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from airflow_delta_provider.core.errors import CorruptLogError, DeltaError, TableNotFoundError
from airflow_delta_provider.core.log import info_integer
from airflow_delta_provider.core.table import DEFAULT_VACUUM_INTERVAL
from airflow_delta_provider.core.utils import get_logger, redact
from airflow_delta_provider.hooks.delta import DeltaTableHook
from airflow_delta_provider.plugins.tables import (
    MAX_HISTORY,
    free_text,
    interval,
    restore_target,
    table_health,
    table_history,
    table_maintenance,
    vacuum_dry_run,
)
from airflow_delta_provider.utils.secrets import describe_error, public_location
from airflow_delta_provider.utils.version_compat import AirflowNotFoundException

T = TypeVar("T")

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import timedelta

    from sqlalchemy.orm import Session

    from airflow_delta_provider.core.table import DeltaTable

__all__ = ["DEFAULT_VACUUM_INTERVAL", "STATIC", "app"]

STATIC = Path(__file__).resolve().parent / "static"
#: The trigger class path prefix that marks an asset watched by the provider.
_PROVIDER_PREFIX = "airflow_delta_provider."
#: Asset events read per table for the skips shown on the timeline.
_EVENTS = 200
#: The largest asset id (the metadata DB's INTEGER) and connection id (Airflow's ID_LEN) there can be.
_MAX_ASSET_ID = 2**31 - 1
_MAX_CONNECTION_ID = 250
#: Where the exceptions of the storage clients come from (an unreachable or refusing store).
_STORAGE_MODULES = (
    "botocore",
    "aiobotocore",
    "s3fs",
    "adlfs",
    "azure",
    "gcsfs",
    "google",
    "aiohttp",
    "fsspec",
)

log = get_logger(__name__)

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
    """A connection's table location as the provider shows it (None when it names none)."""
    extra = conn.extra_dejson
    uri = (extra.get("table_uri") if isinstance(extra, dict) else None) or conn.host
    if not uri:
        return None
    try:
        return public_location(str(uri))
    except ValueError:
        return None


def _is_provider_asset(session: Session, asset: Any) -> bool:
    """An asset of the provider: the latest of its events came from a Delta commit made by a task,
    or a provider trigger watches it.

    An event posted through Airflow's REST API has no source task and can carry any extra: it
    never makes an asset a table, or anyone allowed to post events could have the API server open
    any asset's location (another store, a metadata endpoint) with the credentials of a delta
    connection naming it."""
    from airflow.models.asset import AssetEvent
    from sqlalchemy import select

    for watcher in getattr(asset, "watchers", None) or []:
        trigger = getattr(watcher, "trigger", None)
        if str(getattr(trigger, "classpath", "")).startswith(_PROVIDER_PREFIX):
            return True
    latest = session.execute(
        select(AssetEvent.extra, AssetEvent.source_task_id)
        .where(AssetEvent.asset_id == asset.id)
        .order_by(AssetEvent.timestamp.desc())
        .limit(1)
    ).first()
    if latest is None or latest.source_task_id is None:
        return False
    extra = latest.extra
    return isinstance(extra, dict) and extra.get("table_uri") == asset.uri and "version" in extra


def _provider_assets(session: Session) -> list[Any]:
    from airflow.models.asset import AssetModel
    from sqlalchemy import select

    assets = session.scalars(select(AssetModel).order_by(AssetModel.uri))
    return [a for a in assets if _is_provider_asset(session, a)]


def _asset(session: Session, asset_id: int) -> Any:
    from airflow.models.asset import AssetModel

    # An id no database column holds is no asset (asking the database would fail).
    asset = session.get(AssetModel, asset_id) if 0 < asset_id <= _MAX_ASSET_ID else None
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


def _no_connection(connection_id: str) -> HTTPException:
    return _fail(
        404,
        f"There is no delta connection {connection_id!r}: add one (type delta, host = the table "
        f"location) or pick one from /delta/api/tables.",
    )


def _valid_connection_id(connection_id: str) -> None:
    """Refuse an id no connection can have before anything asks the database about it."""
    if len(connection_id) > _MAX_CONNECTION_ID or not connection_id.isprintable():
        raise _no_connection(connection_id[:_MAX_CONNECTION_ID])


def _connection_location_or_fail(hook: ServerHook, connection_id: str) -> str:
    try:
        return hook.table_uri
    except ValueError as err:
        raise _fail(
            422, f"Connection {connection_id!r} names no usable table: {describe_error(err)}"
        ) from None


def _is_storage_error(err: BaseException) -> bool:
    return isinstance(err, OSError) or type(err).__module__.split(".")[0] in _STORAGE_MODULES


def _guarded(where: str, read: Callable[[], T]) -> T:
    """Run a read of a table (opening it included), turning every failure into an HTTP error whose
    JSON message names the table and the problem: 404 no table, 422 an unreadable log or setting,
    502 a store that cannot be reached or refuses, 500 anything else (logged, redacted)."""
    try:
        return read()
    except HTTPException:
        raise
    except TableNotFoundError as err:
        raise _fail(
            404,
            f"No Delta table at {where}: {describe_error(err)}. Check the location (the asset URI or the "
            f"connection's host); the table appears once its first commit has landed.",
        ) from None
    except AirflowNotFoundException as err:
        raise _fail(
            422,
            f"The table at {where} cannot be opened: a connection it needs does not exist "
            f"({describe_error(err)}). Check its delta connection and the storage_conn_id it names.",
        ) from None
    except CorruptLogError as err:
        raise _fail(
            422,
            f"The Delta log of {where} cannot be read: {describe_error(err)}. The view shows nothing until "
            f"the log is repaired (see docs/ui.md).",
        ) from None
    except (DeltaError, ValueError) as err:
        raise _fail(422, f"Cannot read the Delta table at {where}: {describe_error(err)}") from None
    except Exception as err:
        if _is_storage_error(err):
            raise _fail(
                502,
                f"The storage of {where} cannot be read: {describe_error(err)}. Check that it is reachable "
                f"from the API server and the credentials of its connection.",
            ) from None
        log.warning("Reading the Delta table at %s failed", where, exc_info=True)
        raise _fail(
            500, f"Reading the Delta table at {where} failed: {describe_error(err)} (the API server logs it)."
        ) from None


def _read(uri: str, read: Callable[[], dict[str, Any]]) -> Response:
    """:func:`_guarded`, answered as redacted JSON."""
    return _json(_guarded(uri, read))


def _connection_view(
    session: Session, connection_id: str, view: Callable[[DeltaTable, str], dict[str, Any]]
) -> Response:
    """A view of a delta connection's table: ``view(table, location)`` under :func:`_read`."""
    if connection_id not in {c.conn_id for c in _delta_connections(session)}:
        raise _no_connection(connection_id)
    hook = ServerHook(delta_conn_id=connection_id)
    uri = _guarded(f"connection {connection_id!r}", lambda: _connection_location_or_fail(hook, connection_id))
    return _read(uri, lambda: {"table": uri, **view(hook.get_table(), uri)})


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
                # An event's extra is anyone's (Airflow's REST API posts events): read by shape.
                "version": info_integer(extra.get("version")),
                "operation": free_text(extra.get("operation")),
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


def _may_read_asset(user: Any, asset_id: int) -> bool:
    """Whether the auth manager lets the user read this asset (the question its routes ask)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import AssetDetails

    details = AssetDetails(id=str(asset_id))
    return bool(get_auth_manager().is_authorized_asset(method="GET", details=details, user=user))


def _readable_connections(session: Session, user: Any, connections: list[Any]) -> list[Any]:
    """The connections the user may read, each asked about by its id and team, as Airflow's own
    connection list and routes ask the auth manager (a user may read some connections only)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import ConnectionDetails
    from airflow.models.connection import Connection

    manager = get_auth_manager()
    readable = []
    for conn in connections:
        team = getattr(conn, "team_name", None)
        if team is None and hasattr(Connection, "team_id"):  # Airflow 3.1: the team by its id
            team = Connection.get_team_name(conn.conn_id, session=session)
        details = ConnectionDetails(conn_id=conn.conn_id, team_name=team)
        if manager.is_authorized_connection(method="GET", details=details, user=user):
            readable.append(conn)
    return readable


@app.get("/api/tables", dependencies=[Depends(requires_access_asset("GET"))])
def list_tables(session: SessionDep, user: GetUserDep) -> Response:
    """The Delta tables of the deployment the user may read: provider assets and delta connections."""
    found = [
        {"kind": "asset", "id": str(a.id), "name": a.name, "uri": a.uri}
        for a in _provider_assets(session)
        if _may_read_asset(user, a.id)
    ]
    for conn in _readable_connections(session, user, _delta_connections(session)):
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
_CONNECTION = [
    Depends(requires_authenticated()),
    Depends(_valid_connection_id),
    Depends(requires_access_connection("GET")),
    Depends(requires_access_asset("GET")),
]
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
    connection_id: str,
    session: SessionDep,
    user: GetUserDep,
    limit: int = _LIMIT,
    before: int | None = None,
) -> Response:
    def view(table: DeltaTable, uri: str) -> dict[str, Any]:
        # The skips are the events of the asset at the same location, when the user may read it.
        asset_id = _asset_id_for(session, uri)
        if asset_id is not None and not _may_read_asset(user, asset_id):
            asset_id = None
        return {**table_history(table, limit, before), "skips": _skips(session, asset_id)}

    return _connection_view(session, connection_id, view)


@app.get("/api/connections/{connection_id}/health", dependencies=_CONNECTION)
def connection_health(connection_id: str, session: SessionDep) -> Response:
    return _connection_view(session, connection_id, lambda table, _uri: table_health(table))


@app.get("/api/connections/{connection_id}/vacuum-dry-run", dependencies=_CONNECTION)
def connection_vacuum_dry_run(connection_id: str, session: SessionDep) -> Response:
    return _connection_view(session, connection_id, lambda table, _uri: vacuum_dry_run(table))


@app.get("/api/connections/{connection_id}/maintenance", dependencies=_CONNECTION)
def connection_maintenance(
    connection_id: str, session: SessionDep, vacuum_interval: str | None = None
) -> Response:
    every = _vacuum_interval(vacuum_interval)
    return _connection_view(session, connection_id, lambda table, _uri: table_maintenance(table, every))


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
    return _connection_view(session, connection_id, lambda table, _uri: restore_target(table, dag_id, run_id))
