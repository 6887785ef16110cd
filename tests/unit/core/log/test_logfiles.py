from __future__ import annotations

import pytest

from airflow_delta_provider.core.log.logfiles import (
    LogFileKind,
    classic_checkpoint_name,
    commit_name,
    multipart_checkpoint_name,
    parse_last_checkpoint,
    parse_log_file,
)
from airflow_delta_provider.core.storage import FileInfo


def _parse(name: str):
    return parse_log_file(FileInfo(f"/t/_delta_log/{name}", 1, 0))


@pytest.mark.parametrize(
    ("name", "kind", "version"),
    [
        (commit_name(3), LogFileKind.COMMIT, 3),
        ("00000000000000000003.crc", LogFileKind.CHECKSUM, 3),
        (classic_checkpoint_name(10), LogFileKind.CLASSIC_CHECKPOINT, 10),
        (multipart_checkpoint_name(10, 2, 3), LogFileKind.MULTIPART_CHECKPOINT, 10),
        (
            "00000000000000000010.checkpoint.80a083e8-7026-4e79-81be-64bd76c43a11.json",
            LogFileKind.UUID_CHECKPOINT,
            10,
        ),
        ("00000000000000000004.00000000000000000009.compacted.json", LogFileKind.COMPACTED, 4),
    ],
)
def test_recognised_names(name, kind, version):
    parsed = _parse(name)
    assert parsed is not None and parsed.kind is kind and parsed.version == version


def test_multipart_fields():
    parsed = _parse(multipart_checkpoint_name(10, 2, 3))
    assert (parsed.part, parsed.num_parts, parsed.is_checkpoint) == (2, 3, True)


@pytest.mark.parametrize(
    "name",
    [
        "_last_checkpoint",
        ".00000000000000000001.json.crc",
        "00000000000000000001.json.tmp",
        "0000000000000000001.json",
        "00000000000000000010.checkpoint.0000000004.0000000003.parquet",
        "_staged_commits",
        "README",
    ],
)
def test_stray_names_are_ignored(name):
    assert _parse(name) is None


def test_last_checkpoint_parsed():
    hint = parse_last_checkpoint(b'{"version":10,"size":13,"parts":2,"sizeInBytes":99}', path="x")
    assert (hint.version, hint.size, hint.parts, hint.size_in_bytes) == (10, 13, 2, 99)


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"{",
        b"[]",
        b'{"size":1}',
        b'{"version":-1}',
        b'{"version":"7"}',
        b'{"version":9223372036854775808}',
    ],
)
def test_bad_last_checkpoint_is_ignored_with_a_warning(content, caplog):
    assert parse_last_checkpoint(content, path="/t/_delta_log/_last_checkpoint") is None
    assert "/t/_delta_log/_last_checkpoint" in caplog.text


@pytest.mark.parametrize(
    ("name", "temp"),
    [
        (".00000000000000000003.json.0123456789abcdef0123456789abcdef.tmp", True),
        ("._last_checkpoint.0123456789abcdef0123456789abcdef.tmp", True),
        (".00000000000000000003.json.01234567-89ab-cdef-0123-456789abcdef.tmp", True),
        (".00000000000000000003.json.crc", False),
        (".00000000000000000003.json.tmp", False),
        ("00000000000000000003.json.0123456789abcdef0123456789abcdef.tmp", False),
        ("..x.0123456789abcdef0123456789abcdef.tmp", False),
    ],
)
def test_temp_file_names(name, temp):
    from airflow_delta_provider.core.log.logfiles import is_temp_file

    assert is_temp_file(name) is temp
