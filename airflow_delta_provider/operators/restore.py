"""Restore a Delta table to an earlier version from Airflow (Delta's ``RESTORE TABLE``), exactly once.

The core decides everything (:mod:`airflow_delta_provider.core.lifecycle.restore`). The version is named by
``version``, ``timestamp`` or ``before_run_id`` (the version before that Airflow run's first
commit). The restore is idempotent per task instance like an overwrite: a retry after it landed
commits nothing and reports the restore that did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperator

from airflow_delta_provider.config import max_commit_attempts
from airflow_delta_provider.core.lifecycle import recorded_restore
from airflow_delta_provider.hooks.mixins import delta_template_fields
from airflow_delta_provider.operators.commit import (
    TAG_PREFIX,
    DeltaCommitMixin,
    RunIdentity,
    already_committed,
)
from airflow_delta_provider.utils.coercion import (
    to_app_id,
    to_app_version,
    to_bool,
    to_int,
    to_text,
    to_timestamp,
    validate,
)
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow.sdk import Context

    from airflow_delta_provider.core.lifecycle import RestoreResult, TaggedCommits
    from airflow_delta_provider.core.table import DeltaTable

__all__ = ["DeltaRestoreOperator"]

#: The commitInfo tag holding the run's logical date: no commit of the run is older.
LOGICAL_DATE_TAG = f"{TAG_PREFIX}logical_date"


def _check_one_target(version: Any, timestamp: Any, run_id: Any, *, rendered: bool = False) -> None:
    """Exactly one way to name the version (after rendering, ``None`` names none)."""
    named = [
        n
        for n, v in (("version", version), ("timestamp", timestamp), ("before_run_id", run_id))
        if v is not None
    ]
    if len(named) != 1:
        raise ValueError(
            "DeltaRestoreOperator needs exactly one of version, timestamp or before_run_id to know which "
            f"version to restore; {'after rendering ' if rendered else ''}it got "
            f"{', '.join(named) if named else 'none of them'}"
            + (" (a template that renders None names none)." if rendered else ".")
        )


class DeltaRestoreOperator(DeltaCommitMixin, BaseOperator):
    """Restore a Delta table to an earlier version in one ``RESTORE`` commit, exactly once.

    .. code-block:: python

        DeltaRestoreOperator(
            task_id="roll_back",
            table_uri="s3://lake/events",
            before_run_id="{{ params.bad_run_id }}",
            before_dag_id="ingest_events",
        )

    Exactly one of ``version``, ``timestamp`` or ``before_run_id`` names the version. The table's
    files of that version come back (deletion vectors included) and the files added since are
    removed; nothing is deleted from storage (VACUUM does that later). Refused, with nothing
    committed: a version whose files VACUUM already deleted (the error names them), one older
    than ``delta.deletedFileRetentionDuration`` unless ``enforce_retention_duration=False``, a
    restore that loses a race with another writer.

    .. seealso:: ``docs/lifecycle.md`` (RESTORE) and ``docs/operators.md``

    :param table_uri: the table root. (templated)
    :param version: the version to restore. (templated)
    :param timestamp: the point in time to restore (a datetime, ISO-8601, or epoch ms): the last
        version committed at or before it. (templated)
    :param before_run_id: an Airflow run id: restore the version before that run's first commit
        to the table. (templated)
    :param before_dag_id: the DAG of ``before_run_id``; required when runs of several DAGs with
        that run id wrote the table. (templated)
    :param enforce_retention_duration: refuse a version older than the table's
        ``delta.deletedFileRetentionDuration`` (Delta 4.1+). (templated)
    :param delta_conn_id: a ``delta`` connection naming the table. (templated)
    :param storage_conn_id: an Airflow storage connection for ``table_uri``. (templated)
    :param storage_options: fsspec options for the core's access to the table.
    :param app_id: Delta ``txnAppId``; default: the task instance. (templated)
    :param app_version: Delta ``txnVersion``; default: equal across retries, raised by a clear. (templated)

    Returns (XCom): ``table_uri``, ``version`` (holding the restore), ``restored_version``,
    ``committed``, ``skipped``, ``reason`` (None, ``no_op``, ``already_committed``), ``operation``,
    ``num_restored_files``, ``num_removed_files``, ``metrics`` (Delta's RESTORE metrics),
    ``read_version``, ``app_id``, ``app_version``, ``before_run`` (the run's commits, when named by it).
    """

    template_fields: Sequence[str] = delta_template_fields(
        "version",
        "timestamp",
        "before_run_id",
        "before_dag_id",
        "enforce_retention_duration",
        "app_id",
        "app_version",
    )
    table_purpose = "to restore"
    ui_color = "#fde2d5"
    #: A restore replaces the table's content: keyed as an overwrite (retries share the
    #: idempotency key, a clear raises it so the re-run restores again).
    mode = "overwrite"
    replace_where = None

    def __init__(
        self,
        *,
        table_uri: str | None = None,
        version: int | str | None = None,
        timestamp: Any = None,
        before_run_id: str | None = None,
        before_dag_id: str | None = None,
        enforce_retention_duration: bool | str = True,
        delta_conn_id: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        app_id: str | None = None,
        app_version: int | str | None = None,
        **kwargs: Any,
    ) -> None:
        self._default_outlets(kwargs, table_uri, delta_conn_id)
        # First: BaseOperator refuses an unknown argument by name (TypeError), so a misspelt
        # ``verison=`` is reported as such, not as a missing version.
        super().__init__(**kwargs)
        _check_one_target(version, timestamp, before_run_id)
        if before_dag_id is not None and before_run_id is None:
            raise ValueError("before_dag_id names the DAG of before_run_id; pass before_run_id too.")
        self._init_table(
            table_uri=table_uri,
            delta_conn_id=delta_conn_id,
            storage_conn_id=storage_conn_id,
            storage_options=storage_options,
        )
        validate(version, to_int, "version", meaning="a table version")
        validate(timestamp, to_timestamp, "timestamp")
        validate(before_run_id, to_text, "before_run_id")
        validate(before_dag_id, to_text, "before_dag_id")
        validate(enforce_retention_duration, to_bool, "enforce_retention_duration")
        validate(app_id, to_app_id)
        validate(app_version, to_app_version)
        self.version = version
        self.timestamp = timestamp
        self.before_run_id = before_run_id
        self.before_dag_id = before_dag_id
        self.enforce_retention_duration = enforce_retention_duration
        self.app_id = app_id
        self.app_version = app_version

    def execute(self, context: Context) -> dict[str, Any]:
        identity, app_id, app_version = self.idempotency_key(context)
        table = self.hook.get_table()
        done = already_committed(table, app_id, app_version)
        if done is not None:  # a retry: nothing to read but the commit that recorded the restore
            result = recorded_restore(table.snapshot(), done)
            return self._restore_report(context, result, identity, None)
        version, timestamp, run = self._target(table)
        self.log.info(
            "Restoring %s to %s (appId=%r, txnVersion=%d).",
            self.hook.table_uri,
            f"version {version}" if version is not None else f"the version as of {timestamp} ms",
            app_id,
            app_version,
        )
        result = table.restore(
            version,
            timestamp=timestamp,
            enforce_retention_duration=to_bool(self.enforce_retention_duration, "enforce_retention_duration"),
            app_id=app_id,
            app_version=app_version,
            user_metadata=identity.user_metadata(),
            tags=identity.tags(),
            max_attempts=max_commit_attempts(),
        )
        return self._restore_report(context, result, identity, run)

    def _target(self, table: DeltaTable) -> tuple[int | None, int | None, TaggedCommits | None]:
        """The rendered version or timestamp, or the version before the named run's first commit."""
        version = to_int(self.version, "version", meaning="a table version")
        timestamp = to_timestamp(self.timestamp, "timestamp")
        run_id = to_text(self.before_run_id, "before_run_id")
        _check_one_target(version, timestamp, run_id, rendered=True)
        if run_id is None:
            return version, timestamp, None
        run = self._run_commits(table, run_id)
        return run.version_before, None, run

    def _run_commits(self, table: DeltaTable, run_id: str) -> TaggedCommits:
        """The table's commits by run ``run_id`` (of ``before_dag_id``), refusing an ambiguous run id."""
        dag_id = to_text(self.before_dag_id, "before_dag_id")
        tags = {f"{TAG_PREFIX}run_id": run_id}
        if dag_id is not None:
            tags[f"{TAG_PREFIX}dag_id"] = dag_id
        run = table.tagged_commits(tags, not_before_tag=LOGICAL_DATE_TAG)
        dags = sorted({c.tags.get(f"{TAG_PREFIX}dag_id", "?") for c in run.commits})
        if len(dags) > 1:
            raise ValueError(
                f"Runs with the id {run_id!r} of several DAGs wrote {self.hook.table_uri}: "
                f"{', '.join(dags)}. Pass before_dag_id to say which run to restore before."
            )
        self.log.info(
            "Run %r of DAG %r first committed version %d of %s (its commits: %s); restoring version %d.",
            run_id,
            dags[0],
            run.first.version,
            self.hook.table_uri,
            ", ".join(str(c.version) for c in run.commits),
            run.version_before,
        )
        return run

    def _restore_report(
        self,
        context: Context | Mapping[str, Any],
        result: RestoreResult,
        identity: RunIdentity,
        run: TaggedCommits | None,
    ) -> dict[str, Any]:
        """Log the outcome, emit the asset event and build the XCom value."""
        uri = self.hook.table_uri
        metrics = dict(result.metrics)
        if result.committed:
            self.log.info(
                "Restored %s to version %s as version %d: %s added back (%s), %s removed (%s).",
                uri,
                result.restored_version,
                result.version,
                count(result.num_restored_files, "file"),
                count(metrics.get("restoredFilesSize", 0), "byte"),
                count(result.num_removed_files, "file"),
                count(metrics.get("removedFilesSize", 0), "byte"),
            )
        elif result.reason == "no_op":
            self.log.info("Nothing to restore: %s is at version %d already.", uri, result.version)
        else:
            self.log.info(
                "Nothing to commit: version %d of %s already holds this task instance's restore (to version "
                "%s), made by an earlier execution. This is try %d.",
                result.version,
                uri,
                result.restored_version,
                identity.try_number,
            )
        core = result.to_dict()
        value: dict[str, Any] = {
            "table_uri": uri,
            **core,
            "skipped": not result.committed,
            "files": result.num_restored_files if result.committed else 0,
            "bytes": metrics.get("restoredFilesSize", 0) if result.committed else 0,
            "rows": None,
            "before_run": run.to_dict() if run is not None else None,
        }
        event = {
            **core,
            "skipped": not result.committed,
            "num_added_files": result.num_restored_files,
            "num_removed_files": result.num_removed_files,
            "num_output_bytes": metrics.get("restoredFilesSize", 0),
            "num_removed_bytes": metrics.get("removedFilesSize", 0),
        }
        self._emit_asset_event(context, event, uri)
        self._lineage_result = value
        return value
