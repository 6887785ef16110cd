"""Reading a table's data files with pyarrow: the dataset of a set of files, and their deletion vectors.

Partition values come from the log, not from directory names, and so do any other per-file
constants a reader wants as columns (a change's type and version): each file's values become its
partition expression, which the dataset materialises as columns (a value there wins over a column
of the same name in the file). Deletion vectors are read through the table's store; the rows they
mark are dropped (or, for a change feed, selected) with a mask.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

from airflow_delta_provider.core.deletion_vectors import read_deletion_vector

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    import numpy as np
    import numpy.typing as npt
    import pyarrow.dataset as ds

    from airflow_delta_provider.core.storage import LogStore


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
