"""The customer-erasure example DAG, run with ``dag.test()`` against a real SQLite metadata DB: the
DELETE, its report and asset event, and a second request that finds nothing left. (A predicate that
renders to no condition is refused by the operator's unit tests: here its retries would wait.)"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import deltalake
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from delete_support import state

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


@pytest.fixture
def orders(erase_dag: ModuleType) -> DeltaTable:
    """The orders table the DAG erases from, with deletion vectors: customers 1-4, 5 orders each."""
    root = Path(erase_dag.ORDERS)
    assert root.parent == Path(os.environ["DELTA_DEMO_ROOT"])
    shutil.rmtree(root, ignore_errors=True)
    table = DeltaTable.create(str(root), SCHEMA, properties={"delta.enableDeletionVectors": "true"})

    for n in range(2):
        customers = [c for c in (1, 2, 3, 4) for _ in range(5)][n * 10 : n * 10 + 10]
        pq.write_table(
            pa.table({"customer_id": customers, "amount": list(range(n * 10, n * 10 + 10))}),
            root / f"part-{n}.parquet",
        )
        table.commit_files([f"part-{n}.parquet"])
    return table


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
    run = erase_dag.dag.test(run_conf={"customer_id": 2})
    assert str(run.state) == "success"
    values = xcoms(run.run_id)
    result = values[("erase", "return_value")]
    assert (result["committed"], result["mode"], result["num_deleted_rows"]) == (True, "deletion_vectors", 5)
    assert result["metrics"]["numDeletionVectorsAdded"] == 1  # the customer's rows were in one file
    assert values[("report", "return_value")] == {"version": 3, "deleted_rows": 5, "committed": True}
    assert customers(orders) == [1] * 5 + [3] * 5 + [4] * 5
    rs = deltalake.DeltaTable(orders.uri)
    query = deltalake.QueryBuilder().register("t", rs).execute("select customer_id from t")
    assert sorted(pa.table(query.read_all()).column(0).to_pylist()) == customers(orders)
    events = asset_events(f"file://{orders.uri.removeprefix('file://')}")
    assert events[-1]["version"] == 3 and events[-1]["operation"] == "DELETE"

    # Another request for the same customer: a new run, nothing left to delete, nothing written.
    before = state(orders)
    again = erase_dag.dag.test(run_conf={"customer_id": 2})
    assert str(again.state) == "success"
    assert xcoms(again.run_id)[("erase", "return_value")]["reason"] == "nothing_to_delete"
    assert state(orders) == before
