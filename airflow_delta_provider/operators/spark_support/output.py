"""Spark's own output in a task log, at the level it means.

Airflow logs a task's standard error as ERROR, so a local Spark driver's start-up chatter would show
as red lines in a green task. While the session is built, :func:`routed_spark_output` has PySpark
start the JVM with its output piped to the provider, which logs each line at its log4j level (and
Python warnings at WARNING). Operators that open a session inherit :class:`RoutedSparkOutput`.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
import warnings
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["RoutedSparkOutput", "line_level", "routed_spark_output"]

#: The logger Spark's JVM output goes to (it reaches the task log like any other logger).
log = logging.getLogger("airflow_delta_provider.spark")
#: Spark's default log4j2 console pattern: ``yy/MM/dd HH:mm:ss LEVEL Logger: message``.
_LOG4J = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) ")
_LEVELS = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
}
#: How the lines of a Java stack trace start: they continue the record before them.
_CONTINUATION = ("\tat ", "\t... ", "Caused by: ", "\t", "    at ")
#: What every healthy local JVM prints at start-up, as warnings, though nothing is wrong: at INFO.
_NOTICES = (
    # Hadoop's native I/O library is optional: without it Hadoop uses its Java classes.
    "NativeCodeLoader: Unable to load native-hadoop library",
    # Spark 4 starts the JVM with the vector API, which the JDK still ships as an incubator module.
    "WARNING: Using incubator modules: jdk.incubator.vector",
)


def line_level(line: str, previous: int | None = None) -> int:
    """The logging level a line of Spark's JVM output means.

    :param line: one line, without its newline.
    :param previous: the level of the record the line before belonged to.
    """
    if any(notice in line for notice in _NOTICES):
        return logging.INFO
    match = _LOG4J.match(line)
    if match:
        return _LEVELS[match.group(1)]
    if previous is not None and line.startswith(_CONTINUATION):
        return previous
    if line.startswith("WARNING:"):  # the JVM's own warnings (incubator modules, illegal access...)
        return logging.WARNING
    return logging.INFO


def _pump(stream: IO[bytes]) -> None:
    previous: int | None = None
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip("\r\n")
        if not line:
            continue
        previous = line_level(line, previous)
        log.log(previous, "%s", line)


@contextlib.contextmanager
def routed_spark_output() -> Iterator[None]:
    """Within the block, a JVM PySpark starts has its output logged at its levels, and Python warnings
    are logged at WARNING instead of printed to standard error."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")
        with _routed_gateway():
            try:
                yield
            finally:
                for warning in caught:
                    log.warning("%s: %s", warning.category.__name__, warning.message)


@contextlib.contextmanager
def _routed_gateway() -> Iterator[None]:
    try:
        import pyspark.core.context as context_module
    except ImportError:  # pyspark-client only (Spark Connect): no local JVM
        yield
        return
    # SparkContext calls the launch_gateway its module imported; it is swapped for the block's length.
    namespace: dict[str, Any] = vars(context_module)
    original = namespace["launch_gateway"]

    def launch(conf: Any = None, popen_kwargs: dict[str, Any] | None = None) -> Any:
        import os
        from subprocess import PIPE

        # The JVM picks its local address before it reads spark.driver.bindAddress, warning on a
        # multi-homed host that the host name resolves to loopback; SPARK_LOCAL_IP (the environment
        # PySpark hands the JVM is its own) makes the configured bind address that address too.
        bind = conf.get("spark.driver.bindAddress") if conf is not None else None
        pinned = bool(bind) and "SPARK_LOCAL_IP" not in os.environ
        if pinned:
            os.environ["SPARK_LOCAL_IP"] = str(bind)
        try:
            gateway = original(conf, {**(popen_kwargs or {}), "stdout": PIPE, "stderr": PIPE})
        finally:
            if pinned:
                os.environ.pop("SPARK_LOCAL_IP", None)
        process = getattr(gateway, "proc", None)
        for stream in (getattr(process, "stdout", None), getattr(process, "stderr", None)):
            if stream is not None:
                threading.Thread(target=_pump, args=(stream,), name="spark-jvm-output", daemon=True).start()
        return gateway

    namespace["launch_gateway"] = launch
    try:
        yield
    finally:
        namespace["launch_gateway"] = original


class RoutedSparkOutput:
    """A mixin for operators built on the Spark provider's ``PySparkOperator``: placed before it in the
    operator's bases, it has ``PySparkOperator.execute_callable`` (which builds the session) run within
    :func:`routed_spark_output`, so a green task shows no ERROR line. Imports nothing of Airflow.
    """

    def execute_callable(self) -> Any:
        with routed_spark_output():
            return super().execute_callable()  # type: ignore[misc]  # the next class in the MRO has it
