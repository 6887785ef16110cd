"""Random histories, checkpoints and clocks: cleanup never makes a retained version unreadable."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.log.segment import read_last_checkpoint

pytestmark = pytest.mark.slow
NOW = datetime(2026, 6, 15, tzinfo=UTC)

steps = st.lists(
    st.tuples(st.sampled_from(["append", "overwrite", "checkpoint"]), st.integers(min_value=0, max_value=60)),
    min_size=2,
    max_size=14,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(history=steps, clocks=st.lists(st.integers(min_value=0, max_value=90), min_size=1, max_size=3))
def test_cleanup_keeps_every_version_from_the_earliest_retained_checkpoint(history, clocks):
    root = tempfile.mkdtemp()
    try:
        table = DeltaTable.create(os.path.join(root, "t"), pa.schema([("id", pa.int64())]))
        ages = {0: 100}
        for i, (action, days_ago) in enumerate(history):
            if action == "checkpoint":
                table.checkpoint()
                continue
            relative = f"w-{uuid.uuid4().hex[:8]}/p.parquet"
            os.makedirs(os.path.dirname(os.path.join(table.storage.root, relative)))
            pq.write_table(pa.table({"id": [i]}), os.path.join(table.storage.root, relative))
            version = table.commit_files([relative], mode=action, auto_checkpoint=False).version
            ages[version] = days_ago
        log_dir = table.storage.log_dir
        for name in os.listdir(log_dir):
            if name[:20].isdigit():
                # Random ages, not monotonic in the version; a second apart so the checkpoints of
                # a version written after it are not "adjusted" away (see test_cleanup.py).
                version = int(name[:20])
                stamp = (NOW - timedelta(days=ages.get(version, 0))).timestamp() + version
                os.utime(os.path.join(log_dir, name), (stamp, stamp))
        latest = table.version()
        expected = {
            v: sorted(table.snapshot(v).to_pyarrow_table()["id"].to_pylist()) for v in range(latest + 1)
        }
        last_checkpoint = read_last_checkpoint(table.storage)
        hint = last_checkpoint.version if last_checkpoint else None
        for offset in clocks:
            result = table.cleanup_logs(now=NOW + timedelta(days=offset))
            earliest = result.earliest_retained_version
            assert earliest is not None and table.version() == latest
            # Never beyond the checkpoint _last_checkpoint names: it and the log after it stay.
            assert hint is None or earliest <= hint
            for version in range(earliest, latest + 1):
                assert (
                    sorted(table.snapshot(version).to_pyarrow_table()["id"].to_pylist()) == expected[version]
                )
    finally:
        shutil.rmtree(root)
