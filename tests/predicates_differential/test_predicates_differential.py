"""Differential tests: every way the provider evaluates a predicate selects the rows Spark SQL
selects, on generated tables full of edge values, or refuses it with a ``PredicateError`` that a
decision or Spark itself justifies.

The oracle is local Spark SQL on the rows themselves (an in-memory relation: no Parquet, no
pushdown); the core is asked as a filter (every case), as a DELETE with and without deletion
vectors (``NOT coalesce(p, false)`` survives), through its file skipping, through ``read_delta``
and through Spark's row matcher (samples). A failure prints the seed, a one-line reproduction
and the case shrunk to a smallest predicate that still differs.
"""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from delete_support import state
from differential_world import World, core_answer, reproduction
from predicate_cases import CASES, PARTITIONS, SEED, Case, render, rng_for, shrunk

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions import PredicateError, files_matching

pytestmark = [pytest.mark.spark, pytest.mark.differential]

#: At most this share of the cases may be refused: a change that refuses everything must fail.
MAX_REFUSED = 0.25
#: Sample sizes of the slower paths, per table (scaled with DELTA_DIFF_CASES).
DELETES = max(1, CASES // 15)
READS = max(1, CASES // 200)
SPARK_MATCHES = max(1, CASES // 300)
SHOWN = 5


def test_every_refusal_is_a_justified_predicate_error(world: World) -> None:
    crashes = [(c, a.crash) for c, a in zip(world.cases, world.core, strict=True) if a.crash is not None]
    assert not crashes, _listing("raised something else than a PredicateError", crashes)
    refused = [(c, a.refusal) for c, a in zip(world.cases, world.core, strict=True) if a.refusal is not None]
    unjustified = [(c, f"[{r.reason}] {r}") for c, r in refused if c.id not in world.justified]
    assert not unjustified, _listing("refused without a justification", unjustified)
    if len(world.cases) >= 100:
        share = len(refused) / len(world.cases)
        reasons = sorted({r.reason for _, r in refused})
        assert share < MAX_REFUSED, f"{share:.0%} of the cases refused (reasons: {reasons}); seed {SEED}"


def test_the_core_selects_the_rows_spark_selects(world: World) -> None:
    diverging = [world.cases[i] for i in _answered(world) if _difference(world, i) is not None]
    assert not diverging, _report(world, diverging)


def test_a_predicate_on_partition_columns_selects_as_spark_does(world: World) -> None:
    """The commit predicates (``replace_where``, OPTIMIZE's filter, the conflict checks) name
    partition columns only and are evaluated on partition values: the same rows."""
    from airflow_delta_provider.core.expressions import Predicate

    values = world.rows.select(PARTITIONS)
    ids = world.rows.column("id").to_pylist()
    failures = []
    for index in _answered(world):
        item = world.cases[index]
        if not world.predicate(item).columns <= set(PARTITIONS):
            continue
        mask = Predicate(item.text, PARTITIONS, parameters=item.parameters).mask(values).to_pylist()
        found = frozenset(i for i, keep in zip(ids, mask, strict=True) if keep)
        if found != world.spark[index].ids:
            failures.append((item, _diff(found, world.spark[index].ids)))
    assert not failures, _listing("a partition predicate differs from Spark SQL", failures)


@pytest.mark.parametrize("deletion_vectors", [False, True], ids=["copy-on-write", "deletion-vectors"])
def test_delete_keeps_the_rows_spark_keeps(world: World, tmp_path: Any, deletion_vectors: bool) -> None:
    """``NOT coalesce(p, false)`` survives; a refused predicate leaves the table as it was."""
    everything = frozenset(world.rows.column("id").to_pylist())
    template = world.dv_root if deletion_vectors else world.root
    failures = []
    for index in _sample(world, "delete", DELETES, refused_too=True):
        item, core, spark = world.cases[index], world.core[index], world.spark[index]
        root = tmp_path / item.id
        shutil.copytree(template, root)
        table = DeltaTable(str(root))
        before = state(table)
        try:
            result = table.delete(item.text, parameters=item.parameters)
        except PredicateError:
            if core.refusal is None:
                failures.append((item, "the DELETE refused what the filter answered"))
            elif state(table) != before:
                failures.append((item, "a refused DELETE changed the table"))
            continue
        survivors = frozenset(table.snapshot().to_pyarrow_table().column("id").to_pylist())
        if spark is None or spark.ids is None:
            failures.append((item, "the DELETE ran where the filter refused or Spark failed"))
        elif survivors != everything - spark.ids or result.num_deleted_rows != len(spark.ids):
            failures.append((item, f"survivors differ: {_diff(everything - survivors, spark.ids)}"))
        shutil.rmtree(root)
    assert not failures, _listing("DELETE differs from Spark's NOT coalesce(p, false)", failures)


def test_skipping_never_drops_a_file_holding_a_selected_row(world: World) -> None:
    snapshot = DeltaTable(str(world.root)).snapshot()
    holders = _ids_per_file(snapshot)
    failures = []
    for index in _answered(world):
        item, spark = world.cases[index], world.spark[index]
        kept = files_matching(snapshot, world.predicate(item))
        dropped = [ids for ids, keep in zip(holders, kept, strict=True) if not keep]
        lost = set().union(*dropped) & spark.ids if dropped else set()
        if lost:
            failures.append((item, f"skipped files hold the selected ids {sorted(lost)}"))
    assert not failures, _listing("file skipping dropped a matching row", failures)


def test_read_delta_selects_the_rows_spark_selects(world: World, local_spark: Any) -> None:
    from pyspark.sql import functions as F

    from airflow_delta_provider.spark import read_delta

    chosen = _sample(world, "read", READS)
    failures = []
    for start in range(0, len(chosen), 20):  # one Spark job per 20 reads
        frames = [
            read_delta(
                local_spark,
                str(world.root),
                columns=["id"],
                filter=world.cases[i].text,
                parameters=world.cases[i].parameters,
            ).select(F.lit(i).alias("case"), "id")
            for i in chosen[start : start + 20]
        ]
        union = frames[0]
        for frame in frames[1:]:
            union = union.unionByName(frame)
        found: dict[int, set[int]] = {i: set() for i in chosen[start : start + 20]}
        for row in union.toArrow().to_pylist():
            found[row["case"]].add(row["id"])
        for index, ids in found.items():
            expected = world.spark[index].ids
            if ids != expected:
                failures.append((world.cases[index], f"read_delta {_diff(frozenset(ids), expected)}"))
    assert not failures, _listing("read_delta differs from Spark SQL", failures)


def test_a_delete_matched_on_spark_deletes_the_rows_spark_selects(
    world: World, local_spark: Any, tmp_path: Any
) -> None:
    from airflow_delta_provider.spark.delete import spark_row_matcher

    everything = frozenset(world.rows.column("id").to_pylist())
    failures = []
    for index in _sample(world, "spark-delete", SPARK_MATCHES):
        item = world.cases[index]
        root = tmp_path / item.id
        shutil.copytree(world.dv_root, root)
        table = DeltaTable(str(root))
        table.delete(item.text, parameters=item.parameters, match_rows=spark_row_matcher(local_spark))
        survivors = frozenset(table.snapshot().to_pyarrow_table().column("id").to_pylist())
        if survivors != everything - world.spark[index].ids:
            failures.append(
                (item, f"survivors differ: {_diff(everything - survivors, world.spark[index].ids)}")
            )
    assert not failures, _listing("a DELETE matched on Spark differs from Spark SQL", failures)


# --- helpers ------------------------------------------------------------------------------------


def _answered(world: World) -> list[int]:
    """The indices of the cases the core answered (their Spark answers are in ``world.spark``)."""
    return [i for i, answer in enumerate(world.core) if answer.ids is not None]


def _sample(world: World, purpose: str, count: int, *, refused_too: bool = False) -> list[int]:
    """A seeded sample of the cases Spark answered alike (and some refused ones)."""
    agreed = [
        i
        for i, (core, spark) in enumerate(zip(world.core, world.spark, strict=True))
        if core.ids is not None and spark is not None and spark.ids == core.ids
    ]
    refused = [i for i, core in enumerate(world.core) if core.refusal is not None]
    rng = rng_for(world.name, purpose)
    chosen = rng.sample(agreed, min(count, len(agreed)))
    if refused_too:
        chosen += rng.sample(refused, min(max(1, count // 10), len(refused)))
    return sorted(chosen)


def _ids_per_file(snapshot: Any) -> list[set[int]]:
    holders = []
    for path in snapshot.files().column("path").to_pylist():
        holders.append(set(snapshot.to_pyarrow_table(paths=[path]).column("id").to_pylist()))
    return holders


def _difference(world: World, index: int) -> str | None:
    """How the core's filter and Spark differ on a case (None: they agree)."""
    core, spark = world.core[index], world.spark[index]
    if spark is None:
        return "not asked"
    if spark.ids is None:
        return f"the core answered {sorted(core.ids)}, Spark failed: {spark.error}"
    if core.ids != spark.ids:
        return _diff(core.ids, spark.ids)
    return None


def _diff(core: frozenset[int], spark: frozenset[int]) -> str:
    return f"the core's extra ids {sorted(core - spark)}, missing ids {sorted(spark - core)}"


def _report(world: World, diverging: list[Case]) -> str:
    lines = [f"{len(diverging)} of {len(world.cases)} cases of {world.name} differ from Spark (seed {SEED})."]
    for item in diverging[:SHOWN]:
        small = _shrink(world, item)
        lines += [
            "",
            f"case {item.id}: reproduce with {reproduction(item)}",
            f"  predicate: {small.text}   parameters: {small.parameters}",
            f"  on Spark:  {small.spark_text}   parameters: {small.spark_parameters}",
            f"  {_fresh_difference(world, small)}",
            *(f"  row {row}" for row in _rows_of(world, small)),
        ]
    return "\n".join(lines)


def _shrink(world: World, item: Case, budget: int = 40) -> Case:
    """A smaller predicate that still differs (greedy: the first smaller tree that does)."""
    current = item
    while budget > 0:
        for tree in shrunk(current.tree):
            budget -= 1
            candidate = render(Case(item.id, tree))
            if _fresh_difference(world, candidate) is not None:
                current = candidate
                break
            if budget <= 0:
                break
        else:
            break
    return current


def _fresh_difference(world: World, item: Case) -> str | None:
    core = core_answer(world, item)
    if core.ids is None:
        return None
    answer = world.oracle.answers([(item.spark_text, item.spark_parameters)])[0]
    if answer.ids is None:
        return f"the core answered {sorted(core.ids)}, Spark failed: {answer.error}"
    return None if answer.ids == core.ids else _diff(core.ids, answer.ids)


def _rows_of(world: World, item: Case) -> list[dict[str, Any]]:
    """The rows the core and Spark disagree on, with the columns the predicate names."""
    core = core_answer(world, item)
    answer = world.oracle.answers([(item.spark_text, item.spark_parameters)])[0]
    if core.ids is None or answer.ids is None:
        return []
    differing = core.ids ^ answer.ids
    named = world.predicate(item).columns
    names = [c for c in world.rows.column_names if c == "id" or c in named]
    return [{k: row[k] for k in names} for row in world.rows.to_pylist() if row["id"] in differing]


def _listing(what: str, failures: list[tuple[Case, Any]]) -> str:
    lines = [f"{len(failures)} case(s) {what} (seed {SEED}):"]
    for item, detail in failures[:SHOWN]:
        lines += [f"case {item.id}: {detail}", f"  predicate: {item.text}   parameters: {item.parameters}"]
        lines.append(f"  reproduce: {reproduction(item)}")
    return "\n".join(lines)
