"""Invariants, CHECK constraints, generated and identity columns on commits of written files.

Tables are created with each feature by the core; rows are checked with Delta's semantics (a
CHECK or invariant fails on false *and* on NULL, as ``CheckDeltaInvariant`` does; a generated
column must satisfy ``(value <=> expr) IS TRUE``) by the SQL engine (DataFusion). Every refusal
names the constraint, the file and a row, and leaves the table as it was.
"""

from __future__ import annotations

import json
import os
import re
import sys
import uuid
from datetime import date, datetime

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import (
    ConstraintViolationError,
    MetadataChangedError,
    SchemaMismatchError,
    UnsupportedExpressionError,
    UnsupportedFeatureError,
)
from airflow_delta_provider.core.protocol.column_mapping import physical_data
from airflow_delta_provider.core.protocol.constraints import Constraint, IdentityColumn, translate


def field(name: str, kind: str, nullable: bool = True, **metadata: object) -> dict:
    return {"name": name, "type": kind, "nullable": nullable, "metadata": metadata}


def schema(*fields: dict) -> str:
    return json.dumps({"type": "struct", "fields": list(fields)})


def write(table: DeltaTable, data: dict, directory: str = "") -> str:
    relative = f"{directory}w-{uuid.uuid4().hex[:8]}.parquet"
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(pa.table(data), path)
    return relative


def log_lines(table: DeltaTable, version: int) -> list[dict]:
    with open(os.path.join(table.storage.log_dir, f"{version:020d}.json")) as f:
        return [json.loads(line) for line in f]


def unchanged(table: DeltaTable, log_state, before: dict, version: int) -> None:
    assert log_state(table.storage.root) == before
    assert DeltaTable(table.uri).version() == version


@pytest.fixture
def checked(tmp_path):
    """A table with a CHECK constraint, an invariant and a generated column, created by the core."""
    table = DeltaTable.create(
        str(tmp_path / "t"),
        schema(
            field(
                "id", "long", **{"delta.invariants": json.dumps({"expression": {"expression": "id >= 0"}})}
            ),
            field("name", "string"),
            field("lname", "string", **{"delta.generationExpression": "lower(name)"}),
        ),
        properties={"delta.constraints.known": "name IN ('a', 'B', 'c') OR id > 100"},
    )
    return table


def test_the_core_creates_tables_with_the_legacy_protocol_spark_picks(checked, tmp_path):
    protocol = log_lines(checked, 0)[1]["protocol"]
    assert protocol == {"minReaderVersion": 1, "minWriterVersion": 4}  # generated columns: (1, 4)
    assert log_lines(checked, 0)[2]["metaData"]["configuration"] == {
        "delta.constraints.known": "name IN ('a', 'B', 'c') OR id > 100"
    }
    only_check = DeltaTable.create(
        str(tmp_path / "c"), schema(field("id", "long")), properties={"delta.constraints.p": "id > 0"}
    )
    assert log_lines(only_check, 0)[1]["protocol"] == {"minReaderVersion": 1, "minWriterVersion": 3}


def test_rows_that_satisfy_everything_are_committed_and_delta_rs_reads_them(checked):
    path = write(checked, {"id": [1, 200], "name": ["B", "zz"], "lname": ["b", "zz"]})
    assert checked.commit_files([path]).version == 1
    rows = deltalake.DeltaTable(checked.uri).to_pyarrow_table().sort_by("id").to_pylist()
    assert rows == [{"id": 1, "name": "B", "lname": "b"}, {"id": 200, "name": "zz", "lname": "zz"}]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"id": [1, 2], "name": ["a", "zz"], "lname": ["a", "zz"]},
            r"CHECK constraint known \(name IN \('a', 'B', 'c'\) OR id > 100\) is violated by a row of "
            r"w-\w+\.parquet: id = 2, name = 'zz', lname = 'zz'",
        ),
        (  # NULL fails a CHECK in Delta (CheckDeltaInvariant: result == null || result == false)
            {"id": [5], "name": pa.array([None], pa.string()), "lname": pa.array([None], pa.string())},
            r"CHECK constraint known .* id = 5, name = None",
        ),
        (
            {"id": [-1], "name": ["a"], "lname": ["a"]},
            r"invariant of column 'id' \(id >= 0\) is violated by a row of w-\w+\.parquet: id = -1",
        ),
        (
            {"id": pa.array([None], pa.int64()), "name": ["a"], "lname": ["a"]},
            r"invariant of column 'id' \(id >= 0\) is violated .* id = None",
        ),
        (
            {"id": [1], "name": ["B"], "lname": ["B"]},
            r"generated column 'lname' = lower\(name\) is violated .* name = 'B', lname = 'B'",
        ),
        (
            {"id": [1], "name": ["B"]},
            r"no values for the generated column 'lname' \(lower\(name\)\)",
        ),
    ],
)
def test_a_violation_names_constraint_file_and_row_and_commits_nothing(checked, log_state, data, message):
    path = write(checked, data)
    before = log_state(checked.storage.root)
    with pytest.raises(ConstraintViolationError, match=message):
        checked.commit_files([path])
    unchanged(checked, log_state, before, 0)


#: A date partition column generated from a timestamp.
GENERATED_DATE = schema(
    field("t", "timestamp_ntz"), field("d", "date", **{"delta.generationExpression": "CAST(t AS DATE)"})
)


def test_a_generated_partition_column_is_checked_on_its_partition_values(tmp_path, log_state):
    table = DeltaTable.create(
        str(tmp_path / "t"),
        GENERATED_DATE,
        partition_by=["d"],
    )
    good = write(table, {"t": pa.array([datetime(2024, 5, 1, 23, 59)], pa.timestamp("us"))}, "d=2024-05-01/")
    table.commit_files([good])
    bad = write(table, {"t": pa.array([datetime(2024, 5, 2, 0, 1)], pa.timestamp("us"))}, "d=2024-05-01/")
    before = log_state(table.storage.root)
    with pytest.raises(
        ConstraintViolationError, match=r"generated column 'd' = CAST\(t AS DATE\).*d=2024-05-01"
    ):
        table.commit_files([bad])
    unchanged(table, log_state, before, 1)
    assert deltalake.DeltaTable(table.uri).to_pyarrow_table().num_rows == 1


TOO_LARGE = {
    "20,000 ORs": " OR ".join(["id > 0"] * 20_000),  # crashed the process (the engine's stack)
    "101 ANDs": " AND ".join(["id > 0"] * 102),
    "parentheses 10,000 deep": "(" * 10_000 + "id > 0" + ")" * 10_000,
    "calls 33 deep": "lower(" * 33 + "name" + ")" * 33 + " = 'a'",
    "a very long text": "name = '" + "x" * 1_000_000 + "' OR " + " OR ".join(["id > 0"] * 200),
}


@pytest.mark.parametrize("kind", ["check", "invariant"])
@pytest.mark.parametrize("expression", list(TOO_LARGE.values()), ids=list(TOO_LARGE))
def test_an_expression_too_large_for_the_engine_is_refused_not_crashed(
    tmp_path, table_state, kind, expression
):
    """The engine parses and plans expressions recursively: 20,000 ORs exhausted the stack and killed
    the worker with SIGSEGV. Expressions past MAX_OPERATORS / MAX_NESTING are refused, by a message of
    bounded length, and nothing is committed."""
    if kind == "check":
        table = DeltaTable.create(
            str(tmp_path / "t"),
            schema(field("id", "long"), field("name", "string")),
            properties={"delta.constraints.big": expression},
        )
    else:
        invariant = json.dumps({"expression": {"expression": expression}})
        table = DeltaTable.create(
            str(tmp_path / "t"),
            schema(field("id", "long", **{"delta.invariants": invariant}), field("name", "string")),
        )
    path = write(table, {"id": [1], "name": ["a"]})
    before = table_state(table.storage.root)
    with pytest.raises(
        UnsupportedExpressionError, match=r"more than the 100 operators and 32 levels"
    ) as raised:
        table.commit_files([path])
    assert len(str(raised.value)) < 1500
    assert table_state(table.storage.root) == before


def test_an_expression_at_the_limits_is_evaluated(tmp_path):
    expression = "(" * 32 + " OR ".join(["id > 0"] * 50) + ")" * 32  # 99 operators
    table = DeltaTable.create(
        str(tmp_path / "t"), schema(field("id", "long")), properties={"delta.constraints.c": expression}
    )
    assert table.commit_files([write(table, {"id": [1]})]).version == 1
    with pytest.raises(ConstraintViolationError):
        table.commit_files([write(table, {"id": [-1]})])


def test_an_expression_the_engine_cannot_evaluate_like_spark_is_refused_by_name(tmp_path, log_state):
    table = DeltaTable.create(
        str(tmp_path / "t"), schema(field("id", "long")), properties={"delta.constraints.half": "id / 2 > 1"}
    )
    path = write(table, {"id": [10]})
    before = log_state(table.storage.root)
    with pytest.raises(
        UnsupportedExpressionError, match=r"CHECK constraint half \(id / 2 > 1\).*'/'"
    ) as info:
        table.commit_files([path])
    assert info.value.feature == "expression 'id / 2 > 1'"
    unchanged(table, log_state, before, 0)
    # The producer that checked the rows with Spark (the PySpark operator) says so: committed.
    assert table.commit_files([path], constraints_checked=True).version == 1


def test_without_the_engine_the_commit_is_refused_with_how_to_install_it(checked, log_state, monkeypatch):
    monkeypatch.setitem(sys.modules, "datafusion", None)  # import datafusion -> ImportError
    path = write(checked, {"id": [1], "name": ["a"], "lname": ["a"]})
    before = log_state(checked.storage.root)
    with pytest.raises(UnsupportedFeatureError, match=r"pip install 'airflow-delta-provider\[constraints\]'"):
        checked.commit_files([path])
    unchanged(checked, log_state, before, 0)


SCHEMA = pa.schema(
    [
        ("i", pa.int64()),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("n", pa.timestamp("us")),
        ("z", pa.timestamp("us", tz="UTC")),
        ("m", pa.decimal128(10, 2)),
        (
            "t",
            pa.struct(
                [
                    ("d", pa.date32()),
                    ("z", pa.timestamp("us", tz="UTC")),
                    ("c", pa.struct([("b", pa.string())])),
                ]
            ),
        ),
    ]
)


@pytest.mark.parametrize(
    ("expression", "sql"),
    [
        ("i > 0 AND s IS NOT NULL", '"i" > 0 AND "s" IS NOT NULL'),
        ("I between -5 and 10L", '"i" BETWEEN - 5 AND 10'),
        ("`s` LIKE 'a%' or s in (\"x\", 'y')", "\"s\" LIKE 'a%' OR \"s\" IN ( 'x' , 'y' )"),
        ("i <=> 3", '"i" IS NOT DISTINCT FROM 3'),
        ("length(s) >= 2", 'character_length ( "s" ) >= 2'),
        ("year(d) = 2024", "CAST(date_part('year', \"d\" ) AS INT) = 2024"),
        ("CAST(n AS DATE) = d", 'CAST ( "n" AS DATE ) = "d"'),
        ("d >= '2020-01-01'", "\"d\" >= '2020-01-01'"),
    ],
)
def test_the_spark_sql_subset_is_translated(expression, sql):
    assert translate(Constraint("c", "check", expression), SCHEMA) == sql


@pytest.mark.parametrize(
    ("expression", "sql"),
    [
        ("t.d > '2020-01-01'", "\"t.d\" > '2020-01-01'"),
        ("T.C.B = 'x' AND `t`.`c`.b IS NOT NULL", '"t.c.b" = \'x\' AND "t.c.b" IS NOT NULL'),
    ],
)
def test_struct_fields_are_read_from_their_own_engine_column(expression, sql):
    """Case-insensitive at every depth, as Spark resolves them; check_rows adds the columns."""
    assert translate(Constraint("c", "check", expression), SCHEMA) == sql


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("i + 1 > 0", "arithmetic"),
        ("i / 2 > 0", "'/'"),
        ("z > '2020-01-01'", "session time zone"),
        ("s > 5", "a string and a number"),
        ("m > 1.5", "fractional literal next to a DECIMAL"),
        ("concat(s, 'x') = 'ax'", r"function concat\(\)"),
        ("CAST(i AS STRING) = '1'", "CAST"),
        ("s = 'a\\'b'", "'"),
        ("nope > 1", "not exactly one column"),
        ("i.b > 1", r"i\.b: i is not a struct"),
        ("t.c.a > 1", r"'a' is not exactly one field of t\.c \(b\)"),
        ("a.b > 1", "'a' is not exactly one column"),
        ("t.z > '2020-01-01'", "session time zone"),  # the leaf's type decides, at any depth
        ("i > 1e3", "exponent"),
    ],
)
def test_what_spark_and_the_engine_could_evaluate_differently_is_refused(expression, why):
    with pytest.raises(UnsupportedExpressionError, match=why) as info:
        translate(Constraint("c", "check", expression), SCHEMA)
    assert info.value.feature == f"expression {expression!r}"


def test_a_check_on_a_struct_field_reads_null_under_a_null_struct_as_spark_does(tmp_path, log_state):
    struct = {"type": "struct", "fields": [field("x", "long"), field("y", "string"), field("z", "string")]}
    table = DeltaTable.create(
        str(tmp_path / "t"),
        schema(field("s", struct)),
        properties={"delta.constraints.c": "coalesce(s.x, 1) > 0 AND s.z IS NULL"},  # z: not in the files
    )
    kind = pa.struct([("x", pa.int64()), ("y", pa.string())])
    good = write(table, {"s": pa.array([{"x": 5, "y": "a"}, None], kind)})
    assert table.commit_files([good]).version == 1
    bad = write(table, {"s": pa.array([{"x": -1, "y": "b"}], kind)})
    before = log_state(table.storage.root)
    with pytest.raises(ConstraintViolationError, match=r"CHECK constraint c .*s = \{'x': -1, 'y': 'b'\}"):
        table.commit_files([bad])
    unchanged(table, log_state, before, 1)


# --- identity columns ---------------------------------------------------------------------------


def identity(tmp_path, explicit: bool, **extra: object) -> DeltaTable:
    meta = {
        "delta.identity.start": 10,
        "delta.identity.step": 5,
        "delta.identity.allowExplicitInsert": explicit,
    }
    return DeltaTable.create(
        str(tmp_path / ("d" if explicit else "a")),
        schema(field("id", "long", True, **meta, **extra), field("v", "string")),
    )


def identity_meta(table: DeltaTable) -> dict:
    (column,) = [
        f for f in json.loads(table.snapshot().metadata.schema_string)["fields"] if f["name"] == "id"
    ]
    return column["metadata"]


def test_identity_tables_get_writer_version_6(tmp_path):
    assert log_lines(identity(tmp_path, True), 0)[1]["protocol"] == {
        "minReaderVersion": 1,
        "minWriterVersion": 6,
    }


def test_by_default_accepts_supplied_values_without_moving_the_mark(tmp_path):
    table = identity(tmp_path, True)
    table.commit_files([write(table, {"id": [1000, 7], "v": ["a", "b"]})])
    assert "delta.identity.highWaterMark" not in identity_meta(table)  # explicit values never move it
    assert not any("metaData" in a for a in log_lines(table, 1))


@pytest.mark.parametrize("explicit", [True, False])
def test_files_without_identity_values_are_refused(tmp_path, log_state, explicit):
    table = identity(tmp_path, explicit)
    path = write(table, {"v": ["a"]})
    before = log_state(table.storage.root)
    with pytest.raises(
        ConstraintViolationError, match=r"no values for the identity column 'id'.*DeltaPySparkOperator"
    ):
        table.commit_files([path])
    unchanged(table, log_state, before, 0)


def test_generated_always_refuses_supplied_values(tmp_path, log_state):
    table = identity(tmp_path, False)
    path = write(table, {"id": [10], "v": ["a"]})
    before = log_state(table.storage.root)
    with pytest.raises(ConstraintViolationError, match="'id' is GENERATED ALWAYS"):
        table.commit_files([path])
    unchanged(table, log_state, before, 0)


def test_generated_values_move_the_mark_in_the_commits_metadata(tmp_path):
    table = identity(tmp_path, False)
    result = table.commit_files(
        [write(table, {"id": [10, 15, 20], "v": ["a", "b", "c"]})], identity_generated=["id"]
    )
    lines = log_lines(table, result.version)
    assert lines[0]["commitInfo"]["tags"] == {"delta.identity.schemaUpdate": "true"}
    assert [next(iter(a)) for a in lines] == ["commitInfo", "metaData", "add"]
    assert identity_meta(table)["delta.identity.highWaterMark"] == 20
    # A mark off the start/step grid is rounded up to it (Delta's roundToNext), never lowered.
    table.commit_files([write(table, {"id": [22], "v": ["d"]})], identity_generated=["id"])
    assert identity_meta(table)["delta.identity.highWaterMark"] == 25
    table.commit_files([write(table, {"id": [11], "v": ["e"]})], identity_generated=["id"])
    assert identity_meta(table)["delta.identity.highWaterMark"] == 25
    assert deltalake.DeltaTable(table.uri).to_pyarrow_table().num_rows == 5


def test_concurrent_identity_writers_conflict_as_in_delta(tmp_path, monkeypatch):
    table = identity(tmp_path, False)
    loser = DeltaTable(table.uri)
    snapshot = loser.snapshot()
    monkeypatch.setattr(loser, "snapshot", lambda *a, **k: snapshot)
    table.commit_files([write(table, {"id": [10], "v": ["a"]})], identity_generated=["id"])
    with pytest.raises(MetadataChangedError):
        loser.commit_files([write(loser, {"id": [10], "v": ["b"]})], identity_generated=["id"])
    assert DeltaTable(table.uri).version() == 1


@pytest.mark.parametrize(
    ("start", "step", "value", "rounded"),
    [
        (10, 5, 22, 25),
        (10, 5, 20, 20),
        (10, -5, 2, 0),
        (-3, 4, 2, 5),
        (1, 1, 9, 9),
        (0, 10, 2**63 - 4, 2**63 + 2),  # exact for any long (a float quotient is off by hundreds)
        (0, -10, -(2**63) + 4, -(2**63) - 2),
    ],
)
def test_rounding_follows_delta(start, step, value, rounded):
    assert IdentityColumn("id", start, step, None, True).rounded(value) == rounded


# --- column mapping: the checks see the files' rows under their logical names ---------------------

NOT_NULL_NAME = json.dumps({"expression": {"expression": "name IS NOT NULL"}})
NESTED = {  # renamed at every depth: a struct with a NOT NULL field and an array of structs, a map
    "type": "struct",
    "fields": [
        field(
            "x",
            "long",
            False,
            **{"delta.invariants": json.dumps({"expression": {"expression": "s.x < 100"}})},
        ),
        field(
            "tags",
            {
                "type": "array",
                "elementType": {"type": "struct", "fields": [field("k", "string")]},
                "containsNull": True,
            },
        ),
    ],
}
BY_KEY = {
    "type": "map",
    "keyType": "string",
    "valueType": {"type": "struct", "fields": [field("v", "long")]},
    "valueContainsNull": True,
}
#: A CHECK that tolerates NULL (NULL passes), a NOT NULL invariant (NULL fails), a generated column.
MAPPED_SCHEMA = schema(
    field("id", "long"),
    field("name", "string", **{"delta.invariants": NOT_NULL_NAME}),
    field("lname", "string", **{"delta.generationExpression": "lower(name)"}),
    field("s", NESTED),
    field("m", BY_KEY),
)
TOLERANT_CHECK = {"delta.constraints.pos": "id IS NULL OR id > 0"}
ROW_TYPE = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("lname", pa.string()),
        pa.field(
            "s",
            pa.struct(
                [pa.field("x", pa.int64(), False), ("tags", pa.list_(pa.struct([("k", pa.string())])))]
            ),
        ),
        ("m", pa.map_(pa.string(), pa.struct([("v", pa.int64())]))),
    ]
)


def create_mapped(root: str, creator: str, mode: str, schema_json: str, properties: dict) -> DeltaTable:
    """A column-mapped table made by the core or by delta-rs (which assigns its own ids and names)."""
    if creator == "core":
        return DeltaTable.create(
            root, schema_json, properties={"delta.columnMapping.mode": mode, **properties}
        )
    created = deltalake.DeltaTable.create(
        root, deltalake.Schema.from_json(schema_json), configuration={"delta.columnMapping.mode": mode}
    )
    checks = {k.removeprefix("delta.constraints."): v for k, v in properties.items()}
    if checks:
        created.alter.add_constraint(checks)
    return DeltaTable(root)


def write_physical(table: DeltaTable, rows: pa.Table, directory: str = "") -> str:
    """A file as Delta writes one into a column-mapped table: physical names and field ids, at every depth."""
    relative = f"{directory}w-{uuid.uuid4().hex[:8]}.parquet"
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(physical_data(rows, table.snapshot().schema), path)
    return relative


def delta_rs_rows(table: DeltaTable, order: str) -> list[dict]:
    """The rows delta-rs reads (its DataFusion reader, which resolves column mapping)."""
    found = deltalake.QueryBuilder().register("t", deltalake.DeltaTable(table.uri)).execute("select * from t")
    return sorted(pa.table(found.read_all()).to_pylist(), key=lambda row: str(row[order]))


def table_state(table: DeltaTable, log_state) -> tuple:
    """What a refused commit must leave as it was: version, active files and every _delta_log file."""
    fresh = DeltaTable(table.uri)
    return fresh.version(), sorted(fresh.snapshot().files().column("path").to_pylist()), log_state(table.uri)


@pytest.fixture(
    params=[("core", "name"), ("core", "id"), ("delta-rs", "name"), ("delta-rs", "id")], ids="-".join
)
def mapped(request, tmp_path):
    creator, mode = request.param
    return create_mapped(str(tmp_path / "t"), creator, mode, MAPPED_SCHEMA, TOLERANT_CHECK)


def mapped_rows(ids: list, names: list, lnames: list | None = None, x: int = 0) -> pa.Table:
    n = len(ids)
    return pa.table(
        {
            "id": ids,
            "name": names,
            "lname": lnames if lnames is not None else [None if v is None else v.lower() for v in names],
            "s": [{"x": x + i, "tags": [{"k": f"k{i}"}]} for i in range(n)],
            "m": [[("a", {"v": i})] for i in range(n)],
        },
        ROW_TYPE,
    )


def test_valid_rows_commit_into_a_column_mapped_table_and_delta_rs_reads_them(mapped):
    rows = mapped_rows([1, None], ["Ab", "c"])  # NULL id: the tolerant CHECK passes it
    result = mapped.commit_files([write_physical(mapped, rows)])
    assert result.version == mapped.version()
    assert delta_rs_rows(mapped, "name") == rows.sort_by("name").to_pylist()
    assert (
        mapped.snapshot().to_pyarrow_table().sort_by("name").to_pylist() == rows.sort_by("name").to_pylist()
    )


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (  # evaluated on NULLs, the CHECK that tolerates NULL let this row in
            mapped_rows([-5], ["a"]),
            r"CHECK constraint pos \(id IS NULL OR id > 0\) is violated .*: id = -5, name = 'a'",
        ),
        (mapped_rows([1], [None]), r"invariant of column 'name' \(name IS NOT NULL\) .*name = None"),
        (mapped_rows([1], ["Ab"], ["Ab"]), r"generated column 'lname' = lower\(name\) .*lname = 'Ab'"),
        (mapped_rows([1], ["a"], x=500), r"invariant of column 's\.x' \(s\.x < 100\) .*'x': 500"),
    ],
    ids=["tolerant-check", "not-null-invariant", "generated", "nested-invariant"],
)
def test_violating_rows_are_refused_on_a_column_mapped_table(mapped, log_state, rows, message):
    path = write_physical(mapped, rows)
    before = table_state(mapped, log_state)
    with pytest.raises(ConstraintViolationError, match=message) as info:
        mapped.commit_files([path])
    assert re.search(r"s = \{'x': \d+, 'tags': \[\{'k': 'k0'\}\]\}", str(info.value))  # logical names
    assert table_state(mapped, log_state) == before


def test_a_nested_not_null_field_is_enforced_under_column_mapping(mapped, log_state):
    nullable = pa.schema(
        [f if f.name != "s" else f.with_type(pa.struct([("x", pa.int64()), f.type[1]])) for f in ROW_TYPE]
    )
    rows = mapped_rows([1, 2], ["a", "b"]).cast(nullable)
    rows = rows.set_column(
        3, nullable.field("s"), pa.array([{"x": 1, "tags": []}, {"x": None}], nullable.field("s").type)
    )
    path = write_physical(mapped, rows)
    before = table_state(mapped, log_state)
    with pytest.raises(SchemaMismatchError, match=r"Column s\.x is NOT NULL in the table but nullable"):
        mapped.commit_files([path])
    assert table_state(mapped, log_state) == before


@pytest.mark.parametrize("mode", ["name", "id"])
def test_a_generated_partition_column_is_checked_on_physically_keyed_values(tmp_path, log_state, mode):
    table = DeltaTable.create(
        str(tmp_path / "t"),
        GENERATED_DATE,
        partition_by=["d"],
        properties={"delta.columnMapping.mode": mode},
    )
    t = pa.table({"t": pa.array([datetime(2024, 5, 1, 23, 59)], pa.timestamp("us"))})
    table.commit_files([write_physical(table, t)], partition_values={"d": "2024-05-01"})
    bad = write_physical(table, t)
    before = table_state(table, log_state)
    with pytest.raises(ConstraintViolationError, match=r"generated column 'd' = CAST\(t AS DATE\)"):
        table.commit_files([bad], partition_values={"d": "2024-05-02"})
    assert table_state(table, log_state) == before
    assert delta_rs_rows(table, "t") == [{"t": datetime(2024, 5, 1, 23, 59), "d": date(2024, 5, 1)}]


IDENTITY_SCHEMA = {
    "delta.identity.start": 10,
    "delta.identity.step": 5,
}


@pytest.fixture(params=["core-name", "core-id", "delta-rs-name", "delta-rs-id"])
def mapped_identity(request, tmp_path):
    """Column-mapped tables with an identity column BY DEFAULT ("d") and one GENERATED ALWAYS ("a")."""
    creator, mode = request.param.rsplit("-", 1)

    def make(explicit: bool) -> DeltaTable:
        meta = {**IDENTITY_SCHEMA, "delta.identity.allowExplicitInsert": explicit}
        text = schema(field("id", "long", **meta), field("v", "string"))
        return create_mapped(str(tmp_path / ("d" if explicit else "a")), creator, mode, text, {})

    return make


IDENTITY_ROWS = pa.table({"id": pa.array([10, 15], pa.int64()), "v": ["a", "b"]})


def test_by_default_identity_values_commit_under_column_mapping(mapped_identity):
    table = mapped_identity(True)
    table.commit_files([write_physical(table, IDENTITY_ROWS)])
    assert delta_rs_rows(table, "id") == IDENTITY_ROWS.to_pylist()
    assert "delta.identity.highWaterMark" not in identity_meta(table)  # explicit values never move it


def test_generated_always_identity_under_column_mapping(mapped_identity, log_state):
    table = mapped_identity(False)
    supplied = write_physical(table, IDENTITY_ROWS)
    before = table_state(table, log_state)
    with pytest.raises(ConstraintViolationError, match="'id' is GENERATED ALWAYS"):
        table.commit_files([supplied])
    assert table_state(table, log_state) == before
    # The writer that generated them (the PySpark operator) says so: the mark moves to the file's max.
    table.commit_files([supplied], identity_generated=["id"])
    assert identity_meta(table)["delta.identity.highWaterMark"] == 15
    assert delta_rs_rows(table, "id") == IDENTITY_ROWS.to_pylist()


def test_a_file_without_the_identity_column_is_refused_under_column_mapping(mapped_identity, log_state):
    table = mapped_identity(True)
    path = write_physical(table, IDENTITY_ROWS.select(["v"]))
    before = table_state(table, log_state)
    with pytest.raises(ConstraintViolationError, match=r"no values for the identity column 'id'"):
        table.commit_files([path])
    assert table_state(table, log_state) == before
