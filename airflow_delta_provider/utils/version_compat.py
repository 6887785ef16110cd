"""What differs between the Airflow versions the provider supports (3.1 to 3.x), decided in one place.

Code that must behave differently per version asks here, never checks a version number itself: the
asset state store (async, blocking-only or absent), blocking calls from a trigger (through
``sync_to_async`` everywhere), asset events attached through an alias (nested extras lifted to
top-level keys where Airflow hashes them), and asset partitions (a run's ``partition_key`` from
3.2, ``add_partitions`` from 3.3). docs/versions.md has the table.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "AirflowNotFoundException",
    "add_event_partitions",
    "alias_event_extra",
    "can_add_partitions",
    "run_blocking",
    "run_partition_key",
    "state_get",
    "state_set",
]

try:  # Airflow >= 3.2: the Task SDK's, which airflow.exceptions re-exports
    from airflow.sdk.exceptions import AirflowNotFoundException
except ImportError:  # Airflow 3.1
    from airflow.exceptions import AirflowNotFoundException  # type: ignore[attr-defined]

T = TypeVar("T")


async def run_blocking(function: Callable[..., T], *args: Any) -> T:
    """Run a blocking function in a worker thread, off the triggerer's event loop.

    :param function: the blocking function (it may fetch connections through the triggerer).
    :param args: its arguments.
    """
    from asgiref.sync import sync_to_async

    return await sync_to_async(function, thread_sensitive=False)(*args)


async def state_get(store: Any, key: str) -> Any:
    """The value of ``key`` in an asset state store, or None.

    :param store: the ``asset_state_store`` the triggerer set on the trigger.
    :param key: the key.
    """
    aget = getattr(store, "aget", None)
    if aget is not None:  # Airflow >= 3.3.2
        return await aget(key)
    # Airflow 3.3.0 / 3.3.1: only the blocking accessor; it waits for the supervisor's answer.
    return await run_blocking(store.get, key)


async def state_set(store: Any, key: str, value: Any) -> None:
    """Store ``value`` (not None) under ``key`` in an asset state store.

    :param store: the ``asset_state_store`` the triggerer set on the trigger.
    :param key: the key.
    :param value: a JSON value.
    """
    aset = getattr(store, "aset", None)
    if aset is not None:  # Airflow >= 3.3.2
        await aset(key, value)
        return
    await run_blocking(store.set, key, value)


def _airflow_before(major: int, minor: int) -> bool:
    from airflow import __version__

    parts = [int("".join(c for c in p if c.isdigit()) or 0) for p in __version__.split(".")[:2]]
    return (parts[0], parts[1]) < (major, minor)


def alias_event_extra(extra: dict[str, Any]) -> dict[str, Any]:
    """The extra of an asset event attached through an ``AssetAlias``, as this Airflow can register it.

    Airflow 3.3+ takes any JSON object. Before 3.3 the extra's values must be hashable: a nested
    object ``{"metrics": {"num_output_rows": 3}}`` becomes top-level keys ``{"num_output_rows": 3}``.

    :param extra: the event's extra.
    """
    if not _airflow_before(3, 3):
        return extra
    flat: dict[str, Any] = {}
    for key, value in extra.items():
        if isinstance(value, dict):
            flat.update(value)
        elif isinstance(value, list):
            flat[key] = tuple(value)
        else:
            flat[key] = value
    return flat


def run_partition_key(context: Mapping[str, Any]) -> str | None:
    """The ``partition_key`` of the running DAG run: the context's (3.3+), else the run's own
    (3.2); None for a run without one and on Airflow 3.1, which has no asset partitions.

    :param context: the task's context.
    """
    key = context.get("partition_key")
    if key is None:
        key = getattr(context.get("dag_run"), "partition_key", None)
    return key if isinstance(key, str) and key else None


def can_add_partitions() -> bool:
    """Whether this Airflow lets a task declare the partitions of an asset event
    (``outlet_events[asset].add_partitions``, Airflow 3.3+, for ``PartitionedAtRuntime``)."""
    from airflow.sdk.execution_time.context import OutletEventAccessor

    return hasattr(OutletEventAccessor, "add_partitions")


def add_event_partitions(accessor: Any, keys: Sequence[str]) -> bool:
    """Give an asset event these partition keys, one event per key (Airflow 3.3+); False where the
    accessor cannot take them (an older Airflow: its events carry the run's key).

    :param accessor: ``outlet_events[asset]`` of a concrete asset (never an alias).
    :param keys: the keys, each non-blank and at most 250 characters (Airflow refuses others).
    """
    add = getattr(accessor, "add_partitions", None)
    if add is None:
        return False
    add(list(keys))
    return True
