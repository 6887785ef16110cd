from __future__ import annotations

import pytest

from airflow_delta_provider.core.errors import InvalidPathError
from airflow_delta_provider.core.storage.paths import TablePath
from airflow_delta_provider.core.utils.redaction import redact

SECRET = "wJalrXUtnFEMI-paths"


@pytest.mark.parametrize(
    ("location", "scheme", "root", "uri"),
    [
        ("/data/t/", "file", "/data/t", "file:///data/t"),
        ("file:///data/t", "file", "/data/t", "file:///data/t"),
        ("s3a://bucket/a/b/", "s3", "bucket/a/b", "s3://bucket/a/b"),
        ("memory://x/y", "memory", "/x/y", "memory:///x/y"),
        (
            "abfss://container@acct.dfs.core.windows.net/t",
            "abfss",
            None,
            "abfss://container@acct.dfs.core.windows.net/t",
        ),
    ],
)
def test_locations_parse_once_into_scheme_root_and_uri(location, scheme, root, uri):
    path = TablePath.parse(location)
    assert path.scheme == scheme
    assert path.uri == uri
    if root is not None:
        assert path.root == root


@pytest.mark.parametrize(
    "location",
    [
        f"s3://AKIAEXAMPLE:{SECRET}@bucket/t",
        f"s3://{SECRET}@bucket/t",
        f"s3://AKIAEXAMPLE:{SECRET}/with/slash@bucket/t",
        f"file://user:{SECRET}@localhost/t",
        f"abfss://user:{SECRET}@acct.dfs.core.windows.net/t",
        f"gs://user:{SECRET}@bucket/t",
    ],
)
def test_credentials_in_a_location_are_refused_without_showing_them(location):
    with pytest.raises(InvalidPathError, match="credentials") as raised:
        TablePath.parse(location)
    assert SECRET not in str(raised.value)
    # Registered as a secret: any later text holding it is masked.
    assert SECRET not in redact(f"boto says: bucket {SECRET} is invalid")


@pytest.mark.parametrize(
    ("path", "inside"),
    [
        ("/t/a.parquet", True),
        ("/t/p=1/a.parquet", True),
        ("/t", False),
        ("/t/", False),
        ("/tother/a.parquet", False),
        ("/t/../x", False),
        ("/t/./a", False),
        ("/t/a/../../x", False),
        ("/t//a", False),
    ],
)
def test_contains_is_strict_and_lexical(path, inside):
    assert TablePath.parse("/t").contains(path) is inside


RELATIVES = [
    "a.parquet",
    "p=1/a.parquet",
    "",
    "/a",
    "a/",
    "./a",
    "a/.",
    "a/..",
    "../x",
    "a/../../x",
    "a//b",
    ".a",
    "..a",
    "a./b",
    "a../b",
    "a/.b/c",
    "_delta_log/0.json",
    "_delta_logx/0.json",
    "x/_delta_log/0.json",
    "a\nb",
    "ü é/%25+&.parquet",
    ".",
    "..",
]


@pytest.mark.parametrize("root", ["/t", "/", "s3://b/t", "s3://b", "memory://m/t", "gs://b/t"])
def test_contains_all_agrees_with_contains(root):
    """The joined-string check decides exactly as ``contains`` path by path, whenever it says
    "inside" (it may say "not known" only for names with a line break)."""
    path = TablePath.parse(root)
    excluded = path.log_dir + "/"
    for relative in RELATIVES:
        full = path.prefix + relative
        expected = path.contains(full) and not full.startswith(excluded)
        assert path.contains_all([full], excluded=excluded) is (expected and "\n" not in relative), relative
    good = [path.prefix + r for r in RELATIVES if path.contains(path.prefix + r) and "\n" not in r]
    good = [p for p in good if not p.startswith(excluded)]
    assert path.contains_all(good, excluded=excluded)
    for bad in RELATIVES:
        if not path.contains(path.prefix + bad) or (path.prefix + bad).startswith(excluded):
            assert not path.contains_all([*good, path.prefix + bad], excluded=excluded), bad
    outside = "/elsewhere/a.parquet" if path.scheme == "file" else "other/a.parquet"
    assert path.contains_all([*good, outside]) is path.contains(outside)
    assert path.to_uris(good) == [path.to_uri(p) for p in good]


def test_relative_and_back():
    path = TablePath.parse("s3://b/t")
    assert path.relative("b/t/p=1/x.parquet") == "p=1/x.parquet"
    assert path.relative("b/tx/y") is None
    assert path.to_uri(path.join("p=1", "x.parquet")) == "s3://b/t/p=1/x.parquet"


@pytest.mark.parametrize(
    ("logged", "canonical"),
    [
        ("p=1/x.parquet", "p=1/x.parquet"),
        ("p%3D1/x%20y.parquet", "p=1/x y.parquet"),
        ("s3://b/t/p=1/x.parquet", "p=1/x.parquet"),
        ("s3a://b/t/x%25.parquet", "x%.parquet"),
        ("s3://other/x.parquet", "other/x.parquet"),
    ],
)
def test_canonical_form_of_log_paths(logged, canonical):
    assert TablePath.parse("s3://b/t").canonical(logged) == canonical


def test_relative_forms_keep_the_undecoded_spelling_of_unencoded_writers():
    path = TablePath.parse("/t")
    assert path.relative_forms("a%20b/x.parquet") == ["a b/x.parquet", "a%20b/x.parquet"]
    assert path.relative_forms("file:///elsewhere/x.parquet") == []


# --- log paths on another store -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("location", "logged"),
    [
        ("/t", "s3://bucket/x.parquet"),  # read as the local path bucket/x.parquet before
        ("/t", "memory://x.parquet"),
        ("/t", "http://169.254.169.254/latest/meta-data"),
        ("/t", "gs://bucket/x.parquet"),
        ("s3://b/t", "file:///etc/x.parquet"),
        ("s3://b/t", "file:b/t/x.parquet"),  # would have been the S3 file b/t/x.parquet
        ("s3://b/t", "gs://b/t/x.parquet"),
        ("memory://t", "s3://b/t/x.parquet"),
        ("gs://b/t", "s3://b/t/x.parquet"),
    ],
)
def test_a_log_path_on_another_store_is_refused_not_read_from_this_one(location, logged):
    path = TablePath.parse(location)
    with pytest.raises(InvalidPathError, match=r"on another store .* than the table's"):
        path.decode(logged)
    assert path.relative_forms(logged) == []  # not under the root: VACUUM keeps its own files


@pytest.mark.parametrize(
    ("location", "logged", "decoded"),
    [
        ("/t", "file:///other/x.parquet", "/other/x.parquet"),
        ("/t", "/abs/x.parquet", "/abs/x.parquet"),
        ("s3://b/t", "s3a://other/x.parquet", "other/x.parquet"),
        ("s3a://b/t", "s3n://b/t/x.parquet", "b/t/x.parquet"),
        ("gs://b/t", "gcs://b/t/x.parquet", "gcs://b/t/x.parquet"),
    ],
)
def test_absolute_paths_on_the_tables_store_are_kept(location, logged, decoded):
    assert TablePath.parse(location).decode(logged) == decoded


@pytest.mark.parametrize(
    ("location", "root", "uri"),
    [
        ("s3://bucket/a%20b", "bucket/a b", "s3://bucket/a b"),
        ("s3a://bucket/x/100%25/", "bucket/x/100%", "s3://bucket/x/100%25"),
        ("s3n://bucket/%E2%82%AC", "bucket/€", "s3://bucket/€"),
        ("file:///data/a%20b", "/data/a b", "file:///data/a b"),
        ("file:///data/100%25", "/data/100%", "file:///data/100%25"),
        ("file:///data/x%2520y", "/data/x%20y", "file:///data/x%2520y"),
        ("memory:///t/a%20b", "/t/a b", "memory:///t/a b"),
        ("/data/x%20y", "/data/x%20y", "file:///data/x%2520y"),  # a plain path is literal
        ("gs://bucket/a%20b", "bucket/a b", "gs://bucket/a b"),
    ],
)
def test_uri_paths_are_percent_decoded_for_every_scheme(location, root, uri):
    """As delta-rs (and Hadoop) read them; the URI escapes a literal '%' again, so it names the
    same root (tests/interop/test_uri_interop.py checks both against delta-rs)."""
    path = TablePath.parse(location)
    assert (path.root, path.uri) == (root, uri)
    again = TablePath.parse(path.uri)
    assert (again.root, again.uri) == (root, uri)


@pytest.mark.parametrize("location", ["/t", "s3://b/t", "memory:///t", "gs://b/t"])
@pytest.mark.parametrize(
    "relative", ["a.parquet", "p=a b/x.parquet", "p=100%/x.parquet", "p=a%20b/x%25.parquet"]
)
def test_a_file_uri_names_the_file_again(location, relative):
    path = TablePath.parse(location)
    full = path.join(relative)
    assert TablePath.parse(path.to_uri(full)).root == full
    assert path.to_uris([full]) == [path.to_uri(full)]
