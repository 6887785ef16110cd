"""Protocol versions and table features: the one place that knows what this core supports.

Legacy tables (reader < 3, writer < 7) imply features through their versions;
newer tables list them by name. Every feature name the core does not know is
unsupported: the protocol allows a reader to read only when it implements every
reader feature, and a writer to write only when it implements every writer feature.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import ProtocolError, UnsupportedFeatureError

if TYPE_CHECKING:
    from airflow_delta_provider.core.actions import Metadata, Protocol

MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7

# Features implied by legacy protocol versions (PROTOCOL.md, "Table Features" appendix).
_LEGACY_READER_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"columnMapping"}),
}
_LEGACY_WRITER_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset(),
    2: frozenset({"appendOnly", "invariants"}),
    3: frozenset({"appendOnly", "invariants", "checkConstraints"}),
    4: frozenset({"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns"}),
    5: frozenset(
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
        }
    ),
    6: frozenset(
        {
            "appendOnly",
            "invariants",
            "checkConstraints",
            "changeDataFeed",
            "generatedColumns",
            "columnMapping",
            "identityColumns",
        }
    ),
}

#: Reader features whose data this core reads correctly.
SUPPORTED_READER_FEATURES = frozenset(
    {
        "columnMapping",  # physical names resolved when reading data
        "deletionVectors",  # descriptors carried; row masks applied by to_pyarrow_table()
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",  # a reader need not do anything
    }
)


class Operation(enum.Enum):
    """What a caller wants to do with a table; features are checked per operation."""

    READ = "read"
    WRITE = "write"
    CHECKPOINT = "checkpoint"
    LOG_CLEANUP = "log cleanup"
    VACUUM = "vacuum"


def reader_features(protocol: Protocol) -> frozenset[str]:
    """Reader features in force, explicit or implied by a legacy reader version."""
    if protocol.min_reader_version >= 3:
        return protocol.reader_features or frozenset()
    return _LEGACY_READER_FEATURES.get(protocol.min_reader_version, frozenset())


def writer_features(protocol: Protocol) -> frozenset[str]:
    """Writer features in force, explicit or implied by a legacy writer version."""
    if protocol.min_writer_version >= 7:
        return protocol.writer_features or frozenset()
    return _LEGACY_WRITER_FEATURES.get(protocol.min_writer_version, frozenset())


def validate_protocol(protocol: Protocol) -> None:
    """Refuse protocol actions that break the protocol's own rules.

    :raises ProtocolError: versions below 1, or features listed at versions that do not allow them.
    """
    if protocol.min_reader_version < 1 or protocol.min_writer_version < 1:
        raise ProtocolError(
            f"Invalid protocol: minReaderVersion={protocol.min_reader_version}, "
            f"minWriterVersion={protocol.min_writer_version}; both must be at least 1."
        )
    if protocol.reader_features is not None and protocol.min_reader_version != 3:
        raise ProtocolError(
            f"Invalid protocol: readerFeatures {sorted(protocol.reader_features)} are only allowed "
            f"with minReaderVersion 3, but the table has minReaderVersion {protocol.min_reader_version}."
        )


def check_readable(protocol: Protocol) -> None:
    """Refuse to read a table whose reader version or features this core does not implement.

    :raises ProtocolError: the protocol action is invalid.
    :raises UnsupportedFeatureError: naming the first unsupported reader feature or version.
    """
    validate_protocol(protocol)
    if protocol.min_reader_version > MAX_READER_VERSION:
        raise UnsupportedFeatureError(
            f"The table requires Delta reader version {protocol.min_reader_version}; this core reads "
            f"up to version {MAX_READER_VERSION}. Upgrade airflow-delta-provider, or read the table "
            f"with an engine that supports it.",
            feature=f"minReaderVersion={protocol.min_reader_version}",
            operation=Operation.READ.value,
        )
    unsupported = sorted(reader_features(protocol) - SUPPORTED_READER_FEATURES)
    if unsupported:
        raise UnsupportedFeatureError(
            f"The table uses the reader feature {unsupported[0]!r}"
            + (f" (and {', '.join(map(repr, unsupported[1:]))})" if len(unsupported) > 1 else "")
            + f", which this core does not implement; it cannot read the table correctly. Supported "
            f"reader features: {', '.join(sorted(SUPPORTED_READER_FEATURES))}.",
            feature=unsupported[0],
            operation=Operation.READ.value,
        )


#: Writer features whose obligations this core meets for every commit it writes.
SUPPORTED_WRITER_FEATURES = frozenset(
    {
        "appendOnly",  # enforced: no data-changing removes
        "changeDataFeed",  # appends and whole-file removes need no cdc files
        "checkpointProtection",  # honoured by log cleanup
        "clustering",  # plain appends of unclustered files are allowed, as in Delta
        "deletionVectors",  # never writes DVs; removes carry the DV of the file they remove
        "domainMetadata",  # domains are carried through checkpoints; commits don't touch them
        "inCommitTimestamp",  # written when the table enables it
        "timestampNtz",
        "v2Checkpoint",
        "vacuumProtocolCheck",
    }
)

#: Writer features this core cannot honour when the table uses them, with how to tell it does.
_IN_USE_CHECKS: dict[str, str] = {
    "invariants": "a column has a delta.invariants expression",
    "checkConstraints": "the table has delta.constraints.* CHECK constraints",
    "generatedColumns": "a column has a delta.generationExpression",
    "identityColumns": "a column is an IDENTITY column",
    "columnMapping": "delta.columnMapping.mode is not 'none'",
}


def features_in_use(protocol: Protocol, metadata: Metadata) -> frozenset[str]:
    """Which of the features that need enforcement are actually used by the table's metadata.

    A legacy protocol implies features (writer version 2 implies ``invariants``) that most
    tables never use; Delta enforces them only when used, and so does this core.
    """
    schema_text = metadata.schema_string
    used = set()
    if '"delta.invariants"' in schema_text:
        used.add("invariants")
    if any(key.startswith("delta.constraints.") for key in metadata.configuration):
        used.add("checkConstraints")
    if '"delta.generationExpression"' in schema_text:
        used.add("generatedColumns")
    if '"delta.identity.' in schema_text:
        used.add("identityColumns")
    if (metadata.configuration.get("delta.columnMapping.mode") or "none").lower() != "none":
        used.add("columnMapping")
    return frozenset(used)


def check_writable(protocol: Protocol, metadata: Metadata, operation: Operation = Operation.WRITE) -> None:
    """Refuse to write to a table whose protocol asks for something this core does not do.

    Every reader feature must be readable (a writer reads too), every explicitly listed
    writer feature must be supported, and features a legacy protocol implies must not be in
    use unless supported.

    :raises UnsupportedFeatureError: naming the feature and the operation.
    """
    check_readable(protocol)
    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise UnsupportedFeatureError(
            f"The table requires Delta writer version {protocol.min_writer_version}; this core writes "
            f"up to version {MAX_WRITER_VERSION}. Refusing the {operation.value}.",
            feature=f"minWriterVersion={protocol.min_writer_version}",
            operation=operation.value,
        )
    in_use = features_in_use(protocol, metadata)
    declared = writer_features(protocol)
    blocking = sorted(
        f for f in declared if f not in SUPPORTED_WRITER_FEATURES and (f not in _IN_USE_CHECKS or f in in_use)
    )
    if blocking:
        feature = blocking[0]
        why = f" ({_IN_USE_CHECKS[feature]})" if feature in _IN_USE_CHECKS else ""
        raise UnsupportedFeatureError(
            f"The table uses the writer feature {feature!r}{why}, which this core does not implement; "
            f"a {operation.value} could break the guarantees it gives other writers and readers. Write to "
            f"this table with an engine that supports {feature!r} (Spark with Delta Lake), or drop the "
            f"feature from the table.",
            feature=feature,
            operation=operation.value,
        )
