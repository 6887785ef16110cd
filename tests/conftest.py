"""Test-wide settings and fixtures: an isolated Airflow home, a real S3 server on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from collections.abc import Iterator

# Set before anything imports airflow: its configuration is read at import time.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-delta-tests-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")

# Shared server fixtures kept in their own modules (importable by every tier): Spark's cluster and
# Connect server.
sys.path.insert(0, os.path.dirname(__file__))
pytest_plugins = ["spark_servers"]


# --- a real S3-compatible server on loopback ------------------------------------------


# moto's server, single-threaded: moto checks If-None-Match and stores the object in two
# steps, so a threaded server could let two conditional PUTs of one key both succeed.
# One request at a time makes the conditional PUT atomic, as S3's is.
_MOTO_SERVER = """
import sys
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
from werkzeug.serving import make_server
app = DomainDispatcherApplication(create_backend_app)
server = make_server("127.0.0.1", int(sys.argv[1]), app, threaded=False)
print("ready", flush=True)
server.serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """URL of a moto S3 server in its own process for the whole session."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-c", _MOTO_SERVER, str(port)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert process.stdout is not None
    if process.stdout.readline().strip() != b"ready":
        process.kill()
        pytest.fail("The moto S3 server did not start.")
    endpoint = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail("The moto S3 server does not accept connections.")
            time.sleep(0.05)
    yield endpoint
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture
def s3_storage_options(s3_endpoint: str) -> dict[str, object]:
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
    }


@pytest.fixture
def s3_bucket(s3_endpoint: str, s3_storage_options: dict[str, object]) -> str:
    """A fresh, empty bucket; returns its name."""
    import boto3

    name = f"test-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )
    client.create_bucket(Bucket=name)
    return name
