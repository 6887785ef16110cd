"""Decimal values against their Delta type, exactly (core/protocol/delta_types.py decimal_digits): a
precision-38 value is checked digit by digit, never through Python's default 28-digit context
(which rounded ``999999999999999999999999999999999999.99`` up to 37 digits before the point and
refused a valid ``decimal(38,2)``). Per type at its edges: the largest and smallest values pass
the commit's statistics check, the partition-value parser and serialiser, and a commit (read back
by delta-rs too); one unit past either way is refused, a commit with the table as it was.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import CorruptLogError, InvalidLogValueError, SchemaError
from airflow_delta_provider.core.protocol.actions import AddFile, Metadata
from airflow_delta_provider.core.protocol.delta_types import decimal_digits
from airflow_delta_provider.core.protocol.partitions import parse_partition_value, serialize_partition_value
from airflow_delta_provider.core.protocol.validation import validate_actions

if TYPE_CHECKING:
    from pathlib import Path

TYPES = [(38, 0), (38, 2), (38, 38), (1, 0), (10, 5)]


def largest(precision: int, scale: int) -> Decimal:
    """The type's largest value (its negation, ``copy_negate()``: unary minus rounds to 28 digits)."""
    whole = "9" * (precision - scale) or "0"
    return Decimal(f"{whole}.{'9' * scale}" if scale else whole)


def past(precision: int, scale: int) -> list[Decimal]:
    """One unit past the type: a digit more before the point, a digit more after it."""
    return [Decimal(1).scaleb(precision - scale), Decimal(1).scaleb(-(scale + 1))]


def type_name(precision: int, scale: int) -> str:
    return f"decimal({precision},{scale})"


def table_metadata(delta_type: str) -> Metadata:
    field = {"name": "d", "type": delta_type, "nullable": True, "metadata": {}}
    return Metadata("t", json.dumps({"type": "struct", "fields": [field]}))


def add_with_bounds(low: Decimal, high: Decimal) -> AddFile:
    # As Delta writes decimal statistics: JSON numbers, every digit kept.
    stats = f'{{"numRecords":2,"minValues":{{"d":{low}}},"maxValues":{{"d":{high}}},"nullCount":{{"d":0}}}}'
    return AddFile("x.parquet", {}, 1, 1, stats=stats)


@pytest.mark.parametrize(
    ("number", "digits"),
    [
        (Decimal("999999999999999999999999999999999999.99"), (36, 2)),
        (Decimal("-0.99999999999999999999999999999999999999"), (0, 38)),
        (Decimal("99999999999999999999999999999999999999"), (38, 0)),
        (Decimal("1.2300"), (1, 2)),
        (Decimal("1200"), (4, 0)),
        (Decimal("12E+2"), (4, 0)),
        (Decimal("0E-50"), (0, 0)),
        (Decimal("-0"), (0, 0)),
        (Decimal("1E+100000"), (100001, 0)),
        (Decimal("1E-100000"), (0, 100000)),
    ],
)
def test_digits_are_counted_exactly(number: Decimal, digits: tuple[int, int]) -> None:
    assert decimal_digits(number) == digits


@pytest.mark.parametrize(("precision", "scale"), TYPES)
def test_the_edges_of_a_decimal_type_pass_the_statistics_check(precision: int, scale: int) -> None:
    metadata = table_metadata(type_name(precision, scale))
    top = largest(precision, scale)
    validate_actions([add_with_bounds(top.copy_negate(), top)], metadata)
    for beyond in past(precision, scale):
        for low, high in ((beyond.copy_negate(), top), (top.copy_negate(), beyond)):
            with pytest.raises(
                InvalidLogValueError, match=rf"does not fit a Delta decimal\({precision},{scale}\)"
            ):
                validate_actions([add_with_bounds(low, high)], metadata)


def test_a_double_bound_past_the_largest_double_in_a_29th_digit_is_refused() -> None:
    """``abs()`` rounds to the context's 28 digits: the largest double plus a tiny amount compared equal."""
    metadata = table_metadata("double")
    just_past = Decimal("1.7976931348623157000000000000000001e308")
    with pytest.raises(InvalidLogValueError, match="outside the allowed range of a Delta double"):
        validate_actions([add_with_bounds(Decimal(0), just_past)], metadata)
    validate_actions(
        [add_with_bounds(Decimal("-1.7976931348623157e308"), Decimal("1.7976931348623157e308"))], metadata
    )


@pytest.mark.parametrize(("precision", "scale"), TYPES)
def test_the_edges_of_a_decimal_type_as_partition_values(precision: int, scale: int) -> None:
    delta_type = type_name(precision, scale)
    top = largest(precision, scale)
    for value in (top, top.copy_negate()):
        assert parse_partition_value(str(value), delta_type, column="d") == value
        assert Decimal(serialize_partition_value(value, delta_type)) == value
    for beyond in [*past(precision, scale), Decimal("1E+1000"), Decimal("1E-1000")]:
        with pytest.raises(CorruptLogError, match=r"digits (before|after) the point"):
            parse_partition_value(str(beyond), delta_type, column="d")
        with pytest.raises(SchemaError, match=r"digits (before|after) the point"):
            serialize_partition_value(beyond, delta_type)


def state(root: Path) -> tuple[int, list[str], list[str]]:
    snapshot = DeltaTable(str(root)).snapshot()
    paths = sorted(snapshot.files().column("path").to_pylist())
    return snapshot.version, paths, sorted(os.listdir(root / "_delta_log"))


@pytest.mark.parametrize(("precision", "scale"), TYPES)
def test_a_file_holding_the_edges_of_its_decimal_type_commits_and_reads_back(
    tmp_path: Path, precision: int, scale: int
) -> None:
    import deltalake

    root = tmp_path / "t"
    arrow_type = pa.decimal128(precision, scale)
    top = largest(precision, scale)
    table = DeltaTable.create(str(root), pa.schema([("d", arrow_type)]))
    pq.write_table(
        pa.table({"d": pa.array([top, top.copy_negate(), None], arrow_type)}), root / "edges.parquet"
    )
    table.commit_files(["edges.parquet"])
    stats = json.loads(table.snapshot().files().column("stats")[0].as_py(), parse_float=Decimal)
    assert (stats["minValues"]["d"], stats["maxValues"]["d"]) == (top.copy_negate(), top)
    expected = sorted([top, top.copy_negate()])
    assert (
        sorted(v for v in table.snapshot().to_pyarrow_table()["d"].to_pylist() if v is not None) == expected
    )
    theirs = deltalake.DeltaTable(str(root)).to_pyarrow_table()["d"].to_pylist()
    assert sorted(v for v in theirs if v is not None) == expected


def test_a_value_delta_rs_wrote_at_the_edge_of_decimal_38_2_is_committed_again(tmp_path: Path) -> None:
    """delta-rs writes the largest decimal(38,2) and its statistics; the core commits that file
    into another table (its value check reads the same statistics from the footer)."""
    import deltalake

    top = largest(38, 2)
    data = pa.table({"d": pa.array([top, top.copy_negate()], pa.decimal128(38, 2))})
    deltalake.write_deltalake(str(tmp_path / "theirs"), data)
    [written] = deltalake.DeltaTable(str(tmp_path / "theirs")).file_uris()
    root = tmp_path / "ours"
    table = DeltaTable.create(str(root), data.schema)
    os.link(written.removeprefix("file://"), root / "from-delta-rs.parquet")
    assert table.commit_files(["from-delta-rs.parquet"]).version == 1
    assert sorted(table.snapshot().to_pyarrow_table()["d"].to_pylist()) == [top.copy_negate(), top]


@pytest.mark.parametrize(("precision", "scale"), TYPES)
def test_a_partition_value_past_its_decimal_type_is_refused_and_the_table_is_unchanged(
    tmp_path: Path, precision: int, scale: int
) -> None:
    root = tmp_path / "t"
    arrow_type = pa.decimal128(precision, scale)
    schema = pa.schema([("id", pa.int64()), ("d", arrow_type)])
    table = DeltaTable.create(str(root), schema, partition_by=["d"])
    top = largest(precision, scale)

    def write(value: Any) -> str:
        relative = f"d={value}/part.parquet"
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table({"id": pa.array([1], pa.int64())}), root / relative)
        return relative

    table.commit_files([write(top)])
    assert DeltaTable(str(root)).snapshot().to_pyarrow_table()["d"].to_pylist() == [top]
    before = state(root)
    for beyond in past(precision, scale):
        with pytest.raises((InvalidLogValueError, SchemaError), match=r"digits (before|after) the point"):
            table.commit_files([write(beyond)])
        assert state(root) == before
