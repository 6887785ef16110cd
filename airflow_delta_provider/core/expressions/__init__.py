"""Predicates and the file statistics that decide which files a predicate needs. A predicate
(DELETE, data retention, ``replace_where``, a read's filter, a snapshot's partition filter:
:mod:`.partition_filter`) is parsed and typed once (:mod:`.predicate`); :mod:`.skipping` keeps
only the files whose partition values and statistics may hold a matching row. The statistics of
new files are computed from their Parquet footers (:mod:`.stats`), each bound written as Delta
writes it (:mod:`.stats_encoding`), and read back for many files at once (:mod:`.stats_parsed`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.expressions.partition_filter import PartitionFilter, slice_filter
    from airflow_delta_provider.core.expressions.predicate import (
        Clause,
        Comparison,
        Junction,
        Predicate,
        PredicateError,
    )
    from airflow_delta_provider.core.expressions.skipping import files_matching, partitions_may_match
    from airflow_delta_provider.core.expressions.stats import FooterInfo, indexed_columns, read_footers
    from airflow_delta_provider.core.expressions.stats_encoding import stats_json
    from airflow_delta_provider.core.expressions.stats_parsed import parse_stats, stats_parsed_type

_LAZY = {
    "Clause": "airflow_delta_provider.core.expressions.predicate",
    "Comparison": "airflow_delta_provider.core.expressions.predicate",
    "files_matching": "airflow_delta_provider.core.expressions.skipping",
    "FooterInfo": "airflow_delta_provider.core.expressions.stats",
    "indexed_columns": "airflow_delta_provider.core.expressions.stats",
    "Junction": "airflow_delta_provider.core.expressions.predicate",
    "parse_stats": "airflow_delta_provider.core.expressions.stats_parsed",
    "PartitionFilter": "airflow_delta_provider.core.expressions.partition_filter",
    "partitions_may_match": "airflow_delta_provider.core.expressions.skipping",
    "Predicate": "airflow_delta_provider.core.expressions.predicate",
    "PredicateError": "airflow_delta_provider.core.expressions.predicate",
    "read_footers": "airflow_delta_provider.core.expressions.stats",
    "slice_filter": "airflow_delta_provider.core.expressions.partition_filter",
    "stats_json": "airflow_delta_provider.core.expressions.stats_encoding",
    "stats_parsed_type": "airflow_delta_provider.core.expressions.stats_parsed",
}

__all__ = [
    "Clause",
    "Comparison",
    "FooterInfo",
    "Junction",
    "PartitionFilter",
    "Predicate",
    "PredicateError",
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
