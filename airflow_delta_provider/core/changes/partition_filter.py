"""A change feed restricted to partitions: which file actions lie where a partition filter selects.

``DeltaTable.changes(partition_filter=...)`` keeps, per commit, the ``add``, ``remove`` and ``cdc``
actions whose partition values the filter (:mod:`~..expressions.partition_filter`) selects, before
any row is read: the rows read follow the partitions selected, whatever else the range changed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

import airflow_delta_provider.core.utils.arrays as arrays
from airflow_delta_provider.core.expressions.partition_filter import PartitionFilter
from airflow_delta_provider.core.protocol.column_mapping import column_mapping_mode
from airflow_delta_provider.core.protocol.partitions import partition_columns_from_map
from airflow_delta_provider.core.protocol.schema import physical_name_map

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.protocol.actions import Metadata, Protocol

__all__ = ["PartitionSelector", "logical_keys"]

_VALUES_TYPE = pa.map_(pa.string(), pa.string())


class PartitionSelector:
    """The partitions a partition filter selects, decided for many files' partition values at once.

    :param text: the filter, a SQL condition on partition columns (``"ds = '2024-01-01'"``).
    :param protocol: the table's protocol (whether column mapping is in force).
    :param metadata: the table's metadata the files are judged by (columns and their types).
    :param parameters: the values of the filter's ``:name`` markers.
    :raises PredicateError: the filter does not parse, names a column the table lacks or a data
        column, or a value that does not fit its column.
    """

    def __init__(
        self,
        text: str,
        protocol: Protocol,
        metadata: Metadata,
        parameters: Mapping[str, Any] | None = None,
    ) -> None:
        schema = metadata.schema
        columns = list(metadata.partition_columns)
        self.filter = PartitionFilter(text, columns, schema, parameters)
        keys = logical_keys(protocol, metadata)
        self._columns = columns
        self._keys = pa.schema([pa.field(key, schema.field(column).type) for key, column in keys.items()])
        self._schema = schema

    @property
    def text(self) -> str:
        return self.filter.text

    def mask(self, values: Sequence[Mapping[str, str | None] | None]) -> npt.NDArray[np.bool_]:
        """Per file, whether its partition values (as the log holds them) are selected."""
        if not values:
            return np.zeros(0, dtype=bool)
        maps = arrays.array([dict(v) if v is not None else None for v in values], _VALUES_TYPE)
        typed = partition_columns_from_map(maps, self._keys)
        logical = pa.schema([self._schema.field(c) for c in self._columns])
        return self.filter.matches(pa.Table.from_arrays(typed.flatten(), schema=logical))

    def select(self, actions: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The actions (``add``, ``remove`` or ``cdc`` bodies) whose partition values are selected."""
        if not actions:
            return actions
        keep = self.mask([a.get("partitionValues") for a in actions])
        return [action for action, kept in zip(actions, keep.tolist(), strict=True) if kept]


def logical_keys(protocol: Protocol, metadata: Metadata) -> dict[str, str]:
    """How the log keys each partition column's value (its physical name under column mapping),
    to the column's logical name, in the table's partition order."""
    columns = list(metadata.partition_columns)
    if column_mapping_mode(protocol, metadata) == "none":
        return {column: column for column in columns}
    physical = physical_name_map(metadata.schema)
    return {physical[column]: column for column in columns}
