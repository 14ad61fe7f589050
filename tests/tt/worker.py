"""A tt-tier worker process: Torch-TensorRT for TensorRT-RTX on a CPU-only torch, running tests on request.

Usage: ``python worker.py SITE_DIR [--no-add-plugin-v3]``. ``SITE_DIR`` (the tier's own install, see
``tt_environment.py``) goes first on ``sys.path``, then the test-only shims below make ``torch_tensorrt``
import and partition on a CPU-only torch, then the addPluginV3 adapter (``tests/_nvidia/add_plugin_v3.py``)
stands in for the ``add_plugin_v3`` that RTX's Python ``INetworkDefinition`` lacks (not with
``--no-add-plugin-v3``: the network TensorRT-RTX users have), then ``torchtrt_plugins`` registers its
converters and lowering pass as it does for users. Requests come on stdin, replies go out on the original
stdout (pickled, length-prefixed); everything printed goes to stderr (the conftest sends it to a log).

The five shims (for torch-tensorrt-rtx 2.13.0 on torch 2.13.0 CPU; test-only, never in the package):

1. ``torch.cuda.get_device_capability`` -> ``(0, 0)``: ``torch_tensorrt._utils.is_thor()`` and friends
   ask for it at import; a CPU-only torch raises.
2. ``torch.cuda.current_device`` -> ``0``: a default ``CompilationSettings()`` (its ``Device``) is
   evaluated at import.
3. ``torch._C._CudaDeviceProperties``: a stub class, used in an annotation; absent from CPU builds.
4. ``torch_tensorrt/lib/libtorchtrt.so`` and ``libtorchtrt_runtime.so`` look absent while
   ``torch_tensorrt`` imports (they need ``libtorch_cuda``): it then runs as a Python-only install
   (no TorchScript frontend, Python runtime), which is all the dynamo path needs up to a serialized plan.
5. ``torch_tensorrt.dynamo._compiler.to_torch_device`` -> the CPU (it is asked for the GPU): ``compile_module``
   moves each PyTorch partition to the compilation device (``submodule.to(...)``), which a CPU-only torch
   refuses ("Cannot access accelerator device when none is available").
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import struct
import sys
import traceback
from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parents[1]
_HIDDEN_LIBRARIES = ("libtorchtrt.so", "libtorchtrt_runtime.so")


def install_shims() -> None:
    import torch

    torch.cuda.get_device_capability = lambda device=None: (0, 0)
    torch.cuda.current_device = lambda: 0
    if not hasattr(torch._C, "_CudaDeviceProperties"):
        torch._C._CudaDeviceProperties = type("_CudaDeviceProperties", (), {})


def install_device_shim() -> None:
    import torch
    import torch_tensorrt.dynamo._compiler as compiler

    compiler.to_torch_device = lambda device: torch.device("cpu")  # the only device a CPU-only torch has


def import_torch_tensorrt():
    real_isfile = os.path.isfile

    def isfile(path) -> bool:
        path = os.fspath(path)
        if os.path.basename(path) in _HIDDEN_LIBRARIES and "torch_tensorrt" in path:
            return False
        return real_isfile(path)

    os.path.isfile = isfile
    try:
        import torch_tensorrt
    finally:
        os.path.isfile = real_isfile
    return torch_tensorrt


def _send(stream, message) -> None:
    data = pickle.dumps(message)
    stream.write(struct.pack("<Q", len(data)) + data)
    stream.flush()


def _receive(stream):
    header = stream.read(8)
    if len(header) < 8:
        return None
    return pickle.loads(stream.read(struct.unpack("<Q", header)[0]))


def _load_module(path: str, cache: dict):
    if path not in cache:
        name = "tt_" + Path(path).stem
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        cache[path] = module
    return cache[path]


def _run(request: tuple, modules: dict) -> tuple:
    import pytest

    path, function, kwargs = request
    try:
        getattr(_load_module(path, modules), function)(**kwargs)
    except pytest.skip.Exception as skip:
        return ("skipped", str(skip.msg))
    except BaseException:  # noqa: BLE001 - every failure goes back to the test, with its traceback
        return ("failed", traceback.format_exc())
    return ("passed", "")


def main() -> None:
    site = sys.argv[1]
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # Torch-TensorRT prints (dry-run reports): keep them off the reply channel
    requests = sys.stdin.buffer
    sys.path[:0] = [site, str(TESTS_DIR), str(TESTS_DIR / "tt")]
    install_shims()
    torch_tensorrt = import_torch_tensorrt()
    install_device_shim()
    import tensorrt_rtx
    from _nvidia import add_plugin_v3

    # Without the adapter, or where it cannot be used, tests that need it skip with the reason.
    if "--no-add-plugin-v3" not in sys.argv[2:] and add_plugin_v3.unavailable_reason(tensorrt_rtx) is None:
        add_plugin_v3.install(tensorrt_rtx)
    import torchtrt_plugins  # registers converters and the lowering pass, as for users

    _send(
        replies,
        (
            "ready",
            {
                "torch_tensorrt": torch_tensorrt.__version__,
                "tensorrt_rtx": tensorrt_rtx.__version__,
                "add_plugin_v3": hasattr(tensorrt_rtx.INetworkDefinition, "add_plugin_v3"),
                "torchtrt_plugins": torchtrt_plugins.__file__,
            },
        ),
    )
    modules: dict = {}
    while (request := _receive(requests)) is not None:
        _send(replies, _run(request, modules))


if __name__ == "__main__":
    main()
