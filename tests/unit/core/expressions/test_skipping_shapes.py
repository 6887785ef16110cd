"""Skipping never drops a file holding a matching row, whoever wrote its statistics.

One generated table (tests/predicate_cases.py: NULL, '', NaN, -0.0, escapes, long strings,
wide decimals, extreme dates) is written with each shape of statistics a reader meets: the core's
own, delta-rs's (decimals as JSON doubles), Spark's (exact decimals, ``"NaN"``, millisecond
timestamps, strings cut to 32 characters and a U+FFFD or U+10FFFF tie-breaker, or a null
maximum), none, unparseable, deletion vectors, a checkpoint's ``stats_parsed`` only. For several
hundred generated predicates, the files skipping drops hold no row the predicate selects (rows
judged by the core's evaluation, which the differential tests hold equal to Spark SQL's).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from predicate_cases import PARTITIONS, SCHEMA, cases, table_rows

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.expressions import Predicate, PredicateError, files_matching

DATA = [c for c in SCHEMA.names if c not in PARTITIONS]
FILE_SCHEMA = pa.schema([SCHEMA.field(c) for c in DATA])
ROWS = table_rows("shapes", count=48)
PREDICATES = 400
FILES = 6


def _chunks() -> list[pa.Table]:
    size = math.ceil(ROWS.num_rows / FILES)
    return [ROWS.slice(start, size).select(DATA) for start in range(0, ROWS.num_rows, size)]


# --- statistics as each writer writes them --------------------------------------------------


def _spark_stats(data: pa.Table, *, truncate: str = "\ufffd", wide: bool = False) -> str | None:
    """Statistics as Delta Spark writes them (``to_json`` of a struct): exact decimals, ``"NaN"``
    when a NaN is present, timestamps cut to milliseconds, strings to a 32-character prefix with a
    tie-breaker (``truncate``; None: a null maximum, as Delta 3.3 writes when no bound fits)."""
    low: dict[str, Any] = {}
    high: dict[str, Any] = {}
    nulls: dict[str, int] = {}
    for name in DATA:
        column = data.column(name)
        nulls[name] = column.null_count
        values = [v for v in column.to_pylist() if v is not None]
        if not values or pa.types.is_boolean(column.type):
            continue
        if pa.types.is_floating(column.type):
            finite = [v for v in values if not math.isnan(v)]
            low[name] = _json_float(min(finite)) if finite else "NaN"
            high[name] = "NaN" if len(finite) < len(values) else _json_float(max(finite))
        elif pa.types.is_string(column.type):
            low[name] = min(values)[:32]
            top = max(values)
            if len(top) > 32:
                if truncate is None:
                    continue
                top = top[:32] + truncate
            high[name] = top
        else:
            low[name], high[name] = _json_value(min(values)), _json_value(max(values))
    stats: dict[str, Any] = {
        "numRecords": data.num_rows,
        "minValues": low,
        "maxValues": high,
        "nullCount": nulls,
    }
    if wide:
        stats["tightBounds"] = False
    return json.dumps(stats, ensure_ascii=False)


def _json_float(value: float) -> Any:
    return "Infinity" if value == math.inf else "-Infinity" if value == -math.inf else value


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return _Raw(format(value, "f"))
    if isinstance(value, dt.datetime):
        millis = value.replace(microsecond=value.microsecond // 1000 * 1000)
        text = millis.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
        return text + ("Z" if value.tzinfo else "")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


class _Raw(float):
    """A JSON number written with the given digits (an exact decimal, as Spark writes it)."""

    def __new__(cls, text: str) -> _Raw:
        made = super().__new__(cls, text)
        made.text = text  # type: ignore[attr-defined]
        return made

    def __repr__(self) -> str:
        return self.text  # type: ignore[attr-defined,no-any-return]


def _add_files(root: Path, stats: list[str | None]) -> DeltaTable:
    table = DeltaTable.create(str(root), FILE_SCHEMA)
    files = []
    for data, text in zip(_chunks(), stats, strict=True):
        name = f"part-{uuid.uuid4()}.parquet"
        pq.write_table(data, root / name)
        files.append((name, text))
    return _commit_as_written(table, files)


def _commit_as_written(table: DeltaTable, files: list[tuple[str, str | None]]) -> DeltaTable:
    """Version 1 adding ``files`` with their statistics as another writer wrote them: the core's
    own commits check statistics (a Spark log may hold ``"-Infinity"`` bounds, a broken writer
    anything), so the log file is written as it stands."""
    root = Path(table.storage.root)
    lines = []
    for name, stats in files:
        add = {
            "path": name,
            "partitionValues": {},
            "size": (root / name).stat().st_size,
            "modificationTime": 1,
        }
        add["dataChange"] = True
        if stats is not None:
            add["stats"] = stats
        lines.append(json.dumps({"add": add}, ensure_ascii=False))
    (root / "_delta_log" / f"{1:020d}.json").write_text("\n".join(lines) + "\n")
    return table


def _core(root: Path) -> DeltaTable:
    table = DeltaTable.create(str(root), FILE_SCHEMA)
    names = []
    for data in _chunks():
        name = f"part-{uuid.uuid4()}.parquet"
        pq.write_table(data, root / name)
        names.append(name)
    table.commit_files(names)
    return table


def _delta_rs(root: Path) -> DeltaTable:
    deltalake = pytest.importorskip("deltalake")
    for data in _chunks():
        deltalake.write_deltalake(str(root), data, mode="append")
    return DeltaTable(str(root))


def _with_deletion_vectors(root: Path) -> DeltaTable:
    table = DeltaTable.create(str(root), FILE_SCHEMA, properties={"delta.enableDeletionVectors": "true"})
    names = []
    for data in _chunks():
        name = f"part-{uuid.uuid4()}.parquet"
        pq.write_table(data, root / name)
        names.append(name)
    table.commit_files(names)
    table.delete("id IN (" + ", ".join(str(i) for i in range(0, ROWS.num_rows, 3)) + ")")
    return table


def _checkpointed(root: Path) -> DeltaTable:
    properties = {"delta.checkpoint.writeStatsAsJson": "false", "delta.checkpoint.writeStatsAsStruct": "true"}
    table = DeltaTable.create(str(root), FILE_SCHEMA, properties=properties)
    names = []
    for data in _chunks():
        name = f"part-{uuid.uuid4()}.parquet"
        pq.write_table(data, root / name)
        names.append(name)
    table.commit_files(names)
    table.checkpoint()
    return table


def _broken() -> list[str | None]:
    """Missing, unparseable, empty and wrong-typed statistics next to good ones (the wrong type
    forces the row-by-row parse, in which a file without statistics once read as 0 rows)."""
    good = [_spark_stats(data) for data in _chunks()]
    return [
        None,
        "{",
        "{}",
        good[3].replace('"minValues": {', '"minValues": {"i": "x", ', 1),
        '{"numRecords": 8}',
        good[5],
    ]


SHAPES = {
    "core": _core,
    "delta-rs": _delta_rs,
    "spark": lambda root: _add_files(root, [_spark_stats(d) for d in _chunks()]),
    "spark-null-max": lambda root: _add_files(root, [_spark_stats(d, truncate=None) for d in _chunks()]),
    "delta-3.3-tie-breaker": lambda root: _add_files(
        root, [_spark_stats(d, truncate="\U0010ffff") for d in _chunks()]
    ),
    "wide-bounds": lambda root: _add_files(root, [_spark_stats(d, wide=True) for d in _chunks()]),
    "broken": lambda root: _add_files(root, _broken()),
    "deletion-vectors": _with_deletion_vectors,
    "checkpoint-stats-parsed": _checkpointed,
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_skipping_never_drops_a_file_holding_a_selected_row(tmp_path: Path, shape: str) -> None:
    table = SHAPES[shape](tmp_path / shape)
    snapshot = table.snapshot()
    paths = snapshot.files().column("path").to_pylist()
    per_file = [snapshot.to_pyarrow_table(paths=[p]) for p in paths]
    lost = []
    checked = 0
    for item in cases("shapes", ROWS, PREDICATES):
        try:
            predicate = Predicate(item.text, [], data_columns=DATA, parameters=item.parameters)
            kept = files_matching(snapshot, predicate)
        except PredicateError:
            continue
        checked += 1
        for rows, keep in zip(per_file, kept, strict=True):
            if not keep and predicate.mask(rows).true_count:
                lost.append((item.id, item.text, item.parameters))
                break
    assert checked > PREDICATES // 5  # most predicates are answered, not refused
    assert not lost, f"{len(lost)} predicate(s) skip a file holding a selected row, e.g. {lost[:3]}"


# --- the findings, one by one ---------------------------------------------------------------------


def test_delta_rs_decimal_bounds_do_not_skip_the_file_holding_them(tmp_path: Path) -> None:
    """delta-rs writes decimal bounds as JSON doubles: 12345678901234567890.12 became
    1.2345678901234567e+19, below the file's maximum, and ``d = <that value>`` skipped the file."""
    deltalake = pytest.importorskip("deltalake")
    value = Decimal("12345678901234567890.12")
    data = pa.table(
        {"id": pa.array([1, 2], pa.int64()), "d": pa.array([value, Decimal("1.00")], pa.decimal128(38, 2))}
    )
    deltalake.write_deltalake(str(tmp_path), data)
    table = DeltaTable(str(tmp_path))
    snapshot = table.snapshot()
    for text in [
        f"d = {value}",
        f"d >= {value}",
        "d > 12345678901234567890.11",
        "d IN (12345678901234567890.12)",
    ]:
        predicate = Predicate(text, [], data_columns=["id", "d"])
        assert files_matching(snapshot, predicate).tolist() == [True], text
    assert table.delete(f"d = {value}").num_deleted_rows == 1
    # A bound of few digits survives the double: the file is still skipped where it can be.
    assert files_matching(snapshot, Predicate("d < 0.99", [], data_columns=["d"])).tolist() == [False]


def test_a_file_without_parseable_statistics_is_read(tmp_path: Path) -> None:
    """Three files of ids 0-9, 10-19, 20-29: the second without statistics, the third with an id
    bound that is no number (which forced the row-by-row parse, where the second read as 0 rows)."""
    table = DeltaTable.create(str(tmp_path), pa.schema([("id", pa.int64())]))
    first = {"numRecords": 10, "minValues": {"id": 0}, "maxValues": {"id": 9}, "nullCount": {"id": 0}}
    third = {"numRecords": 10, "minValues": {"id": "x"}, "maxValues": {"id": 29}, "nullCount": {"id": 0}}
    files = []
    for n, stats in enumerate([first, None, third]):
        name = f"{n}.parquet"
        pq.write_table(pa.table({"id": pa.array(range(10 * n, 10 * n + 10), pa.int64())}), tmp_path / name)
        files.append((name, json.dumps(stats) if stats else None))
    _commit_as_written(table, files)
    snapshot = table.snapshot()
    assert files_matching(snapshot, Predicate("id = 15", [], data_columns=["id"])).tolist() == [
        False,
        True,
        True,
    ]
    assert (
        files_matching(snapshot, Predicate("id IS NOT NULL", [], data_columns=["id"])).tolist() == [True] * 3
    )
    result = table.delete("id = 15")
    assert result.num_deleted_rows == 1
    assert 15 not in table.snapshot().to_pyarrow_table().column("id").to_pylist()


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        ("a" * 32 + "\U0001f600", "a" * 32 + "\ufffd"),
        ("a" * 32 + "\uffff\U0001f600", "a" * 32 + "\uffff\ufffd"),  # chars >= U+FFFD are kept
        ("a" * 32 + "\U0001f600", "a" * 32 + "\U0010ffff"),
        ("a" * 32 + "!b", "a" * 32 + "\x7f"),
    ],
    ids=["delta-3.2", "delta-3.2-run", "delta-3.3-high", "delta-3.3-low"],
)
def test_a_truncated_string_maximum_stands_for_its_prefix(tmp_path: Path, value: str, stored: str) -> None:
    """Delta <= 3.2 cuts a maximum to 32 characters and appends U+FFFD, which in UTF-8 order lies
    below a cut-off emoji: the file holding 'a' * 32 + '😀' must still be read."""
    table = DeltaTable.create(str(tmp_path), pa.schema([("s", pa.string())]))
    pq.write_table(pa.table({"s": [value, "a"]}), tmp_path / "0.parquet")
    stats = {"numRecords": 2, "minValues": {"s": "a"}, "maxValues": {"s": stored}, "nullCount": {"s": 0}}
    _commit_as_written(table, [("0.parquet", json.dumps(stats))])
    snapshot = table.snapshot()
    for text, parameters in [
        ("s = :v", {"v": value}),
        ("s >= :v", {"v": value}),
        ("s > :v", {"v": stored}),
        ("s IN (:v, 'zz')", {"v": value}),
    ]:
        predicate = Predicate(text, [], data_columns=["s"], parameters=parameters)
        assert files_matching(snapshot, predicate).tolist() == [True], text
    # A value above the prefix and the maximum is still skipped.
    assert files_matching(snapshot, Predicate("s > 'b'", [], data_columns=["s"])).tolist() == [False]


@pytest.mark.parametrize(
    ("value", "precision", "scale"),
    [
        ("12345678901234567890.12", 38, 2),
        ("-12345678901234567890.12", 38, 2),
        ("99999999999999999999999999.99", 38, 2),
        ("0.000000000000000000000000000001", 38, 30),
        ("1.000000000000000000000000001", 38, 27),
        ("99999999.99", 10, 2),
        ("0.07", 10, 2),
    ],
)
def test_a_decimal_bound_read_as_a_double_still_bounds_the_value(
    value: str, precision: int, scale: int
) -> None:
    """Whoever turned the decimal into a double (delta-rs; Spark's exact text read by a double
    parser), the bound read back is below (minimum) or above (maximum) the value itself; up to 15
    digits it is the value."""
    from airflow_delta_provider.core.expressions.bounds import decimal_bound

    exact = Decimal(value)
    low = decimal_bound(float(exact), precision, scale, upper=False)
    high = decimal_bound(float(exact), precision, scale, upper=True)
    assert low is not None and high is not None
    assert low <= exact <= high
    if precision <= 15:
        assert low == exact == high
    assert decimal_bound(math.nan, precision, scale, upper=True) is None
