"""DELETE from a Delta table, exactly once per task instance (``DeltaTable.delete`` in a task).

The rendered predicate is checked first (a blank one is refused: a template that rendered nothing
must never empty a table; only ``predicate=None`` written in the DAG deletes every row). Values
reach the predicate through ``parameters``, bound to its ``:name`` markers and rendered as native
Python values, never through the predicate's text (a rendered quote would change the query). The
idempotency key is OPTIMIZE's; a table that already holds it reports the recorded commit without
reading data or starting Spark. The core deletes (whole files, deletion vectors or copy-on-write);
with ``evaluate_on_spark`` the rows are matched on Spark, which returns only their positions. The
asset event and OpenLineage output are the commit operators'. See docs/operators.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_pyspark import PySparkOperator
from airflow.providers.common.compat.standard.operators import PythonOperator

from airflow_delta_provider.config import max_commit_attempts
from airflow_delta_provider.core.lifecycle import check_predicate_text
from airflow_delta_provider.hooks.mixins import delta_template_fields
from airflow_delta_provider.operators.commit import (
    DeltaCommitMixin,
    RunIdentity,
    _recorded_commit,
    already_committed,
    resolve_idempotency_key,
)
from airflow_delta_provider.operators.spark_support.output import RoutedSparkOutput
from airflow_delta_provider.spark.paths import spark_path
from airflow_delta_provider.utils.coercion import to_app_id, to_app_version, to_bool, validate
from airflow_delta_provider.utils.wording import count

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow.sdk import Context

    from airflow_delta_provider.core.lifecycle import DeleteResult
    from airflow_delta_provider.core.table import DeltaTable
    from airflow_delta_provider.core.transaction import CommitResult

__all__ = ["DeltaDeleteOperator"]


def _no_callable(spark: Any = None) -> None:
    """The operator's ``python_callable``: the row matching runs in :class:`_DeleteInSession` instead."""


@dataclass
class _Pending:
    """What the execution decided before starting Spark, for the DELETE inside the session."""

    table: DeltaTable
    arguments: dict[str, Any]
    context: Context
    identity: RunIdentity


class _DeleteInSession(PythonOperator):  # type: ignore[misc]  # the compat import is untyped (Any)
    """Placed after ``PySparkOperator`` in the MRO: its ``execute_callable`` runs inside the session
    ``PySparkOperator.execute_callable`` opens (and stops afterwards). Not usable on its own."""

    def execute_callable(self) -> Any:
        return self._delete_in_session(self.op_kwargs["spark"])


class DeltaDeleteOperator(DeltaCommitMixin, RoutedSparkOutput, PySparkOperator, _DeleteInSession):
    """Delete the rows a predicate selects from a Delta table, exactly once per task instance.

    .. code-block:: python

        DeltaDeleteOperator(
            task_id="erase_customer",
            table_uri="s3://lake/orders",
            predicate="customer_id = :customer_id",
            parameters={"customer_id": "{{ params.customer_id }}"},
        )

    .. seealso:: ``docs/operators.md`` (DeltaDeleteOperator) and ``docs/lifecycle.md`` (DELETE)

    :param predicate: the rows to delete, a SQL condition (comparisons, ``IN``, ``BETWEEN``,
        ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``) on any columns, meaning what it means in Spark
        SQL; required. ``None`` written in the DAG deletes every row; a template rendering an empty
        or blank text (or ``None``) is refused. (templated)
    :param parameters: the values of the predicate's ``:name`` markers, each bound as a typed
        literal. Each value may be a template, rendered as a native Python value
        (``"{{ params.customer_id }}"`` gives the int 42), whatever the DAG's
        ``render_template_as_native_obj``; a value that renders to nothing (``None``, ``""``) is
        refused. Never render a value into ``predicate`` itself. (templated)
    :param table_uri: the table root. (templated)
    :param delta_conn_id: a ``delta`` connection naming the table. (templated)
    :param storage_conn_id: an Airflow storage connection for ``table_uri``. (templated)
    :param storage_options: fsspec options for the core's access to the table.
    :param app_id: Delta ``txnAppId``; default: the task instance. (templated)
    :param app_version: Delta ``txnVersion``; default: equal across retries, raised by a clear. (templated)
    :param user_metadata: commitInfo ``userMetadata``; default: the run identity as JSON. (templated)
    :param tags: extra commitInfo tags (the run identity is always added).
    :param evaluate_on_spark: find the matching rows on Spark (large tables); the commit stays the
        core's. (templated)
    :param spark_table_uri: where Spark finds the table, when its Hadoop path differs from
        ``table_uri`` (default: ``table_uri`` with ``s3://`` as ``s3a://``). (templated)
    :param conn_id: with ``evaluate_on_spark``: a ``spark`` or ``spark_connect`` connection; default
        ``local[*]``. (templated)
    :param config_kwargs: with ``evaluate_on_spark``: Spark configuration. (templated)

    Returns (XCom): ``table_uri``, ``version``, ``committed``, ``skipped``, ``reason`` (None,
    ``nothing_to_delete``, ``already_committed``), ``operation``, ``predicate``, ``mode``
    (``metadata``, ``deletion_vectors``, ``copy_on_write``), ``app_id``, ``app_version``,
    ``read_version``, ``num_deleted_rows`` (None when unknown), ``num_removed_files``,
    ``num_added_files``, ``num_deletion_vectors_added``, ``num_added_change_files`` and ``metrics``
    (Delta's DELETE ``operationMetrics``).
    """

    template_fields: Sequence[str] = (
        *delta_template_fields(
            "predicate",
            "parameters",
            "app_id",
            "app_version",
            "user_metadata",
            "evaluate_on_spark",
            "spark_table_uri",
        ),
        *PySparkOperator.template_fields,
    )
    table_purpose = "to delete from"
    ui_color = "#f9e0dc"

    def __init__(
        self,
        *,
        predicate: str | None,
        parameters: Mapping[str, Any] | None = None,
        table_uri: str | None = None,
        delta_conn_id: str | None = None,
        storage_conn_id: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
        app_id: str | None = None,
        app_version: int | str | None = None,
        user_metadata: str | None = None,
        tags: Mapping[str, str] | None = None,
        evaluate_on_spark: bool | str = False,
        spark_table_uri: str | None = None,
        conn_id: str | None = None,
        config_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._default_outlets(kwargs, table_uri, delta_conn_id)
        super().__init__(python_callable=_no_callable, conn_id=conn_id, config_kwargs=config_kwargs, **kwargs)
        self._init_table(
            table_uri=table_uri,
            delta_conn_id=delta_conn_id,
            storage_conn_id=storage_conn_id,
            storage_options=storage_options,
        )
        if predicate is not None:
            validate(predicate, _checked_predicate)
        _check_parameters(predicate, parameters)
        validate(app_id, to_app_id)
        validate(app_version, to_app_version)
        validate(evaluate_on_spark, to_bool, "evaluate_on_spark")
        if tags is not None and not all(isinstance(k, str) and isinstance(v, str) for k, v in tags.items()):
            raise ValueError(f"tags must map strings to strings, got {tags!r}.")
        self.predicate = predicate
        self.parameters = dict(parameters) if parameters is not None else None
        # Only a None written in the DAG means "every row": a template never renders to it.
        self._every_row = predicate is None
        self.app_id = app_id
        self.app_version = app_version
        self.user_metadata = user_metadata
        self.commit_tags = dict(tags) if tags else None
        self.evaluate_on_spark = evaluate_on_spark  # the argument name is the contract
        self.spark_table_uri = spark_table_uri
        self._pending: _Pending | None = None
        self._rendered_nothing: list[str] = []

    def render_template_fields(self, context: Any, jinja_env: Any = None) -> None:
        """Render as Airflow does, then ``parameters`` again as native Python values: a bound
        value keeps its type (an id stays an int), whatever the DAG's rendering mode."""
        templates = self.parameters
        super().render_template_fields(context, jinja_env)
        if templates is not None:
            environment = jinja_env or self.get_template_env()
            self.parameters = {
                name: _native(environment, value, context) for name, value in templates.items()
            }
            self._rendered_nothing = sorted(
                name
                for name, value in self.parameters.items()
                if _is_template(templates[name]) and (value is None or value == "")
            )

    # --- execution -------------------------------------------------------------------------

    def _rendered_predicate(self) -> str | None:
        """The predicate to delete by; a rendered blank (or ``"None"``) is refused, never "every row"."""
        if self._every_row:
            return None
        return _checked_predicate(self.predicate)

    def execute(self, context: Context) -> dict[str, Any]:
        predicate = self._rendered_predicate()
        if self._rendered_nothing:
            raise ValueError(
                f"The parameters {self._rendered_nothing} rendered nothing (None or an empty text): refusing "
                f"a DELETE on a missing value. Check the templates that give them."
            )
        # As OPTIMIZE: a retry shares the key, a clear raises it (a DELETE counts as an overwrite).
        identity, app_id, app_version = resolve_idempotency_key(
            context, self.app_id, self.app_version, "overwrite"
        )
        arguments: dict[str, Any] = {
            "parameters": self.parameters,
            "app_id": app_id,
            "app_version": app_version,
            "user_metadata": self.user_metadata or identity.user_metadata(),
            "tags": {**(self.commit_tags or {}), **identity.tags()},
            "max_attempts": max_commit_attempts(),
        }
        table = self.hook.get_table()
        self.log.info(
            "Deleting from %s the rows where %s (appId=%r, txnVersion=%d%s).",
            self.hook.table_uri,
            predicate if predicate is not None else "TRUE (every row)",
            app_id,
            app_version,
            ", rows matched on Spark" if to_bool(self.evaluate_on_spark, "evaluate_on_spark") else "",
        )
        # Before any data is read or Spark starts: a retry whose commit already landed does nothing.
        done = already_committed(table, app_id, app_version)
        if done is not None:
            return self._report_recorded(context, table, done, predicate, identity)
        if not to_bool(self.evaluate_on_spark, "evaluate_on_spark"):
            return self._report_delete(context, table.delete(predicate, **arguments), identity)
        self._pending = _Pending(table, {"predicate": predicate, **arguments}, context, identity)
        try:
            # PythonOperator.execute → PySparkOperator.execute_callable (session) → _delete_in_session.
            report: dict[str, Any] = super().execute(context)
            return report
        finally:
            self._pending = None

    def _delete_in_session(self, spark: Any) -> dict[str, Any]:
        from airflow_delta_provider.spark.delete import spark_row_matcher

        pending = self._pending
        if pending is None:  # pragma: no cover - only reachable by calling execute_callable directly
            raise RuntimeError("DeltaDeleteOperator.execute_callable runs only from execute().")
        table = pending.table
        root = self.spark_table_uri or spark_path(table.uri)
        result = table.delete(match_rows=spark_row_matcher(spark, spark_uri=root), **pending.arguments)
        return self._report_delete(pending.context, result, pending.identity)

    # --- the outcome -----------------------------------------------------------------------

    def _report_delete(
        self, context: Context | Mapping[str, Any], result: DeleteResult, identity: RunIdentity
    ) -> dict[str, Any]:
        """Log the outcome, emit the asset event and build the XCom value."""
        uri = self.hook.table_uri
        value = {
            "table_uri": uri,
            **result.to_dict(),
            "skipped": not result.committed,
            "operation": "DELETE",
            "app_id": result.commit.app_id if result.commit is not None else None,
            "app_version": result.commit.app_version if result.commit is not None else None,
        }
        value.pop("commit")
        if result.committed:
            deleted = result.num_deleted_rows
            self.log.info(
                "Deleted %s from %s at version %d (%s): %s removed, %s added, %s written.",
                "an unknown number of rows" if deleted is None else count(deleted, "row"),
                uri,
                result.version,
                result.mode,
                count(result.num_removed_files, "file"),
                count(result.num_added_files, "file"),
                count(result.num_deletion_vectors_added, "deletion vector"),
            )
        else:
            self.log.info(
                "Nothing deleted from %s: no row matches at version %d; no commit was written (try %d).",
                uri,
                result.version,
                identity.try_number,
            )
        return self._finish(context, value)

    def _report_recorded(
        self,
        context: Context | Mapping[str, Any],
        table: DeltaTable,
        done: CommitResult,
        predicate: str | None,
        identity: RunIdentity,
    ) -> dict[str, Any]:
        """The report of a DELETE an earlier execution of this task instance committed."""
        recorded = _recorded_commit(table, done)
        metrics = {k: int(v) for k, v in recorded.operation_metrics.items() if str(v).lstrip("-").isdigit()}
        self.log.info(
            "Nothing to do: version %d of %s already holds this task instance's %s (appId=%r, "
            "txnVersion=%d), made by an earlier execution. This is try %d; no data was read.",
            recorded.version,
            self.hook.table_uri,
            recorded.operation,
            recorded.app_id,
            recorded.app_version,
            identity.try_number,
        )
        value = {
            "table_uri": self.hook.table_uri,
            "version": recorded.version,
            "committed": False,
            "skipped": True,
            "reason": recorded.reason,
            "operation": recorded.operation,
            "predicate": predicate,
            "mode": None,
            "read_version": recorded.read_version,
            "app_id": recorded.app_id,
            "app_version": recorded.app_version,
            "num_deleted_rows": metrics.get("numDeletedRows"),
            "num_removed_files": metrics.get("numRemovedFiles", 0),
            "num_added_files": metrics.get("numAddedFiles", 0),
            "num_deletion_vectors_added": metrics.get("numDeletionVectorsAdded", 0),
            "num_added_change_files": metrics.get("numAddedChangeFiles", 0),
            "metrics": metrics,
        }
        return self._finish(context, value)

    def _finish(self, context: Context | Mapping[str, Any], value: dict[str, Any]) -> dict[str, Any]:
        """Emit the table's asset event and keep the value for OpenLineage."""
        self._emit_asset_event(context, value, value["table_uri"])
        self._lineage_result = value
        return value


def _check_parameters(predicate: str | None, parameters: Any) -> None:
    """Parameters are a mapping of marker names, and bind a predicate's markers only."""
    if parameters is None:
        return
    if not isinstance(parameters, Mapping) or not all(isinstance(k, str) for k in parameters):
        raise ValueError(
            f"parameters must map the predicate's marker names to values (e.g. {{'customer_id': "
            f"'{{{{ params.customer_id }}}}'}} for :customer_id), got {parameters!r}."
        )
    if predicate is None:
        raise ValueError(
            "parameters were given with predicate=None, which deletes every row: the values would be "
            "ignored. Give the predicate they bind (e.g. 'customer_id = :customer_id')."
        )


def _native(environment: Any, value: Any, context: Any) -> Any:
    """A parameter rendered as a native Python value (``"{{ params.id }}"`` -> 42), as Jinja's
    NativeEnvironment renders it; a value that is no template is kept as it is."""
    if not _is_template(value):
        return value
    from jinja2.nativetypes import native_concat

    template = environment.from_string(value)
    return native_concat(template.root_render_func(template.new_context(dict(context))))


def _is_template(value: Any) -> bool:
    return isinstance(value, str) and ("{{" in value or "{%" in value)


def _checked_predicate(value: Any) -> str:
    """A rendered predicate: the core refuses a blank one; the text ``None`` (a template rendering
    Python's None) is refused the same way, never taken for "every row"."""
    if isinstance(value, str) and value.strip().lower() == "none":
        value = ""
    check_predicate_text(value)
    assert isinstance(value, str)
    return value.strip()
