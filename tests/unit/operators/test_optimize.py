"""DeltaOptimizeOperator on a real local SparkSession: the rewrite on Spark (deletion vectors applied on
the executors), the core's commit, idempotent retries without Spark, and a conflict leaving no litter.

One table per test, kept small; the session is opened and stopped by the operator as in a task.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from spark_reads import add_deletion_vectors

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import ConcurrentDeleteReadError, OptimizeRewriteError
from airflow_delta_provider.core.log.commits import read_commit
from airflow_delta_provider.core.log.deletion_vectors import inline_deletion_vector
from airflow_delta_provider.operators.optimize import DeltaOptimizeOperator

if TYPE_CHECKING:
    from pathlib import Path

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("local_spark")]
pytest.importorskip("pyspark")

SPARK_CONF = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.session.timeZone": "UTC",
}
RUN = "scheduled__2026-11-01T00:00:00+00:00"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())])


def context_for(
    op: Any, *, try_number: int = 1, dag_id: str = "nightly", run_id: str = RUN
) -> dict[str, Any]:
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(),
        dag_id=dag_id,
        task_id=op.task_id,
        run_id=run_id,
        map_index=-1,
        try_number=try_number,
        max_tries=op.retries,
        task=op,
    )
    return {"ti": ti, "task": op, "run_id": run_id}


def make(root: Path, **kwargs: Any) -> DeltaOptimizeOperator:
    kwargs.setdefault("task_id", "optimize")
    kwargs.setdefault("retries", 2)
    return DeltaOptimizeOperator(table_uri=str(root), config_kwargs=dict(SPARK_CONF), **kwargs)


def write_file(root: Path, relative: str, ids: list[int]) -> str:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": ids, "name": [f"n{i}" for i in ids]}), path)
    return relative


def rows(root: Path) -> list[tuple[Any, ...]]:
    data = DeltaTable(str(root)).snapshot().to_pyarrow_table()
    return sorted(zip(*(data.column(c).to_pylist() for c in ("id", "name", "p")), strict=True))


def data_files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "_delta_log" not in p.parts
    )


def test_optimize_on_spark_compacts_applies_deletion_vectors_and_retries_without_spark(
    tmp_path: Path,
) -> None:
    root = tmp_path / "events"
    table = DeltaTable.create(
        str(root),
        SCHEMA,
        partition_by=["p"],
        properties={"delta.enableDeletionVectors": "true", "delta.targetFileSize": "1mb"},
    )
    for n, partition in enumerate(["a", "a", "a", "b", "b"]):
        table.commit_files(
            [write_file(root, f"p={partition}/f{n}.parquet", list(range(n * 10, n * 10 + 10)))]
        )
    # A DELETE as Spark writes it: the file is removed and re-added with a deletion vector.
    victim = table.snapshot().files().filter(pa.compute.equal(pa.compute.field("path"), "p=a/f0.parquet"))
    add = victim.to_pylist()[0]
    dv = inline_deletion_vector([0, 2, 4])
    commit = [
        {"commitInfo": {"operation": "DELETE", "timestamp": 1}},
        {
            "remove": {
                "path": add["path"],
                "deletionTimestamp": 1,
                "dataChange": True,
                "partitionValues": {"p": "a"},
                "size": add["size"],
            }
        },
        {
            "add": {
                "path": add["path"],
                "partitionValues": {"p": "a"},
                "size": add["size"],
                "modificationTime": 1,
                "dataChange": True,
                "deletionVector": dv,
                "stats": add["stats"],
            }
        },
    ]
    if DeltaTable(str(root)).snapshot().protocol.min_writer_version < 7:
        pytest.skip("the provider created the table without the deletionVectors feature")
    version = table.version() + 1
    (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(json.dumps(c) for c in commit) + "\n")
    before = rows(root)
    assert len(before) == 47

    op = make(root)
    result = op.execute(context_for(op))

    assert result["committed"] and result["version"] == version + 1
    assert result["metrics"]["numRemovedFiles"] == 5 and result["metrics"]["numAddedFiles"] == 2
    assert result["metrics"]["numDeletionVectorsRemoved"] == 1
    assert rows(root) == before
    # (delta-rs refuses tables listing the deletionVectors reader feature; the core's tests compare
    # with it on tables without.)
    files = DeltaTable(str(root)).snapshot().files()
    assert files.column("deletion_vector").null_count == 2
    assert all(p.startswith(result["write_dir"] + "/optimize_bin=") for p in files.column("path").to_pylist())
    # Spark's litter is gone; only the new files and the old (now removed, left for VACUUM) ones remain.
    assert all(f.endswith(".parquet") for f in data_files(root))
    info = read_commit(DeltaTable(str(root)).storage, version + 1).commit_info  # type: ignore[union-attr]
    assert info["operation"] == "OPTIMIZE" and info["tags"]["airflow.task_id"] == "optimize"

    # A retry of the same task instance: nothing to do, Spark not started.
    retry = make(root)
    again = retry.execute(context_for(retry, try_number=2))
    assert (again["committed"], again["reason"], again["version"]) == (
        False,
        "already_committed",
        version + 1,
    )
    assert DeltaTable(str(root)).version() == version + 1


def test_a_concurrent_delete_of_an_input_fails_the_task_and_leaves_no_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "events"
    table = DeltaTable.create(
        str(root), SCHEMA, partition_by=["p"], properties={"delta.targetFileSize": "1mb"}
    )
    for n in range(3):
        table.commit_files([write_file(root, f"p=a/f{n}.parquet", [n])])
    original = DeltaOptimizeOperator._rewrite_on_spark

    def rewrite_then_delete(self: Any, spark: Any, table: Any, plan: Any, root_uri: str, attempt: str) -> Any:
        written = original(self, spark, table, plan, root_uri, attempt)
        DeltaTable(str(root)).commit_files(
            [write_file(root, "p=a/replacement.parquet", [9])], mode="overwrite", replace_where="p = 'a'"
        )
        return written

    monkeypatch.setattr(DeltaOptimizeOperator, "_rewrite_on_spark", rewrite_then_delete)
    op = make(root)
    with pytest.raises(ConcurrentDeleteReadError, match=r"p=a/f\d\.parquet"):
        op.execute(context_for(op))
    assert DeltaTable(str(root)).version() == 4
    assert rows(root) == [(9, "n9", "a")]
    assert not any(f.startswith("optimize/") for f in data_files(root))


def table_state(root: Path) -> dict[str, Any]:
    """The table, its log, and every file beside it (the root's parent directory)."""
    table = DeltaTable(str(root))
    return {
        "version": table.version(),
        "active": sorted(table.snapshot().files().column("path").to_pylist()),
        "log": sorted(p.name for p in (root / "_delta_log").iterdir()),
        "outside": sorted(str(p) for p in root.parent.rglob("*") if root not in p.parents and p != root),
    }


def two_partitions(root: Path) -> None:
    table = DeltaTable.create(
        str(root), SCHEMA, partition_by=["p"], properties={"delta.targetFileSize": "1mb"}
    )
    for n, partition in enumerate(["a", "a", "b", "b"]):
        table.commit_files([write_file(root, f"p={partition}/f{n}.parquet", [n])])
    write_file(root.parent, "beside.parquet", [100])


def around_the_spark_rewrite(
    monkeypatch: pytest.MonkeyPatch, before: Any = lambda: None, after: Any = lambda: None
) -> None:
    """Real faults around the real rewrite: ``before()`` once the core planned, ``after()`` once
    Spark wrote its files."""
    original = DeltaOptimizeOperator._rewrite_on_spark

    def rewrite(self: Any, spark: Any, *args: Any) -> Any:
        before()
        written = original(self, spark, *args)
        after()
        return written

    monkeypatch.setattr(DeltaOptimizeOperator, "_rewrite_on_spark", rewrite)


def test_an_input_removed_from_storage_fails_the_spark_rewrite_clearly_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lake" / "events"
    two_partitions(root)
    before = table_state(root)
    around_the_spark_rewrite(monkeypatch, before=(root / "p=b" / "f3.parquet").unlink)
    op = make(root)
    with pytest.raises(OptimizeRewriteError, match="missing from storage") as info:
        op.execute(context_for(op))
    assert "Nothing was committed" in str(info.value) and "f3.parquet" in str(info.value)
    assert table_state(root) == before
    assert data_files(root) == ["p=a/f0.parquet", "p=a/f1.parquet", "p=b/f2.parquet"]


def test_the_loser_of_two_spark_runs_with_the_same_app_id_removes_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "lake" / "events"
    two_partitions(root)
    before = table_state(root)
    others: list[Any] = []

    def the_other_run_commits() -> None:
        others.append(DeltaTable(str(root)).optimize(app_id="nightly/optimize", app_version=1))

    around_the_spark_rewrite(monkeypatch, after=the_other_run_commits)
    op = make(root, app_id="nightly/optimize", app_version=1)
    result = op.execute(context_for(op))

    assert (result["committed"], result["reason"], result["version"]) == (False, "already_committed", 5)
    assert others[0].committed
    after = table_state(root)
    assert after["version"] == before["version"] + 1 and after["outside"] == before["outside"]
    # Only the other run's files are new; none of this attempt's stays.
    assert not any(f.startswith("optimize/") for f in data_files(root))
    assert all((root / p).exists() for p in after["active"])
    assert sorted(r[0] for r in rows(root)) == [0, 1, 2, 3]


def test_sizes_parse_as_spark_parses_them(local_spark: Any) -> None:
    """The core's one size parser (delta.targetFileSize, target_file_size) against Spark's own
    ``JavaUtils.byteStringAsBytes``: the same bytes wherever Spark reads a positive size, refused
    wherever Spark refuses (or reads zero)."""
    from airflow_delta_provider.core.errors import RetentionError
    from airflow_delta_provider.core.protocol.table_config import parse_byte_size

    java_utils = local_spark._jvm.org.apache.spark.network.util.JavaUtils
    numbers = ["0", "1", "7", "128", "1024", "134217728"]
    units = ["", "b", "B", "KB", "Mb", "GiB", "TB", "PB", "bytes", "e", "eb", "eib", "kibi"] + [
        letter + suffix for letter in "kmgtp" for suffix in ("", "b", "i", "ib")
    ]
    odd = [
        "1.5g",
        "128 mb",
        " 128mb ",
        "1xb",
        "mb",
        "",
        "-1",
        "+5",
        "1e9",
        "0x10",
        "8191p",
        "8192p",
        "9" * 20,
    ]
    for text in [n + u for n in numbers for u in units] + odd:
        try:
            spark: int | None = java_utils.byteStringAsBytes(text)
        except Exception:  # py4j's error for Spark's NumberFormatException / ArithmeticException
            spark = None
        if spark is not None and spark > 0:
            assert parse_byte_size(text) == spark, text
        else:
            with pytest.raises(RetentionError):
                parse_byte_size(text)


@pytest.mark.parametrize("value", ["", "  ", "1.5g", "128 mb", 0])
def test_a_blank_or_bad_target_file_size_is_refused_not_read_as_the_default(value: Any) -> None:
    with pytest.raises(ValueError, match="target_file_size"):
        DeltaOptimizeOperator(task_id="o", table_uri="/tmp/never-read", target_file_size=value)


def test_a_target_file_size_rendering_blank_fails_the_run_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "lake" / "events"
    two_partitions(root)
    before = table_state(root)
    op = make(root, target_file_size="{{ params.size }}")
    op.target_file_size = ""  # as rendered from a missing param
    with pytest.raises(ValueError, match=r"target_file_size must be a size in bytes .*got ''"):
        op.execute(context_for(op))
    assert table_state(root) == before


def test_a_table_whose_root_holds_a_space_and_a_percent_sign_is_optimized_on_spark(tmp_path: Path) -> None:
    """The core decodes the URI, Hadoop takes paths literally: the operator hands Spark the literal root."""
    root = tmp_path / "lake" / "a b%20c"
    two_partitions(root)
    uri = f"file://{tmp_path}/lake/a%20b%2520c"
    assert DeltaTable(uri).storage.root == str(root)
    op = DeltaOptimizeOperator(task_id="optimize", table_uri=uri, config_kwargs=dict(SPARK_CONF))
    result = op.execute(context_for(op))
    assert result["committed"] and result["table_uri"] == f"file://{tmp_path}/lake/a b%2520c"
    assert sorted(r[0] for r in rows(root)) == [0, 1, 2, 3]
    assert sorted(p.name for p in (tmp_path / "lake").iterdir()) == ["a b%20c", "beside.parquet"]


def test_bins_mixing_files_with_and_without_deletion_vectors_keep_exactly_the_surviving_rows(
    tmp_path: Path,
) -> None:
    """Every file with a deletion vector, of every bin, is read in one scan keyed by file (size, or
    path where two files share a size: here the same bytes under two names); the rewrite keeps
    exactly the rows the core reads, whatever kind of row set each vector is (a few rows, a bitmap)."""
    root = tmp_path / "events"
    table = DeltaTable.create(
        str(root),
        SCHEMA,
        partition_by=["p"],
        properties={"delta.enableDeletionVectors": "true", "delta.targetFileSize": "1mb"},
    )
    names = []
    for n, partition in enumerate(["a", "a", "a", "b", "b", "b"]):
        ids = list(range(100)) if n in (0, 1, 3) else list(range(n * 100, n * 100 + 100))
        names.append(write_file(root, f"p={partition}/f{n}.parquet", ids))  # f0, f1, f3: the same bytes
    table.commit_files(names)
    add_deletion_vectors(
        table, {"p=a/f0.parquet": [0, 2, 4], "p=a/f1.parquet": list(range(30, 70)), "p=b/f3.parquet": [99]}
    )
    before = rows(root)
    assert len(before) == 600 - 44

    op = make(root)
    result = op.execute(context_for(op))

    assert result["committed"] and result["metrics"]["numDeletionVectorsRemoved"] == 3
    assert result["metrics"]["numAddedFiles"] == 2
    assert rows(root) == before
    assert DeltaTable(str(root)).snapshot().files().column("deletion_vector").null_count == 2


def test_identities_of_airflows_maximum_length_are_optimized_on_spark(tmp_path: Path) -> None:
    """dag_id, task_id and run_id of 250 characters each: the rewrite's directory names fit the
    255-byte limit of every store."""
    root = tmp_path / "lake" / "events"
    two_partitions(root)
    op = make(root, task_id="t" * 250)
    result = op.execute(context_for(op, dag_id="d" * 250, run_id=("manual__" + "r" * 250)[:250]))
    assert result["committed"]
    assert sorted(r[0] for r in rows(root)) == [0, 1, 2, 3]
    assert all(len(part.encode()) <= 255 for f in data_files(root) for part in f.split("/"))
