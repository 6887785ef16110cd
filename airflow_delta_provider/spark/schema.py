"""What Spark must read for a snapshot: the Parquet read schema, the logical columns, and the
Spark version the table's features need.

Delta's ``schemaString`` is Spark's own schema JSON, so the schemas are built from it: the read
schema names physical columns (column mapping) with their ``parquet.field.id`` in ``id`` mode,
and a positional cast renames nested fields back to their logical names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import UnsupportedFeatureError
from airflow_delta_provider.core.protocol import TYPE_CHANGES_KEY, column_mapping_mode, spark_read_fields

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from airflow_delta_provider.core.log import Snapshot

__all__ = ["ReadSchema", "check_spark_version", "read_schema", "read_schema_of", "spark_version"]

#: The Spark SQL setting that matches Parquet columns by field id (column mapping ``id`` mode).
FIELD_ID_READ = "spark.sql.parquet.fieldId.read.enabled"


@dataclass(frozen=True)
class Column:
    """One column of the table, as Spark reads and returns it."""

    logical: str
    #: Spark's JSON of the logical type (every field nullable).
    logical_type: Any
    #: Spark's JSON of the field in the files (physical names at every depth, field ids in id mode).
    physical_field: dict[str, Any]
    partition: bool
    #: Whether ``delta.typeChanges`` is on the column or inside it.
    type_changed: bool = False

    @property
    def physical(self) -> str:
        return str(self.physical_field["name"])

    @property
    def widened(self) -> bool:
        """Whether the column's type was widened (``delta.typeChanges`` on it or inside it)."""
        return self.type_changed

    @property
    def renamed_inside(self) -> bool:
        """Whether nested field names differ between the files and the logical type."""
        return bool(self.logical_type != self.physical_field["type"])


@dataclass(frozen=True)
class ReadSchema:
    """The table's columns in schema order, and the column mapping mode they are read in."""

    columns: tuple[Column, ...]
    mapping_mode: str
    #: The ``schemaString`` fields (parsed) the columns come from.
    fields: tuple[dict[str, Any], ...] = ()

    def data_schema_json(self) -> dict[str, Any]:
        """The Spark schema (JSON) to read the data files with: the data columns, physically named."""
        return {"type": "struct", "fields": [c.physical_field for c in self.columns if not c.partition]}


def read_schema(snapshot: Snapshot) -> ReadSchema:
    """The columns of ``snapshot`` as Spark reads them."""
    fields = snapshot.metadata.schema_json["fields"]
    mode = column_mapping_mode(snapshot.protocol, snapshot.metadata)
    return read_schema_of(fields, mode, snapshot.partition_columns)


def read_schema_of(fields: list[dict[str, Any]], mode: str, partition_columns: Sequence[str]) -> ReadSchema:
    """The columns of a ``schemaString``'s fields (parsed) as Spark reads them in ``mode``."""
    logical, physical = spark_read_fields(fields, mode)
    partitions = set(partition_columns)
    columns = tuple(
        Column(
            f["name"], logical_field["type"], physical_field, f["name"] in partitions, _has_type_changes([f])
        )
        for f, logical_field, physical_field in zip(fields, logical, physical, strict=True)
    )
    return ReadSchema(columns, mode, tuple(fields))


def spark_version(spark: Any) -> tuple[int, int]:
    """``(major, minor)`` of the Spark a session runs (classic or Spark Connect)."""
    match = re.match(r"(\d+)\.(\d+)", str(spark.version))
    if match is None:
        raise ValueError(f"Cannot read the Spark version from {spark.version!r}.")
    return int(match[1]), int(match[2])


def check_spark_version(
    spark: Any, root_uri: str, schema: ReadSchema, *, deletion_vectors: bool, keyed: bool
) -> None:
    """Refuse a Spark too old to read these files exactly, naming what needs the newer one.

    :param deletion_vectors: rows are selected by deletion vectors (``_metadata.row_index``: 3.4).
    :param keyed: rows are matched to their files (``_metadata.file_path``: 3.3).
    :raises UnsupportedFeatureError: naming the feature, the Spark version needed and the one running.
    """
    version = spark_version(spark)
    fields = list(schema.fields)
    needs = [
        ((3, 3), "columnMapping", "Parquet field ids (column mapping in id mode)")
        if schema.mapping_mode == "id"
        else None,
        ((3, 3), "partitions", "the _metadata.file_path column (values from the log per file)")
        if keyed
        else None,
        ((3, 4), "deletionVectors", "the _metadata.row_index column (deletion vectors)")
        if deletion_vectors
        else None,
        ((3, 4), "timestampNtz", "the timestamp_ntz type") if _uses(fields, "timestamp_ntz") else None,
    ]
    for need in needs:
        if need is not None and version < need[0]:
            wanted, feature, what = need
            raise UnsupportedFeatureError(
                f"Reading {root_uri} on Spark needs Spark {wanted[0]}.{wanted[1]} or later for {what}; this "
                f"session runs Spark {spark.version}. Use a newer Spark, or read the table with the core "
                f"(Snapshot.to_pyarrow_table()).",
                feature=feature,
                operation="read",
            )


def _walk_types(delta_type: Any) -> Iterator[Any]:
    yield delta_type
    if isinstance(delta_type, dict):
        kind = delta_type.get("type")
        if kind == "struct":
            for field in delta_type.get("fields", []):
                yield field
                yield from _walk_types(field.get("type"))
        elif kind == "array":
            yield from _walk_types(delta_type.get("elementType"))
        elif kind == "map":
            yield from _walk_types(delta_type.get("keyType"))
            yield from _walk_types(delta_type.get("valueType"))


def _uses(fields: list[Any], type_name: str) -> bool:
    return any(t == type_name for t in _walk_types({"type": "struct", "fields": fields}))


def _has_type_changes(fields: list[Any]) -> bool:
    return any(
        isinstance(t, dict) and TYPE_CHANGES_KEY in (t.get("metadata") or {})
        for t in _walk_types({"type": "struct", "fields": fields})
    )
