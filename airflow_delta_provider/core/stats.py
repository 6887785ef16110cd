"""Per-file statistics for ``add`` actions, read from Parquet footers.

Delta's data skipping reads ``add.stats``: ``numRecords`` and, per column, ``minValues``,
``maxValues`` and ``nullCount``. Spark computes them while writing; here the files already
exist, so they come from the Parquet footer (one ranged read per file, no data read).

The rule is that no reader can misread them. A file's ``minValues`` / ``maxValues`` hold
exact bounds for **every** stats column that has values and a type bounds exist for, or the
file has no ``minValues`` / ``maxValues`` at all (``numRecords`` and ``nullCount`` stay: they
are exact). Leaving out only the columns without bounds is not enough: a ``nullCount``
without bounds is read by delta-rs 1.6 as "no value can match" (it skipped Spark's INT96
timestamps for ``ts = X``), and its pyarrow reader turns any stats column missing from
``minValues`` into ``col >= null``, which skips the file for every filter on that column.
Exact bounds are:

* integers, decimals, dates, booleans: the footer's min/max, when every row group that
  holds a value has them;
* strings: truncated the way Delta does (``truncateMinStringAgg`` /
  ``truncateMaxStringAgg``, prefix 32); a maximum that cannot be truncated has none;
* timestamps: milliseconds (Delta's precision), the minimum rounded down and the maximum
  rounded **up**, so both stay bounds of microsecond values; INT96 (Spark's default) has
  none (its footer order is undefined and Spark writes no INT96 statistics);
* floats and doubles: only from writers that put NaN into the footer's min/max (Spark's
  parquet-mr / parquet-java, whose order puts NaN above every number, as Spark's does) and
  only when both are finite. Other writers (Arrow, and so pyarrow, polars, delta-rs) leave
  NaN out without counting it, so their float bounds may hide a NaN and are not used;
* never for binaries, nor for columns inside arrays and maps (the footer counts null
  *elements* there, not null arrays): no reader expects bounds for them.

No data is read for statistics: a file whose bounds are not all exact just loses data
skipping. To keep it, write ``TIMESTAMP_MICROS`` from Spark
(``spark.sql.parquet.outputTimestampType``), or list the columns worth skipping on in
``delta.dataSkippingStatsColumns``.

Which columns get statistics follows ``delta.dataSkippingStatsColumns`` or else the first
``delta.dataSkippingNumIndexedCols`` (default 32, ``-1`` for all) leaf columns of the
table's data schema, as in Delta.

The same stats, parsed from the JSON of many files at once into Spark's ``stats_parsed``
struct (for checkpoints that write ``delta.checkpoint.writeStatsAsStruct``), are at the end.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from airflow_delta_provider.core.errors import InvalidDataFileError, SchemaError
from airflow_delta_provider.core.redaction import get_logger

if TYPE_CHECKING:
    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)

NUM_INDEXED_COLS = "delta.dataSkippingNumIndexedCols"
STATS_COLUMNS = "delta.dataSkippingStatsColumns"
DEFAULT_NUM_INDEXED_COLS = 32
#: Delta's ``spark.databricks.delta.stats.truncateStringLength``.
STRING_PREFIX_LENGTH = 32

_ASCII_MAX = "\x7f"
_UTF8_MAX = "\U0010ffff"


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


# --- string truncation (Delta's StatisticsCollection) ------------------------------------


def truncate_min_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str:
    """A lower bound of ``value`` at most ``prefix_length`` characters long."""
    return value if len(value) <= prefix_length else value[:prefix_length]


def truncate_max_string(value: str, prefix_length: int = STRING_PREFIX_LENGTH) -> str | None:
    """An upper bound of ``value`` at most about ``prefix_length`` characters long, or None.

    Like Delta: keep the prefix and append a tie-breaker larger than the character cut off
    (``U+007F`` when that suffices, else ``U+10FFFF``), extending the prefix over characters
    that are already ``U+10FFFF``, up to twice the prefix length.
    """
    if len(value) <= prefix_length:
        return value
    length = prefix_length
    while length <= 2 * prefix_length:
        if length >= len(value):
            return value
        if value[length] == _UTF8_MAX:
            length += 1
        elif value[length] < _ASCII_MAX:
            return value[:length] + _ASCII_MAX
        else:
            return value[:length] + _UTF8_MAX
    return None


# --- footers -> stats -------------------------------------------------------------------


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
    try:
        if storage.is_local:
            metadata = pq.read_metadata(path)
        else:
            options = {"size": size} if size is not None else {}
            with storage.fs.open(path, "rb", **options) as f:
                metadata = pq.read_metadata(f)
    except (OSError, pa.ArrowException, ValueError) as err:
        raise InvalidDataFileError(
            f"{storage.to_uri(path)} is not a readable Parquet file ({err}). Only Parquet data files "
            f"can be committed to a Delta table; remove the file or exclude it."
        ) from None
    return footer_info(metadata, stats_columns)


def footer_info(metadata: pq.FileMetaData, stats_columns: list[tuple[str, ...]]) -> FooterInfo:
    """:func:`read_footer` for a footer already read."""
    arrow_schema = metadata.schema.to_arrow_schema()
    columns = _footer_columns(metadata, arrow_schema, float_bounds=_nan_in_bounds(metadata.created_by))
    num_records = metadata.num_rows
    schema = _delta_view(arrow_schema, columns)

    min_values: dict[str, Any] = {}
    max_values: dict[str, Any] = {}
    null_count: dict[str, Any] = {}
    exact = True  # every column with values that could have bounds has exact ones
    by_key = {tuple(p.lower() for p in path): column for path, column in columns.items()}
    for path in stats_columns:
        column = by_key.get(tuple(p.lower() for p in path))
        if column is None:
            if not _present(arrow_schema, path):
                # Delta: a column missing from the file is null in every row of it.
                _put(null_count, path, num_records)
            continue
        if column.null_count is not None:
            _put(null_count, path, column.null_count)
        if column.min_value is not None:
            _put(min_values, path, column.min_value)
            _put(max_values, path, column.max_value)
        elif column.null_count != num_records and _boundable(column.arrow_type):
            exact = False  # values without exact bounds (or an unknown null count)
    stats: dict[str, Any] = {"numRecords": num_records}
    if min_values and exact:
        stats["minValues"] = min_values
        stats["maxValues"] = max_values
    if null_count:
        stats["nullCount"] = null_count
    return FooterInfo(num_records=num_records, schema=schema, stats=stats_json(stats))


def _boundable(arrow_type: pa.DataType) -> bool:
    """Whether readers may expect bounds for a column of this type (all but binaries)."""
    types = pa.types
    return not (
        types.is_binary(arrow_type)
        or types.is_large_binary(arrow_type)
        or types.is_fixed_size_binary(arrow_type)
    )


def _nan_in_bounds(created_by: str | None) -> bool:
    """Whether the writer puts NaN into float min/max (so finite bounds mean "no NaN").

    parquet-mr / parquet-java (Spark's writer) orders floats with Java's ``Float.compare``,
    NaN above every number, as Spark does; Arrow-based writers leave NaN out uncounted.
    """
    writer = (created_by or "").lower()
    return writer.startswith(("parquet-mr", "parquet-java"))


@dataclass
class _ColumnStats:
    """The file-level statistics of one primitive column (not inside a list or map)."""

    arrow_type: pa.DataType
    int96: bool
    null_count: int | None = 0
    min_value: Any = None
    max_value: Any = None
    has_bounds: bool = True


def _footer_columns(
    metadata: pq.FileMetaData, arrow_schema: pa.Schema, *, float_bounds: bool = False
) -> dict[tuple[str, ...], _ColumnStats]:
    """Aggregate row-group statistics per primitive column path (outside lists and maps).

    :param float_bounds: the writer puts NaN into float min/max (see :func:`_nan_in_bounds`).
    """
    leaves = list(_parquet_leaves(arrow_schema))
    columns: dict[tuple[str, ...], _ColumnStats] = {}
    for index, (path, arrow_type) in enumerate(leaves):
        if path is None:
            continue
        int96 = metadata.schema.column(index).physical_type == "INT96"
        columns[path] = _ColumnStats(arrow_type=arrow_type, int96=int96)
    if len(leaves) != metadata.num_columns:
        # A layout this reader does not map: claim nothing rather than misattribute stats.
        return {
            path: _ColumnStats(c.arrow_type, c.int96, None, has_bounds=False) for path, c in columns.items()
        }
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for index, (path, _) in enumerate(leaves):
            if path is None:
                continue
            column = columns[path]
            statistics = row_group.column(index).statistics
            if statistics is None or not statistics.has_null_count:
                column.null_count = None
                column.has_bounds = False
                continue
            if column.null_count is not None:
                column.null_count += statistics.null_count
            if statistics.null_count == row_group.num_rows:
                continue  # only nulls: no bounds needed from this group
            if not statistics.has_min_max or column.int96 or not column.has_bounds:
                column.has_bounds = False
                continue
            try:
                low, high = statistics.min, statistics.max
                column.min_value = low if column.min_value is None else min(column.min_value, low)
                column.max_value = high if column.max_value is None else max(column.max_value, high)
            except (ValueError, OverflowError, TypeError, pa.ArrowException):
                column.has_bounds = False  # values Python cannot hold (a date in year 0): no bounds
    for column in columns.values():
        if pa.types.is_floating(column.arrow_type) and not float_bounds:
            column.has_bounds = False  # NaN may hide behind them
        try:
            bounds = _delta_bounds(column) if column.has_bounds else None
        except (ValueError, OverflowError, ArithmeticError):
            bounds = None
        column.min_value, column.max_value = bounds if bounds is not None else (None, None)
    return columns


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


def _delta_bounds(column: _ColumnStats) -> tuple[Any, Any] | None:
    """Footer min/max as Delta stats values, or None when Delta keeps no bounds for the type."""
    low, high, arrow_type = column.min_value, column.max_value, column.arrow_type
    if low is None or high is None:
        return None
    types = pa.types
    if types.is_string(arrow_type) or types.is_large_string(arrow_type):
        high = truncate_max_string(high)
        return (truncate_min_string(low), high) if high is not None else None
    if types.is_integer(arrow_type):
        return int(low), int(high)
    if types.is_boolean(arrow_type):
        return bool(low), bool(high)
    if types.is_floating(arrow_type):
        # Only called for writers that put NaN into min/max: finite bounds mean no NaN.
        low, high = float(low), float(high)
        return (low, high) if math.isfinite(low) and math.isfinite(high) else None
    if types.is_decimal(arrow_type):
        return Decimal(low), Decimal(high)
    if types.is_date(arrow_type):
        return low.isoformat(), high.isoformat()
    if types.is_timestamp(arrow_type):
        return _timestamp_text(low, arrow_type), _timestamp_text(high, arrow_type, round_up=True)
    return None  # binary, time ...: no bounds


def _timestamp_text(value: dt.datetime | int, arrow_type: pa.TimestampType, *, round_up: bool = False) -> str:
    """Delta's JSON form of a timestamp bound: milliseconds, ``Z`` for UTC-adjusted values.

    :param round_up: for a maximum: round sub-millisecond values up, so it stays an upper bound.
    """
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        micros = (value - _EPOCH) // dt.timedelta(microseconds=1)
    else:  # nanosecond values come back as ints
        nanos = int(value)
        micros = -(-nanos // 1000) if round_up else nanos // 1000
    millis = -(-micros // 1000) if round_up else micros // 1000
    value = _EPOCH + dt.timedelta(milliseconds=millis)
    text = value.isoformat(timespec="milliseconds")  # four-digit years, unlike strftime's %Y
    return text + "Z" if arrow_type.tz is not None else text


_EPOCH = dt.datetime(1970, 1, 1)


def _delta_view(arrow_schema: pa.Schema, columns: Mapping[tuple[str, ...], _ColumnStats]) -> pa.Schema:
    """The file schema as Delta means it: INT96 is a UTC timestamp; no nulls means NOT NULL."""

    def convert(field: pa.Field, path: tuple[str, ...]) -> pa.Field:
        if pa.types.is_struct(field.type):
            children = [
                convert(field.type.field(i), (*path, field.type.field(i).name))
                for i in range(field.type.num_fields)
            ]
            return field.with_type(pa.struct(children))
        column = columns.get(path)
        if column is None:
            return field
        if column.int96:
            field = field.with_type(pa.timestamp("us", tz="UTC"))
        if field.nullable and column.null_count == 0:
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


def _put(target: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for name in path[:-1]:
        target = target.setdefault(name, {})
    target[path[-1]] = value


def stats_json(stats: Mapping[str, Any]) -> str:
    """Compact JSON with decimals written as exact numbers (``json`` would need floats)."""
    if isinstance(stats, Mapping):
        return (
            "{"
            + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{stats_json(v)}" for k, v in stats.items())
            + "}"
        )
    if isinstance(stats, Decimal):
        return format(stats, "f")
    return json.dumps(stats, ensure_ascii=False)


def read_footers(
    storage: LogStore,
    paths: list[str],
    *,
    stats_columns: list[tuple[str, ...]],
    sizes: list[int | None] | None = None,
    max_workers: int | None = None,
) -> list[FooterInfo]:
    """:func:`read_footer` for many files, in parallel threads (I/O bound on object stores).

    :param max_workers: threads; default 2 for local files (the work after the read holds the
        interpreter lock), 32 for remote storage (latency bound).
    """
    if not paths:
        return []
    workers = max_workers or (2 if storage.is_local else 32)
    sizes = sizes or [None] * len(paths)
    if len(paths) == 1 or workers <= 1:
        return [
            read_footer(storage, p, stats_columns=stats_columns, size=s)
            for p, s in zip(paths, sizes, strict=True)
        ]
    with ThreadPoolExecutor(max_workers=min(workers, len(paths)), thread_name_prefix="delta-footer") as pool:
        futures = [
            pool.submit(read_footer, storage, p, stats_columns=stats_columns, size=s)
            for p, s in zip(paths, sizes, strict=True)
        ]
        done = []
        for index, future in enumerate(futures, 1):
            done.append(future.result())
            if index % 1000 == 0:
                log.info("Read %d of %d Parquet footers.", index, len(paths))
        return done


# --- stats_parsed: the JSON stats of many files as one Arrow struct column (checkpoints) ---------


def _min_max_type(arrow_type: pa.DataType) -> pa.DataType | None:
    """The min/max stats type of a column, None when Delta collects no min/max for it."""
    types = pa.types
    if types.is_struct(arrow_type):
        fields = []
        for child in arrow_type:
            child_type = _min_max_type(child.type)
            if child_type is not None:
                fields.append(pa.field(child.name, child_type))
        # Parquet cannot store an empty group.
        return pa.struct(fields) if fields else None
    if (
        types.is_integer(arrow_type)
        or types.is_floating(arrow_type)
        or types.is_decimal(arrow_type)
        or types.is_string(arrow_type)
        or types.is_large_string(arrow_type)
        or types.is_date(arrow_type)
        or types.is_timestamp(arrow_type)
    ):
        return arrow_type
    return None  # booleans, binaries, lists and maps: Spark keeps no min/max


def _null_count_type(arrow_type: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(arrow_type) and arrow_type.num_fields:
        return pa.struct([pa.field(c.name, _null_count_type(c.type)) for c in arrow_type])
    return pa.int64()


def stats_parsed_type(data_fields: list[pa.Field], *, tight_bounds: bool) -> pa.StructType:
    """``stats_parsed``: numRecords, minValues, maxValues, nullCount (, tightBounds), Spark's layout."""
    fields = [pa.field("numRecords", pa.int64())]
    min_max = [pa.field(f.name, t) for f in data_fields if (t := _min_max_type(f.type)) is not None]
    if min_max:
        fields += [pa.field("minValues", pa.struct(min_max)), pa.field("maxValues", pa.struct(min_max))]
    if data_fields:
        fields.append(
            pa.field(
                "nullCount", pa.struct([pa.field(f.name, _null_count_type(f.type)) for f in data_fields])
            )
        )
    if tight_bounds:
        fields.append(pa.field("tightBounds", pa.bool_()))
    return pa.struct(fields)


def _json_read_type(arrow_type: pa.DataType) -> pa.DataType:
    """The type pyarrow's JSON reader can fill for ``arrow_type`` (dates come as strings)."""
    if pa.types.is_struct(arrow_type):
        return pa.struct([pa.field(c.name, _json_read_type(c.type)) for c in arrow_type])
    if pa.types.is_date(arrow_type):
        return pa.string()
    return arrow_type


def parse_stats(stats: pa.ChunkedArray, stats_type: pa.StructType) -> pa.Array:
    """``stats_parsed`` from the JSON ``stats`` column, in one pass of Arrow's JSON reader."""
    stats = stats.combine_chunks() if stats.num_chunks else pa.array([], pa.string())
    count = len(stats)
    if count == 0:
        return pa.array([], stats_type)
    # One line per file: a null becomes {} and then a null struct.
    # large_string: the joined lines of many millions of files may pass 2 GiB.
    newline = pa.scalar("\n", pa.large_string())
    empty = pa.scalar("", pa.large_string())
    lines = pc.binary_join_element_wise(pc.fill_null(stats.cast(pa.large_string()), "{}"), newline, empty)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + count + 1]
    body = pa.py_buffer(lines.buffers()[2])[int(offsets[0]) : int(offsets[-1])]
    longest = int(np.max(np.diff(offsets)))
    read_type = _json_read_type(stats_type)
    try:
        table = pa_json.read_json(
            pa.BufferReader(body),
            read_options=pa_json.ReadOptions(block_size=max(1 << 22, 2 * longest + 1024)),
            parse_options=pa_json.ParseOptions(
                explicit_schema=pa.schema(list(read_type)), unexpected_field_behavior="ignore"
            ),
        )
        if table.num_rows != count:
            raise pa.ArrowInvalid(f"{table.num_rows} rows for {count} stats")
        parsed = pa.StructArray.from_arrays(
            [table.column(f.name).combine_chunks() for f in read_type], fields=list(read_type)
        )
        parsed = parsed.cast(stats_type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as err:
        # Values Arrow's reader refuses (NaN written as a string, a stats value of the wrong
        # type after a schema change): parse per row, a bad value becomes null.
        log.debug("Parsing stats row by row (%s).", err)
        rows = []
        for text in stats.to_pylist():
            try:
                value = json.loads(text) if text is not None else None
            except ValueError:
                value = None
            rows.append(_coerce(value, stats_type) if isinstance(value, dict) else None)
        return pa.array(rows, stats_type)
    if stats.null_count:
        parsed = pa.StructArray.from_arrays(
            [parsed.field(i) for i in range(stats_type.num_fields)],
            fields=list(stats_type),
            mask=stats.is_null(),
        )
    return parsed


_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def _coerce(value: Any, arrow_type: pa.DataType) -> Any:
    """``value`` as a Python value of ``arrow_type``, or None when it does not fit."""
    if value is None:
        return None
    types = pa.types
    try:
        if types.is_struct(arrow_type):
            if not isinstance(value, dict):
                return None
            return {f.name: _coerce(value.get(f.name), f.type) for f in arrow_type}
        if types.is_floating(arrow_type):
            if isinstance(value, str):
                return _FLOAT_WORDS.get(value)
            return float(value) if not isinstance(value, bool) else None
        if types.is_boolean(arrow_type):
            return value if isinstance(value, bool) else None
        if types.is_integer(arrow_type):
            return int(value) if isinstance(value, int) and not isinstance(value, bool) else None
        if types.is_string(arrow_type) or types.is_large_string(arrow_type):
            return value if isinstance(value, str) else None
        scalar = pa.scalar(str(value), pa.string()).cast(arrow_type)
        return scalar.as_py()
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError, ValueError, OverflowError):
        return None
