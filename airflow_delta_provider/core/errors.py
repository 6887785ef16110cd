"""One exception hierarchy for the Delta log core.

Every error says what was wrong, with the offending value (a file, a version, a
feature), and what the caller can do about it. Where Delta (Spark) has a name for
a condition, the class carries it (``ConcurrentAppendError`` for Delta's
``ConcurrentAppendException``) and ``delta_error_class`` holds Delta's error class.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.utils.redaction import redact

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "AppendOnlyViolationError",
    "ChangeDataError",
    "ChangeDataFileNotFoundError",
    "ChangeDataNotRecordedError",
    "ChangeDataSchemaError",
    "CommitError",
    "CommitFileExistsError",
    "CommitsCleanedUpError",
    "ConcurrentAppendError",
    "ConcurrentDeleteDeleteError",
    "ConcurrentDeleteReadError",
    "ConcurrentModificationError",
    "ConcurrentTransactionError",
    "ConcurrentWriteError",
    "ConstraintViolationError",
    "ConsumerCursorError",
    "CorruptLogError",
    "DataRetentionError",
    "DataRetentionLimitError",
    "DeleteFilesError",
    "DeletionVectorError",
    "DeltaError",
    "EmptyOverwriteError",
    "InvalidChangeRangeError",
    "InvalidDataFileError",
    "InvalidLogValueError",
    "InvalidPartitionValueError",
    "InvalidPathError",
    "InvalidTablePropertyError",
    "MaxCommitAttemptsExceededError",
    "MetadataChangedError",
    "MissingCheckpointError",
    "OptimizeRewriteError",
    "ProtocolChangedError",
    "ProtocolError",
    "RestoreMissingFilesError",
    "RestoreTimestampEarlierError",
    "RestoreTimestampGreaterError",
    "RestoreVersionNotFoundError",
    "RetentionError",
    "RowTrackingError",
    "SchemaError",
    "SchemaMismatchError",
    "SourceIsTargetError",
    "StorageError",
    "TableAlreadyExistsError",
    "TableNotFoundError",
    "TaggedCommitsNotFoundError",
    "TimeTravelBeyondRetentionError",
    "TimestampEarlierThanRetentionError",
    "TimestampLaterThanLatestCommitError",
    "UnsupportedExpressionError",
    "UnsupportedFeatureError",
    "VacuumDeleteError",
    "VacuumLiteError",
    "VacuumRetentionNegativeError",
    "VacuumRetentionTooShortError",
    "VersionGapError",
    "VersionNotFoundError",
]


def shorten(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters (ending in ``...``), for a value shown in a message."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


class DeltaError(Exception):
    """Base class of every error raised by the core.

    Its message is redacted when the error is made (URI credentials and registered secrets
    become ``***``), so no handler, log line or traceback can show a secret through it.
    """

    delta_error_class: str | None = None

    def __init__(self, *args: Any) -> None:
        super().__init__(*(redact(a) if isinstance(a, str) else a for a in args))


# --- Tables, logs and files -------------------------------------------------------------


class TableNotFoundError(DeltaError):
    """There is no Delta table at the location (no ``_delta_log`` or no commit in it)."""

    delta_error_class = "DELTA_TABLE_NOT_FOUND"


class TableAlreadyExistsError(DeltaError):
    """``create(mode="error")`` found a table at the location."""

    delta_error_class = "DELTA_PATH_EXISTS"


class CorruptLogError(DeltaError):
    """A log file exists but cannot be understood; the message names the file."""

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path


class VersionGapError(CorruptLogError):
    """The commits after the last usable checkpoint are not contiguous."""

    delta_error_class = "DELTA_VERSIONS_NOT_CONTIGUOUS"

    def __init__(self, message: str, *, missing_version: int, path: str | None = None) -> None:
        super().__init__(message, path=path)
        self.missing_version = missing_version


class MissingCheckpointError(CorruptLogError):
    """A checkpoint the log depends on is missing or incomplete and nothing can replace it."""

    delta_error_class = "DELTA_MISSING_PART_FILES"


class VersionNotFoundError(DeltaError):
    """A requested version or timestamp is outside what the log can reconstruct."""

    delta_error_class = "DELTA_VERSION_NOT_FOUND"


class TimestampEarlierThanRetentionError(VersionNotFoundError):
    delta_error_class = "DELTA_TIMESTAMP_EARLIER_THAN_COMMIT_RETENTION"


class TimestampLaterThanLatestCommitError(VersionNotFoundError):
    delta_error_class = "DELTA_TIMESTAMP_GREATER_THAN_COMMIT"


class CommitsCleanedUpError(VersionNotFoundError):
    """A version's commit file is no longer in the log (log cleanup removed it after
    ``delta.logRetentionDuration``), so what that version changed cannot be read.

    :param version: the first version asked for whose commit is gone.
    :param earliest_version: the earliest version whose commit is still in the log (None when
        the log holds none at or after ``version``).
    """

    delta_error_class = "DELTA_MISSING_FILES_UNEXPECTED_VERSION"

    def __init__(self, message: str, *, version: int, earliest_version: int | None) -> None:
        super().__init__(message)
        self.version = version
        self.earliest_version = earliest_version


class StorageError(DeltaError):
    """The storage layer cannot do what was asked (unsupported scheme, missing primitive)."""


class CommitFileExistsError(StorageError, FileExistsError):
    """A put-if-absent lost: the target file already exists (another writer won)."""


class InvalidPathError(DeltaError, ValueError):
    """A path escapes the table root, is hidden, or cannot be resolved."""


# --- Protocol, features, schema ---------------------------------------------------------


class ProtocolError(CorruptLogError):
    """The protocol action itself is invalid (bad versions, features at the wrong version)."""

    delta_error_class = "DELTA_INVALID_PROTOCOL_VERSION"


class UnsupportedFeatureError(DeltaError):
    """The table needs a reader or writer feature (or version) this core does not implement.

    :param feature: the feature name as written in the protocol (or ``readerVersion=N``).
    :param operation: what was refused (``read``, ``write``, ``vacuum`` ...).
    """

    delta_error_class = "DELTA_UNSUPPORTED_FEATURES_FOR_READ"

    def __init__(self, message: str, *, feature: str, operation: str) -> None:
        super().__init__(message)
        self.feature = feature
        self.operation = operation


class InvalidDataFileError(DeltaError):
    """A file to commit, or a data file the log references, is not a readable Parquet file."""


class SchemaError(DeltaError, ValueError):
    """A schema cannot be converted, or data does not fit the table schema."""


class SchemaMismatchError(SchemaError):
    delta_error_class = "DELTA_FAILED_TO_MERGE_FIELDS"


class InvalidLogValueError(DeltaError, ValueError):
    """A value that would go into the log does not fit its Delta type (a ``long`` beyond
    2^63 - 1, a negative size, a stats bound that is not a date ...). Raised before anything
    is written; the message names the field, the value and the allowed range."""


class InvalidPartitionValueError(InvalidLogValueError, SchemaMismatchError):
    """A partition value does not parse as its column's Delta type, or lies outside its range."""


class DeletionVectorError(DeltaError):
    """Files carry deletion vectors and the caller asked for something that would ignore them."""


# --- Change data ----------------------------------------------------------------------------


class ChangeDataError(DeltaError):
    """The changes between two versions cannot be given exactly (see :meth:`DeltaTable.changes`)."""


class InvalidChangeRangeError(ChangeDataError, ValueError):
    """The bounds of a change range are missing, contradictory or outside the table's history.

    :param delta_error_class: Delta's name for the condition (``DELTA_INVALID_CDC_RANGE`` ...).
    """

    def __init__(self, message: str, *, delta_error_class: str) -> None:
        super().__init__(message)
        self.delta_error_class = delta_error_class


class ChangeDataNotRecordedError(ChangeDataError):
    """A commit rewrote rows without recording which (no ``cdc`` files, change data feed off), so
    its deletes and inserts cannot be told from copies of unchanged rows.

    :param version: the commit's version.
    :param operation: its operation (from its commitInfo), if known.
    """

    delta_error_class = "DELTA_MISSING_CHANGE_DATA"

    def __init__(self, message: str, *, version: int, operation: str | None) -> None:
        super().__init__(message)
        self.version = version
        self.operation = operation


class ConsumerCursorError(ChangeDataError):
    """A consumer of a table's changes cannot start or go on from the cursor its target holds (see
    :mod:`~airflow_delta_provider.core.table.consumer`): it has none but the target holds data, or it
    has one on another table."""


class SourceIsTargetError(ChangeDataError, ValueError):
    """A consumer's source table is its target (one table id), reached through another location (a
    symlink, another spelling) or a copy of it: each run would read its own output again."""


class ChangeDataSchemaError(ChangeDataError, SchemaError):
    """The schema changed within a change range in a way the rows cannot be read across (a
    column renamed, dropped or retyped, nullability tightened, partitioning changed)."""

    def __init__(self, message: str, *, version: int, delta_error_class: str) -> None:
        super().__init__(message)
        self.version = version
        self.delta_error_class = delta_error_class


class ChangeDataFileNotFoundError(ChangeDataError):
    """A data, change-data or deletion-vector file a change needs is gone (VACUUM deletes removed
    files after ``delta.deletedFileRetentionDuration``).

    :param path: the missing file.
    :param version: the version whose change needs it.
    """

    delta_error_class = "DELTA_FILE_NOT_FOUND"

    def __init__(self, message: str, *, path: str, version: int) -> None:
        super().__init__(message)
        self.path = path
        self.version = version


# --- Commits and conflicts ----------------------------------------------------------------


class CommitError(DeltaError):
    """A commit could not be written."""


class AppendOnlyViolationError(CommitError):
    delta_error_class = "DELTA_CANNOT_MODIFY_APPEND_ONLY"


class RowTrackingError(CommitError):
    """Row ids cannot be assigned (an add without ``numRecords``, a hand-written high-water mark)."""

    delta_error_class = "DELTA_ROW_ID_ASSIGNMENT_WITHOUT_STATS"


class ConstraintViolationError(CommitError, ValueError):
    """A row to commit breaks an invariant, a CHECK constraint, a generation expression or an
    identity column's rules; nothing was committed. The message names the constraint, the file
    and a sample row."""

    delta_error_class = "DELTA_VIOLATE_CONSTRAINT_WITH_VALUES"


class UnsupportedExpressionError(UnsupportedFeatureError):
    """A table's constraint or generation expression cannot be evaluated here exactly as Spark
    would (or its engine is not installed); the commit is refused, naming the expression."""


class EmptyOverwriteError(CommitError, ValueError):
    """An overwrite or replace would remove data and add none, and the caller did not opt in
    (``allow_empty_overwrite=True``)."""


class MaxCommitAttemptsExceededError(CommitError):
    delta_error_class = "DELTA_MAX_COMMIT_RETRIES_EXCEEDED"


class ConcurrentModificationError(CommitError):
    """A concurrent commit conflicts with this transaction (Delta's ``DeltaConcurrentModificationException``).

    :param version: the table version of the winning commit.
    :param operation: the winning commit's operation (from its commitInfo), if known.
    """

    def __init__(self, message: str, *, version: int, operation: str | None = None) -> None:
        super().__init__(message)
        self.version = version
        self.operation = operation


class ConcurrentAppendError(ConcurrentModificationError):
    delta_error_class = "DELTA_CONCURRENT_APPEND"


class ConcurrentDeleteReadError(ConcurrentModificationError):
    delta_error_class = "DELTA_CONCURRENT_DELETE_READ"


class ConcurrentDeleteDeleteError(ConcurrentModificationError):
    delta_error_class = "DELTA_CONCURRENT_DELETE_DELETE"


class ConcurrentTransactionError(ConcurrentModificationError):
    delta_error_class = "DELTA_CONCURRENT_TRANSACTION"


class MetadataChangedError(ConcurrentModificationError):
    delta_error_class = "DELTA_METADATA_CHANGED"


class ProtocolChangedError(ConcurrentModificationError):
    delta_error_class = "DELTA_PROTOCOL_CHANGED"


class ConcurrentWriteError(ConcurrentModificationError):
    """A concurrent commit changed the table that an operation without conflict resolution (RESTORE,
    as Delta's ``commitLarge``) had read; nothing was committed."""

    delta_error_class = "DELTA_CONCURRENT_WRITE"


# --- Restore ------------------------------------------------------------------------------


class RestoreVersionNotFoundError(VersionNotFoundError):
    """The version to restore is outside the versions the log can rebuild."""

    delta_error_class = "DELTA_CANNOT_RESTORE_TABLE_VERSION"


class RestoreTimestampEarlierError(TimestampEarlierThanRetentionError):
    """The timestamp to restore is before the earliest version the log can rebuild."""

    delta_error_class = "DELTA_CANNOT_RESTORE_TIMESTAMP_EARLIER"


class RestoreTimestampGreaterError(TimestampLaterThanLatestCommitError):
    """The timestamp to restore is after the latest commit."""

    delta_error_class = "DELTA_CANNOT_RESTORE_TIMESTAMP_GREATER"


class TimeTravelBeyondRetentionError(VersionNotFoundError):
    """The version was committed before ``delta.deletedFileRetentionDuration``: VACUUM may have
    deleted files it needs (Delta 4.1+ refuses such time travel, RESTORE included)."""

    delta_error_class = "DELTA_UNSUPPORTED_TIME_TRAVEL_BEYOND_DELETED_FILE_RETENTION_DURATION"


class RestoreMissingFilesError(DeltaError):
    """Files the restored version needs (data files or deletion-vector files) no longer exist.

    :param version: the version that was to be restored.
    :param missing: the missing files (their paths as the log writes them), at most
        :data:`~airflow_delta_provider.core.lifecycle.restore.MAX_MISSING_FILES_NAMED`.
    """

    def __init__(self, message: str, *, version: int, missing: Sequence[str]) -> None:
        super().__init__(message)
        self.version = version
        self.missing = list(missing)


class TaggedCommitsNotFoundError(VersionNotFoundError, LookupError):
    """No commit of the table carries the tags asked for (an Airflow run that never wrote to it),
    or the log no longer holds all of them."""


# --- Maintenance --------------------------------------------------------------------------


class RetentionError(DeltaError, ValueError):
    """A maintenance setting (a retention, an interval, a switch) is invalid or unsafe."""


class InvalidTablePropertyError(RetentionError):
    """A table property (or its provider-wide default) has a value Delta would not accept
    (e.g. ``delta.checkpointInterval=0``); the message names the key, the value and its source."""

    delta_error_class = "DELTA_INVALID_TABLE_PROPERTY_VALUE"


class VacuumRetentionTooShortError(RetentionError):
    """The retention is shorter than the table's and the safety check is on."""

    delta_error_class = "DELTA_VACUUM_RETENTION_PERIOD_TOO_SHORT"


class VacuumRetentionNegativeError(RetentionError):
    delta_error_class = "DELTA_VACUUM_RETENTION_PERIOD_NEGATIVE"


class DataRetentionError(RetentionError):
    """A data retention policy that cannot apply to the table (an unknown column, a column that
    holds no time, values that are no dates); nothing was deleted."""


class DataRetentionLimitError(DataRetentionError):
    """A data retention run would delete more of the table's rows than its ``max_deleted_fraction``
    allows (a typo in the policy must never empty a table); nothing was deleted."""


class OptimizeRewriteError(DeltaError):
    """The rewrite of an OPTIMIZE failed (an input could not be read, the engine failed); nothing was
    committed and the files the attempt wrote were removed."""


class VacuumLiteError(DeltaError):
    """LITE cannot see every file it would have to delete (the log was cleaned)."""

    delta_error_class = "DELTA_CANNOT_VACUUM_LITE"


class DeleteFilesError(StorageError):
    """The store refused to delete some files.

    :param failed: ``(path, reason)`` of the files that could not be deleted.
    """

    def __init__(self, message: str, *, failed: Sequence[tuple[str, str]]) -> None:
        super().__init__(message)
        self.failed = list(failed)


class VacuumDeleteError(DeleteFilesError):
    """VACUUM could not delete some files (the store refused them)."""
