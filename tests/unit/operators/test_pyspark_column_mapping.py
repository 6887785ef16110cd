"""DeltaPySparkOperator on a column-mapped table, on a real local SparkSession.

Delta's Spark jars are not available, so the table is created by the core; Spark (without
Delta) writes the Parquet files, and the operator derives their physical names and field
ids from the table's metadata. The footers are checked field by field, and the core and
delta-rs (its DataFusion reader, which resolves physical names) read the same rows.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import QueryBuilder

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.protocol.column_mapping import column_id, field_id
from airflow_delta_provider.core.protocol.schema import physical_name

from .test_pyspark import context_for, make

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("local_spark")]
pytest.importorskip("pyspark")

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("info", pa.struct([("score", pa.float64()), ("tag", pa.string())])),
        ("items", pa.list_(pa.struct([("sku", pa.string())]))),
        ("ds", pa.date32()),
    ]
)


def job(spark: Any = None, ds: str | None = None) -> Any:
    day = dt.date.fromisoformat(ds or "2026-11-01")
    # The struct's fields in another order than the table's, and id narrower (INT): Delta
    # resolves inner fields by name and upcasts; so does the operator.
    rows = [(1, ("a", 0.5), [("x",)], day), (2, None, [], day)]
    return spark.createDataFrame(
        rows, "id INT, info STRUCT<tag: STRING, score: DOUBLE>, items ARRAY<STRUCT<sku: STRING>>, ds DATE"
    )


def footer_fields(schema: pa.Schema) -> list[tuple[str, int | None]]:
    """Every field in a Parquet file (nested ones too) as (name, field_id)."""
    out: list[tuple[str, int | None]] = []

    def walk(field: pa.Field) -> None:
        out.append((field.name, field_id(field)))
        kind = field.type
        if pa.types.is_struct(kind):
            for i in range(kind.num_fields):
                walk(kind.field(i))
        elif pa.types.is_list(kind):
            walk(kind.value_field)

    for f in schema:
        walk(f)
    return out


def table_fields(schema: pa.Schema, partition: set[str]) -> list[tuple[str, int | None]]:
    out: list[tuple[str, int | None]] = []

    def walk(field: pa.Field) -> None:
        out.append((physical_name(field), column_id(field)))
        kind = field.type
        if pa.types.is_struct(kind):
            for i in range(kind.num_fields):
                walk(kind.field(i))
        elif pa.types.is_list(kind):
            out.append(("element", None))
            element = kind.value_type
            for i in range(element.num_fields):
                walk(element.field(i))

    for f in schema:
        if f.name not in partition:
            walk(f)
    return out


def test_the_operator_writes_physical_names_and_field_ids_into_a_column_mapped_table(tmp_path: Path) -> None:
    root = tmp_path / "events"
    DeltaTable.create(str(root), SCHEMA, partition_by=["ds"], properties={"delta.columnMapping.mode": "id"})
    table = DeltaTable(str(root))
    before = table.snapshot()
    op = make(root, job)
    result = op.execute(context_for(op))
    assert result["committed"] and result["rows"] == 2

    snapshot = table.snapshot()
    assert snapshot.schema.equals(before.schema, check_metadata=True)  # no new ids, same names
    ds_physical = physical_name(snapshot.schema.field("ds"))
    adds = [
        json.loads(line)["add"]
        for line in (root / "_delta_log" / f"{result['version']:020d}.json").read_text().splitlines()
        if '"add"' in line
    ]
    assert adds and all(a["partitionValues"] == {ds_physical: "2026-11-01"} for a in adds)
    for add in adds:
        # Spark names the partition directory physically, as Delta does.
        assert f"/{ds_physical}=2026-11-01/" in add["path"]
        footer = pq.read_schema(root / add["path"])
        assert footer_fields(footer) == table_fields(snapshot.schema, {"ds"})
        stats = json.loads(add["stats"])
        info = snapshot.schema.field("info")
        assert stats["nullCount"] == {  # keyed physically (arrays get no stats, as from Delta)
            physical_name(snapshot.schema.field("id")): 0,
            physical_name(info): {physical_name(child): 1 for child in info.type},
        }

    ours = snapshot.to_pyarrow_table()
    assert sorted(ours.to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "info": {"score": 0.5, "tag": "a"}, "items": [{"sku": "x"}], "ds": dt.date(2026, 11, 1)},
        {"id": 2, "info": None, "items": [], "ds": dt.date(2026, 11, 1)},
    ]
    theirs = pa.table(
        QueryBuilder().register("t", RsDeltaTable(str(root))).execute("select * from t").read_all()
    )
    assert sorted(map(str, theirs.select(ours.column_names).to_pylist())) == sorted(
        map(str, ours.to_pylist())
    )


def test_generated_identity_and_constraints_on_a_column_mapped_table(tmp_path: Path) -> None:
    """The operator generates the identity and generated columns and checks every row with Spark; the
    core reads the written (physically named) files for the identity column's new high-water mark."""

    def field(name: str, kind: Any, **metadata: Any) -> dict[str, Any]:
        return {"name": name, "type": kind, "nullable": True, "metadata": metadata}

    identity = {
        "delta.identity.start": 1,
        "delta.identity.step": 1,
        "delta.identity.allowExplicitInsert": False,
    }
    info = {"type": "struct", "fields": [field("score", "double"), field("tag", "string")]}
    fields = [
        field("id", "long", **identity),
        field("name", "string"),
        field("lname", "string", **{"delta.generationExpression": "lower(name)"}),
        field("info", info),
    ]
    for mode in ("name", "id"):
        root = tmp_path / mode
        DeltaTable.create(
            str(root),
            json.dumps({"type": "struct", "fields": fields}),
            properties={"delta.columnMapping.mode": mode, "delta.constraints.named": "length(name) > 1"},
        )

        def rows(spark: Any = None, ds: str | None = None) -> Any:
            data = [("Ab", (0.5, "x")), ("Cd", None)]
            return spark.createDataFrame(data, "name STRING, info STRUCT<score: DOUBLE, tag: STRING>")

        op = make(root, rows)
        result = op.execute(context_for(op))
        assert result["committed"] and result["rows"] == 2
        snapshot = DeltaTable(str(root)).snapshot()
        (id_field,) = [f for f in json.loads(snapshot.metadata.schema_string)["fields"] if f["name"] == "id"]
        assert id_field["metadata"]["delta.identity.highWaterMark"] == 2
        theirs = pa.table(
            QueryBuilder().register("t", RsDeltaTable(str(root))).execute("select * from t").read_all()
        )
        assert sorted(theirs.to_pylist(), key=lambda r: r["name"]) == [
            {"id": 1, "name": "Ab", "lname": "ab", "info": {"score": 0.5, "tag": "x"}},
            {"id": 2, "name": "Cd", "lname": "cd", "info": None},
        ]
