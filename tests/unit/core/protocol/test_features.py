from __future__ import annotations

import pyarrow as pa
import pytest

from airflow_delta_provider.core.errors import CorruptLogError, ProtocolError, UnsupportedFeatureError
from airflow_delta_provider.core.protocol.actions import Metadata, Protocol
from airflow_delta_provider.core.protocol.features import (
    FEATURES,
    Operation,
    Support,
    check_supported,
    deletion_vectors_writable,
    reader_features,
    writer_features,
)

ARROW_SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.string())])


def check_readable(protocol: Protocol) -> None:
    check_supported(protocol, None, Operation.READ)


def test_legacy_versions_imply_features():
    assert reader_features(Protocol(2, 5)) == {"columnMapping"}
    assert "generatedColumns" in writer_features(Protocol(1, 4))
    assert writer_features(Protocol(1, 2)) == {"appendOnly", "invariants"}


def test_explicit_features_at_reader_3_writer_7():
    protocol = Protocol.from_json(
        {
            "minReaderVersion": 3,
            "minWriterVersion": 7,
            "readerFeatures": ["deletionVectors"],
            "writerFeatures": ["deletionVectors", "appendOnly"],
        }
    )
    assert reader_features(protocol) == {"deletionVectors"}
    assert writer_features(protocol) == {"deletionVectors", "appendOnly"}
    check_readable(protocol)


def test_unknown_reader_feature_is_refused_by_name():
    protocol = Protocol(3, 7, frozenset({"deletionVectors", "catalogManaged"}), frozenset())
    with pytest.raises(UnsupportedFeatureError, match="catalogManaged") as info:
        check_readable(protocol)
    assert info.value.feature == "catalogManaged"


def test_unknown_reader_version_is_refused():
    with pytest.raises(UnsupportedFeatureError, match="reader version 4") as info:
        check_readable(Protocol(4, 7))
    assert info.value.feature == "minReaderVersion=4"


@pytest.mark.parametrize(
    "protocol", [Protocol(0, 2), Protocol(2, 5, reader_features=frozenset({"columnMapping"}))]
)
def test_invalid_protocols(protocol):
    with pytest.raises(ProtocolError):
        check_readable(protocol)


def test_protocol_action_missing_versions_is_corrupt():
    with pytest.raises(CorruptLogError, match="minReaderVersion"):
        Protocol.from_json({"minWriterVersion": 2})


SCHEMA = '{"type":"struct","fields":[{"name":"id","type":"long","nullable":true,"metadata":{}}]}'


def metadata(configuration: dict[str, str] | None = None, schema: str = SCHEMA) -> Metadata:
    return Metadata(id="t", schema_string=schema, partition_columns=(), configuration=configuration or {})


def writer_only(*features: str) -> Protocol:
    return Protocol(1, 7, None, frozenset(features))


DELETES = (Operation.DELETE, Operation.COPY_ON_WRITE_DELETE)


@pytest.mark.parametrize("operation", list(Operation))
def test_every_feature_states_what_every_operation_does(operation):
    for feature in FEATURES.values():
        assert feature.support[operation] in Support


@pytest.mark.parametrize(
    ("feature", "refused_by"),
    [
        ("appendOnly", set()),
        ("deletionVectors", set()),
        ("rowTracking", {Operation.OPTIMIZE}),
        ("allowColumnDefaults", {Operation.WRITE, Operation.OPTIMIZE, *DELETES}),
        ("icebergCompatV2", {Operation.WRITE, Operation.VACUUM, Operation.OPTIMIZE, *DELETES}),
        ("columnMapping", set()),
        ("typeWidening", set()),
        ("clustering", set()),
        ("liquid", {Operation.WRITE, Operation.OPTIMIZE, *DELETES}),
        ("geospatial", set(Operation) - {Operation.READ}),
        ("someFutureFeature", set(Operation) - {Operation.READ}),
    ],
)
def test_writer_features_per_operation(feature, refused_by):
    protocol = writer_only(feature)
    for operation in Operation:
        if operation in refused_by:
            with pytest.raises(UnsupportedFeatureError, match=feature) as info:
                check_supported(protocol, metadata(), operation)
            assert (info.value.feature, info.value.operation) == (feature, operation.value)
        else:
            check_supported(protocol, metadata(), operation)


@pytest.mark.parametrize(
    ("feature", "used"),
    [
        ("columnMapping", metadata({"delta.columnMapping.mode": "name"})),
        (
            "invariants",
            metadata(schema=SCHEMA.replace('"metadata":{}', '"metadata":{"delta.invariants":"x"}')),
        ),
        ("checkConstraints", metadata({"delta.constraints.positive": "id > 0"})),
    ],
)
def test_features_that_bind_data_are_honoured_when_used(feature, used):
    protocol = writer_only(feature)
    for operation in (Operation.WRITE, Operation.CHECKPOINT, Operation.LOG_CLEANUP, Operation.VACUUM):
        check_supported(protocol, used, operation)


def test_catalog_managed_tables_are_refused_naming_the_catalog():
    protocol = Protocol(1, 7, None, frozenset({"catalogManaged"}))
    with pytest.raises(UnsupportedFeatureError, match="catalog-managed"):
        check_supported(protocol, metadata(), Operation.VACUUM)


def test_writer_only_names_listed_as_reader_features_are_not_readable():
    with pytest.raises(UnsupportedFeatureError, match="appendOnly"):
        check_readable(Protocol(3, 7, frozenset({"appendOnly"}), frozenset({"appendOnly"})))


def test_optimize_and_purge_rewrite_column_mapped_tables():
    """OPTIMIZE and REORG PURGE (both ``Operation.OPTIMIZE``) write physical names and field ids."""
    protocol = writer_only("columnMapping")
    for mode in ("none", "name", "id"):
        check_supported(protocol, metadata({"delta.columnMapping.mode": mode}), Operation.OPTIMIZE)


def test_optimize_refuses_everything_a_write_refuses():
    for feature in FEATURES.values():
        if feature.support[Operation.WRITE] is not Support.YES:
            assert feature.support[Operation.OPTIMIZE] is not Support.YES, feature.name


def test_deletes_refuse_everything_a_write_refuses():
    for feature in FEATURES.values():
        if feature.support[Operation.WRITE] is not Support.YES:
            for operation in DELETES:
                assert feature.support[operation] is not Support.YES, (feature.name, operation)


def test_a_copy_on_write_delete_is_refused_only_where_row_tracking_is_enabled():
    """Deletion vectors keep every row (and its id) in place; a rewrite would give copied rows new
    ids, which a table that enables row tracking promises never happens."""
    protocol = writer_only("rowTracking", "domainMetadata")
    enabled = metadata({"delta.enableRowTracking": "true"})
    check_supported(protocol, metadata(), Operation.COPY_ON_WRITE_DELETE)  # supported, not enabled
    check_supported(protocol, enabled, Operation.DELETE)
    with pytest.raises(UnsupportedFeatureError) as info:
        check_supported(protocol, enabled, Operation.COPY_ON_WRITE_DELETE)
    assert (info.value.feature, info.value.operation) == ("rowTracking", "copy-on-write delete")
    assert "delta.enableRowTracking is true" in str(info.value)
    assert "delta.enableDeletionVectors" in str(info.value)


@pytest.mark.parametrize(
    ("protocol", "properties", "writable"),
    [
        (Protocol(3, 7, frozenset({"deletionVectors"}), frozenset({"deletionVectors"})), "true", True),
        (Protocol(3, 7, frozenset({"deletionVectors"}), frozenset({"deletionVectors"})), "false", False),
        (Protocol(3, 7, frozenset({"deletionVectors"}), frozenset({"deletionVectors"})), None, False),
        (Protocol(1, 7, None, frozenset({"deletionVectors"})), "true", False),  # not readable: not listed
        (Protocol(1, 2), "true", False),  # the property without the feature
    ],
)
def test_deletion_vectors_are_written_only_where_the_feature_and_the_property_say(
    protocol, properties, writable
):
    config = {} if properties is None else {"delta.enableDeletionVectors": properties}
    assert deletion_vectors_writable(protocol, metadata(config)) is writable


# --- what enables a feature: the table's configuration, read once --------------------------


@pytest.mark.parametrize(
    ("properties", "feature"),
    [
        ({"delta.enableDeletionVectors": "TRUE"}, "deletionVectors"),
        ({"delta.enableChangeDataFeed": " true"}, "changeDataFeed"),
        ({"delta.checkpointPolicy": "V2"}, "v2Checkpoint"),
        ({"delta.columnMapping.mode": "Name"}, "columnMapping"),
        ({"delta.enableInCommitTimestamps": "true"}, "inCommitTimestamp"),
    ],
)
def test_a_new_tables_features_follow_its_typed_properties(properties, feature):
    from airflow_delta_provider.core.protocol.features import minimum_protocol

    protocol = minimum_protocol(ARROW_SCHEMA, properties)
    assert feature in writer_features(protocol)
    off = minimum_protocol(
        ARROW_SCHEMA, {key: "false" if key.startswith("delta.enable") else "none" for key in properties}
    )
    assert feature not in writer_features(off)


@pytest.mark.parametrize(
    "key", ["delta.enableDeletionVectors", "delta.enableChangeDataFeed", "delta.appendOnly"]
)
def test_a_feature_switch_that_is_no_boolean_is_refused_naming_it(tmp_path, log_state, key):
    """As Delta validates them (and as the commit path already read appendOnly): not silently off."""
    from airflow_delta_provider.core import DeltaTable, InvalidTablePropertyError

    with pytest.raises(InvalidTablePropertyError, match=rf"{key}='yes' is not true or false"):
        DeltaTable.create(str(tmp_path / "t"), ARROW_SCHEMA, properties={key: "yes"})
    assert not (tmp_path / "t" / "_delta_log").exists()
