"""The file actions of the commits after a checkpoint, reconciled: the newest per file wins.

The newest ``add`` or ``remove`` per ``(canonical path, deletion vector id)`` wins, and a
checkpoint row whose key the commits touched is dropped (:func:`drop_touched`). Long tails
are read by Arrow's JSON reader against an explicit schema and checked column by column
(:func:`~.file_actions.first_bad_file_row`); lines Arrow cannot represent exactly take the
exact route (``json`` and :func:`~.action_checks.action_problem`) one by one, and a tail
Arrow cannot vouch for takes it whole, which names the file and line of a malformed action.
Paths are compared after canonicalisation, as Delta does: URL-decoded, relative to the table
root when they point under it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from airflow_delta_provider.core.errors import CorruptLogError
from airflow_delta_provider.core.log.commits import (
    file_line_origin,
    parse_line,
    segment_file_actions,
    segment_file_lines,
)
from airflow_delta_provider.core.log.deletion_vectors import deletion_vector_unique_id
from airflow_delta_provider.core.log.file_actions import (
    ADD_SCHEMA,
    DELETION_VECTOR_TYPE,
    REMOVE_SCHEMA,
    first_bad_file_row,
    rows_to_table,
)
from airflow_delta_provider.core.protocol.action_checks import action_problem, malformed_action_error
from airflow_delta_provider.core.utils.arrays import from_numpy, scalar, strings, to_bools
from airflow_delta_provider.core.utils.arrays import table as arrow_table
from airflow_delta_provider.core.utils.memory import READ_POOL

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow_delta_provider.core.log.commits import CommitActions
    from airflow_delta_provider.core.storage import LogStore
    from airflow_delta_provider.core.storage.paths import TablePath


#: ``map<string, string>``, as the log holds partition values.
_PARTITION_VALUES = ADD_SCHEMA.field("partitionValues").type
#: A JSON escape of a UTF-16 surrogate (``\\ud800``-``\\udfff``).
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


@dataclass
class TouchedKeys:
    """Every (canonical path, DV id) key the commits after a checkpoint touched.

    :param key_values: the keys, as Arrow strings (repeats allowed);
    :param path_values: their canonical paths (repeats allowed: ``pc.is_in`` takes them as they
        are, and making them distinct first costs more than the lookup). The keys are made
        distinct only when asked (a log without a checkpoint never asks).
    """

    key_values: pa.Array
    path_values: pa.Array

    @functools.cached_property
    def keys(self) -> set[str]:
        return set(self.key_values.unique().to_pylist())

    def __bool__(self) -> bool:
        return len(self.key_values) > 0


#: Fewer ``add``/``remove`` lines than this (the usual tail after a checkpoint) take the exact
#: route: below it the JSON reader's fixed cost outweighs what it saves (both routes answer the
#: same; measured crossover 150-200 lines).
COLUMNAR_MIN_FILE_LINES = 128


def reconcile_commits(
    storage: LogStore, commits: list[CommitActions], partition_columns: Sequence[str] = ()
) -> tuple[pa.Table, pa.Table, TouchedKeys]:
    """The commits' winning adds and removes, and every key the commits touched.

    The columnar route (:func:`_columnar_file_actions`) answers long tails when it can do so
    exactly; otherwise every line takes the exact route (``json`` and :func:`action_problem` per action),
    which also names the file and line of a malformed action.
    """
    if sum(commit.file_line_count for commit in commits) >= COLUMNAR_MIN_FILE_LINES:
        columnar = _columnar_file_actions(storage.path, commits, partition_columns)
        if columnar is not None:
            return columnar
    return _reconcile_exact(storage, commits)


def _reconcile_exact(
    storage: LogStore, commits: list[CommitActions]
) -> tuple[pa.Table, pa.Table, TouchedKeys]:
    """:func:`reconcile_commits` one parsed action at a time."""
    rows: list[dict[str, Any]] = []
    paths: list[str] = []
    keys: list[str] = []
    is_add: list[bool] = []
    canonical = storage.path.canonical
    # Every action here passed action_problem: path, types and ranges are as the protocol says.
    for commit, actions in segment_file_actions(commits):
        for action in actions:
            if "add" in action:
                row, flag = action["add"], True
            elif "remove" in action:
                row, flag = action["remove"], False
            else:
                continue
            rows.append(row)
            path = canonical(row["path"])
            if not path.isascii():
                _require_unicode(path, commit.path)
            paths.append(path)
            keys.append(_key(path, deletion_vector_unique_id(row.get("deletionVector"))))
            is_add.append(flag)
    touched = TouchedKeys(strings(keys), strings(paths))
    if not keys:
        return arrow_table([], ADD_SCHEMA), arrow_table([], REMOVE_SCHEMA), touched
    winners = _last_per_key(keys)
    adds = [rows[i] for i in winners if is_add[i]]
    removes = [rows[i] for i in winners if not is_add[i]]
    return (
        rows_to_table(adds, ADD_SCHEMA) if adds else arrow_table([], ADD_SCHEMA),
        rows_to_table(removes, REMOVE_SCHEMA) if removes else arrow_table([], REMOVE_SCHEMA),
        touched,
    )


def _require_unicode(path: str, where: str) -> None:
    """Refuse a path ``json`` decoded from a lone surrogate escape (``"\\ud800"``): no file has it."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise CorruptLogError(
            f"A file action in {where} has the path {path[:200]!r}, which is not valid Unicode (a lone "
            f"surrogate escape). The log is corrupt; restore the file from a backup.",
            path=where,
        ) from None


def _last_per_key(keys: list[str]) -> list[int]:
    """Positions of the newest action per key, in log order.

    A dict keeps each key's last position (no Arrow group-by, whose first use imports
    pyarrow.dataset, and with it pandas).
    """
    return sorted(dict(zip(keys, range(len(keys)), strict=True)).values())


def _key(path: str, dv_id: str | None) -> str:
    return f"{path}\x00{dv_id}" if dv_id is not None else path


def _has_pair(data: bytearray, pair: np.uint16) -> bool:
    """Whether two bytes (``pair``, as one 16-bit value) follow each other somewhere in ``data``.

    ``b"\\u" in data`` takes ~1 ms per MB of log text, whose stats strings hold a backslash
    every ~15 bytes; comparing 16-bit pairs at both alignments takes an eighth of that.
    """
    raw = np.frombuffer(data, dtype=np.uint8)
    mask = np.empty(min(_PAIR_CHUNK, raw.size // 2), dtype=bool)  # small and reused: fresh memory costs
    for start in (0, 1):
        pairs = raw[start : start + (raw.size - start) // 2 * 2].view(np.uint16)
        for begin in range(0, len(pairs), _PAIR_CHUNK):
            part = pairs[begin : begin + _PAIR_CHUNK]
            if np.equal(part, pair, out=mask[: len(part)]).any():
                return True
    return False


_PAIR_CHUNK = 1 << 19


_UNICODE_ESCAPE = np.frombuffer(b"\\u", dtype=np.uint16)[0]


_TEXT = pa.string()


_LONG = pa.int64()


#: A deletion vector as read from JSON: every integer as a long, range-checked on the exact route.
_JSON_DELETION_VECTOR = pa.struct(
    [
        ("storageType", _TEXT),
        ("pathOrInlineDv", _TEXT),
        ("offset", _LONG),
        ("sizeInBytes", _LONG),
        ("cardinality", _LONG),
        ("maxRowIndex", _LONG),
    ]
)


#: Fields of a file action the columnar route reads as Arrow; any other field the protocol
#: defines (``tags``) sends its line to the exact route when it is not null.
_EXACT_ONLY_FIELDS = ("tags",)


def _json_file_schema(partition_columns: Sequence[str]) -> pa.Schema:
    """The ``add``/``remove`` lines as Arrow's JSON reader reads them, ``partitionValues`` as a
    struct of the partition columns (the reader cannot build a ``map<string, string>``)."""
    values = pa.struct([(name, _TEXT) for name in partition_columns])
    add = pa.struct(
        [
            ("path", _TEXT),
            ("partitionValues", values),
            ("size", _LONG),
            ("modificationTime", _LONG),
            ("dataChange", pa.bool_()),
            ("stats", _TEXT),
            ("deletionVector", _JSON_DELETION_VECTOR),
            ("baseRowId", _LONG),
            ("defaultRowCommitVersion", _LONG),
            ("clusteringProvider", _TEXT),
        ]
    )
    remove = pa.struct(
        [
            ("path", _TEXT),
            ("deletionTimestamp", _LONG),
            ("dataChange", pa.bool_()),
            ("extendedFileMetadata", pa.bool_()),
            ("partitionValues", values),
            ("size", _LONG),
            ("stats", _TEXT),
            ("deletionVector", _JSON_DELETION_VECTOR),
            ("baseRowId", _LONG),
            ("defaultRowCommitVersion", _LONG),
        ]
    )
    return pa.schema([("add", add), ("remove", remove)])


def _columnar_file_actions(
    root: TablePath, commits: list[CommitActions], partition_columns: Sequence[str]
) -> tuple[pa.Table, pa.Table, TouchedKeys] | None:
    """:func:`reconcile_commits` with the ``add``/``remove`` lines parsed by Arrow's JSON reader
    against an explicit schema, checked and reconciled column by column; None when the exact
    route must answer.

    Exactness: Arrow's reader refuses every value of the wrong JSON type, integers out of
    ``long`` range or written as floats, duplicate keys and invalid JSON (then None: the
    exact route parses the lines again and names the bad one). It accepts invalid UTF-8 and
    lone surrogates, which ``json`` refuses, so those send the segment to the exact route
    before it runs. Unknown fields are inferred, then ignored, as the exact route ignores
    them; a line with another top-level key, or with partition values outside the table's
    partition columns, sends the segment to the exact route. Lines Arrow cannot represent
    exactly take the exact route one by one: ``tags`` (a map), deletion vectors (their id is
    part of the key, their integers are range-checked), a missing or null partition value (a
    struct cannot tell them apart, a map can), partition values not written in the order of
    the partition columns (a map keeps the order of the line).
    """
    found = segment_file_lines(commits)
    if found is None:
        return None
    data, starts = found
    del found
    if not starts[-1]:
        empty = strings([])
        return arrow_table([], ADD_SCHEMA), arrow_table([], REMOVE_SCHEMA), TouchedKeys(empty, empty)
    columns = _read_file_lines(data, starts[-1], partition_columns) if _arrow_reads_as_json(data) else None
    del data  # the text of every line, no longer needed: a lower peak
    if columns is None or not columns.mark_exact_rows(commits, partition_columns):
        return None
    # The checks of a checkpoint's file rows (the columnar action_problem); the exact route
    # names the line of a bad one.
    if first_bad_file_row(_rows_of(columns.add, columns.is_add), "add") is not None:
        return None
    if first_bad_file_row(_rows_of(columns.remove, columns.is_remove), "remove") is not None:
        return None
    exact_actions = _exact_actions(commits, starts, columns.exact)
    touched = _touched_keys(root, pc.coalesce(columns.add["path"], columns.remove["path"]), exact_actions)
    winners = _last_positions(touched.key_values)
    adds = _winning_rows(
        winners[columns.is_add[winners]], columns.add, columns.exact, exact_actions, ADD_SCHEMA
    )
    removes = _winning_rows(
        winners[columns.is_remove[winners]], columns.remove, columns.exact, exact_actions, REMOVE_SCHEMA
    )
    for commit in commits:
        commit.mark_files_checked()
    return adds, removes, touched


def _arrow_reads_as_json(data: bytearray) -> bool:
    """Whether Arrow's JSON reader reads ``data`` as ``json`` does: it accepts invalid UTF-8 and
    may disagree on a lone escaped surrogate, which ``json`` refuses."""
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return False
    return not (_has_pair(data, _UNICODE_ESCAPE) and _SURROGATE_ESCAPE.search(data))


@dataclass
class _FileColumns:
    """The ``add`` / ``remove`` lines as read by Arrow: each action's fields, which line holds
    which action, and the lines only the exact route represents."""

    add: dict[str, pa.Array | pa.ChunkedArray]
    remove: dict[str, pa.Array | pa.ChunkedArray]
    is_add: np.ndarray
    is_remove: np.ndarray
    schema: pa.Schema
    exact: np.ndarray

    def mark_exact_rows(self, commits: list[CommitActions], partition_columns: Sequence[str]) -> bool:
        """Mark :attr:`exact` (:func:`_mark_exact_rows`); False when the whole tail must take the
        exact route."""
        lines = functools.cache(lambda: [line for c in commits for _, line in c.file_lines])
        return all(
            _mark_exact_rows(fields, self.schema.field(kind).type, partition_columns, lines, self.exact)
            for kind, fields in (("add", self.add), ("remove", self.remove))
        )


def _read_file_lines(data: bytearray, count: int, partition_columns: Sequence[str]) -> _FileColumns | None:
    """The ``count`` lines of ``data`` read by Arrow's JSON reader, or None when a line is not
    exactly one ``add`` or ``remove`` of the protocol's types (the exact route names it)."""
    schema = _json_file_schema(partition_columns)
    try:
        parsed = pa_json.read_json(
            pa.py_buffer(data),
            parse_options=pa_json.ParseOptions(
                explicit_schema=_json_declared_schema(schema), unexpected_field_behavior="infer"
            ),
            memory_pool=READ_POOL,
        )
    except (pa.ArrowException, ValueError):
        return None
    if parsed.num_rows != count or parsed.schema.names[:2] != ["add", "remove"]:
        return None
    # Keys beside the action that are no action the protocol defines are ignored, as the exact
    # route ignores them; another action on the line is refused there.
    if any(action_problem({name: None}) is not None for name in parsed.schema.names[2:]):
        return None
    add, remove = parsed.column("add"), parsed.column("remove")
    is_add, is_remove = to_bools(add.is_valid()), to_bools(remove.is_valid())
    if (is_add == is_remove).any():
        return None  # a line with both actions, or with a null one: the exact route refuses it
    add_fields = _typed_fields(add, schema.field("add").type)
    remove_fields = _typed_fields(remove, schema.field("remove").type)
    if add_fields is None or remove_fields is None:
        return None  # a field of another type than the protocol's: the exact route names it
    exact = np.zeros(count, dtype=bool)
    return _FileColumns(add_fields, remove_fields, is_add, is_remove, schema, exact)


def _exact_actions(
    commits: list[CommitActions], starts: list[int], exact: np.ndarray
) -> dict[int, dict[str, Any]]:
    """The exact route for the lines Arrow cannot represent: each parsed and checked (named when
    bad), as its action's payload by line position."""
    actions: dict[int, dict[str, Any]] = {}
    for index in np.flatnonzero(exact).tolist():
        commit, number, line = file_line_origin(commits, starts, index)
        action = parse_line(line, commit.path, number)
        problem = action_problem(action)
        if problem is not None:
            raise malformed_action_error(
                f"Line {number} of {commit.path}", problem, line, action, commit.path
            )
        actions[index] = action["add"] if "add" in action else action["remove"]
    return actions


def _touched_keys(root: TablePath, paths: pa.Array, exact_actions: dict[int, dict[str, Any]]) -> TouchedKeys:
    """Each line's key: its canonical path, with the deletion vector's id where it has one (only
    lines of the exact route do)."""
    if _any_needs_canonical(pa.chunked_array([paths])):
        paths = strings([root.canonical(p) for p in paths.to_pylist()])
    dv_ids = {i: deletion_vector_unique_id(row.get("deletionVector")) for i, row in exact_actions.items()}
    dv_ids = {i: unique for i, unique in dv_ids.items() if unique is not None}
    if not dv_ids:
        return TouchedKeys(paths, paths)
    keys = paths.to_pylist()
    for index, unique in dv_ids.items():
        keys[index] = _key(keys[index], unique)
    return TouchedKeys(strings(keys), paths)


def _last_positions(keys: pa.Array) -> np.ndarray:
    """Positions of the last occurrence of each key, ascending (what :func:`_last_per_key` gives)."""
    encoded = pc.dictionary_encode(keys)  # no nulls: every key is a path
    if len(encoded.dictionary) == len(keys):
        return np.arange(len(keys))  # every key once (a tail of new files): no sort
    indices = encoded.indices
    # Read from the buffer: ``to_numpy`` and ``np.asarray`` import pandas.
    codes = np.frombuffer(
        indices.buffers()[1], dtype=np.int64 if pa.types.is_int64(indices.type) else np.int32
    )
    codes = codes[indices.offset : indices.offset + len(indices)]
    _, first_from_end = np.unique(codes[::-1], return_index=True)
    return np.sort(len(codes) - 1 - first_from_end)


def _json_declared_schema(schema: pa.Schema) -> pa.Schema:
    """What the reader is told of :func:`_json_file_schema`: the strings (it would read a text
    that looks like a date as a timestamp) and the partition values; it infers the other fields
    (twice as fast as converting them to declared types), and :func:`_typed_fields` checks them."""
    return pa.schema(
        [
            (kind.name, pa.struct([f for f in kind.type if f.type == _TEXT or f.name == "partitionValues"]))
            for kind in schema
        ]
    )


def _typed_fields(
    column: pa.ChunkedArray, expected: pa.StructType
) -> dict[str, pa.Array | pa.ChunkedArray] | None:
    """The fields of one action as read (one array each, ``stats`` in the reader's chunks), each
    of its ``expected`` type (absent or all null: nulls of that type); None when one was
    inferred as another type (a float, a string for a number, ...). Fields the protocol does
    not define are kept as inferred."""
    count = len(column)
    struct_type = column.type
    fields: dict[str, pa.Array | pa.ChunkedArray] = {}
    for index in range(struct_type.num_fields):
        child = struct_type.field(index)
        # ``StructArray.field`` ignores the struct's own validity; rows of the other action are
        # null in every field, as the reader fills them.
        parts = [chunk.field(index) for chunk in column.chunks]
        if child.name in _KEPT_IN_CHUNKS:
            fields[child.name] = pa.chunked_array(parts, type=child.type)
        else:
            fields[child.name] = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
    for target in expected:
        found = fields.get(target.name)
        if found is None or pa.types.is_null(found.type):
            fields[target.name] = pa.nulls(count, target.type)
        elif target.name == "deletionVector":
            continue  # rows with one take the exact route
        elif found.type != target.type:
            return None
    return fields


#: Fields left in the JSON reader's chunks (one per ~1 MB block): the long texts, which the
#: file list only passes on; joining them was a copy of ~2 MB per 10,000 lines into fresh memory.
_KEPT_IN_CHUNKS = frozenset({"stats"})


def _mark_exact_rows(
    fields: dict[str, pa.Array],
    expected: pa.StructType,
    partition_columns: Sequence[str],
    lines: Callable[[], list[bytes]],
    exact: np.ndarray,
) -> bool:
    """Mark in ``exact`` the rows of one action only the exact route represents; False when
    the whole segment must take the exact route."""
    for name in _EXACT_ONLY_FIELDS:
        if name in fields and expected.get_field_index(name) < 0:
            exact |= to_bools(fields[name].is_valid())
    exact |= to_bools(fields["deletionVector"].is_valid())
    values = fields["partitionValues"]
    if values.type.num_fields != len(partition_columns):
        return False  # keys outside the partition columns: which rows hold them, a struct cannot say
    present = to_bools(values.is_valid())
    for index in range(values.type.num_fields):
        exact |= present & to_bools(values.field(index).is_null())
    if len(partition_columns) > 1 and present.any():
        exact |= present & ~_values_in_column_order(lines(), partition_columns)
    return True


def _values_in_column_order(lines: list[bytes], partition_columns: Sequence[str]) -> np.ndarray:
    """Per line, whether its one ``partitionValues`` object lists the partition columns in
    their order (a map keeps the order of the line, a struct the order of the schema)."""
    value = r'\s*:\s*(?:null|"(?:[^"\\]|\\.)*")\s*'
    keys = ",".join(f'\\s*"{_re2_literal(name)}"{value}' for name in partition_columns)
    texts = strings([line.decode("utf-8") for line in lines])
    ordered = pc.match_substring_regex(texts, r'"partitionValues"\s*:\s*\{' + keys + r"\}")
    once = pc.equal(pc.count_substring(texts, '"partitionValues"'), scalar(1, pa.int32()))
    return to_bools(pc.and_(ordered, once))


def _re2_literal(text: str) -> str:
    """``text`` as a regular expression (RE2 syntax) matching exactly it."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "_") else f"\\x{{{ord(c):X}}}" for c in text)


def _rows_of(fields: dict[str, pa.Array], present: np.ndarray) -> pa.Table:
    """The rows of one action, with the fields :func:`first_bad_file_row` checks."""
    names = ("path", "partitionValues", "size", "modificationTime", "dataChange")
    if present.all():  # (a tail of adds only: no copy)
        columns = {name: fields[name] for name in names if name in fields}
    else:
        mask = from_numpy(present)
        columns = {name: fields[name].filter(mask) for name in names if name in fields}
    # Rows with a deletion vector take the exact route, which checks it.
    columns["deletionVector"] = pa.nulls(int(present.sum()), DELETION_VECTOR_TYPE)
    return pa.table(columns)


def _winning_rows(
    rows: np.ndarray,
    fields: dict[str, pa.Array],
    exact: np.ndarray,
    exact_actions: dict[int, dict[str, Any]],
    schema: pa.Schema,
) -> pa.Table:
    """The winning rows of one action, in log order, as ``schema``: Arrow's columns where the
    row took the columnar route, the exact route's values where it did not."""
    if not len(rows):
        return arrow_table([], schema)
    from_arrow = rows[~exact[rows]]
    from_python = rows[exact[rows]]
    # Every line is a winner of this action on the columnar route (a tail of adds of distinct
    # files, the usual case): Arrow's columns as they are, no copy.
    every = len(from_arrow) == len(fields["path"])

    def pick(values: pa.Array) -> pa.Array:
        return values if every else values.take(from_numpy(from_arrow))

    columns = []
    for target in schema:
        if target.name == "partitionValues":
            columns.append(_struct_to_map(pick(fields[target.name])))
        elif target.name in ("tags", "deletionVector") or target.name not in fields:
            columns.append(pa.nulls(len(from_arrow), target.type))
        else:
            columns.append(pick(fields[target.name]))
    table = pa.Table.from_arrays(columns, schema=schema)
    if not len(from_python):
        return table
    python_rows = rows_to_table([exact_actions[i] for i in from_python.tolist()], schema)
    # Back to log order: the Arrow rows first, then the exact ones, each at its place.
    order = np.argsort(np.concatenate([from_arrow, from_python]), kind="stable")
    return pa.concat_tables([table, python_rows]).take(from_numpy(order))


def _struct_to_map(values: pa.StructArray) -> pa.Array:
    """Partition values read as a struct (every field present) as the ``map<string, string>``
    of the log, keys in the order of the partition columns."""
    count = len(values)
    width = values.type.num_fields
    names = [values.type.field(i).name for i in range(width)]
    present = to_bools(values.is_valid())
    sizes = np.where(present, width, 0)
    offsets = np.zeros(count + 1, dtype=np.int32)
    np.cumsum(sizes, out=offsets[1:])
    if width:
        rows = np.flatnonzero(present)
        items = pc.take(
            pa.concat_arrays([values.field(i) for i in range(width)]),
            from_numpy((np.arange(width)[None, :] * count + rows[:, None]).ravel()),
        )
        keys = strings(names).take(from_numpy(np.tile(np.arange(width), len(rows))))
    else:
        items, keys = strings([]), strings([])
    mask = from_numpy(~present) if not present.all() else None
    return pa.MapArray.from_arrays(from_numpy(offsets), keys, items, type=_PARTITION_VALUES, mask=mask)


def drop_touched(table: pa.Table, touched: TouchedKeys, root: TablePath) -> pa.Table:
    """Checkpoint rows whose (canonical path, DV id) the commits after it did not touch."""
    if table.num_rows == 0:
        return table
    paths = table.column("path")
    if _any_needs_canonical(paths):
        canonical = strings([root.canonical(p) for p in paths.to_pylist()])
    else:
        canonical = paths
    # Whether any is touched, from a set of the smaller side (a set of 1,000 checkpoint paths
    # costs a third of one of 10,000 tail paths); which ones, only when some are.
    smaller = len(canonical) < len(touched.path_values)
    if smaller and not pc.any(pc.is_in(touched.path_values, value_set=canonical)).as_py():
        return table
    candidates = pc.is_in(canonical, value_set=touched.path_values)
    if not pc.any(candidates).as_py():
        return table
    positions = np.flatnonzero(to_bools(candidates))
    dvs = table.column("deletionVector").take(from_numpy(positions)).to_pylist()
    canonical_at = canonical.take(from_numpy(positions)).to_pylist()
    keep = np.ones(table.num_rows, dtype=bool)
    for position, path, dv in zip(positions, canonical_at, dvs, strict=True):
        if _key(path, deletion_vector_unique_id(dv)) in touched.keys:
            keep[position] = False
    return table.filter(from_numpy(keep))


def _any_needs_canonical(paths: pa.ChunkedArray) -> bool:
    """Whether any path is absolute, a URI or URL-encoded (and so needs ``TablePath.canonical``).

    Scans the string data buffers directly: a byte search over a million paths costs a
    few milliseconds, where per-string compute kernels cost a hundred.
    """
    for chunk in paths.chunks:
        if len(chunk) == 0:
            continue
        offset_type = np.int64 if pa.types.is_large_string(chunk.type) else np.int32
        offsets = np.frombuffer(chunk.buffers()[1], dtype=offset_type)[
            chunk.offset : chunk.offset + len(chunk) + 1
        ]
        data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)[offsets[0] : offsets[-1]]
        raw = data.tobytes()
        if b"%" in raw or b":" in raw:
            return True
        ends, begins = np.asarray(offsets[1:]), np.asarray(offsets[:-1])
        starts = begins[ends > begins] - offsets[0]
        if (data[starts] == ord("/")).any():
            return True
    return False
