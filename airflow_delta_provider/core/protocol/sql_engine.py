"""The SQL engine over Arrow that checks already-written rows: DataFusion, an optional extra.

The one module that imports ``datafusion`` (``pip install 'airflow-delta-provider[constraints]'``),
and only when a commit has rows to check: tables without invariants, CHECK constraints or
generated columns never need it. What SQL reaches it is decided in :mod:`.constraints`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import UnsupportedFeatureError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["EngineError", "first_match"]

_TABLE = "delta_rows"


class EngineError(ValueError):
    """The engine could not evaluate a predicate (a type it cannot coerce, a non-boolean result)."""


def _datafusion() -> Any:
    try:
        return importlib.import_module("datafusion")
    except ImportError:
        raise UnsupportedFeatureError(
            "The table has invariants, CHECK constraints or generated columns, and checking the rows of "
            "files committed without Spark needs the DataFusion SQL engine, which is not installed. "
            "Install it with: pip install 'airflow-delta-provider[constraints]' (or write through "
            "DeltaPySparkOperator, which checks the rows with Spark).",
            feature="datafusion (constraint checks)",
            operation="write",
        ) from None


def first_match(rows: pa.Table, predicates: dict[str, str]) -> dict[str, dict[str, Any] | None]:
    """For each named predicate (the engine's SQL over ``rows``' columns), one row where it is TRUE.

    :returns: per name, a sample row as a dict, or None when no row matches.
    :raises EngineError: the engine refused a predicate (the message is the engine's).
    """
    datafusion = _datafusion()
    context = datafusion.SessionContext()
    context.from_arrow(rows, name=_TABLE)
    out: dict[str, dict[str, Any] | None] = {}
    for name, predicate in predicates.items():
        try:
            found = context.sql(f"SELECT * FROM {_TABLE} WHERE {predicate} LIMIT 1").to_arrow_table()
        except Exception as err:  # DataFusion raises plain Exception subclasses for plan errors
            raise EngineError(f"{name}: {str(err).splitlines()[0][:300]}") from None
        out[name] = found.to_pylist()[0] if found.num_rows else None
    return out
