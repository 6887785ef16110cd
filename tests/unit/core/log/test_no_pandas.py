"""The core never imports pandas: a cold load of a table and its file list stays pandas-free.

pyarrow imports pandas the first time it is handed a plain Python value (``pa.array`` of a
list, ``pa.scalar``, a compute call with a Python number, ``pq.read_table``'s dataset
machinery); that import was a fifth of a cold snapshot load. The check runs in a fresh
process, where nothing else has imported pandas yet.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pyarrow as pa
from deltalake import DeltaTable as RsTable
from deltalake import write_deltalake

_PROBE = textwrap.dedent(
    """
    import sys

    from airflow_delta_provider.core import DeltaTable

    snapshot = DeltaTable(sys.argv[1]).snapshot()
    snapshot.protocol, snapshot.metadata, snapshot.app_transaction_version("app")
    files = snapshot.files()
    uris = snapshot.file_uris()
    tombstones = snapshot.tombstones()
    print(files.num_rows, len(uris), tombstones.num_rows, "pandas" in sys.modules)
    """
)


def test_cold_load_and_file_list_do_not_import_pandas(tmp_path, log_writer):
    # A table delta-rs wrote and checkpointed, with commits (adds and removes) after the checkpoint.
    root = tmp_path / "rs"
    write_deltalake(str(root), pa.table({"id": [1], "part": ["a"]}), partition_by=["part"])
    write_deltalake(str(root), pa.table({"id": [2], "part": ["b"]}), mode="append", partition_by=["part"])
    RsTable(str(root)).create_checkpoint()
    write_deltalake(str(root), pa.table({"id": [3], "part": ["c"]}), mode="overwrite", partition_by=["part"])
    write_deltalake(str(root), pa.table({"id": [4], "part": ["d"]}), mode="append", partition_by=["part"])
    # A log of JSON commits only, with a txn, a remove, and absolute and encoded paths.
    log_writer.basic(3)
    log_writer.commit(
        3,
        log_writer.txn("app", 7, 1),
        log_writer.add("a%20b.parquet", tags={"k": "v"}),
        log_writer.remove("f1.parquet", size=10),
        log_writer.add(f"{log_writer.root}/abs.parquet"),
    )
    for table, expected in ((root, "2 2 "), (log_writer.root, "4 4 ")):
        result = subprocess.run(
            [sys.executable, "-c", _PROBE, str(table)], capture_output=True, text=True, check=True
        )
        assert result.stdout.startswith(expected), result.stdout
        assert result.stdout.split()[-1] == "False", f"pandas was imported: {result.stdout}"
