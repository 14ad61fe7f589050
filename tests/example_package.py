"""Imports the out-of-tree example package (examples/myops) the way its own tests see it: from its folder."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "myops"


def import_myops():
    if not EXAMPLE.is_dir():  # tests copied away from the checkout, e.g. to run against an installed wheel
        import pytest

        pytest.skip(f"the example package is not here ({EXAMPLE})", allow_module_level=True)
    if str(EXAMPLE) not in sys.path:
        sys.path.insert(0, str(EXAMPLE))
    return importlib.import_module("myops")


PYOPS = EXAMPLE.parent / "pyops"


def pyops_unavailable() -> str | None:
    """Why examples/pyops (kernels written in Python: Triton, CuPy) cannot be built here, or None."""
    for module, package in (("triton", "triton"), ("liger_kernel", "liger-kernel"), ("cupy", "cupy-cuda13x")):
        try:
            importlib.import_module(module)
        except Exception as err:  # noqa: BLE001 - any import failure means the example cannot be declared
            return f"examples/pyops needs {package} ({module}: {type(err).__name__}: {err})"
    try:
        from cupy_backends.cuda.libs import nvrtc

        nvrtc.getVersion()
    except Exception as err:  # noqa: BLE001 - libnvrtc not found
        return f"examples/pyops compiles CUDA source with NVRTC: pip install nvidia-cuda-nvrtc ({err})"
    return None


def import_pyops():
    import pytest

    if not PYOPS.is_dir():
        pytest.skip(f"the example package is not here ({PYOPS})", allow_module_level=True)
    reason = pyops_unavailable()
    if reason:
        pytest.skip(reason, allow_module_level=True)
    if str(PYOPS) not in sys.path:
        sys.path.insert(0, str(PYOPS))
    return importlib.import_module("pyops")


def run_own_tests(folder: Path) -> None:
    """An example package's own pytest, run from its folder as a user runs it; asserts that it passed."""
    import os
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (str(folder), os.environ.get("PYTHONPATH")) if p))
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " passed" in result.stdout
