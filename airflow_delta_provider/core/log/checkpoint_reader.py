"""Reading a checkpoint: its small actions, its file actions, and whether it is one at all.

A replay asks a checkpoint two questions, each answered from only the columns it needs: the
non-file actions (protocol, metaData, txn, domainMetadata, sidecars), found by row-group
statistics and, in large row groups, page by page (:mod:`.checkpoint_pages`); and the ``add`` /
``remove`` rows, read as Arrow and checked column by column (:func:`~.file_actions.first_bad_file_row`).
A file that cannot be a checkpoint (action columns of the wrong shape, no protocol or metaData)
is refused with a :class:`CorruptLogError` naming it, so that the caller can fall back to an
older checkpoint.
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_delta_provider.core.errors import CorruptLogError
from airflow_delta_provider.core.log.checkpoint_pages import CheckpointPages
from airflow_delta_provider.core.log.commits import parse_commit
from airflow_delta_provider.core.log.file_actions import (
    ADD_SCHEMA,
    REMOVE_SCHEMA,
    first_bad_file_row,
    rows_to_table,
)
from airflow_delta_provider.core.log.logfiles import SIDECAR_DIR
from airflow_delta_provider.core.protocol.action_checks import action_problem, malformed_action_error
from airflow_delta_provider.core.storage.paths import has_scheme
from airflow_delta_provider.core.utils.arrays import from_numpy, strings, to_bools
from airflow_delta_provider.core.utils.arrays import table as arrow_table

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_delta_provider.core.log.partition_pruning import PartitionPruner
    from airflow_delta_provider.core.log.segment import Checkpoint
    from airflow_delta_provider.core.storage import LogStore


SMALL_ACTION_COLUMNS = ("protocol", "metaData", "txn", "domainMetadata", "sidecar", "checkpointMetadata")


_REPEATED_SEGMENT_RE = re.compile(r"\.(list|key_value|element|array|bag|map)\b")


def require_checkpoint_state(
    storage: LogStore, checkpoint: Checkpoint, actions: list[dict[str, Any]]
) -> None:
    """A checkpoint holds the table's protocol and metadata; a file without them is not one."""
    missing = [kind for kind in ("protocol", "metaData") if not any(kind in a for a in actions)]
    if missing:
        raise _not_a_checkpoint(storage, checkpoint, missing)


def check_checkpoint_shape(
    storage: LogStore,
    checkpoint: Checkpoint,
    actions: list[dict[str, Any]],
    footers: dict[str, pq.FileMetaData] | None = None,
) -> None:
    """:func:`require_checkpoint_state` without decoding a row, for when the checksum answered.

    Each Parquet file must open, its action columns must have the shape of actions, and its
    protocol and metaData columns must be able to hold a value by their row-group statistics;
    a JSON checkpoint was read whole (``actions``). What this cannot see (a malformed protocol
    row) is found when the file list is first asked for (:meth:`.Snapshot._log_small`).
    """
    found = {kind for kind in ("protocol", "metaData") if any(kind in a for a in actions)}
    for path in checkpoint.paths:
        if path.endswith(".json"):
            continue
        parquet = _open_parquet(storage, path, footers)
        schema = parquet.schema_arrow
        _check_checkpoint_schema(schema, storage.to_uri(path))
        leaves = _action_leaves(parquet)
        for kind in ("protocol", "metaData"):
            index = schema.get_field_index(kind)
            usable = index >= 0 and not pa.types.is_null(schema.field(index).type)
            if usable and row_groups_with_values(parquet, [kind], leaves):
                found.add(kind)
    missing = [kind for kind in ("protocol", "metaData") if kind not in found]
    if missing:
        raise _not_a_checkpoint(storage, checkpoint, missing)


def _not_a_checkpoint(storage: LogStore, checkpoint: Checkpoint, missing: list[str]) -> CorruptLogError:
    uri = storage.to_uri(checkpoint.paths[0])
    names = ", ".join(storage.to_uri(p) for p in checkpoint.paths)
    return CorruptLogError(
        f"The checkpoint {names} holds no {' and no '.join(missing)} action: it is not a usable Delta "
        f"checkpoint (every checkpoint holds the table's protocol and metaData). It was not written "
        f"by a Delta writer, or its writer failed.",
        path=uri,
    )


def sidecar_path(storage: LogStore, path: str) -> str:
    if has_scheme(path):
        return storage.path.decode(path)
    return storage.log_path(f"{SIDECAR_DIR}/{unquote(path)}")


def read_checkpoint_small_actions(
    storage: LogStore,
    checkpoint: Checkpoint,
    columns: Sequence[str] = SMALL_ACTION_COLUMNS,
    footers: dict[str, pq.FileMetaData] | None = None,
) -> list[dict[str, Any]]:
    """The non-file actions of a checkpoint (and, for JSON V2 checkpoints, its file actions).

    :param columns: the action columns to read from a Parquet checkpoint (default: every
        non-file action); a JSON checkpoint is read whole.

    :raises CorruptLogError: the file cannot be read, its action columns do not have the
        shape of actions, or an action is malformed (naming the file and the 1-based row).
    """
    actions: list[dict[str, Any]] = []
    for path in checkpoint.paths:
        uri = storage.to_uri(path)
        if path.endswith(".json"):
            commit = parse_commit(checkpoint.version, uri, _read_checkpoint_bytes(storage, path))
            actions.extend(commit.actions)
            actions.extend(commit.file_actions())
            continue
        parquet = _open_parquet(storage, path, footers)
        _check_checkpoint_schema(parquet.schema_arrow, uri)
        names = set(parquet.schema_arrow.names)
        present = [c for c in columns if c in names]
        if not present:
            continue
        leaves = _action_leaves(parquet)
        metadata = parquet.metadata
        starts = np.zeros(metadata.num_row_groups + 1, dtype=np.int64)
        np.cumsum([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)], out=starts[1:])
        pages = CheckpointPages(storage, path, parquet)
        groups = _groups_with_values(parquet, present, leaves)
        paged = {name: _paged_rows(pages, parquet, name, groups[name], starts) for name in present}
        missing = [n for n in present if paged[n] is None]
        decoded = _small_column_rows(parquet, missing, groups, leaves, starts, uri)
        for name in present:
            rows = paged[name]
            for row_number, row in decoded[name] if rows is None else rows:
                action = {name: _drop_nulls(row) if isinstance(row, dict) else row}
                problem = action_problem(action)
                if problem is not None:
                    raise malformed_action_error(
                        f"Row {row_number} of the checkpoint {uri}", problem, None, action, uri
                    )
                actions.append(action)
    return actions


def _paged_rows(
    pages: CheckpointPages,
    parquet: pq.ParquetFile,
    name: str,
    groups: list[int],
    starts: np.ndarray,
) -> list[tuple[int, Any]] | None:
    """:func:`_small_column_rows` read page by page (:mod:`.checkpoint_pages`): only for row
    groups of many rows (a small one decodes as fast whole), None when any of them cannot be.

    :param groups: the row groups that may hold the action (:func:`row_groups_with_values`).
    """
    found: list[tuple[int, Any]] = []
    for group in groups:
        if parquet.metadata.row_group(group).num_rows < _PAGED_ROWS:
            return None
        rows = pages.action_rows(name, group)
        if rows is None:
            return None
        found.extend((int(starts[group]) + row + 1, value) for row, value in rows)
    return found


#: Row groups at least this large have their small action columns read page by page.
_PAGED_ROWS = 50_000


#: Rows decoded at a time when looking for the few non-file actions in a large row group.
_SMALL_BATCH = 8192


def _small_column_rows(
    parquet: pq.ParquetFile,
    names: list[str],
    groups: dict[str, list[int]],
    leaves: dict[str, list[_Leaf]],
    starts: np.ndarray,
    uri: str,
) -> dict[str, list[tuple[int, Any]]]:
    """Per action column of ``names``, (1-based file row, value) of every row where it is present.

    Checkpoints written by delta-rs or Spark put the handful of protocol, metaData and txn rows
    in row groups of up to millions of add rows, and decoding a nested column over all of them
    costs tens of milliseconds per 100,000 rows. So, per row group whose statistics say a column
    may hold a value: in a row group of at most :data:`_ONE_READ_ROWS` rows, every such column in
    one read (one native call decodes them all); in a larger one, column by column, first the
    rows that hold one counted exactly (from the null count of a leaf the Parquet schema declares
    required inside the action, which is null only where the action is; otherwise from the
    validity of one cheap leaf, read alone), then the column decoded batch by batch, stopping once
    that many rows were found.
    """
    found: dict[str, list[tuple[int, Any]]] = {name: [] for name in names}
    try:
        for group in sorted({g for name in names for g in groups[name]}):
            wanted = [name for name in names if group in groups[name]]
            first = int(starts[group])
            if parquet.metadata.row_group(group).num_rows <= _ONE_READ_ROWS:
                table = parquet.read_row_group(group, columns=wanted, use_threads=False)
                for name in wanted:
                    found[name].extend(_present_values(table.column(name), first))
                continue
            for name in wanted:
                found[name].extend(_counted_rows(parquet, name, group, leaves, first))
    except (OSError, pa.ArrowException, ValueError, OverflowError) as err:
        raise _corrupt_checkpoint(uri, err) from None
    return found


#: Row groups of at most this many rows have their small action columns decoded in one read.
_ONE_READ_ROWS = 32_768


def _present_values(column: pa.ChunkedArray | pa.Array, first: int) -> list[tuple[int, Any]]:
    """(1-based file row, value) of the non-null rows of ``column``, whose first row is the file's
    ``first`` (0-based)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    present = np.flatnonzero(to_bools(column.is_valid()))
    if not len(present):
        return []
    values = column.take(from_numpy(present)).to_pylist(maps_as_pydicts="lossy")
    return list(zip((first + present + 1).tolist(), values, strict=True))


def _counted_rows(
    parquet: pq.ParquetFile, name: str, group: int, leaves: dict[str, list[_Leaf]], first: int
) -> list[tuple[int, Any]]:
    """The present rows of one column of a large row group, decoded batch by batch until as many
    rows as hold the action were found."""
    expected = _present_count(parquet, group, _presence_leaf(leaves.get(name, [])))
    if expected == 0:
        return []
    found: list[tuple[int, Any]] = []
    offset = 0
    batches = parquet.iter_batches(
        batch_size=_SMALL_BATCH, row_groups=[group], columns=[name], use_threads=False
    )
    for batch in batches:
        found.extend(_present_values(batch.column(0), first + offset))
        offset += len(batch)
        if expected is not None and len(found) >= expected:
            break
    return found


@dataclass(frozen=True)
class _Leaf:
    """A leaf column of an action outside lists and maps: one value (or null) per row."""

    index: int
    path: str
    #: the leaf is required inside the action: null exactly where the action is absent.
    required: bool
    #: how cheap it is to decode (lower is cheaper)
    cost: int


#: Leaf types cheapest to decode first, for the presence probe.
_PROBE_ORDER = ("BOOLEAN", "INT32", "INT64")


def _action_leaves(parquet: pq.ParquetFile) -> dict[str, list[_Leaf]]:
    """The leaves outside lists and maps of each top-level column (one pass over the schema)."""
    schema = parquet.schema
    leaves: dict[str, list[_Leaf]] = {}
    for index in range(len(schema)):
        column = schema.column(index)
        path = column.path
        if column.max_repetition_level or _REPEATED_SEGMENT_RE.search(path):
            continue
        top = path.split(".", 1)[0]
        # Directly in the action struct, with the struct's own definition level: required.
        required = path.count(".") == 1 and column.max_definition_level == 1
        physical = column.physical_type
        cost = _PROBE_ORDER.index(physical) if physical in _PROBE_ORDER else len(_PROBE_ORDER)
        leaves.setdefault(top, []).append(_Leaf(index, path, required, cost))
    return leaves


def _presence_leaf(leaves: list[_Leaf]) -> _Leaf | None:
    """The leaf to learn an action's presence from: a required one if any, else the cheapest."""
    return min(leaves, key=lambda leaf: (not leaf.required, leaf.cost)) if leaves else None


def _present_count(parquet: pq.ParquetFile, group: int, leaf: _Leaf | None) -> int | None:
    """How many rows of ``group`` hold the action (None: unknown, decode every row)."""
    if leaf is None:
        return None
    row_group = parquet.metadata.row_group(group)
    stats = row_group.column(leaf.index).statistics
    if leaf.required and stats is not None and stats.has_null_count:
        return int(row_group.num_rows - stats.null_count)
    probe = parquet.read_row_group(group, columns=[leaf.path], use_threads=False).column(0)
    return int(len(probe) - probe.null_count)


#: The action columns of a checkpoint, and the field each must have (None: any struct).
_ACTION_COLUMNS: dict[str, str | None] = {
    "add": "path",
    "remove": "path",
    "sidecar": "path",
    "protocol": None,
    "metaData": None,
    "txn": None,
    "domainMetadata": None,
    "checkpointMetadata": None,
}


def _is_text(data_type: pa.DataType) -> bool:
    return bool(pa.types.is_string(data_type) or pa.types.is_large_string(data_type))


def _check_checkpoint_schema(schema: pa.Schema, uri: str) -> None:
    """Refuse a Parquet file whose action columns are not structs (it is not a checkpoint)."""
    for name, key in _ACTION_COLUMNS.items():
        index = schema.get_field_index(name)
        if index < 0:
            continue
        column_type = schema.field(index).type
        if pa.types.is_null(column_type):
            continue  # an all-null column: no action of this kind
        if not pa.types.is_struct(column_type):
            problem = f"its {name!r} column is {column_type}, not the struct of the {name} action"
        elif key is not None and (
            column_type.get_field_index(key) < 0 or not _is_text(column_type.field(key).type)
        ):
            problem = f"its {name!r} column has no string {key!r} field"
        else:
            continue
        raise CorruptLogError(f"The checkpoint file {uri} is not a Delta checkpoint: {problem}.", path=uri)


def _drop_nulls(row: dict[str, Any]) -> dict[str, Any]:
    # Parquet gives absent optional fields as None; the JSON form omits them.
    return {k: v for k, v in row.items() if v is not None}


def row_groups_with_values(
    parquet: pq.ParquetFile, columns: list[str], leaves: dict[str, list[_Leaf]] | None = None
) -> list[int]:
    """Row groups where any of ``columns`` may be non-null, judged by column statistics.

    A checkpoint of a million files has a handful of non-file rows; statistics let the
    reader skip every row group that holds only add rows.
    """
    metadata = parquet.metadata
    leaves = leaves if leaves is not None else _action_leaves(parquet)
    wanted = [[leaf.index for leaf in leaves.get(c, [])] for c in columns]
    if any(not indexes for indexes in wanted):
        return list(range(metadata.num_row_groups))
    groups = []
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        if any(not all(_all_null(row_group, i) for i in indexes) for indexes in wanted):
            groups.append(group)
    return groups


def _groups_with_values(
    parquet: pq.ParquetFile, names: list[str], leaves: dict[str, list[_Leaf]]
) -> dict[str, list[int]]:
    """:func:`row_groups_with_values` of each column of ``names``, in one pass over the row groups
    (a checkpoint of a million files in small row groups has dozens)."""
    metadata = parquet.metadata
    wanted = {name: [leaf.index for leaf in leaves.get(name, [])] for name in names}
    found: dict[str, list[int]] = {name: [] for name in names}
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for name, indexes in wanted.items():
            if not indexes or not all(_all_null(row_group, i) for i in indexes):
                found[name].append(group)
    return found


def _all_null(row_group: pq.RowGroupMetaData, column: int) -> bool:
    stats = row_group.column(column).statistics
    if stats is None or not stats.has_null_count:
        return False
    return bool(stats.null_count >= row_group.num_rows)


def _open_parquet(
    storage: LogStore, path: str, footers: dict[str, pq.FileMetaData] | None = None
) -> pq.ParquetFile:
    """A checkpoint file opened; with ``footers``, its footer is taken from there when it was read
    before (the files are never rewritten under their name), and kept there when not."""
    uri = storage.to_uri(path)
    try:
        source = path if storage.is_local else storage.arrow_fs.open_input_file(path)
        if footers is None:
            return pq.ParquetFile(source)
        parquet = pq.ParquetFile(source, metadata=footers.get(path))
        footers.setdefault(path, parquet.metadata)
        return parquet
    except FileNotFoundError:
        raise CorruptLogError(
            f"The checkpoint file {uri} is missing: it disappeared while the table was being read.",
            path=uri,
        ) from None
    except (OSError, pa.ArrowException) as err:
        raise _corrupt_checkpoint(uri, err) from None


def _read_checkpoint_bytes(storage: LogStore, path: str) -> bytes:
    try:
        return storage.read_bytes(path)
    except FileNotFoundError:
        uri = storage.to_uri(path)
        raise CorruptLogError(f"The checkpoint file {uri} is missing.", path=uri) from None


def _corrupt_checkpoint(uri: str, err: Exception) -> CorruptLogError:
    return CorruptLogError(
        f"The checkpoint file {uri} cannot be read ({err}); it is truncated or corrupt.", path=uri
    )


def read_checkpoint_files(
    storage: LogStore,
    checkpoint: Checkpoint | None,
    *,
    sidecars: Sequence[str] = (),
    json_actions: Sequence[dict[str, Any]] = (),
    footers: dict[str, pq.FileMetaData] | None = None,
    removes: bool,
    pruner: PartitionPruner | None = None,
) -> tuple[pa.Table, pa.Table]:
    """The checkpoint's ``add`` rows and, with ``removes``, its ``remove`` rows, each checked.

    :param sidecars: the V2 checkpoint's sidecar files (filesystem paths), read like its parts.
    :param json_actions: the file actions of a JSON (V2) checkpoint's top-level file.
    :param footers: the footers read so far, by path (see :func:`read_checkpoint_small_actions`).
    :param pruner: only the adds of the partitions it selects (no removes): row groups its
        statistics rule out are not read, and of the others only ``add.partitionValues`` unless
        one of their files is selected; only the selected rows are checked.
    :raises CorruptLogError: a file cannot be read or holds a malformed action (file and row named).
    """
    if checkpoint is None:
        return arrow_table([], ADD_SCHEMA), arrow_table([], REMOVE_SCHEMA)
    if pruner is not None and removes:
        raise ValueError("A partition-pruned replay reads no removes.")
    add_parts: list[pa.Table] = []
    remove_parts: list[pa.Table] = []
    sources = [p for p in checkpoint.paths if not p.endswith(".json")] + list(sidecars)
    for path in sources:
        uri = storage.to_uri(path)
        parquet = _open_parquet(storage, path, footers)
        schema = parquet.schema_arrow
        _check_checkpoint_schema(schema, uri)
        wanted = [c for c in ("add", "remove") if c in schema.names and (c == "add" or removes)]
        if not wanted:
            continue
        if pruner is not None:
            add_parts.append(_pruned_adds(storage, path, parquet, pruner, uri))
            continue
        try:
            table = _read_columns(storage, path, parquet, wanted)
        except (OSError, pa.ArrowException) as err:
            raise _corrupt_checkpoint(uri, err) from None
        if "add" in wanted:
            add_parts.append(_checkpoint_file_rows(table.column("add"), ADD_SCHEMA, "add", uri))
        if "remove" in wanted:
            remove_parts.append(_checkpoint_file_rows(table.column("remove"), REMOVE_SCHEMA, "remove", uri))
    if json_actions:
        json_adds = [a["add"] for a in json_actions if "add" in a]
        json_removes = [a["remove"] for a in json_actions if "remove" in a]
        if json_adds:
            table = rows_to_table(json_adds, ADD_SCHEMA)
            if pruner is not None:
                table = table.filter(pa.array(pruner.mask(table.column("partitionValues"))))
            add_parts.append(table)
        if json_removes and removes:
            remove_parts.append(rows_to_table(json_removes, REMOVE_SCHEMA))
    adds = pa.concat_tables(add_parts) if add_parts else arrow_table([], ADD_SCHEMA)
    tombstones = pa.concat_tables(remove_parts) if remove_parts else arrow_table([], REMOVE_SCHEMA)
    return adds, tombstones


def _pruned_adds(
    storage: LogStore, path: str, parquet: pq.ParquetFile, pruner: PartitionPruner, uri: str
) -> pa.Table:
    """The ``add`` rows of one checkpoint file that ``pruner`` selects, checked (see
    :func:`read_checkpoint_files`). Of several row groups left by the statistics, the partition
    values are decoded first (typed ``partitionValues_parsed`` where it can be trusted, else the
    map), and the other fields only in the groups holding a selected file; one group is decoded
    whole at once."""
    metadata = parquet.metadata
    groups = pruner.row_groups(parquet)
    if not groups:
        return arrow_table([], ADD_SCHEMA)
    parsed = pruner.parsed_column(parquet.schema_arrow)
    starts = np.zeros(metadata.num_row_groups + 1, dtype=np.int64)
    np.cumsum([metadata.row_group(g).num_rows for g in range(metadata.num_row_groups)], out=starts[1:])

    def file_rows_of(chosen: list[int]) -> np.ndarray:
        return np.concatenate([np.arange(starts[g], starts[g + 1]) for g in chosen])

    def mask_of(column: pa.ChunkedArray) -> np.ndarray:
        # Chunk by chunk: combining a million rows' strings would copy them all.
        found = [pruner.mask_of_adds(chunk, parsed=parsed) for chunk in column.chunks]
        return np.concatenate(found) if found else np.zeros(0, dtype=bool)

    try:
        selected = None
        if len(groups) > 1:
            key = "add.partitionValues_parsed" if parsed else "add.partitionValues"
            keys = parquet.read_row_groups(groups, columns=[key], use_threads=False).column("add")
            selected = file_rows_of(groups)[mask_of(keys)]
            groups = sorted({int(g) - 1 for g in np.searchsorted(starts, selected, side="right")})
            if not groups:
                return arrow_table([], ADD_SCHEMA)
        column = _read_columns(storage, path, parquet, ["add"], groups).column("add")
        read_rows = file_rows_of(groups)
        # The rows the partition values selected (judged once), as positions in what was read.
        mask = mask_of(column) if selected is None else np.isin(read_rows, selected, assume_unique=True)
    except (OSError, pa.ArrowException) as err:
        raise _corrupt_checkpoint(uri, err) from None
    except (KeyError, ValueError, TypeError) as err:  # no partitionValues where an add is
        raise _corrupt_checkpoint(uri, err) from None
    kept = []
    offset = 0
    for chunk in column.chunks:
        part = mask[offset : offset + len(chunk)]
        offset += len(chunk)
        if part.any():
            kept.append(chunk.filter(pa.array(part)))
    rows = pa.chunked_array(kept, type=column.type)
    return _checkpoint_file_rows(rows, ADD_SCHEMA, "add", uri, file_rows=read_rows[mask])


def _read_columns(
    storage: LogStore,
    path: str,
    parquet: pq.ParquetFile,
    columns: list[str],
    row_groups: list[int] | None = None,
) -> pa.Table:
    """``columns`` of a Parquet file, its row groups decoded in parallel, in file order.

    What ``pq.read_table`` does, without its dataset machinery (whose first import costs
    tens of milliseconds and imports pandas): each worker reads a contiguous run of row groups
    through a reader of its own, sharing the footer already read; a local file of one row group
    is read through ``parquet``, the reader already open (opening another costs about 0.4 ms per
    60-column footer, pyarrow mapping its column paths).
    """
    metadata = parquet.metadata
    chosen = list(range(metadata.num_row_groups)) if row_groups is None else row_groups
    groups = len(chosen)
    workers = min(groups, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 2, 8)

    def read(run: list[int]) -> pa.Table:
        source = path if storage.is_local else storage.arrow_fs.open_input_file(path)
        reader = pq.ParquetFile(source, metadata=metadata, pre_buffer=True)
        return reader.read_row_groups(run, columns=columns, use_threads=False)

    if workers <= 1:
        if storage.is_local:
            return parquet.read_row_groups(chosen, columns=columns, use_threads=False)
        return read(chosen)
    runs = [chosen[i * groups // workers : (i + 1) * groups // workers] for i in range(workers)]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return pa.concat_tables(list(pool.map(read, runs)))


def _checkpoint_file_rows(
    column: pa.ChunkedArray | pa.Array,
    schema: pa.Schema,
    kind: str,
    uri: str,
    file_rows: np.ndarray | None = None,
) -> pa.Table:
    """A checkpoint's ``add``/``remove`` column as a flat table, after the columnar equivalent of
    :func:`~.action_checks.action_problem` (required fields, sizes, paths that stay under the root).

    :param file_rows: the 0-based file row of each entry of ``column`` (default: its position).
    :raises CorruptLogError: naming the file and the 1-based row of the first bad action.
    """
    if isinstance(column, pa.Array):
        column = pa.chunked_array([column])
    try:
        flat = _conform_actions(column, schema)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as err:
        raise CorruptLogError(
            f"The checkpoint file {uri} is not a readable Delta checkpoint: its {kind!r} column does not "
            f"hold {kind} actions ({err}).",
            path=uri,
        ) from None
    bad = first_bad_file_row(flat, kind)
    if bad is None:
        return flat
    index, problem = bad
    valid = to_bools(pc.is_valid(column))
    position = int(np.flatnonzero(valid)[index])
    row = (int(file_rows[position]) if file_rows is not None else position) + 1
    raise malformed_action_error(f"Row {row} of the checkpoint {uri}", problem, None, {kind: None}, uri)


def _conform_actions(column: pa.ChunkedArray, schema: pa.Schema) -> pa.Table:
    """Rows of a checkpoint action column where the action is present, as a flat table."""
    chunks = []
    for chunk in column.chunks:
        for piece in _valid_runs(chunk):
            chunks.append(_flatten(piece, schema))
    if not chunks:
        return arrow_table([], schema)
    return pa.Table.from_batches(chunks, schema=schema)


def _valid_runs(chunk: pa.StructArray) -> list[pa.StructArray]:
    """The non-null stretches of a struct array, as zero-copy slices where they are few.

    Checkpoint rows are one action each, so the add column is null on the few protocol,
    metadata and txn rows; slicing around them avoids copying a million rows' strings.
    """
    if chunk.null_count == 0:
        return [chunk]
    if chunk.null_count == len(chunk):
        return []
    valid = to_bools(chunk.is_valid())
    edges = np.flatnonzero(np.diff(np.concatenate(([False], valid, [False])).astype(np.int8)))
    starts, ends = edges[0::2], edges[1::2]
    if len(starts) > 256:
        return [chunk.filter(from_numpy(valid))]
    return [chunk.slice(int(s), int(e - s)) for s, e in zip(starts, ends, strict=True)]


def _flatten(struct: pa.StructArray, schema: pa.Schema) -> pa.RecordBatch:
    struct_type = struct.type
    arrays = []
    for target in schema:
        index = struct_type.get_field_index(target.name)
        if index < 0:
            if target.name == "stats":
                arrays.append(_stats_from_parsed(struct))
                continue
            arrays.append(pa.nulls(len(struct), target.type))
            continue
        arrays.append(_conform(struct.field(index), target.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _conform(array: pa.Array, target: pa.DataType) -> pa.Array:
    """Cast a checkpoint column to the type this core uses, field by field for structs."""
    if array.type == target:
        return array
    if pa.types.is_struct(target) and pa.types.is_struct(array.type):
        children = []
        for child in target:
            index = array.type.get_field_index(child.name)
            children.append(
                _conform(array.field(index), child.type) if index >= 0 else pa.nulls(len(array), child.type)
            )
        mask = array.is_null() if array.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    return array.cast(target)


def _stats_from_parsed(struct: pa.StructArray) -> pa.Array:
    """``stats`` as JSON from ``stats_parsed`` for checkpoints written without JSON stats."""
    index = struct.type.get_field_index("stats_parsed")
    if index < 0:
        return pa.nulls(len(struct), pa.string())
    parsed = struct.field(index).to_pylist()
    return strings(
        [None if p is None else json.dumps(p, default=_json_scalar, separators=(",", ":")) for p in parsed]
    )


def _json_scalar(value: Any) -> Any:
    if hasattr(value, "isoformat"):
        text = value.isoformat()
        return text.replace("+00:00", "Z")
    return str(value)
