"""Delta schemaString <-> pyarrow: types, metadata, column mapping, evolution and enforcement."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from airflow_delta_provider.core.errors import SchemaError, SchemaMismatchError
from airflow_delta_provider.core.protocol.schema import (
    arrow_type_to_delta,
    check_schema_compatible,
    delta_type_to_arrow,
    merge_schemas,
    physical_name_map,
    physical_schema,
    rename_to_logical,
    schema_from_delta,
    schema_to_delta,
    schema_to_delta_json,
)

CORPUS = Path(
    os.environ.get("DELTA_CONFORMANCE_DIR", Path(__file__).resolve().parents[3] / "conformance" / "corpus")
)
# Types the core refuses; every other schemaString in the corpus must round-trip.
REFUSED_TYPES = ("geometry(OGC:CRS84)", "geography(OGC:CRS84, spherical)")


def field(name: str, delta_type: Any, nullable: bool = True, metadata: dict[str, Any] | None = None) -> dict:
    return {"name": name, "type": delta_type, "nullable": nullable, "metadata": metadata or {}}


def struct(*fields: dict) -> dict:
    return {"type": "struct", "fields": list(fields)}


def array(element: Any, contains_null: bool = True) -> dict:
    return {"type": "array", "elementType": element, "containsNull": contains_null}


def map_(key: Any, value: Any, value_contains_null: bool = True) -> dict:
    return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": value_contains_null}


# --- Delta -> arrow -> Delta ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta_type", "arrow_type"),
    [
        ("string", pa.string()),
        ("long", pa.int64()),
        ("integer", pa.int32()),
        ("short", pa.int16()),
        ("byte", pa.int8()),
        ("float", pa.float32()),
        ("double", pa.float64()),
        ("boolean", pa.bool_()),
        ("binary", pa.binary()),
        ("date", pa.date32()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestamp_ntz", pa.timestamp("us")),
        ("decimal(10,2)", pa.decimal128(10, 2)),
        ("decimal(38,18)", pa.decimal128(38, 18)),
        ("decimal(1,1)", pa.decimal128(1, 1)),
    ],
)
def test_primitive_types_round_trip(delta_type: str, arrow_type: pa.DataType) -> None:
    assert delta_type_to_arrow(delta_type) == arrow_type
    assert arrow_type_to_delta(arrow_type) == delta_type
    schema = struct(field("c", delta_type, nullable=False))
    arrow = schema_from_delta(json.dumps(schema))
    assert arrow.field("c").type == arrow_type and not arrow.field("c").nullable
    assert schema_to_delta(arrow) == schema


def test_decimal_with_spaces_is_read() -> None:
    assert delta_type_to_arrow("decimal( 12 , 5 )") == pa.decimal128(12, 5)


def test_nested_types_and_metadata_round_trip() -> None:
    inner = struct(
        field("d", "integer", nullable=False, metadata={"comment": "inner"}),
        field("e", array("string", contains_null=False)),
    )
    schema = struct(
        field(
            "a",
            "long",
            nullable=False,
            metadata={
                "delta.columnMapping.id": 1,
                "delta.columnMapping.physicalName": "col-a",
                "comment": "an id",
                "delta.generationExpression": "id + 1",
                "delta.identity.allowExplicitInsert": True,
                "delta.typeChanges": [{"fromType": "integer", "toType": "long", "tableVersion": 1}],
                "ratio": 0.5,
                "nothing": None,
            },
        ),
        field("b", inner),
        field("c", array(inner)),
        field("m", map_("string", map_("integer", inner, value_contains_null=False))),
        field("aa", array(array("date"), contains_null=False), nullable=False),
        field("ü nicode.dotted", "timestamp_ntz"),
    )
    arrow = schema_from_delta(schema)

    assert arrow.field("b").type.field("d").metadata == {b"comment": b'"inner"'}
    metadata = arrow.field("a").metadata
    assert metadata[b"delta.columnMapping.id"] == b"1"
    assert metadata[b"delta.columnMapping.physicalName"] == b'"col-a"'
    list_type = arrow.field("c").type
    assert list_type.value_field.name == "element" and list_type.value_field.nullable
    map_type = arrow.field("m").type
    assert not map_type.key_field.nullable and map_type.item_field.nullable
    assert not map_type.item_type.item_field.nullable
    assert not arrow.field("aa").type.value_field.nullable and not arrow.field("aa").nullable

    assert schema_to_delta(arrow) == schema
    assert json.loads(schema_to_delta_json(arrow)) == schema


def test_json_is_compact_like_delta_writes_it() -> None:
    text = '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}'
    assert schema_to_delta_json(schema_from_delta(text)) == text


def test_protocol_example_schema() -> None:
    # The example of PROTOCOL.md "Schema Serialization Format".
    schema = struct(
        field("a", "integer", nullable=False),
        field("b", struct(field("d", "integer", nullable=False))),
        field("c", array("integer", contains_null=False)),
        field("e", array(struct(field("d", "integer", nullable=False)))),
        field("f", map_("string", "string")),
    )
    arrow = schema_from_delta(schema)
    assert arrow.field("e").type == pa.list_(
        pa.field("element", pa.struct([pa.field("d", pa.int32(), nullable=False)]))
    )
    assert schema_to_delta(arrow) == schema


def test_void_reads_as_null_but_null_is_not_written() -> None:
    arrow = schema_from_delta(struct(field("v", "void")))
    assert arrow.field("v").type == pa.null()
    with pytest.raises(SchemaError, match=r"Column v has arrow type null"):
        schema_to_delta(arrow)


def test_missing_metadata_is_read_as_empty() -> None:
    arrow = schema_from_delta({"type": "struct", "fields": [{"name": "x", "type": "long", "nullable": True}]})
    assert schema_to_delta(arrow)["fields"][0]["metadata"] == {}


# --- refusals -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta_type", "message"),
    [
        ("variant", r"Column outer\.x has Delta type 'variant'.*variantType"),
        ("geometry(OGC:CRS84)", r"'geometry\(OGC:CRS84\)'.*geospatial"),
        ("geography(OGC:CRS84, spherical)", r"'geography\(OGC:CRS84, spherical\)'.*geospatial"),
        ("interval", r"Column outer\.x has Delta type 'interval'"),
        ("int", r"Delta type 'int'"),
        ("decimal(39,0)", r"precision <= 38"),
        ("decimal(5,6)", r"scale <= precision"),
        ({"type": "udt", "class": "x"}, r"Delta type 'udt'"),
        ({"type": "array", "containsNull": True}, r"no 'elementType'"),
        (array("long", contains_null="yes"), r"'containsNull' must be true or false"),  # type: ignore[arg-type]
        (17, r"malformed Delta type: 17"),
    ],
)
def test_unsupported_delta_types_name_type_and_column(delta_type: Any, message: str) -> None:
    schema = struct(field("outer", struct(field("x", delta_type))))
    with pytest.raises(SchemaError, match=message):
        schema_from_delta(json.dumps(schema))


def test_variant_inside_an_array_names_the_element() -> None:
    with pytest.raises(SchemaError, match=r"Column v\.element has Delta type 'variant'"):
        schema_from_delta(struct(field("v", array("variant"))))


@pytest.mark.parametrize(
    ("schema_json", "message"),
    [
        ("{not json", "not valid JSON"),
        ('{"type": "array"}', "must be a struct"),
        ('{"type": "struct"}', "no 'fields' list"),
        ('{"type": "struct", "fields": [{"type": "long"}]}', "has no name"),
        ('{"type": "struct", "fields": [{"name": "a", "type": "long"}]}', "no 'nullable'"),
    ],
)
def test_malformed_schema_strings(schema_json: str, message: str) -> None:
    with pytest.raises(SchemaError, match=message):
        schema_from_delta(schema_json)


def test_column_names_differing_only_in_case_are_refused() -> None:
    with pytest.raises(SchemaError, match=r"columns Id and ID.*case-insensitive"):
        schema_from_delta(struct(field("Id", "long"), field("ID", "long")))
    with pytest.raises(SchemaError, match=r"columns s\.a and s\.A"):
        schema_to_delta(pa.schema([("s", pa.struct([("a", pa.int8()), ("A", pa.int8())]))]))


# --- arrow -> Delta ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arrow_type", "delta_type"),
    [
        (pa.large_string(), "string"),
        (pa.string_view(), "string"),
        (pa.large_binary(), "binary"),
        (pa.binary_view(), "binary"),
        (pa.binary(16), "binary"),
        (pa.uint8(), "short"),
        (pa.uint16(), "integer"),
        (pa.uint32(), "long"),
        (pa.float16(), "float"),
        (pa.date64(), "date"),
        (pa.timestamp("ns"), "timestamp_ntz"),
        (pa.timestamp("s", tz="America/New_York"), "timestamp"),
        (pa.timestamp("ms", tz="+01:00"), "timestamp"),
        (pa.decimal256(20, 3), "decimal(20,3)"),
        (pa.decimal32(5, 2), "decimal(5,2)"),
        (pa.dictionary(pa.int32(), pa.large_string()), "string"),
        (pa.run_end_encoded(pa.int32(), pa.int64()), "long"),
        (pa.large_list(pa.int8()), array("byte")),
        (pa.list_(pa.int8(), 3), array("byte")),
        (pa.list_view(pa.field("x", pa.int8(), nullable=False)), array("byte", contains_null=False)),
        (pa.map_(pa.large_string(), pa.float64()), map_("string", "double")),
    ],
)
def test_other_arrow_encodings_map_to_delta_types(arrow_type: pa.DataType, delta_type: Any) -> None:
    assert arrow_type_to_delta(arrow_type) == delta_type


@pytest.mark.parametrize(
    ("arrow_type", "message"),
    [
        (pa.uint64(), "uint64.*no Delta integer"),
        (pa.null(), "only nulls"),
        (pa.time64("us"), "time64"),
        (pa.duration("s"), "duration"),
        (pa.month_day_nano_interval(), "month_day_nano_interval"),
        (pa.decimal256(40, 2), "precision <= 38"),
        (pa.dense_union([pa.field("a", pa.int8())]), "union"),
        (pa.uuid(), "extension"),
    ],
)
def test_arrow_types_without_delta_equivalent_are_refused(arrow_type: pa.DataType, message: str) -> None:
    schema = pa.schema([pa.field("s", pa.struct([pa.field("x", arrow_type)]))])
    with pytest.raises(SchemaError, match=rf"Column s\.x has arrow type .*{message}"):
        schema_to_delta(schema)


def test_foreign_and_plain_string_metadata() -> None:
    metadata = {b"PARQUET:field_id": b"3", b"comment": b"plain words", b"n": b"7"}
    arrow = pa.schema([pa.field("x", pa.int64(), metadata=metadata)])
    assert schema_to_delta(arrow)["fields"][0]["metadata"] == {"comment": "plain words", "n": 7}


# --- the conformance corpus -----------------------------------------------------------------------


def _corpus_schema_strings() -> list[tuple[str, str]]:
    if not CORPUS.is_dir():
        pytest.fail(f"The conformance corpus is missing: {CORPUS} (set DELTA_CONFORMANCE_DIR).")
    found = []
    for commit in sorted((CORPUS / "tables").glob("**/_delta_log/*.json")):
        for line in commit.read_text().splitlines():
            try:
                action = json.loads(line)
            except json.JSONDecodeError:
                continue  # the corpus holds deliberately broken logs
            metadata = action.get("metaData") if isinstance(action, dict) else None
            if metadata and "schemaString" in metadata:
                found.append((commit.relative_to(CORPUS / "tables").as_posix(), metadata["schemaString"]))
    return found


def test_every_corpus_schema_string_round_trips_or_is_refused_by_name() -> None:
    schema_strings = _corpus_schema_strings()
    assert len(schema_strings) > 100
    refused = []
    for where, schema_string in schema_strings:
        try:
            arrow = schema_from_delta(schema_string)
        except SchemaError as exc:
            assert any(repr(name) in str(exc) for name in REFUSED_TYPES), (where, exc)
            refused.append(where)
            continue
        assert schema_to_delta(arrow) == json.loads(schema_string), where
        # Spark and delta-rs write it compactly, in the same key order: byte-identical.
        assert schema_to_delta_json(arrow) == schema_string, where
    assert refused == ["delta-kernel-rs/table-with-geo/_delta_log/00000000000000000000.json"]


def test_geo_table_is_refused_naming_the_type() -> None:
    log = CORPUS / "tables/delta-kernel-rs/table-with-geo/_delta_log/00000000000000000000.json"
    metadata = next(json.loads(line)["metaData"] for line in log.open() if '"metaData"' in line)
    with pytest.raises(SchemaError, match=r"Column geom has Delta type 'geometry\(OGC:CRS84\)'"):
        schema_from_delta(metadata["schemaString"])


def _strip_metadata(delta_type: Any) -> Any:
    if isinstance(delta_type, dict):
        return {k: ({} if k == "metadata" else _strip_metadata(v)) for k, v in delta_type.items()}
    if isinstance(delta_type, list):
        return [_strip_metadata(v) for v in delta_type]
    return delta_type


def _canonical(arrow_type: pa.DataType) -> pa.DataType:
    """delta-rs may use large/view encodings; normalised to the Delta type's canonical arrow type."""
    return delta_type_to_arrow(arrow_type_to_delta(arrow_type))


@pytest.mark.parametrize(
    "table",
    [
        "delta-kernel-rs/data-reader-partition-values/delta",
        "delta-kernel-rs/table-with-columnmapping-mode-name/delta",
        "delta-kernel-rs/table-with-columnmapping-mode-id/delta",
        "delta-kernel-rs/data-reader-timestamp_ntz/delta",
        "delta-kernel-rs/type-widening",
        "delta-kernel-rs/basic-decimal-table/delta",
        "delta-rs/table_with_partitioning_mapping",
        "delta-rs/delta-2.2.0-partitioned-types",
    ],
)
def test_schema_matches_deltalake(table: str) -> None:
    deltalake = pytest.importorskip("deltalake")
    delta_table = deltalake.DeltaTable(str(CORPUS / "tables" / table))
    theirs = pa.schema(delta_table.schema().to_arrow())
    ours = schema_from_delta(delta_table.schema().to_json())

    assert pa.schema([f.with_type(_canonical(f.type)) for f in theirs]).equals(ours, check_metadata=False)
    # delta-rs keeps metadata values as bare strings; both read back to the same Delta schema.
    assert _strip_metadata(schema_to_delta(theirs)) == _strip_metadata(schema_to_delta(ours))
    assert schema_to_delta(ours) == json.loads(delta_table.schema().to_json())


# --- column mapping -------------------------------------------------------------------------------


def _mapped(name: str, physical: str, arrow_type: pa.DataType, column_id: int = 1) -> pa.Field:
    metadata = {
        b"delta.columnMapping.id": str(column_id).encode(),
        b"delta.columnMapping.physicalName": json.dumps(physical).encode(),
    }
    return pa.field(name, arrow_type, metadata=metadata)


LOGICAL = pa.schema(
    [
        _mapped("id", "col-1", pa.int64()),
        _mapped(
            "info",
            "col-2",
            pa.struct([_mapped("name", "col-3", pa.string()), _mapped("score", "col-4", pa.float64())]),
        ),
        _mapped(
            "tags", "col-5", pa.list_(pa.field("element", pa.struct([_mapped("t", "col-6", pa.string())])))
        ),
        _mapped(
            "attrs",
            "col-7",
            pa.map_(
                pa.field("key", pa.string(), nullable=False), pa.struct([_mapped("v", "col-8", pa.int32())])
            ),
        ),
        pa.field("plain", pa.int8()),  # no physical name: Spark falls back to the logical one
    ]
)


def test_physical_schema_renames_every_nested_field() -> None:
    physical = physical_schema(LOGICAL, "name")
    assert physical.names == ["col-1", "col-2", "col-5", "col-7", "plain"]
    assert physical.field("col-2").type.names == ["col-3", "col-4"]
    assert physical.field("col-5").type.value_type.names == ["col-6"]
    assert physical.field("col-7").type.item_type.names == ["col-8"]
    assert physical.field("col-7").type.key_field.name == "key"
    assert physical_schema(LOGICAL, "id") == physical
    assert physical_schema(LOGICAL, "none") is LOGICAL
    assert physical_name_map(LOGICAL) == {
        "id": "col-1",
        "info": "col-2",
        "tags": "col-5",
        "attrs": "col-7",
        "plain": "plain",
    }
    with pytest.raises(SchemaError, match=r"Unknown delta\.columnMapping\.mode 'bogus'"):
        physical_schema(LOGICAL, "bogus")


def test_physical_names_from_a_delta_schema_string() -> None:
    nested = struct(field("x", "long", metadata={"delta.columnMapping.physicalName": "col-2"}))
    logical = schema_from_delta(
        struct(field("a", nested, metadata={"delta.columnMapping.physicalName": "col-1"}))
    )
    physical = physical_schema(logical, "name")
    assert physical.names == ["col-1"] and physical.field("col-1").type.field(0).name == "col-2"
    data = pa.table({"col-1": pa.array([{"col-2": 1}, None], physical.field("col-1").type)})
    assert rename_to_logical(data, logical).to_pylist() == [{"a": {"x": 1}}, {"a": None}]


def _physical_table() -> pa.Table:
    first = {"col-1": 1, "col-2": {"col-3": "a", "col-4": 0.5}, "col-5": [{"col-6": "x"}, None]}
    first.update({"col-7": [("k", {"col-8": 3})], "plain": 1})
    rows = [first, {"col-1": 2, "col-2": None, "col-5": None, "col-7": None, "plain": None}]
    return pa.Table.from_pylist(rows, schema=physical_schema(LOGICAL, "name"))


def test_rename_to_logical_table_and_batch() -> None:
    table = _physical_table()
    first = {"id": 1, "info": {"name": "a", "score": 0.5}, "tags": [{"t": "x"}, None]}
    first.update({"attrs": [("k", {"v": 3})], "plain": 1})
    expected = [first, {"id": 2, "info": None, "tags": None, "attrs": None, "plain": None}]

    renamed = rename_to_logical(table, LOGICAL)
    assert renamed.schema == LOGICAL
    assert renamed.to_pylist() == expected

    chunked = pa.concat_tables([table.slice(0, 1), table.slice(1)])
    assert rename_to_logical(chunked, LOGICAL).to_pylist() == expected
    batch = rename_to_logical(table.to_batches()[0], LOGICAL)
    assert isinstance(batch, pa.RecordBatch) and batch.to_pylist() == expected


def test_rename_to_logical_selects_reorders_and_widens() -> None:
    table = _physical_table().select(["plain", "col-2", "col-1"])
    # As in a file written before the column was widened from integer to long.
    table = table.set_column(2, "col-1", table.column("col-1").cast(pa.int32()))
    wanted = pa.schema([LOGICAL.field("id"), LOGICAL.field("info")])
    renamed = rename_to_logical(table, wanted)
    assert renamed.schema == wanted
    assert renamed.column("id").to_pylist() == [1, 2]


def test_rename_to_logical_accepts_logical_names_and_reports_missing_columns() -> None:
    logical_named = rename_to_logical(_physical_table(), LOGICAL).select(["id", "info"])
    assert rename_to_logical(logical_named, pa.schema([LOGICAL.field("id")])).column_names == ["id"]
    with pytest.raises(SchemaError, match=r"Column 'tags' \(physical name 'col-5'\) is not in the data"):
        rename_to_logical(_physical_table().drop_columns(["col-5"]), LOGICAL)
    with pytest.raises(SchemaError, match="cannot read the file type"):
        rename_to_logical(pa.table({"col-1": ["not a number"]}), pa.schema([LOGICAL.field("id")]))


@pytest.mark.parametrize("mode", ["name", "id"])
def test_rename_to_logical_reads_real_column_mapping_tables(mode: str) -> None:
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    # delta-rs reads these tables as all nulls (see MANIFEST.json); Spark's expected rows are the oracle.
    root = CORPUS / f"tables/delta-kernel-rs/table-with-columnmapping-mode-{mode}"
    actions = [json.loads(line) for line in (root / "delta/_delta_log/00000000000000000000.json").open()]
    metadata = next(a["metaData"] for a in actions if "metaData" in a)
    assert metadata["configuration"]["delta.columnMapping.mode"] == mode
    logical = schema_from_delta(metadata["schemaString"])
    read_schema = physical_schema(logical, mode)
    files = [root / "delta" / a["add"]["path"] for a in actions if "add" in a]
    ours = pa.concat_tables([rename_to_logical(pq.read_table(f, schema=read_schema), logical) for f in files])
    expected = ds.dataset(root / "expected", format="parquet").to_table()

    assert ours.schema.names == logical.names == expected.schema.names
    assert ours.num_rows == expected.num_rows == 6
    assert sorted(map(str, ours.to_pylist())) == sorted(map(str, expected.to_pylist()))


# --- schema evolution ----------------------------------------------------------------------------


def test_merge_adds_new_top_level_and_nested_fields_as_nullable() -> None:
    table = pa.schema(
        [
            pa.field("id", pa.int64(), nullable=False, metadata={b"comment": b'"key"'}),
            pa.field("s", pa.struct([pa.field("a", pa.int32(), nullable=False)])),
            pa.field("l", pa.list_(pa.field("element", pa.struct([pa.field("x", pa.int8())])))),
        ]
    )
    new_s = pa.struct([pa.field("a", pa.int32()), pa.field("b", pa.large_string(), nullable=False)])
    new = pa.schema(
        [
            pa.field("id", pa.int64()),  # nullable: the table keeps NOT NULL
            pa.field("s", new_s),
            pa.field("l", pa.list_(pa.struct([pa.field("x", pa.int8()), pa.field("y", pa.bool_())]))),
            pa.field("extra", pa.dictionary(pa.int8(), pa.string()), nullable=False),
        ]
    )
    merged = merge_schemas(table, new)
    merged_l = pa.list_(pa.field("element", pa.struct([pa.field("x", pa.int8()), ("y", pa.bool_())])))
    assert merged == pa.schema(
        [
            table.field("id"),
            pa.field("s", pa.struct([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.string())])),
            pa.field("l", merged_l),
            pa.field("extra", pa.string()),
        ]
    )
    assert merged.field("id").metadata == {b"comment": b'"key"'}
    assert merge_schemas(merged, merged) == merged


def test_merge_inside_maps_and_null_typed_data() -> None:
    table = pa.schema(
        [pa.field("m", pa.map_(pa.string(), pa.struct([("a", pa.int64())]))), ("n", pa.string())]
    )
    new = pa.schema([pa.field("m", pa.map_(pa.string(), pa.struct([("b", pa.float32())]))), ("n", pa.null())])
    merged = merge_schemas(table, new)
    assert merged.field("m").type.item_type == pa.struct([("a", pa.int64()), ("b", pa.float32())])
    assert merged.field("n").type == pa.string()


@pytest.mark.parametrize(
    ("table_type", "new_type", "message"),
    [
        (pa.int64(), pa.string(), r"column x has type long in the table and string in the data"),
        (pa.int32(), pa.int64(), r"column x has type integer in the table and long in the data"),
        (pa.decimal128(10, 2), pa.decimal128(12, 2), r"decimal\(10,2\) in the table and decimal\(12,2\)"),
        (
            pa.struct([("a", pa.int8())]),
            pa.struct([("a", pa.int16())]),
            r"column x\.a has type byte .* short",
        ),
        (pa.list_(pa.int8()), pa.int8(), r"column x has type array<byte> in the table and byte"),
        (pa.map_(pa.string(), pa.int8()), pa.map_(pa.int8(), pa.int8()), r"column x\.key has type string"),
    ],
)
def test_merge_refuses_type_changes(table_type: pa.DataType, new_type: pa.DataType, message: str) -> None:
    with pytest.raises(SchemaMismatchError, match=message):
        merge_schemas(pa.schema([("x", table_type)]), pa.schema([("x", new_type)]))


def test_merge_refuses_new_columns_without_delta_type() -> None:
    with pytest.raises(SchemaError, match="Column y has arrow type uint64"):
        merge_schemas(pa.schema([("x", pa.int8())]), pa.schema([("y", pa.uint64())]))
    with pytest.raises(SchemaError, match="Column y has arrow type null"):
        merge_schemas(pa.schema([("x", pa.int8())]), pa.schema([("y", pa.null())]))


# --- schema enforcement --------------------------------------------------------------------------

TABLE = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("name", pa.string()),
        pa.field("s", pa.struct([pa.field("a", pa.int32(), nullable=False), pa.field("b", pa.string())])),
        pa.field("l", pa.list_(pa.field("element", pa.int32(), nullable=False))),
        pa.field("m", pa.map_(pa.string(), pa.field("value", pa.int64(), nullable=False))),
    ]
)
ID = pa.field("id", pa.int64(), nullable=False)


def test_compatible_data_passes() -> None:
    check_schema_compatible(TABLE, TABLE)
    # Other order, other string encoding, non-null into nullable, nullable s.b left out.
    data = pa.schema(
        [
            pa.field("name", pa.large_string(), nullable=False),
            pa.field("id", pa.int64(), nullable=False),
            pa.field("s", pa.struct([pa.field("a", pa.int32(), nullable=False)])),
        ]
    )
    check_schema_compatible(TABLE, data)
    check_schema_compatible(TABLE, pa.schema([ID, ("name", pa.null())]))


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (
            pa.schema([ID, ("zzz", pa.int8()), ("yyy", pa.int8())]),
            SchemaMismatchError,
            r"column\(s\) zzz, yyy that the table does not have.*enable schema merging",
        ),
        (
            pa.schema([ID, ("s", pa.struct([("c", pa.int8())]))]),
            SchemaMismatchError,
            r"column\(s\) s\.c that the table does not have",
        ),
        (
            pa.schema([("name", pa.string())]),
            SchemaMismatchError,
            r"Column id is NOT NULL .* the data lacks it",
        ),
        (
            pa.schema([("id", pa.int64())]),
            SchemaMismatchError,
            r"Column id is NOT NULL in the table but nullable",
        ),
        (
            pa.schema([pa.field("id", pa.int32(), nullable=False)]),
            SchemaMismatchError,
            r"column id has type long in the table but integer in the data",
        ),
        (
            pa.schema([ID, ("s", pa.struct([("b", pa.string())]))]),
            SchemaMismatchError,
            r"Column s\.a is NOT NULL in the table but the data lacks it",
        ),
        (
            pa.schema([ID, ("l", pa.list_(pa.int32()))]),
            SchemaMismatchError,
            r"Column l\.element: the table has containsNull=false",
        ),
        (
            pa.schema([ID, ("m", pa.map_(pa.string(), pa.int64()))]),
            SchemaMismatchError,
            r"Column m\.value: the table has valueContainsNull=false",
        ),
        (
            pa.schema([ID, ("name", pa.string()), ("NAME", pa.string())]),
            SchemaError,
            r"The data has columns name and NAME",
        ),
        (
            pa.schema([pa.field("id", pa.uint64(), nullable=False)]),
            SchemaError,
            r"Column id has arrow type uint64",
        ),
    ],
)
def test_incompatible_data_is_refused(data: pa.Schema, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        check_schema_compatible(TABLE, data)


# --- names that differ only in case ------------------------------------------------------------

_CASE_TABLE = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.struct([("a", pa.int32()), ("inner", pa.struct([("x", pa.int8())]))])),
        ("l", pa.list_(pa.struct([("e", pa.int16())]))),
        ("m", pa.map_(pa.string(), pa.struct([("v", pa.int64())]))),
    ]
)


@pytest.mark.parametrize(
    ("data", "names"),
    [
        (pa.schema([("ID", pa.int64())]), ("ID", "id")),
        (pa.schema([("s", pa.struct([("A", pa.int32())]))]), ("s.A", "s.a")),
        (pa.schema([("S", pa.struct([("a", pa.int32())]))]), ("S", "s")),
        (
            pa.schema([("s", pa.struct([("inner", pa.struct([("X", pa.int8())]))]))]),
            ("s.inner.X", "s.inner.x"),
        ),
        (pa.schema([("l", pa.list_(pa.struct([("E", pa.int16())])))]), ("l.element.E", "l.element.e")),
        (
            pa.schema([("m", pa.map_(pa.string(), pa.struct([("V", pa.int64())])))]),
            ("m.value.V", "m.value.v"),
        ),
    ],
)
@pytest.mark.parametrize("check", ["enforce", "merge"])
def test_columns_differing_only_in_case_are_refused_naming_both(data, names, check) -> None:
    """pyarrow and delta-rs match names in data files case-sensitively: ``ID`` under ``id``
    would read as NULL, and merge must not add ``ID`` beside ``id`` either."""
    data_name, table_name = (re.escape(n) for n in names)
    pattern = rf"data's column {data_name} and the table's column {table_name} differ only in case"
    with pytest.raises(SchemaMismatchError, match=pattern):
        if check == "enforce":
            check_schema_compatible(_CASE_TABLE, data)
        else:
            merge_schemas(_CASE_TABLE, data)


# --- nesting -----------------------------------------------------------------------------------------


def _nested(kind: str, depth: int) -> str:
    """A Delta type ``depth`` levels deep around a long, as JSON text (built without recursion)."""
    opening = {
        "struct": '{"type":"struct","fields":[{"name":"f","nullable":true,"metadata":{},"type":',
        "array": '{"type":"array","containsNull":true,"elementType":',
        "map": '{"type":"map","keyType":"string","valueContainsNull":true,"valueType":',
    }[kind]
    closing = "}]}" if kind == "struct" else "}"
    inner = opening * depth + '"long"' + closing * depth
    return f'{{"type":"struct","fields":[{{"name":"top","type":{inner},"nullable":true,"metadata":{{}}}}]}}'


@pytest.mark.parametrize("kind", ["struct", "array", "map"])
def test_a_schema_nested_deeper_than_the_limit_is_refused_clearly(kind):
    """Deep schemas ended in a RecursionError somewhere (parsing the JSON from 250 struct levels,
    a commit under column mapping from 249): every reader and writer now refuses them by name."""
    from airflow_delta_provider.core.protocol.schema_json import MAX_SCHEMA_DEPTH

    assert schema_from_delta(_nested(kind, MAX_SCHEMA_DEPTH - 1)).field("top")  # the top column is a level
    for depth in (MAX_SCHEMA_DEPTH, 5_000):
        with pytest.raises(SchemaError, match=rf"nests its types more than {MAX_SCHEMA_DEPTH} levels"):
            schema_from_delta(_nested(kind, depth))


@pytest.mark.parametrize("depth", [100, 300, 10_000])
def test_a_table_with_a_schema_nested_too_deep_is_refused_to_readers_and_writers(
    tmp_path, table_state, depth
):
    import pyarrow.parquet as pq

    from airflow_delta_provider.core import DeltaTable

    text = _nested("struct", depth).replace(
        '{"name":"top"', '{"name":"id","type":"long","nullable":true,"metadata":{}},{"name":"top"', 1
    )
    root = tmp_path / "t"
    (root / "_delta_log").mkdir(parents=True)
    metadata = {
        "id": "t",
        "format": {"provider": "parquet", "options": {}},
        "schemaString": text,
        "partitionColumns": [],
        "configuration": {},
    }
    actions = [
        {"commitInfo": {}},
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {"metaData": metadata},
    ]
    (root / "_delta_log" / f"{0:020d}.json").write_text("\n".join(map(json.dumps, actions)) + "\n")
    pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), root / "f.parquet")
    table = DeltaTable(str(root))
    before = table_state(root)
    for attempt in (
        lambda: table.snapshot().schema,
        lambda: table.snapshot().to_pyarrow_table(),
        lambda: table.changes(0).to_pyarrow_table(),
        lambda: table.commit_files(["f.parquet"]),
        lambda: DeltaTable.create(str(tmp_path / "copy"), text),
    ):
        with pytest.raises(SchemaError, match="nests its types more than 100 levels"):
            attempt()
    assert not (tmp_path / "copy").exists()
    assert table_state(root) == before
