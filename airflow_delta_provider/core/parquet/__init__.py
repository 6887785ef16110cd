"""Parquet read below pyarrow's public API, where the log and the statistics need what it does
not hand back: each file's footer in one ranged read (:mod:`.footer`), Parquet's compact Thrift
(:mod:`.thrift`), a row group's offset indexes at once (:mod:`.page_index`), and a column
chunk's values from its pages (:mod:`.page_scan`). The one private pyarrow API the core uses
is in :mod:`.pyarrow_compat`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_delta_provider.core.utils.lazy import lazy_attributes

if TYPE_CHECKING:
    from airflow_delta_provider.core.parquet.footer import (
        LOCAL_TAIL_BYTES,
        LOCAL_TAIL_STEP,
        TAIL_BYTES,
        footer_bytes,
        parse_footer,
        schema_end,
    )
    from airflow_delta_provider.core.parquet.page_index import (
        PageIndexError,
        PageLocations,
        clear_page_locations,
        null_pages,
        page_locations,
    )
    from airflow_delta_provider.core.parquet.page_scan import (
        codec_of,
        decompressed,
        read_leaf_values,
        read_page_header,
    )
    from airflow_delta_provider.core.parquet.thrift import read_struct, varint

_LAZY = {
    "clear_page_locations": "airflow_delta_provider.core.parquet.page_index",
    "codec_of": "airflow_delta_provider.core.parquet.page_scan",
    "decompressed": "airflow_delta_provider.core.parquet.page_scan",
    "footer_bytes": "airflow_delta_provider.core.parquet.footer",
    "LOCAL_TAIL_BYTES": "airflow_delta_provider.core.parquet.footer",
    "LOCAL_TAIL_STEP": "airflow_delta_provider.core.parquet.footer",
    "null_pages": "airflow_delta_provider.core.parquet.page_index",
    "page_locations": "airflow_delta_provider.core.parquet.page_index",
    "PageIndexError": "airflow_delta_provider.core.parquet.page_index",
    "PageLocations": "airflow_delta_provider.core.parquet.page_index",
    "parse_footer": "airflow_delta_provider.core.parquet.footer",
    "read_leaf_values": "airflow_delta_provider.core.parquet.page_scan",
    "read_page_header": "airflow_delta_provider.core.parquet.page_scan",
    "read_struct": "airflow_delta_provider.core.parquet.thrift",
    "schema_end": "airflow_delta_provider.core.parquet.footer",
    "TAIL_BYTES": "airflow_delta_provider.core.parquet.footer",
    "varint": "airflow_delta_provider.core.parquet.thrift",
}

__all__ = [
    "LOCAL_TAIL_BYTES",
    "LOCAL_TAIL_STEP",
    "TAIL_BYTES",
    "PageIndexError",
    "PageLocations",
    "clear_page_locations",
    "codec_of",
    "decompressed",
    "footer_bytes",
    "null_pages",
    "page_locations",
    "parse_footer",
    "read_leaf_values",
    "read_page_header",
    "read_struct",
    "schema_end",
    "varint",
]

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY)
