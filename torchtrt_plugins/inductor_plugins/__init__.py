"""Inductor plugins: each segment of a model Torch-TensorRT would run in PyTorch becomes one plugin layer of
Inductor-generated Triton kernels, so the model stays one engine (opt-in; docs/inductor_plugins.md).

    TORCHTRT_PLUGINS_INDUCTOR=1        # or torchtrt_plugins.inductor_plugins.enable()

With the switch on, :func:`torch_tensorrt_pass` runs last among Torch-TensorRT's post-lowering passes, before it
partitions: it finds the groups of nodes TensorRT has no converter for (``segments``), and replaces each by one call
of a generated op (``generated_op``): a ``declare()``d op whose launcher runs Inductor's kernels for the segment,
compiled on this machine with no GPU needed (``inductor_code``, ``launcher``), over symbolic sizes where the graph
has them (a dynamic batch: one op for the profile's whole range). What is refused stays in PyTorch, with the reason
logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch.fx import GraphModule, Node

from .. import _compat

__all__ = [
    "ENV_VAR",
    "disable",
    "enable",
    "is_enabled",
    "plugin_libraries",
    "register_with_torch_tensorrt",
    "replace_segments",
    "switched",
    "save_plugin_libraries",
]

_LOGGER = logging.getLogger(__name__)

#: Environment switch: ``1`` (or ``true``/``on``/``yes``) turns the pass on; off by default.
ENV_VAR = "TORCHTRT_PLUGINS_INDUCTOR"

_enabled: bool | None = None


def is_enabled() -> bool:
    if _enabled is not None:
        return _enabled
    return os.environ.get(ENV_VAR, "0").strip().lower() in ("1", "true", "on", "yes")


def enable() -> bool:
    """Turn the pass on for this process and register it with Torch-TensorRT; False when that is not installed."""
    global _enabled
    _enabled = True
    return register_with_torch_tensorrt()


def disable() -> None:
    global _enabled
    _enabled = False


@contextlib.contextmanager
def switched(on: bool) -> Iterator[None]:
    """The switch on (registering the pass) or off while this is entered; then as it was, environment included."""
    global _enabled
    before = _enabled
    if on:
        enable()
    else:
        disable()
    try:
        yield
    finally:
        _enabled = before


_ATEN_CALLS: dict[tuple[Any, str], str | None] = {}


def _calls_aten(node: Node) -> str | None:
    """The ATen call Inductor's code for the node alone would make, or None (asked of Inductor, once per target,
    arguments and input shapes)."""
    from . import inductor_code
    from .segments import Segment, segment_module

    if not all(isinstance(a.meta.get("val"), torch.Tensor) for a in node.all_input_nodes):
        return None  # not asked: a group taking a SymInt is refused for that, with its own reason
    key = (node.target, repr((node.args, node.kwargs, [a.meta.get("val") for a in node.all_input_nodes])))
    if key not in _ATEN_CALLS:
        inputs = list(node.all_input_nodes)
        try:
            module = segment_module(Segment([node], inputs, [node]))
            calls = inductor_code.aten_calls(module, [a.meta["val"] for a in inputs])
            _ATEN_CALLS[key] = ", ".join(sorted(set(calls))) or None
        except Exception as err:  # noqa: BLE001 - Inductor cannot lower it: it stays in PyTorch with the reason
            first_line = str(err).strip().splitlines()[0][:200] if str(err).strip() else ""
            _ATEN_CALLS[key] = f"no Triton lowering here: {type(err).__name__}: {first_line}"
    return _ATEN_CALLS[key]


def replace_segments(gm: GraphModule, convertible: Any) -> dict[str, Any]:
    """Replace each segment of ``gm`` that ``convertible(node)`` leaves out by a generated op, in place; returns
    ``{"replaced": [op names], "refused": [segments.Refusal]}``."""
    from . import generated_op, inductor_code, segments

    found = segments.find_segments(gm, convertible, _calls_aten)
    replaced = []
    for segment in found.segments:
        try:
            declaration = generated_op.declare_segment(segment)
        except inductor_code.Refused as err:
            found.refuse(segment.nodes, str(err))
            continue
        segments.replace(gm, segment, declaration.overload)
        replaced.append(declaration.qualname)
    if replaced:
        gm.graph.lint()
        gm.recompile()
    _LOGGER.info(
        "torchtrt_plugins inductor plugins: %d segments replaced, %d refused", len(replaced), len(found.refused)
    )
    return {"replaced": replaced, "refused": found.refused}


def plugin_libraries() -> list[Path]:
    """The plugin libraries of the ops generated in this process (built if need be): what a program that runs a
    saved engine with generated plugins loads (``trtexec --dynamicPlugins``, ``IPluginRegistry::loadLibrary``); a fresh
    process does not generate the ops again, so ``load_plugins()`` does not know them."""
    from . import generated_op

    return [declaration.library.plugin_path() for declaration in generated_op._DECLARED.values()]


def save_plugin_libraries(path: str | os.PathLike) -> list[Path]:
    """Copy :func:`plugin_libraries` into the folder beside the program saved at ``path`` (``<path>.plugins/``),
    where ``torchtrt_plugins.load_program(path)`` loads them in a fresh process; returns the copies."""
    import shutil

    from ..native import SAVED_LIBRARIES_SUFFIX

    folder = Path(os.fspath(path) + SAVED_LIBRARIES_SUFFIX)
    folder.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy2(library, folder / library.name)) for library in plugin_libraries()]


def _torch_tensorrt_convertible(settings: Any) -> Any:
    from torch_tensorrt.dynamo.conversion._ConverterRegistry import DYNAMO_CONVERTERS

    forced = {str(t) for t in (getattr(settings, "torch_executed_ops", None) or ())}

    def convertible(node: Node) -> bool:
        if str(node.target) in forced:
            return True  # the user's choice to run it in PyTorch: not ours to take
        return node in DYNAMO_CONVERTERS

    return convertible


def torch_tensorrt_pass(gm: GraphModule, settings: Any = None) -> GraphModule:
    """A Torch-TensorRT post-lowering pass, ``(gm, settings) -> gm``: ``replace_segments`` with Torch-TensorRT's
    converter registry as the judge. A no-op when the switch is off, or where the network cannot take plugin
    layers (a generated op would be cut out of the engine all the same)."""
    if not is_enabled():
        return gm
    if reason := _compat.plugin_layers_unavailable():
        _LOGGER.info("torchtrt_plugins inductor plugins: skipped: %s", reason)
        return gm
    replace_segments(gm, _torch_tensorrt_convertible(settings))
    return gm


def register_with_torch_tensorrt() -> bool:
    """Append ``torch_tensorrt_pass`` to Torch-TensorRT's post-lowering passes, once (last: it sees the graph the
    partitioner will). False (and nothing done) when Torch-TensorRT is not installed."""
    if _compat.torch_tensorrt() is None:
        return False
    import importlib

    from ..lowering import TORCH_TENSORRT_PASSES_MODULE

    passes = importlib.import_module(TORCH_TENSORRT_PASSES_MODULE)
    if torch_tensorrt_pass not in passes.ATEN_POST_LOWERING_PASSES.passes:
        passes._aten_lowering_pass(torch_tensorrt_pass)
    return True
