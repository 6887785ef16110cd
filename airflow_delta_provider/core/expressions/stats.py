"""Per-file statistics for ``add`` actions, read from Parquet footers.

``numRecords`` and, per stats column, ``minValues``, ``maxValues`` and ``nullCount``, from each
file's footer (one ranged read per file) and, where a footer falls short, from the values of
those columns alone (:mod:`.page_scan`). No reader may misread them: a file's bounds are exact
for every stats column that has values, or the file has none (docs/write-api.md, "Statistics no
reader can misread", says why reader by reader, and which bounds each type gets). Which columns
get statistics follows ``delta.dataSkippingStatsColumns`` or the first
``delta.dataSkippingNumIndexedCols``, as in Delta.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_delta_provider.core.errors import SchemaError
from airflow_delta_provider.core.expressions.stats_encoding import (
    DECIMAL_BYTES,
    FLOAT,
    GENERIC,
    LEGACY_INT96,
    NONE,
    Key,
    Leaf,
    bounds_json,
    flat_object_json,
    int96_bounds,
    leaf_of,
    nested_object_json,
    text_json,
)
from airflow_delta_provider.core.parquet.footer import (
    LOCAL_TAIL_BYTES,
    LOCAL_TAIL_STEP,
    TAIL_BYTES,
    footer_bytes,
    parse_footer,
    schema_end,
)
from airflow_delta_provider.core.parquet.page_scan import read_leaf_values
from airflow_delta_provider.core.protocol.validation import BuiltStats
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping, Sequence

    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)

NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
DEFAULT_NUM_INDEXED_COLS = 32


@dataclass(frozen=True)
class FooterInfo:
    """What one Parquet footer says about a data file.

    :param num_records: rows in the file.
    :param schema: the file's schema as Delta sees it (INT96 read as UTC timestamps,
        columns without nulls marked non-nullable).
    :param stats: the ``add.stats`` JSON.
    """

    num_records: int
    schema: pa.Schema
    stats: str


# --- which columns --------------------------------------------------------------------


def indexed_columns(data_schema: pa.Schema, properties: Mapping[str, str]) -> list[tuple[str, ...]]:
    """The leaf column paths that get statistics, in schema order.

    :param data_schema: the table schema without partition columns.
    :param properties: table properties (``delta.dataSkippingStatsColumns``,
        ``delta.dataSkippingNumIndexedCols``).
    :raises SchemaError: a property has an invalid value.
    """
    leaves = list(_leaf_paths(data_schema))
    listed = properties.get(STATS_COLUMNS)
    if listed:
        wanted = [tuple(_split_column(name.strip())) for name in listed.split(",") if name.strip()]
        chosen = []
        for prefix in wanted:
            key = tuple(p.lower() for p in prefix)
            chosen += [leaf for leaf in leaves if tuple(p.lower() for p in leaf[: len(key)]) == key]
        return list(dict.fromkeys(chosen))
    raw = properties.get(NUM_INDEXED_COLS)
    try:
        limit = int(raw) if raw is not None else DEFAULT_NUM_INDEXED_COLS
    except ValueError:
        raise SchemaError(
            f"{NUM_INDEXED_COLS}={raw!r} is not an integer; use -1 (all columns) or a count >= 0."
        ) from None
    if limit < -1:
        raise SchemaError(f"{NUM_INDEXED_COLS}={raw!r}; use -1 (all columns) or a count >= 0.")
    return leaves if limit == -1 else leaves[:limit]


def _leaf_paths(schema: pa.Schema | pa.StructType, parent: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    fields = (
        list(schema) if isinstance(schema, pa.Schema) else [schema.field(i) for i in range(schema.num_fields)]
    )
    for field in fields:
        path = (*parent, field.name)
        if pa.types.is_struct(field.type):
            yield from _leaf_paths(field.type, path)
        else:
            yield path


def _split_column(name: str) -> list[str]:
    """``a.b`` -> ``[a, b]``; backticks quote names with dots (```a.b`.c``)."""
    parts, current, quoted, i = [], [], False, 0
    while i < len(name):
        char = name[i]
        if char == "`":
            if quoted and name[i + 1 : i + 2] == "`":
                current.append("`")
                i += 1
            else:
                quoted = not quoted
        elif char == "." and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return parts


# --- footers -> stats -------------------------------------------------------------------

#: Files whose footers are read in one go (on object stores while the window before is parsed and
#: turned into stats): at most ``2 * FOOTER_WINDOW * TAIL_BYTES`` bytes of tails (16 MiB) are held.
FOOTER_WINDOW = 128


def read_footer(
    storage: LogStore,
    path: str,
    *,
    stats_columns: list[tuple[str, ...]],
    size: int | None = None,
) -> FooterInfo:
    """Read one file's footer and build its ``add.stats``.

    :param storage: the table's storage.
    :param path: filesystem path of the file.
    :param stats_columns: leaf column paths (table spelling) to collect statistics for.
    :param size: the file size when already known (saves a request on object stores).
    :raises InvalidDataFileError: the file is not Parquet or its footer is unreadable.
    """
    return read_footers(storage, [path], stats_columns=stats_columns, sizes=[size], max_workers=1)[0]


def footer_info(metadata: pq.FileMetaData, stats_columns: list[tuple[str, ...]]) -> FooterInfo:
    """:func:`read_footer` for a footer already read, from the footer alone (floats of writers
    that leave NaN out of their bounds and INT96 timestamps get none)."""
    return _StatsBuilder(stats_columns).info(metadata)


def read_footers(
    storage: LogStore,
    paths: list[str],
    *,
    stats_columns: list[tuple[str, ...]],
    sizes: Sequence[int | None] | None = None,
    max_workers: int | None = None,
) -> list[FooterInfo]:
    """:func:`read_footer` for many files: their tails read concurrently, the stats built from them.

    Each file costs one ranged read of its tail (:data:`TAIL_BYTES` on object stores; on local
    disks :data:`LOCAL_TAIL_BYTES`, then as much as the largest footer read so far, or as the
    float chunks a window had to read apart when they lie within :data:`TAIL_BYTES` of the end;
    a second, exact read when its footer is larger),
    at most ``max_workers`` at a time. On object stores the next :data:`FOOTER_WINDOW` files
    are read (in a thread that only waits for the network) while the footers already read are
    parsed and turned into stats. Local files are read, parsed and turned into stats in the
    calling thread: a footer takes microseconds there, and a second thread only adds handoffs
    of the interpreter lock (it made the commit of 1,000 files twice as slow). The work that
    depends only on a file's schema is done once per distinct schema (the files of one write
    share one).

    :param sizes: the files' sizes when known (else one ``info`` request per file first).
    :param max_workers: concurrent reads; default 1 for local files, 32 for remote storage
        (latency bound). 1 reads and parses one file after the other.
    :raises InvalidDataFileError: a file is missing, not Parquet, or truncated (named).
    """
    if not paths:
        return []
    remote = not storage.is_local
    workers = max_workers or (32 if remote else 1)
    tail = TAIL_BYTES if remote else LOCAL_TAIL_BYTES
    known: list[int | None] = list(sizes) if sizes is not None else [None] * len(paths)
    builder = _StatsBuilder(stats_columns)
    windows = [
        (start, min(start + FOOTER_WINDOW, len(paths))) for start in range(0, len(paths), FOOTER_WINDOW)
    ]

    def fetch(window: tuple[int, int]) -> tuple[list[bytes], list[int | None]]:
        nonlocal tail
        low, high = window
        footers, offsets = footer_bytes(storage, paths[low:high], known[low:high], workers, tail)
        if not remote:  # the next window's tails hold footers as large as this window's
            longest = max(int.from_bytes(footer[-8:-4], "little") for footer in footers) + 8
            tail = max(tail, -(-longest // LOCAL_TAIL_STEP) * LOCAL_TAIL_STEP)
        return footers, offsets

    def build(window: tuple[int, int], fetched: tuple[list[bytes], list[int | None]]) -> None:
        low, high = window
        footers, offsets = fetched
        # All of a window's footers parsed, then all turned into stats: alternating pyarrow's
        # parser and the stats code file by file cost ~60% more (each evicts the other's caches).
        parsed = [
            parse_footer(storage, path, footer) for path, footer in zip(paths[low:high], footers, strict=True)
        ]
        # Then the values of the columns whose bounds the footers cannot give, all at once.
        plans = [builder.plan(metadata, footer) for metadata, footer in zip(parsed, footers, strict=True)]
        nan_bounds = [_nan_in_bounds(metadata.created_by) for metadata in parsed]
        wanted = [
            plan.value_leaves(metadata, float_bounds=nan)
            for plan, metadata, nan in zip(plans, parsed, nan_bounds, strict=True)
        ]
        values = None
        if any(wanted):
            tails = list(zip(offsets, footers, strict=True))
            missed: list[int] = []
            values = read_leaf_values(storage, paths[low:high], parsed, wanted, workers, tails, missed)
            if not remote:  # the next window's tails hold such chunks too, when they are near the end
                nonlocal tail
                tail = max(tail, _local_value_tail(missed))
        infos: list[FooterInfo | None] = [None] * len(parsed)
        for plan in dict.fromkeys(plans):  # files of one schema together: one plan, usually
            files = [index for index, other in enumerate(plans) if other is plan]
            found = plan.footer_infos(
                [parsed[i] for i in files],
                [nan_bounds[i] for i in files],
                [values[i] if values else None for i in files],
            )
            for index, info in zip(files, found, strict=True):
                infos[index] = info
        done.extend(info for info in infos if info is not None)
        if len(paths) >= FOOTER_WINDOW:
            log.info("Read %d of %d Parquet footers.", len(done), len(paths))

    done: list[FooterInfo] = []
    if not remote or len(windows) == 1 or workers <= 1:
        for window in windows:
            build(window, fetch(window))
        return done
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="delta-footer") as reader:
        pending = reader.submit(fetch, windows[0])
        for index, window in enumerate(windows):
            fetched = pending.result()
            if index + 1 < len(windows):
                pending = reader.submit(fetch, windows[index + 1])
            build(window, fetched)
    return done


def _local_value_tail(missed: list[int]) -> int:
    """A local tail size (whole :data:`LOCAL_TAIL_STEP`) that holds the chunks read apart from
    their tails, as many as fit in :data:`TAIL_BYTES`: one read of a few more kilobytes costs
    less than a second read of the file."""
    longest = max((span for span in missed if span <= TAIL_BYTES), default=0)
    return -(-longest // LOCAL_TAIL_STEP) * LOCAL_TAIL_STEP


def _nan_in_bounds(created_by: str | None) -> bool:
    """Whether the writer puts NaN into float min/max (so finite bounds mean "no NaN").

    parquet-mr / parquet-java (Spark's writer) orders floats with Java's ``Float.compare``,
    NaN above every number, as Spark does; Arrow-based writers leave NaN out uncounted.
    """
    writer = (created_by or "").lower()
    return writer.startswith(("parquet-mr", "parquet-java"))


class _StatsBuilder:
    """``add.stats`` of footers for one list of stats columns, a :class:`_SchemaPlan` per schema."""

    def __init__(self, stats_columns: list[tuple[str, ...]]) -> None:
        self.stats_columns = stats_columns
        self._plans: list[_SchemaPlan] = []

    def info(self, metadata: pq.FileMetaData) -> FooterInfo:
        """A footer's stats from the footer alone (no values read)."""
        return self.plan(metadata, None).footer_infos(
            [metadata], [_nan_in_bounds(metadata.created_by)], [None]
        )[0]

    def plan(self, metadata: pq.FileMetaData, footer: bytes | None) -> _SchemaPlan:
        """The plan of the footer's schema.

        :param footer: the bytes ``metadata`` was parsed from (ending with the trailer), when
            at hand: its schema is then recognised by its bytes."""
        key_values = metadata.metadata  # ARROW:schema: part of what the Arrow schema is
        start = 0
        if footer is not None:
            start = len(footer) - 8 - int.from_bytes(footer[-8:-4], "little")
            # The same version and schema bytes are the same schema, and never touching
            # ``metadata.schema`` leaves no reference cycle per file (FileMetaData <-> ParquetSchema:
            # 1,000 of them cost the garbage collector ~8 ms per 1,000 footers).
            for plan in self._plans:
                if (
                    plan.schema_bytes is not None
                    and footer.startswith(plan.schema_bytes, start)
                    and plan.key_values == key_values
                ):
                    return plan
        schema = metadata.schema
        for plan in self._plans:
            if plan.key_values == key_values and plan.parquet_schema.equals(schema):
                return plan
        schema_bytes = None
        if footer is not None:
            end = schema_end(footer, start)
            schema_bytes = footer[start:end] if end is not None else None
        plan = _SchemaPlan(metadata, self.stats_columns, schema_bytes)
        self._plans = [plan, *self._plans[:7]]
        return plan


class _SchemaPlan:
    """Everything about a footer's statistics that depends only on its schema (built once per schema)."""

    def __init__(
        self,
        metadata: pq.FileMetaData,
        stats_columns: list[tuple[str, ...]],
        schema_bytes: bytes | None = None,
    ) -> None:
        #: The footer's encoded version and schema (fields 1-2), when it starts with them.
        self.schema_bytes = schema_bytes
        self.parquet_schema = metadata.schema
        self.key_values = metadata.metadata
        self.arrow_schema = arrow_schema = metadata.schema.to_arrow_schema()
        leaves = list(_parquet_leaves(arrow_schema))
        # A layout this reader does not map: claim nothing rather than misattribute stats.
        self.mapped = len(leaves) == metadata.num_columns
        self.leaves: list[Leaf] = []
        for index, (path, arrow_type) in enumerate(leaves):
            if path is None:
                continue
            column = metadata.schema.column(index) if index < metadata.num_columns else None
            self.leaves.append(leaf_of(index, path, arrow_type, column))
        by_key = {tuple(p.lower() for p in leaf.path): position for position, leaf in enumerate(self.leaves)}
        #: Per stats column: its table path and JSON key, its leaf (position in self.leaves) or
        #: None, and for a missing leaf whether the file has the column at all (nested, not a leaf).
        self.targets: list[tuple[Key, int | None, bool]] = []
        for path in stats_columns:
            position = by_key.get(tuple(p.lower() for p in path))
            key = (path, f"{text_json(path[0])}:" if len(path) == 1 else None)
            self.targets.append((key, position, position is not None or _present(arrow_schema, path)))
        self._views: dict[tuple[bool, ...], pa.Schema] = {}
        self._loop = [(position, leaf.index, leaf.kind) for position, leaf in enumerate(self.leaves)]
        #: (leaf position, boundable) of the stats columns the file has as leaves.
        self._target_leaves = [(at, self.leaves[at].boundable) for _, at, _ in self.targets if at is not None]
        targeted = {at for at, _ in self._target_leaves}
        #: Per "the writer puts NaN into float bounds": whose bounds are read (stats columns only).
        self._bounded = {
            float_bounds: [
                self.mapped
                and position in targeted
                and leaf.kind != NONE
                and not leaf.int96
                and (float_bounds or not leaf.floating)
                for position, leaf in enumerate(self.leaves)
            ]
            for float_bounds in (False, True)
        }
        #: Per "the writer puts NaN into float bounds": the stats leaves whose bounds come from
        #: their values (:func:`read_leaf_values`): other writers' floats, INT96 timestamps.
        self._value_leaves = {
            float_bounds: [
                (position, leaf)
                for position, leaf in enumerate(self.leaves)
                if self.mapped
                and position in targeted
                and (leaf.int96 or (leaf.kind == FLOAT and not float_bounds))
            ]
            for float_bounds in (False, True)
        }
        #: Every stats column top-level: its JSON objects are flat.
        self._flat = all(key[1] is not None for key, _, _ in self.targets)

    def value_leaves(self, metadata: pq.FileMetaData, *, float_bounds: bool) -> list[tuple[int, Leaf]]:
        """(position, leaf) of the stats leaves whose bounds only their values give, in this file."""
        leaves = self._value_leaves[float_bounds]
        # (The key-value metadata is built into a dict per call, ARROW:schema included: asked
        # only when an INT96 leaf depends on it.)
        if any(leaf.int96 for _, leaf in leaves) and metadata.metadata and LEGACY_INT96 in metadata.metadata:
            # Spark rebased these to the Julian calendar: their values are not the instants.
            leaves = [(position, leaf) for position, leaf in leaves if not leaf.int96]
        return leaves

    def _value_bounds(
        self, values: Mapping[int, list[np.ndarray] | None]
    ) -> tuple[set[int], dict[int, tuple[str, str] | None]]:
        """From the values read (:func:`read_leaf_values`): the float leaves whose footer bounds hold
        (no NaN among the values), and the INT96 leaves' bounds as JSON (None: none)."""
        trusted: set[int] = set()
        int96: dict[int, tuple[str, str] | None] = {}
        for position, arrays in values.items():
            if arrays is None:
                continue
            if self.leaves[position].int96:
                int96[position] = int96_bounds(np.concatenate(arrays)) if arrays else None
            elif not any(np.isnan(array).any() for array in arrays):
                trusted.add(position)
        return trusted, int96

    def footer_infos(
        self,
        files: Sequence[pq.FileMetaData],
        float_bounds: Sequence[bool],
        values: Sequence[Mapping[int, list[np.ndarray] | None] | None],
    ) -> list[FooterInfo]:
        """The stats of many files of this schema: each footer aggregated, then each stats
        column's bounds turned into Delta's JSON for all the files at once (:func:`bounds_json`).

        :param float_bounds: per file, whether its writer puts NaN into float bounds.
        :param values: per file, per leaf position of :meth:`value_leaves`, the values read
            (None: unread).
        """
        aggregates = [
            self._aggregate(metadata, nan, found)
            for metadata, nan, found in zip(files, float_bounds, values, strict=True)
        ]
        converted = self._converted_bounds(aggregates)
        return [self._info(aggregate, converted, index) for index, aggregate in enumerate(aggregates)]

    def _aggregate(
        self,
        metadata: pq.FileMetaData,
        float_bounds: bool,
        values: Mapping[int, list[np.ndarray] | None] | None,
    ) -> _Aggregate:
        """A file's null count per leaf and, for the stats leaves whose footer bounds hold, their
        min and max over the row groups; whether its bounds can all be exact.

        The hot loop: one statistics object per column chunk, each property read once
        (``null_count`` / ``min_raw`` are None when the footer has none); min/max only for stats
        columns, null counts for every leaf (the Delta view's nullability needs them).
        """
        count = len(self.leaves)
        bounded = self._bounded[float_bounds].copy()
        trusted, int96 = self._value_bounds(values) if values else (set(), {})
        for position in trusted:
            bounded[position] = True
        found = _Aggregate(
            metadata.num_rows, [0 if self.mapped else None] * count, [None] * count, [None] * count
        )
        found.bounded, found.int96 = bounded, int96
        null_counts, lows, highs = found.null_counts, found.lows, found.highs
        for group in range(metadata.num_row_groups if self.mapped else 0):
            row_group = metadata.row_group(group)
            rows = row_group.num_rows
            chunk = row_group.column
            for position, index, kind in self._loop:
                statistics = chunk(index).statistics
                nulls = statistics.null_count if statistics is not None else None
                if nulls is None:
                    null_counts[position] = None
                    bounded[position] = False
                    continue
                total = null_counts[position]
                if total is not None:
                    null_counts[position] = total + nulls
                if nulls == rows or not bounded[position]:
                    continue  # only nulls: no bounds needed from this group
                try:
                    if kind == GENERIC:
                        low, high = statistics.min, statistics.max
                    else:
                        low, high = statistics.min_raw, statistics.max_raw
                    if low is None or high is None:
                        bounded[position] = False
                        continue
                    if kind == DECIMAL_BYTES:
                        low = int.from_bytes(low, "big", signed=True)
                        high = int.from_bytes(high, "big", signed=True)
                    current = lows[position]
                    lows[position] = low if current is None else min(current, low)
                    current = highs[position]
                    highs[position] = high if current is None else max(current, high)
                except (ValueError, OverflowError, TypeError, pa.ArrowException):
                    bounded[position] = False  # values Python cannot hold (a date in year 0): no bounds
        # Bounds are all-or-none per file: a column with values and no usable bounds settles it
        # before any value is converted.
        found.exact = all(
            (bounded[at] and lows[at] is not None)
            or (int96.get(at) is not None and null_counts[at] is not None)
            or null_counts[at] == found.num_records
            or not boundable
            for at, boundable in self._target_leaves
        )
        return found

    def _converted_bounds(self, aggregates: list[_Aggregate]) -> dict[int, list[tuple[str, str] | None]]:
        """Per stats leaf, per file, its footer min/max as Delta's JSON (None: none, or not needed)."""
        converted: dict[int, list[tuple[str, str] | None]] = {}
        for at in dict.fromkeys(at for at, _ in self._target_leaves):
            files = [
                index
                for index, found in enumerate(aggregates)
                if found.exact
                and found.bounded[at]
                and found.lows[at] is not None
                and found.highs[at] is not None
            ]
            if not files:
                continue
            column = bounds_json(
                self.leaves[at],
                [aggregates[i].lows[at] for i in files],
                [aggregates[i].highs[at] for i in files],
            )
            bounds: list[tuple[str, str] | None] = [None] * len(aggregates)
            converted[at] = bounds
            for index, bound in zip(files, column, strict=True):
                bounds[index] = bound
        return converted

    def _info(
        self, found: _Aggregate, converted: dict[int, list[tuple[str, str] | None]], index: int
    ) -> FooterInfo:
        """One file's stats JSON (bounds while they are all exact) and its Delta schema."""
        num_records = found.num_records
        min_values: list[tuple[Key, str]] = []
        max_values: list[tuple[Key, str]] = []
        null_count: list[tuple[Key, str]] = []
        exact = found.exact
        for key, at, present in self.targets:
            if at is None:
                if not present:
                    # Delta: a column missing from the file is null in every row of it.
                    null_count.append((key, str(num_records)))
                continue
            column_nulls = found.null_counts[at]
            if column_nulls is not None:
                null_count.append((key, str(column_nulls)))
            if not exact:
                continue
            # Bounds only with a null count: delta-rs 1.6 reads bounds without one as "no nulls".
            bound = found.int96.get(at) if column_nulls is not None else None
            if bound is None and at in converted:
                bound = converted[at][index]
            if bound is not None:
                min_values.append((key, bound[0]))
                max_values.append((key, bound[1]))
            elif column_nulls != num_records and self.leaves[at].boundable:
                exact = False  # values without exact bounds (or an unknown null count)
        object_json = flat_object_json if self._flat else nested_object_json
        stats = f'{{"numRecords":{num_records}'
        if min_values and exact:
            stats += f',"minValues":{object_json(min_values)},"maxValues":{object_json(max_values)}'
        if null_count:
            stats += f',"nullCount":{object_json(null_count)}'
        return FooterInfo(num_records, self._view(found.null_counts), BuiltStats(stats + "}"))

    def _view(self, null_counts: list[int | None]) -> pa.Schema:
        """The file's schema as Delta sees it, one per pattern of columns without nulls."""
        view_key = tuple([nulls == 0 for nulls in null_counts])
        schema = self._views.get(view_key)
        if schema is None:
            schema = self._views[view_key] = _delta_view(
                self.arrow_schema,
                {leaf.path for leaf in self.leaves if leaf.int96},
                {leaf.path for leaf, non_null in zip(self.leaves, view_key, strict=True) if non_null},
            )
        return schema


@dataclass
class _Aggregate:
    """What one file's footer (and the values read) say, per leaf: its null count (None:
    unknown), its min and max over the row groups where ``bounded``, INT96 bounds from values."""

    num_records: int
    null_counts: list[int | None]
    lows: list[Any]
    highs: list[Any]
    bounded: list[bool] = dataclasses.field(default_factory=list)
    int96: dict[int, tuple[str, str] | None] = dataclasses.field(default_factory=dict)
    #: whether every stats column with values can get an exact bound
    exact: bool = True


def _parquet_leaves(
    schema: pa.Schema | pa.StructType, parent: tuple[str, ...] = (), nested: bool = False
) -> Iterator[tuple[tuple[str, ...] | None, pa.DataType]]:
    """Parquet leaf columns in order: their path, or None inside lists and maps."""
    fields = (
        list(schema) if isinstance(schema, pa.Schema) else [schema.field(i) for i in range(schema.num_fields)]
    )
    for field in fields:
        yield from _leaves_of(field.type, (*parent, field.name), nested)


def _leaves_of(
    arrow_type: pa.DataType, path: tuple[str, ...], nested: bool
) -> Iterator[tuple[tuple[str, ...] | None, pa.DataType]]:
    if pa.types.is_struct(arrow_type):
        yield from _parquet_leaves(arrow_type, path, nested)
    elif pa.types.is_map(arrow_type):
        yield from _leaves_of(arrow_type.key_type, path, True)
        yield from _leaves_of(arrow_type.item_type, path, True)
    elif (
        pa.types.is_list(arrow_type)
        or pa.types.is_large_list(arrow_type)
        or pa.types.is_fixed_size_list(arrow_type)
    ):
        yield from _leaves_of(arrow_type.value_type, path, True)
    else:
        yield (None if nested else path), arrow_type


def _delta_view(
    arrow_schema: pa.Schema, int96: set[tuple[str, ...]], non_null: set[tuple[str, ...]]
) -> pa.Schema:
    """The file schema as Delta means it: INT96 is a UTC timestamp; no nulls means NOT NULL."""

    def convert(field: pa.Field, path: tuple[str, ...]) -> pa.Field:
        if pa.types.is_struct(field.type):
            children = [
                convert(field.type.field(i), (*path, field.type.field(i).name))
                for i in range(field.type.num_fields)
            ]
            return field.with_type(pa.struct(children))
        if path in int96:
            field = field.with_type(pa.timestamp("us", tz="UTC"))
        if field.nullable and path in non_null:
            field = field.with_nullable(False)
        return field

    return pa.schema([convert(f, (f.name,)) for f in arrow_schema], metadata=arrow_schema.metadata)


def _present(schema: pa.Schema, path: tuple[str, ...]) -> bool:
    current: Any = schema
    for name in path:
        names = (
            [current.field(i).name for i in range(current.num_fields)]
            if isinstance(current, pa.StructType)
            else current.names
        )
        match = next((n for n in names if n.lower() == name.lower()), None)
        if match is None:
            return False
        field = current.field(match)
        current = field.type
    return True
