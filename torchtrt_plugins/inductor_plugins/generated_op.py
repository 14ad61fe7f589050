"""A segment as a generated op: a ``torch.library`` op declared with ``torchtrt_plugins.declare`` like any other.

Its schema takes the segment's inputs and returns its outputs; its fake kernel gives the outputs the segment gave on
the graph's fake tensors, each dimension an expression of its input sizes (Inductor's, over the segment's size
symbols), which the declaration's shape rules compile into the plugin as TensorRT shape expressions; its CPU kernel
and its reference are the segment run in PyTorch; its launcher is generated (``launcher``) over the cubins of
Inductor's kernels for the segment (``inductor_code``), in a plugin library of its own; its workspace function lays
out Inductor's intermediates at the sizes it is given (the profile's maximum, from ``getWorkspaceSize``). The op's
name is a digest of the segment's code, shapes (size symbols and their ranges) and dtypes and of the generator's
sources, so the same segment generates the same op (once per process, its library built once into the cache).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from .. import _build
from ..declaration import Declaration
from ..declare import declare
from ..kernels.compile import parse_archs, with_ptx
from ..sdk.library import PluginLibrary
from . import inductor_code, launcher
from .segments import Segment, carried, on_device, segment_module

NAMESPACE = "ttp_inductor"

_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")
_DECLARED: dict[str, Declaration] = {}


def _metas(nodes: Sequence[torch.fx.Node]) -> list[torch.Tensor]:
    return [carried(n.meta["val"]) for n in nodes]


def digest(module: torch.fx.GraphModule, inputs: Sequence[torch.Tensor]) -> str:
    """What the generated op depends on: the segment's code, its inputs' shapes and dtypes, torch and Triton, whether
    its kernels carry PTX, and this package's sources (its library's build is cached under the op's name)."""
    import triton

    described = [module.code, *inductor_code.describe_inputs(inputs), torch.__version__, triton.__version__]
    described.append(f"ptx={with_ptx()}")
    described += [path.read_text() for path in sorted(Path(__file__).parent.glob("*.py"))]
    return hashlib.sha256("|".join(described).encode()).hexdigest()[:16]


class _SegmentRunner:
    """The segment in PyTorch, its factory nodes on the device of the call's first input."""

    def __init__(self, module: torch.fx.GraphModule):
        self.module = module
        self.modules: dict[torch.device, torch.fx.GraphModule] = {}

    def __call__(self, *inputs: torch.Tensor) -> Any:
        device = inputs[0].device if inputs else torch.device("cpu")
        if device not in self.modules:
            self.modules[device] = on_device(self.module, device)
        results = tuple(r.contiguous() for r in self.modules[device](*inputs))
        return results[0] if len(results) == 1 else results


def declare_segment(segment: Segment) -> Declaration:
    """The generated op of ``segment`` (defined, its kernels compiled and declared on first use). Raises
    :class:`inductor_code.Refused` where Inductor's code for it cannot be a plugin."""
    base = segment_module(segment)
    module = on_device(base, torch.device("cuda"))
    inputs, outputs = _metas(segment.inputs), _metas(segment.outputs)
    name = f"segment_{digest(module, inputs)}"
    qualname = f"{NAMESPACE}::{name}"
    if qualname in _DECLARED:
        return _DECLARED[qualname]
    compiled = inductor_code.compile_segment(module, inputs, parse_archs(_build.cuda_archs()))
    symbol = f"{NAMESPACE}::{name}"
    dtypes = [t.dtype for t in inputs], [t.dtype for t in outputs]
    source = launcher.launcher_source(compiled, qualname, symbol, f"{symbol}_workspace", *dtypes)
    directory = _build.cache_dir() / "inductor_plugins"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name}.cu"
    path.write_text(source)

    arguments = ", ".join(f"Tensor input{i}" for i in range(len(inputs)))
    returns = "Tensor" if len(outputs) == 1 else "(" + ", ".join("Tensor" for _ in outputs) + ")"
    _LIBRARY.define(f"{name}({arguments}) -> {returns}")
    runner = _SegmentRunner(base)
    _LIBRARY.impl(name, runner, "CPU")

    def fake(*args: torch.Tensor) -> Any:
        # Each output dim an expression of the sizes of the inputs that hold the segment's size symbols; a static
        # input size is not checked here: the launcher refuses other sizes at run time, naming the generated ones.
        for i, (arg, meta) in enumerate(zip(args, inputs)):
            if arg.dim() != meta.dim():
                raise ValueError(f"{qualname}: input{i} must be of rank {meta.dim()} (shape {tuple(meta.shape)})")
        results = tuple(
            torch.empty(
                [inductor_code.evaluate(d, compiled.symbols, args) for d in shape], dtype=o.dtype, device=args[0].device
            )
            for shape, o in zip(compiled.output_shapes, outputs)
        )
        return results[0] if len(results) == 1 else results

    torch.library.register_fake(qualname, fake, lib=_LIBRARY)
    declaration = declare(
        qualname,
        library=PluginLibrary(f"inductor_{name}", sources=[path]),
        launcher=symbol,
        workspace=f"{symbol}_workspace",
        dtypes={f"input{i}": (t.dtype,) for i, t in enumerate(inputs)},
        reference=runner,
        doc=f"Inductor's kernels for {', '.join(n.name for n in segment.nodes)} ({len(compiled.launches)} launches)",
    )
    declaration.compiled_segment = compiled
    _DECLARED[qualname] = declaration
    return declaration
