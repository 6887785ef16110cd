"""Splitting commit files: the scan of many commits at once against the per-line rule.

``split_commits`` (the route every read takes: the contents joined, numpy finds the lines that
do not start with a file action, Python looks only at those) must give exactly what
``_split_lines`` (strip each line, skip the blank ones, sort by the ``{"add"``/``{"remove"``
prefix) gives: the same other lines with the same numbers, the same file lines, and a text of
JSON lines holding the file lines only, in order. Corrupt input is named by file and line
whichever way a commit is laid out, and a writer never builds on it.
"""

from __future__ import annotations

import json
import os
import random
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import CorruptLogError, DeltaTable
from airflow_delta_provider.core.log.commits import (
    _split_lines,
    parse_commit,
    read_commits,
    segment_file_lines,
    split_commits,
)
from airflow_delta_provider.core.log.segment import build_segment

from ..conftest import add, commit_info, metadata, protocol, remove

if TYPE_CHECKING:
    from pathlib import Path

_SMALL = [
    json.dumps(commit_info()).encode(),
    b'{"txn":{"appId":"a","version":3,"lastUpdated":1}}',
    json.dumps(protocol()).encode(),
    json.dumps(metadata()).encode(),
    b'{"commitInfo":{"nested":{"add":{"path":"not a file action"}}}}',
    b"\x00\xff\x13\x37",  # junk: kept as another line, refused when parsed
    b'{"addx":1}',
    b'{"removed":true}',
]
_FILES = [
    json.dumps(add("a/f1", stats='{"numRecords":1}'), separators=(",", ":")).encode(),
    json.dumps(remove("a/f2")).encode(),
    b'{"add":{"path":"\\u00e9","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}',
    b'{"remove" : {"path":"x","dataChange":false}}',
]
_SPACE = [b"", b" ", b"\t", b"\r", b" \t\r", b"\x0b", b"\x0c"]


def _random_commit(rng: random.Random) -> bytes:
    lines = []
    for _ in range(rng.randint(0, 12)):
        kind = rng.random()
        if kind < 0.55:
            line = rng.choice(_FILES)
        elif kind < 0.85:
            line = rng.choice(_SMALL)
        else:
            line = b""
        if rng.random() < 0.2:
            line = rng.choice(_SPACE) + line
        if rng.random() < 0.2:
            line += rng.choice(_SPACE)
        lines.append(line)
    data = b"\n".join(lines)
    return data + b"\n" if rng.random() < 0.7 else data


def _non_blank_lines(text: bytes | bytearray) -> list[bytes]:
    return [line.strip() for line in bytes(text).split(b"\n") if line.strip()]


def _expected(data: bytes) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    return _split_lines(data)


def test_the_scan_and_the_per_line_rule_agree_on_seeded_random_commits():
    for seed in range(300):
        rng = random.Random(seed)
        contents = [_random_commit(rng) for _ in range(rng.randint(1, 6))]
        if any(not _expected(d)[0] and not _expected(d)[1] for d in contents):
            continue  # an empty commit: test_an_empty_commit_is_named
        files = [(v, f"{v:020d}.json", d) for v, d in enumerate(contents)]
        commits = split_commits(files)
        for commit, data in zip(commits, contents, strict=True):
            small, file_lines = _expected(data)
            assert commit.small_lines == small, (seed, data)
            assert commit.file_lines == file_lines, (seed, data)
            assert commit.file_line_count == len(file_lines)
            alone = split_commits([(commit.version, commit.path, data)])[0]
            assert (alone.small_lines, alone.file_lines) == (small, file_lines)
        # The text handed to the JSON reader: the file lines, in order, the rest blank.
        if any(_SMALL[5] in d for d in contents):
            continue  # the junk line fails to parse (test_a_bad_line_is_named_in_every_layout...)
        found = segment_file_lines(commits)
        assert found is not None
        text, starts = found
        assert _non_blank_lines(text) == [line for c in commits for _, line in c.file_lines], seed
        assert starts[-1] == sum(c.file_line_count for c in commits)


def test_one_commit_parsed_alone_is_split_as_the_scan_splits_it():
    """``parse_commit`` (one file, the per-line rule) leaves the lines, the count and the text
    with its other lines blanked exactly as :func:`split_commits` does."""
    for seed in range(300):
        data = _random_commit(random.Random(seed))
        small, file_lines = _expected(data)
        if not small and not file_lines:
            with pytest.raises(CorruptLogError, match="is empty"):
                parse_commit(7, "7.json", data)
            continue
        alone, scanned = parse_commit(7, "7.json", data), split_commits([(7, "7.json", data)])[0]
        assert (alone.small_lines, alone.file_lines, alone.file_line_count) == (
            small,
            file_lines,
            len(file_lines),
        )
        if _SMALL[5] not in data:  # the junk line fails to parse (as in the test above)
            assert segment_file_lines([alone]) == segment_file_lines([scanned]), seed


def test_a_segment_of_other_commits_gets_its_own_text():
    files = [(v, f"{v}.json", b'{"commitInfo":{}}\n' + _FILES[0] + b"\n") for v in range(4)]
    commits = split_commits(files)
    whole, _ = segment_file_lines(commits)  # type: ignore[misc]
    part, starts = segment_file_lines([commits[1], commits[3]])  # type: ignore[misc]
    assert _non_blank_lines(whole) == [_FILES[0]] * 4
    assert _non_blank_lines(part) == [_FILES[0]] * 2 and starts == [0, 1, 2]


@pytest.mark.parametrize(
    "data", [b"", b"\n", b" \n\t\n", b"\r\n\r\n"], ids=["empty", "newline", "spaces", "crlf"]
)
def test_an_empty_commit_is_named(data):
    with pytest.raises(CorruptLogError, match=r"00000000000000000007\.json is empty") as info:
        split_commits([(6, "ok.json", b'{"commitInfo":{}}'), (7, "/log/00000000000000000007.json", data)])
    assert info.value.path == "/log/00000000000000000007.json"


# --- whole tables: odd layouts read as the per-line rule reads them, bad lines named ---------------------


def _write_parquet(root: str, name: str) -> str:
    pq.write_table(pa.table({"id": pa.array([1, 2], pa.int64())}), os.path.join(root, name))
    return name


def _table(tmp_path: Path) -> DeltaTable:
    table = DeltaTable.create(str(tmp_path / "t"), pa.schema([("id", pa.int64())]))
    for i in (1, 2):
        table.commit_files([_write_parquet(table.storage.root, f"f{i}.parquet")], auto_checkpoint=False)
    return table


def _relayout(table: DeltaTable, version: int, how: Any) -> None:
    path = os.path.join(table.storage.log_dir, f"{version:020d}.json")
    with open(path, "rb") as f:
        lines = f.read().splitlines()
    with open(path, "wb") as f:
        f.write(how(lines))


LAYOUTS = {
    "crlf": lambda lines: b"\r\n".join(lines) + b"\r\n",
    "blank-lines": lambda lines: b"\n\n".join(lines) + b"\n\n",
    "indented": lambda lines: b"\n".join(b"  " + line + b" \t" for line in lines),
    "no-final-newline": lambda lines: b"\n".join(lines),
}


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_odd_layouts_read_the_same(tmp_path, layout):
    table = _table(tmp_path)
    expected = table.snapshot().files().to_pylist()
    for version in (0, 1, 2):
        _relayout(table, version, LAYOUTS[layout])
    snapshot = DeltaTable(table.uri).snapshot()
    assert snapshot.files().to_pylist() == expected
    snapshot.check_replayable()


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_a_bad_line_is_named_in_every_layout_and_nothing_is_written(tmp_path, log_state, layout):
    table = _table(tmp_path)
    _relayout(table, 1, lambda lines: b"\n".join([*lines[:1], b'{"add": garbage}', *lines[1:]]))
    _relayout(table, 1, LAYOUTS[layout])
    line = 3 if layout == "blank-lines" else 2  # blank lines count in the numbering
    pattern = rf"Line {line} of .*00000000000000000001\.json"
    before = log_state(table.storage.root)
    with pytest.raises(CorruptLogError, match=pattern):
        table.commit_files([_write_parquet(table.storage.root, "new.parquet")], app_id="app", app_version=1)
    with pytest.raises(CorruptLogError, match=pattern):
        DeltaTable(table.uri).snapshot().files()
    assert log_state(table.storage.root) == before
    assert table.version() == 2


def test_a_commit_gone_between_listing_and_reading_is_named(tmp_path):
    """The commits of a segment are read in one go; one deleted after the listing (log cleanup
    at the same time) is named, and loading again is the advice."""
    table = _table(tmp_path)
    segment = build_segment(table.storage)
    gone = os.path.join(table.storage.log_dir, f"{1:020d}.json")
    os.remove(gone)
    with pytest.raises(
        CorruptLogError, match=r"00000000000000000001\.json disappeared .* Load the table again"
    ):
        read_commits(table.storage, segment)
