"""What "each partition's rows reach the target exactly as the source holds them" means for the
partitioned example pair (``dags_examples/partitioned_orders.py`` and ``partitioned_totals.py``),
checked the same way in the system and deployed tiers."""

from __future__ import annotations

from collections import Counter

from airflow_delta_provider.core import DeltaTable


def orders_per_day(uri: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(orders, amount) per (day, region) of the orders table, counted from its rows."""
    counts: Counter[tuple[str, str]] = Counter()
    amounts: Counter[tuple[str, str]] = Counter()
    for row in DeltaTable(uri).snapshot().to_pyarrow_table().to_pylist():
        counts[(str(row["ds"]), row["region"])] += 1
        amounts[(str(row["ds"]), row["region"])] += row["amount"]
    return {key: (counts[key], amounts[key]) for key in counts}


def totals_per_day(uri: str) -> dict[tuple[str, str], tuple[int, int]]:
    """(orders, amount) per (day, region) as the totals table holds them."""
    rows = DeltaTable(uri).snapshot().to_pyarrow_table().to_pylist()
    return {(str(r["ds"]), r["region"]): (r["orders"], r["amount"]) for r in rows}
