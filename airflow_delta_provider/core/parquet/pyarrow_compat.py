"""Parquet footers parsed by pyarrow's native reader, the one private pyarrow API the core uses.

``pyarrow._parquet.ParquetReader`` parses a footer without the ``ParquetFile`` wrapper around
it: half the cost per footer, which a commit of thousands of files pays per file. Where a pyarrow
lacks it, :func:`read_footer_metadata` falls back to the public ``pyarrow.parquet.read_metadata``.
(Not ``_reconstruct_filemetadata``: it aborts the process on a corrupt footer.)
``tests/unit/core/parquet/test_pyarrow_compat.py`` pins what is relied on: the same ``FileMetaData`` as
the public reader's, and a corrupt footer raised as an exception.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

try:
    from pyarrow._parquet import ParquetReader as _NativeReader
except ImportError:  # pragma: no cover - a pyarrow without it: the public reader
    _NativeReader = None

_Reader: Any = _NativeReader

__all__ = ["read_footer_metadata"]


def read_footer_metadata(footer: bytes) -> pq.FileMetaData:
    """The ``FileMetaData`` of ``footer`` (the file's tail: footer, its length and ``PAR1``).

    :raises OSError: (or ``pyarrow.ArrowException``, ``ValueError``) the footer is not readable.
    """
    if _Reader is None:
        return pq.read_metadata(pa.BufferReader(footer))
    reader = _Reader()
    reader.open(pa.BufferReader(footer))
    metadata: pq.FileMetaData = reader.metadata
    return metadata
