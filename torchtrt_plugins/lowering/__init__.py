"""Lowering: rewrite known subgraphs of a model into ``torch.ops.torchtrt.*`` ops.

``lower(gm)`` runs the passes of ``PASSES``, in order, on a ``torch.fx.GraphModule`` (in place) and
records what it replaced in ``gm.meta["torchtrt_plugins_lowering"]`` (pass name -> count);
``lower_with_report`` also returns that report. Graphs from ``torch.export`` (``.module()``, before
or after ``run_decompositions()``) carry the dtypes and shapes the patterns need; a
``torch.fx.symbolic_trace`` graph needs ``example_inputs`` to get them.

``inductor_options()`` runs the same lowering, residual add included, inside ``torch.compile``'s default compiler
(``torch.compile(model, options=inductor_options())``; ``lowering.inductor``).

``register_with_torch_tensorrt()`` adds the lowering to Torch-TensorRT's post-lowering passes, so
``torch_tensorrt.compile`` and ``torch.compile(backend="tensorrt")`` use our ops unasked. Opt out
with ``TORCHTRT_PLUGINS_LOWERING=0`` in the environment or ``set_enabled(False)``; either turns
``lower`` into a no-op as well.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Sequence
from typing import Any

from torch.fx import GraphModule

from .. import _compat
from . import add_rms_norm, multi_scale_deformable_attention, multi_scale_roi_align, rms_norm
from ._fx import LoweringPass

__all__ = [
    "ENV_VAR",
    "META_KEY",
    "PASSES",
    "LoweringPass",
    "inductor_options",
    "is_enabled",
    "lower",
    "lower_with_report",
    "register_with_torch_tensorrt",
    "set_enabled",
    "torch_tensorrt_pass",
]

_LOGGER = logging.getLogger(__name__)

#: The passes ``lower`` runs, in this order.
PASSES: list[LoweringPass] = [rms_norm.PASS, multi_scale_roi_align.PASS, multi_scale_deformable_attention.PASS]

#: Run after ``PASSES`` with ``residual_add=True`` (and inside Torch-TensorRT): the residual add fused into the
#: norms they made, as the mutating ``add_rms_norm`` in its functionalized form. Not by default: torch 2.13's ONNX
#: exporter cannot translate that node (``auto_functionalized_v2`` with an op argument), so a graph lowered for
#: ONNX export must not hold it.
RESIDUAL_PASSES: list[LoweringPass] = [add_rms_norm.PASS]

#: Key of the report in ``gm.meta``.
META_KEY = "torchtrt_plugins_lowering"

#: Environment switch: ``0`` (or ``false``/``off``/``no``) turns lowering off.
ENV_VAR = "TORCHTRT_PLUGINS_LOWERING"

#: Where Torch-TensorRT keeps its post-lowering pass registry (``_aten_lowering_pass``).
TORCH_TENSORRT_PASSES_MODULE = "torch_tensorrt.dynamo.lowering.passes._aten_lowering_pass"

_enabled: bool | None = None


def set_enabled(enabled: bool | None) -> None:
    """Turn lowering on or off for this process; None goes back to what ``TORCHTRT_PLUGINS_LOWERING`` says."""
    global _enabled
    if enabled is not None and not isinstance(enabled, bool):
        raise TypeError(f"torchtrt_plugins.lowering.set_enabled: 'enabled' must be a bool or None, got {enabled!r}")
    _enabled = enabled


def is_enabled() -> bool:
    if _enabled is not None:
        return _enabled
    return os.environ.get(ENV_VAR, "1").strip().lower() not in ("0", "false", "off", "no")


def _propagate_fake_values(gm: GraphModule, example_inputs: Sequence[Any]) -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    FakeTensorProp(gm, FakeTensorMode(allow_non_fake_inputs=True)).propagate(*example_inputs)


def lower_with_report(
    gm: GraphModule, example_inputs: Sequence[Any] | None = None, *, residual_add: bool = False
) -> tuple[GraphModule, dict[str, int]]:
    """Run ``PASSES`` (and, ``residual_add``, ``RESIDUAL_PASSES``) on ``gm`` in place; ``(gm, {pass name: number
    of subgraphs replaced})``.

    ``example_inputs`` (tensors, or fake tensors) fill in dtypes and shapes first, for graphs
    without them (``torch.fx.symbolic_trace``); graphs from ``torch.export`` have them already.
    """
    if not isinstance(gm, GraphModule):
        raise TypeError(
            f"torchtrt_plugins.lower: 'gm' must be a torch.fx.GraphModule (for an ExportedProgram, pass "
            f"ep.module()), got {type(gm).__name__}"
        )
    if not is_enabled():
        _LOGGER.info("torchtrt_plugins lowering: off (%s=0 or set_enabled(False))", ENV_VAR)
        return gm, {}
    if example_inputs is not None:
        _propagate_fake_values(gm, example_inputs)
    passes = PASSES + (RESIDUAL_PASSES if residual_add else [])
    report = {lowering_pass.name: lowering_pass.run(gm) for lowering_pass in passes}
    if any(report.values()):
        gm.graph.lint()
        gm.recompile()
    gm.meta[META_KEY] = report
    replaced = ", ".join(f"{name} x{count}" for name, count in report.items() if count) or "nothing"
    _LOGGER.info("torchtrt_plugins lowering: replaced %s", replaced)
    return gm, report


def lower(gm: GraphModule, example_inputs: Sequence[Any] | None = None, *, residual_add: bool = False) -> GraphModule:
    """Rewrite known subgraphs of ``gm`` into our ops, in place; returns ``gm``. See ``lower_with_report``."""
    return lower_with_report(gm, example_inputs, residual_add=residual_add)[0]


def inductor_options() -> dict[str, Any]:
    """``torch.compile`` options that run our lowering inside inductor (``lowering.inductor``, imported on first
    use: importing inductor costs a second)."""
    from .inductor import inductor_options as options

    return options()


def torch_tensorrt_pass(gm: GraphModule, settings: Any = None) -> GraphModule:
    """``lower`` with the signature of a Torch-TensorRT lowering pass, ``(gm, settings) -> gm``.

    Where the networks Torch-TensorRT builds cannot take plugin layers (TensorRT-RTX), it leaves ``gm`` alone: our
    validators would send every op it adds to PyTorch, and each such op cuts the TensorRT engine in two (measured in
    the tt tier on a 2-layer Hugging Face Llama: 6 engines and 5 PyTorch segments with the rewrite, 1 engine
    without), while TensorRT runs the norm it left as it was itself.

    The residual-add rewrite (``add_rms_norm``) is not among its passes: that plugin aliases an output to an input,
    which TensorRT builds only with ``PreviewFeature.ALIASED_PLUGIN_IO_10_03`` set in the builder config, and
    Torch-TensorRT 2.13 does not set it (its engines with the plugin would not build; the tt tier's Hugging Face
    models were cut into several engines with it); ``lower(gm, residual_add=True)`` applies it where the caller
    builds the engine.
    """
    if reason := _compat.plugin_layers_unavailable():
        _compat.warn_plugin_layers_unavailable(reason)
        _LOGGER.info("torchtrt_plugins lowering: skipped inside Torch-TensorRT: %s", reason)
        return gm
    return lower(gm)


def register_with_torch_tensorrt() -> bool:
    """Add ``torch_tensorrt_pass`` first among Torch-TensorRT's post-lowering passes, once.

    First, so it sees ``aten._fused_rms_norm`` before Torch-TensorRT decomposes it. Returns False
    (and does nothing) when Torch-TensorRT is not installed.
    """
    if _compat.torch_tensorrt() is None:
        _LOGGER.debug("torchtrt_plugins lowering: Torch-TensorRT not importable; lowering pass not registered")
        return False
    passes = importlib.import_module(TORCH_TENSORRT_PASSES_MODULE)
    if torch_tensorrt_pass not in passes.ATEN_POST_LOWERING_PASSES.passes:
        passes._aten_lowering_pass(torch_tensorrt_pass, index=0)
    return True
