"""rms_norm: eager composite vs F.rms_norm vs torch.compile vs Liger-Kernel's RMSNorm (optional: ``pip install
--no-deps liger-kernel``; Triton) vs our CUDA op (each tactic) vs
the plugin's enqueue through the harness vs TensorRT engines. Bytes moved = read x + write y + read weight.

    python -m torchtrt_plugins.benchmarks.bench_rms_norm [--quick] [--dtypes bf16,fp16,fp32] [--csv PATH]
        [--timer graph] [--repeats 5] [--sizes 1x4096,8x4096]
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.common import (
    Case,
    Plan,
    Provider,
    needs_cuda,
    needs_eager_kernel,
    needs_inductor,
    needs_tensorrt,
    tensorrt_engine,
)

ENTRY = torchtrt_plugins.get("rms_norm")
EPS = 1e-6
BF16, FP16, FP32 = torch.bfloat16, torch.float16, torch.float32


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    rows, hidden = shape
    x = torch.randn(rows, hidden, dtype=dtype, device=device)
    weight = torch.rand(hidden, dtype=dtype, device=device) + 0.5
    nbytes = (2 * x.numel() + weight.numel()) * x.element_size()
    return Case("rms_norm", shape, dtype, device, (x, weight), {"eps": EPS}, nbytes)


def expected(case: Case) -> torch.Tensor:
    return ENTRY.reference(*case.inputs, **case.kwargs)


def eager_composite(case: Case):
    x, weight = case.inputs
    return lambda: ENTRY.reference(x, weight, EPS)


def functional(case: Case):
    x, weight = case.inputs
    return lambda: F.rms_norm(x, (x.shape[-1],), weight, EPS)


def inductor(case: Case):
    x, weight = case.inputs
    compiled = common.compile_inductor(ENTRY.reference)
    return lambda: compiled(x, weight, EPS)


def needs_liger(ctx: common.RunContext) -> str | None:
    if ctx.device.type != "cuda":
        return "Liger-Kernel runs on CUDA GPUs only (this run is on CPU)"
    if importlib.util.find_spec("liger_kernel") is None:
        return "liger-kernel is not installed (pip install --no-deps liger-kernel; it needs triton)"
    return None


def liger(case: Case):
    """Liger-Kernel's RMSNorm forward (Triton), casting mode "gemma": everything in fp32, cast back once, as our
    reference does; offset 0 (y = x * rstd * weight)."""
    from liger_kernel.ops.rms_norm import LigerRMSNormFunction

    x, weight = case.inputs
    return lambda: LigerRMSNormFunction.apply(x, weight, EPS, 0.0, "gemma", False)


def torchtrt_op(case: Case):
    x, weight = case.inputs
    return lambda: torch.ops.torchtrt.rms_norm(x, weight, EPS)


def torchtrt_tactic(tactic: int):
    def factory(case: Case):
        x, weight = case.inputs
        return lambda: torch.ops.torchtrt.rms_norm_tactic(x, weight, EPS, tactic=tactic)

    return factory


def _plugin_module(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return torch.ops.torchtrt.rms_norm(x, weight, EPS)


def _composite_module(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    return ENTRY.reference(x, weight, EPS)


PROVIDERS = [
    Provider("eager_composite", eager_composite),
    Provider("F.rms_norm", functional),
    Provider("torch.compile", inductor, (needs_inductor,)),
    Provider("liger", liger, (needs_liger, needs_inductor)),
    Provider("torchtrt", torchtrt_op, (needs_eager_kernel(ENTRY),)),
    *(
        Provider(f"torchtrt[{t.name}]", torchtrt_tactic(t.value), (needs_cuda, needs_eager_kernel(ENTRY)))
        for t in ENTRY.spec.tactics
    ),
    *common.plugin_enqueue_providers(ENTRY),
    Provider("tensorrt[plugin]", tensorrt_engine(_plugin_module, lowering=True), (needs_cuda, needs_tensorrt)),
    Provider("tensorrt[composite]", tensorrt_engine(_composite_module, lowering=False), (needs_cuda, needs_tensorrt)),
]

# Latency-bound: one decode token to a small batch (hidden 4096), and a prefill-sized 1024x2048.
SMALL = ((1, 4096), (8, 4096), (128, 4096), (64, 1024), (1024, 2048), (4096, 512))
# >= 64 MB moved from 4096x4096 bf16 (64 MiB) up to 32768x16384 (2 GiB in bf16); hidden 12288 (no power of two)
# and 128 (a head dimension: 100000 rows of 256 bytes).
LARGE = ((4096, 4096), (4096, 12288), (100000, 128), (16384, 8192), (65536, 4096), (32768, 16384))


def norm_benchmark(
    entry: Any, make_case: Callable, providers: list[Provider], expected: Callable, quick: tuple[tuple[int, int], ...]
) -> common.Benchmark:
    """A norm op's benchmark (rms_norm, add_rms_norm): the same sizes and dtypes for each, so their rows line up, and
    the op's declared tolerances; ``quick`` is its quick GPU plan's sizes (bf16)."""
    return common.Benchmark(
        name=entry.spec.name,
        make_case=make_case,
        providers=providers,
        full=Plan(SMALL + LARGE, (BF16, FP16, FP32)),
        quick=Plan(quick, (BF16,)),
        cpu=Plan(SMALL, (FP32, BF16)),
        cpu_quick=Plan(((64, 1024), (4096, 512)), (FP32,)),
        expected=expected,
        tolerance=common.spec_tolerance(entry.spec),
    )


BENCHMARK = norm_benchmark(ENTRY, make_case, PROVIDERS, expected, quick=((64, 1024), (4096, 4096), (16384, 8192)))


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
