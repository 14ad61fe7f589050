"""masked_rows CUDA kernels vs the reference: every dtype, odd shapes and masks (empty, all, sparse), unaligned
data, one device->host read per call; opcheck; torch.compile with a data-dependent output."""

import pytest
import torch
from eager_costs import host_syncs, peak_bytes
from fixtures import GraphRecorder

from torchtrt_plugins.ops import masked_rows

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64]
# Rows of 1 byte-ish to 1 MB; counts around tile and warp-load boundaries; zero-size rows and inputs.
SHAPES = [
    (1,),
    (7,),
    (511,),
    (513, 3),
    (8193,),
    (1 << 20,),
    (33, 5),
    (4, 3, 2),
    (4097, 257),
    (100003, 3),
    (64, 1 << 16),
    (0, 6),
    (5, 0),
    (0,),
]
MASKS = ["random", "sparse", "all", "none", "alternate", "ends"]


def _mask(rows, kind, device="cuda", seed=0):
    g = torch.Generator(device=device).manual_seed(seed)
    index = torch.arange(rows, device=device)
    if kind == "random":
        return torch.rand(rows, device=device, generator=g) < 0.5
    if kind == "sparse":
        return torch.rand(rows, device=device, generator=g) < 0.01
    if kind == "alternate":
        return index % 2 == 1
    if kind == "ends":
        return (index == 0) | (index == rows - 1)
    return torch.full((rows,), kind == "all", dtype=torch.bool, device=device)


def _input(shape, dtype, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn(shape, device="cuda", generator=g) * 1000).to(dtype)


@pytest.mark.parametrize("kind", MASKS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES)
def test_matches_reference(dtype, shape, kind):
    if dtype != torch.float32 and len(shape) > 1 and shape[0] * shape[1] > 1 << 22:
        pytest.skip("large rows once, in float32")
    x = _input(shape, dtype)
    mask = _mask(shape[0], kind)
    y = torch.ops.torchtrt.masked_rows(x, mask)
    assert y.dtype == dtype and y.is_contiguous()
    assert y.shape == (int(mask.sum()), *shape[1:])
    assert torch.equal(y, masked_rows.reference(x, mask))


def test_unaligned_and_non_contiguous_inputs():
    rows = 3000
    base_mask = _mask(rows + 1, "random")
    mask = base_mask[1:]  # one byte off the 16-byte alignment of the mask loads
    base = _input((rows * 6 + 1,), torch.float16)
    x = base[1:].view(rows, 6)  # rows of 12 bytes, data 2 bytes off alignment
    assert torch.equal(torch.ops.torchtrt.masked_rows(x, mask), masked_rows.reference(x, mask))
    xt = _input((6, rows), torch.float32).t()  # non-contiguous
    assert torch.equal(torch.ops.torchtrt.masked_rows(xt, mask), masked_rows.reference(xt, mask))
    strided_mask = _mask(2 * rows, "random")[::2]
    assert torch.equal(torch.ops.torchtrt.masked_rows(xt, strided_mask), masked_rows.reference(xt, strided_mask))


def test_exactly_one_device_to_host_read(capfd):
    """The op reads K back once (to size y) and synchronizes nowhere else."""
    x = _input((100000, 16), torch.bfloat16)
    mask = _mask(100000, "random")
    y, syncs = host_syncs(capfd, lambda: torch.ops.torchtrt.masked_rows(x, mask))
    assert syncs == 1
    assert torch.equal(y, masked_rows.reference(x, mask))


def test_eager_allocates_only_the_kept_rows():
    """Declared sizes_first: the eager op counts, reads K back and copies into y of K rows; it never allocates the
    N-row upper bound (which the plugin gets from TensorRT's output allocator instead)."""
    x = _input((1 << 18, 16), torch.float32)  # 16 MiB
    mask = torch.rand(x.shape[0], device="cuda") < 0.1
    y, peak = peak_bytes(lambda: torch.ops.torchtrt.masked_rows(x, mask))
    kept = y.numel() * y.element_size()
    assert torch.equal(y, masked_rows.reference(x, mask))
    # y plus the workspace (a bit and a few counters a row) and the size tensor; far below the 16 MiB upper bound.
    assert peak < kept + x.shape[0] + (1 << 20), (peak, kept)


def test_runs_on_current_stream():
    x = _input((200000, 8), torch.float32)
    mask = _mask(200000, "random")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        y = torch.ops.torchtrt.masked_rows(x, mask)
    stream.synchronize()
    assert torch.equal(y, masked_rows.reference(x, mask))


@pytest.mark.parametrize("kind", ["random", "none", "all"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_opcheck(dtype, kind):
    x = _input((37, 3), dtype)
    torch.library.opcheck(torch.ops.torchtrt.masked_rows.default, (x, _mask(37, kind)))


def test_errors_name_op_and_argument():
    x = _input((4, 2), torch.float32)
    with pytest.raises(Exception, match=r"masked_rows: argument 'mask' must have dtype in \{bool\}, got int32"):
        torch.ops.torchtrt.masked_rows(x, torch.ones(4, dtype=torch.int32, device="cuda"))
    with pytest.raises(
        Exception, match=r"torchtrt.masked_rows: argument 'mask' must have shape \(4,\) to match the first dimension"
    ):
        torch.ops.torchtrt.masked_rows(x, _mask(3, "all"))
    with pytest.raises(Exception, match=r"torchtrt.masked_rows: argument 'x' must have dtype in"):
        torch.ops.torchtrt.masked_rows(x.double(), _mask(4, "all"))


@pytest.fixture
def capture_dynamic_output_shapes():
    with torch._dynamo.config.patch(capture_dynamic_output_shape_ops=True):
        yield


def test_compile_fullgraph_with_data_dependent_output(capture_dynamic_output_shapes):
    backend = GraphRecorder(inductor=True)

    def fn(x, mask):
        y = torch.ops.torchtrt.masked_rows(x * 2, mask)
        return torch.nn.functional.silu(y) + y.shape[0]

    compiled = torch.compile(fn, backend=backend, fullgraph=True)
    for rows, kind in ((1000, "random"), (4099, "sparse"), (37, "all"), (513, "none")):
        x, mask = _input((rows, 24), torch.bfloat16), _mask(rows, kind)
        torch._dynamo.mark_dynamic(x, 0)
        torch._dynamo.mark_dynamic(mask, 0)
        torch.testing.assert_close(compiled(x, mask), fn(x, mask), atol=2e-2, rtol=2e-2)
    assert any("torchtrt.masked_rows" in s for s in backend.targets)


def test_compile_mask_from_data(capture_dynamic_output_shapes):
    """The mask computed inside the graph; rows of several dims, all dynamic."""

    def fn(x):
        keep = x.float().flatten(1).sum(1) > 0
        return torch.ops.torchtrt.masked_rows(x, keep).float().sum(0)

    compiled = torch.compile(fn, fullgraph=True, dynamic=True)
    for shape in ((300, 4, 5), (1001, 3, 7), (64, 2, 2)):
        x = _input(shape, torch.float16)
        torch.testing.assert_close(compiled(x), fn(x), atol=1e-1, rtol=1e-3)
