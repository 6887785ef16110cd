"""Typed models of the log's small actions, and their JSON form.

File actions (``add``/``remove``) are read columnar (see :mod:`.replay`); the
dataclasses for them here exist for writers, which build a handful per commit.
Unknown fields in the log are tolerated everywhere: ``from_json`` reads what it
knows and ignores the rest, as the protocol asks of readers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import CorruptLogError

if TYPE_CHECKING:
    import pyarrow as pa

ACTION_KINDS = (
    "add",
    "remove",
    "metaData",
    "protocol",
    "txn",
    "commitInfo",
    "cdc",
    "domainMetadata",
    "sidecar",
    "checkpointMetadata",
)


def _require(payload: Mapping[str, Any], key: str, action: str) -> Any:
    try:
        value = payload[key]
    except (KeyError, TypeError):
        raise CorruptLogError(f"The {action} action has no {key!r} field: {payload!r}") from None
    if value is None:
        raise CorruptLogError(f"The {action} action has a null {key!r} field: {payload!r}")
    return value


def dumps(payload: Mapping[str, Any]) -> str:
    """Compact JSON, the way Delta writers serialise one action per line."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Protocol:
    """The ``protocol`` action: versions and, at reader 3 / writer 7, explicit features."""

    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str] | None = None
    writer_features: frozenset[str] | None = None

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Protocol:
        reader = payload.get("readerFeatures")
        writer = payload.get("writerFeatures")
        try:
            return cls(
                min_reader_version=int(_require(payload, "minReaderVersion", "protocol")),
                min_writer_version=int(_require(payload, "minWriterVersion", "protocol")),
                reader_features=frozenset(reader) if reader is not None else None,
                writer_features=frozenset(writer) if writer is not None else None,
            )
        except (TypeError, ValueError) as err:
            raise CorruptLogError(f"Invalid protocol action {payload!r}: {err}") from None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "minReaderVersion": self.min_reader_version,
            "minWriterVersion": self.min_writer_version,
        }
        if self.reader_features is not None:
            out["readerFeatures"] = sorted(self.reader_features)
        if self.writer_features is not None:
            out["writerFeatures"] = sorted(self.writer_features)
        return out


@dataclass(frozen=True)
class Metadata:
    """The ``metaData`` action: table id, schema, partitioning and properties."""

    id: str
    schema_string: str
    partition_columns: tuple[str, ...] = ()
    configuration: Mapping[str, str] = field(default_factory=dict)
    name: str | None = None
    description: str | None = None
    format_provider: str = "parquet"
    format_options: Mapping[str, str] = field(default_factory=dict)
    created_time: int | None = None

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Metadata:
        fmt = payload.get("format") or {}
        configuration = payload.get("configuration") or {}
        partition_columns = payload.get("partitionColumns")
        if partition_columns is None:
            partition_columns = []
        if not isinstance(configuration, Mapping) or not isinstance(partition_columns, list):
            raise CorruptLogError(f"Invalid metaData action {payload!r}")
        return cls(
            id=str(_require(payload, "id", "metaData")),
            schema_string=_require(payload, "schemaString", "metaData"),
            partition_columns=tuple(partition_columns),
            configuration={str(k): v if v is None else str(v) for k, v in configuration.items()},
            name=payload.get("name"),
            description=payload.get("description"),
            format_provider=fmt.get("provider") or "parquet",
            format_options=dict(fmt.get("options") or {}),
            created_time=payload.get("createdTime"),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id}
        if self.name is not None:
            out["name"] = self.name
        if self.description is not None:
            out["description"] = self.description
        out["format"] = {"provider": self.format_provider, "options": dict(self.format_options)}
        out["schemaString"] = self.schema_string
        out["partitionColumns"] = list(self.partition_columns)
        out["configuration"] = dict(self.configuration)
        if self.created_time is not None:
            out["createdTime"] = self.created_time
        return out

    @cached_property
    def schema(self) -> pa.Schema:
        """The logical table schema as pyarrow."""
        from airflow_delta_provider.core.schema import schema_from_delta

        return schema_from_delta(self.schema_string)


@dataclass(frozen=True, slots=True)
class Transaction:
    """The ``txn`` action (Delta's SetTransaction): the last version an application committed."""

    app_id: str
    version: int
    last_updated: int | None = None

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Transaction:
        last_updated = payload.get("lastUpdated")
        return cls(
            app_id=str(_require(payload, "appId", "txn")),
            version=int(_require(payload, "version", "txn")),
            last_updated=int(last_updated) if last_updated is not None else None,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            out["lastUpdated"] = self.last_updated
        return out


@dataclass(frozen=True, slots=True)
class DomainMetadata:
    """The ``domainMetadata`` action; ``removed=True`` is a tombstone for the domain."""

    domain: str
    configuration: str
    removed: bool = False

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> DomainMetadata:
        return cls(
            domain=str(_require(payload, "domain", "domainMetadata")),
            configuration=str(payload.get("configuration") or ""),
            removed=bool(payload.get("removed", False)),
        )

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}


@dataclass(frozen=True)
class AddFile:
    """An ``add`` action, as a writer builds it."""

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    modification_time: int
    data_change: bool = True
    stats: str | None = None
    tags: Mapping[str, str] | None = None
    deletion_vector: Mapping[str, Any] | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None
    clustering_provider: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "modificationTime": self.modification_time,
            "dataChange": self.data_change,
        }
        if self.stats is not None:
            out["stats"] = self.stats
        if self.tags:
            out["tags"] = dict(self.tags)
        if self.deletion_vector is not None:
            out["deletionVector"] = dict(self.deletion_vector)
        if self.base_row_id is not None:
            out["baseRowId"] = self.base_row_id
        if self.default_row_commit_version is not None:
            out["defaultRowCommitVersion"] = self.default_row_commit_version
        if self.clustering_provider is not None:
            out["clusteringProvider"] = self.clustering_provider
        return out


@dataclass(frozen=True)
class RemoveFile:
    """A ``remove`` action (a tombstone), as a writer builds it."""

    path: str
    deletion_timestamp: int
    data_change: bool = True
    partition_values: Mapping[str, str | None] | None = None
    size: int | None = None
    stats: str | None = None
    tags: Mapping[str, str] | None = None
    deletion_vector: Mapping[str, Any] | None = None
    base_row_id: int | None = None
    default_row_commit_version: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "deletionTimestamp": self.deletion_timestamp,
            "dataChange": self.data_change,
        }
        if self.partition_values is not None:
            # extendedFileMetadata says partitionValues, size and tags are all present.
            out["extendedFileMetadata"] = True
            out["partitionValues"] = dict(self.partition_values)
            out["size"] = self.size if self.size is not None else 0
        if self.stats is not None:
            out["stats"] = self.stats
        if self.tags:
            out["tags"] = dict(self.tags)
        if self.deletion_vector is not None:
            out["deletionVector"] = dict(self.deletion_vector)
        if self.base_row_id is not None:
            out["baseRowId"] = self.base_row_id
        if self.default_row_commit_version is not None:
            out["defaultRowCommitVersion"] = self.default_row_commit_version
        return out
