"""torchvision's roi_align, nms and deform_conv2d, and multi-level RoIAlign, as TensorRT plugins, through the public
``declare`` path.

``import torchtrt_plugins.vision`` declares ``torchvision::roi_align``, ``torchvision::nms`` and
``torchvision::deform_conv2d`` from torchvision's own schemas and fake kernels, with our kernels
(``csrc/kernels/roi_align.cu``, ``nms.cu``, ``deform_conv2d.cu``) as their launchers, built with the SDK like any user
package.
torchvision's own eager kernels stay in place where they load; ours run in the plugin and through
:func:`torchtrt_plugins.sdk.launch`.

Where torchvision's ops library does not load (pip's torchvision is a CUDA build: beside a CPU-only torch its ``_C``
fails and ``import torchvision`` raises ``operator torchvision::nms does not exist``), importing this module
*before* torchvision makes torchvision importable: the schemas of ``nms``, ``qnms``, ``roi_align`` and
``deform_conv2d`` are defined here as torchvision defines them, with :func:`reference_nms`,
:func:`reference_roi_align` and :func:`reference_deform_conv2d` as their CPU kernels (``qnms`` has none), torchvision
then registers its own ``nms``/``qnms`` fake kernels, and its Python code is told its ops are there
(``torchvision.extension._has_ops``), so ``torchvision.ops`` calls them instead of raising or taking its pure-Python
RoIAlign. Without torchvision the ``nms`` fake is ours too (the kept count has no lower bound of 2 here;
torchvision's has one).

torchvision's nms fake kernel gives its output size no bound (``create_unbacked_symint``), so the declaration
supplies it: at most one kept index per box (``size_upper``).

``torchtrt_vision::multi_scale_roi_align_<L>`` (L levels, :data:`MULTI_SCALE_LEVELS`) is torchvision's
MultiScaleRoIAlign (``torchvision/ops/poolers.py``) as one op (``multi_scale_roi_align.cu``), defined here with
:func:`reference_multi_scale_roi_align` as its CPU kernel; ``torchtrt_plugins.lower`` rewrites MultiScaleRoIAlign's
exported graph into it (``lowering/multi_scale_roi_align.py``).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from typing import Any

import torch

from . import _build, sdk
from .declare import Range, declare
from .spec import SpecError, Tolerance

ROI_ALIGN_SCHEMA = (
    "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
    "int sampling_ratio, bool aligned) -> Tensor"
)
NMS_SCHEMA = "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
QNMS_SCHEMA = "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor"
DEFORM_CONV2D_SCHEMA = (
    "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, Tensor bias, SymInt stride_h, "
    "SymInt stride_w, SymInt pad_h, SymInt pad_w, SymInt dilation_h, SymInt dilation_w, SymInt groups, "
    "SymInt offset_groups, bool use_mask) -> Tensor"
)


def _torchvision_ops_load(package_dirs: list[str]) -> bool:
    """Whether torchvision's ops library (``_C``) loads with this torch, found as torchvision finds it."""
    loader = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    for directory in package_dirs:
        found = importlib.machinery.FileFinder(directory, loader).find_spec("_C")
        if found is not None:
            try:
                torch.ops.load_library(found.origin)
            except OSError:
                return False
            return True
    return False


def reference_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
    """torchvision's RoIAlign forward in plain torch, one RoI at a time: the sample coordinates in fp32 with
    torchvision's order of operations (coordinates in doubles move samples of a 64-pixel map by more than the fp32
    tolerance allows), fp32 accumulation."""
    n, channels, height, width = input.shape
    out = input.new_zeros((rois.shape[0], channels, pooled_height, pooled_width))
    data = input.float()
    offset, scale = torch.tensor(0.5 if aligned else 0.0), torch.tensor(spatial_scale, dtype=torch.float32)
    one = torch.tensor(1.0)
    for k, roi in enumerate(rois.float()):
        start = roi[1:3] * scale - offset  # (x, y)
        size = (roi[3:5] * scale - offset) - start
        if not aligned:
            size = torch.maximum(size, one)
        pooled = torch.tensor([pooled_width, pooled_height], dtype=torch.float32)
        bins = size / pooled
        grid = [sampling_ratio] * 2 if sampling_ratio > 0 else [int(v) for v in torch.ceil(size / pooled).tolist()]

        xs = _sample_coordinates(start[0], bins[0], pooled_width, grid[0])
        ys = _sample_coordinates(start[1], bins[1], pooled_height, grid[1])
        grid_w, grid_h = grid
        values = _bilinear(data[int(roi[0])], ys, xs, height, width)  # (C, PH * gh, PW * gw)
        values = values.reshape(channels, pooled_height, grid_h, pooled_width, grid_w)
        out[k] = (values.sum(dim=(2, 4)) / max(grid_h * grid_w, 1)).to(input.dtype)
    return out


def _sample_coordinates(start: torch.Tensor, bin_size: torch.Tensor, bins: int, grid: int) -> torch.Tensor:
    """Along one axis, torchvision's ``start + p * bin_size + (i + 0.5) * bin_size / grid`` for every bin p and grid
    step i, in fp32."""
    cells = torch.arange(bins, dtype=torch.float32)[:, None] * bin_size
    steps = (torch.arange(grid, dtype=torch.float32)[None, :] + 0.5) * bin_size / grid
    return (start + cells + steps).reshape(-1)


def _bilinear(plane: torch.Tensor, ys: torch.Tensor, xs: torch.Tensor, height: int, width: int) -> torch.Tensor:
    def axis(values: torch.Tensor, size: int):
        outside = (values < -1.0) | (values > size)
        values = values.clamp(min=0.0)
        low = values.floor().long()
        at_edge = low >= size - 1
        low = torch.where(at_edge, size - 1, low)
        high = torch.where(at_edge, size - 1, low + 1)
        values = torch.where(at_edge, low.float(), values)
        frac = values - low.float()
        return low, high, frac, outside

    y0, y1, ly, y_out = axis(ys, height)
    x0, x1, lx, x_out = axis(xs, width)
    hy, hx = 1.0 - ly, 1.0 - lx

    def at(r, c):
        return plane[:, r][:, :, c]

    value = (
        hy[:, None] * hx[None, :] * at(y0, x0)
        + hy[:, None] * lx[None, :] * at(y0, x1)
        + ly[:, None] * hx[None, :] * at(y1, x0)
        + ly[:, None] * lx[None, :] * at(y1, x1)
    )
    return value.masked_fill(y_out[:, None] | x_out[None, :], 0.0)


def reference_nms(dets: torch.Tensor, scores: torch.Tensor, iou_threshold: float) -> torch.Tensor:
    """Greedy NMS in plain torch: indices of kept boxes by decreasing score (IoU > threshold suppresses)."""
    order = torch.argsort(scores, descending=True, stable=True)
    boxes = dets.float()[order]
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    removed = torch.zeros(len(order), dtype=torch.bool)
    keep = []
    for i in range(len(order)):
        if removed[i]:
            continue
        keep.append(int(order[i]))
        left = torch.maximum(boxes[i, 0], boxes[:, 0])
        top = torch.maximum(boxes[i, 1], boxes[:, 1])
        right = torch.minimum(boxes[i, 2], boxes[:, 2])
        bottom = torch.minimum(boxes[i, 3], boxes[:, 3])
        inter = (right - left).clamp(min=0) * (bottom - top).clamp(min=0)
        iou = inter / (areas[i] + areas - inter)
        later = torch.arange(len(order)) > i
        removed |= later & (iou > iou_threshold)
    return torch.tensor(keep, dtype=torch.int64)


def check_deform_conv2d_args(
    input,
    weight,
    offset,
    mask,
    bias,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    dilation_h,
    dilation_w,
    groups,
    offset_groups,
    use_mask,
) -> None:
    """The shapes torchvision's deform_conv2d takes, checked up front: a SpecError names the argument that is wrong."""

    def fail(argument: str, expected: str, got: Any) -> None:
        raise SpecError(f"torchvision.deform_conv2d: argument '{argument}' must {expected}, got {got}")

    for name, tensor in (("input", input), ("weight", weight), ("offset", offset)):
        if tensor.dim() != 4:
            fail(name, "be 4-D", f"shape {tuple(tensor.shape)}")
    for name, value, low in (
        ("stride_h", stride_h, 1),
        ("stride_w", stride_w, 1),
        ("pad_h", pad_h, 0),
        ("pad_w", pad_w, 0),
        ("dilation_h", dilation_h, 1),
        ("dilation_w", dilation_w, 1),
        ("groups", groups, 1),
        ("offset_groups", offset_groups, 1),
    ):
        if value < low:
            fail(name, f"be at least {low}", value)
    batch, channels, height, width = input.shape
    out_channels, group_channels, kernel_h, kernel_w = weight.shape
    if group_channels * groups != channels or out_channels % groups:
        fail(
            "weight",
            f"have shape (O, C / groups, kh, kw) with O a multiple of groups = {groups} and C = {channels}",
            f"shape {tuple(weight.shape)}",
        )
    if channels % offset_groups:
        fail("offset_groups", f"divide the input's {channels} channels", offset_groups)
    out_h = (height + 2 * pad_h - dilation_h * (kernel_h - 1) - 1) // stride_h + 1
    out_w = (width + 2 * pad_w - dilation_w * (kernel_w - 1) - 1) // stride_w + 1
    if out_h < 1 or out_w < 1:
        fail(
            "input",
            f"be at least as large as the dilated kernel, {kernel_h} x {kernel_w}",
            f"shape {tuple(input.shape)}",
        )
    expected = (batch, 2 * offset_groups * kernel_h * kernel_w, out_h, out_w)
    if tuple(offset.shape) != expected:
        fail(
            "offset", f"have shape {expected} (N, 2 * offset_groups * kh * kw, out_h, out_w)", f"{tuple(offset.shape)}"
        )
    expected = (batch, offset_groups * kernel_h * kernel_w, out_h, out_w)
    if use_mask and tuple(mask.shape) != expected:
        fail(
            "mask",
            f"have shape {expected} (N, offset_groups * kh * kw, out_h, out_w) when use_mask",
            f"{tuple(mask.shape)}",
        )
    if tuple(bias.shape) != (out_channels,):
        fail("bias", f"have shape ({out_channels},)", f"{tuple(bias.shape)}")


def reference_deform_conv2d(
    input,
    weight,
    offset,
    mask,
    bias,
    stride_h,
    stride_w,
    pad_h,
    pad_w,
    dilation_h,
    dilation_w,
    groups,
    offset_groups,
    use_mask,
):
    """torchvision's deform_conv2d forward in plain torch (fp32): every kernel tap of every offset group samples the
    input bilinearly at its displaced point (zero outside the image), times the mask when ``use_mask``; then the
    grouped convolution of those samples with the weight, plus the bias."""
    check_deform_conv2d_args(
        input,
        weight,
        offset,
        mask,
        bias,
        stride_h,
        stride_w,
        pad_h,
        pad_w,
        dilation_h,
        dilation_w,
        groups,
        offset_groups,
        use_mask,
    )
    batch, channels, height, width = input.shape
    out_channels, _, kernel_h, kernel_w = weight.shape
    out_h, out_w = offset.shape[-2:]
    taps, pixels = kernel_h * kernel_w, out_h * out_w
    displacement = offset.float().reshape(batch, offset_groups, taps, 2, pixels)
    row = (torch.arange(out_h) * stride_h - pad_h).repeat_interleave(out_w)
    col = (torch.arange(out_w) * stride_w - pad_w).repeat(out_h)
    tap_row = (torch.arange(kernel_h) * dilation_h).repeat_interleave(kernel_w)
    tap_col = (torch.arange(kernel_w) * dilation_w).repeat(kernel_h)
    ys = row[None, :] + tap_row[:, None] + displacement[:, :, :, 0]  # (N, offset_groups, taps, pixels)
    xs = col[None, :] + tap_col[:, None] + displacement[:, :, :, 1]
    planes = input.float().reshape(batch, offset_groups, channels // offset_groups, height * width)
    samples = _sample_zero_padded(planes, ys, xs, height, width)  # (N, offset_groups, C / offset_groups, taps, pixels)
    if use_mask:
        samples = samples * mask.float().reshape(batch, offset_groups, 1, taps, pixels)
    columns = samples.reshape(batch, groups, channels // groups * taps, pixels)
    kernel = weight.float().reshape(groups, out_channels // groups, -1)
    out = torch.einsum("gok,ngkp->ngop", kernel, columns).reshape(batch, out_channels, out_h, out_w)
    return (out + bias.float()[None, :, None, None]).to(input.dtype).contiguous()


def _sample_zero_padded(planes, ys, xs, height: int, width: int) -> torch.Tensor:
    """Bilinear samples of planes (N, G, C, H * W) at (ys, xs) (N, G, taps, pixels), a corner outside the image
    counting as zero: (N, G, C, taps, pixels)."""
    y0, x0 = ys.floor(), xs.floor()
    ly, lx = ys - y0, xs - x0
    total = torch.zeros((*planes.shape[:3], *ys.shape[2:]))
    for dy, wy in ((0, 1.0 - ly), (1, ly)):
        for dx, wx in ((0, 1.0 - lx), (1, lx)):
            r, c = y0 + dy, x0 + dx
            inside = (r >= 0) & (r < height) & (c >= 0) & (c < width)
            index = (r.clamp(0, height - 1) * width + c.clamp(0, width - 1)).long().flatten(2)
            gathered = planes.gather(3, index[:, :, None, :].expand(-1, -1, planes.shape[2], -1))
            total += gathered.reshape(total.shape) * (wy * wx * inside)[:, :, None]
    return total


def _define_torchvision_ops(torchvision_installed: bool) -> torch.library.Library:
    """torchvision's schemas, fake kernels and CPU kernels, as torchvision registers them, for when its ops library
    does not load; where torchvision itself is installed it registers the ``nms``/``qnms`` fakes at import."""
    lib = torch.library.Library("torchvision", "DEF")
    for schema in (ROI_ALIGN_SCHEMA, NMS_SCHEMA, DEFORM_CONV2D_SCHEMA) + (
        (QNMS_SCHEMA,) if torchvision_installed else ()
    ):
        lib.define(schema)

    def fake_roi_align(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio, aligned):
        torch._check(rois.size(1) == 5, lambda: "rois must have shape as Tensor[K, 5]")
        torch._check(
            input.dtype == rois.dtype,
            lambda: (
                "Expected tensor for input to have the same type as tensor for rois; "
                f"but type {input.dtype} does not equal {rois.dtype}"
            ),
        )
        num_rois = rois.size(0)
        _, channels, height, width = input.size()
        return input.new_empty((num_rois, channels, pooled_height, pooled_width))

    def fake_nms(dets, scores, iou_threshold):
        torch._check(dets.dim() == 2, lambda: f"boxes should be a 2d tensor, got {dets.dim()}D")
        torch._check(dets.size(1) == 4, lambda: f"boxes should have 4 elements in dimension 1, got {dets.size(1)}")
        torch._check(scores.dim() == 1, lambda: f"scores should be a 1d tensor, got {scores.dim()}")
        torch._check(
            dets.size(0) == scores.size(0),
            lambda: (
                "boxes and scores should have same number of elements in dimension 0, "
                f"got {dets.size(0)} and {scores.size(0)}"
            ),
        )
        num_to_keep = torch.library.get_ctx().new_dynamic_size()
        return dets.new_empty(num_to_keep, dtype=torch.long)

    def fake_deform_conv2d(
        input,
        weight,
        offset,
        mask,
        bias,
        stride_h,
        stride_w,
        pad_h,
        pad_w,
        dil_h,
        dil_w,
        n_weight_grps,
        n_offset_grps,
        use_mask,
    ):
        out_height, out_width = offset.shape[-2:]
        out_channels = weight.shape[0]
        batch_size = input.shape[0]
        return input.new_empty((batch_size, out_channels, out_height, out_width))

    torch.library.register_fake("torchvision::roi_align", fake_roi_align, lib=lib)
    torch.library.register_fake("torchvision::deform_conv2d", fake_deform_conv2d, lib=lib)
    if not torchvision_installed:
        torch.library.register_fake("torchvision::nms", fake_nms, lib=lib)
    lib.impl("roi_align", reference_roi_align, "CPU")
    lib.impl("nms", reference_nms, "CPU")
    lib.impl("deform_conv2d", reference_deform_conv2d, "CPU")
    return lib


def _ops_present() -> bool:
    return True


def _load_torchvision() -> tuple[bool, bool, torch.library.Library | None]:
    """``(its ops library loaded, its Python importable, our stand-in library)``, importing torchvision if it is
    installed (with the stand-ins first where its ops library does not load)."""
    spec = importlib.util.find_spec("torchvision")
    if spec is None:
        return False, False, _define_torchvision_ops(torchvision_installed=False)
    if "torchvision" in sys.modules or _torchvision_ops_load(list(spec.submodule_search_locations or ())):
        importlib.import_module("torchvision")
        return True, True, None
    lib = _define_torchvision_ops(torchvision_installed=True)
    torchvision = importlib.import_module("torchvision")
    # Bound by name at their import: torchvision.ops.roi_align takes its pure-Python RoIAlign without ops.
    torchvision.extension._has_ops = _ops_present
    sys.modules["torchvision.ops.roi_align"]._has_ops = _ops_present
    return False, True, lib


#: ``TORCHVISION``: torchvision's own ops library is loaded (its kernels run eagerly); ``TORCHVISION_IMPORTABLE``:
#: its Python code imports (with its ops library, or with the stand-ins above).
TORCHVISION, TORCHVISION_IMPORTABLE, _LIB = _load_torchvision()


#: The level counts of ``torchtrt_vision::multi_scale_roi_align_<L>`` (one op each: a plugin takes a fixed number of
#: inputs); one level is torchvision::roi_align itself, as MultiScaleRoIAlign makes it.
MULTI_SCALE_LEVELS = (2, 3, 4, 5)
#: LevelMapper's defaults (torchvision/ops/poolers.py), and its eps, which MultiScaleRoIAlign never changes.
CANONICAL_SCALE, CANONICAL_LEVEL, LEVEL_EPS = 224.0, 4, 1e-6


def multi_scale_roi_align_schema(levels: int) -> str:
    features = ", ".join(f"Tensor level_{level}" for level in range(levels))
    scales = ", ".join(f"float scale_{level}" for level in range(levels))
    return (
        f"multi_scale_roi_align_{levels}({features}, Tensor rois, {scales}, SymInt pooled_height, "
        f"SymInt pooled_width, int sampling_ratio, float canonical_scale={CANONICAL_SCALE}, "
        f"int canonical_level={CANONICAL_LEVEL}, bool aligned=False) -> Tensor"
    )


def assign_levels(boxes, scales, canonical_scale=CANONICAL_SCALE, canonical_level=CANONICAL_LEVEL):
    """torchvision's LevelMapper in fp32: the index of the level (into ``scales``) each box (K, 4) is pooled from,
    -1 for a box of negative area; an index past the last level is possible, as in torchvision, and pools nothing."""
    lowest = int(-torch.log2(torch.tensor(scales[0], dtype=torch.float32)).item())
    highest = int(-torch.log2(torch.tensor(scales[-1], dtype=torch.float32)).item())
    boxes = boxes.float()
    size = torch.sqrt((boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1]))
    target = torch.floor(canonical_level + torch.log2(size / canonical_scale) + torch.tensor(LEVEL_EPS))
    levels = torch.clamp(target, min=lowest, max=highest)
    return torch.where(torch.isnan(levels), -1, levels.nan_to_num().to(torch.int64) - lowest)


def _split_multi_scale_args(args, kwargs):
    """(features, rois, scales, pooled_height, pooled_width, sampling_ratio, canonical_scale, canonical_level,
    aligned) of a multi_scale_roi_align_<L> call, defaults filled in: the feature maps, then rois, lead as tensors;
    every scalar may come by position or by name."""
    tensors = next((i for i, a in enumerate(args) if not isinstance(a, torch.Tensor)), len(args))
    levels = tensors - 1
    scales = [f"scale_{level}" for level in range(levels)]
    names = ["pooled_height", "pooled_width", "sampling_ratio", "canonical_scale", "canonical_level", "aligned"]
    defaults = {"canonical_scale": CANONICAL_SCALE, "canonical_level": CANONICAL_LEVEL, "aligned": False}
    values = defaults | dict(zip(scales + names, args[tensors:], strict=False)) | kwargs
    return (list(args[:levels]), args[levels], [values[n] for n in scales], *(values[n] for n in names))


def reference_multi_scale_roi_align(*args, **kwargs):
    """torchvision's MultiScaleRoIAlign on RoIs (K, 5): each RoI pooled by :func:`reference_roi_align` from the level
    :func:`assign_levels` gives it, in RoI order; zero where no level takes it."""
    features, rois, scales, pooled_height, pooled_width, sampling_ratio, canonical_scale, canonical_level, aligned = (
        _split_multi_scale_args(args, kwargs)
    )
    _check_multi_scale_args(features, rois)
    levels = assign_levels(rois[:, 1:], scales, canonical_scale, canonical_level)
    out = features[0].new_zeros((rois.shape[0], features[0].shape[1], pooled_height, pooled_width))
    for level, (feature, scale) in enumerate(zip(features, scales, strict=True)):
        index = torch.where(levels == level)[0]
        out[index] = reference_roi_align(
            feature, rois[index], scale, pooled_height, pooled_width, sampling_ratio, aligned
        )
    return out


def _fake_multi_scale_roi_align(*args, **kwargs):
    features, rois, scales, pooled_height, pooled_width, *_ = _split_multi_scale_args(args, kwargs)
    _check_multi_scale_args(features, rois)
    return rois.new_empty((rois.shape[0], features[0].shape[1], pooled_height, pooled_width))


def _check_multi_scale_args(features, rois) -> None:
    """Ranks always; sizes as SpecErrors on concrete shapes (an eager call), as recorded checks on symbolic ones."""
    label = f"torchtrt_vision.multi_scale_roi_align_{len(features)}"
    concrete = all(isinstance(d, int) for t in (*features, rois) for d in t.shape)

    def check(condition, argument: str, expected: str, got: Any) -> None:
        message = f"{label}: argument '{argument}' must have shape {expected}, got {got}"
        if not concrete:
            torch._check(condition, lambda: message)
        elif not condition:
            raise SpecError(message)

    if rois.dim() != 2:
        raise SpecError(f"{label}: argument 'rois' must have shape (K, 5), got {tuple(rois.shape)}")
    check(rois.shape[1] == 5, "rois", "(K, 5)", tuple(rois.shape))
    for level, feature in enumerate(features):
        if feature.dim() != 4:
            raise SpecError(
                f"{label}: argument 'level_{level}' must have shape (N, C, H, W), got {tuple(feature.shape)}"
            )
        for d in (0, 1):
            check(
                feature.shape[d] == features[0].shape[d],
                f"level_{level}",
                f"(N, C, H, W) with level_0's N and C, {tuple(features[0].shape[:2])}",
                tuple(feature.shape),
            )


def _define_multi_scale_ops() -> torch.library.Library:
    lib = torch.library.Library("torchtrt_vision", "DEF")
    for levels in MULTI_SCALE_LEVELS:
        lib.define(multi_scale_roi_align_schema(levels))
        name = f"multi_scale_roi_align_{levels}"
        torch.library.register_fake(f"torchtrt_vision::{name}", _fake_multi_scale_roi_align, lib=lib)
        lib.impl(name, reference_multi_scale_roi_align, "CPU")
    return lib


_MULTI_SCALE_LIB = _define_multi_scale_ops()

_KERNELS = _build.source_dir() / "csrc" / "kernels"
_SOURCES = ("roi_align.cu", "nms.cu", "deform_conv2d.cu", "multi_scale_roi_align.cu")
#: Its two libraries as a wheel carries them, prebuilt with ours (CMakeLists.txt, where setup.py could generate their
#: tables); elsewhere ``sdk.PluginLibrary`` builds them from the sources on first use.
PREBUILT = tuple(_build.PREBUILT_DIR / f"libtorchtrt_vision_{kind}.so" for kind in ("plugins", "launchers"))
if all(path.is_file() for path in PREBUILT):
    LIBRARY = sdk.PluginLibrary.prebuilt("torchtrt_vision", lambda: PREBUILT[0], lambda: PREBUILT[1])
else:
    LIBRARY = sdk.PluginLibrary("torchtrt_vision", sources=[_KERNELS / name for name in _SOURCES])

FLOATS = (torch.float32, torch.float16)
#: fp32: sample coordinates of a few hundred pixels carry fp32 rounding of ~3e-5 pixels, and GPU and CPU round them
#: differently (the GPU contracts multiply-adds): on the H200, torchvision's own CUDA RoIAlign differs from its CPU one
#: by up to 1.1e-4 over an 800 x 1216 image's FPN levels (ours equals its CUDA op bit for bit there). Hence an fp32
#: atol of 2e-4 against the CPU reference, while the GPU tests hold ours to torchvision's CUDA op at 1e-5.
ROI_ALIGN_TOLERANCES = {torch.float32: Tolerance(2e-4, 1e-5), torch.float16: Tolerance(1e-2, 1e-2)}
DEFORM_CONV2D_FLOATS = (torch.float32, torch.float16, torch.bfloat16)

ROI_ALIGN = declare(
    "torchvision::roi_align",
    library=LIBRARY,
    plugin_name="RoIAlign",
    plugin_version="2",
    plugin_namespace="torchtrt_vision",
    launcher="ttp::vision::roiAlign",
    # Tactic 1: a thread per output element; 2: a channels-last copy in the workspace, a block per RoI and channel
    # slice (csrc/kernels/roi_align.h). Tactic 0 picks one by the samples' count against the input's pixels.
    tactics={1: "ttp::vision::roiAlignPerElement", 2: "ttp::vision::roiAlignChannelsLast"},
    workspace="ttp::vision::roiAlignWorkspaceSize",
    ranges={
        "spatial_scale": Range(min=0.0, min_inclusive=False),
        "pooled_height": Range(min=1),
        "pooled_width": Range(min=1),
    },
    dtypes={"input": FLOATS, "rois": FLOATS},
    same_dtype={"rois": "input"},
    reference=reference_roi_align,
    tolerances=ROI_ALIGN_TOLERANCES,
    eager_cuda=not TORCHVISION,
)

NMS = declare(
    "torchvision::nms",
    library=LIBRARY,
    plugin_name="NMS",
    plugin_version="2",
    plugin_namespace="torchtrt_vision",
    launcher="ttp::vision::nms",
    workspace="ttp::vision::nmsWorkspaceSize",
    ranges={"iou_threshold": Range(min=0.0, max=1.0)},
    dtypes={"dets": (torch.float32,), "scores": (torch.float32,)},
    reference=reference_nms,
    data_dependent=True,
    sizes_first=True,
    size_upper=lambda dets, scores, iou_threshold: dets.shape[0],
    tolerances={torch.int64: Tolerance(0.0, 0.0)},
    eager_cuda=not TORCHVISION,
)


def _deform_conv2d_shapes(input, weight, offset, mask, bias, *scalars):
    """torchvision's fake kernel, with the ranks the launcher takes (four for the tensors, one for the bias; the mask
    of rank 1 to 4: torchvision passes an (N, 1) placeholder without one) and, on concrete shapes (an eager call),
    :func:`check_deform_conv2d_args`'s checks."""
    for name, tensor, ranks in (
        ("input", input, (4,)),
        ("weight", weight, (4,)),
        ("offset", offset, (4,)),
        ("mask", mask, (1, 2, 3, 4)),
        ("bias", bias, (1,)),
    ):
        if tensor.dim() not in ranks:
            raise SpecError(
                f"torchvision.deform_conv2d: argument '{name}' must have rank {' or '.join(map(str, ranks))}, "
                f"got shape {tuple(tensor.shape)}"
            )
    tensors = (input, weight, offset, mask, bias)
    if all(isinstance(d, int) for t in tensors for d in t.shape):
        check_deform_conv2d_args(*tensors, *scalars)
    return input.new_empty((input.shape[0], weight.shape[0], *offset.shape[-2:]))


DEFORM_CONV2D = declare(
    "torchvision::deform_conv2d",
    library=LIBRARY,
    plugin_name="DeformConv2d",
    plugin_version="1",
    plugin_namespace="torchtrt_vision",
    launcher="ttp::vision::deformConv2d",
    # Tactic 1 samples the NCHW planes; tactic 2 a channels-last copy of the input with a tap-major copy of the weight
    # (the workspace), in a two-stage kernel, where whole taps fill a K-chunk, else the planes
    # (csrc/kernels/deform_conv2d.h). Tactic 0, the heuristic, runs 2: faster at every shape of the H200 benchmark
    # (docs/results.md).
    tactics={1: "ttp::vision::deformConv2dPlanes", 2: "ttp::vision::deformConv2dChannelsLast"},
    workspace="ttp::vision::deformConv2dWorkspaceSize",
    # The launcher's grid holds a weight group per block column (at most 65535), and its index arithmetic is 32-bit.
    ranges={
        **{
            name: Range(min=1, max=65535)
            for name in ("stride_h", "stride_w", "dilation_h", "dilation_w", "groups", "offset_groups")
        },
        "pad_h": Range(min=0, max=65535),
        "pad_w": Range(min=0, max=65535),
    },
    dtypes={name: DEFORM_CONV2D_FLOATS for name in ("input", "weight", "offset", "mask", "bias")},
    same_dtype={name: "input" for name in ("weight", "offset", "mask", "bias")},
    reference=reference_deform_conv2d,
    outputs=_deform_conv2d_shapes,
    example_inputs=(
        torch.zeros(1, 2, 3, 3),
        torch.zeros(2, 2, 3, 3),
        torch.zeros(1, 18, 3, 3),
        torch.zeros(1, 9, 3, 3),
        torch.zeros(2),
        *(1, 1, 1, 1, 1, 1, 1, 1, True),
    ),
    # fp32 runs as three TF32 products (big * big + big * small + small * big): about fp32's own rounding. fp16 and
    # bf16 round each bilinear sample to the input's type before the product, as torchvision's column buffer does.
    tolerances={
        torch.float32: Tolerance(1e-4, 1e-4),
        torch.float16: Tolerance(2e-2, 1e-2),
        torch.bfloat16: Tolerance(1e-1, 2e-2),
    },
    eager_cuda=not TORCHVISION,
)

#: torchtrt_vision::multi_scale_roi_align_<L> by level count L.
MULTI_SCALE_ROI_ALIGN = {
    levels: declare(
        f"torchtrt_vision::multi_scale_roi_align_{levels}",
        library=LIBRARY,
        plugin_name=f"MultiScaleRoIAlign{levels}",
        plugin_version="1",
        plugin_namespace="torchtrt_vision",
        launcher="ttp::vision::multiScaleRoiAlign",
        ranges={
            **{f"scale_{level}": Range(min=0.0, min_inclusive=False) for level in range(levels)},
            "pooled_height": Range(min=1),
            "pooled_width": Range(min=1),
            "canonical_scale": Range(min=0.0, min_inclusive=False),
        },
        dtypes={**{f"level_{level}": FLOATS for level in range(levels)}, "rois": FLOATS},
        same_dtype={**{f"level_{level}": "level_0" for level in range(1, levels)}, "rois": "level_0"},
        reference=reference_multi_scale_roi_align,
        tolerances=ROI_ALIGN_TOLERANCES,
        # The ranks its fake kernel takes (its search of rank combinations does not reach five 4-D inputs).
        example_inputs=(*[torch.zeros(1, 1, 4, 4)] * levels, torch.zeros(1, 5), *[0.25] * levels, 2, 2, 2),
    )
    for levels in MULTI_SCALE_LEVELS
}

#: The ops this module declares.
DECLARATIONS = (ROI_ALIGN, NMS, DEFORM_CONV2D, *MULTI_SCALE_ROI_ALIGN.values())

from .vision_export import exportable  # noqa: E402  (needs the ops above when torchvision is stood in for)

__all__ = [
    "DECLARATIONS",
    "DEFORM_CONV2D",
    "LIBRARY",
    "MULTI_SCALE_LEVELS",
    "MULTI_SCALE_ROI_ALIGN",
    "NMS",
    "ROI_ALIGN",
    "TORCHVISION",
    "TORCHVISION_IMPORTABLE",
    "exportable",
    "assign_levels",
    "multi_scale_roi_align_schema",
    "reference_multi_scale_roi_align",
    "check_deform_conv2d_args",
    "reference_deform_conv2d",
    "reference_nms",
    "reference_roi_align",
]
