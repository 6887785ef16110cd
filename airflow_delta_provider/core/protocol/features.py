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
from airflow_delta_provider.core.protocol.actions import Metadata, Protocol

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    import pyarrow as pa

    from airflow_delta_provider.core.protocol.table_config import TableConfig

__all__ = [
    "FEATURES",
    "MAX_READER_VERSION",
    "MAX_WRITER_VERSION",
    "Feature",
    "Operation",
    "Support",
    "change_data_feed_enabled",
    "check_supported",
    "deletion_vectors_writable",
    "feature_table_markdown",
    "features_in_use",
    "merge_protocols",
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
    #: Compaction: a commit (it refuses what a write refuses) that also rewrites existing rows.
    OPTIMIZE = "optimize"
    #: DELETE of whole files or with deletion vectors: every remaining row stays where it is.
    DELETE = "delete"
    #: DELETE that rewrites the files holding deleted rows (tables without deletion vectors).
    COPY_ON_WRITE_DELETE = "copy-on-write delete"


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
    """Support for every operation: YES except the named ones (``write=Support.NO``).

    OPTIMIZE and DELETE commit like a write, so they refuse what a write refuses unless named too.
    """
    table = dict(_ALL)
    for name, value in overrides.items():
        table[Operation[name.upper()]] = value
    for follower in (Operation.OPTIMIZE, Operation.DELETE, Operation.COPY_ON_WRITE_DELETE):
        if follower.name.lower() not in overrides:
            table[follower] = table[Operation.WRITE]
    return table


def _flag(name: str) -> tuple[str, Callable[[TableConfig], bool]]:
    """Enabled by the boolean table property ``name`` (read through the table's TableConfig)."""
    return name, lambda config: config.flag(name)


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
    :param enabled_by: the table property that turns it on at creation, and whether the table's
        configuration does (for the protocol).
    :param creatable: whether ``DeltaTable.create`` may enable it (the core writes it right).
    :param requires: features the protocol must list with it (``rowTracking`` needs ``domainMetadata``).
    :param note: what the core does with it (or why it refuses it), for the docs' feature table.
    :param refusal: why the operations that refuse it do, for their error and the docs' list of
        refusals (default: the note, or a general reason).
    """

    name: str
    reader: bool = False
    legacy_reader: int | None = None
    legacy_writer: int | None = None
    support: Mapping[Operation, Support] = field(default_factory=lambda: dict(_ALL))
    in_use: Callable[[Metadata], bool] | None = None
    in_use_reason: str = ""
    enabled_by: tuple[str, Callable[[TableConfig], bool]] | None = None
    creatable: bool = True
    requires: tuple[str, ...] = ()
    note: str = ""
    refusal: str = ""


def _schema_has(marker: str) -> Callable[[Metadata], bool]:
    return lambda metadata: marker in metadata.schema_string


def _has_constraints(metadata: Metadata) -> bool:
    return any(key.startswith("delta.constraints.") for key in metadata.configuration)


def _column_mapping_used(metadata: Metadata) -> bool:
    return metadata.config.column_mapping_mode != "none"


#: Rules on the rows a commit adds, which commits honour: every row is checked before the commit
#: (core/protocol/constraints.py: Spark in the PySpark operator, the SQL engine for files committed as
#: they are), identity values are generated or refused and their high-water mark moved.
_ROWS_CHECKED = _support()
#: Refused by every operation, reading included.
_NEVER = dict.fromkeys(Operation, Support.NO)
_TYPE_WIDENING = (
    "reads cast files written before a type change to the column's current type (each "
    "delta.typeChanges entry must be a widening Delta allows); commits take files of the current "
    "types only and keep delta.typeChanges"
)

FEATURES: dict[str, Feature] = {
    f.name: f
    for f in (
        Feature("appendOnly", legacy_writer=2, enabled_by=_flag("delta.appendOnly")),
        Feature(
            "invariants",
            legacy_writer=2,
            support=_ROWS_CHECKED,
            in_use=_schema_has('"delta.invariants"'),
            in_use_reason="a column has a delta.invariants expression",
            note=(
                "every row is checked before the commit (Spark in the PySpark operator, DataFusion "
                "for files committed as they are); a NULL or false result refuses the commit"
            ),
        ),
        Feature(
            "checkConstraints",
            legacy_writer=3,
            support=_ROWS_CHECKED,
            in_use=_has_constraints,
            in_use_reason="the table has delta.constraints.* CHECK constraints",
            note=(
                "every row is checked before the commit (Spark in the PySpark operator, DataFusion "
                "for files committed as they are); a NULL or false result refuses the commit"
            ),
        ),
        Feature(
            "changeDataFeed",  # appends and whole-file removes need no cdc files
            legacy_writer=4,
            enabled_by=_flag("delta.enableChangeDataFeed"),
        ),
        Feature(
            "generatedColumns",
            legacy_writer=4,
            support=_ROWS_CHECKED,
            in_use=_schema_has('"delta.generationExpression"'),
            in_use_reason="a column has a delta.generationExpression",
            note=(
                "every row is checked before the commit (Spark in the PySpark operator, DataFusion "
                "for files committed as they are); a NULL or false result refuses the commit"
            ),
        ),
        Feature(
            "columnMapping",
            reader=True,
            legacy_reader=2,
            legacy_writer=5,
            in_use=_column_mapping_used,
            in_use_reason="delta.columnMapping.mode is not 'none'",
            enabled_by=("delta.columnMapping.mode", lambda config: config.column_mapping_mode != "none"),
            note=(
                "modes name and id: reads resolve physical names; commits check that every file names "
                "its columns physically (field ids in id mode) and key partition values and stats by "
                "physical name; create and schema evolution assign ids and maxColumnId; OPTIMIZE and "
                "PURGE rewrite under physical names (a purge drops the columns the schema no longer has)"
            ),
        ),
        Feature(
            "identityColumns",  # concurrent identity writers conflict on their metaData, as in Delta
            legacy_writer=6,
            support=_ROWS_CHECKED,
            in_use=_schema_has('"delta.identity.'),
            in_use_reason="a column is an IDENTITY column",
            note=(
                "the PySpark operator generates values from start, step and the high-water mark and "
                "records the new mark; GENERATED ALWAYS refuses supplied values; concurrent identity "
                "writers conflict"
            ),
        ),
        Feature(
            "deletionVectors",
            reader=True,
            enabled_by=_flag("delta.enableDeletionVectors"),
            note=(
                "reads apply them; DELETE writes them where delta.enableDeletionVectors is true (a "
                "second delete merges into a file's vector); removes and OPTIMIZE carry them"
            ),
        ),
        Feature("timestampNtz", reader=True),
        Feature(
            "v2Checkpoint",
            reader=True,
            enabled_by=("delta.checkpointPolicy", lambda config: config.checkpoint_policy == "v2"),
        ),
        Feature("vacuumProtocolCheck", reader=True),  # a reader need not do anything
        Feature("domainMetadata"),  # carried through checkpoints; commits don't touch domains
        Feature(
            "inCommitTimestamp",
            enabled_by=_flag("delta.enableInCommitTimestamps"),
        ),
        Feature("checkpointProtection"),  # honoured by log cleanup
        Feature(
            "clustering",
            note=(
                "the delta.clustering domain is kept by commits, checkpoints, cleanup and VACUUM; "
                "appends of unclustered files are allowed, as in Delta"
            ),
        ),
        Feature(
            "liquid",
            support=_support(write=Support.NO),
            note=(
                "Databricks' preview name of clustering (delta.liquid.clusteringColumns); its writer "
                "rules are not in PROTOCOL.md, so commits are refused; checkpoints, cleanup and "
                "VACUUM keep every domain"
            ),
        ),
        Feature(
            "rowTracking",  # commits assign baseRowId / defaultRowCommitVersion (protocol/row_tracking.py)
            support=_support(optimize=Support.NO, copy_on_write_delete=Support.UNLESS_USED),
            in_use=lambda metadata: metadata.config.flag("delta.enableRowTracking"),
            in_use_reason="delta.enableRowTracking is true",
            enabled_by=_flag("delta.enableRowTracking"),
            requires=("domainMetadata",),
            note=(
                "commits assign baseRowId and defaultRowCommitVersion above the delta.rowTracking "
                "high-water mark and move it, again on every retry; deletion-vector deletes keep "
                "every row's id"
            ),
            refusal=(
                "a rewrite (OPTIMIZE, a DELETE without deletion vectors) must carry every row's id and "
                "commit version into the rewritten files, which it does not do yet; on a table with "
                "deletion vectors (delta.enableDeletionVectors) DELETE keeps each row in place"
            ),
        ),
        Feature(
            "allowColumnDefaults",
            support=_support(write=Support.NO),
            note="refused for commits: column DEFAULT values are not filled into committed files",
        ),
        Feature(
            "typeWidening",
            reader=True,
            enabled_by=_flag("delta.enableTypeWidening"),
            note=_TYPE_WIDENING,
        ),
        Feature("typeWidening-preview", reader=True, creatable=False, note=_TYPE_WIDENING),
        Feature(
            "icebergCompatV1",
            support=_support(write=Support.NO, vacuum=Support.NO),
            enabled_by=_flag("delta.enableIcebergCompatV1"),
            creatable=False,
            note="refused for commits and VACUUM: Iceberg metadata and its column rules are not kept",
        ),
        Feature(
            "icebergCompatV2",
            support=_support(write=Support.NO, vacuum=Support.NO),
            enabled_by=_flag("delta.enableIcebergCompatV2"),
            creatable=False,
            note="refused for commits and VACUUM: Iceberg metadata and its column rules are not kept",
        ),
        # Known, and refused by every operation: their rules reach into what this core does.
        Feature(
            "variantType",
            reader=True,
            support=_NEVER,
            note="refused: variant values (and their shredding) are not decoded or checked by this core",
        ),
        Feature(
            "variantType-preview",
            reader=True,
            support=_NEVER,
            note="refused: the preview name of variantType",
        ),
        Feature(
            "variantShredding",
            reader=True,
            support=_NEVER,
            note="refused: shredded variant columns need variant decoding",
        ),
        Feature(
            "geospatial",
            reader=True,
            support=_NEVER,
            note="refused: geometry/geography types have no specification in PROTOCOL.md yet",
        ),
        Feature(
            "collations",
            support=_NEVER,
            note=(
                "refused: collated strings are only a proposed RFC; their statsWithCollation would "
                "be lost by a writer that does not know them"
            ),
        ),
        Feature(
            "catalogManaged",
            reader=True,
            support=_NEVER,
            note="refused: commits must go through the catalog that owns the table",
        ),
        Feature(
            "catalogOwned-preview",
            reader=True,
            support=_NEVER,
            note="refused: the preview name of catalogManaged",
        ),
    )
}

#: Properties that switch on features the core cannot create, beside the features' own.
_CREATE_REFUSALS: dict[str, str] = {
    "delta.enableIcebergCompatV3": "icebergCompatV3",
    "delta.universalFormat.enabledFormats": "icebergCompatV2",
}

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


def merge_protocols(first: Protocol, *others: Protocol) -> Protocol:
    """The weakest protocol that supports every feature of all the given ones (Delta's
    ``Protocol.merge``): never a downgrade of any of them.

    Legacy protocols merge to the highest versions (their features only grow with the
    versions); once one lists table features, the result lists every feature any of them
    supports, explicitly or implied by a legacy version.
    """
    protocols = (first, *others)
    reader = max(p.min_reader_version for p in protocols)
    writer = max(p.min_writer_version for p in protocols)
    if writer < 7 and reader < 3:
        return Protocol(reader, writer)
    readers = frozenset().union(*(reader_features(p) for p in protocols))
    writers = frozenset().union(*(writer_features(p) for p in protocols)) | readers
    # A reader-3 protocol is a writer-7 one, so from here the writer version is 7.
    return Protocol(reader, writer, readers if reader >= 3 else None, writers)


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


def _a(operation: Operation) -> str:
    """``operation`` with its indefinite article ("a write", "an optimize")."""
    return ("an " if operation.value[0] in "aeiou" else "a ") + operation.value


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
            f"The table is catalog-managed ({catalog[0]!r}): the protocol allows {_a(operation)} of it "
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
        reason = (
            first.refusal
            if first is not None and first.refusal
            else "it could break the guarantees the feature gives other writers and readers"
        )
        raise UnsupportedFeatureError(
            f"The table uses the writer feature {_names(blocking)}{how}, which this core does not implement "
            f"for {_a(operation)}: {reason}.{why} Run the {operation.value} with an engine that supports "
            f"{blocking[0]!r} (Spark with Delta Lake), or drop the feature from the table.",
            feature=blocking[0],
            operation=operation.value,
        )


def deletion_vectors_writable(protocol: Protocol, metadata: Metadata) -> bool:
    """Whether an operation that deletes rows writes deletion vectors (Delta's
    ``DeletionVectorUtils.deletionVectorsWritable``): the protocol lists ``deletionVectors`` as a
    reader and writer feature and ``delta.enableDeletionVectors`` is true."""
    name = "deletionVectors"
    listed = name in reader_features(protocol) and name in writer_features(protocol)
    return listed and metadata.config.flag("delta.enableDeletionVectors")


def change_data_feed_enabled(metadata: Metadata) -> bool:
    """Whether a commit that rewrites rows records them in ``cdc`` files: ``delta.enableChangeDataFeed``
    is true (Delta's ``CDCReader.isCDCEnabledOnTable``)."""
    return metadata.config.flag("delta.enableChangeDataFeed")


# --- new tables -------------------------------------------------------------------------------


def minimum_protocol(schema: pa.Schema, properties: Mapping[str, str]) -> Protocol:
    """The lowest protocol a new table with this schema and these properties needs.

    Legacy versions where they suffice ((1, 2) is Spark's default), table features (reader 3 /
    writer 7) as soon as a feature needs them.

    :raises UnsupportedFeatureError: a property enables a feature this core cannot write.
    """
    # Here, not at the top: the schema module imports pyarrow, which the Airflow entry points
    # (they import this registry) must not.
    from airflow_delta_provider.core.protocol.schema import schema_to_delta_json

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
    schema_json = schema_to_delta_json(schema)
    table = Metadata("", schema_json, (), dict(properties))
    enabled = {
        f.name for f in FEATURES.values() if f.enabled_by is not None and f.enabled_by[1](table.config)
    }
    # Features the schema or the properties use (invariants, CHECK constraints, generated and
    # identity columns), as Spark's CREATE TABLE adds them.
    used = features_in_use(table)
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
    # Features that legacy versions imply (appendOnly, changeDataFeed, columnMapping) fit a legacy
    # protocol, as Spark creates them ((1, 2) by default, (2, 5) with column mapping); any other
    # feature, or one asked for by name, needs a table-features protocol.
    known = [FEATURES.get(f) for f in enabled]
    if not explicit and all(f is not None and f.legacy_writer is not None for f in known):
        return Protocol(
            max([1, *(f.legacy_reader or 1 for f in known if f is not None)]),
            max([2, *(f.legacy_writer or 2 for f in known if f is not None)]),
        )
    readers = frozenset(f for f in enabled if (FEATURES.get(f) or Feature(f)).reader)
    if readers:
        return Protocol(3, 7, readers, frozenset(enabled))
    return Protocol(1, 7, None, frozenset(enabled))


# --- the docs' feature table ----------------------------------------------------------------

_CELL = {Support.YES: "yes", Support.UNLESS_USED: "refused when used", Support.NO: "refused"}


def feature_table_markdown() -> str:
    """The docs' feature table (docs/features.md), generated from :data:`FEATURES`.

    One row per feature: its kind, what each :class:`Operation` does with it, whether
    ``DeltaTable.create`` can enable it, and the feature's note; then the one list of what is
    still refused, with the reason. A test keeps docs/features.md equal to this text.
    """
    operations = list(Operation)
    header = ["Feature", "Kind", *(o.value for o in operations), "create", "What the core does"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for feature in sorted(FEATURES.values(), key=lambda f: f.name.lower()):
        kind = "reader-writer" if feature.reader else "writer"
        cells = [_CELL[feature.support[o]] for o in operations]
        creatable = "yes" if feature.enabled_by and feature.creatable else "-"
        note = feature.note or (f"in use when {feature.in_use_reason}" if feature.in_use_reason else "")
        lines.append("| " + " | ".join([f"`{feature.name}`", kind, *cells, creatable, note]) + " |")
    refused = [
        f
        for f in sorted(FEATURES.values(), key=lambda f: f.name.lower())
        if any(s is not Support.YES for s in f.support.values())
    ]
    lines += ["", "Still refused (or refused when used), with the reason:", ""]
    for feature in refused:
        where = ", ".join(o.value for o in operations if feature.support[o] is not Support.YES)
        reason = (feature.note or "").split(": ", 1)[-1] if feature.note.startswith("refused") else ""
        reason = (
            reason
            or feature.refusal
            or feature.note
            or feature.in_use_reason
            or "not implemented by this core"
        )
        lines.append(f"- `{feature.name}` ({where}): {reason}.")
    lines.append(
        "- Any feature name not listed above: refused by every operation it binds (a reader needs "
        "every reader feature, a writer every writer feature)."
    )
    return "\n".join(lines) + "\n"
