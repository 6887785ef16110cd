"""Creating tables: schema, partitioning and the lowest protocol their properties need.

``create_table`` commits version 0 (``CREATE TABLE``), or applies Delta's modes when a
table exists (``CREATE OR REPLACE TABLE`` never downgrades the protocol and keeps the
table's id). The helpers here also define the tables that a first commit creates
(``CREATE TABLE AS SELECT`` in :mod:`.write`).
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import pyarrow as pa

from airflow_delta_provider.core.errors import (
    ProtocolChangedError,
    SchemaError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
)
from airflow_delta_provider.core.log.snapshot import load_snapshot
from airflow_delta_provider.core.protocol.actions import Metadata, Protocol, RemoveFile
from airflow_delta_provider.core.protocol.column_mapping import assign_column_mapping, configured_mode
from airflow_delta_provider.core.protocol.features import minimum_protocol
from airflow_delta_provider.core.protocol.row_tracking import new_table_properties
from airflow_delta_provider.core.protocol.schema import (
    arrow_type_to_delta,
    check_schema_compatible,
    schema_from_delta,
    schema_to_delta_json,
)
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import (
    CommitPlan,
    CommitProperties,
    CommitResult,
    ReadSet,
)
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.log.snapshot import Snapshot
    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.transaction.commit import PostCommitHook

log = get_logger(__name__)

CreateMode = Literal["error", "ignore", "append", "overwrite"]


def normalize_properties(properties: Mapping[str, Any] | None) -> dict[str, str]:
    out = {}
    for key, value in (properties or {}).items():
        if not isinstance(key, str) or not key:
            raise SchemaError(f"Table property names must be non-empty strings, got {key!r}.")
        out[key] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def as_schema(schema: pa.Schema | str) -> pa.Schema:
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
        configuration=new_table_properties(properties),
        name=name,
        description=description,
        created_time=int(time.time() * 1000),
    )


@dataclass(frozen=True, kw_only=True)
class CreateOptions(CommitProperties):
    """Every keyword option of a table creation (``DeltaTable.create``), beside the
    :class:`~.commit_plan.CommitProperties` every commit takes.

    :param name: the table's name in its metadata.
    :param description: the table's description.
    :param mode: when a table exists: ``error`` (refuse it), ``ignore`` (keep it as it is),
        ``append`` (keep it, after checking that schema, with names spelled as the table spells
        them, and partitioning fit), ``overwrite`` (replace schema, partitioning and properties
        and remove every file: Delta's ``CREATE OR REPLACE TABLE``).
    """

    name: str | None = None
    description: str | None = None
    mode: CreateMode = "error"

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.mode not in ("error", "ignore", "append", "overwrite"):
            raise ValueError(f"mode must be 'error', 'ignore', 'append' or 'overwrite', got {self.mode!r}.")


def create_table(
    store: LogStore,
    schema: pa.Schema | str,
    partition_by: Sequence[str] = (),
    properties: Mapping[str, Any] | None = None,
    options: CreateOptions | None = None,
    post_commit_hooks: Sequence[PostCommitHook] = (),
) -> CommitResult | None:
    """Create the table (version 0), or apply ``options.mode`` when it exists.

    :returns: the commit, or None when nothing was written.
    :raises TableAlreadyExistsError: ``mode="error"`` and the table exists.
    """
    options = options or CreateOptions()
    arrow_schema = as_schema(schema)
    props = normalize_properties(properties)
    mapping = configured_mode(props)
    if mapping != "none":
        # Every column (nested ones too) gets an id and a physical name col-<uuid>, as in Delta.
        arrow_schema, props = assign_column_mapping(arrow_schema, props, mapping)
    protocol = minimum_protocol(arrow_schema, props)
    metadata = new_metadata(
        arrow_schema, partition_by, props, name=options.name, description=options.description
    )
    plan = CommitPlan(
        "CREATE TABLE",
        {
            "isManaged": "false",
            "description": options.description,
            "partitionBy": list(metadata.partition_columns),
            "properties": json.dumps(props, separators=(",", ":")),
        },
        protocol=protocol,
        metadata=metadata,
    )
    for _ in range(2):  # a second round after losing a race to create the table
        try:
            snapshot = load_snapshot(store)
        except TableNotFoundError:
            transaction = OptimisticTransaction(
                store, new_table=True, properties=options, post_commit_hooks=post_commit_hooks
            )
            try:
                return transaction.commit(plan)
            except ProtocolChangedError:
                log.info("%s was created concurrently; applying mode=%r to it.", store.root_uri, options.mode)
                continue
        if options.mode == "error":
            raise TableAlreadyExistsError(
                f"A Delta table already exists at {store.root_uri} (version {snapshot.version}). Use "
                f"mode='ignore' to keep it, 'append' to write into it, or 'overwrite' to replace it."
            )
        if options.mode == "ignore":
            return None
        if options.mode == "append":
            _check_same_layout(snapshot, arrow_schema, metadata.partition_columns)
            return None
        transaction = OptimisticTransaction(
            store, read_snapshot=snapshot, properties=options, post_commit_hooks=post_commit_hooks
        )
        return transaction.commit(_replacement(snapshot, plan))
    raise TableAlreadyExistsError(f"The table at {store.root_uri} keeps changing concurrently; retry.")


def _check_same_layout(snapshot: Snapshot, schema: pa.Schema, partition_by: Sequence[str]) -> None:
    if [c.lower() for c in snapshot.partition_columns] != [c.lower() for c in partition_by]:
        raise SchemaMismatchError(
            f"The table is partitioned by {snapshot.partition_columns}, not {list(partition_by)}. Use "
            f"mode='overwrite' to change its partitioning."
        )
    check_schema_compatible(snapshot.schema, schema)


def _replacement(snapshot: Snapshot, create: CommitPlan) -> CommitPlan:
    """Delta's ``CREATE OR REPLACE TABLE`` of ``snapshot``'s table by the table ``create`` defines:
    every file removed, the table's id kept, the protocol never downgraded."""
    assert create.protocol is not None and create.metadata is not None
    current = snapshot.protocol
    protocol: Protocol | None = create.protocol
    if (current.min_reader_version, current.min_writer_version) >= (
        create.protocol.min_reader_version,
        create.protocol.min_writer_version,
    ):
        protocol = None  # the table keeps its own
    files = snapshot.files()
    removes = tuple(remove_actions(files, int(time.time() * 1000)))
    metadata = dataclasses.replace(create.metadata, id=snapshot.metadata.id)  # the table keeps its identity
    return dataclasses.replace(
        create,
        operation="CREATE OR REPLACE TABLE",
        metrics={
            "numRemovedFiles": len(removes),
            "numRemovedBytes": sum(r.size or 0 for r in removes),
        },
        protocol=protocol,
        metadata=metadata,
        removes=removes,
        read=ReadSet.matching(None, files.column("path").to_pylist()),
    )


def remove_actions(files: pa.Table, now: int, *, stats: bool = False) -> list[RemoveFile]:
    """Tombstones for active files (from :meth:`Snapshot.files`), carrying their deletion vectors.

    :param stats: carry the files' statistics too (Delta's ``removeWithTimestamp`` for a DELETE).
    """
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
                *(("stats",) if stats else ()),
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
                stats=row.get("stats"),
            )
        )
    return removes


def _drop_nulls(value: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not value:
        return None
    cleaned = {k: v for k, v in value.items() if v is not None}
    return cleaned or None
