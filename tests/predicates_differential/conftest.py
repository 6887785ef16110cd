"""The generated worlds of the differential tests, one per table (tests/differential_world.py).

Seeded by ``DELTA_DIFF_SEED`` (printed in the report header); ``DELTA_DIFF_CASES`` scales the
number of cases; ``DELTA_DIFF_CASE=<id>`` runs one case alone (the reproduction every failure
prints).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from differential_world import TABLES, World, build_world


@pytest.fixture(scope="session", params=TABLES)
def world(
    request: pytest.FixtureRequest, local_spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> World:
    name = request.param
    only = os.environ.get("DELTA_DIFF_CASE")
    if only and not only.startswith(f"{name}-"):
        pytest.skip(f"DELTA_DIFF_CASE={only} is a case of another table")
    return build_world(name, local_spark, tmp_path_factory.mktemp(f"differential-{name}"))
