"""efficient_nms(boxes, scores, score_threshold, iou_threshold, max_output_boxes, ...): NMS with a static output.

NVIDIA's ``EfficientNMS_TRT`` contract (its attributes, in its order, with its defaults): ``boxes`` (B, N, 4), or
(B, N, C, 4) with one box per class, and ``scores`` (B, N, C), both fp32 or both fp16, give

- ``num_detections`` (B, 1) int32,
- ``detection_boxes`` (B, K, 4) corners (x1, y1, x2, y2) whatever ``box_coding``, the boxes' dtype,
- ``detection_scores`` (B, K), the scores' dtype (after the sigmoid with ``score_activation``),
- ``detection_classes`` (B, K) int32,

with K = ``max_output_boxes`` and every row from ``num_detections`` on zero: no data-dependent shape. Per image, the
candidates are the (box, class) pairs with score >= ``score_threshold`` (with ``score_activation``: raw score >=
logit(``score_threshold``), the threshold NVIDIA compares) whose class is not ``background_class``; they are sorted
by decreasing score, ties by lower flat index n * C + c, and the first 4096 of them (NVIDIA's limit) go through
greedy NMS: a candidate is dropped when its IoU with a kept, earlier candidate of the same class (of any class with
``class_agnostic``) is >= ``iou_threshold``. The IoU is NVIDIA's (on the corners ordered, 0 without intersection or
union), in fp32. ``box_coding`` 1 is center-size (cx, cy, w, h). The first K kept candidates, by decreasing score,
are the output. NVIDIA's optional third input (anchors, the fused box decoder) is not supported.

Declared through the public path (:func:`torchtrt_plugins.declare`): the launcher is
``csrc/kernels/efficient_nms_launcher.cu`` (one key pass, one radix sort of every image's candidates, the overlap
bits of the first 4096 per image, a greedy walk per image: no host synchronization); the plugin is the generic one
(``EfficientNMS`` v1).
"""

from __future__ import annotations

import math

import torch

from ..declare import Range, declare
from ..spec import SpecError, Tolerance
from . import LIBRARY, define

FLOATS = (torch.float32, torch.float16)

#: The candidates per image that go through the suppression (NVIDIA's plugin keeps as many).
MAX_CANDIDATES = 4096


def raw_threshold(score_threshold: float, score_activation: bool) -> float:
    """The threshold on the raw score, as an fp32 value: with the sigmoid, logit(score_threshold)."""
    if not score_activation:
        return float(torch.tensor(score_threshold, dtype=torch.float32))
    if score_threshold <= 0.0:
        return -math.inf
    if score_threshold >= 1.0:
        return math.inf
    return float(torch.tensor(math.log(score_threshold / (1.0 - score_threshold)), dtype=torch.float32))


def corners(boxes: torch.Tensor, box_coding: int) -> torch.Tensor:
    """(..., 4) boxes as fp32 corners (x1, y1, x2, y2), in the box coding's order."""
    b = boxes.float()
    if box_coding == 0:
        return b
    half = 0.5 * b[..., 2:]
    return torch.cat([b[..., :2] - half, b[..., :2] + half], dim=-1)


def iou(box: torch.Tensor, others: torch.Tensor) -> torch.Tensor:
    """NVIDIA's IoU of one fp32 corner box with (M, 4) others: corners ordered first; 0 without an intersection or a
    union; each operation rounded to fp32."""

    def ordered(b):
        x1, x2 = torch.minimum(b[..., 0], b[..., 2]), torch.maximum(b[..., 0], b[..., 2])
        y1, y2 = torch.minimum(b[..., 1], b[..., 3]), torch.maximum(b[..., 1], b[..., 3])
        return x1, y1, x2, y2

    ax1, ay1, ax2, ay2 = ordered(box)
    bx1, by1, bx2, by2 = ordered(others)
    left, right = torch.maximum(ax1, bx1), torch.minimum(ax2, bx2)
    top, bottom = torch.maximum(ay1, by1), torch.minimum(ay2, by2)
    inter = (right - left) * (bottom - top)
    union = ((ax2 - ax1) * (ay2 - ay1) + (bx2 - bx1) * (by2 - by1)) - inter
    intersects = (left <= right) & (top <= bottom) & (inter > 0)
    return torch.where(intersects & (union > 0), inter / torch.where(union > 0, union, 1.0), 0.0)


def greedy_nms(boxes: torch.Tensor, iou_threshold: float) -> list[int]:
    """Greedy NMS over fp32 corner boxes already in decreasing score order: the positions kept."""
    kept: list[int] = []
    for i in range(boxes.shape[0]):
        if not kept or not bool((iou(boxes[i], boxes[kept]) >= iou_threshold).any()):
            kept.append(i)
    return kept


def reference(
    boxes: torch.Tensor,
    scores: torch.Tensor,
    score_threshold: float,
    iou_threshold: float,
    max_output_boxes: int,
    background_class: int = -1,
    score_activation: bool = False,
    class_agnostic: bool = False,
    box_coding: int = 0,
):
    """Plain-torch EfficientNMS: per image, greedy NMS per class (or over all classes when class-agnostic) on the
    sorted candidates, the kept ones merged by decreasing score, padded with zeros to K."""
    batch, n, classes = scores.shape
    k = max_output_boxes
    num = torch.zeros((batch, 1), dtype=torch.int32)
    out_boxes = boxes.new_zeros((batch, k, 4))
    out_scores = scores.new_zeros((batch, k))
    out_classes = torch.zeros((batch, k), dtype=torch.int32)
    threshold = raw_threshold(score_threshold, score_activation)
    flat_class = torch.arange(n * classes) % classes
    for b in range(batch):
        flat = scores[b].float().reshape(-1)
        candidate = (flat >= threshold) & (flat_class != background_class)
        items = candidate.nonzero().flatten()
        items = items[torch.argsort(flat[items], descending=True, stable=True)][:MAX_CANDIDATES]
        box_rows = boxes[b].reshape(n * classes, 4)[items] if boxes.dim() == 4 else boxes[b][items // classes]
        cand_boxes = corners(box_rows, box_coding)
        cand_classes = items % classes
        kept: list[int] = []
        groups = (
            [torch.arange(len(items))]
            if class_agnostic
            else [(cand_classes == c).nonzero().flatten() for c in cand_classes.unique().tolist()]
        )
        for group in groups:
            kept += group[greedy_nms(cand_boxes[group], iou_threshold)].tolist()
        kept = sorted(kept)[:k]  # candidate order is score order
        count = len(kept)
        num[b, 0] = count
        chosen = items[kept]
        out_boxes[b, :count] = cand_boxes[kept].to(boxes.dtype)
        raw = flat[chosen]
        out_scores[b, :count] = (torch.sigmoid(raw) if score_activation else raw).to(scores.dtype)
        out_classes[b, :count] = cand_classes[kept].to(torch.int32)
    return num, out_boxes, out_scores, out_classes


def fake(
    boxes: torch.Tensor,
    scores: torch.Tensor,
    score_threshold: float,
    iou_threshold: float,
    max_output_boxes,
    background_class: int = -1,
    score_activation: bool = False,
    class_agnostic: bool = False,
    box_coding: int = 0,
):
    """The op's shape rules, in the one place they are written (eager, validator and plugin derive from here)."""
    if scores.dim() != 3:
        raise SpecError(
            f"torchtrt.efficient_nms: argument 'scores' must have shape (B, N, C), got {tuple(scores.shape)}"
        )
    if boxes.dim() not in (3, 4):
        raise SpecError(
            "torchtrt.efficient_nms: argument 'boxes' must have shape (B, N, 4) or (B, N, C, 4), got "
            f"{tuple(boxes.shape)}"
        )
    expected = (*scores.shape[:2], 4) if boxes.dim() == 3 else (*scores.shape, 4)
    for actual, wanted in zip(boxes.shape, expected, strict=True):
        torch._check_with(
            SpecError,
            actual == wanted,
            lambda: (
                f"torchtrt.efficient_nms: argument 'boxes' must have shape {tuple(expected)} to match 'scores' "
                f"{tuple(scores.shape)}, got {tuple(boxes.shape)}"
            ),
        )
    batch = scores.shape[0]
    return (
        scores.new_empty((batch, 1), dtype=torch.int32),
        boxes.new_empty((batch, max_output_boxes, 4)),
        scores.new_empty((batch, max_output_boxes)),
        scores.new_empty((batch, max_output_boxes), dtype=torch.int32),
    )


_LIB = define(
    "efficient_nms(Tensor boxes, Tensor scores, float score_threshold, float iou_threshold, SymInt max_output_boxes, "
    "int background_class=-1, bool score_activation=False, bool class_agnostic=False, int box_coding=0) -> "
    "(Tensor num_detections, Tensor detection_boxes, Tensor detection_scores, Tensor detection_classes)",
    fake,
    reference,
)

EFFICIENT_NMS = declare(
    "torchtrt::efficient_nms",
    library=LIBRARY,
    plugin_name="EfficientNMS",
    plugin_version="1",
    launcher="ttp::launchers::efficientNms",
    workspace="ttp::launchers::efficientNmsWorkspaceSize",
    ranges={
        "score_threshold": Range(min=0.0, doc="candidates have a score >= it (after the sigmoid)"),
        "iou_threshold": Range(min=0.0, min_inclusive=False, doc="an IoU >= it with a kept box suppresses"),
        "max_output_boxes": Range(min=1, doc="K: the detections' rows per image"),
        "background_class": Range(doc="a class never detected; -1 (or any value outside [0, C)): none"),
        "box_coding": Range(min=0, max=1, doc="0: corners (x1, y1, x2, y2); 1: center-size (cx, cy, w, h)"),
    },
    dtypes={"boxes": FLOATS, "scores": FLOATS},
    same_dtype={"scores": "boxes"},
    reference=reference,
    # Boxes and scores are copies (a center-size box is decoded in fp32 as the reference does); the sigmoid differs
    # in its last bits.
    tolerances={
        torch.float32: Tolerance(1e-6, 1e-6),
        torch.float16: Tolerance(1e-3, 1e-3),
        torch.int32: Tolerance(0.0, 0.0),
    },
    doc=__doc__,
)
ENTRY = EFFICIENT_NMS.entry
SPEC = EFFICIENT_NMS.spec
check_args = EFFICIENT_NMS.check_args
