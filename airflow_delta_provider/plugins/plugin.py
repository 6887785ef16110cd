"""The plugin class: what Airflow's plugin manager reads."""

from __future__ import annotations

from typing import Any

from airflow.plugins_manager import AirflowPlugin

from airflow_delta_provider.plugins.app import app

#: Where the API server mounts the app.
URL_PREFIX = "/delta"
#: The page's route in the UI (``/plugin/delta-tables``).
URL_ROUTE = "delta-tables"


class DeltaViewPlugin(AirflowPlugin):
    """History, health and maintenance of the deployment's Delta tables (read only)."""

    name = "delta_tables"
    fastapi_apps: list[dict[str, Any]] = [{"app": app, "url_prefix": URL_PREFIX, "name": "Delta tables"}]
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
