"""Thrift's compact protocol, as Parquet encodes its footers, page headers and page indexes.

Only reading, and only what the core needs: a struct as ``{field id: value}`` (with a spec of
the fields to keep, everything else skipped in place), and skipping a value without building
it. pyarrow parses footers too, but hands back neither the page indexes' raw entries nor the
page headers, and parses every field of a footer when a question needs a few.
"""

from __future__ import annotations

from typing import Any

#: Field and element types of the compact protocol.
T_STOP, T_TRUE, T_FALSE, T_BYTE, T_I16, T_I32, T_I64, T_DOUBLE, T_BINARY = range(9)
T_LIST, T_SET, T_MAP, T_STRUCT = 9, 10, 11, 12


def read_struct(
    data: bytes | memoryview, position: int, spec: dict[int, Any] | None = None, depth: int = 0
) -> tuple[dict[int, Any], int]:
    """A compact-protocol struct as ``{field id: value}``, and the position after it.

    :param spec: the fields to read (others are skipped), each with the spec of its struct
        value or of its list's struct elements (None: everything); None reads every field.
    """
    if depth > 16:
        raise ValueError("nested too deeply")
    fields: dict[int, Any] = {}
    field = 0
    while True:
        header = data[position]
        position += 1
        if header == T_STOP:
            return fields, position
        kind = header & 0x0F
        if header >> 4:
            field += header >> 4
        else:
            raw, position = varint(data, position)
            field = (raw >> 1) ^ -(raw & 1)
        if spec is not None and field not in spec:
            position = skip_compact(data, position, kind, depth + 1)
        elif kind in (T_TRUE, T_FALSE):
            fields[field] = kind == T_TRUE
        else:
            fields[field], position = read_value(data, position, kind, spec and spec[field], depth + 1)


def read_value(
    data: bytes | memoryview, position: int, kind: int, spec: dict[int, Any] | None, depth: int
) -> tuple[Any, int]:
    """One compact-protocol value of type ``kind`` (maps are skipped: None)."""
    if kind == T_BYTE:
        return data[position], position + 1
    if kind in (T_I16, T_I32, T_I64):
        raw, position = varint(data, position)
        return (raw >> 1) ^ -(raw & 1), position
    if kind == T_DOUBLE:
        return bytes(data[position : position + 8]), position + 8
    if kind == T_BINARY:
        length, position = varint(data, position)
        if position + length > len(data):
            raise ValueError("binary past the end")
        return bytes(data[position : position + length]), position + length
    if kind == T_STRUCT:
        return read_struct(data, position, spec, depth)
    if kind in (T_LIST, T_SET):
        size, element, position = list_header(data, position)
        items = []
        for _ in range(size):
            if element in (T_TRUE, T_FALSE):
                items.append(data[position] == T_TRUE)
                position += 1
            else:
                item, position = read_value(data, position, element, spec, depth + 1)
                items.append(item)
        return items, position
    return None, skip_compact(data, position, kind, depth)


def list_header(data: bytes | memoryview, position: int) -> tuple[int, int, int]:
    """A compact-protocol list's size and element type, and the position of its first element."""
    header = data[position]
    position += 1
    size, element = header >> 4, header & 0x0F
    if size == 15:
        size, position = varint(data, position)
    if size > len(data) - position:  # every element takes a byte at least
        raise ValueError("list longer than the data")
    return size, element, position


def varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """An unsigned LEB128 varint at ``position`` and the position after it."""
    value = shift = 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def skip_compact(data: bytes | memoryview, position: int, kind: int, depth: int) -> int:
    """The position after one compact-protocol value of type ``kind`` at ``position``.

    Integers and strings inside structs and lists are skipped in place (most of a footer).

    :raises ValueError: the value runs past the end of ``data`` or nests too deeply.
    """
    if depth > 64 or position >= len(data):
        raise ValueError("nested too deeply, or past the end")
    if kind in (T_TRUE, T_FALSE):
        return position  # a struct field's boolean is in its header
    if kind == T_BYTE:
        return position + 1
    if kind in (T_I16, T_I32, T_I64):
        while data[position] & 0x80:
            position += 1
        return position + 1
    if kind == T_DOUBLE:
        return position + 8
    if kind == T_BINARY:
        length, position = varint(data, position)
        if position + length > len(data):
            raise ValueError("binary past the end")
        return position + length
    if kind in (T_LIST, T_SET):
        size, element, position = list_header(data, position)
        if element in (T_TRUE, T_FALSE, T_BYTE):  # a list's booleans take a byte each
            return position + size
        if element in (T_I16, T_I32, T_I64):
            for _ in range(size):
                while data[position] & 0x80:
                    position += 1
                position += 1
            return position
        for _ in range(size):
            position = skip_compact(data, position, element, depth + 1)
        return position
    if kind == T_MAP:
        size, position = varint(data, position)
        if 2 * size > len(data) - position:
            raise ValueError("map longer than the footer")
        if size:
            types = data[position]
            position += 1
            for _ in range(size):
                position = skip_compact(data, position, types >> 4, depth + 1)
                position = skip_compact(data, position, types & 0x0F, depth + 1)
        return position
    if kind == T_STRUCT:
        while True:
            header = data[position]
            position += 1
            if header == T_STOP:
                return position
            if header >> 4 == 0:  # a field id of its own follows
                while data[position] & 0x80:
                    position += 1
                position += 1
            field_kind = header & 0x0F
            if field_kind in (T_I16, T_I32, T_I64):
                while data[position] & 0x80:
                    position += 1
                position += 1
            elif field_kind == T_BINARY and data[position] < 0x80:  # a short string: inline
                position += 1 + data[position]
                if position > len(data):
                    raise ValueError("binary past the end")
            elif field_kind not in (T_TRUE, T_FALSE):
                position = skip_compact(data, position, field_kind, depth + 1)
    raise ValueError(f"unknown compact type {kind}")
