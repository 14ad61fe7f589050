"""pad_to inside TensorRT engines built by Torch-TensorRT (needs a GPU with TensorRT): constant sizes as plugin
fields, sizes taken from another tensor's dynamic shape as shape inputs; dynamic batch and spatial dims."""

import pytest
import torch
from fixtures import assert_no_fallback, compile_trt

from torchtrt_plugins.ops import pad_to

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


class PadConst(torch.nn.Module):
    """Fixed output size (fields); dynamic input H/W, crossing it from below and above (pad and crop)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x):
        return torch.ops.torchtrt.pad_to(self.conv(x), 48, 40, -1.0) * 2


class PadLike(torch.nn.Module):
    """Output size from another input's dynamic shape: the converter passes shape inputs."""

    def forward(self, x, ref):
        return torch.ops.torchtrt.pad_to(x + 1, *ref.shape[-2:], 0.5) + ref.mean(dim=(-2, -1), keepdim=True)


@pytest.mark.parametrize("dtype", DTYPES)
def test_constant_size_dynamic_batch_and_spatial(dtype):
    import torch_tensorrt

    model = PadConst().cuda().to(dtype).eval()
    spec = torch_tensorrt.Input(
        min_shape=(1, 4, 16, 16), opt_shape=(4, 4, 48, 40), max_shape=(8, 4, 64, 64), dtype=dtype
    )
    trt_module = compile_trt(model, [spec])
    assert_no_fallback(trt_module, "pad_to")
    tol = 1e-2 if dtype == torch.float32 else 5e-2
    for shape in ((1, 4, 16, 16), (3, 4, 48, 40), (8, 4, 64, 64), (5, 4, 20, 63)):
        x = torch.randn(shape, device="cuda", dtype=dtype)
        with torch.no_grad():
            expected = model(x)
        got = trt_module(x)
        assert got.shape == (shape[0], 4, 48, 40)
        torch.testing.assert_close(got, expected, atol=tol, rtol=tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_shape_inputs_from_dynamic_dims(dtype):
    import torch_tensorrt

    model = PadLike().cuda().eval()
    inputs = [
        torch_tensorrt.Input(min_shape=(1, 3, 8, 8), opt_shape=(2, 3, 24, 24), max_shape=(4, 3, 32, 32), dtype=dtype),
        torch_tensorrt.Input(min_shape=(1, 1, 4, 4), opt_shape=(1, 1, 30, 20), max_shape=(1, 1, 48, 48), dtype=dtype),
    ]
    trt_module = compile_trt(model, inputs)
    assert_no_fallback(trt_module, "pad_to")
    for x_shape, ref_shape in (
        ((1, 3, 8, 8), (1, 1, 48, 4)),
        ((4, 3, 32, 32), (1, 1, 4, 48)),
        ((2, 3, 17, 9), (1, 1, 17, 9)),
    ):
        x = torch.randn(x_shape, device="cuda", dtype=dtype)
        ref = torch.randn(ref_shape, device="cuda", dtype=dtype)
        got = trt_module(x, ref)
        assert got.shape == (x_shape[0], 3, *ref_shape[-2:])
        torch.testing.assert_close(got, model(x, ref), atol=1e-2, rtol=1e-2)


def test_plain_pad_is_exact_in_engine():
    import torch_tensorrt

    class Pad(torch.nn.Module):
        def forward(self, x):
            return torch.ops.torchtrt.pad_to(x, 33, 17, 3.0)

    spec = torch_tensorrt.Input(min_shape=(1, 1, 1, 1), opt_shape=(2, 3, 20, 20), max_shape=(4, 8, 40, 40))
    trt_module = compile_trt(Pad().eval(), [spec])
    for shape in ((1, 1, 1, 1), (4, 8, 40, 40), (2, 5, 33, 3)):
        x = torch.randn(shape, device="cuda")
        assert torch.equal(trt_module(x), pad_to.reference(x, 33, 17, 3.0))
