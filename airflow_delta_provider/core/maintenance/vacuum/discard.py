"""Deleting the files an attempt wrote but did not commit, by VACUUM's rules.

An OPTIMIZE whose commit was refused or lost to a concurrent run of the same application, a rewrite
that failed midway, a Spark job whose commit failed: each leaves files no commit references, and
removes them at once rather than leave them to VACUUM. What may go is decided as for VACUUM: a path
strictly under the root, outside ``_delta_log``, not through a symbolic link leaving the root
(:func:`~.plan.paths_outside_root`), and never one the latest version of the table references, an
active file, a tombstone or a deletion vector, whatever its age (:func:`~.plan.protected_paths`).
Anything else is kept and named in a warning; what stays, VACUUM removes once it is older than
the retention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import DeltaError, TableNotFoundError
from airflow_delta_provider.core.log.snapshot import load_snapshot
from airflow_delta_provider.core.maintenance.vacuum.plan import paths_outside_root, protected_paths
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_delta_provider.core.storage import LogStore

__all__ = ["DiscardResult", "discard_uncommitted"]

log = get_logger(__name__)

#: Why a path was kept.
OUTSIDE_ROOT = "it is not strictly under the table root, or it is inside _delta_log"
REFERENCED = "the latest version of the table references it"
UNREADABLE = "the table could not be read to make sure that no version references it"


@dataclass(frozen=True)
class DiscardResult:
    """What :func:`discard_uncommitted` did.

    :param deleted: files deleted (missing ones not counted).
    :param kept: ``(path, why)`` of each path that was not deleted.
    """

    deleted: int
    kept: tuple[tuple[str, str], ...] = ()


def discard_uncommitted(
    storage: LogStore, paths: Sequence[str], *, reason: str, referenced: bool = True
) -> DiscardResult:
    """Delete files of ``storage``'s table that an attempt wrote and no commit references.

    Never raises for a path or a storage failure (the caller's own error matters more): a path that
    may not be deleted, or that could not be, is named in a warning and left to VACUUM.

    :param paths: filesystem paths of the store (``storage.join(relative)``).
    :param reason: why the files are discarded, for the log.
    :param referenced: whether a commit may reference some of the paths (the latest version is read
        to keep those); False only for hidden files (``_``/``.`` names) in an attempt's fresh
        directory, which no commit can hold.
    """
    unique = list(dict.fromkeys(paths))
    if not unique:
        return DiscardResult(0)
    outside = set(paths_outside_root(storage, unique, resolve_links=True))
    kept = [(path, OUTSIDE_ROOT) for path in unique if path in outside]
    candidates = [path for path in unique if path not in outside]
    try:
        protected = protected_paths(load_snapshot(storage), 0) if candidates and referenced else set()
    except TableNotFoundError:
        protected = set()  # no commit at all (a first write that failed): nothing references them
    except (DeltaError, OSError) as err:
        log.warning("Could not read %s to check the files to discard (%s).", storage.root_uri, err)
        kept += [(path, UNREADABLE) for path in candidates]
        candidates = []
    doomed = []
    for path in candidates:
        if storage.path.relative(path) in protected:
            kept.append((path, REFERENCED))
        else:
            doomed.append(path)
    for path, why in kept:
        log.warning("Not deleting %s: %s.", storage.to_uri(path), why)
    deleted = 0
    try:
        deleted = storage.delete_many(doomed)
    except (DeltaError, OSError) as err:
        log.warning(
            "Could not delete the uncommitted files under %s (%s); VACUUM removes them once they are older "
            "than the retention.",
            storage.root_uri,
            err,
        )
        return DiscardResult(0, (*kept, *((path, str(err)) for path in doomed)))
    log.info("Deleted %d uncommitted file(s) of %s (%s).", deleted, storage.root_uri, reason)
    return DiscardResult(deleted, tuple(kept))
