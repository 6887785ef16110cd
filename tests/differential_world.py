"""The generated worlds of the differential tests (tests/predicates_differential): per table, its Delta
tables (with and without deletion vectors), its rows as the core reads them, its cases, the
core's answers, Spark's, and why each refusal is right.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from predicate_cases import (
    CASES,
    PARTITIONS,
    SCHEMA,
    SEED,
    SPARK_DDL,
    Case,
    atom_cases,
    case,
    cases,
    rng_for,
    table_rows,
)
from spark_oracle import Answer, SparkOracle

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions import Predicate, PredicateError

if TYPE_CHECKING:
    from pathlib import Path

TABLES = ["t0", "t1"]
DV_PROPERTIES = {"delta.enableDeletionVectors": "true"}
DATA_COLUMNS = [c for c in SCHEMA.names if c not in PARTITIONS]
#: Refusals that are decisions, documented in docs/lifecycle.md ("What a predicate means"): Spark
#: answers, but the answer depends on a setting, on the data, or would surprise.
DELIBERATE = {"time_zone", "zone", "ansi", "decimal_rounding", "parameter"}
#: How many refusals of a type mismatch or a bad literal are confirmed by Spark's analysis.
ANALYSIS_CHECKS = max(20, CASES // 40)


@dataclass(frozen=True)
class CoreAnswer:
    """The ids the core selects, or its refusal, or the exception it must not raise."""

    ids: frozenset[int] | None
    refusal: PredicateError | None = None
    crash: str | None = None


@dataclass
class World:
    name: str
    rows: pa.Table
    root: Path
    dv_root: Path
    cases: list[Case]
    core: list[CoreAnswer] = field(default_factory=list)
    spark: list[Answer | None] = field(default_factory=list)
    justified: dict[str, str] = field(default_factory=dict)
    oracle: SparkOracle | None = None

    def predicate(self, item: Case) -> Predicate:
        return Predicate(item.text, PARTITIONS, data_columns=DATA_COLUMNS, parameters=item.parameters)


def reproduction(item: Case) -> str:
    """The one line that runs a case alone."""
    return f"DELTA_DIFF_SEED={SEED} DELTA_DIFF_CASE={item.id} pytest tests/predicates_differential"


def build_world(name: str, spark: Any, base: Path) -> World:
    """A table's world: its Delta tables under ``base``, its cases and every answer."""
    only = os.environ.get("DELTA_DIFF_CASE")
    generated = table_rows(name)
    root, dv_root = base / "table", base / "table-dv"
    write_table(root, generated, {})
    write_table(dv_root, generated, DV_PROPERTIES)
    rows = DeltaTable(str(root)).snapshot().to_pyarrow_table().select(SCHEMA.names)
    rows = rows.take(pc.sort_indices(rows, [("id", "ascending")]))
    drawn = [case(name, rows, int(only.rsplit("-", 1)[1]))] if only else cases(name, rows, CASES)
    found = World(name, rows, root, dv_root, drawn)
    found.core = [core_answer(found, item) for item in drawn]
    found.oracle = oracle = SparkOracle(spark, rows, f"differential_{name}", SPARK_DDL)
    asked = [i for i, answer in enumerate(found.core) if answer.ids is not None]
    answers = oracle.answers([(drawn[i].spark_text, drawn[i].spark_parameters) for i in asked])
    found.spark = [None] * len(drawn)
    for index, answer in zip(asked, answers, strict=True):
        found.spark[index] = answer
    found.justified = justify_refusals(found, oracle)
    return found


def write_table(root: Path, rows: pa.Table, properties: dict[str, str]) -> DeltaTable:
    """The rows as a Delta table partitioned by p and q, two files per partition (the core's
    commit of files written by pyarrow: their statistics come from the footers)."""
    table = DeltaTable.create(str(root), SCHEMA, partition_by=PARTITIONS, properties=properties)
    keys = rows.select(PARTITIONS).to_pylist()
    paths = []
    for key in sorted({(k["p"], k["q"]) for k in keys}, key=repr):
        chosen = [i for i, k in enumerate(keys) if (k["p"], k["q"]) == key]
        values = "/".join(f"{c}={_escaped(v)}" for c, v in zip(PARTITIONS, key, strict=True))
        (root / values).mkdir(parents=True, exist_ok=True)
        for part in (chosen[: len(chosen) // 2], chosen[len(chosen) // 2 :]):
            if part:
                relative = f"{values}/part-{uuid.uuid4()}.parquet"
                data = rows.take(pa.array(part, pa.int64())).drop_columns(PARTITIONS)
                pq.write_table(data, root / relative)
                paths.append(relative)
    table.commit_files(paths)
    return table


def _escaped(value: Any) -> str:
    from airflow_delta_provider.core.protocol.partitions import escape_partition_value

    return escape_partition_value(None if value is None else str(value))


def core_answer(world: World, item: Case) -> CoreAnswer:
    try:
        mask = world.predicate(item).mask(world.rows).to_pylist()
    except PredicateError as err:
        return CoreAnswer(None, refusal=err)
    except Exception as err:  # every refusal must be a PredicateError: anything else is a failure
        return CoreAnswer(None, crash=f"{type(err).__name__}: {err}")
    ids = world.rows.column("id").to_pylist()
    return CoreAnswer(frozenset(i for i, keep in zip(ids, mask, strict=True) if keep))


def justify_refusals(world: World, oracle: SparkOracle) -> dict[str, str]:
    """Per refused case, why the refusal is right (absent: it is not): a documented decision, or
    Spark fails the refused atom (its analysis, or the ANSI cast of its literal)."""
    found: dict[str, str] = {}
    casts: list[tuple[str, str, Any, str]] = []
    analysed: list[tuple[Case, str]] = []
    for item, answer in zip(world.cases, world.core, strict=True):
        refusal = answer.refusal
        if refusal is None:
            continue
        if refusal.reason in DELIBERATE:
            found[item.id] = refusal.reason
        elif refusal.reason == "cast" and refusal.literal and refusal.target:
            casts.append((item.id, *_cast_probe(item, refusal)))
        elif refusal.reason in ("mismatch", "literal"):
            analysed.append((item, refusal.reason))
    # Spark's analysis of one predicate takes a tenth of a second: a seeded sample of these
    # refusals is checked (all of them when DELTA_DIFF_CASES is raised), the others stand.
    checked = rng_for(world.name, "analysis").sample(analysed, min(len(analysed), ANALYSIS_CHECKS))
    for item, reason in analysed:
        atom = _refused_atom(world, item, reason) if (item, reason) in checked else None
        if atom is None and (item, reason) not in checked:
            found[item.id] = f"{reason} (not sampled for Spark's analysis)"
        elif atom is not None and oracle.refuses(atom.spark_text, atom.spark_parameters):
            found[item.id] = f"Spark refuses {atom.spark_text}"
    failures = oracle.cast_fails([(text, value, target) for _, text, value, target in casts])
    for (case_id, text, value, target), failed in zip(casts, failures, strict=True):
        if failed:
            found[case_id] = (
                f"Spark's ANSI cast of {text if value is None else repr(value)} to {target} fails"
            )
    return found


def _cast_probe(item: Case, refusal: PredicateError) -> tuple[str, Any, str]:
    """The refused literal (its SQL text, or a bound value) and the type Spark casts it to."""
    literal, target = refusal.literal or "", refusal.target or ""
    if not literal.startswith(":"):
        return literal, None, target
    name, _, index = literal[1:].partition("[")
    value = item.parameters[name]
    if index:
        value = list(value)[int(index.rstrip("]"))]
    return literal, value, target


def _refused_atom(world: World, item: Case, reason: str) -> Case | None:
    for atom in atom_cases(item):
        try:
            world.predicate(atom).normal_form(world.rows.schema)
        except PredicateError as err:
            if err.reason == reason:
                return atom
    return None
