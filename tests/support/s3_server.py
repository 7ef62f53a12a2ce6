"""moto's S3-compatible server on loopback, in its own process, for object-storage tests."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.spark_cluster import free_port

MOTO_SERVER = str(Path(sys.executable).with_name("moto_server"))


@dataclass
class MotoServer:
    root: Path
    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 60) -> str:
        log = open(self.root / "moto.log", "wb")
        self.process = subprocess.Popen([MOTO_SERVER, "-H", "127.0.0.1", "-p", str(self.port)], stdout=log,
                                        stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self.process.returncode}; see {self.root / 'moto.log'}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=5).close()
                return self.endpoint
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"moto_server not answering at {self.endpoint} after {timeout_s:.0f}s")
                time.sleep(0.2)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
