"""Predicates and the file statistics that decide which files a predicate needs. A predicate
(DELETE, data retention, ``replace_where``, a read's filter, a partition filter:
:mod:`.partition_filter`) is parsed (:mod:`.lexer`, :mod:`.predicate`), typed as Spark types it
(:mod:`.literals`, :mod:`.coercion`) and evaluated with Spark's comparisons (:mod:`.normal_form`,
:mod:`.compare`); :mod:`.skipping` keeps the files whose partition values and statistics
(:mod:`.bounds`) may hold a matching row. New files' statistics come from their footers
(:mod:`.stats`, :mod:`.stats_encoding`) and are read back as one struct column (:mod:`.stats_parsed`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.expressions.lexer import PredicateError
    from airflow_delta_provider.core.expressions.normal_form import Clause, Comparison, InList, Junction
    from airflow_delta_provider.core.expressions.partition_filter import (
        PartitionFilter,
        bound_by,
        slice_filter,
    )
    from airflow_delta_provider.core.expressions.predicate import Predicate
    from airflow_delta_provider.core.expressions.skipping import files_matching, partitions_may_match
    from airflow_delta_provider.core.expressions.stats import FooterInfo, indexed_columns, read_footers
    from airflow_delta_provider.core.expressions.stats_encoding import stats_json
    from airflow_delta_provider.core.expressions.stats_parsed import parse_stats, stats_parsed_type

_LAZY = {
    "Clause": "airflow_delta_provider.core.expressions.normal_form",
    "Comparison": "airflow_delta_provider.core.expressions.normal_form",
    "bound_by": "airflow_delta_provider.core.expressions.partition_filter",
    "files_matching": "airflow_delta_provider.core.expressions.skipping",
    "FooterInfo": "airflow_delta_provider.core.expressions.stats",
    "indexed_columns": "airflow_delta_provider.core.expressions.stats",
    "InList": "airflow_delta_provider.core.expressions.normal_form",
    "Junction": "airflow_delta_provider.core.expressions.normal_form",
    "parse_stats": "airflow_delta_provider.core.expressions.stats_parsed",
    "PartitionFilter": "airflow_delta_provider.core.expressions.partition_filter",
    "partitions_may_match": "airflow_delta_provider.core.expressions.skipping",
    "Predicate": "airflow_delta_provider.core.expressions.predicate",
    "PredicateError": "airflow_delta_provider.core.expressions.lexer",
    "read_footers": "airflow_delta_provider.core.expressions.stats",
    "slice_filter": "airflow_delta_provider.core.expressions.partition_filter",
    "stats_json": "airflow_delta_provider.core.expressions.stats_encoding",
    "stats_parsed_type": "airflow_delta_provider.core.expressions.stats_parsed",
}

__all__ = [
    "Clause",
    "Comparison",
    "FooterInfo",
    "InList",
    "Junction",
    "PartitionFilter",
    "Predicate",
    "PredicateError",
    "bound_by",
    "files_matching",
    "indexed_columns",
    "parse_stats",
    "partitions_may_match",
    "read_footers",
    "slice_filter",
    "stats_json",
    "stats_parsed_type",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
