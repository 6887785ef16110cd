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
XCom, commitInfo or error messages. Without the Airflow provider of the table's storage (amazon,
microsoft-azure, google), the hook builds the filesystem itself from an ``aws``, ``wasb``,
``adls``, ``azure_data_lake`` or ``google_cloud_platform`` connection
(:func:`storage_options_from_connection`, the one mapping from connection fields to s3fs, adlfs
and gcsfs options).

Every secret the hook sees (storage options and connection extras named like secrets,
connection passwords) is registered for redaction (:mod:`airflow_delta_provider.utils.secrets`),
and a location carrying credentials (``s3://KEY:SECRET@bucket/t``) is refused before it is used.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow.sdk import BaseHook

from airflow_delta_provider.core.paths import TablePath
from airflow_delta_provider.core.redaction import sensitive_options
from airflow_delta_provider.core.storage.options import fsspec_options
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
            extra = _extra(conn)
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


def _json_object(value: Any, what: str, *, example: str = '{"endpoint_url": "..."}') -> dict[str, Any]:
    """A connection field holding a JSON object, as a dict.

    The error never shows the field's content, whichever field it is: connection fields hold
    secrets, and a malformed one may be a secret pasted into the wrong place.

    :param value: the field (a JSON string or an already decoded mapping).
    :param what: names the connection and the field, for the error.
    :param example: a JSON object of the kind expected, for the error.
    :raises ValueError: the field is not a JSON object.
    """
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as err:
            raise ValueError(
                f"{what} is not a JSON object such as {example} (invalid JSON at line {err.lineno}, column "
                f"{err.colno}: {err.msg}; its content is not shown, as it may hold a secret)."
            ) from None
    if not isinstance(value, Mapping):
        raise ValueError(f"{what} must be a JSON object such as {example}, got {_json_kind(value)}.")
    return dict(value)


def _json_kind(value: Any) -> str:
    """What kind of JSON value ``value`` is (``null``, ``a string`` ...), never the value itself."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


def _extra(conn: Any) -> Mapping[str, Any]:
    """A connection's extra as a mapping (Airflow decodes it; a JSON list or string is refused).

    :raises StorageConnectionError: naming the connection, never the content.
    """
    extra = conn.extra_dejson
    if extra is None or extra == "":
        return {}
    if not isinstance(extra, Mapping):
        raise StorageConnectionError(
            f"The extra of connection {conn.conn_id!r} ({conn.conn_type}) must be a JSON object, got "
            f"{_json_kind(extra)}."
        )
    return extra


def _object_field(conn: Any, value: Any, name: str, example: str) -> Mapping[str, Any]:
    """``value``, an extra that must be a JSON object when it is set at all (null included).

    :raises StorageConnectionError: naming the connection and the field, never the content.
    """
    if isinstance(value, Mapping):
        return value
    raise StorageConnectionError(
        f"Connection {conn.conn_id!r} ({conn.conn_type}): the {name} extra must be a JSON object such as "
        f"{example}, got {_json_kind(value)}. Fix the connection's extra."
    )


def _leaf_values(value: Any) -> list[Any]:
    """Every scalar inside a JSON value (the secrets of the password's storage options)."""
    if isinstance(value, Mapping):
        return [leaf for item in value.values() for leaf in _leaf_values(item)]
    if isinstance(value, list | tuple):
        return [leaf for item in value for leaf in _leaf_values(item)]
    return [value]


# --- storage connections without their Airflow provider ---------------------------------------------
#
# One place maps an Airflow storage connection to the options of the fsspec filesystem of the table's
# scheme, for installations where no Airflow provider registers a filesystem for that scheme (the
# amazon, microsoft-azure and google providers pull in large dependency trees). The fields are read
# as those providers document them: a plain extra name first, then its ``extra__<conn_type>__`` form.

#: fsspec protocol of each table scheme a storage connection can serve.
_PROTOCOLS = {
    "s3": "s3",
    "s3a": "s3",
    "s3n": "s3",
    "abfs": "abfs",
    "abfss": "abfs",
    "az": "abfs",
    "gs": "gcs",
    "gcs": "gcs",
}
#: Which connection types hold credentials for which fsspec protocol.
_CONNECTION_PROTOCOLS = {
    "aws": "s3",
    "wasb": "abfs",
    "adls": "abfs",
    "azure_data_lake": "abfs",
    "google_cloud_platform": "gcs",
}
#: The table schemes each protocol serves, for errors.
_PROTOCOL_SCHEMES = {"s3": "s3://", "abfs": "abfs://, abfss:// or az://", "gcs": "gs://"}
#: The Google provider's default OAuth scope (``_get_scopes`` in its base hook).
_GCP_DEFAULT_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
#: Google connection fields whose credentials only the Google provider can build.
_GCP_PROVIDER_ONLY = ("key_secret_name", "credential_config_file", "impersonation_chain", "idp_issuer_url")


class StorageConnectionError(ValueError):
    """A storage connection that cannot give credentials for the table's storage (names the connection
    and the field, never a secret)."""


def _field(conn: Any, name: str) -> Any:
    """A connection extra as the providers read it: ``name``, else ``extra__<conn_type>__name``.

    An empty string counts as unset."""
    extra = _extra(conn)
    value = extra.get(name)
    if value is None:
        value = extra.get(f"extra__{conn.conn_type}__{name}")
    return None if value == "" else value


def _flag_field(conn: Any, name: str) -> bool:
    value = _field(conn, name)
    return value is True or str(value).strip().lower() in ("true", "1", "yes", "on")


def storage_options_from_connection(conn: Any, scheme: str) -> tuple[str, dict[str, Any]]:
    """The fsspec protocol and filesystem options for a table of ``scheme`` from a storage connection.

    ``aws`` -> s3fs; ``wasb``, ``adls``, ``azure_data_lake`` -> adlfs; ``google_cloud_platform`` ->
    gcsfs (docs/connections.md lists the fields read). Every secret read is registered for masking.

    :param conn: the Airflow connection (already masked by the caller).
    :param scheme: the table's scheme (``s3``, ``abfss``, ``az``, ``gs`` ...).
    :raises StorageConnectionError: an unknown connection type, one for another storage, a missing or
        contradictory field.
    """
    conn_id, conn_type = conn.conn_id, conn.conn_type
    protocol = _PROTOCOLS.get(scheme)
    served = _CONNECTION_PROTOCOLS.get(conn_type or "")
    if protocol is None:
        raise StorageConnectionError(
            f"No Airflow filesystem is registered for {scheme}:// (connection {conn_id!r}); install the "
            f"Airflow provider for that storage."
        )
    if served is None:
        raise StorageConnectionError(
            f"Connection {conn_id!r} is of type {conn_type!r}, which the provider cannot turn into "
            f"credentials for {scheme}:// without an Airflow provider registering a filesystem for "
            f"{scheme}://. Use an aws, wasb, adls, azure_data_lake or google_cloud_platform connection."
        )
    if served != protocol:
        raise StorageConnectionError(
            f"Connection {conn_id!r} is of type {conn_type!r}, which holds credentials for "
            f"{_PROTOCOL_SCHEMES[served]} tables, not for {scheme}:// tables: use a connection of the "
            f"table's storage."
        )
    if protocol == "s3":
        return protocol, _s3_options(conn)
    if protocol == "abfs":
        return protocol, _azure_options(conn)
    return protocol, _gcs_options(conn)


def _s3_options(conn: Any) -> dict[str, Any]:
    """s3fs options from an ``aws`` connection: login/password, ``region_name``, ``endpoint_url``
    (or the amazon provider's ``service_config.s3.endpoint_url``)."""
    extra = _extra(conn)
    settings: dict[str, Any] = {}
    if conn.login:
        settings["key"] = conn.login
    if conn.password:
        settings["secret"] = conn.password
    client_kwargs: dict[str, Any] = {}
    endpoint = extra.get("endpoint_url")
    if "service_config" in extra:
        example = '{"s3": {"endpoint_url": "..."}}'
        services = _object_field(conn, extra["service_config"], "service_config", example)
        s3 = _object_field(conn, services["s3"], "service_config.s3", example) if "s3" in services else {}
        endpoint = endpoint or s3.get("endpoint_url")
    if endpoint:
        client_kwargs["endpoint_url"] = endpoint
    if extra.get("region_name"):
        client_kwargs["region_name"] = extra["region_name"]
    if client_kwargs:
        settings["client_kwargs"] = client_kwargs
    return settings


def _azure_endpoint(conn: Any) -> str | None:
    """The account's blob endpoint URL when the connection names one: the ``account_url`` extra, or a
    Host holding a URL (the wasb connection's "Account URL"; Azurite: ``http://127.0.0.1:10000/acct``)."""
    url = _field(conn, "account_url")
    if not url and conn.host and "://" in conn.host:
        url = conn.host
    return str(url).rstrip("/") if url else None


def _azure_account_name(conn: Any, endpoint: str | None) -> str | None:
    """The storage account: the ``account_name`` extra; else, as the Azure provider's filesystem reads
    it, Host's first DNS label (a bare name on ``adls``) or Login; a path-style endpoint (an emulator
    on an IP address) names it in its first path segment."""
    name = _field(conn, "account_name")
    if name:
        return str(name)
    tenant = _field(conn, "tenant_id")
    login = None if tenant else conn.login  # with a tenant, login is the client id
    if endpoint:
        parsed = urlparse(endpoint)
        hostname = parsed.hostname or ""
        if hostname.replace(".", "").isdigit() or hostname == "localhost":
            segment = parsed.path.strip("/").split("/", 1)[0]
            return segment or login
        return hostname.split(".", 1)[0] or login
    host = conn.host or ""
    if host and (conn.conn_type == "adls" or "." in host):  # "acct" (adls) or "acct.blob.core.windows.net"
        return host.split(".", 1)[0]
    return login or host or None


def _azure_options(conn: Any) -> dict[str, Any]:
    """adlfs options from a ``wasb`` / ``adls`` / ``azure_data_lake`` connection.

    In order: the ``connection_string`` extra (alone); a service principal (``tenant_id`` extra, Login =
    client id, Password = client secret, or the ``client_id`` / ``client_secret`` extras); an account key
    (Password, or the ``account_key`` / ``shared_access_key`` extras); a ``sas_token`` extra; else the
    ambient Azure identity (managed / workload identity, environment), as adlfs resolves it. A custom
    endpoint (``account_url`` extra or a URL in Host) with a key or SAS becomes a connection string,
    the one form in which adlfs reaches a non-https endpoint such as Azurite.
    """
    conn_id, conn_type = conn.conn_id, conn.conn_type
    connection_string = _field(conn, "connection_string")
    if connection_string:
        return {"connection_string": connection_string}
    endpoint = _azure_endpoint(conn)
    account = _azure_account_name(conn, endpoint)
    if not account:
        raise StorageConnectionError(
            f"Connection {conn_id!r} ({conn_type}) names no storage account: set Login (the account "
            f"name), the account_name extra, an account URL in Host, or the connection_string extra."
        )
    options: dict[str, Any] = {"account_name": account}
    tenant = _field(conn, "tenant_id")
    if tenant:
        client_id = _field(conn, "client_id") or conn.login
        client_secret = _field(conn, "client_secret") or conn.password
        missing = [
            what for what, value in (("client id", client_id), ("client secret", client_secret)) if not value
        ]
        if missing:
            raise StorageConnectionError(
                f"Connection {conn_id!r} ({conn_type}) sets tenant_id (a service principal) but no "
                f"{' and no '.join(missing)}: set Login (client id) and Password (client secret), or the "
                f"client_id / client_secret extras."
            )
        options.update(tenant_id=tenant, client_id=client_id, client_secret=client_secret)
        if endpoint:
            parsed = urlparse(endpoint)
            if parsed.scheme != "https":
                raise StorageConnectionError(
                    f"Connection {conn_id!r} ({conn_type}) combines a service principal with the endpoint "
                    f"{endpoint!r}: Azure AD tokens are sent over https only. Use an https endpoint, or an "
                    f"account key / SAS token."
                )
            options["account_host"] = parsed.netloc + parsed.path
        return options
    key = conn.password or _field(conn, "account_key") or _field(conn, "shared_access_key")
    sas = _field(conn, "sas_token")
    if endpoint and (key or sas):
        parts = [f"DefaultEndpointsProtocol={urlparse(endpoint).scheme or 'https'}", f"AccountName={account}"]
        parts.append(f"AccountKey={key}" if key else f"SharedAccessSignature={str(sas).lstrip('?')}")
        return {"connection_string": ";".join([*parts, f"BlobEndpoint={endpoint};"])}
    if endpoint:
        options["account_host"] = urlparse(endpoint).netloc + urlparse(endpoint).path
    if key:
        options["account_key"] = key
    elif sas:
        options["sas_token"] = sas
    if _flag_field(conn, "anon"):
        options["anon"] = True
    return options


def _gcs_options(conn: Any) -> dict[str, Any]:
    """gcsfs options from a ``google_cloud_platform`` connection.

    Credentials, at most one of: ``keyfile_dict`` (a service account key's JSON), ``key_path`` (its
    file), ``is_anonymous``; none means Google's application default credentials. ``project`` (else
    the key's ``project_id``), ``scope`` (comma separated) and the Google provider's ``gcs.endpoint``
    extra (an emulator such as fake-gcs-server) are read too. Fields only the Google provider can
    resolve (Secret Manager keys, impersonation, workload identity federation) are refused.
    """
    conn_id = conn.conn_id
    provider_only = [name for name in _GCP_PROVIDER_ONLY if _field(conn, name)]
    if provider_only:
        raise StorageConnectionError(
            f"Connection {conn_id!r} (google_cloud_platform) sets {', '.join(provider_only)}, which only the "
            f"Google provider resolves: install apache-airflow-providers-google (its filesystem is then "
            f"used for gs://), or give the key as keyfile_dict or key_path."
        )
    keyfile = _field(conn, "keyfile_dict")
    key_path = _field(conn, "key_path")
    anonymous = _flag_field(conn, "is_anonymous")
    given = [name for name, value in (("keyfile_dict", keyfile), ("key_path", key_path)) if value]
    given += ["is_anonymous"] if anonymous else []
    if len(given) > 1:
        raise StorageConnectionError(
            f"Connection {conn_id!r} (google_cloud_platform) sets {' and '.join(given)}; they are mutually "
            f"exclusive (as in the Google provider): keep one."
        )
    options: dict[str, Any] = {}
    scopes = [s.strip() for s in str(_field(conn, "scope") or _GCP_DEFAULT_SCOPE).split(",") if s.strip()]
    project = _field(conn, "project")
    if anonymous:
        options["token"] = "anon"
    elif keyfile or key_path:
        if keyfile:
            info = _keyfile_info(conn_id, keyfile, "keyfile_dict")
        else:
            info = _keyfile_info(conn_id, _read_key_file(conn_id, str(key_path)), "key_path")
        options["token"] = _service_account(conn_id, "keyfile_dict" if keyfile else "key_path", info, scopes)
        project = project or info.get("project_id")
    if project:
        options["project"] = project
    endpoint = _field(conn, "gcs.endpoint")
    if endpoint:
        options["endpoint_url"] = endpoint
    return options


def _read_key_file(conn_id: str, path: str) -> str:
    """The text of a ``key_path`` file (JSON keys only, as in the Google provider)."""
    refusal = StorageConnectionError(
        f"Connection {conn_id!r} (google_cloud_platform): key_path {path!r} is not a readable JSON "
        f"key file (P12 keys are not supported, as in the Google provider)."
    )
    if not path.endswith(".json"):
        raise refusal
    try:
        with open(path, encoding="utf-8") as source:
            return source.read()
    except OSError:
        raise refusal from None


def _keyfile_info(conn_id: str, keyfile: Any, field: str) -> dict[str, Any]:
    """A service account key as a dict; every secret in it registered for masking."""
    info = _json_object(
        keyfile,
        f"The {field} of connection {conn_id!r}",
        example='{"type": "service_account", ...}',
    )
    mask_options(info)  # private_key, private_key_id ...
    return info


def _service_account(conn_id: str, field: str, info: Mapping[str, Any], scopes: list[str]) -> Any:
    """Service account credentials (google-auth, installed with gcsfs), or why not (never the key)."""
    try:
        from google.oauth2 import service_account
    except ImportError as err:
        raise StorageConnectionError(
            f"Connection {conn_id!r}: reading gs:// tables needs gcsfs: "
            f"pip install 'airflow-delta-provider[gcs]'."
        ) from err
    credentials: Any = service_account.Credentials  # google-auth is untyped
    try:
        return credentials.from_service_account_info(info, scopes=scopes)
    except (ValueError, KeyError, TypeError) as err:
        raise StorageConnectionError(
            f"Connection {conn_id!r} (google_cloud_platform): the {field} is no usable service account key "
            f"({type(err).__name__}; it needs type, client_email, private_key and token_uri)."
        ) from None
