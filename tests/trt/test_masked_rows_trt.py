"""masked_rows inside TensorRT engines built by Torch-TensorRT (needs a GPU with TensorRT): a data-dependent
output (size tensor, output allocator), the bool mask cast to INT32 for the plugin; dynamic rows and row dims."""

import pytest
import torch
from fixtures import assert_no_fallback, compile_trt

from torchtrt_plugins.ops import masked_rows

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


class KeepPositive(torch.nn.Module):
    """The mask is computed in the graph from the data; the rows kept feed further layers."""

    def __init__(self, width=16):
        super().__init__()
        self.proj = torch.nn.Linear(width, width)

    def forward(self, x):
        keep = x[:, :, 0].sum(dim=1) > 0
        return torch.ops.torchtrt.masked_rows(self.proj(x), keep) * 2


class Select(torch.nn.Module):
    def forward(self, x, mask):
        return torch.ops.torchtrt.masked_rows(x, mask) + 1


@pytest.mark.parametrize("dtype", DTYPES)
def test_mask_from_data_dynamic_rows_and_length(dtype):
    import torch_tensorrt

    model = KeepPositive().cuda().to(dtype).eval()
    spec = torch_tensorrt.Input(min_shape=(1, 2, 16), opt_shape=(64, 5, 16), max_shape=(512, 9, 16), dtype=dtype)
    trt_module = compile_trt(model, [spec])
    assert_no_fallback(trt_module, "masked_rows")
    tol = 1e-2 if dtype == torch.float32 else 5e-2
    for shape in ((1, 2, 16), (64, 5, 16), (512, 9, 16), (77, 3, 16)):
        x = torch.randn(shape, device="cuda", dtype=dtype)
        with torch.no_grad():
            expected = model(x)
        got = trt_module(x)
        assert got.shape == expected.shape
        torch.testing.assert_close(got, expected, atol=tol, rtol=tol)


@pytest.mark.parametrize("kind", ["random", "all", "none"])
def test_given_mask_exact(kind):
    import torch_tensorrt

    inputs = [
        torch_tensorrt.Input(min_shape=(1, 1, 1), opt_shape=(256, 4, 8), max_shape=(4096, 8, 16), dtype=torch.float32),
        torch_tensorrt.Input(min_shape=(1,), opt_shape=(256,), max_shape=(4096,), dtype=torch.bool),
    ]
    trt_module = compile_trt(Select().eval(), inputs)
    assert_no_fallback(trt_module, "masked_rows")
    for rows, row_shape in ((1, (1, 1)), (4096, (8, 16)), (1000, (3, 5))):
        x = torch.randn(rows, *row_shape, device="cuda")
        if kind == "random":
            mask = torch.rand(rows, device="cuda") < 0.5
        else:
            mask = torch.full((rows,), kind == "all", dtype=torch.bool, device="cuda")
        got = trt_module(x, mask)
        assert torch.equal(got, masked_rows.reference(x, mask) + 1)
