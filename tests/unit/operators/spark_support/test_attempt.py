"""The directory of one Spark attempt (attempt_dir): names every store accepts, whatever the identity.

Airflow allows 250 characters per dag_id, task_id and run_id; local file systems, HDFS and ADLS
refuse a directory name over 255 bytes (Spark's ``Mkdirs failed``).
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING

import pytest

from airflow_delta_provider.operators.commit import RunIdentity
from airflow_delta_provider.operators.spark_support.attempt import MAX_NAME_BYTES, attempt_dir

if TYPE_CHECKING:
    from pathlib import Path

LONGEST = 250
RUN = "scheduled__2026-11-01T00:00:00+00:00"
#: The run id Airflow gives a manual run, padded to Airflow's maximum length.
LONG_RUN = ("manual__2026-11-01T00:00:00.123456+00:00" + "r" * LONGEST)[:LONGEST]


def identity(dag: str = "daily", task: str = "ingest", run: str = RUN, map_index: int = -1, tries: int = 1):
    return RunIdentity(dag, task, run, map_index, tries, 1)


def names(directory: str) -> list[str]:
    return directory.split("/")[1:]  # the generated ones, after write_subdir


def test_short_identities_keep_their_readable_names() -> None:
    directory = attempt_dir("staging", identity(map_index=3, tries=2))
    assert re.fullmatch(
        r"staging/daily__ingest/scheduled__2026-11-01T00-00-00-00-00__3__try2__[0-9a-f]{12}", directory
    )


@pytest.mark.parametrize(
    "who",
    [
        pytest.param(identity("d" * LONGEST, "t" * LONGEST, LONG_RUN), id="all-at-the-maximum"),
        pytest.param(identity("d" * LONGEST, "t" * LONGEST, LONG_RUN, 99_999, 99), id="mapped-try-99"),
        pytest.param(identity("é" * LONGEST, "タ" * LONGEST, "ü" * LONGEST), id="non-ascii"),
        pytest.param(identity("x" * 60, "y" * 59, RUN), id="just-over-the-limit"),
    ],
)
def test_every_name_fits_every_store_and_the_directory_can_be_made(tmp_path: Path, who: RunIdentity) -> None:
    directory = attempt_dir("staging", who)
    for name in names(directory):
        assert len(name.encode()) <= MAX_NAME_BYTES < 255
        assert name.isascii() and not name.startswith(("_", ".")) and "=" not in name
    os.makedirs(tmp_path / directory)  # "File name too long" before
    if who.map_index >= 0:
        assert f"__{who.map_index}__try{who.try_number}__" in names(directory)[1]


def test_long_identities_that_share_a_prefix_get_names_of_their_own() -> None:
    base = "d" * 200
    first = names(attempt_dir("staging", identity(base + "a", "t" * LONGEST, LONG_RUN)))
    second = names(attempt_dir("staging", identity(base + "b", "t" * LONGEST, LONG_RUN)))
    assert first[0] != second[0]
    assert first[0].startswith("d" * 40)  # still readable
    other_run = names(attempt_dir("staging", identity(base + "a", "t" * LONGEST, LONG_RUN[:-1] + "s")))
    assert other_run[1][:-14] != first[1][:-14]  # the runs differ beyond the attempt's own uuid
    again = names(attempt_dir("staging", identity(base + "a", "t" * LONGEST, LONG_RUN)))
    assert again[0] == first[0] and again[1] != first[1]  # the same task's attempts: one parent, fresh dirs
