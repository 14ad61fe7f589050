"""One import for TensorRT's Python API, whichever flavour is installed.

``tensorrt`` is preferred; ``tensorrt_rtx`` (NVIDIA's TensorRT for RTX, installable from PyPI) has
the same plugin registry and plugin bindings and stands in for it where full TensorRT is missing.
``TORCHTRT_PLUGINS_TENSORRT=tensorrt_rtx`` (or ``tensorrt``) forces one.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
from types import ModuleType

_CANDIDATES = ("tensorrt", "tensorrt_rtx")
_cache: dict[str, ModuleType | None] = {}
_LOGGER = logging.getLogger(__name__)
_warned_no_plugin_layers = False


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


def plugin_layers_unavailable() -> str | None:
    """Why the networks Torch-TensorRT builds cannot take plugin V3 layers, or None when they can.

    Torch-TensorRT builds with the module it puts in ``sys.modules["tensorrt"]`` at import (``tensorrt_rtx`` for
    torch-tensorrt-rtx). TensorRT-RTX's C++ network has ``addPluginV3``, but its Python ``INetworkDefinition`` (1.4
    to 1.7) binds no plugin method, so our converters cannot add a layer there. None where Torch-TensorRT has not
    been imported (no network to ask about). Checked at each call: cheap, and follows a binding added later.
    """
    trt = sys.modules.get("tensorrt") if "torch_tensorrt" in sys.modules else None
    network = getattr(trt, "INetworkDefinition", None)
    if network is None or hasattr(network, "add_plugin_v3"):
        return None
    return f"{network.__module__}.INetworkDefinition ({trt.__version__}) has no add_plugin_v3"


def warn_plugin_layers_unavailable(reason: str) -> None:
    """One warning per process: our ops stay out of Torch-TensorRT's engines, why, and what to do."""
    global _warned_no_plugin_layers
    if _warned_no_plugin_layers:
        return
    _warned_no_plugin_layers = True
    _LOGGER.warning(
        "torchtrt_plugins: Torch-TensorRT's TensorRT networks cannot take plugin layers here (%s; TensorRT-RTX 1.4 "
        "to 1.7 bind none), so torchtrt ops run in PyTorch with their eager kernels and the lowering leaves RMSNorms "
        "to TensorRT. For our plugins inside engines, use torch-tensorrt with full TensorRT, or export to ONNX "
        "(torchtrt_plugins.onnx.export) and build with TensorRT-RTX 1.7.1's ONNX parser after "
        "torchtrt_plugins.load_plugins().",
        reason,
    )
