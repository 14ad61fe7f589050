"""Our roi_align and nms kernels on a GPU against torchvision's own CUDA kernels (against our references where
torchvision is not installed), eagerly through the launcher and through the plugin's enqueue."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import pytest  # noqa: E402
import torch  # noqa: E402
from eager_costs import host_syncs, peak_bytes  # noqa: E402

from torchtrt_plugins import sdk, vision  # noqa: E402
from torchtrt_plugins.sdk import eager_kernel  # noqa: E402
from torchtrt_plugins.testing import check_op  # noqa: E402


def _expected(op: str, *args):
    if vision.TORCHVISION:
        return getattr(torch.ops.torchvision, op)(*args)
    cpu = [a.cpu() if isinstance(a, torch.Tensor) else a for a in args]
    reference = vision.reference_nms if op == "nms" else vision.reference_roi_align
    return reference(*cpu).to(args[0].device)


def _boxes(n: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * 200
    size = torch.rand(n, 2, generator=generator) * 60 + 1
    return torch.cat([corner, corner + size], 1).cuda(), torch.rand(n, generator=generator).cuda()


def _clustered(n: int, objects: int, generator: torch.Generator) -> torch.Tensor:
    """n boxes jittered around a few objects, as a detector proposes them (most are suppressed)."""
    centre = torch.rand(objects, 2, generator=generator) * 300
    size = torch.rand(objects, 2, generator=generator) * 80 + 10
    pick = torch.randint(0, objects, (n,), generator=generator)
    jitter = torch.randn(n, 4, generator=generator) * 0.1 * size[pick].repeat(1, 2)
    return torch.cat([centre[pick] - size[pick] / 2, centre[pick] + size[pick] / 2], 1) + jitter


# An op with torchvision::nms's schema served by the C++ eager kernel with our nms table, whether or not
# torchvision's own CUDA kernel holds torchvision::nms.
_STAND_IN = torch.library.Library("ttp_nms_test", "DEF")
_STAND_IN.define(vision.NMS_SCHEMA)


@pytest.fixture(scope="module")
def cpp_nms():
    try:
        handle = eager_kernel.register(vision.NMS, name="ttp_nms_test::nms")
    except eager_kernel.EagerKernelUnavailable as err:
        pytest.fail(f"the C++ eager kernel must be available on the GPU machine: {err}")
    yield torch.ops.ttp_nms_test.nms
    eager_kernel.unregister(handle)


@pytest.fixture(params=["cpp", "python"])
def nms(request):
    """Our nms eagerly: through the C++ eager kernel, and through the Python path (sdk.launch)."""
    if request.param == "cpp":
        if eager_kernel.disabled():
            pytest.skip(f"{eager_kernel.ENV}=python")
        return request.getfixturevalue("cpp_nms")
    return lambda *args: sdk.launch(vision.NMS, *args)


@pytest.mark.parametrize("n", [0, 1, 64, 65, 1000, 5000])
@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.0])
def test_nms_eager_paths_give_the_same_indices(cpp_nms, n, threshold):
    dets, scores = _boxes(n, seed=n)
    got = cpp_nms(dets, scores, threshold)
    assert got.dtype == torch.int64 and got.untyped_storage().nbytes() == got.numel() * 8
    assert torch.equal(got, sdk.launch(vision.NMS, dets, scores, threshold))
    if n:
        assert torch.equal(got.cpu(), _expected("nms", dets, scores, threshold).cpu())


def test_nms_one_host_sync_and_no_upper_bound_output(nms, capfd):
    """Declared sizes_first: one read of K, then the K indices written into an output of K; never the N-index upper
    bound. The scratch (the overlap bits, the sort) is the launcher's workspace, which the plugin gets too."""
    n = 20000
    dets = _clustered(n, 3, torch.Generator().manual_seed(0)).cuda()
    scores = torch.rand(n, generator=torch.Generator().manual_seed(1)).cuda()
    kept, syncs = host_syncs(capfd, lambda: nms(dets, scores, 0.3))
    assert syncs == 1
    assert kept.numel() < 1000 and torch.equal(kept.cpu(), _expected("nms", dets, scores, 0.3).cpu())
    kept, peak = peak_bytes(lambda: nms(dets, scores, 0.3))
    scratch = sdk.runtime._Plan(vision.NMS, (dets, scores, 0.3), 0).scratch_bytes
    upper_bound = n * 8
    assert peak - scratch < kept.numel() * 8 + upper_bound // 2, (peak, scratch, kept.numel())


# From 4097 to 8192 boxes one block sorts them (nms.cu), else DeviceRadixSort does.
@pytest.mark.parametrize("n", [1, 63, 64, 65, 1000, 4096, 4097, 5000, 8192, 8193])
@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.9])
def test_nms_matches_torchvision(n, threshold):
    dets, scores = _boxes(n, seed=n)
    got = sdk.launch(vision.NMS, dets, scores, threshold)
    assert torch.equal(got.cpu(), _expected("nms", dets, scores, threshold).cpu())


@pytest.mark.parametrize("n", [100, 3000, 6000, 9000])
@pytest.mark.parametrize("threshold", [0.0, 0.5, 0.7, 1.0])
def test_nms_matches_torchvision_on_overlapping_boxes(n, threshold):
    """Boxes jittered around a few objects, as a detector proposes them (most are suppressed), with tied scores, a run
    of identical boxes and empty (zero-width) boxes."""
    generator = torch.Generator().manual_seed(n)
    dets = _clustered(n, 12, generator)
    dets[: n // 10] = dets[0]
    dets[-n // 10 :, 2] = dets[-n // 10 :, 0]
    scores = (torch.rand(n, generator=generator) * 20).round() / 20
    dets, scores = dets.cuda(), scores.cuda()
    got = sdk.launch(vision.NMS, dets, scores, threshold)
    assert torch.equal(got.cpu(), _expected("nms", dets, scores, threshold).cpu())


ROI_ALIGN_TACTICS = (0, *(t.value for t in vision.ROI_ALIGN.spec.tactics))


def _roi_align_args(dtype, aligned, sampling_ratio, channels=16):
    generator = torch.Generator().manual_seed(0)
    image = torch.randn(2, channels, 50, 60, generator=generator).to("cuda", dtype)
    corner = torch.rand(40, 2, generator=generator) * 100 - 10
    size = torch.rand(40, 2, generator=generator) * 80
    batch = torch.randint(0, 2, (40, 1), generator=generator).float()
    rois = torch.cat([batch, corner, corner + size], 1).to("cuda", dtype)
    return image, rois, 0.5, 7, 6, sampling_ratio, aligned


@pytest.mark.parametrize("tactic", ROI_ALIGN_TACTICS)
@pytest.mark.parametrize("dtype", vision.FLOATS)
@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_matches_torchvision(dtype, aligned, sampling_ratio, tactic):
    args = _roi_align_args(dtype, aligned, sampling_ratio)
    image = args[0]
    got = sdk.launch(vision.ROI_ALIGN, *args, tactic=tactic)
    tolerance = vision.ROI_ALIGN.spec.tolerance(dtype)
    # torchvision computes half inputs in half arithmetic; ours accumulates in fp32. So the expected values are
    # torchvision's kernel run in fp32 on the very same (rounded) inputs, and ours must be no farther from them than
    # torchvision's own half kernel is (on the H100, our fp16 results and torchvision's differed by up to 0.078).
    exact = _expected("roi_align", image.float(), args[1].float(), *args[2:])
    torch.testing.assert_close(got, exact.to(dtype), atol=tolerance.atol, rtol=tolerance.rtol)
    if dtype != torch.float32:
        theirs = _expected("roi_align", *args)
        assert (got.float() - exact).abs().max() <= (theirs.float() - exact).abs().max()


# 16 channels fill whole 16-byte vectors in both types (tactic 2's path), 70 in neither, 20 in fp32 only; 264 ends in
# a part slice in both (slices of 64 fp32 or 128 fp16 channels).
@pytest.mark.parametrize("channels", [16, 70, 20, 264])
@pytest.mark.parametrize("dtype", vision.FLOATS)
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_channels_last_equals_one_thread_an_element(dtype, sampling_ratio, channels):
    """Both tactics form each sample as torchvision does, in the same order: their outputs agree bit for bit."""
    args = _roi_align_args(dtype, True, sampling_ratio, channels)
    per_element = sdk.launch(vision.ROI_ALIGN, *args, tactic=1)
    assert torch.equal(per_element, sdk.launch(vision.ROI_ALIGN, *args, tactic=2))


def test_check_op_on_gpu():
    dets, scores = _boxes(300, seed=7)
    report = check_op(torch.ops.torchvision.nms, [(dets.cpu(), scores.cpu(), 0.5)], checks=("plan", "harness"))
    assert "harness enqueue" not in report.skipped, report
    image = torch.randn(1, 8, 32, 32)
    rois = torch.tensor([[0, 2.0, 3.0, 20.0, 25.0], [0, 0.0, 0.0, 31.0, 31.0]])
    report = check_op(torch.ops.torchvision.roi_align, [(image, rois, 1.0, 4, 4, 2, True)], checks=("plan", "harness"))
    assert "harness enqueue" not in report.skipped, report
