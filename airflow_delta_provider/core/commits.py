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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from airflow_delta_provider.core.action_checks import action_problem, malformed_action_error
from airflow_delta_provider.core.errors import CorruptLogError
from airflow_delta_provider.core.logfiles import commit_name

if TYPE_CHECKING:
    from collections.abc import Sequence

    from airflow_delta_provider.core.segment import LogSegment
    from airflow_delta_provider.core.storage import LogStore

_FILE_LINE_PREFIXES = (b'{"add"', b'{"remove"')


@dataclass
class CommitActions:
    """One commit file, split into lines; parsed as late and in as few calls as possible.

    ``add``/``remove`` lines are parsed only when files are needed; the other lines
    (commitInfo, protocol, metaData, txn, ...) when the small state is needed. Every
    parsed action has passed :func:`~.action_checks.action_problem`.
    """

    version: int
    path: str
    #: (line number, raw line) of the non-file actions
    small_lines: list[tuple[int, bytes]] = field(default_factory=list)
    #: (line number, raw line) of the add/remove actions
    file_lines: list[tuple[int, bytes]] = field(default_factory=list)
    _actions: list[dict[str, Any]] | None = None
    #: every file line parsed and checked once (see :func:`check_replayable`)
    _files_checked: bool = False

    @property
    def actions(self) -> list[dict[str, Any]]:
        """The parsed non-file actions, in file order."""
        if self._actions is None:
            self._actions = _checked(self.small_lines, _parse_lines(self.small_lines, self.path), self.path)
        return self._actions

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
    """Split a commit file into lines (no JSON parsing yet).

    :raises CorruptLogError: the file has no action.
    """
    commit = CommitActions(version, path)
    for number, line in enumerate(data.split(b"\n"), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith(_FILE_LINE_PREFIXES):
            commit.file_lines.append((number, line))
        else:
            commit.small_lines.append((number, line))
    if not commit.small_lines and not commit.file_lines:
        raise CorruptLogError(
            f"The commit file {path} is empty: a commit holds at least one action. The log is corrupt; "
            f"restore the file from a backup.",
            path=path,
        )
    return commit


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


def segment_file_lines(commits: list[CommitActions]) -> tuple[list[bytes], list[int]] | None:
    """Every ``add``/``remove`` line of many commits, unparsed, in version and line order, and
    where each commit's lines start in that list (see :func:`file_line_origin`); None when a
    commit holds a file action on a line that does not start as one (the caller then parses
    every line, see :func:`segment_file_actions`)."""
    if any("add" in a or "remove" in a for c in commits for a in c.actions):
        return None
    lines = [line for c in commits for _, line in c.file_lines]
    starts = list(itertools.accumulate((len(c.file_lines) for c in commits), initial=0))
    return lines, starts


def file_line_origin(
    commits: list[CommitActions], starts: list[int], index: int
) -> tuple[CommitActions, int]:
    """The commit and 1-based line number of the ``index``-th line of :func:`segment_file_lines`."""
    position = bisect.bisect_right(starts, index) - 1
    commit = commits[position]
    return commit, commit.file_lines[index - starts[position]][0]


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
    """Read and split every commit of the segment, in version order."""
    from concurrent.futures import ThreadPoolExecutor

    def read(item: Any) -> CommitActions:
        uri = storage.to_uri(item.file.path)
        try:
            data = storage.read_bytes(item.file.path)
        except FileNotFoundError:
            raise CorruptLogError(
                f"The commit file {uri} disappeared while the table was being read (log cleanup "
                f"running at the same time?). Load the table again.",
                path=uri,
            ) from None
        return parse_commit(item.version, uri, data)

    if storage.is_local or len(segment.commits) < 8:
        commits = [read(c) for c in segment.commits]
    else:
        with ThreadPoolExecutor(max_workers=16) as pool:
            commits = list(pool.map(read, segment.commits))
    parse_segment_small_actions(commits)
    return commits
