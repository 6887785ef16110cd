"""Delta tables as Airflow assets: the asset URI is the table's storage URI.

Naming a table by where it is stored (``s3://bucket/events``, ``file:///data/events``) lets
Airflow's own URI normalisers and OpenLineage converters for those schemes apply, and makes
the asset the same for every writer and reader of the table, whether it is written by this
provider's operators or watched by :class:`~airflow_delta_provider.triggers.delta.DeltaTableVersionTrigger`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset

from airflow_delta_provider.utils.coercion import is_deferred
from airflow_delta_provider.utils.secrets import public_location

if TYPE_CHECKING:
    from airflow_delta_provider.core.transaction import CommitResult

__all__ = ["asset_event_extra", "delta_table_asset", "event_version_range", "table_asset_uri"]

#: The metrics of a commit that go into an asset event's extra (the commit's XCom has them all).
_EVENT_METRICS = (
    "num_added_files",
    "num_removed_files",
    "num_output_rows",
    "num_output_bytes",
    "num_removed_bytes",
)


def table_asset_uri(table_uri: str) -> str:
    """The asset URI of a table: its normalised storage URI, without credentials.

    A local path becomes ``file:///abs/path``; ``s3a://`` and ``s3n://`` become ``s3://``;
    a trailing slash is dropped; credentials (a ``user:password@`` part, any userinfo on S3 and
    GCS) are removed before the location is looked at, so a secret written into a location
    never reaches the metadata database.

    :param table_uri: the table root as the user writes it.
    :raises ValueError: the location is empty or is itself a template (render it first).
    """
    if is_deferred(table_uri):
        raise ValueError(
            f"The table location {table_uri!r} is a template, known only when the task runs; an asset "
            f"must be known when the DAG is parsed. Give a literal table_uri, or pass "
            f"outlets=[AssetAlias(...)] and the operator attaches the rendered table to the alias."
        )
    # A bare ``name@`` on Azure (``container@account``) is part of the location and stays.
    return public_location(table_uri)


def delta_table_asset(table_uri: str, *, name: str | None = None, **kwargs: Any) -> Asset:
    """The :class:`~airflow.sdk.Asset` of a Delta table.

    ``Asset(uri)`` with the same URI is the same asset, so a consumer DAG can write either::

        schedule = [delta_table_asset("s3://lake/events")]

    :param table_uri: the table root (a local path, ``file://``, ``s3://``...).
    :param name: the asset's name; default: the URI, as Airflow names an ``Asset(uri=...)``.
    :param kwargs: passed on to :class:`~airflow.sdk.Asset` (``group``, ``extra``, ``watchers``).
    """
    uri = table_asset_uri(table_uri)
    return Asset(name=name or uri, uri=uri, **kwargs)


def asset_event_extra(result: CommitResult | Mapping[str, Any], table_uri: str) -> dict[str, Any]:
    """The extra of the asset event a commit emits: version, operation, whether it was skipped, metrics.

    JSON-native, small (no file lists) and free of credentials. Consumers read it from
    ``triggering_asset_events[asset][-1].extra``.

    :param result: the core's commit result, or its ``to_dict()``.
    :param table_uri: the table root.
    """
    data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
    extra: dict[str, Any] = {
        "table_uri": table_asset_uri(table_uri),
        "version": data["version"],
        # The range the event covers (one commit), as the sensor's and the trigger's events say it.
        "from_version": data["version"],
        "to_version": data["version"],
        "operation": data.get("operation"),
        "committed": bool(data.get("committed", not data.get("skipped", False))),
        "skipped": bool(data.get("skipped", not data.get("committed", True))),
        "read_version": data.get("read_version"),
    }
    for key in ("app_id", "app_version"):
        if data.get(key) is not None:
            extra[key] = data[key]
    extra["metrics"] = {key: int(data.get(key) or 0) for key in _EVENT_METRICS}
    return extra


def event_version_range(extra: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """``(from_version, to_version)`` of a Delta table's asset event: a commit operator's or the
    sensor's (in the extra), or an ``AssetWatcher``'s (in the trigger's ``payload``); events written
    before the range was recorded give ``(version, version)``. None for an extra without a version.
    """
    if not isinstance(extra, Mapping):
        return None
    payload = extra.get("payload")
    data: Mapping[str, Any] = payload if isinstance(payload, Mapping) else extra
    to_version = data.get("to_version", data.get("version"))
    if not isinstance(to_version, int) or isinstance(to_version, bool):
        return None
    from_version = data.get("from_version")
    if not isinstance(from_version, int) or isinstance(from_version, bool):
        from_version = to_version
    return from_version, to_version
