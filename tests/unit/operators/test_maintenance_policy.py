"""The maintenance policy's report shaping and its plan in words. The policy's runs over real
tables are in ``test_maintenance.py``, through ``DeltaMaintenanceOperator``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import PurePosixPath
from typing import Any

from airflow_delta_provider.core.protocol.table_config import parse_data_retention
from airflow_delta_provider.operators.maintenance_policy import (
    MAX_XCOM_FILES,
    MaintenancePolicy,
    cap_files,
    jsonable,
)


def policy(**changes: Any) -> MaintenancePolicy:
    settings: dict[str, Any] = {
        "dry_run": False,
        "log_retention": None,
        "vacuum_retention": None,
        "vacuum_interval": timedelta(days=7),
        "vacuum_mode": "full",
        **changes,
    }
    return MaintenancePolicy(**settings)


def test_xcom_path_lists_are_capped_but_counts_stay_complete() -> None:
    paths = [f"s3://b/t/part-{i}.parquet" for i in range(MAX_XCOM_FILES + 5)]
    capped = cap_files({"files": list(paths), "num_files": len(paths), "directories": ["s3://b/t/x"]})
    assert capped["files"] == paths[:MAX_XCOM_FILES]
    assert capped["files_truncated"] is True
    assert capped["num_files"] == MAX_XCOM_FILES + 5
    assert capped["directories"] == ["s3://b/t/x"]
    assert "directories_truncated" not in capped


def test_the_plan_in_words_names_every_step_and_its_setting() -> None:
    assert policy(run_optimize=True, optimize_min_files=50).describe() == (
        "data retention by each table's airflow.dataRetention, PURGE off, OPTIMIZE from 50 small files, "
        "checkpoint when due, log cleanup when due, VACUUM FULL at most every 7 days"
    )
    assert policy(vacuum_interval=None, vacuum_mode="lite").describe().endswith("VACUUM LITE on every run")
    assert policy(
        run_data_retention=False, run_checkpoint=False, run_cleanup=False, run_vacuum=False
    ).describe() == (
        "data retention off, PURGE off, OPTIMIZE off, checkpoint off, log cleanup off, VACUUM off"
    )
    keep = parse_data_retention({"column": "ds", "keep": "interval 90 days"})
    assert (
        policy(data_retention=keep, run_purge=True)
        .describe()
        .startswith(
            'data retention {"column": "ds", "keep": "interval 90 days", "keep_seconds": 7776000.0, '
            '"max_deleted_fraction": 0.5}, PURGE when due, '
        )
    )


class Colour(Enum):
    RED = "red"


@dataclass
class Result:
    when: datetime
    retention: timedelta
    colour: Colour
    paths: frozenset[str]


def test_core_results_become_json_native_values() -> None:
    result = Result(datetime(2026, 11, 27, 12, tzinfo=UTC), timedelta(hours=1), Colour.RED, frozenset({"a"}))
    assert jsonable({"result": result, 3: None, "path": PurePosixPath("/t/x")}) == {
        "result": {
            "when": "2026-11-27T12:00:00+00:00",
            "retention": 3600.0,
            "colour": "red",
            "paths": ["a"],
        },
        "3": None,
        "path": "/t/x",
    }
