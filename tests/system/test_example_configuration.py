"""The example DAGs are configured one way: the Airflow Variable ``delta_examples_root`` names where
their tables live (documented at the top of each file), so a copied DAG is pointed at a bucket from
Airflow's UI; no environment variable of their own."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "dags_examples"
VARIABLE = "delta_examples_root"
#: Each example's table constants and the table names under the root.
TABLES = {
    "daily_ingest.py": {"EVENTS_TABLE": "events"},
    "downstream.py": {"EVENTS_TABLE": "events"},
    "silver.py": {"EVENTS_TABLE": "events", "SILVER_TABLE": "events_silver"},
    "erase_customer.py": {"ORDERS": "orders"},
    "rollback.py": {"EVENTS_TABLE": "events"},
    "partitioned_orders.py": {"ORDERS_TABLE": "daily_orders"},
    "partitioned_totals.py": {"ORDERS_TABLE": "daily_orders", "TOTALS_TABLE": "daily_totals"},
}
#: Examples that define their DAG only where Airflow has asset partitions (3.2+).
NEEDS_PARTITIONS = {"partitioned_orders.py", "partitioned_totals.py"}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda p: p.name)
def test_each_example_documents_the_variable_and_reads_no_environment(path: Path) -> None:
    source = path.read_text()
    docstring = ast.get_docstring(ast.parse(source)) or ""
    assert f"``{VARIABLE}``" in docstring, f"{path.name}: say at the top how its tables are located"
    assert "os.environ" not in source and "getenv" not in source, f"{path.name} reads the environment"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"configured_{Path(name).stem}", EXAMPLES / name)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(TABLES))
def test_the_tables_and_their_assets_follow_the_variable(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # What Admin > Variables sets, as a worker's secrets backend reads it (here: the environment one).
    monkeypatch.setenv(f"AIRFLOW_VAR_{VARIABLE.upper()}", "s3://lake/examples/")
    module = _load(name)
    for constant, table in TABLES[name].items():
        assert getattr(module, constant) == f"s3://lake/examples/{table}"
    if name in NEEDS_PARTITIONS and not hasattr(
        importlib.import_module("airflow.sdk"), "CronPartitionTimetable"
    ):
        pytest.skip("this Airflow has no asset partitions: the file defines no DAG")
    dags = [value for value in vars(module).values() if type(value).__name__ == "DAG"]
    assets = [asset for dag in dags for task in dag.tasks for asset in [*task.inlets, *task.outlets]]
    uris = {asset.uri for asset in assets if hasattr(asset, "uri")}
    assert dags and uris and uris <= {f"s3://lake/examples/{table}" for table in TABLES[name].values()}, uris


def test_unset_the_tables_are_where_make_demo_runs_them(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(f"AIRFLOW_VAR_{VARIABLE.upper()}", raising=False)
    events = _load("daily_ingest.py").EVENTS_TABLE
    assert events == str(EXAMPLES.parent / ".demo" / "events")
