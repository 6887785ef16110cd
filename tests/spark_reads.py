"""What the tests of ``airflow_delta_provider.spark`` share: the core's answer for a read, a
row-multiset comparison, and a table whose paths and log Spark alone would misread.

Importable by every tier (``tests/`` is on the path, see ``tests/conftest.py``).
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions.predicate import Predicate
from airflow_delta_provider.core.log.deletion_vectors import inline_deletion_vector
from airflow_delta_provider.core.protocol.actions import AddFile, RemoveFile
from airflow_delta_provider.core.protocol.partitions import partition_path
from airflow_delta_provider.core.transaction.commit import OptimisticTransaction
from airflow_delta_provider.core.transaction.commit_plan import CommitPlan

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from airflow_delta_provider.core.log.snapshot import Snapshot

#: Partition values and file names with every character class a path may mangle: spaces, '%'
#: (also before hex digits), '=', ':', glob characters, non-ASCII, '+' and '#'.
ODD_VALUES = ["a b", "100%41", "x=y:z", "ü é", "[1]{2}*?", "plus+hash#"]
ODD_FILE = "part 1 %41 ü=[x]#.parquet"


def core_rows(
    snapshot: Snapshot, columns: Sequence[str] | None = None, filter: str | None = None
) -> pa.Table:
    """The rows the core reads, filtered by ``filter`` with the core's semantics."""
    table = snapshot.to_pyarrow_table()
    if filter is not None:
        partitions = snapshot.partition_columns
        data = [f.name for f in snapshot.schema if f.name not in partitions]
        table = table.filter(Predicate(filter, partitions, data_columns=data).expression(table.schema))
    return table.select(list(columns)) if columns is not None else table


def rows(table: pa.Table) -> list[str]:
    """The rows as a sorted multiset of comparable strings (timestamps as UTC, decimals exact)."""
    return sorted(repr(_normalise(r)) for r in table.to_pylist())


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return sorted((k, _normalise(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        return ("ts", value.astimezone(dt.UTC).replace(tzinfo=None).isoformat())
    if isinstance(value, decimal.Decimal):
        return ("dec", str(value.normalize()))
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    return value


def odd_table(root: Path) -> DeltaTable:
    """A partitioned table whose partition values and file names hold :data:`ODD_VALUES`' characters,
    one file with a deletion vector (rows 0 and 2 deleted) and one file removed by a later commit
    but still on disk (as before VACUUM)."""
    table = DeltaTable.create(
        str(root),
        pa.schema([("id", pa.int64()), ("name", pa.string()), ("p", pa.string())]),
        partition_by=["p"],
        properties={"delta.enableDeletionVectors": "true"},
    )
    relatives = []
    for n, value in enumerate(ODD_VALUES):
        relative = f"{partition_path({'p': value}, ['p'])}/{n}-{ODD_FILE}"
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        ids = list(range(n * 10, n * 10 + 5))
        pq.write_table(pa.table({"id": ids, "name": [f"{value}-{i}" for i in ids]}), root / relative)
        relatives.append(relative)
    table.commit_files(relatives)
    # A replaced file: removed from the table, left on disk.
    table.commit_files([relatives[-1]], mode="overwrite", replace_where=f"p = '{ODD_VALUES[-1]}'")
    replacement = f"{partition_path({'p': ODD_VALUES[-1]}, ['p'])}/again {ODD_FILE}"
    pq.write_table(pa.table({"id": [100], "name": ["again"]}), root / replacement)
    table.commit_files([replacement], mode="overwrite", replace_where=f"p = '{ODD_VALUES[-1]}'")
    snapshot = table.snapshot()
    first = next(
        f for f in snapshot.files().to_pylist() if f["path"].startswith("p=a%20b") or "a b" in f["path"]
    )
    common = {
        "partition_values": dict(first["partition_values"]),
        "size": first["size"],
        "stats": first["stats"],
    }
    OptimisticTransaction(table.storage, read_snapshot=snapshot).commit(
        CommitPlan(
            "DELETE",
            removes=(RemoveFile(first["path"], deletion_timestamp=1, **common),),
            adds=(
                AddFile(
                    first["path"],
                    modification_time=1,
                    deletion_vector=inline_deletion_vector([0, 2]),
                    **common,
                ),
            ),
        )
    )
    return table


def add_deletion_vectors(table: DeltaTable, deleted: dict[str, list[int]]) -> None:
    """One DELETE commit re-adding the files named in ``deleted`` (by their path in the log) with
    an inline deletion vector marking those rows (the remove carries the file's former vector)."""
    snapshot = table.snapshot()
    removes: list[RemoveFile] = []
    adds: list[AddFile] = []
    for add in snapshot.files().to_pylist():
        if add["path"] not in deleted:
            continue
        common = {
            "partition_values": dict(add["partition_values"]),
            "size": add["size"],
            "stats": add["stats"],
        }
        former = add["deletion_vector"]
        former = None if former is None else {k: v for k, v in former.items() if v is not None}
        removes.append(RemoveFile(add["path"], deletion_timestamp=1, deletion_vector=former, **common))
        dv = inline_deletion_vector(deleted[add["path"]])
        adds.append(AddFile(add["path"], modification_time=1, deletion_vector=dv, **common))
    assert len(adds) == len(deleted), sorted(deleted)
    OptimisticTransaction(table.storage, read_snapshot=snapshot).commit(
        CommitPlan("DELETE", removes=tuple(removes), adds=tuple(adds))
    )
