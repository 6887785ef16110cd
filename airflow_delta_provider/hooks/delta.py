"""DeltaTableHook: a core :class:`~airflow_delta_provider.core.DeltaTable` from Airflow connections.

A table is located by a ``delta`` connection or by a URI plus an Airflow storage connection, so
that credentials stay in connections and never reach task arguments, logs or XCom
(docs/connections.md). Storage connections become filesystems through their Airflow provider when
one is installed, else through :mod:`~airflow_delta_provider.hooks.storage_connections`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_delta_provider.core.storage import TablePath, fsspec_options, has_scheme
from airflow_delta_provider.core.utils import sensitive_options
from airflow_delta_provider.hooks.connection_fields import (
    StorageConnectionError,
    connection_extra,
    json_object,
)
from airflow_delta_provider.hooks.storage_connections import storage_options_from_connection
from airflow_delta_provider.utils.secrets import (
    credential_free,
    describe_error,
    mask_connection,
    mask_options,
    mask_secret,
    mask_uri,
    public_location,
    refuse_credentials,
)

if TYPE_CHECKING:
    import fsspec

    from airflow_delta_provider.core.table import DeltaTable
    from airflow_delta_provider.core.transaction import CreateMode

__all__ = [
    "SECRET_OPTIONS_LABEL",
    "SECRET_OPTIONS_PLACEHOLDER",
    "DeltaTableHook",
    "StorageConnectionError",
    "storage_options_from_connection",
]

#: Table schemes -> the scheme Airflow registers filesystems under (adlfs serves ``az://`` as ``abfs``).
_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "local": "file", "az": "abfs"}
#: The label and placeholder of a ``delta`` connection's password field in Airflow's form.
SECRET_OPTIONS_LABEL = "Secret storage options (JSON)"
SECRET_OPTIONS_PLACEHOLDER = '{"secret": "..."}'


class DeltaTableHook(BaseHook):
    """Open Delta tables with credentials from Airflow connections.

    :param delta_conn_id: a ``delta`` connection: ``host`` (or extra ``table_uri``) is the
        table location; extras ``storage_conn_id`` and ``storage_options`` (a JSON object of options
        that are no secret); the password, a JSON object of secret storage options.
    :param table_uri: the table location, instead of (or overriding) the connection's.
    :param storage_conn_id: an Airflow connection holding the storage credentials.
    :param storage_options: fsspec options for the filesystem (merged over the connection's).
    """

    conn_name_attr = "delta_conn_id"
    default_conn_name = "delta_default"
    conn_type = "delta"
    hook_name = "Delta Lake table"

    def __init__(
        self,
        delta_conn_id: str | None = None,
        *,
        table_uri: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise ValueError(
                f"storage_options must be a mapping of fsspec options, got {type(storage_options).__name__}."
            )
        for name, value in (
            ("delta_conn_id", delta_conn_id),
            ("table_uri", table_uri),
            ("storage_conn_id", storage_conn_id),
        ):
            if value is not None and not isinstance(value, str):
                raise ValueError(f"{name} must be a string, got {type(value).__name__}.")
        self.delta_conn_id = delta_conn_id
        self._table_uri = table_uri
        self._storage_conn_id = storage_conn_id
        self._storage_options = dict(storage_options or {})
        #: Secret-named options found in the connection's (clear-text) extra.
        self._exposed_secrets: list[str] = []
        mask_options(self._storage_options)
        mask_uri(table_uri)

    def __repr__(self) -> str:
        # No I/O: the connection's location is shown once it has been read.
        if "_settings" in self.__dict__:
            uri: str | None = self.table_uri
        else:
            uri = credential_free(self._table_uri) if self._table_uri else None
        return f"DeltaTableHook(delta_conn_id={self.delta_conn_id!r}, table_uri={uri!r})"

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        """For Airflow < 3.2, which does not read ``conn-fields`` from provider info."""
        return {
            "hidden_fields": ["schema", "port", "login"],
            "relabeling": {"host": "Table location (URI)", "password": SECRET_OPTIONS_LABEL},
            "placeholders": {
                "host": "s3://bucket/path/to/table",
                "password": SECRET_OPTIONS_PLACEHOLDER,
                "extra": '{"storage_conn_id": "aws_default"}',
            },
        }

    # --- resolution ----------------------------------------------------------------------

    @cached_property
    def _settings(self) -> tuple[str, str | None, dict[str, Any]]:
        uri = self._table_uri
        storage_conn_id = self._storage_conn_id
        options: dict[str, Any] = {}
        if self.delta_conn_id:
            conn = self.get_connection(self.delta_conn_id)
            mask_connection(conn)
            extra = connection_extra(conn)
            uri = uri or self._connection_location(extra, conn.host)
            mask_uri(uri)
            storage_conn_id = storage_conn_id or _text_field(
                extra.get("storage_conn_id"),
                f"The storage_conn_id extra of connection {self.delta_conn_id!r}",
            )
            raw = json_object(
                extra.get("storage_options") or {},
                f"The storage_options extra of connection {self.delta_conn_id!r}",
            )
            mask_options(raw)
            exposed = [name for name, _value in sensitive_options(raw)]
            if exposed:
                self._exposed_secrets = exposed
                self.log.warning(
                    "The storage_options extra of connection %r holds %s, which Airflow shows in clear text "
                    "in its connection form, Extra editor and REST API: move them to the connection's "
                    "password field (a JSON object of secret storage options) or to a storage connection.",
                    self.delta_conn_id,
                    ", ".join(repr(name) for name in exposed),
                )
            options.update(raw)
            if conn.password:
                secret = json_object(
                    conn.password,
                    f"The password of connection {self.delta_conn_id!r} (its secret storage options)",
                    example=SECRET_OPTIONS_PLACEHOLDER,
                )
                for value in _leaf_values(secret):
                    mask_secret(value)
                options.update(secret)
        options.update(self._storage_options)
        if not uri:
            raise ValueError(
                "No table location: pass table_uri, or set the host (or the table_uri extra) of the delta "
                f"connection {self.delta_conn_id!r}."
            )
        return str(uri), storage_conn_id, options

    def _connection_location(self, extra: Mapping[str, Any], host: str | None) -> str | None:
        """The delta connection's table location: a URI or an absolute path, never relative (a
        relative one would name another table on each worker, by its working directory)."""
        uri = _text_field(extra.get("table_uri"), f"The table_uri extra of connection {self.delta_conn_id!r}")
        uri = uri or host
        if uri and not has_scheme(uri) and not os.path.isabs(uri):
            raise StorageConnectionError(
                f"The table location of connection {self.delta_conn_id!r} is a relative path, which each "
                f"worker would resolve against its own working directory: set a URI (s3://bucket/table, "
                f"file:///abs/path) or an absolute path."
            )
        return uri

    @property
    def table_uri(self) -> str:
        """The table's location in the provider's one form: normalised (``file:///abs/path``,
        ``s3://``), without credentials (safe to log, to push to XCom and to use as an asset URI)."""
        if self._table_uri is None and not self.delta_conn_id:
            return ""
        return public_location(self._settings[0])

    def _location(self) -> str:
        """The location to open: refused when it carries credentials (they belong in a connection)."""
        uri = self._settings[0]
        source = (
            "table_uri" if self._table_uri else f"the table location of connection {self.delta_conn_id!r}"
        )
        refuse_credentials(uri, argument=source, owner="DeltaTableHook")
        return uri

    @cached_property
    def filesystem(self) -> fsspec.AbstractFileSystem | None:
        """The fsspec filesystem built from the storage connection, or None (options only).

        When an Airflow provider registers a filesystem for the table's scheme (amazon for ``s3://``,
        microsoft-azure for ``abfs[s]://``, google for ``gs://``), it builds it from the connection, as
        for ``ObjectStoragePath``. Otherwise the hook builds it itself from an ``aws``, ``wasb``,
        ``adls``, ``azure_data_lake`` or ``google_cloud_platform`` connection
        (:func:`storage_options_from_connection`); the storage options are merged over the connection's.
        """
        uri = self._location()
        _, storage_conn_id, options = self._settings
        if not storage_conn_id:
            return None
        table_scheme = TablePath.parse(uri).scheme
        scheme = _SCHEME_ALIASES.get(table_scheme, table_scheme)
        from airflow.sdk.io import get_fs, has_fs

        if has_fs(scheme):
            return get_fs(scheme, storage_conn_id, options or None)
        import fsspec

        conn = self.get_connection(storage_conn_id)
        mask_connection(conn)
        protocol, settings = storage_options_from_connection(conn, table_scheme)
        for name, value in fsspec_options(table_scheme, options).items():
            if isinstance(value, Mapping) and isinstance(settings.get(name), Mapping):
                settings[name] = {**settings[name], **value}
            else:
                settings[name] = value
        return fsspec.filesystem(protocol, **settings)

    def get_table(self) -> DeltaTable:
        """The core table, with the connection's credentials (no I/O yet)."""
        from airflow_delta_provider.config import retention_defaults
        from airflow_delta_provider.core.table import DeltaTable

        uri = self._location()
        options = self._settings[2]
        filesystem = self.filesystem
        return DeltaTable(
            uri,
            None if filesystem is not None else options,
            filesystem=filesystem,
            provider_defaults=retention_defaults(),
        )

    def create_table(
        self,
        schema: Any,
        partition_by: tuple[str, ...] | list[str] = (),
        properties: Mapping[str, Any] | None = None,
        *,
        mode: CreateMode = "error",
        **kwargs: Any,
    ) -> DeltaTable:
        """Create the table (see :meth:`DeltaTable.create`), with the provider's default txn retention;
        the table returned reads the ``[delta]`` defaults as :meth:`get_table`'s does."""
        from airflow_delta_provider.config import provider_table_properties, retention_defaults
        from airflow_delta_provider.core.table import DeltaTable

        uri = self._location()
        options = self._settings[2]
        filesystem = self.filesystem
        return DeltaTable.create(
            uri,
            schema,
            partition_by,
            provider_table_properties(properties),
            mode=mode,
            storage_options=None if filesystem is not None else options,
            filesystem=filesystem,
            provider_defaults=retention_defaults(),
            **kwargs,
        )

    def test_connection(self) -> tuple[bool, str]:
        """Airflow's "Test" button: the table's latest version, or why it cannot be read."""
        try:
            version = self.get_table().version()
        except Exception as err:
            try:
                where = f" at {self.table_uri}"
            except Exception:  # the location itself could not be resolved; the error says why
                where = ""
            return False, f"Cannot read the Delta table{where}: {describe_error(err)}"
        message = f"Delta table at {self.table_uri} is at version {version}."
        if self._exposed_secrets:
            message += (
                f" Warning: the storage_options extra holds {', '.join(self._exposed_secrets)}, shown in "
                f"clear text by Airflow's form and REST API; move them to the password field (secret "
                f"storage options, JSON)."
            )
        return True, message


def _leaf_values(value: Any) -> list[Any]:
    """Every scalar inside a JSON value (the secrets of the password's storage options)."""
    if isinstance(value, Mapping):
        return [leaf for item in value.values() for leaf in _leaf_values(item)]
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in _leaf_values(item)]
    return [value]


def _text_field(value: Any, what: str) -> str | None:
    """A connection's text field: None when unset; refused, without its content, when not text."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or not value.strip():
        got = "a blank string" if isinstance(value, str) else type(value).__name__
        raise StorageConnectionError(f"{what} must be a non-blank string, got {got}.")
    return value
