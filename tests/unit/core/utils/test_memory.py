"""The read pool (core/utils/memory.py): the system allocator, unless the process named a pool itself
with ``ARROW_DEFAULT_MEMORY_POOL``; the process's default pool is never changed."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

from airflow_delta_provider.core.utils.memory import read_pool

_SHOW_POOLS = (
    "import pyarrow as pa; from airflow_delta_provider.core.utils.memory import READ_POOL; "
    "print(READ_POOL.backend_name, pa.default_memory_pool().backend_name)"
)


def test_the_system_allocator_when_the_process_chose_no_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    default = pa.default_memory_pool().backend_name
    for unset in (None, "", "  "):
        if unset is None:
            monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
        else:
            monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", unset)
        assert read_pool().backend_name == "system"
    assert pa.default_memory_pool().backend_name == default  # left alone


@pytest.mark.parametrize("chosen", [None, "system", "jemalloc", "mimalloc"])
def test_a_process_that_names_a_pool_reads_from_it(chosen: str | None) -> None:
    """In a fresh process (pyarrow reads the variable once, when it loads): the pool it names, where
    this pyarrow has it; the system allocator where it names none."""
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen is not None:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    shown = subprocess.run(
        [sys.executable, "-c", _SHOW_POOLS], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    read, default = shown
    if chosen is None:
        assert read == "system" and default != "system"
    else:
        assert read == default  # whatever pyarrow made of the name (its fallback if not built in)
        if chosen == "system":
            assert read == "system"
