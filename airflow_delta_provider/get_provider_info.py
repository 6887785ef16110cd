"""Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_delta_provider import __version__


def get_provider_info() -> dict[str, Any]:
    """What ``airflow providers list`` / ``get`` show about this package."""
    return {
        "package-name": "airflow-delta-provider",
        "name": "Delta Lake",
        "description": (
            "Delta Lake tables for Apache Airflow: idempotent commits of PySpark output, "
            "sensors and triggers on new table versions, and scheduled maintenance "
            "(checkpoints, log cleanup, VACUUM) on a pure-Python Delta log core."
        ),
        "versions": [__version__],
        "integrations": [
            {
                "integration-name": "Delta Lake",
                "external-doc-url": "https://delta.io/",
                "tags": ["software"],
            }
        ],
    }
