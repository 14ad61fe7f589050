"""Mutating ops in Torch-TensorRT's graphs: the converter of their functionalized form.

Torch-TensorRT compiles an exported, functionalized graph (``torch.export`` + ``run_decompositions``, or
``torch.compile``'s AOT graph). Functionalization turns a call of a mutating op such as
``add_rms_norm(x, residual, weight, eps)`` (``Tensor(a!) residual``) into the higher-order op::

    af = auto_functionalized_v2(torchtrt.add_rms_norm.default, x=x, weight=w, eps=eps,
                                _residual_base_index=0, _all_bases=[residual])
    y = af[0]              # the op's returns
    new_residual = af[1]   # the new value of each base, in _all_bases order

(``auto_functionalized``, version 1, holds the mutated arguments as plain keywords and returns the returns, then
the new values of the mutated arguments in schema order.) A mutated graph input becomes an extra graph output
(``USER_INPUT_MUTATION``) that the unlifted module copies back with ``aten.copy_``; a mutated argument that is a
view of its base carries ``_<name>_size``/``_stride``/``_storage_offset`` or ``_slice_*`` keywords. Torch-TensorRT
2.13 has no converter for these wrappers (later releases add one for their own in-place plugins), so without this
module the node stays in PyTorch. Here the wrapper itself is converted: its validator accepts only wrappers of a
declared mutating op whose mutated arguments are whole bases, and the converter adds the op's plugin and returns
``(*returns, *new bases)``: the plugin's aliased outputs stand for the new values. A base that the op does not
mutate passes through unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from .. import registry
from .. import spec as spec_mod
from . import _factory

#: Keywords auto_functionalized_v2 adds for a mutated argument that is a view of its base.
_VIEW_SUFFIXES = ("alias", "size", "stride", "storage_offset", "slice_dim", "slice_start", "slice_end", "length")


def wrapper_targets() -> tuple[Any, ...]:
    higher_order = getattr(torch.ops, "higher_order", None)
    names = ("auto_functionalized", "auto_functionalized_v2")
    return tuple(t for t in (getattr(higher_order, n, None) for n in names) if t is not None)


def unwrap(target: Any, args: Sequence[Any], kwargs: dict) -> tuple[registry.OpEntry, dict[str, Any], list[Any]]:
    """The declared op inside a functionalization wrapper, its arguments by name, and what the wrapper returns after
    the op's returns, each as the name of the mutated argument it is the new value of, or (an unmutated base) the
    base itself. Raises SpecError for what the plugin cannot take (a wrapper of another op, a mutated view)."""
    op = args[0] if args else None
    entry = _factory.entry_for_target(op)
    if entry is None or not entry.spec.mutated:
        raise spec_mod.SpecError(f"{op} is not a declared mutating op with a plugin")
    label = entry.spec.label
    schema = op._schema
    if not str(getattr(target, "__name__", target)).endswith("_v2"):
        bound = {a.name: kwargs[a.name] if a.name in kwargs else a.default_value for a in schema.arguments}
        return entry, bound, list(entry.spec.mutated)
    bases = list(kwargs.get("_all_bases", ()))
    bound: dict[str, Any] = {}
    after: list[Any] = list(bases)
    for argument in schema.arguments:
        prefix = f"_{argument.name}"
        if f"{prefix}_base_index" not in kwargs:
            bound[argument.name] = kwargs.get(argument.name, argument.default_value)
            continue
        views = [f"{prefix}_{s}" for s in _VIEW_SUFFIXES if f"{prefix}_{s}" in kwargs]
        if views:
            raise spec_mod.SpecError(
                f"{label}: argument '{argument.name}' is updated in place as a view of another tensor ({views}); the "
                "plugin updates whole tensors only"
            )
        index = kwargs[f"{prefix}_base_index"]
        if not isinstance(index, int) or not 0 <= index < len(bases):
            raise spec_mod.SpecError(f"{label}: argument '{argument.name}' has base index {index!r} of {len(bases)}")
        bound[argument.name] = bases[index]
        after[index] = argument.name
    return entry, bound, after


def validate(node: torch.fx.Node, settings: Any = None) -> bool:
    """Capability validator of the wrappers: True only for a declared mutating op the plugin takes."""
    try:
        entry, bound, _ = unwrap(node.target, node.args, dict(node.kwargs))
    except spec_mod.SpecError as err:
        return _factory.accept(node, str(err))
    return _factory.accept(node, _factory.rejection(entry, (), bound))


def convert(ctx: Any, target: Any, args: tuple, kwargs: dict, name: str):
    """The plugin for the wrapped op; returns the op's returns, then the wrapper's new bases."""
    entry, bound, after = unwrap(target, args, kwargs)
    call = _factory.plan(entry.spec, (), bound)
    outputs = _factory.emit(ctx, call, target, name, with_mutated=True)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    returns = list(outputs[: call.num_op_outputs])
    updated = dict(zip(entry.spec.mutated, outputs[call.num_op_outputs :], strict=True))
    return tuple(returns + [updated[item] if isinstance(item, str) else item for item in after])


_registered = False


def register() -> bool:
    """Register :func:`convert` for the functionalization wrappers, once; False without Torch-TensorRT."""
    global _registered
    if _registered:
        return True
    from .._compat import torch_tensorrt

    if torch_tensorrt() is None:
        return False
    from torch_tensorrt.dynamo.conversion._ConverterRegistry import dynamo_tensorrt_converter

    for target in wrapper_targets():
        dynamo_tensorrt_converter(target, supports_dynamic_shapes=True, capability_validator=validate)(convert)
    _registered = True
    return True
