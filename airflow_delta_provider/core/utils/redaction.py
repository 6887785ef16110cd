"""Redaction: the one place that decides what a secret is and hides it.

Credentials reach the provider in a URI's userinfo or query string, in storage options and in
Airflow connections. Every boundary where text leaves the provider passes it through
:func:`redact`, and every place that opens a table takes credentials out of its location with
:func:`split_credentials` first. What counts as a credential (:func:`is_sensitive_option` and the
URI rules) is in docs/connections.md ("Secrets").
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "REDACTED",
    "RedactingFilter",
    "get_logger",
    "has_credentials",
    "is_credential_parameter",
    "is_sensitive_option",
    "location_secrets",
    "masked_options",
    "redact",
    "register_secret",
    "register_secrets_in",
    "secret_parts",
    "sensitive_options",
    "split_credentials",
]

REDACTED = "***"

#: Schemes whose bucket names cannot contain ``@``: any userinfo there is a credential.
_BUCKET_SCHEMES = frozenset({"s3", "s3a", "s3n", "gs", "gcs"})
#: Substrings of option names whose values are secrets (case-insensitive). Deliberately
#: broad: hiding a non-secret costs a log line's detail, missing a secret costs a leak.
_SENSITIVE_WORDS = (
    "key",
    "secret",
    "password",
    "passwd",
    "token",
    "credential",
    "sas",
    "signature",
    "private",
    "auth",
    "session",
    "connection_string",
    "cert",
)
#: Secret values shorter than this are not masked inside text (they would mask every
#: occurrence of common words); Airflow's masker has the same floor.
_MIN_SECRET_LENGTH = 4

#: Query parameters that are credentials although no sensitive word names them: a SAS signature.
_CREDENTIAL_PARAMETERS = frozenset({"sig"})

_SCHEME_PREFIX = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")
#: A ``name=value`` field of a query string or connection string: after ``?``, ``&``, ``;`` (or at
#: the start); the value runs to the next separator, space, quote, bracket or backslash (so JSON
#: and HTML escapes around it stay whole).
_PARAMETER = re.compile(r"(?:^|(?<=[?&;]))(?P<name>[\w.\-]+)=(?P<value>[^&;#\s'\"<>\\]*)")
#: The same, URL-encoded (``%26sig%3D...``).
_ENCODED_PARAMETER = re.compile(
    r"(?i)(?<=%3F|%26|%3B)(?P<name>[\w.\-]+)%3D(?P<value>(?:(?!%26|%3B|%23)[^&;#\s'\"<>\\])*)"
)
_secrets: set[str] = set()
_secrets_lock = threading.Lock()
_secrets_pattern: re.Pattern[str] | None = None


def _userinfo_end(scheme: str, rest: str) -> int:
    """Where the credential userinfo of ``scheme://rest`` ends (the index of its ``@``), or -1."""
    authority_end = len(rest)
    for stop in "/?#":
        position = rest.find(stop)
        if position != -1:
            authority_end = min(authority_end, position)
    authority = rest[:authority_end]
    at = authority.rfind("@")
    if at != -1:
        userinfo = authority[:at]
        if ":" in userinfo or scheme.lower() in _BUCKET_SCHEMES:
            return at
        return -1
    # A secret holding '/' (AWS secrets often do) ends the authority early when it is not
    # percent-encoded: "s3://KEY:abc/def@bucket/t". A bucket name never holds ':', so on a
    # bucket store an authority with ':' followed later by an '@' is userinfo up to that '@'.
    if ":" in authority and scheme.lower() in _BUCKET_SCHEMES:
        at = rest.find("@")
        if at != -1:
            return at
    return -1


def split_credentials(uri: str) -> tuple[str, str | None]:
    """Split a location into (the location without credentials, the credentials removed or None).

    The credentials removed are the credential userinfo and the credential query parameters
    (``sig=...``, ``X-Amz-Signature=...``), joined by ``&``; the location keeps its other query
    parameters. Only a URI (with a scheme) has a query string: a plain path keeps every character.

    :param uri: a table location as a user wrote it.
    """
    match = _SCHEME_PREFIX.match(uri)
    if match is None:
        return uri, None
    rest = uri[match.end() :]
    removed: list[str] = []
    end = _userinfo_end(match["scheme"], rest)
    if end != -1:
        removed.append(rest[:end])
        rest = rest[end + 1 :]
    rest, parameters = _split_query_credentials(rest)
    removed += parameters
    if not removed:
        return uri, None
    return uri[: match.end()] + rest, "&".join(removed)


def _split_query_credentials(rest: str) -> tuple[str, list[str]]:
    """``rest`` (a URI after its scheme) without its credential query fields, and those fields."""
    head, mark, tail = rest.partition("?")
    if not mark:
        return rest, []
    query, hash_mark, fragment = tail.partition("#")
    kept: list[str] = []
    removed: list[str] = []
    for field in re.split("[&;]", query):
        name, equals, _value = field.partition("=")
        (removed if equals and is_credential_parameter(unquote(name)) else kept).append(field)
    if not removed:
        return rest, []
    query = "&".join(f for f in kept if f)
    return head + ("?" + query if query else "") + hash_mark + fragment, removed


def has_credentials(uri: str) -> bool:
    """Whether a location carries credentials (in its userinfo or its query string)."""
    return split_credentials(uri)[1] is not None


def location_secrets(uri: str) -> list[str]:
    """The secret values a location carries, to be hidden wherever they appear: the password of a
    credential userinfo (all of it when it has none) and the value of each credential query
    parameter, each also URL-decoded.

    :param uri: a table location as a user wrote it.
    """
    match = _SCHEME_PREFIX.match(uri)
    if match is None:
        return []
    rest = uri[match.end() :]
    secrets: list[str] = []
    end = _userinfo_end(match["scheme"], rest)
    if end != -1:
        _user, colon, password = rest[:end].partition(":")
        secrets.append(password if colon else rest[:end])
    secrets += [field.partition("=")[2] for field in _split_query_credentials(rest[end + 1 :])[1]]
    return list(dict.fromkeys(v for secret in secrets if secret for v in (secret, unquote(secret))))


def is_sensitive_option(name: str) -> bool:
    """Whether a storage option (or connection extra) of this name holds a credential."""
    lowered = str(name).lower()
    return any(word in lowered for word in _SENSITIVE_WORDS)


def is_credential_parameter(name: str) -> bool:
    """Whether a query-string parameter, or a ``name=value`` field of a connection string, holds a
    credential: a SAS token's ``sig``, or any name an option would be secret under
    (``X-Amz-Signature``, ``X-Amz-Credential``, ``X-Goog-Signature``, ``token``, ``AccountKey`` ...)."""
    return name.lower() in _CREDENTIAL_PARAMETERS or is_sensitive_option(name)


def _masked_parameter(match: re.Match[str]) -> str:
    if not match["value"] or not is_credential_parameter(unquote(match["name"])):
        return match[0]
    return match[0][: match.start("value") - match.start()] + REDACTED


def _redact_parameters(text: str) -> str:
    """``text`` with the value of every credential ``name=value`` that follows ``?``, ``&`` or ``;``
    masked, URL-encoded ones too (a signed URL quoted in another URL's query)."""
    text = _PARAMETER.sub(_masked_parameter, text)
    if "%" in text:
        text = _ENCODED_PARAMETER.sub(_masked_parameter, text)
    return text


def secret_parts(value: str) -> list[str]:
    """The secrets directly inside a credential string, to be hidden on their own too: the fields of
    an Azure connection string named like a credential (``AccountKey=``, ``SharedAccessSignature=``)
    and the credential parameters of a query string or SAS token (``sig=``), also URL-decoded.
    Callers apply it again to each part (a connection string's SAS holds a signature).

    :param value: a secret (connection string, SAS token, key ...).
    """
    found: list[str] = []
    # A connection string: each field's value runs to the next ';' (a SAS inside holds '&' and '=').
    queries = [value]
    if ";" in value:
        queries = []
        for field in value.split(";"):
            name, equals, inner = field.strip().partition("=")
            if equals and inner and is_credential_parameter(name):
                found.append(inner)
            queries.append(inner)
    for query in queries:
        for parameter in re.split("[?&]", query):
            name, equals, inner = parameter.partition("=")
            if equals and inner and is_credential_parameter(unquote(name)):
                found.append(inner)
    parts = dict.fromkeys(variant for part in found for variant in (part, unquote(part)))
    return [part for part in parts if part != value]


def register_secret(value: Any) -> None:
    """Remember a secret so that :func:`redact` masks it wherever it appears in text (and the secrets
    inside it: :func:`secret_parts`)."""
    global _secrets_pattern
    if not isinstance(value, str) or len(value) < _MIN_SECRET_LENGTH:
        return
    for part in secret_parts(value):
        register_secret(part)
    variants = {value, quote(value, safe=""), quote(value, safe="/")}
    with _secrets_lock:
        if variants <= _secrets:
            return
        _secrets.update(variants)
        ordered = sorted(_secrets, key=len, reverse=True)
        _secrets_pattern = re.compile("|".join(re.escape(s) for s in ordered))


def sensitive_options(options: Mapping[str, Any] | None, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """The (dotted name, value) of every option named like a secret that holds a value, nested ones too."""
    for name, value in (options or {}).items():
        if isinstance(value, Mapping):
            yield from sensitive_options(value, f"{prefix}{name}.")
        elif is_sensitive_option(name) and value not in (None, ""):
            yield f"{prefix}{name}", value


def masked_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with the value of every option named like a secret (:func:`is_sensitive_option`,
    nested mappings too) replaced by :data:`REDACTED`: for showing a mapping that may hold
    credentials nobody registered (table properties, a commit's operation parameters)."""
    return {
        name: masked_options(value)
        if isinstance(value, Mapping)
        else REDACTED
        if is_sensitive_option(name) and value not in (None, "")
        else value
        for name, value in options.items()
    }


def register_secrets_in(options: Mapping[str, Any] | None) -> None:
    """Register the values of every sensitive option, nested mappings included."""
    for _name, value in sensitive_options(options):
        register_secret(value if isinstance(value, str) else None)


def _redact_uris(text: str) -> str:
    out: list[str] = []
    position = 0
    for match in _SCHEME_PREFIX.finditer(text):
        start = match.end()
        if start < position:
            continue
        # The URI runs to the next whitespace or quote.
        end = start
        while end < len(text) and not text[end].isspace() and text[end] not in "'\"<>`":
            end += 1
        userinfo_end = _userinfo_end(match["scheme"], text[start:end])
        if userinfo_end == -1:
            continue
        out.append(text[position:start])
        out.append(REDACTED)
        position = start + userinfo_end
    out.append(text[position:])
    return "".join(out)


def redact(text: Any) -> str:
    """``text`` with every registered secret, URI credentials (userinfo) and the values of credential
    parameters (``?sig=``, ``&X-Amz-Signature=``, ``;AccountKey=`` ...) replaced by ``***``.

    :param text: any text (or object, which is turned into text first).
    """
    result = text if isinstance(text, str) else str(text)
    pattern = _secrets_pattern
    if pattern is not None:
        result = pattern.sub(REDACTED, result)
    if "@" in result:
        result = _redact_uris(result)
    if "=" in result or "%3" in result:
        result = _redact_parameters(result)
    return result


class RedactingFilter(logging.Filter):
    """Redacts every record a logger emits: the formatted message goes through :func:`redact`.

    A filter on a logger sees only that logger's own records, so every module of the provider
    takes its logger from :func:`get_logger`. It runs only for records the logger emits.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            # Tracebacks name paths and values too; format them once, redacted.
            text = logging.Formatter().formatException(record.exc_info)
            clean = redact(text)
            if clean == text:
                record.exc_text = text
            else:
                # Handlers that render the exception object themselves (structlog's, so Airflow's
                # task log) ignore exc_text: the redacted traceback goes into the message instead.
                record.msg, record.args = f"{redacted}\n{clean}", ()
                record.exc_info, record.exc_text = None, None
        return True


_FILTER = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the redacting filter attached (once)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
