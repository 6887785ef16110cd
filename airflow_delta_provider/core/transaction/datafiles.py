"""Data files to commit: where they are, whether they may be committed, their partition values.

A commit may only reference files inside the table root and outside hidden directories:
Delta readers resolve relative paths against the root, and VACUUM never looks inside
``_``/``.`` directories, so a file there would be live but unprotected (or invisible).
Partition values come from Spark's ``col=value`` directories (Hive escaping undone) or
from the caller, and are checked against the table's partition columns.

On local storage a path is also judged by where it really is: a file that is, or lies
under, a symbolic link is refused (:class:`_RealPaths`), before it is read. A link
that leaves the root would commit data the table does not own; one that stays inside
would record the link's path, and VACUUM, which lists real files, would later delete the
target as unreferenced. (Object stores have no links.)
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import quote

from airflow_delta_provider.core.errors import InvalidPathError, SchemaError, SchemaMismatchError
from airflow_delta_provider.core.protocol.partitions import parse_partition_path
from airflow_delta_provider.core.storage.paths import LOG_DIR, TablePath, has_scheme

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.storage.base import FileInfo

#: Characters kept as they are in ``add.path`` (a relative URI); everything else is %-encoded.
_PATH_SAFE = "/=@!$&'()*+,;~-._"


@dataclass(frozen=True)
class DataFile:
    """A file to commit.

    :param path: its filesystem path (fsspec form).
    :param relative_path: its path under the table root, as on storage (not URL-encoded).
    :param size: bytes.
    :param modification_time: milliseconds since the epoch.
    """

    path: str
    relative_path: str
    size: int
    modification_time: int

    @property
    def add_path(self) -> str:
        """The ``add.path`` value: the relative path as a URI-encoded string, as Delta writes it."""
        return quote(self.relative_path, safe=_PATH_SAFE)


def is_hidden(component: str, partition_columns: Iterable[str] = ()) -> bool:
    """Delta's hidden-name rule: ``_``/``.`` prefixes, except ``<partitionColumn>=...`` directories."""
    if not component.startswith(("_", ".")):
        return False
    name, equals, _ = component.partition("=")
    return not (equals and name in set(partition_columns))


def relative_path(storage: LogStore, path: str, partition_columns: Sequence[str] = ()) -> str:
    """The path of a data file relative to the table root, refusing anything a commit must not hold.

    :param path: relative to the root, an absolute local path, or a URI on the table's storage.
    :raises InvalidPathError: outside the table root, ``..`` segments, a hidden directory or file
        name (``_``/``.``, e.g. ``_delta_log``, ``_temporary``, ``.part-0.crc``), or a directory.
    """
    original = path
    if has_scheme(path) or path.startswith("/"):
        parsed = TablePath.parse(path)
        scheme, absolute = parsed.scheme, parsed.root
        root = storage.root.rstrip("/")
        if scheme != storage.scheme or not (absolute == root or absolute.startswith(root + "/")):
            raise InvalidPathError(
                f"{original!r} is outside the table root {storage.root_uri!r}. A Delta table can only "
                f"commit files under its root; write the data under the table location."
            )
        path = absolute[len(root) :]
    path = path.strip("/")
    segments = path.split("/")
    if not path or any(s in ("", ".", "..") for s in segments):
        raise InvalidPathError(
            f"{original!r} is not a file path under the table root (empty, '.' or '..' segments are "
            f"not allowed)."
        )
    hidden = [s for s in segments if is_hidden(s, partition_columns)]
    if hidden or segments[0] == LOG_DIR:
        raise InvalidPathError(
            f"{original!r} is in a hidden location ({hidden[0] if hidden else LOG_DIR!r}): names starting "
            f"with '_' or '.' are hidden from Delta (VACUUM skips them and engines treat them as "
            f"temporary). Write data files to a non-hidden directory under the table root."
        )
    return posixpath.normpath(path)


def collect_files(
    storage: LogStore,
    *,
    files: Sequence[str] | None = None,
    prefix: str | None = None,
    partition_columns: Sequence[str] = (),
) -> list[DataFile]:
    """The files to commit, with size and modification time.

    :param files: explicit paths (see :func:`relative_path`); may be empty.
    :param prefix: a directory under the root to scan recursively; hidden files and
        directories in it (``_SUCCESS``, ``_temporary/``, ``.crc`` files) are skipped. A
        directory that exists but holds no data file (an empty job output: nothing, or only
        ``_SUCCESS``) gives no files; what an empty commit then does is the caller's rule.
    :raises InvalidPathError: a path may not be committed (outside the root, hidden, a
        symbolic link on local storage), is listed twice, or does not exist; the prefix is
        the root, a file, a symbolic link, or does not exist.
    """
    if (files is None) == (prefix is None):
        raise ValueError("Pass exactly one of files (a list of paths) or prefix (a directory to scan).")
    real = _RealPaths(storage)
    if files is not None:
        if isinstance(files, str):
            raise TypeError(
                "files must be a list of paths, not a single string; use prefix= for a directory."
            )
        found = []
        for f in _unique(files, storage, partition_columns):
            relative = relative_path(storage, f, partition_columns)
            real.check(relative, f)  # before the file is looked at
            found.append(_stat(storage, relative, f))
        return found
    return _scan(storage, prefix or "", partition_columns, real)


class _RealPaths:
    """Local storage only: refuses paths that are, or lie under, symbolic links.

    Each directory and each file costs one ``lstat`` (directories once).
    """

    def __init__(self, storage: LogStore) -> None:
        self.storage = storage
        self.active = storage.is_local
        if self.active:
            self.root = storage.root.rstrip("/")
            self.real_root = os.path.realpath(self.root)
        self._directories: dict[str, bool] = {}

    def check_directory(self, relative: str, original: str) -> None:
        if self.active and not self._directory_is_real(relative):
            self._refuse(relative, original)

    def check(self, relative: str, original: str) -> None:
        if not self.active:
            return
        directory = relative.rpartition("/")[0]
        if not self._directory_is_real(directory) or os.path.islink(f"{self.root}/{relative}"):
            self._refuse(relative, original)

    def check_walked(self, info: FileInfo, relative: str) -> None:
        """A file found by walking a directory already checked: a walk follows no link to a
        directory (``LogStore.walk``), so only the file itself may be a link, which the walk's
        listing tells (``FileInfo.is_link``: no system call)."""
        if self.active and info.is_link:
            self._refuse(relative, relative)

    def _directory_is_real(self, relative: str) -> bool:
        """Whether no directory from the root down to ``relative`` is a link (the root may be one)."""
        known = self._directories.get(relative)
        if known is None:
            parent = relative.rpartition("/")[0]
            known = not relative or (
                self._directory_is_real(parent) and not os.path.islink(f"{self.root}/{relative}")
            )
            self._directories[relative] = known
        return known

    def _refuse(self, relative: str, original: str) -> None:
        real = os.path.realpath(f"{self.root}/{relative}")
        if not (real == self.real_root or real.startswith(self.real_root + os.sep)):
            raise InvalidPathError(
                f"{original!r} is, or lies under, a symbolic link that resolves outside the table root "
                f"{self.storage.root_uri!r}. A Delta table only references files under its root; copy "
                f"or write the data under the table location instead of linking to it."
            )
        target = os.path.relpath(real, self.real_root)
        raise InvalidPathError(
            f"{original!r} is, or lies under, a symbolic link (to {target!r} in the table). The log "
            f"would record the link's path, and VACUUM, which lists real files, would delete the "
            f"target as unreferenced. Commit {target!r} instead."
        )


def _unique(files: Sequence[str], storage: LogStore, partition_columns: Sequence[str]) -> list[str]:
    seen: dict[str, str] = {}
    for f in files:
        key = relative_path(storage, f, partition_columns)
        if key in seen:
            raise InvalidPathError(
                f"{f!r} is listed twice (also as {seen[key]!r}); each file can be added once."
            )
        seen[key] = f
    return list(seen.values())


def _stat(storage: LogStore, relative: str, original: str) -> DataFile:
    path = storage.join(relative)
    info = storage.info(path)
    if info is None:
        raise InvalidPathError(f"{original!r} does not exist at {storage.to_uri(path)}.")
    return DataFile(path, relative, info.size, info.modification_time)


def _scan(
    storage: LogStore, prefix: str, partition_columns: Sequence[str], real: _RealPaths
) -> list[DataFile]:
    base = relative_path(storage, prefix, partition_columns) if prefix.strip("/") not in ("", ".") else ""
    if not base:
        raise InvalidPathError(
            "prefix is the table root; scanning the whole table would re-add its existing files. Write "
            "new data under a fresh directory and pass that as prefix."
        )
    real.check_directory(base, prefix)  # before listing it: a link would list elsewhere
    directory = storage.join(base)
    if real.active and os.path.isfile(directory):
        raise InvalidPathError(f"prefix {prefix!r} is a file, not a directory; pass it in files= instead.")
    root = storage.root.rstrip("/") + "/"
    found = []
    seen_any = False
    for info in storage.walk(directory):
        seen_any = True
        relative = info.path[len(root) :] if info.path.startswith(root) else None
        if relative is None:
            continue
        if ("/_" in f"/{relative}" or "/." in f"/{relative}") and any(
            is_hidden(s, partition_columns) for s in relative.split("/")
        ):
            continue
        real.check_walked(info, relative)
        found.append(DataFile(info.path, relative, info.size, info.modification_time))
    if not seen_any and not (os.path.isdir(directory) if real.active else storage.info(directory)):
        raise InvalidPathError(
            f"prefix {prefix!r} does not exist ({storage.to_uri(directory)}): nothing was written there. "
            f"Check the path the job wrote to."
        )
    found.sort(key=lambda f: f.relative_path)
    return found


def partition_values_of(
    data_file: DataFile,
    partition_columns: Sequence[str],
    explicit: Mapping[str, str | None] | None = None,
) -> dict[str, str | None]:
    """A file's partition values: given explicitly, or from its ``col=value`` directories.

    Values stay in the protocol's string form; a null is ``None``.

    :raises SchemaError: a value is missing for a partition column, or the path or the
        mapping names a column that is not a partition column, or the path spells a
        partition column in another case (``DS=...`` for ``ds``; the mapping's keys may use any
        case: they are only arguments).
    """
    if explicit is not None:
        values = dict(explicit)
        source = "the given partition values"
    else:
        values = parse_partition_path(data_file.relative_path)
        if list(values) == list(partition_columns):
            return values  # the common case: the table's columns, spelled as it spells them, in order
        source = f"the path {data_file.relative_path!r}"
    by_key = {c.lower(): c for c in partition_columns}
    if explicit is None:
        for key in values:
            canonical = by_key.get(key.lower())
            if canonical is not None and key != canonical:
                # Delta (Spark) names directories with the table's spelling; readers of the
                # path layout (Hive, pyarrow) match it case-sensitively.
                raise SchemaMismatchError(
                    f"{source} names partition column {key!r}, but the table's column is {canonical!r}: "
                    f"the names differ only in case. Write the directories as {canonical}=<value>."
                )
    unknown = [k for k in values if k.lower() not in by_key]
    if unknown:
        fix = (
            f" A commit that creates the table takes its partitioning from partition_by: pass "
            f"partition_by={list(values)} (the columns the path names); an existing table's "
            f"partitioning cannot change."
            if explicit is None
            else " Pass values only for the table's partition columns."
        )
        raise SchemaError(
            f"{source} names partition column(s) {unknown}, but the table is partitioned by "
            f"{list(partition_columns) or 'nothing'}.{fix}"
        )
    normalized = {by_key[k.lower()]: (None if v == "" else v) for k, v in values.items()}
    missing = [c for c in partition_columns if c not in normalized]
    if missing:
        raise SchemaError(
            f"No value for partition column(s) {missing} in {source}. Files of a partitioned table "
            f"must sit in col=value directories (Spark's partitionBy layout) or be given partition values."
        )
    return {c: normalized[c] for c in partition_columns}
