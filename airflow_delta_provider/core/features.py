"""Table features: the one registry of what this core does with each Delta feature.

In the spirit of delta-kernel-rs ``table_features``: every feature the protocol defines is
listed once with its kind (reader-writer or writer-only), the legacy protocol versions that
imply it, the table property that enables it on a new table, how to tell whether a table
actually uses it, and what each :class:`Operation` does with it. Every gate asks
:func:`check_supported`; :func:`minimum_protocol` derives a new table's protocol from the
same entries. A feature name not in the registry is refused by every operation that it
binds (a reader needs every reader feature, a writer every writer feature).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from airflow_delta_provider.core.errors import ProtocolError, UnsupportedFeatureError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pyarrow as pa

    from airflow_delta_provider.core.actions import Metadata, Protocol

__all__ = [
    "FEATURES",
    "MAX_READER_VERSION",
    "MAX_WRITER_VERSION",
    "Feature",
    "Operation",
    "Support",
    "check_supported",
    "features_in_use",
    "minimum_protocol",
    "reader_features",
    "supports",
    "validate_protocol",
    "writer_features",
]

MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7


class Operation(enum.Enum):
    """What a caller wants to do with a table; features are checked per operation."""

    READ = "read"
    WRITE = "write"
    CHECKPOINT = "checkpoint"
    LOG_CLEANUP = "log cleanup"
    VACUUM = "vacuum"


class Support(enum.Enum):
    """What an operation does with a feature the table lists."""

    #: The operation honours the feature (or the feature does not concern it).
    YES = "supported"
    #: Refused when the table uses the feature (a legacy protocol may imply it unused).
    UNLESS_USED = "refused when in use"
    #: Refused whenever the table lists the feature.
    NO = "refused"


_ALL = dict.fromkeys(Operation, Support.YES)


def _support(**overrides: Support) -> dict[Operation, Support]:
    """Support for every operation: YES except the named ones (``write=Support.NO``)."""
    table = dict(_ALL)
    for name, value in overrides.items():
        table[Operation[name.upper()]] = value
    return table


def _flag(name: str) -> Callable[[Mapping[str, str]], bool]:
    return lambda properties: (properties.get(name) or "").strip().lower() == "true"


def _set(name: str) -> Callable[[Mapping[str, str]], bool]:
    return lambda properties: (properties.get(name) or "").strip().lower() not in ("", "false", "none")


@dataclass(frozen=True)
class Feature:
    """One table feature.

    :param name: the feature's name in ``readerFeatures`` / ``writerFeatures``.
    :param reader: a reader-writer feature (listed in both) rather than writer-only.
    :param legacy_reader: the lowest legacy ``minReaderVersion`` (< 3) that implies it.
    :param legacy_writer: the lowest legacy ``minWriterVersion`` (< 7) that implies it.
    :param support: what each operation does when the table lists it.
    :param in_use: how to tell that a table's metadata uses it (for ``UNLESS_USED``).
    :param in_use_reason: how the table uses it, for the error message.
    :param enabled_by: the table property that turns it on at creation (for the protocol).
    :param creatable: whether ``DeltaTable.create`` may enable it (the core writes it right).
    :param requires: features the protocol must list with it (``rowTracking`` needs ``domainMetadata``).
    """

    name: str
    reader: bool = False
    legacy_reader: int | None = None
    legacy_writer: int | None = None
    support: Mapping[Operation, Support] = field(default_factory=lambda: dict(_ALL))
    in_use: Callable[[Metadata], bool] | None = None
    in_use_reason: str = ""
    enabled_by: tuple[str, Callable[[Mapping[str, str]], bool]] | None = None
    creatable: bool = True
    requires: tuple[str, ...] = ()


def _schema_has(marker: str) -> Callable[[Metadata], bool]:
    return lambda metadata: marker in metadata.schema_string


def _has_constraints(metadata: Metadata) -> bool:
    return any(key.startswith("delta.constraints.") for key in metadata.configuration)


def _column_mapping_used(metadata: Metadata) -> bool:
    return (metadata.configuration.get("delta.columnMapping.mode") or "none").lower() != "none"


#: Features that only constrain the rows and metadata a commit adds: VACUUM, checkpoints and
#: log cleanup add none, so they honour them by doing nothing.
_DATA_WRITE_ONLY = _support(write=Support.UNLESS_USED)
#: Rules on the rows a commit adds, which commits honour: every row is checked before the commit
#: (core/constraints.py: Spark in the PySpark operator, the SQL engine for files committed as
#: they are), identity values are generated or refused and their high-water mark moved.
_ROWS_CHECKED = _support()

FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature("appendOnly", legacy_writer=2, enabled_by=("delta.appendOnly", _flag("delta.appendOnly"))),
        Feature(
            "invariants",
            legacy_writer=2,
            support=_ROWS_CHECKED,
            in_use=_schema_has('"delta.invariants"'),
            in_use_reason="a column has a delta.invariants expression",
        ),
        Feature(
            "checkConstraints",
            legacy_writer=3,
            support=_ROWS_CHECKED,
            in_use=_has_constraints,
            in_use_reason="the table has delta.constraints.* CHECK constraints",
        ),
        Feature(
            "changeDataFeed",  # appends and whole-file removes need no cdc files
            legacy_writer=4,
            enabled_by=("delta.enableChangeDataFeed", _flag("delta.enableChangeDataFeed")),
        ),
        Feature(
            "generatedColumns",
            legacy_writer=4,
            support=_ROWS_CHECKED,
            in_use=_schema_has('"delta.generationExpression"'),
            in_use_reason="a column has a delta.generationExpression",
        ),
        Feature(
            "columnMapping",  # physical names are resolved when reading data
            reader=True,
            legacy_reader=2,
            legacy_writer=5,
            support=_DATA_WRITE_ONLY,
            in_use=_column_mapping_used,
            in_use_reason="delta.columnMapping.mode is not 'none'",
            enabled_by=("delta.columnMapping.mode", _set("delta.columnMapping.mode")),
            creatable=False,
        ),
        Feature(
            "identityColumns",  # concurrent identity writers conflict on their metaData, as in Delta
            legacy_writer=6,
            support=_ROWS_CHECKED,
            in_use=_schema_has('"delta.identity.'),
            in_use_reason="a column is an IDENTITY column",
        ),
        Feature(
            "deletionVectors",  # read: row masks applied; write: never writes DVs, removes carry them
            reader=True,
            enabled_by=("delta.enableDeletionVectors", _flag("delta.enableDeletionVectors")),
        ),
        Feature("timestampNtz", reader=True),
        Feature(
            "v2Checkpoint",
            reader=True,
            enabled_by=(
                "delta.checkpointPolicy",
                lambda p: (p.get("delta.checkpointPolicy") or "classic").strip().lower() == "v2",
            ),
        ),
        Feature("vacuumProtocolCheck", reader=True),  # a reader need not do anything
        Feature("domainMetadata"),  # carried through checkpoints; commits don't touch domains
        Feature(
            "inCommitTimestamp",
            enabled_by=("delta.enableInCommitTimestamps", _flag("delta.enableInCommitTimestamps")),
        ),
        Feature("checkpointProtection"),  # honoured by log cleanup
        Feature("clustering"),  # plain appends of unclustered files are allowed, as in Delta
        Feature(
            "rowTracking",  # commits assign baseRowId / defaultRowCommitVersion (core/row_tracking.py)
            enabled_by=("delta.enableRowTracking", _flag("delta.enableRowTracking")),
            requires=("domainMetadata",),
        ),
        Feature(
            "allowColumnDefaults",
            support=_support(write=Support.NO),
        ),
        Feature(
            "typeWidening",
            reader=True,
            support=_support(read=Support.NO, write=Support.NO, vacuum=Support.NO),
            enabled_by=("delta.enableTypeWidening", _flag("delta.enableTypeWidening")),
            creatable=False,
        ),
        Feature(
            "typeWidening-preview",
            reader=True,
            support=_support(read=Support.NO, write=Support.NO, vacuum=Support.NO),
            creatable=False,
        ),
        Feature(
            "icebergCompatV1",
            support=_support(write=Support.NO, vacuum=Support.NO),
            enabled_by=("delta.enableIcebergCompatV1", _flag("delta.enableIcebergCompatV1")),
            creatable=False,
        ),
        Feature(
            "icebergCompatV2",
            support=_support(write=Support.NO, vacuum=Support.NO),
            enabled_by=("delta.enableIcebergCompatV2", _flag("delta.enableIcebergCompatV2")),
            creatable=False,
        ),
        # Known, and refused by every operation: their rules reach into what this core does.
        Feature("variantType", reader=True, support=dict.fromkeys(Operation, Support.NO)),
        Feature("catalogManaged", reader=True, support=dict.fromkeys(Operation, Support.NO)),
        Feature("catalogOwned-preview", reader=True, support=dict.fromkeys(Operation, Support.NO)),
    )
}

#: Properties that switch on features the core cannot create, beside the features' own.
_CREATE_REFUSALS: dict[str, str] = {
    "delta.enableIcebergCompatV3": "icebergCompatV3",
    "delta.universalFormat.enabledFormats": "icebergCompatV2",
}

#: Writer-only features that a legacy writer version implies without columnMapping's reader needs.
_LEGACY_ONLY = frozenset(
    {"appendOnly", "invariants", "checkConstraints", "changeDataFeed", "generatedColumns", "identityColumns"}
)

_LEGACY_READER: dict[int, frozenset[str]] = {
    version: frozenset(
        f.name for f in FEATURES.values() if f.legacy_reader is not None and f.legacy_reader <= version
    )
    for version in (1, 2)
}
_LEGACY_WRITER: dict[int, frozenset[str]] = {
    version: frozenset(
        f.name for f in FEATURES.values() if f.legacy_writer is not None and f.legacy_writer <= version
    )
    for version in range(1, 7)
}


# --- the protocol -----------------------------------------------------------------------------


def reader_features(protocol: Protocol) -> frozenset[str]:
    """Reader features in force, explicit or implied by a legacy reader version."""
    if protocol.min_reader_version >= 3:
        return protocol.reader_features or frozenset()
    return _LEGACY_READER.get(protocol.min_reader_version, frozenset())


def writer_features(protocol: Protocol) -> frozenset[str]:
    """Writer features in force, explicit or implied by a legacy writer version."""
    if protocol.min_writer_version >= 7:
        return protocol.writer_features or frozenset()
    return _LEGACY_WRITER.get(protocol.min_writer_version, frozenset())


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


def features_in_use(metadata: Metadata) -> frozenset[str]:
    """The features whose use the table's metadata shows (a legacy protocol may imply unused ones)."""
    return frozenset(f.name for f in FEATURES.values() if f.in_use is not None and f.in_use(metadata))


def supports(name: str, operation: Operation) -> Support:
    """What ``operation`` does with the feature ``name`` (NO for names the core does not know)."""
    feature = FEATURES.get(name)
    return feature.support[operation] if feature is not None else Support.NO


def _blocks(support: Support, in_use: bool) -> bool:
    return support is Support.NO or (support is Support.UNLESS_USED and in_use)


def _names(names: list[str]) -> str:
    return f"{names[0]!r}" + (f" (and {', '.join(map(repr, names[1:]))})" if len(names) > 1 else "")


def check_supported(protocol: Protocol, metadata: Metadata | None, operation: Operation) -> None:
    """Refuse ``operation`` on a table whose protocol asks for something this core does not do.

    Every operation reads, so every reader feature must be readable; every other operation
    must also honour every writer feature the table lists (features that a legacy protocol
    implies and that only bind data the table uses, per :class:`Support`).

    :param metadata: the table's metadata, to tell which implied features are in use (None:
        assume none is).
    :raises ProtocolError: the protocol action is invalid.
    :raises UnsupportedFeatureError: naming the first unsupported feature (or version) and the
        operation.
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
    readable = sorted(
        f.name for f in FEATURES.values() if f.reader and f.support[Operation.READ] is Support.YES
    )
    unreadable = sorted(reader_features(protocol) - set(readable))
    if unreadable:
        raise UnsupportedFeatureError(
            f"The table uses the reader feature {_names(unreadable)}, which this core does not implement; "
            f"it cannot read the table correctly. Supported reader features: {', '.join(readable)}.",
            feature=unreadable[0],
            operation=Operation.READ.value,
        )
    if operation is Operation.READ:
        return
    writers = writer_features(protocol)
    why = (
        " The table has the 'vacuumProtocolCheck' feature, which requires VACUUM to honour every writer "
        "feature of the table."
        if operation is Operation.VACUUM and "vacuumProtocolCheck" in writers
        else ""
    )
    if protocol.min_writer_version > MAX_WRITER_VERSION:
        raise UnsupportedFeatureError(
            f"The table requires Delta writer version {protocol.min_writer_version}; this core writes up "
            f"to version {MAX_WRITER_VERSION}. Refusing the {operation.value}.{why} Use an engine that "
            f"supports that version for it.",
            feature=f"minWriterVersion={protocol.min_writer_version}",
            operation=operation.value,
        )
    catalog = sorted(writers & {"catalogManaged", "catalogOwned-preview"})
    if catalog:
        raise UnsupportedFeatureError(
            f"The table is catalog-managed ({catalog[0]!r}): the protocol allows a {operation.value} of it "
            f"only through its catalog.{why} Run it through the catalog that manages the table.",
            feature=catalog[0],
            operation=operation.value,
        )
    used = features_in_use(metadata) if metadata is not None else frozenset()
    blocking = sorted(
        f
        for f in writers
        if supports(f, operation) is Support.NO
        or (supports(f, operation) is Support.UNLESS_USED and f in used)
    )
    if blocking:
        first = FEATURES.get(blocking[0])
        how = (
            f" ({first.in_use_reason})"
            if first is not None and first.in_use_reason and blocking[0] in used
            else ""
        )
        raise UnsupportedFeatureError(
            f"The table uses the writer feature {_names(blocking)}{how}, which this core does not implement "
            f"for a {operation.value}: it could break the guarantees the feature gives other writers and "
            f"readers.{why} Run the {operation.value} with an engine that supports {blocking[0]!r} (Spark "
            f"with Delta Lake), or drop the feature from the table.",
            feature=blocking[0],
            operation=operation.value,
        )


# --- new tables -------------------------------------------------------------------------------


def minimum_protocol(schema: pa.Schema, properties: Mapping[str, str]) -> Protocol:
    """The lowest protocol a new table with this schema and these properties needs.

    Legacy versions where they suffice ((1, 2) is Spark's default), table features (reader 3 /
    writer 7) as soon as a feature needs them.

    :raises UnsupportedFeatureError: a property enables a feature this core cannot write.
    """
    from airflow_delta_provider.core.actions import Metadata, Protocol
    from airflow_delta_provider.core.schema import schema_to_delta_json

    refusals = {
        **{f.enabled_by[0]: f.name for f in FEATURES.values() if f.enabled_by and not f.creatable},
        **_CREATE_REFUSALS,
    }
    for key, feature in refusals.items():
        value = (properties.get(key) or "").lower()
        if value and value not in ("false", "none"):
            raise UnsupportedFeatureError(
                f"The table property {key}={properties[key]!r} enables the {feature!r} feature, which "
                f"this core cannot write. Create the table without it (or with Spark, if you need it).",
                feature=feature,
                operation=Operation.WRITE.value,
            )
    enabled = {f.name for f in FEATURES.values() if f.enabled_by is not None and f.enabled_by[1](properties)}
    # Features the schema or the properties use (invariants, CHECK constraints, generated and
    # identity columns), as Spark's CREATE TABLE adds them.
    schema_json = schema_to_delta_json(schema)
    used = features_in_use(Metadata("", schema_json, (), dict(properties)))
    enabled |= {f for f in used if FEATURES[f].creatable}
    if '"timestamp_ntz"' in schema_json:
        enabled.add("timestampNtz")
    explicit = {
        key.removeprefix("delta.feature.")
        for key, value in properties.items()
        if key.startswith("delta.feature.") and value.lower() in ("supported", "enabled")
    }
    enabled |= explicit
    enabled |= {r for f in list(enabled) if f in FEATURES for r in FEATURES[f].requires}
    # Features of legacy writer versions get the lowest legacy protocol that implies them, as
    # Spark picks it ((1, 2) by default; CHECK (1, 3), generated (1, 4), identity (1, 6)); any
    # other feature, or one asked for by name, needs a table-features protocol.
    if not (enabled - _LEGACY_ONLY) and not explicit:
        return Protocol(1, max([2, *(FEATURES[f].legacy_writer or 2 for f in enabled)]))
    readers = frozenset(f for f in enabled if (FEATURES.get(f) or Feature(f)).reader)
    if readers:
        return Protocol(3, 7, readers, frozenset(enabled))
    return Protocol(1, 7, None, frozenset(enabled))
