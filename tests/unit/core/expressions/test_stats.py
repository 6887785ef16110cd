"""Footer statistics: what Delta's data skipping reads, computed from Parquet footers."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core.errors import InvalidDataFileError, SchemaError
from airflow_delta_provider.core.expressions import stats_encoding
from airflow_delta_provider.core.expressions.stats import indexed_columns, read_footer, read_footers
from airflow_delta_provider.core.parquet import footer as parquet_footer
from airflow_delta_provider.core.parquet import page_scan
from airflow_delta_provider.core.storage import open_store


def _stats(tmp_path, table: pa.Table, columns=None, **write_options) -> dict:
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **write_options)
    storage = open_store(str(tmp_path))
    footer = read_footer(storage, str(path), stats_columns=columns or [(n,) for n in table.schema.names])
    return json.loads(footer.stats)


def test_numbers_dates_and_strings_match_the_data(tmp_path):
    table = pa.table(
        {
            "i": pa.array([5, -3, None, 12], pa.int32()),
            "s": ["b", "a", None, "c"],
            "d": [dt.date(2024, 1, 2), dt.date(2023, 12, 31), None, None],
            "flag": [True, None, True, True],
        }
    )
    stats = _stats(tmp_path, table, row_group_size=2)  # two row groups: bounds are aggregated
    assert stats["numRecords"] == 4
    for name in ("i", "s", "flag"):
        assert stats["minValues"][name] == pc.min(table[name]).as_py()
        assert stats["maxValues"][name] == pc.max(table[name]).as_py()
        assert stats["nullCount"][name] == table[name].null_count
    assert stats["minValues"]["d"] == "2023-12-31"
    assert stats["maxValues"]["d"] == "2024-01-02"


@pytest.mark.parametrize(
    ("values", "bounds"),
    [
        ([1.0, float("nan")], None),
        ([1.0, 2.0], (1.0, 2.0)),
        ([float("nan")], None),
        ([1.0, float("inf")], None),
        ([-0.5, None, 3.25], (-0.5, 3.25)),
    ],
    ids=["nan", "finite", "only-nan", "infinity", "with-nulls"],
)
@pytest.mark.parametrize(
    "options", [{}, {"use_dictionary": False}, {"use_dictionary": False, "data_page_version": "2.0"}]
)
def test_arrow_written_floats_get_bounds_when_their_values_hold_no_nan(tmp_path, values, bounds, options):
    """Arrow leaves NaN out of a footer's min/max without counting it, so the float's values are
    read: without NaN the footer's bounds hold. With NaN (or an infinite bound, which JSON cannot
    hold) the file gets no bounds at all: readers misread a stats column missing from
    minValues; the exact null counts stay."""
    stats = _stats(tmp_path, pa.table({"i": [1] * len(values), "f": values}), **options)
    assert stats["nullCount"] == {"i": 0, "f": sum(v is None for v in values)}
    if bounds is None:
        assert "minValues" not in stats and "maxValues" not in stats
    else:
        assert stats["minValues"] == {"i": 1, "f": bounds[0]}
        assert stats["maxValues"] == {"i": 1, "f": bounds[1]}


@pytest.mark.parametrize("rows", [2, 20_000], ids=["in-the-tail", "beyond-the-tail"])
def test_float_values_are_read_only_for_stats_columns_and_only_from_their_chunks(tmp_path, monkeypatch, rows):
    """The values cost nothing more when the tail already read holds their chunks, else one
    ranged read per float chunk of a stats column: none for a float outside the stats columns,
    none at all for Spark's files (their footers count NaN)."""
    from airflow_delta_provider.core.expressions import stats as stats_module

    table = pa.table({"i": range(rows), "f": [k + 0.5 for k in range(rows)], "g": [2.5] * rows})
    pq.write_table(table, tmp_path / "f.parquet", row_group_size=rows // 2, use_dictionary=False)
    storage = open_store(str(tmp_path))
    reads: list[tuple[int, int]] = []
    original = storage.read_ranges

    def counting(paths, starts, lengths, **kwargs):
        reads.extend(zip(starts, lengths, strict=True))
        return original(paths, starts, lengths, **kwargs)

    monkeypatch.setattr(storage, "read_ranges", counting)
    [footer] = read_footers(storage, [str(tmp_path / "f.parquet")], stats_columns=[("i",), ("f",)])
    metadata = pq.read_metadata(tmp_path / "f.parquet")
    chunks = [page_scan.chunk_range(metadata.row_group(g).column(1)) for g in range(2)]  # f's two
    assert reads[1:] == ([] if rows == 2 else chunks)  # after the tail read for the footer
    assert json.loads(footer.stats)["maxValues"] == {"i": rows - 1, "f": rows - 0.5}
    monkeypatch.setattr(stats_module, "_nan_in_bounds", lambda _: True)
    reads.clear()
    read_footers(storage, [str(tmp_path / "f.parquet")], stats_columns=[("i",), ("f",)])
    assert len(reads) == 1  # the footer alone


@pytest.mark.parametrize(
    ("writer", "values", "bounds"),
    [
        ("parquet-mr version 1.17.0 (build x)", [1.0, 2.0], (1.0, 2.0)),
        ("parquet-java version 1.18.0", [-0.5, 3.25], (-0.5, 3.25)),
        ("parquet-mr version 1.13.1", [1.0, float("inf")], None),
        ("parquet-cpp-arrow version 26.0.1", [1.0, 2.0], None),
        (None, [1.0, 2.0], None),
    ],
)
def test_float_bounds_only_from_writers_that_put_nan_into_them(tmp_path, monkeypatch, writer, values, bounds):
    """parquet-mr / parquet-java (Spark) order NaN above every number in the footer, so finite
    bounds mean "no NaN". pyarrow cannot write another ``created_by``, so the writer's name is
    substituted here; tests/interop checks real Spark files."""
    from airflow_delta_provider.core.expressions import stats as stats_module

    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"f": values}), path)
    metadata = pq.read_metadata(path)
    original = stats_module._nan_in_bounds
    monkeypatch.setattr(stats_module, "_nan_in_bounds", lambda _: original(writer))
    stats = json.loads(stats_module.footer_info(metadata, [("f",)]).stats)
    assert ((stats["minValues"]["f"], stats["maxValues"]["f"]) if "minValues" in stats else None) == bounds


@pytest.mark.parametrize("unit", ["us", "ns"])
def test_timestamps_are_milliseconds_with_the_maximum_rounded_up(tmp_path, unit):
    value = dt.datetime(2024, 5, 6, 7, 8, 9, 987654)
    table = pa.table(
        {
            "ts": pa.array([value, value], pa.timestamp(unit, tz="UTC")),
            "ntz": pa.array([value, dt.datetime(2024, 5, 6, 7, 8, 9, 1000)], pa.timestamp(unit)),
        }
    )
    stats = _stats(tmp_path, table)
    assert stats["minValues"]["ts"] == "2024-05-06T07:08:09.987Z"
    assert stats["maxValues"]["ts"] == "2024-05-06T07:08:09.988Z"  # .987654 <= .988
    assert stats["minValues"]["ntz"] == "2024-05-06T07:08:09.001"  # whole milliseconds stay
    assert stats["maxValues"]["ntz"] == "2024-05-06T07:08:09.988"


def test_timestamps_before_year_1000_keep_four_digit_years(tmp_path):
    table = pa.table({"ts": pa.array([dt.datetime(999, 1, 2, 3, 4, 5, 6000)], pa.timestamp("us"))})
    stats = _stats(tmp_path, table)
    assert stats["minValues"]["ts"] == "0999-01-02T03:04:05.006"


def test_int96_timestamps_leave_the_file_without_bounds_and_read_as_utc(tmp_path):
    table = pa.table({"ts": pa.array([dt.datetime(2024, 1, 1), None], pa.timestamp("us")), "i": [1, 2]})
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, use_deprecated_int96_timestamps=True)
    footer = read_footer(open_store(str(tmp_path)), str(path), stats_columns=[("ts",), ("i",)])
    assert footer.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    # pyarrow keeps no statistics at all for INT96, not even a null count; bounds without a null
    # count read as "no nulls" in delta-rs, and a column missing from minValues makes it skip
    # the file, so the file has none: only the counts it knows. (Spark counts INT96 nulls: its
    # files get bounds from the values, tests/interop.)
    assert json.loads(footer.stats) == {"numRecords": 2, "nullCount": {"i": 0}}


def test_decimals_are_exact_json_numbers(tmp_path):
    big = Decimal("12345678901234567890.123456789")
    table = pa.table({"x": pa.array([big, Decimal("-1.5")], pa.decimal128(38, 9))})
    path = tmp_path / "f.parquet"
    pq.write_table(table, path)
    footer = read_footer(open_store(str(tmp_path)), str(path), stats_columns=[("x",)])
    assert '"maxValues":{"x":12345678901234567890.123456789}' in footer.stats
    assert json.loads(footer.stats, parse_float=Decimal)["minValues"]["x"] == Decimal("-1.500000000")


def test_nested_structs_lists_and_types_without_bounds(tmp_path):
    table = pa.table(
        {
            "st": [{"a": 1, "b": "x"}, {"a": 3, "b": None}],
            "l": [[1, 2], None],
            "flag": [True, False],
            "bin": [b"\x00", b"\xff"],
        }
    )
    stats = _stats(tmp_path, table, columns=[("st", "a"), ("st", "b"), ("l",), ("flag",), ("bin",)])
    # Booleans have exact footer bounds; binaries none (nobody expects them); lists no null
    # count (the footer counts elements).
    assert stats["minValues"] == {"st": {"a": 1, "b": "x"}, "flag": False}
    assert stats["maxValues"] == {"st": {"a": 3, "b": "x"}, "flag": True}
    assert stats["nullCount"] == {"st": {"a": 0, "b": 1}, "flag": 0, "bin": 0}


@pytest.mark.parametrize(
    ("column", "bounded"),
    [
        (pa.array([None, None], pa.float64()), True),  # only nulls: nothing to bound
        (pa.array([b"x", None]), True),  # binary: no bounds expected
        (pa.array(["\U0010ffff" * 70, None]), False),  # a maximum that cannot be truncated
        (pa.array([1.0, float("nan")]), False),
    ],
    ids=["all-null", "binary", "untruncatable-string", "float"],
)
def test_a_file_has_bounds_for_every_column_with_values_or_none(tmp_path, column, bounded):
    stats = _stats(tmp_path, pa.table({"i": [1, 2], "c": column}))
    assert stats["nullCount"] == {"i": 0, "c": column.null_count}
    assert ("minValues" in stats) is bounded
    if bounded:
        assert stats["minValues"] == {"i": 1} and stats["maxValues"] == {"i": 2}


def test_a_column_missing_from_the_file_counts_as_all_nulls(tmp_path):
    stats = _stats(tmp_path, pa.table({"a": [1, 2, 3]}), columns=[("a",), ("added_later",)])
    assert stats["nullCount"] == {"a": 0, "added_later": 3}


def test_all_null_column_has_a_null_count_but_no_bounds(tmp_path):
    stats = _stats(tmp_path, pa.table({"a": pa.array([None, None], pa.int64()), "b": [1, 2]}))
    assert stats["nullCount"]["a"] == 2
    assert "a" not in stats["minValues"]


def test_long_strings_are_truncated_like_delta(tmp_path):
    long_value = "a" * 40
    stats = _stats(tmp_path, pa.table({"s": [long_value, "0"]}))
    assert stats["minValues"]["s"] == "0"
    assert stats["maxValues"]["s"] == "a" * 32 + "\x7f"


def test_indexed_columns_counts_leaves_and_honours_properties():
    schema = pa.schema(
        [("a", pa.int64()), ("s", pa.struct([("x", pa.int64()), ("y", pa.string())])), ("b", pa.int64())]
    )
    assert indexed_columns(schema, {}) == [("a",), ("s", "x"), ("s", "y"), ("b",)]
    assert indexed_columns(schema, {"delta.dataSkippingNumIndexedCols": "2"}) == [("a",), ("s", "x")]
    assert indexed_columns(schema, {"delta.dataSkippingNumIndexedCols": "-1"})[-1] == ("b",)
    assert indexed_columns(schema, {"delta.dataSkippingStatsColumns": "b, S"}) == [
        ("b",),
        ("s", "x"),
        ("s", "y"),
    ]
    with pytest.raises(SchemaError, match="dataSkippingNumIndexedCols='many'"):
        indexed_columns(schema, {"delta.dataSkippingNumIndexedCols": "many"})


def test_default_limit_is_32_leaf_columns(tmp_path):
    table = pa.table({f"c{i}": [i] for i in range(40)})
    path = tmp_path / "wide.parquet"
    pq.write_table(table, path)
    columns = indexed_columns(table.schema, {})
    stats = json.loads(read_footer(open_store(str(tmp_path)), str(path), stats_columns=columns).stats)
    assert list(stats["minValues"]) == [f"c{i}" for i in range(32)]


def test_columns_are_matched_case_insensitively_and_named_as_the_table(tmp_path):
    stats = _stats(tmp_path, pa.table({"Value": [3, 4]}), columns=[("value",)])
    assert stats["minValues"] == {"value": 3}


def test_a_file_without_nulls_is_non_nullable_in_the_delta_view(tmp_path):
    path = tmp_path / "f.parquet"
    pq.write_table(pa.table({"a": [1, 2], "b": [None, 1]}), path)
    footer = read_footer(open_store(str(tmp_path)), str(path), stats_columns=[])
    assert not footer.schema.field("a").nullable
    assert footer.schema.field("b").nullable


def test_non_parquet_files_are_refused_by_name(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("not parquet")
    with pytest.raises(InvalidDataFileError, match=r"notes\.txt is not a readable Parquet file"):
        read_footer(open_store(str(tmp_path)), str(path), stats_columns=[])


def test_read_footers_in_parallel_keeps_order(tmp_path):
    paths = []
    for i in range(20):
        path = tmp_path / f"p{i}.parquet"
        pq.write_table(pa.table({"a": list(range(i + 1))}), path)
        paths.append(str(path))
    footers = read_footers(open_store(str(tmp_path)), paths, stats_columns=[("a",)], max_workers=4)
    assert [f.num_records for f in footers] == list(range(1, 21))


# --- footers read concurrently with ranged tail reads ------------------------------------


def _facts(footers) -> list[tuple[int, str, str]]:
    """What a footer read yields, comparable: rows, stats, the Delta view of the schema."""
    return [(f.num_records, f.stats, f.schema.to_string(show_schema_metadata=True)) for f in footers]


def _write_copies(directory, varied_parquet, copies: int = 3) -> list[str]:
    paths = []
    for copy in range(copies):
        for name, data in varied_parquet.items():
            path = directory / f"c{copy}-{name}"
            path.write_bytes(data)
            paths.append(str(path))
    return paths


def test_concurrent_ranged_reads_match_the_sequential_path_and_pyarrows_reader(
    tmp_path, monkeypatch, varied_parquet, varied_stats_columns
):
    from airflow_delta_provider.core.expressions import stats as stats_module

    paths = _write_copies(tmp_path, varied_parquet)
    storage = open_store(str(tmp_path))
    columns = varied_stats_columns
    sequential = read_footers(storage, paths, stats_columns=columns, max_workers=1)
    monkeypatch.setattr(stats_module, "FOOTER_WINDOW", 4)  # windows read while others are parsed
    concurrent = read_footers(storage, paths, stats_columns=columns, max_workers=4)
    assert _facts(concurrent) == _facts(sequential)
    # pyarrow's own file reader on each whole file: the same footers, the same stats.
    assert _facts(concurrent) == _facts(stats_module.footer_info(pq.read_metadata(p), columns) for p in paths)
    # The big footer did not fit one tail read: it was read again, exactly.
    big = varied_parquet["big-footer.parquet"]
    assert int.from_bytes(big[-8:-4], "little") > parquet_footer.TAIL_BYTES
    assert len(varied_parquet["large.parquet"]) > parquet_footer.TAIL_BYTES  # found in a partial tail

    stats = json.loads(concurrent[0].stats)  # plain.parquet
    assert stats["minValues"]["s"] == "k" * 32  # Delta's truncation of a 40-character minimum
    assert stats["maxValues"]["s"] == "z" * 31 + "\U0010ffff" * 4  # the prefix grown over U+10FFFF
    assert stats["minValues"]["big"] == pytest.approx(-12345678901234567890.000000006)
    assert '"big":-12345678901234567890.000000000' in concurrent[0].stats  # exact, not a float
    assert stats["minValues"]["day"] == "0999-01-02"
    assert stats["maxValues"]["ts"] == "2024-05-06T07:08:09.988Z"
    assert stats["maxValues"]["ns"] == "2024-05-06T07:08:09.988"
    assert stats["minValues"]["u"] == 2**32 - 7
    assert stats["minValues"]["nested"] == {"a": 0, "b": {"c": "c0"}}
    assert "tags" not in stats["nullCount"]["nested"] and "raw" not in stats["minValues"]
    assert stats["nullCount"]["missing"] == 7 and stats["nullCount"]["empty"] == 7
    int96 = json.loads(concurrent[4].stats)
    assert "minValues" not in int96 and concurrent[4].schema.field("t").type == pa.timestamp("us", tz="UTC")


def test_raw_footer_values_give_the_bounds_pyarrows_converted_values_give(
    tmp_path, monkeypatch, varied_parquet, varied_stats_columns
):
    """Bounds are read from the footer's physical values; pyarrow's converted values (the route
    kept for the rarer types) must give byte-identical stats for every type the raw route takes."""
    from airflow_delta_provider.core.expressions import stats as stats_module

    paths = _write_copies(tmp_path, varied_parquet, copies=1)
    storage = open_store(str(tmp_path))
    raw = read_footers(storage, paths, stats_columns=varied_stats_columns)
    original = stats_module.leaf_of

    def converted(*args):
        leaf = original(*args)
        if leaf.kind != stats_encoding.NONE:
            leaf.kind = stats_encoding.GENERIC
        return leaf

    monkeypatch.setattr(stats_module, "leaf_of", converted)
    assert _facts(read_footers(storage, paths, stats_columns=varied_stats_columns)) == _facts(raw)
    monkeypatch.setattr(stats_module, "leaf_of", original)
    from airflow_delta_provider.core.parquet import pyarrow_compat

    monkeypatch.setattr(pyarrow_compat, "_Reader", None)  # pq.read_metadata instead
    assert _facts(read_footers(storage, paths, stats_columns=varied_stats_columns)) == _facts(raw)


def _damage(data: bytes, how: str) -> bytes:
    length = int.from_bytes(data[-8:-4], "little")
    if how == "truncated":
        return data[: len(data) // 2]
    if how == "footer-longer-than-file":
        return data[:-8] + (len(data) * 2).to_bytes(4, "little") + b"PAR1"
    if how == "garbage-footer":
        return data[: -8 - length] + b"\xff" * length + data[-8:]
    return b""  # empty


@pytest.mark.parametrize("how", ["truncated", "footer-longer-than-file", "garbage-footer", "empty"])
def test_a_damaged_file_among_many_is_named_and_the_table_is_unchanged(tmp_path, monkeypatch, how):
    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.core.expressions import stats as stats_module

    monkeypatch.setattr(stats_module, "FOOTER_WINDOW", 4)  # the bad file is in a later window
    table = DeltaTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    out = tmp_path / "t" / "out"
    out.mkdir()
    for i in range(12):
        pq.write_table(pa.table({"id": [i]}), out / f"f{i:02d}.parquet")
    bad = out / "f09.parquet"
    bad.write_bytes(_damage(bad.read_bytes(), how))
    log_before = sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir())
    with pytest.raises(InvalidDataFileError, match=r"f09\.parquet is not a readable Parquet file"):
        table.commit_files(prefix="out", max_workers=3)
    assert table.version() == 0
    assert sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir()) == log_before


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(InvalidDataFileError, match=r"gone\.parquet is not a readable Parquet file"):
        read_footers(open_store(str(tmp_path)), [str(tmp_path / "gone.parquet")], stats_columns=[])


def test_a_cold_commit_of_timestamps_dates_and_decimals_does_not_import_pandas(tmp_path, varied_parquet):
    """pyarrow's converted footer values (``Statistics.min`` of a timestamp) import pandas, half
    a cold commit's time once: bounds are read from the raw values. A fresh process checks it."""
    import subprocess
    import sys
    import textwrap

    for name in ("plain.parquet", "row-groups.parquet", "big-footer.parquet"):
        (tmp_path / name).write_bytes(varied_parquet[name])
    probe = textwrap.dedent(
        """
        import sys
        from airflow_delta_provider.core import DeltaTable

        files = ["plain.parquet", "row-groups.parquet", "big-footer.parquet"]
        result = DeltaTable(sys.argv[1]).commit_files(files)
        print(result.num_added_files, "pandas" in sys.modules)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", probe, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert run.stdout.split() == ["3", "False"]


def test_footers_are_told_apart_by_their_schema_bytes_and_leave_no_garbage(tmp_path):
    """Files whose Arrow schemas agree but whose Parquet schemas differ (a decimal stored as INT32
    or as FIXED_LEN_BYTE_ARRAY, timestamps in ms or us, no ARROW:schema to tell them apart), read
    in one call, alternating: each gets its own schema's stats, as pyarrow's reader of the whole
    file gives them. A footer recognised by its bytes is never asked for its ``schema`` (which
    ties the FileMetaData into a reference cycle per file: garbage for the collector)."""
    import gc

    from airflow_delta_provider.core.expressions import stats as stats_module

    table = pa.table(
        {
            "d": pa.array([Decimal("1.25"), Decimal("-3.50")], pa.decimal128(5, 2)),
            "ts": pa.array([dt.datetime(2024, 1, 1, 0, 0, 0, 1500), None], pa.timestamp("us")),
        }
    )
    variants = [
        {"store_decimal_as_integer": True},
        {"coerce_timestamps": "ms", "allow_truncated_timestamps": True},
        {},
    ]
    paths = []
    for copy in range(3):
        for index, options in enumerate(variants):
            path = tmp_path / f"v{copy}-{index}.parquet"
            pq.write_table(table, path, store_schema=False, **options)
            paths.append(str(path))
    storage = open_store(str(tmp_path))
    columns = [("d",), ("ts",)]
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what a collection finds is kept in gc.garbage to be looked at
    try:
        infos = read_footers(storage, paths, stats_columns=columns)
        gc.collect()
        cycles = sum(type(o).__name__ == "FileMetaData" for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    expected = [stats_module.footer_info(pq.read_metadata(p), columns) for p in paths]
    assert [(i.stats, i.schema) for i in infos] == [(e.stats, e.schema) for e in expected]
    assert json.loads(infos[0].stats)["maxValues"]["ts"] == "2024-01-01T00:00:00.002"  # us, rounded up
    assert json.loads(infos[4].stats)["maxValues"]["ts"] == "2024-01-01T00:00:00.001"  # stored in ms (copy 1)
    assert cycles <= len(variants)  # one per schema (its first footer), not one per file


def _count_local_reads(storage, monkeypatch) -> list[tuple[str, int]]:
    """(path, length) of every ranged read of the local store from now on (the real reads)."""
    reads: list[tuple[str, int]] = []
    original = type(storage).read_range

    def counted(self, path, start, length):
        reads.append((path, length))
        return original(self, path, start, length)

    monkeypatch.setattr(type(storage), "read_range", counted)
    return reads


def test_local_tails_grow_to_the_footers_seen(tmp_path, monkeypatch):
    """Local tails start small (copying them is the cost); a footer larger than the tail is read
    again, exactly, and the next windows' tails hold footers as large as the largest seen: one
    read per file from then on. The stats are those of pyarrow's reader either way."""
    from airflow_delta_provider.core.expressions import stats as stats_module

    wide = pa.table({f"column_{i:03d}": pa.array([i, i + 1], pa.int64()) for i in range(60)})
    paths = []
    for index in range(12):
        path = tmp_path / f"w{index:02d}.parquet"
        pq.write_table(wide, path)
        paths.append(str(path))
    footer = int.from_bytes((tmp_path / "w00.parquet").read_bytes()[-8:-4], "little")
    assert footer > parquet_footer.LOCAL_TAIL_BYTES  # the first window's tails are too short
    storage = open_store(str(tmp_path))
    reads = _count_local_reads(storage, monkeypatch)
    monkeypatch.setattr(stats_module, "FOOTER_WINDOW", 4)
    columns = [(name,) for name in wide.schema.names]
    infos = read_footers(storage, paths, stats_columns=columns)
    assert len(reads) == 4 * 2 + 8  # the first window twice per file, then once
    assert all(length >= footer + 8 for _, length in reads[8:])
    expected = [stats_module.footer_info(pq.read_metadata(p), columns) for p in paths]
    assert [i.stats for i in infos] == [e.stats for e in expected]


def test_local_tails_grow_to_hold_the_float_chunks_of_files_like_the_first(tmp_path, monkeypatch):
    """Files of one write lie alike: once a window had to read its float chunks apart, later
    windows' tails hold them (one read per file), unless they lie further from the end than an
    object store's tail; the stats are those of reading each chunk apart."""
    from airflow_delta_provider.core.expressions import stats as stats_module

    paths = []
    for n, rows in enumerate([3_000] * 8 + [60_000] * 4):
        table = pa.table({"f": [k + 0.5 for k in range(rows)], "s": [f"s{k:08d}" for k in range(rows)]})
        pq.write_table(table, tmp_path / f"p{n:02d}.parquet", use_dictionary=False, compression="none")
        paths.append(str(tmp_path / f"p{n:02d}.parquet"))
    storage = open_store(str(tmp_path))
    reads = _count_local_reads(storage, monkeypatch)
    monkeypatch.setattr(stats_module, "FOOTER_WINDOW", 4)
    infos = read_footers(storage, paths, stats_columns=[("f",), ("s",)])
    # The first window: tail and chunk per file; the second: the tail alone; the third's float
    # chunks (~480 KB before the end) are beyond any tail: read apart again.
    read_paths = [path for path, _ in reads]
    assert [read_paths.count(p) for p in paths] == [2] * 4 + [1] * 4 + [2] * 4
    alone = [read_footers(storage, [path], stats_columns=[("f",), ("s",)])[0] for path in paths]
    assert [i.stats for i in infos] == [i.stats for i in alone]  # each chunk read apart
    assert all('"maxValues"' in i.stats for i in infos)
