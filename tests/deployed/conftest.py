"""A real Airflow deployment for the ``deployed`` tier, shared by the whole session.

PostgreSQL (the OS packages' server, a throwaway cluster) is the metadata database; the
scheduler (LocalExecutor), dag-processor, triggerer and api-server run as separate processes on
loopback, from the Airflow installed next to the Python running pytest (so the tier tests
whichever Airflow that venv holds). They read two DAG bundles: ``dags_examples/`` and
``tests/deployed/dags/``. Tests drive the deployment only through its REST API and CLI.

Every process is stopped by its PID at the end. A green run prints nothing of the deployment and
removes its directory. When a deployed test failed (a skip is no failure), the directory
(component logs, task logs, the PostgreSQL log) is kept, and the terminal summary names it and
prints the tail of each component log.
"""

from __future__ import annotations

import glob
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import tomllib
from importlib.metadata import entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import pytest

if TYPE_CHECKING:
    from collections.abc import Callable, Generator, Iterator

REPO = Path(__file__).resolve().parents[2]
TEST_DAGS = Path(__file__).resolve().parent / "dags"
AIRFLOW = Path(sys.executable).parent / "airflow"
#: ``[delta] poll_interval`` of the deployment: short, and not the default, so tests see it applied.
POLL_INTERVAL = 2
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
#: DAGs the tests need parsed before they start.
DAG_IDS = (
    "delta_daily_ingest",
    "delta_events_downstream",
    "delta_nightly_maintenance",
    "deployed_retry_after_commit",
    "deployed_wait_default_interval",
    "deployed_watch_data_changes",
    "deployed_watch_writes",
    "deployed_commit_via_connection",
    "deployed_on_lake_asset",
    "delta_events_silver",
    "deployed_consume",
)

_failed: list[str] = []
_kept: list[Path] = []
#: Directories of artifacts (screenshots) the tests kept, shown at the end of the run when asked for
#: (``$DELTA_VIEW_SCREENSHOTS``) or when a deployed test failed.
artifacts: list[Path] = []


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    # A failure of the test, its set-up or tear-down; not a skip (an exception too), nor an xfail.
    if report.failed and item.get_closest_marker("deployed") is not None:
        _failed.append(item.nodeid)
    return report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).is_relative_to(Path(__file__).parent):
            item.add_marker(pytest.mark.deployed)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    shown = artifacts if _failed or os.environ.get("DELTA_VIEW_SCREENSHOTS") else []
    for directory in shown:
        terminalreporter.section("deployed Airflow: artifacts")
        for path in sorted(directory.iterdir()):
            terminalreporter.write_line(str(path))
    for root in _kept:
        terminalreporter.section(f"deployed Airflow: logs kept in {root}")
        terminalreporter.write_line(f"failed: {', '.join(_failed) or 'the deployment did not start'}")
        for name in (*COMPONENTS, "postgresql"):
            path = root / "logs" / f"{name}.log"
            if path.exists():
                lines = path.read_text(errors="replace").splitlines()[-40:]
                terminalreporter.write_line(f"--- {path} (last {len(lines)} lines)")
                for line in lines:
                    terminalreporter.write_line(line)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _entry_points_of_the_worktree(root: Path) -> str | None:
    """A directory declaring the repository's ``airflow.plugins`` entry points, when the installed
    distribution's metadata lacks them (an install older than pyproject.toml): the package under
    test wins for its entry points as for its code. None when the install declares them all."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = dict(project.get("entry-points", {}).get("airflow.plugins", {}))
    installed = {ep.name for ep in entry_points(group="airflow.plugins")}
    missing = {name: target for name, target in declared.items() if name not in installed}
    if not missing:
        return None
    dist = root / "entry-points" / "airflow_delta_provider_under_test-0.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: airflow-delta-provider-under-test\nVersion: 0.0.0\n"
    )
    lines = [f"{name} = {target}" for name, target in missing.items()]
    (dist / "entry_points.txt").write_text("[airflow.plugins]\n" + "\n".join(lines) + "\n")
    return str(dist.parent)


def _postgres_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(found[-1]).parent if found else None


class Deployment:
    """One running deployment: its processes, its API (with a token) and its CLI."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.logs = root / "logs"
        self.tables = root / "tables"
        self.home = root / "home"
        self.pg_data = root / "pg" / "data"
        self.pg_port = _free_port()
        self.api_port = _free_port()
        self.base_url = f"http://127.0.0.1:{self.api_port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.pg_bin: Path | None = None
        self.as_postgres: list[str] = []
        self.token = ""
        self.client: Any = None
        self.env = self._environment()

    # --- set-up -------------------------------------------------------------------------

    def _environment(self) -> dict[str, str]:
        from cryptography.fernet import Fernet

        bundles = [
            {
                "name": "examples",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(REPO / "dags_examples"), "refresh_interval": 0},
            },
            {
                "name": "deployed_tests",
                "classpath": "airflow.dag_processing.bundles.local.LocalDagBundle",
                "kwargs": {"path": str(TEST_DAGS), "refresh_interval": 0},
            },
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
        env.update(
            {
                # The package under test (a worktree, a clean clone) wins over any installed copy.
                "PYTHONPATH": os.pathsep.join(
                    filter(
                        None,
                        [str(REPO), _entry_points_of_the_worktree(self.root), os.environ.get("PYTHONPATH")],
                    )
                ),
                "AIRFLOW_HOME": str(self.home),
                "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
                "AIRFLOW__CORE__PARALLELISM": "4",
                "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
                "AIRFLOW__CORE__FERNET_KEY": Fernet.generate_key().decode(),
                "AIRFLOW__CORE__TEST_CONNECTION": "Enabled",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin",
                "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.root / "passwords.json"),
                "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.base_url}/execution/",
                "AIRFLOW__API__BASE_URL": self.base_url,
                "AIRFLOW__API__SECRET_KEY": secrets.token_hex(16),
                "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_hex(32),
                # Airflow 3.1.0 leaves the issuer unset (None), which PyJWT >= 2.10 refuses.
                "AIRFLOW__API_AUTH__JWT_ISSUER": "delta-deployed-tests",
                "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": (
                    f"postgresql+psycopg2://airflow@127.0.0.1:{self.pg_port}/airflow"
                ),
                "AIRFLOW__DAG_PROCESSOR__DAG_BUNDLE_CONFIG_LIST": json.dumps(bundles),
                "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
                "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "15",
                "AIRFLOW__SCHEDULER__TASK_QUEUED_TIMEOUT": "600",
                "AIRFLOW__DELTA__POLL_INTERVAL": str(POLL_INTERVAL),
                # Where this tier's own DAGs (tests/deployed/dags) keep their tables.
                "DELTA_DEMO_ROOT": str(self.tables),
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    def start_postgres(self) -> None:
        self.pg_bin = _postgres_bin()
        if self.pg_bin is None:
            message = (
                "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): `make system-deps` "
                "installs it (apt-get install postgresql); the deployed tier runs Airflow on it."
            )
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        self.pg_data.parent.mkdir(parents=True)
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            shutil.chown(self.pg_data.parent, "postgres", "postgres")
            self.as_postgres = ["runuser", "-u", "postgres", "--"]
        self.pg_data.parent.chmod(0o700)
        self._run(
            [
                *self.as_postgres,
                str(self.pg_bin / "initdb"),
                "-D",
                str(self.pg_data),
                "-U",
                "airflow",
                "--auth=trust",
                "-E",
                "UTF8",
            ],
            "initdb",
        )
        log = self.root / "pg" / "server.log"
        self._run(
            [
                *self.as_postgres,
                str(self.pg_bin / "pg_ctl"),
                "-D",
                str(self.pg_data),
                "-l",
                str(log),
                "-w",
                "-o",
                f"-p {self.pg_port} -k {self.pg_data.parent} -c listen_addresses=127.0.0.1",
                "start",
            ],
            "pg_ctl start",
        )
        self._run(
            [
                str(self.pg_bin / "createdb"),
                "-h",
                "127.0.0.1",
                "-p",
                str(self.pg_port),
                "-U",
                "airflow",
                "airflow",
            ],
            "createdb",
        )

    def stop_postgres(self) -> None:
        if self.pg_bin is not None and (self.pg_data / "postmaster.pid").exists():
            subprocess.run(
                [
                    *self.as_postgres,
                    str(self.pg_bin / "pg_ctl"),
                    "-D",
                    str(self.pg_data),
                    "-m",
                    "fast",
                    "-w",
                    "stop",
                ],
                capture_output=True,
                timeout=60,
            )
        server_log = self.root / "pg" / "server.log"
        if server_log.exists():
            shutil.copy(server_log, self.logs / "postgresql.log")

    def _run(self, command: list[str], what: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=self.env)
        if done.returncode != 0:
            raise RuntimeError(
                f"{what} failed ({done.returncode}): {done.stdout[-2000:]} {done.stderr[-2000:]}"
            )
        return done

    def start(self) -> None:
        self.logs.mkdir(parents=True)
        self.tables.mkdir()
        self.home.mkdir()
        (self.root / "passwords.json").write_text(json.dumps({"admin": "admin-deployed"}))
        self.start_postgres()
        self.cli("db", "migrate", timeout=300)
        # The example DAGs keep their tables under this Variable, read when the dag-processor parses
        # them (through the API server, as a Variable set in the UI is read).
        self.cli("variables", "set", "delta_examples_root", str(self.tables))
        # The example maintenance DAG maintains every table under the demo root unless this Variable
        # names some. Unpaused at creation, it starts a scheduled run at once, whenever the scheduler
        # gets to it: that run must not commit a VACUUM amid the ingest runs into the tables the other
        # tests count versions of, so it maintains a table of its own; its test names the events table.
        self.cli("variables", "set", "delta_maintenance_tables", json.dumps([str(self.idle_table())]))
        for component in COMPONENTS:
            self.start_component(component)
        self._wait_healthy()
        self._login()
        self.wait_for(lambda: not (set(DAG_IDS) - self.dag_ids()), 240, "the DAGs to be parsed")

    def idle_table(self) -> Path:
        """A Delta table outside the tables folder, for the maintenance DAG's scheduled run."""
        import pyarrow as pa

        from airflow_delta_provider.core import DeltaTable

        location = self.root / "maintained_by_the_scheduled_run"
        if not location.exists():
            DeltaTable.create(str(location), pa.schema([("id", pa.int64())]))
        return location

    def start_component(self, component: str) -> None:
        args = [str(AIRFLOW), component]
        if component == "api-server":
            args += ["--host", "127.0.0.1", "--port", str(self.api_port), "--workers", "1"]
        out = open(self.logs / f"{component}.log", "ab")  # noqa: SIM115 - kept open by the process
        self.processes[component] = subprocess.Popen(
            args, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.root
        )
        out.close()

    def stop_component(self, component: str, timeout: float = 60) -> None:
        """Stop one component by its PID (SIGTERM, then its own process group with SIGKILL)."""
        process = self.processes.pop(component, None)
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the group this fixture created for it
            process.wait(timeout=30)

    def stop(self) -> None:
        for component in reversed(COMPONENTS):
            self.stop_component(component)
        self.stop_postgres()

    def _wait_healthy(self) -> None:
        import httpx

        def healthy() -> bool:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise RuntimeError(f"airflow {name} exited with {process.returncode}; see {self.logs}")
            try:
                health = httpx.get(f"{self.base_url}/api/v2/monitor/health", timeout=5).json()
            except (httpx.HTTPError, ValueError):
                return False
            parts = ("scheduler", "triggerer", "dag_processor")
            return all((health.get(p) or {}).get("status") == "healthy" for p in parts)

        self.wait_for(healthy, 180, "the scheduler, triggerer and dag-processor to be healthy")

    def _login(self) -> None:
        import httpx

        response = httpx.post(
            f"{self.base_url}/auth/token",
            json={"username": "admin", "password": "admin-deployed"},
            timeout=30,
        )
        response.raise_for_status()
        self.token = response.json()["access_token"]
        self.client = httpx.Client(
            base_url=self.base_url, headers={"Authorization": f"Bearer {self.token}"}, timeout=60
        )

    # --- driving it ----------------------------------------------------------------------

    @staticmethod
    def wait_for(condition: Callable[[], Any], timeout: float, what: str, interval: float = 1.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"Timed out after {timeout:.0f} s waiting for {what}.")
            time.sleep(interval)

    def cli(self, *args: str, timeout: float = 120) -> str:
        return self._run([str(AIRFLOW), *args], f"airflow {' '.join(args)}", timeout=timeout).stdout

    def api(self, method: str, path: str, *, expect: tuple[int, ...] = (200, 201), **kwargs: Any) -> Any:
        response = self.client.request(method, f"/api/v2{path}", **kwargs)
        if response.status_code not in expect:
            raise AssertionError(f"{method} {path} -> {response.status_code}: {response.text[:2000]}")
        return response.json() if response.content else None

    def dag_ids(self) -> set[str]:
        return {d["dag_id"] for d in self.api("GET", "/dags", params={"limit": 100})["dags"]}

    def trigger(
        self, dag_id: str, *, logical_date: str | None = None, conf: dict[str, Any] | None = None
    ) -> str:
        body = {"logical_date": logical_date, "conf": conf or {}}
        return str(self.api("POST", f"/dags/{dag_id}/dagRuns", json=body)["dag_run_id"])

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.api("GET", f"/dags/{dag_id}/dagRuns", params={"limit": 100})["dag_runs"])

    def run_state(self, dag_id: str, run_id: str) -> str:
        return str(self.api("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}")["state"])

    def wait_run(self, dag_id: str, run_id: str, timeout: float = 240) -> str:
        return str(
            self.wait_for(
                lambda: (s := self.run_state(dag_id, run_id)) in ("success", "failed") and s,
                timeout,
                f"run {run_id} of {dag_id} to finish",
            )
        )

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(
            self.api("GET", f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}")
        )

    def xcom(self, dag_id: str, run_id: str, task_id: str, key: str = "return_value") -> Any:
        entry = self.api(
            "GET",
            f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/xcomEntries/{key}",
            params={"deserialize": "true", "stringify": "false"},
        )
        return entry["value"]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> list[dict[str, Any]]:
        """The task's log records (structured: ``event``, ``level``...), through the API."""
        body = self.api(
            "GET",
            f"/dags/{dag_id}/dagRuns/{quote(run_id, safe='')}/taskInstances/{task_id}/logs/{try_number}",
            params={"full_content": "true"},
            headers={"Accept": "application/json"},
        )
        content = body["content"]
        return [c if isinstance(c, dict) else {"event": str(c)} for c in content]

    def log_text(self, dag_id: str, run_id: str, task_id: str, try_number: int = 1) -> str:
        return "\n".join(str(r.get("event", "")) for r in self.task_log(dag_id, run_id, task_id, try_number))


@pytest.fixture(scope="session")
def deployment() -> Iterator[Deployment]:
    """The session's Airflow deployment (started on first use, stopped by PID at the end)."""
    root = Path(tempfile.mkdtemp(prefix="delta-deployed-"))
    root.chmod(0o755)  # PostgreSQL runs as its own user and must reach its directory
    deployed = Deployment(root)
    started = time.monotonic()
    try:
        deployed.start()
    except pytest.skip.Exception:  # no PostgreSQL here: nothing ran, nothing to keep
        deployed.stop()
        shutil.rmtree(root, ignore_errors=True)
        raise
    except BaseException:
        deployed.stop()
        _kept.append(root)
        raise
    sys.stderr.write(f"\ndeployed Airflow up in {time.monotonic() - started:.0f} s under {root}\n")
    yield deployed
    deployed.stop()
    if _failed:
        _kept.append(root)
    else:
        shutil.rmtree(root, ignore_errors=True)
