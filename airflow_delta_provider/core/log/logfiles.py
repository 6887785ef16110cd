"""The files of ``_delta_log``: their names, kinds, and the ``_last_checkpoint`` hint.

Only names the protocol defines are recognised; anything else in the log
directory (Hadoop ``.crc`` sidecars, ``.tmp`` files, ``_staged_commits``, editor
droppings) is ignored by every reader of the listing.
"""

from __future__ import annotations

import enum
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping

    from airflow_delta_provider.core.storage import FileInfo

log = get_logger(__name__)

LAST_CHECKPOINT = "_last_checkpoint"
SIDECAR_DIR = "_sidecars"

#: The temp file of a whole-file write: ``.<target name>.<uuid>.tmp`` beside the target. The
#: core writes them (``LogStore._write_local_temp``: a 32-hex uuid) and so does Spark's
#: Hadoop log store (a dashed uuid); a killed writer leaves them behind.
_TEMP_FILE_RE = re.compile(
    r"^\.(?P<target>[0-9A-Za-z_][^/]*)\.(?:[0-9a-f]{32}|[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12})\.tmp$"
)

_LOG_FILE_RE = re.compile(
    r"^(?P<version>\d{20})\."
    r"(?:(?P<commit>json)"
    r"|(?P<crc>crc)"
    r"|checkpoint\.parquet(?P<classic>)"
    r"|checkpoint\.(?P<part>\d{10})\.(?P<parts>\d{10})\.parquet"
    r"|checkpoint\.(?P<uuid>[0-9a-fA-F-]{36})\.(?P<uuid_ext>json|parquet)"
    r"|(?P<end>\d{20})\.compacted\.json)$"
)


class LogFileKind(enum.Enum):
    COMMIT = "commit"
    CHECKSUM = "checksum"
    CLASSIC_CHECKPOINT = "classic checkpoint"
    MULTIPART_CHECKPOINT = "multi-part checkpoint"
    UUID_CHECKPOINT = "uuid checkpoint"
    COMPACTED = "compacted commits"


@dataclass(frozen=True, slots=True)
class LogFile:
    """A recognised ``_delta_log`` file.

    :param part: 1-based part number of a multi-part checkpoint.
    :param num_parts: total parts of a multi-part checkpoint.
    :param end_version: last version covered by a compacted file.
    """

    file: FileInfo
    kind: LogFileKind
    version: int
    part: int = 1
    num_parts: int = 1
    end_version: int | None = None

    @property
    def name(self) -> str:
        return self.file.name

    @property
    def is_checkpoint(self) -> bool:
        return self.kind in (
            LogFileKind.CLASSIC_CHECKPOINT,
            LogFileKind.MULTIPART_CHECKPOINT,
            LogFileKind.UUID_CHECKPOINT,
        )


def parse_log_file(file: FileInfo) -> LogFile | None:
    """Classify a listed file of ``_delta_log``; None for names the protocol does not define."""
    name = file.name
    if len(name) == 25 and name.endswith(".json") and name[:20].isdecimal():
        # The commonest name (a commit), as the expression below reads it, without running it.
        return LogFile(file, LogFileKind.COMMIT, int(name[:20]))
    match = _LOG_FILE_RE.match(name)
    if match is None:
        return None
    version = int(match["version"])
    if match["commit"]:
        return LogFile(file, LogFileKind.COMMIT, version)
    if match["crc"]:
        return LogFile(file, LogFileKind.CHECKSUM, version)
    if match["classic"] is not None:
        return LogFile(file, LogFileKind.CLASSIC_CHECKPOINT, version)
    if match["part"]:
        part, parts = int(match["part"]), int(match["parts"])
        if not 1 <= part <= parts:
            return None
        return LogFile(file, LogFileKind.MULTIPART_CHECKPOINT, version, part=part, num_parts=parts)
    if match["uuid"]:
        return LogFile(file, LogFileKind.UUID_CHECKPOINT, version)
    return LogFile(file, LogFileKind.COMPACTED, version, end_version=int(match["end"]))


def is_temp_file(name: str) -> bool:
    """Whether a ``_delta_log`` file name is a writer's temp file (never part of the table)."""
    return name.startswith(".") and _TEMP_FILE_RE.match(name) is not None


def commit_name(version: int) -> str:
    return f"{version:020d}.json"


def checksum_name(version: int) -> str:
    return f"{version:020d}.crc"


def classic_checkpoint_name(version: int) -> str:
    return f"{version:020d}.checkpoint.parquet"


def multipart_checkpoint_name(version: int, part: int, num_parts: int) -> str:
    return f"{version:020d}.checkpoint.{part:010d}.{num_parts:010d}.parquet"


def version_prefix(version: int) -> str:
    """The name prefix to list the log from (every file of ``version`` sorts at or after it)."""
    return f"{version:020d}"


@dataclass(frozen=True, slots=True)
class LastCheckpoint:
    """The ``_last_checkpoint`` hint: where the newest checkpoint is, as its writer saw it."""

    version: int
    size: int | None = None
    parts: int | None = None
    size_in_bytes: int | None = None
    num_of_add_files: int | None = None
    checksum: str | None = None
    raw: Mapping[str, Any] | None = None

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> LastCheckpoint:
        version = payload["version"]
        if not isinstance(version, int) or isinstance(version, bool) or not 0 <= version < 2**63:
            raise ValueError(f"version must be a non-negative long, got {version!r}")
        parts = payload.get("parts")
        return cls(
            version=version,
            size=payload.get("size"),
            parts=int(parts) if parts is not None else None,
            size_in_bytes=payload.get("sizeInBytes"),
            num_of_add_files=payload.get("numOfAddFiles"),
            checksum=payload.get("checksum"),
            raw=dict(payload),
        )


def parse_last_checkpoint(data: bytes, *, path: str) -> LastCheckpoint | None:
    """Parse ``_last_checkpoint`` content; None (with a warning) when it is empty or corrupt.

    A bad hint is never fatal: readers fall back to listing the log, as Delta does.
    """
    try:
        payload = json.loads(data)
        if not isinstance(payload, dict):
            raise ValueError("not a JSON object")
        return LastCheckpoint.from_json(payload)
    except (ValueError, KeyError, TypeError) as err:
        log.warning("Ignoring %s: %s; listing the log instead.", path, err or "empty file")
        return None
