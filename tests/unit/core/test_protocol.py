from __future__ import annotations

import pytest

from airflow_delta_provider.core.actions import Protocol
from airflow_delta_provider.core.errors import CorruptLogError, ProtocolError, UnsupportedFeatureError
from airflow_delta_provider.core.protocol import check_readable, reader_features, writer_features


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
