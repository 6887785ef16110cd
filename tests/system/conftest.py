"""System-test fixtures: a real, migrated SQLite metadata DB and example DAGs loaded from the dags folder.

``dag.test()`` syncs the DAG's bundle (the configured dags folder) to the metadata DB, so the
example files are copied there before they are loaded.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator
    from types import ModuleType

EXAMPLES = Path(__file__).resolve().parents[2] / "dags_examples"
#: The Variable the example DAGs place their tables under, as Airflow's environment backend reads it.
EXAMPLES_ROOT_VARIABLE = "AIRFLOW_VAR_DELTA_EXAMPLES_ROOT"


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A migrated SQLite metadata DB in the test AIRFLOW_HOME (tests/conftest.py isolates it)."""
    from airflow.utils import db

    db.initdb()


@pytest.fixture(scope="module")
def load_example(
    airflow_db: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[str], ModuleType]]:
    """Load ``dags_examples/<name>`` from inside the dags folder, with its tables under a temp demo root.

    The Airflow Variable ``delta_examples_root`` is set for the module through Airflow's
    environment-variable backend (``AIRFLOW_VAR_DELTA_EXAMPLES_ROOT``; the DAG files read it when
    parsed, also by the bundle sync of ``dag.test()``) and restored afterwards; copied files are removed.
    """
    import os

    from airflow.configuration import conf

    demo_root = tmp_path_factory.mktemp("demo")
    saved = {k: os.environ.get(k) for k in (EXAMPLES_ROOT_VARIABLE,)}
    os.environ[EXAMPLES_ROOT_VARIABLE] = str(demo_root)
    dags_folder = Path(conf.get("core", "dags_folder"))
    dags_folder.mkdir(parents=True, exist_ok=True)
    copied: list[Path] = []

    def load(name: str) -> ModuleType:
        target = dags_folder / name
        shutil.copy(EXAMPLES / name, target)
        copied.append(target)
        spec = importlib.util.spec_from_file_location(f"example_{target.stem}_under_test", target)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    yield load
    for path in copied:
        path.unlink(missing_ok=True)
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture
def xcom_value(airflow_db: None) -> Callable[..., Any]:
    """``xcom_value(dag_run, task_id, key="return_value")``: what a task of a finished run pushed,
    read from the metadata DB (None when it pushed nothing)."""

    def read(dag_run: Any, task_id: str, key: str = "return_value") -> Any:
        from airflow.models.xcom import XComModel
        from airflow.utils.session import create_session

        with create_session() as session:
            rows = session.scalars(
                XComModel.get_many(run_id=dag_run.run_id, dag_ids=dag_run.dag_id, task_ids=task_id, key=key)
            ).all()
            return XComModel.deserialize_value(rows[-1]) if rows else None

    return read
