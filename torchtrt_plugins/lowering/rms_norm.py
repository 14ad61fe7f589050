"""RMSNorm, however it is written, -> ``torch.ops.torchtrt.rms_norm(x, weight, eps)``.

Recognized (aten level and symbolic_trace level alike):

- composites: ``x * rsqrt(mean(x**2, -1, keepdim=True) + eps) * weight`` and its spellings: the
  square as ``pow(2)``/``square``/``x * x``; ``rsqrt(v)``, ``v ** -0.5``, ``1 / sqrt(v)``,
  ``reciprocal(sqrt(v))`` (Torch-TensorRT's decompositions turn ``rsqrt`` into that, and ``reciprocal``
  into ``div(1, .)``) or ``x / sqrt(v)``; float casts anywhere on the way in (Hugging Face ``LlamaRMSNorm`` upcasts to
  fp32, T5 upcasts only the variance) and around the weight multiply (before or after the cast back);
- ``aten.rms_norm`` / ``F.rms_norm`` / ``torch.rms_norm``, ``aten._fused_rms_norm`` and
  ``nn.RMSNorm`` modules (symbolic_trace keeps them as ``call_module``).

Only the last dimension may be normalized, eps must be a constant and a weight of shape
``(hidden,)`` must be applied; every intermediate value must be used by the pattern only.

Dtypes: the op takes ``x`` and ``weight`` of one dtype and rounds once. The replacement computes in
the dtype of the pattern's output (casting ``x`` and ``weight`` to it where they differ), so the
output dtype is always the original one; values agree within the op's tolerance for the narrowest
dtype involved (the original may round in between, e.g. Llama's cast back before the weight).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node

from .. import ops  # noqa: F401  (defines torch.ops.torchtrt.rms_norm)
from ._fx import (
    GraphRewrite,
    LoweringPass,
    RewriteRejected,
    arg,
    binary_operands,
    cast_source,
    dtype,
    fake_mode_of,
    is_last_dim,
    is_number,
    kind,
    known_equal,
    other_operand,
    real_users,
    sole_user,
    strip_casts,
    topological_order,
    used_only_inside,
    value,
)

_LOGGER = logging.getLogger(__name__)


@dataclass(frozen=True)
class RMSNormMatch:
    """One RMSNorm found in a graph."""

    x: Node
    #: a node, or the qualified name of a module parameter (``nn.RMSNorm`` kept as a module)
    weight: Node | str
    eps: float
    #: the node whose users get the replacement
    output: Node
    #: the nodes replaced, ``output`` included
    nodes: tuple[Node, ...]


# ------------------------------------------------------------------------------------- composites


def _square_base(node: Any) -> Node | None:
    """``b`` when ``node`` computes ``b ** 2``."""
    node_kind = kind(node)
    if node_kind == "pow" and arg(node, 1, "exponent") == 2:
        base = node.args[0]
    elif node_kind == "square":
        base = node.args[0]
    elif node_kind == "mul" and (operands := binary_operands(node)) and operands[0] is operands[1]:
        base = operands[0]
    else:
        return None
    return base if isinstance(base, Node) else None


def _squared_input(mean: Node) -> Node | None:
    """``b`` when ``mean`` is ``mean(b ** 2, dim=-1, keepdim=True)``."""
    if kind(mean) != "mean" or not mean.args:
        return None
    base = _square_base(mean.args[0])
    if base is None or arg(mean, 2, "keepdim", False) is not True or arg(mean, 3, "dtype") is not None:
        return None
    base_value = value(base)
    return base if is_last_dim(arg(mean, 1, "dim"), None if base_value is None else base_value.dim()) else None


def _power_base(node: Any, exponent: float) -> Node | None:
    """``b`` when ``node`` computes ``b ** exponent`` (``pow``, or the unary op of that power)."""
    node_kind = kind(node)
    unary = {0.5: "sqrt", -0.5: "rsqrt", -1: "reciprocal"}.get(exponent)
    if node_kind == "pow" and arg(node, 1, "exponent") == exponent:
        base = node.args[0]
    elif node_kind is not None and node_kind == unary:
        base = node.args[0]
    elif exponent == -1 and node_kind == "div" and (operands := binary_operands(node)) and _is_one(operands[0]):
        base = operands[1]  # ``div(1, b)``: Torch-TensorRT decomposes ``reciprocal`` into it
    else:
        return None
    return base if isinstance(base, Node) else None


def _is_one(value: Any) -> bool:
    return is_number(value) and value == 1


def _normalized(variance_eps: Node) -> tuple[Node, Any, list[Node]] | None:
    """``(product, numerator, nodes)`` for ``numerator * rsqrt(variance_eps)`` in any spelling.

    The inverse square root may be ``rsqrt(v)``, ``v ** -0.5``, or the square root ``sqrt(v)`` /
    ``v ** 0.5`` inverted by ``reciprocal``, ``1 / .`` or ``. ** -1`` (Torch-TensorRT's decompositions
    turn ``rsqrt`` into ``reciprocal(sqrt(v))`` and ``reciprocal`` into ``div(1, .)`` before its
    post-lowering passes run), or divided into: ``numerator / sqrt(v)``.
    """
    root = sole_user(variance_eps)
    if _power_base(root, -0.5) is variance_eps:
        inverse, nodes = root, [root]
    elif _power_base(root, 0.5) is variance_eps:
        consumer = sole_user(root)
        if _power_base(consumer, -1) is root:
            inverse, nodes = consumer, [root, consumer]
        elif kind(consumer) == "div" and (operands := binary_operands(consumer)) and operands[1] is root:
            return (consumer, operands[0], [root, consumer]) if operands[0] is not root else None
        else:
            return None
    else:
        return None
    product = sole_user(inverse)
    while kind(product) == "mul" and _is_one(other_operand(product, inverse)):  # ``1.0 / t`` is ``reciprocal(t) * 1.0``
        inverse, product = product, sole_user(product)
        nodes.append(inverse)
    if kind(product) != "mul":
        return None
    return product, other_operand(product, inverse), [*nodes, product]


def _cast_chain(node: Node) -> list[Node]:
    """The casts applied one after another to ``node``, each the sole user of the one before."""
    chain = []
    while (user := sole_user(node)) is not None and cast_source(user) is node:
        chain.append(user)
        node = user
    return chain


def _weighted(normalized: Node) -> tuple[Node, list[Node]] | None:
    """``(weight, nodes)`` for casts, ``* weight``, casts applied to ``normalized``; nodes end in the output."""
    nodes = _cast_chain(normalized)
    last = nodes[-1] if nodes else normalized
    product = sole_user(last)
    if kind(product) != "mul":
        return None
    weight = other_operand(product, last)
    if not isinstance(weight, Node):
        return None
    nodes.append(product)
    nodes.extend(_cast_chain(product))
    return weight, nodes


def match_composite(mean: Node) -> RMSNormMatch | None:
    """The RMSNorm whose mean of squares is ``mean``, or None."""
    base = _squared_input(mean)
    variance_eps = sole_user(mean) if base is not None else None
    if kind(variance_eps) != "add":
        return None
    eps = other_operand(variance_eps, mean)
    normalized = _normalized(variance_eps) if is_number(eps) else None
    if normalized is None:
        return None
    product, numerator, inverse_nodes = normalized
    x, _ = strip_casts(base)
    if not isinstance(numerator, Node) or strip_casts(numerator)[0] is not x:
        return None
    weighted = _weighted(product)
    if weighted is None:
        return None
    weight, tail = weighted
    nodes = (mean.args[0], mean, variance_eps, *inverse_nodes, *tail)
    return RMSNormMatch(x=x, weight=weight, eps=float(eps), output=tail[-1], nodes=nodes)


# ------------------------------------------------------------------------------ rms_norm as an op


def _fused_output(node: Node) -> tuple[Node, list[Node]] | None:
    """``(output, getitems)`` of ``_fused_rms_norm`` when only its normalized output is used."""
    getitems = list(node.users)
    if any(kind(user) != "getitem" for user in getitems):
        return None
    outputs = [user for user in getitems if user.args[1] == 0]
    if len(outputs) != 1 or any(real_users(user) for user in getitems if user.args[1] != 0):
        return None
    return outputs[0], getitems


def match_op(node: Node, gm: GraphModule) -> RMSNormMatch | None:
    """The RMSNorm computed by ``node`` as one op (``aten.rms_norm``, ``nn.RMSNorm``, ...), or None."""
    node_kind = kind(node)
    if node_kind in ("rms_norm", "fused_rms_norm"):
        x, shape = node.args[0], arg(node, 1, "normalized_shape")
        weight, eps = arg(node, 2, "weight"), arg(node, 3, "eps")
        output, nodes = node, [node]
        if node_kind == "fused_rms_norm":
            fused = _fused_output(node)
            if fused is None:
                return None
            output, getitems = fused
            nodes.extend(getitems)
    elif node.op == "call_module" and isinstance(module := gm.get_submodule(node.target), torch.nn.RMSNorm):
        if len(node.args) != 1 or node.kwargs:
            return None
        x, shape, eps, output, nodes = node.args[0], module.normalized_shape, module.eps, node, [node]
        weight = f"{node.target}.weight" if module.weight is not None else None
    else:
        return None
    shape = (shape,) if isinstance(shape, int) else shape
    if not isinstance(x, Node) or weight is None or len(shape) != 1 or value(x) is None:
        return None
    if eps is None:  # what aten.rms_norm uses: the machine epsilon of its compute (opmath) dtype
        eps = torch.finfo(torch.promote_types(dtype(x), torch.float32)).eps
    if not is_number(eps):
        return None
    return RMSNormMatch(x=x, weight=weight, eps=float(eps), output=output, nodes=tuple(nodes))


# -------------------------------------------------------------------------------------- the pass


def _weight_value(match: RMSNormMatch, gm: GraphModule) -> torch.Tensor | None:
    if isinstance(match.weight, str):
        return gm.get_parameter(match.weight)
    return value(match.weight)


def _consistent(match: RMSNormMatch, gm: GraphModule) -> bool:
    """Shapes known and right: a ``(hidden,)`` weight, an output shaped like ``x``, values used inside only."""
    x, weight, output = value(match.x), _weight_value(match, gm), value(match.output)
    if x is None or weight is None or output is None or x.dim() < 1 or weight.dim() != 1:
        return False
    if not known_equal(weight.shape[0], x.shape[-1]) or output.dim() != x.dim():
        return False
    if not all(known_equal(a, b) for a, b in zip(output.shape, x.shape, strict=True)):
        return False
    if match.x in match.nodes or match.weight in match.nodes:
        return False
    return used_only_inside(match.nodes, exempt=match.output)


def _replace(gm: GraphModule, match: RMSNormMatch, order: dict[Node, int], fake_mode: Any) -> bool:
    rewrite = GraphRewrite(gm, match.output, match.nodes, fake_mode)
    out_dtype = dtype(match.output)
    try:
        weight = rewrite.get_attr(match.weight) if isinstance(match.weight, str) else match.weight
        y = rewrite.call(
            torch.ops.torchtrt.rms_norm.default,
            (rewrite.cast(match.x, out_dtype), rewrite.cast(weight, out_dtype), match.eps),
        )
    except RewriteRejected as err:
        _LOGGER.debug("torchtrt_plugins lowering: %s stays as it is: %s", match.output.name, err)
        return False
    rewrite.commit(y, order)
    return True


def run(gm: GraphModule) -> int:
    """Replace every RMSNorm in ``gm`` (in place); the number replaced."""
    order = topological_order(gm)
    fake_mode = None
    count = 0
    for node in list(order):
        match = match_composite(node) if kind(node) == "mean" else match_op(node, gm)
        if match is None or not _consistent(match, gm):
            continue
        if fake_mode is None:
            fake_mode = fake_mode_of(gm)
        count += _replace(gm, match, order, fake_mode)
    return count


PASS = LoweringPass("rms_norm", run)
