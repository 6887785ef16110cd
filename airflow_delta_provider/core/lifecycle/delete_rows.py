"""The rows of a DELETE's candidate files: which of them a predicate selects, and the files a
copy-on-write DELETE and its change data write.

Each file is read with pyarrow as the snapshot reads it (physical names under column mapping,
the table's current types, partition values from the log), in its own order, so that a row's
position is its index in the file: what a deletion vector marks. The predicate is evaluated by
:meth:`~.predicate.Predicate.mask`, the evaluation a ``replaceWhere`` gets.
"""

from __future__ import annotations

import os
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from airflow_delta_provider.core.expressions.stats import indexed_columns, read_footers
from airflow_delta_provider.core.log.scan import data_file_errors, deletion_vector_rows, file_dataset
from airflow_delta_provider.core.protocol.actions import AddCDCFile, AddFile
from airflow_delta_provider.core.protocol.column_mapping import (
    column_mapping_mode,
    physical_data,
    physical_path,
)
from airflow_delta_provider.core.protocol.partitions import partition_path
from airflow_delta_provider.core.protocol.schema import physical_name, physical_schema, rename_to_logical
from airflow_delta_provider.core.transaction.datafiles import DataFile

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    import numpy.typing as npt

    from airflow_delta_provider.core.expressions.predicate import Predicate
    from airflow_delta_provider.core.log.snapshot import Snapshot

__all__ = ["CDC_DIR", "Candidates", "FileReader", "match_rows_locally", "written_name"]

#: Where change-data files go (PROTOCOL.md recommends it; readers find them through the log).
CDC_DIR = "_change_data"
CHANGE_TYPE = "_change_type"

T = TypeVar("T")


@dataclass(frozen=True)
class Candidates:
    """The active files a DELETE reads, with their typed partition values.

    :param files: rows of :meth:`Snapshot.files`.
    :param partition_values: one column per partition column (logical names, the table's types),
        row-aligned with ``files``.
    """

    files: pa.Table
    partition_values: pa.Table

    @property
    def paths(self) -> list[str]:
        """The files' ``add.path`` values."""
        return [str(p) for p in self.files.column("path").to_pylist()]

    def take(self, rows: Sequence[int]) -> Candidates:
        indices = pa.array(rows, pa.int64())
        values = (
            self.partition_values.take(indices)
            if self.partition_values.num_columns
            else self.partition_values
        )
        return Candidates(self.files.take(indices), values)


def written_name(kind: str = "part", number: int = 0) -> str:
    """A file name as Spark writes them: ``part-00000-<uuid>-c000.snappy.parquet``, or a change-data
    file's ``cdc-00000-<uuid>.c000.snappy.parquet``."""
    if kind == "cdc":
        return f"cdc-{number:05d}-{uuid.uuid4()}.c000.snappy.parquet"
    return f"part-{number:05d}-{uuid.uuid4()}-c000.snappy.parquet"


class FileReader:
    """Reads a snapshot's data files with pyarrow, one file at a time, rows in file order.

    :param max_workers: files read at once (default: 32 on object stores, the CPU count locally).
    """

    def __init__(self, snapshot: Snapshot, max_workers: int | None = None) -> None:
        self.snapshot = snapshot
        self.storage = snapshot.storage
        self.logical = snapshot.schema
        self.mapping = column_mapping_mode(snapshot.protocol, snapshot.metadata)
        self.physical = physical_schema(self.logical, self.mapping)
        self.partition_columns = list(snapshot.partition_columns)
        self.data_fields = [f for f in self.logical if f.name not in set(self.partition_columns)]
        local = min(8, os.cpu_count() or 1)
        self.max_workers = max_workers or (local if self.storage.is_local else 32)

    def read(self, candidates: Candidates, columns: Sequence[str]) -> Iterator[tuple[int, pa.Table]]:
        """Each candidate's rows (index in ``candidates``, table of the logical ``columns``), in file
        order; partition columns come from the log."""
        return self.map(candidates, columns, lambda index, rows: (index, rows))

    def map(
        self, candidates: Candidates, columns: Sequence[str], work: Callable[[int, pa.Table], T]
    ) -> Iterator[T]:
        """``work(index, rows)`` of each candidate's rows (as :meth:`read` gives them), run in the
        reading threads, the results in the candidates' order."""
        partitions = [c for c in columns if c in self.partition_columns]
        data = [f for f in self.data_fields if f.name in set(columns)]
        read_fields = [self.physical.field(self.logical.get_field_index(f.name)) for f in data]
        constants = candidates.partition_values.select(partitions) if partitions else None
        schema = pa.schema(read_fields + [self.logical.field(c) for c in partitions])
        dataset = file_dataset(self.storage, candidates.paths, schema, constants)
        logical = pa.schema(data + [self.logical.field(c) for c in partitions])
        names = schema.names

        def one(indexed: tuple[int, Any]) -> T:
            index, fragment = indexed
            with data_file_errors():
                table = fragment.to_table(schema=dataset.schema, columns=names, use_threads=False)
            return work(index, rename_to_logical(table, logical))

        fragments = list(enumerate(dataset.get_fragments()))
        if self.max_workers == 1:
            yield from map(one, fragments)
            return
        # A window of files at a time: the rows of a whole table never wait in memory at once.
        window = 2 * self.max_workers
        with ThreadPoolExecutor(max_workers=self.max_workers) as pool:
            for start in range(0, len(fragments), window):
                yield from pool.map(one, fragments[start : start + window])

    def deleted_rows(self, deletion_vector: Mapping[str, Any] | None) -> npt.NDArray[np.uint64]:
        """The rows a file's deletion vector marks (none without one)."""
        if deletion_vector is None:
            return np.empty(0, dtype=np.uint64)
        return deletion_vector_rows(self.storage, {k: v for k, v in deletion_vector.items() if v is not None})

    # --- writing -------------------------------------------------------------------------

    def stats_columns(self) -> list[tuple[str, ...]]:
        """The leaf columns whose statistics a new file's ``add`` carries (physical paths)."""
        data_schema = pa.schema(self.data_fields)
        columns = indexed_columns(data_schema, self.snapshot.properties)
        if self.mapping == "none":
            return columns
        return [physical_path(data_schema, path) for path in columns]

    def write_data(
        self, rows: pa.Table, directory: str, partition_values: Mapping[str, str | None], now: int
    ) -> tuple[AddFile, str]:
        """Write ``rows`` (logical data columns) as a new data file in ``directory`` (relative to the
        root): its ``add`` (statistics from its footer) and its filesystem path."""
        relative = "/".join(p for p in (directory, written_name()) if p)
        data_file = DataFile(
            self.storage.join(relative), relative, self._put(relative, physical_data(rows, self.logical)), now
        )
        # Its statistics as every commit takes them: read back from its footer (and its pages where
        # the footer cannot vouch for a bound), by the code commit_files uses.
        (footer,) = read_footers(
            self.storage, [data_file.path], stats_columns=self.stats_columns(), sizes=[data_file.size]
        )
        add = AddFile(data_file.add_path, dict(partition_values), data_file.size, now, stats=footer.stats)
        return add, data_file.path

    def write_changes(
        self, rows: pa.Table, partition_values: Mapping[str, str | None], number: int
    ) -> tuple[AddCDCFile, str]:
        """Write deleted rows (logical data columns) as a change-data file: physical names, no
        partition columns, ``_change_type = 'delete'``, under ``_change_data/<partition path>/``."""
        keys = [physical_name(self.logical.field(c)) for c in self.partition_columns]
        directory = "/".join(p for p in (CDC_DIR, partition_path(dict(partition_values), keys)) if p)
        relative = f"{directory}/{written_name('cdc', number)}"
        data = physical_data(rows, self.logical)
        data = data.append_column(CHANGE_TYPE, pa.array(["delete"] * rows.num_rows, pa.string()))
        size = self._put(relative, data)
        path = DataFile(self.storage.join(relative), relative, size, 0)
        return AddCDCFile(path.add_path, dict(partition_values), size), path.path

    def _put(self, relative: str, table: pa.Table) -> int:
        """Write ``table`` as a Parquet file under the root: its size."""
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="snappy")
        data = sink.getvalue()
        self.storage.put(self.storage.join(relative), data.to_pybytes())
        return int(data.size)


def match_rows_locally(
    snapshot: Snapshot, predicate: Predicate, candidates: Candidates, *, max_workers: int | None = None
) -> dict[str, npt.NDArray[np.uint64]]:
    """The positions of the rows ``predicate`` selects in each candidate file (rows a deletion
    vector already marks included), read with pyarrow: the core's row matcher."""
    reader = FileReader(snapshot, max_workers)
    paths = candidates.paths
    found: dict[str, npt.NDArray[np.uint64]] = {}
    for index, rows in reader.read(candidates, sorted(predicate.columns)):
        mask = predicate.mask(rows).to_numpy(zero_copy_only=False)
        matched = np.flatnonzero(mask).astype(np.uint64)
        if matched.size:
            found[paths[index]] = matched
    return found
