"""The tokens of a predicate, as Spark SQL's lexer reads them.

One scan of the text (linear in its length): string literals unescaped as Spark unescapes them
(``SparkParserUtils.unescapeSQLString`` with ``spark.sql.parser.escapedStringLiterals=false``),
raw strings, back-quoted names, numbers with their type suffix, named parameter markers
(``:name``). Syntax whose meaning depends on a Spark setting (``"double quoted"`` text) or that
is outside the supported subset (comments, ``?`` markers) is refused with :class:`PredicateError`.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from airflow_delta_provider.core.errors import DeltaError, shorten

__all__ = ["PredicateError", "Token", "tokenize", "unescape_sql_string"]


class PredicateError(DeltaError, ValueError):
    """A predicate that cannot be parsed, does not apply to the table, or whose answer on Spark
    depends on a setting: the message says why and what to write instead.

    :param reason: the class of refusal: ``syntax`` (not in the supported subset, or an unknown
        column), ``literal`` (a literal Spark's parser refuses), ``mismatch`` (types Spark cannot
        compare), ``cast`` (a value Spark's ANSI cast refuses: the query would fail), ``time_zone``
        (the answer depends on ``spark.sql.session.timeZone``), ``zone`` (a zone Spark would read
        differently or drop), ``ansi`` (it depends on ``spark.sql.ansi.enabled`` and the data),
        ``decimal_rounding`` (Spark would round the column's values), ``parameter`` (a parameter
        that is missing, unused or of no SQL type), ``nested`` or ``too_large``.
    :param literal: for ``cast``: the literal as written (or ``:name``).
    :param target: for ``cast``: the type Spark casts it to.
    """

    def __init__(
        self, message: str, *, reason: str = "syntax", literal: str | None = None, target: str | None = None
    ) -> None:
        super().__init__(message)
        self.reason = reason
        self.literal = literal
        self.target = target


class Token(NamedTuple):
    """One token: ``kind`` (``string``, ``quoted``, ``number``, ``op``, ``sign``, ``punct``,
    ``word``, ``marker``, ``binary``), its ``value`` (a string's text unescaped, a name unquoted)
    and where it starts and ends in the text."""

    kind: str
    value: str
    start: int
    end: int


_WHITESPACE = re.compile(r"\s*")
_TOKEN = re.compile(
    r"""
      (?P<raw>[rR]'[^']*')
    | (?P<string>'(?:[^'\\]|\\.|'')*')
    | (?P<dq>[rR]?"(?:[^"\\]|\\.|"")*")
    | (?P<binary>[xX]'[^']*')
    | (?P<quoted>`(?:[^`]|``)+`)
    | (?P<comment>--|/\*)
    | (?P<marker>:(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`))
    | (?P<number>(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?[A-Za-z_]*)
    | (?P<op><=>|<=|>=|<>|!=|==|=|<|>)
    | (?P<sign>[+-])
    | (?P<punct>[(),])
    | (?P<word>[A-Za-z_][A-Za-z0-9_]*)
    """,
    re.VERBOSE | re.DOTALL,
)


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``; adjacent string literals stay apart (the parser joins them).

    :raises PredicateError: a character no token starts with, an unterminated string, or syntax
        this subset refuses (named, with what to write instead).
    """
    tokens: list[Token] = []
    position = _WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]  # \s* always matches
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise _refused(text, position, _unknown(text, position))
        kind = match.lastgroup
        assert kind is not None
        body, end = match.group(kind), match.end()
        if kind in ("dq", "comment"):
            raise _refused(text, position, _REFUSED[kind])
        if kind == "raw":
            tokens.append(Token("string", body[2:-1], position, end))
        elif kind == "string":
            tokens.append(Token("string", unescape_sql_string(body[1:-1]), position, end))
        elif kind == "quoted":
            tokens.append(Token("quoted", body[1:-1].replace("``", "`"), position, end))
        elif kind == "marker":
            name = body[1:]
            name = name[1:-1].replace("``", "`") if name.startswith("`") else name
            tokens.append(Token("marker", name, position, end))
        elif kind == "binary":
            tokens.append(Token("binary", body[2:-1], position, end))
        else:
            tokens.append(Token(kind, body, position, end))
        position = _WHITESPACE.match(text, end).end()  # type: ignore[union-attr]
    return tokens


_REFUSED = {
    "dq": (
        "a double-quoted text is a string or a column name depending on Spark's "
        "spark.sql.ansi.doubleQuotedIdentifiers; write a string in single quotes ('text') and a column "
        "name in back quotes (`name`)"
    ),
    "comment": "comments are not supported in a predicate; remove them",
}


def _unknown(text: str, position: int) -> str:
    char = text[position]
    if char == "'":
        return "the string starting here is not terminated (a quote inside a string is written '' or \\')"
    if char == "?":
        return "positional parameter markers (?) are not supported; name them (:name) and pass parameters="
    if char == ":":
        return "a parameter marker is a colon followed by a name (:name)"
    return f"{char!r} is not part of the supported SQL subset"


def _refused(text: str, position: int, why: str) -> PredicateError:
    return PredicateError(
        f"Cannot parse the predicate {shorten(text, 200)!r} at {shorten(text[position:], 40)!r}: {why}."
    )


# --- Spark's unescaping of a string literal's body ------------------------------------------------

_SIMPLE_ESCAPES = {
    "0": "\x00",
    "'": "'",
    '"': '"',
    "b": "\b",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "Z": "\x1a",
    "\\": "\\",
    "%": "\\%",  # kept escaped: LIKE patterns need them
    "_": "\\_",
}
_ESCAPE = re.compile(
    r"\\(?:u(?P<u>[0-9A-Fa-f]{4})|U(?P<U>[0-9A-Fa-f]{8})|(?P<octal>[01][0-7]{2})|(?P<char>.))|(?P<quote>'')",
    re.DOTALL,
)


def unescape_sql_string(body: str) -> str:
    """A string literal's value from its body (the text between the quotes), as Spark 4 reads it.

    ``''`` is a quote; ``\\t \\n \\r \\b \\0 \\Z`` control characters; ``\\uXXXX`` (UTF-16 units:
    surrogate escapes combine) and ``\\UXXXXXXXX`` code points; ``\\ooo`` octal with a first digit
    0 or 1; ``\\%`` and ``\\_`` keep their backslash; any other escaped character stands for itself.

    :raises PredicateError: the escapes leave a lone surrogate or name no code point (Java would
        write a replacement character).
    """
    if "\\" not in body and "''" not in body:
        return body
    units: list[str] = []
    position = 0
    for match in _ESCAPE.finditer(body):
        units.append(body[position : match.start()])
        position = match.end()
        if match["quote"] is not None:
            units.append("'")
        elif match["u"] is not None:
            units.append(chr(int(match["u"], 16)))
        elif match["U"] is not None:
            units.append(_code_point(int(match["U"], 16), body))
        elif match["octal"] is not None:
            units.append(chr(int(match["octal"], 8)))
        else:
            units.append(_SIMPLE_ESCAPES.get(match["char"], match["char"]))
    units.append(body[position:])
    joined = "".join(units)
    try:
        # \uD83D\uDE00 is one character, as in a Java string; a lone surrogate is not text.
        return joined.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:
        raise PredicateError(
            f"The string literal {shorten(body, 80)!r} holds an unpaired UTF-16 surrogate escape, which "
            f"is no character; escape a character outside the BMP as \\UXXXXXXXX.",
            reason="literal",
        ) from None


def _code_point(value: int, body: str) -> str:
    if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
        raise PredicateError(
            f"The string literal {shorten(body, 80)!r} escapes U+{value:X}, which is no Unicode character.",
            reason="literal",
        )
    return chr(value)
