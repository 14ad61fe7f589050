"""The segments of a graph that Torch-TensorRT would run in PyTorch: maximal connected groups of ATen nodes it has no
converter for, each a candidate for one generated op.

Which nodes TensorRT takes is the caller's question to ask (``convertible``: Torch-TensorRT's converter registry,
validators included); which nodes Inductor would hand to ATen (matmuls, convolutions, random ops, custom ops, ops it
has no Triton lowering for) is Inductor's (``calls_aten``). The ATen-call policy: such a node is kept out of every
segment, because a generated plugin runs Triton kernels only (its library links the CUDA runtime, no ATen); it stays
where Torch-TensorRT puts it (in TensorRT where a converter takes it, so it is never a candidate; else in PyTorch,
with :data:`ATEN_CALL_REFUSAL` as its reason) and the group splits around it. A group is refused, with its reason
logged and kept in :attr:`Found.refused`, where it cannot be a plugin: data-dependent sizes (symbolic sizes the
exported graph reads off its inputs are taken), mutation, outputs that are not tensors, dtypes a plugin cannot take,
or a group that depends on itself through the rest of the graph.

Bool tensors cross the plugin's boundary as int8 (TensorRT passes plugins no BOOL tensors; both are one byte of 0 or
1): the segment's module casts them back on entry and to int8 on exit, and the graph casts around the call.
"""

from __future__ import annotations

import logging
import operator
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch.fx import GraphModule, Node

from ..declaration import DEFAULT_DTYPES

_LOGGER = logging.getLogger(__name__)


@dataclass
class Segment:
    """Nodes of one group (graph order), the values it takes from the rest of the graph and the ones it gives."""

    nodes: list[Node]
    inputs: list[Node]
    outputs: list[Node]


@dataclass
class Refusal:
    nodes: list[str]
    reason: str


@dataclass
class Found:
    segments: list[Segment] = field(default_factory=list)
    refused: list[Refusal] = field(default_factory=list)

    def refuse(self, nodes: list[Node], reason: str) -> None:
        names = [n.name for n in nodes]
        _LOGGER.info("torchtrt_plugins inductor plugins: %s stay in PyTorch: %s", ", ".join(names), reason)
        self.refused.append(Refusal(names, reason))


#: Why a node Inductor hands to ATen stays out of the segments (``{calls}``: the calls, or why it has no lowering).
ATEN_CALL_REFUSAL = "Inductor hands it to ATen ({calls}); a generated plugin runs Triton kernels only"

#: dtype a segment's input or output of the key's dtype has at the plugin's boundary.
CARRIED_AS = {torch.bool: torch.int8}
_DTYPES = (*DEFAULT_DTYPES, *CARRIED_AS)


def _value(node: Node) -> object:
    return node.meta.get("val")


def carried(value: torch.Tensor) -> torch.Tensor:
    """``value`` as it is at the plugin's boundary (its shape, in int8 if it is bool)."""
    return value.new_empty(value.shape, dtype=CARRIED_AS[value.dtype]) if value.dtype in CARRIED_AS else value


def _cast(graph: torch.fx.Graph, node: Node, value: torch.Tensor, dtype: torch.dtype) -> Node:
    cast = graph.call_function(torch.ops.aten._to_copy.default, (node,), {"dtype": dtype})
    cast.meta["val"] = value.new_empty(value.shape, dtype=dtype)
    return cast


def _data_dependent(value: torch.Tensor) -> bool:
    """Whether a size of ``value`` depends on data (an unbacked symbol: ``nonzero``, ``unique``, ``masked_select``):
    no profile bounds it, and the plugin's output shapes are expressions of its input sizes only."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    return bool(free_unbacked_symbols(value.shape))


def _node_refusal(node: Node) -> str | None:
    """Why ``node`` cannot be in a generated op whatever its neighbours, or None."""
    if not isinstance(node.target, torch._ops.OpOverload):
        return f"{node.target} is not an ATen op"
    if node.target._schema.is_mutable:
        return f"{node.target} mutates its inputs"
    value = _value(node)
    values = value if isinstance(value, (tuple, list)) else [value]
    if not values or not all(isinstance(v, torch.Tensor) for v in values):
        return f"{node.target} gives {type(value).__name__}, not tensors"
    for v in values:
        if _data_dependent(v):
            return (
                f"{node.target} gives data-dependent sizes {tuple(v.shape)}: a generated plugin's output shapes are "
                "expressions of its input sizes"
            )
        if v.dtype not in _DTYPES:
            return f"{node.target} gives {v.dtype}, which a plugin's tensors cannot be (it takes {_DTYPES})"
    return None


def _external_input_refusal(node: Node) -> str | None:
    value = _value(node)
    if not isinstance(value, torch.Tensor):
        return f"it takes {node.name}, a {type(value).__name__}, not a tensor"
    if _data_dependent(value):
        return f"its input {node.name} has data-dependent sizes {tuple(value.shape)}"
    if value.dtype not in _DTYPES:
        return f"its input {node.name} is {value.dtype}, which a plugin's inputs cannot be (it takes {_DTYPES})"
    return None


def _groups(candidates: list[Node]) -> list[list[Node]]:
    """Connected groups of ``candidates`` (an edge: one uses the other, directly or through a ``getitem`` of its
    tuple), each in graph order, their ``getitem`` nodes left out."""
    unpacking = [u for n in candidates for u in n.users if u.op == "call_function" and u.target is operator.getitem]
    parent = {n: n for n in [*candidates, *unpacking]}

    def root(n: Node) -> Node:
        while parent[n] is not n:
            parent[n] = parent[parent[n]]
            n = parent[n]
        return n

    for n in parent:
        for user in n.users:
            if user in parent:
                parent[root(user)] = root(n)
    groups: dict[Node, list[Node]] = {}
    for n in candidates:
        groups.setdefault(root(n), []).append(n)
    return list(groups.values())


def _reenters(group: set[Node]) -> bool:
    """Whether a node outside ``group`` both depends on it and feeds it (the group cannot become one call)."""
    outside = [u for n in group for u in n.users if u not in group]
    seen: set[Node] = set()
    while outside:
        node = outside.pop()
        if node in seen:
            continue
        seen.add(node)
        for user in node.users:
            if user in group:
                return True
            outside.append(user)
    return False


def _with_getitems(nodes: list[Node]) -> list[Node]:
    """``nodes`` and the ``getitem`` nodes that unpack their tuple outputs, in graph order."""
    members = set(nodes)
    for n in nodes:
        members.update(u for u in n.users if u.op == "call_function" and u.target is operator.getitem)
    order = {n: i for i, n in enumerate(nodes[0].graph.nodes)}
    return sorted(members, key=order.__getitem__)


def find_segments(
    gm: GraphModule,
    convertible: Callable[[Node], bool],
    calls_aten: Callable[[Node], str | None],
) -> Found:
    """The segments of ``gm`` to generate ops for, and the groups refused with their reasons.

    ``convertible(node)``: whether TensorRT takes the node; ``calls_aten(node)``: the ATen call Inductor's code for
    the node would make (e.g. ``extern_kernels.mm``, or why it has no Triton lowering for it), or None.
    """
    found = Found()
    candidates = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem or convertible(node):
            continue
        reason = _node_refusal(node)
        if reason is None:
            aten = calls_aten(node)
            reason = ATEN_CALL_REFUSAL.format(calls=aten) if aten else None
        if reason is not None:
            found.refuse([node], reason)
            continue
        candidates.append(node)
    for group in _groups(candidates):
        nodes = _with_getitems(group)
        members = set(nodes)
        inputs = list(dict.fromkeys(a for n in nodes for a in n.all_input_nodes if a not in members))
        outputs = [n for n in nodes if any(u not in members for u in n.users)]
        reason = next(filter(None, map(_external_input_refusal, inputs)), None)
        if reason is None:
            tuples = [n.name for n in outputs if not isinstance(_value(n), torch.Tensor)]
            reason = f"{', '.join(tuples)} leave it as tuples, not tensors" if tuples else None
        if reason is None and _reenters(members):
            reason = "a node outside it depends on it and feeds it"
        if reason is None and not outputs:
            reason = "nothing outside it uses its results"
        if reason is not None:
            found.refuse(nodes, reason)
            continue
        found.segments.append(Segment(nodes, inputs, outputs))
    return found


def segment_module(segment: Segment) -> GraphModule:
    """The segment as a module of its own: its inputs as placeholders (weights and constants included: lifted), its
    outputs returned as a tuple. Made before the segment is replaced (that erases its nodes)."""
    owner = segment.nodes[0].graph.owning_module
    graph = torch.fx.Graph()
    env: dict[Node, Node] = {}
    for i, node in enumerate(segment.inputs):
        value = _value(node)
        env[node] = graph.placeholder(f"input{i}")
        env[node].meta["val"] = carried(value)
        if value.dtype in CARRIED_AS:
            env[node] = _cast(graph, env[node], value, value.dtype)
    for node in segment.nodes:
        env[node] = graph.node_copy(node, env.__getitem__)
    results = []
    for node in segment.outputs:
        value = _value(node)
        if isinstance(value, (tuple, list)):  # a node on its own (Inductor's verdict on it): its tensors
            tensors = [(graph.call_function(operator.getitem, (env[node], i)), v) for i, v in enumerate(value)]
        else:
            tensors = [(env[node], value)]
        for result, v in tensors:
            results.append(_cast(graph, result, v, CARRIED_AS[v.dtype]) if v.dtype in CARRIED_AS else result)
    graph.output(tuple(results))
    return GraphModule(owner if owner is not None else torch.nn.Module(), graph)


def on_device(module: GraphModule, device: torch.device) -> GraphModule:
    """A copy of a segment's module whose factory nodes (``device=`` keyword) make their tensors on ``device``: the
    segment runs where its inputs are."""
    graph = torch.fx.Graph()
    graph.output(graph.graph_copy(module.graph, {}))
    for node in graph.nodes:
        if "device" in node.kwargs:
            node.kwargs = {**node.kwargs, "device": device}
    return GraphModule(module, graph)


def replace(gm: GraphModule, segment: Segment, op: torch._ops.OpOverload) -> Node:
    """Replace ``segment`` in ``gm`` by one call of ``op`` (its inputs in ``segment.inputs`` order, its outputs in
    ``segment.outputs`` order, a tuple where there are several); returns the call."""
    graph = gm.graph
    arguments = []
    with graph.inserting_before(segment.nodes[0]):
        for node in segment.inputs:
            value = _value(node)
            carried_as = CARRIED_AS.get(value.dtype)
            arguments.append(node if carried_as is None else _cast(graph, node, value, carried_as))
        call = graph.call_function(op, tuple(arguments))
    values = [_value(n) for n in segment.outputs]
    results = [carried(v) for v in values]
    call.meta["val"] = results[0] if len(values) == 1 else tuple(results)
    for index, node in enumerate(segment.outputs):
        if len(values) == 1:
            result = call
        else:
            with graph.inserting_after(call):
                result = graph.call_function(operator.getitem, (call, index))
            result.meta["val"] = results[index]
        if values[index].dtype in CARRIED_AS:
            with graph.inserting_after(result):
                result = _cast(graph, result, values[index], values[index].dtype)
        members = set(segment.nodes)
        for user in [u for u in node.users if u not in members]:
            user.replace_input_with(node, result)
    for node in reversed(segment.nodes):
        graph.erase_node(node)
    _topological_order(graph)
    return call


def _topological_order(graph: torch.fx.Graph) -> None:
    """Reorder ``graph``'s nodes so each follows its inputs, keeping the present order where it already does (the call
    stands before the group's first node, some of whose inputs may come later)."""
    order = list(graph.nodes)
    position = {n: i for i, n in enumerate(order)}
    placed: set[Node] = set()
    result: list[Node] = []

    def place(node: Node) -> None:
        stack = [node]
        while stack:
            top = stack[-1]
            if top in placed:
                stack.pop()
                continue
            waiting = sorted((a for a in top.all_input_nodes if a not in placed), key=position.__getitem__)
            if waiting:
                stack.extend(reversed(waiting))
                continue
            placed.add(top)
            result.append(stack.pop())

    for node in order:
        place(node)
    anchor = result[0]
    for node in result[1:]:
        anchor.append(node)
        anchor = node
