"""Tier markers and their skip reasons, and the fixtures every tier shares.

Tests live in tests/<tier>/ and are marked with that tier automatically; a tier whose requirements
are missing is skipped with a reason that says what is missing.
"""

from __future__ import annotations

import functools
import importlib
from pathlib import Path

import pytest

TIERS = ("cpu", "rtx", "tt", "gpu", "trt")


@functools.cache
def _missing(tier: str) -> str | None:
    import torch

    if tier == "cpu":
        return None
    if tier == "rtx":
        try:
            importlib.import_module("tensorrt_rtx")
        except Exception as err:  # noqa: BLE001
            return f"rtx tier: tensorrt_rtx is not importable ({err}); pip install -e '.[rtx]'"
        return None
    if tier == "tt":  # installs the tier's own Torch-TensorRT environment on first use (tests/tt/tt_environment.py)
        from tt.tt_environment import missing

        return missing()
    if not torch.cuda.is_available():
        return f"{tier} tier: no CUDA GPU visible to torch"
    import torchtrt_plugins

    if not torchtrt_plugins.native.cuda_ops_loaded():
        return f"{tier} tier: CUDA ops not built ({torchtrt_plugins.native.load_torch_ops()})"
    if tier == "trt":
        for module in ("tensorrt", "torch_tensorrt"):
            try:
                importlib.import_module(module)
            except Exception as err:  # noqa: BLE001
                return f"trt tier: {module} is not importable ({err}); pip install -e '.[trt]' on a TensorRT machine"
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier in TIERS:
            item.add_marker(getattr(pytest.mark, tier))
        for name in TIERS:
            if item.get_closest_marker(name) is not None:
                reason = _missing(name)
                if reason:
                    item.add_marker(pytest.mark.skip(reason=reason))
                break


@pytest.fixture(scope="session")
def build():
    """The plugin library, the harness and the broken test plugins (``_build.PluginBuild``), built once per change."""
    from torchtrt_plugins import _build

    try:
        return _build.build_plugin_library()
    except _build.BuildError as err:
        pytest.fail(f"plugin library and harness must build on every machine with nvcc and the TensorRT headers: {err}")
