"""Creating tables and committing existing Parquet files into them (Delta's WRITE).

The data is already written (by Spark, typically); a commit adds the files to the log
with their statistics and partition values, and in overwrite modes removes the files it
replaces, all in one atomic, conflict-checked :class:`~.transaction.OptimisticTransaction`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from airflow_delta_provider.core.actions import (
    AddFile,
    LogTypes,
    Metadata,
    Protocol,
    RemoveFile,
    Transaction,
)
from airflow_delta_provider.core.datafiles import DataFile, collect_files, partition_values_of
from airflow_delta_provider.core.errors import (
    DeltaError,
    EmptyOverwriteError,
    ProtocolChangedError,
    SchemaError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.logfiles import commit_name
from airflow_delta_provider.core.partitions import parse_partition_value
from airflow_delta_provider.core.predicate import Predicate, PredicateError
from airflow_delta_provider.core.protocol import Operation, check_writable
from airflow_delta_provider.core.replay import parse_commit
from airflow_delta_provider.core.schema import (
    arrow_type_to_delta,
    check_schema_compatible,
    merge_schemas,
    schema_from_delta,
    schema_to_delta_json,
)
from airflow_delta_provider.core.stats import indexed_columns, read_footers
from airflow_delta_provider.core.transaction import (
    ALREADY_COMMITTED,
    DEFAULT_MAX_ATTEMPTS,
    NO_FILES,
    CommitResult,
    OptimisticTransaction,
)

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.snapshot import Snapshot
    from airflow_delta_provider.core.storage import TableStorage
    from airflow_delta_provider.core.table import DeltaTable

log = logging.getLogger(__name__)

WriteMode = Literal["append", "overwrite"]
CreateMode = Literal["error", "ignore", "append", "overwrite"]
SchemaMode = Literal["enforce", "merge"]

#: Spark's default protocol for new tables.
_BASE_READER, _BASE_WRITER = 1, 2
#: Properties that switch on features this core cannot write, with what to do instead.
_REFUSED_PROPERTIES = {
    "delta.columnMapping.mode": "columnMapping",
    "delta.enableRowTracking": "rowTracking",
    "delta.enableIcebergCompatV1": "icebergCompatV1",
    "delta.enableIcebergCompatV2": "icebergCompatV2",
    "delta.enableIcebergCompatV3": "icebergCompatV3",
    "delta.universalFormat.enabledFormats": "icebergCompatV2",
    "delta.enableTypeWidening": "typeWidening",
}


# --- table creation -------------------------------------------------------------------


def minimum_protocol(schema: pa.Schema, properties: Mapping[str, str]) -> Protocol:
    """The lowest protocol a new table with this schema and these properties needs.

    Legacy versions where they suffice ((1, 2) is Spark's default), table features
    (reader 3 / writer 7) as soon as a feature needs them.

    :raises UnsupportedFeatureError: a property enables a feature this core cannot write.
    """
    for key, feature in _REFUSED_PROPERTIES.items():
        value = (properties.get(key) or "").lower()
        if value and value not in ("false", "none"):
            raise UnsupportedFeatureError(
                f"The table property {key}={properties[key]!r} enables the {feature!r} feature, which "
                f"this core cannot write. Create the table without it (or with Spark, if you need it).",
                feature=feature,
                operation=Operation.WRITE.value,
            )
    constraints = [k for k in properties if k.startswith("delta.constraints.")]
    if constraints:
        raise UnsupportedFeatureError(
            f"CHECK constraints ({constraints[0]}, the 'checkConstraints' feature) cannot be enforced by "
            f"this core; create the table without them.",
            feature="checkConstraints",
            operation=Operation.WRITE.value,
        )

    def enabled(key: str) -> bool:
        return (properties.get(key) or "").lower() == "true"

    legacy_writer = _BASE_WRITER
    if enabled("delta.enableChangeDataFeed"):
        legacy_writer = 4
    reader_writer: set[str] = set()
    writer_only: set[str] = set()
    if _has_timestamp_ntz(schema):
        reader_writer.add("timestampNtz")
    if enabled("delta.enableDeletionVectors"):
        reader_writer.add("deletionVectors")
    if (properties.get("delta.checkpointPolicy") or "classic").lower() == "v2":
        reader_writer.add("v2Checkpoint")
    if enabled("delta.enableInCommitTimestamps"):
        writer_only.add("inCommitTimestamp")
    for key, value in properties.items():
        if key.startswith("delta.feature.") and value.lower() in ("supported", "enabled"):
            feature = key.removeprefix("delta.feature.")
            (reader_writer if feature in _READER_WRITER_FEATURES else writer_only).add(feature)
    if not reader_writer and not writer_only:
        return Protocol(_BASE_READER, legacy_writer)
    writer = set(reader_writer) | writer_only
    if enabled("delta.appendOnly"):
        writer.add("appendOnly")
    if legacy_writer >= 4:
        writer.add("changeDataFeed")
    if reader_writer:
        return Protocol(3, 7, frozenset(reader_writer), frozenset(writer))
    return Protocol(_BASE_READER, 7, None, frozenset(writer))


_READER_WRITER_FEATURES = frozenset(
    {
        "columnMapping",
        "deletionVectors",
        "timestampNtz",
        "v2Checkpoint",
        "typeWidening",
        "variantType",
        "vacuumProtocolCheck",
    }
)


def _has_timestamp_ntz(schema: pa.Schema) -> bool:
    return '"timestamp_ntz"' in schema_to_delta_json(schema)


def _normalize_properties(properties: Mapping[str, Any] | None) -> dict[str, str]:
    out = {}
    for key, value in (properties or {}).items():
        if not isinstance(key, str) or not key:
            raise SchemaError(f"Table property names must be non-empty strings, got {key!r}.")
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def _as_schema(schema: pa.Schema | str) -> pa.Schema:
    if isinstance(schema, pa.Schema):
        return schema
    if isinstance(schema, str | dict):  # Delta's (and Spark's df.schema.json()) schema JSON
        return schema_from_delta(schema)
    raise TypeError(
        f"schema must be a pyarrow.Schema or a Delta schema JSON string, got {type(schema).__name__}."
    )


def new_metadata(
    schema: pa.Schema,
    partition_by: Sequence[str],
    properties: Mapping[str, str],
    *,
    name: str | None = None,
    description: str | None = None,
    table_id: str | None = None,
) -> Metadata:
    """The ``metaData`` action of a new table, after checking partition columns against the schema.

    :raises SchemaError: a partition column is not in the schema, listed twice, or of a
        type that cannot partition (struct, array, map).
    """
    partition_by = list(partition_by)
    names = {f.name.lower(): f for f in schema}
    seen: set[str] = set()
    for column in partition_by:
        field = names.get(column.lower())
        if field is None:
            raise SchemaError(f"Partition column {column!r} is not in the schema (columns: {schema.names}).")
        if column.lower() in seen:
            raise SchemaError(f"Partition column {column!r} is listed twice.")
        seen.add(column.lower())
        if not isinstance(arrow_type_to_delta(field.type), str):
            raise SchemaError(f"Column {column!r} has type {field.type}, which cannot be a partition column.")
    if len(partition_by) == len(schema):
        raise SchemaError("Every column is a partition column; a Delta table needs at least one data column.")
    canonical = [names[c.lower()].name for c in partition_by]
    return Metadata(
        id=table_id or str(uuid.uuid4()),
        schema_string=schema_to_delta_json(schema),
        partition_columns=tuple(canonical),
        configuration=dict(properties),
        name=name,
        description=description,
        created_time=int(time.time() * 1000),
    )


def create_table(
    table: DeltaTable,
    schema: pa.Schema | str,
    partition_by: Sequence[str] = (),
    properties: Mapping[str, Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    mode: CreateMode = "error",
    user_metadata: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> CommitResult | None:
    """Create the table (version 0), or apply ``mode`` when it exists.

    :param mode: ``error`` (refuse an existing table), ``ignore`` (keep it as it is),
        ``append`` (keep it, after checking the schema and partitioning fit), ``overwrite``
        (replace schema, partitioning and properties and remove every file: Delta's
        ``CREATE OR REPLACE TABLE``).
    :returns: the commit, or None when nothing was written.
    :raises TableAlreadyExistsError: ``mode="error"`` and the table exists.
    """
    if mode not in ("error", "ignore", "append", "overwrite"):
        raise ValueError(f"mode must be 'error', 'ignore', 'append' or 'overwrite', got {mode!r}.")
    arrow_schema = _as_schema(schema)
    props = _normalize_properties(properties)
    protocol = minimum_protocol(arrow_schema, props)
    metadata = new_metadata(arrow_schema, partition_by, props, name=name, description=description)
    parameters = {
        "isManaged": "false",
        "description": description,
        "partitionBy": list(metadata.partition_columns),
        "properties": json.dumps(props, separators=(",", ":")),
    }
    for _ in range(2):  # a second round after losing a race to create the table
        try:
            snapshot = table.snapshot()
        except TableNotFoundError:
            transaction = OptimisticTransaction(table, new_table=True)
            try:
                return transaction.commit(
                    [protocol, metadata],
                    operation="CREATE TABLE",
                    operation_parameters=parameters,
                    user_metadata=user_metadata,
                    tags=tags,
                )
            except ProtocolChangedError:
                log.info("%s was created concurrently; applying mode=%r to it.", table.uri, mode)
                continue
        if mode == "error":
            raise TableAlreadyExistsError(
                f"A Delta table already exists at {table.uri} (version {snapshot.version}). Use "
                f"mode='ignore' to keep it, 'append' to write into it, or 'overwrite' to replace it."
            )
        if mode == "ignore":
            return None
        if mode == "append":
            _check_same_layout(snapshot, arrow_schema, metadata.partition_columns)
            return None
        return _replace_table(table, snapshot, protocol, metadata, parameters, user_metadata, tags)
    raise TableAlreadyExistsError(f"The table at {table.uri} keeps changing concurrently; retry.")


def _check_same_layout(snapshot: Snapshot, schema: pa.Schema, partition_by: Sequence[str]) -> None:
    if [c.lower() for c in snapshot.partition_columns] != [c.lower() for c in partition_by]:
        raise SchemaMismatchError(
            f"The table is partitioned by {snapshot.partition_columns}, not {list(partition_by)}. Use "
            f"mode='overwrite' to change its partitioning."
        )
    check_schema_compatible(snapshot.schema, schema)


def _replace_table(
    table: DeltaTable,
    snapshot: Snapshot,
    protocol: Protocol,
    metadata: Metadata,
    parameters: dict[str, Any],
    user_metadata: str | None,
    tags: Mapping[str, str] | None,
) -> CommitResult:
    current = snapshot.protocol
    # Delta never downgrades a protocol on REPLACE.
    if (current.min_reader_version, current.min_writer_version) >= (
        protocol.min_reader_version,
        protocol.min_writer_version,
    ):
        protocol = current
    transaction = OptimisticTransaction(table, read_snapshot=snapshot)
    files = snapshot.files()
    transaction.read_files(None, files.column("path").to_pylist())
    removes = _removes(files, int(time.time() * 1000))
    metadata = dataclasses.replace(metadata, id=snapshot.metadata.id)  # the table keeps its identity
    actions: list[Any] = [metadata] if protocol is current else [protocol, metadata]
    return transaction.commit(
        [*actions, *removes],
        operation="CREATE OR REPLACE TABLE",
        operation_parameters=parameters,
        operation_metrics={
            "numRemovedFiles": len(removes),
            "numRemovedBytes": sum(r.size or 0 for r in removes),
        },
        user_metadata=user_metadata,
        tags=tags,
    )


# --- commits of existing files -----------------------------------------------------------


def commit_files(
    table: DeltaTable,
    files: Sequence[str] | None = None,
    *,
    prefix: str | None = None,
    mode: WriteMode = "append",
    replace_where: str | None = None,
    partition_values: Mapping[str, str | None] | None = None,
    schema_mode: SchemaMode = "enforce",
    app_id: str | None = None,
    app_version: int | None = None,
    user_metadata: str | None = None,
    tags: Mapping[str, str] | None = None,
    schema: pa.Schema | str | None = None,
    partition_by: Sequence[str] | None = None,
    properties: Mapping[str, Any] | None = None,
    max_attempts: int = DEFAULT_MAX_ATTEMPTS,
    max_workers: int | None = None,
    isolation_level: str | None = None,
    auto_checkpoint: bool = True,
    allow_empty_overwrite: bool = False,
) -> CommitResult:
    """Commit Parquet files that already exist under the table root. See :meth:`DeltaTable.commit_files`."""
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', got {mode!r}.")
    if replace_where is not None and mode != "overwrite":
        raise ValueError(
            "replace_where selects the partitions an overwrite replaces; use it with mode='overwrite'."
        )
    if schema_mode not in ("enforce", "merge"):
        raise ValueError(f"schema_mode must be 'enforce' or 'merge', got {schema_mode!r}.")
    if not isinstance(allow_empty_overwrite, bool):
        raise ValueError(f"allow_empty_overwrite must be True or False, got {allow_empty_overwrite!r}.")
    check_app_arguments(app_id, app_version)

    try:
        snapshot: Snapshot | None = table.snapshot()
    except TableNotFoundError:
        snapshot = None
        if (
            schema is None
            and partition_by is None
            and properties is None
            and files is None
            and prefix is None
        ):
            raise
    transaction = OptimisticTransaction(
        table,
        read_snapshot=snapshot,
        new_table=snapshot is None,
        isolation_level=isolation_level,
        max_attempts=max_attempts,
        auto_checkpoint=auto_checkpoint,
    )
    if app_id is not None and snapshot is not None:
        # The hot path of a retry: protocol, metadata and txns only, never the file list.
        current = transaction.app_transaction_version(app_id)
        if current is not None and current >= app_version:  # type: ignore[operator]
            return _already_committed_result(table, snapshot, app_id, app_version, current)  # type: ignore[arg-type]

    if snapshot is not None:
        # Refuse a table this core cannot write before looking at a single file.
        check_writable(snapshot.protocol, snapshot.metadata)
        table_schema = snapshot.schema
        partition_columns = list(snapshot.partition_columns)
        metadata = snapshot.metadata
        if partition_by is not None and [c.lower() for c in partition_by] != [
            c.lower() for c in partition_columns
        ]:
            raise SchemaMismatchError(
                f"partition_by={list(partition_by)} differs from the table's partition columns "
                f"{partition_columns}; a write cannot change a table's partitioning."
            )
    else:
        partition_columns = list(partition_by or ())
        table_schema = _as_schema(schema) if schema is not None else None
        metadata = None

    data_files = collect_files(table.storage, files=files, prefix=prefix, partition_columns=partition_columns)
    values_per_file = [partition_values_of(f, partition_columns, partition_values) for f in data_files]
    log.info("Reading the Parquet footers of %d file(s) to commit to %s.", len(data_files), table.uri)

    if table_schema is None:
        # A new table without a given schema: the first file's, partition columns as strings.
        if not data_files:
            raise SchemaError(
                f"There is no table at {table.uri} yet and no file to take its schema from; pass schema= "
                f"to create it without data."
            )
        first = read_footers(table.storage, [data_files[0].path], stats_columns=[])[0]
        table_schema = pa.schema(
            [f.with_nullable(True) for f in first.schema if f.name not in partition_columns]
            + [pa.field(c, pa.string()) for c in partition_columns]
        )
    data_schema = pa.schema([f for f in table_schema if f.name not in partition_columns])
    props = dict(metadata.configuration) if metadata else _normalize_properties(properties)
    stats_columns = indexed_columns(data_schema, props)
    footers = read_footers(
        table.storage,
        [f.path for f in data_files],
        stats_columns=stats_columns,
        sizes=[f.size for f in data_files],
        max_workers=max_workers,
    )
    # The same check the transaction runs on every add, here with each file's name, early.
    LogTypes(
        metadata or Metadata("", schema_to_delta_json(table_schema), tuple(partition_columns))
    ).check_partition_values((f.relative_path, v) for f, v in zip(data_files, values_per_file, strict=True))

    new_schema = _checked_schema(
        table, table_schema, data_schema, partition_columns, data_files, footers, schema_mode
    )
    now = int(time.time() * 1000)
    adds = [
        AddFile(
            path=f.add_path,
            partition_values=values,
            size=f.size,
            modification_time=f.modification_time,
            data_change=True,
            stats=footer.stats,
        )
        for f, values, footer in zip(data_files, values_per_file, footers, strict=True)
    ]
    actions: list[Any] = []
    if snapshot is None:
        props = _normalize_properties(properties)
        actions.append(minimum_protocol(new_schema, props))
        actions.append(new_metadata(new_schema, partition_columns, props))
    elif not new_schema.equals(table_schema, check_metadata=False):
        assert metadata is not None
        actions.append(dataclasses.replace(metadata, schema_string=schema_to_delta_json(new_schema)))
        log.info("Merging new columns into the schema of %s.", table.uri)
    if app_id is not None:
        actions.append(Transaction(app_id, app_version, last_updated=now))  # type: ignore[arg-type]

    removes: list[RemoveFile] = []
    predicate = None
    if mode == "overwrite" and snapshot is not None:
        existing = snapshot.files()
        if replace_where is not None:
            predicate = Predicate(replace_where, partition_columns)
            mask = predicate.mask(snapshot.partition_values()) if partition_columns else None
            existing = existing.filter(mask) if mask is not None else existing
            _check_matches(predicate, table_schema, partition_columns, data_files, values_per_file)
        transaction.read_files(predicate, existing.column("path").to_pylist())
        removes = _removes(existing, now)
    elif replace_where is not None:
        predicate = Predicate(replace_where, partition_columns)  # validate even on a new table
        _check_matches(predicate, table_schema, partition_columns, data_files, values_per_file)

    if not adds and snapshot is not None:
        if removes and not allow_empty_overwrite:
            what = f"the {len(removes)} file(s) matching {replace_where!r}" if predicate else "every file"
            raise EmptyOverwriteError(
                f"This overwrite of {table.uri} has no files to add, so it would only remove {what} "
                f"({sum(r.size or 0 for r in removes)} bytes). If emptying that data is intended, pass "
                f"allow_empty_overwrite=True; otherwise check that the job wrote its output where "
                f"files/prefix point (an empty list or an empty directory was given)."
            )
        if not removes and app_id is None:
            log.info(
                "Nothing to commit to %s: no files to add, nothing to remove and no app_id to record; "
                "no commit was written (the table stays at version %d).",
                table.uri,
                snapshot.version,
            )
            return CommitResult(
                version=snapshot.version,
                committed=False,
                operation="WRITE",
                read_version=snapshot.version,
                reason=NO_FILES,
            )

    num_rows = sum(f.num_records for f in footers)
    metrics: dict[str, Any] = {
        "numFiles": len(adds),
        "numOutputRows": num_rows,
        "numOutputBytes": sum(a.size for a in adds),
    }
    if mode == "overwrite":
        metrics["numRemovedFiles"] = len(removes)
        metrics["numRemovedBytes"] = sum(r.size or 0 for r in removes)
    if snapshot is None:
        operation = "CREATE TABLE AS SELECT"
        parameters: dict[str, Any] = {
            "isManaged": "false",
            "description": None,
            "partitionBy": partition_columns,
            "properties": json.dumps(_normalize_properties(properties), separators=(",", ":")),
        }
    else:
        operation = "WRITE"
        parameters = {
            "mode": "Overwrite" if mode == "overwrite" else "Append",
            "partitionBy": partition_columns,
        }
    if predicate is not None:
        parameters["predicate"] = [predicate.text]
    try:
        return transaction.commit(
            [*actions, *removes, *adds],
            operation=operation,
            operation_parameters=parameters,
            operation_metrics=metrics,
            user_metadata=user_metadata,
            tags=tags,
        )
    except ProtocolChangedError:
        if snapshot is not None:
            raise
        # Another writer created the table first: commit into it as a normal write.
        log.info("%s was created concurrently; committing into the new table.", table.uri)
        return commit_files(
            table,
            files,
            prefix=prefix,
            mode=mode,
            replace_where=replace_where,
            partition_values=partition_values,
            schema_mode=schema_mode,
            app_id=app_id,
            app_version=app_version,
            user_metadata=user_metadata,
            tags=tags,
            max_attempts=max_attempts,
            max_workers=max_workers,
            isolation_level=isolation_level,
            auto_checkpoint=auto_checkpoint,
            allow_empty_overwrite=allow_empty_overwrite,
        )


def check_app_arguments(app_id: str | None, app_version: int | None) -> None:
    """Delta's rule for idempotent writes: both ``app_id`` and ``app_version`` or neither, and
    values the ``txn`` action can hold (a non-empty string, a non-negative long).

    :raises ValueError: (``InvalidLogValueError`` for values outside the types).
    """
    if (app_id is None) != (app_version is None):
        raise ValueError(
            "Invalid options for idempotent writes: both app_id and app_version must be given (Delta's "
            "txnAppId and txnVersion), or neither."
        )
    if app_id is not None:
        Transaction(app_id, app_version).validate()  # type: ignore[arg-type]


def _checked_schema(
    table: DeltaTable,
    table_schema: pa.Schema,
    data_schema: pa.Schema,
    partition_columns: Sequence[str],
    data_files: Sequence[DataFile],
    footers: Sequence[Any],
    schema_mode: SchemaMode,
) -> pa.Schema:
    """The table schema after the files (merged in ``merge`` mode); refuses files that do not fit.

    A file may hold a partition column (its values are ignored: the log's win), but spelled as
    the table spells it: readers match names case-sensitively.
    """
    partition_names = set(partition_columns)
    partition_keys = {c.lower(): c for c in partition_columns}
    new_schema = table_schema
    checked: pa.Schema | None = None
    for data_file, footer in zip(data_files, footers, strict=True):
        if schema_mode != "merge" and checked is not None and footer.schema.equals(checked):
            continue  # Spark's files of one job share a schema: check it once
        checked = footer.schema
        try:
            for name in footer.schema.names:
                canonical = partition_keys.get(name.lower())
                if canonical is not None and name != canonical:
                    raise SchemaMismatchError(
                        f"the file's column {name!r} and the table's partition column {canonical!r} "
                        f"differ only in case; readers match column names case-sensitively. Write the "
                        f"column as {canonical!r} (or leave it out: partition values come from the log)."
                    )
            file_schema = pa.schema([f for f in footer.schema if f.name not in partition_names])
            if schema_mode == "merge":
                new_schema = merge_schemas(new_schema, file_schema)
            else:
                check_schema_compatible(data_schema, file_schema)
        except SchemaError as err:
            raise type(err)(f"{table.storage.to_uri(data_file.path)}: {err}") from None
    return new_schema


def _removes(files: pa.Table, now: int) -> list[RemoveFile]:
    """Tombstones for active files (from :meth:`Snapshot.files`), carrying their deletion vectors."""
    columns = files.select(
        [
            c
            for c in (
                "path",
                "partition_values",
                "size",
                "tags",
                "deletion_vector",
                "base_row_id",
                "default_row_commit_version",
            )
            if c in files.column_names
        ]
    ).to_pylist()
    removes = []
    for row in columns:
        values = row.get("partition_values")
        removes.append(
            RemoveFile(
                path=row["path"],
                deletion_timestamp=now,
                data_change=True,
                partition_values=dict(values) if values is not None else {},
                size=row.get("size"),
                tags=dict(row["tags"]) if row.get("tags") else None,
                deletion_vector=_drop_nulls(row.get("deletion_vector")),
                base_row_id=row.get("base_row_id"),
                default_row_commit_version=row.get("default_row_commit_version"),
            )
        )
    return removes


def _drop_nulls(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not value:
        return None
    cleaned = {k: v for k, v in value.items() if v is not None}
    return cleaned or None


def _typed_partition_table(
    schema: pa.Schema, columns: Sequence[str], values: Sequence[Mapping[str, str | None]]
) -> pa.Table:
    arrays = {}
    for column in columns:
        field = schema.field(column)
        delta_type = arrow_type_to_delta(field.type)
        arrays[column] = pa.array(
            [parse_partition_value(v[column], delta_type, column=column) for v in values],
            field.type,  # type: ignore[arg-type]
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
    outside = [f.relative_path for f, ok in zip(files, mask, strict=True) if not ok]
    if outside:
        raise PredicateError(
            f"Written data does not conform to the replaceWhere predicate {predicate.text!r}: "
            f"{len(outside)} file(s) lie outside it, e.g. {outside[0]!r}. Write only the partitions the "
            f"predicate selects, or widen the predicate."
        )


# --- which commit recorded an application's txn ---------------------------------------------

#: Commit files read, around the txn's ``lastUpdated``, before settling for a bound.
MAX_TXN_PROBES = 16
#: How far a commit file's modification time may trail the writer's ``lastUpdated`` (S3 keeps
#: whole seconds).
_MTIME_SLACK_MS = 1000


def already_committed(
    table: DeltaTable, app_id: str, app_version: int, *, snapshot: Snapshot | None = None
) -> CommitResult | None:
    """The "nothing to commit" result when the table holds ``app_id`` at ``app_version`` or later.

    See :meth:`DeltaTable.already_committed`. ``commit_files`` gives the same answer before it
    reads a single data file.
    """
    check_app_arguments(app_id, app_version)
    if snapshot is None:
        try:
            snapshot = table.snapshot()
        except TableNotFoundError:
            return None
    current = snapshot.app_transaction_version(app_id)
    if current is None or current < app_version:
        return None
    return _already_committed_result(table, snapshot, app_id, app_version, current)


def _already_committed_result(
    table: DeltaTable, snapshot: Snapshot, app_id: str, app_version: int, current: int
) -> CommitResult:
    recorded, exact = txn_commit_version(snapshot, app_id)
    log.info(
        "Application %r already committed version %d (>= %d) to %s at table version %s%d; nothing to commit.",
        app_id,
        current,
        app_version,
        table.uri,
        "" if exact else "<= ",
        recorded,
    )
    return CommitResult(
        version=recorded,
        committed=False,
        operation="WRITE",
        read_version=snapshot.version,
        app_id=app_id,
        app_version=app_version,
        reason=ALREADY_COMMITTED,
        version_exact=exact,
    )


def txn_commit_version(snapshot: Snapshot, app_id: str) -> tuple[int, bool]:
    """The version of the commit that recorded ``app_id``'s live txn, and whether it is exact.

    The commits after the last checkpoint are already read for the snapshot: the newest one
    holding the app's txn recorded it. A txn that only the checkpoint holds was recorded at
    or before the checkpoint's version; that commit is looked for by the txn's
    ``lastUpdated`` (a binary search over commit modification times, then at most
    :data:`MAX_TXN_PROBES` commits read around the match, each checked for the exact txn).
    When it is gone (log cleanup) or not found, the answer is the checkpoint's version and
    ``False``: an upper bound.

    :raises KeyError: the snapshot holds no live txn for ``app_id``.
    """
    txn = snapshot.transactions[app_id]
    for commit in reversed(snapshot._commits):
        for action in commit.actions:
            if "txn" in action and action["txn"].get("appId") == app_id:
                return commit.version, True
    bound = snapshot.segment.checkpoint_version
    if bound is None:  # no checkpoint, yet no commit holds it: nothing to search
        return snapshot.version, False
    found = _find_txn_commit(snapshot.storage, app_id, txn, bound)
    return (found, True) if found is not None else (bound, False)


def _find_txn_commit(storage: TableStorage, app_id: str, txn: Transaction, last: int) -> int | None:
    """The version in ``[0, last]`` whose commit holds exactly ``txn``, reading few commits."""
    if txn.last_updated is not None:
        start = _first_commit_at_or_after(storage, txn.last_updated - _MTIME_SLACK_MS, last)
        # Forward first: the recording commit lands just after its lastUpdated.
        order = [start]
        for step in range(1, MAX_TXN_PROBES):
            order += [start + step, start - step]
    else:  # no time to go by: the newest commits before the checkpoint
        order = [last - step for step in range(MAX_TXN_PROBES)]
    probes = [v for v in dict.fromkeys(order) if 0 <= v <= last][:MAX_TXN_PROBES]
    for version in probes:
        path = storage.log_path(commit_name(version))
        try:
            commit = parse_commit(version, storage.to_uri(path), storage.read_bytes(path))
            actions = commit.actions
        except (FileNotFoundError, DeltaError):
            continue
        for action in actions:
            recorded = action.get("txn") if isinstance(action, dict) else None
            if (
                isinstance(recorded, dict)
                and recorded.get("appId") == app_id
                and recorded.get("version") == txn.version
                and recorded.get("lastUpdated") == txn.last_updated
            ):
                return version
    return None


def _first_commit_at_or_after(storage: TableStorage, timestamp: int, last: int) -> int:
    """The lowest version in ``[0, last]`` whose commit exists and was modified at or after
    ``timestamp`` (``last`` when none is): a binary search of one ``info`` per step."""
    low, high = 0, last
    while low < high:
        middle = (low + high) // 2
        info = storage.info(storage.log_path(commit_name(middle)))
        if info is None or info.modification_time < timestamp:  # cleaned up, or older
            low = middle + 1
        else:
            high = middle
    return low


def transaction_commit_version(snapshot: Snapshot, app_id: str) -> int | None:
    """Deprecated: use :func:`txn_commit_version` (it also says whether the answer is exact)."""
    if app_id not in snapshot.transactions:
        return None
    return txn_commit_version(snapshot, app_id)[0]
