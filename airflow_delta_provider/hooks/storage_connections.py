"""Airflow storage connections as fsspec filesystem options, for installations without the storage's
Airflow provider.

``aws`` -> s3fs, ``wasb`` / ``adls`` / ``azure_data_lake`` -> adlfs, ``google_cloud_platform`` ->
gcsfs: the one mapping from connection fields to filesystem options, the fields read as those
providers document them (docs/connections.md lists them). The providers pull in large dependency
trees; when one is installed, the hook prefers its filesystem.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from airflow_delta_provider.hooks.connection_fields import (
    StorageConnectionError,
    connection_extra,
    extra_field,
    flag_field,
    json_object,
    object_field,
)
from airflow_delta_provider.utils.secrets import mask_options

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["CONNECTION_PROTOCOLS", "StorageConnectionError", "storage_options_from_connection"]

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
CONNECTION_PROTOCOLS = {
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
    served = CONNECTION_PROTOCOLS.get(conn_type or "")
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
    extra = connection_extra(conn)
    settings: dict[str, Any] = {}
    if conn.login:
        settings["key"] = conn.login
    if conn.password:
        settings["secret"] = conn.password
    client_kwargs: dict[str, Any] = {}
    endpoint = extra.get("endpoint_url")
    if "service_config" in extra:
        example = '{"s3": {"endpoint_url": "..."}}'
        services = object_field(conn, extra["service_config"], "service_config", example)
        s3 = object_field(conn, services["s3"], "service_config.s3", example) if "s3" in services else {}
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
    url = extra_field(conn, "account_url")
    if not url and conn.host and "://" in conn.host:
        url = conn.host
    return str(url).rstrip("/") if url else None


def _azure_account_name(conn: Any, endpoint: str | None) -> str | None:
    """The storage account: the ``account_name`` extra; else, as the Azure provider's filesystem reads
    it, Host's first DNS label (a bare name on ``adls``) or Login; a path-style endpoint (an emulator
    on an IP address) names it in its first path segment."""
    name = extra_field(conn, "account_name")
    if name:
        return str(name)
    tenant = extra_field(conn, "tenant_id")
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
    connection_string = extra_field(conn, "connection_string")
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
    tenant = extra_field(conn, "tenant_id")
    if tenant:
        client_id = extra_field(conn, "client_id") or conn.login
        client_secret = extra_field(conn, "client_secret") or conn.password
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
    key = conn.password or extra_field(conn, "account_key") or extra_field(conn, "shared_access_key")
    sas = extra_field(conn, "sas_token")
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
    if flag_field(conn, "anon"):
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
    provider_only = [name for name in _GCP_PROVIDER_ONLY if extra_field(conn, name)]
    if provider_only:
        raise StorageConnectionError(
            f"Connection {conn_id!r} (google_cloud_platform) sets {', '.join(provider_only)}, which only the "
            f"Google provider resolves: install apache-airflow-providers-google (its filesystem is then "
            f"used for gs://), or give the key as keyfile_dict or key_path."
        )
    keyfile = extra_field(conn, "keyfile_dict")
    key_path = extra_field(conn, "key_path")
    anonymous = flag_field(conn, "is_anonymous")
    given = [name for name, value in (("keyfile_dict", keyfile), ("key_path", key_path)) if value]
    given += ["is_anonymous"] if anonymous else []
    if len(given) > 1:
        raise StorageConnectionError(
            f"Connection {conn_id!r} (google_cloud_platform) sets {' and '.join(given)}; they are mutually "
            f"exclusive (as in the Google provider): keep one."
        )
    options: dict[str, Any] = {}
    scope = str(extra_field(conn, "scope") or _GCP_DEFAULT_SCOPE)
    scopes = [s.strip() for s in scope.split(",") if s.strip()]
    project = extra_field(conn, "project")
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
    endpoint = extra_field(conn, "gcs.endpoint")
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
    info = json_object(
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
