"""In Spark Connect mode the Airflow worker needs no JVM: DeltaPySparkOperator commits from an
environment whose PySpark is ``pyspark-client`` only (no ``jars/``, no ``bin/``, no
``pyspark.core``), with no ``java`` on ``PATH`` and neither ``JAVA_HOME`` nor ``SPARK_HOME`` set.

The environment is a venv (built once, cached at ``.venv-spark-client`` in the checkout) holding
``pyspark-client`` alone (``--no-deps``; its dependencies, Airflow and the rest are the test
venv's, through a ``.pth`` file placed after the venv's own site-packages, so its ``pyspark``
wins).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from spark_servers import SparkConnectServer

pytestmark = pytest.mark.spark

REPO = Path(__file__).resolve().parents[3]
CLIENT_VENV = REPO / ".venv-spark-client"

SCRIPT = r"""
import importlib.util, json, os, shutil, sys, uuid
assert shutil.which("java") is None and "JAVA_HOME" not in os.environ and "SPARK_HOME" not in os.environ
import pyspark
home = os.path.dirname(pyspark.__file__)
assert importlib.util.find_spec("pyspark.core") is None, "the classic (JVM) PySpark is importable"
assert not os.path.isdir(os.path.join(home, "jars")) and not os.path.isdir(os.path.join(home, "bin"))
from airflow.sdk.execution_time.context import OutletEventAccessors
from airflow.sdk.execution_time.task_runner import RuntimeTaskInstance
from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator

def job(spark=None):
    return spark.range(0, 10, numPartitions=2).selectExpr("id", "CAST(id % 2 AS STRING) AS part")

op = DeltaPySparkOperator(task_id="ingest", python_callable=job, table_uri=sys.argv[1],
                          partition_by=["part"], conn_id="spark_client_only")
def context(try_number):
    ti = RuntimeTaskInstance.model_construct(
        id=uuid.uuid4(), dag_id="d", task_id="ingest", run_id="manual__1", map_index=-1,
        try_number=try_number, max_tries=1, task=op)
    return {"ti": ti, "task": op, "outlet_events": OutletEventAccessors()}
first, retry = op.execute(context(1)), op.execute(context(2))
print(json.dumps({"pyspark": home, "first": first, "retry": retry}))
"""


@pytest.fixture(scope="session")
def client_python() -> Path:
    """The interpreter of the pyspark-client-only venv (built on first use)."""
    python = CLIENT_VENV / "bin" / "python"
    stamp = CLIENT_VENV / f".pyspark-client-{version('pyspark-client')}"
    if not stamp.exists():
        subprocess.run(
            [sys.executable, "-m", "venv", "--clear", "--without-pip", str(CLIENT_VENV)], check=True
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                str(python),
                "install",
                "--quiet",
                "--no-deps",
                f"pyspark-client=={version('pyspark-client')}",
            ],
            check=True,
        )
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
        (Path(site) / "zz_test_venv.pth").write_text(sysconfig.get_path("purelib") + "\n")
        stamp.touch()
    return python


def test_a_worker_without_a_jvm_commits_through_spark_connect(
    client_python: Path, spark_connect: SparkConnectServer, tmp_path: Path
) -> None:
    from deltalake import DeltaTable as RsDeltaTable

    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    env = {
        "PATH": str(empty_bin),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "PYTHONPATH": str(REPO),
        "AIRFLOW_HOME": os.environ["AIRFLOW_HOME"],
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "True",
        "AIRFLOW_CONN_SPARK_CLIENT_ONLY": spark_connect.connection_uri,
    }
    root = tmp_path / "events"
    # A script file, not ``python -c``: PySpark takes a ``__main__`` without ``__file__`` for its
    # own doctests and exits looking for SPARK_HOME.
    script = tmp_path / "worker.py"
    script.write_text(SCRIPT)
    done = subprocess.run(
        [str(client_python), str(script), str(root)], env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["pyspark"].startswith(str(CLIENT_VENV))
    assert (report["first"]["version"], report["first"]["rows"], report["first"]["committed"]) == (
        0,
        10,
        True,
    )
    assert report["retry"]["skipped"] is True
    assert sorted(RsDeltaTable(str(root)).to_pyarrow_table().column("id").to_pylist()) == list(range(10))
