"""A rendered template that is not an unambiguous value is refused, by every operator and the sensor, before
the table changes.

Per class of bad rendered value (blank, the rendered ``None`` where it is no default, a word that is
no value, a number out of Delta's range), each operator's templated arguments are rendered from
``params`` exactly as a task run does, and ``execute`` must raise an error naming the argument and
the value, with the table's version, active files, ``_delta_log`` listing and every file's size
and modification time unchanged. The tables are ones where a run with a good value would delete
(VACUUM and log cleanup find work, the commit has files to add), so "unchanged" is the refusal's doing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import PostCommitHookProperties, write_deltalake

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.operators.commit import DeltaCommitOperator
from airflow_delta_provider.operators.maintenance import (
    DeltaCheckpointOperator,
    DeltaLogCleanupOperator,
    DeltaMaintenanceOperator,
    DeltaVacuumOperator,
)
from airflow_delta_provider.operators.restore import DeltaRestoreOperator
from airflow_delta_provider.sensors.delta import DeltaTableVersionSensor

if TYPE_CHECKING:
    from collections.abc import Callable

DAY = 86_400
TEMPLATE = "{{ params.value }}"


def busy_table(root: Path) -> str:
    """12 versions, the last an overwrite; a 40-day-old log; tombstones expire at once; files to commit.

    A maintenance run with good arguments checkpoints, cleans up the log and VACUUMs the 11 replaced
    files (and the uncommitted one); a commit with good arguments adds the file under ``landing/``.
    """
    for version in range(12):
        write_deltalake(
            str(root),
            pa.table({"id": pa.array([version], pa.int64())}),
            mode="overwrite" if version == 11 else "append",
            configuration={"delta.deletedFileRetentionDuration": "interval 0 hours"}
            if version == 0
            else None,
            post_commithook_properties=PostCommitHookProperties(
                create_checkpoint=False, cleanup_expired_logs=False
            ),
        )
    base = time.time() - 40 * DAY
    for index, path in enumerate(sorted((root / "_delta_log").iterdir())):
        os.utime(path, (base + index, base + index))
    for path in root.glob("*.parquet"):
        os.utime(path, (time.time() - DAY, time.time() - DAY))
    (root / "landing").mkdir()
    pq.write_table(pa.table({"id": pa.array([99], pa.int64())}), root / "landing" / "part-0.parquet")
    return str(root)


def state(root: str) -> tuple[int, list[str], list[str], dict[str, tuple[int, int]]]:
    """Version, active files, the ``_delta_log`` listing, and every file with its size and mtime."""
    snapshot = DeltaTable(root).snapshot()
    tree = {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in Path(root).rglob("*")
        if p.is_file()
    }
    return (
        snapshot.version,
        sorted(snapshot.files().column("path").to_pylist()),
        sorted(p.name for p in (Path(root) / "_delta_log").iterdir()),
        tree,
    )


#: (operator built on a table with one argument templated, the argument's name)
OPERATORS: dict[str, tuple[Callable[[str], Any], str]] = {
    "vacuum.dry_run": (lambda t: DeltaVacuumOperator(task_id="o", table_uri=t, dry_run=TEMPLATE), "dry_run"),
    "vacuum.mode": (lambda t: DeltaVacuumOperator(task_id="o", table_uri=t, mode=TEMPLATE), "mode"),
    "vacuum.retention": (
        lambda t: DeltaVacuumOperator(
            task_id="o", table_uri=t, retention=TEMPLATE, enforce_retention_duration=False
        ),
        "retention",
    ),
    "cleanup.dry_run": (
        lambda t: DeltaLogCleanupOperator(task_id="o", table_uri=t, dry_run=TEMPLATE),
        "dry_run",
    ),
    "cleanup.retention": (
        lambda t: DeltaLogCleanupOperator(task_id="o", table_uri=t, retention=TEMPLATE),
        "retention",
    ),
    "checkpoint.version": (
        lambda t: DeltaCheckpointOperator(task_id="o", table_uri=t, version=TEMPLATE),
        "version",
    ),
    "maintenance.dry_run": (
        lambda t: DeltaMaintenanceOperator(task_id="o", tables=[t], vacuum_interval=None, dry_run=TEMPLATE),
        "dry_run",
    ),
    "maintenance.vacuum_mode": (
        lambda t: DeltaMaintenanceOperator(task_id="o", tables=[t], vacuum_mode=TEMPLATE),
        "vacuum_mode",
    ),
    "maintenance.vacuum_interval": (
        lambda t: DeltaMaintenanceOperator(task_id="o", tables=[t], vacuum_interval=TEMPLATE),
        "vacuum_interval",
    ),
    "maintenance.tables": (lambda t: DeltaMaintenanceOperator(task_id="o", tables=TEMPLATE), "tables"),
    "commit.mode": (
        lambda t: DeltaCommitOperator(task_id="o", table_uri=t, prefix="landing", mode=TEMPLATE),
        "mode",
    ),
    "commit.app_version": (
        lambda t: DeltaCommitOperator(
            task_id="o", table_uri=t, prefix="landing", app_id="a", app_version=TEMPLATE
        ),
        "app_version",
    ),
    "commit.app_id": (
        lambda t: DeltaCommitOperator(task_id="o", table_uri=t, prefix="landing", app_id=TEMPLATE),
        "app_id",
    ),
    "commit.prefix": (lambda t: DeltaCommitOperator(task_id="o", table_uri=t, prefix=TEMPLATE), "prefix"),
    "commit.files": (lambda t: DeltaCommitOperator(task_id="o", table_uri=t, files=TEMPLATE), "files"),
    "commit.replace_where": (
        lambda t: DeltaCommitOperator(
            task_id="o", table_uri=t, prefix="landing", mode="overwrite", replace_where=TEMPLATE
        ),
        "replace_where",
    ),
    # A restore with a good value would commit (its files are all there, the retention check off).
    "restore.version": (
        lambda t: DeltaRestoreOperator(
            task_id="o", table_uri=t, version=TEMPLATE, enforce_retention_duration=False
        ),
        "version",
    ),
    "restore.timestamp": (
        lambda t: DeltaRestoreOperator(
            task_id="o", table_uri=t, timestamp=TEMPLATE, enforce_retention_duration=False
        ),
        "timestamp",
    ),
    "restore.before_run_id": (
        lambda t: DeltaRestoreOperator(task_id="o", table_uri=t, before_run_id=TEMPLATE),
        "before_run_id",
    ),
    "restore.enforce_retention_duration": (
        lambda t: DeltaRestoreOperator(
            task_id="o", table_uri=t, version=3, enforce_retention_duration=TEMPLATE
        ),
        "enforce_retention_duration",
    ),
    "sensor.after_version": (
        lambda t: DeltaTableVersionSensor(task_id="o", table_uri=t, after_version=TEMPLATE),
        "after_version",
    ),
    "sensor.after_timestamp": (
        lambda t: DeltaTableVersionSensor(task_id="o", table_uri=t, after_timestamp=TEMPLATE),
        "after_timestamp",
    ),
}

#: Per class of bad rendered value, the arguments it is bad for.
BLANK = ["", " ", "\t "]
CASES = [
    *[(key, value) for key in OPERATORS for value in BLANK],  # blank: never a value, for every argument
    # Not a value of the argument's kind.
    ("vacuum.dry_run", "maybe"),
    ("vacuum.dry_run", "None"),
    ("vacuum.dry_run", "2"),
    ("cleanup.dry_run", "None"),
    ("maintenance.dry_run", "nope"),
    ("vacuum.mode", "None"),
    ("vacuum.mode", "medium"),
    ("maintenance.vacuum_mode", "None"),
    ("commit.mode", "None"),
    ("commit.mode", "merge"),
    ("vacuum.retention", "-1"),
    ("cleanup.retention", "-5"),
    ("maintenance.vacuum_interval", "-2"),
    ("checkpoint.version", "latest"),
    ("checkpoint.version", "-1"),
    ("commit.app_version", "soon"),
    ("commit.app_version", "-1"),
    ("commit.app_version", "1.5"),
    ("commit.files", "[1, 2]"),
    ("commit.files", "[not json"),
    ("maintenance.tables", "[not json"),
    ("restore.version", "latest"),
    ("restore.version", "-1"),
    ("restore.version", "2.5"),
    ("restore.timestamp", "yesterday"),
    ("restore.enforce_retention_duration", "maybe"),
    ("restore.enforce_retention_duration", "None"),
    ("sensor.after_version", "soon"),
    ("sensor.after_timestamp", "yesterday"),
    # Beyond Delta's signed 64-bit long.
    ("commit.app_version", str(2**63)),
    ("checkpoint.version", str(2**63)),
    ("restore.version", str(2**63)),
    ("sensor.after_version", str(2**63)),
    ("sensor.after_timestamp", str(2**63)),
]


@pytest.mark.parametrize(("key", "value"), CASES, ids=[f"{k}={v!r}" for k, v in CASES])
def test_a_bad_rendered_value_is_refused_and_the_table_is_unchanged(
    tmp_path: Path, key: str, value: str, task_context: Callable[..., dict[str, Any]]
) -> None:
    root = busy_table(tmp_path / "t")
    factory, argument = OPERATORS[key]
    op = factory(root)
    context = task_context(op, params={"value": value})
    op.render_template_fields(context)
    before = state(root)
    runner = op.poke if isinstance(op, DeltaTableVersionSensor) else op.execute
    with pytest.raises(ValueError, match=argument) as caught:
        runner(context)
    message = str(caught.value)
    assert repr(value) in message or repr(value.strip()) in message
    assert state(root) == before


@pytest.mark.parametrize("value", ["false", "False", "no", "0", "off"])
def test_every_unambiguous_false_is_a_real_run(
    tmp_path: Path, value: str, task_context: Callable[..., dict[str, Any]]
) -> None:
    """The other side of the rule: a real false deletes (so the refusals above are what kept the files)."""
    root = busy_table(tmp_path / "t")
    op = DeltaVacuumOperator(task_id="o", table_uri=root, dry_run=TEMPLATE)
    op.render_template_fields(task_context(op, params={"value": value}))
    # The 11 replaced files and the uncommitted landing file.
    assert op.execute({})["num_files"] == 12


def test_a_good_rendered_restore_commits(tmp_path: Path, task_context: Callable[..., dict[str, Any]]) -> None:
    """The restore entries above: with a good value the restore commits, so they refuse on the value."""
    root = busy_table(tmp_path / "t")
    op = DeltaRestoreOperator(task_id="o", table_uri=root, version=TEMPLATE, enforce_retention_duration=False)
    op.render_template_fields(task_context(op, params={"value": "3"}))
    assert op.execute(task_context(op))["committed"] is True
