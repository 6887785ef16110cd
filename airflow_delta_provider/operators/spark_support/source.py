"""Incremental input of the PySpark operator (``source=``): another table's changes since the last
source version this task consumed, and the cursor committed with the task's output.

The consumer is the task, ``airflow/<dag_id>/<task_id>[/<map_index>]``; its cursor is a ``txn`` of
the target table, appId ``delta-source/<source table id>/<consumer>`` (see
:mod:`airflow_delta_provider.core.table.consumer`), version the last source version consumed. Each
execution reads the cursor from the target, plans the source versions after it (up to the newest,
or up to the highest version the source's asset events that triggered the run announce), hands the
callable ``changes`` (a Spark DataFrame of those versions' changes) and ``source_versions``, and the
operator commits the callable's DataFrame with the cursor advanced in the same commit. The move is
a compare-and-set: when a concurrent run moved the cursor first, the work is done again from the
new cursor (at most :data:`MAX_SOURCE_ROUNDS` times). See ``docs/reading.md``.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from airflow.sdk import Asset

from airflow_delta_provider.assets.delta import event_version_range, table_asset_uri
from airflow_delta_provider.core.errors import (
    ChangeDataFileNotFoundError,
    ChangeDataNotRecordedError,
    CommitsCleanedUpError,
    ConsumerCursorError,
    SourceIsTargetError,
)
from airflow_delta_provider.hooks.mixins import build_hook
from airflow_delta_provider.utils.coercion import is_deferred, is_none, to_bool, to_int, to_text, validate
from airflow_delta_provider.utils.partitions import RunSlice, to_key_columns
from airflow_delta_provider.utils.secrets import refuse_credentials
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow.sdk import Context

    from airflow_delta_provider.core.log import Snapshot
    from airflow_delta_provider.core.table import ConsumerPartition, SourceRead, StartingVersion
    from airflow_delta_provider.hooks.delta import DeltaTableHook
    from airflow_delta_provider.operators.commit import RunIdentity

__all__ = [
    "CHANGES_ARGUMENT",
    "MAX_SOURCE_ROUNDS",
    "SOURCE_TEMPLATE_FIELDS",
    "VERSIONS_ARGUMENT",
    "DeltaSourceMixin",
    "consumer_name",
    "source_location",
    "triggering_bound",
]

#: The source arguments the operator templates.
SOURCE_TEMPLATE_FIELDS = (
    "source",
    "source_storage_conn_id",
    "source_starting_version",
    "source_reset",
    "spark_source_uri",
    "source_partition_key_columns",
)
#: The callable's arguments that receive the source's changes and their version range.
CHANGES_ARGUMENT = "changes"
VERSIONS_ARGUMENT = "source_versions"
#: Times an execution reads the cursor and runs the callable again after concurrent runs moved it.
MAX_SOURCE_ROUNDS = 5
_RESTART = (
    "To restart from a snapshot of the source, run the task once with source_reset=True and "
    "mode='overwrite': the callable then receives the source's rows at its latest version as inserts, "
    "and its DataFrame replaces the target."
)


def source_location(value: str) -> tuple[str | None, str | None]:
    """``(table URI, None)`` for a location (a URI with a scheme, or a path starting with ``/``,
    ``.`` or ``~``), ``(None, connection id)`` for anything else: a ``delta`` connection."""
    text = value.strip()
    if "://" in text or text.startswith(("/", ".", "~")):
        return text, None
    return None, text


def consumer_name(identity: RunIdentity) -> str:
    """The consumer a task is: ``airflow/<dag_id>/<task_id>``, and ``/<map_index>`` when mapped."""
    base = f"airflow/{identity.dag_id}/{identity.task_id}"
    return base if identity.map_index < 0 else f"{base}/{identity.map_index}"


def triggering_bound(context: Context | Mapping[str, Any], asset_uri: str) -> int | None:
    """The highest version the asset events of ``asset_uri`` that triggered the run announce
    (see :func:`~airflow_delta_provider.assets.delta.event_version_range`); None without any."""
    accessor = context.get("triggering_asset_events")
    if not accessor:
        return None
    found = [
        version_range[1]
        for key in accessor
        if isinstance(key, Asset) and key.uri == asset_uri
        for event in accessor[key]
        if (version_range := event_version_range(getattr(event, "extra", None))) is not None
    ]
    return max(found) if found else None


def _to_source(value: Any) -> str:
    """The rendered ``source``: a table URI or a connection id (the rendered ``None`` is neither)."""
    text = to_text(value, "source", optional=False)
    if text is None or is_none(text):
        raise ValueError(
            f"source must name a table (a URI, or a delta connection id), got {value!r}: the template "
            f"found nothing. Pass the source table, or leave source out for a task without one."
        )
    return text


def _to_starting_version(value: Any) -> StartingVersion:
    if isinstance(value, str) and value.strip().lower() == "latest":
        return "latest"
    return to_int(value, "source_starting_version", meaning="a source version (or 'latest')")


def _takes(python_callable: Callable[..., Any], name: str) -> bool:
    parameters = inspect.signature(python_callable).parameters.values()
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


class DeltaSourceMixin:
    """The ``source=`` arguments of the PySpark operator, and the reads they make.

    The operator calls :meth:`_init_source_args` from ``__init__``, :meth:`plan_source` before
    Spark starts (and again after a concurrent run moved the cursor), and
    :meth:`source_arguments` inside the Spark session.
    """

    source: str | None
    source_storage_conn_id: str | None
    source_storage_options: dict[str, Any] | None
    source_starting_version: Any
    source_reset: Any
    spark_source_uri: str | None
    source_partition_key_columns: Sequence[str] | str | None
    python_callable: Callable[..., Any]
    log: Any
    #: the slice of the target a keyed run replaces (the commit mixin decides it)
    _slice: RunSlice | None

    def _init_source_args(
        self,
        *,
        source: str | None,
        source_storage_conn_id: str | None,
        source_storage_options: Mapping[str, Any] | None,
        source_starting_version: int | str | None,
        source_reset: bool | str,
        spark_source_uri: str | None,
        python_callable: Callable[..., Any],
        source_partition_key_columns: Sequence[str] | str | None = None,
        partition_key_columns: Sequence[str] | str | None = None,
    ) -> None:
        """Check and keep the source arguments (no I/O).

        :raises ValueError: a bad argument, or a callable that does not take ``changes``.
        """
        name = type(self).__name__
        if source is not None and not is_deferred(source):
            _to_source(source)
        refuse_credentials(source, argument="source", owner=name)
        if source_storage_options is not None and not isinstance(source_storage_options, Mapping):
            raise ValueError(
                f"{name}: source_storage_options must be a mapping of fsspec options, "
                f"got {type(source_storage_options).__name__}."
            )
        validate(source_starting_version, _to_starting_version)
        validate(source_reset, to_bool, "source_reset")
        if source is None and (source_starting_version is not None or source_reset is not False):
            raise ValueError(
                f"{name}: source_starting_version and source_reset apply to a source table; pass source= "
                f"(a table URI or a delta connection id) or leave them out."
            )
        if source is not None and not _takes(python_callable, CHANGES_ARGUMENT):
            raise ValueError(
                f"{name}: with source=, the callable receives the source's changes as "
                f"{CHANGES_ARGUMENT!r}; {getattr(python_callable, '__name__', python_callable)!r} takes "
                f"no such argument. Add a parameter {CHANGES_ARGUMENT!r} (and {VERSIONS_ARGUMENT!r} for "
                f"their version range)."
            )
        if source_partition_key_columns is not None and (source is None or partition_key_columns is None):
            raise ValueError(
                f"{name}: source_partition_key_columns names the source columns a run's partition key "
                f"selects when the task consumes one partition of source= at a time; it needs source= and "
                f"partition_key_columns (the slice of the target each run replaces)."
            )
        if source_partition_key_columns is not None and not is_deferred(source_partition_key_columns):
            to_key_columns(source_partition_key_columns)
        self.source_partition_key_columns = source_partition_key_columns
        self.source = source
        self.source_storage_conn_id = source_storage_conn_id
        self.source_storage_options = dict(source_storage_options) if source_storage_options else None
        self.source_starting_version = source_starting_version
        self.source_reset = source_reset
        self.spark_source_uri = spark_source_uri

    @cached_property
    def source_hook(self) -> DeltaTableHook:
        """The source table's hook (built on first use, from the rendered ``source``)."""
        text = _to_source(self.source)
        refuse_credentials(text, argument="source", owner=type(self).__name__)
        uri, conn_id = source_location(text)
        return build_hook(
            table_uri=uri,
            delta_conn_id=conn_id,
            storage_conn_id=to_text(self.source_storage_conn_id, "source_storage_conn_id"),
            storage_options=self.source_storage_options,
        )

    def plan_source(
        self,
        context: Context | Mapping[str, Any],
        target: Snapshot | None,
        identity: RunIdentity,
        target_uri: str,
    ) -> SourceRead:
        """What this execution reads from the source: after the cursor the target holds, up to the
        newest version or the triggering asset events' version.

        :raises SourceIsTargetError: the source is the target: the same location, or the same table
            (one table id) reached through another location.
        :raises DeltaError: as :func:`~airflow_delta_provider.core.table.consumer.plan_read`, with what
            to do added to the message.
        """
        from airflow_delta_provider.core.table import plan_read

        hook = self.source_hook
        if table_asset_uri(hook.table_uri) == table_asset_uri(target_uri):  # known before any read
            raise SourceIsTargetError(
                f"source= names the table this task writes ({target_uri}); a task cannot consume its own "
                f"commits. Name another table."
            )
        bound = triggering_bound(context, table_asset_uri(hook.table_uri))
        reset = to_bool(self.source_reset, "source_reset")
        starting_version = _to_starting_version(self.source_starting_version)
        to_text(self.spark_source_uri, "spark_source_uri")  # checked before Spark starts
        try:
            read = plan_read(
                hook.get_table(),
                target,
                consumer_name(identity),
                up_to=bound,
                starting_version=starting_version,
                reset=reset,
                partition=self._source_partition(),
            )
        except (CommitsCleanedUpError, ChangeDataFileNotFoundError, ChangeDataNotRecordedError) as err:
            raise _with_remedy(err, self._lost_remedy(err, target, identity)) from None
        except ConsumerCursorError as err:
            raise _with_remedy(
                err,
                "Pass source_starting_version (the first source version to read), or run the task once "
                "with source_reset=True and mode='overwrite' to rebuild the target from the source's "
                "snapshot.",
            ) from None
        except ValueError as err:  # (a PredicateError is one; its module imports pyarrow, so not at the top)
            from airflow_delta_provider.core.expressions import PredicateError

            if not isinstance(err, PredicateError) or self._source_partition() is None:
                raise
            raise _with_remedy(
                err,
                "The run's partition key selects a partition of the source by its partition columns: name "
                "them with source_partition_key_columns (default: partition_key_columns).",
            ) from None
        self.log.info("%s", describe_read(read, hook.table_uri, bound, reset))
        return read

    def _source_partition(self) -> ConsumerPartition | None:
        """With a keyed run's slice: the partition of the source it consumes (the key's parts on
        ``source_partition_key_columns``, default the target's columns), with its own cursor."""
        from airflow_delta_provider.core.table import ConsumerPartition

        target_slice = getattr(self, "_slice", None)
        if target_slice is None:
            return None
        columns = target_slice.columns
        if self.source_partition_key_columns is not None:
            columns = tuple(to_key_columns(self.source_partition_key_columns))
        source_slice = RunSlice.of(target_slice.key, columns)
        return ConsumerPartition(target_slice.key, source_slice.predicate(), target_slice.predicate())

    def _lost_remedy(self, err: Exception, target: Snapshot | None, identity: RunIdentity) -> str:
        from airflow_delta_provider.core.table import parse_consumer_app_id

        consumer = consumer_name(identity)
        cursors = [
            txn.version
            for app_id, txn in (target.transactions.items() if target is not None else ())
            if (parsed := parse_consumer_app_id(app_id)) is not None and parsed[1] == consumer
        ]
        where = (
            f"This task consumed {self.source_hook.table_uri} up to version {max(cursors)}. "
            if cursors
            else ""
        )
        if isinstance(err, ChangeDataNotRecordedError):
            return (
                f"{where}To go on after version {err.version}, run the task once with source_reset=True "
                f"and source_starting_version={err.version + 1}. {_RESTART}"
            )
        earliest = getattr(err, "earliest_version", None)
        skip = (
            f" To skip the lost versions instead, run it once with source_reset=True and "
            f"source_starting_version={earliest}."
            if earliest is not None
            else ""
        )
        return f"{where}{_RESTART}{skip}"

    def source_arguments(self, spark: Any, read: SourceRead) -> dict[str, Any]:
        """The callable's ``changes`` (a DataFrame) and ``source_versions``, for the arguments it takes."""
        from airflow_delta_provider.spark.changes import empty_changes, read_change_set, read_snapshot_changes

        uri = to_text(self.spark_source_uri, "spark_source_uri")
        try:
            if read.changes is not None:
                frame = read_change_set(spark, read.changes, spark_uri=uri)
            elif read.snapshot is not None:  # (a partition's: restricted to it)
                assert read.committed_at is not None  # plan_read dates every snapshot it delivers
                frame = read_snapshot_changes(spark, read.snapshot, read.committed_at, spark_uri=uri)
            else:
                frame = empty_changes(spark, self.source_hook.get_table().snapshot())
        except ChangeDataFileNotFoundError as err:
            raise _with_remedy(err, _RESTART) from None
        arguments = {CHANGES_ARGUMENT: frame, VERSIONS_ARGUMENT: read.versions}
        return {k: v for k, v in arguments.items() if _takes(self.python_callable, k)}

    def source_report(self, read: SourceRead, rounds: int) -> dict[str, Any]:
        """What the XCom says of the source: the table, the cursor's appId, the versions consumed."""
        versions = read.versions
        return {
            "table_uri": self.source_hook.table_uri,
            "app_id": read.app_id,
            "versions": list(versions) if versions is not None else None,
            "cursor": read.record if read.record is not None else read.cursor,
            "previous_cursor": read.cursor,
            "rounds": rounds,
            **({"partition_key": read.partition.key} if read.partition is not None else {}),
        }


def source_event_extra(report: Mapping[str, Any]) -> dict[str, Any]:
    """The source keys of the target's asset event extra (flat: older Airflows flatten nested extras)."""
    versions = report.get("versions") or [None, None]
    return {
        "source_table_uri": table_asset_uri(report["table_uri"]),
        "source_from_version": versions[0],
        "source_to_version": versions[1],
    }


def describe_read(read: SourceRead, uri: str, bound: int | None, reset: bool) -> str:
    """One log line saying what an execution reads from its source, and why."""
    cursor = "no cursor" if read.cursor is None else f"cursor at version {read.cursor}"
    if read.partition is not None:
        cursor = f"partition {read.partition.key!r} ({read.partition.source_filter[1]}), {cursor}"
    if reset:
        cursor += " (reset: ignored)"
    upto = f", bounded by the triggering asset event's version {bound}" if bound is not None else ""
    head = f"Source {uri} (latest version {read.latest}), appId {read.app_id!r}: {cursor}{upto}. "
    versions = read.versions
    if versions is None:
        if read.record is not None and read.record != read.cursor:
            return head + f"Nothing to read yet; the commit records the cursor at version {read.record}."
        if read.partition is not None:
            return head + (
                "Nothing new in this partition: the callable receives source_versions=None and no rows, "
                "and nothing is committed."
            )
        return head + "Nothing new: the callable receives source_versions=None and no rows."
    if read.snapshot is not None:
        files = count(read.snapshot.num_files(), "file")
        within = f" (the partition's {files})" if read.partition is not None else f" ({files})"
        return head + (
            f"Reading the snapshot at version {versions[1]}{within} as inserts, then changes from the next "
            f"run on."
        )
    return head + f"Reading the changes of versions {versions[0]} to {versions[1]}."


def _with_remedy(err: Exception, remedy: str) -> Exception:
    """``err`` (same class and attributes) with ``remedy`` added to its message."""
    err.args = (f"{err.args[0] if err.args else err} {remedy}", *err.args[1:])
    return err
