"""Committing Parquet files that already exist under the table root (Delta's WRITE).

The data is already written (by Spark, typically); a commit adds the files to the log
with their statistics and partition values, and in overwrite modes removes the files it
replaces, all in one atomic, conflict-checked :class:`~.transaction.OptimisticTransaction`.
Every option is declared once, in :class:`CommitOptions`; ``DeltaTable.commit_files``
forwards to it. The work here is deciding *what* to commit (a :class:`~.commit_plan.CommitPlan`);
the transaction decides whether and where it lands.
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from airflow_delta_provider.core.errors import (
    EmptyOverwriteError,
    ProtocolChangedError,
    SchemaError,
    SchemaMismatchError,
    TableNotFoundError,
)
from airflow_delta_provider.core.expressions.predicate import Predicate, PredicateError
from airflow_delta_provider.core.expressions.stats import FooterInfo, indexed_columns, read_footers
from airflow_delta_provider.core.log.snapshot import load_snapshot
from airflow_delta_provider.core.protocol.actions import AddFile, Metadata, Protocol, RemoveFile
from airflow_delta_provider.core.protocol.column_mapping import (
    assign_column_mapping,
    column_mapping_mode,
    configured_mode,
    logical_file_schema,
    physical_path,
)
from airflow_delta_provider.core.protocol.constraints import check_rows, checked_identity_schema
from airflow_delta_provider.core.protocol.features import Operation, check_supported, minimum_protocol
from airflow_delta_provider.core.protocol.partitions import parse_partition_path, parse_partition_value
from airflow_delta_provider.core.protocol.schema import (
    arrow_type_to_delta,
    check_schema_compatible,
    merge_schemas,
    physical_name_map,
    schema_to_delta_json,
)
from airflow_delta_provider.core.protocol.validation import log_types
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import (
    NO_FILES,
    CommitPlan,
    CommitProperties,
    CommitResult,
    ReadSet,
)
from airflow_delta_provider.core.transaction.create import (
    as_schema,
    new_metadata,
    normalize_properties,
    remove_actions,
)
from airflow_delta_provider.core.transaction.datafiles import DataFile, collect_files, partition_values_of
from airflow_delta_provider.core.utils.arguments import check_bool, check_positive_int
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

log = get_logger(__name__)

WriteMode = Literal["append", "overwrite"]
SchemaMode = Literal["enforce", "merge"]


@dataclass(frozen=True, kw_only=True)
class CommitOptions(CommitProperties):
    """Every option of a commit of existing files (``DeltaTable.commit_files``), beside the
    :class:`~.commit_plan.CommitProperties` every commit takes.

    :param files: the files, relative to the table root or as URIs under it.
    :param prefix: instead of ``files``: a directory under the root whose (non-hidden) files
        are committed.
    :param mode: ``append``, or ``overwrite`` to replace the table's data (all of it, or the
        partitions ``replace_where`` selects).
    :param replace_where: with ``mode="overwrite"``: a SQL predicate on partition columns
        (Delta's ``replaceWhere``); only matching files are replaced, and the written files
        must match it.
    :param parameters: the values of ``replace_where``'s ``:name`` markers, each bound as a literal
        (``replace_where="ds = :day", parameters={"day": "2026-03-01"}``); the commit records the
        predicate with the values in place, as Spark does.
    :param partition_values: the partition values of all the files, when their paths do not
        carry them.
    :param schema_mode: ``enforce`` (files must fit the table schema) or ``merge`` (new nullable
        columns are added to the schema in the same commit).
    :param schema: for a table that does not exist yet: its schema (default: the first file's,
        partition columns as strings).
    :param partition_by: for a new table: its partition columns; for an existing one it must
        equal the table's.
    :param properties: for a new table: its properties.
    :param max_workers: concurrent footer reads (default 1 locally, 32 on object stores; more
        than 1 locally only pays on a network file system mounted as a local path).
    :param isolation_level: ``Serializable`` (default) or ``WriteSerializable``.
    :param allow_empty_overwrite: let an overwrite (or ``replace_where``) with no files remove
        the data it selects; without it such a commit is refused.
    :param constraints_checked: the producer already checked every row against the table's
        invariants, CHECK constraints and generation expressions with Spark (the PySpark
        operator does); the core then does not read the files to check them again.
    :param identity_generated: identity columns whose values the producer generated from the
        column's start, step and high-water mark (the PySpark operator); the commit moves their
        high-water marks. A ``GENERATED ALWAYS`` identity column accepts no other values.
    """

    files: Sequence[str] | None = field(default=None, kw_only=False)
    prefix: str | None = None
    mode: WriteMode = "append"
    replace_where: str | None = None
    parameters: Mapping[str, Any] | None = None
    partition_values: Mapping[str, str | None] | None = None
    schema_mode: SchemaMode = "enforce"
    schema: pa.Schema | str | None = None
    partition_by: Sequence[str] | None = None
    properties: Mapping[str, Any] | None = None
    max_workers: int | None = None
    isolation_level: str | None = None
    allow_empty_overwrite: bool = False
    constraints_checked: bool = False
    identity_generated: Sequence[str] = ()

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in ("append", "overwrite"):
            raise ValueError(f"mode must be 'append' or 'overwrite', got {self.mode!r}.")
        if self.replace_where is not None and self.mode != "overwrite":
            raise ValueError(
                "replace_where selects the partitions an overwrite replaces; use it with mode='overwrite'."
            )
        if self.parameters is not None and self.replace_where is None:
            raise ValueError("parameters bind the markers of replace_where; pass one, or leave them out.")
        if self.schema_mode not in ("enforce", "merge"):
            raise ValueError(f"schema_mode must be 'enforce' or 'merge', got {self.schema_mode!r}.")
        check_bool("allow_empty_overwrite", self.allow_empty_overwrite)
        check_bool("constraints_checked", self.constraints_checked)
        if isinstance(self.identity_generated, str) or not all(
            isinstance(c, str) for c in self.identity_generated
        ):
            raise ValueError(
                f"identity_generated must be a list of column names, got {self.identity_generated!r}."
            )
        check_positive_int("max_workers", self.max_workers)


@dataclass
class _Target:
    """The table a commit writes into: its layout before the commit (a new one's, as defined)."""

    snapshot: Snapshot | None
    schema: pa.Schema | None
    partition_columns: list[str]
    properties: dict[str, str]
    mapping: str = "none"

    @property
    def metadata(self) -> Metadata | None:
        return self.snapshot.metadata if self.snapshot is not None else None


@dataclass
class _Files:
    """The files to add: where they are, their partition values (keyed as the log keys them) and
    footers."""

    data_files: list[DataFile]
    values: list[dict[str, str | None]]
    footers: list[FooterInfo]


def commit_files(
    store: LogStore,
    snapshot: Snapshot | None,
    options: CommitOptions,
    post_commit_hooks: Sequence[PostCommitHook] = (),
) -> CommitResult:
    """Commit Parquet files that already exist under the table root. See :meth:`DeltaTable.commit_files`.

    :param store: the table's store.
    :param snapshot: the latest snapshot the writer read (the commit is checked against what
        others committed since); None when there is no table yet (the commit creates it).
    :param options: the files (or ``prefix``) and everything else.
    :param post_commit_hooks: work after the commit lands (the facade's checkpoint and cleanup).
    """
    definition = (options.schema, options.partition_by, options.properties, options.files, options.prefix)
    if snapshot is None and definition == (None,) * 5:
        raise TableNotFoundError(
            f"There is no Delta table at {store.root_uri}, and nothing to create one from: pass files "
            f"(or prefix), or the schema of the table to create."
        )
    transaction = OptimisticTransaction(
        store,
        read_snapshot=snapshot,
        new_table=snapshot is None,
        isolation_level=options.isolation_level,
        properties=options,
        post_commit_hooks=post_commit_hooks,
    )
    # The hot path of a retry: protocol, metadata and txns only, never the file list.
    done = transaction.already_committed("WRITE")
    if done is not None:
        return done
    target = _target(store, snapshot, options)
    files = _read_files(store, target, options)
    protocol, metadata, tags = _table_change(store, target, files, options)
    adds = tuple(
        AddFile(f.add_path, values, f.size, f.modification_time, stats=footer.stats)
        for f, values, footer in zip(files.data_files, files.values, files.footers, strict=True)
    )
    removes, predicate, read = _replaced(target, files, options)
    if not adds and snapshot is not None:
        empty = _nothing_to_commit(store, snapshot, removes, predicate, options)
        if empty is not None:
            return empty
    operation, parameters = _operation(target, predicate, options)
    metrics = _metrics(adds, removes, files.footers, options.mode)
    plan = CommitPlan(
        operation, parameters, metrics, protocol, metadata, removes=removes, adds=adds, read=read, tags=tags
    )
    try:
        return transaction.commit(plan)
    except ProtocolChangedError:
        if snapshot is not None:
            raise
        # Another writer created the table first: commit into it as a normal write.
        log.info("%s was created concurrently; committing into the new table.", store.root_uri)
        # The new table's schema, partitioning and properties are the winner's.
        existing = dataclasses.replace(options, schema=None, partition_by=None, properties=None)
        return commit_files(store, load_snapshot(store), existing, post_commit_hooks)


def _target(store: LogStore, snapshot: Snapshot | None, options: CommitOptions) -> _Target:
    """The table written into; refuses a table this core cannot write before looking at a file."""
    if snapshot is None:
        props = normalize_properties(options.properties)
        schema = as_schema(options.schema) if options.schema is not None else None
        return _Target(None, schema, list(options.partition_by or ()), props, configured_mode(props))
    check_supported(snapshot.protocol, snapshot.metadata, Operation.WRITE)
    partition_columns = list(snapshot.partition_columns)
    partition_by = options.partition_by
    if partition_by is not None and [c.lower() for c in partition_by] != [
        c.lower() for c in partition_columns
    ]:
        raise SchemaMismatchError(
            f"partition_by={list(partition_by)} differs from the table's partition columns "
            f"{partition_columns}; a write cannot change a table's partitioning."
        )
    mapping = column_mapping_mode(snapshot.protocol, snapshot.metadata)
    properties = dict(snapshot.metadata.configuration)
    return _Target(snapshot, snapshot.schema, partition_columns, properties, mapping)


def _read_files(store: LogStore, target: _Target, options: CommitOptions) -> _Files:
    """The files, their partition values and their footers (with the stats the table indexes)."""
    partition_columns = target.partition_columns
    data_files = collect_files(
        store, files=options.files, prefix=options.prefix, partition_columns=partition_columns
    )
    values = [
        _partition_values(f, partition_columns, options.partition_values, target.snapshot) for f in data_files
    ]
    log.info("Reading the Parquet footers of %d file(s) to commit to %s.", len(data_files), store.root_uri)
    if target.schema is None:
        # A new table without a given schema: the first file's, partition columns as strings.
        if not data_files:
            raise SchemaError(
                f"There is no table at {store.root_uri} yet and no file to take its schema from; pass "
                f"schema= to create it without data."
            )
        first = read_footers(store, [data_files[0].path], stats_columns=[])[0]
        target.schema = pa.schema(
            [f.with_nullable(True) for f in first.schema if f.name not in partition_columns]
            + [pa.field(c, pa.string()) for c in partition_columns]
        )
    if target.mapping != "none" and target.snapshot is None:
        # A new table over existing files: its columns' physical names are the files' names.
        target.schema, target.properties = assign_column_mapping(
            target.schema, target.properties, target.mapping, from_files=True
        )
    data_schema = pa.schema([f for f in target.schema if f.name not in partition_columns])
    stats_columns = indexed_columns(data_schema, target.properties)
    if target.mapping != "none":  # the log keys stats (and partition values) by physical name
        stats_columns = [physical_path(data_schema, path) for path in stats_columns]
        physical = physical_name_map(target.schema)
        values = [{physical[c]: v for c, v in file_values.items()} for file_values in values]
    footers = read_footers(
        store,
        [f.path for f in data_files],
        stats_columns=stats_columns,
        sizes=[f.size for f in data_files],
        max_workers=options.max_workers,
    )
    # The same check the transaction runs on every add, here with each file's name, early.
    metadata = target.metadata or Metadata(
        "", schema_to_delta_json(target.schema), tuple(partition_columns), target.properties
    )
    log_types(metadata).check_partition_values(
        (f.relative_path, v) for f, v in zip(data_files, values, strict=True)
    )
    return _Files(data_files, values, footers)


def _table_change(
    store: LogStore, target: _Target, files: _Files, options: CommitOptions
) -> tuple[Protocol | None, Metadata | None, dict[str, str]]:
    """The protocol and metadata the commit writes (a new table's, or the existing one's after
    schema evolution and identity high-water marks; None when unchanged) and the tags that go
    with them. Every row is checked against the table's constraints here, before the commit."""
    assert target.schema is not None  # set by _read_files
    table_schema, props, mapping = target.schema, target.properties, target.mapping
    data_schema = pa.schema([f for f in table_schema if f.name not in target.partition_columns])
    new_schema = _checked_schema(
        store, table_schema, data_schema, target.partition_columns, files, options.schema_mode, mapping
    )
    if mapping != "none" and not new_schema.equals(table_schema, check_metadata=True):
        # Schema evolution: new columns get ids (maxColumnId grows) and keep the files' names.
        new_schema, props = assign_column_mapping(new_schema, props, mapping, from_files=True)
    protocol = None
    existing = target.metadata
    if existing is None:
        protocol = minimum_protocol(new_schema, props)
        table_metadata = new_metadata(new_schema, target.partition_columns, props)
    else:
        table_metadata = existing
        if not new_schema.equals(table_schema, check_metadata=mapping != "none"):
            table_metadata = dataclasses.replace(
                existing, schema_string=schema_to_delta_json(new_schema), configuration=props
            )
            log.info("Merging new columns into the schema of %s.", store.root_uri)
    data_files = files.data_files
    # Invariants, CHECK constraints, generated and identity columns: every row, before the commit.
    if not options.constraints_checked:
        check_rows(
            store,
            [(f.path, f.relative_path, v) for f, v in zip(data_files, files.values, strict=True)],
            table_metadata,
            new_schema,
            mapping=mapping,
        )
    identity_schema = checked_identity_schema(
        table_metadata,
        dict(zip([f.relative_path for f in data_files], _column_names(files.footers), strict=True)),
        store,
        [f.path for f in data_files],
        options.identity_generated,
        mapping=mapping,
    )
    tags = {}
    if identity_schema is not None:
        if table_metadata is existing:  # only the high-water marks change: Delta tags it
            tags["delta.identity.schemaUpdate"] = "true"
        table_metadata = dataclasses.replace(table_metadata, schema_string=identity_schema)
    return protocol, (table_metadata if table_metadata is not existing else None), tags


def _replaced(
    target: _Target, files: _Files, options: CommitOptions
) -> tuple[tuple[RemoveFile, ...], Predicate | None, ReadSet]:
    """What an overwrite removes, the ``replaceWhere`` predicate, and what the commit read."""
    predicate = None
    if options.replace_where is not None:
        predicate = Predicate(options.replace_where, target.partition_columns, parameters=options.parameters)
        assert target.schema is not None
        _check_matches(predicate, target.schema, target.partition_columns, files.data_files, files.values)
    snapshot = target.snapshot
    if options.mode != "overwrite" or snapshot is None:
        return (), predicate, ReadSet()
    existing = snapshot.files()
    if predicate is not None and target.partition_columns:
        existing = existing.filter(predicate.mask(snapshot.partition_values()))
    read = ReadSet.matching(predicate, existing.column("path").to_pylist())
    return tuple(remove_actions(existing, int(time.time() * 1000))), predicate, read


def _nothing_to_commit(
    store: LogStore,
    snapshot: Snapshot,
    removes: Sequence[RemoveFile],
    predicate: Predicate | None,
    options: CommitOptions,
) -> CommitResult | None:
    """For a commit that adds no file: refuse an overwrite that would only remove data, report
    an append of nothing without writing a commit; None when the commit must be written."""
    if removes and not options.allow_empty_overwrite:
        what = f"the {len(removes)} file(s) matching {options.replace_where!r}" if predicate else "every file"
        raise EmptyOverwriteError(
            f"This overwrite of {store.root_uri} has no files to add, so it would only remove {what} "
            f"({sum(r.size or 0 for r in removes)} bytes). If emptying that data is intended, pass "
            f"allow_empty_overwrite=True; otherwise check that the job wrote its output where "
            f"files/prefix point (an empty list or an empty directory was given)."
        )
    if removes or options.app_id is not None:
        return None
    log.info(
        "Nothing to commit to %s: no files to add, nothing to remove and no app_id to record; "
        "no commit was written (the table stays at version %d).",
        store.root_uri,
        snapshot.version,
    )
    return CommitResult(
        version=snapshot.version,
        committed=False,
        operation="WRITE",
        read_version=snapshot.version,
        reason=NO_FILES,
    )


def _operation(
    target: _Target, predicate: Predicate | None, options: CommitOptions
) -> tuple[str, dict[str, Any]]:
    """Delta's operation name and ``operationParameters``."""
    parameters: dict[str, Any]
    if target.snapshot is None:
        operation = "CREATE TABLE AS SELECT"
        parameters = {
            "isManaged": "false",
            "description": None,
            "partitionBy": target.partition_columns,
            "properties": json.dumps(normalize_properties(options.properties), separators=(",", ":")),
        }
    else:
        operation = "WRITE"
        parameters = {
            "mode": "Overwrite" if options.mode == "overwrite" else "Append",
            "partitionBy": target.partition_columns,
        }
    if predicate is not None:
        parameters["predicate"] = [predicate.bound_text]
    return operation, parameters


def _metrics(
    adds: Sequence[AddFile], removes: Sequence[RemoveFile], footers: Sequence[FooterInfo], mode: str
) -> dict[str, Any]:
    """Delta's WRITE ``operationMetrics``."""
    metrics: dict[str, Any] = {
        "numFiles": len(adds),
        "numOutputRows": sum(f.num_records for f in footers),
        "numOutputBytes": sum(a.size for a in adds),
    }
    if mode == "overwrite":
        metrics["numRemovedFiles"] = len(removes)
        metrics["numRemovedBytes"] = sum(r.size or 0 for r in removes)
    return metrics


def _checked_schema(
    store: LogStore,
    table_schema: pa.Schema,
    data_schema: pa.Schema,
    partition_columns: Sequence[str],
    files: _Files,
    schema_mode: SchemaMode,
    mapping: str = "none",
) -> pa.Schema:
    """The table schema after the files (merged in ``merge`` mode); refuses files that do not fit.

    A file may hold a partition column (its values are ignored: the log's win), but spelled as
    the table spells it: readers match names case-sensitively. Under column mapping the files
    must name their columns physically (and carry the ids in ``id`` mode); they are checked
    under the logical names those stand for.
    """
    partition_names = set(partition_columns)
    partition_keys = {c.lower(): c for c in partition_columns}
    new_schema = table_schema
    checked: pa.Schema | None = None
    for data_file, footer in zip(files.data_files, files.footers, strict=True):
        if schema_mode != "merge" and checked is not None and footer.schema.equals(checked):
            continue  # Spark's files of one job share a schema: check it once
        checked = footer.schema
        try:
            file_columns = (
                footer.schema
                if mapping == "none"
                else logical_file_schema(table_schema, footer.schema, mapping)
            )
            for name in file_columns.names:
                canonical = partition_keys.get(name.lower())
                if canonical is not None and name != canonical:
                    raise SchemaMismatchError(
                        f"the file's column {name!r} and the table's partition column {canonical!r} "
                        f"differ only in case; readers match column names case-sensitively. Write the "
                        f"column as {canonical!r} (or leave it out: partition values come from the log)."
                    )
            file_schema = pa.schema([f for f in file_columns if f.name not in partition_names])
            if schema_mode == "merge":
                new_schema = merge_schemas(new_schema, file_schema)
            else:
                check_schema_compatible(data_schema, file_schema)
        except SchemaError as err:
            raise type(err)(f"{store.to_uri(data_file.path)}: {err}") from None
    return new_schema


def _column_names(footers: Sequence[FooterInfo]) -> list[list[str]]:
    """Each file's column names; files with one schema share it (``Schema.names`` builds a new
    list per call: 10 ms for 1,000 files)."""
    by_schema: dict[int, list[str]] = {}
    names = []
    for footer in footers:
        found = by_schema.get(id(footer.schema))
        if found is None:
            found = by_schema[id(footer.schema)] = footer.schema.names
        names.append(found)
    return names


def _partition_values(
    data_file: DataFile,
    partition_columns: Sequence[str],
    explicit: Mapping[str, str | None] | None,
    snapshot: Snapshot | None,
) -> dict[str, str | None]:
    """A file's partition values by logical column. Under column mapping Spark names partition
    directories physically (``col-<uuid>=0/``); such a path is read through the physical names."""
    if explicit is None and snapshot is not None and partition_columns:
        physical = physical_name_map(snapshot.schema)
        to_logical = {physical[c]: c for c in partition_columns}
        renamed = {p for p, c in to_logical.items() if p != c}
        if renamed & set(parse_partition_path(data_file.relative_path)):
            values = partition_values_of(data_file, list(to_logical), None)
            return {to_logical[key]: value for key, value in values.items()}
    return partition_values_of(data_file, partition_columns, explicit)


def _typed_partition_table(
    schema: pa.Schema, columns: Sequence[str], values: Sequence[Mapping[str, str | None]]
) -> pa.Table:
    arrays = {}
    for column in columns:
        field = schema.field(column)
        delta_type = arrow_type_to_delta(field.type)
        if not isinstance(delta_type, str):  # create_table refuses nested partition columns
            raise SchemaError(f"Partition column {column!r} has the nested type {field.type}.")
        arrays[column] = pa.array(
            [parse_partition_value(v[column], delta_type, column=column) for v in values], field.type
        )
    return pa.table(arrays)


def _check_matches(
    predicate: Predicate,
    schema: pa.Schema,
    columns: Sequence[str],
    files: Sequence[DataFile],
    values: Sequence[Mapping[str, str | None]],
) -> None:
    """Delta's DELTA_REPLACE_WHERE_MISMATCH: every written file must match the replaceWhere predicate."""
    if not files:
        return
    mask = predicate.mask(_typed_partition_table(schema, columns, values)).to_pylist()
    outside = [index for index, ok in enumerate(mask) if not ok]
    if outside:
        first = values[outside[0]]
        shown = ", ".join(f"{column}={first[column]!r}" for column in columns)
        raise PredicateError(
            f"Written data does not conform to the replaceWhere predicate {predicate.bound_text!r}: "
            f"{len(outside)} file(s) lie outside it, the first with {shown} "
            f"({files[outside[0]].relative_path!r}). Write only the partitions the predicate selects, "
            f"or widen the predicate."
        )
