"""Every code block of the README and ``docs/*.md`` is a test: Python runs, the rest is checked.

Blocks are found when the tests are collected, so a block added to any document is picked up.
Each block's fence names its language, and the language says how it is checked:

- ``python``: the blocks of one document run in order in one namespace (a block may use what an
  earlier block of the same document defined), against real parts: moto's S3 server on loopback
  holding the buckets the docs name (``lake``, ``bucket``, ``landing``) with the tables they use,
  local tables in a temporary directory, and a migrated SQLite Airflow database. Addresses that
  name the reader's machine are mapped to the test's: quoted local paths under ``/data/`` and
  ``/tmp/`` to the temporary directory, ``http://localhost:9000`` (a MinIO endpoint) to moto's.
- ``bash``: every command is one this test can check: ``make <target>`` (a Makefile target),
  ``pip install`` of the project and its extras (by name, or the clone: ``.``, ``".[s3]"``),
  ``export NAME=VALUE`` (applied to the environment of the document's later Python blocks; a
  connection must parse as Airflow's and be of a type the provider reads, a ``[delta]`` option must
  be one the provider declares), and ``airflow ...`` (parsed by Airflow's own CLI parser).
  Anything else fails: teach this test.
- ``json``: parses. ``text``: not code (diagrams, path templates); not checked.

A fence without a language, or with another one, fails. A Python block that cannot run here is
marked ``<!-- not run: <why> -->`` on the line before its fence; the reason is checked, and such
blocks stay few (:data:`MAX_NOT_RUN`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from markdown_it import MarkdownIt

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

REPO = Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
LANGUAGES = ("python", "bash", "json", "text")
#: At most this many Python blocks may be marked ``<!-- not run: ... -->``.
MAX_NOT_RUN = 2
NOT_RUN = re.compile(r"<!--\s*not run:\s*(?P<reason>.*?)\s*-->\s*$")
#: The buckets the docs use, created empty for every document.
BUCKETS = ("lake", "bucket", "landing")
REGION = "eu-west-1"
MINIO = "http://localhost:9000"


@dataclass(frozen=True)
class Block:
    document: Path
    line: int
    language: str
    code: str
    #: why the block does not run, from its ``<!-- not run: ... -->`` marker
    not_run: str | None

    @property
    def where(self) -> str:
        return f"{self.document.relative_to(REPO)}:{self.line}"


def blocks_of(document: Path) -> list[Block]:
    """The fenced code blocks of a document, in order (also those indented in lists)."""
    text = document.read_text()
    lines = text.splitlines()
    found = []
    for token in MarkdownIt("commonmark").parse(text):
        if token.type != "fence" or token.map is None:
            continue
        start = token.map[0]
        previous = next((lines[i] for i in range(start - 1, -1, -1) if lines[i].strip()), "")
        marker = NOT_RUN.search(previous)
        found.append(
            Block(
                document,
                start + 1,
                token.info.strip().split(" ")[0],
                token.content,
                marker["reason"] if marker else None,
            )
        )
    return found


def _blocks(language: str) -> list[Any]:
    return [
        pytest.param(document, id=str(document.relative_to(REPO)))
        for document in DOCUMENTS
        if any(block.language == language for block in blocks_of(document))
    ]


# --- every block says what it is ------------------------------------------------------------


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda d: str(d.relative_to(REPO)))
def test_every_block_names_a_language_this_test_checks(document: Path) -> None:
    unknown = [
        f"{b.where} ({b.language or 'no language'})"
        for b in blocks_of(document)
        if b.language not in LANGUAGES
    ]
    assert not unknown, (
        f"Fenced blocks must name one of {LANGUAGES} (`text` for what is not code): {unknown}. "
        f"For another language, teach tests/test_docs.py how to check it."
    )


def test_blocks_not_run_are_few_and_say_why() -> None:
    marked = [b for d in DOCUMENTS for b in blocks_of(d) if b.not_run is not None]
    for block in marked:
        assert block.language == "python", (
            f"{block.where}: only Python blocks are run, so only they are marked"
        )
        assert len(block.not_run.split()) >= 4, f"{block.where}: say why the block cannot run here"
    assert len(marked) <= MAX_NOT_RUN, f"Too many blocks are not run: {[b.where for b in marked]}"


def test_the_docs_name_python_files_that_exist() -> None:
    """A module named in the docs (`core/maintenance/cleanup.py`, `tests/unit/...`) exists in the project's
    sources, at that path or as the tail of one."""
    files = [
        p.relative_to(REPO).as_posix()
        for top in ("airflow_delta_provider", "tests", "benchmarks", "scripts", "dags_examples")
        for p in (REPO / top).rglob("*.py")
    ]
    missing = []
    for document in DOCUMENTS:
        for name in sorted(set(re.findall(r"`([\w./-]+\.py)`", document.read_text()))):
            if not any(f == name or f.endswith(f"/{name}") for f in files):
                missing.append(f"{document.relative_to(REPO)}: {name}")
    assert not missing, f"The docs name files that do not exist: {missing}"


# --- json -----------------------------------------------------------------------------------


@pytest.mark.parametrize("document", _blocks("json"))
def test_json_blocks_parse(document: Path) -> None:
    for block in blocks_of(document):
        if block.language == "json":
            try:
                json.loads(block.code)
            except ValueError as err:
                pytest.fail(f"{block.where}: {err}")


# --- bash -----------------------------------------------------------------------------------


def commands(code: str) -> Iterator[list[str]]:
    """The commands of a shell block: continuation lines joined, comments and blank lines left out."""
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        if words:
            yield words


def _make_targets() -> set[str]:
    text = (REPO / "Makefile").read_text()
    return set(re.findall(r"^([A-Za-z0-9_.-]+):(?!=)", text, flags=re.MULTILINE))


def _check_make(words: list[str]) -> None:
    targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
    unknown = sorted(set(targets) - _make_targets())
    assert targets and not unknown, f"make {' '.join(words[1:])}: no Makefile target {unknown}"


def _check_pip(words: list[str]) -> None:
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert words[1] == "install", f"pip {words[1]}: only `pip install` is checked"
    for word in words[2:]:
        if word.startswith("-"):
            continue
        # The clone itself (``.``, ``".[s3]"``), or the project by name once it is published.
        clone = re.fullmatch(r"\.(?:\[(?P<extras>[\w,-]+)\])?", word)
        if clone:
            extras = set(clone["extras"].split(",")) if clone["extras"] else set()
        else:
            requirement = Requirement(word)
            assert canonicalize_name(requirement.name) == canonicalize_name(project["name"]), (
                f"pip install {word}: the docs install only this project"
            )
            extras = set(requirement.extras)
        unknown = sorted(extras - set(project["optional-dependencies"]))
        assert not unknown, f"pip install {word}: pyproject.toml declares no extra {unknown}"


def _check_export(words: list[str], environment: dict[str, str]) -> None:
    from airflow.models.connection import Connection

    from airflow_delta_provider.get_provider_info import get_provider_info
    from airflow_delta_provider.hooks.delta import DeltaTableHook
    from airflow_delta_provider.hooks.storage_connections import CONNECTION_PROTOCOLS

    for assignment in words[1:]:
        name, _, value = assignment.partition("=")
        if name.startswith("AIRFLOW_CONN_"):
            conn_id = name.removeprefix("AIRFLOW_CONN_").lower()
            if value.lstrip().startswith("{"):
                conn = Connection.from_json(value, conn_id=conn_id)
            else:
                conn = Connection(conn_id=conn_id, uri=value)
            known = {DeltaTableHook.conn_type, *CONNECTION_PROTOCOLS, "spark", "spark_connect"}
            assert conn.conn_type in known, f"{name}: connection type {conn.conn_type!r} is none of {known}"
        elif name.startswith("AIRFLOW__DELTA__"):
            options = get_provider_info()["config"]["delta"]["options"]
            option = name.removeprefix("AIRFLOW__DELTA__").lower()
            assert option in options, f"{name}: the provider declares no [delta] {option}"
        environment[name] = value


def _check_airflow(words: list[str]) -> None:
    from airflow.cli.cli_parser import get_parser

    errors = io.StringIO()
    with contextlib.redirect_stderr(errors):
        try:
            get_parser().parse_args(words[1:])
        except SystemExit as exit_:
            if exit_.code:
                raise AssertionError(
                    f"`{shlex.join(words)}` does not parse: {errors.getvalue().strip()[-500:]}"
                ) from None


def run_shell_block(block: Block, environment: dict[str, str]) -> None:
    """Check every command of a shell block; ``export`` also sets ``environment``."""
    for words in commands(block.code):
        try:
            if words[0] == "make":
                _check_make(words)
            elif words[0] == "pip":
                _check_pip(words)
            elif words[0] == "export":
                _check_export(words, environment)
            elif words[0] == "airflow":
                _check_airflow(words)
            else:
                raise AssertionError(f"`{words[0]}`: tests/test_docs.py cannot check this command; teach it")
        except (AssertionError, ValueError) as err:
            raise AssertionError(f"{block.where}: {err}") from None


@pytest.mark.parametrize(
    ("line", "complaint"),
    [
        ("make demo doc", r"no Makefile target \['doc'\]"),
        ('pip install "airflow-delta-provider[s4]"', r"declares no extra \['s4'\]"),
        ('pip install ".[s3,s4]"', r"declares no extra \['s4'\]"),
        ("pip install ../other", "install only this project|Expected"),
        ("pip install deltalake", "install only this project"),
        ("""export AIRFLOW_CONN_X='{"conn_type": "ftp"}'""", "connection type 'ftp'"),
        ("""export AIRFLOW_CONN_X='{"conn_type": "aws", '""", "JSON|Expecting|delimiter"),
        ("export AIRFLOW__DELTA__POLL_INTERVALS=30", "no \\[delta\\] poll_intervals"),
        ("airflow dags trigger", "does not parse"),
        ("airflow variables sett x y", "does not parse"),
        ("curl http://localhost:8080", "cannot check this command"),
    ],
)
def test_the_shell_check_refuses_what_does_not_exist(line: str, complaint: str) -> None:
    block = Block(REPO / "docs" / "example.md", 1, "bash", line + "\n", None)
    with pytest.raises(AssertionError, match=f"^docs/example.md:1: .*({complaint})"):
        run_shell_block(block, {})


@pytest.mark.parametrize("document", _blocks("bash"))
def test_shell_blocks_use_what_exists(document: Path) -> None:
    environment: dict[str, str] = {}
    for block in blocks_of(document):
        if block.language == "bash":
            run_shell_block(block, environment)


# --- python ---------------------------------------------------------------------------------


class World:
    """What the docs' Python blocks run against: moto's S3 with the docs' buckets and tables, local
    tables under a temporary directory, and the environment pointing the clients at them."""

    def __init__(self, endpoint: str, local: Path) -> None:
        import s3fs

        self.endpoint = endpoint
        self.local = local
        self.s3 = s3fs.S3FileSystem(
            key="testing", secret="testing", client_kwargs={"endpoint_url": endpoint, "region_name": REGION}
        )

    @property
    def environment(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": REGION,
        }

    def rewrite(self, code: str) -> str:
        """The reader's addresses as the test's (see the module docstring)."""
        code = re.sub(r"""(["'](?:file://)?)(/(?:data|tmp)/)""", lambda m: f"{m[1]}{self.local}{m[2]}", code)
        return code.replace(MINIO, self.endpoint)

    def write(self, uri: str, rows: dict[str, Any]) -> None:
        data = pa.table(rows)
        if uri.startswith("s3://"):
            with self.s3.open(uri.removeprefix("s3://"), "wb") as out:
                pq.write_table(data, out)
        else:
            Path(uri).parent.mkdir(parents=True, exist_ok=True)
            pq.write_table(data, uri)

    def table(self, uri: str, days: list[str], files_per_day: int = 2) -> None:
        """A table partitioned by ``ds``: one commit per file, ``files_per_day`` small files a day (so
        OPTIMIZE has bins to compact). ``clicks`` and ``ds`` are columns of the demo's events table
        too, so what the docs read here reads the same on ``make demo``'s table."""
        from airflow_delta_provider.core import DeltaTable

        schema = pa.schema(
            [("id", pa.int64()), ("payload", pa.string()), ("clicks", pa.int32()), ("ds", pa.string())]
        )
        table = DeltaTable.create(uri, schema, partition_by=["ds"])
        for day in days:
            for n in range(files_per_day):
                path = f"ds={day}/part-{n}.parquet"
                rows = {"id": [n, n + 10], "payload": ["a", "b"], "clicks": pa.array([1, 3], pa.int32())}
                self.write(f"{uri}/{path}", rows)
                table.commit_files([path])

    def build(self) -> None:
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, **_KEYS)
        for bucket in BUCKETS:
            client.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        days = ["2026-11-01", "2026-11-02"]
        self.table("s3://lake/events", days)
        self.table("s3://lake/users", days[:1], files_per_day=1)
        self.table(str(self.local / "data" / "lake" / "events"), days)
        # Files a job wrote under s3://bucket/events and that the docs commit (no table there yet).
        for run, day in (("runs/2024-01-01", "2024-01-01"), ("runs/2024-01-02", "2024-01-02")):
            self.write(f"s3://bucket/events/{run}/ds={day}/part-0.parquet", {"id": [1, 2, 3]})
        self.write(
            "s3://bucket/events/run-2024-01-01/ds=2024-01-01/part-0.parquet", {"id": [1], "payload": ["x"]}
        )

    def empty(self) -> None:
        import boto3

        client = boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION, **_KEYS)
        for bucket in BUCKETS:
            for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
                for item in page.get("Contents", []):
                    client.delete_object(Bucket=bucket, Key=item["Key"])
            client.delete_bucket(Bucket=bucket)


_KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _readme_did_what_it_says(namespace: dict[str, Any]) -> None:
    from airflow_delta_provider.core import DeltaTable

    table = namespace["table"]
    assert isinstance(table, DeltaTable)
    # On a location with files but no table yet: the first commit created it, as partitioned.
    assert [h["operation"] for h in table.history()] == ["WRITE", "CREATE TABLE AS SELECT"]
    assert table.snapshot().partition_columns == ["ds"]
    assert table.snapshot().app_transaction_version("ingest") == 20240101
    assert table.snapshot().to_pyarrow_table().num_rows == 6


def _write_api_did_what_it_says(namespace: dict[str, Any]) -> None:
    result = namespace["result"]
    assert (result.version, result.committed, result.num_output_rows) == (1, True, 1)


def _maintenance_did_what_it_says(namespace: dict[str, Any]) -> None:
    result = namespace["result"]
    assert (result.metrics["numRemovedFiles"], result.metrics["numAddedFiles"]) == (4, 2)


def _maintenance_operators_did_what_they_say(namespace: dict[str, Any]) -> None:
    assert namespace["run"].state == "success"  # the nightly DAG, a dry run
    result = namespace["result"]  # the VACUUM dry run, a task of a DAG run with dag.test()
    assert result["dry_run"] is True and result["table_uri"].endswith("/data/lake/events")
    assert namespace["look"].state == "success"


def _reading_did_what_it_says(namespace: dict[str, Any]) -> None:
    changes = namespace["changes"]  # s3://lake/events: 4 commits of one 2-row file after CREATE
    assert (changes.start_version, changes.end_version) == (1, 4)
    assert namespace["rows"].column("_change_type").to_pylist() == ["insert"] * 8
    assert namespace["files"].column("_change_type").to_pylist() == ["add"] * 4
    # On Spark, the local /data/lake/events (2 days x 2 files of 2 rows, one commit per file).
    assert (namespace["events"].count(), namespace["day"].count(), namespace["first"].count()) == (8, 2, 2)
    assert namespace["changed"].count() == namespace["inserted"].count() == 6


def _lifecycle_run(world: World) -> None:
    """A run of ``ingest_events`` committed to ``s3://lake/events`` (version 5), with the run identity
    the provider's commit operators record."""
    from airflow_delta_provider.core import DeltaTable
    from airflow_delta_provider.operators.commit import RunIdentity

    world.write("s3://lake/events/ds=2026-11-20/part-run.parquet", {"id": [99], "payload": ["bad"]})
    identity = RunIdentity(
        "ingest_events", "load", "scheduled__2026-11-20T00:00:00+00:00", -1, 1, 1, "2026-11-20T00:00:00+00:00"
    )
    DeltaTable("s3://lake/events").commit_files(["ds=2026-11-20/part-run.parquet"], tags=identity.tags())


def _lifecycle_did_what_it_says(namespace: dict[str, Any]) -> None:
    table = namespace["table"]  # restored to 2 (version 6), to 3 (7), to before the run (8)
    assert namespace["found"].version_before == 4 and [c.version for c in namespace["found"].commits] == [5]
    assert [h["operation"] for h in table.history(3)] == ["RESTORE"] * 3
    assert table.snapshot().files().num_rows == table.snapshot(4).files().num_rows == 4
    # PURGE: the DELETE example's vector-hidden row rewritten away; retention: one old day deleted.
    orders = namespace["orders"].snapshot()
    assert namespace["purged"].committed and orders.files().column("deletion_vector").null_count == 1
    assert namespace["retained"].num_deleted_rows == 1
    assert sorted(namespace["clicks"].snapshot().partition_values().column("ds").to_pylist()) == [
        "2026-09-01",
        "2026-10-01",
        "2026-11-01",
    ]


def _partitions_did_what_it_says(namespace: dict[str, Any]) -> None:
    day = namespace["day"]  # /data/lake/events: 2026-11-02 is versions 3 and 4, one 2-row file each
    assert day.files().column("_commit_version").to_pylist() == [3, 4]
    assert set(day.to_pyarrow_table().column("ds").to_pylist()) == {"2026-11-02"}
    (writer,), (reader,) = namespace["producer"].tasks, namespace["consumer"].tasks
    assert writer.partition_key_columns == reader.partition_key_columns == ["ds"]
    assert namespace["consumer"].timetable.asset_condition == namespace["ORDERS"]


def _read_api_did_what_it_says(namespace: dict[str, Any]) -> None:
    # A snapshot of one partition of s3://lake/events (2 days x 2 files): that day's files only.
    day = namespace["day"]
    assert day.num_files() == 2 and set(day.partition_values().column("ds").to_pylist()) == {"2026-11-01"}
    assert namespace["events"].snapshot().num_files() == 4


#: What a document needs beyond the world every document gets, run before its blocks.
SETUP: dict[str, Callable[[World], None]] = {"docs/lifecycle.md": _lifecycle_run}
#: What a document's blocks must have done, asked of their namespace afterwards.
CHECKS: dict[str, Callable[[dict[str, Any]], None]] = {
    "README.md": _readme_did_what_it_says,
    "docs/write-api.md": _write_api_did_what_it_says,
    "docs/maintenance.md": _maintenance_did_what_it_says,
    "docs/maintenance-operators.md": _maintenance_operators_did_what_they_say,
    "docs/reading.md": _reading_did_what_it_says,
    "docs/lifecycle.md": _lifecycle_did_what_it_says,
    "docs/partitions.md": _partitions_did_what_it_says,
    "docs/read-api.md": _read_api_did_what_it_says,
}


@pytest.fixture(scope="module")
def airflow_db() -> None:
    """A migrated SQLite metadata DB in the test AIRFLOW_HOME (tests/conftest.py isolates it)."""
    from airflow.utils import db

    db.initdb()


@pytest.fixture
def world(s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    built = World(s3_endpoint, tmp_path)
    for name, value in built.environment.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(REPO)
    built.build()
    try:
        yield built
    finally:
        built.empty()


@contextlib.contextmanager
def _environment_restored() -> Iterator[None]:
    """Blocks set ``os.environ`` as a reader would; the test process gets its own back afterwards."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.s3
@pytest.mark.parametrize("document", _blocks("python"))
def test_python_blocks_run(document: Path, world: World, airflow_db: None) -> None:
    name = document.relative_to(REPO).as_posix()
    SETUP.get(name, lambda _: None)(world)
    namespace: dict[str, Any] = {"__name__": f"docs_{document.stem}"}
    with _environment_restored():
        for block in blocks_of(document):
            if block.language == "bash":
                environment: dict[str, str] = {}
                run_shell_block(block, environment)
                os.environ.update({k: world.rewrite(v) for k, v in environment.items()})
            elif block.language == "python" and block.not_run is None:
                # Padded so that a traceback names the document's own line numbers.
                source = "\n" * block.line + world.rewrite(block.code)
                exec(compile(source, str(document), "exec"), namespace)
    CHECKS.get(name, lambda _: None)(namespace)
