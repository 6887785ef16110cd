"""The PySpark operator's row checks, on one shared real local SparkSession: generated columns
computed, identity values generated, every constraint evaluated by Spark with Delta's semantics."""

from __future__ import annotations

import datetime as dt
import json
import logging
from typing import Any

import pytest

from airflow_delta_provider.core.errors import ConstraintViolationError
from airflow_delta_provider.core.protocol.actions import Metadata
from airflow_delta_provider.operators.spark_support.constraints import prepare_frame

pytestmark = pytest.mark.spark
pytest.importorskip("pyspark")

log = logging.getLogger(__name__)


@pytest.fixture
def spark(local_spark: Any) -> Any:
    return local_spark


def field(name: str, kind: str, **metadata: object) -> dict:
    return {"name": name, "type": kind, "nullable": True, "metadata": metadata}


def metadata(*fields: dict, **properties: str) -> Metadata:
    return Metadata("t", json.dumps({"type": "struct", "fields": list(fields)}), (), properties)


TABLE = metadata(
    field("id", "long", **{"delta.invariants": json.dumps({"expression": {"expression": "id > 0"}})}),
    field("ts", "timestamp"),
    field("day", "date", **{"delta.generationExpression": "CAST(ts AS DATE)"}),
    field("name", "string"),
    **{"delta.constraints.named": "length(name) > 1 AND id + 1 > 1"},
)
COLUMNS = "id LONG, ts TIMESTAMP, name STRING"


def test_a_missing_generated_column_is_computed_by_spark(spark):
    frame = spark.createDataFrame([(1, dt.datetime(2026, 11, 1, 23, 30), "ab")], COLUMNS)
    prepared = prepare_frame(frame, TABLE, log)
    assert prepared.checked and prepared.identity_generated == ()
    (row,) = prepared.frame.collect()
    assert row["day"] == dt.date(2026, 11, 1)


@pytest.mark.parametrize(
    ("rows", "columns", "message"),
    [
        (
            [(2, dt.datetime(2026, 11, 1), "x")],
            COLUMNS,
            r"CHECK constraint named .* id = 2, ts = .*, name = 'x'",
        ),
        ([(2, dt.datetime(2026, 11, 1), None)], COLUMNS, "CHECK constraint named"),  # NULL fails, as in Delta
        ([(-2, dt.datetime(2026, 11, 1), "xy")], COLUMNS, r"invariant of column 'id' \(id > 0\)"),
        (
            [(3, dt.datetime(2026, 11, 1), "xy", dt.date(2026, 1, 1))],
            COLUMNS + ", day DATE",
            r"generated column 'day' = CAST\(ts AS DATE\) is violated .* day = datetime.date\(2026, 1, 1\)",
        ),
    ],
)
def test_a_row_breaking_a_constraint_is_refused_naming_it(spark, rows, columns, message):
    with pytest.raises(ConstraintViolationError, match=message):
        prepare_frame(spark.createDataFrame(rows, columns), TABLE, log)


def test_a_supplied_generated_value_that_agrees_is_kept(spark):
    frame = spark.createDataFrame(
        [(3, dt.datetime(2026, 11, 1, 5), "xy", dt.date(2026, 11, 1))], COLUMNS + ", day DATE"
    )
    assert prepare_frame(frame, TABLE, log).frame.collect()[0]["day"] == dt.date(2026, 11, 1)


def identity(explicit: bool, mark: int | None = None) -> Metadata:
    meta: dict[str, object] = {
        "delta.identity.start": 5,
        "delta.identity.step": -2,
        "delta.identity.allowExplicitInsert": explicit,
    }
    if mark is not None:
        meta["delta.identity.highWaterMark"] = mark
    return metadata(field("id", "long", **meta), field("v", "string"))


@pytest.mark.parametrize(("mark", "expected"), [(None, [5, 3, 1]), (-7, [-9, -11, -13])])
def test_identity_values_follow_start_step_and_mark(spark, mark, expected):
    frame = spark.createDataFrame([("a",), ("b",), ("c",)], "v STRING")
    prepared = prepare_frame(frame, identity(False, mark), log)
    assert prepared.identity_generated == ("id",)
    assert sorted((r["id"] for r in prepared.frame.collect()), reverse=True) == expected


def test_supplied_identity_values_follow_generated_always_or_by_default(spark):
    frame = spark.createDataFrame([(42, "a")], "id LONG, v STRING")
    with pytest.raises(ConstraintViolationError, match="'id' is GENERATED ALWAYS"):
        prepare_frame(frame, identity(False), log)
    prepared = prepare_frame(frame, identity(True), log)
    assert prepared.identity_generated == () and prepared.frame.collect()[0]["id"] == 42
