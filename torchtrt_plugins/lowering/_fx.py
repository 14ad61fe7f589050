"""FX machinery shared by the lowering passes.

Graphs reach the passes at two levels: aten (``torch.export`` with or without
``run_decompositions()``, which is what Torch-TensorRT's post-lowering passes see) and torch
functions/methods (``torch.fx.symbolic_trace``). ``kind`` gives one name to a node whatever level it
is at, so each pattern is written once. Dtypes and shapes come from ``node.meta["val"]``; a pattern
whose meaning depends on them is left alone where they are missing. ``GraphRewrite`` adds nodes
with their fake values, so passes that run after ours (and the converters' validators) keep working.
"""

from __future__ import annotations

import builtins
import functools
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
from torch.fx import GraphModule, Node
from torch.fx.experimental.symbolic_shapes import statically_known_true

_ATEN = torch.ops.aten
_PRIMS = torch.ops.prims

_TARGETS_BY_KIND: dict[str, tuple] = {
    "add": (_ATEN.add.Tensor, _ATEN.add.Scalar, operator.add, torch.add),
    "mul": (_ATEN.mul.Tensor, _ATEN.mul.Scalar, operator.mul, torch.mul),
    "div": (_ATEN.div.Tensor, _ATEN.div.Scalar, operator.truediv, torch.div, torch.true_divide),
    "pow": (_ATEN.pow.Tensor_Scalar, operator.pow, torch.pow),
    "square": (_ATEN.square.default, torch.square),
    "mean": (_ATEN.mean.dim, torch.mean),
    "rsqrt": (_ATEN.rsqrt.default, torch.rsqrt),
    "sqrt": (_ATEN.sqrt.default, torch.sqrt),
    "reciprocal": (_ATEN.reciprocal.default, torch.reciprocal),
    "rms_norm": (_ATEN.rms_norm.default, torch.nn.functional.rms_norm, torch.rms_norm),
    "fused_rms_norm": (_ATEN._fused_rms_norm.default,),
    "getitem": (operator.getitem,),
}
_FUNCTION_KINDS = {target: name for name, targets in _TARGETS_BY_KIND.items() for target in targets}

#: Tensor methods with the same meaning as the kind of the same name (``x.pow(2)``, ``x.mean(-1)``).
_METHOD_KINDS = frozenset(("add", "mul", "div", "pow", "square", "mean", "rsqrt", "sqrt", "reciprocal"))

#: Users that only check a value's metadata; they go when the value goes.
_CHECK_TARGETS = frozenset((_ATEN._assert_tensor_metadata.default,))

#: Metadata copied from the node a rewrite replaces to the nodes it adds.
_PROVENANCE_KEYS = ("stack_trace", "nn_module_stack", "source_fn_stack")

_FLOAT_METHODS = {"float": torch.float32, "half": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class LoweringPass:
    """One pattern family: ``run(gm)`` rewrites the graph in place and returns how many it replaced."""

    name: str
    run: Callable[[GraphModule], int]


def kind(node: Any) -> str | None:
    """The level-independent name of what ``node`` computes, or None."""
    if not isinstance(node, Node):
        return None
    if node.op == "call_function":
        try:
            return _FUNCTION_KINDS.get(node.target)
        except TypeError:  # unhashable target
            return None
    if node.op == "call_method" and node.target in _METHOD_KINDS:
        return node.target
    return None


def arg(node: Node, index: int, name: str, default: Any = None) -> Any:
    """Argument ``index`` of ``node``, given positionally or as keyword ``name``."""
    if index < len(node.args):
        return node.args[index]
    return node.kwargs.get(name, default)


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def binary_operands(node: Node) -> tuple[Any, Any] | None:
    """``(a, b)`` of an add/mul/div node computing plainly ``a op b`` (no ``alpha``, no rounding mode)."""
    if len(node.args) != 2:
        return None
    if node.kwargs.get("alpha", 1) != 1 or node.kwargs.get("rounding_mode") is not None:
        return None
    return node.args[0], node.args[1]


def other_operand(node: Node, known: Node) -> Any:
    """The operand of binary ``node`` that is not ``known``; None unless ``known`` is exactly one of them."""
    operands = binary_operands(node)
    if operands is None or (operands[0] is known) == (operands[1] is known):
        return None
    return operands[1] if operands[0] is known else operands[0]


def value(node: Any) -> torch.Tensor | None:
    """The (fake) tensor a node produces, from its metadata; None where unknown."""
    val = node.meta.get("val") if isinstance(node, Node) else None
    return val if isinstance(val, torch.Tensor) else None


def dtype(node: Any) -> torch.dtype | None:
    val = value(node)
    return None if val is None else val.dtype


def known_equal(a: Any, b: Any) -> bool:
    """``a == b`` for ints or SymInts, False where it cannot be decided without a guard."""
    return statically_known_true(a == b)


def is_last_dim(dims: Any, ndim: int | None) -> bool:
    """``dims`` (an int or a one-element list) names the last dimension of a ``ndim``-D tensor."""
    if isinstance(dims, (list, tuple)):
        if len(dims) != 1:
            return False
        dims = dims[0]
    if not isinstance(dims, int) or isinstance(dims, bool):
        return False
    return dims == -1 or (ndim is not None and dims == ndim - 1)


def _is_dtype_arg(value: Any) -> bool:
    if isinstance(value, torch.dtype):
        return True
    # ``x.to(y.dtype)`` after symbolic_trace: the dtype is a getattr node.
    return (
        isinstance(value, Node)
        and value.op == "call_function"
        and value.target is builtins.getattr
        and value.args[1:] == ("dtype",)
    )


def _only_dtype_changes(node: Node, source: Node, allowed: Iterable[str]) -> bool:
    """``node``'s keyword arguments, all among ``allowed``, leave layout and device as they are."""
    for key, val in node.kwargs.items():
        if key not in allowed or (key == "layout" and val not in (None, torch.strided)):
            return False
        if key == "device" and val is not None:
            src = value(source)
            if src is None or torch.device(val) != src.device:
                return False
    return True


def cast_source(node: Any) -> Node | None:
    """The input of ``node`` if it only changes the floating-point dtype of a tensor, else None."""
    if not isinstance(node, Node) or not node.args or not isinstance(node.args[0], Node):
        return None
    source = node.args[0]
    result = dtype(node)
    if result is not None and not result.is_floating_point:
        return None
    if node.op == "call_function":
        if node.target == _ATEN._to_copy.default:
            ok = len(node.args) == 1 and _only_dtype_changes(
                node, source, ("dtype", "layout", "device", "pin_memory", "non_blocking", "memory_format")
            )
        elif node.target == _ATEN.to.dtype:
            ok = len(node.args) == 2 and _only_dtype_changes(node, source, ("non_blocking", "copy", "memory_format"))
        elif node.target in (_PRIMS.convert_element_type.default, _ATEN.type_as.default):
            ok = len(node.args) == 2 and not node.kwargs
        else:
            ok = False
    elif node.op == "call_method":
        if node.target == "to":
            ok = (len(node.args) == 2 and _is_dtype_arg(node.args[1]) and not node.kwargs) or (
                len(node.args) == 1 and _is_dtype_arg(node.kwargs.get("dtype")) and len(node.kwargs) == 1
            )
        elif node.target in _FLOAT_METHODS:
            ok = len(node.args) == 1 and not node.kwargs
        elif node.target == "type_as":
            ok = len(node.args) == 2 and not node.kwargs
        else:
            ok = False
    else:
        ok = False
    return source if ok else None


def strip_casts(node: Any) -> tuple[Any, list[Node]]:
    """``(source, casts)``: ``node`` with any chain of float dtype casts undone, and the casts undone."""
    casts = []
    while (source := cast_source(node)) is not None:
        casts.append(node)
        node = source
    return node, casts


def _widens(source: torch.dtype, result: torch.dtype) -> bool:
    return source.is_floating_point and result.is_floating_point and torch.promote_types(source, result) == result


def exact_source(node: Node) -> Node:
    """``node`` with the casts undone that change no value (widening float casts, as ``bf16 -> fp32``)."""
    while (source := cast_source(node)) is not None:
        source_dtype, result_dtype = dtype(source), dtype(node)
        if source_dtype is None or result_dtype is None or not _widens(source_dtype, result_dtype):
            break
        node = source
    return node


def is_check(node: Node) -> bool:
    return node.op == "call_function" and node.target in _CHECK_TARGETS


def real_users(node: Node) -> list[Node]:
    """Users of ``node`` that consume its value (metadata checks do not count)."""
    return [user for user in node.users if not is_check(user)]


def sole_user(node: Node) -> Node | None:
    users = real_users(node)
    return users[0] if len(users) == 1 else None


def used_only_inside(nodes: Iterable[Node], exempt: Node) -> bool:
    """Every node of ``nodes`` but ``exempt`` has all its real users inside ``nodes``."""
    inside = set(nodes)
    return all(node is exempt or set(real_users(node)) <= inside for node in inside)


def _is_pure_helper(node: Node) -> bool:
    if cast_source(node) is not None:
        return True
    return node.op == "call_function" and node.target is builtins.getattr


def _erase(graph: torch.fx.Graph, node: Node) -> None:
    for user in [user for user in node.users if is_check(user)]:
        graph.erase_node(user)
    graph.erase_node(node)


def fake_mode_of(gm: GraphModule) -> Any:
    """The fake mode of the values in ``gm``'s metadata (a new one where there is none)."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode

    vals = [value(node) for node in gm.graph.nodes]
    mode = detect_fake_mode([val for val in vals if val is not None])
    return mode if mode is not None else FakeTensorMode(allow_non_fake_inputs=True)


class RewriteRejected(Exception):
    """A replacement the target op refuses (its fake kernel raised); the graph is left as it was."""


class GraphRewrite:
    """Replaces the node ``output`` (and the pattern ``nodes`` ending in it) with new nodes.

    New nodes go right before ``output``, so everything the pattern read is already defined. Each
    gets ``meta["val"]`` from running its target on the fake values of its arguments, in the
    graph's fake mode; an op whose fake kernel rejects the arguments aborts the whole rewrite.
    """

    def __init__(self, gm: GraphModule, output: Node, nodes: Iterable[Node], fake_mode: Any = None):
        self.gm = gm
        self.output = output
        self.nodes = list(nodes)
        self.added: list[Node] = []
        self._fake_mode = fake_mode
        self._with_values = value(output) is not None

    def _fake(self, target: Any, args: tuple, kwargs: dict) -> torch.Tensor | None:
        if not self._with_values:
            return None
        from torch._subclasses.fake_tensor import FakeTensor

        if self._fake_mode is None:
            self._fake_mode = fake_mode_of(self.gm)
        mode = self._fake_mode
        missing = []

        def fake_of(node: Node) -> Any:
            val = node.meta.get("val")
            if val is None:
                missing.append(node)
            elif isinstance(val, torch.Tensor) and not isinstance(val, FakeTensor):
                val = mode.from_tensor(val)
            return val

        fake_args, fake_kwargs = torch.fx.node.map_arg((args, kwargs), fake_of)
        if missing:
            return None
        with mode:
            return target(*fake_args, **fake_kwargs)

    def _add(self, node: Node, val: Any) -> Node:
        for key in _PROVENANCE_KEYS:
            if key in self.output.meta:
                node.meta[key] = self.output.meta[key]
        if val is not None:
            node.meta["val"] = val
            if "tensor_meta" in self.output.meta and isinstance(val, torch.Tensor):
                from torch.fx.passes.shape_prop import _extract_tensor_metadata

                node.meta["tensor_meta"] = _extract_tensor_metadata(val)
        self.added.append(node)
        return node

    def call(self, target: Any, args: tuple, kwargs: dict | None = None) -> Node:
        kwargs = kwargs or {}
        try:
            val = self._fake(target, args, kwargs)
        except Exception as err:  # noqa: BLE001 - whatever the fake kernel raises, the rewrite must not happen
            self.abort()
            raise RewriteRejected(f"{getattr(target, '__name__', target)}: {err}") from err
        with self.gm.graph.inserting_before(self.output):
            node = self.gm.graph.call_function(target, args, kwargs)
        return self._add(node, val)

    def get_attr(self, qualname: str) -> Node:
        with self.gm.graph.inserting_before(self.output):
            node = self.gm.graph.get_attr(qualname)
        attr = functools.reduce(getattr, qualname.split("."), self.gm)
        val = None
        if self._with_values and isinstance(attr, torch.Tensor):
            if self._fake_mode is None:
                self._fake_mode = fake_mode_of(self.gm)
            val = self._fake_mode.from_tensor(attr)
        return self._add(node, val)

    def cast(self, node: Node, to: torch.dtype) -> Node:
        """``node`` as dtype ``to``: a new ``_to_copy`` node, or an existing one with that value."""
        node = exact_source(node)
        if dtype(node) == to:
            return node
        return self.call(_ATEN._to_copy.default, (node,), {"dtype": to})

    def abort(self) -> None:
        for node in reversed(self.added):
            self.gm.graph.erase_node(node)
        self.added.clear()

    def commit(self, replacement: Node, order: dict[Node, int]) -> None:
        """Route the users of ``output`` to ``replacement`` and erase the pattern, then helpers left unused."""
        graph = self.gm.graph
        self.output.replace_all_uses_with(replacement)
        erased = set(self.nodes)
        candidates = [arg for node in self.nodes for arg in node.all_input_nodes]
        for node in sorted(self.nodes, key=order.__getitem__, reverse=True):
            _erase(graph, node)
        while candidates:
            node = candidates.pop()
            if node not in erased and not real_users(node) and _is_pure_helper(node):
                candidates.extend(node.all_input_nodes)
                erased.add(node)
                _erase(graph, node)


def topological_order(gm: GraphModule) -> dict[Node, int]:
    return {node: index for index, node in enumerate(gm.graph.nodes)}


#: What torch.export adds to check the values of a pattern (shapes of data-dependent sizes): they go with it.
_SHAPE_CHECKS = frozenset(
    (
        _ATEN.sym_size.int,
        _ATEN._assert_scalar.default,
        _ATEN._assert_tensor_metadata.default,
        _ATEN.sym_constrain_range_for_size.default,
        operator.ge,
        operator.le,
        operator.gt,
        operator.lt,
        operator.eq,
    )
)

#: Size arithmetic a pattern's views and reshapes read (a dynamic batch times the heads): it goes with them.
_SIZE_OPS = frozenset((_ATEN.sym_size.int, operator.mul, operator.add, operator.sub, operator.floordiv))


def _is_size_computation(node: Node) -> bool:
    return (
        node.op == "call_function"
        and node.target in _SIZE_OPS
        and isinstance(node.meta.get("val"), (int, torch.SymInt))
        and not isinstance(node.meta.get("val"), bool)
    )


def erase_unused(gm: GraphModule, nodes: Iterable[Node]) -> None:
    """Erase the nodes of a replaced pattern that nothing uses any more, with the shape checks export added on them
    and the size computations only they read."""
    region = set(nodes)
    frontier = list(region)
    while frontier:
        node = frontier.pop()
        for other in (*node.users, *node.all_input_nodes):
            if other in region:
                continue
            if (other in node.users and other.op == "call_function" and other.target in _SHAPE_CHECKS) or (
                other in node.all_input_nodes and _is_size_computation(other)
            ):
                region.add(other)
                frontier.append(other)
    erased = True
    while erased:
        erased = False
        for node in reversed(list(gm.graph.nodes)):
            if node in region and not node.users and node.op != "placeholder":
                gm.graph.erase_node(node)
                region.discard(node)
                erased = True
