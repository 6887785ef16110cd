"""Parquet footers read from storage: each file's tail in one ranged read, parsed by pyarrow.

A commit of thousands of existing files reads each one's footer (its statistics become the
``add`` action's); on object stores one request per file, sized to hold the whole footer
usually, and on local disks as little as the footers need. What pyarrow does not hand back is
read from the footer's bytes (:mod:`.thrift`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from airflow_delta_provider.core.errors import InvalidDataFileError
from airflow_delta_provider.core.parquet.pyarrow_compat import read_footer_metadata
from airflow_delta_provider.core.parquet.thrift import T_I32, T_LIST, skip_compact

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from airflow_delta_provider.core.storage import LogStore


#: Bytes read from the end of each file on object stores: one request usually holds the whole
#: footer; a second, exact request follows for a footer that is larger.
TAIL_BYTES = 64 * 1024
#: The same on local disks for the first window, where a second read costs microseconds, not a
#: round trip: each copied kilobyte counts (1,000 tails of 16 KiB: 10-29 ms, of 4 KiB: 9-10 ms).
#: Later windows read the largest footer seen so far, rounded up to whole :data:`LOCAL_TAIL_STEP`
#: (a write's files have footers of about one size).
LOCAL_TAIL_BYTES = 4 * 1024
LOCAL_TAIL_STEP = 4 * 1024
_MAGIC = b"PAR1"


def footer_bytes(
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
            raise unreadable(storage, path, tail)
        if len(tail) < 8 or tail[-4:] != _MAGIC:
            raise unreadable(storage, path, "it does not end with the Parquet magic bytes PAR1")
        length = int.from_bytes(tail[-8:-4], "little")
        if length + 12 > size:
            raise unreadable(
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
                raise unreadable(storage, paths[index], reason)
            footers[index] = _MAGIC + footer + length.to_bytes(4, "little") + _MAGIC
            offsets[index] = None
    return footers, offsets


def _size(storage: LogStore, path: str) -> int:
    info = storage.info(path)
    if info is None:
        raise unreadable(storage, path, "it does not exist")
    return info.size


def parse_footer(storage: LogStore, path: str, footer: bytes) -> pq.FileMetaData:
    """The FileMetaData of a footer that ends with its trailer (the reader checks both)."""
    try:
        return read_footer_metadata(footer)
    except (OSError, pa.ArrowException, ValueError) as err:
        raise unreadable(storage, path, err) from None


def unreadable(storage: LogStore, path: str, reason: object) -> InvalidDataFileError:
    return InvalidDataFileError(
        f"{storage.to_uri(path)} is not a readable Parquet file ({reason}). Only Parquet data files "
        f"can be committed to a Delta table; remove the file or exclude it."
    )


def schema_end(footer: bytes, start: int) -> int | None:
    """Where the footer's ``FileMetaData`` ends its fields 1 (``version``) and 2 (``schema``), when
    it starts with them (every writer orders fields by id), else None. Equal bytes up to there
    are an equal version and schema."""
    try:
        if footer[start] != (1 << 4 | T_I32):
            return None
        position = skip_compact(footer, start + 1, T_I32, 0)
        if footer[position] != (1 << 4 | T_LIST):
            return None
        end = skip_compact(footer, position + 1, T_LIST, 0)
        return end if end <= len(footer) else None
    except (IndexError, ValueError):
        return None
