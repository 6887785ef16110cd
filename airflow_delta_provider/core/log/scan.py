"""Reading a table's data files with pyarrow: the files' rows, their deletion vectors, their constants.

Partition values come from the log, not from directory names, and so do any other per-file
constants a reader wants as columns (a change's type and version). :func:`read_files` reads many
files in one scan (concurrently, from :data:`~.memory.READ_POOL`), each file once however many
row selections it serves; the rows a deletion vector marks are selected per batch (unmarked runs
as zero-copy slices where they are few), and a selection of a few marked rows reads only the row
groups that hold them. :func:`runs` and :func:`constant_chunks` build the constant columns of files
read one after another.
:func:`file_dataset` is the lazy alternative, with the constants as partition expressions.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.errors import InvalidDataFileError
from airflow_delta_provider.core.log.deletion_vectors import read_deletion_vector
from airflow_delta_provider.core.utils.memory import READ_POOL
from airflow_delta_provider.core.utils.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    import numpy.typing as npt
    import pyarrow.dataset as ds

    from airflow_delta_provider.core.storage import LogStore

#: Files a scan of a remote store reads at once (pyarrow's default, 4, suits local disks).
REMOTE_FILES_IN_FLIGHT = 16
#: A batch whose kept rows fall in at most this many runs is sliced (no copy), else filtered.
_MAX_SLICES = 8
_USE_THREADS = True


@dataclass(frozen=True, slots=True)
class RowSelection:
    """Which rows of a file count: those ``rows`` names (``keep``), or all the others.

    :param rows: sorted, unique row indexes (a deletion vector's); those past the file's end are
        ignored, as Spark and delta-kernel-rs do.
    """

    rows: npt.NDArray[np.uint64]
    keep: bool


@dataclass(frozen=True, slots=True)
class FileRead:
    """One data file and the row selections it serves (None: every row); each selection gets
    its own table of the file's rows."""

    path: str
    selections: tuple[RowSelection | None, ...] = (None,)


@contextmanager
def data_file_errors() -> Iterator[None]:
    """A data file the log references that is not Parquet (or is damaged), as the core's error:
    pyarrow's message names the file; what to do is said here."""
    try:
        yield
    except pa.ArrowInvalid as err:
        problem = str(err).strip().rstrip(".")
        raise InvalidDataFileError(
            redact(
                f"A data file of the table cannot be read as Parquet: {problem}. The log references a "
                f"damaged or foreign file: restore it from a backup, or RESTORE the table to a version "
                f"before the commit that added it."
            )
        ) from None


def read_files(storage: LogStore, files: Sequence[FileRead], schema: pa.Schema) -> list[list[pa.Table]]:
    """The rows of each file, per selection: ``result[i][j]`` holds the rows of ``files[i]``
    that ``files[i].selections[j]`` selects, with the columns of ``schema``.

    :param files: distinct paths, as the log writes them (URL-encoded, relative or absolute).
    :param schema: the columns to read, as the files name them (a column a file lacks is null; a
        narrower type in a file is cast).
    :raises OSError: a file cannot be read (``FileNotFoundError`` or the filesystem's own error).
    :raises InvalidDataFileError: a file is not Parquet, or is damaged.
    """
    with data_file_errors():
        return _read_files(storage, files, schema)


def _read_files(storage: LogStore, files: Sequence[FileRead], schema: pa.Schema) -> list[list[pa.Table]]:
    import pyarrow.dataset as ds  # (imports pandas: only when data is read)
    import pyarrow.fs as pafs

    batches: list[list[list[pa.RecordBatch]]] = [[[] for _ in f.selections] for f in files]
    parquet = ds.ParquetFileFormat()
    filesystem = storage.arrow_fs
    fragments, owners = _fragments(storage, files, parquet, filesystem)
    if not fragments:
        return [[pa.Table.from_batches([], schema) for _ in f.selections] for f in files]
    scanner = ds.Scanner.from_dataset(
        ds.FileSystemDataset(fragments, schema, parquet, filesystem),
        columns=schema.names,
        use_threads=_USE_THREADS,
        memory_pool=READ_POOL,
        fragment_readahead=4 if isinstance(filesystem, pafs.LocalFileSystem) else REMOTE_FILES_IN_FLIGHT,
    )
    next_row: dict[tuple[str, int | None], int] = {}
    for tagged in scanner.scan_batches():  # in order: a fragment's batches come in row order
        key = _fragment_key(tagged.fragment, owners)
        index, first_row = owners[key]
        offset = next_row.get(key, first_row)
        batch = tagged.record_batch
        next_row[key] = offset + batch.num_rows
        for selection, out in zip(files[index].selections, batches[index], strict=True):
            out.extend(_select(batch, offset, selection))
    return [[pa.Table.from_batches(b, schema) for b in per_file] for per_file in batches]


def _fragments(
    storage: LogStore, files: Sequence[FileRead], parquet: ds.ParquetFileFormat, filesystem: Any
) -> tuple[list[ds.Fragment], dict[tuple[str, int | None], tuple[int, int]]]:
    """What to scan: each file whole, or the row groups its selections need, or nothing when no
    selection keeps a row; and per fragment (path, row group or None) its file and first row."""
    fragments = []
    owners: dict[tuple[str, int | None], tuple[int, int]] = {}
    for index, read in enumerate(files):
        if all(_selects_nothing(s) for s in read.selections):
            continue
        local = storage.path.decode(read.path)
        fragment = parquet.make_fragment(local, filesystem=filesystem)
        groups = _row_groups(fragment, read.selections)
        if groups is None:
            owners[(fragment.path, None)] = (index, 0)
            fragments.append(fragment)
            continue
        for group, first_row in groups:
            owners[(fragment.path, group)] = (index, first_row)
            fragments.append(fragment.subset(row_group_ids=[group]))
    return fragments, owners


def runs(values: pa.Array | pa.ChunkedArray, lengths: npt.NDArray[np.int64]) -> pa.Array:
    """``values[i]`` ``lengths[i]`` times, for each ``i``, as one array: the constant columns of
    files whose rows follow each other."""
    import pyarrow.compute as pc

    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    width = _byte_width(values.type)
    if width and values.null_count == 0 and len(values):
        # Fixed-width values without nulls: repeated in numpy, one pass, no per-value dispatch.
        dtype = f"<i{width}" if width <= 8 else f"V{width}"  # (numpy repeats void items one by one)
        data = np.frombuffer(values.buffers()[1], dtype=dtype)[values.offset :][: len(values)]
        repeated = np.repeat(data, lengths)
        return pa.Array.from_buffers(values.type, len(repeated), [None, pa.py_buffer(repeated)])
    present = lengths > 0  # a run end must pass the one before it
    run_ends = pa.array(np.cumsum(lengths[present], dtype=np.int64))
    encoded = pa.RunEndEncodedArray.from_arrays(run_ends, values.filter(pa.array(present)))
    decoded: pa.Array = pc.run_end_decode(encoded, memory_pool=READ_POOL)
    return decoded


def constant_chunks(values: pa.Array | pa.ChunkedArray, lengths: npt.NDArray[np.int64]) -> pa.ChunkedArray:
    """``values[i]`` ``lengths[i]`` times, for each ``i``, as a chunked array whose chunks are
    zero-copy slices of one array per distinct value (as long as that value's longest run): the
    constant columns of files whose rows follow each other, where few values repeat over many rows
    (a change type, a partition value), built and paged in once rather than once per row.
    :func:`runs` gives the same values as one contiguous array."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    keys = _share_keys(values)
    if 2 * len(set(keys)) > len(keys):
        # Few values repeat (a version per scan of many small files): one array, built in one pass,
        # costs less than an array per value.
        return pa.chunked_array([runs(values, lengths)])
    longest: dict[Any, int] = {}
    for key, length in zip(keys, lengths.tolist(), strict=True):
        longest[key] = max(longest.get(key, 0), length)
    shared: dict[Any, pa.Array] = {}
    chunks = []
    for index, key in enumerate(keys):
        length = int(lengths[index])
        if not length:
            continue
        if key not in shared:
            shared[key] = _repeated(values, index, longest[key])
        chunks.append(shared[key].slice(0, length))
    return pa.chunked_array(chunks, type=values.type)


def _share_keys(values: pa.Array) -> list[Any]:
    """What the values that share one array have in common: a fixed-width value's bytes (-0.0 and
    0.0 apart, NaN found again, no conversion to Python that a timestamp could overflow); another
    value itself (strings, booleans); an unhashable one's index (shared with none). None: a null."""
    width = _byte_width(values.type)
    if width:
        data = np.frombuffer(values.buffers()[1], dtype=f"V{width}")[values.offset :][: len(values)]
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        return [item.tobytes() if ok else None for item, ok in zip(data, valid, strict=True)]
    keys: list[Any] = []
    for index, item in enumerate(values.to_pylist()):
        try:
            hash(item)
        except TypeError:
            item = ("unshared", index)
        keys.append(item)
    return keys


def _repeated(values: pa.Array, index: int, length: int) -> pa.Array:
    """``values[index]`` ``length`` times."""
    return runs(values.slice(index, 1), np.array([length], dtype=np.int64))


def _byte_width(data_type: pa.DataType) -> int:
    """The bytes of one value of a fixed-width numeric or temporal type (0 for other types)."""
    t = pa.types
    if (
        t.is_integer(data_type)
        or t.is_floating(data_type)
        or t.is_temporal(data_type)
        or t.is_decimal(data_type)
    ):
        return int(data_type.bit_width) // 8
    return 0


def _selects_nothing(selection: RowSelection | None) -> bool:
    return selection is not None and selection.keep and not selection.rows.size


def _row_groups(
    fragment: ds.ParquetFileFragment, selections: Sequence[RowSelection | None]
) -> list[tuple[int, int]] | None:
    """The row groups (id, first row) holding a row some selection keeps, when every selection
    keeps only the rows it names; None to read the whole file. Reads the file's footer."""
    if not all(s is not None and s.keep for s in selections):
        return None
    fragment.ensure_complete_metadata()
    sizes = np.array([group.num_rows for group in fragment.row_groups], dtype=np.uint64)
    if sizes.size <= 1:
        return None
    starts = np.concatenate([np.zeros(1, np.uint64), np.cumsum(sizes)[:-1]])
    wanted = np.concatenate([s.rows for s in selections if s is not None])
    groups = np.unique(starts.searchsorted(wanted, side="right") - 1)  # a row past the end: the last
    return [(int(g), int(starts[g])) for g in groups]


def _fragment_key(fragment: Any, owners: Mapping[tuple[str, int | None], Any]) -> tuple[str, int | None]:
    """The key of a scanned fragment in ``owners``: its path, and its row group for a file read
    by row groups."""
    whole = (fragment.path, None)
    return whole if whole in owners else (fragment.path, fragment.row_groups[0].id)


def _select(batch: pa.RecordBatch, offset: int, selection: RowSelection | None) -> Iterator[pa.RecordBatch]:
    """The rows of ``batch`` (rows ``offset`` on of its file) that ``selection`` selects."""
    import pyarrow.compute as pc

    if selection is None:
        yield batch
        return
    size = batch.num_rows
    bounds = selection.rows.searchsorted(np.array([offset, offset + size], dtype=np.uint64))
    marked = (selection.rows[bounds[0] : bounds[1]] - np.uint64(offset)).astype(np.intp)
    if selection.keep:
        if marked.size:
            yield pc.take(batch, pa.array(marked), memory_pool=READ_POOL)
        return
    if not marked.size:
        yield batch
        return
    starts = np.concatenate([[0], marked + 1])
    ends = np.concatenate([marked, [size]])
    runs = np.flatnonzero(ends > starts)
    if runs.size <= _MAX_SLICES:
        for run in runs:
            yield batch.slice(int(starts[run]), int(ends[run] - starts[run]))
        return
    keep = np.ones(size, dtype=bool)
    keep[marked] = False
    yield pc.filter(batch, pa.array(keep), memory_pool=READ_POOL)


def file_dataset(
    storage: LogStore, paths: Sequence[str], schema: pa.Schema, constants: pa.Table | None = None
) -> ds.Dataset:
    """A dataset over data files, read with ``schema``.

    :param paths: the files as the log writes them (URL-encoded, relative to the root or absolute).
    :param schema: the data columns to read (as the files name them) and the constant columns.
    :param constants: per file (row-aligned with ``paths``), the values of the columns that come
        from the log rather than the file (partition columns, typed); a null is a null column.
    """
    import pyarrow.dataset as ds  # (imports pandas: only when data is read)

    expressions = None
    if constants is not None and constants.num_columns:
        expressions = constant_expressions(constants)
    return ds.FileSystemDataset.from_paths(
        [storage.path.decode(p) for p in paths],
        schema=schema,
        format=ds.ParquetFileFormat(),
        filesystem=storage.arrow_fs,
        partitions=expressions,
    )


def constant_expressions(constants: pa.Table) -> list[ds.Expression]:
    """One expression per row of ``constants``: every column equal to the row's value (or null)."""
    import pyarrow.dataset as ds

    fields = list(constants.schema)
    expressions = []
    for row in constants.to_pylist():
        expression = None
        for f in fields:
            value = row[f.name]
            term = (
                ds.field(f.name).is_null() if value is None else ds.field(f.name) == pa.scalar(value, f.type)
            )
            expression = term if expression is None else expression & term
        expressions.append(expression)
    return expressions


def deletion_vector_rows(
    storage: LogStore,
    dv: Mapping[str, Any],
    missing: Callable[[str], Exception] | None = None,
) -> npt.NDArray[np.uint64]:
    """The row indexes a deletion vector marks (sorted), its file read through the table's store.

    :param missing: the error to raise for a DV file that is not there (given its URI); by
        default :func:`~.deletion_vectors.read_deletion_vector` says it is missing.
    """

    def read_range(path: str, start: int, length: int) -> bytes:
        # Absolute ('p') DV paths are URIs, URL-encoded as the protocol says; resolve them.
        local = storage.path.decode(path)
        try:
            return storage.read_range(local, start, length)
        except FileNotFoundError:
            if missing is None:
                raise
            raise missing(storage.to_uri(local)) from None

    return read_deletion_vector(dv, storage.root, read_range)
