"""Progress messages of long listings and deletions (one place, so every store logs alike)."""

from __future__ import annotations

import threading
import time

from airflow_delta_provider.core.utils.redaction import get_logger

log = get_logger(__name__)

#: Seconds between two progress messages of a long deletion or listing.
PROGRESS_INTERVAL = 10.0


class Progress:
    """INFO messages at most every :data:`PROGRESS_INTERVAL` seconds while deleting or listing.

    :param total: how many files there are to handle; 0 when unknown (a listing).
    """

    def __init__(self, uri: str, total: int, verb: str = "Deleting from") -> None:
        self.uri = uri
        self.total = total
        self.verb = verb
        self.done = 0
        self.started = time.monotonic()
        self.last = self.started
        self.lock = threading.Lock()

    def advance(self, count: int) -> None:
        with self.lock:
            self.done += count
            now = time.monotonic()
            if now - self.last < PROGRESS_INTERVAL or (self.total and self.done >= self.total):
                return
            self.last = now
            if self.total:
                log.info(
                    "%s %s: %d of %d file(s) done (%.0f%%) in %.0f s.",
                    self.verb,
                    self.uri,
                    self.done,
                    self.total,
                    100 * self.done / self.total,
                    now - self.started,
                )
            else:
                log.info(
                    "%s %s: %d file(s) so far in %.0f s.", self.verb, self.uri, self.done, now - self.started
                )

    def finish(self) -> None:
        if time.monotonic() - self.started >= PROGRESS_INTERVAL:
            log.info(
                "%s %s: all %d file(s) handled in %.0f s.",
                self.verb,
                self.uri,
                self.total or self.done,
                time.monotonic() - self.started,
            )
