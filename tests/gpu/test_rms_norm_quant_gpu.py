"""rms_norm_fp8 / rms_norm_int8 CUDA kernels vs the reference: every input dtype, odd shapes, every tactic; the plugin's
enqueue for every tactic through the harness (check_op); opcheck; torch.compile; CUDA graph capture with the scale
changed between replays."""

import pytest
import torch
from fixtures import GraphRecorder, rms_norm_inputs
from norm_cases import COMMON_SHAPES, DTYPES, shape_id

from torchtrt_plugins.ops import rms_norm_quant
from torchtrt_plugins.testing import check_op

OPS = {
    "rms_norm_fp8": (torch.float8_e4m3fn, rms_norm_quant.reference_fp8),
    "rms_norm_int8": (torch.int8, rms_norm_quant.reference_int8),
}
SHAPES = [*COMMON_SHAPES, (2, 16384), (3, 16385), (5, 40), (1025, 512)]
TACTICS = [0] + [t.value for t in rms_norm_quant.RMS_NORM_FP8.spec.tactics]


def _run(name, x, w, scale, eps=1e-6, tactic=0, weight_offset=0.0):
    if tactic == 0:
        return getattr(torch.ops.torchtrt, name)(x, w, scale, eps, weight_offset)
    return getattr(torch.ops.torchtrt, f"{name}_tactic")(x, w, scale, eps, weight_offset, tactic=tactic)


def _assert_quantized_close(name, actual, expected):
    """Within one step of the output type (the fp32 norms differ in their last bits by reduction order), and equal
    almost everywhere."""
    dtype, _ = OPS[name]
    assert actual.dtype == dtype and actual.shape == expected.shape
    tol = rms_norm_quant.TOLERANCES[dtype]
    a, e = actual.float().cpu(), expected.float().cpu()
    torch.testing.assert_close(a, e, atol=tol.atol, rtol=tol.rtol, equal_nan=True)
    if a.numel():
        assert (a != e).float().mean().item() < 1e-3


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("tactic", TACTICS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_matches_reference(name, shape, dtype, tactic):
    x, w = rms_norm_inputs(shape, dtype)
    # A scale that puts the largest values past the type's range: saturation is exercised too.
    scale = torch.tensor(4.0 / (448.0 if name.endswith("fp8") else 127.0), device="cuda")
    y = _run(name, x, w, scale, 1e-6, tactic)
    _assert_quantized_close(name, y, OPS[name][1](x, w, scale, 1e-6))


def _rows_past_l2(hidden: int, dtype: torch.dtype) -> int:
    return (torch.cuda.get_device_properties(0).L2_cache_size // (hidden * dtype.itemsize) + 1) | 1


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", [128, 1024, 4096, 16384])
def test_tactic_3_forms_match_reference(name, hidden, dtype):
    """Tactic 3's kernels with a quantized output: the two-pass form (rows of a compiled length past the L2) and the
    short-row layout (128, 1024), on odd row counts."""
    rows = _rows_past_l2(hidden, dtype) if hidden >= 4096 else 9001
    x, w = rms_norm_inputs((rows, hidden), dtype, seed=hidden)
    scale = torch.tensor(4.0 / (448.0 if name.endswith("fp8") else 127.0), device="cuda")
    for tactic in (0, 3):
        _assert_quantized_close(name, _run(name, x, w, scale, 1e-6, tactic), OPS[name][1](x, w, scale, 1e-6))


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("tactic", TACTICS)
def test_weight_offset_and_rank1_scale(name, tactic):
    x, w = rms_norm_inputs((77, 128), torch.bfloat16)
    scale = torch.tensor([0.01], device="cuda")
    y = _run(name, x, w - 1, scale, 1e-5, tactic, weight_offset=1.0)
    _assert_quantized_close(name, y, OPS[name][1](x, w - 1, scale, 1e-5, 1.0))


@pytest.mark.parametrize("name", OPS)
def test_saturation_and_nan(name):
    x = torch.tensor([[1e4, -1e4, 1.0, float("nan")]], device="cuda")
    w = torch.ones(4, device="cuda")
    y = _run(name, x, w, torch.tensor(1e-3, device="cuda")).float().cpu()
    expected = OPS[name][1](x, w, torch.tensor(1e-3, device="cuda")).float().cpu()
    torch.testing.assert_close(y, expected, equal_nan=True)  # the NaN row: NaN for fp8, 0 for int8


@pytest.mark.parametrize("name", OPS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_check_op_every_tactic_through_the_harness(name, dtype):
    """Eager vs reference, opcheck, torch.compile, the converter's plan and the plugin's enqueue for every tactic
    (conformance harness) vs eager."""
    x, w = rms_norm_inputs((33, 200), dtype)
    samples = [(x.cpu(), w.cpu(), torch.tensor(0.02), 1e-5), (x[:1].cpu(), w.cpu(), torch.tensor([0.05]), 1e-6, 0.5)]
    report = check_op(getattr(torch.ops.torchtrt, name), samples, reference=OPS[name][1])
    assert "harness" in report.passed, report


@pytest.mark.parametrize("name", OPS)
def test_opcheck(name):
    x, w = rms_norm_inputs((4, 33), torch.bfloat16)
    scale = torch.tensor(0.05, device="cuda")
    op = getattr(torch.ops.torchtrt, name)
    torch.library.opcheck(op.default, (x, w, scale, 1e-5))
    torch.library.opcheck(getattr(torch.ops.torchtrt, f"{name}_tactic").default, (x, w, scale, 1e-5), {"tactic": 1})


@pytest.mark.parametrize("name", OPS)
def test_graph_capture_reads_the_scale_at_replay(name):
    """The scale is read by the kernel, not the host: a captured graph follows a new value written into it."""
    x, w = rms_norm_inputs((64, 4096), torch.float16)
    scale = torch.tensor(0.02, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        _run(name, x, w, scale)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = _run(name, x, w, scale)
    for value in (0.02, 0.005):
        scale.fill_(value)
        graph.replay()
        _assert_quantized_close(name, out, OPS[name][1](x, w, scale))


@pytest.mark.parametrize("name", OPS)
def test_bad_scale_on_the_device_is_not_read_back(name):
    """A zero scale on the GPU is not checked (that would synchronize): the result saturates, as TensorRT's
    quantize layer would give."""
    x, w = rms_norm_inputs((2, 64), torch.float32)
    y = _run(name, x, w, torch.zeros((), device="cuda")).float()
    allowed = {448.0, -448.0} if name.endswith("fp8") else {127.0, -128.0}  # x / 0 = +-inf, saturated
    assert set(y.unique().tolist()) <= allowed


@pytest.mark.parametrize("name", OPS)
def test_errors_name_op_and_argument(name):
    x, w = rms_norm_inputs((4, 32), torch.float32)
    with pytest.raises(Exception, match=rf"{name}: argument 'scale' must have dtype in \{{float32\}}, got float16"):
        _run(name, x, w, torch.tensor(1.0, device="cuda", dtype=torch.float16))
    with pytest.raises(Exception, match=rf"{name}: argument 'scale' must hold one value"):
        _run(name, x, w, torch.ones(3, device="cuda"))
    with pytest.raises(Exception, match=rf"{name}: argument 'weight' must have shape \(32,\)"):
        _run(name, x, w[:16], torch.tensor(1.0, device="cuda"))


@pytest.mark.parametrize("name", OPS)
def test_compile_fullgraph_keeps_op_dynamic(name):
    backend = GraphRecorder(inductor=True)
    w = torch.randn(256, device="cuda", dtype=torch.bfloat16)
    scale = torch.tensor(0.03, device="cuda")

    def fn(x):
        return getattr(torch.ops.torchtrt, name)(x * 2, w, scale, 1e-6).float() * scale

    compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=True)
    for rows in (3, 17, 64):
        x = torch.randn(rows, 256, device="cuda", dtype=torch.bfloat16)
        torch.testing.assert_close(compiled(x), fn(x), atol=0.06, rtol=0.13)
    assert any(f"torchtrt.{name}" in s for s in backend.targets)
