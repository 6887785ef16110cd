"""Typed models of the log's small actions, and their JSON form.

File actions (``add``/``remove``) are read columnar (see :mod:`.replay`); the
dataclasses for them here exist for writers, which build a handful per commit.
Unknown fields and unknown actions in the log are tolerated everywhere, as the
protocol asks of readers; a field the protocol defines must have its type.
:func:`action_problem` is the one check of that, per action and field (see the end
of this module): readers name the file and line of the action it refuses.

Writers go the other way through one gate: :func:`validate_actions` checks every value
an action would put into the log against its Delta type (``long`` versions, sizes and
timestamps, partition values against their column's type, the numbers and bounds inside
``add.stats``) before anything is serialised, so no reader or checkpoint later fails on
what this core wrote. :class:`~.transaction.OptimisticTransaction` runs it on every commit
(writes, CREATE, VACUUM records).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import (
    CorruptLogError,
    InvalidLogValueError,
    InvalidPartitionValueError,
    ProtocolError,
)
from airflow_delta_provider.core.paths import escapes_root

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

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
        """The action from its JSON object.

        :raises ProtocolError: a field is missing or has the wrong type (see :func:`action_problem`).
        """
        _check_payload("protocol", payload)
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
        """Refuse values that do not fit the protocol's types (see :func:`validate_actions`)."""
        check_integer("protocol.minReaderVersion", self.min_reader_version, 1, INT_MAX, "integer")
        check_integer("protocol.minWriterVersion", self.min_writer_version, 1, INT_MAX, "integer")
        for name, features in (
            ("readerFeatures", self.reader_features),
            ("writerFeatures", self.writer_features),
        ):
            for feature in features or ():
                _check_string(f"protocol.{name}", feature)


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
        :raises CorruptLogError: a field is missing or has the wrong type (see :func:`action_problem`).
        """
        _check_payload("metaData", payload)
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
        """Refuse values that do not fit the metaData action's types (see :func:`validate_actions`)."""
        _check_string("metaData.id", self.id)
        _check_string("metaData.schemaString", self.schema_string)
        for column in self.partition_columns:
            _check_string("metaData.partitionColumns", column)
        for key, value in self.configuration.items():
            _check_string("metaData.configuration key", key)
            if value is not None and not isinstance(value, str):
                raise InvalidLogValueError(
                    f"metaData.configuration[{key!r}] must be a string, got {_show(value)}."
                )
        if self.created_time is not None:
            check_integer("metaData.createdTime", self.created_time)

    @cached_property
    def schema(self) -> pa.Schema:
        """The logical table schema as pyarrow.

        :raises CorruptLogError: ``schemaString`` is not the JSON of a struct type (naming where
            the action was read, when known).
        :raises SchemaError: the schema uses a type this core does not support.
        """
        from airflow_delta_provider.core.schema import schema_from_delta

        try:
            parsed = json.loads(self.schema_string)
        except ValueError as err:
            problem = f"is not valid JSON ({err})"
        else:
            if isinstance(parsed, dict) and parsed.get("type") == "struct":
                return schema_from_delta(parsed)
            problem = "is not the JSON of a struct type"
        where = f" ({self.origin})" if self.origin else ""
        raise CorruptLogError(
            f"The metaData action{where} is malformed: its schemaString {problem}: "
            f"{_short(repr(self.schema_string))}. The log is corrupt."
        )


@dataclass(frozen=True, slots=True)
class Transaction:
    """The ``txn`` action (Delta's SetTransaction): the last version an application committed."""

    app_id: str
    version: int
    last_updated: int | None = None

    @classmethod
    def from_json(cls, payload: Mapping[str, Any]) -> Transaction:
        """The action from its JSON object.

        :raises CorruptLogError: a field is missing or has the wrong type (see :func:`action_problem`).
        """
        _check_payload("txn", payload)
        return cls(
            app_id=payload["appId"], version=payload["version"], last_updated=payload.get("lastUpdated")
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"appId": self.app_id, "version": self.version}
        if self.last_updated is not None:
            out["lastUpdated"] = self.last_updated
        return out

    def validate(self) -> None:
        """Refuse values that do not fit the txn action's types (see :func:`validate_actions`).

        Delta's ``txnVersion`` is a non-negative long; ``lastUpdated`` a long (ms).
        """
        _check_string("txn.appId (app_id)", self.app_id)
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

        :raises CorruptLogError: a field is missing or has the wrong type (see :func:`action_problem`).
        """
        _check_payload("domainMetadata", payload)
        return cls(
            domain=payload["domain"], configuration=payload["configuration"], removed=payload["removed"]
        )

    def to_json(self) -> dict[str, Any]:
        return {"domain": self.domain, "configuration": self.configuration, "removed": self.removed}

    def validate(self) -> None:
        """Refuse values that do not fit the domainMetadata action's types."""
        _check_string("domainMetadata.domain", self.domain)
        if not isinstance(self.configuration, str):
            raise InvalidLogValueError(
                f"domainMetadata.configuration of {self.domain!r} must be a string, got "
                f"{_show(self.configuration)}."
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
        need the table schema: :func:`validate_actions` checks them."""
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
        _check_string("add.path", self.path)
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
        _check_string("remove.path", self.path)
        where = f"of {self.path!r}"
        check_integer(f"remove.deletionTimestamp {where}", self.deletion_timestamp)
        if self.size is not None:
            check_integer(f"remove.size {where}", self.size, 0)
        _check_file_numbers(
            "remove", where, self.deletion_vector, self.base_row_id, self.default_row_commit_version
        )


# --- validation of what goes into the log -------------------------------------------------

LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1
INT_MIN, INT_MAX = -(2**31), 2**31 - 1
#: Delta's integer types and their ranges.
INTEGER_RANGES = {
    "byte": (-(2**7), 2**7 - 1),
    "short": (-(2**15), 2**15 - 1),
    "integer": (INT_MIN, INT_MAX),
    "long": (LONG_MIN, LONG_MAX),
}
_FLOAT_MAX = {"float": Decimal("3.4028234663852886e38"), "double": Decimal("1.7976931348623157e308")}


def check_integer(
    field: str,
    value: Any,
    minimum: int = LONG_MIN,
    maximum: int = LONG_MAX,
    type_name: str = "long",
) -> int:
    """``value`` if it is an integer in ``[minimum, maximum]`` (by default a Delta ``long``).

    :param field: what the value is, for the message (``txn.version (app_version)`` ...).
    :raises InvalidLogValueError: naming the field, the value and the allowed range.
    """
    kind = f"a {'non-negative ' if minimum == 0 else ''}Delta {type_name}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidLogValueError(
            f"{field} must be an integer ({kind}, {minimum} to {maximum}), got {_show(value)}."
        )
    if not minimum <= value <= maximum:
        raise InvalidLogValueError(
            f"{field} is {value}, outside the allowed range of {kind}: {minimum} to {maximum}."
        )
    return value


def validate_actions(actions: Iterable[Any], metadata: Metadata) -> None:
    """Check every value ``actions`` would write against its Delta type, before serialisation.

    The one gate for numbers and typed strings in the log: versions, sizes and timestamps
    are ``long`` (sizes and txn versions non-negative), protocol versions ``integer``;
    ``add.partitionValues`` must name exactly the partition columns and parse as their
    types (integer ranges, dates, timestamps, decimal precision); ``add.stats`` must be a
    JSON object whose ``numRecords`` and ``nullCount`` are non-negative longs and whose
    ``minValues`` / ``maxValues`` fit the columns' types.

    :param metadata: the table's metadata after the commit (the schema values are checked against).
    :raises InvalidLogValueError: naming the field, the value and the allowed range
        (:class:`~.errors.InvalidPartitionValueError` for partition values).
    """
    adds = []
    for action in actions:
        action.validate()
        if isinstance(action, AddFile):
            adds.append(action)
    if not adds:
        return
    types = LogTypes(metadata)
    types.check_partition_values((a.path, a.partition_values) for a in adds)
    types.check_stats([(a.path, a.stats) for a in adds if a.stats is not None])


def validate_commit_info(info: Mapping[str, Any]) -> None:
    """The numbers a commitInfo carries: ``timestamp``, ``inCommitTimestamp``, ``readVersion``."""
    for key in ("timestamp", "inCommitTimestamp"):
        if info.get(key) is not None:
            check_integer(f"commitInfo.{key}", info[key])
    if info.get("readVersion") is not None:
        check_integer("commitInfo.readVersion", info["readVersion"], 0)


class LogTypes:
    """The Delta types of a table's partition columns and stats columns, from its metadata."""

    def __init__(self, metadata: Metadata) -> None:
        try:
            schema = json.loads(metadata.schema_string)
            fields = schema["fields"]
        except (ValueError, TypeError, KeyError):
            raise InvalidLogValueError(
                f"metaData.schemaString is not a Delta schema: {metadata.schema_string[:200]!r}."
            ) from None
        self.columns: dict[str, Any] = _type_tree(fields)
        by_key = {name.lower(): name for name in self.columns}
        self.partition_types: dict[str, Any] = {}
        for column in metadata.partition_columns:
            name = column if column in self.columns else by_key.get(column.lower())
            if name is None:
                raise InvalidLogValueError(
                    f"metaData.partitionColumns names {column!r}, which is not in the schema "
                    f"({list(self.columns)})."
                )
            self.partition_types[column] = self.columns[name]

    # --- partition values ---------------------------------------------------------------

    def check_partition_values(self, items: Iterable[tuple[str, Mapping[str, Any] | None]]) -> None:
        """Each ``(where, partitionValues)``: exactly the partition columns, values parsing as their types.

        :param items: ``where`` names the file in messages.
        :raises InvalidPartitionValueError: a column is missing or unknown, or a value does not fit.
        """
        from airflow_delta_provider.core.partitions import parse_partition_value

        expected = set(self.partition_types)
        checked: set[tuple[str, Any]] = set()
        for where, values in items:
            values = values or {}
            if set(values) != expected:
                raise InvalidPartitionValueError(
                    f"{where}: partitionValues {dict(values)!r} must name exactly the partition columns "
                    f"{sorted(expected)}."
                )
            for column, value in values.items():
                if (column, value) in checked:
                    continue
                delta_type = self.partition_types[column]
                if value is not None and not isinstance(value, str):
                    raise InvalidPartitionValueError(
                        f"{where}: partition value {value!r} of column {column!r} must be a string (the "
                        f"log stores partition values as strings) or None."
                    )
                try:
                    parse_partition_value(value, delta_type, column=column)
                except CorruptLogError as err:
                    reason = str(err).rsplit(f"not a valid {delta_type}: ", 1)[-1]
                    limits = INTEGER_RANGES.get(delta_type) if isinstance(delta_type, str) else None
                    allowed = f" (allowed: {limits[0]} to {limits[1]})" if limits else ""
                    raise InvalidPartitionValueError(
                        f"{where}: partition value {value!r} of column {column!r} is not a valid "
                        f"{delta_type}: {reason}{allowed}."
                    ) from None
                checked.add((column, value))

    # --- statistics ----------------------------------------------------------------------

    def check_stats(self, items: Sequence[tuple[str, str]]) -> None:
        """Each ``(where, stats JSON)``: an object whose numbers fit their columns' types.

        :raises InvalidLogValueError: naming the file, the stats field and the value.
        """
        if not items:
            return
        for (where, _), stats in zip(items, _parse_stats(items), strict=True):
            if self._stats_ok(stats):
                continue  # the common case, checked without building a message
            if not isinstance(stats, dict):
                raise InvalidLogValueError(
                    f"add.stats of {where!r} must be a JSON object, got {_show(stats)}."
                )
            records = stats.get("numRecords")
            if records is not None:
                check_integer(f"add.stats.numRecords of {where!r}", records, 0)
            for key in ("minValues", "maxValues"):
                if stats.get(key) is not None:
                    self._check_bounds(stats[key], self.columns, f"add.stats.{key}", where)
            if stats.get("nullCount") is not None:
                _check_null_counts(stats["nullCount"], "add.stats.nullCount", where, records)
            if "tightBounds" in stats and not isinstance(stats["tightBounds"], bool):
                raise InvalidLogValueError(
                    f"add.stats.tightBounds of {where!r} must be true or false, got "
                    f"{_show(stats['tightBounds'])}."
                )

    def _stats_ok(self, stats: Any) -> bool:
        """Whether ``stats`` passes every check of :meth:`check_stats` (fast, no messages)."""
        if type(stats) is not dict:
            return False
        records = stats.get("numRecords", 0)
        if type(records) is not int or not 0 <= records <= LONG_MAX:
            return False
        for key in ("minValues", "maxValues"):
            values = stats.get(key)
            if values is not None and not _bounds_ok(values, self.checkers):
                return False
        counts = stats.get("nullCount")
        if counts is not None and not _counts_ok(counts, records if "numRecords" in stats else LONG_MAX):
            return False
        return "tightBounds" not in stats or type(stats["tightBounds"]) is bool

    @cached_property
    def checkers(self) -> dict[str, Any]:
        """Per stats column: a predicate on a bound (``{child: ...}`` for structs)."""

        def plan(tree: Mapping[str, Any]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for name, delta_type in tree.items():
                if isinstance(delta_type, dict):
                    out[name] = plan(delta_type)
                elif delta_type in INTEGER_RANGES:
                    low, high = INTEGER_RANGES[delta_type]
                    out[name] = lambda value, low=low, high=high: type(value) is int and low <= value <= high
                elif delta_type in ("string", "binary"):
                    out[name] = lambda value: type(value) is str
                elif isinstance(delta_type, str):
                    out[name] = lambda value, t=delta_type: _bound_problem(value, t) is None
            return out

        return plan(self.columns)

    def _check_bounds(self, values: Any, types: Mapping[str, Any], field: str, where: str) -> None:
        if not isinstance(values, dict):
            raise InvalidLogValueError(f"{field} of {where!r} must be a JSON object, got {_show(values)}.")
        for name, value in values.items():
            delta_type = types.get(name)
            path = f"{field}.{name}"
            if delta_type is None or value is None:
                continue  # readers ignore columns they do not know
            if isinstance(delta_type, dict):
                self._check_bounds(value, delta_type, path, where)
            else:
                _check_bound(value, delta_type, path, where)


def _type_tree(fields: list[dict[str, Any]]) -> dict[str, Any]:
    """``{name: primitive type name | {child: ...}}``; arrays and maps map to ``"nested"``."""
    tree: dict[str, Any] = {}
    for item in fields:
        delta_type = item.get("type") if isinstance(item, dict) else None
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str):
            continue
        if isinstance(delta_type, dict):
            tree[name] = (
                _type_tree(delta_type.get("fields") or []) if delta_type.get("type") == "struct" else "nested"
            )
        else:
            tree[name] = delta_type
    return tree


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _parse_stats(items: Sequence[tuple[str, str]]) -> list[Any]:
    """The stats objects, parsed in one call (decimals exactly); naming the file of a bad one."""
    texts = [text for _, text in items]
    options: dict[str, Any] = {"parse_float": Decimal, "parse_constant": _reject_constant}
    try:
        parsed = json.loads("[" + ",".join(texts) + "]", **options)
        if isinstance(parsed, list) and len(parsed) == len(texts):
            return parsed
    except (ValueError, TypeError):
        pass
    out = []
    for where, text in items:
        if not isinstance(text, str):
            raise InvalidLogValueError(f"add.stats of {where!r} must be a JSON string, got {_show(text)}.")
        try:
            out.append(json.loads(text, **options))
        except ValueError as err:
            raise InvalidLogValueError(
                f"add.stats of {where!r} is not valid JSON ({err}): {text[:200]!r}."
            ) from None
    return out


def _bounds_ok(values: Any, checkers: Mapping[str, Any]) -> bool:
    if type(values) is not dict:
        return False
    for name, value in values.items():
        check = checkers.get(name)
        if check is None or value is None:
            continue
        if isinstance(check, dict):
            if not _bounds_ok(value, check):
                return False
        elif not check(value):
            return False
    return True


def _counts_ok(counts: Any, records: int) -> bool:
    if type(counts) is int:
        return 0 <= counts <= records
    if type(counts) is not dict:
        return False
    return all(_counts_ok(value, records) for value in counts.values())


def _check_bound(value: Any, delta_type: str, field: str, where: str) -> None:
    """One min/max value against its column's Delta type."""
    problem = _bound_problem(value, delta_type)
    if problem is not None:
        raise InvalidLogValueError(f"{field} of {where!r} {problem}.")


def _bound_problem(value: Any, delta_type: str) -> str | None:
    """None when ``value`` is a valid bound of a ``delta_type`` column, else what is wrong."""
    if delta_type in INTEGER_RANGES:
        low, high = INTEGER_RANGES[delta_type]
        if type(value) is int and low <= value <= high:
            return None
        if type(value) is not int:
            return f"must be an integer (a Delta {delta_type}, {low} to {high}), got {_show(value)}"
        return f"is {value}, outside the allowed range of a Delta {delta_type}: {low} to {high}"
    if delta_type in _FLOAT_MAX:
        limit = _FLOAT_MAX[delta_type]
        if type(value) not in (int, Decimal) or not Decimal(value).is_finite():
            return f"must be a finite number (a Delta {delta_type}), got {_show(value)}"
        if abs(Decimal(value)) > limit:
            return f"is {value}, outside the allowed range of a Delta {delta_type}: -{limit} to {limit}"
        return None
    if delta_type.startswith("decimal("):
        return _decimal_problem(value, delta_type)
    if delta_type in ("string", "binary"):
        return None if type(value) is str else f"must be a string, got {_show(value)}"
    if delta_type == "date":
        if type(value) is str and _parses(dt.date.fromisoformat, value):
            return None
        return f"must be a date 'YYYY-MM-DD', got {_show(value)}"
    if delta_type in ("timestamp", "timestamp_ntz"):
        if type(value) is str and _parses(dt.datetime.fromisoformat, value):
            return None
        return f"must be an ISO-8601 timestamp ('2024-01-01T00:00:00.000Z'), got {_show(value)}"
    if delta_type == "boolean" and type(value) is not bool:
        return f"must be true or false, got {_show(value)}"
    return None


def _decimal_problem(value: Any, delta_type: str) -> str | None:
    precision, _, scale = delta_type[len("decimal(") : -1].partition(",")
    try:
        p, s = int(precision), int(scale)
        number = Decimal(value) if type(value) in (int, Decimal) else None
    except (ValueError, InvalidOperation):
        number = None
        p = s = 0
    if number is None or not number.is_finite():
        return f"must be a number (a Delta {delta_type}), got {_show(value)}"
    digits = number.normalize().as_tuple()
    exponent = int(digits.exponent)
    fraction = max(0, -exponent)
    integral = max(0, len(digits.digits) + exponent) if number != 0 else 0
    if fraction > s or integral > p - s:
        return (
            f"is {value}, which does not fit a Delta {delta_type} (at most {p - s} digits before the "
            f"point and {s} after)"
        )
    return None


def _check_null_counts(counts: Any, field: str, where: str, records: Any) -> None:
    if isinstance(counts, dict):
        for name, value in counts.items():
            _check_null_counts(value, f"{field}.{name}", where, records)
        return
    maximum = records if isinstance(records, int) and not isinstance(records, bool) else LONG_MAX
    check_integer(f"{field} of {where!r}", counts, 0, maximum, "long (at most numRecords)")


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


def _check_string(field: str, value: Any) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidLogValueError(f"{field} must be a non-empty string, got {_show(value)}.")


def _parses(parse: Any, text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True


def _show(value: Any) -> str:
    text = repr(value)
    return (text[:200] + "...") if len(text) > 200 else f"{text} ({type(value).__name__})"


# --- reading: the one check of an action read from the log --------------------------------

#: Delta's ``long`` (signed 64-bit) and ``int`` (signed 32-bit) ranges.


class _Malformed(Exception):
    """A field breaks the protocol; the message names the field and its value (no location)."""


def action_problem(action: Any) -> str | None:
    """What is wrong with one parsed log line, or None when it is a well-formed line.

    Every field the protocol defines for an action (and the core reads) must have its
    type and fit its Delta type: required fields present and not null, integers as JSON
    integers within ``long`` (or ``int``) range, sizes not negative, maps of strings,
    relative paths that stay under their base directory. Unknown actions and unknown fields
    are not checked, as the protocol asks; a line holding two known actions is refused.

    :param action: the line as ``json.loads`` returned it.
    """
    if type(action) is not dict:
        return f"the line is {_describe(action)}, not a JSON object holding an action"
    if len(action) == 1:
        ((kind, payload),) = action.items()
        check = _CHECKS.get(kind)
        if check is None:
            return None
    else:
        kinds = [k for k in action if k in _CHECKS]
        if not kinds:
            return None
        if len(kinds) > 1:
            return f"the line holds {len(kinds)} actions ({', '.join(kinds)}); a line holds one action"
        kind = kinds[0]
        payload, check = action[kind], _CHECKS[kind]
    if type(payload) is not dict:
        return f"the {kind} action is {_describe(payload)}, not an object"
    try:
        check(payload)
    except _Malformed as err:
        return str(err)
    return None


def _check_payload(kind: str, payload: Any) -> None:
    problem = action_problem({kind: payload})
    if problem is not None:
        error = ProtocolError if kind == "protocol" else CorruptLogError
        raise error(f"Invalid {kind} action: {problem}. The log is corrupt.")


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _describe(value: Any) -> str:
    if value is None:
        return "null"
    if value is True or value is False:
        return f"the boolean {str(value).lower()}"
    if isinstance(value, float):
        return f"the number {_short(repr(value))} (not an integer)"
    if isinstance(value, int):
        return f"the integer {_short(str(value))}"
    if isinstance(value, str):
        return f"the string {_short(repr(value))}"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return _short(repr(value))


def _missing(payload: Mapping[str, Any], where: str, key: str) -> _Malformed:
    return _Malformed(f"{where}.{key} is {'null' if key in payload else 'missing'}")


def _wrong(where: str, key: str, expected: str, value: Any) -> _Malformed:
    return _Malformed(f"{where}.{key} must be {expected}, got {_describe(value)}")


def _field(
    payload: Mapping[str, Any], where: str, key: str, required: bool, json_type: type, expected: str
) -> Any:
    """The field's value checked for its JSON type; None when it is absent (or null) and optional."""
    value = payload.get(key)
    if value is None:
        if required:
            raise _missing(payload, where, key)
        return None
    if type(value) is not json_type:
        raise _wrong(where, key, expected, value)
    return value


def _long(
    payload: Mapping[str, Any],
    where: str,
    key: str,
    *,
    required: bool = False,
    minimum: int = LONG_MIN,
    maximum: int = LONG_MAX,
    kind: str = "long",
) -> None:
    value = _field(payload, where, key, required, int, f"an integer (a Delta {kind})")
    if value is not None and not minimum <= value <= maximum:
        raise _Malformed(
            f"{where}.{key} is {_short(str(value))}, which does not fit: it must be a Delta {kind} "
            f"from {minimum} to {maximum}"
        )


def _int(
    payload: Mapping[str, Any], where: str, key: str, *, required: bool = False, minimum: int = INT_MIN
) -> None:
    _long(payload, where, key, required=required, minimum=minimum, maximum=INT_MAX, kind="int")


def _string(payload: Mapping[str, Any], where: str, key: str, *, required: bool = False) -> None:
    _field(payload, where, key, required, str, "a string")


def _bool(payload: Mapping[str, Any], where: str, key: str, *, required: bool = False) -> None:
    _field(payload, where, key, required, bool, "true or false")


def _string_map(payload: Mapping[str, Any], where: str, key: str, *, required: bool = False) -> None:
    value = _field(payload, where, key, required, dict, "an object of strings")
    for name, item in (value or {}).items():
        if item is not None and type(item) is not str:
            raise _Malformed(
                f"{where}.{key}[{_short(repr(name))}] must be a string or null, got {_describe(item)}"
            )


def _string_list(payload: Mapping[str, Any], where: str, key: str, *, required: bool = False) -> None:
    for item in _field(payload, where, key, required, list, "a list of strings") or ():
        if type(item) is not str:
            raise _Malformed(f"{where}.{key} must hold strings only, got {_describe(item)}")


def _path(payload: Mapping[str, Any], where: str, key: str) -> None:
    value = payload.get(key)
    if value is None:
        raise _missing(payload, where, key)
    if type(value) is not str or not value:
        raise _wrong(where, key, "a non-empty string", value)
    if escapes_root(value):
        raise _Malformed(
            f"{where}.{key} {_short(repr(value))} is relative and leads out of the table root through "
            f"'..'; the core never reads outside the table root"
        )


def _deletion_vector(payload: Mapping[str, Any], where: str) -> None:
    dv = payload.get("deletionVector")
    if dv is None:
        return
    where = f"{where}.deletionVector"
    if type(dv) is not dict:
        raise _Malformed(f"{where} must be an object, got {_describe(dv)}")
    storage_type = dv.get("storageType")
    if storage_type not in ("u", "i", "p"):
        raise _Malformed(f"{where}.storageType must be 'u', 'i' or 'p', got {_describe(storage_type)}")
    _string(dv, where, "pathOrInlineDv", required=True)
    _int(dv, where, "offset", minimum=0)
    _int(dv, where, "sizeInBytes", required=True, minimum=0)
    _long(dv, where, "cardinality", required=True, minimum=0)
    _long(dv, where, "maxRowIndex")
    value = dv["pathOrInlineDv"]
    if storage_type == "u":
        # <random prefix><20-character Z85 UUID>: the file is <root>/<prefix>/deletion_vector_<uuid>.bin
        if len(value) < 20:
            raise _Malformed(f"{where}.pathOrInlineDv {_short(repr(value))} is shorter than a Z85 UUID")
        escapes = escapes_root(f"{value[:-20]}/deletion_vector.bin")
    else:
        escapes = storage_type == "p" and escapes_root(value)
    if escapes:
        raise _Malformed(
            f"{where}.pathOrInlineDv {_short(repr(value))} leads out of the table root through '..'; the "
            f"core never reads outside the table root"
        )


# File actions come by the thousand: a plain one passes a few inline tests; anything else
# (or anything wrong) takes the field-by-field check, which names the problem.
def _plain_path(path: Any) -> bool:
    return (
        type(path) is str
        and path != ""
        and ((".." not in path and "%" not in path) or not escapes_root(path))
    )


def _check_add(p: Mapping[str, Any]) -> None:
    size = p.get("size")
    modified = p.get("modificationTime")
    values = p.get("partitionValues")
    plain = (
        _plain_path(p.get("path"))
        and type(size) is int
        and 0 <= size <= LONG_MAX
        and type(modified) is int
        and LONG_MIN <= modified <= LONG_MAX
        and type(p.get("dataChange")) is bool
        and type(values) is dict
    )
    if plain and values is not None:
        for value in values.values():
            if value is not None and type(value) is not str:
                plain = False
                break
    if plain and len(p) != 5:
        stats = p.get("stats")
        provider = p.get("clusteringProvider")
        plain = (
            (stats is None or type(stats) is str)
            and (provider is None or type(provider) is str)
            and p.get("tags") is None
            and p.get("deletionVector") is None
            and p.get("baseRowId") is None
            and p.get("defaultRowCommitVersion") is None
        )
    if plain:
        return
    _path(p, "add", "path")
    _string_map(p, "add", "partitionValues", required=True)
    _long(p, "add", "size", required=True, minimum=0)
    _long(p, "add", "modificationTime", required=True)
    _bool(p, "add", "dataChange", required=True)
    if len(p) > 5:  # more than the required fields, all present
        _string(p, "add", "stats")
        _string_map(p, "add", "tags")
        _deletion_vector(p, "add")
        _long(p, "add", "baseRowId")
        _long(p, "add", "defaultRowCommitVersion")
        _string(p, "add", "clusteringProvider")


def _check_remove(p: Mapping[str, Any]) -> None:
    deleted = p.get("deletionTimestamp")
    if (
        _plain_path(p.get("path"))
        and type(p.get("dataChange")) is bool
        and (deleted is None or (type(deleted) is int and LONG_MIN <= deleted <= LONG_MAX))
        and len(p) == 2 + ("deletionTimestamp" in p)
    ):
        return
    _path(p, "remove", "path")
    _bool(p, "remove", "dataChange", required=True)
    _long(p, "remove", "deletionTimestamp")
    if len(p) > 2 + ("deletionTimestamp" in p):  # more than the usual fields
        _bool(p, "remove", "extendedFileMetadata")
        _string_map(p, "remove", "partitionValues")
        _long(p, "remove", "size", minimum=0)
        _string(p, "remove", "stats")
        _string_map(p, "remove", "tags")
        _deletion_vector(p, "remove")
        _long(p, "remove", "baseRowId")
        _long(p, "remove", "defaultRowCommitVersion")


def _check_cdc(p: Mapping[str, Any]) -> None:
    _path(p, "cdc", "path")
    _string_map(p, "cdc", "partitionValues", required=True)
    _long(p, "cdc", "size", required=True, minimum=0)
    _bool(p, "cdc", "dataChange", required=True)
    _string_map(p, "cdc", "tags")


def _check_metadata(p: Mapping[str, Any]) -> None:
    _string(p, "metaData", "id", required=True)
    fmt = p.get("format")
    if fmt is None:
        raise _missing(p, "metaData", "format")
    if type(fmt) is not dict:
        raise _wrong("metaData", "format", "an object", fmt)
    _string(fmt, "metaData.format", "provider", required=True)
    _string_map(fmt, "metaData.format", "options")
    _string(p, "metaData", "schemaString", required=True)
    _string_list(p, "metaData", "partitionColumns", required=True)
    _string_map(p, "metaData", "configuration", required=True)
    _string(p, "metaData", "name")
    _string(p, "metaData", "description")
    _long(p, "metaData", "createdTime")


def _check_protocol(p: Mapping[str, Any]) -> None:
    _int(p, "protocol", "minReaderVersion", required=True, minimum=1)
    _int(p, "protocol", "minWriterVersion", required=True, minimum=1)
    _string_list(p, "protocol", "readerFeatures")
    _string_list(p, "protocol", "writerFeatures")


def _check_txn(p: Mapping[str, Any]) -> None:
    _string(p, "txn", "appId", required=True)
    _long(p, "txn", "version", required=True)
    _long(p, "txn", "lastUpdated")


def _check_domain_metadata(p: Mapping[str, Any]) -> None:
    _string(p, "domainMetadata", "domain", required=True)
    _string(p, "domainMetadata", "configuration", required=True)
    _bool(p, "domainMetadata", "removed", required=True)


def _check_commit_info(p: Mapping[str, Any]) -> None:
    # Free-form, but time travel reads the in-commit timestamp as a long (one per commit: cheap).
    if p.get("inCommitTimestamp") is not None:
        _long(p, "commitInfo", "inCommitTimestamp")


def _check_sidecar(p: Mapping[str, Any]) -> None:
    _path(p, "sidecar", "path")
    _long(p, "sidecar", "sizeInBytes", required=True, minimum=0)
    _long(p, "sidecar", "modificationTime", required=True)
    _string_map(p, "sidecar", "tags")


def _check_checkpoint_metadata(p: Mapping[str, Any]) -> None:
    _long(p, "checkpointMetadata", "version", required=True, minimum=0)
    _string_map(p, "checkpointMetadata", "tags")


_CHECKS: dict[str, Callable[[Mapping[str, Any]], None]] = {
    "add": _check_add,
    "remove": _check_remove,
    "metaData": _check_metadata,
    "protocol": _check_protocol,
    "txn": _check_txn,
    "commitInfo": _check_commit_info,
    "cdc": _check_cdc,
    "domainMetadata": _check_domain_metadata,
    "sidecar": _check_sidecar,
    "checkpointMetadata": _check_checkpoint_metadata,
}
