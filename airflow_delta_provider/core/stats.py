"""Per-file statistics for ``add`` actions, read from Parquet footers.

Delta's data skipping reads ``add.stats``: ``numRecords`` and, per column, ``minValues``,
``maxValues`` and ``nullCount``. Spark computes them while writing; here the files already
exist, so they come from the Parquet footer (one ranged read per file), and where the footer
falls short from the values of those columns alone.

The rule is that no reader can misread them. A file's ``minValues`` / ``maxValues`` hold
exact bounds for **every** stats column that has values and a type bounds exist for, or the
file has no ``minValues`` / ``maxValues`` at all (``numRecords`` and ``nullCount`` stay: they
are exact). Leaving out only the columns without bounds is not enough: delta-rs 1.6's pyarrow
reader turns a stats column missing from ``minValues`` (or null there) into ``col >= null``,
which skips the file for every filter on that column, and reads bounds without a ``nullCount``
as "no nulls" (docs/write-api.md has the tested table). Exact bounds are:

* integers, decimals, dates, booleans: the footer's min/max, when every row group that
  holds a value has them;
* strings: truncated the way Delta does (``truncateMinStringAgg`` /
  ``truncateMaxStringAgg``, prefix 32); a maximum that cannot be truncated has none;
* timestamps: milliseconds (Delta's precision), the minimum rounded down and the maximum
  rounded **up**, so both stay bounds of microsecond values; INT96 (Spark's default), whose
  footer keeps no bounds, from its values (:mod:`.page_scan`), with the footer's null count;
* floats and doubles: from writers that put NaN into the footer's min/max (Spark's parquet-mr
  / parquet-java, whose order puts NaN above every number, as Spark's does) when both are
  finite. Other writers (Arrow, and so pyarrow, polars, delta-rs) leave NaN out without
  counting it: their float columns' values are read, and the footer's bounds kept only when
  none is NaN;
* never for binaries, nor for columns inside arrays and maps (the footer counts null
  *elements* there, not null arrays): no reader expects bounds for them.

Only those float and INT96 columns' pages are ever read, none of the other columns' data: a
file whose bounds are not all exact just loses data skipping.

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
from collections.abc import Iterator, Mapping, Sequence
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
from airflow_delta_provider.core.page_scan import chunk_range, chunk_values, skip_compact
from airflow_delta_provider.core.parquet_compat import read_footer_metadata
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

#: Bytes read from the end of each file on object stores: one request usually holds the whole
#: footer; a second, exact request follows for a footer that is larger.
TAIL_BYTES = 64 * 1024
#: The same on local disks for the first window, where a second read costs microseconds, not a
#: round trip: each copied kilobyte counts (1,000 tails of 16 KiB: 10-29 ms, of 4 KiB: 9-10 ms).
#: Later windows read the largest footer seen so far, rounded up to whole :data:`LOCAL_TAIL_STEP`
#: (a write's files have footers of about one size).
LOCAL_TAIL_BYTES = 4 * 1024
LOCAL_TAIL_STEP = 4 * 1024
#: Files whose footers are read in one go (on object stores while the window before is parsed and
#: turned into stats): at most ``2 * FOOTER_WINDOW * TAIL_BYTES`` bytes of tails (16 MiB) are held.
FOOTER_WINDOW = 128
_MAGIC = b"PAR1"


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
    disks :data:`LOCAL_TAIL_BYTES`, then as much as the largest footer read so far; a second,
    exact read when its footer is larger),
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
        footers, offsets = _footer_bytes(storage, paths[low:high], known[low:high], workers, tail)
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
            _parse_footer(storage, path, footer)
            for path, footer in zip(paths[low:high], footers, strict=True)
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
            values = _leaf_values(storage, paths[low:high], parsed, wanted, workers, tails)
        done.extend(
            plan.footer_info(metadata, float_bounds=nan, values=values[index] if values else None)
            for index, (plan, metadata, nan) in enumerate(zip(plans, parsed, nan_bounds, strict=True))
        )
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


def _footer_bytes(
    storage: LogStore, paths: list[str], sizes: list[int | None], workers: int, tail_bytes: int = TAIL_BYTES
) -> tuple[list[bytes], list[int | None]]:
    """Each file's footer with its trailer (length, ``PAR1``): the tail read, or, where the footer
    did not fit in it, an exact second read of the footer; and where those bytes start in the
    file (None for a footer read again: its bytes are not the file's)."""
    known = [
        size if size is not None else _size(storage, path) for path, size in zip(paths, sizes, strict=True)
    ]
    starts = [max(0, size - tail_bytes) for size in known]
    tails = storage.read_ranges(
        paths, starts, [size - start for size, start in zip(known, starts, strict=True)], max_workers=workers
    )
    footers: list[bytes] = []
    offsets: list[int | None] = list(starts)
    again: list[tuple[int, int]] = []  # (index, footer length) of footers larger than the tail
    for index, (path, size, tail) in enumerate(zip(paths, known, tails, strict=True)):
        if isinstance(tail, Exception):
            raise _unreadable(storage, path, tail)
        if len(tail) < 8 or tail[-4:] != _MAGIC:
            raise _unreadable(storage, path, "it does not end with the Parquet magic bytes PAR1")
        length = int.from_bytes(tail[-8:-4], "little")
        if length + 12 > size:
            raise _unreadable(
                storage,
                path,
                f"its footer length ({length} bytes) exceeds the file ({size} bytes): truncated?",
            )
        if length + 8 <= len(tail):
            footers.append(tail)  # the reader finds the footer at the end
        else:
            footers.append(b"")
            again.append((index, length))
    if again:
        rest = storage.read_ranges(
            [paths[i] for i, _ in again],
            [known[i] - 8 - length for i, length in again],
            [length for _, length in again],
            max_workers=workers,
        )
        for (index, length), footer in zip(again, rest, strict=True):
            if isinstance(footer, Exception) or len(footer) != length:
                reason = footer if isinstance(footer, Exception) else "the file changed while it was read"
                raise _unreadable(storage, paths[index], reason)
            footers[index] = _MAGIC + footer + length.to_bytes(4, "little") + _MAGIC
            offsets[index] = None
    return footers, offsets


def _size(storage: LogStore, path: str) -> int:
    info = storage.info(path)
    if info is None:
        raise _unreadable(storage, path, "it does not exist")
    return info.size


def _parse_footer(storage: LogStore, path: str, footer: bytes) -> pq.FileMetaData:
    """The FileMetaData of a footer that ends with its trailer (the reader checks both)."""
    try:
        return read_footer_metadata(footer)
    except (OSError, pa.ArrowException, ValueError) as err:
        raise _unreadable(storage, path, err) from None


def _leaf_values(
    storage: LogStore,
    paths: list[str],
    footers: list[pq.FileMetaData],
    wanted: list[list[tuple[int, _Leaf]]],
    workers: int,
    tails: list[tuple[int | None, bytes]],
) -> list[dict[int, list[np.ndarray] | None]]:
    """Per file, the values of the wanted leaves (by leaf position) as arrays, one per page that
    holds any, from their column chunks: taken from the file's tail already read (``tails``:
    where it starts in the file, and its bytes) when it holds them, else one ranged read per
    chunk, all of a window's at once; None where a page cannot be read
    (:func:`~.page_scan.chunk_values`). Fixed-width values only: floats and INT96."""
    requests: list[tuple[int, int, _Leaf, str]] = []  # (file, position, leaf, codec)
    starts: list[int] = []
    lengths: list[int] = []
    chunks: list[bytes | Exception | None] = []
    for file, (metadata, leaves) in enumerate(zip(footers, wanted, strict=True)):
        offset, tail = tails[file]
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for position, leaf in leaves:
                column = row_group.column(leaf.index)
                start, length = chunk_range(column)
                requests.append((file, position, leaf, column.compression))
                starts.append(start)
                lengths.append(length)
                if offset is not None and offset <= start and start + length <= offset + len(tail):
                    chunks.append(tail[start - offset : start - offset + length])
                else:
                    chunks.append(None)
    found: list[dict[int, list[np.ndarray] | None]] = [{at: [] for at, _ in leaves} for leaves in wanted]
    # Read in batches of at most VALUE_BATCH_BYTES, each chunk reduced to what the bounds need as
    # soon as it is decoded: large files' float columns are never all held at once.
    batch: list[int] = []
    size = 0
    for index in range(len(requests) + 1):
        if index == len(requests) or (batch and size + lengths[index] > VALUE_BATCH_BYTES):
            _read_missing(storage, paths, requests, starts, lengths, chunks, batch, workers)
            for at in batch:
                file, position, leaf, codec = requests[at]
                chunk, chunks[at] = chunks[at], None
                if not isinstance(chunk, bytes) or len(chunk) != lengths[at]:
                    reason = chunk if isinstance(chunk, Exception) else "it is shorter than its footer says"
                    raise _unreadable(storage, paths[file], reason)
                parts = found[file][position]
                if parts is not None:
                    values = chunk_values(chunk, leaf.physical or "", codec, *leaf.levels)
                    if values is None:
                        found[file][position] = None
                    else:
                        parts.extend(_reduced(array, leaf.int96) for array in values)
            batch, size = [], 0
        if index < len(requests):
            batch.append(index)
            size += lengths[index]
    return found


#: The most bytes of column chunks :func:`_leaf_values` holds at a time.
VALUE_BATCH_BYTES = 64 * 1024 * 1024


def _read_missing(
    storage: LogStore,
    paths: list[str],
    requests: list[tuple[int, int, _Leaf, str]],
    starts: list[int],
    lengths: list[int],
    chunks: list[bytes | Exception | None],
    batch: list[int],
    workers: int,
) -> None:
    """Read the chunks of ``batch`` that the tails did not hold, into ``chunks``."""
    missing = [index for index in batch if chunks[index] is None]
    if not missing:
        return
    read = storage.read_ranges(
        [paths[requests[i][0]] for i in missing],
        [starts[i] for i in missing],
        [lengths[i] for i in missing],
        max_workers=workers,
    )
    for index, got in zip(missing, read, strict=True):
        chunks[index] = got


def _reduced(values: np.ndarray, int96: bool) -> np.ndarray:
    """What the bounds need of a page's values: a NaN if it holds one (floats); its least and
    greatest value (INT96: by day, then nanosecond)."""
    if not int96:
        nan: np.ndarray = values[np.isnan(values)][:1]
        return nan
    days, nanos = values["days"], values["nanos"]
    first = np.flatnonzero(days == days.min())
    last = np.flatnonzero(days == days.max())
    extremes: np.ndarray = values[[first[np.argmin(nanos[first])], last[np.argmax(nanos[last])]]]
    return extremes


def _unreadable(storage: LogStore, path: str, reason: object) -> InvalidDataFileError:
    return InvalidDataFileError(
        f"{storage.to_uri(path)} is not a readable Parquet file ({reason}). Only Parquet data files "
        f"can be committed to a Delta table; remove the file or exclude it."
    )


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


class _StatsBuilder:
    """``add.stats`` of footers for one list of stats columns, a :class:`_SchemaPlan` per schema."""

    def __init__(self, stats_columns: list[tuple[str, ...]]) -> None:
        self.stats_columns = stats_columns
        self._plans: list[_SchemaPlan] = []

    def info(self, metadata: pq.FileMetaData) -> FooterInfo:
        """A footer's stats from the footer alone (no values read)."""
        return self.plan(metadata, None).footer_info(
            metadata, float_bounds=_nan_in_bounds(metadata.created_by)
        )

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
            end = _schema_end(footer, start)
            schema_bytes = footer[start:end] if end is not None else None
        plan = _SchemaPlan(metadata, self.stats_columns, schema_bytes)
        self._plans = [plan, *self._plans[:7]]
        return plan


# Thrift's compact protocol (the Parquet footer's encoding): the field types read here.
_T_I32, _T_LIST = 5, 9


def _schema_end(footer: bytes, start: int) -> int | None:
    """Where the footer's ``FileMetaData`` ends its fields 1 (``version``) and 2 (``schema``), when
    it starts with them (every writer orders fields by id), else None. Equal bytes up to there
    are an equal version and schema."""
    try:
        if footer[start] != (1 << 4 | _T_I32):
            return None
        position = skip_compact(footer, start + 1, _T_I32, 0)
        if footer[position] != (1 << 4 | _T_LIST):
            return None
        end = skip_compact(footer, position + 1, _T_LIST, 0)
        return end if end <= len(footer) else None
    except (IndexError, ValueError):
        return None


#: How a column's footer bounds become Delta's (see _SchemaPlan): from the raw physical values,
#: from pyarrow's converted ones (``generic``), or none at all.
_NONE, _GENERIC, _INT, _BOOL, _FLOAT, _STRING, _DECIMAL_INT, _DECIMAL_BYTES, _DATE, _TIMESTAMP = range(10)
_MILLIS_DIVISOR = {"milliseconds": 1, "microseconds": 1000, "nanoseconds": 1_000_000}
_EPOCH_DATE = dt.date(1970, 1, 1)


@dataclass
class _Leaf:
    """One primitive column outside lists and maps: where it is and how its bounds are read."""

    index: int
    path: tuple[str, ...]
    arrow_type: pa.DataType
    int96: bool
    kind: int
    floating: bool
    boundable: bool
    divisor: int = 1  # timestamps: raw units per millisecond
    scale: int = 0  # decimals
    utc: bool = False  # timestamps: written with a Z
    physical: str | None = None
    levels: tuple[int, int] = (0, 0)  # maximum definition and repetition levels


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
        self.leaves: list[_Leaf] = []
        for index, (path, arrow_type) in enumerate(leaves):
            if path is None:
                continue
            column = metadata.schema.column(index) if index < metadata.num_columns else None
            self.leaves.append(_leaf(index, path, arrow_type, column))
        by_key = {tuple(p.lower() for p in leaf.path): position for position, leaf in enumerate(self.leaves)}
        #: Per stats column: its table path and JSON key, its leaf (position in self.leaves) or
        #: None, and for a missing leaf whether the file has the column at all (nested, not a leaf).
        self.targets: list[tuple[_Key, int | None, bool]] = []
        for path in stats_columns:
            position = by_key.get(tuple(p.lower() for p in path))
            key = (path, f"{_text_json(path[0])}:" if len(path) == 1 else None)
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
                and leaf.kind != _NONE
                and not leaf.int96
                and (float_bounds or not leaf.floating)
                for position, leaf in enumerate(self.leaves)
            ]
            for float_bounds in (False, True)
        }
        #: Per "the writer puts NaN into float bounds": the stats leaves whose bounds come from
        #: their values (:func:`_leaf_values`): other writers' floats, INT96 timestamps.
        self._value_leaves = {
            float_bounds: [
                (position, leaf)
                for position, leaf in enumerate(self.leaves)
                if self.mapped
                and position in targeted
                and (leaf.int96 or (leaf.kind == _FLOAT and not float_bounds))
            ]
            for float_bounds in (False, True)
        }
        #: Every stats column top-level: its JSON objects are flat.
        self._flat = all(key[1] is not None for key, _, _ in self.targets)

    def value_leaves(self, metadata: pq.FileMetaData, *, float_bounds: bool) -> list[tuple[int, _Leaf]]:
        """(position, leaf) of the stats leaves whose bounds only their values give, in this file."""
        leaves = self._value_leaves[float_bounds]
        if leaves and metadata.metadata and _LEGACY_INT96 in metadata.metadata:
            # Spark rebased these to the Julian calendar: their values are not the instants.
            leaves = [(position, leaf) for position, leaf in leaves if not leaf.int96]
        return leaves

    def _value_bounds(
        self, values: Mapping[int, list[np.ndarray] | None]
    ) -> tuple[set[int], dict[int, tuple[str, str] | None]]:
        """From the values read (:func:`_leaf_values`): the float leaves whose footer bounds hold
        (no NaN among the values), and the INT96 leaves' bounds as JSON (None: none)."""
        trusted: set[int] = set()
        int96: dict[int, tuple[str, str] | None] = {}
        for position, arrays in values.items():
            if arrays is None:
                continue
            if self.leaves[position].int96:
                int96[position] = _int96_bounds(np.concatenate(arrays)) if arrays else None
            elif not any(np.isnan(array).any() for array in arrays):
                trusted.add(position)
        return trusted, int96

    def footer_info(
        self,
        metadata: pq.FileMetaData,
        *,
        float_bounds: bool,
        values: Mapping[int, list[np.ndarray] | None] | None = None,
    ) -> FooterInfo:
        """:param values: per leaf position of :meth:`value_leaves`, the values read (None: unread)."""
        leaves = self.leaves
        count = len(leaves)
        num_records = metadata.num_rows
        null_counts: list[int | None] = [0 if self.mapped else None] * count
        bounded = self._bounded[float_bounds].copy()
        trusted, int96 = self._value_bounds(values) if values else (set(), {})
        for position in trusted:
            bounded[position] = True
        lows: list[Any] = [None] * count
        highs: list[Any] = [None] * count
        # The hot loop: one statistics object per column chunk, each property read once
        # (``null_count`` / ``min_raw`` are None when the footer has none); min/max only for
        # stats columns, null counts for every leaf (the Delta view's nullability needs them).
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
                    if kind == _GENERIC:
                        low, high = statistics.min, statistics.max
                    else:
                        low, high = statistics.min_raw, statistics.max_raw
                    if low is None or high is None:
                        bounded[position] = False
                        continue
                    if kind == _DECIMAL_BYTES:
                        low, high = (
                            int.from_bytes(low, "big", signed=True),
                            int.from_bytes(high, "big", signed=True),
                        )
                    current = lows[position]
                    lows[position] = low if current is None else min(current, low)
                    current = highs[position]
                    highs[position] = high if current is None else max(current, high)
                except (ValueError, OverflowError, TypeError, pa.ArrowException):
                    bounded[position] = False  # values Python cannot hold (a date in year 0): no bounds
        # Bounds are all-or-none per file: a column with values and no usable bounds settles it
        # before any value is converted.
        exact = True
        for position, boundable in self._target_leaves:
            if not (
                (bounded[position] and lows[position] is not None)
                or (int96.get(position) is not None and null_counts[position] is not None)
                or null_counts[position] == num_records
                or not boundable
            ):
                exact = False
                break
        min_values: list[tuple[_Key, str]] = []
        max_values: list[tuple[_Key, str]] = []
        null_count: list[tuple[_Key, str]] = []
        for key, at, present in self.targets:
            if at is None:
                if not present:
                    # Delta: a column missing from the file is null in every row of it.
                    null_count.append((key, str(num_records)))
                continue
            column_nulls = null_counts[at]
            if column_nulls is not None:
                null_count.append((key, str(column_nulls)))
            if not exact:
                continue
            # Bounds only with a null count: delta-rs 1.6 reads bounds without one as "no nulls".
            bound = int96.get(at) if column_nulls is not None else None
            low, high = lows[at], highs[at]
            if bound is None and bounded[at] and low is not None and high is not None:
                try:
                    bound = _bound_json(leaves[at], low, high)
                except (ValueError, OverflowError, ArithmeticError, TypeError):
                    bound = None
            if bound is not None:
                min_values.append((key, bound[0]))
                max_values.append((key, bound[1]))
            elif column_nulls != num_records and leaves[at].boundable:
                exact = False  # values without exact bounds (or an unknown null count)
        object_json = _flat_object_json if self._flat else _object_json
        stats = f'{{"numRecords":{num_records}'
        if min_values and exact:
            stats += f',"minValues":{object_json(min_values)},"maxValues":{object_json(max_values)}'
        if null_count:
            stats += f',"nullCount":{object_json(null_count)}'
        view_key = tuple([nulls == 0 for nulls in null_counts])
        schema = self._views.get(view_key)
        if schema is None:
            schema = self._views[view_key] = _delta_view(
                self.arrow_schema,
                {leaf.path for leaf in leaves if leaf.int96},
                {leaf.path for leaf, non_null in zip(leaves, view_key, strict=True) if non_null},
            )
        return FooterInfo(num_records, schema, stats + "}")


def _leaf(index: int, path: tuple[str, ...], arrow_type: pa.DataType, column: Any) -> _Leaf:
    """How the bounds of one column are read: raw physical values wherever their meaning is plain."""
    types = pa.types
    physical = column.physical_type if column is not None else None
    leaf = _Leaf(
        index,
        path,
        arrow_type,
        int96=physical == "INT96",
        kind=_NONE,
        floating=types.is_floating(arrow_type),
        boundable=_boundable(arrow_type),
        physical=physical,
        levels=(column.max_definition_level, column.max_repetition_level) if column is not None else (0, 0),
    )
    if types.is_string(arrow_type) or types.is_large_string(arrow_type):
        leaf.kind = _STRING if physical == "BYTE_ARRAY" else _GENERIC
    elif types.is_integer(arrow_type):
        signed = types.is_signed_integer(arrow_type) and physical in ("INT32", "INT64")
        leaf.kind = _INT if signed else _GENERIC
    elif types.is_boolean(arrow_type):
        leaf.kind = _BOOL if physical == "BOOLEAN" else _GENERIC
    elif types.is_floating(arrow_type):
        leaf.kind = _FLOAT if physical in ("FLOAT", "DOUBLE") else _GENERIC
    elif types.is_decimal(arrow_type):
        leaf.scale = arrow_type.scale
        if physical in ("INT32", "INT64"):
            leaf.kind = _DECIMAL_INT
        elif physical in ("FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
            leaf.kind = _DECIMAL_BYTES
        else:
            leaf.kind = _GENERIC
    elif types.is_date(arrow_type):
        leaf.kind = _DATE if physical == "INT32" else _GENERIC
    elif types.is_timestamp(arrow_type):
        leaf.kind = _GENERIC
        leaf.utc = arrow_type.tz is not None
        if physical == "INT64":
            logical = json.loads(column.logical_type.to_json())
            divisor = (
                _MILLIS_DIVISOR.get(logical.get("timeUnit")) if logical.get("Type") == "Timestamp" else None
            )
            if divisor is not None:
                leaf.kind, leaf.divisor = _TIMESTAMP, divisor
    return leaf


def _bound_json(leaf: _Leaf, low: Any, high: Any) -> tuple[str, str] | None:
    """A column's aggregated footer min/max as Delta's JSON values, or None without exact bounds."""
    kind = leaf.kind
    if kind == _INT:
        return str(int(low)), str(int(high))
    if kind == _STRING:
        # Raw bytes (UTF-8 order is code point order); a pyarrow handing back text is taken as it is.
        low_text = low.decode() if isinstance(low, bytes) else low
        high_text = high.decode() if isinstance(high, bytes) else high
        truncated = truncate_max_string(high_text)
        if truncated is None:
            return None
        return _text_json(truncate_min_string(low_text)), _text_json(truncated)
    if kind == _TIMESTAMP:
        divisor = leaf.divisor
        return (
            _millis_json(low // divisor, leaf.utc),
            _millis_json(-(-high // divisor), leaf.utc),  # rounded up: stays an upper bound
        )
    if kind == _DATE:
        low_date = _EPOCH_DATE + dt.timedelta(days=low)
        high_date = _EPOCH_DATE + dt.timedelta(days=high)
        return f'"{low_date.isoformat()}"', f'"{high_date.isoformat()}"'
    if kind in (_DECIMAL_INT, _DECIMAL_BYTES):
        return _decimal_json(low, leaf.scale), _decimal_json(high, leaf.scale)
    if kind == _BOOL:
        return ("true" if low else "false"), ("true" if high else "false")
    if kind == _FLOAT:
        # Only for writers that put NaN into min/max: finite bounds mean no NaN.
        low, high = float(low), float(high)
        return (json.dumps(low), json.dumps(high)) if math.isfinite(low) and math.isfinite(high) else None
    column = _ColumnStats(leaf.arrow_type, leaf.int96, None, low, high)
    bounds = _delta_bounds(column)
    return (stats_json(bounds[0]), stats_json(bounds[1])) if bounds is not None else None


#: ``json.dumps(text, ensure_ascii=False)`` without building an encoder per call.
_text_json = json.JSONEncoder(ensure_ascii=False).encode


def _millis_json(millis: int, utc: bool) -> str:
    """Delta's JSON form of a timestamp bound: milliseconds, ``Z`` for UTC-adjusted values."""
    text = (_EPOCH + dt.timedelta(milliseconds=millis)).isoformat(timespec="milliseconds")
    return f'"{text}Z"' if utc else f'"{text}"'


#: Spark's marker of INT96 values rebased to the Julian calendar (``LEGACY`` rebase mode).
_LEGACY_INT96 = b"org.apache.spark.legacyINT96"
_JULIAN_EPOCH_DAY = 2_440_588  # the Julian day number of 1970-01-01
_DAY_MS = 86_400_000
_DAY_NS = 86_400_000_000_000


def _int96_bounds(values: np.ndarray) -> tuple[str, str] | None:
    """INT96 timestamps' bounds as Delta's JSON (milliseconds, the maximum rounded up), or None.

    An INT96 value is the nanosecond of the day and the Julian day number; Spark writes UTC.
    """
    if not len(values):
        return None
    days, nanos = values["days"], values["nanos"]
    if nanos.min() < 0 or nanos.max() >= _DAY_NS:
        return None
    low_day, high_day = int(days.min()), int(days.max())
    low_nanos, high_nanos = int(nanos[days == low_day].min()), int(nanos[days == high_day].max())
    low = (low_day - _JULIAN_EPOCH_DAY) * _DAY_MS + low_nanos // 1_000_000
    high = (high_day - _JULIAN_EPOCH_DAY) * _DAY_MS - (-high_nanos // 1_000_000)
    try:
        return _millis_json(low, True), _millis_json(high, True)
    except OverflowError:
        return None  # outside years 1-9999


def _decimal_json(unscaled: int, scale: int) -> str:
    """An exact decimal number from its unscaled value (no float, no context rounding)."""
    return format(Decimal(f"{unscaled}E-{scale}") if scale else Decimal(unscaled), "f")


#: A stats column's path and, for a top-level column, its JSON key with the colon.
_Key = tuple[tuple[str, ...], str | None]


def _flat_object_json(entries: list[tuple[_Key, str]]) -> str:
    """:func:`_object_json` of top-level columns only."""
    return "{" + ",".join([f"{key[1]}{value}" for key, value in entries]) + "}"


def _object_json(entries: list[tuple[_Key, str]]) -> str:
    """A JSON object of values already encoded, nested by their paths (first appearance order)."""
    if all(key[1] is not None for key, _ in entries):
        return _flat_object_json(entries)
    tree: dict[str, Any] = {}
    for (path, _), value in entries:
        _put(tree, path, _Encoded(value))
    return stats_json(tree)


class _Encoded(str):
    """A value already in JSON form (written as it is by :func:`stats_json`)."""

    __slots__ = ()


@dataclass
class _ColumnStats:
    """The aggregated footer statistics of one column (the converted-value route)."""

    arrow_type: pa.DataType
    int96: bool
    null_count: int | None = 0
    min_value: Any = None
    max_value: Any = None


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
    if isinstance(stats, _Encoded):
        return str.__str__(stats)
    if isinstance(stats, Decimal):
        return format(stats, "f")
    return json.dumps(stats, ensure_ascii=False)


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
