"""Multi-scale deformable attention decomposed into ``grid_sample`` -> ``torchtrt::multi_scale_deformable_attention``.

The pure-PyTorch forms of Hugging Face's ``MultiScaleDeformableAttention`` (Deformable DETR, RT-DETR, Grounding DINO
and the models sharing it), of RT-DETRv2's ``multi_scale_deformable_attention_v2`` and of mmcv's
``multi_scale_deformable_attn_pytorch``, as ``torch.export`` records them (before or after ``run_decompositions()``):

- ``value`` (B, S, H, D) cut per level along S (``split_with_sizes`` or ``slice``, before or after it is laid out as
  (B*H, D, S)), each level laid out as (B*H, D, H_l, W_l);
- ``2 * sampling_locations - 1``, the locations (B, Q, H, L, P, 2), or (B, Q, H, L*P, 2) with the levels' points one
  after the other (RT-DETRv2), level ``l`` selected (``select``, or a piece of the L*P points) and laid out as
  (B*H, Q, P, 2);
- one ``grid_sample`` per level (bilinear, zeros, ``align_corners=False``), stacked (``stack``, or ``cat`` of
  them) into (B*H, D, Q, L*P), multiplied by ``attention_weights`` (B, Q, H, L, P) or (B, Q, H, L*P) laid out as
  (B*H, 1, Q, L*P), summed over the last dimension and laid out as (B, Q, H*D).

Matched by structure: every view, reshape, flatten, permute, transpose, select, split, slice, unsqueeze and contiguous
copy on the way is followed as a regrouping of the dimensions it moves (``_Layout``), so any spelling with the same
element order matches and none with another one does. Static level sizes become the op's ``spatial_shapes`` and
``level_start_index`` as int64 constants on the value's device; symbolic ones (a dynamic image size) become int64
tensors the graph computes from the size nodes it already holds. The flat (B, Q, H, L*P, ...) locations and weights
are viewed as the op's (B, Q, H, L, P, ...). What computes something else is left as it is and the log says why
(INFO): a ``grid_sample`` of another mode (nearest, bicubic), padding (border, reflection) or with
``align_corners=True``; levels sampling different numbers of points; levels read by indexing at the nearest pixel
(RT-DETRv2's ``method="discrete"``).
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
#: Ops whose outputs are pieces along one dimension, taken by ``getitem``.
_SPLITS = (_ATEN.split_with_sizes.default, _ATEN.split.Tensor)
_AFFINE_OPS = frozenset((_ATEN.mul.Tensor, _ATEN.mul.Scalar, _ATEN.sub.Tensor, _ATEN.sub.Scalar, _ATEN.add.Tensor))
_STACKS = (_ATEN.stack.default, _ATEN.cat.default, _ATEN.concat.default)
#: grid_sampler's codes for what the op computes: bilinear, zeros.
_BILINEAR, _ZEROS = 0, 0
_MODES = {0: "bilinear", 1: "nearest", 2: "bicubic"}
_PADDINGS = {0: "zeros", 1: "border", 2: "reflection"}

Atom = tuple
Dims = list[list[Atom]]
#: A dimension's name for ``_Matcher._start``: one factor, or several (outermost first) whose sizes are known.
Name = str | tuple[str, ...]


def _call(node: Any, *targets: Any) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


def _size(x: Any) -> Any:
    """An int or SymInt argument's value (a size node's from its metadata), or None."""
    if isinstance(x, Node):
        x = x.meta.get("val")
    return x if isinstance(x, (int, torch.SymInt)) and not isinstance(x, bool) else None


def _piece(node: Any) -> tuple[int, Any, Any] | None:
    """``(dim, start, length)`` where ``node`` is a piece of its input along ``dim``: an item of ``split`` or
    ``split_with_sizes``, or a ``slice`` of step 1; else None."""
    if _call(node, operator.getitem) and _call(split := node.args[0], *_SPLITS):
        whole, pieces, index = value(split.args[0]), split.meta.get("val"), node.args[1]
        if whole is None or not isinstance(pieces, (list, tuple)) or not isinstance(index, int):
            return None
        dim = arg(split, 2, "dim", 0) % whole.dim()
        lengths = [piece.shape[dim] for piece in pieces]
        return dim, sum(lengths[:index]), lengths[index]
    if _call(node, _ATEN.slice.Tensor) and arg(node, 4, "step", 1) == 1:
        whole, out = value(node.args[0]), value(node)
        if whole is None or out is None:
            return None
        dim = arg(node, 1, "dim", 0) % whole.dim()
        start = _size(arg(node, 2, "start", 0) or 0)
        if isinstance(start, int) and start < 0:
            if not isinstance(whole.shape[dim], int):
                return None
            start = max(start + whole.shape[dim], 0)
        return None if start is None else (dim, start, out.shape[dim])
    return None


class _Layout:
    """Which named factor (batch, head, channel, query, level, point, coordinate, pixel) each dimension of a tensor
    spans, outermost first: ``dims`` is a list of dimensions, each a list of atoms, an atom a tuple naming one factor
    (a factor split by a reshape becomes ``atom + (0,)`` and ``atom + (1,)``, so tuple order is row-major order).
    Factors of size 1 are left out: a dimension of size 1 spans none. The value's rows (``("rows",)``, the levels one
    after the other) are no product of factors: a piece of them is the pixels of one level, ``("pixel", k)`` for the
    ``k``-th piece taken, whose ``(start, length)`` is ``pieces[k]``."""

    def __init__(self, sizes: dict[Atom, Any]):
        self.sizes = sizes
        self.pieces: list[tuple[Any, Any]] = []

    def start(self, shape: Sequence[Any], names: Sequence[Name]) -> Dims:
        dims = []
        for size, name in zip(shape, names, strict=True):
            if isinstance(name, tuple):
                dims.append([(n,) for n in name if not known_equal(self.sizes[(n,)], 1)])
                continue
            self.sizes[(name,)] = size
            dims.append([] if known_equal(size, 1) else [(name,)])
        return dims

    def product(self, atoms: Sequence[Atom]) -> Any:
        return math.prod((self.sizes[atom] for atom in atoms), start=1)

    def _split(self, atom: Atom, outer: Any) -> bool:
        """Split factor ``atom`` into ``outer`` times the rest where that is exact; whether it was."""
        whole = self.sizes[atom]
        if all(isinstance(v, int) for v in (whole, outer)):
            if outer <= 1 or whole % outer or outer == whole:
                return False
            inner = whole // outer
        else:
            inner = whole // outer
            if not known_equal(outer * inner, whole) or known_equal(inner, 1) or known_equal(outer, 1):
                return False
        self.sizes[atom + (0,)], self.sizes[atom + (1,)] = outer, inner
        return True

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
                if not known_equal(taken * self.sizes[atom], size) and self._fits_inside(taken, atom, size):
                    if not self._split(atom, size // taken):
                        return None
                    flat[index : index + 1] = [atom + (0,), atom + (1,)]
                    continue
                group.append(atom)
                index += 1
            result.append(group)
        return result if index == len(flat) else None

    def _fits_inside(self, taken: Any, atom: Atom, size: Any) -> bool:
        """``size`` ends inside factor ``atom`` (after ``taken``): the factor must be split."""
        whole = taken * self.sizes[atom]
        if all(isinstance(v, int) for v in (size, taken, whole)):
            return bool(size % whole)
        outer = size // taken
        return known_equal(outer * taken, size) and known_equal((self.sizes[atom] // outer) * outer, self.sizes[atom])

    def take(self, dims: Dims, dim: int, start: Any, length: Any) -> tuple[Dims, int | None] | None:
        """A piece ``[start, start + length)`` along ``dim``: of the rows (one level's pixels), of levels-and-points
        (one level: its index), or all of a dimension; None for any other."""
        atoms = dims[dim]
        if atoms == [("rows",)]:
            atom = ("pixel", len(self.pieces))
            self.pieces.append((start, length))
            self.sizes[atom] = length
            return [*dims[:dim], [] if known_equal(length, 1) else [atom], *dims[dim + 1 :]], None
        if atoms and atoms[0] == ("level",):
            inner = self.product(atoms[1:])
            if isinstance(start, int) and isinstance(inner, int) and known_equal(length, inner) and start % inner == 0:
                return [*dims[:dim], atoms[1:], *dims[dim + 1 :]], start // inner
            return None
        if known_equal(start, 0) and known_equal(length, self.product(atoms)):
            return dims, None
        return None

    def apply(self, node: Node, dims: Dims) -> tuple[Dims, int | None] | None:
        """``(dims of node's output, index selected or None)`` for a layout op on ``dims``, or None."""
        if _call(node, *_SPLITS):  # its pieces are taken by the getitems after it
            return dims, None
        out = value(node)
        if out is None:
            return None
        ndim = len(dims)
        if (piece := _piece(node)) is not None:
            return self.take(dims, *piece)
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


def _is_piece_step(node: Node) -> bool:
    return _call(node, *_SPLITS) or _piece(node) is not None


def _is_value_step(node: Node) -> bool:
    return _is_layout_but_select(node) or _is_piece_step(node)


def _is_grid_step(node: Node) -> bool:
    return _is_layout(node) or _is_piece_step(node) or (_call(node, *_AFFINE_OPS) and _affine_step(node) is not None)


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
    start: Any  # int or SymInt
    height: Any
    width: Any


@dataclass
class _Match:
    value: Node
    locations: Node
    weights: Node
    levels: list[_Level]
    points: int
    output: Node
    nodes: list[Node] = field(default_factory=list)


class _Refused(Exception):
    """The pattern is there but computes something the op does not: the reason, for the log."""


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

    def _start(self, node: Node, names: Sequence[Name]) -> Dims | None:
        """Dims of ``node`` with one factor per dimension, named (or several, for a tuple of names whose sizes are
        known); None where its sizes differ from those seen."""
        val = value(node)
        if val is None or val.dim() != len(names):
            return None
        sizes = self.layout.sizes
        for name, size in zip(names, val.shape, strict=True):
            factors = name if isinstance(name, tuple) else (name,)
            if isinstance(name, tuple) and not all((n,) in sizes for n in name):
                return None
            if all((n,) in sizes for n in factors) and not known_equal(
                self.layout.product([(n,) for n in factors]), size
            ):
                return None
        return self.layout.start(val.shape, names)

    def _restarting(self, attempt: Any) -> Any:
        """``attempt()``, or None with the layout as it was where it raises LookupError or gives None."""
        sizes, pieces, nodes = dict(self.layout.sizes), list(self.layout.pieces), len(self.nodes)
        try:
            result = attempt()
        except LookupError:
            result = None
        if result is None:
            self.layout.sizes, self.layout.pieces = sizes, pieces
            del self.nodes[nodes:]
        return result

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
        for level, sampler in enumerate(samplers):
            if _call(sampler, _ATEN.index.Tensor):
                raise _Refused(
                    f"level {level} is read by indexing at the nearest pixel, clamped to the map (RT-DETRv2's "
                    "method='discrete'); the op samples bilinearly with zero padding"
                )
        points = [value(sampler.args[1]).shape[-2] for sampler in samplers]
        if not all(known_equal(p, points[0]) for p in points):
            raise _Refused(f"its levels sample {points} points (the op samples as many points at every level)")
        locations = None
        for level, sampler in enumerate(samplers):
            locations = self._grid(sampler, level, locations, len(samplers), points[0])
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
        return _Match(whole, locations, weights, levels, points[0], output, self.nodes)

    def _samplers(self, samples: Node) -> tuple[list[Node], list[list[Node]], list[Node]]:
        """The grid samplers whose stack ``samples`` is: them, the path from each to the stack (or cat), the path
        from the stack to ``samples`` (the stack first); one sampler and no stack is one level. A level read by
        indexing instead (``aten.index``) stands in its sampler's place, for ``_match`` to refuse."""
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
                branch = _walk_back(member, _is_layout_but_select)
                if not _call(branch[-1], _ATEN.index.Tensor):
                    raise LookupError
            samplers.append(branch[-1])
            branches.append(branch[-2::-1])
        self.nodes += [*samplers, *(node for branch in branches for node in branch)]
        return samplers, branches, path[::-1]

    def _level(self, sampler: Node, level: int) -> _Level:
        """Level ``level``'s piece of the value, laid out as (B*H, D, H_l, W_l) for ``sampler``."""
        path = _walk_back(sampler.args[0], _is_value_step)
        for position in range(len(path) - 1, 0, -1):
            found = self._restarting(lambda position=position: self._level_from(path, position, sampler))
            if found is not None:
                return found
        raise LookupError

    def _level_from(self, path: list[Node], position: int, sampler: Node) -> _Level | None:
        """The level, where ``path[position]`` is the whole value (B, S, H, D) it is a piece of."""
        dims = self._start(path[position], ("batch", "rows", "head", "channel"))
        if dims is None:
            return None
        piece = len(self.layout.pieces)
        dims, selected = _follow(self.layout, path[position - 1 :: -1], dims)
        if (
            selected
            or len(self.layout.pieces) != piece + 1
            or len(dims) != 4
            or dims[:2] != [self._present(("batch",), ("head",)), self._named(("channel",))[0]]
        ):
            return None
        height, width = value(sampler.args[0]).shape[2:]
        start, rows = self.layout.pieces[piece]
        pixels = dims[2] + dims[3]
        if (
            not known_equal(height * width, rows)
            or pixels != sorted(pixels)
            or any(a[:2] != ("pixel", piece) for a in pixels)
        ):
            return None
        self.nodes += path[:position]
        return _Level(path[position], start, height, width)

    def _grid(self, sampler: Node, level: int, locations: Node | None, levels: int, points: Any) -> Node:
        """The locations (B, Q, H, L, P, 2), or (B, Q, H, L*P, 2), whose ``2 * x - 1`` at level ``level`` is
        ``sampler``'s grid."""
        path = _walk_back(sampler.args[1], _is_grid_step)
        names = ("batch", "query", "head", "level", "point", "xy")
        if locations is None:
            ranks = [(value(node).dim() if value(node) is not None else 0) for node in path]
            candidates = sorted(
                (i for i, rank in enumerate(ranks) if rank in (5, 6)), key=lambda i: (ranks[i] != 6, -i)
            )
            if not candidates:
                raise LookupError
            position = candidates[0]
            if value(path[position]).dim() == 5:
                self.layout.sizes[("level",)], self.layout.sizes[("point",)] = levels, points
                dims = self._start(path[position], ("batch", "query", "head", ("level", "point"), "xy"))
            else:
                dims = self._start(path[position], names)
        elif locations in path:
            position = path.index(locations)
            dims = self._start(path[position], ("batch", "query", "head", ("level", "point"), "xy"))
            if value(locations).dim() == 6:
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
        one_level = known_equal(self.layout.sizes[("level",)], 1) and selected == []
        if (selected != [level] and not one_level) or dims != expected:
            raise LookupError
        self.nodes += path[:position]
        return path[position]

    def _weights(self, operand: Node) -> tuple[Node, Dims]:
        """The weights (B, Q, H, L, P), or (B, Q, H, L*P), that ``operand`` lays out, and its dims."""
        path = _walk_back(operand, _is_layout_but_select)
        # The op's own layout first (no reshape to add), then the levels' points one after the other.
        ranks = [(value(node).dim() if value(node) is not None else 0) for node in path]
        for position in sorted(range(len(path)), key=lambda i: (ranks[i] != 5, -i)):
            found = self._restarting(lambda position=position: self._weights_from(path, position))
            if found is not None:
                return found
        raise LookupError

    def _weights_from(self, path: list[Node], position: int) -> tuple[Node, Dims] | None:
        val = value(path[position])
        if val is None or val.dim() not in (4, 5):
            return None
        names = (
            ("batch", "query", "head", ("level", "point"))
            if val.dim() == 4
            else ("batch", "query", "head", "level", "point")
        )
        dims = self._start(path[position], names)
        if dims is None:
            return None
        dims, selected = _follow(self.layout, path[position - 1 :: -1] if position else [], dims)
        if selected:
            return None
        self.nodes += path[:position]
        return path[position], dims

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


def _size_nodes(gm: GraphModule, before: Node) -> dict[Any, Node]:
    """The graph's nodes computing a symbolic size ahead of ``before``, by the expression they compute (the first)."""
    found: dict[Any, Node] = {}
    for node in gm.graph.nodes:
        if node is before:
            break
        val = node.meta.get("val")
        if isinstance(val, torch.SymInt):
            found.setdefault(val.node.expr, node)
    return found


def _arithmetic(rewrite: GraphRewrite, op: Any, a: Any, b: Any) -> Any:
    """``op(a, b)`` of ints, or a node computing it where one is a node."""
    if isinstance(a, int) and isinstance(b, int):
        return op(a, b)
    return rewrite.call(op, (a, b))


def _computed_sizes(gm: GraphModule, rewrite: GraphRewrite, match: _Match) -> tuple[list[Any], list[Any]]:
    """``(shapes, starts)``: each level's height and width (flat) and its first row, as ints or the size nodes the
    graph computes them with (a first row also as the previous level's first row plus its height times width);
    raises ``_Refused`` where the graph computes one nowhere ahead of the attention."""
    nodes = _size_nodes(gm, match.output)

    def node_of(size: Any, what: str) -> Any:
        if isinstance(size, int):
            return size
        if size.node.expr not in nodes:
            raise _Refused(f"{what} is {size}, which no node ahead of the attention computes")
        return nodes[size.node.expr]

    levels = match.levels
    shapes = [
        node_of(size, f"level {index}'s {name}")
        for index, level in enumerate(levels)
        for name, size in (("height", level.height), ("width", level.width))
    ]
    starts: list[Any] = []
    for index, level in enumerate(levels):
        start = level.start
        after = None if not index else levels[index - 1]
        if isinstance(start, int) or start.node.expr in nodes or after is None:
            starts.append(node_of(start, f"level {index}'s first row"))
        elif known_equal(start, after.start + after.height * after.width):
            rows = _arithmetic(rewrite, operator.mul, shapes[2 * index - 2], shapes[2 * index - 1])
            starts.append(_arithmetic(rewrite, operator.add, starts[-1], rows))
        else:
            raise _Refused(f"level {index}'s first row is {start}, which no node ahead of the attention computes")
    return shapes, starts


def _int64_tensor(rewrite: GraphRewrite, entries: list[Any], shape: list[int], device: torch.device) -> Node:
    """A node computing the int64 tensor of ``shape`` holding ``entries`` (ints and size nodes), row-major, with the
    ops Torch-TensorRT converts (scalar_tensor, unsqueeze, cat, view)."""
    scalars = [
        rewrite.call(
            _ATEN.unsqueeze.default,
            (rewrite.call(_ATEN.scalar_tensor.default, (entry,), {"dtype": torch.int64, "device": device}), 0),
        )
        for entry in entries
    ]
    flat = rewrite.call(_ATEN.cat.default, (scalars,))
    return rewrite.call(_ATEN.view.default, (flat, shape))


def _index_inputs(gm: GraphModule, rewrite: GraphRewrite, match: _Match, added: list[str]) -> list[Node]:
    """The op's ``spatial_shapes`` and ``level_start_index``: int64 constants where the level sizes are static (the
    buffers' names go to ``added``), else tensors computed from the graph's size nodes."""
    device = value(match.value).device
    levels = match.levels
    if all(isinstance(x, int) for level in levels for x in (level.start, level.height, level.width)):
        shapes = torch.tensor([[level.height, level.width] for level in levels], dtype=torch.int64, device=device)
        starts = torch.tensor([level.start for level in levels], dtype=torch.int64, device=device)
        constants = []
        for kind, tensor in (("spatial_shapes", shapes), ("level_start_index", starts)):
            name = _free_name(gm, f"_torchtrt_msda_{kind}")
            gm.register_buffer(name, tensor)
            added.append(name)
            constants.append(rewrite.get_attr(name))
        return constants
    shapes, starts = _computed_sizes(gm, rewrite, match)
    return [
        _int64_tensor(rewrite, shapes, [len(levels), 2], device),
        _int64_tensor(rewrite, starts, [len(levels)], device),
    ]


def _with_levels(rewrite: GraphRewrite, node: Node, match: _Match) -> Node:
    """``node`` (B, Q, H, L*P, ...) as (B, Q, H, L, P, ...); as it is where it has a level dimension already."""
    shape = list(value(node).shape)
    rank = 6 if node is match.locations else 5
    if len(shape) == rank:
        return node
    sizes = [x if isinstance(x, int) else rewrite.call(_ATEN.sym_size.int, (node, i)) for i, x in enumerate(shape[:3])]
    return rewrite.call(_ATEN.reshape.default, (node, [*sizes, len(match.levels), match.points, *shape[4:]]))


def _rewrite(gm: GraphModule, match: _Match) -> bool:
    rewrite = GraphRewrite(gm, match.output, [], fake_mode_of(gm))
    added: list[str] = []
    try:
        inputs = _index_inputs(gm, rewrite, match, added)
        locations, weights = (_with_levels(rewrite, node, match) for node in (match.locations, match.weights))
        replacement = rewrite.call(
            torch.ops.torchtrt.multi_scale_deformable_attention.default, (match.value, *inputs, locations, weights)
        )
    except (RewriteRejected, _Refused) as err:
        _LOGGER.info("multi_scale_deformable_attention: %s stays as it is: %s", match.output.name, err)
        rewrite.abort()
        for name in added:
            delattr(gm, name)
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
