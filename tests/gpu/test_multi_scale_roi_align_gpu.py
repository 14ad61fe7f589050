"""Our multi_scale_roi_align kernel on a GPU: eagerly through the launcher against the reference (every level count,
dtype, sampling ratio and alignment, odd sizes), against torchvision's own MultiScaleRoIAlign where it is installed,
the lowered poolers' model against the model, and through the plugin's enqueue in the harness."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import multi_scale_cases  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import torchtrt_plugins  # noqa: E402
from torchtrt_plugins import sdk, vision  # noqa: E402
from torchtrt_plugins.testing import check_op  # noqa: E402

SCALES = [2.0 ** -(2 + level) for level in range(5)]


def _args(levels, images=2, pooled=(7, 7), sampling_ratio=2, aligned=False, dtype=torch.float32, **options):
    tensors = multi_scale_cases.inputs(levels=levels, images=images, dtype=dtype, **options)
    rois = multi_scale_cases.convert_to_roi_format(list(tensors[levels:]))
    return (*tensors[:levels], rois, *SCALES[:levels], *pooled, sampling_ratio, 224.0, 4, aligned)


def _cuda(args):
    return tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)


@pytest.mark.parametrize("dtype", vision.FLOATS, ids=str)
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
@pytest.mark.parametrize("levels", vision.MULTI_SCALE_LEVELS)
def test_eager_matches_the_reference(levels, sampling_ratio, aligned, dtype):
    args = _args(levels, sampling_ratio=sampling_ratio, aligned=aligned, dtype=dtype, channels=5, boxes=37)
    got = sdk.launch(vision.MULTI_SCALE_ROI_ALIGN[levels], *_cuda(args))
    expected = vision.reference_multi_scale_roi_align(*(a.float() if isinstance(a, torch.Tensor) else a for a in args))
    tolerance = vision.MULTI_SCALE_ROI_ALIGN[levels].spec.tolerance(dtype)
    torch.testing.assert_close(got.float().cpu(), expected, atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.parametrize(("images", "size", "boxes", "pooled"), [(1, 200, 1, (1, 1)), (3, 333, 300, (3, 5))])
def test_odd_sizes(images, size, boxes, pooled):
    args = _args(4, images=images, size=size, boxes=boxes, pooled=pooled, channels=3)
    got = sdk.launch(vision.MULTI_SCALE_ROI_ALIGN[4], *_cuda(args))
    tolerance = vision.MULTI_SCALE_ROI_ALIGN[4].spec.tolerance(torch.float32)
    expected = vision.reference_multi_scale_roi_align(*args)
    torch.testing.assert_close(got.cpu(), expected, atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.skipif(not vision.TORCHVISION, reason="torchvision's CUDA ops are not installed")
def test_equals_torchvisions_cuda_pooler_at_a_detectors_size():
    """An 800 x 1216 image's four FPN levels, 1000 RoIs of every scale (the benchmark's case): where torchvision's own
    CUDA op differs from the CPU reference by ~1e-4 (fp32 coordinate rounding), ours equals the CUDA op exactly."""
    from torchtrt_plugins.benchmarks import bench_multi_scale_roi_align as bench

    case = bench.make_case((1, 256, 800, 1216, 1000), torch.float32, torch.device("cuda"))
    theirs = bench.torchvision_pooler(case)()
    assert torch.equal(sdk.launch(bench.declaration(), *case.inputs, **case.kwargs), theirs)


@pytest.mark.skipif(not vision.TORCHVISION, reason="torchvision's CUDA ops are not installed")
def test_matches_torchvisions_pooler():
    from collections import OrderedDict

    import torchvision

    tensors = _cuda(multi_scale_cases.inputs(levels=4, images=2, size=512, boxes=200, channels=16))
    pooler = torchvision.ops.MultiScaleRoIAlign(["0", "1", "2", "3"], 7, 2)
    theirs = pooler(OrderedDict(zip("0123", tensors[:4], strict=True)), list(tensors[4:]), [(512, 512)] * 2)
    rois = multi_scale_cases.convert_to_roi_format(list(tensors[4:]))
    ours = vision.MULTI_SCALE_ROI_ALIGN[4]
    got = sdk.launch(ours, *tensors[:4], rois, *SCALES[:4], 7, 7, 2)
    torch.testing.assert_close(got, theirs, atol=1e-5, rtol=1e-5)


def test_lowered_model_matches_the_model():
    tensors = _cuda(multi_scale_cases.inputs(levels=4, images=2, size=320, boxes=50))
    model = multi_scale_cases.Pooler(4, 2).eval()
    gm, report = torchtrt_plugins.lower_with_report(torch.export.export(model, tensors).module())
    assert report["multi_scale_roi_align"] == 1
    torch.testing.assert_close(gm(*tensors), model(*tensors), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("levels", [2, 4])
def test_harness_enqueue_matches_eager(levels):
    samples = [_args(levels, size=128, boxes=9, channels=4), _args(levels, images=1, size=96, sampling_ratio=0)]
    report = check_op(
        vision.MULTI_SCALE_ROI_ALIGN[levels].overload,
        samples,
        reference=vision.reference_multi_scale_roi_align,
        checks=("plan", "harness"),
    )
    assert "harness enqueue" not in report.skipped, report
    assert {"plan", "harness"} <= set(report.passed), report
