"""What the Delta view's History shows of commits other engines wrote (plugins/tables.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.plugins.tables import table_history

if TYPE_CHECKING:
    from pathlib import Path


def test_a_delta_rs_append_shows_the_rows_it_added(tmp_path: Path) -> None:
    """delta-rs names its metrics ``num_added_rows`` / ``num_added_files``; the page counts them."""
    import deltalake

    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    deltalake.write_deltalake(
        str(tmp_path), pa.table({"id": pa.array([1, 2, 3, 4], pa.int64())}), mode="append"
    )
    (append, create) = table_history(table)["entries"]
    assert (append["engine"] or "").startswith("delta-rs")
    assert (append["rows_added"], append["files_added"], append["files_removed"]) == (4, 1, 0)
    # The core's CREATE TABLE writes no metrics: counted from its actions, it added nothing.
    assert (create["rows_added"], create["files_added"]) == (0, 0)
