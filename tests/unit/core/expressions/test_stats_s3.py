"""Footer statistics on S3 (the moto server on loopback): concurrent ranged reads of each tail."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_delta_provider.core import DeltaTable
from airflow_delta_provider.core.errors import InvalidDataFileError
from airflow_delta_provider.core.expressions import stats as stats_module
from airflow_delta_provider.core.expressions.stats import read_footers
from airflow_delta_provider.core.storage import open_store

pytestmark = pytest.mark.s3


def _facts(footers) -> list[tuple[int, str, str]]:
    return [(f.num_records, f.stats, f.schema.to_string(show_schema_metadata=True)) for f in footers]


def test_footers_read_from_s3_concurrently_match_the_local_sequential_read(
    s3_bucket, s3_storage_options, tmp_path, monkeypatch, varied_parquet, varied_stats_columns
):
    storage = open_store(f"s3://{s3_bucket}/t", s3_storage_options)
    names = [f"c{copy}-{name}" for copy in range(2) for name in varied_parquet]
    for name in names:
        data = varied_parquet[name.split("-", 1)[1]]
        storage.fs.pipe_file(storage.join(name), data)
        (tmp_path / name).write_bytes(data)
    local = read_footers(
        open_store(str(tmp_path)),
        [str(tmp_path / n) for n in names],
        stats_columns=varied_stats_columns,
        max_workers=1,
    )
    monkeypatch.setattr(stats_module, "FOOTER_WINDOW", 5)
    paths = [storage.join(n) for n in names]
    # Sizes unknown (a HEAD each) and known (from a listing), as commit_files passes them.
    remote = read_footers(storage, paths, stats_columns=varied_stats_columns, max_workers=8)
    sizes = [storage.info(p).size for p in paths]
    listed = read_footers(storage, paths, stats_columns=varied_stats_columns, sizes=sizes, max_workers=8)
    assert _facts(remote) == _facts(local) == _facts(listed)
    assert '"minValues"' in local[0].stats


def test_a_damaged_file_on_s3_is_named_and_the_table_is_unchanged(s3_bucket, s3_storage_options, monkeypatch):
    monkeypatch.setattr(stats_module, "FOOTER_WINDOW", 4)
    table = DeltaTable.create(
        f"s3://{s3_bucket}/t", pa.schema([("id", pa.int64())]), storage_options=s3_storage_options
    )
    fs = table.storage.fs
    for i in range(10):
        pq.write_table(pa.table({"id": [i]}), table.storage.join(f"out/f{i}.parquet"), filesystem=fs)
    good = fs.cat_file(table.storage.join("out/f7.parquet"))
    fs.pipe_file(table.storage.join("out/f7.parquet"), good[: len(good) - 20])  # cut inside the footer
    log_before = sorted(fs.ls(table.storage.log_dir, refresh=True))
    with pytest.raises(InvalidDataFileError, match=r"out/f7\.parquet is not a readable Parquet file"):
        table.commit_files(prefix="out")
    assert table.version() == 0
    assert sorted(fs.ls(table.storage.log_dir, refresh=True)) == log_before
