"""torchvision's MultiScaleRoIAlign, as ``torch.export`` records it -> ``torchtrt_vision::multi_scale_roi_align_<L>``.

MultiScaleRoIAlign (``torchvision/ops/poolers.py``) pools each RoI from the feature level its box's scale picks.
Recognized in the graphs of ``torch.export`` before and after ``run_decompositions()`` in its two exported forms:

- as torchvision ships it (``where``/``nonzero``, ``index_put_``/``index_put``, ``zeros``/``full``): a chain of L
  (2 to 5) index puts into zeros (K, C, ph, pw), the l-th of
  ``roi_align(level_l, rois[idx_l], scale_l, ph, pw, sampling_ratio, aligned)`` (cast to the zeros' dtype or not),
  ``idx_l`` the indices where ``levels == l``, for l = 0 .. L-1 in order;
- as ``vision.exportable()`` exports it (``vision_export.multiscale_roi_align``): every box pooled at every level,
  ``pooled_l = roi_align(level_l, rois, scale_l, ph, pw, sampling_ratio, aligned)``, then starting from
  ``pooled_{L-1}`` a chain of ``where(levels[:, None, None, None] == l, pooled_l, result)`` for l = L-2 down to 0
  (``aten.where.self``, ``eq.Scalar``; the broadcast through unsqueezes, views or full slices), and the levels'
  range ``k_max - k_min`` at most L-1 (a level past the last would take the last level's pooling, zeros in the op);

with one ``rois``, one ``levels`` and one pooled size, sampling ratio and ``aligned`` for all, and:

- ``levels`` as LevelMapper computes it, in fp32: ``floor(k0 + log2(sqrt(area) / s0) + eps)`` clamped to
  ``[k_min, k_max]``, minus ``k_min``, with ``k_min`` and ``k_max`` those of the first and last scales
  (``int(-log2(scale))``), eps 1e-6, and ``area`` the boxes' (``box_area``) of the very boxes that ``rois``
  concatenates after its batch-index column (``_convert_to_roi_format``).

``k0`` and ``s0`` become the op's ``canonical_level`` and ``canonical_scale``. Anything else is left alone; the
pattern's nodes (the per-level gathers or selections, their shape checks, the level computation) go with it.

One difference, in the ``exportable()`` form only: a box of negative area (LevelMapper's level is NaN, cast to int64:
no level's) takes the last level's pooling in the where chain, and is zeros in torchvision's own pooler and in the op.
"""

from __future__ import annotations

import functools
import importlib
import logging
import math
import operator
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Node

from ._fx import (
    GraphRewrite,
    LoweringPass,
    RewriteRejected,
    arg,
    erase_unused,
    fake_mode_of,
    known_equal,
    real_users,
    strip_casts,
)

_LOGGER = logging.getLogger(__name__)

_ATEN = torch.ops.aten
_INDEX_PUT = (_ATEN.index_put_.default, _ATEN.index_put.default)
_LEVEL_COUNTS = range(2, 6)  # torchtrt_plugins.vision.MULTI_SCALE_LEVELS
_EPS = 1e-6
_ROI_ALIGN_ARGS = ("input", "rois", "spatial_scale", "pooled_height", "pooled_width", "sampling_ratio", "aligned")


@dataclass
class _Match:
    chain: list[Node]
    features: list[Node]
    rois: Node
    scales: list[float]
    pooled: tuple[int, int]
    sampling_ratio: int
    aligned: bool
    canonical_scale: float = 0.0
    canonical_level: int = 0
    nodes: list[Node] = field(default_factory=list)


def _call(node: Any, *targets: Any) -> bool:
    return isinstance(node, Node) and node.op == "call_function" and node.target in targets


def _is_roi_align(node: Any) -> bool:
    target = getattr(node, "target", None)
    return (
        isinstance(node, Node)
        and isinstance(target, torch._ops.OpOverload)
        and target._schema.name == "torchvision::roi_align"
    )


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _int_cast_source(node: Any) -> Node | None:
    """The input of a cast to int64, else None."""
    if _call(node, _ATEN.to.dtype) and len(node.args) == 2 and node.args[1] == torch.int64:
        return node.args[0]
    if _call(node, _ATEN._to_copy.default) and len(node.args) == 1 and node.kwargs.get("dtype") == torch.int64:
        return node.args[0]
    return None


def _level_test(index: Any, nodes: list[Node]) -> Node | None:
    """The ``eq(levels, l)`` whose true positions ``index`` holds: ``where(eq)[0]``, or ``nonzero(eq)``'s first column
    (``squeeze(slice(nonzero, 1, 0, 1), [1])`` or ``select(nonzero, 1, 0)``)."""
    if _call(index, operator.getitem) and index.args[1] == 0 and _call(index.args[0], _ATEN.where.default):
        nodes += [index, index.args[0]]
        return index.args[0].args[0]
    column = index
    if _call(index, _ATEN.squeeze.dims) and list(index.args[1]) == [1]:
        column = index.args[0]
        if not (_call(column, _ATEN.slice.Tensor) and tuple(column.args[1:]) == (1, 0, 1)):
            return None
    elif not (_call(index, _ATEN.select.int) and tuple(index.args[1:]) == (1, 0)):
        return None
    source = column.args[0]
    if not _call(source, _ATEN.nonzero.default):
        return None
    nodes += [index, column, source] if column is not index else [index, source]
    return source.args[0]


def _constant(gm: GraphModule, node: Any, nodes: list[Node]) -> torch.Tensor | None:
    """The tensor a lifted constant holds (``torch.tensor(eps)`` in the graph), through its copies."""
    while _call(node, _ATEN.lift_fresh_copy.default, _ATEN.detach_.default, _ATEN.detach.default, _ATEN.clone.default):
        nodes.append(node)
        node = node.args[0]
    if not isinstance(node, Node) or node.op != "get_attr":
        return None
    nodes.append(node)
    try:
        held = functools.reduce(getattr, node.target.split("."), gm)
    except AttributeError:
        return None
    return held if isinstance(held, torch.Tensor) else None


def _box_areas(node: Any, nodes: list[Node]) -> list[Node] | None:
    """The boxes of ``cat([box_area(b) for b in boxes])`` (or of one ``box_area(b)``)."""
    if _call(node, _ATEN.cat.default):
        if arg(node, 1, "dim", 0) != 0:
            return None
        products = node.args[0]
        nodes.append(node)
    else:
        products = [node]
    boxes = []
    for product in products:
        if not _call(product, _ATEN.mul.Tensor) or len(product.args) != 2:
            return None
        sides = []
        for difference, (high, low) in zip(product.args, ((2, 0), (3, 1)), strict=True):
            if not _call(difference, _ATEN.sub.Tensor) or len(difference.args) != 2 or difference.kwargs:
                return None
            ends = difference.args
            if not all(_call(e, _ATEN.select.int) and e.args[1] == 1 for e in ends):
                return None
            if (ends[0].args[2], ends[1].args[2]) != (high, low) or ends[0].args[0] is not ends[1].args[0]:
                return None
            sides.append(ends[0].args[0])
            nodes += [difference, *ends]
        if sides[0] is not sides[1]:
            return None
        nodes.append(product)
        boxes.append(sides[0])
    return boxes


def _level_mapping(gm: GraphModule, levels: Node, match: _Match) -> bool:
    """Whether ``levels`` is LevelMapper's over the boxes of ``match.rois`` and ``match.scales``; fills in the
    canonical scale and level."""
    nodes = match.nodes
    node = levels
    while (source := _int_cast_source(node)) is not None:
        nodes.append(node)
        node = source
    lowest, highest = _level_of(match.scales[0]), _level_of(match.scales[-1])
    if not (_call(node, _ATEN.sub.Tensor, _ATEN.sub.Scalar) and len(node.args) == 2 and node.args[1] == lowest):
        return False
    if node.kwargs.get("alpha", 1) != 1:
        return False
    cast = node.args[0]
    clamp = _int_cast_source(cast)
    if not _call(clamp, _ATEN.clamp.default):
        return False
    bounds = (arg(clamp, 1, "min"), arg(clamp, 2, "max"))
    if bounds != (lowest, highest):
        return False
    floor = clamp.args[0]
    if not _call(floor, _ATEN.floor.default):
        return False
    outer = floor.args[0]
    if not _call(outer, _ATEN.add.Tensor) or len(outer.args) != 2 or outer.kwargs:
        return False
    eps = _constant(gm, outer.args[1], nodes)
    inner = outer.args[0]
    if eps is None or eps.numel() != 1 or float(eps) != float(torch.tensor(_EPS, dtype=eps.dtype)):
        return False
    if not _call(inner, _ATEN.add.Tensor, _ATEN.add.Scalar) or len(inner.args) != 2 or inner.kwargs:
        return False
    log2, canonical_level = inner.args
    if not (isinstance(canonical_level, int) and not isinstance(canonical_level, bool)):
        return False
    if not _call(log2, _ATEN.log2.default):
        return False
    div = log2.args[0]
    if not _call(div, _ATEN.div.Tensor, _ATEN.div.Scalar) or len(div.args) != 2 or div.kwargs:
        return False
    sqrt, canonical_scale = div.args
    if not _number(canonical_scale) or canonical_scale <= 0 or not _call(sqrt, _ATEN.sqrt.default):
        return False
    area = sqrt.args[0]
    value = area.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dtype != torch.float32:
        return False  # LevelMapper in another dtype rounds differently from the op's fp32 mapping
    boxes = _box_areas(area, nodes)
    if boxes is None or not _rois_of(match.rois, boxes):
        return False
    nodes += [node, cast, clamp, floor, outer, inner, log2, div, sqrt]
    match.canonical_scale, match.canonical_level = float(canonical_scale), canonical_level
    return True


def _rois_of(rois: Node, boxes: list[Node]) -> bool:
    """Whether ``rois`` is ``cat([ids, cat(boxes)], 1)``: one batch-index column before those boxes, in order."""
    if not _call(rois, _ATEN.cat.default) or arg(rois, 1, "dim", 0) not in (1, -1) or len(rois.args[0]) != 2:
        return False
    ids, concatenated = rois.args[0]
    ids_value = ids.meta.get("val") if isinstance(ids, Node) else None
    if not isinstance(ids_value, torch.Tensor) or ids_value.dim() != 2 or not known_equal(ids_value.shape[1], 1):
        return False
    if _call(concatenated, _ATEN.cat.default) and arg(concatenated, 1, "dim", 0) == 0:
        return list(concatenated.args[0]) == boxes
    return boxes == [concatenated]


def _level_of(scale: float) -> int:
    """The FPN level ``int(-log2(scale))`` of a scale, in fp32 as MultiScaleRoIAlign computes it."""
    return int(-math.log2(float(torch.tensor(scale, dtype=torch.float32))))


def _add_level(match: _Match | None, chain: list[Node], pooled: Any, rois_of: Callable[[Any], Any]) -> _Match | None:
    """``match`` with the level that ``pooled`` (a ``roi_align`` used by the chain only) pools, started from it if
    None; None where it is no roi_align or disagrees with the levels before. ``rois_of``: the RoIs its ``rois``
    argument takes (None: not the pattern's)."""
    if not _is_roi_align(pooled) or len(real_users(pooled)) != 1:
        return None
    feature, gathered, scale, *rest = (arg(pooled, i, n) for i, n in enumerate(_ROI_ALIGN_ARGS))
    rois = rois_of(gathered)
    if rois is None or not _number(scale) or not all(isinstance(v, int) for v in rest[:3]):
        return None
    if match is None:
        match = _Match(chain, [], rois, [], (rest[0], rest[1]), rest[2], bool(rest[3]))
    elif (rois, *rest) != (match.rois, *match.pooled, match.sampling_ratio, match.aligned):
        return None
    match.features.append(feature)
    match.scales.append(float(scale))
    match.nodes.append(pooled)
    return match


def _is_level(test: Any, level: int, levels: Any) -> bool:
    """Whether ``test`` is ``eq(levels, level)`` (``levels`` None: of any levels)."""
    return (
        _call(test, _ATEN.eq.Scalar)
        and test.args[1] == level
        and not isinstance(test.args[1], bool)
        and (levels is None or test.args[0] is levels)
    )


def _match(gm: GraphModule, head: Node) -> _Match | None:
    """MultiScaleRoIAlign as torchvision ships it: index puts into zeros, ``head`` the first."""
    zeros = head.args[0]
    if not (
        _call(zeros, _ATEN.zeros.default) or (_call(zeros, _ATEN.full.default) and arg(zeros, 1, "fill_value") == 0)
    ):
        return None
    if real_users(zeros) != [head]:
        return None
    chain = [head]
    while len(users := real_users(chain[-1])) == 1 and _call(users[0], *_INDEX_PUT) and users[0].args[0] is chain[-1]:
        chain.append(users[0])
    if len(chain) not in _LEVEL_COUNTS:
        return None
    match, levels = None, None
    nodes = [zeros, *chain]
    for level, put in enumerate(chain):
        if arg(put, 3, "accumulate", False) or len(put.args[1]) != 1:
            return None
        index = put.args[1][0]
        pooled, casts = strip_casts(put.args[2])

        def gathered_by(gathered: Any, index: Any = index) -> Any:
            """``rois`` of ``rois[index]``."""
            if _call(gathered, _ATEN.index.Tensor) and len(gathered.args[1]) == 1 and gathered.args[1][0] is index:
                return gathered.args[0]
            return None

        match = _add_level(match, chain, pooled, gathered_by)
        test = _level_test(index, nodes)
        if match is None or not _is_level(test, level, levels):
            return None
        levels = test.args[0]
        nodes += [*casts, arg(pooled, 1, "rois"), test]
    match.nodes += nodes
    if not _shapes_agree(chain[-1], match) or not _level_mapping(gm, levels, match):
        return None
    return match


_RESHAPES = (
    _ATEN.unsqueeze.default,
    _ATEN.view.default,
    _ATEN.reshape.default,
    _ATEN._unsafe_view.default,
    _ATEN.slice.Tensor,
)


def _per_box(node: Any, nodes: list[Node]) -> Node | None:
    """The (K,) levels that ``node``, ``levels[:, None, None, None]`` (K, 1, 1, 1), holds: through unsqueezes, views
    and slices that keep every element."""
    value = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(value, torch.Tensor) or value.dim() != 4 or not all(known_equal(d, 1) for d in value.shape[1:]):
        return None
    while _call(node, *_RESHAPES):
        source = node.args[0]
        before = source.meta.get("val") if isinstance(source, Node) else None
        if not isinstance(before, torch.Tensor):
            return None
        if node.target is _ATEN.slice.Tensor and not (
            arg(node, 4, "step", 1) == 1
            and before.dim() == node.meta["val"].dim()
            and all(known_equal(a, b) for a, b in zip(before.shape, node.meta["val"].shape, strict=True))
        ):
            return None
        nodes.append(node)
        node = source
    source = node.meta.get("val") if isinstance(node, Node) else None
    if not isinstance(source, torch.Tensor) or source.dim() != 1 or not known_equal(source.shape[0], value.shape[0]):
        return None
    return node


def _selection_match(gm: GraphModule, head: Node) -> _Match | None:
    """MultiScaleRoIAlign as ``vision.exportable()`` exports it: every box pooled at every level, then
    ``where(levels == l, pooled_l, result)`` for l = L-2 down to 0, ``head`` the first, ``result`` at first the last
    level's."""
    chain = [head]
    while (
        len(users := real_users(chain[-1])) == 1
        and _call(users[0], _ATEN.where.self)
        and users[0].args[2] is chain[-1]
        and len(users[0].args) == 3
    ):
        chain.append(users[0])
    if len(chain) + 1 not in _LEVEL_COUNTS:
        return None
    pooled = [where.args[1] for where in reversed(chain)] + [head.args[2]]
    match, levels = None, None
    for candidate in pooled:
        match = _add_level(match, chain, candidate, lambda rois: rois)
        if match is None:
            return None
    nodes = match.nodes
    for level, where in enumerate(reversed(chain)):
        test = where.args[0]
        if not _is_level(test, level, levels) or real_users(test) != [where]:
            return None
        levels = test.args[0]
        nodes += [where, test]
    if not 0 <= _level_of(match.scales[-1]) - _level_of(match.scales[0]) < len(match.scales):
        return None  # a level past the last would take the last level's pooling here, zeros in the op
    per_box = _per_box(levels, nodes)
    if per_box is None or not _shapes_agree(chain[-1], match) or not _level_mapping(gm, per_box, match):
        return None
    return match


def _shapes_agree(output: Node, match: _Match) -> bool:
    """The pattern's output (K, C, ph, pw) of the features' dtype, K the RoIs' count and C every feature's channels."""
    result, rois = output.meta.get("val"), match.rois.meta.get("val")
    features = [f.meta.get("val") if isinstance(f, Node) else None for f in match.features]
    if not isinstance(result, torch.Tensor) or not isinstance(rois, torch.Tensor):
        return False
    if not all(isinstance(f, torch.Tensor) and f.dim() == 4 and f.dtype == result.dtype for f in features):
        return False
    expected = (rois.shape[0], features[0].shape[1], *match.pooled)
    return (
        result.dim() == 4
        and all(known_equal(a, b) for a, b in zip(result.shape, expected, strict=True))
        and all(known_equal(f.shape[1], features[0].shape[1]) for f in features)
    )


def _rewrite(gm: GraphModule, match: _Match) -> bool:
    importlib.import_module("torchtrt_plugins.vision")  # defines torch.ops.torchtrt_vision (only when a model has it)
    op = getattr(torch.ops.torchtrt_vision, f"multi_scale_roi_align_{len(match.features)}").default
    output = match.chain[-1]
    rewrite = GraphRewrite(gm, output, [], fake_mode_of(gm))
    args = (
        *match.features,
        match.rois,
        *match.scales,
        *match.pooled,
        match.sampling_ratio,
        match.canonical_scale,
        match.canonical_level,
        match.aligned,
    )
    try:
        replacement = rewrite.call(op, args)
    except RewriteRejected as err:
        _LOGGER.debug("multi_scale_roi_align: not rewritten: %s", err)
        return False
    output.replace_all_uses_with(replacement)
    erase_unused(gm, match.nodes)
    return True


def run(gm: GraphModule) -> int:
    """Rewrite every MultiScaleRoIAlign of ``gm``; how many."""
    count = 0
    for node in list(gm.graph.nodes):
        if getattr(node, "_erased", False):
            continue
        if _call(node, *_INDEX_PUT):
            match = _match(gm, node)
        elif _call(node, _ATEN.where.self) and len(node.args) == 3 and _is_roi_align(node.args[2]):
            match = _selection_match(gm, node)
        else:
            continue
        if match is not None and _rewrite(gm, match):
            count += 1
    return count


PASS = LoweringPass("multi_scale_roi_align", run)
