"""The C++ eager kernel of declared ops on the GPU (in the flavour that serves by default; scripts/gpu_check.sh runs
these again with the stable one): it serves every op from the first call on, matches the
references and the Python path, gives data-dependent outputs at their exact size, runs on the current stream and
device, and a model of declared ops that are not data-dependent captures in a CUDA graph and replays correctly."""

import pytest
import torch

from torchtrt_plugins import registry, sdk
from torchtrt_plugins.ops import add_rms_norm, masked_rows, pad_to, rms_norm
from torchtrt_plugins.sdk import eager_kernel


@pytest.fixture(autouse=True)
def cpp_kernel():
    if eager_kernel.disabled():
        pytest.skip(f"{eager_kernel.ENV}=python")
    try:
        eager_kernel.library()
    except eager_kernel.EagerKernelUnavailable as err:
        pytest.fail(f"the C++ eager kernel must be available on the GPU machine: {err}")


def _served_by_cpp(qualname: str) -> bool:
    lines = [line for line in torch._C._dispatch_dump(qualname).splitlines() if line.startswith("CUDA")]
    return len(lines) == 1 and "eager.cpp" in lines[0]


def test_every_op_is_served_by_the_cpp_kernel_from_its_first_call():
    x, w = torch.randn(4, 64, device="cuda"), torch.ones(64, device="cuda")
    torch.ops.torchtrt.rms_norm(x, w, 1e-6)
    torch.ops.torchtrt.pad_to(torch.randn(1, 2, 3, 4, device="cuda"), 5, 6)
    torch.ops.torchtrt.masked_rows(x, torch.arange(4, device="cuda") % 2 == 0)
    h = torch.randn(4, 64, device="cuda")
    torch.ops.torchtrt.add_rms_norm(x, h, w, 1e-6)
    for name in ("rms_norm", "pad_to", "masked_rows", "add_rms_norm"):
        assert _served_by_cpp(f"torchtrt::{name}"), torch._C._dispatch_dump(f"torchtrt::{name}")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_cpp_and_python_paths_agree(dtype):
    x = torch.randn(7, 33, 96, device="cuda").to(dtype)
    w = torch.randn(96, device="cuda").to(dtype)
    ours = torch.ops.torchtrt.rms_norm(x, w, 1e-5, 0.5)
    python = sdk.launch(registry.get("rms_norm").declaration, x, w, 1e-5, 0.5)
    torch.testing.assert_close(ours, python, rtol=0, atol=0)
    y = torch.randn(2, 3, 9, 31, device="cuda").to(dtype)
    torch.testing.assert_close(torch.ops.torchtrt.pad_to(y, 16, 8, 1.5), pad_to.reference(y, 16, 8, 1.5))


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_add_rms_norm_updates_residual_in_place_as_the_python_path(dtype, contiguous):
    x = torch.randn(5, 17, 96, device="cuda").to(dtype)
    w = torch.randn(96, device="cuda").to(dtype)
    start = torch.randn(5, 17, 96, device="cuda").to(dtype)
    python_residual = start.clone()
    if contiguous:
        ours_residual = start.clone()
    else:  # updated in a contiguous copy, then copied back
        ours_residual = torch.empty(96, 17, 5, device="cuda", dtype=dtype).permute(2, 1, 0).copy_(start)
    address = ours_residual.data_ptr()
    ours = torch.ops.torchtrt.add_rms_norm(x, ours_residual, w, 1e-5)
    assert _served_by_cpp("torchtrt::add_rms_norm")
    assert isinstance(ours, torch.Tensor) and ours.shape == x.shape  # the schema returns y only
    assert ours_residual.data_ptr() == address and ours_residual.is_contiguous() == contiguous
    python = sdk.launch(add_rms_norm.ADD_RMS_NORM, x, python_residual, w, 1e-5)
    torch.testing.assert_close(ours, python, rtol=0, atol=0)
    torch.testing.assert_close(ours_residual, python_residual, rtol=0, atol=0)
    expected_residual = start.clone()
    expected = add_rms_norm.reference(x, expected_residual, w, 1e-5)
    torch.testing.assert_close(ours_residual, expected_residual, rtol=0, atol=0)
    tolerance = add_rms_norm.ADD_RMS_NORM.spec.tolerances[dtype]
    torch.testing.assert_close(ours, expected, rtol=tolerance.rtol, atol=tolerance.atol)


@pytest.mark.parametrize("dtype", masked_rows.DTYPES)
@pytest.mark.parametrize("width", [1, 4, 16, 100, 1024, 4096])
def test_masked_rows_exact_size_output(dtype, width):
    x = (torch.randn(300, width, device="cuda") * 100).to(dtype)
    mask = torch.rand(300, device="cuda") < 0.3
    out = torch.ops.torchtrt.masked_rows(x, mask)
    torch.testing.assert_close(out, x[mask], rtol=0, atol=0)
    assert out.is_contiguous() and out.untyped_storage().nbytes() == out.numel() * out.element_size()


def test_non_contiguous_input_and_side_stream_and_other_device_index():
    x = torch.randn(64, 48, device="cuda").t()  # not contiguous
    w = torch.randn(64, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        out = torch.ops.torchtrt.rms_norm(x, w, 1e-6)
    stream.synchronize()
    torch.testing.assert_close(out, rms_norm.reference(x, w, 1e-6), rtol=1e-5, atol=1e-5)


def test_checks_raise_the_python_paths_messages_on_cuda():
    x = torch.randn(4, 32, device="cuda")
    with pytest.raises(RuntimeError, match=r"torchtrt.rms_norm: argument 'eps' must be a float > 0, got -1.0"):
        torch.ops.torchtrt.rms_norm(x, torch.ones(32, device="cuda"), -1.0)
    with pytest.raises(RuntimeError, match=r"must be a CUDA tensor on cuda:0 \(the device of 'x'\), got device cpu"):
        torch.ops.torchtrt.rms_norm(x, torch.ones(32), 1e-6)


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(64, 64, device="cuda")
        self.weight = torch.nn.Parameter(torch.randn(64, device="cuda"))

    def forward(self, x):
        y = torch.ops.torchtrt.rms_norm(self.linear(x), self.weight, 1e-6)
        return torch.ops.torchtrt.pad_to(y.view(1, 1, *y.shape), 40, 80).sum(1)


def test_cuda_graph_capture_and_replay():
    model = _Block()
    static_in = torch.randn(32, 64, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up (and put the C++ kernels in place) outside the capture
        for _ in range(3):
            model(static_in)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.no_grad(), torch.cuda.graph(graph):
        static_out = model(static_in)
    for seed in range(3):
        static_in.copy_(torch.randn(32, 64, device="cuda", generator=torch.Generator("cuda").manual_seed(seed)))
        graph.replay()
        with torch.no_grad():
            expected = model(static_in.clone())
        torch.testing.assert_close(static_out, expected, rtol=0, atol=0)


def test_the_native_flavour_serves_where_it_builds():
    if eager_kernel.chosen() != eager_kernel.FLAVOURS or eager_kernel.build_prerequisites("native"):
        pytest.skip(f"{eager_kernel.ENV} picks a flavour, or the native one cannot build here")
    torch.ops.torchtrt.rms_norm(torch.randn(4, 64, device="cuda"), torch.ones(64, device="cuda"), 1e-6)
    assert eager_kernel._handles["torchtrt::rms_norm"].flavour == "native"


def test_outputs_come_from_torchs_caching_allocator_and_go_back_to_it():
    x, w = torch.randn(1024, 1024, device="cuda"), torch.ones(1024, device="cuda")
    mask = torch.arange(1024, device="cuda") % 4 == 0
    torch.ops.torchtrt.rms_norm(x, w, 1e-6)
    torch.ops.torchtrt.masked_rows(x, mask)
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    y = torch.ops.torchtrt.rms_norm(x, w, 1e-6)
    kept = torch.ops.torchtrt.masked_rows(x, mask)
    assert torch.cuda.memory_allocated() - before == (1024 + 256) * 1024 * 4
    assert y.device == x.device and kept.device == x.device
    del y, kept
    assert torch.cuda.memory_allocated() == before
    # A memory pool in use takes them, as it takes torch's own outputs.
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool):
        z = torch.ops.torchtrt.rms_norm(x, w, 1e-6)
    segments = pool.snapshot()
    assert any(s["address"] <= z.data_ptr() < s["address"] + s["total_size"] for s in segments), segments
    del z
