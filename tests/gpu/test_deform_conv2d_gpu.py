"""Our deform_conv2d kernel on a GPU: eagerly through the launcher against the reference (every dtype, every tactic,
every tile shape the launcher picks, odd sizes), against torchvision's own CUDA op where it is installed, and through
the plugin's enqueue in the harness."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import pytest  # noqa: E402
import torch  # noqa: E402
from deform_conv2d_cases import make_args  # noqa: E402

from torchtrt_plugins import sdk, vision  # noqa: E402
from torchtrt_plugins.testing import check_op  # noqa: E402


def _cuda(args):
    return tuple(a.cuda() if isinstance(a, torch.Tensor) else a for a in args)


def _reference(args):
    """The fp32 reference on the very same (rounded) inputs."""
    return vision.reference_deform_conv2d(*(a.float() if isinstance(a, torch.Tensor) else a for a in args))


# The launcher's tiles: 64 x 128 (>= 128 output channels per group), 32 x 64 (few blocks), 64 x 64 (the rest); and
# sizes that leave every tile partial (rows, output channels and K = channels * taps not multiples of the tile).
CONFIGS = {
    "v2": {},
    "v1": {"use_mask": False},
    "tile_64x128": {"out_channels": 130, "channels": 5, "size": (9, 13)},
    "tile_32x64": {"batch": 1, "channels": 17, "out_channels": 7, "size": (5, 11)},
    "tile_64x64": {"batch": 3, "channels": 16, "out_channels": 64, "size": (40, 33)},
    "strided_dilated": {"stride": (2, 3), "dilation": (2, 1), "pad": (2, 0), "kernel": (3, 2), "size": (17, 19)},
    "groups": {"groups": 4, "channels": 8, "out_channels": 12, "offset_groups": 2},
    "offset_groups": {"offset_groups": 3, "channels": 6, "size": (12, 10)},
    "far": {"spread": 8.0},
    "5x5": {"kernel": (5, 5), "pad": (2, 2), "channels": 3},
    # Where tactic 2 samples its channels-last copy: whole taps per K-chunk (channels per group a multiple of 32).
    "channels_last": {"channels": 64, "out_channels": 130, "size": (9, 13)},
    "channels_last_groups": {"batch": 3, "channels": 64, "groups": 2, "out_channels": 14, "size": (5, 11)},
    "channels_last_far": {"channels": 32, "out_channels": 64, "size": (40, 33), "spread": 8.0, "use_mask": False},
    # 300 output channels: two whole 128-column blocks and a part one.
    "channels_last_part_columns": {"batch": 2, "channels": 32, "out_channels": 300, "size": (7, 9)},
}
DTYPES = vision.DEFORM_CONV2D_FLOATS
TACTICS = (0, *(t.value for t in vision.DEFORM_CONV2D.spec.tactics))


@pytest.mark.parametrize("tactic", TACTICS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_eager_matches_the_reference(config, dtype, tactic):
    args = make_args(**config, dtype=dtype)
    got = sdk.launch(vision.DEFORM_CONV2D, *_cuda(args), tactic=tactic)
    tolerance = vision.DEFORM_CONV2D.spec.tolerance(dtype)
    assert got.dtype == dtype and got.is_contiguous()
    torch.testing.assert_close(got.float().cpu(), _reference(args), atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.parametrize("tactic", TACTICS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(1, 64, 64, 64), (8, 256, 32, 32)], ids=str)
def test_benchmark_shapes_match_the_reference(shape, dtype, tactic):
    batch, channels, height, width = shape
    args = make_args(batch=batch, channels=channels, out_channels=channels, size=(height, width), dtype=dtype)
    weight = (args[1].float() / (channels * 9) ** 0.5).to(dtype)  # outputs of order one, as in a trained layer
    args = (args[0], weight, *args[2:])
    got = sdk.launch(vision.DEFORM_CONV2D, *_cuda(args), tactic=tactic)
    tolerance = vision.DEFORM_CONV2D.spec.tolerance(dtype)
    torch.testing.assert_close(got.float().cpu(), _reference(args), atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.skipif(not vision.TORCHVISION, reason="torchvision's CUDA ops are not installed")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("config", [CONFIGS["v2"], CONFIGS["v1"], CONFIGS["groups"], CONFIGS["strided_dilated"]])
def test_matches_torchvision(config, dtype):
    args = _cuda(make_args(**config, dtype=dtype))
    got = sdk.launch(vision.DEFORM_CONV2D, *args)
    theirs = torch.ops.torchvision.deform_conv2d(*args)
    exact = torch.ops.torchvision.deform_conv2d(*(a.float() if isinstance(a, torch.Tensor) else a for a in args))
    if dtype == torch.float32:
        torch.testing.assert_close(got, theirs, atol=1e-4, rtol=1e-4)
    else:  # torchvision computes half in half arithmetic: ours must be no farther from its fp32 result than its own
        assert (got.float() - exact).abs().max() <= (theirs.float() - exact).abs().max() * 1.01 + 1e-3


def test_repeated_calls_agree_bit_for_bit():
    args = _cuda(make_args(**CONFIGS["tile_64x64"], dtype=torch.float16))
    first = sdk.launch(vision.DEFORM_CONV2D, *args)
    assert torch.equal(first, sdk.launch(vision.DEFORM_CONV2D, *args))


@pytest.mark.parametrize("config", ["channels_last_groups", "channels_last_part_columns"])
@pytest.mark.parametrize("tactic", [t for t in TACTICS if t > 1])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_channels_last_samples_round_as_the_planes_do(dtype, tactic, config):
    """The sampling paths form each sample in the same order and round it to the input's type alike: their products
    then differ only by the GEMM's accumulation order, which they share, so the outputs agree bit for bit."""
    args = _cuda(make_args(**CONFIGS[config], dtype=dtype))
    planes = sdk.launch(vision.DEFORM_CONV2D, *args, tactic=1)
    assert torch.equal(planes, sdk.launch(vision.DEFORM_CONV2D, *args, tactic=tactic))


def _samples(dtype):
    return [make_args(dtype=dtype), make_args(**CONFIGS["groups"], dtype=dtype, use_mask=False)]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_harness_enqueue_matches_eager(dtype):
    if dtype == torch.bfloat16 and vision.TORCHVISION:
        pytest.skip(
            "torchvision's own kernels, the eager op where they load, have no bfloat16 (NotImplementedError): "
            "test_harness_enqueue_in_bfloat16_matches_the_reference checks the plugin's bf16 enqueue instead"
        )
    samples = _samples(dtype)
    report = check_op(
        torch.ops.torchvision.deform_conv2d,
        samples,
        reference=vision.reference_deform_conv2d,
        checks=("plan", "harness"),
    )
    assert "harness enqueue" not in report.skipped, report
    assert {"plan", "harness"} <= set(report.passed), report


@pytest.mark.skipif(not vision.TORCHVISION, reason="without torchvision's kernels the eager op is ours: checked above")
def test_harness_enqueue_in_bfloat16_matches_the_reference():
    """Where torchvision's kernels are the eager op they refuse bf16, so the plugin's bf16 enqueue (every phase and
    tactic of the harness) is compared with the fp32 reference on the same rounded inputs."""
    from torchtrt_plugins import plan, registry
    from torchtrt_plugins.testing.harness import run_call

    entry = registry.entry_of(vision.DEFORM_CONV2D)
    library = entry.library() if entry.library is not None else None
    tolerance = vision.DEFORM_CONV2D.spec.tolerance(torch.bfloat16)
    for args in _samples(torch.bfloat16):
        call = plan.plan(vision.DEFORM_CONV2D.spec, args, {})
        result = run_call(call, *(t.cuda() for t in call.tensor_inputs), library=library)
        result.assert_conformant()
        assert not result.enqueue_skipped, result.enqueue_skipped
        assert result.runs
        for record in result.runs:
            torch.testing.assert_close(
                record.outputs[0].float().cpu(), _reference(args), atol=tolerance.atol, rtol=tolerance.rtol
            )
