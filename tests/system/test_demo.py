"""``make demo`` as a newcomer runs it: a venv of its own with nothing for development in it, and an
account of each step without a warning, an error record or a traceback.

It runs the real Makefile target from the repository's root (its venv, ``.venv-demo``, is installed
once and kept; the demo itself takes about two minutes).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from pathlib import Path

import pytest

pytestmark = [pytest.mark.system, pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[2]
DEMO_VENV = REPO / ".venv-demo"
#: What a line of the demo's output must not hold: a log record at WARNING or above (Airflow's
#: ``[warning ]``/``[error ]``, log4j's ``WARN``/``ERROR``, the JVM's ``WARNING:``), a Python warning
#: (``FutureWarning: ...``), a traceback.
TROUBLE = re.compile(
    r"\[\s*(warning|error|critical)\s*\]|\b(WARN|WARNING|ERROR|FATAL)\b|\w+Warning\b|Traceback|deprecat",
    re.IGNORECASE,
)
#: The development tools the test venv holds and the demo's must not.
DEVELOPMENT_TOOLS = {"pytest", "ruff", "mypy", "moto", "hypothesis", "psycopg2-binary", "asyncpg", "mkdocs"}
#: Lists the distributions of the venv it runs in, and the closure of ``airflow-delta-provider[demo]``'s
#: requirements (markers evaluated as pip evaluates them there).
_CLOSURE = """
import json
from importlib.metadata import distribution, distributions
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

def closure(name, extras, seen):
    key = canonicalize_name(name)
    if (key, tuple(sorted(extras))) in seen:
        return
    seen.add((key, tuple(sorted(extras))))
    for line in distribution(name).requires or []:
        req = Requirement(line)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in [*extras, ""]):
            closure(req.name, req.extras, seen)

seen = set()
closure("airflow-delta-provider", {"demo"}, seen)
print(json.dumps({
    "installed": sorted(canonicalize_name(d.metadata["Name"]) for d in distributions()),
    "closure": sorted({name for name, _ in seen}),
}))
"""


@pytest.fixture(scope="module")
def demo_run() -> subprocess.CompletedProcess[str]:
    """``make demo`` from a shell as a newcomer's: none of this test run's Airflow settings."""
    shell = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "PYTHONPATH", "PYTEST"))}
    return subprocess.run(
        ["make", "--no-print-directory", "demo"],
        cwd=REPO,
        env=shell,
        capture_output=True,
        text=True,
        timeout=1700,
    )


def test_the_demo_runs_each_step_and_warns_of_nothing(demo_run: subprocess.CompletedProcess[str]) -> None:
    output = demo_run.stdout + demo_run.stderr
    assert demo_run.returncode == 0, output[-5000:]
    trouble = [line for line in output.splitlines() if TROUBLE.search(line)]
    assert not trouble, "\n".join(trouble)
    # The two failures the demo provokes: one line each, saying so and what happened next.
    provoked = [line for line in output.splitlines() if "as the demo makes it" in line]
    assert len(provoked) == 2 and all("Airflow retried it" in line for line in provoked), provoked
    for outcome in (
        "nothing committed: version 1 already holds this run's commit",
        "the sensor deferred, its trigger polled, and it resumed",
        "silver totals per day and user equal the events table's",
        "customer 2's rows in the files under",
        "restored version 2",
    ):
        assert outcome in output, f"{outcome!r} missing from:\n{output[-5000:]}"
    runs = re.findall(r"\brun (\w+);", output)  # "run success; ..." after every DAG run
    assert runs and set(runs) == {"success"}, runs


def test_the_demo_venv_holds_what_the_demo_uses_and_no_development_tool(
    demo_run: subprocess.CompletedProcess[str],
) -> None:
    assert demo_run.returncode == 0
    done = subprocess.run(
        [str(DEMO_VENV / "bin" / "python"), "-c", _CLOSURE], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    installed, closure = set(found["installed"]), set(found["closure"])
    assert not DEVELOPMENT_TOOLS & installed, sorted(DEVELOPMENT_TOOLS & installed)
    # Nothing but the demo extra's requirements, and what pip itself brings.
    assert installed - closure <= {"pip", "setuptools", "wheel"}, sorted(installed - closure)
    demo = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["demo"]
    assert {"pyspark", "deltalake"} <= closure, demo
