"""The schema a change feed is read with and the schema changes it cannot cross (changes_schema), as
Delta's batch change data feed: column mapping renames and drops, type changes, tightened
nullability and partitioning changes are refused; added columns read as null."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pytest
from changes_support import CORPUS, delta_rs_changes, log_state, normalised

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.changes.read_schema import check_read_compatible
from airflow_delta_provider.core.errors import ChangeDataSchemaError
from airflow_delta_provider.core.protocol.actions import Metadata

if TYPE_CHECKING:
    from pathlib import Path


def field(
    name: str, kind: Any = "long", nullable: bool = True, physical: str | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {} if physical is None else {"delta.columnMapping.physicalName": physical}
    return {"name": name, "type": kind, "nullable": nullable, "metadata": meta}


def meta(*fields: dict[str, Any], mode: str = "none", partitions: tuple[str, ...] = ()) -> Metadata:
    configuration = {} if mode == "none" else {"delta.columnMapping.mode": mode}
    schema = json.dumps({"type": "struct", "fields": list(fields)})
    return Metadata(id="t", schema_string=schema, partition_columns=partitions, configuration=configuration)


READ = meta(field("a", physical="c1"), field("b", "string", physical="c2"), mode="name", partitions=("b",))
COMPATIBLE = {
    "same": READ,
    "fewer columns (one added since)": meta(field("a", physical="c1"), mode="name", partitions=("b",)),
    "looser nullability before": meta(
        field("a", nullable=False, physical="c1"),
        field("b", "string", physical="c2"),
        mode="name",
        partitions=("b",),
    ),
}
INCOMPATIBLE = {
    "renamed since": meta(
        field("x", physical="c1"), field("b", "string", physical="c2"), mode="name", partitions=("b",)
    ),
    "dropped since": meta(
        field("a", physical="c1"),
        field("b", "string", physical="c2"),
        field("z", physical="c9"),
        mode="name",
        partitions=("b",),
    ),
    "retyped": meta(
        field("a", "integer", physical="c1"),
        field("b", "string", physical="c2"),
        mode="name",
        partitions=("b",),
    ),
    "partitioning changed": meta(field("a", physical="c1"), field("b", "string", physical="c2"), mode="name"),
    "mapping dropped since (downgrade)": meta(field("a"), field("b", "string"), partitions=("b",)),
}


@pytest.mark.parametrize("other", list(COMPATIBLE.values()), ids=list(COMPATIBLE))
def test_schemas_the_read_schema_can_read(other: Metadata) -> None:
    check_read_compatible(READ, 5, other, 3, 2, 5)


@pytest.mark.parametrize("other", list(INCOMPATIBLE.values()), ids=list(INCOMPATIBLE))
def test_schema_changes_the_read_schema_cannot_read_across(other: Metadata) -> None:
    with pytest.raises(ChangeDataSchemaError) as info:
        check_read_compatible(READ, 5, other, 3, 2, 5)
    assert info.value.version == 3
    assert info.value.delta_error_class == "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_SCHEMA_CHANGE"
    assert "from version 2 to 2, and from version 3 to 5" in str(info.value)
    with pytest.raises(ChangeDataSchemaError) as info:
        check_read_compatible(READ, 5, other, 2, 2, 5)  # the start version's own schema
    assert info.value.delta_error_class == "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA"


def test_nested_types_and_nullability_direction() -> None:
    nested = {"type": "struct", "fields": [field("x"), field("y", "string")]}
    read = meta(
        field("s", nested), field("l", {"type": "array", "elementType": "long", "containsNull": True})
    )
    older = meta(
        field("s", {"type": "struct", "fields": [field("x")]}),
        field("l", {"type": "array", "elementType": "long", "containsNull": False}),
    )
    check_read_compatible(read, 5, older, 3, 3, 5)  # a nested field added, nulls allowed since
    tighter = meta(
        field("s", nested), field("l", {"type": "array", "elementType": "long", "containsNull": False})
    )
    check_read_compatible(read, 5, tighter, 3, 3, 5)  # data without nulls, read as nullable
    check_read_compatible(read, 5, tighter, 6, 3, 7)  # a schema after the read version may tighten
    with pytest.raises(ChangeDataSchemaError):
        check_read_compatible(tighter, 5, read, 3, 3, 5)  # nulls before, read as non-nullable
    with pytest.raises(ChangeDataSchemaError):
        check_read_compatible(tighter, 5, read, 6, 3, 7)  # nulls allowed again after it
    upgraded = meta(
        field("s", nested, physical="s"),
        field("l", {"type": "array", "elementType": "long", "containsNull": True}, physical="l"),
        mode="name",
    )
    check_read_compatible(upgraded, 5, read, 3, 3, 5)  # column mapping turned on in between
    check_read_compatible(meta(field("a", "decimal(10,2)")), 5, meta(field("a", "decimal(10, 2)")), 3, 3, 5)


def test_a_column_mapping_rename_in_the_range_is_refused() -> None:
    root = CORPUS / "tables" / "delta-rs" / "table_with_partitioning_mapping"  # RENAME COLUMN at v3
    table = DeltaTable(str(root))
    before = log_state(root)
    for start in (1, 2):
        with pytest.raises(ChangeDataSchemaError, match="INCOMPATIBLE"):
            table.changes(start, 4)
    assert log_state(root) == before
    renamed = table.changes(3, 4).to_pyarrow_table()
    assert renamed.num_rows == 1
    assert renamed.schema.names[: len(table.snapshot().schema)] == table.snapshot().schema.names
    assert table.changes(1, 2).to_pyarrow_table().num_rows == 1  # read with version 2's names


def test_an_added_column_reads_as_null_before_it(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    feed = {"delta.enableChangeDataFeed": "true"}
    deltalake.write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}), configuration=feed)
    more = pa.table({"id": pa.array([2], pa.int64()), "extra": ["x"]})
    deltalake.write_deltalake(uri, more, mode="append", schema_mode="merge")
    data = DeltaTable(uri).changes(0).to_pyarrow_table()
    assert sorted((r["id"], r["extra"]) for r in data.to_pylist()) == [(1, None), (2, "x")]
    assert normalised(data) == normalised(delta_rs_changes(uri, 0))


def test_a_type_change_by_overwrite_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    deltalake.write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64())}))
    deltalake.write_deltalake(uri, pa.table({"id": ["one"]}), mode="overwrite", schema_mode="overwrite")
    deltalake.write_deltalake(uri, pa.table({"id": ["two"]}), mode="append")
    before = log_state(tmp_path / "t")
    # Version 1 removes the file of version 0, written with the old type: its rows cannot be
    # given in the new one (Delta does not check this and reads the file with the new type).
    for start in (0, 1):
        with pytest.raises(ChangeDataSchemaError) as info:
            DeltaTable(uri).changes(start)
        assert info.value.delta_error_class == "DELTA_CHANGE_DATA_FEED_INCOMPATIBLE_DATA_SCHEMA"
        assert info.value.version == 0
    assert [r["id"] for r in DeltaTable(uri).changes(2).to_pyarrow_table().to_pylist()] == ["two"]
    assert log_state(tmp_path / "t") == before


def test_a_table_column_named_like_a_change_feed_column_is_refused(tmp_path: Path) -> None:
    uri = str(tmp_path / "t")
    deltalake.write_deltalake(uri, pa.table({"id": pa.array([1], pa.int64()), "_change_type": ["mine"]}))
    with pytest.raises(ChangeDataSchemaError, match=r"_change_type.*ALREADY_CONTAINS_CDC_COLUMNS"):
        DeltaTable(uri).changes(0)
