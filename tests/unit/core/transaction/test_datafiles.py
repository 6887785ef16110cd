"""Which files a commit may reference, and their partition values."""

from __future__ import annotations

import pytest

from airflow_delta_provider.core.errors import InvalidPathError, SchemaError
from airflow_delta_provider.core.storage import open_store
from airflow_delta_provider.core.transaction.datafiles import (
    DataFile,
    collect_files,
    is_hidden,
    partition_values_of,
    relative_path,
)


@pytest.fixture
def storage(tmp_path):
    return open_store(str(tmp_path / "table"))


@pytest.mark.parametrize(
    "path",
    [
        "../outside.parquet",
        "a/../../outside.parquet",
        "/etc/passwd",
        "s3://bucket/table/x.parquet",
        "",
        "a//b.parquet",
    ],
)
def test_paths_outside_the_root_or_malformed_are_refused(storage, path):
    with pytest.raises(InvalidPathError):
        relative_path(storage, path)


def test_a_sibling_directory_with_the_root_as_prefix_is_outside(storage, tmp_path):
    with pytest.raises(InvalidPathError, match="outside the table root"):
        relative_path(storage, str(tmp_path / "table2" / "x.parquet"))


@pytest.mark.parametrize(
    "path",
    [
        "_delta_log/00000000000000000000.json",
        "_temporary/0/x.parquet",
        ".hidden/x.parquet",
        "a/.x.parquet",
        "a/_SUCCESS",
    ],
)
def test_hidden_locations_are_refused(storage, path):
    with pytest.raises(InvalidPathError, match="hidden"):
        relative_path(storage, path)


def test_absolute_paths_and_uris_under_the_root_become_relative(storage):
    assert relative_path(storage, storage.root + "/ds=1/x.parquet") == "ds=1/x.parquet"
    assert relative_path(storage, "file://" + storage.root + "/x.parquet") == "x.parquet"


def test_partition_directories_may_start_with_an_underscore():
    assert not is_hidden("_p=1", ["_p"])
    assert is_hidden("_p=1", ["q"])
    assert is_hidden("_SUCCESS")


def test_collect_files_by_prefix_skips_hidden_files(storage):
    base = storage.root + "/out"
    for name in (
        "ds=1/part-0.parquet",
        "ds=1/.part-0.parquet.crc",
        "_SUCCESS",
        "_temporary/x.parquet",
        "ds=2/part-1.parquet",
    ):
        path = f"{base}/{name}"
        import os

        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"x")
    found = collect_files(storage, prefix="out", partition_columns=["ds"])
    assert [f.relative_path for f in found] == ["out/ds=1/part-0.parquet", "out/ds=2/part-1.parquet"]
    assert all(f.size == 1 for f in found)


def test_collect_files_refuses_missing_duplicate_and_empty(storage):
    import os

    os.makedirs(storage.root + "/empty")
    with pytest.raises(InvalidPathError, match="does not exist"):
        collect_files(storage, files=["nope.parquet"])
    with open(storage.root + "/a.parquet", "wb") as f:
        f.write(b"x")
    with pytest.raises(InvalidPathError, match="listed twice"):
        collect_files(storage, files=["a.parquet", storage.root + "/a.parquet"])
    assert collect_files(storage, prefix="empty") == []  # an empty job output: the caller decides
    with pytest.raises(InvalidPathError, match="does not exist"):
        collect_files(storage, prefix="missing")
    with pytest.raises(InvalidPathError, match="is a file"):
        collect_files(storage, prefix="a.parquet")
    with pytest.raises(InvalidPathError, match="table root"):
        collect_files(storage, prefix="/")
    with pytest.raises(ValueError, match="exactly one"):
        collect_files(storage)
    with pytest.raises(TypeError, match="single string"):
        collect_files(storage, files="a.parquet")  # type: ignore[arg-type]


def _file(relative: str) -> DataFile:
    return DataFile("/x/" + relative, relative, 1, 0)


def test_partition_values_from_hive_paths_are_unescaped():
    values = partition_values_of(_file("out/ds=2024-01-01/city=a%3Ab%2Fc %25/p.parquet"), ["ds", "city"])
    assert values == {"ds": "2024-01-01", "city": "a:b/c %"}
    assert partition_values_of(_file("ds=__HIVE_DEFAULT_PARTITION__/p.parquet"), ["ds"]) == {"ds": None}


def test_partition_values_are_checked_against_the_table():
    with pytest.raises(SchemaError, match=r"names partition column\(s\) \['region'\]"):
        partition_values_of(_file("region=eu/p.parquet"), ["ds"])
    with pytest.raises(
        SchemaError, match=r"\['region'\].* Pass values only for the table's partition columns"
    ):
        partition_values_of(_file("p.parquet"), ["ds"], {"ds": "1", "region": "eu"})
    with pytest.raises(SchemaError, match=r"No value for partition column\(s\) \['ds'\]"):
        partition_values_of(_file("p.parquet"), ["ds"])
    assert partition_values_of(_file("p.parquet"), ["ds"], {"DS": "1"}) == {"ds": "1"}


def test_hive_files_committed_into_a_new_table_without_partition_by_say_how_to_fix_it(tmp_path):
    """The error names the columns the paths carry as the partition_by to pass; nothing is written."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_delta_provider.core import DeltaTable

    out = tmp_path / "table" / "out" / "ds=2024-01-01" / "region=eu"
    out.mkdir(parents=True)
    pq.write_table(pa.table({"id": [1, 2]}), out / "part-0.parquet")
    table = DeltaTable(str(tmp_path / "table"))
    with pytest.raises(SchemaError, match=r"partitioned by nothing\. .*pass partition_by=\['ds', 'region'\]"):
        table.commit_files(prefix="out")
    assert not (tmp_path / "table" / "_delta_log").exists()
    table.commit_files(prefix="out", partition_by=["ds", "region"])  # the fix the error gives
    assert table.snapshot().partition_columns == ["ds", "region"]


def test_add_path_is_uri_encoded():
    assert _file("ds=a b%3A/p q.parquet").add_path == "ds=a%20b%253A/p%20q.parquet"
