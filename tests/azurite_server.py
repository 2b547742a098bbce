"""An Azure Blob Storage endpoint for tests: Azurite (Microsoft's emulator, on npm).

``Azurite`` starts ``azurite-blob`` on 127.0.0.1 (a free port, in memory) and
creates containers with a SharedKey-signed request (Azurite's well-known
development account). ``scripts/test.sh`` installs Azurite into
``.venv/node`` with npm; ``PQINDEX_AZURITE`` names another ``azurite-blob``.
Without node or Azurite the ``azurite`` fixture skips, saying why.
"""

from __future__ import annotations

import base64
import contextlib
import email.utils
import hashlib
import hmac
import os
import re
import shutil
import subprocess
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

__all__ = ["ACCOUNT", "ACCOUNT_KEY", "Azurite", "azurite", "azurite_binary"]

# Azurite's documented development account (not a secret).
ACCOUNT = "devstoreaccount1"
ACCOUNT_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/"
               "K1SZFPTOtr/KBHBeksoGMGw==")
API_VERSION = "2021-08-06"
ROOT = Path(__file__).resolve().parent.parent


def azurite_binary() -> str | None:
    """``azurite-blob`` from $PQINDEX_AZURITE, ``.venv/node`` (scripts/test.sh), or PATH."""
    for cand in (os.environ.get("PQINDEX_AZURITE"),
                 str(ROOT / ".venv" / "node" / "node_modules" / ".bin" / "azurite-blob"),
                 shutil.which("azurite-blob")):
        if cand and os.access(cand, os.X_OK):
            return cand
    return None


def _wait_for_port(out: IO[str], proc: subprocess.Popen[str], timeout: float) -> int:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = out.readline()
        if not line:
            if proc.poll() is not None:
                break
            time.sleep(0.05)
            continue
        seen.append(line)
        m = re.search(r"listens on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return int(m.group(1))
    raise RuntimeError("Azurite did not start: " + "".join(seen)[-2000:])


class Azurite:
    """A running ``azurite-blob`` (in memory, no telemetry) on 127.0.0.1."""

    def __init__(self, binary: str, timeout: float = 30.0) -> None:
        self._proc = subprocess.Popen(
            [binary, "--blobHost", "127.0.0.1", "--blobPort", "0", "--inMemoryPersistence",
             "--disableTelemetry", "--skipApiVersionCheck", "--loose", "--silent"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        try:
            assert self._proc.stdout is not None
            self.port = _wait_for_port(self._proc.stdout, self._proc, timeout)
        except BaseException:
            self.stop()
            raise
        # Whatever it prints later must not fill the pipe and block it.
        threading.Thread(target=self._proc.stdout.read, daemon=True).start()
        self.endpoint = f"http://127.0.0.1:{self.port}/{ACCOUNT}"

    def storage_options(self) -> dict[str, str]:
        """What ``pqindex.dataset("az://container/...", storage_options=...)`` needs."""
        return {"account_name": ACCOUNT, "account_key": ACCOUNT_KEY,
                "endpoint": self.endpoint, "allow_http": "true"}

    def new_container(self, prefix: str = "pqindex") -> str:
        """A new, empty container (names: 3-63 lowercase letters, digits, dashes)."""
        name = f"{prefix}-{uuid.uuid4().hex[:12]}"
        date = email.utils.formatdate(usegmt=True)
        # SharedKey: verb, eleven empty standard headers, canonical headers, resource.
        to_sign = ("PUT\n" + "\n" * 11 + f"x-ms-date:{date}\nx-ms-version:{API_VERSION}\n"
                   f"/{ACCOUNT}/{ACCOUNT}/{name}\nrestype:container")
        sig = base64.b64encode(hmac.new(base64.b64decode(ACCOUNT_KEY), to_sign.encode(),
                                        hashlib.sha256).digest()).decode()
        req = urllib.request.Request(
            f"{self.endpoint}/{name}?restype=container", method="PUT",
            headers={"x-ms-date": date, "x-ms-version": API_VERSION, "Content-Length": "0",
                     "Authorization": f"SharedKey {ACCOUNT}:{sig}"})
        with urllib.request.urlopen(req, timeout=10) as res:
            assert res.status == 201, res.status
        return name

    def store(self, container: str) -> Any:
        """An obstore client of ``container`` (uploads in tests)."""
        from obstore.store import AzureStore

        return AzureStore(container, account_name=ACCOUNT, access_key=ACCOUNT_KEY,
                          endpoint=self.endpoint, allow_http=True)

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            with contextlib.suppress(Exception):
                self._proc.stdout.close()


@pytest.fixture(scope="session")
def azurite() -> Iterator[Azurite]:
    """One Azurite for the session; skipped when node or Azurite is not installed
    (a failure under CI=true)."""
    from conftest import missing

    if shutil.which("node") is None:
        missing("node is not installed: Azurite (npm) cannot run")
    binary = azurite_binary()
    if binary is None:
        missing("Azurite is not installed (scripts/test.sh installs it into .venv/node "
                    "with npm; or set PQINDEX_AZURITE to an azurite-blob)")
    ep = Azurite(binary)
    try:
        yield ep
    finally:
        ep.stop()
