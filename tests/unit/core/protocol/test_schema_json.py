"""The one bound on a schema's nesting: Arrow schemas from callers and data files, refused by name
before any walk of them (which would end in a RecursionError) and before anything is written."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import SchemaError
from airflow_delta_provider.core.protocol.schema import (
    check_schema_compatible,
    merge_schemas,
    schema_from_delta,
    schema_to_delta,
)
from airflow_delta_provider.core.protocol.schema_json import MAX_SCHEMA_DEPTH, check_arrow_schema_depth

if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path

NESTINGS: dict[str, Callable[[pa.DataType], pa.DataType]] = {
    "struct": lambda inner: pa.struct([("a", inner)]),
    "list": pa.list_,
    "large_list": pa.large_list,
    "map": lambda inner: pa.map_(pa.string(), inner),
}


def nested(kind: str, levels: int) -> pa.Schema:
    data_type: pa.DataType = pa.int64()
    for _ in range(levels - 1):
        data_type = NESTINGS[kind](data_type)
    return pa.schema([("deep", data_type)])


@pytest.mark.parametrize("kind", NESTINGS)
def test_the_bound_itself_is_accepted_and_one_more_level_refused(kind: str) -> None:
    assert check_arrow_schema_depth(nested(kind, MAX_SCHEMA_DEPTH)) is not None
    # What the Arrow bound accepts, the log's bound reads back: a created table is always readable.
    delta = schema_to_delta(nested(kind, MAX_SCHEMA_DEPTH))
    assert schema_to_delta(schema_from_delta(delta)) == delta
    with pytest.raises(SchemaError, match=r"The column 'deep' nests its types more than 100 levels deep"):
        check_arrow_schema_depth(nested(kind, MAX_SCHEMA_DEPTH + 1))


@pytest.mark.parametrize("kind", NESTINGS)
def test_a_table_with_a_schema_deeper_than_the_bound_is_never_created(kind: str, tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="nests its types more than"):
        DeltaTable.create(str(tmp_path / "t"), nested(kind, 2_000))
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("check", [check_schema_compatible, merge_schemas])
def test_data_deeper_than_the_bound_is_refused_by_the_write_checks(check: Callable[..., object]) -> None:
    table = pa.schema([("deep", pa.int64())])
    with pytest.raises(SchemaError, match="nests its types more than"):
        check(table, nested("struct", 2_000))
