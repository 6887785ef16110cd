"""DeltaTableVersionTrigger: fires when a Delta table gets matching new commits.

Used by :class:`~airflow_delta_provider.sensors.delta.DeltaTableVersionSensor` when it defers (one
event, then the trigger ends) and by an ``AssetWatcher`` to schedule DAGs on commits of any writer
(an event per batch of new commits, the cursor in the asset's state store where Airflow has one).
A poll costs one storage request when nothing is new. Its arguments are stored in the metadata
database, so it takes connection ids and credential-free locations only.
docs/sensors-and-triggers.md has the details per Airflow version.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from airflow.triggers.base import BaseEventTrigger, TriggerEvent

from airflow_delta_provider.core.errors import DeltaError
from airflow_delta_provider.core.table import CommitFilter, PollResult, check_partition_filter, payload, poll
from airflow_delta_provider.hooks.mixins import DeltaTableMixin
from airflow_delta_provider.utils.coercion import to_bool, to_int, to_list, to_seconds, to_text, to_timestamp
from airflow_delta_provider.utils.partitions import with_partition_keys
from airflow_delta_provider.utils.secrets import describe_error, refuse_secret_options
from airflow_delta_provider.utils.version_compat import run_blocking, state_get, state_set
from airflow_delta_provider.utils.wording import human_duration, versions

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Mapping, Sequence

log = logging.getLogger(__name__)

#: The key of the cursor in the asset state store.
CURSOR_KEY = "delta_version"
#: Why a trigger's storage options may hold no secret.
_STORED = "a trigger's arguments are stored in the metadata database"


class DeltaTableVersionTrigger(DeltaTableMixin, BaseEventTrigger):
    """Poll a Delta table's log and emit an event per batch of matching new commits.

    :param table_uri: the table location (or set it in the ``delta`` connection).
    :param delta_conn_id: a ``delta`` connection.
    :param storage_conn_id: an Airflow storage connection with the credentials.
    :param storage_options: fsspec options that are no secret (``endpoint_url``, ``region_name``...);
        they are serialised with the trigger, so options named like a secret are refused: keep
        credentials in a connection (``storage_conn_id``).
    :param after_version: only commits after this version; None: from the start (or
        from ``after_timestamp``).
    :param after_timestamp: only commits at or after this time (milliseconds since the epoch).
    :param data_changes_only: ignore commits that change no data (OPTIMIZE, VACUUM ...).
    :param operations: only these operations (``WRITE``, ``MERGE``, ...).
    :param partition_values: only commits adding files to this partition (``{"ds": "2024-01-01"}``).
    :param partition_filter: only commits that changed data in the partitions this SQL condition on
        partition columns selects; each event lists the ``partitions`` its commits changed and
        their Airflow ``partition_keys`` (an ``AssetWatcher``'s event has no key of its own).
    :param poll_interval: seconds between polls; default ``[delta] poll_interval`` (60), read by
        the triggerer when the trigger runs.
    :raises ValueError: no table is named, the location carries credentials, a storage option
        holds a secret, or an argument is not of its kind.
    """

    table_purpose = "to watch"

    def __init__(
        self,
        *,
        table_uri: str | None = None,
        delta_conn_id: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        after_version: int | None = None,
        after_timestamp: int | None = None,
        data_changes_only: bool = False,
        operations: Sequence[str] | None = None,
        partition_values: Mapping[str, str | None] | None = None,
        partition_filter: str | None = None,
        poll_interval: float | None = None,
    ) -> None:
        super().__init__()
        self._init_table(
            table_uri=table_uri,
            delta_conn_id=delta_conn_id,
            storage_conn_id=storage_conn_id,
            storage_options=storage_options,
        )
        refuse_secret_options(self.storage_options, owner=type(self).__name__, reason=_STORED)
        self.after_version = to_int(after_version, "after_version", minimum=-1, meaning="a table version")
        self.after_timestamp = to_timestamp(after_timestamp, "after_timestamp")
        self.data_changes_only = to_bool(data_changes_only, "data_changes_only", strings=False)
        self.operations = to_list(operations, "operations") or None
        self.partition_values = dict(partition_values) if partition_values else None
        self.partition_filter = to_text(partition_filter, "partition_filter")
        self.poll_interval = None if poll_interval is None else to_seconds(poll_interval, "poll_interval")

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "table_uri": self.table_uri,
                "delta_conn_id": self.delta_conn_id,
                "storage_conn_id": self.storage_conn_id,
                "storage_options": self.storage_options,
                "after_version": self.after_version,
                "after_timestamp": self.after_timestamp,
                "data_changes_only": self.data_changes_only,
                "operations": self.operations,
                "partition_values": self.partition_values,
                "partition_filter": self.partition_filter,
                "poll_interval": self.poll_interval,
            },
        )

    def _poll_interval(self) -> float:
        """The given interval, else ``[delta] poll_interval`` of the process running the trigger."""
        if self.poll_interval is not None:
            return self.poll_interval
        from airflow_delta_provider.config import poll_interval

        return poll_interval()

    def _filter(self) -> CommitFilter:
        return CommitFilter(
            data_changes_only=self.data_changes_only,
            operations=self.operations,
            partition_values=self.partition_values,
            after_timestamp=self.after_timestamp,
            partition_filter=self.partition_filter,
        )

    def _state_store(self) -> Any:
        """The asset state store the triggerer set (Airflow 3.3+, under an ``AssetWatcher``), or None."""
        return getattr(self, "asset_state_store", None)

    async def _load_cursor(self) -> int | None:
        store = self._state_store()
        if store is None:
            if not self._serves_task():
                log.info(
                    "No asset state store (Airflow < 3.3): the watcher of %s starts after version %s and "
                    "a triggerer restart starts it there again.",
                    self.table_uri or self.delta_conn_id,
                    self.after_version,
                )
            return self.after_version
        try:
            stored = await state_get(store, CURSOR_KEY)
        except ValueError as err:
            if "inlets and outlets" not in str(err):
                raise
            log.warning("No asset state store for this trigger (%s); a restart may re-emit a version.", err)
            return self.after_version
        if stored is None:
            return self.after_version
        return max(int(stored), self.after_version if self.after_version is not None else -1)

    async def _save_cursor(self, cursor: int) -> None:
        store = self._state_store()
        if store is None:
            return
        try:
            await state_set(store, CURSOR_KEY, str(cursor))
        except ValueError as err:
            if "inlets and outlets" not in str(err):
                raise

    def _serves_task(self) -> bool:
        """Whether the trigger runs for a deferred task (the sensor), not for an ``AssetWatcher``."""
        return getattr(self, "task_instance", None) is not None

    async def run(self) -> AsyncIterator[TriggerEvent]:
        hook = self.hook
        interval = self._poll_interval()
        table = await run_blocking(hook.get_table)
        if self.partition_filter is not None:
            try:
                await run_blocking(check_partition_filter, table, self.partition_filter)
            except DeltaError as err:
                yield TriggerEvent(
                    {
                        "status": "error",
                        "table_uri": hook.table_uri,
                        "message": f"The partition filter of the watch of {hook.table_uri} is refused: "
                        f"{describe_error(err)}",
                    }
                )
                return
        cursor = await self._load_cursor()
        commit_filter = self._filter()
        self.log.info(
            "Watching %s for commits %s, polling every %s.",
            hook.table_uri,
            "from its first version" if cursor is None else f"after version {cursor}",
            human_duration(interval),
        )
        while True:
            try:
                result: PollResult = await run_blocking(poll, table, cursor, commit_filter)
            except DeltaError as err:
                # Redacted: the event is stored and shown (a DeltaError's message already is).
                yield TriggerEvent(
                    {
                        "status": "error",
                        "table_uri": hook.table_uri,
                        "message": (
                            f"The Delta table at {hook.table_uri} cannot be read: {describe_error(err)}"
                        ),
                    }
                )
                return
            previous = cursor
            if result.cursor is not None and result.cursor != cursor:
                # Saved before the event goes out: a restart must not emit a version twice.
                cursor = result.cursor
                await self._save_cursor(cursor)
            if not result.table_exists:
                self.log.debug("No Delta table at %s yet; waiting.", hook.table_uri)
            elif result.matched:
                event = with_partition_keys(payload(hook.table_uri, result, previous))
                self.log.info("New %s of %s.", versions(event["versions"]), hook.table_uri)
                yield TriggerEvent(event)
                if self._serves_task():
                    # A task's trigger ends with its event; left running, the triggerer would cancel
                    # it as if a user had acted on the task.
                    return
            await asyncio.sleep(interval)
