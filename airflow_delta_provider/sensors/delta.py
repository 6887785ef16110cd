"""DeltaTableVersionSensor: wait for new commits on a Delta table."""

from __future__ import annotations

from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.configuration import conf
from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowException

from airflow_delta_provider.core.watch import CommitFilter, payload, poll
from airflow_delta_provider.triggers.delta import DeltaTableVersionTrigger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow.sdk import Context

    from airflow_delta_provider.hooks.delta import DeltaTableHook


class DeltaTableVersionSensor(BaseSensorOperator):
    """Wait until a Delta table has a commit newer than ``after_version`` or at/after ``after_timestamp``.

    A poke costs one storage request when nothing is new (a GET of the next commit file),
    never a listing of the whole log. A missing table is waited for; a table that cannot
    be read fails the task with the reason. The return value (XCom) holds ``version`` (the
    newest matching commit), ``versions``, ``commit_timestamp`` (ms) and ``operation``.

    :param table_uri: the table location (or set it in the ``delta`` connection). (templated)
    :param delta_conn_id: a ``delta`` connection. (templated)
    :param storage_conn_id: an Airflow storage connection with the credentials. (templated)
    :param storage_options: fsspec options.
    :param after_version: done on a commit after this version, e.g.
        ``"{{ ti.xcom_pull('commit')['version'] }}"``. (templated)
    :param after_timestamp: done on a commit at or after this time: a datetime, ISO string
        (``"{{ data_interval_end }}"``) or milliseconds. (templated)
    :param data_changes_only: ignore commits that change no data (OPTIMIZE, VACUUM, ...).
    :param operations: only these operations (``["WRITE", "MERGE"]``). (templated)
    :param partition_values: only commits adding files to this partition. (templated)
    :param deferrable: wait in the triggerer (default ``[operators] default_deferrable``).
    """

    template_fields: Sequence[str] = (
        "table_uri",
        "delta_conn_id",
        "storage_conn_id",
        "after_version",
        "after_timestamp",
        "operations",
        "partition_values",
    )
    ui_color = "#00add4"

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
        deferrable: bool = conf.getboolean("operators", "default_deferrable", fallback=False),
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if not table_uri and not delta_conn_id:
            raise ValueError("DeltaTableVersionSensor needs table_uri or delta_conn_id.")
        self.table_uri = table_uri
        self.delta_conn_id = delta_conn_id
        self.storage_conn_id = storage_conn_id
        self.storage_options = storage_options
        self.after_version = after_version
        self.after_timestamp = after_timestamp
        self.data_changes_only = data_changes_only
        self.operations = operations
        self.partition_values = partition_values
        self.deferrable = deferrable

    @cached_property
    def hook(self) -> DeltaTableHook:
        from airflow_delta_provider.hooks.delta import DeltaTableHook

        return DeltaTableHook(
            self.delta_conn_id,
            table_uri=self.table_uri,
            storage_conn_id=self.storage_conn_id,
            storage_options=self.storage_options,
        )

    def _after_version(self) -> int | None:
        value = self.after_version
        if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
            return None
        try:
            version = int(value)
        except (TypeError, ValueError):
            raise ValueError(f"after_version={value!r} is not a table version (an integer).") from None
        if version < -1:
            raise ValueError(f"after_version={value!r} is negative.")
        return version

    def _after_timestamp(self) -> int | None:
        value = self.after_timestamp
        if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
            return None
        from airflow_delta_provider.core.history import to_millis

        try:
            return to_millis(value)
        except (TypeError, ValueError) as err:
            raise ValueError(f"after_timestamp={value!r} is not a point in time: {err}") from None

    def _filter(self) -> CommitFilter:
        return CommitFilter(
            data_changes_only=self.data_changes_only,
            operations=list(self.operations) if self.operations else None,
            partition_values=dict(self.partition_values) if self.partition_values else None,
            after_timestamp=self._after_timestamp(),
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
        event = payload(self.hook.table_uri, result, after)
        self.log.info("Found version(s) %s of %s.", event["versions"], self.hook.table_uri)
        return PokeReturnValue(is_done=True, xcom_value=event)

    def execute(self, context: Context) -> Any:
        if not self.deferrable:
            return super().execute(context)
        found = self.poke(context)
        if isinstance(found, PokeReturnValue) and found.is_done:
            return found.xcom_value
        from airflow_delta_provider.config import poll_interval

        self.defer(
            trigger=DeltaTableVersionTrigger(
                table_uri=self.table_uri,
                delta_conn_id=self.delta_conn_id,
                storage_conn_id=self.storage_conn_id,
                storage_options=dict(self.storage_options) if self.storage_options else None,
                after_version=self._after_version(),
                after_timestamp=self._after_timestamp(),
                data_changes_only=self.data_changes_only,
                operations=list(self.operations) if self.operations else None,
                partition_values=dict(self.partition_values) if self.partition_values else None,
                poll_interval=self.poke_interval or poll_interval(),
            ),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout) if self.timeout else None,
        )

    def execute_complete(self, context: Context, event: dict[str, Any]) -> dict[str, Any]:
        """Resume after the trigger fired: the event is the XCom value, or the failure reason."""
        if event.get("status") != "success":
            raise AirflowException(event.get("message") or f"The Delta table trigger failed: {event!r}")
        self.log.info("Version(s) %s of %s.", event.get("versions"), event.get("table_uri"))
        return event
