"""Headless Chromium (the OS package) driven through its DevTools protocol, for the deployed tier.

No browser download and no driver: ``chromium --headless --remote-debugging-port=0`` on loopback,
one WebSocket to its page target (the ``websockets`` client Airflow's API server already brings).
Started and stopped by PID.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

#: The Debian package's binary names.
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> str | None:
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One headless Chromium with one page."""

    def __init__(self, binary: str, profile: Path, log: Path) -> None:
        self.profile = profile
        args = [
            binary,
            "--headless=new",
            "--no-sandbox",  # root in CI containers
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--hide-scrollbars",
            "--window-size=1400,1000",
            f"--user-data-dir={profile}",
            "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0",
            "about:blank",
        ]
        with open(log, "ab") as out:
            self.process = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self._ids = itertools.count(1)
        # The connection is entered as its context (websockets 17.1+ deprecates a bare connect()) and
        # left in close().
        self._connection = contextlib.ExitStack()
        self.ws = self._connection.enter_context(self._connect())

    def _connect(self) -> Any:
        from websockets.sync.client import connect

        port_file = self.profile / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.process.returncode}")
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not open its DevTools port within 60 s")
            time.sleep(0.2)
        port = int(port_file.read_text().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=30) as response:
            targets = json.load(response)
        page = next(t for t in targets if t.get("type") == "page")
        return connect(page["webSocketDebuggerUrl"], max_size=64 * 1024 * 1024, open_timeout=30)

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """One DevTools command; its result (events in between are dropped)."""
        call_id = next(self._ids)
        self.ws.send(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=120))
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return dict(message.get("result") or {})

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression[:80]}: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def set_cookie(self, url: str, name: str, value: str) -> None:
        self.send("Network.enable")
        self.send("Network.setCookie", name=name, value=value, url=url, path="/")

    def open(self, url: str) -> None:
        self.send("Page.enable")
        self.send("Page.navigate", url=url)

    def wait_for(self, expression: str, timeout: float, what: str) -> Any:
        """Poll a JavaScript expression until it is truthy."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:
                value = None
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"Timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.5)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self._connection.close()
        finally:
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)
                try:
                    self.process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(self.process.pid, signal.SIGKILL)  # the group started for it
                    self.process.wait(timeout=20)
