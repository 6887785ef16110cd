"""Redaction: the one place that decides what a secret is and hides it.

Credentials reach the provider three ways: the userinfo of a URI
(``s3://KEY:SECRET@bucket/t``), storage options (``secret``, ``AWS_SECRET_ACCESS_KEY``,
``account_key`` ...) and Airflow connections. Every boundary where text leaves the
provider (exception messages, log lines, XCom, asset events, lineage facets, trigger
kwargs and events, ``repr()``) passes it through :func:`redact`, and every place that
opens a table takes credentials out of its location with :func:`split_credentials` before
the location is used at all.

What counts as a credential in a URI: userinfo with a password (``user:password@``) in
any scheme, and any userinfo at all on object stores whose bucket names cannot hold an
``@`` (S3, GCS). A bare ``name@`` on Azure (``abfss://container@account...``) is part of
the location and stays.
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
    "is_sensitive_option",
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

_SCHEME_PREFIX = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://")
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
    """Split a location into (the location without credentials, the credential userinfo or None).

    :param uri: a table location as a user wrote it.
    """
    match = _SCHEME_PREFIX.match(uri)
    if match is None:
        return uri, None
    scheme = match["scheme"]
    rest = uri[match.end() :]
    end = _userinfo_end(scheme, rest)
    if end == -1:
        return uri, None
    return uri[: match.end()] + rest[end + 1 :], rest[:end]


def has_credentials(uri: str) -> bool:
    """Whether a location carries credentials in its userinfo."""
    return split_credentials(uri)[1] is not None


def is_sensitive_option(name: str) -> bool:
    """Whether a storage option (or connection extra) of this name holds a credential."""
    lowered = str(name).lower()
    return any(word in lowered for word in _SENSITIVE_WORDS)


#: The secret fields inside a credential string: an Azure connection string's ``AccountKey=`` /
#: ``SharedAccessSignature=`` and a SAS token's signature ``sig=`` (names compared case-insensitively).
_EMBEDDED_SECRET = re.compile(
    r"(?:^|;)\s*(?:accountkey|sharedaccesssignature)=([^;]+)|(?:^|[;&?])sig=([^;&\s]+)", re.IGNORECASE
)


def secret_parts(value: str) -> list[str]:
    """The secrets directly inside a credential string, to be hidden on their own too: the account
    key and SAS of an Azure connection string, the signature of a SAS token (also URL-decoded).
    Callers apply it again to each part (a connection string's SAS holds a signature).

    :param value: a secret (connection string, SAS token, key ...).
    """
    parts: list[str] = []
    for match in _EMBEDDED_SECRET.finditer(value):
        part = match[1] or match[2]
        parts.append(part)
        decoded = unquote(part)
        if decoded != part:
            parts.append(decoded)
    return parts


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
    """``text`` with URI credentials and every registered secret replaced by ``***``.

    :param text: any text (or object, which is turned into text first).
    """
    result = text if isinstance(text, str) else str(text)
    if "@" in result:
        result = _redact_uris(result)
    pattern = _secrets_pattern
    if pattern is not None:
        result = pattern.sub(REDACTED, result)
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
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True


_FILTER = RedactingFilter()


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with the redacting filter attached (once)."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger
