"""Operators: idempotent commits of PySpark output and Delta table maintenance.

Import them from their modules: ``airflow_delta_provider.operators.commit``
(``DeltaCommitOperator``), ``.pyspark`` (``DeltaPySparkOperator``) and ``.maintenance``.
"""
