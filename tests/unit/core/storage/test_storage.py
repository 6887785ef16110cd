from __future__ import annotations

import multiprocessing
import os
import uuid

import pytest

from airflow_delta_provider.core.errors import CommitFileExistsError, InvalidPathError, StorageError
from airflow_delta_provider.core.storage import open_store
from airflow_delta_provider.core.storage.paths import TablePath


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("/data/t/", ("file", "/data/t")),
        ("file:///data/t", ("file", "/data/t")),
        ("file:/data/my%20t", ("file", "/data/my t")),
        ("s3://bucket/a/b/", ("s3", "bucket/a/b")),
        ("s3a://bucket", ("s3", "bucket")),
        ("memory://x/y", ("memory", "/x/y")),
    ],
)
def test_normalize_table_uri(uri, expected):
    path = TablePath.parse(uri)
    assert (path.scheme, path.root) == expected


@pytest.mark.parametrize("uri", ["", "   ", "s3://", "file://remote-host/x"])
def test_normalize_table_uri_rejects_bad_locations(uri):
    with pytest.raises(InvalidPathError, match=r"table location|bucket|remote host"):
        TablePath.parse(uri)


def test_list_from_is_sorted_and_starts_at_the_key(tmp_path):
    storage = open_store(str(tmp_path))
    os.makedirs(storage.log_dir)
    for name in ["00000000000000000002.json", "00000000000000000000.json", "00000000000000000001.json"]:
        (tmp_path / "_delta_log" / name).write_text("{}")
    (tmp_path / "_delta_log" / "_sidecars").mkdir()
    names = [f.name for f in storage.list_log("00000000000000000001")]
    assert names == ["00000000000000000001.json", "00000000000000000002.json"]
    assert open_store(str(tmp_path / "missing")).list_log() == []


def test_put_if_absent_local_refuses_existing(tmp_path):
    storage = open_store(str(tmp_path))
    path = storage.log_path("00000000000000000000.json")
    storage.put_if_absent(path, b"first")
    with pytest.raises(CommitFileExistsError):
        storage.put_if_absent(path, b"second")
    assert storage.read_bytes(path) == b"first"
    # No temp file is left behind, whoever wins.
    assert os.listdir(storage.log_dir) == ["00000000000000000000.json"]


def _race(root: str, path: str, token: bytes, results) -> None:
    try:
        open_store(root).put_if_absent(path, token * 100_000)
        results.put(token)
    except CommitFileExistsError:
        results.put(b"lost")


def test_put_if_absent_local_has_exactly_one_winner_across_processes(tmp_path):
    storage = open_store(str(tmp_path))
    path = storage.log_path("00000000000000000007.json")
    results = multiprocessing.Queue()
    procs = [
        multiprocessing.Process(target=_race, args=(str(tmp_path), path, bytes([65 + i]), results))
        for i in range(6)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    outcomes = [results.get() for _ in procs]
    winners = [o for o in outcomes if o != b"lost"]
    assert len(winners) == 1
    assert storage.read_bytes(path) == winners[0] * 100_000


def test_put_if_absent_memory():
    storage = open_store(f"memory://t-{uuid.uuid4().hex}")
    path = storage.log_path("00000000000000000000.json")
    storage.put_if_absent(path, b"a")
    with pytest.raises(CommitFileExistsError):
        storage.put_if_absent(path, b"b")
    assert storage.read_bytes(path) == b"a"
    assert [f.name for f in storage.list_log()] == ["00000000000000000000.json"]


def test_put_if_absent_refused_on_schemes_without_a_safe_primitive(tmp_path):
    import fsspec

    storage = open_store("dir://t", filesystem=fsspec.filesystem("dir", path=str(tmp_path)))
    with pytest.raises(StorageError, match="no atomic put-if-absent"):
        storage.put_if_absent("t/_delta_log/00000000000000000000.json", b"x")


def test_put_replaces_whole_file(tmp_path):
    storage = open_store(str(tmp_path))
    path = storage.log_path("_last_checkpoint")
    storage.put(path, b"one")
    storage.put(path, b"two")
    assert storage.read_bytes(path) == b"two"
    assert os.listdir(storage.log_dir) == ["_last_checkpoint"]


def test_delete_ignores_missing_files(tmp_path):
    storage = open_store(str(tmp_path))
    (tmp_path / "a").write_text("x")
    assert storage.delete_many([str(tmp_path / "a"), str(tmp_path / "missing")]) == 1
    assert not (tmp_path / "a").exists()


def test_info_and_exists(tmp_path):
    storage = open_store(str(tmp_path))
    (tmp_path / "f").write_bytes(b"12345")
    info = storage.info(str(tmp_path / "f"))
    assert info is not None and info.size == 5 and info.modification_time > 0
    assert storage.info(str(tmp_path / "nope")) is None
    assert storage.exists(str(tmp_path / "f")) and not storage.exists(str(tmp_path / "nope"))


@pytest.mark.parametrize(
    ("uri", "logged", "expected"),
    [
        ("/t", "a=1/part-0.parquet", "/t/a=1/part-0.parquet"),
        ("/t", "a%3D%2F/part%20x.parquet", "/t/a=//part x.parquet"),
        ("/t", "file:///other/x%20y.parquet", "/other/x y.parquet"),
        ("/t", "/abs/x.parquet", "/abs/x.parquet"),
        ("s3://b/t", "p.parquet", "b/t/p.parquet"),
        ("s3://b/t", "s3a://other/k%25.parquet", "other/k%.parquet"),
    ],
)
def test_resolve_path(uri, logged, expected):
    assert TablePath.parse(uri).decode(logged) == expected


@pytest.mark.skipif(not hasattr(os, "O_NOATIME"), reason="Linux only")
def test_local_ranged_reads_leave_the_access_time_alone(tmp_path):
    """Footer reads open files with O_NOATIME: reading 1,000 footers dirties no inode (which made
    the commit's fsync flush them all); the bytes are the same."""
    path = tmp_path / "t" / "f.bin"
    path.parent.mkdir()
    path.write_bytes(b"0123456789")
    old = path.stat().st_mtime_ns - 10**12  # older than the modification: relatime would update it
    os.utime(path, ns=(old, path.stat().st_mtime_ns))
    store = open_store(str(tmp_path / "t"))
    assert store.read_ranges([str(path)], [2], [5], max_workers=1) == [b"23456"]
    assert path.stat().st_atime_ns == old


@pytest.mark.skipif(not hasattr(os, "O_NOATIME"), reason="Linux only")
def test_local_ranged_reads_fall_back_when_o_noatime_is_refused(tmp_path, monkeypatch):
    """O_NOATIME is refused on files another user owns: the read happens without it, and so do
    the following reads (no refused open per file); a file nobody may read still raises."""
    path = tmp_path / "t" / "f.bin"
    path.parent.mkdir()
    path.write_bytes(b"0123456789")
    store = open_store(str(tmp_path / "t"))
    real_open, flags_seen = os.open, []

    def foreign_owner(file, flags, *args):
        flags_seen.append(flags)
        if flags & os.O_NOATIME:
            raise PermissionError(1, "Operation not permitted", file)
        return real_open(file, flags, *args)

    monkeypatch.setattr(os, "open", foreign_owner)
    assert store.read_range(str(path), 0, 4) == b"0123"
    assert store.read_range(str(path), 4, 2) == b"45"
    assert [bool(f & os.O_NOATIME) for f in flags_seen] == [True, False, False]
    monkeypatch.setattr(os, "open", lambda *a: (_ for _ in ()).throw(PermissionError(13, "denied")))
    with pytest.raises(PermissionError):
        store.read_range(str(path), 0, 1)


def test_local_walk_lists_files_like_os_walk_without_following_directory_links(tmp_path):
    """Files top-down with their sizes; a link to a file is listed with its target's size, a link
    to a directory is neither followed nor listed, a dangling link is skipped (commit_files
    relies on it: a walked directory under a real prefix is never a link)."""
    root = tmp_path / "t"
    (root / "a" / "b").mkdir(parents=True)
    (root / "top.txt").write_bytes(b"1")
    (root / "a" / "x.txt").write_bytes(b"12")
    (root / "a" / "b" / "y.txt").write_bytes(b"123")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "secret.txt").write_bytes(b"secret")
    os.symlink(elsewhere, root / "a" / "dir-link")
    os.symlink(elsewhere / "secret.txt", root / "a" / "file-link")
    os.symlink(tmp_path / "gone", root / "dangling")
    store = open_store(str(root))
    listed = {info.path[len(str(root)) + 1 :]: info.size for info in store.walk()}
    assert listed == {"top.txt": 1, "a/x.txt": 2, "a/b/y.txt": 3, "a/file-link": 6}
    # The link is told from the listing's entry type (commit_files refuses it without an lstat).
    assert {info.path[len(str(root)) + 1 :] for info in store.walk() if info.is_link} == {"a/file-link"}
    expected = [(os.path.join(d, f)[len(str(root)) + 1 :]) for d, _, files in os.walk(root) for f in files]
    assert [p for p in expected if p != "dangling"] == [
        info.path[len(str(root)) + 1 :] for info in store.walk()
    ]
    assert list(store.walk(str(root / "missing"))) == []


def test_read_joined_is_the_same_text_on_every_store(tmp_path):
    """Many files in one text (a newline between two) and where each starts: the local store
    reads them into place, the others join what they read; both give the same answer."""
    contents = [b'{"add":{}}\n{"txn":{}}', b"", b"x" * 70_000 + b"\n", b"\n\n", b"last"]
    local = open_store(str(tmp_path))
    memory = open_store(f"memory://t-{uuid.uuid4().hex}")
    answers = []
    for storage in (local, memory):
        paths = [storage.log_path(f"{v:020d}.json") for v in range(len(contents))]
        for path, data in zip(paths, contents, strict=True):
            storage.put(path, data)
        text, starts = storage.read_joined(paths)
        assert [bytes(text[starts[i] : starts[i + 1] - 1]) for i in range(len(paths))] == contents
        assert starts[-1] == len(text) + 1
        answers.append((bytes(text), starts))
        assert storage.read_joined([]) == (bytearray(), [0])
    assert answers[0] == answers[1]
    assert answers[0][0] == b"\n".join(contents)


@pytest.mark.parametrize("where", ["local", "memory"])
def test_read_joined_names_the_missing_file(tmp_path, where):
    storage = open_store(str(tmp_path) if where == "local" else f"memory://t-{uuid.uuid4().hex}")
    present = storage.log_path("00000000000000000000.json")
    storage.put(present, b"{}")
    missing = storage.log_path("00000000000000000001.json")
    with pytest.raises(FileNotFoundError) as err:
        storage.read_joined([present, missing])
    assert err.value.filename == missing


def test_read_joined_reads_plainly_a_file_whose_size_is_not_its_length(tmp_path):
    """A file whose stat size is not what a read gives (a file rewritten in between; /proc
    files, which stat as empty, stand in for one) is not spliced by its size: the whole list
    is read plainly and the text is still exact."""
    storage = open_store(str(tmp_path))
    path = storage.log_path("00000000000000000000.json")
    storage.put(path, b'{"commitInfo":{}}')
    with open("/proc/version", "rb") as f:
        expected = f.read()
    assert os.stat("/proc/version").st_size != len(expected)
    text, starts = storage.read_joined([path, "/proc/version"])
    assert bytes(text) == b'{"commitInfo":{}}\n' + expected
    assert starts == [0, 18, 19 + len(expected)]
