"""The Arrow memory pool the core's reads allocate from: data files, the log's JSON, page bodies.

pyarrow's default pool on Linux is mimalloc, which commits its arenas eagerly and marks them for
transparent huge pages; a fresh process that reads a few hundred megabytes then spends most of its
time in the kernel making those pages resident (docs/read-api.md, "Cold processes"). The core's
reads ask for :data:`READ_POOL` instead: the system allocator, unless the process chose a pool
itself with ``ARROW_DEFAULT_MEMORY_POOL`` (then that one). The choice is made once, here, and
passed to each read; the process's default pool (``pa.set_memory_pool``) is left alone, since it
is every other library's too.
"""

from __future__ import annotations

import os

import pyarrow as pa

__all__ = ["READ_POOL", "read_pool"]


def read_pool() -> pa.MemoryPool:
    """The system allocator, or the default pool where ``ARROW_DEFAULT_MEMORY_POOL`` names one."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL", "").strip():
        return pa.default_memory_pool()
    return pa.system_memory_pool()


#: The pool every read of the core allocates from.
READ_POOL = read_pool()
