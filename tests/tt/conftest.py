"""The tt tier: Torch-TensorRT's own pipeline (torch-tensorrt-rtx 2.13 + tensorrt_rtx 1.5) on CPU.

Test functions here are ordinary pytest functions, but they run in a worker process (``worker.py``):
the tier's own environment (``tt_environment.py``) first on ``sys.path``, the four documented shims, and
``torchtrt_plugins`` imported as users import it. One worker per test module (Torch-TensorRT takes ~10 s
to import); a test's parametrize values and ``tmp_path`` are sent to it, its outcome comes back (a
failure with the worker's traceback). Test modules import ``torch_tensorrt`` inside their functions,
since the main test process has none.
"""

from __future__ import annotations

import os
import pickle
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

WORKER = Path(__file__).with_name("worker.py")
#: Seconds one test may take in the worker (an engine build on CPU takes a few).
TEST_TIMEOUT_S = 300


class Worker:
    def __init__(self, site: Path) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="tt-worker-", suffix=".log", delete=False)
        self.process = subprocess.Popen(
            [sys.executable, str(WORKER), str(site)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
        )
        self.ready = self._receive()

    def log_tail(self, chars: int = 6000) -> str:
        return Path(self.log.name).read_text(errors="replace")[-chars:]

    def _receive(self):
        header = self.process.stdout.read(8)
        if len(header) < 8:
            self.process.wait(timeout=30)
            raise RuntimeError(f"tt worker exited ({self.process.returncode}); its log:\n{self.log_tail()}")
        return pickle.loads(self.process.stdout.read(struct.unpack("<Q", header)[0]))

    def run(self, path: str, function: str, kwargs: dict) -> tuple:
        data = pickle.dumps((path, function, kwargs))
        self.process.stdin.write(struct.pack("<Q", len(data)) + data)
        self.process.stdin.flush()
        return self._receive()

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
        os.unlink(self.log.name)


_workers: dict[str, Worker] = {}


def _worker(module_path: str) -> Worker:
    worker = _workers.get(module_path)
    if worker is None or worker.process.poll() is not None:
        from tt_environment import site_dir  # tests/tt is on sys.path (pytest prepends it)

        worker = _workers[module_path] = Worker(site_dir())
    return worker


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function):
    # The test's own arguments (parametrize values, tmp_path) are pickled to the worker; fixtures with live state
    # (monkeypatch, capfd, ...) cannot cross the process boundary, so tt tests do not take them.
    names = pyfuncitem._fixtureinfo.argnames
    kwargs = {name: pyfuncitem.funcargs[name] for name in names}
    path = str(pyfuncitem.path)
    worker = _worker(path)
    outcome, detail = worker.run(path, pyfuncitem.originalname, kwargs)
    if outcome == "skipped":
        pytest.skip(detail)
    if outcome == "failed":
        pytest.fail(f"in the tt worker:\n{detail}\n--- worker log (tail) ---\n{worker.log_tail(3000)}", pytrace=False)
    return True


def pytest_sessionfinish(session):
    while _workers:
        _workers.popitem()[1].close()
