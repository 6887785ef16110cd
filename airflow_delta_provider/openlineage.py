"""OpenLineage for Delta commits (optional: needs ``apache-airflow-providers-openlineage``).

The output dataset is named by OpenLineage's storage conventions (``spec/Naming.md``), as Airflow's
asset converters and OpenLineage-Spark name the table, so lineage from Airflow and from Spark jobs
writing the same table meets in one node; its facets are ``storage``, ``version``, ``schema`` and the
commit's ``outputStatistics``. Nothing here imports OpenLineage at module level.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from airflow_delta_provider.assets.delta import table_asset_uri

if TYPE_CHECKING:
    from collections.abc import Mapping

    import pyarrow as pa

log = logging.getLogger(__name__)

__all__ = ["dataset_naming", "operator_lineage", "output_dataset"]

#: OpenLineage's lifecycle state of the dataset for a commit's operation.
_LIFECYCLE = {
    "CREATE TABLE AS SELECT": "CREATE",
    "CREATE TABLE": "CREATE",
    "CREATE OR REPLACE TABLE": "OVERWRITE",
    "RESTORE": "OVERWRITE",  # the table's content replaced by an earlier version's
}


def dataset_naming(table_uri: str) -> tuple[str, str]:
    """The OpenLineage (namespace, name) of a table, from its storage URI (credentials removed).

    :param table_uri: the table root.
    """
    uri = table_asset_uri(table_uri)
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if scheme == "file":
        return "file", parts.path or "/"
    if scheme in ("s3", "gs"):
        return f"{scheme}://{parts.netloc}", parts.path.lstrip("/")
    if parts.netloc:
        return f"{scheme}://{parts.netloc}", parts.path or "/"
    return scheme, parts.path


def _field_type(arrow_type: pa.DataType) -> str:
    """The Delta name of a column type (``long``, ``decimal(10,2)``, ``struct``...)."""
    from airflow_delta_provider.core.protocol import arrow_type_to_delta

    delta_type = arrow_type_to_delta(arrow_type)
    if isinstance(delta_type, str):
        return delta_type
    return str(delta_type.get("type", "struct"))


def output_dataset(
    table_uri: str,
    *,
    version: int | None,
    schema: pa.Schema | None = None,
    rows: int | None = None,
    size: int | None = None,
    files: int | None = None,
    operation: str | None = None,
    mode: str | None = None,
) -> Any:
    """The OpenLineage ``OutputDataset`` of a commit, or None when OpenLineage is not installed.

    :param table_uri: the table root.
    :param version: the table version holding the commit.
    :param schema: the table schema after the commit.
    :param rows: rows written (``outputStatistics.rowCount``).
    :param size: bytes written.
    :param files: files written.
    :param operation: the commit's operation (``WRITE``, ``CREATE TABLE AS SELECT``...).
    :param mode: ``append`` or ``overwrite`` (an overwrite is lifecycle state OVERWRITE).
    """
    try:
        from openlineage.client.generated.dataset_version_dataset import DatasetVersionDatasetFacet
        from openlineage.client.generated.lifecycle_state_change_dataset import (
            LifecycleStateChange,
            LifecycleStateChangeDatasetFacet,
        )
        from openlineage.client.generated.output_statistics_output_dataset import (
            OutputStatisticsOutputDatasetFacet,
        )
        from openlineage.client.generated.schema_dataset import SchemaDatasetFacet, SchemaDatasetFacetFields
        from openlineage.client.generated.storage_dataset import StorageDatasetFacet
        from openlineage.client.run import OutputDataset
    except ImportError:
        log.debug("openlineage-python is not installed; no lineage for %s.", table_uri)
        return None

    namespace, name = dataset_naming(table_uri)
    facets: dict[str, Any] = {"storage": StorageDatasetFacet(storageLayer="delta", fileFormat="parquet")}
    if version is not None:
        facets["version"] = DatasetVersionDatasetFacet(datasetVersion=str(version))
    if schema is not None:
        facets["schema"] = SchemaDatasetFacet(
            fields=[SchemaDatasetFacetFields(name=f.name, type=_field_type(f.type)) for f in schema]
        )
    state = _LIFECYCLE.get(operation or "") or ("OVERWRITE" if mode == "overwrite" else None)
    if state is not None:
        facets["lifecycleStateChange"] = LifecycleStateChangeDatasetFacet(
            lifecycleStateChange=LifecycleStateChange[state]
        )
    output_facets: dict[str, Any] = {}
    if rows is not None or size is not None or files is not None:
        output_facets["outputStatistics"] = OutputStatisticsOutputDatasetFacet(
            rowCount=rows, size=size, fileCount=files
        )
    return OutputDataset(namespace=namespace, name=name, facets=facets, outputFacets=output_facets)


def operator_lineage(
    table_uri: str, result: Mapping[str, Any] | None, schema: pa.Schema | None = None
) -> Any:
    """The ``OperatorLineage`` of a commit operator's run, or None without the OpenLineage provider.

    A skipped commit (already made by an earlier try) still names the table as the output, at
    the version that holds the commit, with no output statistics: this run wrote nothing.

    :param table_uri: the table root.
    :param result: the operator's XCom result (``version``, ``rows``, ``bytes``, ``files``...);
        None when the operator did not get that far.
    :param schema: the table schema after the commit.
    """
    try:
        from airflow.providers.openlineage.extractors import OperatorLineage
    except ImportError:
        return None
    if result is None:
        dataset = output_dataset(table_uri, version=None, schema=schema)
    elif result.get("skipped"):
        dataset = output_dataset(table_uri, version=result.get("version"), schema=schema)
    else:
        dataset = output_dataset(
            table_uri,
            version=result.get("version"),
            schema=schema,
            rows=result.get("rows"),
            size=result.get("bytes"),
            files=result.get("files"),
            operation=result.get("operation"),
            mode=result.get("mode"),
        )
    return OperatorLineage(outputs=[dataset] if dataset is not None else [])
