"""Residual add + RMSNorm: ``h = a + b; y = rms_norm(h, w, eps)`` -> ``torchtrt.add_rms_norm``.

Runs after the ``rms_norm`` pass, on the ``torch.ops.torchtrt.rms_norm`` nodes it made (or that were there). The
decoder's residual stream ``h`` is used again after the norm (the next residual add), so the fused op updates one
operand in place and returns the norm: in a functional graph that is the op's functionalized form, the node export
itself makes of a mutating op::

    af = auto_functionalized_v2(torchtrt.add_rms_norm.default, x=b, weight=w, eps=eps,
                                _residual_base_index=0, _all_bases=[a])
    y, h = af[0], af[1]

The operand updated in place is one that nothing else reads and that is not a graph input or a constant (a matmul
result, typically), so that the compiler reinplaces the op without copying it first (inductor's reinplacing pass;
Torch-TensorRT's converter of the wrapper, ``converters._functionalized``); where neither operand is such, the
first one is, and the wrapper copies it. The sum is the same either way (a + b rounds like b + a). Left alone: an
add with ``alpha``, broadcasting or a dtype change, a norm with a weight offset, and an ``h`` read before the norm.
"""

from __future__ import annotations

import logging
import operator
from typing import Any

import torch
from torch.fx import GraphModule, Node

from ._fx import LoweringPass, cast_source, is_check, real_users, topological_order, value

_LOGGER = logging.getLogger(__name__)
_FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def _same_meta(a: Any, b: torch.Tensor) -> bool:
    val = value(a) if isinstance(a, Node) else None
    return val is not None and val.dtype == b.dtype and tuple(val.shape) == tuple(b.shape)


def _operands(norm: Node) -> tuple[Node, Node, Node, Any] | None:
    """(sum, base, other, eps) of a ``rms_norm(a + b, w, eps)`` node the fused op can replace, else None."""
    if norm.op != "call_function" or norm.target is not torch.ops.torchtrt.rms_norm.default or len(norm.args) < 2:
        return None
    args = list(norm.args) + [norm.kwargs.get(k) for k in ("eps", "weight_offset")[len(norm.args) - 2 :]]
    eps, offset = args[2] if len(args) > 2 else 1e-6, args[3] if len(args) > 3 else 0.0
    total = args[0]
    if offset not in (None, 0, 0.0) or not isinstance(total, Node) or total.op != "call_function":
        return None
    if total.target is not torch.ops.aten.add.Tensor or total.kwargs.get("alpha", 1) != 1 or len(total.args) != 2:
        return None
    h = value(total)
    if h is None or h.dtype not in _FLOATS:
        return None
    a, b = total.args
    if not (_same_meta(a, h) and _same_meta(b, h)):
        return None

    def owned(node: Node) -> bool:  # nothing else reads it; not a graph input, a constant or a cast (maybe of one)
        return node.op == "call_function" and cast_source(node) is None and real_users(node) == [total]

    base, other = (b, a) if owned(b) and not owned(a) else (a, b)
    return total, base, other, 1e-6 if eps is None else eps


def _replace(gm: GraphModule, norm: Node, order: dict[Node, int]) -> bool:
    operands = _operands(norm)
    if operands is None:
        return False
    total, base, other, eps = operands
    weight = norm.args[1]
    graph = gm.graph
    for user in real_users(total):  # x.float() on an fp32 x: the sum itself, read through a no-op cast
        if user is not norm and cast_source(user) is total and _same_meta(user, value(total)):
            user.replace_all_uses_with(total)
            graph.erase_node(user)
    if any(order.get(user, len(order)) < order[norm] for user in real_users(total) if user is not norm):
        _LOGGER.debug("torchtrt_plugins lowering: %s stays: its sum is read before the norm", norm.name)
        return False
    for check in [user for user in total.users if is_check(user)]:  # metadata asserts on the sum: it is now h
        graph.erase_node(check)
    wrapper = torch.ops.higher_order.auto_functionalized_v2
    kwargs = {"x": other, "weight": weight, "eps": eps, "_residual_base_index": 0, "_all_bases": [base]}
    with graph.inserting_before(norm):
        fused = graph.call_function(wrapper, (torch.ops.torchtrt.add_rms_norm.default,), kwargs)
        y = graph.call_function(operator.getitem, (fused, 0))
        h = graph.call_function(operator.getitem, (fused, 1))
    for new, old in ((y, norm), (h, total)):
        new.meta.update({k: v for k, v in old.meta.items() if k in ("val", "tensor_meta", "stack_trace")})
    if "val" in norm.meta and "val" in total.meta:
        fused.meta["val"] = (norm.meta["val"], total.meta["val"])
    norm.replace_all_uses_with(y)
    total.replace_all_uses_with(h)
    graph.erase_node(norm)
    graph.erase_node(total)
    return True


def run(gm: GraphModule) -> int:
    """Fuse every residual add that feeds an RMSNorm op in ``gm`` (in place); the number fused."""
    order = topological_order(gm)
    count = 0
    for node in list(order):
        count += _replace(gm, node, order)
    return count


PASS = LoweringPass("add_rms_norm", run)
