"""The one gate for values written to the log: :func:`validate_actions`.

It checks every value an action would put into the log against its Delta type (``long``
versions, sizes and timestamps, partition values against their column's type, the numbers
and bounds inside ``add.stats``, the typed values inside a text field: a system domain's
configuration, a column's identity and column-mapping metadata) before anything is
serialised, so no reader or checkpoint later fails on what this core wrote.
:class:`~.transaction.OptimisticTransaction` runs it on every commit attempt (writes, CREATE,
VACUUM records). Each action's own fields are checked by its ``validate()`` (:mod:`.actions`);
what needs the table schema or a domain's shape is checked here.
"""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal, InvalidOperation
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import (
    CorruptLogError,
    InvalidLogValueError,
    InvalidPartitionValueError,
    SchemaError,
)
from airflow_delta_provider.core.protocol.actions import AddFile, DomainMetadata, Metadata
from airflow_delta_provider.core.protocol.column_mapping import (
    configured_mode,
    delta_physical_name,
    physical_delta_fields,
)
from airflow_delta_provider.core.protocol.delta_types import (
    FLOAT_MAX,
    INT_MAX,
    INTEGER_RANGES,
    LONG_MAX,
    check_integer,
    decimal_digits,
    is_integer,
    show_value,
)
from airflow_delta_provider.core.protocol.partitions import parse_partition_value
from airflow_delta_provider.core.protocol.row_tracking import MARK_KEY, ROW_TRACKING_DOMAIN
from airflow_delta_provider.core.protocol.schema import (
    COLUMN_MAPPING_ID_KEY,
    COLUMN_MAPPING_PHYSICAL_NAME_KEY,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence


def validate_actions(actions: Iterable[Any], metadata: Metadata) -> None:
    """Check every value ``actions`` would write against its Delta type, before serialisation.

    The one gate for numbers and typed strings in the log: versions, sizes and timestamps
    are ``long`` (sizes and txn versions non-negative), protocol versions ``integer``;
    ``add.partitionValues`` must name exactly the partition columns and parse as their
    types (integer ranges, dates, timestamps, decimal precision); ``add.stats`` must be a
    JSON object whose ``numRecords`` and ``nullCount`` are non-negative longs and whose
    ``minValues`` / ``maxValues`` fit the columns' types; a ``metaData`` schema's identity
    and column-mapping values fit theirs (:func:`check_schema_values`), and so does the
    configuration of a system domain (:func:`check_domain_configuration`: the row-tracking
    high-water mark is a non-negative long). The table's schema after the commit has no two columns
    sharing a column-mapping id or physical name (:func:`check_column_mapping`).

    :param metadata: the table's metadata after the commit (the schema values are checked against).
    :raises InvalidLogValueError: naming the field, the value and the allowed range
        (:class:`~.errors.InvalidPartitionValueError` for partition values).
    :raises SchemaError: columns share a column-mapping id or physical name.
    """
    adds = []
    changed_schema = False
    for action in actions:
        action.validate()
        if isinstance(action, AddFile):
            adds.append(action)
        elif isinstance(action, DomainMetadata):
            check_domain_configuration(action)
        elif isinstance(action, Metadata):
            check_schema_values(action)
            changed_schema = True
    if not changed_schema:
        check_column_mapping(metadata)  # no commit builds on a schema whose columns readers confuse
    if not adds:
        return
    types = log_types(metadata)
    types.check_partition_values((a.path, a.partition_values) for a in adds)
    types.check_stats(
        [(a.path, a.stats) for a in adds if a.stats is not None and type(a.stats) is not BuiltStats]
    )


class BuiltStats(str):
    """``add.stats`` the core built from the file's own footer (``core.expressions.stats``), for a
    file whose schema the commit checked against the table's: valid by construction, so
    :func:`validate_actions` does not parse it again. (Tests: every builder output passes
    :meth:`LogTypes.check_stats`, on every corpus file.) Any other string is checked."""

    __slots__ = ()


def validate_commit_info(info: Mapping[str, Any]) -> None:
    """The numbers a commitInfo carries: ``timestamp``, ``inCommitTimestamp``, ``readVersion``."""
    for key in ("timestamp", "inCommitTimestamp"):
        if info.get(key) is not None:
            check_integer(f"commitInfo.{key}", info[key])
    if info.get("readVersion") is not None:
        check_integer("commitInfo.readVersion", info["readVersion"], 0)


# --- values inside text fields ---------------------------------------------------------


def check_domain_configuration(domain: DomainMetadata) -> None:
    """A system domain's configuration against its shape: a JSON object whose values fit their
    Delta types (``delta.rowTracking``: ``rowIdHighWaterMark`` a non-negative long, the last row
    id assigned; ``delta.clustering``: ``clusteringColumns`` a list of column paths). Other
    domains' configurations are free-form strings; a tombstone's is not read.

    :raises InvalidLogValueError: naming the domain, the field and the value.
    """
    check = _DOMAIN_CHECKS.get(domain.domain)
    if check is None or domain.removed:
        return
    try:
        configuration = json.loads(domain.configuration)
    except ValueError:
        configuration = None
    if not isinstance(configuration, dict):
        raise InvalidLogValueError(
            f"domainMetadata.configuration of {domain.domain!r} must be a JSON object, got "
            f"{show_value(domain.configuration)}."
        )
    check(f"The {domain.domain} domain's", configuration)


def _check_row_tracking_domain(where: str, configuration: Mapping[str, Any]) -> None:
    mark = configuration.get(MARK_KEY)
    try:
        check_integer(f"{where} {MARK_KEY} (the last row id assigned)", mark, 0)
    except InvalidLogValueError as err:
        if not is_integer(mark) or mark < 0:
            raise
        raise InvalidLogValueError(
            f"{err} The commit would assign row ids past the largest Delta long, so it is refused and the "
            f"table is unchanged: the table has no row ids left for these rows."
        ) from None


def _check_clustering_domain(where: str, configuration: Mapping[str, Any]) -> None:
    columns = configuration.get("clusteringColumns")
    paths = columns if isinstance(columns, list) else None
    for path in paths or ():
        parts = [path] if isinstance(path, str) else path
        if not isinstance(parts, list) or not parts or not all(isinstance(p, str) and p for p in parts):
            paths = None
            break
    if paths is None:
        raise InvalidLogValueError(
            f"{where} clusteringColumns must be a list of column paths (lists of names, or names), got "
            f"{show_value(columns)}."
        )


_DOMAIN_CHECKS: dict[str, Callable[[str, Mapping[str, Any]], None]] = {
    ROW_TRACKING_DOMAIN: _check_row_tracking_domain,
    "delta.clustering": _check_clustering_domain,
}

_IDENTITY = "delta.identity."


def check_schema_values(metadata: Metadata) -> None:
    """The typed values in a ``metaData`` schema's field metadata, at every depth.

    ``delta.columnMapping.id`` is a Delta int and ``delta.columnMapping.physicalName`` a
    non-empty string; ``delta.identity.start``, ``.step`` (not 0) and ``.highWaterMark`` are
    longs (as JSON numbers, or as the decimal strings delta-rs writes), ``.allowExplicitInsert``
    a boolean (PROTOCOL.md § Column Mapping, § Identity Columns). A high-water mark moved past
    the long range by a commit is refused here.

    :raises InvalidLogValueError: naming the column, the key and the value.
    :raises SchemaError: two columns share a column-mapping id or physical name
        (:func:`check_column_mapping`).
    """
    for path, _physical, field_metadata in _field_metadata(_schema_fields(metadata), ""):
        if not field_metadata:
            continue
        if COLUMN_MAPPING_ID_KEY in field_metadata:
            value = field_metadata[COLUMN_MAPPING_ID_KEY]
            check_integer(_where(COLUMN_MAPPING_ID_KEY, path), value, 0, INT_MAX, "integer")
        name = field_metadata.get(COLUMN_MAPPING_PHYSICAL_NAME_KEY, "-")
        if not isinstance(name, str) or not name:
            where = _where(COLUMN_MAPPING_PHYSICAL_NAME_KEY, path)
            raise InvalidLogValueError(f"{where} must be a non-empty string, got {show_value(name)}.")
        for key in ("start", "step", "highWaterMark"):
            if field_metadata.get(_IDENTITY + key) is not None:
                where = _where(_IDENTITY + key, path)
                if check_integer(where, _long_value(field_metadata[_IDENTITY + key])) == 0 and key == "step":
                    raise InvalidLogValueError(f"{where} is 0; an identity column's step cannot be 0.")
        explicit = field_metadata.get(_IDENTITY + "allowExplicitInsert")
        if explicit is not None and not isinstance(explicit, bool) and explicit not in ("true", "false"):
            where = _where(_IDENTITY + "allowExplicitInsert", path)
            raise InvalidLogValueError(f"{where} must be true or false, got {show_value(explicit)}.")
    check_column_mapping(metadata)


def check_column_mapping(metadata: Metadata) -> None:
    """The column-mapping assignments of a schema, as Delta checks them
    (``DeltaColumnMapping.checkColumnIdAndPhysicalNameAssignments``): under ``name`` or ``id``
    mode no two fields share a ``delta.columnMapping.id``, and no two fields of one struct share a
    physical name (also not in case, as Spark resolves them). Readers would otherwise read one
    column's data as another's, or fail; writers ask it before every commit, readers before reading
    files under the mapping.

    :raises SchemaError: naming both columns and what they share.
    """
    if configured_mode(metadata.configuration) == "none":
        return
    ids: dict[Any, str] = {}
    physical_paths: dict[tuple[str, ...], str] = {}
    for path, physical, field_metadata in _field_metadata(_schema_fields(metadata), ""):
        column_id = field_metadata.get(COLUMN_MAPPING_ID_KEY)
        if column_id is not None and ids.setdefault(column_id, path) != path:
            raise SchemaError(
                f"Columns {ids[column_id]!r} and {path!r} have the same column mapping id {column_id} "
                f"(DELTA_DUPLICATED_COLUMN_ID): readers that resolve columns by id would read one as the "
                f"other. The table's schema is corrupt; repair it with the engine that wrote it."
            )
        key = tuple(part.lower() for part in physical)
        if physical_paths.setdefault(key, path) != path:
            raise SchemaError(
                f"Columns {physical_paths[key]!r} and {path!r} have the same physical name "
                f"{physical[-1]!r} (DELTA_DUPLICATED_PHYSICAL_NAME): readers would read one as the "
                f"other, or fail. The table's schema is corrupt; repair it with the engine that wrote it."
            )


def _schema_fields(metadata: Metadata) -> list[Any]:
    """The top-level fields of ``metadata``'s schema (:attr:`~.actions.Metadata.schema_json`: parsed
    once, its nesting bounded).

    :raises InvalidLogValueError: the schemaString is no Delta schema.
    :raises SchemaError: its types nest too deeply.
    """
    try:
        fields = metadata.schema_json["fields"]
    except (CorruptLogError, KeyError):
        fields = None
    if not isinstance(fields, list):
        raise InvalidLogValueError(
            f"metaData.schemaString is not a Delta schema: {metadata.schema_string[:200]!r}."
        )
    return fields


def _where(key: str, path: str) -> str:
    return f"{key} of column {path!r} (metaData.schemaString)"


def _long_value(value: Any) -> Any:
    """A JSON number, or a decimal string (delta-rs writes identity values as strings), as an int."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return value


def _field_metadata(
    fields: Any, parent: str, physical: tuple[str, ...] = ()
) -> Iterable[tuple[str, tuple[str, ...], Mapping[str, Any]]]:
    """``(column path, path of physical names, field metadata)`` for every struct field, also inside
    arrays and maps (a schema's nesting is bounded: ``schema_json.MAX_SCHEMA_DEPTH``)."""
    for item in fields if isinstance(fields, list) else ():
        if not isinstance(item, dict):
            continue
        path = f"{parent}.{item.get('name')}" if parent else str(item.get("name"))
        found = item.get("metadata")
        metadata: Mapping[str, Any] = found if isinstance(found, dict) else {}
        own = (*physical, str(delta_physical_name(item)))
        yield path, own, metadata
        yield from _nested_metadata(item.get("type"), path, own)


def _nested_metadata(
    delta_type: Any, path: str, physical: tuple[str, ...]
) -> Iterable[tuple[str, tuple[str, ...], Mapping[str, Any]]]:
    if not isinstance(delta_type, dict):
        return
    kind = delta_type.get("type")
    if kind == "struct":
        yield from _field_metadata(delta_type.get("fields"), path, physical)
    elif kind == "array":
        yield from _nested_metadata(delta_type.get("elementType"), f"{path}.element", (*physical, "element"))
    elif kind == "map":
        yield from _nested_metadata(delta_type.get("keyType"), f"{path}.key", (*physical, "key"))
        yield from _nested_metadata(delta_type.get("valueType"), f"{path}.value", (*physical, "value"))


#: The LogTypes of the last few table schemas (see :func:`log_types`).
_RECENT_TYPES: dict[tuple[str, tuple[str, ...], str], LogTypes] = {}
#: Partition values a LogTypes remembers as checked before it forgets them (about 1 MB at most).
_CHECKED_LIMIT = 10_000


def log_types(metadata: Metadata) -> LogTypes:
    """The :class:`LogTypes` of ``metadata``, shared by the checks of one commit.

    A write checks its files' partition values early (naming each file), the transaction checks
    every add again: the second pass finds each ``(column, value)`` already checked.
    """
    key = (
        metadata.schema_string,
        tuple(metadata.partition_columns),
        configured_mode(metadata.configuration),
    )
    types = _RECENT_TYPES.get(key)
    if types is None:
        if len(_RECENT_TYPES) >= 8:
            _RECENT_TYPES.clear()
        types = _RECENT_TYPES[key] = LogTypes(metadata)
    return types


class LogTypes:
    """The Delta types of a table's partition columns and stats columns, from its metadata."""

    def __init__(self, metadata: Metadata) -> None:
        fields = _schema_fields(metadata)
        logical = _type_tree(fields)
        by_key = {name.lower(): name for name in logical}
        # Under column mapping the log keys partition values and stats by physical name.
        mapped = configured_mode(metadata.configuration) != "none"
        physical = (
            {f.get("name"): delta_physical_name(f) for f in fields if isinstance(f, dict)} if mapped else {}
        )
        self.columns: dict[str, Any] = _type_tree(physical_delta_fields(fields)) if mapped else logical
        self.partition_types: dict[str, Any] = {}
        for column in metadata.partition_columns:
            name = column if column in logical else by_key.get(column.lower())
            if name is None:
                raise InvalidLogValueError(
                    f"metaData.partitionColumns names {column!r}, which is not in the schema "
                    f"({list(logical)})."
                )
            self.partition_types[physical.get(name, column)] = logical[name]
        #: ``(column, value)`` pairs that parse as their column's type (values are immutable).
        self._checked: set[tuple[str, Any]] = set()

    # --- partition values ---------------------------------------------------------------

    def check_partition_values(self, items: Iterable[tuple[str, Mapping[str, Any] | None]]) -> None:
        """Each ``(where, partitionValues)``: exactly the partition columns, values parsing as their types.

        :param items: ``where`` names the file in messages.
        :raises InvalidPartitionValueError: a column is missing or unknown, or a value does not fit.
        """
        expected = set(self.partition_types)
        checked = self._checked
        if len(checked) > _CHECKED_LIMIT:
            checked.clear()
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
                    f"add.stats of {where!r} must be a JSON object, got {show_value(stats)}."
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
                    f"{show_value(stats['tightBounds'])}."
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
            raise InvalidLogValueError(
                f"{field} of {where!r} must be a JSON object, got {show_value(values)}."
            )
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
            raise InvalidLogValueError(
                f"add.stats of {where!r} must be a JSON string, got {show_value(text)}."
            )
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
    for value in counts.values():  # a loop, not all(): one call per struct, not per column
        if type(value) is int:
            if not 0 <= value <= records:
                return False
        elif not _counts_ok(value, records):
            return False
    return True


def _check_bound(value: Any, delta_type: str, field: str, where: str) -> None:
    """One min/max value against its column's Delta type."""
    problem = _bound_problem(value, delta_type)
    if problem is not None:
        raise InvalidLogValueError(f"{field} of {where!r} {problem}.")


def _bound_problem(value: Any, delta_type: str) -> str | None:
    """None when ``value`` is a valid bound of a ``delta_type`` column, else what is wrong."""
    if delta_type in INTEGER_RANGES:
        low, high = INTEGER_RANGES[delta_type]
        if not is_integer(value):
            return f"must be an integer (a Delta {delta_type}, {low} to {high}), got {show_value(value)}"
        if low <= value <= high:
            return None
        return f"is {value}, outside the allowed range of a Delta {delta_type}: {low} to {high}"
    if delta_type in FLOAT_MAX:
        limit = FLOAT_MAX[delta_type]
        if type(value) not in (int, Decimal) or not Decimal(value).is_finite():
            return f"must be a finite number (a Delta {delta_type}), got {show_value(value)}"
        if Decimal(value).copy_abs() > limit:  # exact: abs() would round to the context's 28 digits
            return f"is {value}, outside the allowed range of a Delta {delta_type}: -{limit} to {limit}"
        return None
    if delta_type.startswith("decimal("):
        return _decimal_problem(value, delta_type)
    if delta_type in ("string", "binary"):
        return None if type(value) is str else f"must be a string, got {show_value(value)}"
    if delta_type == "date":
        if type(value) is str and _parses(dt.date.fromisoformat, value):
            return None
        return f"must be a date 'YYYY-MM-DD', got {show_value(value)}"
    if delta_type in ("timestamp", "timestamp_ntz"):
        if type(value) is str and _parses(dt.datetime.fromisoformat, value):
            return None
        return f"must be an ISO-8601 timestamp ('2024-01-01T00:00:00.000Z'), got {show_value(value)}"
    if delta_type == "boolean" and type(value) is not bool:
        return f"must be true or false, got {show_value(value)}"
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
        return f"must be a number (a Delta {delta_type}), got {show_value(value)}"
    integral, fraction = decimal_digits(number)
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
    maximum = records if is_integer(records) else LONG_MAX
    check_integer(f"{field} of {where!r}", counts, 0, maximum, "long (at most numRecords)")


def _parses(parse: Any, text: str) -> bool:
    try:
        parse(text)
    except ValueError:
        return False
    return True
