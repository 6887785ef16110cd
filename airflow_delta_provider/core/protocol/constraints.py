"""What a table asks of the rows a commit adds: invariants, CHECK constraints, generated and
identity columns (PROTOCOL.md), and the check of already-written files against them.

The expressions are Spark SQL, evaluated with Delta's semantics (``DeltaInvariantCheckerExec``: a
CHECK or invariant fails on false or NULL). Files committed without Spark are checked here with a
SQL engine over Arrow (:mod:`.sql_engine`), but only expressions whose every part it evaluates as
Spark does (:func:`translate` accepts that subset and refuses the rest, naming the expression).
docs/write-api.md ("Invariants, CHECK constraints, generated columns") has the subset.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from airflow_delta_provider.core.errors import (
    ConstraintViolationError,
    CorruptLogError,
    SchemaError,
    UnsupportedExpressionError,
    shorten,
)
from airflow_delta_provider.core.protocol.column_mapping import logical_file_data, physical_path
from airflow_delta_provider.core.protocol.partitions import parse_partition_value
from airflow_delta_provider.core.protocol.schema import (
    COLUMN_MAPPING_PHYSICAL_NAME_KEY,
    arrow_type_to_delta,
    physical_name,
)
from airflow_delta_provider.core.protocol.sql_engine import EngineError, first_match
from airflow_delta_provider.core.utils.redaction import get_logger

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

    from airflow_delta_provider.core.protocol.actions import Metadata
    from airflow_delta_provider.core.storage import LogStore

__all__ = [
    "Constraint",
    "IdentityColumn",
    "check_rows",
    "checked_identity_schema",
    "identity_columns",
    "merged_identity_schema",
    "table_constraints",
    "translate",
    "violation_predicate",
]

log = get_logger(__name__)

_INVARIANTS = "delta.invariants"
_GENERATION = "delta.generationExpression"
_IDENTITY = "delta.identity."


@dataclass(frozen=True)
class Constraint:
    """One rule on new rows.

    :param name: how Delta names it in errors (the CHECK's name, ``EXPRESSION(<sql>)`` for an
        invariant, ``Generated Column`` for a generation expression).
    :param kind: ``check``, ``invariant`` or ``generated``.
    :param expression: the Spark SQL text.
    :param column: the column an invariant or generation expression belongs to.
    """

    name: str
    kind: str
    expression: str
    column: str | None = None

    def describe(self) -> str:
        expression = shorten(self.expression, 200)
        if self.kind == "check":
            return f"CHECK constraint {self.name} ({expression})"
        if self.kind == "generated":
            return f"generated column {self.column!r} = {expression}"
        return f"invariant of column {self.column!r} ({expression})"


@dataclass(frozen=True)
class IdentityColumn:
    """An identity column's ``delta.identity.*`` metadata."""

    name: str
    start: int
    step: int
    high_water_mark: int | None
    allow_explicit_insert: bool

    def next_values_start(self) -> int:
        """The first value to generate: the start, or the high-water mark plus one step."""
        return self.start if self.high_water_mark is None else self.high_water_mark + self.step

    def rounded(self, value: int) -> int:
        """Delta's ``roundToNext``: ``value`` moved to the next ``start + k * step`` in step direction."""
        offset = value - self.start
        if offset % self.step == 0:
            return value
        # Scala's Long division truncates toward zero; exactly (a float quotient is off for big longs).
        quotient = abs(offset) // abs(self.step) * (1 if (offset < 0) == (self.step < 0) else -1)
        multiple = quotient + 1 if (offset > 0) == (self.step > 0) else quotient
        return self.start + self.step * multiple


def _fields(metadata: Metadata) -> list[dict[str, Any]]:
    try:
        fields = metadata.schema_json.get("fields") or []
    except CorruptLogError:
        return []
    return [f for f in fields if isinstance(f, dict)]


def _walk(fields: Sequence[dict[str, Any]], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    out = []
    for field in fields:
        path = f"{prefix}{field.get('name')}"
        out.append((path, field))
        kind = field.get("type")
        if isinstance(kind, dict) and kind.get("type") == "struct":
            out.extend(_walk(kind.get("fields") or [], f"{path}."))
    return out


def table_constraints(metadata: Metadata) -> list[Constraint]:
    """Every invariant, CHECK constraint and generation expression of the table, in schema order."""
    out: list[Constraint] = []
    for path, field in _walk(_fields(metadata)):
        meta = field.get("metadata") or {}
        raw = meta.get(_INVARIANTS)
        if raw is not None:
            try:
                parsed = json.loads(raw) if isinstance(raw, str) else raw
                expression = parsed["expression"]["expression"]
            except (ValueError, KeyError, TypeError):
                raise SchemaError(
                    f"Column {path!r} has a delta.invariants value that is not "
                    f'{{"expression": {{"expression": "<sql>"}}}}: {str(raw)[:200]!r}.'
                ) from None
            out.append(Constraint(f"EXPRESSION({expression})", "invariant", str(expression), path))
        generation = meta.get(_GENERATION)
        if generation is not None:
            out.append(Constraint("Generated Column", "generated", str(generation), path))
    for key, value in metadata.configuration.items():
        if key.lower().startswith("delta.constraints."):
            out.append(Constraint(key[len("delta.constraints.") :], "check", value))
    return out


def identity_columns(metadata: Metadata) -> list[IdentityColumn]:
    """The table's identity columns (top-level, as Delta allows them)."""
    out = []
    for field in _fields(metadata):
        meta = field.get("metadata") or {}
        if not any(str(k).startswith(_IDENTITY) for k in meta):
            continue
        name = str(field.get("name"))
        try:
            start, step = int(meta[f"{_IDENTITY}start"]), int(meta[f"{_IDENTITY}step"])
            mark = meta.get(f"{_IDENTITY}highWaterMark")
            explicit = meta.get(f"{_IDENTITY}allowExplicitInsert", False)
        except (KeyError, TypeError, ValueError):
            raise SchemaError(
                f"Identity column {name!r} lacks a numeric delta.identity.start or delta.identity.step: "
                f"{ {k: v for k, v in meta.items() if str(k).startswith(_IDENTITY)} }."
            ) from None
        if step == 0:
            raise SchemaError(f"Identity column {name!r} has delta.identity.step 0; the protocol forbids it.")
        allow = explicit if isinstance(explicit, bool) else str(explicit).lower() == "true"
        out.append(IdentityColumn(name, start, step, None if mark is None else int(mark), allow))
    return out


# --- Spark SQL -> the engine's SQL, for the subset both evaluate alike ---------------------------

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
    |(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?[A-Za-z]*|\.\d+)
    |(?P<string>'[^'\\]*'|"[^"\\]*")
    |(?P<quoted>`[^`]+`)
    |(?P<word>[A-Za-z_][A-Za-z0-9_]*)
    |(?P<op><=>|<>|!=|<=|>=|==|=|<|>|\(|\)|,|\.|[-+*/%|&!^~;:'"`\[\]{}]|\S)
    """,
    re.VERBOSE,
)
_KEYWORDS = {
    "and": "AND",
    "or": "OR",
    "not": "NOT",
    "is": "IS",
    "null": "NULL",
    "true": "TRUE",
    "false": "FALSE",
    "in": "IN",
    "between": "BETWEEN",
    "like": "LIKE",
    "case": "CASE",
    "when": "WHEN",
    "then": "THEN",
    "else": "ELSE",
    "end": "END",
    "distinct": "DISTINCT",
    "from": "FROM",
    "cast": "CAST",
    "as": "AS",
    "date": "DATE",
}
#: Spark functions the engine computes identically for the types they accept here.
_FUNCTIONS = {
    "abs": "abs",
    "coalesce": "coalesce",
    "lower": "lower",
    "lcase": "lower",
    "upper": "upper",
    "ucase": "upper",
    "length": "character_length",
    "char_length": "character_length",
    "character_length": "character_length",
}
#: Spark's date-part functions (int results), on DATE / TIMESTAMP_NTZ values.
_DATE_PARTS = {"year": "year", "month": "month", "day": "day", "dayofmonth": "day"}
_OPERATORS = {"<=>": "IS NOT DISTINCT FROM", "==": "=", "<>": "<>", "!=": "<>"}
_COMPARISONS = {"=", "<>", "<", "<=", ">", ">=", "IS NOT DISTINCT FROM"}


def _refuse(expression: str, why: str, what: str) -> UnsupportedExpressionError:
    return UnsupportedExpressionError(
        f"Cannot check {what} on files committed without Spark: {why}. Spark SQL and the core's SQL "
        f"engine could evaluate it differently, so the core does not guess. Write to this table through "
        f"DeltaPySparkOperator (it checks every row with its Spark session), or with Spark and Delta Lake.",
        feature=f"expression {shorten(expression, 200)!r}",
        operation="write",
    )


def translate(constraint: Constraint, schema: pa.Schema) -> str:
    """The engine's SQL for ``constraint``'s expression over a table with ``schema``.

    A struct field (``s.x``, at any depth, resolved case-insensitively as Spark does) is read
    from the engine column :func:`nested_column` names, which :func:`check_rows` adds.

    :raises UnsupportedExpressionError: the expression uses something outside the subset both
        engines evaluate alike; the message names it.
    """
    return _translated(constraint, schema)[0]


def nested_column(path: Sequence[str]) -> str:
    """The engine column holding the struct field at ``path`` (NULL wherever a parent is NULL)."""
    return ".".join(path)


def _translated(constraint: Constraint, schema: pa.Schema) -> tuple[str, set[tuple[str, ...]]]:
    """The engine's SQL, and the struct field paths it reads."""
    text, what = constraint.expression, constraint.describe()
    significant = [t for t in _TOKEN.finditer(text) if t.lastgroup != "space"]
    _check_size(significant, text, what)
    pieces: list[str] = []
    kinds: list[str] = []  # per piece: column:<type kind>, literal:<kind>, a keyword or operator
    referenced: list[pa.Field] = []
    nested: set[tuple[str, ...]] = set()
    date_parts: list[int] = []  # open date-part calls: parenthesis depth inside each
    skip = 0
    for index, token in enumerate(significant):
        if skip:  # the rest of a struct field reference
            skip -= 1
            continue
        group, value = token.lastgroup, token.group()
        following = significant[index + 1].group() if index + 1 < len(significant) else ""
        previous = significant[index - 1].group() if index > 0 else ""
        if group == "number":
            if re.fullmatch(r"\d+L?", value):
                pieces.append(value.rstrip("L"))
                kinds.append("literal:number")
            elif re.fullmatch(r"\d+\.\d*|\.\d+", value):
                pieces.append(value)
                kinds.append("literal:fraction")
            else:
                raise _refuse(text, f"the literal {value} (exponent or type suffix)", what)
        elif group == "string":
            pieces.append("'" + value[1:-1].replace("'", "''") + "'")
            kinds.append("literal:string")
        elif group == "word" and value.lower() in _KEYWORDS:
            keyword = _KEYWORDS[value.lower()]
            if keyword == "DATE" and previous.lower() != "as":
                raise _refuse(text, "a DATE literal", what)
            pieces.append(keyword)
            kinds.append(keyword)
        elif group == "word" and following == "(" and value.lower() in _DATE_PARTS:
            pieces.append(f"CAST(date_part('{_DATE_PARTS[value.lower()]}',")
            kinds.append("function")
            date_parts.append(-1)  # its own "(" comes next and is swallowed
        elif group == "word" and following == "(":
            lowered = value.lower()
            if lowered not in _FUNCTIONS:
                raise _refuse(text, f"the function {value}()", what)
            pieces.append(_FUNCTIONS[lowered])
            kinds.append("function")
        elif group in ("quoted", "word"):
            if previous == ".":
                raise _refuse(text, f"the field reference .{value}", what)
            field, path, skip = _reference(significant, index, schema, text, what)
            if len(path) > 1:
                nested.add(path)
            referenced.append(field)
            pieces.append('"' + nested_column(path).replace('"', '""') + '"')
            kinds.append("column:" + _kind(field.type))
        elif value == "(" and date_parts and date_parts[-1] == -1:
            date_parts[-1] = 0
        elif value in ("(", ")"):
            if date_parts and value == "(":
                date_parts[-1] += 1
            if date_parts and value == ")":
                if date_parts[-1] == 0:
                    date_parts.pop()
                    pieces.append(") AS INT)")
                    kinds.append(")")
                    continue
                date_parts[-1] -= 1
            pieces.append(value)
            kinds.append(value)
        elif value == "," or _OPERATORS.get(value, value) in _COMPARISONS:
            pieces.append(_OPERATORS.get(value, value))
            kinds.append(pieces[-1])
        elif (
            value == "-"
            and re.fullmatch(r"[\d.].*", following)
            and (not kinds or not (kinds[-1].startswith(("column:", "literal:")) or kinds[-1] == ")"))
        ):
            pieces.append("-")  # a negative literal, not a subtraction
            kinds.append("sign")
        elif value in ("+", "-", "*", "/", "%", "|", "&", "^", "~"):
            raise _refuse(text, f"the arithmetic or bitwise operator {value!r}", what)
        else:
            raise _refuse(text, f"{value!r}", what)
    if not pieces:
        raise _refuse(text, "an empty expression", what)
    _check_types(text, what, kinds, referenced)
    return " ".join(pieces), nested


#: The most operators (AND, OR, NOT, comparisons) and the deepest nesting of parentheses an
#: expression may have. The engine parses and plans an expression recursively: a longer chain
#: exhausts the stack of the thread that checks it, which crashes the process instead of raising
#: (500 ORs do on a 512 KiB thread stack); deeper parentheses than its parser's limit of 50 fail.
MAX_OPERATORS = 100
MAX_NESTING = 32
_COUNTED = {"and", "or", "not", "<=>", "<>", "!=", "<=", ">=", "==", "=", "<", ">"}


def _check_size(tokens: Sequence[re.Match[str]], text: str, what: str) -> None:
    operators = depth = deepest = 0
    for token in tokens:
        value = token.group()
        if value.lower() in _COUNTED and token.lastgroup in ("word", "op"):
            operators += 1
        elif value == "(":
            depth += 1
            deepest = max(deepest, depth)
        elif value == ")":
            depth -= 1
    if operators > MAX_OPERATORS or deepest > MAX_NESTING:
        raise _refuse(
            text,
            f"it has {operators} operators and parentheses nested {deepest} deep, more than the "
            f"{MAX_OPERATORS} operators and {MAX_NESTING} levels the engine evaluates safely",
            what,
        )


def _reference(
    tokens: Sequence[re.Match[str]], index: int, schema: pa.Schema, text: str, what: str
) -> tuple[pa.Field, tuple[str, ...], int]:
    """The column, or struct field (``s.x.y``), a name token starts: its field, its path in the
    schema's spelling, and how many more tokens the reference spans."""
    names = [tokens[index].group()]
    end = index + 1
    while (
        end + 1 < len(tokens)
        and tokens[end].group() == "."
        and tokens[end + 1].lastgroup in ("word", "quoted")
    ):
        names.append(tokens[end + 1].group())
        end += 2
    names = [n[1:-1] if n.startswith("`") else n for n in names]
    fields = list(schema)
    path: list[str] = []
    for depth, name in enumerate(names):
        matches = [f for f in fields if f.name.lower() == name.lower()]
        if len(matches) != 1:
            owner = "column of the table" if depth == 0 else f"field of {'.'.join(path)}"
            listed = ", ".join(f.name for f in fields)
            raise _refuse(text, f"{name!r} is not exactly one {owner} ({listed})", what)
        field = matches[0]
        path.append(field.name)
        if depth < len(names) - 1:
            if not pa.types.is_struct(field.type):  # Spark's a.b on an array or map is another thing
                raise _refuse(
                    text, f"{'.'.join(path)}.{names[depth + 1]}: {'.'.join(path)} is not a struct", what
                )
            fields = [field.type.field(i) for i in range(field.type.num_fields)]
    if len(path) > 1 and nested_column(path).lower() in {f.name.lower() for f in schema}:
        raise _refuse(text, f"{nested_column(path)!r} is both a column and a struct field", what)
    return field, tuple(path), end - index - 1


_KINDS = {"timestamp_ltz", "timestamp_ntz", "string", "decimal", "number", "date", "boolean"}


def _kind(arrow_type: pa.DataType) -> str:
    if pa.types.is_timestamp(arrow_type):
        return "timestamp_ltz" if arrow_type.tz is not None else "timestamp_ntz"
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string"
    if pa.types.is_decimal(arrow_type):
        return "decimal"
    if pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type):
        return "number"
    if pa.types.is_date(arrow_type):
        return "date"
    if pa.types.is_boolean(arrow_type):
        return "boolean"
    return str(arrow_type)


def _check_types(text: str, what: str, kinds: list[str], referenced: list[pa.Field]) -> None:
    column_kinds = {k.split(":", 1)[1] for k in kinds if k.startswith("column:")}
    if "timestamp_ltz" in column_kinds:
        raise _refuse(
            text, "it reads a TIMESTAMP column (its meaning depends on Spark's session time zone)", what
        )
    other = [f.name for f in referenced if _kind(f.type) not in _KINDS]
    if other:
        raise _refuse(text, f"the column {other[0]!r} has a type the check does not cover", what)
    if "literal:fraction" in kinds and "decimal" in column_kinds:
        raise _refuse(text, "a fractional literal next to a DECIMAL column", what)
    if "CAST" in kinds and column_kinds - {"date", "timestamp_ntz"}:
        raise _refuse(text, "CAST of a column that is not a DATE or TIMESTAMP_NTZ", what)
    # A comparison between a string and a number: Spark and the engine coerce differently.
    for index, kind in enumerate(kinds):
        if kind in _COMPARISONS and 0 < index < len(kinds) - 1:
            left, right = kinds[index - 1], kinds[index + 1]
            sides = {s.split(":", 1)[1] for s in (left, right) if ":" in s}
            if "string" in sides and sides & {"number", "fraction", "decimal", "boolean"}:
                raise _refuse(text, "a comparison between a string and a number", what)
    if "AS" in kinds:
        for index, kind in enumerate(kinds):
            if kind == "AS" and (index + 1 >= len(kinds) or kinds[index + 1] != "DATE"):
                raise _refuse(text, "a CAST to a type other than DATE", what)


def violation_predicate(constraint: Constraint, schema: pa.Schema) -> str:
    """The engine's SQL that is TRUE for the rows breaking ``constraint`` (Delta's semantics)."""
    sql = translate(constraint, schema)
    if constraint.kind == "generated":
        assert constraint.column is not None
        column = '"' + constraint.column.replace('"', '""') + '"'
        return f"NOT ({column} IS NOT DISTINCT FROM ({sql}))"
    return f"NOT coalesce(({sql}), false)"  # false and NULL both fail, as in CheckDeltaInvariant


def check_rows(
    store: LogStore,
    files: Sequence[tuple[str, str, Mapping[str, str | None]]],
    metadata: Metadata,
    schema: pa.Schema,
    *,
    mapping: str = "none",
) -> None:
    """Check every row of already-written files against the table's constraints, before the commit.

    The expressions name logical columns; under column mapping each file's rows are first
    renamed to them at every depth (:func:`~.column_mapping.logical_file_data`, which resolves
    physical names, and ids in ``id`` mode, as readers do), so the checks see the values
    readers will read, never the NULLs of a name the file does not have.

    :param files: per file: its store path, its path relative to the root (for messages), its
        partition values (generated partition columns are checked on them), keyed by physical
        name under column mapping (as the log keys them).
    :param schema: the table's schema (logical names; partition columns included).
    :param mapping: the table's column mapping mode (``none``, ``name`` or ``id``).
    :raises UnsupportedExpressionError: an expression outside the subset the engine evaluates
        as Spark does, or the engine is not installed.
    :raises ConstraintViolationError: a row breaks a constraint: the message names the
        constraint, the file and the row.
    """
    constraints = table_constraints(metadata)
    if not constraints or not files:
        return
    predicates = {c.describe(): violation_predicate(c, schema) for c in constraints}
    nested = sorted(set().union(*(_translated(c, schema)[1] for c in constraints)))
    partition_columns = list(metadata.partition_columns)
    log.info(
        "Checking the rows of %d file(s) against %d constraint(s) of %s.",
        len(files),
        len(constraints),
        store.root_uri,
    )
    for path, relative, values in files:
        data = pq.read_table(store.open_input(path))
        if mapping != "none":
            data = logical_file_data(schema, data, mapping)
        by_lower = {f.lower(): f for f in data.column_names}
        generated_missing = [
            c
            for c in constraints
            if c.kind == "generated"
            and c.column is not None
            and c.column.lower() not in by_lower
            and c.column not in partition_columns
        ]
        if generated_missing:
            column = generated_missing[0].column
            raise ConstraintViolationError(
                f"The file {relative} has no values for the generated column {column!r} "
                f"({generated_missing[0].expression}). The core does not rewrite files: write through "
                f"DeltaPySparkOperator (it computes generated columns), or include the column."
            )
        columns: dict[str, pa.Array | pa.ChunkedArray] = {}
        for field in schema:
            if field.name in partition_columns:
                kind = arrow_type_to_delta(field.type)
                key = field.name if mapping == "none" else physical_name(field)
                value = parse_partition_value(values.get(key), str(kind), column=field.name)
                columns[field.name] = pa.array([value] * data.num_rows, field.type)
            elif field.name.lower() in by_lower:
                columns[field.name] = data.column(by_lower[field.name.lower()])
            else:
                columns[field.name] = pa.nulls(data.num_rows, field.type)
        for field_path in nested:
            columns[nested_column(field_path)] = _struct_field(columns[field_path[0]], field_path, schema)
        rows = pa.table(columns)
        try:
            found = first_match(rows, predicates)
        except EngineError as err:
            raise UnsupportedExpressionError(
                f"The SQL engine cannot evaluate a constraint of the table the way Spark does ({err}). "
                f"Write through DeltaPySparkOperator, which checks the rows with Spark.",
                feature=f"expression {str(err).split(':', 1)[0]!r}",
                operation="write",
            ) from None
        for name, row in found.items():
            if row is not None:
                shown = ", ".join(f"{k} = {v!r}" for k, v in row.items() if k in schema.names)
                raise ConstraintViolationError(
                    f"The {name} is violated by a row of {relative}: {shown}. Nothing was committed; "
                    f"fix the data (or the constraint) and commit again."
                )


def _struct_field(
    column: pa.Array | pa.ChunkedArray, path: Sequence[str], schema: pa.Schema
) -> pa.Array | pa.ChunkedArray:
    """The values of the struct field at ``path`` (below ``column``, the values of ``path[0]``):
    NULL wherever a parent struct is NULL, as Spark reads ``s.x``, or where the file lacks it."""
    table_type = schema.field(path[0]).type
    for name in path[1:]:
        table_type = table_type.field(name).type
        index = column.type.get_field_index(name)
        if index < 0:
            return pa.nulls(len(column), table_type)
        column = pc.struct_field(column, [index])
    return column


# --- identity columns ---------------------------------------------------------------------------


def checked_identity_schema(
    metadata: Metadata,
    file_columns: Mapping[str, Collection[str]],
    store: LogStore,
    paths: Sequence[str],
    generated: Collection[str],
    *,
    mapping: str = "none",
) -> str | None:
    """The schema string with the identity high-water marks this commit moves, or None.

    :param file_columns: per file (its path), the columns it holds (physical names under
        column mapping: an identity column is looked up, and read, under its physical name).
    :param store: the table's store, and ``paths`` the files' store paths: the generated
        columns' extremes are read from the files (stats may lack them: Spark's INT96 files).
    :param generated: identity columns whose values the writer generated from start/step/mark
        (the PySpark operator); only these move the mark, as in Delta (explicit values never do).
    :raises ConstraintViolationError: a file lacks an identity column, or holds values for a
        ``GENERATED ALWAYS`` column the writer did not generate.
    """
    columns = identity_columns(metadata)
    if not columns:
        return None
    wanted = {c.lower() for c in generated}
    # The name each identity column has in the files (top-level columns, as Delta allows them).
    in_files = {
        c.name: c.name.lower() if mapping == "none" else physical_path(metadata.schema, (c.name,))[0]
        for c in columns
    }
    for path, names in file_columns.items():
        present = {n.lower() for n in names} if mapping == "none" else set(names)
        for column in columns:
            if in_files[column.name] not in present:
                raise ConstraintViolationError(
                    f"The file {path} has no values for the identity column {column.name!r}. The core does "
                    f"not rewrite files, so it cannot generate them: write through DeltaPySparkOperator "
                    f"(it generates identity values from start={column.start}, step={column.step} and the "
                    f"high-water mark {column.high_water_mark}), or include the column."
                )
            if not column.allow_explicit_insert and column.name.lower() not in wanted:
                raise ConstraintViolationError(
                    f"The identity column {column.name!r} is GENERATED ALWAYS "
                    f"(delta.identity.allowExplicitInsert=false): the file {path} supplies its values. "
                    f"Leave the column out of the DataFrame and write through DeltaPySparkOperator, which "
                    f"generates them (Delta's DELTA_IDENTITY_COLUMNS_EXPLICIT_INSERT_NOT_SUPPORTED)."
                )
    schema = copy.deepcopy(metadata.schema_json)
    changed = False
    for column in columns:
        if column.name.lower() not in wanted:
            continue
        extremes = []
        for path in paths:
            name = column.name if mapping == "none" else in_files[column.name]
            data = pq.read_table(store.open_input(path), columns=[name]).column(0)
            extreme = pc.max(data) if column.step > 0 else pc.min(data)
            if extreme.is_valid:
                extremes.append(int(extreme.as_py()))
        if not extremes:
            continue
        candidate = max(extremes) if column.step > 0 else min(extremes)
        mark = _new_mark(column, candidate)
        if mark is None:
            continue
        for field in schema["fields"]:
            if field.get("name") == column.name:
                field.setdefault("metadata", {})[f"{_IDENTITY}highWaterMark"] = mark
                changed = True
    return json.dumps(schema, separators=(",", ":")) if changed else None


def _new_mark(column: IdentityColumn, candidate: int) -> int | None:
    """Delta's ``updateToValidHighWaterMark`` (never lowered; None when it does not move)."""
    forward = column.step > 0

    def before(a: int, b: int) -> bool:
        return a < b if forward else a > b

    if before(candidate, column.start):
        return None
    rounded = column.rounded(candidate)
    old = column.high_water_mark
    new = rounded if old is None else (rounded if before(old, rounded) else old)
    return None if old == new else new


def merged_identity_schema(restored: Metadata, current: Metadata) -> str:
    """``restored``'s schema string with each identity column's high-water mark raised to the mark
    the same column (by physical name) has in ``current`` (Delta's
    ``IdentityColumn.copySchemaWithMergedHighWaterMarks``, used by RESTORE): values generated after
    the restored version are never generated again.
    """
    marks: dict[str, int] = {}
    for field in _fields(current):
        meta = field.get("metadata") or {}
        mark = meta.get(f"{_IDENTITY}highWaterMark")
        if mark is not None:
            marks[str(meta.get(COLUMN_MAPPING_PHYSICAL_NAME_KEY, field.get("name")))] = int(mark)
    columns = {c.name: c for c in identity_columns(restored)}
    if not marks or not columns:
        return restored.schema_string
    schema = copy.deepcopy(restored.schema_json)
    changed = False
    for field in schema.get("fields") or []:
        meta = field.setdefault("metadata", {})
        column = columns.get(str(field.get("name")))
        candidate = marks.get(str(meta.get(COLUMN_MAPPING_PHYSICAL_NAME_KEY, field.get("name"))))
        if column is None or candidate is None:
            continue
        mark = _new_mark(column, candidate)
        if mark is not None:
            meta[f"{_IDENTITY}highWaterMark"] = mark
            changed = True
    return json.dumps(schema, separators=(",", ":")) if changed else restored.schema_string
