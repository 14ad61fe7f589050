"""efficient_nms's eager CUDA kernel (the declared launcher) against the reference, exactly: fp32 and fp16, both box
codings, per class and class-agnostic, one box per class, the sigmoid, clustered and uniform boxes, up to 20000
boxes, 80 classes and 8 images, more candidates than the 4096 suppressed among; no host synchronization (CUDA graph
capture); opcheck, torch.compile and the plugin in the conformance harness against eager (check_op). The op
declares one launcher (tactic 0) only."""

import props
import pytest
import torch
from eager_costs import host_syncs

from torchtrt_plugins import converters
from torchtrt_plugins.ops import efficient_nms
from torchtrt_plugins.testing import check_op
from torchtrt_plugins.testing import harness as H

OP = torch.ops.torchtrt.efficient_nms
DTYPES = [torch.float32, torch.float16]
# (B, N, C, spread): spread 60 clusters thousands of boxes (most suppressed, the walk runs long); 2000 spreads them.
SHAPES = [
    (1, 1, 1, 60.0),
    (2, 65, 3, 60.0),
    (1, 1000, 80, 2000.0),
    (8, 1000, 1, 60.0),
    (3, 5000, 20, 2000.0),
    (1, 20000, 4, 60.0),
    (2, 20000, 1, 2000.0),
]


def _inputs(shape, dtype, *, box_coding=0, per_class=False, activation=False, seed=0):
    batch, boxes, classes, spread = shape
    g = torch.Generator().manual_seed(seed)
    coords, scores = props.draw_nms_inputs(
        g, batch, boxes, classes, box_coding=box_coding, per_class=per_class, spread=spread
    )
    if activation:
        scores = torch.logit(scores.clamp(1e-4, 1 - 1e-4)) * 2
    return coords.to(dtype), scores.to(dtype)


def _assert_matches_reference(args, out):
    expected = efficient_nms.reference(*(a.cpu() if isinstance(a, torch.Tensor) else a for a in args))
    num, boxes, scores, classes = (o.cpu() for o in out)
    assert torch.equal(num, expected[0])
    assert torch.equal(classes, expected[3])
    assert torch.equal(boxes, expected[1])
    if args[6]:  # the sigmoid: the device's expf against torch's
        tol = efficient_nms.SPEC.tolerance(scores.dtype)
        torch.testing.assert_close(scores, expected[2], atol=tol.atol, rtol=tol.rtol)
    else:
        assert torch.equal(scores, expected[2])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("agnostic", [False, True], ids=["per_class", "agnostic"])
def test_matches_reference(shape, dtype, agnostic):
    boxes, scores = _inputs(shape, dtype, seed=len(shape) + shape[1])
    args = (boxes.cuda(), scores.cuda(), 0.05, 0.5, 300, -1, False, agnostic, 0)
    _assert_matches_reference(args, OP(*args))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("box_coding", [0, 1])
@pytest.mark.parametrize("per_class", [False, True], ids=["shared_boxes", "box_per_class"])
@pytest.mark.parametrize("activation", [False, True], ids=["scores", "sigmoid"])
def test_codings_box_layouts_and_the_sigmoid(dtype, box_coding, per_class, activation):
    shape = (3, 700, 6, 300.0)
    boxes, scores = _inputs(shape, dtype, box_coding=box_coding, per_class=per_class, activation=activation, seed=5)
    args = (boxes.cuda(), scores.cuda(), 0.3, 0.45, 100, 2, activation, False, box_coding)
    _assert_matches_reference(args, OP(*args))


@pytest.mark.parametrize("k", [1, 63, 64, 65, 1000, 5000])
def test_k_cuts_and_pads(k):
    args = (*(t.cuda() for t in _inputs((2, 3000, 3, 2000.0), torch.float32, seed=k)), 0.0, 0.7, k)
    _assert_matches_reference((*args, -1, False, False, 0), OP(*args))


def test_thresholds_that_keep_nothing_and_everything():
    boxes, scores = (t.cuda() for t in _inputs((4, 2000, 5, 2000.0), torch.float16, seed=9))
    num, det_boxes, det_scores, det_classes = OP(boxes, scores, 1.5, 0.5, 50)
    assert int(num.sum()) == 0 and not det_boxes.any() and not det_scores.any() and not det_classes.any()
    args = (boxes, scores, 0.0, 1.0, 4096)  # IoU 1 suppresses duplicates only
    _assert_matches_reference((*args, -1, False, False, 0), OP(*args))


def test_outputs_are_written_whole_over_poisoned_memory():
    boxes, scores = (t.cuda() for t in _inputs((2, 500, 3, 60.0), torch.float32, seed=1))
    first = OP(boxes, scores, 0.2, 0.5, 400)
    nbytes = sum(o.numel() * o.element_size() for o in first)
    del first
    poison = torch.full((nbytes,), 0xFF, dtype=torch.uint8, device="cuda")
    del poison
    _assert_matches_reference((boxes, scores, 0.2, 0.5, 400, -1, False, False, 0), OP(boxes, scores, 0.2, 0.5, 400))


def test_no_host_sync_and_cuda_graph_replay(capfd):
    boxes, scores = (t.cuda() for t in _inputs((4, 5000, 10, 300.0), torch.float32, seed=2))
    _, syncs = host_syncs(capfd, lambda: OP(boxes, scores, 0.1, 0.5, 200))
    assert syncs == 0
    graph = torch.cuda.CUDAGraph()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream), torch.cuda.graph(graph):
        captured = OP(boxes, scores, 0.1, 0.5, 200)
    other, other_scores = (t.cuda() for t in _inputs((4, 5000, 10, 300.0), torch.float32, seed=3))
    boxes.copy_(other)
    scores.copy_(other_scores)
    graph.replay()
    torch.cuda.synchronize()
    _assert_matches_reference((boxes, scores, 0.1, 0.5, 200, -1, False, False, 0), captured)


def test_check_op_eager_opcheck_compile_plan_and_harness():
    samples = []
    for seed, (shape, dtype) in enumerate([((2, 300, 4, 100.0), torch.float32), ((3, 200, 7, 60.0), torch.float16)]):
        boxes, scores = _inputs(shape, dtype, box_coding=seed, seed=seed)
        samples.append((boxes, scores, 0.1, 0.5, 50, -1, bool(seed), bool(seed), seed))
    report = check_op(OP, samples, reference=efficient_nms.reference, checks=("eager", "opcheck", "compile", "plan"))
    assert {"eager", "opcheck", "compile", "plan"} <= set(report.passed), report


@pytest.mark.parametrize("dtype", DTYPES)
def test_harness_matches_eager(build, dtype):
    """The plugin's full lifecycle (every tactic: there is one), build and runtime phases, against eager."""
    boxes, scores = (t.cuda() for t in _inputs((3, 2000, 8, 300.0), dtype, box_coding=1, seed=4))
    args = (boxes, scores, 0.1, 0.45, 100, 0, True, False, 1)
    result = H.run_call(converters.plan(efficient_nms.SPEC, args, {}), boxes, scores, library=build.library)
    result.assert_conformant()
    assert result.enqueue_skipped is None
    eager = OP(*args)
    for phase in ("build", "runtime"):
        outs = result.outputs(0, phase)
        assert len(outs) == 4
        for got, want in zip(outs, eager, strict=True):
            assert torch.equal(got.to(want.device), want)
