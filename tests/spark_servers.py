"""Spark as it is deployed, on loopback: a standalone cluster (master + worker) and a Spark Connect server.

Both are started from the installed PySpark distribution (its ``bin/spark-class`` and
``bin/spark-submit``; no Spark download), once per test session, and stopped by PID. Registered as
a pytest plugin by ``tests/conftest.py``, so every tier can ask for them:

- ``spark_cluster`` (:class:`SparkCluster`): ``master_url`` (``spark://127.0.0.1:<port>``), the
  ``spark`` connection URI for the Spark provider, and :meth:`SparkCluster.app_conf`, the small
  per-application sizes that let two applications share the worker;
- ``spark_connect`` (:class:`SparkConnectServer`): ``url`` (``sc://127.0.0.1:<port>``) and the
  ``spark_connect`` connection URI. Its driver runs its jobs on the same cluster, so its
  executors (Python workers included) are the cluster's.

Sizes fit a 2-core machine shared with other work: daemons get 256 MiB; an application gets one
executor of 512 MiB with two cores (one JVM to start per application); the worker offers three
cores, so the Connect server's executor (one core) and a test's application run side by side.

The executors' Python is the test interpreter (``PYSPARK_PYTHON``), with the test process's
``PYTHONPATH``, so Python code shipped to them (``mapInArrow``) imports this checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

#: Seconds a server may take to come up on a busy machine.
START_TIMEOUT = 300
#: Cores the worker offers: one for the Connect server's executor, two for a test's application.
WORKER_CORES = 3
WORKER_MEMORY = "1536m"
EXECUTOR_MEMORY = "512m"
CONNECT_DRIVER_MEMORY = "640m"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_home() -> Path | None:
    """The installed PySpark distribution (``bin/``, ``jars/``), or None without one (pyspark-client only)."""
    try:
        import pyspark
    except ImportError:
        return None
    home = Path(pyspark.__file__).parent
    return home if (home / "bin" / "spark-class").exists() and (home / "jars").is_dir() else None


def spark_env(log_dir: Path) -> dict[str, str]:
    """The environment of every Spark process started here: loopback only, small daemons, logs in
    ``log_dir``, executors running this interpreter with this process's import path."""
    home = spark_home()
    assert home is not None
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(home),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_LOG_DIR=str(log_dir),
        SPARK_PID_DIR=str(log_dir),
        SPARK_WORKER_DIR=str(log_dir / "work"),
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        PYTHONPATH=os.pathsep.join(p for p in (os.environ.get("PYTHONPATH", ""), *sys.path) if p),
    )
    return env


def leave_connect_mode() -> None:
    """Let this process build classic sessions again after Spark Connect ones: PySpark marks the
    process as a Connect client in its environment (an Airflow task is a process of its own, so
    only tests that use both modes in one process need this)."""
    for name in ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE"):
        os.environ.pop(name, None)


def leave_classic_mode() -> None:
    """Let this process build Spark Connect sessions after classic ones: the JVM PySpark started keeps
    the last ``spark.master`` as a system property, which ``SparkConf()`` reads back and the
    session builder refuses next to ``spark.remote`` (only tests that use both modes in one
    process need this)."""
    try:
        from pyspark.core.context import SparkContext
    except ImportError:
        return
    jvm = SparkContext._jvm
    if jvm is not None:
        jvm.java.lang.System.clearProperty("spark.master")


def wait_for_port(port: int, process: subprocess.Popen[bytes], name: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        if process.poll() is not None:
            pytest.fail(f"{name} exited with {process.returncode}; its log: {log}\n{_tail(log)}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                stop(process)
                pytest.fail(f"{name} did not listen on 127.0.0.1:{port}; its log: {log}\n{_tail(log)}")
            time.sleep(0.2)


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop one server by its PID (the launch scripts ``exec`` the JVM): TERM, then KILL."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def _tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _start(command: list[str], env: Mapping[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, env=dict(env), stdout=out, stderr=subprocess.STDOUT)


@dataclass
class SparkCluster:
    """A running standalone master with one registered worker."""

    master_url: str
    web_url: str
    env: dict[str, str]
    log_dir: Path

    @property
    def connection_uri(self) -> str:
        """An ``AIRFLOW_CONN_*`` value for the Spark provider's ``spark`` connection type.

        The provider's ``PySparkOperator`` builds the master as ``<host>:<port>``, so the host keeps
        its ``spark://`` scheme (the JSON form, not the URI form)."""
        host, port = self.master_url.rsplit(":", 1)
        return json.dumps({"conn_type": "spark", "host": host, "port": int(port)})

    @staticmethod
    def app_conf() -> dict[str, str]:
        """Per-application settings that fit the shared worker (``config_kwargs`` of an operator)."""
        return {
            "spark.executor.memory": EXECUTOR_MEMORY,
            "spark.executor.cores": "2",
            "spark.cores.max": "2",
            "spark.driver.memory": "512m",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": os.pathsep.join(
                p for p in (os.environ.get("PYTHONPATH", ""), *sys.path) if p
            ),
        }

    def alive_workers(self) -> int:
        """Workers registered with the master (0 while its web UI is not up yet, or while it still
        answers ``/json/`` with its HTML page, as a busy master does at start)."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"{self.web_url}/json/", timeout=5) as response:
                return int(json.load(response).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0


@dataclass
class SparkConnectServer:
    """A running Spark Connect server (its driver's jobs run on the cluster)."""

    url: str
    port: int

    @property
    def connection_uri(self) -> str:
        """An ``AIRFLOW_CONN_*`` value for the Spark provider's ``spark_connect`` connection type."""
        return json.dumps({"conn_type": "spark_connect", "host": "127.0.0.1", "port": self.port})


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A Spark standalone master and worker on loopback for the whole session."""
    home = spark_home()
    if home is None or (shutil.which("java") is None and not os.environ.get("JAVA_HOME")):
        pytest.skip("needs the pyspark distribution and Java")
    log_dir = tmp_path_factory.mktemp("spark-cluster")
    env = spark_env(log_dir)
    spark_class = str(home / "bin" / "spark-class")
    port, web_port, worker_web = free_port(), free_port(), free_port()
    master_log, worker_log = log_dir / "master.log", log_dir / "worker.log"
    master = _start(
        [
            spark_class,
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--webui-port",
            str(web_port),
        ],
        env,
        master_log,
    )
    worker: subprocess.Popen[bytes] | None = None
    try:
        wait_for_port(port, master, "The Spark master", master_log)
        master_url = f"spark://127.0.0.1:{port}"
        worker = _start(
            [
                spark_class,
                "org.apache.spark.deploy.worker.Worker",
                "--host",
                "127.0.0.1",
                "--cores",
                str(WORKER_CORES),
                "--memory",
                WORKER_MEMORY,
                "--webui-port",
                str(worker_web),
                "--work-dir",
                str(log_dir / "work"),
                master_url,
            ],
            env,
            worker_log,
        )
        cluster = SparkCluster(master_url, f"http://127.0.0.1:{web_port}", env, log_dir)
        deadline = time.monotonic() + START_TIMEOUT
        while cluster.alive_workers() < 1:
            if worker.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"The Spark worker did not register; its log:\n{_tail(worker_log)}")
            time.sleep(0.3)
        yield cluster
    finally:
        if worker is not None:
            stop(worker)
        stop(master)


@pytest.fixture(scope="session")
def spark_connect(spark_cluster: SparkCluster) -> Iterator[SparkConnectServer]:
    """A Spark Connect server on loopback for the whole session, running its jobs on the cluster."""
    home = spark_home()
    assert home is not None
    port = free_port()
    log = spark_cluster.log_dir / "connect.log"
    conf = {
        **SparkCluster.app_conf(),
        "spark.cores.max": "1",
        "spark.executor.cores": "1",
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
    }
    command = [
        str(home / "bin" / "spark-submit"),
        "--class",
        "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name",
        "SparkConnectServer",
        "--master",
        spark_cluster.master_url,
        *[arg for key, value in conf.items() for arg in ("--conf", f"{key}={value}")],
        "spark-internal",
    ]
    # spark-submit sizes a Connect server's driver as a daemon's (SPARK_DAEMON_MEMORY, not
    # spark.driver.memory); Spark wants at least 450 MiB there.
    server = _start(command, {**spark_cluster.env, "SPARK_DAEMON_MEMORY": CONNECT_DRIVER_MEMORY}, log)
    try:
        wait_for_port(port, server, "The Spark Connect server", log)
        yield SparkConnectServer(f"sc://127.0.0.1:{port}", port)
    finally:
        stop(server)
