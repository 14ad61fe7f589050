"""One import for TensorRT's Python API, whichever flavour is installed.

``tensorrt`` is preferred; ``tensorrt_rtx`` (NVIDIA's TensorRT for RTX, installable from PyPI) has
the same plugin registry and plugin bindings and stands in for it where full TensorRT is missing.
``TORCHTRT_PLUGINS_TENSORRT=tensorrt_rtx`` (or ``tensorrt``) forces one.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

_CANDIDATES = ("tensorrt", "tensorrt_rtx")
_cache: dict[str, ModuleType | None] = {}


def tensorrt() -> ModuleType | None:
    """The TensorRT Python module, or None when neither flavour imports."""
    forced = os.environ.get("TORCHTRT_PLUGINS_TENSORRT")
    names = (forced,) if forced else _CANDIDATES
    key = ",".join(names)
    if key not in _cache:
        _cache[key] = None
        for name in names:
            try:
                _cache[key] = importlib.import_module(name)
                break
            except Exception:  # noqa: BLE001 - a broken install counts as missing
                continue
    return _cache[key]


def require_tensorrt() -> ModuleType:
    trt = tensorrt()
    if trt is None:
        raise ImportError(
            "torchtrt_plugins: TensorRT's Python API is not installed (pip install tensorrt, or "
            "tensorrt-rtx for registry-only use)"
        )
    return trt


def torch_tensorrt() -> ModuleType | None:
    try:
        return importlib.import_module("torch_tensorrt")
    except Exception:  # noqa: BLE001
        return None
