"""Secrets at the Airflow boundary: masked where they enter, refused where they would be stored.

What counts as a credential (a URI's ``user:password@`` or ``?sig=``, an option named like a secret) and how
text is redacted is decided once, in :mod:`airflow_delta_provider.core.utils.redaction`; this module
applies those rules where Airflow hands the provider credentials:

* every secret the provider sees (a storage option or connection extra named like a secret, a
  connection password, the password of a URI's userinfo) is registered with the core's
  :func:`~airflow_delta_provider.core.utils.redaction.redact` (so core error messages hide it) and with
  Airflow's secrets masker (so task logs and rendered template fields hide it);
* a table location carrying credentials (userinfo, a signed query string) is refused before it
  is used at all, with an error that says to use a connection: a location is logged, stored as
  an asset URI and handed to libraries that quote it in their errors;
* arguments that are stored in the metadata database (a trigger's) may hold no secret option.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_delta_provider.core.utils import (
    location_secrets,
    redact,
    register_secret,
    secret_parts,
    sensitive_options,
    split_credentials,
)

__all__ = [
    "credential_free",
    "describe_error",
    "mask_connection",
    "mask_options",
    "mask_secret",
    "mask_uri",
    "public_location",
    "refuse_credentials",
    "refuse_secret_options",
]

#: What to do instead of putting a credential into a location or into stored options.
USE_A_CONNECTION = (
    "Keep credentials in an Airflow connection: pass storage_conn_id (an aws, google_cloud_platform "
    "or wasb connection), or name the table by a delta connection (delta_conn_id) whose "
    "storage_conn_id extra holds them."
)


def mask_secret(value: Any) -> None:
    """Hide ``value`` from the core's :func:`redact` and from Airflow's secrets masker."""
    if not isinstance(value, str) or not value:
        return
    for part in secret_parts(value):
        mask_secret(part)
    register_secret(value)
    from airflow.sdk.log import mask_secret as airflow_mask_secret

    airflow_mask_secret(value)


def mask_options(options: Mapping[str, Any] | None) -> None:
    """Register the values of every option named like a secret (storage options, connection extras)."""
    for _name, value in sensitive_options(options):
        mask_secret(value)


def mask_connection(conn: Any) -> None:
    """Register a connection's password and the secret values of its extra."""
    mask_secret(getattr(conn, "password", None))
    extra = getattr(conn, "extra_dejson", None)
    if isinstance(extra, Mapping):
        mask_options(extra)


def mask_uri(uri: Any) -> None:
    """Register the secrets a location carries: its credential userinfo's password (all of it when it
    has none) and its credential query parameters' values (a SAS token's ``sig``...)."""
    if not isinstance(uri, str):
        return
    for secret in location_secrets(uri):
        mask_secret(secret)


def credential_free(uri: str) -> str:
    """The location without its credentials (``s3://KEY:SECRET@b/t`` -> ``s3://b/t``,
    ``abfss://c@a.dfs.core.windows.net/t?sv=...&sig=...`` -> ``...?sv=...``)."""
    return split_credentials(uri)[0]


def public_location(uri: str) -> str:
    """The one form in which the provider shows a table location: in logs, XCom, events, asset URIs.

    Normalised as the core normalises it (a local path becomes ``file:///abs/path``; ``s3a://`` and
    ``s3n://`` become ``s3://``; no trailing slash) and without credentials.

    :param uri: the location as given or rendered.
    """
    from airflow_delta_provider.core.storage import TablePath

    return TablePath.parse(credential_free(uri.strip())).uri


def refuse_credentials(uri: Any, *, argument: str, owner: str) -> None:
    """Refuse a location that carries credentials (after registering them, so no log shows them).

    :param uri: the location as given or rendered.
    :param argument: where it came from (``table_uri``, ``the host of connection 'x'``...).
    :param owner: who refuses (the class name), for the message.
    :raises ValueError: naming the location without its credentials and what to do.
    """
    if not isinstance(uri, str):
        return
    location, userinfo = split_credentials(uri)
    if userinfo is None:
        return
    mask_uri(uri)
    raise ValueError(
        f"{owner}: {argument}={location!r} carries credentials in its location (a user:password@ or "
        f"key@ part before the host, or a signed query string such as a SAS token's sig=, removed "
        f"here). A location is logged, stored as an asset URI and quoted by storage libraries in their "
        f"errors, so it may hold no secret. Remove it from the location. {USE_A_CONNECTION}"
    )


def refuse_secret_options(options: Mapping[str, Any] | None, *, owner: str, reason: str) -> None:
    """Refuse storage options holding secrets where they would be stored (a trigger's arguments).

    Non-secret options (``endpoint_url``, ``region_name``, ``anon``...) pass.

    :param reason: why these options are stored, for the message.
    :raises ValueError: naming the secret options (never their values) and what to do.
    """
    names = []
    for name, value in sensitive_options(options):
        mask_secret(value)
        names.append(name)
    if names:
        raise ValueError(
            f"{owner}: storage_options {', '.join(repr(n) for n in names)} hold credentials, and {reason}. "
            f"{USE_A_CONNECTION} Options that are no secret (endpoint_url, region_name...) may stay in "
            f"storage_options."
        )


def describe_error(err: BaseException) -> str:
    """``"ErrorType: message"`` of an exception, redacted: for reports, events and test_connection."""
    return redact(f"{type(err).__name__}: {err}")
