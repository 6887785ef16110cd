"""The plugin class: what Airflow's plugin manager reads."""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

#: Where the API server mounts the app.
URL_PREFIX = "/delta"
#: The page's route in the UI (``/plugin/delta-tables``).
URL_ROUTE = "delta-tables"


class _FastApiApps:
    """``DeltaViewPlugin.fastapi_apps``, built when first read (on the class or an instance).

    Airflow loads every ``airflow.plugins`` entry point in every process that asks for plugins
    (each task, for its macros and listeners; the scheduler, triggerer and DAG processor), but
    only the API server reads ``fastapi_apps``. Importing the app at class creation made every
    one of those processes import FastAPI, Airflow's API server modules, the core and pyarrow
    (~1.6 s of CPU and ~95 MB per task process); the import below runs where the app is used.
    """

    def __get__(self, instance: object, owner: type | None = None) -> list[dict[str, Any]]:
        from airflow_delta_provider.plugins.app import app

        return [{"app": app, "url_prefix": URL_PREFIX, "name": "Delta tables"}]


class DeltaViewPlugin(AirflowPlugin):
    """History, health and maintenance of the deployment's Delta tables (read only)."""

    name = "delta_tables"
    fastapi_apps = _FastApiApps()
    # An external view (an iframe of the app's page) works from Airflow 3.1.0 to the newest; a
    # react_apps bundle would need Airflow's React build on both sides.
    external_views: list[dict[str, Any]] = [
        {
            "name": "Delta tables",
            "href": f"{URL_PREFIX}/",
            "destination": "nav",
            "category": "browse",
            "url_route": URL_ROUTE,
        }
    ]
