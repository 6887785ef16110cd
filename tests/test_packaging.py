"""The distribution as a user installs it: its licence, and a whole PySpark beside pyspark-client."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tomllib
import zipfile
from base64 import urlsafe_b64encode
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def test_the_license_file_is_the_apache_license_the_metadata_names() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    # An SPDX expression (PEP 639), not the deprecated table setuptools warns about.
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]


@pytest.mark.slow
def test_the_wheel_carries_the_license_and_builds_without_a_license_warning(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "license" not in (done.stdout + done.stderr).lower(), done.stderr[-3000:]
    (wheel,) = tmp_path.glob("airflow_delta_provider-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = archive.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt")))
    # The Delta view: its plugin entry point, and its page and chart library inside the package.
    assert "[airflow.plugins]\ndelta_tables = airflow_delta_provider.plugins:DeltaViewPlugin" in (
        entry_points.decode()
    )
    static = ("index.html", "delta.js", "delta.css", "uPlot.iife.min.js", "uPlot.min.css", "uPlot.LICENSE")
    for name in static:
        assert f"airflow_delta_provider/plugins/static/{name}" in names, name
    assert "License-Expression: Apache-2.0" in metadata
    assert "License-File: LICENSE" in metadata
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)


def _record_mismatches(name: str) -> tuple[list[str], int]:
    """Python files of a distribution whose installed content differs from its RECORD."""
    dist = distribution(name)
    wrong, checked = [], 0
    for entry in dist.files or []:
        if not entry.hash or not str(entry).endswith(".py"):
            continue
        path = Path(str(entry.locate()))
        digest = urlsafe_b64encode(hashlib.new(entry.hash.mode, path.read_bytes()).digest()).rstrip(b"=")
        checked += 1
        if digest.decode() != entry.hash.value:
            wrong.append(str(entry))
    return wrong, checked


def test_the_installed_pyspark_is_whole() -> None:
    """pyspark and pyspark-client share the ``pyspark/`` directory: both must be the same version, so
    whichever was installed last leaves the files the other's RECORD lists, and the Python code matches
    the jars."""
    try:
        pyspark_dist = distribution("pyspark")
    except PackageNotFoundError:
        pytest.skip("pyspark is not installed (the [pyspark] extra)")
    import pyspark

    assert pyspark.__version__ == pyspark_dist.version
    try:
        client = distribution("pyspark-client")
    except PackageNotFoundError:
        client = None
    if client is not None:
        assert client.version == pyspark_dist.version, "pin pyspark and pyspark-client to one version"
    for name in ("pyspark", *(["pyspark-client"] if client else [])):
        wrong, checked = _record_mismatches(name)
        assert checked > 100 and not wrong, (
            f"{name}: {len(wrong)} of {checked} files differ, e.g. {wrong[:3]}"
        )
    jars = Path(pyspark.__file__).parent / "jars"
    assert list(jars.glob(f"spark-core_*-{pyspark.__version__}.jar")), "the jars are of another version"
