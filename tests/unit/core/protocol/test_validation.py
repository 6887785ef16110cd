"""The one gate for values written to the log (core/protocol/validation.py): the typed values inside text
fields, a system domain's configuration and a column's identity and column-mapping metadata, per
class of bad value; and end to end, a commit that would write one is refused with the table as it was.
"""

from __future__ import annotations

import json
import os
import uuid

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import InvalidLogValueError, SchemaError
from airflow_delta_provider.core.protocol.actions import DomainMetadata, Metadata
from airflow_delta_provider.core.protocol.validation import validate_actions

LONG_MAX = 2**63 - 1
TABLE = Metadata("t", json.dumps({"type": "struct", "fields": []}))


def row_tracking(configuration: str, removed: bool = False) -> DomainMetadata:
    return DomainMetadata("delta.rowTracking", configuration, removed)


@pytest.mark.parametrize(
    ("configuration", "message"),
    [
        ("not json", r"'delta.rowTracking' must be a JSON object, got 'not json'"),
        ("[1]", r"must be a JSON object"),
        ("{}", r"rowIdHighWaterMark \(the last row id assigned\) must be an integer .* got None"),
        ('{"rowIdHighWaterMark": "5"}', r"must be an integer .* got '5' \(str\)"),
        ('{"rowIdHighWaterMark": 1.5}', r"must be an integer"),
        ('{"rowIdHighWaterMark": true}', r"must be an integer"),
        ('{"rowIdHighWaterMark": -3}', r"is -3, outside the allowed range of a non-negative Delta long"),
        (json.dumps({"rowIdHighWaterMark": LONG_MAX + 1}), r"past the largest Delta long"),
    ],
)
def test_a_row_tracking_mark_that_is_not_a_non_negative_long_is_refused(configuration, message):
    with pytest.raises(InvalidLogValueError, match=message):
        validate_actions([row_tracking(configuration)], TABLE)


@pytest.mark.parametrize(
    "domain",
    [
        row_tracking(json.dumps({"rowIdHighWaterMark": LONG_MAX})),
        row_tracking(json.dumps({"rowIdHighWaterMark": 0})),
        row_tracking("whatever", removed=True),  # a tombstone's configuration is not read
        DomainMetadata("delta.clustering", json.dumps({"clusteringColumns": [["a", "b"], ["c"]]})),
        DomainMetadata(
            "delta.clustering", json.dumps({"clusteringColumns": ["col-1"]})
        ),  # PROTOCOL.md's flat shape
        DomainMetadata("myApp", "any text: user domains are free-form"),
    ],
)
def test_well_formed_domains_pass(domain):
    validate_actions([domain], TABLE)


@pytest.mark.parametrize("columns", [None, "a", [1], [[]], [["a", 2]], [""]])
def test_a_clustering_domain_that_is_not_a_list_of_column_paths_is_refused(columns):
    domain = DomainMetadata("delta.clustering", json.dumps({"clusteringColumns": columns}))
    with pytest.raises(InvalidLogValueError, match=r"clusteringColumns must be a list of column paths"):
        validate_actions([domain], TABLE)


def metadata_with(column_metadata: dict, nested: bool = False) -> Metadata:
    column = {"name": "id", "type": "long", "nullable": True, "metadata": column_metadata}
    if nested:  # inside the struct elements of an array
        element = {"type": "struct", "fields": [column]}
        column = {
            "name": "items",
            "type": {"type": "array", "elementType": element, "containsNull": True},
            "nullable": True,
            "metadata": {},
        }
    return Metadata("t", json.dumps({"type": "struct", "fields": [column]}))


@pytest.mark.parametrize(
    ("column_metadata", "message"),
    [
        (
            {"delta.identity.highWaterMark": LONG_MAX + 3},
            r"delta.identity.highWaterMark of column '[a-z.]*id'.* is 9223",
        ),
        (
            {"delta.identity.start": -(2**63) - 1},
            r"delta.identity.start of column '[a-z.]*id'.*outside the allowed range",
        ),
        ({"delta.identity.step": 0}, r"delta.identity.step of column '[a-z.]*id' .* is 0"),
        ({"delta.identity.step": "1.5"}, r"delta.identity.step .* must be an integer"),
        ({"delta.identity.start": True}, r"delta.identity.start .* must be an integer"),
        ({"delta.identity.allowExplicitInsert": "yes"}, r"allowExplicitInsert .* must be true or false"),
        ({"delta.columnMapping.id": 2**31}, r"delta.columnMapping.id of column '[a-z.]*id'.*Delta integer"),
        ({"delta.columnMapping.id": "3"}, r"delta.columnMapping.id .* must be an integer"),
        (
            {"delta.columnMapping.physicalName": ""},
            r"physicalName of column '[a-z.]*id' .* must be a non-empty string",
        ),
        ({"delta.columnMapping.physicalName": 7}, r"must be a non-empty string, got 7"),
    ],
)
@pytest.mark.parametrize("nested", [False, True], ids=["top", "in-array"])
def test_schema_values_that_do_not_fit_their_delta_type_are_refused(column_metadata, message, nested):
    with pytest.raises(InvalidLogValueError, match=message) as info:
        validate_actions([metadata_with(column_metadata, nested)], TABLE)
    assert ("'items.element.id'" in str(info.value)) == nested


# --- column mapping: ids and physical names --------------------------------------------------------


def _mapped(name: str, kind: object, column_id: int, physical: str) -> dict:
    return {
        "name": name,
        "type": kind,
        "nullable": True,
        "metadata": {"delta.columnMapping.id": column_id, "delta.columnMapping.physicalName": physical},
    }


#: Hostile column-mapping schemas -> (the mode, the Parquet columns a file of theirs holds, the error).
COLLIDING = {
    "physical names": (
        [_mapped("a", "long", 1, "col-x"), _mapped("b", "long", 2, "col-x")],
        "name",
        {"col-x": [1]},
        r"'a' and 'b' have the same physical name 'col-x' \(DELTA_DUPLICATED_PHYSICAL_NAME\)",
    ),
    "physical names in case": (
        [_mapped("a", "long", 1, "col-x"), _mapped("b", "long", 2, "COL-X")],
        "name",
        {"col-x": [1], "COL-X": [2]},
        r"'a' and 'b' have the same physical name 'COL-X'",
    ),
    "nested physical names": (
        [
            _mapped(
                "s",
                {"type": "struct", "fields": [_mapped("x", "long", 2, "p"), _mapped("y", "long", 3, "p")]},
                1,
                "col-s",
            )
        ],
        "name",
        None,
        r"'s.x' and 's.y' have the same physical name 'p'",
    ),
    "ids (name mode)": (
        [_mapped("a", "long", 1, "col-a"), _mapped("b", "long", 1, "col-b")],
        "name",
        {"col-a": [1], "col-b": [2]},
        r"'a' and 'b' have the same column mapping id 1 \(DELTA_DUPLICATED_COLUMN_ID\)",
    ),
    "ids across depths (id mode)": (
        [
            _mapped("a", "long", 7, "col-a"),
            _mapped(
                "s",
                {
                    "type": "array",
                    "elementType": {"type": "struct", "fields": [_mapped("x", "long", 7, "col-x")]},
                    "containsNull": True,
                },
                2,
                "col-s",
            ),
        ],
        "id",
        None,
        r"'a' and 's.element.x' have the same column mapping id 7",
    ),
}


def _mapped_table(root, fields, mode) -> DeltaTable:
    """A table another engine wrote with these column-mapping assignments (v0), and a file (v1)."""
    log = root / "_delta_log"
    log.mkdir(parents=True)
    metadata = Metadata(
        "t",
        json.dumps({"type": "struct", "fields": fields}),
        configuration={"delta.columnMapping.mode": mode, "delta.columnMapping.maxColumnId": "10"},
    ).to_json()
    actions = [
        {"commitInfo": {"operation": "CREATE TABLE"}},
        {"protocol": {"minReaderVersion": 2, "minWriterVersion": 5}},
        {"metaData": metadata},
    ]
    (log / f"{0:020d}.json").write_text("\n".join(map(json.dumps, actions)) + "\n")
    return DeltaTable(str(root))


@pytest.mark.parametrize("case", list(COLLIDING.values()), ids=list(COLLIDING))
def test_columns_sharing_a_mapping_id_or_physical_name_are_refused_to_readers_and_writers(
    tmp_path, table_state, case
):
    """Readers resolve mapped columns by physical name or id: two columns sharing one would read one
    column's data as the other's (or fail inside pyarrow). Delta refuses such a schema; so does the
    core, when it is committed, when a commit builds on it, and when the files are read."""
    fields, mode, columns, message = case
    root = tmp_path / "t"
    table = _mapped_table(root, fields, mode)
    with pytest.raises(SchemaError, match=message):  # a commit writing the schema
        validate_actions(
            [
                Metadata(
                    "t",
                    json.dumps({"type": "struct", "fields": fields}),
                    configuration={"delta.columnMapping.mode": mode},
                )
            ],
            TABLE,
        )
    with pytest.raises(SchemaError, match=message):  # the gate of every commit building on it
        validate_actions([], table.snapshot().metadata)
    attempts = [lambda: table.snapshot().to_pyarrow_table(), lambda: table.changes(0).to_pyarrow_table()]
    if columns is not None:  # a file the table's columns match, committed
        pq.write_table(pa.table(columns), root / "f.parquet")
        attempts.append(lambda: table.commit_files(["f.parquet"]))
    before = table_state(root)
    for attempt in attempts:
        with pytest.raises(SchemaError, match=message):
            attempt()
    assert table_state(root) == before


def test_without_column_mapping_physical_names_are_not_read(tmp_path):
    fields = [_mapped("a", "long", 1, "col-x"), _mapped("b", "long", 1, "col-x")]
    table = _mapped_table(tmp_path / "t", fields, "none")
    pq.write_table(pa.table({"a": [1], "b": [2]}), tmp_path / "t" / "f.parquet")
    table.commit_files(["f.parquet"])
    assert table.snapshot().to_pyarrow_table().to_pylist() == [{"a": 1, "b": 2}]


def test_identity_values_as_delta_rs_writes_them_pass():
    strings = {
        "delta.identity.start": "1",
        "delta.identity.step": "-1",
        "delta.identity.allowExplicitInsert": "true",
    }
    validate_actions([metadata_with({**strings, "delta.identity.highWaterMark": LONG_MAX})], TABLE)


def test_an_identity_mark_moved_past_the_largest_long_refuses_the_commit(tmp_path, log_state):
    identity = {
        "delta.identity.start": 0,
        "delta.identity.step": 10,
        "delta.identity.allowExplicitInsert": False,
    }
    table = DeltaTable.create(
        str(tmp_path / "t"),
        json.dumps(
            {
                "type": "struct",
                "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": identity}],
            }
        ),
    )
    relative = f"w-{uuid.uuid4().hex[:8]}.parquet"
    # A legal long, but off the start/step grid: Delta rounds the mark up to the next step, past 2^63 - 1.
    pq.write_table(
        pa.table({"id": pa.array([LONG_MAX - 3], pa.int64())}), os.path.join(table.storage.root, relative)
    )
    before = (table.version(), table.snapshot().files().num_rows, log_state(table.uri))
    with pytest.raises(
        InvalidLogValueError, match=rf"highWaterMark of column '[a-z.]*id'.* is {LONG_MAX + 3}, outside"
    ):
        table.commit_files([relative], identity_generated=["id"])
    after = DeltaTable(table.uri)
    assert (after.version(), after.snapshot().files().num_rows, log_state(table.uri)) == before
