"""delta-rs (``deltalake``) as the judge of what the core writes, and the core on delta-rs tables."""

from __future__ import annotations

import datetime as dt
import json
import os
import uuid
from decimal import Decimal
from urllib.parse import unquote

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.decimal128(10, 2)),
        ("ts", pa.timestamp("us", tz="UTC")),
        ("ds", pa.date32()),
        ("region", pa.string()),
    ]
)


def data(ids: list[int]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": [f"name-{i}" for i in ids],
            "amount": pa.array([Decimal(i) / 4 for i in ids], pa.decimal128(10, 2)),
            "ts": pa.array(
                [dt.datetime(2024, 1, 1) + dt.timedelta(hours=i) for i in ids], pa.timestamp("us", tz="UTC")
            ),
        }
    )


def spark_file(table: DeltaTable, ds: str, region: str | None, ids: list[int]) -> str:
    """One data file in Spark's partitionBy layout (partition columns only in the path)."""
    region_dir = region if region is not None else "__HIVE_DEFAULT_PARTITION__"
    name = f"part-00000-{uuid.uuid4()}.c000.snappy.parquet"
    relative = f"out-{uuid.uuid4().hex[:6]}/ds={ds}/region={region_dir}/{name}"
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(data(ids), path)
    return relative


def assert_same_as_delta_rs(table: DeltaTable) -> deltalake.DeltaTable:
    theirs = deltalake.DeltaTable(table.uri)
    snapshot = table.snapshot()
    assert theirs.version() == snapshot.version
    ours_rows = snapshot.to_pyarrow_table().sort_by("id")
    their_rows = theirs.to_pyarrow_table().sort_by("id")
    assert their_rows.schema.names == ours_rows.schema.names
    assert their_rows.cast(ours_rows.schema).to_pylist() == ours_rows.to_pylist()
    their_fields = [
        (f["name"], f["type"], f["nullable"]) for f in json.loads(theirs.schema().to_json())["fields"]
    ]
    our_fields = [
        (f["name"], f["type"], f["nullable"]) for f in json.loads(snapshot.metadata.schema_string)["fields"]
    ]
    assert their_fields == our_fields
    assert theirs.metadata().partition_columns == snapshot.partition_columns
    their_adds = pa.table(theirs.get_add_actions(flatten=True))
    assert sorted(unquote(p) for p in their_adds["path"].to_pylist()) == sorted(
        unquote(p) for p in snapshot.files()["path"].to_pylist()
    )
    their_partitions = sorted(tuple(sorted(p.items())) for p in theirs.partitions())
    our_partitions = sorted(
        tuple(sorted((k, v) for k, v in dict(p).items()))
        for p in snapshot.files()["partition_values"].to_pylist()
    )
    assert their_partitions == sorted(set(our_partitions))
    ours_history = [h["operation"] for h in table.history()]
    assert [h["operation"] for h in theirs.history()] == ours_history
    for app_id, txn in snapshot.transactions.items():
        assert theirs.transaction_version(app_id) == txn.version
    return theirs


@pytest.fixture
def table(tmp_path):
    return DeltaTable.create(str(tmp_path / "t"), SCHEMA, partition_by=["ds", "region"], name="events")


def test_every_mode_reads_the_same_in_delta_rs(table):
    assert_same_as_delta_rs(table)
    table.commit_files(
        [spark_file(table, "2024-01-01", "eu", [1, 2]), spark_file(table, "2024-01-02", None, [3])],
        app_id="ingest",
        app_version=1,
    )
    assert_same_as_delta_rs(table)
    assert table.commit_files(
        [spark_file(table, "2024-01-01", "eu", [1])], app_id="ingest", app_version=1
    ).skipped
    table.commit_files(
        [spark_file(table, "2024-01-01", "eu", [10, 11])], mode="overwrite", replace_where="ds = '2024-01-01'"
    )
    theirs = assert_same_as_delta_rs(table)
    assert sorted(theirs.to_pyarrow_table()["id"].to_pylist()) == [3, 10, 11]
    table.commit_files([spark_file(table, "2024-01-03", "us", [20])], mode="overwrite")
    theirs = assert_same_as_delta_rs(table)
    assert theirs.to_pyarrow_table()["id"].to_pylist() == [20]
    # delta-rs skips files with the core's stats: a filter outside every file's range reads nothing.
    assert theirs.to_pyarrow_table(filters=[("id", ">", 1000)]).num_rows == 0


def test_delta_rs_uses_the_core_stats_for_data_skipping(table):
    table.commit_files(
        [spark_file(table, "2024-01-01", "eu", [1, 2]), spark_file(table, "2024-01-01", "eu", [50, 60])]
    )
    theirs = deltalake.DeltaTable(table.uri)
    actions = pa.table(theirs.get_add_actions(flatten=True)).to_pylist()
    bounds = sorted((a["min.id"], a["max.id"], a["null_count.id"], a["num_records"]) for a in actions)
    assert bounds == [(1, 2, 0, 2), (50, 60, 0, 2)]


def test_schema_evolution_reads_the_same(table):
    table.commit_files([spark_file(table, "2024-01-01", "eu", [1])])
    relative = "evolved/ds=2024-01-02/region=eu/part-0.parquet"
    path = os.path.join(table.storage.root, relative)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    pq.write_table(data([2]).append_column("score", pa.array([0.5])), path)
    table.commit_files([relative], schema_mode="merge")
    theirs = assert_same_as_delta_rs(table)
    assert theirs.schema().to_arrow().names[-1] == "score"


def test_core_commits_onto_delta_rs_tables(tmp_path):
    uri = str(tmp_path / "rs")
    first = pa.table({"id": pa.array([1, 2, 3], pa.int64()), "part": ["x", "y", "x"]})
    deltalake.write_deltalake(uri, first, partition_by=["part"])
    deltalake.write_deltalake(
        uri, first.slice(0, 1), partition_by=["part"], mode="overwrite", predicate="part = 'x'"
    )
    theirs = deltalake.DeltaTable(uri)
    theirs.create_checkpoint()
    deltalake.write_deltalake(uri, first.slice(1, 1), partition_by=["part"], mode="append")
    table = DeltaTable(uri)
    relative = "core/part=z/file.parquet"
    os.makedirs(os.path.join(uri, "core", "part=z"))
    pq.write_table(pa.table({"id": pa.array([100], pa.int64())}), os.path.join(uri, relative))
    result = table.commit_files([relative], app_id="core", app_version=1)
    assert result.version == 3
    theirs = deltalake.DeltaTable(uri)
    assert theirs.version() == 3
    assert sorted(theirs.to_pyarrow_table()["id"].to_pylist()) == [1, 2, 2, 100]
    assert theirs.transaction_version("core") == 1
    os.makedirs(os.path.join(uri, "core", "part=x"))
    pq.write_table(
        pa.table({"id": pa.array([7], pa.int64())}), os.path.join(uri, "core", "part=x", "f.parquet")
    )
    table.commit_files(["core/part=x/f.parquet"], mode="overwrite", replace_where="part = 'x'")
    theirs = deltalake.DeltaTable(uri)
    assert sorted(theirs.to_pyarrow_table()["id"].to_pylist()) == [2, 2, 7, 100]
    assert [h["operation"] for h in theirs.history()][:2] == ["WRITE", "WRITE"]


def test_delta_rs_commits_onto_core_tables(table):
    table.commit_files([spark_file(table, "2024-01-01", "eu", [1])])
    extra = (
        data([2])
        .append_column("ds", pa.array([dt.date(2024, 1, 5)]))
        .append_column("region", pa.array(["us"]))
    )
    deltalake.write_deltalake(table.uri, extra, mode="append")
    snapshot = table.snapshot()
    assert snapshot.version == 2
    assert sorted(snapshot.to_pyarrow_table()["id"].to_pylist()) == [1, 2]


# --- stats no reader can misread (issue 10, section 5) -----------------------------------------
#
# Each case commits the same files into two tables: one with the core's stats, one without
# (delta.dataSkippingNumIndexedCols=0, so delta-rs cannot skip anything). Every filter on every
# column must return the same rows from both, through delta-rs's pyarrow path (DNF filters and
# dataset expressions, which turn stats into fragment guarantees) and its DataFusion path (SQL).

_UTC = pa.timestamp("us", tz="UTC")
_NTZ = pa.timestamp("us")
_STRUCT = pa.struct([("a", pa.int32()), ("t", pa.string())])
_LONG = "x" * 40  # longer than Delta's 32-character prefix: truncated bounds


def _t(micros: int) -> dt.datetime:
    return dt.datetime(2024, 1, 1) + dt.timedelta(microseconds=micros)


#: Every type the core writes bounds for, in files whose ranges differ, with nulls, a file of
#: nulls only, truncated strings and sub-millisecond timestamps.
BOUNDED_SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("dec", pa.decimal128(10, 2)),
        ("s", pa.string()),
        ("d", pa.date32()),
        ("ts", _UTC),
        ("ntz", _NTZ),
        ("b", pa.bool_()),
        ("st", _STRUCT),
    ]
)
BOUNDED_FILES = [
    {
        "id": [1, 2, 3],
        "i8": [-128, 0, None],
        "i16": [-5, 7, None],
        "i32": [1, 2, None],
        "i64": [2**62, -(2**63), None],
        "dec": [Decimal("1.25"), Decimal("-99999999.99"), None],
        "s": [_LONG + "a", _LONG + "b", None],
        "d": [dt.date(2024, 1, 1), dt.date(1999, 12, 31), None],
        "ts": [_t(500), _t(1_000_999), None],
        "ntz": [_t(500), _t(2_000_001), None],
        "b": [True, True, None],
        "st": [{"a": 1, "t": "p"}, {"a": 2, "t": None}, None],
    },
    {
        "id": [4, 5],
        "i8": [127, 5],
        "i16": [32767, 100],
        "i32": [2**31 - 1, 50],
        "i64": [7, 8],
        "dec": [Decimal("99999999.99"), Decimal("5.00")],
        "s": ["b", "é" * 40],
        "d": [dt.date(2030, 6, 1), dt.date(2024, 1, 2)],
        "ts": [_t(10_000_000), _t(999)],
        "ntz": [_t(10_000_000), _t(999)],
        "b": [False, False],
        "st": [{"a": 9, "t": "z"}, {"a": 10, "t": "y"}],
    },
    {"id": [6], **{name: [None] for name in BOUNDED_SCHEMA.names[1:]}},
]


def _arrow(schema: pa.Schema, columns: dict) -> pa.Table:
    return pa.table({f.name: pa.array(columns[f.name], f.type) for f in schema if f.name in columns})


def _twins(
    tmp_path, schema: pa.Schema, write
) -> tuple[DeltaTable, deltalake.DeltaTable, deltalake.DeltaTable]:
    """The same files committed with the core's stats and without any; ``write(root)`` writes
    them under a table root and returns their relative paths."""
    made = []
    for name, properties in (("stats", {}), ("nostats", {"delta.dataSkippingNumIndexedCols": "0"})):
        table = DeltaTable.create(str(tmp_path / name), schema, properties=properties)
        table.commit_files(write(table.storage.root))
        made.append(table)
    return made[0], deltalake.DeltaTable(made[0].uri), deltalake.DeltaTable(made[1].uri)


def _sql_literal(value, arrow_type: pa.DataType) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, Decimal):
        return f"CAST('{value}' AS DECIMAL({arrow_type.precision},{arrow_type.scale}))"
    if isinstance(value, dt.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, dt.date):
        return f"DATE '{value.isoformat()}'"
    return repr(value)


def _assert_same_rows(
    ours: deltalake.DeltaTable, plain: deltalake.DeltaTable, files: list[dict], schema
) -> int:
    """Every filter on every (leaf) column returns the same ids with and without stats."""
    import pyarrow.compute as pc
    from deltalake import QueryBuilder

    def ids(table, how, column, arrow_type, op, value):
        if how == "filters":
            typed = pa.types.is_temporal(arrow_type) or pa.types.is_decimal(arrow_type)
            literal = pa.scalar(value, arrow_type) if typed else value
            rows = table.to_pyarrow_table(columns=["id"], filters=[(column, op, literal)])
        elif how == "dataset":
            field = pc.field(*column.split("."))
            operator = {
                "=": "__eq__",
                "!=": "__ne__",
                "<": "__lt__",
                "<=": "__le__",
                ">": "__gt__",
                ">=": "__ge__",
            }
            expression = getattr(field, operator[op])(pa.scalar(value, arrow_type))
            rows = table.to_pyarrow_dataset().to_table(columns=["id"], filter=expression)
        else:
            sql_op = "<>" if op == "!=" else op
            sql_column = column if "." not in column else "{}['{}']".format(*column.split("."))
            query = f"SELECT id FROM t WHERE {sql_column} {sql_op} {_sql_literal(value, arrow_type)}"
            rows = QueryBuilder().register("t", table).execute(query).read_all()
        return sorted(pa.table(rows)["id"].to_pylist())

    checked = 0
    for field in schema:
        leaves = (
            [(f"{field.name}.{c.name}", c.type) for c in field.type]
            if pa.types.is_struct(field.type)
            else [(field.name, field.type)]
        )
        for column, arrow_type in leaves:
            values = set()
            for data in files:
                for value in data.get(column.split(".")[0], []):
                    if isinstance(value, dict):
                        value = value.get(column.split(".")[1])
                    if value is not None and not (isinstance(value, float) and value != value):
                        values.add(value)
            for value in sorted(values, key=repr):
                for op in ("=", "!=", "<", "<=", ">", ">="):
                    hows = ["dataset", "sql"] if "." in column else ["filters", "sql"]
                    if op in ("!=", "<="):
                        hows = hows[:1]  # the pyarrow path for every operator, SQL for a subset
                    for how in hows:
                        expected = ids(plain, how, column, arrow_type, op, value)
                        assert ids(ours, how, column, arrow_type, op, value) == expected, (
                            how,
                            column,
                            op,
                            value,
                        )
                        checked += 1
    return checked


def _bounds_by_file(table: DeltaTable) -> dict[str, dict | None]:
    return {
        row["path"]: json.loads(row["stats"]).get("minValues")
        for row in table.snapshot().files().select(["path", "stats"]).to_pylist()
    }


def test_delta_rs_reads_the_core_stats_right_for_every_bounded_type(tmp_path):
    def write(root):
        paths = []
        for index, columns in enumerate(BOUNDED_FILES):
            relative = f"out/part-{index}.parquet"
            os.makedirs(os.path.join(root, "out"), exist_ok=True)
            pq.write_table(_arrow(BOUNDED_SCHEMA, columns), os.path.join(root, relative), row_group_size=2)
            paths.append(relative)
        return paths

    table, ours, plain = _twins(tmp_path, BOUNDED_SCHEMA, write)
    bounds = _bounds_by_file(table)
    # The files with values carry bounds for every column: skipping is really exercised.
    assert set(bounds["out/part-0.parquet"]) == set(BOUNDED_SCHEMA.names)
    assert bounds["out/part-0.parquet"]["ts"] == "2024-01-01T00:00:00.000Z"
    assert bounds["out/part-1.parquet"]["b"] is False
    assert _assert_same_rows(ours, plain, BOUNDED_FILES, BOUNDED_SCHEMA) > 500


def test_files_with_unboundable_columns_carry_no_bounds_and_read_right(tmp_path):
    """Arrow-written floats (NaN left out of the footer uncounted), INT96 timestamps (Spark's
    default: no footer order) and a string maximum that cannot be truncated: those files keep
    numRecords and nullCount but no minValues, which delta-rs reads right (a nullCount without
    bounds, or a column missing from minValues, made it skip the file)."""
    schema = pa.schema(
        [("id", pa.int64()), ("f32", pa.float32()), ("f64", pa.float64()), ("ts", _UTC), ("s", pa.string())]
    )
    files = [
        {"id": [1, 2], "f32": [1.5, float("nan")], "f64": [0.5, 2.5], "ts": [_t(0), _t(5)], "s": ["a", "b"]},
        {"id": [3, 4], "f32": [9.0, 10.0], "f64": [float("nan")] * 2, "ts": [_t(7), None], "s": ["c", None]},
        {"id": [5], "f32": [None], "f64": [None], "ts": [_t(0)], "s": ["\U0010ffff" * 70]},
    ]

    def write(root):
        os.makedirs(os.path.join(root, "out"), exist_ok=True)
        pq.write_table(_arrow(schema, files[0]), os.path.join(root, "out", "floats.parquet"))
        pq.write_table(
            _arrow(schema, files[1]),
            os.path.join(root, "out", "int96.parquet"),
            use_deprecated_int96_timestamps=True,
        )
        pq.write_table(_arrow(schema, files[2]), os.path.join(root, "out", "untruncatable.parquet"))
        return ["out/floats.parquet", "out/int96.parquet", "out/untruncatable.parquet"]

    table, ours, plain = _twins(tmp_path, schema, write)
    for path, stats in (
        (row["path"], json.loads(row["stats"])) for row in table.snapshot().files().to_pylist()
    ):
        assert "minValues" not in stats, path
        assert stats["nullCount"]["id"] == 0
    assert _assert_same_rows(ours, plain, files, schema) > 100


#: The files of issue 23: an id, an int32, a double and a string; the last one holds a NaN.
FLOAT_SCHEMA = pa.schema([("id", pa.int64()), ("n", pa.int32()), ("x", pa.float64()), ("s", pa.string())])
FLOAT_FILES = [
    {"id": [1, 2, 3], "n": [10, None, 30], "x": [0.5, -1.5, None], "s": ["a", "b", None]},
    {"id": [4, 5], "n": [40, 50], "x": [7.25, 100.0], "s": ["c", "d"]},
    {"id": [6, 7], "n": [60, 70], "x": [2.0, float("nan")], "s": ["e", "f"]},
]


@pytest.mark.parametrize("writer", ["pyarrow", "delta-rs"])
def test_arrow_written_doubles_keep_every_column_skippable_and_read_right(tmp_path, writer):
    """pyarrow's and delta-rs's footers leave NaN out of a double's bounds; once the double's
    values are read and hold no NaN, the file has bounds for every column (the one holding a NaN
    has none), and delta-rs reads the same rows with the stats as without."""

    def write(root):
        paths = []
        for index, columns in enumerate(FLOAT_FILES):
            relative = f"out/part-{index}.parquet"
            os.makedirs(os.path.join(root, "out"), exist_ok=True)
            data = _arrow(FLOAT_SCHEMA, columns)
            if writer == "pyarrow":
                pq.write_table(data, os.path.join(root, relative))
            else:  # delta-rs's own writer (parquet-rs), its files taken without its log
                scratch = os.path.join(root, f"_scratch{index}")
                deltalake.write_deltalake(scratch, data)
                [name] = [n for n in os.listdir(scratch) if n.endswith(".parquet")]
                os.replace(os.path.join(scratch, name), os.path.join(root, relative))
            paths.append(relative)
        return paths

    table, ours, plain = _twins(tmp_path, FLOAT_SCHEMA, write)
    bounds = _bounds_by_file(table)
    assert bounds["out/part-0.parquet"] == {"id": 1, "n": 10, "x": -1.5, "s": "a"}
    assert bounds["out/part-1.parquet"] == {"id": 4, "n": 40, "x": 7.25, "s": "c"}
    assert bounds["out/part-2.parquet"] is None  # a NaN: no bound for x reads right everywhere
    assert _assert_same_rows(ours, plain, FLOAT_FILES, FLOAT_SCHEMA) > 100


@pytest.mark.spark
def test_delta_rs_reads_the_core_stats_of_spark_files_right(tmp_path):
    """Spark's parquet-mr writes NaN into the footer's float max, so its finite float bounds are
    exact and kept; a file with NaN keeps no bounds; Spark's default INT96 timestamps get theirs
    from their values."""
    pyspark = pytest.importorskip("pyspark.sql")
    spark = (
        pyspark.SparkSession.builder.master("local[1]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    ddl = "id LONG, f FLOAT, g DOUBLE, ts TIMESTAMP, flag BOOLEAN, name STRING"
    batches = {
        "micros": [(1, 1.5, 2.0, _t(500), True, "a"), (2, 3.0, -0.5, _t(2_000), None, None)],
        "nan": [(3, float("nan"), 1.0, _t(1), False, "b"), (4, 1.0, 4.0, None, True, "c")],
        "int96": [(5, 7.0, 8.0, _t(9_000_000), True, "d")],
    }
    schema = pa.schema(
        [
            ("id", pa.int64()),
            ("f", pa.float32()),
            ("g", pa.float64()),
            ("ts", _UTC),
            ("flag", pa.bool_()),
            ("name", pa.string()),
        ]
    )

    def write(root):
        for name, rows in batches.items():
            timestamps = "INT96" if name == "int96" else "TIMESTAMP_MICROS"
            spark.conf.set("spark.sql.parquet.outputTimestampType", timestamps)
            spark.createDataFrame(rows, ddl).coalesce(1).write.parquet(os.path.join(root, name))
        return [
            f"{name}/{f}"
            for name in batches
            for f in os.listdir(os.path.join(root, name))
            if f.endswith(".parquet")
        ]

    try:
        table, ours, plain = _twins(tmp_path, schema, write)
    finally:
        spark.stop()
    bounds = {path.split("/")[0]: value for path, value in _bounds_by_file(table).items()}
    assert bounds["micros"] == {
        "id": 1,
        "f": 1.5,
        "g": -0.5,
        "ts": "2024-01-01T00:00:00.000Z",
        "flag": True,
        "name": "a",
    }
    assert bounds["nan"] is None
    # Spark counts INT96 nulls in the footer but keeps no bounds: they come from the values.
    assert bounds["int96"] == {
        "id": 5,
        "f": 7.0,
        "g": 8.0,
        "ts": "2024-01-01T00:00:09.000Z",
        "flag": True,
        "name": "d",
    }
    files = [{k: [r[i] for r in rows] for i, k in enumerate(schema.names)} for rows in batches.values()]
    assert _assert_same_rows(ours, plain, files, schema) > 100
