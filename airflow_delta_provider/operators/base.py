"""The base of the provider's single-table operators (as the amazon provider's ``AwsBaseOperator``).

.. code-block:: python

    class MyDeltaOperator(DeltaBaseOperator):
        template_fields = delta_template_fields("my_field")

        def execute(self, context):
            return self.hook.get_table().version()
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_delta_provider.hooks.mixins import DeltaTableMixin, delta_template_fields

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["DeltaBaseOperator", "delta_template_fields"]


class DeltaBaseOperator(DeltaTableMixin, BaseOperator):
    """An operator on one Delta table: the table arguments, their template fields and the hook.

    :param table_uri: the table root (``s3://bucket/path``, a local path...). (templated)
    :param delta_conn_id: a ``delta`` connection naming the table and its storage. (templated)
    :param storage_conn_id: an Airflow storage connection (aws, google, azure) for ``table_uri``. (templated)
    :param storage_options: fsspec options for the storage, when no connection holds them.
    """

    template_fields: Sequence[str] = delta_template_fields()

    def __init__(
        self,
        *,
        table_uri: str | None = None,
        delta_conn_id: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self._init_table(
            table_uri=table_uri,
            delta_conn_id=delta_conn_id,
            storage_conn_id=storage_conn_id,
            storage_options=storage_options,
        )
