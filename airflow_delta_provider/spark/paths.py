"""Where Spark (Hadoop filesystems) finds a table's files, and how Spark names them back.

Three conversions, each decided here only: a table URI to the Hadoop URI of its root
(:func:`spark_path`), a data-file path from the log to the path handed to Spark's reader
(:func:`spark_file_paths`), and that path to the value Spark shows in ``_metadata.file_path``
(:func:`metadata_file_path`). The last is a prediction, so readers that key rows by it check every
row against the files they asked for.
"""

from __future__ import annotations

import posixpath
import re
import unicodedata
from typing import TYPE_CHECKING
from urllib.parse import quote, unquote

if TYPE_CHECKING:
    from collections.abc import Iterable

    from airflow_delta_provider.core.storage import TablePath

__all__ = ["metadata_file_path", "same_file_key", "spark_file_paths", "spark_path"]

_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*):(?://(?P<authority>[^/]*))?(?P<path>.*)$")
#: Hadoop's glob characters (``SparkHadoopUtil.isGlobPath``), escaped with a backslash.
_GLOB = re.compile(r"([{}\[\]*?\\])")
#: ASCII characters ``java.net.URI`` leaves unquoted in a path: unreserved, punct, ``/`` and ``@``.
_URI_PATH_SAFE = "_-!.~'()*,;:$&+=/@"


def spark_path(table_uri: str) -> str:
    """Where Spark (Hadoop filesystems) finds a table the core knows by ``table_uri`` (its
    ``TablePath.uri``: ``file:///abs``, ``s3://``, ...).

    Hadoop takes a path string literally (``a%20b`` is a directory of that name), while the URI
    escapes a literal ``%`` as ``%25``: that escape is undone. ``s3://`` becomes Hadoop's
    ``s3a://``; other schemes are used as they are.
    """
    literal = table_uri.replace("%25", "%")
    if literal.startswith("s3://"):
        return "s3a://" + literal[len("s3://") :]
    return literal


def spark_file_paths(table_path: TablePath, log_paths: Iterable[str], spark_root: str) -> list[str]:
    """The strings to hand ``DataFrameReader.parquet`` for data files named as in the log.

    Files under the table root are placed under ``spark_root``; files elsewhere (absolute paths in
    the log) keep their own location, with ``s3://`` as ``s3a://``. Hadoop glob characters are
    escaped, so that each string names exactly one file.
    """
    root = spark_root.rstrip("/")
    out = []
    for log_path in log_paths:
        decoded = table_path.decode(log_path)
        relative = table_path.relative(decoded)
        location = f"{root}/{relative}" if relative is not None else spark_path(table_path.to_uri(decoded))
        out.append(_GLOB.sub(r"\\\1", location))
    return out


def metadata_file_path(spark_file_path: str) -> str:
    """The ``_metadata.file_path`` Spark shows for a file handed to it as ``spark_file_path``.

    :param spark_file_path: a string from :func:`spark_file_paths` (glob escapes included).
    """
    location = re.sub(r"\\(.)", r"\1", spark_file_path)
    match = _URI.match(location)
    if match is None:  # no scheme: the default filesystem's, assumed local
        scheme, authority, path = "file", "", location
    else:
        scheme, authority, path = match["scheme"], match["authority"] or "", match["path"]
    path = re.sub("/+", "/", path)
    if path != "/":
        path = path.rstrip("/")
    quoted = _quote_uri_path(posixpath.normpath(path) if "/." in path else path)
    return f"{scheme}://{authority}{quoted}" if authority else f"{scheme}:{quoted}"


def same_file_key(uri: str, *, encoded: bool) -> tuple[str, str]:
    """``(authority, path)`` of a file URI in any of Hadoop's spellings (``file:/x``, ``file:///x``):
    equal for two spellings of one file.

    :param encoded: the URI is percent-encoded (as Spark reports files), else it is a path as
        handed to Spark (from :func:`spark_file_paths`, glob escapes included).
    """
    if not encoded:
        uri = re.sub(r"\\(.)", r"\1", uri)
    match = _URI.match(uri)
    authority, path = ("", uri) if match is None else (match["authority"] or "", match["path"])
    if encoded:
        path = unquote(path)
    path = re.sub("/+", "/", path)
    return authority, path.rstrip("/") or "/"


def _quote_uri_path(path: str) -> str:
    """``path`` quoted as ``java.net.URI``'s multi-argument constructors quote a path component.

    ASCII characters outside the unreserved and punctuation sets (``%`` included) are
    percent-encoded; other characters stay as they are unless they are spaces or controls.
    """
    out = []
    for char in path:
        if ord(char) < 0x80:
            out.append(quote(char, safe=_URI_PATH_SAFE))
        elif unicodedata.category(char) in ("Zs", "Zl", "Zp") or 0x80 <= ord(char) <= 0x9F:
            out.append(quote(char, safe=""))
        else:
            out.append(char)
    return "".join(out)
