"""Spark's JVM output in a task log at the level it means, never as ERROR for a healthy start."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from airflow_delta_provider.operators.spark_support.output import line_level


@pytest.mark.parametrize(
    ("line", "previous", "level"),
    [
        pytest.param(
            "26/11/23 10:46:15 WARN Utils: Your hostname resolves to a loopback address",
            None,
            logging.WARNING,
            id="log4j-warn",
        ),
        pytest.param(
            "26/11/23 10:46:15 WARN NativeCodeLoader: Unable to load native-hadoop library for your "
            "platform... using builtin-java classes where applicable",
            None,
            logging.INFO,
            id="hadoop-native-notice",
        ),
        pytest.param("26/11/23 10:46:15 ERROR Executor: boom", None, logging.ERROR, id="log4j-error"),
        pytest.param("26/11/23 10:46:15 INFO SparkContext: Running", None, logging.INFO, id="log4j-info"),
        pytest.param(
            "WARNING: An illegal reflective access operation has occurred", None, logging.WARNING, id="jvm"
        ),
        pytest.param(
            "WARNING: Using incubator modules: jdk.incubator.vector", None, logging.INFO, id="jvm-notice"
        ),
        pytest.param(
            "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
            None,
            logging.INFO,
            id="profile-notice",
        ),
        pytest.param("\tat org.apache.spark.Foo.bar(Foo.scala:1)", logging.ERROR, logging.ERROR, id="trace"),
    ],
)
def test_line_level(line, previous, level):
    assert line_level(line, previous) == level


_SCRIPT = textwrap.dedent(
    """
    import logging, sys
    logging.basicConfig(stream=sys.stdout, level=logging.INFO, format="%(levelname)s|%(name)s|%(message)s")
    from airflow_delta_provider.operators.spark_support.output import routed_spark_output
    with routed_spark_output():
        from pyspark.sql import SparkSession
        spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
                 .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
                 .getOrCreate())
        assert spark.range(3).count() == 3
        spark.stop()
    import time; time.sleep(1)
    """
)


@pytest.mark.spark
def test_a_local_session_start_writes_nothing_to_stderr(tmp_path):
    """In a fresh process (as a task runs): the JVM's start-up lines arrive as log records, not on stderr,
    which Airflow would show as ERROR."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "log4j" not in done.stderr and "NativeCodeLoader" not in done.stderr, done.stderr[-3000:]
    assert "pandas" not in done.stderr
    spark_lines = [line for line in done.stdout.splitlines() if "|airflow_delta_provider.spark|" in line]
    assert spark_lines, done.stdout[-3000:]
    # A healthy start warns of nothing either (the JVM's notices are INFO; pandas is one PySpark supports).
    troubled = [line for line in spark_lines if line.startswith(("WARNING|", "ERROR|", "CRITICAL|"))]
    assert not troubled, troubled
    assert any("log4j profile" in line and line.startswith("INFO|") for line in spark_lines)
    # The bind address is the JVM's local address too: no search of other interfaces, no warning.
    assert "resolves to a loopback address" not in done.stdout
