"""What "each source version consumed exactly once" means, checked the same way in every tier.

A consumer under test appends the source's change rows to its target as they come (a ledger with
``_change_type`` and ``_commit_version``). Replaying the ledger (inserts and post-images count +1,
deletes and pre-images -1) must give exactly the source's rows: a version consumed twice leaves rows
twice (or removed twice), a version missed leaves rows out.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

#: Change types that add a row, and those that take one away.
ADDS = ("insert", "update_postimage")
TAKES = ("delete", "update_preimage")


def replay(rows: list[dict[str, Any]], columns: list[str]) -> Counter[tuple[Any, ...]]:
    """The rows a ledger of changes leaves, with their multiplicities (negative: removed too often)."""
    counts: Counter[tuple[Any, ...]] = Counter()
    for row in rows:
        key = tuple(row[c] for c in columns)
        if row["_change_type"] in ADDS:
            counts[key] += 1
        elif row["_change_type"] in TAKES:
            counts[key] -= 1
        else:
            raise AssertionError(f"unknown change type in the ledger: {row!r}")
    return +counts if all(v >= 0 for v in counts.values()) else counts


def check_exactly_once(source_uri: str, target_uri: str, columns: list[str]) -> Counter[tuple[Any, ...]]:
    """Assert the target's ledger replays to the source's rows (both read by delta-rs, the reference
    reader); returns the replayed rows."""
    import deltalake

    source = Counter(
        tuple(r[c] for c in columns) for r in deltalake.DeltaTable(source_uri).to_pyarrow_table().to_pylist()
    )
    ledger = deltalake.DeltaTable(target_uri).to_pyarrow_table().to_pylist()
    replayed = replay(ledger, columns)
    assert replayed == source, (
        f"replayed ledger {sorted(replayed.items())} != source {sorted(source.items())}"
    )
    return replayed


def consumed_versions(target_uri: str) -> Counter[int]:
    """How many change rows of each source version the target's ledger holds."""
    import deltalake

    table = deltalake.DeltaTable(target_uri).to_pyarrow_table(columns=["_commit_version"])
    return Counter(table.column("_commit_version").to_pylist())
