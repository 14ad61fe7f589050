"""pad_to's eager CUDA kernel (the declared launcher) vs the reference: every dtype, odd and empty shapes, unaligned
data; opcheck; torch.compile."""

import pytest
import torch
from fixtures import GraphRecorder

from torchtrt_plugins.ops import pad_to

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int8]
# (B, C, H, W) -> (height, width): pad, crop, both, odd widths (scalar and narrower vector paths), empty sizes,
# rows much wider than a block, many short rows.
CASES = [
    ((1, 1, 1, 1), (1, 1)),
    ((2, 3, 5, 7), (8, 8)),
    ((2, 3, 5, 7), (3, 4)),
    ((2, 3, 13, 13), (16, 16)),
    ((2, 3, 16, 16), (13, 13)),
    ((1, 2, 9, 31), (9, 33)),
    ((3, 1, 17, 8), (5, 24)),
    ((1, 1, 3, 70000), (5, 70001)),
    ((1, 1, 4, 64), (3, 4096)),
    ((8, 64, 56, 56), (64, 64)),
    ((2, 3, 224, 224), (256, 256)),
    ((1, 1, 100000, 3), (100001, 4)),
    ((0, 3, 4, 4), (6, 6)),
    ((2, 3, 0, 0), (2, 5)),
    ((2, 3, 4, 0), (4, 4)),
    ((2, 3, 4, 4), (0, 3)),
    ((2, 3, 4, 4), (3, 0)),
]


def _input(shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(shape, device="cuda", generator=g) * 50
    return x.to(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape, size", CASES, ids=lambda c: "x".join(map(str, c)))
def test_matches_reference(shape, size, dtype):
    x = _input(shape, dtype)
    y = torch.ops.torchtrt.pad_to(x, *size, -7.0)
    assert y.shape == (*shape[:2], *size) and y.dtype == dtype and y.is_contiguous()
    assert torch.equal(y, pad_to.reference(x, *size, -7.0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_unaligned_and_non_contiguous_inputs(dtype):
    base = _input((2 * 3 * 16 * 16 + 1,), dtype)
    x = base[1:].view(2, 3, 16, 16)  # contiguous, data one element off the 16-byte alignment
    torch.testing.assert_close(torch.ops.torchtrt.pad_to(x, 20, 24), pad_to.reference(x, 20, 24), atol=0, rtol=0)
    xt = _input((2, 16, 3, 16), dtype).permute(0, 2, 1, 3)  # non-contiguous
    torch.testing.assert_close(torch.ops.torchtrt.pad_to(xt, 9, 32), pad_to.reference(xt, 9, 32), atol=0, rtol=0)
    xc = _input((2, 8, 6, 10), dtype).to(memory_format=torch.channels_last)
    torch.testing.assert_close(torch.ops.torchtrt.pad_to(xc, 7, 12), pad_to.reference(xc, 7, 12), atol=0, rtol=0)


@pytest.mark.parametrize(
    "dtype, value, stored",
    [
        (torch.float32, 1e-30, 1e-30),
        (torch.float16, 65504.0, 65504.0),
        (torch.bfloat16, -0.5, -0.5),
        (torch.int8, -128.0, -128),
        (torch.int8, 127.0, 127),
    ],
)
def test_pad_value_is_stored_exactly(dtype, value, stored):
    y = torch.ops.torchtrt.pad_to(torch.zeros(1, 1, 1, 1, device="cuda", dtype=dtype), 2, 9, value)
    assert y[0, 0, 1, 8].item() == pytest.approx(stored) and y[0, 0, 0, 0].item() == 0


def test_runs_on_current_stream():
    x = _input((4, 8, 100, 100), torch.bfloat16)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        y = torch.ops.torchtrt.pad_to(x, 128, 96, 1.0)
    stream.synchronize()
    assert torch.equal(y, pad_to.reference(x, 128, 96, 1.0))


@pytest.mark.parametrize("dtype", DTYPES)
def test_opcheck(dtype):
    x = _input((2, 3, 5, 7), dtype)
    torch.library.opcheck(torch.ops.torchtrt.pad_to.default, (x, 6, 9, 2.0))
    torch.library.opcheck(torch.ops.torchtrt.pad_to.default, (x, 3, 2))


@pytest.mark.parametrize(
    "args, message",
    [
        ((-1, 4), r"torchtrt.pad_to: argument 'height' must be an integer >= 0, got -1"),
        ((4, -2), r"torchtrt.pad_to: argument 'width' must be an integer >= 0, got -2"),
    ],
)
def test_errors_name_op_and_argument(args, message):
    with pytest.raises(Exception, match=message):
        torch.ops.torchtrt.pad_to(_input((1, 1, 2, 2), torch.float32), *args)


def test_error_for_wrong_rank_and_int8_value():
    with pytest.raises(Exception, match=r"torchtrt.pad_to: argument 'x' must have shape \(B, C, H, W\)"):
        torch.ops.torchtrt.pad_to(_input((3, 4, 5), torch.float32), 6, 6)
    for value in (0.5, 128.0, -129.0):
        with pytest.raises(Exception, match=r"argument 'value' must be an integer in \[-128, 127\] when 'x' is int8"):
            torch.ops.torchtrt.pad_to(_input((1, 1, 2, 2), torch.int8), 3, 3, value)


def test_eager_kernel_is_the_declared_launcher():
    """The CUDA kernel runs through the SDK's launcher path (one plan per call signature), not a torch extension."""
    from torchtrt_plugins import sdk
    from torchtrt_plugins.sdk import eager_kernel

    x = _input((2, 3, 5, 7), torch.float16)
    torch.ops.torchtrt.pad_to(x, 6, 9, 2.0)
    if not eager_kernel.disabled():  # the C++ eager kernel: the dispatcher's CUDA entry is its boxed kernel
        cuda = [line for line in torch._C._dispatch_dump("torchtrt::pad_to").splitlines() if line.startswith("CUDA")]
        assert len(cuda) == 1 and "eager.cpp" in cuda[0], cuda
        return
    plans = [p.outputs for p in sdk.runtime._PLANS.__dict__.values() if p.launcher_name == "ttp::launchers::padTo"]
    assert [((2, 3, 6, 9), torch.float16)] in plans


def test_compile_fullgraph_with_sizes_from_another_tensor():
    """pad_to(x, *ref.shape[-2:]) with every size dynamic: one graph, the op fed by SymInts."""
    backend = GraphRecorder(inductor=True)

    def fn(x, ref):
        return torch.ops.torchtrt.pad_to(x * 2, *ref.shape[-2:], 3.0) + ref.mean()

    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    for shape, ref_shape in (((2, 3, 20, 24), (5, 7, 32, 30)), ((4, 6, 40, 12), (3, 9, 16, 44))):
        x = _input(shape, torch.float16)
        ref = _input(ref_shape, torch.float16, seed=1)
        for t in (x, ref):
            for dim in range(t.dim()):
                torch._dynamo.mark_dynamic(t, dim)
        torch.testing.assert_close(compiled(x, ref), fn(x, ref), atol=1e-2, rtol=1e-2)
    assert any("torchtrt.pad_to" in s for s in backend.targets)


def test_compile_fullgraph_constant_size_dynamic_batch():
    def fn(x):
        return torch.ops.torchtrt.pad_to(torch.relu(x), 64, 64) * 0.5

    compiled = torch.compile(fn, fullgraph=True)
    for batch, h, w in ((2, 50, 70), (5, 64, 33), (3, 80, 80)):
        x = _input((batch, 4, h, w), torch.bfloat16)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(x, 2)
        torch._dynamo.mark_dynamic(x, 3)
        torch.testing.assert_close(compiled(x), fn(x), atol=0, rtol=0)
