"""add_rms_norm (residual add + RMSNorm, residual updated in place): the unfused eager ops vs torch.compile of them
(inductor fuses the two) vs Liger-Kernel's fused add + RMSNorm (optional: ``pip install --no-deps liger-kernel``;
Triton; it writes the sum to a new tensor) vs our CUDA op. Bytes moved = read x, residual and weight + write y and
the residual.

    python -m torchtrt_plugins.benchmarks.bench_add_rms_norm [--quick] [--dtypes bf16,fp16,fp32] [--csv PATH]
"""

from __future__ import annotations

import importlib.util
import sys

import torch

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.bench_rms_norm import needs_liger, norm_benchmark
from torchtrt_plugins.benchmarks.common import Case, Provider, needs_eager_kernel, needs_inductor

ENTRY = torchtrt_plugins.get("add_rms_norm")
EPS = 1e-6


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    rows, hidden = shape
    x = torch.randn(rows, hidden, dtype=dtype, device=device)
    residual = torch.randn(rows, hidden, dtype=dtype, device=device)
    weight = torch.rand(hidden, dtype=dtype, device=device) + 0.5
    nbytes = (4 * x.numel() + weight.numel()) * x.element_size()
    return Case("add_rms_norm", shape, dtype, device, (x, residual, weight), {"eps": EPS}, nbytes)


def expected(case: Case) -> torch.Tensor:
    x, residual, weight = case.inputs
    return ENTRY.reference(x, residual.clone(), weight, EPS)


def _unfused(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    residual.add_(x)
    return torchtrt_plugins.get("rms_norm").reference(residual, weight, EPS)


# Each provider updates a residual of its own (a copy made before timing), so the output check sees the case's.
def eager_composite(case: Case):
    x, residual, weight = case.inputs
    residual = residual.clone()
    return lambda: _unfused(x, residual, weight)


def inductor(case: Case):
    x, residual, weight = case.inputs
    residual = residual.clone()
    compiled = common.compile_inductor(_unfused)
    return lambda: compiled(x, residual, weight)


def liger(case: Case):
    """Liger-Kernel's fused add + RMSNorm forward (Triton), casting mode "gemma" (fp32 throughout, as ours)."""
    from liger_kernel.ops.fused_add_rms_norm import LigerFusedAddRMSNormFunction

    x, residual, weight = case.inputs
    residual = residual.clone()
    return lambda: LigerFusedAddRMSNormFunction.apply(x, residual, weight, EPS, 0.0, "gemma", False)[0]


def needs_liger_fused(ctx: common.RunContext) -> str | None:
    if reason := needs_liger(ctx):
        return reason
    if importlib.util.find_spec("liger_kernel.ops.fused_add_rms_norm") is None:
        return "this liger-kernel has no fused_add_rms_norm (0.6.2 and later do)"
    return None


def torchtrt_op(case: Case):
    x, residual, weight = case.inputs
    residual = residual.clone()
    return lambda: torch.ops.torchtrt.add_rms_norm(x, residual, weight, EPS)


PROVIDERS = [
    Provider("eager_composite", eager_composite),
    Provider("torch.compile", inductor, (needs_inductor,)),
    Provider("liger", liger, (needs_liger_fused, needs_inductor)),
    Provider("torchtrt", torchtrt_op, (needs_eager_kernel(ENTRY),)),
]

BENCHMARK = norm_benchmark(
    ENTRY, make_case, PROVIDERS, expected, quick=((8, 4096), (4096, 512), (4096, 4096), (16384, 8192))
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
