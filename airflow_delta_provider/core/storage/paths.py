"""TablePath: where a table lives, and the one place that turns paths into other paths.

A table location is parsed once into a :class:`TablePath`: its scheme family, its root as
the filesystem path the store uses (no scheme for local and S3 paths), and its URI. Every
conversion the core needs goes through it: joining names under the root, making a
filesystem path a URI again, decoding a data-file path written in the log (relative and
URL-encoded, or an absolute URI), making a path relative to the root, and deciding
whether a path is confined to the root. Credentials never enter a TablePath: a location
that carries them is refused before anything else happens (see
:mod:`~airflow_delta_provider.core.utils.redaction`).
"""

from __future__ import annotations

import os
import posixpath
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import unquote, urlsplit

from airflow_delta_provider.core.errors import InvalidPathError
from airflow_delta_provider.core.utils.redaction import (
    has_credentials,
    location_secrets,
    register_secret,
    split_credentials,
)

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

__all__ = ["LOG_DIR", "TablePath", "escapes_root", "has_scheme", "store_family"]

LOG_DIR = "_delta_log"

_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*:")
S3_SCHEMES = frozenset({"s3", "s3a", "s3n"})
LOCAL_SCHEMES = frozenset({"file", "local"})


def has_scheme(path: str) -> bool:
    """True for ``s3://b/k`` or ``file:/x``; False for plain relative or absolute paths."""
    return bool(_SCHEME_RE.match(path)) and not _is_windows_drive(path)


def _is_windows_drive(path: str) -> bool:
    return len(path) >= 2 and path[1] == ":" and path[0].isalpha() and (len(path) == 2 or path[2] in "/\\")


def escapes_root(path: str) -> bool:
    """Whether a relative path from the log climbs above its base directory (``a/../../x``).

    The path is URL-decoded first, as readers decode it; absolute paths and URIs are not
    relative and return False.
    """
    if ".." not in path and "%" not in path:
        return False
    if has_scheme(path):
        return False
    decoded = unquote(path)
    if decoded.startswith("/"):
        return False
    depth = 0
    for part in decoded.split("/"):
        if part == "..":
            depth -= 1
            if depth < 0:
                return True
        elif part and part != ".":
            depth += 1
    return False


@dataclass(frozen=True, slots=True)
class TablePath:
    """A table root.

    :param scheme: ``file``, ``s3``, ``memory`` or another fsspec protocol.
    :param root: the root as the store's filesystem path: ``/abs`` locally, ``bucket/key``
        on S3, ``/name`` in memory, the protocol-stripped path elsewhere; no trailing slash.
    :param uri: the root as a URI (``file:///abs``, ``s3://bucket/key``, ``memory:///name``).
    """

    scheme: str
    root: str
    uri: str
    _prefix: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_prefix", self.root.rstrip("/") + "/")

    @classmethod
    def parse(cls, location: str) -> TablePath:
        """Parse a table location as a user writes it.

        Plain paths and ``file:`` URIs become absolute local paths; ``s3a``/``s3n`` are S3;
        a trailing slash is dropped. The path of a URI is percent-decoded, whatever its scheme
        (``s3://b/a%20b`` is the key ``a b``, ``file:///x/100%25`` the directory ``100%``), as
        delta-rs and Hadoop decode it; a plain path is taken literally. :attr:`uri` encodes a
        literal ``%`` again (``%25``), so that parsing it gives the same root.

        :raises InvalidPathError: the location is empty, malformed, or carries credentials.
        """
        if not isinstance(location, str) or not location.strip():
            raise InvalidPathError(f"A table location must be a non-empty string, got {location!r}.")
        location = location.strip()
        clean, credentials = split_credentials(location)
        if credentials is not None:
            for secret in location_secrets(location):
                register_secret(secret)
            raise InvalidPathError(
                f"The table location {clean!r} carries credentials (a 'user:password@' part or a "
                f"signed query string such as a SAS token's sig=, removed here), which would end up "
                f"in logs, task arguments and the metadata database. Put them in an Airflow connection "
                f"(storage_conn_id) or in storage_options, and give the location without them."
            )
        if not has_scheme(location):
            root = os.path.abspath(os.path.expanduser(location))
            return cls("file", root, "file://" + _escape_percent(root))
        parts = urlsplit(location)
        scheme = parts.scheme.lower()
        path = unquote(parts.path)
        if scheme in LOCAL_SCHEMES:
            if parts.netloc not in ("", "localhost"):
                raise InvalidPathError(f"Cannot use a file URI with a remote host: {location!r}.")
            root = os.path.abspath(path) if path else "/"
            return cls("file", root, "file://" + _escape_percent(root))
        if scheme in S3_SCHEMES:
            if not parts.netloc:
                raise InvalidPathError(f"An S3 table location needs a bucket: {location!r}.")
            key = path.strip("/")
            root = f"{parts.netloc}/{key}" if key else parts.netloc
            return cls("s3", root, "s3://" + _escape_percent(root))
        if scheme == "memory":
            root = "/" + (parts.netloc + path).strip("/")
            return cls("memory", root, "memory://" + _escape_percent(root))
        query = f"?{parts.query}" if parts.query else ""
        decoded = f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}{query}"
        uri = f"{parts.scheme}://{parts.netloc}{_escape_percent(path.rstrip('/'))}{query}"
        return cls(scheme, _strip_protocol(scheme, decoded), uri)

    def __str__(self) -> str:
        return self.uri

    # --- paths under the root ------------------------------------------------------------

    @property
    def prefix(self) -> str:
        """The root with one trailing slash: every path under the root starts with it."""
        return self._prefix

    @property
    def log_dir(self) -> str:
        return self.join(LOG_DIR)

    def log_path(self, name: str) -> str:
        """The filesystem path of ``_delta_log/<name>``."""
        return f"{self.log_dir}/{name}"

    def join(self, *relative: str) -> str:
        """A filesystem path under the root."""
        return "/".join([self.root.rstrip("/"), *(r.strip("/") for r in relative)])

    def to_uri(self, path: str) -> str:
        """The URI of a filesystem path of this table's store (a literal ``%`` as ``%25``:
        :meth:`parse` gives the path back)."""
        if "%" in path:
            path = _escape_percent(path)
        if self.scheme == "file":
            return "file://" + path
        if self.scheme == "s3":
            return "s3://" + path.lstrip("/")
        if self.scheme == "memory":
            return "memory://" + path
        root = _escape_percent(self.root)
        if path == root or path.startswith(root.rstrip("/") + "/"):
            base = self.uri.split("?", 1)[0] if "?" in self.uri else self.uri
            return base + path[len(root) :]
        return path

    def relative(self, path: str) -> str | None:
        """``path`` relative to the root, or None when it is not below the root."""
        prefix = self.prefix
        return path[len(prefix) :] if path.startswith(prefix) else None

    def contains(self, path: str) -> bool:
        """Whether a filesystem path lies strictly below the root, with no empty, ``.`` or ``..`` segment."""
        prefix = self.prefix
        if not path.startswith(prefix) or len(path) == len(prefix):
            return False
        # String tests rather than a split: VACUUM asks this of every candidate. Framed by
        # slashes, every segment of the relative path sits between two of them.
        framed = "/" + path[len(prefix) :] + "/"
        return "//" not in framed and "/./" not in framed and "/../" not in framed

    def contains_all(self, paths: Sequence[str], excluded: str | None = None) -> bool:
        """Whether :meth:`contains` holds for every path (and none starts with ``excluded``),
        decided on one joined string (VACUUM asks it of a million candidates at once). False
        means "not known to hold": ask :meth:`contains` per path to find the one that fails.
        """
        if not paths:
            return True
        prefix = self.prefix
        text = "\n".join(paths) + "\n"
        if text.count("\n") != len(paths) or _BAD_SEGMENT.search(prefix[:-1] + "\n") is not None:
            return False  # a name with a line break, or an unusual root: path by path
        lines = "\n" + text
        if lines.count("\n" + prefix) != len(paths):
            return False
        if excluded is not None and "\n" + excluded in lines:
            return False
        # Below the root (which ends with "/"), an empty relative path, an empty, "." or ".."
        # segment, or a trailing slash all show as one of these.
        return _BAD_SEGMENT.search(text) is None

    def to_uris(self, paths: Iterable[str]) -> list[str]:
        """:meth:`to_uri` of each path (one string operation each for the usual schemes)."""
        if self.scheme in ("file", "memory"):
            head = "file://" if self.scheme == "file" else "memory://"
            return [head + path if "%" not in path else self.to_uri(path) for path in paths]
        if self.scheme == "s3":
            return [
                "s3://" + path if path[:1] != "/" and "%" not in path else self.to_uri(path) for path in paths
            ]
        return [self.to_uri(path) for path in paths]

    # --- paths written in the log ----------------------------------------------------------

    def decode(self, log_path: str) -> str:
        """The filesystem path of a data-file path as written in the log.

        Relative paths are URL-decoded and joined to the root; absolute URIs are URL-decoded;
        ``file:`` URIs become local paths.

        :raises InvalidPathError: the path is a URI of another store than the table's (an
            ``s3://`` file in a local table's log would otherwise be read as a local path), or
            carries credentials (a signed URL's query string, a ``user:password@``), which no
            data file's path does and which would reach the storage library's own logs.
        """
        if ("?" in log_path or "@" in log_path) and has_credentials(log_path):
            for secret in location_secrets(log_path):
                register_secret(secret)
            raise InvalidPathError(
                f"The log of {self.uri} names the file {split_credentials(log_path)[0][:200]!r} with "
                f"credentials in its path (a signed query string or a user:password@, removed here). A "
                f"data file's path never carries them: the log was not written by a Delta writer."
            )
        if has_scheme(log_path):
            parts = urlsplit(log_path)
            scheme = parts.scheme.lower()
            if store_family(scheme) != store_family(self.scheme):
                raise InvalidPathError(
                    f"The log of {self.uri} names the file {log_path[:200]!r}, on another store "
                    f"({scheme}) than the table's ({self.scheme}). This core reads a table's files only "
                    f"through the table's own store; copy the file under the table root (or read the "
                    f"table with Spark, which opens each store by its own scheme)."
                )
            decoded = unquote(parts.path)
            if scheme in LOCAL_SCHEMES:
                return decoded
            if scheme in S3_SCHEMES:
                return f"{parts.netloc}/{decoded.lstrip('/')}"
            if scheme == "memory":
                return "/" + (parts.netloc + decoded).strip("/")
            return log_path
        decoded = unquote(log_path)
        if decoded.startswith("/"):
            return decoded
        return f"{self.root}/{decoded}"

    def decode_verbatim(self, log_path: str) -> str | None:
        """:meth:`decode` without URL-decoding, for writers that did not encode their paths.

        None when the path holds no ``%`` (both forms are the same) or its scheme is not a
        local or S3 one.
        """
        if "%" not in log_path:
            return None
        if not has_scheme(log_path):
            return log_path if log_path.startswith("/") else f"{self.root.rstrip('/')}/{log_path}"
        parts = urlsplit(log_path)
        scheme = parts.scheme.lower()
        if scheme in LOCAL_SCHEMES:
            return parts.path
        if scheme in S3_SCHEMES:
            return f"{parts.netloc}/{parts.path.lstrip('/')}"
        return None

    def canonical(self, log_path: str) -> str:
        """A data-file path in the one form used to compare log entries.

        Relative paths are URL-decoded; absolute paths and URIs are decoded, stripped of their
        scheme (``file:``, ``s3://``) and made relative when they fall under the root.
        """
        if "%" not in log_path and ":" not in log_path and not log_path.startswith("/"):
            return log_path
        if has_scheme(log_path):
            parts = urlsplit(log_path)
            decoded = unquote(parts.path)
            scheme = parts.scheme.lower()
            if scheme in LOCAL_SCHEMES:
                absolute = decoded
            elif scheme in S3_SCHEMES:
                absolute = f"{parts.netloc}/{decoded.lstrip('/')}"
            else:
                absolute = f"{scheme}://{parts.netloc}{decoded}"
        else:
            absolute = unquote(log_path)
        prefix = self.prefix
        if absolute.startswith(prefix):
            return absolute[len(prefix) :]
        return absolute

    def relative_forms(self, log_path: str) -> list[str]:
        """A log path relative to the root: URL-decoded and (if different) as written; [] outside."""
        if "%" not in log_path and ":" not in log_path and not log_path.startswith("/"):
            return [_normalize(log_path)]
        forms = []
        prefix = self.prefix
        try:
            decoded = self.decode(log_path)
        except InvalidPathError:  # a file on another store is not under the root
            return []
        for fs_path in (decoded, self.decode_verbatim(log_path)):
            if fs_path is not None and fs_path.startswith(prefix):
                forms.append(_normalize(fs_path[len(prefix) :]))
        return list(dict.fromkeys(f for f in forms if f))


#: What :meth:`TablePath.contains_all` looks for in newline-separated paths under a root ending
#: with "/": "//" (an empty segment, or an empty relative path), "/./" and "/../", and "." or
#: ".." or "/" at the end of a path.
_BAD_SEGMENT = re.compile(r"//|/\.\.?(?:/|\n)|/\n")


def store_family(scheme: str) -> str:
    """The store a URI scheme names: ``s3``/``s3a``/``s3n`` one, ``file``/``local`` another, and
    for other schemes the fsspec implementation that serves them (``gs`` and ``gcs`` are one)."""
    scheme = scheme.lower()
    if scheme in S3_SCHEMES:
        return "s3"
    if scheme in LOCAL_SCHEMES:
        return "file"
    import fsspec

    try:
        implementation = fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError):
        return scheme
    return f"{implementation.__module__}.{implementation.__qualname__}"


def _escape_percent(path: str) -> str:
    """A decoded path as the path of a URI: a literal ``%`` becomes ``%25`` (so that decoding
    gives it back); nothing else is escaped, so URIs stay as readable as their paths."""
    return path.replace("%", "%25")


def _normalize(relative: str) -> str:
    return posixpath.normpath(relative) if ("/." in relative or relative.startswith(".")) else relative


def _strip_protocol(scheme: str, uri: str) -> str:
    """The filesystem path fsspec's implementation of ``scheme`` uses for ``uri``."""
    import fsspec

    try:
        implementation = fsspec.get_filesystem_class(scheme)
    except (ImportError, ValueError):
        # Not installed or unknown: opening the store says so; the path is only a name here.
        return uri.split("://", 1)[-1].rstrip("/")
    return str(implementation._strip_protocol(uri)).rstrip("/")
