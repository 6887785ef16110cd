"""The table's rules on new rows, applied with the Spark session that produced them.

Invariants, CHECK constraints and generation expressions are Spark SQL, so the PySpark operator
evaluates them with Spark itself, before anything is written, with Delta's semantics; missing
generated and identity columns are computed first, as Delta does. What the constraints are is
decided once, in :mod:`airflow_delta_provider.core.protocol.constraints`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import ConstraintViolationError

if TYPE_CHECKING:
    from airflow_delta_provider.core.protocol import Metadata

__all__ = ["PreparedFrame", "prepare_frame"]


@dataclass(frozen=True)
class PreparedFrame:
    """The DataFrame to write and what the commit must tell the core.

    :param frame: with generated and identity columns added.
    :param identity_generated: identity columns whose values were generated here.
    :param checked: whether any constraint was checked (the core then does not re-read files).
    """

    frame: Any
    identity_generated: tuple[str, ...]
    checked: bool


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _column_types(metadata: Metadata) -> dict[str, Any]:
    fields = metadata.schema_json.get("fields") or []
    return {str(f.get("name")): f.get("type") for f in fields if isinstance(f, dict)}


def prepare_frame(frame: Any, metadata: Metadata, log: Any) -> PreparedFrame:
    """Add generated and identity columns to ``frame`` and check every constraint with Spark.

    :raises ConstraintViolationError: a row breaks a constraint (named, with a sample row), or
        the DataFrame supplies values for a ``GENERATED ALWAYS`` identity column.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    # Here, not at the top, like pyspark: the module is imported in every parse of a DAG file
    # naming the PySpark operator, and core.constraints imports pyarrow that only execution needs.
    from airflow_delta_provider.core.protocol import identity_columns, table_constraints

    constraints = table_constraints(metadata)
    identities = identity_columns(metadata)
    if not constraints and not identities:
        return PreparedFrame(frame, (), checked=False)
    present = {c.lower(): c for c in frame.columns}
    types = _column_types(metadata)
    generated: list[str] = []
    for identity in identities:
        supplied = identity.name.lower() in present
        if supplied and not identity.allow_explicit_insert:
            raise ConstraintViolationError(
                f"The identity column {identity.name!r} is GENERATED ALWAYS: the DataFrame must not supply "
                f"its values (Delta's DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED). Drop the column "
                f"from the DataFrame; the operator generates it."
            )
        if supplied:
            continue
        first = identity.next_values_start()
        order = Window.orderBy(F.monotonically_increasing_id())
        values = F.lit(first) + F.lit(identity.step) * (F.row_number().over(order) - F.lit(1))
        frame = frame.withColumn(identity.name, values.cast("long"))
        generated.append(identity.name)
        log.info("Generating identity column %r from %d in steps of %d.", identity.name, first, identity.step)
    for constraint in constraints:
        column = constraint.column
        if constraint.kind != "generated" or column is None or "." in column:
            continue
        if column.lower() not in present:
            kind = types.get(column)
            value = F.expr(constraint.expression)
            frame = frame.withColumn(column, value.cast(kind) if isinstance(kind, str) else value)
            log.info("Computing generated column %r = %s.", column, constraint.expression)
    broken: dict[str, str] = {}
    for constraint in constraints:
        if constraint.kind == "generated":
            assert constraint.column is not None
            broken[constraint.describe()] = (
                f"NOT ({_quoted(constraint.column)} <=> ({constraint.expression}))"
            )
        else:
            broken[constraint.describe()] = f"NOT coalesce(CAST(({constraint.expression}) AS BOOLEAN), false)"
    if broken:
        # One Spark job when every row is fine; which constraint a bad row breaks is found on it alone.
        sample = frame.filter(F.expr(" OR ".join(f"({b})" for b in broken.values()))).limit(1).collect()
        if sample:
            row = frame.sparkSession.createDataFrame(sample, frame.schema)
            name = next((n for n, b in broken.items() if row.filter(F.expr(b)).count()), next(iter(broken)))
            shown = ", ".join(f"{k} = {v!r}" for k, v in sample[0].asDict().items())
            raise ConstraintViolationError(
                f"The {name} is violated by a row of the DataFrame: {shown}. Nothing was written or "
                f"committed; fix the data (or the constraint) and run the task again."
            )
    log.info("Checked %d constraint(s) on every row with Spark.", len(constraints))
    return PreparedFrame(frame, tuple(generated), checked=True)
