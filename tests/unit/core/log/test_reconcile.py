"""The columnar route of the file replay (Arrow's JSON reader) against the exact route.

Whenever the columnar route answers, its adds, removes and touched keys are identical to the
exact route's (``json`` and ``action_problem`` per action); lines it cannot represent exactly
take the exact route one by one, and anything it cannot vouch for sends the whole segment to
the exact route, which names the file and line of a malformed action.
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_delta_provider.core import CorruptLogError, DeltaError, DeltaTable
from airflow_delta_provider.core.log import reconcile
from airflow_delta_provider.core.log.commits import read_commits
from airflow_delta_provider.core.log.replay import log_partition_keys, replay_small_state
from airflow_delta_provider.core.log.segment import build_segment

from ..conftest import DV, add, commit_info, metadata, protocol, remove

if TYPE_CHECKING:
    import pyarrow as pa

CORPUS = Path(
    os.environ.get("DELTA_CONFORMANCE_DIR", Path(__file__).resolve().parents[3] / "conformance" / "corpus")
)


def _routes(root: Path | str) -> tuple[Any, tuple[pa.Table, pa.Table, Any]]:
    """(columnar result or None, exact result) of the table's latest version."""
    storage = DeltaTable(str(root)).storage
    segment = build_segment(storage)
    small = replay_small_state(storage, segment, read_commits(storage, segment))
    columns = log_partition_keys(small)
    columnar = reconcile._columnar_file_actions(storage.path, read_commits(storage, segment), columns)
    exact = reconcile._reconcile_exact(storage, read_commits(storage, segment))
    return columnar, exact


def _assert_same(columnar: Any, exact: tuple[pa.Table, pa.Table, Any]) -> None:
    assert columnar is not None, "the columnar route gave up"
    for got, want in zip(columnar[:2], exact[:2], strict=True):
        assert got.schema == want.schema
        assert got.to_pylist() == want.to_pylist()
        assert got.equals(want)
    assert columnar[2].keys == exact[2].keys
    assert set(columnar[2].path_values.to_pylist()) == set(exact[2].path_values.to_pylist())


def _write(root: Path, commits: list[list[Any]]) -> None:
    """Commit files of actions (dicts, dumped compactly or spaced at random; bytes, written as is)."""
    log = root / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    for version, actions in enumerate(commits):
        lines = []
        for action in actions:
            if isinstance(action, bytes):
                lines.append(action)
            else:
                spaced = version % 2 == 0
                lines.append(json.dumps(action, separators=None if spaced else (",", ":")).encode())
        (log / f"{version:020d}.json").write_bytes(b"\n".join(lines) + b"\n")


def _table(root: Path, partition_columns: list[str], *commits: list[Any]) -> Path:
    first = [commit_info("CREATE TABLE"), protocol(), metadata(partition_columns=partition_columns)]
    _write(root, [first, *commits])
    return root


def _padd(path: str, values: dict[str, Any], **extra: Any) -> dict[str, Any]:
    action = add(path, **extra)
    action["add"]["partitionValues"] = values
    return action


# --- identical state on tricky logs -------------------------------------------------------


def test_plain_partitioned_log(tmp_path):
    root = _table(
        tmp_path,
        ["a", "b"],
        [commit_info(), _padd("a=1/b=x/f1", {"a": "1", "b": "x"}, stats='{"numRecords":1}')],
        [
            _padd("a=2/b=y/f2", {"a": "2", "b": "y"}),
            remove("a=1/b=x/f1", partitionValues={"a": "1", "b": "x"}),
        ],
    )
    columnar, exact = _routes(root)
    _assert_same(columnar, exact)
    assert exact[0].column("partitionValues").to_pylist() == [[("a", "2"), ("b", "y")]]


def test_tags_null_and_missing_partition_values_and_key_order(tmp_path):
    root = _table(
        tmp_path,
        ["a", "b"],
        [
            _padd("t", {"a": "1", "b": "2"}, tags={"INSERTION_TIME": "1", "none": None}),
            _padd("n", {"a": None, "b": "2"}),
            _padd("m", {"b": "2"}),
            _padd("r", {"b": "2", "a": "1"}),
            _padd("e", {"a": "", "b": "2"}, tags={}),
            _padd("plain", {"a": "1", "b": "2"}, tags=None),
        ],
    )
    columnar, exact = _routes(root)
    _assert_same(columnar, exact)
    values = dict(
        zip(exact[0].column("path").to_pylist(), exact[0].column("partitionValues").to_pylist(), strict=True)
    )
    assert values["n"] == [("a", None), ("b", "2")]
    assert values["m"] == [("b", "2")]
    assert values["r"] == [("b", "2"), ("a", "1")]
    assert exact[0].column("tags").to_pylist()[0] == [("INSERTION_TIME", "1"), ("none", None)]


def test_escaped_and_unicode_paths_and_canonical_forms(tmp_path):
    root = _table(
        tmp_path,
        ["p"],
        [
            _padd('p=\u00e9/q"uote\\back', {"p": "\u00e9\n\t\u2603"}),
            b'{"add":{"path":"p=\\u00e9/esc\\/aped","partitionValues":{"p":"\\u2603"},"size":1,'
            b'"modificationTime":2,"dataChange":true}}',
            json.dumps(_padd("p=\U0001f600/emoji", {"p": "\U0001f600"}), ensure_ascii=False).encode(),
            _padd("p=1/a%20b", {"p": "1"}),
            _padd(f"file://{tmp_path}/p=1/abs", {"p": "1"}),
        ],
        [remove("p=1/a b"), remove("p=1/abs")],
    )
    columnar, exact = _routes(root)
    _assert_same(columnar, exact)
    assert "p=1/a%20b" not in exact[0].column("path").to_pylist()
    assert exact[1].num_rows == 2


def test_deletion_vectors_duplicates_and_remove_then_add(tmp_path):
    root = _table(
        tmp_path,
        [],
        [add("f"), add("g"), add("g"), add("h", deletionVector=DV)],
        [remove("f"), add("h", deletionVector={**DV, "offset": 9}), remove("h", deletionVector=DV)],
        [add("f", size=99), remove("g"), add("g", size=7)],
    )
    columnar, exact = _routes(root)
    _assert_same(columnar, exact)
    assert sorted(exact[0].column("path").to_pylist()) == ["f", "g", "h"]
    assert exact[0].column("deletionVector").to_pylist()[0]["offset"] == 9


def test_unknown_fields_and_actions_are_ignored_alike(tmp_path):
    root = _table(
        tmp_path,
        [],
        [
            {"add": {**add("f")["add"], "futureField": {"x": [1, 2]}, "other": None}},
            {"remove": {**remove("old")["remove"], "tags": {"x": "y"}, "stats": "{}", "size": 3}},
            {"someFutureAction": {"x": 1}},
            {"add": add("g")["add"], "futureKeyBesideTheAction": ["a", "1"]},
            {"cdc": {"path": "_change_data/x", "partitionValues": {}, "size": 1, "dataChange": False}},
        ],
    )
    columnar, exact = _routes(root)
    _assert_same(columnar, exact)


def test_no_file_actions(tmp_path):
    root = _table(tmp_path, [], [commit_info()])
    columnar, exact = _routes(root)
    _assert_same(columnar, exact)


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(
            {"add": {**add("f")["add"], "partitionValues": {"zzz": "1"}}}, id="unknown-partition-key"
        ),
        pytest.param({"add": add("f")["add"], "futureKey": ["a", 1]}, id="unknown-field-of-mixed-types"),
        pytest.param(
            b'{"add":{"path":"\\ud83d\\ude00","partitionValues":{},"size":1,'
            b'"modificationTime":1,"dataChange":true}}',
            id="escaped-surrogate-pair",
        ),
        pytest.param(
            b'{"add":{"path":"x","path":"y","partitionValues":{},"size":1,'
            b'"modificationTime":1,"dataChange":true}}',
            id="duplicate-key",
        ),
    ],
)
def test_what_arrow_cannot_vouch_for_takes_the_exact_route(tmp_path, line):
    root = _table(tmp_path, [], [add("f0"), line])
    columnar, exact = _routes(root)
    assert columnar is None
    assert DeltaTable(str(root)).snapshot().files().column("path").equals(exact[0].column("path"))


def test_seeded_random_logs(tmp_path):
    """Random mixes of every case above: the routes agree on each."""
    for seed in range(12):
        rng = random.Random(seed)
        columns = rng.choice([[], ["a"], ["a", "b"]])
        names = [f"d{i}" for i in range(8)] + ["sp ace", "%41", "\u00e9"]
        commits = []
        for _ in range(rng.randint(1, 12)):
            actions: list[Any] = [commit_info()]
            for _ in range(rng.randint(0, 5)):
                path = rng.choice(names)
                extra: dict[str, Any] = {}
                if rng.random() < 0.2:
                    extra["deletionVector"] = {**DV, "offset": rng.randint(0, 2)}
                if rng.random() < 0.2:
                    extra["tags"] = {"k": rng.choice(["v", None])}
                if rng.random() < 0.3:
                    extra["stats"] = json.dumps({"numRecords": rng.randint(0, 9)})
                if rng.random() < 0.3:
                    extra["baseRowId"] = rng.choice([0, 7, None])
                    extra["defaultRowCommitVersion"] = rng.randint(0, 3)
                values = {c: rng.choice(["1", "x", None, ""]) for c in columns}
                if columns and rng.random() < 0.2:
                    values.pop(rng.choice(columns))
                if rng.random() < 0.2:
                    values = dict(reversed(values.items()))
                if rng.random() < 0.6:
                    actions.append(_padd(path, values, **extra))
                else:
                    actions.append(remove(path, partitionValues=values, **extra))
            commits.append(actions)
        root = _table(tmp_path / str(seed), columns, *commits)
        columnar, exact = _routes(root)
        _assert_same(columnar, exact)


def test_conformance_tables_agree():
    """Every table of the shared corpus the core loads: the routes give the same state."""
    roots = sorted(p.parent for p in (CORPUS / "tables").glob("**/_delta_log") if p.is_dir())
    assert roots, f"no conformance tables under {CORPUS}"
    answered = set()
    for root in roots:
        try:
            columnar, exact = _routes(root)
        except DeltaError:
            continue  # unsupported or corrupt on purpose: the conformance suite checks those
        if columnar is not None:
            _assert_same(columnar, exact)
            answered.add(root.name if root.name != "delta" else root.parent.name)
    assert len(answered) >= len(roots) // 2
    # Partition values keyed by physical names (a renamed partition column), and a log with
    # keys beside its actions that no protocol action uses: both answered by the columnar route.
    assert {"table_with_partitioning_mapping", "transaction_log_schema_evolvability"} <= answered


# --- corrupt lines: named by file and line, the table unchanged ---------------------------


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (
            b'{"add":{"path":"x","partitionValues":{},"size":-1,"modificationTime":1,"dataChange":true}}',
            "add.size",
        ),
        (
            b'{"add":{"path":null,"partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}',
            "add.path is null",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1.0,"modificationTime":1,"dataChange":true}}',
            "add.size",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1}}',
            "add.dataChange is missing",
        ),
        (b'{"add":{"path":"x","size":1,"modificationTime":1,"dataChange":true}}', "add.partitionValues"),
        (
            b'{"add":{"path":"","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}',
            "add.path",
        ),
        (
            b'{"add":{"path":"../x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}',
            "out of the table root",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{"p":1},"size":1,"modificationTime":1,"dataChange":true}}',
            "partitionValues",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,'
            b'"tags":{"a":1}}}',
            "add.tags",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,'
            b'"deletionVector":{"storageType":"u","pathOrInlineDv":"x","sizeInBytes":1,"cardinality":1}}}',
            "shorter than a Z85 UUID",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}',
            "not valid JSON",
        ),
        (b'{"add":null}', "not an object"),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":null,"dataChange":true}}',
            "add.modificationTime is null",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,'
            b'"baseRowId":"7"}}',
            "add.baseRowId",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true,'
            b'"stats":{"numRecords":1}}}',
            "add.stats",
        ),
        (b'{"remove":{"path":"x","dataChange":true,"size":2.5}}', "remove.size"),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true},'
            b'"remove":{"path":"x","dataChange":true}}',
            "holds 2 actions",
        ),
        (b'{"remove":{"path":"x"}}', "remove.dataChange is missing"),
        (
            b'{"add":{"path":"\xff","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}',
            "not valid JSON",
        ),
        (
            b'{"add":{"path":"x\\ud800","partitionValues":{},"size":1,"modificationTime":1,"dataChange":true}}',
            "not valid Unicode",
        ),
        (
            b'{"add":{"path":"x","partitionValues":{},"size":1,"modificationTime":1,"dataChange":"yes"}}',
            "add.dataChange",
        ),
    ],
)
def test_corrupt_file_line_is_named(tmp_path, line, message):
    root = _table(tmp_path, ["p"] if b'"p"' in line else [], [add("ok")], [commit_info(), add("ok2"), line])
    before = {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()}
    with pytest.raises(CorruptLogError, match=message) as info:
        DeltaTable(str(root)).snapshot().files()
    if "Unicode" not in message:
        assert "Line 3 of " in str(info.value)
    assert info.value.path.endswith("00000000000000000002.json")
    assert {p.name: p.read_bytes() for p in (root / "_delta_log").iterdir()} == before


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(lambda lines: b"\r\n".join(lines) + b"\r\n", id="crlf"),
        pytest.param(lambda lines: b"\n\n".join(lines) + b"\n \n", id="blank-lines"),
        pytest.param(lambda lines: b"\n".join(b" \t" + line + b"  " for line in lines), id="indented"),
    ],
)
def test_odd_line_layouts_agree(tmp_path, layout):
    """The JSON reader gets the commits' own text with the other lines blanked: whitespace
    around lines, carriage returns and blank lines give the state the exact route gives."""
    root = _table(
        tmp_path,
        ["a"],
        [commit_info(), _padd("a=1/f1", {"a": "1"}), _padd("a=2/f2", {"a": "2"}, tags={"k": "v"})],
        [{"txn": {"appId": "x", "version": 1}}, remove("a=1/f1", partitionValues={"a": "1"}), commit_info()],
    )
    for path in sorted((root / "_delta_log").glob("*.json")):
        path.write_bytes(layout(path.read_bytes().splitlines()))
    columnar, exact = _routes(root)
    _assert_same(columnar, exact)
    assert exact[0].column("path").to_pylist() == ["a=2/f2"]
