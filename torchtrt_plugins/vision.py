"""torchvision::roi_align and torchvision::nms as TensorRT plugins, through the public ``declare`` path.

``import torchtrt_plugins.vision`` declares both ops from torchvision's own schemas and fake kernels, with our kernels
(``csrc/kernels/roi_align.cu``, ``nms.cu``) as their launchers, built with the SDK like any user package.
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
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import math
import sys

import torch

from . import _build, sdk
from .declare import Range, declare
from .spec import Tolerance

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
    """torchvision's RoIAlign forward in plain torch (fp32 accumulation), one RoI at a time."""
    n, channels, height, width = input.shape
    out = input.new_zeros((rois.shape[0], channels, pooled_height, pooled_width))
    offset = 0.5 if aligned else 0.0
    data = input.float()
    for k, roi in enumerate(rois.float().tolist()):
        batch = int(roi[0])
        x1, y1 = roi[1] * spatial_scale - offset, roi[2] * spatial_scale - offset
        roi_w, roi_h = roi[3] * spatial_scale - offset - x1, roi[4] * spatial_scale - offset - y1
        if not aligned:
            roi_w, roi_h = max(roi_w, 1.0), max(roi_h, 1.0)
        bin_h, bin_w = roi_h / pooled_height, roi_w / pooled_width
        grid_h = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_h / pooled_height)
        grid_w = sampling_ratio if sampling_ratio > 0 else math.ceil(roi_w / pooled_width)
        ys = torch.tensor(
            [y1 + ph * bin_h + (iy + 0.5) * bin_h / grid_h for ph in range(pooled_height) for iy in range(grid_h)]
        )
        xs = torch.tensor(
            [x1 + pw * bin_w + (ix + 0.5) * bin_w / grid_w for pw in range(pooled_width) for ix in range(grid_w)]
        )
        samples = _bilinear(data[batch], ys, xs, height, width)  # (C, PH * gh, PW * gw)
        samples = samples.reshape(channels, pooled_height, grid_h, pooled_width, grid_w)
        out[k] = (samples.sum(dim=(2, 4)) / max(grid_h * grid_w, 1)).to(input.dtype)
    return out


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
    """torchvision's deformable convolution (v1, and v2 with ``use_mask``) in plain torch (fp32 accumulation):
    bilinear samples at the offset taps (a corner outside the image reads 0), then a grouped matmul."""
    batch, in_channels, height, width = input.shape
    out_channels, _, kernel_h, kernel_w = weight.shape
    out_h, out_w = offset.shape[-2:]
    taps = kernel_h * kernel_w
    steps = offset.float().reshape(batch, offset_groups, taps, 2, out_h, out_w)
    tap_y = (torch.arange(kernel_h) * dilation_h).repeat_interleave(kernel_w)[:, None, None]
    tap_x = (torch.arange(kernel_w) * dilation_w).repeat(kernel_h)[:, None, None]
    ys = (torch.arange(out_h) * stride_h - pad_h)[:, None] + tap_y + steps[:, :, :, 0]
    xs = (torch.arange(out_w) * stride_w - pad_w)[None, :] + tap_x + steps[:, :, :, 1]
    planes = input.float().reshape(batch, offset_groups, in_channels // offset_groups, height * width)
    sampled = _sample_points(planes, ys.flatten(2), xs.flatten(2), height, width)
    if use_mask:
        sampled = sampled * mask.float().reshape(batch, offset_groups, 1, taps * out_h * out_w)
    columns = sampled.reshape(batch, groups, in_channels // groups * taps, out_h * out_w)
    kernels = weight.float().reshape(groups, out_channels // groups, -1)
    out = torch.einsum("gok,ngkp->ngop", kernels, columns).reshape(batch, out_channels, out_h, out_w)
    return (out + bias.float()[None, :, None, None]).to(input.dtype).contiguous()


def _sample_points(planes: torch.Tensor, ys: torch.Tensor, xs: torch.Tensor, height: int, width: int) -> torch.Tensor:
    """Bilinear samples of ``planes`` (N, G, C, H*W) at points ``ys``/``xs`` (N, G, P): (N, G, C, P)."""
    inside = (ys > -1) & (ys < height) & (xs > -1) & (xs < width)
    y0, x0 = ys.floor(), xs.floor()
    ly, lx = ys - y0, xs - x0
    total = planes.new_zeros((*planes.shape[:3], ys.shape[-1]))
    for dy, dx, share in ((0, 0, (1 - ly) * (1 - lx)), (0, 1, (1 - ly) * lx), (1, 0, ly * (1 - lx)), (1, 1, ly * lx)):
        y, x = y0 + dy, x0 + dx
        valid = inside & (y >= 0) & (y <= height - 1) & (x >= 0) & (x <= width - 1)
        index = (y.clamp(0, height - 1) * width + x.clamp(0, width - 1)).long()
        gathered = torch.gather(planes, 3, index[:, :, None, :].expand(-1, -1, planes.shape[2], -1))
        total += gathered * (share * valid)[:, :, None, :]
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

    def fake_deform_conv2d(input, weight, offset, *_):
        out_height, out_width = offset.shape[-2:]
        return input.new_empty((input.shape[0], weight.shape[0], out_height, out_width))

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

_KERNELS = _build.source_dir() / "csrc" / "kernels"
LIBRARY = sdk.PluginLibrary("torchtrt_vision", sources=[_KERNELS / "roi_align.cu", _KERNELS / "nms.cu"])

FLOATS = (torch.float32, torch.float16)

ROI_ALIGN = declare(
    "torchvision::roi_align",
    library=LIBRARY,
    plugin_name="RoIAlign",
    plugin_version="2",
    plugin_namespace="torchtrt_vision",
    launcher="ttp::vision::roiAlign",
    ranges={
        "spatial_scale": Range(min=0.0, min_inclusive=False),
        "pooled_height": Range(min=1),
        "pooled_width": Range(min=1),
    },
    dtypes={"input": FLOATS, "rois": FLOATS},
    same_dtype={"rois": "input"},
    reference=reference_roi_align,
    tolerances={torch.float32: Tolerance(1e-5, 1e-5), torch.float16: Tolerance(1e-2, 1e-2)},
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

from .vision_export import exportable  # noqa: E402  (needs the ops above when torchvision is stood in for)

__all__ = [
    "LIBRARY",
    "NMS",
    "ROI_ALIGN",
    "TORCHVISION",
    "TORCHVISION_IMPORTABLE",
    "exportable",
    "reference_deform_conv2d",
    "reference_nms",
    "reference_roi_align",
]
