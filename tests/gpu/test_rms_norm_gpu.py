"""rms_norm CUDA kernels vs the reference: every dtype, odd shapes, every tactic (tactic 3 at the shapes each of its
forms takes); opcheck; torch.compile."""

import pytest
import torch
from fixtures import GraphRecorder, rms_norm_eager, rms_norm_inputs
from norm_cases import COMMON_SHAPES, DTYPES, shape_id

from torchtrt_plugins.ops import rms_norm

SPEC = rms_norm.SPEC
SHAPES = [
    *COMMON_SHAPES,
    (65536, 4096),
    (2, 16384),
    (3, 16385),
    (5, 40),
    (1025, 512),  # the first row count past the few-rows kernel (1024x1536 is its last)
]
TACTICS = [0] + [t.value for t in SPEC.tactics]


@pytest.mark.parametrize("tactic", TACTICS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=shape_id)
def test_matches_reference(shape, dtype, tactic):
    x, w = rms_norm_inputs(shape, dtype)
    y = rms_norm_eager(x, w, 1e-6, tactic)
    tol = SPEC.tolerance(dtype)
    assert y.shape == x.shape and y.dtype == dtype
    torch.testing.assert_close(y, rms_norm.reference(x, w, 1e-6), atol=tol.atol, rtol=tol.rtol)


#: One shape for each kernel the tactics reach (warp groups, few-rows row kernel, many rows, wide rows, unaligned).
OFFSET_SHAPES = [(3, 7), (5, 123, 123), (8, 4096), (1025, 512), (4096, 4096), (2, 16384)]


@pytest.mark.parametrize("tactic", TACTICS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", OFFSET_SHAPES, ids=shape_id)
def test_weight_offset_matches_reference(shape, dtype, tactic):
    """Gemma's ``x * (1 + w)``: every kernel adds the offset in fp32 (issue 25)."""
    x, w = rms_norm_inputs(shape, dtype)
    w = w - 1  # Gemma's weights sit near 0
    y = rms_norm_eager(x, w, 1e-6, tactic, weight_offset=1.0)
    tol = SPEC.tolerance(dtype)
    torch.testing.assert_close(y, rms_norm.reference(x, w, 1e-6, 1.0), atol=tol.atol, rtol=tol.rtol)


#: Tactic 3's forms: rows of these lengths in launches whose x exceeds the L2 take the two-pass kernels
#: (norm_two_pass.cuh); rows of 16 vectors to 1024 elements take the short-row layout (fp32 64 and up, 16-bit 128 and
#: up; 200 and 1000 only partly fill their last vectors' lanes); 16-bit 64 is under 16 vectors and 2048 neither short
#: nor compiled, so tactic 3 runs tactic 1's or 2's kernel there.
TWO_PASS_HIDDEN = [4096, 8192, 12288, 16384]
SHORT_HIDDEN = [64, 128, 200, 256, 512, 1000, 1024]


def rows_past_l2(hidden: int, dtype: torch.dtype) -> int:
    """The fewest rows of `hidden` elements whose bytes exceed the device's L2, made odd (a partial last wave)."""
    return (torch.cuda.get_device_properties(0).L2_cache_size // (hidden * dtype.itemsize) + 1) | 1


def _assert_matches_reference_with_and_without_offset(x: torch.Tensor, w: torch.Tensor, tactic: int) -> None:
    tol = SPEC.tolerance(x.dtype)
    for weight, offset in ((w, 0.0), (w - 1, 1.0)):  # Gemma's weights sit near 0, its offset 1
        torch.testing.assert_close(
            rms_norm_eager(x, weight, 1e-6, tactic, weight_offset=offset),
            rms_norm.reference(x, weight, 1e-6, offset),
            atol=tol.atol,
            rtol=tol.rtol,
        )


@pytest.mark.parametrize("tactic", [0, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("hidden", TWO_PASS_HIDDEN)
def test_two_pass_rows_past_the_l2_match_reference(hidden, dtype, tactic):
    """Tactic 3's two-pass kernels (and tactic 0, which takes them from 32 KiB rows), with and without Gemma's
    offset."""
    x, w = rms_norm_inputs((rows_past_l2(hidden, dtype), hidden), dtype, seed=hidden)
    _assert_matches_reference_with_and_without_offset(x, w, tactic)


@pytest.mark.parametrize("tactic", [0, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("rows", [3, 9001])  # 9001: past one wave of warps on the H200 (132 SMs x 64)
@pytest.mark.parametrize("hidden", [*SHORT_HIDDEN, 2048])
def test_short_rows_match_reference(hidden, rows, dtype, tactic):
    """Tactic 3's short-row layout: groups with several rows in flight and whole warps per block, on odd row counts
    (the last block's rows partly past the end)."""
    x, w = rms_norm_inputs((rows, hidden), dtype, seed=rows + hidden)
    _assert_matches_reference_with_and_without_offset(x, w, tactic)


def test_tactic_3_past_the_l2_at_a_length_it_does_not_compile():
    """Rows past the L2 but of no compiled length (16-bit 2048): tactic 3 runs the block kernel."""
    x, w = rms_norm_inputs((rows_past_l2(2048, torch.bfloat16), 2048), torch.bfloat16)
    tol = SPEC.tolerance(torch.bfloat16)
    torch.testing.assert_close(
        rms_norm_eager(x, w, 1e-6, 3), rms_norm.reference(x, w, 1e-6), atol=tol.atol, rtol=tol.rtol
    )


@pytest.mark.parametrize("tactic", TACTICS)
def test_non_contiguous_and_unaligned_inputs(tactic):
    base, w = rms_norm_inputs((64, 130), torch.float16)
    x = base[:, 1:129]  # non-contiguous, misaligned rows
    y = rms_norm_eager(x, w[:128].contiguous(), 1e-5, tactic)
    torch.testing.assert_close(y, rms_norm.reference(x, w[:128], 1e-5), atol=2e-3, rtol=2e-3)
    xt = torch.randn(256, 32, device="cuda").t()  # transposed
    wt = torch.randn(256, device="cuda")
    torch.testing.assert_close(rms_norm_eager(xt, wt, 1e-5, tactic), rms_norm.reference(xt, wt, 1e-5))


def test_eps_matters():
    x = torch.full((2, 8), 1e-3, device="cuda")
    w = torch.ones(8, device="cuda")
    torch.testing.assert_close(torch.ops.torchtrt.rms_norm(x, w, 1.0), rms_norm.reference(x, w, 1.0))
    assert not torch.allclose(torch.ops.torchtrt.rms_norm(x, w, 1.0), torch.ops.torchtrt.rms_norm(x, w, 1e-9))


def test_runs_on_current_stream():
    x, w = rms_norm_inputs((512, 1024), torch.bfloat16)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        y = torch.ops.torchtrt.rms_norm(x, w)
    stream.synchronize()
    torch.testing.assert_close(y, rms_norm.reference(x, w), atol=1.6e-2, rtol=1.6e-2)


@pytest.mark.parametrize("rows", [1, 64])
def test_back_to_back_calls_see_the_previous_output(rows):
    """Each call reads what the one before wrote (few-rows launches may start while the previous kernel runs; they
    must wait for its memory), eagerly and replayed in a CUDA graph."""
    x, w = rms_norm_inputs((rows, 4096), torch.float32)
    x = x * 7 + 3  # far from normalized: every call changes its input
    calls = 30

    def chain(t: torch.Tensor, weight: torch.Tensor, op) -> torch.Tensor:
        for _ in range(calls):
            t = op(op(t, weight, 1e-6), weight, 1e-6) * 2 + 1  # one call straight after the other, then not
        return t

    expected = chain(x, w, rms_norm.reference)
    torch.testing.assert_close(chain(x, w, torch.ops.torchtrt.rms_norm), expected, atol=1e-4, rtol=1e-4)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        chain(x, w, torch.ops.torchtrt.rms_norm)
    torch.cuda.current_stream().wait_stream(side)
    with torch.cuda.graph(graph):
        out = chain(x, w, torch.ops.torchtrt.rms_norm)
    graph.replay()
    torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_opcheck(dtype):
    x, w = rms_norm_inputs((4, 33), dtype)
    torch.library.opcheck(torch.ops.torchtrt.rms_norm.default, (x, w, 1e-5))
    torch.library.opcheck(torch.ops.torchtrt.rms_norm_tactic.default, (x, w, 1e-5), {"tactic": 2})
    torch.library.opcheck(torch.ops.torchtrt.rms_norm.default, (x, w, 1e-5, 1.0))


def test_errors_name_op_and_argument():
    x, w = rms_norm_inputs((4, 32), torch.float32)
    with pytest.raises(Exception, match=r"rms_norm: argument 'weight' must have shape \(32,\)"):
        torch.ops.torchtrt.rms_norm(x, w[:16])
    with pytest.raises(Exception, match="argument 'eps' must be a float > 0"):
        torch.ops.torchtrt.rms_norm(x, w, 0.0)


def test_eager_checks_come_from_the_declaration():
    """The eager op's dtype, range and tactic checks are the declared ones (the declaration in ops/rms_norm.py)."""
    x, w = rms_norm_inputs((4, 32), torch.float32)
    with pytest.raises(Exception, match=r"argument 'x' must have dtype in \{float32, float16, bfloat16\}, got int32"):
        torch.ops.torchtrt.rms_norm(x.int(), w.int())
    with pytest.raises(Exception, match=r"argument 'eps' must be a float > 0, got inf"):
        torch.ops.torchtrt.rms_norm(x, w, float("inf"))
    declared = [0] + [t.value for t in SPEC.tactics]
    with pytest.raises(
        Exception, match=rf"argument 'tactic' must be one of \[{', '.join(map(str, declared))}\], got 7"
    ):
        torch.ops.torchtrt.rms_norm_tactic(x, w, 1e-6, tactic=7)


def test_compile_fullgraph_keeps_op_dynamic():
    backend = GraphRecorder(inductor=True)

    w = torch.randn(256, device="cuda", dtype=torch.bfloat16)

    def fn(x):
        return torch.ops.torchtrt.rms_norm(x * 2, w, 1e-6) + 1

    compiled = torch.compile(fn, backend=backend, fullgraph=True, dynamic=True)
    for rows in (3, 17, 64):
        x = torch.randn(rows, 256, device="cuda", dtype=torch.bfloat16)
        torch.testing.assert_close(compiled(x), fn(x), atol=1.6e-2, rtol=1.6e-2)
    assert any("torchtrt.rms_norm" in s for s in backend.targets)
