"""Typed models of the log's small actions, and their JSON form.

File actions (``add``/``remove``) are read columnar (see :mod:`.replay`); the
dataclasses for them here exist for writers, which build a handful per commit.
``from_json`` refuses a payload that :func:`~.action_checks.action_problem` finds malformed;
``validate()`` refuses a value a writer set that does not fit its Delta type (see
:func:`~.validation.validate_actions`, which runs it on every action of a commit).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import CorruptLogError, InvalidLogValueError, SchemaError, shorten
from airflow_delta_provider.core.protocol.action_checks import check_action
from airflow_delta_provider.core.protocol.delta_types import (
    INT_MAX,
    LONG_MAX,
    LONG_MIN,
    check_integer,
    check_string,
    show_value,
)
from airflow_delta_provider.core.protocol.schema_json import parse_schema_string
from airflow_delta_provider.core.protocol.table_config import TableConfig

if TYPE_CHECKING:
    from collections.abc import Mapping

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


#: One encoder for every line: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)


def dumps(payload: Mapping[str, Any]) -> str:
    """Compact JSON, the way Delta writers serialise one action per line."""
    return _ENCODER.encode(payload)


@dataclass(frozen=True, slots=True)
class Protocol:
    """The ``protocol`` action: versions and, at reader 3 / writer 7, explicit features."""

    min_reader_version: int
    min_writer_version: int
    reader_features: frozenset[str] | None = None
    writer_features: frozenset[str] | None = None

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Protocol:
        """The action from its JSON object.

        :raises ProtocolError: a field is missing or has the wrong type (see
            :func:`~.action_checks.action_problem`).
        """
        check_action("protocol", payload)
        reader = payload.get("readerFeatures")
        writer = payload.get("writerFeatures")
        return cls(
            min_reader_version=payload["minReaderVersion"],
            min_writer_version=payload["minWriterVersion"],
            reader_features=frozenset(reader) if reader is not None else None,
            writer_features=frozenset(writer) if writer is not None else None,
        )

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

    def validate(self) -> None:
        """Refuse values that do not fit the protocol's types (see :func:`~.validation.validate_actions`)."""
        check_integer("protocol.minReaderVersion", self.min_reader_version, 1, INT_MAX, "integer")
        check_integer("protocol.minWriterVersion", self.min_writer_version, 1, INT_MAX, "integer")
        for name, features in (
            ("readerFeatures", self.reader_features),
            ("writerFeatures", self.writer_features),
        ):
            for feature in features or ():
                check_string(f"protocol.{name}", feature)


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
    #: where the action was read (``line 3 of <commit URI>``), for errors found later; not
    #: part of the action.
    origin: str | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_json(cls, payload: Mapping[str, Any], *, origin: str | None = None) -> Metadata:
        """The action from its JSON object.

        :param origin: where it was read, named by errors found later (the schema is parsed lazily).
        :raises CorruptLogError: a field is missing or has the wrong type (see
            :func:`~.action_checks.action_problem`).
        """
        check_action("metaData", payload)
        fmt = payload.get("format") or {}
        return cls(
            id=payload["id"],
            schema_string=payload["schemaString"],
            partition_columns=tuple(payload["partitionColumns"]),
            configuration=dict(payload["configuration"]),
            name=payload.get("name"),
            description=payload.get("description"),
            format_provider=fmt.get("provider") or "parquet",
            format_options=dict(fmt.get("options") or {}),
            created_time=payload.get("createdTime"),
            origin=origin,
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

    def validate(self) -> None:
        """Refuse values that do not fit the metaData action's types (see
        :func:`~.validation.validate_actions`)."""
        check_string("metaData.id", self.id)
        check_string("metaData.schemaString", self.schema_string)
        for column in self.partition_columns:
            check_string("metaData.partitionColumns", column)
        for key, value in self.configuration.items():
            check_string("metaData.configuration key", key)
            if value is not None and not isinstance(value, str):
                raise InvalidLogValueError(
                    f"metaData.configuration[{key!r}] must be a string, got {show_value(value)}."
                )
        if self.created_time is not None:
            check_integer("metaData.createdTime", self.created_time)

    @cached_property
    def config(self) -> TableConfig:
        """The table's own properties, typed: Delta's view, without provider defaults
        (``Snapshot.config`` adds them; ``TableConfig.table_only`` comes back here)."""
        return TableConfig(self.configuration)

    @cached_property
    def schema_json(self) -> dict[str, Any]:
        """``schemaString`` parsed, once: the struct type's JSON object (not to be modified).

        :raises CorruptLogError: it is not the JSON of a struct type (naming where the action was
            read, when known).
        :raises SchemaError: its types nest deeper than :data:`~.schema_json.MAX_SCHEMA_DEPTH`.
        """
        try:
            parsed = parse_schema_string(self.schema_string)
        except SchemaError:
            raise
        except ValueError as err:
            problem = f"is not valid JSON ({err})"
        else:
            if isinstance(parsed, dict) and parsed.get("type") == "struct":
                return parsed
            problem = "is not the JSON of a struct type"
        where = f" ({self.origin})" if self.origin else ""
        raise CorruptLogError(
            f"The metaData action{where} is malformed: its schemaString {problem}: "
            f"{shorten(repr(self.schema_string))}. The log is corrupt."
        )

    @cached_property
    def schema(self) -> pa.Schema:
        """The logical table schema as pyarrow.

        :raises CorruptLogError: ``schemaString`` is not the JSON of a struct type (naming where
            the action was read, when known).
        :raises SchemaError: the schema uses a type this core does not support, or nests deeper
            than :data:`~.schema_json.MAX_SCHEMA_DEPTH`.
        """
        # Here, not at the top: the schema module imports pyarrow, which the Airflow entry points
        # (they import the actions) must not.
        from airflow_delta_provider.core.protocol.schema import schema_from_delta

        return schema_from_delta(self.schema_json)


@dataclass(frozen=True, slots=True)
class Transaction:
    """The ``txn`` action (Delta's SetTransaction): the last version an application committed."""

    app_id: str
    version: int
    last_updated: int | None = None

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Transaction:
        """The action from its JSON object.

        :raises CorruptLogError: a field is missing or has the wrong type (see
            :func:`~.action_checks.action_problem`).
        """
        check_action("txn", payload)
        return cls(
            app_id=payload["appId"], version=payload["version"], last_updated=payload.get("lastUpdated")
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            out["lastUpdated"] = self.last_updated
        return out

    def validate(self) -> None:
        """Refuse values that do not fit the txn action's types (see :func:`~.validation.validate_actions`).

        Delta's ``txnVersion`` is a non-negative long; ``lastUpdated`` a long (ms).
        """
        check_string("txn.appId (app_id)", self.app_id)
        check_integer(f"txn.version (app_version) of application {self.app_id!r}", self.version, 0)
        if self.last_updated is not None:
            check_integer(f"txn.lastUpdated of application {self.app_id!r}", self.last_updated)


@dataclass(frozen=True, slots=True)
class DomainMetadata:
    """The ``domainMetadata`` action; ``removed=True`` is a tombstone for the domain."""

    domain: str
    configuration: str
    removed: bool = False

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> DomainMetadata:
        """The action from its JSON object.

        :raises CorruptLogError: a field is missing or has the wrong type (see
            :func:`~.action_checks.action_problem`).
        """
        check_action("domainMetadata", payload)
        return cls(
            domain=payload["domain"], configuration=payload["configuration"], removed=payload["removed"]
        )

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}

    def validate(self) -> None:
        """Refuse values that do not fit the domainMetadata action's types."""
        check_string("domainMetadata.domain", self.domain)
        if not isinstance(self.configuration, str):
            raise InvalidLogValueError(
                f"domainMetadata.configuration of {self.domain!r} must be a string, got "
                f"{show_value(self.configuration)}."
            )


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

    def validate(self) -> None:
        """Refuse numbers that do not fit the add action's types. Partition values and stats
        need the table schema: :func:`~.validation.validate_actions` checks them."""
        if (  # the common case, checked without building a message
            type(self.path) is str
            and self.path
            and type(self.size) is int
            and 0 <= self.size <= LONG_MAX
            and type(self.modification_time) is int
            and LONG_MIN <= self.modification_time <= LONG_MAX
            and self.deletion_vector is None
            and self.base_row_id is None
            and self.default_row_commit_version is None
        ):
            return
        check_string("add.path", self.path)
        where = f"of {self.path!r}"
        check_integer(f"add.size {where}", self.size, 0)
        check_integer(f"add.modificationTime {where}", self.modification_time)
        _check_file_numbers(
            "add", where, self.deletion_vector, self.base_row_id, self.default_row_commit_version
        )


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

    def validate(self) -> None:
        """Refuse numbers that do not fit the remove action's types (its partition values are
        copied from the add it removes, so they are not re-checked against the schema)."""
        check_string("remove.path", self.path)
        where = f"of {self.path!r}"
        check_integer(f"remove.deletionTimestamp {where}", self.deletion_timestamp)
        if self.size is not None:
            check_integer(f"remove.size {where}", self.size, 0)
        _check_file_numbers(
            "remove", where, self.deletion_vector, self.base_row_id, self.default_row_commit_version
        )


@dataclass(frozen=True)
class AddCDCFile:
    """A ``cdc`` action: a file of change rows (Change Data Feed) a data-changing commit wrote
    beside its adds and removes. It never changes the table's data (``dataChange`` is false)."""

    path: str
    partition_values: Mapping[str, str | None]
    size: int
    tags: Mapping[str, str] | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "path": self.path,
            "partitionValues": dict(self.partition_values),
            "size": self.size,
            "dataChange": False,
        }
        if self.tags:
            out["tags"] = dict(self.tags)
        return out

    def validate(self) -> None:
        """Refuse values that do not fit the cdc action's types."""
        check_string("cdc.path", self.path)
        check_integer(f"cdc.size of {self.path!r}", self.size, 0)


def _check_file_numbers(
    kind: str, where: str, deletion_vector: Mapping[str, Any] | None, base_row_id: Any, commit_version: Any
) -> None:
    if base_row_id is not None:
        check_integer(f"{kind}.baseRowId {where}", base_row_id, 0)
    if commit_version is not None:
        check_integer(f"{kind}.defaultRowCommitVersion {where}", commit_version, 0)
    if deletion_vector is not None:
        for key, minimum, maximum, type_name in (
            ("offset", 0, INT_MAX, "integer"),
            ("sizeInBytes", 0, INT_MAX, "integer"),
            ("cardinality", 0, LONG_MAX, "long"),
        ):
            if deletion_vector.get(key) is not None:
                check_integer(
                    f"{kind}.deletionVector.{key} {where}", deletion_vector[key], minimum, maximum, type_name
                )
