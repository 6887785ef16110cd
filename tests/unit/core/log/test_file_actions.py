"""File actions as Arrow: the columnar check refuses what the per-action check refuses."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from airflow_delta_provider.core.log.file_actions import (
    ADD_SCHEMA,
    REMOVE_SCHEMA,
    first_bad_file_row,
    may_climb,
    rows_to_table,
)
from airflow_delta_provider.core.protocol.action_checks import action_problem
from airflow_delta_provider.core.storage.paths import escapes_root

from ..conftest import DV

GOOD = {"path": "ok.parquet", "partitionValues": {}, "size": 1, "modificationTime": 1, "dataChange": True}
SCHEMAS = {"add": ADD_SCHEMA, "remove": REMOVE_SCHEMA}

BAD_ROWS: list[tuple[str, str, dict[str, Any], str]] = [
    ("null-size", "add", {"size": None}, "add.size is null"),
    ("negative-size", "add", {"size": -1}, "add.size is -1"),
    ("empty-path", "add", {"path": ""}, "add.path is empty"),
    ("null-data-change", "remove", {"dataChange": None}, "remove.dataChange is null"),
    ("path-leaves-root", "add", {"path": "a/../../x.parquet"}, "leads out of the table root"),
    ("encoded-path-leaves-root", "remove", {"path": "%2e%2E/x.parquet"}, "leads out of the table root"),
    ("dv-unknown-type", "add", {"deletionVector": {**DV, "storageType": "z"}}, "storageType must be"),
    ("dv-null-cardinality", "add", {"deletionVector": {**DV, "cardinality": None}}, "cardinality is null"),
    (
        "dv-u-prefix-leaves-root",
        "add",
        {"deletionVector": {**DV, "pathOrInlineDv": "../../" + DV["pathOrInlineDv"][-20:]}},
        "leads out of the table root",
    ),
    (
        "dv-p-leaves-root",
        "add",
        {"deletionVector": {**DV, "storageType": "p", "pathOrInlineDv": "../dv.bin"}},
        "leads out of the table root",
    ),
]


@pytest.mark.parametrize(
    ("kind", "change", "fragment"), [b[1:] for b in BAD_ROWS], ids=[b[0] for b in BAD_ROWS]
)
def test_the_first_bad_row_is_found_and_the_per_action_check_refuses_it_too(kind, change, fragment):
    bad = {**GOOD, **change}
    rows = [{**GOOD, "path": f"f{i}.parquet"} for i in range(3)] + [bad, {**GOOD, "path": "after.parquet"}]
    found = first_bad_file_row(rows_to_table(rows, SCHEMAS[kind]), kind)
    assert found is not None
    row, problem = found
    assert row == 3 and fragment in problem
    assert action_problem({kind: bad}) is not None


@pytest.mark.parametrize("kind", ["add", "remove"])
def test_well_formed_rows_pass(kind):
    rows = [
        {**GOOD, "path": "a/../b.parquet"},
        {**GOOD, "path": "d..e.parquet", "deletionVector": DV},
        {**GOOD, "path": "s3://bucket/../x.parquet"},
    ]
    assert first_bad_file_row(rows_to_table(rows, SCHEMAS[kind]), kind) is None
    assert first_bad_file_row(rows_to_table([], SCHEMAS[kind]), kind) is None


PATHS = [
    "../x",
    "a/../../x",
    "%2e%2E/x",
    "x/.%2e/%2E./y",
    "a/../b",
    "a/./b",
    "plain.parquet",
    "%20a/b",
    "dir/f.parquet",
]


@pytest.mark.parametrize("lead", ["", "a", "ab"], ids=["even", "odd", "even-again"])
def test_may_climb_never_misses_a_path_that_leaves_the_root(lead):
    """Each path alone, after a prefix of either parity and in a slice of a larger array: the byte
    scan answers True whenever the exact check finds a climb, and False without a ``..`` or ``%2E``."""
    for path in PATHS:
        text = lead + "/" + path if lead else path
        array = pa.array(["filler", text, "more filler"]).slice(1, 1)
        if escapes_root(text):
            assert may_climb(array), text
            assert may_climb(pa.chunked_array([pa.array(["q"]), array]))
        if ".." not in text and "%2e" not in text.lower():
            assert not may_climb(array), text
    assert not may_climb(pa.array([None, None], pa.string()))
    assert not may_climb(pa.array([], pa.string()))
