"""``@task.delta_pyspark``: a PySpark task whose returned DataFrame is committed to a Delta table.

The task takes every argument of :class:`~airflow_delta_provider.operators.pyspark.DeltaPySparkOperator`
(``@task.delta_pyspark(table_uri=..., partition_by=[...], mode=...)``, the function receiving
``spark``, and with ``source=`` also ``changes`` and ``source_versions``: each source version
consumed exactly once); its XCom is the commit report, not the DataFrame. See docs/operators.md.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

from airflow.providers.apache.spark.operators.spark_pyspark import SPARK_CONTEXT_KEYS
from airflow.sdk.bases.decorator import DecoratedOperator, task_decorator_factory

from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator
from airflow_delta_provider.operators.spark_support.source import CHANGES_ARGUMENT, VERSIONS_ARGUMENT

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from airflow.sdk.bases.decorator import TaskDecorator

__all__ = ["delta_pyspark_task"]


# Airflow types op_kwargs differently in DecoratedOperator and PythonOperator; its own
# @task.pyspark inherits the same pair.
class _DeltaPySparkDecoratedOperator(DecoratedOperator, DeltaPySparkOperator):  # type: ignore[misc]
    """The operator behind ``@task.delta_pyspark``."""

    custom_operator_name = "@task.delta_pyspark"
    template_fields: Sequence[str] = DeltaPySparkOperator.template_fields

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Sequence[Any] | None = None,
        op_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        kwargs_to_upstream = {
            "python_callable": python_callable,
            "op_args": op_args,
            "op_kwargs": op_kwargs,
        }
        # As the spark provider's @task.pyspark: `spark` is injected, so the callable may leave it
        # without a default and still be called as `ingest()` in the DAG; so are the source's
        # `changes` and `source_versions` with source=.
        injected = set(SPARK_CONTEXT_KEYS)
        if kwargs.get("source") is not None:
            injected |= {CHANGES_ARGUMENT, VERSIONS_ARGUMENT}
        signature = inspect.signature(python_callable)
        parameters = [
            p.replace(default=None) if p.name in injected else p for p in signature.parameters.values()
        ]
        # Functions take attributes; typeshed's FunctionType does not declare __signature__.
        python_callable.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        super().__init__(
            kwargs_to_upstream=kwargs_to_upstream,
            python_callable=python_callable,
            op_args=op_args,
            op_kwargs=op_kwargs,
            **kwargs,
        )


def delta_pyspark_task(
    python_callable: Callable[..., Any] | None = None,
    multiple_outputs: bool | None = None,
    **kwargs: Any,
) -> TaskDecorator:
    """Wrap a function returning a Spark DataFrame into a task committing it to a Delta table.

    Registered as ``@task.delta_pyspark`` through the provider's ``task-decorators``.

    :param python_callable: the function (receives ``spark``; returns a DataFrame).
    :param multiple_outputs: push each key of the commit report as its own XCom.
    :param kwargs: :class:`~airflow_delta_provider.operators.pyspark.DeltaPySparkOperator` arguments.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_DeltaPySparkDecoratedOperator,
        **kwargs,
    )
