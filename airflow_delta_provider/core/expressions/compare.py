"""Spark's comparisons on Arrow: one code for rows, partition values and statistics bounds.

Operands are Arrow arrays or expressions already in the comparison's domain
(:func:`~.coercion.to_domain`); results keep SQL's nulls (a NULL operand gives NULL). Floating
values follow Spark's order, not IEEE's: NaN equals NaN and lies above +Infinity, -0.0 equals
0.0. ``IN`` is one set lookup whatever the list's length.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from airflow_delta_provider.core.utils.arrays import booleans

__all__ = ["NEGATED", "compare", "constant", "is_in"]

# Built without pa.scalar, which imports pandas (core/utils/arrays.py): a DELETE's import pays none.
_UNKNOWN, _TRUE, _FALSE = booleans([None, True, False])

#: ``NOT (a op b)`` is ``a NEGATED[op] b`` for a non-null ``a`` (exact under Spark's total order).
NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}

_IEEE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def compare(op: str, operand: Any, value: pa.Scalar) -> Any:
    """``operand op value`` (``=``, ``!=``, ``<``, ``<=``, ``>``, ``>=``) with Spark's semantics.

    :param value: a scalar of the operand's type; a null one makes every row unknown.
    """
    if not value.is_valid:
        return _always(operand, _UNKNOWN)
    if not pa.types.is_floating(value.type):
        return _IEEE[op](operand, value)
    if math.isnan(value.as_py()):
        nan = pc.is_nan(operand)
        return {
            "=": nan,
            "!=": pc.invert(nan),
            "<": pc.invert(nan),
            "<=": pc.or_kleene(nan, pc.invert(nan)),  # true, but NULL stays NULL
            ">": pc.and_kleene(nan, pc.invert(nan)),  # false, but NULL stays NULL
            ">=": nan,
        }[op]
    result = _IEEE[op](operand, value)
    if op in (">", ">="):
        return pc.or_kleene(result, pc.is_nan(operand))  # NaN is above every number
    return result  # =, != and <, <= are IEEE's answers once NaN is the largest value


def is_in(operand: Any, values: pa.Array, *, has_null: bool) -> Any:
    """``operand IN (values..., NULL if has_null)``: TRUE on a match; else NULL when the operand
    or a listed value is NULL; else FALSE.

    :param values: the listed non-null values in the operand's type (floating ones with -0.0
        written as 0.0).
    """
    floating = pa.types.is_floating(values.type)
    if floating:
        nan = pc.is_nan(values)
        with_nan = bool(pc.any(nan).as_py())
        values = values.filter(pc.invert(nan))
        normalised = pc.add(operand, pa.scalar(0.0, values.type))  # -0.0 + 0.0 is 0.0
        found = pc.is_in(normalised, value_set=values)
        if with_nan:
            found = pc.or_kleene(found, pc.is_nan(operand))
    else:
        found = pc.is_in(operand, value_set=values) if len(values) else _always(operand, _FALSE)
    missing = _UNKNOWN if has_null else _FALSE
    return pc.if_else(pc.is_valid(operand), pc.if_else(found, _TRUE, missing), _UNKNOWN)


def constant(operand: Any, value: bool) -> Any:
    """TRUE (or FALSE) for every row of ``operand``, NULL rows included."""
    return _always(operand, _TRUE if value else _FALSE)


def _always(operand: Any, result: pa.Scalar) -> Any:
    """``result`` for every row of ``operand``."""
    return pc.if_else(pc.is_valid(operand), result, result)
