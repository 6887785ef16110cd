"""The one reading of a ``schemaString``'s JSON, and the one bound on a schema's nesting.

Every reader and writer of a schema walks it recursively (converting it, checking a commit,
comparing two versions of it): a schema nested deeper than :data:`MAX_SCHEMA_DEPTH`, as JSON from
a log or as an Arrow schema from a caller or a data file, is refused here by name, instead of
ending in a RecursionError wherever the walk runs out of stack.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import SchemaError, shorten

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["MAX_SCHEMA_DEPTH", "check_arrow_schema_depth", "check_schema_depth", "parse_schema_string"]

#: How deeply a schema's types may nest (a struct in an array in a map ...). Every reader and
#: writer of a schema walks it recursively; a deeper one would end in a RecursionError somewhere
#: (parsing the JSON, converting it, checking a commit) instead of a refusal naming the problem.
MAX_SCHEMA_DEPTH = 100


def parse_schema_string(text: str) -> Any:
    """The JSON of a ``schemaString`` (or of any Delta type), its types nested at most
    :data:`MAX_SCHEMA_DEPTH` deep.

    :raises ValueError: the text is not JSON.
    :raises SchemaError: its types nest deeper (the JSON parser's own limit included).
    """
    try:
        parsed = json.loads(text)
    except RecursionError:
        raise _too_deep(f"The Delta schema {shorten(repr(text))}") from None
    return check_schema_depth(parsed)


def check_schema_depth(delta_type: Any) -> Any:
    """``delta_type`` (a parsed Delta type), after checking its types nest at most
    :data:`MAX_SCHEMA_DEPTH` deep.

    :raises SchemaError: they nest deeper.
    """
    pending = [(delta_type, 0)]
    while pending:  # iterative: the depth is what is being checked
        item, depth = pending.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise _too_deep(f"The Delta schema {shorten(repr(json.dumps(delta_type)[:200]))}")
        if isinstance(item, dict):
            kind = item.get("type")
            if kind == "struct" and isinstance(item.get("fields"), list):
                pending += [(f.get("type"), depth + 1) for f in item["fields"] if isinstance(f, dict)]
            elif kind == "array":
                pending.append((item.get("elementType"), depth + 1))
            elif kind == "map":
                pending += [(item.get("keyType"), depth + 1), (item.get("valueType"), depth + 1)]
    return delta_type


def check_arrow_schema_depth(schema: pa.Schema) -> pa.Schema:
    """``schema`` (an Arrow schema), after checking its types nest at most :data:`MAX_SCHEMA_DEPTH`
    deep, as :func:`check_schema_depth` does for a Delta type.

    :raises SchemaError: they nest deeper (naming the column).
    """
    import pyarrow as pa  # not at import: the log's actions import this module, entry points no pyarrow

    pending = [(field.type, 1, field.name) for field in schema]
    while pending:  # iterative: the depth is what is being checked
        data_type, depth, column = pending.pop()
        if depth > MAX_SCHEMA_DEPTH:
            raise _too_deep(f"The column {shorten(repr(column))}")
        if pa.types.is_struct(data_type):
            pending += [(data_type.field(i).type, depth + 1, column) for i in range(data_type.num_fields)]
        elif pa.types.is_map(data_type):
            pending += [(data_type.key_type, depth + 1, column), (data_type.item_type, depth + 1, column)]
        elif isinstance(data_type, pa.ListType | pa.LargeListType | pa.FixedSizeListType | pa.ListViewType):
            pending.append((data_type.value_type, depth + 1, column))
    return schema


def _too_deep(subject: str) -> SchemaError:
    return SchemaError(
        f"{subject} nests its types more than {MAX_SCHEMA_DEPTH} levels deep; this core reads and "
        f"writes schemas nested at most {MAX_SCHEMA_DEPTH} levels."
    )
