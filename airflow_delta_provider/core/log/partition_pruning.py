"""A replay of some partitions only: which checkpoint row groups and file actions a partition filter keeps.

A :class:`PartitionSelection` (``core.expressions.PartitionFilter`` is one) says which partition
values it selects, exactly over typed values and as a "may" over ranges. :class:`PartitionPruner`
binds it to a table (partition column types, the keys the log writes them under) and gives the
replay what it asks: a mask over ``partitionValues`` maps, and the row groups of a checkpoint whose
statistics may hold a selected file (``add.partitionValues_parsed``, when typed as the table types
the column; or, for a single string partition column, ``partitionValues`` itself). Statistics only
skip row groups; every kept row is judged on its ``partitionValues`` map.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.protocol.column_mapping import column_mapping_mode, delta_physical_name
from airflow_delta_provider.core.protocol.partitions import partition_columns_from_map
from airflow_delta_provider.core.utils.arrays import to_bools

if TYPE_CHECKING:
    import numpy.typing as npt
    import pyarrow.parquet as pq

    from airflow_delta_provider.core.protocol.actions import Metadata
    from airflow_delta_provider.core.protocol.actions import Protocol as DeltaProtocol

__all__ = ["PartitionBounds", "PartitionPruner", "PartitionSelection"]


class PartitionSelection(Protocol):
    """What a partition-pruned replay needs of a filter on partition columns."""

    @property
    def columns(self) -> frozenset[str]:
        """The partition columns (logical names) the filter names."""

    @property
    def text(self) -> str:
        """The filter as SQL, for messages."""

    def matches(self, values: pa.Table) -> npt.NDArray[np.bool_]:
        """Per row of typed partition values (one column per partition column, logical names):
        whether the filter selects it (a comparison with null is not true)."""

    def may_match(self, bounds: PartitionBounds) -> npt.NDArray[np.bool_]:
        """Per range of rows: whether some row with values within ``bounds`` may be selected."""


@dataclass(frozen=True)
class PartitionBounds:
    """What statistics say of the partition values in each of several ranges of rows (row groups).

    :param schema: every partition column (logical names, the table's types).
    :param low: per partition column with statistics (others are absent: anything may be there)
        the lowest non-null value of each range, null where unknown; ``high`` the highest.
    :param may_be_null: per column, whether a range may hold a null value; ``may_hold_value``
        whether it may hold a non-null one.
    """

    schema: pa.Schema
    low: pa.Table
    high: pa.Table
    may_be_null: dict[str, npt.NDArray[np.bool_]]
    may_hold_value: dict[str, npt.NDArray[np.bool_]]


class PartitionPruner:
    """A partition selection bound to one table version (its partition columns' types and keys).

    :param selection: the filter; every column it names must be a partition column.
    :raises ValueError: the filter names a column that is not a partition column.
    """

    def __init__(self, selection: PartitionSelection, protocol: DeltaProtocol, metadata: Metadata) -> None:
        partitions = list(metadata.partition_columns)
        unknown = sorted(set(selection.columns) - set(partitions))
        if unknown:
            raise ValueError(
                f"The partition filter {selection.text!r} names {', '.join(map(repr, unknown))}, which "
                f"{'is not a partition column' if len(unknown) == 1 else 'are not partition columns'} of the "
                f"table (its partition columns: {partitions}); filter on partition columns only."
            )
        self.selection = selection
        schema = metadata.schema
        mapped = column_mapping_mode(protocol, metadata) != "none"
        by_name = {f.get("name"): f for f in metadata.schema_json.get("fields") or [] if isinstance(f, dict)}
        self.logical = pa.schema([schema.field(c).with_nullable(True) for c in partitions])
        #: the partition columns as the log keys them (physical names under column mapping)
        self.keyed = pa.schema(
            [
                f.with_name(
                    str(delta_physical_name(by_name[f.name])) if mapped and f.name in by_name else f.name
                )
                for f in self.logical
            ]
        )

    def mask(
        self, maps: pa.Array | pa.ChunkedArray, present: npt.NDArray[np.bool_] | None = None
    ) -> npt.NDArray[np.bool_]:
        """Per ``partitionValues`` map: whether the filter selects the file.

        :param present: which rows hold a file action at all (a checkpoint's ``add`` validity:
            the map of a row without one is not looked at); by default, those with a map.
        """
        if not len(maps):
            return np.zeros(0, dtype=bool)
        if isinstance(maps, pa.ChunkedArray):
            maps = maps.combine_chunks()
        if present is None:
            present = to_bools(maps.is_valid())
        elif not present.all():
            # Rows without a file action: their maps (a struct child's leftovers) are not parsed.
            maps = maps.filter(pa.array(present))
            found = np.zeros(len(present), dtype=bool)
            found[np.flatnonzero(present)] = self.mask(maps)
            return found
        typed = partition_columns_from_map(maps, self.keyed)
        values = pa.Table.from_arrays(typed.flatten(), schema=self.logical)
        selected = np.asarray(self.selection.matches(values), dtype=bool)
        return selected & present

    def parsed_column(self, schema: pa.Schema) -> bool:
        """Whether a checkpoint of ``schema`` (Arrow) has ``add.partitionValues_parsed`` with every
        partition column typed as the table types it: then it serves for statistics and for the
        rows, a struct of typed leaves being much cheaper to decode than the strings of a map."""
        parsed = _parsed_type(schema)
        return parsed is not None and all(
            _field_type(parsed, keyed.name) == logical.type
            for logical, keyed in zip(self.logical, self.keyed, strict=True)
        )

    def mask_of_adds(self, add: pa.StructArray, *, parsed: bool) -> npt.NDArray[np.bool_]:
        """Per row of a checkpoint's ``add`` column (null: no add): whether the filter selects it,
        judged on ``partitionValues_parsed`` when ``parsed``, else on ``partitionValues``."""
        present = to_bools(add.is_valid())
        if not parsed:
            return self.mask(_child(add, "partitionValues"), present)
        struct = _child(add, "partitionValues_parsed")
        children = [_child(struct, f.name) for f in self.keyed]
        values = pa.Table.from_arrays(children, schema=self.logical)
        if not present.all():
            found = np.zeros(len(present), dtype=bool)
            found[present] = np.asarray(self.selection.matches(values.filter(pa.array(present))), dtype=bool)
            return found
        return np.asarray(self.selection.matches(values), dtype=bool)

    def row_groups(self, parquet: pq.ParquetFile) -> list[int]:
        """The row groups of a checkpoint file that may hold a selected ``add``: those holding any
        add, less those whose partition statistics rule the filter out."""
        metadata = parquet.metadata
        columns = _leaf_columns(parquet)
        path_leaf = columns.get("add.path")
        groups = [
            g
            for g in range(metadata.num_row_groups)
            if path_leaf is None or not _all_null(metadata.row_group(g), path_leaf)
        ]
        if not groups:
            return []
        bounds = self._bounds(parquet, columns, groups)
        if bounds is None:
            return groups
        keep = np.asarray(self.selection.may_match(bounds), dtype=bool)
        return [g for g, kept in zip(groups, keep.tolist(), strict=True) if kept]

    def _bounds(
        self, parquet: pq.ParquetFile, columns: dict[str, int], groups: list[int]
    ) -> PartitionBounds | None:
        """The statistics of each partition column over ``groups``, from the parsed partition
        values typed as the table types them, else (one string column) from the map's values."""
        leaves: dict[str, int] = {}
        parsed = _parsed_type(parquet.schema_arrow)
        for logical, keyed in zip(self.logical, self.keyed, strict=True):
            path = f"add.partitionValues_parsed.{keyed.name}"
            if parsed is not None and path in columns and _field_type(parsed, keyed.name) == logical.type:
                leaves[logical.name] = columns[path]
        if not leaves and len(self.logical) == 1 and pa.types.is_string(self.logical[0].type):
            value_leaf = columns.get(_MAP_VALUE)
            if value_leaf is not None:
                leaves[self.logical[0].name] = value_leaf
        if not leaves:
            return None
        metadata = parquet.metadata
        fields = [f for f in self.logical if f.name in leaves]
        low: dict[str, list[Any]] = {f.name: [] for f in fields}
        high: dict[str, list[Any]] = {f.name: [] for f in fields}
        nulls: dict[str, list[bool]] = {f.name: [] for f in fields}
        present: dict[str, list[bool]] = {f.name: [] for f in fields}
        for group in groups:
            row_group = metadata.row_group(group)
            for field in fields:
                stats = row_group.column(leaves[field.name]).statistics
                known = stats is not None and stats.has_min_max
                counted = stats is not None and stats.has_null_count
                low[field.name].append(stats.min if known else None)
                high[field.name].append(stats.max if known else None)
                # No null at all: no file of the group has a null value. (Rows without an add
                # are null too, so a count says little more.)
                nulls[field.name].append(not (counted and stats.null_count == 0))
                # All null, and no bounds: no value (a writer may omit the bounds of values).
                empty = counted and not known and stats.null_count >= row_group.num_rows
                present[field.name].append(not empty or leaves[field.name] == columns.get(_MAP_VALUE))
        try:
            schema = pa.schema(fields)
            return PartitionBounds(
                schema=self.logical,
                low=pa.table({f.name: pa.array(low[f.name], f.type) for f in fields}, schema=schema),
                high=pa.table({f.name: pa.array(high[f.name], f.type) for f in fields}, schema=schema),
                may_be_null={n: np.array(v, dtype=bool) for n, v in nulls.items()},
                may_hold_value={n: np.array(v, dtype=bool) for n, v in present.items()},
            )
        except (pa.ArrowException, TypeError, ValueError, OverflowError):
            return None  # statistics of a form this reader does not type: every group is read


#: The values of the ``partitionValues`` maps (one leaf for every partition column).
_MAP_VALUE = "add.partitionValues.key_value.value"


def _leaf_columns(parquet: pq.ParquetFile) -> dict[str, int]:
    """The index of each leaf column of the file by its dotted path."""
    schema = parquet.schema
    return {schema.column(i).path: i for i in range(len(schema))}


def _parsed_type(schema: pa.Schema) -> pa.DataType | None:
    index = schema.get_field_index("add")
    if index < 0 or not pa.types.is_struct(schema.field(index).type):
        return None
    add = schema.field(index).type
    position = add.get_field_index("partitionValues_parsed")
    if position < 0 or not pa.types.is_struct(add.field(position).type):
        return None
    parsed: pa.DataType = add.field(position).type
    return parsed


def _child(struct: pa.StructArray, name: str) -> pa.Array:
    index = struct.type.get_field_index(name)
    if index < 0:
        raise KeyError(f"no field {name!r} in {struct.type}")
    return struct.field(index)


def _field_type(struct: pa.DataType, name: str) -> pa.DataType | None:
    index = struct.get_field_index(name)
    return struct.field(index).type if index >= 0 else None


def _all_null(row_group: pq.RowGroupMetaData, column: int) -> bool:
    stats = row_group.column(column).statistics
    return bool(stats is not None and stats.has_null_count and stats.null_count >= row_group.num_rows)
