"""Property-based checks shared by the cpu and gpu tiers (``tests/cpu/test_op_props.py``,
``tests/gpu/test_op_props_gpu.py``): hypothesis draws each op's inputs over shapes (empty, 1, odd, large), dtypes,
memory layouts (contiguous, strided, transposed, offset by one element) and field values, and the op's output is
compared with an independent float64 numpy formulation, not with the op's own reference code.

Every registered op has an entry in :data:`CASES` (a test fails for an op without one). An entry draws one case
(``draw(data, device) -> Case``) and checks an output (``check(case, out)``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

FLOATS = (torch.float32, torch.float16, torch.bfloat16)


def hypothesis_settings(max_examples: int) -> settings:
    """No deadline (first calls build kernels and caches); inputs are drawn big on purpose."""
    too_slow_or_large = [HealthCheck.too_slow, HealthCheck.data_too_large]
    return settings(max_examples=max_examples, deadline=None, suppress_health_check=too_slow_or_large)


#: Extents that stress the kernels: empty, one, odd, around a warp and a vector, and one large odd size.
EXTENTS = st.one_of(
    st.sampled_from([0, 1, 2, 3, 7, 8, 31, 33, 64, 127, 129]),
    st.integers(min_value=1, max_value=300),
)
LARGE_EXTENTS = st.sampled_from([1000, 4097, 12288, 16385])
LAYOUTS = ("contiguous", "strided", "transposed", "offset")


@dataclass
class Case:
    op: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    #: Copies of the arguments the op updates in place, as they were before the call, and those arguments' indices.
    before: tuple[Any, ...] = ()
    mutated: tuple[int, ...] = ()

    def restore(self) -> None:
        """Put the arguments the op updates in place back as they were (on the current stream), so that the next
        call is checked against ``before`` again: a test that calls the op more than once calls this in between."""
        for index, saved in zip(self.mutated, self.before, strict=True):
            self.args[index].copy_(saved)

    def call(self, tactic: int | None = None) -> Any:
        if tactic:
            return getattr(torch.ops.torchtrt, f"{self.op}_tactic")(*self.args, **self.kwargs, tactic=tactic)
        return getattr(torch.ops.torchtrt, self.op)(*self.args, **self.kwargs)


def outputs(out: Any) -> tuple[torch.Tensor, ...]:
    """An op's result as a tuple of its output tensors (one op returns several)."""
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _values(shape: tuple[int, ...], dtype: torch.dtype, generator: torch.Generator, scale: float) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=torch.float64).mul_(scale).to(dtype)
    info = torch.iinfo(dtype)
    low, high = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
    return torch.randint(low, high, shape, generator=generator, dtype=torch.int64).to(dtype)


def tensor(
    data: st.DataObject, shape: tuple[int, ...], dtype: torch.dtype, device: str, scale: float = 1.0
) -> torch.Tensor:
    """A tensor of ``shape`` in a drawn memory layout, values from a drawn seed (made on the CPU, then moved)."""
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    if layout == "strided" and shape:
        wide = _values((*shape[:-1], 2 * shape[-1]), dtype, generator, scale).to(device)
        return wide[..., ::2]
    if layout == "transposed" and len(shape) >= 2:
        swapped = (*shape[:-2], shape[-1], shape[-2])
        return _values(swapped, dtype, generator, scale).to(device).transpose(-1, -2)
    if layout == "offset":
        count = int(np.prod(shape)) if shape else 1
        flat = _values((count + 1,), dtype, generator, scale).to(device)
        return flat[1:].view(shape)  # data pointer one element past an allocation's start: unaligned vectors
    return _values(shape, dtype, generator, scale).to(device)


def as_numpy(t: torch.Tensor) -> np.ndarray:
    """float64 for floating tensors (bf16 has no numpy type), the integer or bool type otherwise."""
    t = t.detach().cpu()
    return t.double().numpy() if t.dtype.is_floating_point else t.numpy()


def _assert_allclose(out: torch.Tensor, expected: np.ndarray, atol: float, rtol: float, what: str) -> None:
    got = as_numpy(out)
    assert got.shape == expected.shape, f"{what}: shape {got.shape}, expected {expected.shape}"
    if atol == 0 and rtol == 0:
        same = (got == expected) | (np.isnan(got) & np.isnan(expected)) if got.dtype.kind == "f" else got == expected
        bad = np.argwhere(~same)
        assert bad.size == 0, f"{what}: {len(bad)} elements differ, first at {tuple(bad[0])}"
        return
    np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, err_msg=what)


# ------------------------------------------------------------------------------------------ rms_norm


def draw_rms_norm(data: st.DataObject, device: str) -> Case:
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    hidden = data.draw(st.one_of(EXTENTS.filter(bool), LARGE_EXTENTS), label="hidden")
    lead = data.draw(st.lists(EXTENTS, min_size=0, max_size=2), label="leading dims")
    if hidden * max(1, int(np.prod(lead))) > 2_000_000:
        lead = [1]
    scale = data.draw(st.sampled_from([1e-3, 1.0, 100.0]), label="scale")
    eps = data.draw(st.sampled_from([1e-12, 1e-6, 1e-3, 0.5]), label="eps")
    offset = data.draw(st.sampled_from([0.0, 1.0]), label="weight_offset")  # 1: Gemma's (1 + w)
    x = tensor(data, (*lead, hidden), dtype, device, scale)
    weight = tensor(data, (hidden,), dtype, device)
    note = f"{dtype} {tuple(x.shape)} stride {x.stride()} eps {eps} weight_offset {offset}"
    return Case("rms_norm", (x, weight, eps, offset), note=note)


def check_rms_norm(case: Case, out: torch.Tensor) -> None:
    from torchtrt_plugins.ops import rms_norm

    x, weight, eps, offset = case.args
    assert out.dtype == x.dtype and out.shape == x.shape, case.note
    xs = as_numpy(x)
    expected = xs / np.sqrt(np.mean(xs * xs, axis=-1, keepdims=True) + eps) * (as_numpy(weight) + offset)
    tol = rms_norm.SPEC.tolerance(x.dtype)
    # The tolerance is relative to the output's magnitude: |y| is about |weight| whatever the scale of x.
    _assert_allclose(out, expected, tol.atol, tol.rtol, case.note)


# ------------------------------------------------------------------------------------------ rms_norm_fp8, rms_norm_int8


def _draw_rms_norm_quant(op: str) -> Callable[[st.DataObject, str], Case]:
    def draw(data: st.DataObject, device: str) -> Case:
        x, weight, eps, offset = draw_rms_norm(data, device).args
        value = data.draw(st.sampled_from([1e-3, 0.02, 1.0]), label="scale")
        shape = data.draw(st.sampled_from([(), (1,)]), label="scale shape")
        scale = torch.full(shape, value, dtype=torch.float32, device=device)
        note = f"{x.dtype} {tuple(x.shape)} stride {x.stride()} eps {eps} weight_offset {offset} scale {value}"
        return Case(op, (x, weight, scale, eps, offset), note=note)

    return draw


def check_rms_norm_quant(case: Case, out: torch.Tensor) -> None:
    """Within one step of the output type of the float64 formulation, saturated (fp8: +-448; int8: [-128, 127])."""
    x, weight, scale, eps, offset = case.args
    xs = as_numpy(x)
    y = xs / np.sqrt(np.mean(xs * xs, axis=-1, keepdims=True) + eps) * (as_numpy(weight) + offset)
    q = y / float(scale.reshape(()).item())
    got = out.detach().cpu().float().double().numpy()
    assert got.shape == q.shape, case.note
    if case.op == "rms_norm_int8":
        assert out.dtype == torch.int8, case.note
        _assert_allclose(out.detach().cpu().double(), np.clip(np.rint(q), -128, 127), 1.0, 0.0, case.note)
    else:
        assert out.dtype == torch.float8_e4m3fn, case.note
        np.testing.assert_allclose(got, np.clip(q, -448.0, 448.0), atol=2.0**-9, rtol=0.125, err_msg=case.note)


# ------------------------------------------------------------------------------------------ add_rms_norm


def draw_add_rms_norm(data: st.DataObject, device: str) -> Case:
    x, weight, eps, _ = draw_rms_norm(data, device).args
    residual = tensor(data, tuple(x.shape), x.dtype, device, data.draw(st.sampled_from([1e-3, 1.0, 100.0])))
    note = f"{x.dtype} {tuple(x.shape)} stride {x.stride()} residual stride {residual.stride()} eps {eps}"
    return Case("add_rms_norm", (x, residual, weight, eps), note=note, before=(residual.clone(),), mutated=(1,))


def check_add_rms_norm(case: Case, out: torch.Tensor) -> None:
    from torchtrt_plugins.ops import add_rms_norm

    x, residual, weight, eps = case.args
    assert out.dtype == x.dtype and out.shape == x.shape, case.note
    tol = add_rms_norm.SPEC.tolerance(x.dtype)
    h = as_numpy(x) + as_numpy(case.before[0])
    _assert_allclose(residual, h, tol.atol, tol.rtol, f"{case.note}: the residual, updated in place")
    hs = as_numpy(residual)  # the norm is of the sum as rounded to the dtype
    expected = hs / np.sqrt(np.mean(hs * hs, axis=-1, keepdims=True) + eps) * as_numpy(weight)
    _assert_allclose(out, expected, tol.atol, tol.rtol, case.note)


# ------------------------------------------------------------------------------------------ pad_to


def draw_pad_to(data: st.DataObject, device: str) -> Case:
    from torchtrt_plugins.ops import pad_to

    dtype = data.draw(st.sampled_from(pad_to.DTYPES), label="dtype")
    small = st.integers(0, 3)
    batch, channels = data.draw(small, label="B"), data.draw(small, label="C")
    big = data.draw(st.booleans(), label="large")
    extent = st.sampled_from([1, 223, 224, 256, 1000, 1030]) if big else EXTENTS
    h, w, height, width = (data.draw(extent, label=n) for n in ("H", "W", "height", "width"))
    if big:
        batch, channels = min(batch, 1), min(channels, 2)
    if dtype == torch.int8:
        value = float(data.draw(st.integers(-128, 127), label="value"))
    else:
        # Finite (the FLOAT32 field refuses inf and nan) and exact in fp32, as the plugin field carries it.
        value = data.draw(st.floats(-1e4, 1e4, width=32), label="value")
    x = tensor(data, (batch, channels, h, w), dtype, device, scale=100.0)
    return Case("pad_to", (x, height, width, value), note=f"{dtype} {tuple(x.shape)} -> {height}x{width} value {value}")


def check_pad_to(case: Case, out: torch.Tensor) -> None:
    x, height, width, value = case.args
    assert out.dtype == x.dtype and out.shape == (x.shape[0], x.shape[1], height, width), case.note
    expected = np.full(tuple(out.shape), value, dtype=np.float64)
    if x.dtype == torch.int8:
        expected = expected.astype(np.int8)
    else:
        # The fill is rounded to the dtype once, as a copy of the value would be.
        expected = as_numpy(torch.tensor(value, dtype=torch.float32).to(x.dtype)) * np.ones_like(expected)
    h, w = min(x.shape[2], height), min(x.shape[3], width)
    expected[:, :, :h, :w] = as_numpy(x)[:, :, :h, :w]
    _assert_allclose(out, expected, 0.0, 0.0, case.note)


# ------------------------------------------------------------------------------------------ masked_rows


def draw_masked_rows(data: st.DataObject, device: str) -> Case:
    from torchtrt_plugins.ops import masked_rows

    dtype = data.draw(st.sampled_from(masked_rows.DTYPES), label="dtype")
    rows = data.draw(st.one_of(EXTENTS, st.sampled_from([4097, 70_000])), label="rows")
    row_shape = data.draw(st.lists(st.sampled_from([1, 2, 3, 5, 8, 16, 33]), max_size=2), label="row shape")
    density = data.draw(st.sampled_from([0.0, 0.01, 0.5, 0.99, 1.0]), label="density")
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="mask seed"))
    mask = (torch.rand(rows, generator=generator) < density).to(device)
    x = tensor(data, (rows, *row_shape), dtype, device, scale=1000.0)
    return Case("masked_rows", (x, mask), note=f"{dtype} {tuple(x.shape)} stride {x.stride()} density {density}")


def check_masked_rows(case: Case, out: torch.Tensor) -> None:
    x, mask = case.args
    keep = as_numpy(mask)
    expected = as_numpy(x)[keep]
    assert out.dtype == x.dtype and tuple(out.shape) == expected.shape, case.note
    _assert_allclose(out, expected, 0.0, 0.0, case.note)


# ------------------------------------------------------------------------------------------ efficient_nms


def draw_nms_inputs(
    generator: torch.Generator, batch: int, boxes: int, classes: int, *, box_coding: int, per_class: bool, spread: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 boxes (corners, some with their corners swapped, or center-size) with centers in [0, spread) and sizes
    in [1, 30), and uniform scores."""
    shape = (batch, boxes, classes) if per_class else (batch, boxes)
    center = torch.rand((*shape, 2), generator=generator, dtype=torch.float64) * spread
    size = torch.rand((*shape, 2), generator=generator, dtype=torch.float64) * 29 + 1
    if box_coding == 1:
        coords = torch.cat([center, size], dim=-1)
    else:
        coords = torch.cat([center - size / 2, center + size / 2], dim=-1)
        swapped = torch.rand(shape, generator=generator) < 0.1
        coords[swapped] = coords[swapped][:, [2, 3, 0, 1]]
    scores = torch.rand((batch, boxes, classes), generator=generator, dtype=torch.float64)
    return coords.float(), scores.float()


def draw_efficient_nms(data: st.DataObject, device: str) -> Case:
    dtype = data.draw(st.sampled_from([torch.float32, torch.float16]), label="dtype")
    batch = data.draw(st.sampled_from([1, 2, 3]), label="B")
    boxes = data.draw(st.one_of(st.sampled_from([0, 1, 2, 63, 64, 65]), st.integers(1, 300)), label="N")
    classes = data.draw(st.sampled_from([1, 2, 3, 7]), label="C")
    box_coding = data.draw(st.sampled_from([0, 1]), label="box_coding")
    per_class = data.draw(st.booleans(), label="per-class boxes")
    activation = data.draw(st.booleans(), label="score_activation")
    agnostic = data.draw(st.booleans(), label="class_agnostic")
    background = data.draw(st.sampled_from([-1, 0, classes - 1]), label="background_class")
    score_threshold = data.draw(st.sampled_from([0.0, 0.05, 0.3, 0.9]), label="score_threshold")
    iou_threshold = data.draw(st.sampled_from([0.1, 0.45, 0.7, 1.0]), label="iou_threshold")
    k = data.draw(st.sampled_from([1, 7, 100, 300]), label="K")
    spread = data.draw(st.sampled_from([30.0, 300.0]), label="spread")
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    coords, scores = draw_nms_inputs(
        generator, batch, boxes, classes, box_coding=box_coding, per_class=per_class, spread=spread
    )
    if activation:
        scores = torch.logit(scores.clamp(1e-4, 1 - 1e-4)) * 2
    args = (coords.to(dtype).to(device), scores.to(dtype).to(device), score_threshold, iou_threshold, k)
    args += (background, activation, agnostic, box_coding)
    note = f"{dtype} {tuple(args[0].shape)} scores {tuple(args[1].shape)} {args[2:]}"
    return Case("efficient_nms", args, note=note)


def _corner_boxes(rows: np.ndarray, box_coding: int) -> np.ndarray:
    if box_coding == 0:
        return rows
    half = np.float32(0.5) * rows[:, 2:]
    return np.concatenate([rows[:, :2] - half, rows[:, :2] + half], axis=1)


def _nvidia_iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """fp32, one rounding per operation: corners ordered, 0 without intersection or union."""
    x1, x2 = np.minimum(others[:, 0], others[:, 2]), np.maximum(others[:, 0], others[:, 2])
    y1, y2 = np.minimum(others[:, 1], others[:, 3]), np.maximum(others[:, 1], others[:, 3])
    bx1, bx2 = min(box[0], box[2]), max(box[0], box[2])
    by1, by2 = min(box[1], box[3]), max(box[1], box[3])
    width, height = np.minimum(x2, bx2) - np.maximum(x1, bx1), np.minimum(y2, by2) - np.maximum(y1, by1)
    inter = width * height
    union = ((bx2 - bx1) * (by2 - by1) + (x2 - x1) * (y2 - y1)) - inter
    valid = (width >= 0) & (height >= 0) & (inter > 0) & (union > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(valid, inter / np.where(valid, union, np.float32(1)), np.float32(0))


def efficient_nms_numpy(boxes, scores, score_threshold, iou_threshold, k, background, activation, agnostic, coding):
    """NVIDIA's EfficientNMS as one greedy walk over every image's sorted candidates (the class compared pair by
    pair), in numpy: (num, boxes, raw scores, classes) of the kept, padded with zeros to K."""
    batch, n, classes = scores.shape
    s = scores.astype(np.float32)
    b4 = boxes.astype(np.float32)
    if activation:
        t = score_threshold
        threshold = -np.inf if t <= 0 else np.inf if t >= 1 else np.float32(np.log(t / (1 - t)))
    else:
        threshold = np.float32(score_threshold)
    num = np.zeros((batch, 1), np.int32)
    out_boxes, out_scores = np.zeros((batch, k, 4), np.float32), np.zeros((batch, k), np.float32)
    out_classes = np.zeros((batch, k), np.int32)
    for b in range(batch):
        flat = s[b].reshape(-1)
        cls = np.arange(n * classes) % classes
        items = np.nonzero((flat >= threshold) & (cls != background))[0]
        items = items[np.argsort(-flat[items], kind="stable")][:4096]
        rows = b4[b].reshape(-1, 4)[items] if b4.ndim == 4 else b4[b][items // classes]
        corners = _corner_boxes(rows, coding)
        suppressed = np.zeros(len(items), bool)
        kept = []
        for i in range(len(items)):
            if suppressed[i]:
                continue
            kept.append(i)
            if len(kept) == k:
                break
            later = np.arange(len(items)) > i
            same = True if agnostic else cls[items] == cls[items[i]]
            suppressed |= later & same & (_nvidia_iou(corners[i], corners) >= np.float32(iou_threshold))
        num[b, 0] = len(kept)
        out_boxes[b, : len(kept)] = corners[kept]
        out_scores[b, : len(kept)] = flat[items[kept]]
        out_classes[b, : len(kept)] = cls[items[kept]]
    return num, out_boxes, out_scores, out_classes


def _with_defaults(op: str, args: tuple) -> tuple:
    """``args`` followed by the defaults of the arguments the call left out (a case may rely on them)."""
    schema = getattr(torch.ops.torchtrt, op).default._schema
    return (*args, *(argument.default_value for argument in schema.arguments[len(args) :]))


def check_efficient_nms(case: Case, out: tuple[torch.Tensor, ...]) -> None:
    boxes, scores, *fields = _with_defaults("efficient_nms", case.args)
    activation = fields[4]
    num, det_boxes, det_scores, det_classes = efficient_nms_numpy(as_numpy(boxes), as_numpy(scores), *fields)
    assert [o.dtype for o in out] == [torch.int32, boxes.dtype, scores.dtype, torch.int32], case.note
    _assert_allclose(out[0], num, 0.0, 0.0, f"{case.note}: num_detections")
    _assert_allclose(out[3], det_classes, 0.0, 0.0, f"{case.note}: detection_classes")
    rounded = torch.from_numpy(det_boxes).to(boxes.dtype)  # decoded in fp32, rounded once to the boxes' dtype
    _assert_allclose(out[1], as_numpy(rounded), 0.0, 0.0, f"{case.note}: detection_boxes")
    if activation:
        expected = np.where(np.arange(det_scores.shape[1]) < num, 1 / (1 + np.exp(-det_scores.astype(np.float64))), 0)
        tol = 1e-6 if scores.dtype == torch.float32 else 1e-3
        _assert_allclose(out[2], expected, tol, tol, f"{case.note}: detection_scores")
    else:
        _assert_allclose(out[2], det_scores.astype(np.float64), 0.0, 0.0, f"{case.note}: detection_scores")


# ------------------------------------------------------------------------------------------ rotary_embedding


def draw_rotary_embedding(data: st.DataObject, device: str) -> Case:
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    lead = data.draw(st.lists(EXTENTS, min_size=0, max_size=2), label="token dims")
    if int(np.prod(lead)) > 4096:
        lead = [7]
    heads = data.draw(st.sampled_from([1, 2, 3, 8]), label="heads")
    head_dim = data.draw(st.sampled_from([2, 4, 6, 16, 33, 64, 80, 128]), label="head_dim")
    rotary_dim = data.draw(
        st.sampled_from(sorted({d for d in (2, head_dim // 2 * 2, head_dim // 4 * 2) if d})), label="rotary_dim"
    )
    max_position = data.draw(st.sampled_from([1, 7, 512, 4097]), label="max_position")
    base = data.draw(st.sampled_from([10000.0, 500000.0, 2.5]), label="base")
    is_neox = data.draw(st.booleans(), label="is_neox")
    pos_dtype = data.draw(st.sampled_from([torch.int64, torch.int32]), label="positions dtype")
    generator = torch.Generator().manual_seed(data.draw(st.integers(0, 2**31 - 1), label="positions seed"))
    positions = torch.randint(0, max_position, tuple(lead), generator=generator).to(pos_dtype).to(device)
    x = tensor(data, (*lead, heads, head_dim), dtype, device)
    note = (
        f"{dtype} {tuple(x.shape)} stride {x.stride()} rotary_dim {rotary_dim} max_position {max_position} base "
        f"{base} is_neox {is_neox} positions {pos_dtype}"
    )
    return Case("rotary_embedding", (x, positions, rotary_dim, max_position, base, is_neox), note=note)


def check_rotary_embedding(case: Case, out: torch.Tensor) -> None:
    from torchtrt_plugins.ops import rotary_embedding

    x, positions, rotary_dim, _, base, is_neox = case.args
    assert out.dtype == x.dtype and out.shape == x.shape, case.note
    # The cache's definition: inverse frequencies rounded to fp32 from double, fp32 angles (an fp32 product: its
    # rounding grows with the position), then cos, sin and the rotation in float64.
    half = rotary_dim // 2
    inv_freq = (1.0 / np.power(float(base), np.arange(half, dtype=np.float64) * 2 / rotary_dim)).astype(np.float32)
    angles = (as_numpy(positions).astype(np.float32)[..., None] * inv_freq).astype(np.float64)
    cos, sin = np.cos(angles)[..., None, :], np.sin(angles)[..., None, :]
    xs = as_numpy(x)
    expected = xs.copy()
    if is_neox:
        x1, x2 = xs[..., :half], xs[..., half:rotary_dim]
        expected[..., :half] = x1 * cos - x2 * sin
        expected[..., half:rotary_dim] = x2 * cos + x1 * sin
    else:
        x1, x2 = xs[..., 0:rotary_dim:2], xs[..., 1:rotary_dim:2]
        expected[..., 0:rotary_dim:2] = x1 * cos - x2 * sin
        expected[..., 1:rotary_dim:2] = x2 * cos + x1 * sin
    tol = rotary_embedding.SPEC.tolerance(x.dtype)
    _assert_allclose(out, expected, tol.atol, tol.rtol, case.note)


# ------------------------------------------------------------------------- multi_scale_deformable_attention


def draw_multi_scale_deformable_attention(data: st.DataObject, device: str) -> Case:
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    index_dtype = data.draw(st.sampled_from([torch.int64, torch.int32]), label="index dtype")
    levels = data.draw(
        st.lists(st.tuples(st.integers(1, 23), st.integers(1, 23)), min_size=1, max_size=4), label="maps"
    )
    batch = data.draw(st.sampled_from([0, 1, 2, 3]), label="batch")
    queries = data.draw(st.sampled_from([0, 1, 7, 33, 100]), label="queries")
    heads = data.draw(st.sampled_from([1, 2, 3, 8]), label="heads")
    channels = data.draw(st.sampled_from([1, 2, 3, 8, 31, 32, 33, 64]), label="channels")
    points = data.draw(st.sampled_from([1, 2, 3, 4]), label="points")
    sizes = [h * w for h, w in levels]
    shapes = torch.tensor(levels, dtype=index_dtype, device=device)
    starts = torch.tensor([sum(sizes[:i]) for i in range(len(sizes))], dtype=index_dtype, device=device)
    value = tensor(data, (batch, sum(sizes), heads, channels), dtype, device)
    # Around the maps' centres, some outside [0, 1]: those corners are padding.
    locations = tensor(data, (batch, queries, heads, len(levels), points, 2), dtype, device, scale=0.4) + 0.5
    weights = tensor(data, (batch, queries, heads, len(levels), points), dtype, device, scale=0.3)
    note = (
        f"{dtype} value {tuple(value.shape)} stride {value.stride()} maps {levels} ({index_dtype}) queries {queries} "
        f"points {points}"
    )
    return Case("multi_scale_deformable_attention", (value, shapes, starts, locations, weights), note=note)


def _bilinear_coordinate(location: np.ndarray, size: int) -> np.ndarray:
    """grid_sample's pixel coordinate (align_corners=False) of Hugging Face's grid 2 * loc - 1, each step in fp32."""
    f32 = np.float32
    grid = (f32(2) * location.astype(f32) - f32(1)).astype(f32)
    return ((((grid + f32(1)).astype(f32) * f32(size)).astype(f32) - f32(1)).astype(f32) * f32(0.5)).astype(np.float64)


def check_multi_scale_deformable_attention(case: Case, out: torch.Tensor) -> None:
    from torchtrt_plugins.ops import multi_scale_deformable_attention as msda

    value, shapes, starts, locations, weights = (as_numpy(t) for t in case.args)
    batch, _, heads, channels = value.shape
    queries = locations.shape[1]
    expected = np.zeros((batch, queries, heads, channels))
    for level, ((height, width), start) in enumerate(zip(shapes.tolist(), starts.tolist(), strict=True)):
        x = _bilinear_coordinate(locations[:, :, :, level, :, 0], width)  # (B, Q, H, P)
        y = _bilinear_coordinate(locations[:, :, :, level, :, 1], height)
        x0, y0 = np.floor(x), np.floor(y)
        for dy in (0, 1):
            for dx in (0, 1):
                cx, cy = (x0 + dx).astype(np.int64), (y0 + dy).astype(np.int64)
                weight = (1 - np.abs(x - cx)) * (1 - np.abs(y - cy)) * weights[:, :, :, level]
                inside = (cx >= 0) & (cx < width) & (cy >= 0) & (cy < height)
                rows = start + np.where(inside, cy * width + cx, 0)
                b = np.arange(batch)[:, None, None, None]
                h = np.arange(heads)[None, None, :, None]
                corner = value[b, rows, h]  # (B, Q, H, P, D)
                expected += (np.where(inside, weight, 0)[..., None] * corner).sum(axis=3)
    tol = msda.SPEC.tolerance(case.args[0].dtype)
    _assert_allclose(out, expected.reshape(batch, queries, heads * channels), tol.atol, tol.rtol, case.note)


@dataclass(frozen=True)
class OpProps:
    draw: Callable[[st.DataObject, str], Case]
    check: Callable[[Case, Any], None]


CASES: dict[str, OpProps] = {
    "rms_norm": OpProps(draw_rms_norm, check_rms_norm),
    "add_rms_norm": OpProps(draw_add_rms_norm, check_add_rms_norm),
    "pad_to": OpProps(draw_pad_to, check_pad_to),
    "masked_rows": OpProps(draw_masked_rows, check_masked_rows),
    "rms_norm_fp8": OpProps(_draw_rms_norm_quant("rms_norm_fp8"), check_rms_norm_quant),
    "rms_norm_int8": OpProps(_draw_rms_norm_quant("rms_norm_int8"), check_rms_norm_quant),
    "rotary_embedding": OpProps(draw_rotary_embedding, check_rotary_embedding),
    "efficient_nms": OpProps(draw_efficient_nms, check_efficient_nms),
    "multi_scale_deformable_attention": OpProps(
        draw_multi_scale_deformable_attention, check_multi_scale_deformable_attention
    ),
}


def examples(device: str, seed: int = 0) -> dict[str, Case]:
    """One fixed, sizeable case per op (several waves of blocks, odd extents), for the multi-GPU, multi-stream and
    multi-thread tests: the same case on another device or stream must give the same checked result."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(4099, 4096, generator=g).to(torch.bfloat16).to(device)
    w = (1 + 0.1 * torch.randn(4096, generator=g)).to(torch.bfloat16).to(device)
    image = torch.randn(2, 3, 223, 225, generator=g).to(device)
    rows = torch.randn(100_001, 33, generator=g).to(device)
    mask = (torch.rand(100_001, generator=g) < 0.5).to(device)
    residual = torch.randn(4099, 4096, generator=g).to(torch.bfloat16).to(device)
    queries = torch.randn(4099, 32, 128, generator=g).to(torch.bfloat16).to(device)
    positions = torch.randint(0, 8192, (4099,), generator=g).to(device)
    nms_boxes, nms_scores = draw_nms_inputs(g, 4, 5000, 80, box_coding=0, per_class=False, spread=1000.0)
    return {
        "rms_norm": Case("rms_norm", (x, w, 1e-6, 0.0), note=f"bf16 {tuple(x.shape)} on {device}"),
        "add_rms_norm": Case(
            "add_rms_norm",
            (x, residual, w, 1e-6),
            note=f"bf16 {tuple(x.shape)}, residual updated in place, on {device}",
            before=(residual.clone(),),
            mutated=(1,),
        ),
        "pad_to": Case("pad_to", (image, 256, 240, 1.5), note=f"fp32 {tuple(image.shape)} -> 256x240 on {device}"),
        "masked_rows": Case("masked_rows", (rows, mask), note=f"fp32 {tuple(rows.shape)} half kept on {device}"),
        **{
            op: Case(
                op, (x, w, torch.tensor(0.02, device=device), 1e-6, 0.0), note=f"bf16 {tuple(x.shape)} on {device}"
            )
            for op in ("rms_norm_fp8", "rms_norm_int8")
        },
        "rotary_embedding": Case(
            "rotary_embedding",
            (queries, positions, 128, 8192, 500000.0, True),
            note=f"bf16 {tuple(queries.shape)} RoPE (8192 positions) on {device}",
        ),
        "efficient_nms": Case(
            "efficient_nms",
            (nms_boxes.to(device), nms_scores.to(device), 0.2, 0.5, 100),
            note=f"fp32 {tuple(nms_scores.shape)} scores, 100 kept per image, on {device}",
        ),
        "multi_scale_deformable_attention": _msda_example(g, device),
    }


def _msda_example(g: torch.Generator, device: str) -> Case:
    """The Deformable DETR decoder's cross-attention in fp16: 900 queries over four levels of an 800x1066 image."""
    maps = [(100, 134), (50, 67), (25, 34), (13, 17)]
    sizes = [h * w for h, w in maps]
    shapes = torch.tensor(maps, device=device)
    starts = torch.tensor([sum(sizes[:i]) for i in range(4)], device=device)
    value = torch.randn(2, sum(sizes), 8, 32, generator=g).half().to(device)
    locations = torch.rand(2, 900, 8, 4, 4, 2, generator=g).half().to(device)
    weights = torch.softmax(torch.randn(2, 900, 8, 16, generator=g), -1).view(2, 900, 8, 4, 4).half().to(device)
    note = f"fp16 value {tuple(value.shape)}, 900 queries, 4 levels x 4 points on {device}"
    return Case("multi_scale_deformable_attention", (value, shapes, starts, locations, weights), note=note)
