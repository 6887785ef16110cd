"""Provider metadata, read by Airflow through the ``apache_airflow_provider`` entry point."""

from __future__ import annotations

from typing import Any

from airflow_delta_provider import __version__

INTEGRATION = "Delta Lake"


def _option(description: str, type_: str, default: str | None, example: str | None = None) -> dict[str, Any]:
    return {
        "description": description,
        "version_added": "0.1.0",
        "type": type_,
        "example": example,
        "default": default,
    }


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
                "integration-name": INTEGRATION,
                "external-doc-url": "https://delta.io/",
                "how-to-guide": [
                    "/docs/operators.md",
                    "/docs/sensors-and-triggers.md",
                    "/docs/maintenance.md",
                    "/docs/lifecycle.md",
                ],
                "tags": ["software"],
            }
        ],
        "operators": [
            {
                "integration-name": INTEGRATION,
                "python-modules": [
                    "airflow_delta_provider.operators.commit",
                    "airflow_delta_provider.operators.pyspark",
                    "airflow_delta_provider.operators.maintenance",
                    "airflow_delta_provider.operators.optimize",
                    "airflow_delta_provider.operators.delete",
                    "airflow_delta_provider.operators.spark_vacuum",
                    "airflow_delta_provider.operators.restore",
                ],
            }
        ],
        "sensors": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_delta_provider.sensors.delta"]}
        ],
        "triggers": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_delta_provider.triggers.delta"]}
        ],
        "hooks": [
            {"integration-name": INTEGRATION, "python-modules": ["airflow_delta_provider.hooks.delta"]}
        ],
        "task-decorators": [
            {
                "class-name": "airflow_delta_provider.decorators.pyspark.delta_pyspark_task",
                "name": "delta_pyspark",
            }
        ],
        "connection-types": [
            {
                "connection-type": "delta",
                "hook-class-name": "airflow_delta_provider.hooks.delta.DeltaTableHook",
                "hook-name": "Delta Lake table",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema", "port", "login"],
                    # The password holds the secret storage options: Airflow masks it in its form,
                    # its REST API and task logs, whereas the extra is shown in clear text.
                    "relabeling": {
                        "host": "Table location (URI)",
                        "password": "Secret storage options (JSON)",
                    },
                    "placeholders": {"host": "s3://bucket/path/to/table", "password": '{"secret": "..."}'},
                },
                "conn-fields": {
                    "storage_conn_id": {
                        "label": "Storage connection id",
                        "description": "An Airflow connection (aws, google_cloud_platform, wasb...) with the "
                        "credentials of the table's storage.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "storage_options": {
                        "label": "Storage options (JSON), no secrets",
                        "description": "fsspec options for the table's filesystem that are no secret "
                        "(endpoint_url, region_name...), as a JSON object. They are shown in clear text; "
                        "put secret options in the password field, or credentials in a storage connection.",
                        "schema": {"type": ["string", "null"]},
                    },
                    "table_uri": {
                        "label": "Table location (URI), when not in Host",
                        "schema": {"type": ["string", "null"]},
                    },
                },
            }
        ],
        "config": {
            "delta": {
                "description": "Provider-wide defaults for Delta tables. A table's own properties and a "
                "task's arguments take precedence.",
                "options": {
                    "poll_interval": _option(
                        "Seconds between polls of DeltaTableVersionSensor and DeltaTableVersionTrigger.",
                        "float",
                        "60",
                        "30",
                    ),
                    "log_retention_duration": _option(
                        "Default delta.logRetentionDuration for log cleanup of tables that do not set it "
                        "(empty: Delta's 30 days).",
                        "string",
                        "",
                        "interval 30 days",
                    ),
                    "deleted_file_retention_duration": _option(
                        "Default delta.deletedFileRetentionDuration for VACUUM of tables that do not set "
                        "it (empty: Delta's 7 days).",
                        "string",
                        "",
                        "interval 7 days",
                    ),
                    "set_transaction_retention_duration": _option(
                        "delta.setTransactionRetentionDuration written on the tables the provider creates, "
                        "so that their set of idempotency txns stays bounded. Retries and re-runs older "
                        "than this are no longer recognised as already committed.",
                        "string",
                        "interval 90 days",
                        "interval 365 days",
                    ),
                    "checkpoint_interval": _option(
                        "Default delta.checkpointInterval for the maintenance policy (empty: Delta's 10).",
                        "string",
                        "",
                        "10",
                    ),
                    "max_commit_attempts": _option(
                        "Commit attempts when concurrent writers keep taking the next version.",
                        "integer",
                        "100",
                        "100",
                    ),
                },
            }
        },
    }
