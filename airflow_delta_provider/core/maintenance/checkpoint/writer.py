"""Writing the checkpoint files: the actions as Arrow columns, in Spark's layout, and the
classic, multi-part and V2 (sidecar) writers."""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_delta_provider.core.errors import CorruptLogError
from airflow_delta_provider.core.expressions.stats_parsed import parse_stats, stats_parsed_type
from airflow_delta_provider.core.log.deletion_vectors import deletion_vector_unique_id
from airflow_delta_provider.core.log.file_actions import ADD_SCHEMA, REMOVE_SCHEMA
from airflow_delta_provider.core.log.logfiles import (
    SIDECAR_DIR,
    checksum_name,
    classic_checkpoint_name,
    multipart_checkpoint_name,
)
from airflow_delta_provider.core.maintenance.checkpoint.placement import spark_partition_ids
from airflow_delta_provider.core.protocol.features import reader_features, writer_features
from airflow_delta_provider.core.protocol.partitions import partition_columns_from_map
from airflow_delta_provider.core.protocol.schema import physical_schema
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from airflow_delta_provider.core.log.replay import SmallState
    from airflow_delta_provider.core.protocol.table_config import TableConfig
    from airflow_delta_provider.core.storage import LogStore

log = get_logger(__name__)


CLASSIC_PART_SIZE = 10_000_000
#: File actions per sidecar of a V2 checkpoint (Spark's default partSize for V2).
SIDECAR_PART_SIZE = 50_000
#: Tables with at least this many files get INFO progress logs for each step.
PROGRESS_THRESHOLD = 100_000
#: Rows per Parquet row group of the file actions.
ROW_GROUP_SIZE = 262_144
#: Rows per row group of a partitioned table's file actions, sorted by partition: a partition of
#: a hundred files sits in one or two row groups, which a partition-pruned replay reads alone.
PARTITIONED_ROW_GROUP_SIZE = 32_768

_STRING_MAP = pa.map_(pa.string(), pa.string())
_STRING_LIST = pa.list_(pa.field("element", pa.string()))

#: The non-file action columns, in Spark's order and with Spark's types.
TXN_TYPE = pa.struct([("appId", pa.string()), ("version", pa.int64()), ("lastUpdated", pa.int64())])
METADATA_TYPE = pa.struct(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("description", pa.string()),
        ("format", pa.struct([("provider", pa.string()), ("options", _STRING_MAP)])),
        ("schemaString", pa.string()),
        ("partitionColumns", _STRING_LIST),
        ("configuration", _STRING_MAP),
        ("createdTime", pa.int64()),
    ]
)
PROTOCOL_TYPE = pa.struct(
    [
        ("minReaderVersion", pa.int32()),
        ("minWriterVersion", pa.int32()),
        ("readerFeatures", _STRING_LIST),
        ("writerFeatures", _STRING_LIST),
    ]
)
DOMAIN_METADATA_TYPE = pa.struct(
    [("domain", pa.string()), ("configuration", pa.string()), ("removed", pa.bool_())]
)
CHECKPOINT_METADATA_TYPE = pa.struct([("version", pa.int64()), ("tags", _STRING_MAP)])
SIDECAR_TYPE = pa.struct(
    [
        ("path", pa.string()),
        ("sizeInBytes", pa.int64()),
        ("modificationTime", pa.int64()),
        ("tags", _STRING_MAP),
    ]
)

#: ``add`` fields in Spark's checkpoint order (``stats`` after the others, then the parsed ones).
_ADD_FIELDS = (
    "path",
    "partitionValues",
    "size",
    "modificationTime",
    "dataChange",
    "tags",
    "deletionVector",
    "baseRowId",
    "defaultRowCommitVersion",
    "clusteringProvider",
)
_REMOVE_FIELDS = tuple(REMOVE_SCHEMA.names)


@dataclass
class CheckpointState:
    """The state to checkpoint, as Arrow."""

    small: SmallState
    adds: pa.Table  # ADD_SCHEMA
    removes: pa.Table  # REMOVE_SCHEMA


def progress_level(state: CheckpointState) -> int:
    """INFO for the steps of large checkpoints (they take seconds to minutes), DEBUG otherwise."""
    return logging.INFO if state.adds.num_rows >= PROGRESS_THRESHOLD else logging.DEBUG


def validate_against_checksum(storage: LogStore, version: int, state: CheckpointState) -> None:
    """Refuse to checkpoint a state that contradicts the version's ``.crc``, as Spark does.

    Spark validates the snapshot against its checksum before writing a checkpoint and treats
    a mismatch as state corruption; an unreadable checksum file is ignored (it is optional).
    """
    path = storage.log_path(checksum_name(version))
    try:
        checksum = json.loads(storage.read_bytes(path))
    except FileNotFoundError:
        return
    except ValueError:
        log.warning("Ignoring the unreadable version checksum %s.", storage.to_uri(path))
        return
    if not isinstance(checksum, dict):
        return
    expected_files = checksum.get("numFiles")
    expected_bytes = checksum.get("tableSizeBytes")
    actual_files = state.adds.num_rows
    actual_bytes = int(pc.sum(state.adds.column("size")).as_py() or 0)
    if (isinstance(expected_files, int) and expected_files != actual_files) or (
        isinstance(expected_bytes, int) and expected_bytes != actual_bytes
    ):
        uri = storage.to_uri(path)
        raise CorruptLogError(
            f"The state of version {version} does not match its checksum {uri}: the log replays to "
            f"{actual_files} files / {actual_bytes} bytes, the checksum says {expected_files} files / "
            f"{expected_bytes} bytes. Refusing to write a checkpoint of a state that may be corrupt; "
            f"check the log (a commit may have been altered or lost).",
            path=uri,
        )


def clustered(state: CheckpointState) -> CheckpointState:
    """``state`` with a partitioned table's adds ordered by their partition values (typed, nulls
    last), then path: each partition's files lie together, so that row groups of
    :data:`PARTITIONED_ROW_GROUP_SIZE` rows and the statistics of ``partitionValues_parsed``
    let a partition-pruned replay skip the others (the order of a checkpoint's rows means
    nothing to readers)."""
    _, partition_fields = _physical_fields(state)
    adds = state.adds
    if not partition_fields or adds.num_rows < 2:
        return state
    parsed = _parsed_partitions(adds, partition_fields)
    keys = pa.table(
        {**{f"p{i}": parsed.field(i) for i in range(len(partition_fields))}, "path": adds.column("path")}
    )
    order = pc.sort_indices(keys, sort_keys=[(name, "ascending", "at_end") for name in keys.column_names])
    return CheckpointState(small=state.small, adds=adds.take(order), removes=state.removes)


def _parsed_partitions(adds: pa.Table, partition_fields: list[pa.Field]) -> pa.StructArray:
    return partition_columns_from_map(
        adds.column("partitionValues"), pa.schema([f.with_nullable(True) for f in partition_fields])
    )


def build_add_column(state: CheckpointState, config: TableConfig) -> pa.ChunkedArray:
    """The checkpoint's ``add`` column over all live files, built chunk by chunk without copying.

    A partitioned table's typed ``partitionValues_parsed`` is always written (as Delta does with
    ``delta.checkpoint.writeStatsAsStruct``), for the row-group statistics readers prune on;
    ``stats_parsed`` only with that property."""
    adds = state.adds
    count = adds.num_rows
    fields: list[pa.Field] = []
    columns: list[pa.ChunkedArray | pa.Array] = []
    for name in _ADD_FIELDS:
        fields.append(ADD_SCHEMA.field(name).with_nullable(True))
        # Spark's state (and so its checkpoint) has dataChange=false on every file.
        columns.append(pa.array(np.zeros(count, dtype=bool)) if name == "dataChange" else adds.column(name))
    if config.checkpoint_stats_as_json:
        fields.append(pa.field("stats", pa.string()))
        columns.append(adds.column("stats"))
    physical, partition_fields = _physical_fields(state)
    if partition_fields:
        parsed = _parsed_partitions(adds, partition_fields)
        fields.append(pa.field("partitionValues_parsed", parsed.type))
        columns.append(parsed)
    if config.checkpoint_stats_as_struct:
        partition_names = {f.name for f in partition_fields}
        data_fields = [f for f in physical if f.name not in partition_names]
        dv_support = "deletionVectors" in writer_features(state.small.protocol)
        stats_type = stats_parsed_type(data_fields, tight_bounds=dv_support)
        fields.append(pa.field("stats_parsed", stats_type))
        columns.append(parse_stats(adds.column("stats"), stats_type))
    return _struct_column(columns, fields)


def build_remove_column(state: CheckpointState) -> pa.ChunkedArray:
    """The checkpoint's ``remove`` column over all unexpired tombstones (no stats, no tags)."""
    removes = state.removes
    fields = [f.with_nullable(True) for f in REMOVE_SCHEMA]
    columns = [
        pa.array(np.zeros(removes.num_rows, dtype=bool)) if f.name == "dataChange" else removes.column(f.name)
        for f in fields
    ]
    return _struct_column(columns, fields)


def _struct_column(columns: list[pa.ChunkedArray | pa.Array], fields: list[pa.Field]) -> pa.ChunkedArray:
    """A struct column from row-aligned children whose chunking may differ (zero-copy slices)."""
    aligned = pa.table(columns, schema=pa.schema(fields))
    struct_type = pa.struct(fields)
    chunks = [pa.StructArray.from_arrays(batch.columns, fields=fields) for batch in aligned.to_batches()]
    return pa.chunked_array(chunks, struct_type)


def _physical_fields(state: CheckpointState) -> tuple[list[pa.Field], list[pa.Field]]:
    """The table's columns under their physical names, and the partition columns among them."""
    metadata = state.small.metadata
    schema = metadata.schema
    mode = "none"
    if "columnMapping" in reader_features(state.small.protocol):
        mode = metadata.config.column_mapping_mode
    physical = physical_schema(schema, mode)
    partitions = [physical.field(schema.get_field_index(c)) for c in metadata.partition_columns]
    return list(physical), partitions


def _action_schema(add_type: pa.DataType, remove_type: pa.DataType, *, v2: bool) -> pa.Schema:
    """The checkpoint's columns, in Spark's order."""
    fields = [
        pa.field("txn", TXN_TYPE),
        pa.field("add", add_type),
        pa.field("remove", remove_type),
        pa.field("metaData", METADATA_TYPE),
        pa.field("protocol", PROTOCOL_TYPE),
        pa.field("domainMetadata", DOMAIN_METADATA_TYPE),
    ]
    if v2:
        fields += [
            pa.field("checkpointMetadata", CHECKPOINT_METADATA_TYPE),
            pa.field("sidecar", SIDECAR_TYPE),
        ]
    return pa.schema(fields)


def _small_rows(state: CheckpointState) -> list[dict[str, Any]]:
    small = state.small
    metadata = small.metadata.to_json()
    metadata["partitionColumns"] = list(metadata["partitionColumns"])
    rows: list[dict[str, Any]] = [{"protocol": small.protocol.to_json()}, {"metaData": metadata}]
    rows += [{"txn": txn.to_json()} for _, txn in sorted(small.transactions.items())]
    rows += [{"domainMetadata": domain.to_json()} for _, domain in sorted(small.domains.items())]
    return rows


def _small_table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    columns = []
    for field in schema:
        values = [row.get(field.name) for row in rows]
        columns.append(pa.array(values, field.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _file_table(
    add_column: pa.ChunkedArray,
    remove_column: pa.ChunkedArray,
    schema: pa.Schema,
    selection: np.ndarray | None = None,
) -> pa.Table:
    """The file-action rows (adds, then removes) with the other columns null.

    :param selection: only these rows, indexing the concatenation adds + removes.
    """
    add_count = len(add_column)
    if selection is not None:
        add_take = selection[selection < add_count]
        remove_take = selection[selection >= add_count] - add_count
        add_column = add_column.take(pa.array(add_take)) if len(add_take) else add_column.slice(0, 0)
        remove_column = (
            remove_column.take(pa.array(remove_take)) if len(remove_take) else remove_column.slice(0, 0)
        )
    pieces = []
    for name, rows in (("add", add_column), ("remove", remove_column)):
        if len(rows) == 0:
            continue
        arrays = [rows if f.name == name else pa.nulls(len(rows), f.type) for f in schema]
        pieces.append(pa.Table.from_arrays(arrays, schema=schema))
    return pa.concat_tables(pieces) if pieces else schema.empty_table()


def _parquet(tables: list[pa.Table], schema: pa.Schema) -> pa.Buffer:
    """One Parquet file of the tables, each starting its own row groups.

    The non-file actions come first in a row group of their own: readers that want only
    protocol, metadata and txns skip the file-action row groups by their null counts.
    """
    sink = pa.BufferOutputStream()
    # Statistics only for the non-file action columns, which let readers skip the row groups
    # without them, and for the typed partition values, which let a partition-pruned replay skip
    # the row groups of other partitions; min/max over a million paths and stats strings would
    # only cost time.
    stats_columns = [
        path
        for path in _leaf_paths(schema)
        if path.split(".", 1)[0]
        in ("txn", "metaData", "protocol", "domainMetadata", "checkpointMetadata", "sidecar")
        or path.startswith("add.partitionValues_parsed.")
    ]
    add = schema.field("add").type if "add" in schema.names else None
    partitioned = add is not None and add.get_field_index("partitionValues_parsed") >= 0
    row_group_size = PARTITIONED_ROW_GROUP_SIZE if partitioned else ROW_GROUP_SIZE
    with pq.ParquetWriter(
        sink,
        schema,
        compression="snappy",
        use_dictionary=False,
        write_statistics=stats_columns or False,
    ) as writer:
        for table in tables:
            if table.num_rows:
                writer.write_table(table, row_group_size=row_group_size)
        if not any(t.num_rows for t in tables):
            writer.write_table(schema.empty_table())
    return sink.getvalue()


def _leaf_paths(schema: pa.Schema) -> list[str]:
    """Dotted Parquet column paths of every leaf (lists and maps with their repeated groups)."""
    paths: list[str] = []

    def walk(prefix: str, arrow_type: pa.DataType) -> None:
        if pa.types.is_struct(arrow_type):
            for child in arrow_type:
                walk(f"{prefix}.{child.name}", child.type)
        elif pa.types.is_map(arrow_type):
            walk(f"{prefix}.key_value.key", arrow_type.key_type)
            walk(f"{prefix}.key_value.value", arrow_type.item_type)
        elif pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
            walk(f"{prefix}.list.{arrow_type.value_field.name}", arrow_type.value_type)
        else:
            paths.append(prefix)

    for field in schema:
        walk(field.name, field.type)
    return paths


def _put(storage: LogStore, name: str, data: pa.Buffer) -> int:
    """Write ``_delta_log/<name>`` whole (atomically on local and S3); returns its size."""
    payload = memoryview(data) if storage.is_local else data.to_pybytes()
    storage.put(storage.log_path(name), payload)
    return int(data.size)


# --- writers ------------------------------------------------------------------------------


def write_classic(
    storage: LogStore,
    version: int,
    state: CheckpointState,
    add_column: pa.ChunkedArray,
    remove_column: pa.ChunkedArray,
) -> tuple[str, list[str], int, int]:
    schema = _action_schema(add_column.type, remove_column.type, v2=False)
    small = _small_table(_small_rows(state), schema)
    files = _file_table(add_column, remove_column, schema)
    name = classic_checkpoint_name(version)
    size = _put(storage, name, _parquet([small, files], schema))
    return "classic", [name], small.num_rows + files.num_rows, size


def write_multipart(
    storage: LogStore,
    version: int,
    state: CheckpointState,
    add_column: pa.ChunkedArray,
    remove_column: pa.ChunkedArray,
    parts: int,
) -> tuple[str, list[str], int, int]:
    schema = _action_schema(add_column.type, remove_column.type, v2=False)
    small = _small_table(_small_rows(state), schema)
    # Spark repartitions by coalesce(add.path, remove.path) (and the DV id where the table
    # supports deletion vectors): the non-file actions have a null key and land together.
    paths = pa.concat_arrays(
        [state.adds.column("path").combine_chunks(), state.removes.column("path").combine_chunks()]
    )
    keys = [paths]
    if "deletionVectors" in writer_features(state.small.protocol):
        keys.append(_dv_ids(state))
    file_parts = spark_partition_ids(keys, parts)
    small_part = int(spark_partition_ids([pa.nulls(1, pa.string())], parts)[0])
    order = np.argsort(file_parts, kind="stable")
    bounds = np.searchsorted(file_parts[order], np.arange(parts + 1))
    names, total_rows, total_bytes = [], 0, 0
    for part in range(parts):
        selection = order[bounds[part] : bounds[part + 1]]
        tables = [small] if part == small_part else []
        tables.append(_file_table(add_column, remove_column, schema, selection))
        name = multipart_checkpoint_name(version, part + 1, parts)
        total_bytes += _put(storage, name, _parquet(tables, schema))
        total_rows += sum(t.num_rows for t in tables)
        names.append(name)
        log.log(progress_level(state), "Wrote checkpoint part %d of %d (%s).", part + 1, parts, name)
    return "multipart", names, total_rows, total_bytes


def _dv_ids(state: CheckpointState) -> pa.Array:
    """The deletion-vector unique id of each file action (adds, then removes), null without a DV."""
    ids: list[str | None] = []
    for table in (state.adds, state.removes):
        column = table.column("deletionVector")
        if column.null_count == len(column):
            ids.extend([None] * len(column))
            continue
        ids.extend(deletion_vector_unique_id(dv) for dv in column.to_pylist())
    return pa.array(ids, pa.string())


def write_v2(
    storage: LogStore,
    version: int,
    state: CheckpointState,
    add_column: pa.ChunkedArray,
    remove_column: pa.ChunkedArray,
    parts: int,
) -> tuple[str, list[str], int, int]:
    schema = _action_schema(add_column.type, remove_column.type, v2=True)
    rows = [{"checkpointMetadata": {"version": version}}, *_small_rows(state)]
    file_actions = state.adds.num_rows + state.removes.num_rows
    if parts <= 1:
        # Classic-named V2 checkpoint with every action inline: older clients still find it
        # and fail on the protocol with a clear error, as the protocol recommends.
        small = _small_table(rows, schema)
        files = _file_table(add_column, remove_column, schema)
        name = classic_checkpoint_name(version)
        size = _put(storage, name, _parquet([small, files], schema))
        return "v2", [name], small.num_rows + files.num_rows, size
    sidecar_schema = pa.schema([schema.field("add"), schema.field("remove")])
    names: list[str] = []
    sidecars: list[dict[str, Any]] = []
    total_bytes = 0
    bounds = np.linspace(0, file_actions, parts + 1).astype(np.int64)
    for part in range(parts):
        selection = np.arange(bounds[part], bounds[part + 1], dtype=np.int64)
        table = _file_table(add_column, remove_column, schema, selection).select(["add", "remove"])
        sidecar_name = f"{version:020d}.checkpoint.{part + 1:010d}.{parts:010d}.{uuid.uuid4()}.parquet"
        name = f"{SIDECAR_DIR}/{sidecar_name}"
        size = _put(storage, name, _parquet([table.cast(sidecar_schema)], sidecar_schema))
        info = storage.info(storage.log_path(name))
        sidecars.append(
            {
                "path": sidecar_name,
                "sizeInBytes": size,
                "modificationTime": info.modification_time if info is not None else int(time.time() * 1000),
            }
        )
        names.append(name)
        total_bytes += size
        log.log(progress_level(state), "Wrote checkpoint sidecar %d of %d (%s).", part + 1, parts, name)
    rows += [{"sidecar": sidecar} for sidecar in sidecars]
    small = _small_table(rows, schema)
    top = f"{version:020d}.checkpoint.{uuid.uuid4()}.parquet"
    total_bytes += _put(storage, top, _parquet([small], schema))
    return "v2", [top, *names], small.num_rows + file_actions, total_bytes
