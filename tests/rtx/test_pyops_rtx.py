"""NVIDIA's builder builds plans with the plugins of examples/pyops, whose kernels are written in Python (Liger's
Triton RMSNorm, a CuPy SwiGLU) and embedded as cubin: dynamic profiles, two outputs of different dtypes, tactics."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import pytest  # noqa: E402
import torch  # noqa: E402
from example_package import import_pyops  # noqa: E402
from test_builder import BuilderCase, NetworkInput, _build  # noqa: E402

PY = import_pyops()

CASES = [
    BuilderCase(
        "liger_rms_norm_dynamic",
        "pyops::liger_rms_norm",
        (
            NetworkInput("x", torch.bfloat16, ((1, 1, 4096), (4, 64, 4096), (8, 512, 4096))),
            NetworkInput("w", torch.bfloat16, ((4096,), (4096,), (4096,))),
        ),
        args=lambda tensors: (1e-6, 0.0),
        outputs=(0, 1),
    ),
    BuilderCase(
        "swiglu_dynamic",
        "pyops::swiglu",
        (
            NetworkInput("gate", torch.float16, ((1, 11), (64, 11), (1024, 11))),
            NetworkInput("up", torch.float16, ((1, 11), (64, 11), (1024, 11))),
        ),
        args=lambda tensors: (1.702,),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_nvidia_builder_builds_a_plan_with_a_python_kernel(trt, trt_log, case):
    registry = trt.get_plugin_registry()
    registry.load_library(str(PY.LIBRARY.plugin_path()))
    with trt_log.capture() as records:
        plan, network = _build(trt, trt_log, registry, case)
    errors = [f"{r.severity}: {r.message}" for r in trt_log.errors(records)]
    assert plan is not None and plan.nbytes > 0 and not errors, errors
    outputs = [network.get_output(i) for i in range(network.num_outputs)]
    if case.op.endswith("liger_rms_norm"):
        assert [o.dtype for o in outputs] == [trt.bfloat16, trt.float32]
        assert len(outputs[1].shape) == 2
