"""The asset state store as each Airflow version hands it to a trigger, through one compat module."""

from __future__ import annotations

import threading

import pytest

from airflow_delta_provider.utils.version_compat import run_blocking, state_get, state_set


class BlockingStore:
    """Airflow 3.3.0/3.3.1's accessors: only blocking get/set, which must not run on the event loop
    (they wait for the triggerer's supervisor, whose answer the loop delivers)."""

    def __init__(self, loop_thread: int) -> None:
        self.values: dict[str, object] = {}
        self.loop_thread = loop_thread

    def get(self, key, default=None):
        assert threading.get_ident() != self.loop_thread, "blocking get ran on the event loop"
        return self.values.get(key, default)

    def set(self, key, value):
        assert threading.get_ident() != self.loop_thread, "blocking set ran on the event loop"
        self.values[key] = value


class AsyncStore:
    """Airflow 3.3.2+'s accessors: aget/aset (the blocking pair must not be used)."""

    def __init__(self) -> None:
        self.values: dict[str, object] = {}

    async def aget(self, key, default=None):
        return self.values.get(key, default)

    async def aset(self, key, value):
        self.values[key] = value

    def get(self, key, default=None):  # pragma: no cover - must not be called
        raise AssertionError("the blocking get was used although aget exists")

    set = get


@pytest.mark.asyncio
async def test_blocking_accessors_run_off_the_loop():
    store = BlockingStore(threading.get_ident())
    assert await state_get(store, "k") is None
    await state_set(store, "k", "7")
    assert await state_get(store, "k") == "7"


@pytest.mark.asyncio
async def test_async_accessors_are_awaited():
    store = AsyncStore()
    await state_set(store, "k", "7")
    assert await state_get(store, "k") == "7"


@pytest.mark.asyncio
async def test_run_blocking_runs_in_a_worker_thread():
    loop_thread = threading.get_ident()
    assert await run_blocking(threading.get_ident) != loop_thread


def test_an_alias_event_extra_is_one_this_airflow_can_register():
    """Before 3.3 Airflow hashes an alias event's extra (``frozenset(extra.items())``) when the task ends."""
    import airflow

    from airflow_delta_provider.utils.version_compat import alias_event_extra

    extra = {"version": 3, "metrics": {"num_output_rows": 5}, "table_uri": "file:///t"}
    registered = alias_event_extra(extra)
    major, minor = (int(p) for p in airflow.__version__.split(".")[:2])
    if (major, minor) >= (3, 3):
        assert registered == extra
    else:
        assert registered == {"version": 3, "num_output_rows": 5, "table_uri": "file:///t"}
        assert frozenset(registered.items())  # what Airflow 3.1 does with it


# --- asset partitions ---------------------------------------------------------------------------


def test_a_runs_partition_key_as_each_airflow_hands_it() -> None:
    from types import SimpleNamespace

    from airflow_delta_provider.utils.version_compat import run_partition_key

    assert run_partition_key({"partition_key": "2026-03-01"}) == "2026-03-01"  # 3.3's context key
    assert run_partition_key({"dag_run": SimpleNamespace(partition_key="us|2026-03-01")}) == "us|2026-03-01"
    assert run_partition_key({"dag_run": SimpleNamespace()}) is None  # 3.1's DAG run has none
    assert run_partition_key({"partition_key": None, "dag_run": SimpleNamespace(partition_key=None)}) is None
    assert run_partition_key({}) is None


def test_event_partitions_where_the_accessor_takes_them() -> None:
    from airflow.sdk import Asset
    from airflow.sdk.execution_time.context import OutletEventAccessor, OutletEventAccessors

    from airflow_delta_provider.utils.version_compat import add_event_partitions, can_add_partitions

    assert can_add_partitions() == hasattr(OutletEventAccessor, "add_partitions")
    accessor = OutletEventAccessors()[Asset(uri="s3://lake/events")]
    assert add_event_partitions(accessor, ["2026-03-01", "2026-03-02"]) == can_add_partitions()
    if can_add_partitions():  # one event per key (Airflow 3.3+)
        assert accessor.partition_keys == {"2026-03-01", "2026-03-02"}
    assert add_event_partitions(object(), ["k"]) is False  # an accessor without them: Airflow's key
