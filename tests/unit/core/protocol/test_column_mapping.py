"""Column mapping (name, id), type widening and liquid clustering, honoured by the core.

Tables are created by the core and, where the corpus has one, by Spark (the corpus tables);
files are written with pyarrow. The written actions and Parquet footers are checked field by
field, and delta-rs (its DataFusion reader, which resolves physical names and deletion
vectors) reads the same rows as the core.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable as RsDeltaTable
from deltalake import QueryBuilder

from airflow_delta_provider.core import DeltaTable, SchemaMismatchError, UnsupportedFeatureError
from airflow_delta_provider.core.protocol.column_mapping import (
    PARQUET_FIELD_ID,
    assign_column_mapping,
    column_id,
    field_id,
    logical_file_data,
    physical_data,
    spark_write_schemas,
)
from airflow_delta_provider.core.protocol.schema import is_type_widening, physical_name, schema_from_delta

CORPUS = Path(__file__).resolve().parents[3] / "conformance" / "corpus" / "tables"
UUID_NAME = re.compile(r"col-[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("s", pa.struct([("a", pa.int32()), ("b", pa.string())])),
        ("l", pa.list_(pa.struct([("x", pa.int64())]))),
        ("m", pa.map_(pa.string(), pa.struct([("y", pa.float64())]))),
        ("p", pa.string()),
    ]
)
ROWS = pa.table(
    {
        "id": [1, 2],
        "s": [{"a": 1, "b": "x"}, None],
        "l": [[{"x": 5}], []],
        "m": [[("k", {"y": 0.5})], None],
    },
    schema=pa.schema(list(SCHEMA)[:4]),
)


def log(root: Path, version: int) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in (root / "_delta_log" / f"{version:020d}.json").read_text().splitlines()
    ]


def only(actions: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [a[kind] for a in actions if kind in a]


def walk(fields: list[pa.Field]) -> list[pa.Field]:
    out = []
    for field in fields:
        out.append(field)
        kind = field.type
        if pa.types.is_struct(kind):
            out += walk([kind.field(i) for i in range(kind.num_fields)])
        elif pa.types.is_list(kind):
            out += walk([kind.value_type.field(i) for i in range(kind.value_type.num_fields)])
        elif pa.types.is_map(kind):
            out += walk([kind.item_type.field(i) for i in range(kind.item_type.num_fields)])
    return out


def delta_rs_rows(root: Path) -> list[str]:
    table = pa.table(
        QueryBuilder().register("t", RsDeltaTable(str(root))).execute("select * from t").read_all()
    )
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


def core_rows(root: Path) -> list[str]:
    table = DeltaTable(str(root)).snapshot().to_pyarrow_table()
    return sorted(json.dumps(r, sort_keys=True, default=str) for r in table.to_pylist())


@pytest.fixture(params=["name", "id"])
def mapped(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "t"
    DeltaTable.create(
        str(root), SCHEMA, partition_by=["p"], properties={"delta.columnMapping.mode": request.param}
    )
    return root, request.param


def write_physical(root: Path, relative: str, rows: pa.Table = ROWS) -> str:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(physical_data(rows, DeltaTable(str(root)).snapshot().schema), path)
    return relative


# --- create --------------------------------------------------------------------------------


def test_create_assigns_ids_in_pre_order_uuid_physical_names_and_max_column_id(mapped):
    root, mode = mapped
    actions = log(root, 0)
    assert only(actions, "protocol") == [
        {"minReaderVersion": 2, "minWriterVersion": 5}
    ]  # as Spark creates it
    metadata = only(actions, "metaData")[0]
    assert metadata["configuration"] == {
        "delta.columnMapping.mode": mode,
        "delta.columnMapping.maxColumnId": "9",
    }
    assert metadata["partitionColumns"] == ["p"]  # logical names in partitionColumns
    schema = schema_from_delta(metadata["schemaString"])
    fields = walk(list(schema))
    # Delta's order: pre-order, nested fields included (id, s, s.a, s.b, l, l.x, m, m.y, p).
    assert [f.name for f in fields] == ["id", "s", "a", "b", "l", "x", "m", "y", "p"]
    assert [column_id(f) for f in fields] == list(range(1, 10))
    names = [physical_name(f) for f in fields]
    assert all(UUID_NAME.fullmatch(n) for n in names) and len(set(names)) == 9
    assert RsDeltaTable(str(root)).version() == 0


# --- commits -------------------------------------------------------------------------------


def test_files_written_physically_commit_with_physical_keys_and_read_back_everywhere(mapped):
    root, _ = mapped
    table = DeltaTable(str(root))
    schema = table.snapshot().schema
    file = write_physical(root, "a1/part-0.parquet")
    footer = pq.read_schema(root / file)
    # The footer: physical names and the table's ids at every depth.
    expected = [(physical_name(f), column_id(f)) for f in walk(list(schema)) if f.name != "p"]
    assert [(f.name, field_id(f)) for f in walk(list(footer))] == expected

    result = table.commit_files([file], partition_values={"p": "v1"})
    add = only(log(root, result.version), "add")[0]
    names = {f.name: physical_name(f) for f in walk(list(schema))}
    p, id_, s, a = names["p"], names["id"], names["s"], names["a"]
    assert add["partitionValues"] == {p: "v1"}
    stats = json.loads(add["stats"])
    assert stats["minValues"][id_] == 1 and stats["minValues"][s][a] == 1
    # Stats are keyed physically at every depth (arrays and maps get none, as from Delta).
    assert stats["nullCount"] == {id_: 0, s: {a: 1, names["b"]: 1}}
    assert table.snapshot().schema.equals(schema, check_metadata=True)  # no new ids
    assert core_rows(root) == delta_rs_rows(root)
    assert len(core_rows(root)) == 2


def test_spark_style_partition_directories_named_physically_are_read(mapped):
    root, _ = mapped
    p = physical_name(DeltaTable(str(root)).snapshot().schema.field("p"))
    file = write_physical(root, f"{p}=v2/part-0.parquet")
    result = DeltaTable(str(root)).commit_files([file])
    assert only(log(root, result.version), "add")[0]["partitionValues"] == {p: "v2"}
    assert {json.loads(r)["p"] for r in delta_rs_rows(root)} == {"v2"}


def test_files_with_logical_names_are_refused_naming_the_physical_name(mapped, log_state):
    root, mode = mapped
    before = log_state(root)
    pq.write_table(ROWS, root / "logical.parquet")
    with pytest.raises(SchemaMismatchError) as info:
        DeltaTable(str(root)).commit_files(["logical.parquet"], partition_values={"p": "v"})
    physical = physical_name(DeltaTable(str(root)).snapshot().schema.field("id"))
    message = str(info.value)
    assert "'id'" in message and physical in message and f"mode {mode!r}" in message
    assert log_state(root) == before


def test_nested_fields_with_logical_names_are_refused(mapped, log_state):
    root, _ = mapped
    schema = DeltaTable(str(root)).snapshot().schema
    data = physical_data(ROWS, schema)
    s = data.schema.field(1)
    logical_struct = pa.struct([f.with_name(n) for f, n in zip(s.type, ["a", "b"], strict=True)])
    data = data.set_column(1, s.with_type(logical_struct), data.column(1).cast(logical_struct))
    pq.write_table(data, root / "nested.parquet")
    before = log_state(root)
    with pytest.raises(
        SchemaMismatchError, match=r"'s\.a'.*" + physical_name(schema.field("s").type.field(0))
    ):
        DeltaTable(str(root)).commit_files(["nested.parquet"], partition_values={"p": "v"})
    assert log_state(root) == before


def test_id_mode_refuses_a_wrong_or_missing_field_id(tmp_path, log_state):
    root = tmp_path / "t"
    DeltaTable.create(str(root), SCHEMA, partition_by=["p"], properties={"delta.columnMapping.mode": "id"})
    schema = DeltaTable(str(root)).snapshot().schema
    data = physical_data(ROWS, schema)
    wrong = data.schema.set(0, data.schema.field(0).with_metadata({PARQUET_FIELD_ID: b"7"}))
    missing = data.schema.set(0, data.schema.field(0).with_metadata({}))
    pq.write_table(data.cast(wrong), root / "wrong.parquet")
    pq.write_table(data.cast(missing), root / "missing.parquet")
    before = log_state(root)
    for name, found in (("wrong.parquet", "7"), ("missing.parquet", "none")):
        with pytest.raises(SchemaMismatchError, match=rf"'id'.*field_id {found}.*id 1") as info:
            DeltaTable(str(root)).commit_files([name], partition_values={"p": "v"})
        assert physical_name(schema.field("id")) in str(info.value)
    assert log_state(root) == before


def test_schema_evolution_gives_new_columns_the_next_ids(mapped):
    root, mode = mapped
    table = DeltaTable(str(root))
    schema = table.snapshot().schema
    data = physical_data(ROWS, schema)
    metadata = {PARQUET_FIELD_ID: b"10"} if mode == "id" else None
    data = data.append_column(pa.field("score", pa.float64(), metadata=metadata), pa.array([1.5, None]))
    pq.write_table(data, root / "new.parquet")
    result = table.commit_files(["new.parquet"], partition_values={"p": "v"}, schema_mode="merge")
    metadata_action = only(log(root, result.version), "metaData")[0]
    assert metadata_action["configuration"]["delta.columnMapping.maxColumnId"] == "10"
    new = table.snapshot().schema
    assert new.names == ["id", "s", "l", "m", "p", "score"]
    assert column_id(new.field("score")) == 10 and physical_name(new.field("score")) == "score"
    assert all(new.field(c).equals(schema.field(c), check_metadata=True) for c in schema.names)
    assert {json.loads(r)["score"] for r in core_rows(root)} == {1.5, None}
    assert core_rows(root) == delta_rs_rows(root)


def test_id_mode_schema_evolution_needs_the_new_columns_field_id(tmp_path, log_state):
    root = tmp_path / "t"
    DeltaTable.create(str(root), SCHEMA, partition_by=["p"], properties={"delta.columnMapping.mode": "id"})
    data = physical_data(ROWS, DeltaTable(str(root)).snapshot().schema).append_column(
        "score", pa.array([1.0, 2.0])
    )
    pq.write_table(data, root / "new.parquet")
    before = log_state(root)
    with pytest.raises(SchemaMismatchError, match=r"'score' has no Parquet field_id.*field_id 10"):
        DeltaTable(str(root)).commit_files(["new.parquet"], partition_values={"p": "v"}, schema_mode="merge")
    assert log_state(root) == before


@pytest.mark.parametrize("name", ["table-with-columnmapping-mode-name", "table-with-columnmapping-mode-id"])
def test_spark_created_tables_take_a_commit_with_every_type(tmp_path, name):
    root = tmp_path / "t"
    shutil.copytree(CORPUS / "delta-kernel-rs" / name / "delta", root)
    table = DeltaTable(str(root))
    snapshot = table.snapshot()
    rows = snapshot.to_pyarrow_table().slice(0, 2)
    write = physical_data(rows, snapshot.schema)
    pq.write_table(write, root / "more.parquet")
    # Spark's own files carry the same footer shape (names and ids) as ours.
    spark_file = root / snapshot.files().column("path")[0].as_py()
    assert [(f.name, field_id(f)) for f in walk(list(pq.read_schema(spark_file)))] == [
        (f.name, field_id(f)) for f in walk(list(pq.read_schema(root / "more.parquet")))
    ]
    result = table.commit_files(["more.parquet"])
    assert result.committed
    assert len(core_rows(root)) == snapshot.to_pyarrow_table().num_rows + 2
    assert core_rows(root) == delta_rs_rows(root)


def test_spark_write_schemas_rename_and_number_every_level(mapped):
    root, mode = mapped
    snapshot = DeltaTable(str(root)).snapshot()
    frame = {
        "type": "struct",
        "fields": [
            {"name": "s", "type": {"type": "struct", "fields": [
                {"name": "b", "type": "string", "nullable": True, "metadata": {}},
            ]}, "nullable": True, "metadata": {}},
            {"name": "extra", "type": "long", "nullable": True, "metadata": {}},
        ],
    }  # fmt: skip
    logical, physical = spark_write_schemas(snapshot.schema, frame, snapshot.properties, mode)
    s = snapshot.schema.field("s")
    assert [f["name"] for f in logical["fields"]] == ["s", "extra"]
    assert [f["name"] for f in logical["fields"][0]["type"]["fields"]] == ["a", "b"]  # the table's order
    assert physical["fields"][0]["name"] == physical_name(s)
    assert physical["fields"][0]["metadata"] == {"parquet.field.id": column_id(s)}
    assert [
        (f["name"], f["metadata"]["parquet.field.id"]) for f in physical["fields"][0]["type"]["fields"]
    ] == [(physical_name(c), column_id(c)) for c in s.type]
    assert physical["fields"][1] == {
        **frame["fields"][1],
        "metadata": {"parquet.field.id": 10} if mode == "id" else {},
    }
    frame["fields"][0]["type"]["fields"].append(
        {"name": "c", "type": "long", "nullable": True, "metadata": {}}
    )
    with pytest.raises(SchemaMismatchError, match="struct column s has the field 'c'"):
        spark_write_schemas(snapshot.schema, frame, snapshot.properties, mode)


# --- type widening -------------------------------------------------------------------------


WIDENED = CORPUS / "delta-kernel-rs" / "type-widening"


def test_type_widened_files_read_as_the_current_types(tmp_path):
    root = tmp_path / "t"
    shutil.copytree(WIDENED, root)
    snapshot = DeltaTable(str(root)).snapshot()
    rows = sorted(snapshot.to_pyarrow_table().to_pylist(), key=lambda r: r["byte_long"])
    # The first file was written as byte/int/float/decimal(10,2)/date: upcast as Spark reads it.
    first = rows[0]
    assert (first["byte_long"], first["int_long"], first["int_double"]) == (1, 2, 7.0)
    assert first["float_double"] == pytest.approx(3.4, rel=1e-7)
    assert str(first["decimal_decimal_greater_scale"]) == "67.89000"
    assert str(first["byte_decimal"]) == "1.0" and str(first["long_decimal"]) == "4.0"
    assert str(first["date_timestamp_ntz"]) == "2024-09-09 00:00:00"
    assert rows[1]["byte_long"] == 9223372036854775807


def test_type_widened_tables_take_files_of_the_new_types_and_refuse_the_old(tmp_path, log_state):
    root = tmp_path / "t"
    shutil.copytree(WIDENED, root)
    table = DeltaTable(str(root))
    snapshot = table.snapshot()
    current = snapshot.to_pyarrow_table().slice(0, 1)
    pq.write_table(current, root / "new.parquet")
    old_file = sorted(p for p in WIDENED.glob("*.parquet") if "f6dbc649" in p.name)[0]
    shutil.copy(old_file, root / "old.parquet")
    before = log_state(root)
    with pytest.raises(SchemaMismatchError, match="byte_long has type long in the table but byte"):
        table.commit_files(["old.parquet"])
    assert log_state(root) == before
    result = table.commit_files(["new.parquet"])
    assert result.committed and table.snapshot().to_pyarrow_table().num_rows == 3
    assert only(log(root, result.version), "metaData") == []  # delta.typeChanges untouched
    assert table.snapshot().metadata.schema_string == snapshot.metadata.schema_string
    # A checkpoint of the widened table reads back the same.
    table.checkpoint()
    assert DeltaTable(str(root)).snapshot().to_pyarrow_table().num_rows == 3


@pytest.mark.parametrize(
    ("old", "new", "allowed"),
    [
        ("byte", "long", True),
        ("integer", "double", True),
        ("float", "double", True),
        ("date", "timestamp_ntz", True),
        ("decimal(10,2)", "decimal(12,4)", True),
        ("integer", "decimal(10,0)", True),
        ("long", "integer", False),
        ("double", "float", False),
        ("decimal(10,2)", "decimal(11,4)", False),  # loses an integer digit
        ("integer", "decimal(9,0)", False),
        ("long", "double", False),
        ("string", "long", False),
    ],
)
def test_type_widening_pairs(old, new, allowed):
    assert is_type_widening(old, new) is allowed


def test_a_type_change_that_is_no_widening_is_refused_on_read(log_writer):
    w = log_writer
    changes = [{"fromType": "long", "toType": "integer"}]
    schema = json.dumps({"type": "struct", "fields": [
        {"name": "id", "type": "integer", "nullable": True, "metadata": {"delta.typeChanges": changes}},
    ]})  # fmt: skip
    features = {"readerFeatures": ["typeWidening"], "writerFeatures": ["typeWidening"]}
    w.commit(0, w.commit_info(), w.protocol(3, 7, **features), w.metadata(schema_string=schema))
    with pytest.raises(UnsupportedFeatureError, match="changed from long to integer") as info:
        _ = DeltaTable(str(w.root)).snapshot().schema
    assert info.value.feature == "typeWidening"


def test_create_with_type_widening_lists_the_feature(tmp_path):
    root = tmp_path / "t"
    DeltaTable.create(str(root), SCHEMA, properties={"delta.enableTypeWidening": "true"})
    assert only(log(root, 0), "protocol") == [
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["typeWidening"],
            "writerFeatures": ["typeWidening"],
        }
    ]


# --- liquid clustering ---------------------------------------------------------------------


CLUSTERING = {"clusteringColumns": [["id"]]}


def clustered(w: Any) -> None:
    features = {"writerFeatures": ["domainMetadata", "clustering"]}
    domain = {"domain": "delta.clustering", "configuration": json.dumps(CLUSTERING), "removed": False}
    w.commit(
        0,
        w.commit_info("CREATE TABLE"),
        w.protocol(1, 7, **features),
        w.metadata(),
        {"domainMetadata": domain},
    )


def test_clustered_tables_take_unclustered_appends_and_keep_the_domain_through_maintenance(log_writer):
    w = log_writer
    clustered(w)
    table = DeltaTable(str(w.root))
    pq.write_table(pa.table({"id": pa.array([3, 1], pa.int64())}), w.root / "a.parquet")
    result = table.commit_files(["a.parquet"])
    add = only(log(w.root, result.version), "add")[0]
    assert "clusteringProvider" not in add and json.loads(add["stats"])["minValues"] == {"id": 1}
    assert only(log(w.root, result.version), "domainMetadata") == []  # the commit leaves the domain alone
    checkpoint = table.checkpoint()
    rows = pq.read_table(w.root / "_delta_log" / checkpoint.files[0]).column("domainMetadata").to_pylist()
    assert [r for r in rows if r] == [
        {"domain": "delta.clustering", "configuration": json.dumps(CLUSTERING), "removed": False}
    ]
    table.cleanup_logs()
    table.vacuum(retention=0, enforce_retention_duration=False)
    domains = DeltaTable(str(w.root)).snapshot().domain_metadata
    assert json.loads(domains["delta.clustering"].configuration) == CLUSTERING
    assert DeltaTable(str(w.root)).snapshot().to_pyarrow_table().num_rows == 2


def test_id_mode_refuses_a_column_whose_id_and_name_disagree(tmp_path, log_state):
    """Spark resolves by id (it would read the column), delta-rs and the core by physical name (NULL)."""
    root = tmp_path / "t"
    DeltaTable.create(str(root), SCHEMA, partition_by=["p"], properties={"delta.columnMapping.mode": "id"})
    schema = DeltaTable(str(root)).snapshot().schema
    data = physical_data(ROWS, schema)
    renamed = data.schema.set(0, data.schema.field(0).with_name("renamed"))
    pq.write_table(pa.Table.from_arrays(data.columns, schema=renamed), root / "renamed.parquet")
    before = log_state(root)
    with pytest.raises(
        SchemaMismatchError,
        match=rf"'renamed' has field_id {column_id(schema.field('id'))}, the id of column 'id'.*"
        + physical_name(schema.field("id")),
    ):
        DeltaTable(str(root)).commit_files(["renamed.parquet"], partition_values={"p": "v"})
    assert log_state(root) == before


@pytest.mark.parametrize("mode", ["name", "id"])
def test_a_files_rows_under_logical_names_at_every_depth(mode):
    table_schema, _ = assign_column_mapping(SCHEMA, {}, mode)
    # Large lists stay large: the logical rows are a view of the file's buffers.
    rows = ROWS.cast(
        pa.schema(
            [f.with_type(pa.large_list(f.type.value_field)) if f.name == "l" else f for f in ROWS.schema]
        )
    )
    logical = logical_file_data(table_schema, physical_data(rows, table_schema), mode)
    assert logical.column_names == ROWS.column_names
    assert logical.to_pylist() == ROWS.to_pylist()
    assert pa.types.is_large_list(logical.schema.field("l").type)
