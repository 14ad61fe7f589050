"""Multi-scale deformable attention decomposed into ``grid_sample`` -> ``torchtrt::multi_scale_deformable_attention``.

The pure-PyTorch form of Hugging Face's ``MultiScaleDeformableAttention`` (Deformable DETR, RT-DETR, Grounding DINO
and the models sharing it) and of mmcv's ``multi_scale_deformable_attn_pytorch``, as ``torch.export`` records it
(before or after ``run_decompositions()``):

- ``value`` (B, S, H, D) split per level along S (``split_with_sizes``, or one ``slice`` per level), each level laid
  out as (B*H, D, H_l, W_l);
- ``2 * sampling_locations - 1`` (B, Q, H, L, P, 2), level ``l`` selected and laid out as (B*H, Q, P, 2);
- one ``grid_sample`` per level (bilinear, zeros, ``align_corners=False``), stacked (``stack``, or ``cat`` of
  them) into (B*H, D, Q, L*P), multiplied by ``attention_weights`` (B, Q, H, L, P) laid out as (B*H, 1, Q, L*P),
  summed over the last dimension and laid out as (B, Q, H*D).

Matched by structure: every view, reshape, flatten, permute, transpose, select, unsqueeze and contiguous copy on the
way is followed as a regrouping of the dimensions it moves (``_Layout``), so any spelling with the same element
order matches and none with another one does. The level sizes must be static: they become the op's
``spatial_shapes`` and ``level_start_index`` (int64 constants on the value's device). A ``grid_sample`` of another
mode (nearest, bicubic), padding (border, reflection) or with ``align_corners=True`` computes something else: the
graph is left as it is and the log says why (INFO).
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Node

from .. import ops  # noqa: F401  (defines torch.ops.torchtrt.multi_scale_deformable_attention)
from ._fx import (
    GraphRewrite,
    LoweringPass,
    RewriteRejected,
    arg,
    erase_unused,
    fake_mode_of,
    known_equal,
    real_users,
    value,
)

_LOGGER = logging.getLogger(__name__)

_ATEN = torch.ops.aten
_GRID_SAMPLERS = (_ATEN.grid_sampler.default, _ATEN.grid_sampler_2d.default)
_RESHAPES = frozenset(
    (
        _ATEN.view.default,
        _ATEN.reshape.default,
        _ATEN._unsafe_view.default,
        _ATEN._reshape_copy.default,  # what Torch-TensorRT makes of views before its post-lowering passes
        _ATEN.flatten.using_ints,
        _ATEN.unflatten.int,
        _ATEN.unsqueeze.default,
        _ATEN.squeeze.dim,
        _ATEN.squeeze.dims,
        _ATEN.squeeze.default,
    )
)
_PERMUTES = frozenset((_ATEN.permute.default, _ATEN.transpose.int))
#: Copies and aliases: same values, whatever memory format they give.
_COPIES = frozenset((_ATEN.clone.default, _ATEN.contiguous.default, _ATEN.alias.default))
_LAYOUT_OPS = _RESHAPES | _PERMUTES | _COPIES | {_ATEN.select.int}
_AFFINE_OPS = frozenset((_ATEN.mul.Tensor, _ATEN.mul.Scalar, _ATEN.sub.Tensor, _ATEN.sub.Scalar, _ATEN.add.Tensor))
_STACKS = (_ATEN.stack.default, _ATEN.cat.default)
#: grid_sampler's codes for what the op computes: bilinear, zeros.
_BILINEAR, _ZEROS = 0, 0
_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}

Atom = tuple
Dims = list[list[Atom]]


def _call(node: Any, *targets: Any) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


class _Layout:
    """Which named factor (batch, head, channel, query, level, point, coordinate, pixel) each dimension of a tensor
    spans, outermost first: ``dims`` is a list of dimensions, each a list of atoms, an atom a tuple naming one factor
    (a factor split by a reshape becomes ``atom + (0,)`` and ``atom + (1,)``, so tuple order is row-major order).
    Factors of size 1 are left out: a dimension of size 1 spans none."""

    def __init__(self, sizes: dict[Atom, Any]):
        self.sizes = sizes

    def start(self, shape: Sequence[Any], names: Sequence[str]) -> Dims:
        dims = []
        for size, name in zip(shape, names, strict=True):
            self.sizes[(name,)] = size
            dims.append([] if known_equal(size, 1) else [(name,)])
        return dims

    def product(self, atoms: Sequence[Atom]) -> Any:
        return math.prod((self.sizes[atom] for atom in atoms), start=1)

    def regroup(self, dims: Dims, shape: Sequence[Any]) -> Dims | None:
        """``dims`` reshaped (row-major) to ``shape``, or None where no regrouping of whole or split factors gives
        it."""
        flat = [atom for dim in dims for atom in dim]
        result, index = [], 0
        for size in shape:
            group: list[Atom] = []
            while not known_equal(self.product(group), size):
                if index == len(flat):
                    return None
                atom, taken = flat[index], self.product(group)
                whole = taken * self.sizes[atom]
                if all(isinstance(v, int) for v in (size, taken, whole)) and size % whole:
                    if size % taken or self.sizes[atom] % (size // taken):  # the factor must split evenly
                        return None
                    outer = size // taken
                    self.sizes[atom + (0,)], self.sizes[atom + (1,)] = outer, self.sizes[atom] // outer
                    flat[index : index + 1] = [atom + (0,), atom + (1,)]
                    continue
                group.append(atom)
                index += 1
            result.append(group)
        return result if index == len(flat) else None

    def apply(self, node: Node, dims: Dims) -> tuple[Dims, int | None] | None:
        """``(dims of node's output, index selected or None)`` for a layout op on ``dims``, or None."""
        out = value(node)
        if out is None:
            return None
        ndim = len(dims)
        if node.target in _COPIES:
            return dims, None
        if node.target in _RESHAPES:
            regrouped = self.regroup(dims, out.shape)
            return None if regrouped is None else (regrouped, None)
        if node.target == _ATEN.permute.default:
            order = [d % ndim for d in node.args[1]]
            return [dims[d] for d in order], None
        if node.target == _ATEN.transpose.int:
            first, second = (d % ndim for d in node.args[1:3])
            swapped = list(dims)
            swapped[first], swapped[second] = dims[second], dims[first]
            return swapped, None
        if node.target == _ATEN.select.int:
            dim, index = node.args[1] % ndim, node.args[2]
            if not isinstance(index, int) or index < 0 or dims[dim] not in ([("level",)], []):
                return None
            if not dims[dim] and index != 0:
                return None
            return dims[:dim] + dims[dim + 1 :], index
        return None


def _walk_back(node: Any, through: Any) -> list[Node]:
    """``[node, its input, ...]`` back through ops ``through(node)`` accepts, ending in the first other node."""
    path = [node]
    while isinstance(path[-1], Node) and through(path[-1]) and isinstance(path[-1].args[0], Node):
        path.append(path[-1].args[0])
    return path


def _is_layout(node: Node) -> bool:
    return _call(node, *_LAYOUT_OPS)


def _is_reshape_or_copy(node: Node) -> bool:
    return _call(node, *_RESHAPES, *_COPIES)


def _is_layout_but_select(node: Node) -> bool:
    return _call(node, *_RESHAPES, *_COPIES, *_PERMUTES)


def _is_grid_step(node: Node) -> bool:
    return _is_layout(node) or (_call(node, *_AFFINE_OPS) and _affine_step(node) is not None)


def _is_number(x: Any, expected: float) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x == expected


def _affine_step(node: Node) -> str | None:
    """``"times 2"`` or ``"minus 1"`` for the two steps of ``2 * x - 1``, else None."""
    if len(node.args) != 2 or not isinstance(node.args[0], Node) or node.kwargs.get("alpha", 1) != 1:
        return None
    other = node.args[1]
    if node.target in (_ATEN.mul.Tensor, _ATEN.mul.Scalar) and _is_number(other, 2):
        return "times 2"
    if node.target in (_ATEN.sub.Tensor, _ATEN.sub.Scalar) and _is_number(other, 1):
        return "minus 1"
    if node.target == _ATEN.add.Tensor and _is_number(other, -1):
        return "minus 1"
    return None


@dataclass(frozen=True)
class _Level:
    value: Node
    start: int
    height: int
    width: int


@dataclass
class _Match:
    value: Node
    locations: Node
    weights: Node
    levels: list[_Level]
    output: Node
    nodes: list[Node] = field(default_factory=list)


class _Refused(Exception):
    """The pattern is there but computes something the op does not: the reason, for the log."""


def _level_source(node: Node) -> tuple[Node, int, int] | None:
    """``(value, start, rows)`` of a level's slice of ``value`` along dim 1: ``split_with_sizes(value, sizes, 1)[k]``
    or ``slice(value, 1, start, end)``."""
    if _call(node, operator.getitem) and _call(split := node.args[0], _ATEN.split_with_sizes.default):
        sizes, dim = list(split.args[1]), arg(split, 2, "dim", 0)
        index = node.args[1]
        if dim != 1 or not all(isinstance(s, int) for s in sizes) or not isinstance(index, int):
            return None
        return split.args[0], sum(sizes[:index]), sizes[index]
    if _call(node, _ATEN.slice.Tensor) and arg(node, 1, "dim", 0) == 1 and arg(node, 4, "step", 1) == 1:
        start, end, whole = arg(node, 2, "start"), arg(node, 3, "end"), value(node.args[0])
        if whole is not None and isinstance(start, int) and isinstance(end, int) and isinstance(whole.shape[1], int):
            end = min(end, whole.shape[1])  # ``value[:, start:]`` ends at sys.maxsize
            if 0 <= start < end:
                return node.args[0], start, end - start
    return None


def _follow(layout: _Layout, path: list[Node], dims: Dims) -> tuple[Dims, list[int]]:
    """``dims`` carried forward along ``path`` (each node the input of the next), with the indices selected; raises
    LookupError where a node is no layout op on them."""
    selected = []
    for node in path:
        if _affine_step(node) is not None:  # elementwise: the layout stays
            continue
        step = layout.apply(node, dims)
        if step is None:
            raise LookupError
        dims, index = step
        if index is not None:
            selected.append(index)
    return dims, selected


class _Matcher:
    """The pattern ending in one ``sum`` node: ``match()`` gives it, None where it is not there, or raises
    ``_Refused`` where it is there and computes something else."""

    def __init__(self, total: Node):
        self.total = total
        self.layout = _Layout({})
        self.nodes: list[Node] = []

    def _present(self, *atoms: Atom) -> list[Atom]:
        return [atom for atom in atoms if not known_equal(self.layout.sizes[atom], 1)]

    def _named(self, names: Sequence[str]) -> Dims:
        return [self._present((name,)) for name in names]

    def _start(self, node: Node, names: Sequence[str]) -> Dims | None:
        """Dims of ``node`` with one factor per dimension, named; None where its sizes differ from those seen."""
        val = value(node)
        if val is None or val.dim() != len(names):
            return None
        sizes = self.layout.sizes
        if not all(
            (n,) not in sizes or known_equal(sizes[(n,)], size) for n, size in zip(names, val.shape, strict=True)
        ):
            return None
        return self.layout.start(val.shape, names)

    def match(self) -> _Match | None:
        total = self.total
        if len(total.args) < 2 or arg(total, 2, "keepdim", False) or total.kwargs.get("dtype") is not None:
            return None
        product = total.args[0]
        if not _call(product, _ATEN.mul.Tensor) or len(product.args) != 2:
            return None
        if not all(isinstance(a, Node) for a in product.args):
            return None
        for samples, weights in (product.args, product.args[::-1]):
            self.layout, self.nodes = _Layout({}), [total, product]
            try:
                return self._match(samples, weights)
            except LookupError:
                continue
        return None

    def _match(self, samples: Node, weights: Node) -> _Match:
        samplers, branches, joined = self._samplers(samples)
        levels = [self._level(sampler, level) for level, sampler in enumerate(samplers)]
        whole = levels[0].value
        if any(level.value is not whole for level in levels):
            raise LookupError
        locations = None
        for level, sampler in enumerate(samplers):
            locations = self._grid(sampler, level, locations)
        if not known_equal(self.layout.sizes[("level",)], len(levels)):
            raise LookupError
        weights, weight_dims = self._weights(weights)
        dims = self._combined(branches, joined, len(samplers))
        if not isinstance(self.total.args[1], (list, tuple)) or len(self.total.args[1]) != 1:
            raise LookupError
        summed = [self.total.args[1][0] % len(dims)]
        if len(weight_dims) != len(dims):
            raise LookupError
        # The weights span every factor but the channel: each of their dimensions is the samples' or of size 1.
        if any(w and w != d for d, w in zip(dims, weight_dims, strict=True)):
            raise LookupError
        if sorted(dims[summed[0]]) != self._present(("level",), ("point",)):
            raise LookupError
        output = self._output(dims[: summed[0]] + dims[summed[0] + 1 :])
        for level, sampler in enumerate(samplers):
            _check_modes(sampler, level)
        return _Match(whole, locations, weights, levels, output, self.nodes)

    def _samplers(self, samples: Node) -> tuple[list[Node], list[list[Node]], list[Node]]:
        """The grid samplers whose stack ``samples`` is: them, the path from each to the stack (or cat), the path
        from the stack to ``samples`` (the stack first); one sampler and no stack is one level."""
        path = _walk_back(samples, _is_layout_but_select)
        if _call(path[-1], *_GRID_SAMPLERS):
            self.nodes.append(path[-1])
            return [path[-1]], [[]], path[-2::-1]
        if not _call(path[-1], *_STACKS) or not path[-1].args[0]:
            raise LookupError
        samplers, branches = [], []
        for member in path[-1].args[0]:
            branch = _walk_back(member, _is_reshape_or_copy)
            if not _call(branch[-1], *_GRID_SAMPLERS):
                raise LookupError
            samplers.append(branch[-1])
            branches.append(branch[-2::-1])
        self.nodes += [*samplers, *(node for branch in branches for node in branch)]
        return samplers, branches, path[::-1]

    def _level(self, sampler: Node, level: int) -> _Level:
        """Level ``level``'s slice of the value, laid out as (B*H, D, H_l, W_l) for ``sampler``."""
        path = _walk_back(sampler.args[0], _is_layout_but_select)
        source = _level_source(path[-1])
        if source is None:
            raise LookupError
        whole, start, rows = source
        if self._start(whole, ("batch", "rows", "head", "channel")) is None:
            raise LookupError
        self.layout.sizes[("pixel", level)] = rows
        dims = self._named(("batch",)) + [self._present(("pixel", level))] + self._named(("head", "channel"))
        dims, selected = _follow(self.layout, path[-2::-1], dims)
        if (
            selected
            or len(dims) != 4
            or dims[:2] != [self._present(("batch",), ("head",)), self._named(("channel",))[0]]
        ):
            raise LookupError
        height, width = value(sampler.args[0]).shape[2:]
        if not (isinstance(height, int) and isinstance(width, int)):
            raise _Refused(f"level {level}'s map is not of a static size ({height} x {width})")
        pixels = dims[2] + dims[3]
        if height * width != rows or pixels != sorted(pixels) or any(a[:2] != ("pixel", level) for a in pixels):
            raise LookupError
        self.nodes += path if _call(path[-1], _ATEN.slice.Tensor) else [*path, path[-1].args[0]]
        return _Level(whole, start, height, width)

    def _grid(self, sampler: Node, level: int, locations: Node | None) -> Node:
        """The locations (B, Q, H, L, P, 2) whose ``2 * x - 1`` at level ``level`` is ``sampler``'s grid."""
        path = _walk_back(sampler.args[1], _is_grid_step)
        names = ("batch", "query", "head", "level", "point", "xy")
        if locations is None:
            candidates = [i for i in range(len(path) - 1, -1, -1) if (v := value(path[i])) is not None and v.dim() == 6]
            if not candidates:
                raise LookupError
            position = candidates[0]
            dims = self._start(path[position], names)
        elif locations in path:
            position = path.index(locations)
            dims = self._named(names)
        else:
            raise LookupError
        if dims is None or self.layout.sizes[("xy",)] != 2:
            raise LookupError
        forward = path[position - 1 :: -1] if position else []
        if [_affine_step(node) for node in forward if _call(node, *_AFFINE_OPS)] != ["times 2", "minus 1"]:
            raise LookupError
        dims, selected = _follow(self.layout, forward, dims)
        expected = [self._present(("batch",), ("head",)), *self._named(("query", "point", "xy"))]
        if selected != [level] or dims != expected:
            raise LookupError
        self.nodes += path[:position]
        return path[position]

    def _weights(self, operand: Node) -> tuple[Node, Dims]:
        """The weights (B, Q, H, L, P) that ``operand`` lays out, and its dims."""
        path = _walk_back(operand, _is_layout_but_select)
        names = ("batch", "query", "head", "level", "point")
        for position in range(len(path) - 1, -1, -1):
            saved = dict(self.layout.sizes)
            dims = self._start(path[position], names)
            if dims is not None:
                try:
                    dims, selected = _follow(self.layout, path[position - 1 :: -1] if position else [], dims)
                except LookupError:
                    selected = None
                if selected == []:
                    self.nodes += path[:position]
                    return path[position], dims
            self.layout.sizes = saved
        raise LookupError

    def _combined(self, branches: list[list[Node]], joined: list[Node], levels: int) -> Dims:
        """Dims of the samples of every level, stacked and laid out as the product takes them."""
        sampled = [self._present(("batch",), ("head",)), *self._named(("channel", "query", "point"))]
        members = [_follow(self.layout, branch, sampled) for branch in branches]
        if any(selected or dims != members[0][0] for dims, selected in members):
            raise LookupError
        dims = members[0][0]
        if joined and _call(joined[0], *_STACKS):
            stack, joined = joined[0], joined[1:]
            self.nodes.append(stack)
            level = [("level",)] if levels > 1 else []
            if stack.target == _ATEN.stack.default:
                dim = arg(stack, 1, "dim", 0) % (len(dims) + 1)
                dims = [*dims[:dim], level, *dims[dim:]]
            else:
                dim = arg(stack, 1, "dim", 0) % len(dims)
                dims = [*dims[:dim], level + dims[dim], *dims[dim + 1 :]]
        dims, selected = _follow(self.layout, joined, dims)
        if selected:
            raise LookupError
        self.nodes += joined
        return dims

    def _output(self, dims: Dims) -> Node:
        """The node after the sum laid out as (B, Q, H*D), through its sole users (and the copies after it)."""
        target = [self._present(("batch",)), self._present(("query",)), self._present(("head",), ("channel",))]
        node, found = self.total, None
        while True:
            if found is None and dims == target:
                found = node
            users = real_users(node)
            if len(users) != 1 or not _call(users[0], *(_COPIES if found is not None else _LAYOUT_OPS)):
                break
            node = users[0]
            if found is not None:
                found = node
            else:
                dims, selected = _follow(self.layout, [node], dims)
                if selected:
                    raise LookupError
            self.nodes.append(node)
        if found is None:
            raise LookupError
        return found


def _check_modes(sampler: Node, level: int) -> None:
    mode, padding = arg(sampler, 2, "interpolation_mode"), arg(sampler, 3, "padding_mode")
    corners = arg(sampler, 4, "align_corners")
    if mode != _BILINEAR:
        raise _Refused(f"level {level}'s grid_sample has mode={_MODES.get(mode, mode)!r} (the op samples bilinearly)")
    if padding != _ZEROS:
        raise _Refused(
            f"level {level}'s grid_sample has padding_mode={_PADDINGS.get(padding, padding)!r} (the op pads with zeros)"
        )
    if corners is not False:
        raise _Refused(f"level {level}'s grid_sample has align_corners={corners!r} (the op: align_corners=False)")


def _rewrite(gm: GraphModule, match: _Match) -> bool:
    device = value(match.value).device
    shapes = torch.tensor([[level.height, level.width] for level in match.levels], dtype=torch.int64, device=device)
    starts = torch.tensor([level.start for level in match.levels], dtype=torch.int64, device=device)
    rewrite = GraphRewrite(gm, match.output, [], fake_mode_of(gm))
    constants = []
    for kind, tensor in (("spatial_shapes", shapes), ("level_start_index", starts)):
        name = _free_name(gm, f"_torchtrt_msda_{kind}")
        gm.register_buffer(name, tensor)
        constants.append(rewrite.get_attr(name))
    try:
        replacement = rewrite.call(
            torch.ops.torchtrt.multi_scale_deformable_attention.default,
            (match.value, *constants, match.locations, match.weights),
        )
    except RewriteRejected as err:
        _LOGGER.info("multi_scale_deformable_attention: %s stays as it is: %s", match.output.name, err)
        for constant in constants:
            delattr(gm, constant.target)
        return False
    match.output.replace_all_uses_with(replacement)
    erase_unused(gm, [node for node in match.nodes if node not in (match.value, match.locations, match.weights)])
    return True


def _free_name(gm: GraphModule, stem: str) -> str:
    index = 0
    while hasattr(gm, f"{stem}_{index}"):
        index += 1
    return f"{stem}_{index}"


def run(gm: GraphModule) -> int:
    """Rewrite every decomposed multi-scale deformable attention of ``gm``; how many."""
    count = 0
    for node in list(gm.graph.nodes):
        if getattr(node, "_erased", False) or not _call(node, _ATEN.sum.dim_IntList):
            continue
        try:
            match = _Matcher(node).match()
        except _Refused as refusal:
            _LOGGER.info("multi_scale_deformable_attention: %s stays as it is: %s", node.name, refusal)
            continue
        except Exception:  # noqa: BLE001 - a graph this matcher does not foresee must not fail the user's compile
            _LOGGER.warning("multi_scale_deformable_attention: %s not examined", node.name, exc_info=True)
            continue
        if match is not None and _rewrite(gm, match):
            count += 1
    return count


PASS = LoweringPass("multi_scale_deformable_attention", run)
