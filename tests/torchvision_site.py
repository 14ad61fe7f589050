"""torchvision for the tests that need it, where the test env has none: pip's wheel (a CUDA build, whose ops library
does not load beside a CPU-only torch; ``torchtrt_plugins.vision`` stands in for it) installed with ``--no-deps``
into a cache folder of its own and put on ``sys.path``. Not in the main env: there, ``transformers`` imports an
installed torchvision whose ops do not load and fails (``LlamaConfig``) unless ``torchtrt_plugins.vision`` came first.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

#: torchvision 0.28 requires torch 2.13.0.
PINS = ("torchvision==0.28.0", "pillow==13.0.0")
_MARKER = ".complete"
#: Where the tests' side installs live (TORCHTRT_PLUGINS_TEST_SITES, else ~/.cache/torchtrt_plugins_test_sites).
SITES = Path(os.environ.get("TORCHTRT_PLUGINS_TEST_SITES") or Path.home() / ".cache" / "torchtrt_plugins_test_sites")


def require_torchvision() -> None:
    """Make torchvision importable (installing it first if needed), or skip with the reason."""
    if importlib.util.find_spec("torchvision") is not None:
        return
    from filelock import FileLock

    key = hashlib.sha256("|".join((*PINS, sys.version)).encode()).hexdigest()[:16]
    # Not in the plugin build cache: the wheel's tests require that cache to stay empty.
    site = SITES / f"torchvision-site-{key}"
    site.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(site) + ".lock"):
        if not (site / _MARKER).is_file():
            command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), *PINS]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                pytest.skip(f"torchvision: `{' '.join(command[2:])}` failed: {(result.stderr or result.stdout)[-600:]}")
            (site / _MARKER).write_text("\n".join(PINS) + "\n")
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
