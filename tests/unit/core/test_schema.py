from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from airflow_delta_provider.core.errors import SchemaError
from airflow_delta_provider.core.schema import (
    arrow_type_to_delta,
    delta_type_to_arrow,
    physical_schema,
    rename_to_logical,
    schema_from_delta,
    schema_to_delta,
    schema_to_delta_json,
)

CORPUS = Path(__file__).resolve().parents[2] / "conformance" / "corpus" / "tables"


@pytest.mark.parametrize(
    ("delta", "arrow"),
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
        ("decimal(38,18)", pa.decimal128(38, 18)),
    ],
)
def test_primitives_both_ways(delta, arrow):
    assert delta_type_to_arrow(delta) == arrow
    assert arrow_type_to_delta(arrow) == delta


def test_nested_types_nullability_and_metadata_round_trip():
    schema = {
        "type": "struct",
        "fields": [
            {
                "name": "s",
                "type": {
                    "type": "struct",
                    "fields": [
                        {"name": "a", "type": "integer", "nullable": False, "metadata": {"comment": "x"}}
                    ],
                },
                "nullable": True,
                "metadata": {"delta.columnMapping.id": 5},
            },
            {
                "name": "l",
                "type": {"type": "array", "elementType": "string", "containsNull": False},
                "nullable": True,
                "metadata": {},
            },
            {
                "name": "m",
                "type": {
                    "type": "map",
                    "keyType": "string",
                    "valueType": "decimal(10,2)",
                    "valueContainsNull": True,
                },
                "nullable": False,
                "metadata": {},
            },
        ],
    }
    arrow = schema_from_delta(json.dumps(schema))
    assert arrow.field("m").nullable is False
    assert arrow.field("l").type.value_field.nullable is False
    assert schema_to_delta(arrow) == schema
    assert json.loads(schema_to_delta_json(arrow)) == schema


@pytest.mark.parametrize("bad", ["variant", "geometry(OGC:CRS84)", "interval"])
def test_unknown_types_are_refused_by_name(bad):
    schema = {"type": "struct", "fields": [{"name": "c", "type": bad, "nullable": True, "metadata": {}}]}
    with pytest.raises(SchemaError, match="Column c has Delta type"):
        schema_from_delta(schema)


def test_arrow_types_without_a_delta_equivalent():
    assert arrow_type_to_delta(pa.uint32()) == "long"
    assert arrow_type_to_delta(pa.large_string()) == "string"
    assert arrow_type_to_delta(pa.dictionary(pa.int32(), pa.string())) == "string"
    with pytest.raises(SchemaError, match="uint64"):
        arrow_type_to_delta(pa.uint64())


def _schema_strings():
    for path in sorted(CORPUS.rglob("_delta_log/*.json")):
        for line in path.read_text().splitlines():
            if '"metaData"' in line and "schemaString" in json.loads(line).get("metaData", {}):
                yield path, json.loads(line)["metaData"]["schemaString"]


def test_every_schema_in_the_corpus_round_trips_or_is_refused_by_name():
    seen = refused = 0
    for path, text in _schema_strings():
        seen += 1
        try:
            arrow = schema_from_delta(text)
        except SchemaError as err:
            refused += 1
            assert "geometry" in str(err) or "variant" in str(err) or "geography" in str(err), (path, err)
            continue
        assert schema_to_delta(arrow) == json.loads(text), path
    assert seen > 50 and refused < seen


def test_column_mapping_physical_names_and_back():
    logical = schema_from_delta(
        {
            "type": "struct",
            "fields": [
                {
                    "name": "a",
                    "type": {
                        "type": "struct",
                        "fields": [
                            {
                                "name": "x",
                                "type": "long",
                                "nullable": True,
                                "metadata": {"delta.columnMapping.physicalName": "col-2"},
                            }
                        ],
                    },
                    "nullable": True,
                    "metadata": {"delta.columnMapping.physicalName": "col-1"},
                }
            ],
        }
    )
    physical = physical_schema(logical, "name")
    assert physical.names == ["col-1"] and physical.field("col-1").type.field(0).name == "col-2"
    data = pa.table({"col-1": pa.array([{"col-2": 1}, None], physical.field("col-1").type)})
    table = rename_to_logical(data, logical)
    assert table.to_pylist() == [{"a": {"x": 1}}, {"a": None}]
