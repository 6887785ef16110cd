"""A commit operator's Airflow partitions: the slice of its table a run's partition key names, and
the partition keys its asset event declares (:mod:`airflow_delta_provider.utils.partitions` has
the mapping). Shared by the commit operators through
:class:`~airflow_delta_provider.operators.commit.DeltaCommitMixin`. See docs/partitions.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import AssetAlias

from airflow_delta_provider.utils.coercion import is_deferred, to_bool
from airflow_delta_provider.utils.partitions import RunSlice, partition_keys, to_key_columns
from airflow_delta_provider.utils.version_compat import can_add_partitions, run_partition_key

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow.sdk import Context

    from airflow_delta_provider.core.log import Snapshot
    from airflow_delta_provider.core.transaction import CommitResult
    from airflow_delta_provider.hooks.delta import DeltaTableHook

__all__ = ["PartitionKeyMixin"]


class PartitionKeyMixin:
    """``partition_key_columns`` and ``add_partitions`` of a commit operator (class defaults: the
    DELETE and RESTORE operators share the commit mixin, not these arguments)."""

    partition_key_columns: Sequence[str] | str | None = None
    add_partitions: bool = False
    replace_where: str | None
    hook: DeltaTableHook
    log: Any
    #: the slice of the table the running execution replaces (a keyed run with partition_key_columns)
    _slice: RunSlice | None = None

    def _init_partition_args(
        self, *, partition_key_columns: Sequence[str] | str | None, add_partitions: bool
    ) -> None:
        """Check and keep the arguments (no I/O).

        :raises ValueError: a column named twice; ``add_partitions`` where it cannot be honoured.
        """
        if partition_key_columns is not None and not is_deferred(partition_key_columns):
            to_key_columns(partition_key_columns)
        self.partition_key_columns = partition_key_columns
        self.add_partitions = to_bool(add_partitions, "add_partitions", strings=False)
        if self.add_partitions:
            self._check_add_partitions()

    def _check_add_partitions(self) -> None:
        """``add_partitions`` needs an Airflow that takes keys, and the table's asset as an outlet."""
        if not can_add_partitions():
            raise ValueError(
                "add_partitions=True declares the partitions a commit touched on its asset event "
                "(outlet_events[asset].add_partitions), which needs Airflow 3.3 or later; this Airflow "
                "gives every event its run's partition key. Leave add_partitions out."
            )
        aliases = [o.name for o in getattr(self, "outlets", None) or [] if isinstance(o, AssetAlias)]
        if aliases:
            raise ValueError(
                f"add_partitions=True declares partitions on the table's asset event, but the outlet is "
                f"the alias {aliases[0]!r} (the default for a table named only by a delta_conn_id), and "
                f"Airflow gives an alias's events only the run's key. Pass "
                f"outlets=[delta_table_asset(...)] naming the table."
            )

    def _run_slice(self, context: Context | Mapping[str, Any]) -> RunSlice | None:
        """The slice a run with a ``partition_key`` replaces, with ``partition_key_columns``; None
        for a run without a key (Airflow 3.1, a schedule without partitions), which writes as it
        would without them.

        :raises ValueError: the key does not have one part per column.
        """
        if self.partition_key_columns is None:
            return None
        columns = to_key_columns(self.partition_key_columns)
        key = run_partition_key(context)
        if key is None or not columns:
            return None
        found = RunSlice.of(key, columns)
        ignored = " (replace_where applies to runs without a partition key)" if self.replace_where else ""
        self.log.info(
            "The run's partition key %r names the slice %s: the commit replaces it%s.",
            key,
            found.describe(),
            ignored,
        )
        return found

    def check_run_slice(self, snapshot: Snapshot | None) -> None:
        """Refuse a keyed run's slice the table cannot hold, before anything is written: a column that
        is not a partition column, a key part that does not fit its column's type.

        :raises PredicateError: naming the key, the column and the value.
        """
        if self._slice is None or snapshot is None:
            return  # a new table: the commit checks the slice against the columns it creates
        from airflow_delta_provider.core.expressions import PartitionFilter, PredicateError

        partition_columns = snapshot.partition_columns
        named = [c for c in self._slice.columns if c.lower() not in {p.lower() for p in partition_columns}]
        text, parameters = self._slice.predicate()
        try:
            if named:
                raise PredicateError(
                    f"partition_key_columns {named} are not partition columns of {self.hook.table_uri} "
                    f"(partition columns: {partition_columns or 'none'}): a run's partition is a slice of "
                    f"partition columns."
                )
            PartitionFilter(text, partition_columns, snapshot.schema, parameters)
        except PredicateError as err:
            raise PredicateError(
                f"The run's partition key {self._slice.key!r} ({self._slice.describe()}) cannot name a slice "
                f"of {self.hook.table_uri}: {err} Check the timetable's key_format, or partition_key_columns."
            ) from None

    def _announced_keys(self, result: CommitResult | Mapping[str, Any]) -> list[str]:
        """The partition keys of the partitions the commit (or the earlier execution's recorded one)
        touched: the values of ``partition_key_columns`` (default: every partition column) joined
        with ``|``; partitions no key can name (a null value) are logged and left out."""
        from airflow_delta_provider.core.table import commit_partitions

        data = result.to_dict() if hasattr(result, "to_dict") else dict(result)
        if not (data.get("committed") or data.get("reason") == "already_committed"):
            return []
        snapshot = self.hook.get_table().snapshot()
        touched = commit_partitions(snapshot, int(data["version"])) or []
        columns = (
            to_key_columns(self.partition_key_columns)
            if self.partition_key_columns is not None
            else list(snapshot.partition_columns)
        )
        keys: list[str]
        keys, unnamed = partition_keys(touched, columns)
        if unnamed:
            self.log.warning(
                "%d partition(s) the commit touched have no partition key (a null or empty value of %s, "
                "or a key over 250 characters), e.g. %s: their asset events are not sent.",
                len(unnamed),
                columns,
                unnamed[0],
            )
        self.log.info(
            "Declaring %d partition(s) the commit touched on the asset event: %s.", len(keys), keys[:10]
        )
        return keys
