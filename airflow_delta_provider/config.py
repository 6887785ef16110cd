"""The provider-wide ``[delta]`` configuration section.

Values here are defaults for every table; a table's own properties and a task's explicit
arguments take precedence (see :mod:`airflow_delta_provider.core.protocol.table_config`, which declares
each property and its ``[delta]`` option once). The core never reads Airflow configuration:
the Airflow layer passes these values in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.protocol import PROVIDER_OPTIONS, SET_TRANSACTION_RETENTION
from airflow_delta_provider.core.transaction import DEFAULT_MAX_ATTEMPTS

if TYPE_CHECKING:
    from collections.abc import Mapping

SECTION = "delta"

DEFAULT_POLL_INTERVAL = 60.0
#: What the tables the provider creates get when ``[delta] set_transaction_retention_duration``
#: is unset: Delta keeps no expiry by default, so every task instance's txn would stay forever.
DEFAULT_SET_TRANSACTION_RETENTION = "interval 90 days"
DEFAULT_MAX_COMMIT_ATTEMPTS = DEFAULT_MAX_ATTEMPTS


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
    :data:`DEFAULT_SET_TRANSACTION_RETENTION`): it is written on the tables the provider creates.
    """
    values = {}
    for prop, option in PROVIDER_OPTIONS.items():
        fallback = DEFAULT_SET_TRANSACTION_RETENTION if prop == SET_TRANSACTION_RETENTION else ""
        value = _get(option, fallback)
        if value:
            values[prop] = value
    return values


def provider_table_properties(properties: Mapping[str, Any] | None) -> dict[str, str]:
    """Properties of a table the provider creates: the user's, plus a bounded txn retention.

    ``delta.setTransactionRetentionDuration`` comes from ``[delta] set_transaction_retention_duration``
    (default :data:`DEFAULT_SET_TRANSACTION_RETENTION`) unless the user set it; without it every
    task instance's txn would stay in the table's state forever.
    """
    result = {
        str(k): str(v).lower() if isinstance(v, bool) else str(v) for k, v in (properties or {}).items()
    }
    if SET_TRANSACTION_RETENTION not in result:
        configured = retention_defaults().get(SET_TRANSACTION_RETENTION)
        result[SET_TRANSACTION_RETENTION] = configured or DEFAULT_SET_TRANSACTION_RETENTION
    return result
