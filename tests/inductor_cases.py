"""Models with ops no converter takes, for the inductor_plugins tests of every tier (cpu, rtx, tt, gpu). ``LongTail``
ships with the Inductor switch's benchmark (``torchtrt_plugins.benchmarks.models``)."""

from __future__ import annotations

import torch

from torchtrt_plugins.benchmarks.models import LongTail  # noqa: F401  (the tiers' long-tail model)

#: What the cpu and rtx tiers' stand-in for Torch-TensorRT's converter registry has no converter for.
UNSUPPORTED = {
    "aten.special_erfcx.default",
    "aten.logcumsumexp.default",
    "aten.cummax.default",
    "aten.bucketize.Tensor",
    "aten.mul.Tensor",
}


def convertible(node: torch.fx.Node) -> bool:
    return str(node.target) not in UNSUPPORTED


class Unsupported(torch.nn.Module):
    """erfcx * weight -> cummax: one segment (a weight lifted to an input, a tuple-valued node); relu, the int64 index
    cast and the matmul (convertible) around it."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.linspace(0.5, 1.5, 32))

    def forward(self, x, y):
        values, indices = torch.cummax(torch.special.erfcx(x) * self.weight, 1)
        return values.relu() @ y, indices.float()


def unsupported_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(8, 32, generator=generator), torch.randn(32, 8, generator=generator)


def exported(model: torch.nn.Module, *inputs: torch.Tensor, **kwargs) -> torch.fx.GraphModule:
    return torch.export.export(model, inputs, **kwargs).run_decompositions().module()


def replaced_unsupported() -> tuple[torch.fx.GraphModule, dict, tuple[torch.Tensor, torch.Tensor]]:
    """The ``Unsupported`` model's graph with its segment replaced (the stand-in registry), the report, the inputs."""
    from torchtrt_plugins import inductor_plugins

    inputs = unsupported_inputs()
    gm = exported(Unsupported().eval(), *inputs)
    return gm, inductor_plugins.replace_segments(gm, convertible), inputs


#: The batch of the dynamic-shape cases: Torch-TensorRT's ``Input(min_shape, opt_shape, max_shape)`` over it.
BATCH_MIN, BATCH_OPT, BATCH_MAX = 1, 8, 64


def batch_dim() -> torch.export.Dim:
    return torch.export.Dim("batch", min=BATCH_MIN, max=BATCH_MAX)


def replaced_dynamic_unsupported() -> tuple[torch.fx.GraphModule, dict, tuple[torch.Tensor, torch.Tensor]]:
    """``replaced_unsupported`` with a symbolic batch (``x``'s dim 0)."""
    from torchtrt_plugins import inductor_plugins

    inputs = unsupported_inputs()
    gm = exported(Unsupported().eval(), *inputs, dynamic_shapes=({0: batch_dim()}, None))
    return gm, inductor_plugins.replace_segments(gm, convertible), inputs


class WithIntermediates(torch.nn.Module):
    """One segment whose kernels pass intermediates between them (a cumsum and a row sum, both over the batch)."""

    def forward(self, x):
        a = torch.special.erfcx(x)
        return (torch.cumsum(a, 0) * a.sum(0)).sum(1)


#: What the stand-in registry has no converter for in ``BoolEdges``.
BOOL_EDGES_UNSUPPORTED = {"aten.isin.Tensor_Tensor", "aten.cummin.default", "aten.mul.Tensor"}


class BoolEdges(torch.nn.Module):
    """Bool tensors at both edges of segments (GroundingDino's text masks): ``isin`` gives a bool that a convertible
    ``where`` takes, and a convertible ``gt`` gives one that ``mul`` takes before ``cummin``."""

    def __init__(self):
        super().__init__()
        self.register_buffer("special_tokens", torch.tensor([1, 3, 5]))

    def forward(self, ids, y):
        special = torch.isin(ids, self.special_tokens)
        positive = torch.gt(y, 0.0)
        return torch.where(special, y, -y), torch.cummin(y * positive, 1)[0]


def bool_edges_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor([[1, 2, 3, 4, 5, 6]]), torch.randn(1, 6, generator=torch.Generator().manual_seed(0))


def replaced_bool_edges() -> tuple[torch.fx.GraphModule, dict, tuple[torch.Tensor, torch.Tensor]]:
    """``BoolEdges``' graph (``isin`` left whole, as Torch-TensorRT sees it) with its segments replaced."""
    from torchtrt_plugins import inductor_plugins

    inputs = bool_edges_inputs()
    gm = torch.export.export(BoolEdges().eval(), inputs).run_decompositions({}).module()
    report = inductor_plugins.replace_segments(gm, lambda n: str(n.target) not in BOOL_EDGES_UNSUPPORTED)
    return gm, report, inputs
