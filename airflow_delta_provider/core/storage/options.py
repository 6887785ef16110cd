"""Storage options: the keys users bring from delta-rs / object_store, mapped to fsspec's.

delta-rs configures storage with object_store keys (``AWS_REGION``, ``AZURE_STORAGE_ACCOUNT_KEY``),
fsspec filesystems take their own (``client_kwargs={"region_name": ...}``, ``account_key``). Both are
accepted, and this module is the one place that maps them (case-insensitive, with or without the
``aws_`` / ``azure_storage_`` / ``google_`` prefix). A key that is neither is refused with the list
of accepted ones, instead of failing deep inside the filesystem. docs/storage.md lists the keys.
"""

from __future__ import annotations

import inspect
import json
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.errors import StorageError

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["fsspec_options"]

_IGNORED = object()

#: (store family) -> object_store key (upper case, prefix included) -> fsspec option path.
_S3_KEYS: dict[str, tuple[str, ...] | object] = {
    "AWS_ACCESS_KEY_ID": ("key",),
    "AWS_SECRET_ACCESS_KEY": ("secret",),
    "AWS_SESSION_TOKEN": ("token",),
    "AWS_TOKEN": ("token",),
    "AWS_REGION": ("client_kwargs", "region_name"),
    "AWS_DEFAULT_REGION": ("client_kwargs", "region_name"),
    "REGION": ("client_kwargs", "region_name"),
    "REGION_NAME": ("client_kwargs", "region_name"),
    "AWS_ENDPOINT_URL": ("client_kwargs", "endpoint_url"),
    "AWS_ENDPOINT": ("client_kwargs", "endpoint_url"),
    "AWS_PROFILE": ("profile",),
    "AWS_SKIP_SIGNATURE": ("anon",),
    "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": ("config_kwargs", "s3", "addressing_style"),
    "AWS_ALLOW_HTTP": _IGNORED,
    "AWS_S3_ALLOW_UNSAFE_RENAME": _IGNORED,
    "AWS_CONDITIONAL_PUT": _IGNORED,
    "AWS_S3_LOCKING_PROVIDER": _IGNORED,
}
_AZURE_KEYS: dict[str, tuple[str, ...] | object] = {
    "AZURE_STORAGE_ACCOUNT_NAME": ("account_name",),
    "AZURE_STORAGE_ACCOUNT_KEY": ("account_key",),
    "AZURE_STORAGE_ACCESS_KEY": ("account_key",),
    "AZURE_STORAGE_SAS_KEY": ("sas_token",),
    "AZURE_STORAGE_SAS_TOKEN": ("sas_token",),
    "AZURE_STORAGE_CLIENT_ID": ("client_id",),
    "AZURE_CLIENT_ID": ("client_id",),
    "AZURE_STORAGE_CLIENT_SECRET": ("client_secret",),
    "AZURE_CLIENT_SECRET": ("client_secret",),
    "AZURE_STORAGE_TENANT_ID": ("tenant_id",),
    "AZURE_TENANT_ID": ("tenant_id",),
    "AZURE_STORAGE_CONNECTION_STRING": ("connection_string",),
}
_GCS_KEYS: dict[str, tuple[str, ...] | object] = {
    "GOOGLE_SERVICE_ACCOUNT": ("token",),
    "GOOGLE_SERVICE_ACCOUNT_PATH": ("token",),
    "GOOGLE_SERVICE_ACCOUNT_KEY": ("token",),
}
_FAMILIES: dict[str, tuple[dict[str, tuple[str, ...] | object], tuple[str, ...]]] = {
    "s3": (_S3_KEYS, ("AWS_",)),
    "abfs": (_AZURE_KEYS, ("AZURE_STORAGE_", "AZURE_")),
    "abfss": (_AZURE_KEYS, ("AZURE_STORAGE_", "AZURE_")),
    "az": (_AZURE_KEYS, ("AZURE_STORAGE_", "AZURE_")),
    "wasb": (_AZURE_KEYS, ("AZURE_STORAGE_", "AZURE_")),
    "wasbs": (_AZURE_KEYS, ("AZURE_STORAGE_", "AZURE_")),
    "gs": (_GCS_KEYS, ("GOOGLE_",)),
    "gcs": (_GCS_KEYS, ("GOOGLE_",)),
}
_SESSION_OPTIONS = {"s3": ("profile",)}
_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off"})


def _object_store_target(
    keys: Mapping[str, tuple[str, ...] | object], prefixes: tuple[str, ...], name: str
) -> tuple[str, ...] | object | None:
    upper = name.upper()
    if upper in keys:
        return keys[upper]
    for prefix in prefixes:  # object_store accepts keys without their prefix: "region"
        if prefix + upper in keys:
            return keys[prefix + upper]
    return None


def _flag(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise StorageError(f"The storage option {name} must be true or false, got {value!r}.")


def _native_options(scheme: str) -> frozenset[str] | None:
    """The keyword arguments the fsspec filesystem of ``scheme`` takes; None when it takes anything."""
    import fsspec

    try:
        implementation = fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError):
        return None
    names: set[str] = set()
    for cls in implementation.__mro__:
        init = cls.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters
        names.update(
            p
            for p, spec in parameters.items()
            if spec.kind in (spec.KEYWORD_ONLY, spec.POSITIONAL_OR_KEYWORD)
        )
        if not any(spec.kind is spec.VAR_KEYWORD for spec in parameters.values()):
            break
    names.discard("self")
    # fsspec's own instance-cache and listing-cache options, taken by every filesystem, and what
    # the filesystem hands on to its client session (s3fs: botocore's profile).
    names.update({"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths"})
    names.update(_SESSION_OPTIONS.get(scheme, ()))
    return frozenset(names)


def fsspec_options(scheme: str, options: Mapping[str, Any] | None) -> dict[str, Any]:
    """The fsspec options for a store of ``scheme`` from what the user gave.

    :param scheme: the table's scheme (``s3``, ``abfss``, ``gs``, ``file`` ...).
    :param options: storage options in object_store and/or fsspec form.
    :raises StorageError: an unknown key, a key given twice with different values, or a bad value.
    """
    if not options:
        return {}  # nothing to map or check (and no filesystem class to import for it)
    result: dict[str, Any] = {}
    origins: dict[tuple[str, ...], str] = {}
    keys, prefixes = _FAMILIES.get(scheme, ({}, ()))
    native = _native_options(scheme)

    def put(path: tuple[str, ...], value: Any, origin: str) -> None:
        if path in origins and _nested_get(result, path) != value:
            raise StorageError(
                f"The storage options {origins[path]} and {origin} both set {'.'.join(path)} with "
                f"different values; give it once."
            )
        origins[path] = origin
        target = result
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value

    for name, value in (options or {}).items():
        target = _object_store_target(keys, prefixes, str(name))
        if target is _IGNORED:
            continue
        if isinstance(target, tuple):
            if target == ("anon",):
                value = _flag(name, value)
            elif target == ("config_kwargs", "s3", "addressing_style"):
                value = "virtual" if _flag(name, value) else "path"
            elif name.upper() == "GOOGLE_SERVICE_ACCOUNT_KEY" and isinstance(value, str):
                value = json.loads(value)
            put(target, value, repr(name))
            continue
        if native is not None and name not in native:
            accepted = sorted({*native, *keys}) if keys else sorted(native)
            raise StorageError(
                f"Unknown storage option {name!r} for {scheme}:// tables. Accepted: the object_store "
                f"keys delta-rs takes and the options of the fsspec filesystem ({', '.join(accepted)})."
            )
        if isinstance(value, dict) and name in ("client_kwargs", "config_kwargs"):
            for key, item in value.items():
                put((name, str(key)), item, f"{name}[{key!r}]")
            continue
        put((str(name),), value, repr(name))
    return result


def _nested_get(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = data
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value
