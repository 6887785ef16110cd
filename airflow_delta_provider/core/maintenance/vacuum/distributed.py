"""VACUUM's listing and deletions as work for other processes (a Spark job's executors).

Nothing here knows Spark: each task is a picklable value that turns Arrow record batches into
Arrow record batches (the shape of ``DataFrame.mapInArrow``) and does its I/O through the table's
own :class:`~airflow_delta_provider.core.storage.LogStore`, so other processes list and delete
exactly as this one would. Which listed files may go is decided by :class:`~.plan.VacuumRules`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

from airflow_delta_provider.core.storage.base import TreeListing, file_info
from airflow_delta_provider.core.storage.paths import TablePath

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    from airflow_delta_provider.core.maintenance.vacuum.plan import HiddenNames
    from airflow_delta_provider.core.storage import LogStore

__all__ = [
    "DIRECTORY",
    "EMPTY_DIRECTORY",
    "FILE",
    "LISTING_SCHEMA",
    "DeleteFiles",
    "ListSubtrees",
    "listing_from_rows",
    "split_listing",
]

FILE = "file"
DIRECTORY = "directory"
#: A directory with nothing at all below it (hidden entries included).
EMPTY_DIRECTORY = "empty"
#: What :class:`ListSubtrees` yields.
LISTING_SCHEMA = pa.schema(
    [
        ("path", pa.string()),
        ("size", pa.int64()),
        ("modification_time", pa.int64()),
        ("kind", pa.string()),
    ]
)
#: What :class:`DeleteFiles` yields: one row per batch it received.
DELETED_SCHEMA = pa.schema([("deleted", pa.int64())])


def split_listing(storage: LogStore, hidden: HiddenNames) -> tuple[TreeListing, list[str]]:
    """The root's first level: its visible files as a listing, and the visible subdirectories to
    list elsewhere (each one's task reports the directory itself, and whether it is empty)."""
    listing = TreeListing()
    subdirectories: list[str] = []
    prefix = storage.root.rstrip("/") + "/"
    try:
        entries = storage.fs.ls(storage.root, detail=True)
    except FileNotFoundError:
        return listing, subdirectories
    for entry in entries:
        name = str(entry["name"]).rstrip("/")
        if not name.startswith(prefix):
            continue
        relative = name[len(prefix) :]
        if not relative or "/" in relative or hidden(relative):
            continue
        if entry.get("type") == "directory":
            subdirectories.append(relative)
        else:
            info = file_info(entry)
            listing.files.append((relative, info.size, info.modification_time))
    return listing, sorted(subdirectories)


def _substore(storage: LogStore, relative: str) -> LogStore:
    """The same store rooted at a directory under the table root (same filesystem, same options)."""
    path = TablePath.parse(storage.to_uri(storage.join(relative)))
    return type(storage)(path, storage.storage_options, filesystem=storage.fs)


def _rows(storage: LogStore, directory: str, hidden: HiddenNames) -> list[tuple[str, int, int, str]]:
    sub = _substore(storage, directory)
    listing = sub.list_tree(hidden)
    prefix = directory + "/"
    rows = [(prefix + p, size, mtime, FILE) for p, size, mtime in listing.files]
    if not storage.prefix_directories:
        rows.append((directory, 0, 0, DIRECTORY))
        rows.extend((prefix + d, 0, 0, DIRECTORY) for d in listing.directories)
        rows.extend((prefix + d, 0, 0, EMPTY_DIRECTORY) for d in listing.empty_directories)
        if not listing.files and _only_empty_directories(storage, sub, set(listing.empty_directories)):
            rows.append((directory, 0, 0, EMPTY_DIRECTORY))
    return rows


def _only_empty_directories(storage: LogStore, sub: LogStore, empty: set[str]) -> bool:
    """Whether a directory holds nothing but empty directories (as :meth:`LogStore.list_tree` says
    of the directories below the root): no file, hidden or not."""
    prefix = sub.root.rstrip("/") + "/"
    try:
        entries = storage.fs.ls(sub.root, detail=True)
    except FileNotFoundError:
        return False  # gone meanwhile: nothing to delete
    return all(
        entry.get("type") == "directory" and str(entry["name"]).rstrip("/").removeprefix(prefix) in empty
        for entry in entries
    )


@dataclass(frozen=True)
class ListSubtrees:
    """List every directory (column ``directory``, relative to the root) of the batches received.

    :param storage: the table's store (pickled to the listing processes with its options).
    :param hidden: the table's hidden-name rule.
    """

    storage: LogStore
    hidden: HiddenNames

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for directory in batch.column("directory").to_pylist():
                rows = _rows(self.storage, directory, self.hidden)
                if rows:
                    columns = list(zip(*rows, strict=True))
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(c, type=f.type) for c, f in zip(columns, LISTING_SCHEMA, strict=True)],
                        schema=LISTING_SCHEMA,
                    )


@dataclass(frozen=True)
class DeleteFiles:
    """Delete the files (column ``path``, the store's filesystem paths) of the batches received.

    :param storage: the table's store.
    :param max_workers: delete batches in flight per process (see :meth:`LogStore.delete_many`).
    """

    storage: LogStore
    max_workers: int | None = None

    def __call__(self, batches: Iterable[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            paths = [str(p) for p in batch.column("path").to_pylist()]
            deleted = self.storage.delete_many(paths, max_workers=self.max_workers)
            yield pa.RecordBatch.from_arrays([pa.array([deleted], pa.int64())], schema=DELETED_SCHEMA)


def listing_from_rows(first_level: TreeListing, rows: pa.Table) -> TreeListing:
    """One listing from the first level and the rows the listing tasks yielded (and kept)."""
    listing = TreeListing(list(first_level.files), list(first_level.directories))
    listing.empty_directories = list(first_level.empty_directories)
    kinds = rows.column("kind").to_pylist()
    paths = rows.column("path").to_pylist()
    sizes = rows.column("size").to_pylist()
    times = rows.column("modification_time").to_pylist()
    for kind, path, size, mtime in zip(kinds, paths, sizes, times, strict=True):
        if kind == FILE:
            listing.files.append((path, size, mtime))
        elif kind == DIRECTORY:
            listing.directories.append(path)
        elif kind == EMPTY_DIRECTORY:
            listing.empty_directories.append(path)
    return listing
