"""DeltaPySparkOperator end to end on core-created tables with constraints, generated and identity
columns and row tracking: the written actions are checked against the protocol, a refused write
leaves the table (log and data files) unchanged, and delta-rs reads the same rows. The row checks
themselves are covered on a shared session in ``spark_support/test_constraints.py``."""

from __future__ import annotations

import datetime as dt
import json
from typing import TYPE_CHECKING, Any

import pytest
from deltalake import DeltaTable as RsDeltaTable

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ConstraintViolationError

from .test_pyspark import all_files, context_for, make

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("local_spark")]
pytest.importorskip("pyspark")


def field(name: str, kind: str, **metadata: object) -> dict:
    return {"name": name, "type": kind, "nullable": True, "metadata": metadata}


class Rows:
    def __init__(self, rows: list[tuple], columns: str) -> None:
        self.rows, self.columns = rows, columns

    def __call__(self, spark: Any = None, ds: str | None = None) -> Any:
        return spark.createDataFrame(self.rows, self.columns)


def lines(root: Path, version: int) -> list[dict]:
    with open(root / "_delta_log" / f"{version:020d}.json") as f:
        return [json.loads(line) for line in f]


def test_generated_identity_row_tracking_and_a_refusal_through_the_operator(tmp_path: Path) -> None:
    root = tmp_path / "events"
    identity = {
        "delta.identity.start": 100,
        "delta.identity.step": 10,
        "delta.identity.allowExplicitInsert": False,
    }
    fields = [
        field("id", "long", **identity),
        field("ts", "timestamp"),
        # CAST of a session-time-zone TIMESTAMP: the core's engine refuses it; Spark evaluates it.
        field("day", "date", **{"delta.generationExpression": "CAST(ts AS DATE)"}),
        field("name", "string"),
    ]
    DeltaTable.create(
        str(root),
        json.dumps({"type": "struct", "fields": fields}),
        partition_by=["day"],
        properties={"delta.constraints.named": "length(name) > 1", "delta.enableRowTracking": "true"},
    )
    assert lines(root, 0)[1]["protocol"]["writerFeatures"] == [
        "checkConstraints",
        "domainMetadata",
        "generatedColumns",
        "identityColumns",
        "rowTracking",
    ]
    rows = [(dt.datetime(2026, 11, 1, 23, 30), "ab"), (dt.datetime(2026, 11, 2, 0, 30), "cd")]
    op = make(root, Rows(rows, "ts TIMESTAMP, name STRING"), task_id="good")
    result = op.execute(context_for(op))
    assert (result["version"], result["rows"]) == (1, 2)
    first = lines(root, 1)
    assert first[0]["commitInfo"]["tags"]["delta.identity.schemaUpdate"] == "true"
    (metadata,) = [a["metaData"] for a in first if "metaData" in a]
    (id_field,) = [f for f in json.loads(metadata["schemaString"])["fields"] if f["name"] == "id"]
    assert id_field["metadata"]["delta.identity.highWaterMark"] == 110
    adds = sorted((a["add"] for a in first if "add" in a), key=lambda a: a["partitionValues"]["day"])
    assert [a["partitionValues"] for a in adds] == [{"day": "2026-11-01"}, {"day": "2026-11-02"}]
    assert sorted((a["baseRowId"], a["defaultRowCommitVersion"]) for a in adds) == [(0, 1), (1, 1)]
    (mark,) = [a["domainMetadata"] for a in first if "domainMetadata" in a]
    assert mark["configuration"] == '{"rowIdHighWaterMark":1}'
    read = sorted(RsDeltaTable(str(root)).to_pyarrow_table().to_pylist(), key=lambda r: r["id"])
    assert [(r["id"], r["day"], r["name"]) for r in read] == [
        (100, dt.date(2026, 11, 1), "ab"),
        (110, dt.date(2026, 11, 2), "cd"),
    ]

    before_log = {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()}
    before_files = all_files(root)
    bad = make(root, Rows([(dt.datetime(2026, 11, 3), "x")], "ts TIMESTAMP, name STRING"), task_id="bad")
    with pytest.raises(ConstraintViolationError, match=r"CHECK constraint named \(length\(name\) > 1\)"):
        bad.execute(context_for(bad))
    assert {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()} == before_log
    assert all_files(root) == before_files
