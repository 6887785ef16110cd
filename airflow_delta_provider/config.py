"""The provider-wide ``[delta]`` configuration section.

Values here are defaults for every table; a table's own properties and a task's explicit
arguments take precedence (see :mod:`airflow_delta_provider.core.table_config`). The core
never reads Airflow configuration: the Airflow layer passes these values in.
"""

from __future__ import annotations

SECTION = "delta"

#: Delta property -> ``[delta]`` option holding the provider-wide default.
RETENTION_OPTIONS = {
    "delta.logRetentionDuration": "log_retention_duration",
    "delta.deletedFileRetentionDuration": "deleted_file_retention_duration",
    "delta.setTransactionRetentionDuration": "set_transaction_retention_duration",
    "delta.checkpointInterval": "checkpoint_interval",
}

DEFAULT_POLL_INTERVAL = 60.0
DEFAULT_SET_TRANSACTION_RETENTION = "interval 90 days"
DEFAULT_MAX_COMMIT_ATTEMPTS = 100


def _get(option: str, fallback: str = "") -> str:
    from airflow.configuration import conf

    value = conf.get(SECTION, option, fallback=fallback)
    return (value or "").strip()


def poll_interval() -> float:
    """``[delta] poll_interval``: seconds between polls of sensors and triggers (default 60).

    It applies wherever the task does not set its own: a sensor without ``poke_interval``, a
    trigger without ``poll_interval``.
    """
    from airflow_delta_provider.utils.coercion import to_seconds

    return to_seconds(_get("poll_interval", str(DEFAULT_POLL_INTERVAL)), "[delta] poll_interval")


def max_commit_attempts() -> int:
    """``[delta] max_commit_attempts``: commit attempts when concurrent writers keep winning."""
    from airflow_delta_provider.utils.coercion import to_int

    value = to_int(
        _get("max_commit_attempts", str(DEFAULT_MAX_COMMIT_ATTEMPTS)),
        "[delta] max_commit_attempts",
        minimum=1,
        optional=False,
    )
    assert value is not None  # not optional: to_int raised otherwise
    return value


def retention_defaults() -> dict[str, str]:
    """Provider-wide defaults keyed by Delta property, only for the options that are set.

    ``delta.setTransactionRetentionDuration`` always has a value (default
    ``interval 90 days``): it is written on the tables the provider creates.
    """
    values = {}
    for prop, option in RETENTION_OPTIONS.items():
        fallback = DEFAULT_SET_TRANSACTION_RETENTION if option == "set_transaction_retention_duration" else ""
        value = _get(option, fallback)
        if value:
            values[prop] = value
    return values
