"""rms_norm_fp8 (RMSNorm quantized to FP8 e4m3 by a per-tensor scale, what a serving stack runs before an FP8 matmul):
eager ``F.rms_norm`` then ``(y / scale).clamp(-448, 448).to(float8_e4m3fn)`` vs torch.compile of the same (inductor
fuses the two) vs Liger-Kernel's RMSNorm (optional: ``pip install --no-deps liger-kernel``) and the same cast vs our
CUDA op (each tactic) vs the plugin's enqueue through the harness. rms_norm_int8 runs the same kernels with another
output stage. Bytes moved = read x + read weight + write one byte per element.

The peers round the norm to x's dtype before dividing (two roundings); ours quantizes the fp32 norm (one): outputs
agree within one e4m3 step.

    python -m torchtrt_plugins.benchmarks.bench_rms_norm_fp8 [--quick] [--dtypes bf16,fp16,fp32] [--csv PATH]
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.bench_rms_norm import BF16, FP16, FP32, LARGE, SMALL, needs_liger
from torchtrt_plugins.benchmarks.common import Case, Plan, Provider, needs_cuda, needs_eager_kernel, needs_inductor

ENTRY = torchtrt_plugins.get("rms_norm_fp8")
EPS = 1e-6
FP8_MAX = 448.0


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    rows, hidden = shape
    x = torch.randn(rows, hidden, dtype=dtype, device=device)
    weight = torch.rand(hidden, dtype=dtype, device=device) + 0.5
    scale = torch.tensor(4.0 / FP8_MAX, device=device)  # |y| up to ~4 uses the range (randn rows: rms ~1)
    nbytes = x.numel() * (x.element_size() + 1) + weight.numel() * weight.element_size()
    return Case("rms_norm_fp8", shape, dtype, device, (x, weight, scale), {"eps": EPS}, nbytes)


def expected(case: Case) -> torch.Tensor:
    return ENTRY.reference(*case.inputs, **case.kwargs)


def _quantize(y: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return (y.float() / scale).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)


def _eager(x: torch.Tensor, weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return _quantize(F.rms_norm(x, (x.shape[-1],), weight, EPS), scale)


def eager_composite(case: Case):
    x, weight, scale = case.inputs
    return lambda: _eager(x, weight, scale)


def inductor(case: Case):
    x, weight, scale = case.inputs
    compiled = common.compile_inductor(_eager)
    return lambda: compiled(x, weight, scale)


def liger(case: Case):
    """Liger-Kernel's RMSNorm forward (Triton, fp32 throughout, cast back once), then the cast to FP8."""
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    x, weight, scale = case.inputs
    return lambda: _quantize(LigerRMSNormFunction.apply(x, weight, EPS, 0.0, "gemma", False), scale)


def torchtrt_op(case: Case):
    x, weight, scale = case.inputs
    return lambda: torch.ops.torchtrt.rms_norm_fp8(x, weight, scale, EPS)


def torchtrt_tactic(tactic: int):
    def factory(case: Case):
        x, weight, scale = case.inputs
        return lambda: torch.ops.torchtrt.rms_norm_fp8_tactic(x, weight, scale, EPS, tactic=tactic)

    return factory


PROVIDERS = [
    Provider("eager_composite", eager_composite),
    Provider("torch.compile", inductor, (needs_inductor,)),
    Provider("liger", liger, (needs_liger, needs_inductor)),
    Provider("torchtrt", torchtrt_op, (needs_eager_kernel(ENTRY),)),
    *(
        Provider(f"torchtrt[{t.name}]", torchtrt_tactic(t.value), (needs_cuda, needs_eager_kernel(ENTRY)))
        for t in ENTRY.spec.tactics
    ),
    *common.plugin_enqueue_providers(ENTRY),
]


def _tolerance(dtype: torch.dtype) -> tuple[float, float]:
    tol = ENTRY.spec.tolerance(torch.float8_e4m3fn)  # the output's, whatever x's dtype
    return tol.atol, tol.rtol


BENCHMARK = common.Benchmark(
    name=ENTRY.spec.name,
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan(SMALL + LARGE, (BF16, FP16, FP32)),
    quick=Plan(((8, 4096), (4096, 4096), (16384, 8192)), (BF16,)),
    cpu=Plan(SMALL, (FP32, BF16)),
    cpu_quick=Plan(((64, 1024), (4096, 512)), (FP32,)),
    expected=expected,
    tolerance=_tolerance,
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
