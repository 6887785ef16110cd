"""Where one Spark attempt writes under a table root, and what becomes of the files it wrote.

Every operator that has Spark write data files for the core to commit (PySpark, OPTIMIZE) follows
the same rules, decided here: a fresh, non-hidden directory per attempt (:func:`attempt_dir`), the
data files listed and Spark's hidden litter deleted after the job (:func:`collect_attempt_files`),
and the files of an attempt whose commit did not land deleted (:func:`discard_attempt`) through the
core's :func:`~airflow_delta_provider.core.maintenance.vacuum.discard.discard_uncommitted`.
"""

from __future__ import annotations

import hashlib
import os
import re
import uuid
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.operators.commit import already_committed
from airflow_delta_provider.spark.paths import spark_path
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_delta_provider.core.table import DeltaTable
    from airflow_delta_provider.operators.commit import RunIdentity

__all__ = [
    "DEFAULT_WRITE_OPTIONS",
    "attempt_dir",
    "check_write_subdir",
    "collect_attempt_files",
    "commit_landed",
    "discard_attempt",
    "spark_path",
]

#: Options of every Parquet write (Hadoop job settings go into the write's Hadoop conf). They keep
#: Spark's marker and summary files out of the table; the user's ``write_options`` win.
DEFAULT_WRITE_OPTIONS: dict[str, str] = {
    "mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "parquet.summary.metadata.level": "NONE",
    "compression": "snappy",
}
#: Characters kept in directory names made from run identities; the rest become ``-``. Hadoop
#: paths refuse ``:`` (run ids hold timestamps), and ``=`` would read as a partition directory.
_UNSAFE = re.compile(r"[^A-Za-z0-9_.\-]+")


#: The longest directory name :func:`attempt_dir` makes (bytes; its names are ASCII): under the
#: 255-byte name limit of local file systems, HDFS and ADLS, and short enough that the path with
#: partition directories and Spark's ``_temporary/0/_temporary/attempt_.../part-...`` names below
#: it stays within S3's 1,024-byte keys. Airflow allows 250 characters per dag_id, task_id, run_id.
MAX_NAME_BYTES = 120
#: Hex digits of the identity's SHA-256 that end a name cut to :data:`MAX_NAME_BYTES`.
_DIGEST_CHARS = 12


def _safe(text: str) -> str:
    cleaned = _UNSAFE.sub("-", text).strip("-._")
    return cleaned or "x"


def _name(parts: Sequence[str], suffix: str = "") -> str:
    """``parts`` made safe and joined with ``__``, then ``suffix``: at most :data:`MAX_NAME_BYTES`.

    A name that would be longer keeps a readable prefix of each part and ends with a digest of the
    parts as given, so identities that share the prefixes still get names of their own.
    """
    name = "__".join(_safe(part) for part in parts)
    if len(name) + len(suffix) <= MAX_NAME_BYTES:
        return name + suffix
    digest = hashlib.sha256("\0".join(parts).encode()).hexdigest()[:_DIGEST_CHARS]
    room = MAX_NAME_BYTES - len(suffix) - 1 - _DIGEST_CHARS - 2 * (len(parts) - 1)
    each = max(1, room // len(parts))
    return "__".join(_safe(part)[:each] for part in parts) + f"-{digest}{suffix}"


def check_write_subdir(value: str) -> str:
    """``value`` as a relative directory fit to hold attempts' files (slashes stripped).

    :raises ValueError: empty, hidden (a ``_`` or ``.`` prefix, which Delta ignores), ``..``, or
        holding ``=`` (it would read as a partition directory).
    """
    text = value.strip("/") if isinstance(value, str) else ""
    parts = text.split("/")
    if not text or any(p in ("", ".", "..") or p.startswith(("_", ".")) or "=" in p for p in parts):
        raise ValueError(
            f"write_subdir must be a non-hidden relative directory (no '_'/'.' prefixes, '..' or '='), "
            f"got {value!r}: Delta hides '_'/'.' names, and '=' reads as a partition directory."
        )
    return text


def attempt_dir(write_subdir: str, identity: RunIdentity) -> str:
    """A fresh directory for one attempt's files, relative to the table root:
    ``<write_subdir>/<dag>__<task>/<run>[__<map index>]__try<n>__<uuid>``, each generated name at
    most :data:`MAX_NAME_BYTES` long (long identities are cut and end with a digest of them)."""
    index = f"__{identity.map_index}" if identity.map_index >= 0 else ""
    attempt = f"{index}__try{identity.try_number}__{uuid.uuid4().hex[:12]}"
    return f"{write_subdir}/{_name([identity.dag_id, identity.task_id])}/{_name([identity.run_id], attempt)}"


def collect_attempt_files(table: DeltaTable, attempt: str, partition_columns: Sequence[str]) -> list[str]:
    """The data files Spark wrote under ``attempt``, relative to the root and sorted; Spark's hidden
    litter there (markers, checksums, temporary directories) is deleted.

    :param partition_columns: the directory names Spark partitioned the output by (``col=value``
        directories are not hidden).
    """
    # Here, not at the top: the module is imported in every parse of a DAG file naming the
    # PySpark operator, and core.datafiles imports pyarrow (~0.25 s) that only execution needs.
    from airflow_delta_provider.core.maintenance import discard_uncommitted
    from airflow_delta_provider.core.transaction import is_hidden

    storage = table.storage
    root = storage.root.rstrip("/") + "/"
    files: list[str] = []
    litter: list[str] = []
    for info in storage.walk(storage.join(attempt)):
        relative = info.path[len(root) :] if info.path.startswith(root) else None
        if relative is None:
            continue
        if any(is_hidden(part, partition_columns) for part in relative.split("/")):
            litter.append(info.path)
        else:
            files.append(relative)
    discard_uncommitted(storage, litter, reason="Spark's markers and checksums", referenced=False)
    return sorted(files)


def commit_landed(table: DeltaTable, app_id: str, app_version: int) -> bool:
    """Whether the table holds the txn ``(app_id, app_version)``; True when that cannot be read, so
    that nothing a commit may reference is deleted."""
    try:
        return already_committed(table, app_id, app_version) is not None
    except Exception:
        return True


def discard_attempt(table: DeltaTable, attempt: str, log: Any) -> None:
    """Delete an attempt's uncommitted files (inside the table root only) and, on local disk, its
    directories; never raises (a warning says VACUUM will remove what is left).

    :param log: the task's logger.
    """
    from airflow_delta_provider.core.maintenance import discard_uncommitted

    storage = table.storage
    directory = storage.join(attempt)
    try:
        paths = [info.path for info in storage.walk(directory)]
        result = discard_uncommitted(storage, paths, reason=f"the attempt under {attempt} was not committed")
        if storage.is_local and not result.kept:
            for dirpath, _dirs, _files in sorted(os.walk(directory), key=lambda e: -len(e[0])):
                os.rmdir(dirpath)
        log.info("Removed %s under %s.", count(result.deleted, "uncommitted file"), storage.to_uri(directory))
    except Exception as err:  # the task's own error matters more; VACUUM removes what stays
        log.warning("Could not remove the uncommitted files under %s (%s); VACUUM will.", directory, err)
