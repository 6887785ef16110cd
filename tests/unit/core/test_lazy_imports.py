"""What importing one module of the core costs: only the modules it needs.

The package ``__init__`` and every subpackage's face resolve their names on first use (PEP 562),
so a process that imports ``core.log.snapshot`` (a reader) or ``core.storage.paths`` (the Airflow
hook) does not import the writers, OPTIMIZE, VACUUM or, for the hook, pyarrow.
Each check runs in a fresh process, where nothing else has imported them yet.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import airflow_delta_provider.core as core

#: Modules only writers and maintenance need.
OPERATIONS = (
    "maintenance.checkpoint",
    "maintenance.checkpoint.writer",
    "maintenance.cleanup",
    "transaction.create",
    "maintenance.optimize",
    "transaction.commit",
    "maintenance.vacuum",
    "transaction.write",
    "lifecycle.delete",
)


def _modules_after(statement: str) -> set[str]:
    probe = textwrap.dedent(
        f"""
        import sys
        {statement}
        print(" ".join(sorted(sys.modules)))
        """
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(result.stdout.split())


def test_a_reader_imports_no_operation() -> None:
    loaded = _modules_after("import airflow_delta_provider.core.log.snapshot")
    assert "airflow_delta_provider.core.log.replay" in loaded
    assert {f"airflow_delta_provider.core.{m}" for m in OPERATIONS} & loaded == set()


def test_paths_and_errors_import_no_pyarrow() -> None:
    loaded = _modules_after(
        "import airflow_delta_provider.core.storage.paths, airflow_delta_provider.core.storage.options"
    )
    assert "airflow_delta_provider.core.errors" in loaded  # the package's own eager names
    assert {"pyarrow", "numpy", "airflow_delta_provider.core.table.delta_table"} & loaded == set()


def test_the_faces_import_nothing_until_a_name_is_asked_for() -> None:
    folders = (
        "changes",
        "expressions",
        "lifecycle",
        "log",
        "maintenance",
        "protocol",
        "table",
        "transaction",
    )
    loaded = _modules_after("; ".join(f"import airflow_delta_provider.core.{f}" for f in folders))
    assert {"pyarrow", "numpy"} & loaded == set()
    assert {m for m in loaded if m.startswith("airflow_delta_provider.core.log.")} == set()


def test_every_public_name_still_imports_from_the_package() -> None:
    loaded = _modules_after(
        "from airflow_delta_provider.core import *; "
        "from airflow_delta_provider.core import DeltaTable, Snapshot, CommitResult, "
        "CheckpointResult, CleanupResult, VacuumResult, DeltaError"
    )
    assert "airflow_delta_provider.core.table.delta_table" in loaded
    from airflow_delta_provider.core.maintenance.vacuum import VacuumResult
    from airflow_delta_provider.core.table.delta_table import DeltaTable

    assert core.DeltaTable is DeltaTable
    assert core.VacuumResult is VacuumResult
    for name in core.__all__:
        assert getattr(core, name) is not None, name
    assert set(core.__all__) <= set(dir(core))


def test_an_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="no attribute 'DeltaTabel'"):
        _ = core.DeltaTabel
    with pytest.raises(ImportError, match="DeltaTabel"):
        from airflow_delta_provider.core import DeltaTabel  # noqa: F401
