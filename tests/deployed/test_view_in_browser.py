"""The Delta view in the real UI: headless Chromium (the OS package) on the session's deployment.

Runs after ``test_deployment.py`` (file order), on the tables its DAG runs wrote: the example
table ``events`` (ingest runs, a cleared day that commits again, the nightly maintenance's
VACUUM) and ``retried`` (a retry after the commit: an idempotent skip). Run on its own, it
triggers those runs first. A screenshot of each page is kept; the terminal summary prints where.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from airflow_delta_provider.core import DeltaTable

from . import conftest
from .browser import Browser, find_chromium

if TYPE_CHECKING:
    from collections.abc import Iterator

    from .conftest import Deployment

INGEST = "delta_daily_ingest"
MAINTENANCE = "delta_nightly_maintenance"
RETRY = "deployed_retry_after_commit"
#: The view's page inside Airflow's UI (the plugin's external view).
UI_ROUTE = "/plugin/delta-tables"
#: Inside the view's iframe.
FRAME = "document.querySelector('iframe[src*=\"/delta/\"]')"
DOC = f"{FRAME}?.contentDocument"


def _finished(deployment: Deployment, dag_id: str) -> list[dict[str, Any]]:
    return [r for r in deployment.runs(dag_id) if r["state"] == "success"]


def _ensure_runs(deployment: Deployment) -> None:
    """The runs ``test_deployment.py`` makes, when this file runs alone."""
    if not _finished(deployment, INGEST):
        run_id = deployment.trigger(INGEST, logical_date="2026-11-01T00:00:00Z")
        assert deployment.wait_run(INGEST, run_id, timeout=420) == "success"
    if not _finished(deployment, RETRY):
        run_id = deployment.trigger(RETRY)
        assert deployment.wait_run(RETRY, run_id, timeout=300) == "success"
    if not [r for r in _finished(deployment, MAINTENANCE) if (r.get("conf") or {}).get("dry_run") is False]:
        run_id = deployment.trigger(MAINTENANCE, conf={"dry_run": False})
        assert deployment.wait_run(MAINTENANCE, run_id) == "success"


@pytest.fixture(scope="module")
def browser(deployment: Deployment) -> Iterator[Browser]:
    binary = find_chromium()
    if binary is None:
        message = "Chromium is not installed: `make system-deps` installs it (apt-get install chromium)."
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    profile = deployment.root / "chromium-profile"  # removed with the deployment, kept with its logs
    profile.mkdir()
    opened = Browser(binary, profile, deployment.logs / "chromium.log")
    try:
        opened.set_cookie(deployment.base_url, "_token", deployment.token)
        yield opened
    finally:
        opened.close()


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the screenshots are kept (``$DELTA_VIEW_SCREENSHOTS``, else a pytest temporary directory)."""
    chosen = os.environ.get("DELTA_VIEW_SCREENSHOTS")
    directory = Path(chosen) if chosen else tmp_path_factory.mktemp("delta-view-screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    conftest.artifacts.append(directory)
    return directory


def _tables(deployment: Deployment) -> dict[str, dict[str, Any]]:
    response = deployment.client.get("/delta/api/tables")
    assert response.status_code == 200, response.text
    return {t["uri"]: t for t in response.json()["tables"] if t["kind"] == "asset"}


def _show(browser: Browser, table: dict[str, Any], tab: str) -> None:
    """Point the view at a table and tab, and wait until it has drawn it."""
    browser.evaluate(f"{FRAME}.contentWindow.location.hash = '#asset/{table['id']}/{tab}'")
    browser.wait_for(
        f"{DOC}?.querySelector('#content')?.getAttribute('data-loaded') === '{tab}' && "
        f"{DOC}.location.hash.includes('asset/{table['id']}/')",
        60,
        f"the {tab} of {table['uri']}",
    )
    message = browser.evaluate(
        f"{DOC}.querySelector('#message').hidden ? '' : {DOC}.querySelector('#message').textContent"
    )
    assert not message, message


def _texts(browser: Browser, selector: str) -> list[str]:
    return list(
        browser.evaluate(f"[...{DOC}.querySelectorAll({json.dumps(selector)})].map(e => e.textContent)")
    )


def test_the_view_shows_the_example_tables_history_health_and_maintenance(
    deployment: Deployment, browser: Browser, screenshots: Path
) -> None:
    _ensure_runs(deployment)
    events_uri = f"file://{deployment.tables / 'events'}"
    retried_uri = f"file://{deployment.tables / 'retried'}"
    tables = _tables(deployment)
    assert events_uri in tables and retried_uri in tables, sorted(tables)
    history = DeltaTable(events_uri).history()

    # The page inside Airflow's own UI, logged in by the UI's cookie.
    browser.open(f"{deployment.base_url}{UI_ROUTE}")
    browser.wait_for(
        f"{DOC}?.querySelector('#content')?.getAttribute('data-loaded')", 90, "the view in the UI"
    )

    # History: every committing run, linked to its task instance; the cleared day's second try;
    # the maintenance's VACUUM.
    _show(browser, tables[events_uri], "history")
    browser.screenshot(screenshots / "history.png")
    items = dict(
        browser.evaluate(
            f"[...{DOC}.querySelectorAll('#timeline li[data-version]')]"
            ".map(e => [Number(e.dataset.version), e.textContent])"
        )
    )
    links = browser.evaluate(
        f"[...{DOC}.querySelectorAll('#timeline a.ti')].map(a => a.getAttribute('href'))"
    )
    committed = [e for e in history[:20] if (e.get("tags") or {}).get("airflow.run_id")]
    assert committed
    for entry in committed:
        tags = entry["tags"]
        line = items[entry["version"]]
        assert tags["airflow.run_id"] in line and f"try {tags['airflow.try_number']}" in line
        assert (
            f"/dags/{INGEST}/runs/{tags['airflow.run_id']}/tasks/ingest_events?try_number="
            f"{tags['airflow.try_number']}"
        ) in [_unquote(link) for link in links]
        # A later commit of the same task run (the cleared day) is marked as its re-run.
        earlier = [
            e["version"]
            for e in committed
            if e["version"] < entry["version"]
            and (e["tags"]["airflow.run_id"], e["tags"]["airflow.task_id"])
            == (tags["airflow.run_id"], tags["airflow.task_id"])
        ]
        if earlier:
            assert f"re-run (replaces v{max(earlier)})" in line, line
    vacuums = [t for t in items.values() if "VACUUM" in t]
    assert any("VACUUM START" in t for t in vacuums) and any("VACUUM END" in t for t in vacuums)

    # Health: the numbers, the size chart, the dry run on request.
    _show(browser, tables[events_uri], "health")
    snapshot = DeltaTable(events_uri).snapshot()
    assert _texts(browser, "#active-files .value") == [str(snapshot.num_files())]
    assert browser.evaluate(f"!!{DOC}.querySelector('#size-chart canvas')")
    browser.evaluate(f"{DOC}.querySelector('#dry-run').click()")
    browser.wait_for(f"!!{DOC}.querySelector('#dry-files')", 60, "the VACUUM dry run")
    browser.screenshot(screenshots / "health.png")
    assert DeltaTable(events_uri).version() == snapshot.version  # the dry run committed nothing

    # Maintenance: the VACUUM the maintenance DAG ran, and when the next is due.
    _show(browser, tables[events_uri], "maintenance")
    browser.screenshot(screenshots / "maintenance.png")
    (vacuum,) = _texts(browser, "#maint-vacuum")
    assert "not due" in vacuum and "next due" in vacuum
    assert any("VACUUM END" in t and "COMPLETED" in t for t in _texts(browser, "#vacuums li"))
    assert _texts(browser, "#maint-checkpoint") and _texts(browser, "#maint-cleanup")
    # Data retention and PURGE: the events table has no policy of its own.
    (retention,) = _texts(browser, "#maint-retention")
    assert "no policy" in retention and "airflow.dataRetention" in retention
    assert _texts(browser, "#maint-purge")

    # The retry after a commit: a skip on the timeline, linked to try 2.
    _show(browser, tables[retried_uri], "history")
    browser.screenshot(screenshots / "history-skip.png")
    skips = _texts(browser, "#timeline li[data-kind=skip]")
    assert len(skips) == 1 and "version 0 already holds this run's commit" in skips[0]
    assert f"{RETRY} / write_once" in skips[0] and "try 2" in skips[0]
    for name in ("history.png", "health.png", "maintenance.png", "history-skip.png"):
        assert (screenshots / name).stat().st_size > 10_000, name


def _unquote(link: str) -> str:
    from urllib.parse import unquote

    return unquote(link)
