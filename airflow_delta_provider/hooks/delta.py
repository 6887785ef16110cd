"""DeltaTableHook: a core :class:`~airflow_delta_provider.core.DeltaTable` from Airflow connections.

A table is located either by a ``delta`` connection (its location, an optional storage
connection and storage options live in the connection) or by a plain URI plus an
optional Airflow storage connection (``aws``, ``google_cloud_platform``, ``wasb`` ...).

In a ``delta`` connection, secrets go where Airflow masks them: the **Password** field holds the
secret storage options as a JSON object (``{"secret": "..."}``), merged over the extra
``storage_options``, which hold only what is no secret (``endpoint_url``, ``region_name``): Airflow
shows the extra in clear text in its connection form, its Extra editor and its REST API.
Credentials come from the storage connection through Airflow's object-storage
filesystems (``airflow.sdk.io.get_fs``), so they are never part of task arguments, logs,
XCom, commitInfo or error messages. For ``s3://`` without the amazon provider installed,
an ``aws`` connection's key, secret, region and endpoint are handed to s3fs directly.

Every secret the hook sees (storage options and connection extras named like secrets,
connection passwords) is registered for redaction (:mod:`airflow_delta_provider.utils.secrets`),
and a location carrying credentials (``s3://KEY:SECRET@bucket/t``) is refused before it is used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseHook

from airflow_delta_provider.core.paths import TablePath
from airflow_delta_provider.core.redaction import sensitive_options
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

    from airflow_delta_provider.core.create import CreateMode
    from airflow_delta_provider.core.table import DeltaTable

_SCHEME_ALIASES = {"s3a": "s3", "s3n": "s3", "local": "file"}
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
            extra = conn.extra_dejson or {}
            uri = uri or extra.get("table_uri") or conn.host
            mask_uri(uri)
            storage_conn_id = storage_conn_id or extra.get("storage_conn_id")
            raw = _json_object(
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
                secret = _json_object(
                    conn.password,
                    f"The password of connection {self.delta_conn_id!r} (its secret storage options)",
                    secret=True,
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
        """The fsspec filesystem built from the storage connection, or None (options only)."""
        uri = self._location()
        _, storage_conn_id, options = self._settings
        if not storage_conn_id:
            return None
        scheme = TablePath.parse(uri).scheme
        scheme = _SCHEME_ALIASES.get(scheme, scheme)
        from airflow.sdk.io import get_fs

        try:
            return get_fs(scheme, storage_conn_id, options or None)
        except ValueError:
            if scheme != "s3":
                raise ValueError(
                    f"No Airflow filesystem is registered for {scheme}:// (connection {storage_conn_id!r}); "
                    f"install the Airflow provider for that storage."
                ) from None
        conn = self.get_connection(storage_conn_id)
        mask_connection(conn)
        return _s3fs_from_aws_connection(conn, options)

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
        """Create the table (see :meth:`DeltaTable.create`), with the provider's default txn retention."""
        from airflow_delta_provider.config import retention_defaults
        from airflow_delta_provider.core.table import DeltaTable

        props = dict(properties or {})
        txn_retention = retention_defaults().get("delta.setTransactionRetentionDuration")
        if txn_retention:
            props.setdefault("delta.setTransactionRetentionDuration", txn_retention)
        uri = self._location()
        options = self._settings[2]
        filesystem = self.filesystem
        return DeltaTable.create(
            uri,
            schema,
            partition_by,
            props,
            mode=mode,
            storage_options=None if filesystem is not None else options,
            filesystem=filesystem,
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


def _json_object(
    value: Any, what: str, *, secret: bool = False, example: str = '{"endpoint_url": "..."}'
) -> dict[str, Any]:
    """A connection field holding a JSON object, as a dict.

    :param value: the field (a JSON string or an already decoded mapping).
    :param what: names the field, for the error.
    :param secret: never show the value in the error.
    :param example: a JSON object of the kind expected, for the error.
    :raises ValueError: the field is not a JSON object.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            shown = "" if secret else f" (got {value[:40]!r})"
            raise ValueError(f"{what} is not a JSON object such as {example}{shown}.") from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a JSON object, got {type(value).__name__}.")
    return dict(value)


def _leaf_values(value: Any) -> list[Any]:
    """Every scalar inside a JSON value (the secrets of the password's storage options)."""
    if isinstance(value, Mapping):
        return [leaf for item in value.values() for leaf in _leaf_values(item)]
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in _leaf_values(item)]
    return [value]


def _s3fs_from_aws_connection(conn: Any, options: Mapping[str, Any]) -> fsspec.AbstractFileSystem:
    """An s3fs filesystem from an ``aws`` connection, for installations without the amazon provider."""
    import fsspec

    extra = conn.extra_dejson or {}
    settings: dict[str, Any] = {}
    if conn.login:
        settings["key"] = conn.login
    if conn.password:
        settings["secret"] = conn.password
    client_kwargs: dict[str, Any] = {}
    endpoint = extra.get("endpoint_url") or (extra.get("service_config", {}).get("s3", {}) or {}).get(
        "endpoint_url"
    )
    if endpoint:
        client_kwargs["endpoint_url"] = endpoint
    if extra.get("region_name"):
        client_kwargs["region_name"] = extra["region_name"]
    if client_kwargs:
        settings["client_kwargs"] = client_kwargs
    settings.update(options)
    return fsspec.filesystem("s3", **settings)
