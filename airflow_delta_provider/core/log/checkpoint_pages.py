"""The few rows of a checkpoint's small action columns, decoded from the pages that hold them.

delta-rs and Spark put protocol, metaData and txn rows among up to millions of add rows in one row
group, and pyarrow decodes a column a whole row group at a time. Both writers write the page index,
so :class:`CheckpointPages` reads only the pages holding those rows. Anything it does not handle
gives None and the caller decodes the column with pyarrow: a shortcut, never a second opinion
(docs/read-api.md, "A checkpoint's small actions").
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from airflow_delta_provider.core.parquet.footer import TAIL_BYTES
from airflow_delta_provider.core.parquet.page_index import (
    PageIndexError,
    PageLocations,
    clear_page_locations,
    null_pages,
    page_locations,
)
from airflow_delta_provider.core.parquet.page_scan import codec_of, decompressed, read_page_header
from airflow_delta_provider.core.parquet.thrift import (
    T_LIST,
    list_header,
    read_struct,
    read_value,
    varint,
)

if TYPE_CHECKING:
    import pyarrow.parquet as pq

    from airflow_delta_provider.core.storage import LogStore

# parquet.thrift: physical types, repetitions, converted types, page types, encodings.
_BOOLEAN, _INT32, _INT64, _FLOAT, _DOUBLE, _BYTE_ARRAY = 0, 1, 2, 4, 5, 6
_REQUIRED, _OPTIONAL, _REPEATED = 0, 1, 2
_UTF8, _MAP, _MAP_KEY_VALUE, _LIST = 0, 1, 2, 3
_DATA_PAGE, _DICTIONARY_PAGE, _DATA_PAGE_V2 = 0, 2, 3
_PLAIN, _PLAIN_DICTIONARY, _RLE, _RLE_DICTIONARY = 0, 2, 3, 8
#: LogicalType union members (field ids) read as plain strings / maps / lists / integers.
_LOGICAL_STRING, _LOGICAL_MAP, _LOGICAL_LIST, _LOGICAL_INT = 1, 2, 3, 10
_NUMPY = {_INT32: "<i4", _INT64: "<i8", _FLOAT: "<f4", _DOUBLE: "<f8"}
#: What of the footer is read: the schema (2) and, per row group (4), its columns' (1) offset index
#: locations (ColumnChunk fields 4 and 5); the rest is skipped.
_FOOTER_SPEC: dict[int, Any] = {2: None, 4: {1: {4: None, 5: None, 6: None, 7: None}}}
#: Where a column chunk's offset index and column index are: (offset, length) or None.
_Locations = tuple[tuple[int, int] | None, tuple[int, int] | None]
_Footer = tuple["_Node", list[list[_Locations]]]
#: Per column of a row group: its offset index decoded, and its column index's bytes.
_GroupIndexes = tuple[dict[int, "PageLocations"], dict[int, bytes]]


#: Ranges closer than this are read as one span.
_GAP = 64 * 1024


class Unreadable(Exception):
    """A page or layout this reader does not handle (the caller falls back to pyarrow)."""


@dataclass
class _Node:
    name: str
    repetition: int
    physical: int | None = None
    converted: int | None = None
    logical: dict[int, Any] | None = None
    children: list[_Node] = field(default_factory=list)
    column: int = -1  # leaf: its column index
    max_definition: int = 0
    max_repetition: int = 0


class CheckpointPages:
    """Reads the rows of small action columns of one checkpoint file page by page.

    :param storage: the table's storage; ``path`` the checkpoint's path in it.
    :param parquet: the file opened by pyarrow (its footer parsed).
    """

    def __init__(self, storage: LogStore, path: str, parquet: pq.ParquetFile) -> None:
        self._storage = storage
        self._path = path
        self._metadata = parquet.metadata
        self._parsed: _Footer | None = None
        self._indexes: dict[int, _GroupIndexes] = {}

    def action_rows(self, name: str, group: int) -> list[tuple[int, Any]] | None:
        """(0-based row in the row group, value) of every row of ``group`` holding action ``name``,
        or None when this reader cannot tell (the caller reads the column with pyarrow)."""
        try:
            return self._action_rows(name, group)
        except (Unreadable, IndexError, ValueError, KeyError, TypeError, OverflowError, pa.ArrowException):
            return None

    def _action_rows(self, name: str, group: int) -> list[tuple[int, Any]]:
        root, _ = self._footer()
        top = next((child for child in root.children if child.name == name), None)
        if top is None or top.repetition == _REPEATED or not top.children:
            raise Unreadable(name)
        leaves = list(_leaves(top))
        probe = _probe(top, leaves)
        offsets, column_indexes = self._group_indexes(group)
        if any(leaf.column not in offsets for leaf in leaves):
            raise Unreadable("no offset index")
        offset_indexes = [offsets[leaf.column] for leaf in leaves]
        # The probe names the action (Delta requires it in every such action): its column index
        # says which pages hold the action at all.
        column_index = column_indexes.get(leaves[probe].column)
        empty_pages = null_pages(column_index) if column_index is not None else None
        rows = self._present_rows(
            group, leaves[probe], offset_indexes[probe], top.max_definition, empty_pages
        )
        if not rows:
            return []
        entries = self._leaf_entries(group, leaves, offset_indexes, rows)
        return [(row, _assemble(top, entries, row)) for row in rows]

    def _group_indexes(self, group: int) -> _GroupIndexes:
        """The offset index of every leaf of the small actions in ``group``, and the column index
        of each action's key field: read and decoded together at the first action asked for
        (they lie side by side, and decoding them as one batch costs little more than one)."""
        found = self._indexes.get(group)
        if found is not None:
            return found
        root, indexes = self._footer()
        columns: dict[int, tuple[int, int]] = {}  # leaf column: its offset index's range
        keys: dict[int, tuple[int, int]] = {}  # key field's column: its column index's range
        for top in root.children:
            if top.name not in KEYS or not top.children:
                continue
            leaves = _leaves(top)
            for leaf in leaves:
                offset_index = indexes[group][leaf.column][0]
                if offset_index is not None:
                    columns[leaf.column] = offset_index
            with contextlib.suppress(Unreadable):
                key = leaves[_probe(top, leaves)].column
                column_index = indexes[group][key][1]
                if column_index is not None:
                    keys[key] = column_index
        data = self._read([*columns.values(), *keys.values()])
        offset_data = data[: len(columns)]
        try:
            offsets = dict(zip(columns, page_locations(offset_data), strict=True))
        except PageIndexError:  # one unreadable index: the others still serve their actions
            offsets = {}
            for column, one in zip(columns, offset_data, strict=True):
                with contextlib.suppress(PageIndexError):
                    [offsets[column]] = page_locations([one])
        row_group = self._metadata.row_group(group)
        # A chunk's first page is its first data page: an index found elsewhere is not its own.
        offsets = {
            c: pages for c, pages in offsets.items() if pages[0][0] == row_group.column(c).data_page_offset
        }
        found = self._indexes[group] = (offsets, dict(zip(keys, data[len(columns) :], strict=True)))
        return found

    # --- footer ----------------------------------------------------------------------------

    def _footer(self) -> _Footer:
        """The schema tree and each column chunk's page index locations."""
        if self._parsed is None:
            size = self._size()
            [tail] = self._read([(max(size - TAIL_BYTES, 0), min(size, TAIL_BYTES))])
            if len(tail) < 8 or tail[-4:] != b"PAR1":
                raise Unreadable("no Parquet trailer")
            length = int.from_bytes(tail[-8:-4], "little")
            if length + 8 > len(tail):
                [tail] = self._read([(size - 8 - length, length + 8)])
            self._parsed = _parsed_footer(bytes(tail[len(tail) - 8 - length : -8]), size)
        return self._parsed

    def _size(self) -> int:
        info = self._storage.info(self._path)
        if info is None:
            raise Unreadable("gone")
        return info.size

    def _read(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The byte ranges, read as few spans as ranges closer than :data:`_GAP` allow (the
        pieces of the small action columns and their page indexes lie close together)."""
        spans: list[list[int]] = []  # [start, end]
        for start, length in sorted(ranges):
            if spans and start - spans[-1][1] <= _GAP:
                spans[-1][1] = max(spans[-1][1], start + length)
            else:
                spans.append([start, start + length])
        got = self._storage.read_ranges(
            [self._path] * len(spans),
            [span[0] for span in spans],
            [span[1] - span[0] for span in spans],
            max_workers=1 if self._storage.is_local else 16,
        )
        starts = [span[0] for span in spans]
        found: list[bytes] = []
        for start, length in ranges:
            at = bisect.bisect_right(starts, start) - 1
            data = got[at]
            if not isinstance(data, bytes) or len(data) != spans[at][1] - spans[at][0]:
                raise Unreadable("short read")
            found.append(data[start - starts[at] : start - starts[at] + length])
        return found

    # --- rows --------------------------------------------------------------------------------

    def _present_rows(
        self,
        group: int,
        leaf: _Node,
        pages: list[tuple[int, int, int]],
        present_at: int,
        null_pages: np.ndarray | None,
    ) -> list[int]:
        """Rows of the row group whose definition level on ``leaf`` reaches ``present_at``,
        from the pages the column index does not say are all null (every page without one)."""
        if null_pages is not None:
            if len(null_pages) != len(pages):
                raise Unreadable("offset and column index disagree")
            pages = [page for page, empty in zip(pages, null_pages.tolist(), strict=True) if not empty]
            if not pages:
                return []
        chunk = self._metadata.row_group(group).column(leaf.column)
        start = pages[0][0]
        end = pages[-1][0] + pages[-1][1]
        [data] = self._read([(start, end - start)])
        codec = _codec(chunk.compression)
        rows: list[int] = []
        for offset, size, first in pages:
            body = memoryview(data)[offset - start : offset - start + size]
            header, position = read_page_header(body, 0)
            levels = _levels(header, body[position:], leaf, codec)
            rows.extend((first + np.flatnonzero(levels[1] >= present_at)).tolist())
        return rows

    def _leaf_entries(
        self,
        group: int,
        leaves: list[_Node],
        offset_indexes: list[list[tuple[int, int, int]]],
        rows: list[int],
    ) -> dict[int, dict[int, list[tuple[int, Any]]]]:
        """Per leaf column, per row: its (definition level, value) entries."""
        wanted: list[tuple[int, int]] = []  # (leaf number, page number)
        for number, pages in enumerate(offset_indexes):
            firsts = [first for _, _, first in pages]
            for page in sorted({bisect.bisect_right(firsts, row) - 1 for row in rows}):
                wanted.append((number, page))
        ranges: list[tuple[int, int]] = []
        for number, page in wanted:
            offset, size, _ = offset_indexes[number][page]
            ranges.append((offset, size))
        dictionaries = self._dictionaries(group, leaves, offset_indexes)
        data = self._read(ranges)
        entries: dict[int, dict[int, list[tuple[int, Any]]]] = {leaf.column: {} for leaf in leaves}
        for (number, page), body in zip(wanted, data, strict=True):
            leaf = leaves[number]
            chunk = self._metadata.row_group(group).column(leaf.column)
            view = memoryview(body)
            header, position = read_page_header(view, 0)
            repetition, definition, values = _page(
                header, view[position:], leaf, _codec(chunk.compression), dictionaries[number]
            )
            first = offset_indexes[number][page][2]
            _split_rows(entries[leaf.column], leaf, repetition, definition, values, first, rows)
        return entries

    def _dictionaries(
        self, group: int, leaves: list[_Node], offset_indexes: list[list[tuple[int, int, int]]]
    ) -> list[list[Any] | None]:
        ranges: list[tuple[int, int]] = []
        which: list[int] = []
        for number, leaf in enumerate(leaves):
            chunk = self._metadata.row_group(group).column(leaf.column)
            first_page = offset_indexes[number][0][0]
            if chunk.has_dictionary_page and 0 <= chunk.dictionary_page_offset < first_page:
                ranges.append((chunk.dictionary_page_offset, first_page - chunk.dictionary_page_offset))
                which.append(number)
        found: list[list[Any] | None] = [None] * len(leaves)
        for number, data in zip(which, self._read(ranges), strict=True):
            leaf = leaves[number]
            codec = _codec(self._metadata.row_group(group).column(leaf.column).compression)
            view = memoryview(data)
            header, position = read_page_header(view, 0)
            if header.get(1) != _DICTIONARY_PAGE:
                raise Unreadable("no dictionary page")
            page = header.get(7, {})
            if page.get(2, _PLAIN) not in (_PLAIN, _PLAIN_DICTIONARY):
                raise Unreadable("dictionary encoding")
            size = header[3]
            body = decompressed(view[position : position + size], header[2], codec)
            found[number] = _plain(body, leaf, page[1])
        return found


# --- footer pieces ------------------------------------------------------------------------------


def clear_caches() -> None:
    """Forget every footer and offset index parsed (they are kept by content, never stale: for
    benchmarks of a first read, and to free their memory)."""
    with _PARSED_LOCK:
        _PARSED.clear()
    clear_page_locations()


#: Footers parsed, by their bytes (the same bytes parse the same).
_PARSED: dict[bytes, _Footer] = {}
_PARSED_KEPT = 16
_PARSED_LOCK = threading.Lock()
#: How footers were parsed: ``"scan"`` (the schema and the page index locations found in place)
#: or ``"walk"`` (every ColumnChunk walked); for tests to see which route a footer took.
FOOTER_ROUTES: collections.Counter[str] = collections.Counter()


def _parsed_footer(footer: bytes, file_size: int) -> _Footer:
    """The footer's schema tree and page index locations, parsed once per footer content: the
    same bytes parse the same (the checkpoints of a table, read snapshot after snapshot, or a copy
    of one, do not parse again). Callers do not change what it returns.

    The schema is read from the footer's head and the locations found by :func:`_index_scan`;
    a footer laid out otherwise is walked field by field (:func:`_walked_footer`)."""
    found = _PARSED.get(footer)
    if found is not None:
        return found
    head = _schema_elements(footer)
    indexes = _index_scan(footer, file_size, head[0], head[1]) if head is not None else None
    if head is None or indexes is None:
        FOOTER_ROUTES["walk"] += 1
        found = _walked_footer(footer)
    else:
        FOOTER_ROUTES["scan"] += 1
        found = (_schema_tree(head[0]), indexes)
    with _PARSED_LOCK:
        _PARSED[footer] = found
        for old in list(_PARSED)[: max(len(_PARSED) - _PARSED_KEPT, 0)]:
            del _PARSED[old]
    return found


def _walked_footer(footer: bytes) -> _Footer:
    """:func:`_parsed_footer` by walking the footer's structs (every ColumnMetaData skipped)."""
    meta, _ = read_struct(footer, 0, _FOOTER_SPEC)
    indexes = [
        [(_location(chunk, 4, 5), _location(chunk, 6, 7)) for chunk in row_group[1]] for row_group in meta[4]
    ]
    return _schema_tree(meta[2]), indexes


def _schema_elements(footer: bytes) -> tuple[list[dict[int, Any]], int] | None:
    """The footer's SchemaElements, read from its head: FileMetaData field 1 (the version, i32)
    then field 2 (the schema, a list of structs), as every writer lays them out, and the position
    after them; None otherwise."""
    try:
        if footer[0] != 0x15:  # field 1, i32
            return None
        _, position = varint(footer, 1)
        if footer[position] != 0x19:  # field 2, a list
            return None
        elements, position = read_value(footer, position + 1, T_LIST, None, 1)
    except (IndexError, ValueError):
        return None
    if not elements or not all(isinstance(e, dict) and isinstance(e.get(4), bytes) for e in elements):
        return None
    return list(elements), position


#: The end of a ColumnChunk as Arrow C++ (pyarrow, Spark's parquet-mr alike) and arrow-rs
#: (delta-rs) lay it out: its ColumnMetaData's stop, then fields 4 to 7 (offset index offset i64
#: and length i32, column index offset i64 and length i32) with one-byte headers, then the
#: chunk's own stop. Each group is one varint.
_INDEX_LOCATIONS = re.compile(
    rb"\x00\x16([\x80-\xff]*[\x00-\x7f])\x15([\x80-\xff]*[\x00-\x7f])"
    rb"\x16([\x80-\xff]*[\x00-\x7f])\x15([\x80-\xff]*[\x00-\x7f])\x00"
)


def _index_scan(
    footer: bytes, file_size: int, elements: list[dict[int, Any]], after_schema: int
) -> list[list[_Locations]] | None:
    """Every column chunk's offset and column index locations, found in the footer's bytes by one
    regular expression instead of walking each ColumnMetaData (a 60-column footer of 60 structs:
    about a millisecond in Python), or None unless the result is certain to be the walk's.

    It is trusted only when it finds exactly one match per column chunk (the schema's leaves times
    the row groups, which follow the schema), in order, both index regions (column indexes,
    offset indexes) contiguous, increasing and apart, before the footer. A chunk without both
    indexes, with fields after them (encryption), or a statistics value that happens to hold the
    pattern breaks one of these, and the footer is walked. (Each offset index's first page must
    also begin at its chunk's first data page when decoded: :meth:`CheckpointPages._group_indexes`.)
    """
    matches = [[_zigzag(group) for group in match.groups()] for match in _INDEX_LOCATIONS.finditer(footer)]
    leaves = sum(1 for e in elements[1:] if not e.get(5))
    groups = _row_group_count(footer, after_schema)
    if groups is None or not matches or len(matches) != leaves * groups:
        return None
    end = file_size - len(footer) - 8
    for kind in (0, 2):  # offset indexes, column indexes
        starts = [m[kind] for m in matches]
        lengths = [m[kind + 1] for m in matches]
        if min(lengths) <= 0 or min(starts) < 4 or starts[-1] + lengths[-1] > end:
            return None
        if any(starts[i] + lengths[i] != starts[i + 1] for i in range(len(starts) - 1)):
            return None
    offsets_first, columns_first = matches[0][0], matches[0][2]
    offsets_end = matches[-1][0] + matches[-1][1]
    columns_end = matches[-1][2] + matches[-1][3]
    if not (offsets_end <= columns_first or columns_end <= offsets_first):
        return None
    pairs: list[_Locations] = [((m[0], m[1]), (m[2], m[3])) for m in matches]
    return [pairs[g * leaves : (g + 1) * leaves] for g in range(groups)]


def _row_group_count(footer: bytes, position: int) -> int | None:
    """The number of row groups: after the schema come field 3 (num_rows, i64) and field 4 (the
    row groups, a list)."""
    try:
        if footer[position] != 0x16:
            return None
        _, position = varint(footer, position + 1)
        if footer[position] != 0x19:
            return None
        groups, _, _ = list_header(footer, position + 1)
    except (IndexError, ValueError):
        return None
    return groups


def _zigzag(raw: bytes) -> int:
    value, _ = varint(raw, 0)
    return (value >> 1) ^ -(value & 1)


def _schema_tree(elements: list[dict[int, Any]]) -> _Node:
    """The schema's node tree from its flattened SchemaElements, leaves numbered as columns."""
    position = 0
    column = 0

    def node(definition: int, repetition: int) -> _Node:
        nonlocal position, column
        element = elements[position]
        position += 1
        kind = element.get(3, _REQUIRED)
        current = _Node(
            name=element[4].decode(),
            repetition=kind,
            physical=element.get(1),
            converted=element.get(6),
            logical=element.get(10),
        )
        definition += kind != _REQUIRED
        repetition += kind == _REPEATED
        current.max_definition, current.max_repetition = definition, repetition
        children = element.get(5)
        if children:
            current.children = [node(definition, repetition) for _ in range(children)]
        else:
            current.column = column
            column += 1
        return current

    first = elements[0]
    position = 1
    root = _Node(name=first[4].decode(), repetition=_REQUIRED)
    root.children = [node(0, 0) for _ in range(first.get(5, 0))]
    return root


def _leaves(node: _Node) -> list[_Node]:
    if not node.children:
        return [node]
    return [leaf for child in node.children for leaf in _leaves(child)]


def _location(chunk: dict[int, Any], offset_field: int, length_field: int) -> tuple[int, int] | None:
    offset, length = chunk.get(offset_field), chunk.get(length_field)
    return (offset, length) if isinstance(offset, int) and isinstance(length, int) and length > 0 else None


#: Per action, the field every action of its kind has (PROTOCOL.md): where it is null, there is
#: no action, or one that names nothing (the pyarrow route would refuse that row; this one does not
#: see it).
KEYS = {
    "protocol": "minReaderVersion",
    "metaData": "id",
    "txn": "appId",
    "domainMetadata": "domain",
    "sidecar": "path",
    "checkpointMetadata": "version",
}


def _probe(top: _Node, leaves: list[_Node]) -> int:
    """The leaf whose definition levels tell where the action is: its key field (directly in the
    action, not repeated)."""
    key = KEYS.get(top.name)
    for index, leaf in enumerate(leaves):
        if leaf.name == key and leaf.max_repetition == 0 and any(child is leaf for child in top.children):
            return index
    raise Unreadable("no key field")


def _codec(compression: str) -> pa.Codec | None:
    if compression == "UNCOMPRESSED":
        return None
    codec = codec_of(compression)
    if codec is None:
        raise Unreadable(compression)
    return codec


# --- pages --------------------------------------------------------------------------------------


def _levels(
    header: dict[int, Any], body: memoryview, leaf: _Node, codec: pa.Codec | None
) -> tuple[np.ndarray, np.ndarray, memoryview, int]:
    """A data page's repetition and definition levels, its values' bytes and their encoding."""
    kind = header.get(1)
    if kind == _DATA_PAGE:
        page = header[5]
        count, encoding = page[1], page[2]
        data = decompressed(body[: header[3]], header[2], codec)
        repetition, data = _v1_levels(data, leaf.max_repetition, count, page.get(4, _RLE))
        definition, data = _v1_levels(data, leaf.max_definition, count, page.get(3, _RLE))
        return repetition, definition, data, encoding
    if kind == _DATA_PAGE_V2:
        page = header[8]
        count, encoding = page[1], page[4]
        definition_size, repetition_size = page[5], page[6]
        body = body[: header[3]]
        repetition = _hybrid(body[:repetition_size], _width(leaf.max_repetition), count)
        definition = _hybrid(
            body[repetition_size : repetition_size + definition_size], _width(leaf.max_definition), count
        )
        values = body[repetition_size + definition_size :]
        if page.get(7, True):
            values = decompressed(values, header[2] - repetition_size - definition_size, codec)
        return repetition, definition, values, encoding
    raise Unreadable(f"page type {kind}")


def _v1_levels(data: memoryview, maximum: int, count: int, encoding: int) -> tuple[np.ndarray, memoryview]:
    if not maximum:
        return np.zeros(count, np.int32), data
    if encoding != _RLE:
        raise Unreadable("bit-packed levels")
    length = int.from_bytes(data[:4], "little")
    if 4 + length > len(data):
        raise Unreadable("levels past the page")
    return _hybrid(data[4 : 4 + length], _width(maximum), count), data[4 + length :]


def _width(maximum: int) -> int:
    return int(maximum).bit_length()


def _hybrid(data: memoryview, width: int, count: int) -> np.ndarray:
    """The RLE / bit-packed hybrid encoding: ``count`` unsigned values of ``width`` bits."""
    if width == 0 or count == 0:
        return np.zeros(count, np.int32)
    if width > 31:
        raise Unreadable("values wider than 31 bits")
    parts: list[np.ndarray] = []
    total = 0
    position = 0
    value_bytes = (width + 7) // 8
    while total < count:
        header, position = varint(data, position)
        if header & 1:  # bit-packed: groups of 8 values
            size = (header >> 1) * width
            if position + size > len(data):
                raise Unreadable("bit-packed run past the end")
            bits = np.unpackbits(np.frombuffer(data, np.uint8, size, position), bitorder="little")
            if width > 1:
                bits = bits.reshape(-1, width) @ (1 << np.arange(width, dtype=np.int64))
            values = bits.astype(np.int32)
            position += size
        else:
            run = header >> 1
            if position + value_bytes > len(data) or run == 0:
                raise Unreadable("RLE run past the end")
            value = int.from_bytes(data[position : position + value_bytes], "little")
            position += value_bytes
            if value >> width:
                raise Unreadable("an RLE value wider than its bit width")
            values = np.full(min(run, count - total), value, np.int32)
        parts.append(values)
        total += len(values)
    levels = parts[0] if len(parts) == 1 else np.concatenate(parts)
    return levels[:count]


def _page(
    header: dict[int, Any],
    body: memoryview,
    leaf: _Node,
    codec: pa.Codec | None,
    dictionary: list[Any] | None,
) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """A data page's levels and its non-null values, in order."""
    repetition, definition, data, encoding = _levels(header, body, leaf, codec)
    count = int(np.count_nonzero(definition == leaf.max_definition))
    if encoding == _PLAIN:
        values = _plain(data, leaf, count)
    elif encoding == _RLE and leaf.physical == _BOOLEAN:  # data page v2's booleans
        length = int.from_bytes(data[:4], "little")
        if 4 + length > len(data):
            raise Unreadable("values past the page")
        values = [bool(b) for b in _hybrid(data[4 : 4 + length], 1, count).tolist()]
    elif encoding in (_RLE_DICTIONARY, _PLAIN_DICTIONARY):
        if dictionary is None:
            raise Unreadable("dictionary indices without a dictionary")
        width = data[0] if len(data) else 0
        indexes = _hybrid(data[1:], width, count) if count else np.zeros(0, np.int32)
        values = [dictionary[i] for i in indexes.tolist()]
    else:
        raise Unreadable(f"encoding {encoding}")
    return repetition, definition, values


def _plain(data: memoryview, leaf: _Node, count: int) -> list[Any]:
    """``count`` PLAIN-encoded values of the leaf as pyarrow gives them."""
    physical = leaf.physical
    _check_annotation(leaf)
    if physical in _NUMPY:
        width = np.dtype(_NUMPY[physical]).itemsize
        if count * width > len(data):
            raise Unreadable("values past the page")
        numbers: list[Any] = np.frombuffer(data[: count * width], _NUMPY[physical]).tolist()
        return numbers
    if physical == _BOOLEAN:
        if (count + 7) // 8 > len(data):
            raise Unreadable("values past the page")
        bits = np.unpackbits(np.frombuffer(data[: (count + 7) // 8], np.uint8), bitorder="little")
        return [bool(b) for b in bits[:count].tolist()]
    if physical == _BYTE_ARRAY:
        text = leaf.converted == _UTF8 or (leaf.logical is not None and _LOGICAL_STRING in leaf.logical)
        values: list[Any] = []
        position = 0
        raw = bytes(data)
        for _ in range(count):
            length = int.from_bytes(raw[position : position + 4], "little")
            position += 4
            if position + length > len(raw):
                raise Unreadable("a value past the page")
            value = raw[position : position + length]
            values.append(value.decode() if text else value)
            position += length
        return values
    raise Unreadable(f"physical type {physical}")


def _check_annotation(leaf: _Node) -> None:
    """Only plain integers, strings and booleans: any other annotation changes what pyarrow gives."""
    logical = leaf.logical or {}
    if any(key not in (_LOGICAL_STRING, _LOGICAL_INT) for key in logical):
        raise Unreadable("annotated type")
    if leaf.converted not in (None, _UTF8) and not 15 <= (leaf.converted or 0) <= 18:  # INT_8..INT_64
        raise Unreadable("converted type")
    if _LOGICAL_INT in logical:
        spec = logical[_LOGICAL_INT]
        if not spec.get(2, True):  # unsigned: pyarrow gives unsigned integers, as here only when small
            raise Unreadable("unsigned integer")


def _split_rows(
    into: dict[int, list[tuple[int, Any]]],
    leaf: _Node,
    repetition: np.ndarray,
    definition: np.ndarray,
    values: list[Any],
    first: int,
    rows: list[int],
) -> None:
    """Per wanted row of the page: its (definition level, value or None) entries; a value is
    stored only where the definition level is the leaf's maximum."""
    stored = definition == leaf.max_definition
    if int(np.count_nonzero(stored)) != len(values):
        raise Unreadable("values and levels disagree")
    # Where each row's entries begin (every entry, without repetition).
    begins = np.flatnonzero(repetition == 0) if leaf.max_repetition else None
    count = len(begins) if begins is not None else len(definition)
    for row in rows:
        k = row - first
        if not 0 <= k < count:
            continue
        if begins is None:
            start, end = k, k + 1
        else:
            start = int(begins[k])
            end = int(begins[k + 1]) if k + 1 < count else len(definition)
        before = int(np.count_nonzero(stored[:start]))
        entries = into.setdefault(row, [])
        for level in definition[start:end].tolist():
            if level == leaf.max_definition:
                entries.append((level, values[before]))
                before += 1
            else:
                entries.append((level, None))


# --- rows as pyarrow gives them -----------------------------------------------------------------


def _assemble(node: _Node, entries: dict[int, dict[int, list[tuple[int, Any]]]], row: int) -> Any:
    """The value of ``node`` in ``row`` (``to_pylist(maps_as_pydicts="lossy")``'s form)."""
    first = _first_leaf(node)
    row_entries = entries[first.column].get(row)
    if not row_entries:
        raise Unreadable("no entry for a row")
    if row_entries[0][0] < node.max_definition:
        return None  # the node (or an ancestor) is null in this row
    kind = _kind(node)
    if kind == "leaf":
        return row_entries[0][1]
    if kind == "struct":
        return {child.name: _assemble(child, entries, row) for child in node.children}
    repeated = node.children[0]
    present = [e for e in row_entries if e[0] >= repeated.max_definition]  # one per element
    if kind == "list":
        element = repeated.children[0] if repeated.children else repeated
        if element.children:
            raise Unreadable("a list of groups")
        return [value if level >= element.max_definition else None for level, value in present]
    # a map: the key and value leaves of its repeated key_value group
    if len(repeated.children) != 2 or any(c.children for c in repeated.children):
        raise Unreadable("a map of groups")
    key, item = repeated.children
    keys = [v for level, v in (entries[key.column].get(row) or []) if level >= repeated.max_definition]
    values = [
        v if level >= item.max_definition else None
        for level, v in (entries[item.column].get(row) or [])
        if level >= repeated.max_definition
    ]
    if len(keys) != len(present) or len(values) != len(keys):
        raise Unreadable("map keys and values disagree")
    return dict(zip(keys, values, strict=True))


def _kind(node: _Node) -> str:
    if not node.children:
        return "leaf"
    logical = node.logical or {}
    if node.converted == _LIST or _LOGICAL_LIST in logical:
        if len(node.children) != 1 or node.children[0].repetition != _REPEATED:
            raise Unreadable("an unusual list")
        return "list"
    if node.converted in (_MAP, _MAP_KEY_VALUE) or _LOGICAL_MAP in logical:
        if len(node.children) != 1 or node.children[0].repetition != _REPEATED:
            raise Unreadable("an unusual map")
        return "map"
    if node.repetition == _REPEATED or any(c.repetition == _REPEATED for c in node.children):
        raise Unreadable("a repeated group without a list or map annotation")
    return "struct"


def _first_leaf(node: _Node) -> _Node:
    while node.children:
        node = node.children[0]
    return node
