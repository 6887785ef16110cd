"""Airflow's asset partitions as Delta partitions: which slice of a table a run's partition key
names, and which keys the partitions a commit touched announce.

A run's ``partition_key`` (a ``CronPartitionTimetable`` tick, a ``PartitionedAssetTimetable``
downstream key, a REST-triggered run's key) names the values of ``partition_key_columns``, in
that order; a composite key (``ProductMapper``'s) joins its parts with ``|``. Each part is
bound to its column as a string literal, so the core's one literal typing converts it (a date
column reads ``"2026-03-01"`` as Spark's cast would). docs/partitions.md has the mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.utils.coercion import to_list

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["KEY_SEPARATOR", "RunSlice", "partition_keys", "to_key_columns", "with_partition_keys"]

#: How Airflow joins the parts of a composite partition key (``ProductMapper``'s delimiter).
KEY_SEPARATOR = "|"
#: Airflow's limit on a partition key's length.
MAX_KEY_LENGTH = 250


def to_key_columns(value: Any) -> list[str]:
    """The rendered ``partition_key_columns``: distinct non-empty column names, in key order.

    :raises ValueError: not a list of non-empty strings, or a column named twice.
    """
    columns = to_list(value, "partition_key_columns")
    if len({c.lower() for c in columns}) != len(columns):
        raise ValueError(f"partition_key_columns names a column twice: {columns}.")
    return columns


@dataclass(frozen=True)
class RunSlice:
    """The slice of a table a run's partition key names.

    :param key: the run's ``partition_key``.
    :param columns: the partition columns it names, in key order.
    :param values: the key's parts, one per column.
    """

    key: str
    columns: tuple[str, ...]
    values: tuple[str, ...]

    @classmethod
    def of(cls, key: str, columns: Sequence[str]) -> RunSlice:
        """Split ``key`` over ``columns``: the whole key for one column, else its ``|``-separated parts.

        :raises ValueError: the key does not have one part per column.
        """
        if len(columns) == 1:
            return cls(key, (columns[0],), (key,))
        parts = key.split(KEY_SEPARATOR)
        if len(parts) != len(columns):
            raise ValueError(
                f"The run's partition key {key!r} has {len(parts)} part(s) separated by "
                f"{KEY_SEPARATOR!r}, but partition_key_columns names {len(columns)} column(s) "
                f"{list(columns)}: a composite key (ProductMapper's) holds one part per column, in that "
                f"order. Name the columns the key holds, or map the key to that shape."
            )
        empty = [column for column, part in zip(columns, parts, strict=True) if not part]
        if empty:
            raise ValueError(
                f"The run's partition key {key!r} has an empty part for {empty}: an empty partition "
                f"value is a null one in Delta, which a key cannot name."
            )
        return cls(key, tuple(columns), tuple(parts))

    def predicate(self) -> tuple[str, dict[str, str]]:
        """The slice as a partition filter, each part bound to a marker: ``(text, parameters)``."""
        from airflow_delta_provider.core.expressions import slice_filter

        return slice_filter(self.columns, self.values)

    def describe(self) -> str:
        pairs = zip(self.columns, self.values, strict=True)
        return " AND ".join(f"{column} = {value!r}" for column, value in pairs)


def partition_keys(
    partitions: Sequence[Mapping[str, str | None]], columns: Sequence[str]
) -> tuple[list[str], list[dict[str, str | None]]]:
    """The Airflow partition keys of partitions (their values as the log holds them): the values of
    ``columns`` joined with ``|``, in the order first seen; and the partitions no key can name (a
    null or empty value, a key over Airflow's 250 characters).
    """
    keys: dict[str, None] = {}
    unnamed: list[dict[str, str | None]] = []
    for values in partitions:
        parts = [values.get(column) for column in columns]
        key = KEY_SEPARATOR.join(p for p in parts if p)
        if not all(parts) or len(key) > MAX_KEY_LENGTH or not key.strip():
            unnamed.append(dict(values))
            continue
        keys[key] = None
    return list(keys), unnamed


def with_partition_keys(event: dict[str, Any]) -> dict[str, Any]:
    """A watcher's event payload with ``partition_keys``: the Airflow keys of its ``partitions``
    (every partition column's value, in the table's order, joined with ``|``), since Airflow gives
    an ``AssetWatcher``'s event no key: a DAG it triggers reads them from the event instead."""
    partitions = event.get("partitions") or []
    columns = list(partitions[0]) if partitions else []
    keys, _ = partition_keys(partitions, columns)
    return {**event, "partition_keys": keys}
