"""How a table's files are handed to Spark and recognised back (no Spark needed here; the read
tests check the same on a real session)."""

from __future__ import annotations

import pytest

from airflow_delta_provider.core.storage.paths import TablePath
from airflow_delta_provider.spark.paths import metadata_file_path, same_file_key, spark_file_paths, spark_path


def test_spark_paths_use_hadoop_schemes() -> None:
    assert spark_path("s3://bucket/lake/events") == "s3a://bucket/lake/events"
    assert spark_path("file:///data/events") == "file:///data/events"
    assert spark_path("abfss://c@a.dfs.core.windows.net/t") == "abfss://c@a.dfs.core.windows.net/t"


def test_log_paths_are_decoded_placed_under_the_spark_root_and_glob_escaped() -> None:
    table = TablePath.parse("/data/t")
    paths = spark_file_paths(
        table,
        ["p=a%20b/part%20%2541%5B1%5D.parquet", "file:///elsewhere/x%3Fy.parquet", "plain.parquet"],
        "file:///data/t/",
    )
    assert paths == [
        "file:///data/t/p=a b/part %41\\[1\\].parquet",
        "file:///elsewhere/x\\?y.parquet",
        "file:///data/t/plain.parquet",
    ]


def test_s3_files_outside_the_root_keep_their_bucket() -> None:
    table = TablePath.parse("s3://bucket/t")
    assert spark_file_paths(table, ["s3://other/k/f.parquet", "f.parquet"], "s3a://bucket/t") == [
        "s3a://other/k/f.parquet",
        "s3a://bucket/t/f.parquet",
    ]


@pytest.mark.parametrize(
    ("given", "shown"),
    [
        # Spark's file_path, as observed with Spark 4.x on local files (tests/unit/spark/test_read.py
        # reads files with these names and matches every row).
        ("file:///t/a b/x=1/f 1.parquet", "file:/t/a%20b/x=1/f%201.parquet"),
        ("file:///t/p%41/ü é.parquet", "file:/t/p%2541/ü%20é.parquet"),
        ("file:///t/q/plus+sign#.parquet", "file:/t/q/plus+sign%23.parquet"),
        ("file:///t/br\\[ack\\]et\\{\\}\\*\\?.parquet", "file:/t/br%5Back%5Det%7B%7D*%3F.parquet"),
        ("s3a://bucket/k/a b.parquet", "s3a://bucket/k/a%20b.parquet"),
        ("file:///t//double/slash/", "file:/t/double/slash"),
        ("/t/no scheme.parquet", "file:/t/no%20scheme.parquet"),
    ],
)
def test_metadata_file_path_is_hadoops_uri_of_the_listed_file(given: str, shown: str) -> None:
    assert metadata_file_path(given) == shown


def test_the_spellings_of_one_file_share_a_key() -> None:
    handed = "file:///t/a b/\\[x\\]%41.parquet"
    assert same_file_key(handed, encoded=False) == ("", "/t/a b/[x]%41.parquet")
    for listed in ("file:///t/a%20b/%5Bx%5D%2541.parquet", "file:/t/a%20b/%5Bx%5D%2541.parquet"):
        assert same_file_key(listed, encoded=True) == same_file_key(handed, encoded=False)
    assert same_file_key("s3a://b/k.parquet", encoded=True) != same_file_key(
        "s3a://c/k.parquet", encoded=True
    )


def test_a_literal_percent_of_the_table_uri_is_literal_for_hadoop() -> None:
    table = TablePath.parse("/data/100%/t")
    assert spark_path(table.uri) == "file:///data/100%/t"
    assert spark_file_paths(table, ["a%2541.parquet"], spark_path(table.uri)) == [
        "file:///data/100%/t/a%41.parquet"
    ]
