"""A Llama-style decoder block end to end: eager vs eager with our ops vs torch.compile (with and
without our ops) vs TensorRT engines. Shapes are batch x seq x hidden; times only (no GB/s).

The block is ``torchtrt_plugins.benchmarks.models.LlamaDecoderBlock``. Each provider with our ops has a twin
without them that runs the same form of the model, so the pair differs by our ops alone:

- ``eager`` / ``eager+torchtrt``: the ``nn.Module``, its RMSNorm modules replaced by ones calling
  ``torch.ops.torchtrt.rms_norm`` (what an eager user does);
- ``eager exported`` / ``eager exported+torchtrt``: the ``torch.export`` GraphModule, rewritten by
  ``torchtrt_plugins.lowering.lower`` (its default: the norms);
- ``torch.compile`` / ``torch.compile+torchtrt``: inductor on the ``nn.Module``, with our lowering as its
  post-grad pass (``lowering.inductor_options()``) for the second.

    python -m torchtrt_plugins.benchmarks.bench_model [--quick] [--dtypes bf16] [--csv PATH]
"""

from __future__ import annotations

import copy
import importlib
import sys
from typing import Any

import torch
from torch import nn

import torchtrt_plugins
from torchtrt_plugins.benchmarks import common
from torchtrt_plugins.benchmarks.common import (
    Case,
    Plan,
    Provider,
    Skip,
    needs_cuda,
    needs_eager_kernel,
    needs_inductor,
    needs_tensorrt,
)
from torchtrt_plugins.benchmarks.models import LlamaDecoderBlock

OP = "decoder_block"
HEAD_DIM = 64
EPS = 1e-6
#: The ops the lowered block calls.
RMS_NORM = torchtrt_plugins.get("rms_norm")
ADD_RMS_NORM = torchtrt_plugins.get("add_rms_norm")


class TorchtrtRMSNorm(nn.Module):
    def __init__(self, weight: torch.Tensor, eps: float):
        super().__init__()
        self.weight = nn.Parameter(weight.detach().clone())
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.torchtrt.rms_norm(x, self.weight.to(x.dtype), self.eps)


def dims(hidden: int) -> tuple[int, int]:
    """Heads and the SwiGLU width (8/3 hidden, rounded up to 64) for a hidden size, as in Llama."""
    return hidden // HEAD_DIM, -(-8 * hidden // 3 // 64) * 64


def build_block(hidden: int) -> nn.Module:
    heads, intermediate = dims(hidden)
    return LlamaDecoderBlock(hidden_size=hidden, num_heads=heads, intermediate_size=intermediate, eps=EPS)


def make_case(shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Case:
    batch, seq, hidden = shape
    torch.manual_seed(0)
    block = build_block(hidden).to(device=device, dtype=dtype).eval()
    for module in block.modules():  # RMSNorm weights of ones would hide a weight bug
        if "RMSNorm" in type(module).__name__ and isinstance(getattr(module, "weight", None), torch.Tensor):
            with torch.no_grad():
                module.weight.uniform_(0.5, 1.5)
    x = torch.randn(batch, seq, hidden, dtype=dtype, device=device)
    return Case(OP, shape, dtype, device, (block, x))


def _replace_norms_by_hand(block: nn.Module) -> tuple[nn.Module, int]:
    block = copy.deepcopy(block)
    replaced = 0
    for parent in list(block.modules()):
        for name, child in list(parent.named_children()):
            eps = getattr(child, "variance_epsilon", getattr(child, "eps", None))
            if "RMSNorm" in type(child).__name__ and isinstance(getattr(child, "weight", None), torch.Tensor):
                setattr(parent, name, TorchtrtRMSNorm(child.weight, float(eps if eps is not None else EPS)))
                replaced += 1
    return block, replaced


def with_our_ops(block: nn.Module, x: torch.Tensor, *, residual_add: bool = True) -> nn.Module:
    """The exported block rewritten by ``torchtrt_plugins.lowering`` (``residual_add``: residual adds included)."""
    lowering = importlib.import_module("torchtrt_plugins.lowering")
    with torch.no_grad():
        gm = torch.export.export(block, (x,)).module()
    with common.our_lowering(True):  # even where TORCHTRT_PLUGINS_LOWERING=0
        gm, report = lowering.lower_with_report(gm, residual_add=residual_add)
    if not sum(report.values()):
        raise Skip("torchtrt_plugins.lowering matched nothing in the exported block")
    common.note(f"decoder_block +torchtrt: torchtrt_plugins.lowering replaced {report}")
    return gm


def with_our_norms(block: nn.Module) -> nn.Module:
    """The block with its RMSNorm modules replaced by ones calling ``torch.ops.torchtrt.rms_norm``."""
    replaced, count = _replace_norms_by_hand(block)
    if not count:
        raise Skip("the block has no RMSNorm modules to replace")
    return replaced


def _inference(fn):
    def run():
        with torch.inference_mode():
            return fn()

    return run


def eager(case: Case):
    block, x = case.inputs
    return _inference(lambda: block(x))


def eager_exported(case: Case):
    """The exported block as it is, without our lowering: the twin of ``eager exported+torchtrt`` (an exported
    module's Python call path costs host time of its own)."""
    block, x = case.inputs
    with torch.no_grad():
        gm = torch.export.export(block, (x,)).module()
    return _inference(lambda: gm(x))


def eager_ours(case: Case):
    block, x = case.inputs
    model = with_our_norms(block)
    return _inference(lambda: model(x))


def eager_exported_ours(case: Case):
    block, x = case.inputs
    # lower()'s default, without the residual add: run eagerly, its functionalized form (auto_functionalized_v2)
    # is a Python higher-order op that copies the residual first, costing more host time than the add it saves.
    lowered = with_our_ops(block, x, residual_add=False)
    return _inference(lambda: lowered(x))


def compiled(ours: bool):
    def factory(case: Case):
        block, x = case.inputs
        # Inductor compiles the nn.Module in both cases: an exported module compiles to a slower program by itself
        # (measured on H100, bf16 8x512x2048: 0.955 ms vs 0.758 ms for the same block), which would blur what our
        # ops change. Ours: the lowering runs as inductor's post-grad pass, on the graph inductor compiles.
        if not ours:
            model = common.compile_inductor(block)
        else:
            lowering = importlib.import_module("torchtrt_plugins.lowering")
            model = common.compile_inductor(block, options=lowering.inductor_options())
            with common.our_lowering(True):  # compiles now, even where TORCHTRT_PLUGINS_LOWERING=0
                _inference(lambda: model(x))()
        return _inference(lambda: model(x))

    return factory


def tensorrt(ours: bool):
    def factory(case: Case):
        block, x = case.inputs
        engine = common.compile_tensorrt(with_our_ops(block, x) if ours else block, [x], lowering=ours)
        return _inference(lambda: engine(x))

    return factory


PROVIDERS = [
    Provider("eager", eager),
    Provider("eager exported", eager_exported),
    Provider("eager+torchtrt", eager_ours, (needs_eager_kernel(RMS_NORM),)),
    Provider("eager exported+torchtrt", eager_exported_ours, (needs_eager_kernel(RMS_NORM),)),
    Provider("torch.compile", compiled(ours=False), (needs_inductor,)),
    Provider(
        "torch.compile+torchtrt",
        compiled(ours=True),
        (needs_inductor, needs_eager_kernel(RMS_NORM), needs_eager_kernel(ADD_RMS_NORM)),
    ),
    Provider("tensorrt", tensorrt(ours=False), (needs_cuda, needs_tensorrt)),
    Provider("tensorrt+torchtrt", tensorrt(ours=True), (needs_cuda, needs_tensorrt)),
]


def expected(case: Case) -> Any:
    block, x = case.inputs
    with torch.inference_mode():
        return block(x)


def tolerance(dtype: torch.dtype) -> tuple[float, float]:
    # A whole block rounds many times; this flags a wrong result, not rounding differences.
    return (1e-3, 1e-3) if dtype == torch.float32 else (1e-1, 5e-2)


BENCHMARK = common.Benchmark(
    name=OP,
    make_case=make_case,
    providers=PROVIDERS,
    # One dtype: at model level fp16 tells nothing bf16 does not, and each compile costs ~30 s.
    full=Plan(((1, 128, 2048), (8, 512, 2048), (16, 2048, 2048)), (torch.bfloat16,)),
    quick=Plan(((1, 128, 2048), (8, 512, 2048)), (torch.bfloat16,)),
    cpu=Plan(((1, 32, 256), (2, 128, 256), (4, 128, 512)), (torch.float32,)),
    cpu_quick=Plan(((1, 32, 256), (2, 64, 256)), (torch.float32,)),
    expected=expected,
    tolerance=tolerance,
)


if __name__ == "__main__":
    sys.exit(common.script_main(BENCHMARK))
