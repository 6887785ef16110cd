"""Commit files: ``NNN.json`` read, split into lines and parsed as late as a question allows.

A commit's ``add``/``remove`` lines are kept as raw text until files are needed; its other
lines (commitInfo, protocol, metaData, txn, ...) are parsed when the small state is. Lines
are parsed in one ``json.loads`` per batch of commits where they can be, and every parsed
action is checked (:func:`~.action_checks.action_problem`): a malformed one raises
:class:`CorruptLogError` naming the file and the line. Writers call
:func:`check_replayable` before they commit, so that no commit is built on a log whose
commits do not all parse. The replay of the state these commits build is :mod:`.replay`.
"""

from __future__ import annotations

import bisect
import itertools
import json
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from airflow_delta_provider.core.errors import CorruptLogError
from airflow_delta_provider.core.log.logfiles import commit_name
from airflow_delta_provider.core.protocol.action_checks import action_problem, malformed_action_error

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from airflow_delta_provider.core.log.logfiles import LogFile
    from airflow_delta_provider.core.log.segment import LogSegment
    from airflow_delta_provider.core.storage import LogStore

_FILE_LINE_PREFIXES = (b'{"add"', b'{"remove"')
#: A file action's partition values as the text holds them: a flat object of strings and nulls (a
#: value holding a brace fails the match or the decode, and the caller parses the lines instead).
_PARTITION_VALUES_KEY = b'"partitionValues"'
_PARTITION_VALUES = re.compile(rb'"partitionValues"\s*:\s*(\{[^{}]*\})')
_REMOVE_LINE = b'{"remove"'


@dataclass
class CommitActions:
    """One commit file, split into lines; parsed as late and in as few calls as possible.

    ``add``/``remove`` lines are parsed only when files are needed; the other lines
    (commitInfo, protocol, metaData, txn, ...) when the small state is needed. Every
    parsed action has passed :func:`~.action_checks.action_problem`.

    The split finds the few lines that are not file lines (:func:`split_commits`); the file
    lines stay where they were read, in a text shared by the commits split together (the other
    lines blanked), which is handed to Arrow's JSON reader as it is
    (:func:`segment_file_lines`), or split one by one (:attr:`file_lines`) when a question
    needs single lines.
    """

    version: int
    path: str
    #: (line number, raw line) of the non-file actions
    small_lines: list[tuple[int, bytes]] = field(default_factory=list)
    #: how many ``add``/``remove`` lines it holds
    file_line_count: int = 0
    #: the text of the commits split together (:func:`split_commits`), and where this one is in it
    _text: bytearray = field(default_factory=bytearray)
    _start: int = 0
    _end: int = 0
    _actions: list[dict[str, Any]] | None = None
    #: every file line parsed and checked once (see :func:`check_replayable`)
    _files_checked: bool = False
    _file_lines: list[tuple[int, bytes]] | None = None

    @property
    def actions(self) -> list[dict[str, Any]]:
        """The parsed non-file actions, in file order."""
        if self._actions is None:
            self._actions = _checked(self.small_lines, _parse_lines(self.small_lines, self.path), self.path)
        return self._actions

    @property
    def file_lines(self) -> list[tuple[int, bytes]]:
        """(1-based line number, stripped line) of each ``add``/``remove`` line, in file order."""
        if self._file_lines is None:
            self._file_lines = _split_lines(bytes(self._text[self._start : self._end]))[1]
        return self._file_lines

    @property
    def commit_info(self) -> dict[str, Any] | None:
        for action in self.actions:
            if "commitInfo" in action:
                info: dict[str, Any] | None = action["commitInfo"]
                return info
        return None

    def line_of(self, action_index: int) -> int:
        """The 1-based line number of ``actions[action_index]``."""
        return self.small_lines[action_index][0]

    def mark_files_checked(self) -> None:
        """Record that every ``add``/``remove`` line was parsed and checked (by a reader that
        parsed them in its own way, the columnar replay): :func:`check_replayable` skips them."""
        self._files_checked = True

    def touched_partitions(self, logical: Mapping[str, str] | None = None) -> list[dict[str, str | None]]:
        """The distinct partitions whose data the commit changed, in the order first seen: the
        partition values of its ``cdc`` files, and of its ``add`` and ``remove`` actions with
        ``dataChange=true`` (an OPTIMIZE touches none). Values as the log holds them.

        :param logical: physical name -> logical name of the partition columns (column mapping):
            the values are then keyed by logical name.
        """
        seen: dict[tuple[tuple[str, str | None], ...], None] = {}
        for action in [*self.file_actions(), *(a for a in self.actions if "cdc" in a)]:
            body = action.get("add") or action.get("remove") or action.get("cdc") or {}
            if "cdc" not in action and not body.get("dataChange", True):
                continue
            values = body.get("partitionValues") or {}
            if logical:
                values = {logical.get(k, k): v for k, v in values.items()}
            seen.setdefault(tuple(sorted(values.items())), None)
        return [dict(key) for key in seen]

    def file_partition_values(self) -> list[dict[str, str | None]] | None:
        """The distinct ``partitionValues`` of the commit's ``add`` and ``remove`` lines, found in
        the text without parsing the lines (one scan; each distinct object decoded by ``json``),
        so that a reader of some partitions can pass over a commit that holds none of them.

        None when the text cannot say it exactly: a line without exactly one such object (a
        remove without partition values), an object ``json`` does not read as strings by name,
        or a file action on a line that does not start as one.
        """
        if any("add" in a or "remove" in a for a in self.actions):
            return None
        text = self._text[self._start : self._end]
        found = _PARTITION_VALUES.findall(text)
        if len(found) != self.file_line_count or text.count(_PARTITION_VALUES_KEY) != len(found):
            return None
        if _REMOVE_LINE in text and not all(
            line.count(_PARTITION_VALUES_KEY) == 1 for line in text.split(b"\n") if line.strip()
        ):
            return None  # (an add may not lack them; a remove may, and another line hold two)
        distinct = []
        for raw in set(found):
            try:
                values = json.loads(raw)
            except (ValueError, RecursionError):
                return None
            if not isinstance(values, dict) or not all(isinstance(v, str | None) for v in values.values()):
                return None
            distinct.append(values)
        return distinct

    def file_actions(self) -> list[dict[str, Any]]:
        """The ``add`` and ``remove`` actions, in file order."""
        parsed = _checked(self.file_lines, _parse_lines(self.file_lines, self.path), self.path)
        self._files_checked = True
        return parsed + [a for a in self.actions if "add" in a or "remove" in a]


def read_commit(storage: LogStore, version: int) -> CommitActions | None:
    """The commit file of ``version``, split into lines; None when it does not exist."""
    found = read_commit_bytes(storage, version)
    return None if found is None else parse_commit(version, *found)


def read_commit_bytes(storage: LogStore, version: int) -> tuple[str, bytes] | None:
    """The URI and the content of the commit file of ``version``; None when it does not exist."""
    path = storage.log_path(commit_name(version))
    try:
        data = storage.read_bytes(path)
    except FileNotFoundError:
        return None
    return storage.to_uri(path), data


def parse_commit(version: int, path: str, data: bytes) -> CommitActions:
    """Split a commit file into its file lines and its other lines (no JSON parsing yet).

    One file takes :func:`_split_lines` (the same rule as :func:`split_commits`) without the
    numpy scan, whose fixed cost (~75 us against ~2 us) a watcher reading new commits one by one
    would pay per version.

    :raises CorruptLogError: the file has no action.
    """
    text = bytearray(data)
    small, files = _split_lines(data, blank=text)
    if not small and not files:
        raise _empty_commit(path)
    commit = CommitActions(version, path, small, len(files), text, 0, len(data))
    commit._file_lines = files
    return commit


def _empty_commit(path: str) -> CorruptLogError:
    return CorruptLogError(
        f"The commit file {path} is empty: a commit holds at least one action. The log is corrupt; "
        f"restore the file from a backup.",
        path=path,
    )


_ADD_START = np.frombuffer(b'{"add"', dtype=np.uint8)
_REMOVE_START = np.frombuffer(b'{"remove"', dtype=np.uint8)


def split_commits(files: Sequence[tuple[int, str, bytes]]) -> list[CommitActions]:
    """Split many commit files ``(version, path, content)`` at once (no JSON parsing yet): their
    contents joined (one newline between two), then :func:`split_text`."""
    text = bytearray(b"\n").join(data for _, _, data in files)
    offsets = list(itertools.accumulate((len(data) + 1 for _, _, data in files), initial=0))
    return split_text(text, offsets, [(version, path) for version, path, _ in files])


def split_text(
    text: bytearray, offsets: Sequence[int], files: Sequence[tuple[int, str]]
) -> list[CommitActions]:
    """Split many commit files ``(version, path)`` whose contents are joined in ``text`` (file
    ``i`` from ``offsets[i]`` to ``offsets[i + 1] - 1``, a newline between two, as
    :meth:`~.storage.LogStore.read_joined` reads them), no JSON parsing yet.

    A line is a file line when, stripped, it starts with ``{"add"`` or ``{"remove"``; blank
    lines are skipped; every other line is kept stripped, with its number. The text is scanned
    with numpy for the lines that do not start with a file action at their first byte (a few
    per commit: commitInfo, txn, protocol, ...); only those are looked at in Python, and then
    overwritten with spaces in the text, which so holds JSON lines of file actions only
    (:func:`segment_file_lines`). :func:`_split_lines` is the same rule line by line.

    :raises CorruptLogError: a file has no action, naming it.
    """
    raw = np.frombuffer(text, dtype=np.uint8)
    starts = _line_starts(raw)
    is_file = _starts_file_action(raw, starts)
    # The line starts of file i are those in [offsets[i], offsets[i] + len(content)].
    first_lines = np.searchsorted(starts, offsets[: len(files) + 1]).tolist()
    others: list[list[int]] = [[] for _ in files]
    for index in np.flatnonzero(~is_file).tolist():
        others[bisect.bisect_right(first_lines, index) - 1].append(index)
    del raw  # (a view of the text, which is changed below)
    commits = []
    for number, (version, path) in enumerate(files):
        offset, first, limit = offsets[number], first_lines[number], offsets[number + 1] - 1
        small: list[tuple[int, bytes]] = []
        blank = 0
        for index in others[number]:
            start = int(starts[index])
            end = text.find(b"\n", start, limit)
            end = limit if end < 0 else end
            line = bytes(text[start:end].strip())
            if not line:
                blank += 1
            elif not line.startswith(_FILE_LINE_PREFIXES):  # (a file line after whitespace counts)
                small.append((index - first + 1, line))
                text[start:end] = b" " * (end - start)
        count = first_lines[number + 1] - first - len(small) - blank
        if not small and not count:
            raise _empty_commit(path)
        commits.append(CommitActions(version, path, small, count, text, offset, limit))
    return commits


#: Bytes scanned for newlines at a time: a small mask, reused (fresh memory is not free).
_SCAN_CHUNK = 1 << 18


def _line_starts(raw: np.ndarray) -> np.ndarray:
    """The position of every line start in ``raw`` (0, and each byte after a newline)."""
    found = [np.zeros(1, dtype=np.int64)]
    mask = np.empty(min(_SCAN_CHUNK, len(raw)), dtype=bool)
    for begin in range(0, len(raw), _SCAN_CHUNK):
        part = raw[begin : begin + _SCAN_CHUNK]
        hits = np.equal(part, _NEWLINE, out=mask[: len(part)]).nonzero()[0]
        if len(hits):
            found.append(hits + (begin + 1))
    return np.concatenate(found)


def _starts_file_action(raw: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Per line start in ``raw``, whether the line starts with ``{"add"`` or ``{"remove"``."""
    is_add = np.ones(len(starts), dtype=bool)
    is_remove = np.ones(len(starts), dtype=bool)
    for offset in range(len(_REMOVE_START)):
        at = starts + offset
        inside = at < len(raw)
        byte = np.zeros(len(starts), dtype=np.uint8)
        byte[inside] = raw[at[inside]]
        if offset < len(_ADD_START):
            is_add &= byte == _ADD_START[offset]
        is_remove &= byte == _REMOVE_START[offset]
    return is_add | is_remove


_NEWLINE = ord("\n")


def _split_lines(
    data: bytes, blank: bytearray | None = None
) -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]]]:
    """(other lines, file lines) of a commit file, each (1-based line number, stripped line);
    blank lines are skipped.

    :param blank: a copy of ``data`` in which the other lines are overwritten with spaces (as
        :func:`split_commits` leaves its text).
    """
    small: list[tuple[int, bytes]] = []
    files: list[tuple[int, bytes]] = []
    position = 0
    for number, raw in enumerate(data.split(b"\n"), 1):
        line = raw.strip()
        if line.startswith(_FILE_LINE_PREFIXES):
            files.append((number, line))
        elif line:
            small.append((number, line))
            if blank is not None:
                blank[position : position + len(raw)] = b" " * len(raw)
        position += len(raw) + 1
    return small, files


def commit_info_of(version: int, path: str, data: bytes) -> dict[str, Any] | None:
    """The checked ``commitInfo`` of a commit file's content (reading only its first line when
    that is the commitInfo, as the protocol puts it first).

    :raises CorruptLogError: the commitInfo (or, when it is not first, any line) is malformed.
    """
    first = data.split(b"\n", 1)[0].strip()
    if first.startswith(b'{"commitInfo"'):
        commit = CommitActions(version, path, small_lines=[(1, first)])
        return commit.commit_info
    return parse_commit(version, path, data).commit_info


def _parse_lines(lines: list[tuple[int, bytes]], path: str) -> list[dict[str, Any]]:
    """Parse JSON lines, naming the file and line of the first bad one."""
    parsed = _parse_batch([line for _, line in lines])
    if parsed is None:
        return [parse_line(line, path, number) for number, line in lines]
    return parsed


def _parse_batch(lines: list[bytes]) -> list[dict[str, Any]] | None:
    """All lines in one ``json.loads`` of a JSON array (a fraction of the per-call cost);
    None when any line is not exactly one JSON object, so the caller can find which."""
    if not lines:
        return []
    try:
        parsed = json.loads(b"[" + b",".join(lines) + b"]")
    except (ValueError, RecursionError):
        return None
    if len(parsed) != len(lines) or not all(isinstance(a, dict) for a in parsed):
        return None
    actions: list[dict[str, Any]] = parsed
    return actions


def _checked(
    lines: list[tuple[int, bytes]], actions: list[dict[str, Any]], path: str
) -> list[dict[str, Any]]:
    """``actions`` (parsed from ``lines``) after :func:`action_problem` passed each one."""
    if any(map(action_problem, actions)):  # a problem is a non-empty text; the loop runs in C
        for (number, line), action in zip(lines, actions, strict=True):
            problem = action_problem(action)
            if problem is not None:
                raise malformed_action_error(f"Line {number} of {path}", problem, line, action, path)
    return actions


def parse_segment_small_actions(commits: list[CommitActions]) -> None:
    """Parse (and check) the non-file lines of many commits at once (each commit's ``actions``)."""
    pending = [c for c in commits if c._actions is None]
    parsed = _parse_batch([line for c in pending for _, line in c.small_lines])
    if parsed is None:
        for commit in pending:
            _ = commit.actions  # parses per commit, raising for the bad line
        return
    position = 0
    for commit in pending:
        count = len(commit.small_lines)
        commit._actions = _checked(commit.small_lines, parsed[position : position + count], commit.path)
        position += count


def segment_file_actions(commits: list[CommitActions]) -> list[tuple[CommitActions, list[dict[str, Any]]]]:
    """The (checked) file actions of many commits, parsed at once: (commit, actions) in version order."""
    parsed = _parse_batch([line for c in commits for _, line in c.file_lines])
    if parsed is None:
        return [(c, c.file_actions()) for c in commits]
    result = []
    position = 0
    for commit in commits:
        count = len(commit.file_lines)
        own = _checked(commit.file_lines, parsed[position : position + count], commit.path)
        commit._files_checked = True
        extra = [a for a in commit.actions if "add" in a or "remove" in a]
        result.append((commit, own + extra if extra else own))
        position += count
    return result


def segment_file_lines(commits: list[CommitActions]) -> tuple[bytearray, list[int]] | None:
    """Every ``add``/``remove`` line of many commits, unparsed, in version and line order, as one
    text of JSON lines (the commits' contents, their other lines overwritten with spaces: blank
    lines, which a JSON-lines reader skips), and where each commit's lines start among them,
    counted in lines (see :func:`file_line_origin`); None when a commit holds a file action on
    a line that does not start as one (the caller then parses every line, see
    :func:`segment_file_actions`).

    The text is the one the commits were split in when they were split together, as
    :func:`read_commits` does (no copy); else their parts of it, joined.
    """
    if any("add" in a or "remove" in a for c in commits for a in c.actions):
        return None
    starts = list(itertools.accumulate((c.file_line_count for c in commits), initial=0))
    if not commits:
        return bytearray(), starts
    shared = commits[0]._text
    whole = commits[0]._start == 0 and commits[-1]._end == len(shared)
    if whole and all(
        c._text is shared and c._start == (previous._end + 1 if previous else 0)
        for previous, c in zip([None, *commits[:-1]], commits, strict=True)
    ):
        return shared, starts
    return bytearray(b"\n").join(c._text[c._start : c._end] for c in commits), starts


def file_line_origin(
    commits: list[CommitActions], starts: list[int], index: int
) -> tuple[CommitActions, int, bytes]:
    """The commit, 1-based line number and stripped text of the ``index``-th line of
    :func:`segment_file_lines` (the commit's lines are split here if they were not yet)."""
    position = bisect.bisect_right(starts, index) - 1
    commit = commits[position]
    number, line = commit.file_lines[index - starts[position]]
    return commit, number, line


def check_replayable(commits: Sequence[CommitActions]) -> None:
    """Raise unless every line of every commit parses and is a well-formed action.

    For writers: a commit must never be built on a log that no reader can replay (a
    truncated last line, a garbage action in an earlier commit of the tail). Readers that
    only ask for protocol and metadata never parse the ``add``/``remove`` lines; this parses
    them in one batch (per commit only when the batch fails, to find the line), once per
    commit: commits whose files were already replayed are not parsed again.

    :raises CorruptLogError: naming the file and the 1-based line of the first bad action.
    """
    pending = [c for c in commits if not c._files_checked]
    if pending:
        parse_segment_small_actions(pending)
        segment_file_actions(pending)


def parse_line(line: bytes, path: str, number: int) -> dict[str, Any]:
    """One line parsed; a line that is not a JSON object raises, naming the file and line.

    :raises CorruptLogError: the line is not valid JSON, or not an object.
    """
    try:
        action = json.loads(line)
    except (ValueError, RecursionError) as err:
        raise CorruptLogError(
            f"Line {number} of {path} is not valid JSON ({err}): {line[:200]!r}. The commit is corrupt.",
            path=path,
        ) from None
    if not isinstance(action, dict):
        raise CorruptLogError(f"Line {number} of {path} is not a JSON object: {line[:200]!r}.", path=path)
    return action


def read_commits(storage: LogStore, segment: LogSegment) -> list[CommitActions]:
    """Read every commit of the segment into one text (:meth:`~.storage.LogStore.read_joined`)
    and split them at once (:func:`split_text`), in version order."""
    return read_commit_files(storage, segment.commits)


def read_commit_files(storage: LogStore, files: Sequence[LogFile]) -> list[CommitActions]:
    """Read listed commit files into one text and split them at once (:func:`split_text`), in the
    order given; their non-file lines are parsed.

    :raises CorruptLogError: a file disappeared since it was listed, or holds a malformed action.
    """
    if not files:
        return []
    paths = [f.file.path for f in files]
    try:
        text, offsets = storage.read_joined(paths, max_workers=16)
    except FileNotFoundError as err:  # read_joined names the missing file
        uri = storage.to_uri(err.filename)
        raise CorruptLogError(
            f"The commit file {uri} disappeared while the table was being read (log cleanup "
            f"running at the same time?). Load the table again.",
            path=uri,
        ) from None
    commits = split_text(text, offsets, [(f.version, storage.to_uri(f.file.path)) for f in files])
    parse_segment_small_actions(commits)
    return commits
