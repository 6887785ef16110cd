"""What every operator, sensor and trigger that works on one table shares (as the amazon provider's
``AwsBaseHookMixin`` and ``aws_template_fields``): the table arguments, their template fields, the
check that a table is named, and the hook, built in one way and only when first used.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from airflow_delta_provider.utils.secrets import mask_uri, refuse_credentials

if TYPE_CHECKING:
    from airflow_delta_provider.hooks.delta import DeltaTableHook

__all__ = ["TABLE_TEMPLATE_FIELDS", "DeltaTableMixin", "build_hook", "delta_template_fields"]

#: The table arguments every class templates.
TABLE_TEMPLATE_FIELDS = ("table_uri", "delta_conn_id", "storage_conn_id")


def delta_template_fields(*extra: str) -> tuple[str, ...]:
    """The shared table template fields followed by ``extra`` (each once, in order)."""
    return tuple(dict.fromkeys((*TABLE_TEMPLATE_FIELDS, *extra)))


def build_hook(
    *,
    table_uri: str | None = None,
    delta_conn_id: str | None = None,
    storage_conn_id: str | None = None,
    storage_options: Mapping[str, Any] | None = None,
) -> DeltaTableHook:
    """The provider's hook for one table: the one way every class of the Airflow layer builds it.

    No I/O: the hook reads connections and storage when the table is first used.
    """
    from airflow_delta_provider.hooks.delta import DeltaTableHook

    return DeltaTableHook(
        delta_conn_id,
        table_uri=table_uri,
        storage_conn_id=storage_conn_id,
        storage_options=dict(storage_options) if storage_options else None,
    )


class DeltaTableMixin:
    """The table of an operator, sensor or trigger, and its :class:`DeltaTableHook`.

    Subclasses call :meth:`_init_table` from ``__init__`` and use :attr:`hook`.

    :param table_uri: the table location (``s3://bucket/path``, a local path...). (templated)
    :param delta_conn_id: a ``delta`` connection naming the table and its storage. (templated)
    :param storage_conn_id: an Airflow storage connection (aws, google, azure) with the
        credentials for ``table_uri``. (templated)
    :param storage_options: fsspec options for the storage, when no connection holds them.
    """

    #: What the class does with its table, for the error when none is named ("to write" ...).
    table_purpose: ClassVar[str] = "to use"

    table_uri: str | None
    delta_conn_id: str | None
    storage_conn_id: str | None
    storage_options: dict[str, Any] | None

    def _init_table(
        self,
        *,
        table_uri: str | None,
        delta_conn_id: str | None,
        storage_conn_id: str | None,
        storage_options: Mapping[str, Any] | None,
    ) -> None:
        """Check and keep the table arguments (no I/O).

        :raises ValueError: no table is named, the location carries credentials, or
            ``storage_options`` is not a mapping.
        """
        name = type(self).__name__
        if not table_uri and not delta_conn_id:
            raise ValueError(
                f"{name} needs table_uri or delta_conn_id to know which table {self.table_purpose}; "
                "got neither."
            )
        # Also when templated: credentials written into a template are still in the DAG file.
        refuse_credentials(table_uri, argument="table_uri", owner=name)
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise ValueError(
                f"{name}: storage_options must be a mapping of fsspec options, "
                f"got {type(storage_options).__name__}."
            )
        self.table_uri = table_uri
        self.delta_conn_id = delta_conn_id
        self.storage_conn_id = storage_conn_id
        self.storage_options = dict(storage_options) if storage_options else None

    @cached_property
    def hook(self) -> DeltaTableHook:
        """The hook that opens the table (built on first use, never in ``__init__``)."""
        return build_hook(
            table_uri=self.table_uri,
            delta_conn_id=self.delta_conn_id,
            storage_conn_id=self.storage_conn_id,
            storage_options=self.storage_options,
        )

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render as Airflow does, then register any secret a rendered location carries.

        Airflow stores the rendered fields (redacted by its secrets masker) right after rendering;
        the location itself is refused when the hook opens the table.
        """
        # A mixin: the operator (or trigger) base after it in the MRO does the rendering.
        super().render_template_fields(context, jinja_env)  # type: ignore[misc]
        mask_uri(self.table_uri)
