"""No secret leaves the place it was given: one planted secret, every entry point, every output channel.

The secret is planted, one place at a time, where a credential can enter the provider: the userinfo
of a table location, an Airflow connection's password, a connection's extra (a ``delta``
connection's ``storage_options``) and the ``storage_options`` argument. Then the hook, every
operator, the sensor and the trigger run, succeeding and failing, and every channel that leaves
the provider is searched for it: exception messages and tracebacks, log records (``caplog``) and
the task log (Airflow's structured logging writes to stdout), XCom return values, asset event
extras, OpenLineage facets, serialized triggers, trigger events, ``repr()``, ``test_connection``
messages and the maintenance report. On S3 the tables live on a real moto server, which accepts
any secret, so the planted one is the credential every request is signed with.
"""

from __future__ import annotations

import json
import logging
import threading
import traceback
import uuid
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from airflow.providers.common.compat.sdk import TaskDeferred

from airflow_delta_provider.assets.delta import asset_event_extra, delta_table_asset, table_asset_uri
from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.hooks.delta import DeltaTableHook
from airflow_delta_provider.openlineage import dataset_naming, output_dataset
from airflow_delta_provider.operators.commit import DeltaCommitOperator
from airflow_delta_provider.operators.maintenance import (
    DeltaCheckpointOperator,
    DeltaLogCleanupOperator,
    DeltaMaintenanceError,
    DeltaMaintenanceOperator,
    DeltaVacuumOperator,
)
from airflow_delta_provider.sensors.delta import DeltaTableVersionSensor
from airflow_delta_provider.triggers.delta import DeltaTableVersionTrigger

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

SCHEMA = pa.schema([("id", pa.int64()), ("ds", pa.string())])


def planted() -> str:
    """A fresh secret per test (the redaction registry is process-wide)."""
    return f"Pl4nted-{uuid.uuid4().hex}"


class Channels:
    """Everything that left the provider, as text, by where it came out."""

    def __init__(self) -> None:
        self.outputs: list[tuple[str, str]] = []

    def add(self, where: str, value: Any) -> Any:
        if isinstance(value, BaseException):
            text = "".join(traceback.format_exception(value)) + repr(value)
        elif isinstance(value, str):
            text = value
        else:
            try:
                text = json.dumps(value, default=str)
            except (TypeError, ValueError):
                text = repr(value)
        self.outputs.append((where, text))
        return value

    def raises(self, where: str, call: Callable[[], Any], expected: type[BaseException] = Exception) -> Any:
        """Run ``call``, which must raise ``expected``; keep its message and traceback."""
        with pytest.raises(expected) as caught:
            call()
        self.add(where, caught.value)
        return caught.value

    def lineage(self, where: str, lineage: Any) -> None:
        from openlineage.client.serde import Serde

        for dataset in getattr(lineage, "outputs", None) or []:
            self.add(where, Serde.to_json(dataset))

    def assert_clean(
        self,
        secret: str,
        capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture,
        parts: Sequence[str] = (),
    ) -> None:
        output = capsys.readouterr()
        self.add("stdout (task log)", output.out)
        self.add("stderr", output.err)
        for record in caplog.records:
            self.add(f"log record {record.name}", record.getMessage())
            if record.exc_info:
                self.add(
                    f"log record {record.name} traceback",
                    "".join(traceback.format_exception(*record.exc_info)),
                )
        variants = {secret, quote(secret, safe=""), *parts, *(quote(p, safe="") for p in parts)}
        leaked = [where for where, text in self.outputs if any(v in text for v in variants)]
        assert leaked == []
        assert len(self.outputs) > 10  # the channels were really searched


@pytest.fixture
def channels(caplog: pytest.LogCaptureFixture) -> Channels:
    caplog.set_level(logging.INFO)
    caplog.set_level(logging.DEBUG, logger="airflow_delta_provider")
    return Channels()


def connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **fields: Any) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(fields))


# --- a secret in the location ----------------------------------------------------------------------

LOCATIONS = [
    pytest.param("s3://AKIAPLANTED:{secret}@bucket/lake/t", id="s3-key-and-secret"),
    pytest.param("s3a://{secret}@bucket/lake/t", id="s3-token-only"),
    pytest.param("gs://AKIAPLANTED:{secret}@bucket/t", id="gcs"),
    pytest.param("file://user:{secret}@localhost/tmp/t", id="file"),
    pytest.param("abfss://user:{secret}@account.dfs.core.windows.net/t", id="abfss"),
    # Query-string credentials: a SAS token, presigned S3 and signed GCS URLs, a bearer token.
    pytest.param("abfss://c@account.dfs.core.windows.net/t?sv=2024-01-01&sp=rl&sig={secret}", id="abfss-sas"),
    pytest.param("s3://bucket/lake/t?X-Amz-Credential=AKIA%2F1&X-Amz-Signature={secret}", id="s3-presigned"),
    pytest.param("gs://bucket/t?X-Goog-Signature={secret}", id="gcs-signed"),
    pytest.param("https://account.blob.core.windows.net/c/t?token={secret}", id="https-token"),
]


@pytest.mark.parametrize("template", LOCATIONS)
def test_a_location_with_credentials_is_refused_everywhere_and_never_shown(
    template: str,
    channels: Channels,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    task_context: Callable[..., dict[str, Any]],
) -> None:
    secret = planted()
    uri = template.format(secret=secret)

    # Every class refuses it when built (DAG parse time), naming what to do instead.
    builders: dict[str, Callable[[], Any]] = {
        "DeltaCommitOperator": lambda: DeltaCommitOperator(task_id="c", table_uri=uri, prefix="x"),
        "DeltaCheckpointOperator": lambda: DeltaCheckpointOperator(task_id="c", table_uri=uri),
        "DeltaLogCleanupOperator": lambda: DeltaLogCleanupOperator(task_id="c", table_uri=uri),
        "DeltaVacuumOperator": lambda: DeltaVacuumOperator(task_id="c", table_uri=uri),
        "DeltaMaintenanceOperator": lambda: DeltaMaintenanceOperator(task_id="c", tables=[uri]),
        "DeltaTableVersionSensor": lambda: DeltaTableVersionSensor(task_id="c", table_uri=uri),
        "DeltaTableVersionTrigger": lambda: DeltaTableVersionTrigger(table_uri=uri),
    }
    pytest.importorskip("pyspark")
    from airflow_delta_provider.operators.pyspark import DeltaPySparkOperator

    builders["DeltaPySparkOperator"] = lambda: DeltaPySparkOperator(
        task_id="c", python_callable=lambda spark=None: None, table_uri=uri
    )
    for name, build in builders.items():
        error = channels.raises(name, build, ValueError)
        assert "carries credentials" in str(error) and "storage_conn_id" in str(error)

    # The hook: its location without credentials, a refusal to open it, and the Test button.
    hook = DeltaTableHook(table_uri=uri)
    channels.add("hook.table_uri", hook.table_uri)
    channels.add("repr(hook)", repr(hook))
    channels.raises("hook.get_table", hook.get_table, ValueError)
    ok, message = channels.add("test_connection", hook.test_connection())
    assert ok is False and "carries credentials" in message

    # A delta connection whose location holds them.
    connection(monkeypatch, "planted_delta", conn_type="delta", host=uri)
    by_conn = DeltaTableHook("planted_delta")
    channels.add("test_connection (delta connection)", by_conn.test_connection())
    checkpoint = DeltaCheckpointOperator(task_id="c", delta_conn_id="planted_delta")
    channels.raises("checkpoint via delta connection", lambda: checkpoint.execute({}), ValueError)
    channels.add("repr(hook via connection)", repr(checkpoint.hook))

    # A template that renders it: the rendered fields are masked, the run refuses before any I/O.
    templated = DeltaVacuumOperator(task_id="v", table_uri="{{ params.table }}")
    context = task_context(templated, params={"table": uri})
    templated.render_template_fields(context)
    channels.raises("vacuum of a rendered location", lambda: templated.execute(context), ValueError)
    maintenance = DeltaMaintenanceOperator(task_id="m", tables="{{ params.tables | tojson }}")
    context = task_context(maintenance, params={"tables": [uri]})
    maintenance.render_template_fields(context)
    failed = channels.raises(
        "maintenance of a rendered location", lambda: maintenance.execute({}), DeltaMaintenanceError
    )
    channels.add("maintenance report", failed.report)
    assert "carries credentials" in failed.report["tables"][0]["error"]

    # Where the location itself is published: asset URIs, asset event extras, OpenLineage names.
    if not uri.startswith("file://"):
        channels.add("table_asset_uri", table_asset_uri(uri))
        channels.add("delta_table_asset", repr(delta_table_asset(uri)))
        channels.add("asset_event_extra", asset_event_extra({"version": 1, "committed": True}, uri))
        channels.add("dataset_naming", dataset_naming(uri))
        channels.lineage("output_dataset", type("L", (), {"outputs": [output_dataset(uri, version=1)]})())
    channels.assert_clean(secret, capsys, caplog)


# --- a secret in a connection or in storage_options, on S3 ------------------------------------------

ENTRIES = ["connection password", "connection extra", "storage_options"]


def s3_table_arguments(
    entry: str, secret: str, bucket: str, endpoint: str, path: str, monkeypatch: pytest.MonkeyPatch
) -> dict[str, Any]:
    """The table arguments of a task whose credential (the planted secret) enters through ``entry``."""
    uri = f"s3://{bucket}/{path}"
    client = {"endpoint_url": endpoint, "region_name": "us-east-1"}
    options = {"key": "AKIAPLANTED", "secret": secret, "client_kwargs": client}
    if entry == "connection password":
        conn_id = f"planted_aws_{path.replace('/', '_')}"
        connection(monkeypatch, conn_id, conn_type="aws", login="AKIAPLANTED", password=secret, extra=client)
        return {"table_uri": uri, "storage_conn_id": conn_id}
    if entry == "connection extra":
        conn_id = f"planted_delta_{path.replace('/', '_')}"
        connection(monkeypatch, conn_id, conn_type="delta", host=uri, extra={"storage_options": options})
        return {"delta_conn_id": conn_id}
    return {"table_uri": uri, "storage_options": options}


async def first_event(trigger: DeltaTableVersionTrigger) -> Any:
    import asyncio
    import contextlib

    async with contextlib.aclosing(trigger.run()) as events:
        return await asyncio.wait_for(events.__anext__(), 60)


@pytest.mark.s3
@pytest.mark.parametrize("entry", ENTRIES)
def test_a_secret_given_as_a_credential_reaches_no_output_on_s3(
    entry: str,
    s3_bucket: str,
    s3_endpoint: str,
    s3_storage_options: dict[str, Any],
    monkeypatch: pytest.MonkeyPatch,
    channels: Channels,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    task_context: Callable[..., dict[str, Any]],
) -> None:
    secret = planted()
    run_every_channel(
        channels,
        task_context,
        location=lambda path: f"s3://{s3_bucket}/{path}",
        arguments=lambda path: s3_table_arguments(entry, secret, s3_bucket, s3_endpoint, path, monkeypatch),
        writer_options=s3_storage_options,
        secret_in_options=entry == "storage_options",
    )
    channels.assert_clean(secret, capsys, caplog)


# --- a secret in an Azure or Google storage connection (no Azure / Google provider installed) --------

CLOUD_ENTRIES = [
    pytest.param("wasb sas_token", marks=pytest.mark.azure),
    pytest.param("wasb connection_string with a SAS", marks=pytest.mark.azure),
    pytest.param("google keyfile_dict", marks=pytest.mark.gcs),
]


@pytest.mark.parametrize("entry", CLOUD_ENTRIES)
def test_a_secret_in_an_azure_or_google_connection_reaches_no_output(
    entry: str,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    channels: Channels,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    task_context: Callable[..., dict[str, Any]],
) -> None:
    """The planted secret is the credential every request carries: a fresh SAS token Azurite checks
    (alone, or inside a connection string), or a fresh service account key whose signed grants the
    loopback OAuth2 endpoint counts."""
    if entry.startswith("wasb"):
        endpoint = request.getfixturevalue("azurite_endpoint")
        container = request.getfixturevalue("azure_container")
        writer_options = request.getfixturevalue("azure_storage_options")
        sas = request.getfixturevalue("azurite_sas")
        secret = sas
        if entry == "wasb sas_token":
            fields: dict[str, Any] = {
                "login": "devstoreaccount1",
                "host": endpoint,
                "extra": {"sas_token": sas},
            }
        else:
            string = f"BlobEndpoint={endpoint};SharedAccessSignature={sas}"
            fields = {"extra": {"connection_string": string}}
        connection(monkeypatch, "planted_azure", conn_type="wasb", **fields)
        conn_id, root = "planted_azure", f"az://{container}"
    else:
        key = request.getfixturevalue("gcp_service_account_key")
        endpoint = request.getfixturevalue("gcs_endpoint")
        bucket = request.getfixturevalue("gcs_bucket")
        writer_options = request.getfixturevalue("gcs_storage_options")
        secret = key["private_key"]
        extra = {"keyfile_dict": json.dumps(key), "gcs.endpoint": endpoint, "project": "test"}
        connection(monkeypatch, "planted_gcp", conn_type="google_cloud_platform", extra=extra)
        conn_id, root = "planted_gcp", f"gs://{bucket}"

    run_every_channel(
        channels,
        task_context,
        location=lambda path: f"{root}/{path}",
        arguments=lambda path: {"table_uri": f"{root}/{path}", "storage_conn_id": conn_id},
        writer_options=writer_options,
        secret_in_options=False,
    )
    if entry.startswith("google"):
        assert request.getfixturevalue("gcp_grants")(key["client_email"]) >= 1  # the key was used
    # The secret's own parts are searched for too: a SAS token's signature, the lines of a PEM key.
    if entry.startswith("wasb"):
        parts = [unquote(p.removeprefix("sig=")) for p in secret.split("&") if p.startswith("sig=")]
    else:
        parts = [line for line in secret.splitlines() if len(line) > 40]
    assert parts
    channels.assert_clean(secret, capsys, caplog, parts=parts)


def run_every_channel(
    channels: Channels,
    task_context: Callable[..., dict[str, Any]],
    *,
    location: Callable[[str], str],
    arguments: Callable[[str], dict[str, Any]],
    writer_options: dict[str, Any],
    secret_in_options: bool,
) -> None:
    """Run the hook, every operator, the sensor and the trigger, succeeding and failing, on tables at
    ``location(path)`` opened with the task arguments ``arguments(path)`` (the planted secret enters
    through them); every output goes into ``channels``. ``writer_options`` (no planted secret) write
    the files and the commits the tasks wait for."""
    import asyncio

    from airflow_delta_provider.core.storage import open_store

    def put_parquet(uri: str, relative: str, ids: list[int]) -> None:
        storage = open_store(uri, writer_options)
        with storage.fs.open(storage.join(relative), "wb") as out:
            pq.write_table(pa.table({"id": pa.array(ids, pa.int64())}), out)

    table, uri = arguments("lake/events"), location("lake/events")

    # A commit: XCom, asset event, lineage, repr, the task log.
    put_parquet(uri, "incoming/ds=2026-11-01/part-0.parquet", [1, 2])
    commit = DeltaCommitOperator(task_id="commit", prefix="incoming", partition_by=["ds"], **table)
    context = task_context(commit)
    result = channels.add("commit XCom", commit.execute(context))
    assert (result["version"], result["rows"], result["table_uri"]) == (0, 2, uri)
    channels.add("asset event extra", context["outlet_events"][delta_table_asset(uri)].extra)
    channels.lineage("OpenLineage facets", commit.get_openlineage_facets_on_complete(None))
    channels.add("repr(operator)", repr(commit))
    channels.add("repr(hook)", repr(commit.hook))
    retry = channels.add("skipped retry XCom", commit.execute(task_context(commit, try_number=2)))
    assert retry["skipped"]
    # A commit that fails.
    missing = DeltaCommitOperator(task_id="missing", prefix="not-there", **table)
    channels.raises("failed commit", lambda: missing.execute(task_context(missing)))

    # The hook's Test button, for a table that is there and for one that is not.
    hook = DeltaTableHook(
        table.get("delta_conn_id"), **{k: v for k, v in table.items() if k != "delta_conn_id"}
    )
    ok, message = channels.add("test_connection", hook.test_connection())
    assert ok, message
    gone = arguments("lake/gone")
    gone_hook = DeltaTableHook(
        gone.get("delta_conn_id"), **{k: v for k, v in gone.items() if k != "delta_conn_id"}
    )
    assert channels.add("test_connection (no table)", gone_hook.test_connection())[0] is False

    # The sensor: a poke, and a deferral whose trigger is serialised.
    sensor = DeltaTableVersionSensor(task_id="wait", after_version=-1, **table)
    channels.add("sensor XCom", sensor.execute({}))
    if secret_in_options:
        refused = channels.raises(
            "deferrable sensor with secret options",
            lambda: DeltaTableVersionSensor(task_id="w", after_version=0, deferrable=True, **table),
            ValueError,
        )
        assert "'secret'" in str(refused) and "storage_conn_id" in str(refused)
        channels.raises(
            "trigger with secret options",
            lambda: DeltaTableVersionTrigger(after_version=0, **table),
            ValueError,
        )
    else:
        deferring = DeltaTableVersionSensor(task_id="w", after_version=0, deferrable=True, **table)
        deferred = channels.raises("deferral", lambda: deferring.execute({}), TaskDeferred)
        _classpath, kwargs = deferred.trigger.serialize()
        channels.add("serialized trigger", kwargs)
        channels.add("repr(trigger)", repr(deferred.trigger))
        assert set(kwargs) >= {"table_uri", "delta_conn_id", "storage_conn_id"}
        assert kwargs["storage_options"] is None

        # The trigger: a success event on a new commit, and an error event on a corrupt one.
        trigger = DeltaTableVersionTrigger(after_version=0, poll_interval=0.05, **table)
        put_parquet(uri, "more/ds=2026-11-02/part-0.parquet", [3])
        writer = threading.Timer(0.2, lambda: DeltaTable(uri, writer_options).commit_files(prefix="more"))
        writer.start()
        event = asyncio.run(first_event(trigger))
        writer.join()
        channels.add("trigger event", event.payload)
        assert event.payload["status"] == "success"

    # Maintenance of the table, and of one that is not there.
    channels.add("checkpoint XCom", DeltaCheckpointOperator(task_id="cp", **table).execute({}))
    channels.add("log cleanup XCom", DeltaLogCleanupOperator(task_id="lc", dry_run=True, **table).execute({}))
    channels.add("vacuum XCom", DeltaVacuumOperator(task_id="v", dry_run=True, **table).execute({}))
    too_short = DeltaVacuumOperator(task_id="v", retention=0, **table)
    channels.raises("refused vacuum", lambda: too_short.execute({}))
    if "delta_conn_id" in table:
        policy = DeltaMaintenanceOperator(
            task_id="m", delta_conn_ids=[table["delta_conn_id"], gone["delta_conn_id"]]
        )
    else:
        extra = {k: v for k, v in table.items() if k != "table_uri"}
        policy = DeltaMaintenanceOperator(task_id="m", tables=[uri, gone["table_uri"]], **extra)
    failed = channels.raises("maintenance", lambda: policy.execute({}), DeltaMaintenanceError)
    channels.add("maintenance report", failed.report)
    assert [entry["status"] for entry in failed.report["tables"]] == ["success", "failed"]

    # The change feed of a table one of whose files is gone: the rows it can read, and the error
    # naming the file it cannot.
    feed_uri = location("lake/feed")
    feed_writer = DeltaTable.create(feed_uri, SCHEMA, storage_options=writer_options)
    put_parquet(feed_uri, "f1.parquet", [1])
    put_parquet(feed_uri, "f2.parquet", [2])
    feed_writer.commit_files(["f1.parquet"])
    feed_writer.commit_files(["f2.parquet"])
    feed_store = open_store(feed_uri, writer_options)
    feed_store.fs.rm(feed_store.join("f1.parquet"))
    feed = arguments("lake/feed")
    feed_table = DeltaTableHook(
        feed.get("delta_conn_id"), **{k: v for k, v in feed.items() if k != "delta_conn_id"}
    ).get_table()
    channels.add("changes rows", feed_table.changes(2).to_pyarrow_table().to_pylist())
    channels.add("changes files", feed_table.changes(0).files().to_pylist())
    channels.add("repr(changes)", repr(feed_table.changes(0)))
    channels.raises("changes of a file that is gone", lambda: feed_table.changes(1).to_pyarrow_table())

    # A table whose next commit cannot be read: the trigger's error event, and the sensor failing on it.
    if not secret_in_options:
        broken_uri = location("lake/broken")
        DeltaTable.create(broken_uri, SCHEMA, storage_options=writer_options)
        storage = open_store(broken_uri, writer_options)
        storage.put(storage.log_path(f"{1:020d}.json"), b"garbage\n")
        broken = arguments("lake/broken")
        event = asyncio.run(
            first_event(DeltaTableVersionTrigger(after_version=0, poll_interval=0.05, **broken))
        )
        channels.add("trigger error event", event.payload)
        assert event.payload["status"] == "error" and "00000000000000000001.json" in event.payload["message"]
        waiting = DeltaTableVersionSensor(task_id="w2", after_version=0, deferrable=True, **broken)
        channels.raises("sensor resumed with the error", lambda: waiting.execute_complete({}, event.payload))


# --- a signed URL nobody registered, in a table's own log ---------------------------------------------

SIGNED_URLS = [
    pytest.param(
        "https://account.blob.core.windows.net/c/part-0.parquet?sv=2024-01-01&sig={secret}", id="sas"
    ),
    pytest.param(
        "https://bucket.s3.amazonaws.com/part-0.parquet?X-Amz-Signature={secret}", id="s3-presigned"
    ),
    pytest.param(
        "https://storage.googleapis.com/b/part-0.parquet?X-Goog-Signature={secret}", id="gcs-signed"
    ),
]


@pytest.mark.parametrize("template", SIGNED_URLS)
def test_a_signed_url_in_hostile_log_content_reaches_no_output(
    template: str,
    tmp_path: Any,
    channels: Channels,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A commitInfo another writer left half-written quotes a signed URL: the core's error names the line,
    and that message travels to exceptions, task logs, the maintenance report (XCom), the trigger's
    error event and the Test button. Nothing registered the signature: its parameter name is enough."""
    import asyncio

    from airflow_delta_provider.core.utils.redaction import get_logger

    secret = planted()
    url = template.format(secret=quote(secret, safe=""))
    uri = f"file://{tmp_path}/t"
    DeltaTable.create(uri, SCHEMA)
    (tmp_path / "t" / "_delta_log" / f"{1:020d}.json").write_text(
        f'{{"commitInfo": {{"source": "{url}", "op\n'
    )
    table = {"table_uri": uri}

    channels.raises("snapshot", lambda: DeltaTable(uri).snapshot())
    channels.raises("checkpoint", lambda: DeltaCheckpointOperator(task_id="cp", **table).execute({}))
    policy = DeltaMaintenanceOperator(task_id="m", tables=[uri])
    failed = channels.raises("maintenance", lambda: policy.execute({}), DeltaMaintenanceError)
    channels.add("maintenance report (XCom)", failed.report)
    assert "00000000000000000001.json" in failed.report["tables"][0]["error"]
    channels.add("test_connection", DeltaTableHook(table_uri=uri).test_connection())
    event = asyncio.run(first_event(DeltaTableVersionTrigger(after_version=0, poll_interval=0.05, **table)))
    channels.add("trigger error event", event.payload)
    assert event.payload["status"] == "error"
    waiting = DeltaTableVersionSensor(task_id="w", after_version=0, deferrable=True, **table)
    channels.raises("sensor resumed with the error", lambda: waiting.execute_complete({}, event.payload))
    # A provider logger given the URL itself (a library's error text) masks it too.
    log = get_logger("airflow_delta_provider.tests.signed_url")
    try:
        raise OSError(f"403 Forbidden: GET {url}")
    except OSError:
        log.exception("read failed: %s", url)
    channels.assert_clean(secret, capsys, caplog, parts=[quote(secret, safe="")])


@pytest.mark.parametrize(
    "template", [*SIGNED_URLS, pytest.param("file://{root}/part-0.parquet?token={secret}", id="same store")]
)
def test_a_signed_url_as_a_file_path_in_the_log_reaches_no_output(
    template: str,
    tmp_path: Any,
    channels: Channels,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A hostile log names a data file, a change data file or a deletion vector by a signed URL. No
    data file's path carries credentials: every reader refuses it before a storage library (whose
    own logs and errors would quote it) sees it, and nothing the provider outputs shows it."""
    secret = planted()
    root = tmp_path / "t"
    url = template.format(secret=quote(secret, safe=""), root=root)
    uri = f"file://{root}"
    DeltaTable.create(uri, SCHEMA, properties={"delta.enableChangeDataFeed": "true"})
    pq.write_table(pa.table({"id": pa.array([1], pa.int64()), "ds": ["a"]}), root / "own.parquet")
    DeltaTable(uri).commit_files(["own.parquet"])  # v1
    size = (root / "own.parquet").stat().st_size
    file = {"partitionValues": {}, "size": size, "modificationTime": 1, "dataChange": True}
    dv = {"storageType": "p", "pathOrInlineDv": url, "offset": 1, "sizeInBytes": 30, "cardinality": 1}
    hostile = [  # v2: an added file, v3: a change data file, v4: a deletion vector
        {"add": {"path": url, **file}},
        {"cdc": {"path": url, "partitionValues": {}, "size": size, "dataChange": False}},
        {"add": {"path": "own.parquet", **file, "deletionVector": dv}},
    ]
    for version, action in enumerate(hostile, start=2):
        lines = [json.dumps({"commitInfo": {"operation": "WRITE"}}), json.dumps(action)]
        (root / "_delta_log" / f"{version:020d}.json").write_text("\n".join(lines) + "\n")
        table = DeltaTable(uri)
        read_changes = table.changes(version, version).to_pyarrow_table
        channels.raises(f"changes of v{version}", read_changes)
        if version != 3:
            channels.raises(f"snapshot rows at v{version}", table.snapshot().to_pyarrow_table)
    channels.raises("file_uris", lambda: DeltaTable(uri).snapshot(2).file_uris())
    channels.add(
        "vacuum dry run XCom", DeltaVacuumOperator(task_id="v", table_uri=uri, dry_run=True).execute({})
    )
    channels.add("checkpoint XCom", DeltaCheckpointOperator(task_id="cp", table_uri=uri).execute({}))
    channels.assert_clean(secret, capsys, caplog, parts=[quote(secret, safe="")])
