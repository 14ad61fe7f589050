"""The tt tier's own environment: Torch-TensorRT for TensorRT-RTX, installed apart from the test env.

``torch-tensorrt-rtx`` 2.13 needs ``tensorrt_rtx`` 1.5.x, while the main env has 1.7.1 (the ONNX-parser
checks need it); both are the module ``tensorrt_rtx``. So the tier installs its pins with
``pip install --no-deps --target`` into a cache folder of its own, keyed by the pins and the Python
version (``--no-deps``: torch is never pulled, the system's torch 2.13 CPU wheel is used), and runs its
Torch-TensorRT work in worker processes with that folder first on ``sys.path`` (``worker.py``).
``TORCHTRT_PLUGINS_TT_SITE`` points at a prepared folder instead.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

#: What the tier installs (exact pins; checked together on CPU with torch 2.13.0).
PINS = (
    "torch-tensorrt-rtx==2.13.0",
    "tensorrt-rtx==1.5.0.114",
    "tensorrt-rtx-cu13==1.5.0.114",
    "tensorrt-rtx-cu13-bindings==1.5.0.114",
    "tensorrt-rtx-cu13-libs==1.5.0.114",
    "dllist==2.0.0",  # torch-tensorrt-rtx dependencies the test env may lack
    "psutil==7.1.3",
)
#: torch-tensorrt-rtx 2.13.0 requires torch >=2.13,<2.14.
TORCH_SERIES = "2.13."
_MARKER = ".complete"


def site_dir() -> Path:
    override = os.environ.get("TORCHTRT_PLUGINS_TT_SITE")
    if override:
        return Path(override)
    from torchtrt_plugins import _build

    key = hashlib.sha256("|".join((*PINS, sys.version)).encode()).hexdigest()[:16]
    return _build.cache_dir() / f"tt-site-{key}"


def _install(site: Path) -> str | None:
    partial = site.with_name(site.name + ".partial")
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(partial), *PINS]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        return f"tt tier: `{' '.join(command[2:])}` failed: {(result.stderr or result.stdout)[-600:]}"
    (partial / _MARKER).write_text("\n".join(PINS) + "\n")
    partial.rename(site)
    return None


def missing() -> str | None:
    """None when the tier can run (installing its environment first if needed), else the reason it cannot."""
    import torch

    if not torch.__version__.startswith(TORCH_SERIES):
        return f"tt tier: torch-tensorrt-rtx 2.13 needs torch {TORCH_SERIES}x, this is torch {torch.__version__}"
    site = site_dir()
    if (site / _MARKER).is_file():
        return None
    if os.environ.get("TORCHTRT_PLUGINS_TT_SITE"):
        return f"tt tier: TORCHTRT_PLUGINS_TT_SITE={site} holds no complete install ({_MARKER} missing)"
    from filelock import FileLock

    site.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(site) + ".lock"):
        if (site / _MARKER).is_file():
            return None
        import shutil

        shutil.rmtree(site.with_name(site.name + ".partial"), ignore_errors=True)
        return _install(site)
