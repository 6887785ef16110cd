"""The customer-erasure example DAG, run with ``dag.test()`` against a real SQLite metadata DB: the
DELETE, its asset event, the PURGE and VACUUM step and the report; with the retention run out, no
Parquet file under the root holds the customer's rows afterwards; with the default retention the
report says when they go; a second request finds nothing left. (A predicate that renders to no
condition is refused by the operator's unit tests: here its retries would wait.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

pytestmark = pytest.mark.system

DAG_ID = "delta_erase_customer"
SCHEMA = pa.schema([("customer_id", pa.int64()), ("amount", pa.int64())])


@pytest.fixture(scope="module")
def erase_dag(load_example: Callable[[str], ModuleType]) -> ModuleType:
    return load_example("erase_customer.py")


def make_orders(erase_dag: ModuleType, properties: dict[str, str]) -> DeltaTable:
    """The orders table the DAG erases from, with deletion vectors: customers 1-4, 5 orders each."""
    root = Path(erase_dag.ORDERS)
    assert root.parent == Path(os.environ["AIRFLOW_VAR_DELTA_EXAMPLES_ROOT"])
    shutil.rmtree(root, ignore_errors=True)
    table = DeltaTable.create(
        str(root), SCHEMA, properties={"delta.enableDeletionVectors": "true", **properties}
    )

    for n in range(2):
        customers = [c for c in (1, 2, 3, 4) for _ in range(5)][n * 10 : n * 10 + 10]
        pq.write_table(
            pa.table({"customer_id": customers, "amount": list(range(n * 10, n * 10 + 10))}),
            root / f"part-{n}.parquet",
        )
        table.commit_files([f"part-{n}.parquet"])
    return table


@pytest.fixture
def orders(erase_dag: ModuleType) -> DeltaTable:
    """Orders whose removed files VACUUM may delete at once (their retention has run out)."""
    return make_orders(erase_dag, {"delta.deletedFileRetentionDuration": "interval 0 hours"})


def on_disk(table: DeltaTable, customer: int) -> int:
    """Rows of ``customer`` in every Parquet file under the root, read as stored (no log applied)."""
    found = 0
    for path in Path(table.storage.root).rglob("*.parquet"):
        data = pq.read_table(path)
        if "customer_id" in data.column_names:
            found += data.column("customer_id").to_pylist().count(customer)
    return found


def xcoms(run_id: str) -> dict[tuple[str, str], Any]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows = session.query(XComModel).filter_by(dag_id=DAG_ID, run_id=run_id).all()
        return {(row.task_id, row.key): row.value for row in rows}


def asset_events(uri: str) -> list[dict[str, Any]]:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session

    with create_session() as session:
        events = (
            session.query(AssetEvent)
            .join(AssetModel, AssetEvent.asset_id == AssetModel.id)
            .filter(AssetModel.uri == uri)
        )
        return [dict(e.extra) for e in events.order_by(AssetEvent.id)]


def customers(table: DeltaTable) -> list[int]:
    return sorted(table.snapshot().to_pyarrow_table().column("customer_id").to_pylist())


def test_erasing_a_customer(erase_dag: ModuleType, orders: DeltaTable) -> None:
    assert on_disk(orders, 2) == 5
    run = erase_dag.dag.test(run_conf={"customer_id": 2})
    assert str(run.state) == "success"
    values = xcoms(run.run_id)
    result = values[("erase", "return_value")]
    assert (result["committed"], result["mode"], result["num_deleted_rows"]) == (True, "deletion_vectors", 5)
    assert result["metrics"]["numDeletionVectorsAdded"] == 1  # the customer's rows were in one file
    assert customers(orders) == [1] * 5 + [3] * 5 + [4] * 5
    rs = deltalake.DeltaTable(orders.uri)
    query = deltalake.QueryBuilder().register("t", rs).execute("select customer_id from t")
    assert sorted(pa.table(query.read_all()).column(0).to_pylist()) == customers(orders)
    events = asset_events(f"file://{orders.uri.removeprefix('file://')}")
    assert events[-1]["version"] == 3 and events[-1]["operation"] == "DELETE"

    # PURGE rewrote the file without the rows; VACUUM deleted the file that held them.
    maintained = values[("purge_and_vacuum", "maintenance_report")]["tables"][0]
    assert maintained["steps"]["purge"]["status"] == "ran" and maintained["files_purged"] == 1
    assert maintained["files_removed"] >= 1
    summary = values[("report", "return_value")]
    assert summary["deleted_at_version"] == 3 and summary["deleted_rows"] == 5
    assert (summary["purged_files"], summary["bytes_gone_by"]) == (1, "now")
    assert on_disk(orders, 2) == 0
    assert orders.history(limit=3)[-1]["operation"] == "REORG"

    # Another request for the same customer: a new run, nothing left to delete or purge.
    files = orders.snapshot().files().column("path").to_pylist()
    again = erase_dag.dag.test(run_conf={"customer_id": 2})
    assert str(again.state) == "success"
    values = xcoms(again.run_id)
    assert values[("erase", "return_value")]["reason"] == "nothing_to_delete"
    assert (
        values[("purge_and_vacuum", "maintenance_report")]["tables"][0]["steps"]["purge"]["status"]
        == "not due"
    )
    assert orders.snapshot().files().column("path").to_pylist() == files
    assert customers(orders) == [1] * 5 + [3] * 5 + [4] * 5


def test_with_the_default_retention_the_report_says_when_the_bytes_go(erase_dag: ModuleType) -> None:
    orders = make_orders(erase_dag, {})
    run = erase_dag.dag.test(run_conf={"customer_id": 3})
    assert str(run.state) == "success"
    summary = xcoms(run.run_id)[("report", "return_value")]
    assert summary["purged_files"] == 1 and summary["retention_seconds"] == 7 * 86400
    assert summary["bytes_gone_by"] != "now"
    # The rows are gone for every reader; the replaced file keeps them until VACUUM may delete it.
    assert 3 not in customers(orders)
    assert on_disk(orders, 3) == 5
