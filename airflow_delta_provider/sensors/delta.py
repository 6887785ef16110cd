"""DeltaTableVersionSensor: wait for new commits on a Delta table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from airflow.configuration import conf
from airflow.sdk import Asset, BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException

from airflow_delta_provider.assets.delta import table_asset_uri
from airflow_delta_provider.core.table import CommitFilter, check_partition_filter, payload, poll
from airflow_delta_provider.core.utils import redact
from airflow_delta_provider.hooks.mixins import DeltaTableMixin, delta_template_fields
from airflow_delta_provider.triggers.delta import DeltaTableVersionTrigger
from airflow_delta_provider.utils.coercion import to_bool, to_int, to_list, to_text, to_timestamp, validate
from airflow_delta_provider.utils.partitions import with_partition_keys
from airflow_delta_provider.utils.secrets import refuse_secret_options
from airflow_delta_provider.utils.wording import human_duration, versions

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow.sdk import Context

#: ``BaseSensorOperator``'s own default, used until ``[delta] poll_interval`` is read at run time.
_BASE_POKE_INTERVAL = 60.0


class DeltaTableVersionSensor(DeltaTableMixin, BaseSensorOperator):
    """Wait until a Delta table has a commit newer than ``after_version`` or at/after ``after_timestamp``.

    A poke costs one storage request when nothing is new (a GET of the next commit file),
    never a listing of the whole log. A missing table is waited for; a table that cannot
    be read fails the task with the reason. The return value (XCom) holds ``version`` (the
    newest matching commit), ``versions``, ``from_version`` / ``to_version`` (the range
    examined), ``commit_timestamp`` (ms) and ``operation``. With the table's asset among its
    ``outlets``, the sensor's asset event carries the same (without the per-commit list).

    :param table_uri: the table location (or set it in the ``delta`` connection). (templated)
    :param delta_conn_id: a ``delta`` connection. (templated)
    :param storage_conn_id: an Airflow storage connection with the credentials. (templated)
    :param storage_options: fsspec options. With ``deferrable=True`` they are handed to the
        trigger, which is stored in the metadata database, so they may hold no secret.
    :param after_version: done on a commit after this version, e.g.
        ``"{{ ti.xcom_pull('commit')['version'] }}"``. (templated)
    :param after_timestamp: done on a commit at or after this time: a datetime, ISO string
        (``"{{ data_interval_end }}"``) or milliseconds. (templated)
    :param data_changes_only: ignore commits that change no data (OPTIMIZE, VACUUM, ...).
    :param operations: only these operations (``["WRITE", "MERGE"]``). (templated)
    :param partition_values: only commits adding files to this partition. (templated)
    :param partition_filter: only commits that changed data in the partitions this SQL condition on
        partition columns selects (``"ds = '{{ ds }}'"``; adds, removes and change-data files, read
        from the commit's file actions, never its data). The return value and the event then list
        the ``partitions`` those commits changed (each as its values, and as an Airflow
        ``partition_keys`` entry: the values joined with ``|``). (templated)
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``).
    :param poke_interval: seconds between pokes (and the trigger's polls); default
        ``[delta] poll_interval`` (60), read when the task runs.
    """

    template_fields: Sequence[str] = delta_template_fields(
        "after_version", "after_timestamp", "operations", "partition_values", "partition_filter"
    )
    ui_color = "#00add4"
    table_purpose = "to watch"

    def __init__(
        self,
        *,
        table_uri: str | None = None,
        delta_conn_id: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        after_version: int | str | None = None,
        after_timestamp: Any = None,
        data_changes_only: bool = False,
        operations: Sequence[str] | None = None,
        partition_values: Mapping[str, str | None] | None = None,
        partition_filter: str | None = None,
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        poke_interval: timedelta | float | None = None,
        **kwargs: Any,
    ) -> None:
        # Explicit in the signature so that default_args reach it here: None means "not set".
        super().__init__(
            poke_interval=_BASE_POKE_INTERVAL if poke_interval is None else poke_interval, **kwargs
        )
        self._init_table(
            table_uri=table_uri,
            delta_conn_id=delta_conn_id,
            storage_conn_id=storage_conn_id,
            storage_options=storage_options,
        )
        validate(after_version, _to_after_version)
        validate(after_timestamp, to_timestamp, "after_timestamp")
        validate(operations, to_list, "operations")
        self.after_version = after_version
        self.after_timestamp = after_timestamp
        self.data_changes_only = to_bool(data_changes_only, "data_changes_only", strings=False)
        self.operations = operations
        self.partition_values = partition_values
        validate(partition_filter, to_text, "partition_filter")
        self.partition_filter = partition_filter
        self.deferrable = to_bool(deferrable, "deferrable", strings=False)
        self._poke_interval_from_config = poke_interval is None
        if self.deferrable:
            refuse_secret_options(self.storage_options, owner=type(self).__name__, reason=_STORED)

    def _after_version(self) -> int | None:
        return _to_after_version(self.after_version)

    def _after_timestamp(self) -> int | None:
        return to_timestamp(self.after_timestamp, "after_timestamp")

    def _filter(self) -> CommitFilter:
        operations = to_list(self.operations, "operations")
        return CommitFilter(
            data_changes_only=self.data_changes_only,
            operations=operations or None,
            partition_values=dict(self.partition_values) if self.partition_values else None,
            after_timestamp=self._after_timestamp(),
            partition_filter=to_text(self.partition_filter, "partition_filter"),
        )

    def poke(self, context: Context) -> PokeReturnValue | bool:
        after = self._after_version()
        result = poll(self.hook.get_table(), after, self._filter())
        if not result.table_exists:
            self.log.info("No Delta table at %s yet.", self.hook.table_uri)
            return False
        if not result.matched:
            self.log.info("No matching commit after version %s of %s yet.", after, self.hook.table_uri)
            return False
        event = with_partition_keys(payload(self.hook.table_uri, result, after))
        self.log.info("Found %s of %s.", versions(event["versions"]), self.hook.table_uri)
        self._emit_asset_event(context, event)
        return PokeReturnValue(is_done=True, xcom_value=event)

    def execute(self, context: Context) -> Any:
        if self._poke_interval_from_config:
            from airflow_delta_provider.config import poll_interval

            self.poke_interval = poll_interval()
        waiting_for = self._waiting_for()
        partition_filter = to_text(self.partition_filter, "partition_filter")
        if partition_filter is not None:
            check_partition_filter(self.hook.get_table(), partition_filter)  # refused now, not at a commit
        if not self.deferrable:
            self.log.info(
                "Waiting for %s: a poke every %s (mode %s%s).",
                waiting_for,
                human_duration(self.poke_interval),
                self.mode,
                f", timeout {human_duration(self.timeout)}" if self.timeout else "",
            )
            return super().execute(context)
        found = self.poke(context)
        if isinstance(found, PokeReturnValue) and found.is_done:
            return found.xcom_value
        self.log.info(
            "Deferring to the triggerer: waiting for %s, polling every %s%s.",
            waiting_for,
            human_duration(self.poke_interval),
            f", timeout {human_duration(self.timeout)}" if self.timeout else "",
        )
        operations = to_list(self.operations, "operations")
        self.defer(
            trigger=DeltaTableVersionTrigger(
                table_uri=self.table_uri,
                delta_conn_id=self.delta_conn_id,
                storage_conn_id=self.storage_conn_id,
                storage_options=self.storage_options,
                after_version=self._after_version(),
                after_timestamp=self._after_timestamp(),
                data_changes_only=self.data_changes_only,
                operations=operations or None,
                partition_values=dict(self.partition_values) if self.partition_values else None,
                partition_filter=to_text(self.partition_filter, "partition_filter"),
                poll_interval=self.poke_interval,
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger fired: the event is the XCom value, or the failure reason."""
        if event.get("status") != "success":
            raise AirflowException(
                redact(event.get("message") or f"The Delta table trigger failed: {event!r}")
            )
        self.log.info(
            "Resumed: the triggerer found %s of %s.",
            versions(event.get("versions") or []),
            event.get("table_uri"),
        )
        self._emit_asset_event(context, event)
        return event

    def _emit_asset_event(self, context: Context, event: dict[str, Any]) -> None:
        """When the table's asset is among the sensor's outlets, its event carries what was found:
        the versions and the range they cover (``from_version`` / ``to_version``), so that a DAG
        scheduled on the asset knows which versions a foreign writer committed."""
        events = context.get("outlet_events")
        if events is None:
            return
        asset_uri = table_asset_uri(self.hook.table_uri)
        extra = {key: value for key, value in event.items() if key not in ("status", "commits")}
        for outlet in getattr(self, "outlets", None) or []:
            if isinstance(outlet, Asset) and outlet.uri == asset_uri:
                events[outlet].extra = extra

    def _waiting_for(self) -> str:
        """What the sensor waits for, in words (for its log)."""
        after, since = self._after_version(), self._after_timestamp()
        what = f"a commit of {self.hook.table_uri}"
        if after is not None:
            what += f" after version {after}"
        if since is not None:
            what += f" at or after {datetime.fromtimestamp(since / 1000, UTC).isoformat()}"
        filters = self._filter()
        if filters.data_changes_only:
            what += ", data changes only"
        if filters.operations:
            what += f", operations {', '.join(filters.operations)}"
        if filters.partition_values:
            what += f", partition {filters.partition_values}"
        if filters.partition_filter:
            what += f", changing the partitions {filters.partition_filter!r} selects"
        return what


#: Why a deferrable sensor's storage options may hold no secret.
_STORED = (
    "with deferrable=True they are handed to DeltaTableVersionTrigger, whose arguments are stored in the "
    "metadata database; or use deferrable=False"
)


def _to_after_version(value: Any) -> int | None:
    return to_int(value, "after_version", minimum=-1, meaning="a table version")
