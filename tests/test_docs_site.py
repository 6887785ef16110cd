"""The docs site (``mkdocs.yml``, ``make docs``) builds strictly: every page in the navigation, every
link, anchor and cross-reference resolved, the API reference generated from the docstrings with a
page per face of the core."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
CORE = REPO / "airflow_delta_provider" / "core"
#: The core's faces: its folders and errors.py (docs/architecture.md's map).
FACES = sorted([p.parent.name for p in CORE.glob("*/__init__.py")] + ["errors"])


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        # Not --quiet: it silences the warnings --strict counts, and a broken link would pass.
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(config), "-d", str(site)],
        cwd=REPO,
        # Material for MkDocs announces its successor on every build; the site does not need it.
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=900,
    )


def test_the_site_builds_strictly_with_the_api_reference(tmp_path: Path) -> None:
    site = tmp_path / "site"
    done = build(REPO / "mkdocs.yml", site)
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    assert "WARNING" not in done.stdout + done.stderr, done.stdout + done.stderr
    landing = (site / "index.html").read_text()
    for step in ("install", "operators", "sensors-and-triggers", "maintenance", "reading", "lifecycle"):
        assert f'href="{step}/"' in landing, step
    for face in FACES:
        page = (site / "reference" / "core" / face / "index.html").read_text()
        assert f'id="airflow_delta_provider.core.{face}' in page, face
    # A docstring's Sphinx role became a link to the object's own entry.
    table = (site / "reference" / "core" / "table" / "index.html").read_text()
    assert 'href="#airflow_delta_provider.core.table.DeltaTable"><code>DeltaTable</code></a>' in table
    assert ":class:" not in table


def test_each_face_of_the_core_has_its_reference_page() -> None:
    for face in FACES:
        page = REPO / "docs" / "reference" / "core" / f"{face}.md"
        assert page.exists(), f"add {page.relative_to(REPO)} (and it to mkdocs.yml's nav) for core/{face}"
        assert f"::: airflow_delta_provider.core.{face}\n" in page.read_text()


def _site_of(tmp_path: Path, page: str) -> Path:
    """A one-page site with the project's configuration (theme, plugins, strictness)."""
    config: dict[str, Any] = yaml.safe_load((REPO / "mkdocs.yml").read_text())
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "index.md").write_text(f"# Home\n\n## A heading\n\n{page}\n")
    config.update(docs_dir=str(docs), nav=["index.md"], watch=[])
    handler = config["plugins"][2]["mkdocstrings"]["handlers"]["python"]
    handler["paths"] = [str(REPO)]
    options = handler["options"]
    options["extensions"] = [str(REPO / extension) for extension in options["extensions"]]
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.parametrize(
    ("page", "complaint"),
    [
        ("[a page](missing.md)", "missing.md"),
        ("[a heading](#no-such-heading)", "no-such-heading"),
        ("[an object][airflow_delta_provider.core.NoSuchThing]", "NoSuchThing"),
    ],
    ids=["page", "anchor", "cross-reference"],
)
def test_a_broken_link_fails_the_build(tmp_path: Path, page: str, complaint: str) -> None:
    done = build(_site_of(tmp_path, page), tmp_path / "site")
    assert done.returncode != 0 and complaint in done.stdout + done.stderr, done.stdout + done.stderr


def test_the_one_page_site_builds_when_its_links_hold(tmp_path: Path) -> None:
    page = "[a heading](#a-heading), [an object][airflow_delta_provider.core.table.DeltaTable]\n\n"
    page += "::: airflow_delta_provider.core.table"
    done = build(_site_of(tmp_path, page), tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
