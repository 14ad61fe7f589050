"""rotary_embedding (RoPE of one attention layer's queries, vLLM's token-major layout (tokens, heads, head_dim)): the
eager composite (Hugging Face's ``q * cos + rotate_half(q) * sin`` in fp32 on cos/sin gathered once per forward, as a
model does, outside the timing) vs torch.compile of it vs Liger-Kernel's RoPE (optional: ``pip install --no-deps
liger-kernel``; Triton; it rotates q and k in place together: given one key head beside the queries, judged by its
own bytes) vs our CUDA op (cos/sin cache shared, gathered in the kernel) vs the plugin's enqueue through the harness.
Bytes moved = read x + write y (+ the positions).

    python -m torchtrt_plugins.benchmarks.bench_rotary_embedding [--quick] [--dtypes bf16,fp16,fp32] [--csv PATH]
"""

from __future__ import annotations

import importlib.util
import sys

import torch

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.bench_rms_norm import BF16, FP16, FP32, needs_liger
from torchtrt_plugins.benchmarks.common import Case, Plan, Provider, needs_eager_kernel, needs_inductor
from torchtrt_plugins.ops.rotary_embedding import cos_sin_cache

ENTRY = torchtrt_plugins.get("rotary_embedding")
MAX_POSITION = 32768
BASE = 500000.0  # Llama 3's theta


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    tokens, heads, head_dim = shape
    x = torch.randn(tokens, heads, head_dim, dtype=dtype, device=device)
    positions = torch.randint(0, MAX_POSITION, (tokens,), device=device)
    nbytes = 2 * x.numel() * x.element_size() + positions.numel() * positions.element_size()
    kwargs = {"rotary_dim": head_dim, "max_position": MAX_POSITION, "base": BASE, "is_neox": True}
    return Case("rotary_embedding", shape, dtype, device, (x, positions), kwargs, nbytes)


def _call(case: Case, x: torch.Tensor):
    positions = case.inputs[1]
    k = case.kwargs
    return lambda: torch.ops.torchtrt.rotary_embedding(
        x, positions, k["rotary_dim"], k["max_position"], k["base"], k["is_neox"]
    )


def expected(case: Case) -> torch.Tensor:
    x, positions = case.inputs
    return ENTRY.reference(x, positions, **case.kwargs)


def _cos_sin(case: Case) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token, cos and sin duplicated over both halves ((tokens, 1, head_dim), fp32): what Hugging Face's rotary
    module computes once per forward for every layer."""
    x, positions = case.inputs
    cos, sin = cos_sin_cache(MAX_POSITION, case.kwargs["rotary_dim"], BASE, x.device)[positions].chunk(2, dim=-1)
    return torch.cat((cos, cos), -1)[:, None, :], torch.cat((sin, sin), -1)[:, None, :]


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    xf = x.float()
    x1, x2 = xf.chunk(2, dim=-1)
    return (xf * cos + torch.cat((-x2, x1), dim=-1) * sin).to(x.dtype)


def eager_composite(case: Case):
    cos, sin = _cos_sin(case)
    x = case.inputs[0]
    return lambda: _rotate(x, cos, sin)


def inductor(case: Case):
    cos, sin = _cos_sin(case)
    x = case.inputs[0]
    compiled = common.compile_inductor(_rotate)
    return lambda: compiled(x, cos, sin)


def liger(case: Case):
    """Liger-Kernel's RoPE forward (Triton) on q = x (a view (1, heads, tokens, head_dim) of its token-major storage,
    which Liger reads in place) and one key head; it updates both in place, so each call rotates them again."""
    from liger_kernel.ops.rope import rope_forward

    x = case.inputs[0].clone()
    tokens, heads, head_dim = x.shape
    k = torch.randn(tokens, 1, head_dim, dtype=x.dtype, device=x.device)
    cos, sin = (t[:, 0, :][None] for t in _cos_sin(case))  # (1, tokens, head_dim)
    q4, k4 = x[None].transpose(1, 2), k[None].transpose(1, 2)
    return lambda: rope_forward(q4, k4, cos, sin)[0].transpose(1, 2)[0]


def liger_bytes(case: Case) -> int:
    tokens, heads, head_dim = case.shape
    return case.nbytes + 2 * tokens * head_dim * case.inputs[0].element_size()  # the key head, read and written


def needs_liger_rope(ctx: common.RunContext) -> str | None:
    if reason := needs_liger(ctx):
        return reason
    if importlib.util.find_spec("liger_kernel.ops.rope") is None:
        return "this liger-kernel has no ops.rope"
    return None


def torchtrt_op(case: Case):
    return _call(case, case.inputs[0])


PROVIDERS = [
    Provider("eager_composite", eager_composite),
    Provider("torch.compile", inductor, (needs_inductor,)),
    Provider("liger", liger, (needs_liger_rope, needs_inductor), nbytes=liger_bytes),
    Provider("torchtrt", torchtrt_op, (needs_eager_kernel(ENTRY),)),
    *common.plugin_enqueue_providers(ENTRY),
]

# (tokens, heads, head_dim): decode steps of one sequence and of a batch, prefill chunks, GQA key heads.
SMALL = ((1, 32, 128), (64, 32, 128), (256, 8, 128))
LARGE = ((4096, 32, 128), (8192, 8, 128), (16384, 32, 128), (32768, 32, 64))

BENCHMARK = common.Benchmark(
    name="rotary_embedding",
    make_case=make_case,
    providers=PROVIDERS,
    full=Plan(SMALL + LARGE, (BF16, FP16, FP32)),
    quick=Plan(((1, 32, 128), (4096, 32, 128), (16384, 32, 128)), (BF16,)),
    cpu=Plan(((1, 4, 64), (64, 8, 64)), (FP32, BF16)),
    cpu_quick=Plan(((16, 4, 64),), (FP32,)),
    expected=expected,
    tolerance=common.spec_tolerance(ENTRY.spec),
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
