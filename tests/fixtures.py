"""Inputs and eager references the test tiers share (CUDA tensors from seeded generators, so every tier and
rerun sees the same values)."""

from __future__ import annotations

import torch


def cuda_generator(seed: int = 0) -> torch.Generator:
    return torch.Generator(device="cuda").manual_seed(seed)


def cuda_randn(shape, dtype: torch.dtype, seed: int = 0, *, scale: float = 1.0) -> torch.Tensor:
    """Normal values times ``scale`` (wide enough to survive an integer ``dtype``), then cast to ``dtype``."""
    x = torch.randn(shape, device="cuda", generator=cuda_generator(seed))
    return (x if scale == 1.0 else x * scale).to(dtype)


def rms_norm_inputs(shape, dtype: torch.dtype, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``x`` of ``shape`` and a weight near 1 for its last dimension, both ``dtype``."""
    g = cuda_generator(seed)
    x = torch.randn(shape, device="cuda", dtype=torch.float32, generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(shape[-1], device="cuda", generator=g)).to(dtype)
    return x, w


def rms_norm_eager(
    x: torch.Tensor, w: torch.Tensor, eps: float, tactic: int = 0, weight_offset: float = 0.0
) -> torch.Tensor:
    """The eager op; tactic 0 is its own heuristic, as in the plugin."""
    if tactic == 0:
        return torch.ops.torchtrt.rms_norm(x, w, eps, weight_offset)
    return torch.ops.torchtrt.rms_norm_tactic(x, w, eps, weight_offset, tactic=tactic)


def compile_trt(model: torch.nn.Module, inputs: list) -> torch.nn.Module:
    """``torch_tensorrt.compile`` (dynamo) with blocks of any size and the model's own dtypes (explicit typing)."""
    import torch_tensorrt

    return torch_tensorrt.compile(model, ir="dynamo", inputs=inputs, min_block_size=1, use_explicit_typing=True)


def assert_no_fallback(trt_module: torch.nn.Module, op: str) -> None:
    """The compiled module runs a TensorRT engine and no PyTorch submodule (``op`` did not fall back)."""
    names = [n for n, _ in trt_module.named_children()]
    assert any("_run_on_acc" in n for n in names), f"no TensorRT submodule in {names}"
    assert not any("_run_on_gpu" in n for n in names), f"{op} fell back to PyTorch: {names}"


class GraphRecorder:
    """A ``torch.compile`` backend that keeps every graph it is handed (and the call targets in it, read on arrival)
    and runs it as it is, or through inductor."""

    def __init__(self, inductor: bool = False):
        self.inductor = inductor
        self.graphs: list[torch.fx.GraphModule] = []
        self.targets: list[str] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs):
        self.graphs.append(gm)
        self.targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        if self.inductor:
            from torch._inductor.compile_fx import compile_fx

            return compile_fx(gm, example_inputs)
        return gm


def broken_plugins(build):
    """The harness's broken test plugins of ``build`` (built from a checkout's tests/harness_plugins), or skip: a
    wheel carries none."""
    import pytest

    if build.broken_plugins is None:
        pytest.skip("the broken test plugins are built from a checkout's tests/harness_plugins; a wheel carries none")
    return build.broken_plugins
