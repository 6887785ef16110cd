"""The maintenance policy: typed decisions for checkpoint, cleanup and VACUUM."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.protocol.table_config import TableConfig
from airflow_delta_provider.core.table.maintenance_due import checkpoint_due, cleanup_due, vacuum_due


def test_a_checkpoint_is_due_after_the_interval(log_writer: Any) -> None:
    log_writer.basic(12)
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    decision = checkpoint_due(snapshot)
    assert decision.due and decision.commits_since == 11 and decision.last_checkpoint_version is None
    assert decision.interval.value == 10 and decision.interval.source == "default"
    assert "11 commit(s) since version 0" in decision.reason
    assert json.loads(json.dumps(decision.to_dict()))["interval"]["source"] == "default"


def test_the_provider_interval_applies_unless_the_table_sets_one(log_writer: Any) -> None:
    log_writer.basic(12)
    snapshot = DeltaTable(str(log_writer.root)).snapshot()
    decision = checkpoint_due(snapshot, TableConfig(snapshot.properties, {"delta.checkpointInterval": "50"}))
    assert not decision.due and decision.interval.source == "provider config"
    assert "fewer than the checkpoint interval 50" in decision.reason


def test_a_checkpointed_version_is_not_due(log_writer: Any) -> None:
    log_writer.basic(12)
    table = DeltaTable(str(log_writer.root))
    table.checkpoint()
    decision = checkpoint_due(table.snapshot())
    assert not decision.due and decision.reason == "version 11 already has a checkpoint"


def test_cleanup_follows_the_table_switch() -> None:
    assert cleanup_due(TableConfig()).due
    decision = cleanup_due(TableConfig({"delta.enableExpiredLogCleanup": "false"}))
    assert not decision.due and decision.enabled.source == "table property"


def test_vacuum_is_due_without_a_recent_completed_vacuum(log_writer: Any) -> None:
    log_writer.basic(2)
    table = DeltaTable(str(log_writer.root))
    assert vacuum_due(table, None).due
    decision = vacuum_due(table, timedelta(days=7))
    assert decision.due and decision.last is None


def test_a_recent_vacuum_end_commit_makes_vacuum_not_due(log_writer: Any) -> None:
    log_writer.basic(1)
    log_writer.commit(1, log_writer.commit_info("VACUUM END", operationParameters={"status": "COMPLETED"}))
    table = DeltaTable(str(log_writer.root))
    now = datetime.now(UTC)
    decision = vacuum_due(table, timedelta(days=7), now)
    assert not decision.due and decision.last is not None and decision.last.version == 1
    assert decision.next_due is not None and decision.next_due > now


def test_a_failed_vacuum_does_not_count(log_writer: Any) -> None:
    log_writer.basic(1)
    log_writer.commit(1, log_writer.commit_info("VACUUM END", operationParameters={"status": "FAILED"}))
    assert vacuum_due(DeltaTable(str(log_writer.root)), timedelta(days=7)).due


@pytest.mark.parametrize(
    ("parameters", "due"),
    [
        (json.dumps({"status": '"FAILED"'}), True),  # JSON text of the object (other engines)
        (json.dumps({"status": '"COMPLETED"'}), False),
        ("FAILED", False),  # no object: no status, as a VACUUM END without one
        (["status", "FAILED"], False),
    ],
    ids=repr,
)
def test_a_vacuum_end_of_another_shape_is_read_by_shape(log_writer: Any, parameters: Any, due: bool) -> None:
    """operationParameters is free-form: read as the core reads commitInfo objects (the JSON text of
    one included), never an AttributeError."""
    log_writer.basic(1)
    log_writer.commit(1, log_writer.commit_info("VACUUM END", operationParameters=parameters))
    assert vacuum_due(DeltaTable(str(log_writer.root)), timedelta(days=7)).due is due


def test_last_vacuum_info_counts_when_no_commit_records_it(log_writer: Any) -> None:
    log_writer.basic(1)
    info = log_writer.raw("_last_vacuum_info", b'{"latestCommitVersionOutsideOfRetentionWindow":0}\n')
    table = DeltaTable(str(log_writer.root))
    decision = vacuum_due(table, timedelta(days=1))
    assert not decision.due and decision.last is not None and decision.last.version is None
    old = (datetime.now(UTC) - timedelta(days=3)).timestamp()
    os.utime(info, (old, old))
    assert vacuum_due(table, timedelta(days=1)).due
