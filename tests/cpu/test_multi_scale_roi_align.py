"""torchtrt_vision::multi_scale_roi_align_<L> (torchtrt_plugins.vision): the declarations, the level assignment and
the reference against a per-RoI loop and against a model computing what torchvision's MultiScaleRoIAlign computes,
errors that name the argument, check_op's cpu-tier checks, and the lowering of that model's exported graph."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import math  # noqa: E402

import multi_scale_cases  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import torchtrt_plugins  # noqa: E402
from torchtrt_plugins import converters, vision  # noqa: E402
from torchtrt_plugins.spec import SpecError  # noqa: E402
from torchtrt_plugins.testing import TensorArg, check_op, run_call  # noqa: E402

SCALES = [2.0 ** -(2 + level) for level in range(5)]


def op(levels: int):
    return getattr(torch.ops.torchtrt_vision, f"multi_scale_roi_align_{levels}")


def op_args(levels=4, images=2, pooled=(7, 7), sampling_ratio=2, **options):
    """The op's arguments for multi_scale_cases.inputs(...): the features, the RoIs, the scales, the pooled size and
    the sampling ratio."""
    tensors = multi_scale_cases.inputs(levels=levels, images=images, **options)
    rois = multi_scale_cases.convert_to_roi_format(list(tensors[levels:]))
    return (*tensors[:levels], rois, *SCALES[:levels], *pooled, sampling_ratio)


def test_declarations_come_from_the_schemas():
    assert vision.MULTI_SCALE_LEVELS == (2, 3, 4, 5)
    for levels, declaration in vision.MULTI_SCALE_ROI_ALIGN.items():
        spec = declaration.spec
        schema = torch._C.parse_schema("torchtrt_vision::" + vision.multi_scale_roi_align_schema(levels))
        assert op(levels).default._schema == schema
        assert [t.name for t in spec.inputs] == [*(f"level_{i}" for i in range(levels)), "rois"]
        assert [(f.name, f.type) for f in spec.fields] == [
            *((f"scale_{i}", "FLOAT64") for i in range(levels)),
            ("pooled_height", "INT64"),
            ("pooled_width", "INT64"),
            ("sampling_ratio", "INT64"),
            ("canonical_scale", "FLOAT64"),
            ("canonical_level", "INT64"),
            ("aligned", "INT32"),
        ]
        assert (spec.plugin_namespace, spec.plugin_name) == ("torchtrt_vision", f"MultiScaleRoIAlign{levels}")
        assert declaration.launchers == {0: "ttp::vision::multiScaleRoiAlign"}


def test_level_assignment_follows_the_fpn_rule():
    """Level k0 = 4 for a 224 x 224 box, one level finer per halving, clamped to the levels given (k_min = 2 and
    k_max = 5 from the scales 1/4 .. 1/32); a box of negative area goes nowhere."""
    boxes = torch.tensor(
        [[0, 0, 224, 224], [10, 10, 122, 122], [0, 0, 3, 3], [0, 0, 2000, 900], [0, 0, 447, 449], [5, 5, 1, 9.0]]
    )
    # sqrt(447 * 449) = 447.9989: just under twice 224, so still level 4.
    assert vision.assign_levels(boxes, SCALES[:4]).tolist() == [2, 1, 0, 3, 2, -1]
    assert vision.assign_levels(boxes, SCALES[:4], canonical_scale=112, canonical_level=3).tolist() == [
        2,
        1,
        0,
        3,
        2,
        -1,
    ]
    assert vision.assign_levels(boxes, SCALES[:4], canonical_level=5).tolist() == [3, 2, 0, 3, 3, -1]


def brute_force(features, rois, scales, pooled, sampling_ratio, canonical_scale=224.0, canonical_level=4):
    """One RoI at a time: its level by the FPN formula in Python floats, then that level's roi_align."""
    lowest, highest = int(-math.log2(scales[0])), int(-math.log2(scales[-1]))
    out = torch.zeros(rois.shape[0], features[0].shape[1], *pooled)
    for k, roi in enumerate(rois.tolist()):
        area = (roi[3] - roi[1]) * (roi[4] - roi[2])
        target = math.floor(canonical_level + math.log2(math.sqrt(area) / canonical_scale) + 1e-6)
        level = min(max(target, lowest), highest) - lowest
        if level < len(features):
            single = rois[k : k + 1]
            out[k] = vision.reference_roi_align(features[level], single, scales[level], *pooled, sampling_ratio, False)
    return out


@pytest.mark.parametrize("levels", [2, 3, 4, 5])
def test_reference_matches_a_per_roi_loop(levels):
    args = op_args(levels=levels, images=2, size=320, boxes=10, seed=levels)
    features, rois = list(args[:levels]), args[levels]
    expected = brute_force(features, rois, SCALES[:levels], (7, 7), 2)
    torch.testing.assert_close(vision.reference_multi_scale_roi_align(*args), expected)


def test_reference_takes_every_scalar_as_a_keyword():
    """As the benchmark calls it (tensors positional, scalars by name): it raised StopIteration before."""
    args = op_args(levels=3, images=1, size=320, boxes=6, seed=1)
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    names = [f"scale_{level}" for level in range(3)] + ["pooled_height", "pooled_width", "sampling_ratio"]
    kwargs = dict(zip(names, args[len(tensors) :], strict=False))
    torch.testing.assert_close(
        vision.reference_multi_scale_roi_align(*tensors, **kwargs), vision.reference_multi_scale_roi_align(*args)
    )


@pytest.mark.parametrize(("levels", "images"), [(2, 1), (4, 2), (5, 3)])
def test_op_is_the_poolers_computation(levels, images):
    tensors = multi_scale_cases.inputs(levels=levels, images=images)
    expected = multi_scale_cases.Pooler(levels, images)(*tensors)
    torch.testing.assert_close(op(levels)(*op_args(levels=levels, images=images)), expected)


def test_a_level_past_the_last_pools_nothing():
    """Scales 1/4 and 1/16 (k_min 2, k_max 4) given as two levels: torchvision sends a box of level 4 to index 2,
    which no roi_align takes; its row stays zero."""
    features = [torch.randn(1, 3, 64, 64), torch.randn(1, 3, 16, 16)]
    rois = torch.tensor([[0, 0, 0, 20, 20.0], [0, 0, 0, 240, 240.0]])
    out = op(2)(*features, rois, 0.25, 0.0625, 2, 2, 2)
    assert out[0].abs().sum() > 0 and torch.equal(out[1], torch.zeros(3, 2, 2))


def test_fake_kernel_and_symbolic_roi_count():
    args = op_args(levels=3)

    def fn(*tensors):
        return op(3)(*tensors, *args[4:])

    graph = make_fx(fn, tracing_mode="symbolic")(*args[:4])
    (node,) = [n for n in graph.graph.nodes if n.target == op(3).default]
    assert node.meta["val"].shape[1:] == (8, 7, 7)
    assert converters.validate_node(node)


def test_bad_input_names_the_argument():
    args = list(op_args(levels=2))
    with pytest.raises(SpecError, match=r"multi_scale_roi_align_2: argument 'rois' must have shape \(K, 5\)"):
        op(2)(args[0], args[1], args[2][:, :4], *args[3:])
    with pytest.raises(SpecError, match=r"multi_scale_roi_align_2: argument 'level_1' must have shape \(N, C, H, W\)"):
        op(2)(args[0], args[1][:, :3], *args[2:])
    for index, name in ((3, "scale_0"), (8, "canonical_scale")):
        bad = list(args) + ([224.0, 4, False] if index == 8 else [])
        bad[index] = 0.0
        with pytest.raises(SpecError, match=rf"multi_scale_roi_align_2: argument '{name}' must be a float > 0"):
            vision.MULTI_SCALE_ROI_ALIGN[2].check_args(*bad)


@pytest.mark.parametrize("levels", [2, 4])
def test_check_op(levels):
    small = op_args(levels=levels, images=2, size=128, boxes=5, channels=3, pooled=(3, 2))
    adaptive = (*op_args(levels=levels, images=1, size=96, boxes=4, channels=2)[:-1], 0, 200.0, 3, True)
    report = check_op(op(levels), [small, adaptive], reference=vision.reference_multi_scale_roi_align)
    assert {"eager", "opcheck", "compile", "plan", "harness"} <= set(report.passed), report


def test_plan_with_a_dynamic_roi_count_builds_in_the_harness():
    args = op_args(levels=2, images=1, size=64, boxes=3, channels=4, pooled=(3, 3))
    call = converters.plan(vision.MULTI_SCALE_ROI_ALIGN[2].spec, args)
    assert [call.field_value(n) for n in ("scale_0", "scale_1", "canonical_scale", "canonical_level")] == [
        0.25,
        0.125,
        224.0,
        4,
    ]
    result = run_call(
        call,
        TensorArg((1, 4, 16, 16)),
        TensorArg((1, 4, 8, 8)),
        TensorArg((3, 5)),
        library=vision.LIBRARY.plugin_path(),
        profile=[((1, 4, 16, 16),) * 3, ((1, 4, 8, 8),) * 3, ((1, 5), (3, 5), (64, 5))],
    )
    result.assert_conformant()
    assert result.output_shapes["max"] == [[64, 4, 3, 3]]


def _lowered(model, tensors, decompose):
    program = torch.export.export(model.eval(), tensors)
    if decompose:
        program = program.run_decompositions()
    return torchtrt_plugins.lower_with_report(program.module())


@pytest.mark.parametrize("decompose", [False, True], ids=["export", "decomposed"])
@pytest.mark.parametrize(("levels", "images"), [(2, 1), (3, 3), (4, 2), (5, 1)])
def test_lowering_makes_one_op_of_the_pooler(levels, images, decompose):
    tensors = multi_scale_cases.inputs(levels=levels, images=images)
    model = multi_scale_cases.Pooler(levels, images)
    gm, report = _lowered(model, tensors, decompose)
    assert report["multi_scale_roi_align"] == 1
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert targets.count(op(levels).default) == 1
    left = {str(t) for t in targets} & {"aten.nonzero.default", "aten.where.default", "torchvision.roi_align.default"}
    assert not left and not any("index_put" in str(t) or "assert_scalar" in str(t) for t in targets)
    torch.testing.assert_close(gm(*tensors), model(*tensors))


def test_lowering_reads_the_canonical_scale_and_level():
    tensors = multi_scale_cases.inputs(levels=3, images=2)
    model = multi_scale_cases.Pooler(3, 2, canonical_scale=112, canonical_level=3, output_size=(5, 4))
    gm, report = _lowered(model, tensors, decompose=True)
    (node,) = [n for n in gm.graph.nodes if n.target == op(3).default]
    assert report["multi_scale_roi_align"] == 1
    assert node.args[4:] == (0.25, 0.125, 0.0625, 5, 4, 2, 112.0, 3, False)
    torch.testing.assert_close(gm(*tensors), model(*tensors))


class _OtherEps(multi_scale_cases.Pooler):
    def __init__(self):
        super().__init__(2, 1)
        self.pool.mapper.eps = 1e-3


class _ScalesDisagree(multi_scale_cases.Pooler):
    """Levels assigned for the scales 1/4 and 1/8, pooled at half those scales: not what the op would compute."""

    def __init__(self):
        super().__init__(2, 1)
        self.pool.scales = [scale / 2 for scale in self.pool.scales]


@pytest.mark.parametrize(
    ("model", "tensors"),
    [
        (_OtherEps(), multi_scale_cases.inputs(levels=2, images=1)),
        (_ScalesDisagree(), multi_scale_cases.inputs(levels=2, images=1)),
        (multi_scale_cases.Pooler(2, 1), multi_scale_cases.inputs(levels=2, images=1, dtype=torch.float16)),
    ],
    ids=["other_eps", "scales_disagree", "fp16_levels"],
)
def test_lowering_leaves_other_computations_alone(model, tensors):
    """A LevelMapper with another eps, scales other than those the levels were assigned for, the level computed in
    fp16: no rewrite."""
    gm, report = _lowered(model, tensors, decompose=True)
    assert report["multi_scale_roi_align"] == 0
    assert not any(n.target == op(2).default for n in gm.graph.nodes)


def test_benchmark_is_listed_and_says_why_it_cannot_run(tmp_path):
    from torchtrt_plugins import cli
    from torchtrt_plugins.benchmarks import common

    benchmarks, failures = cli.load_benchmarks()
    assert not failures
    (benchmark,) = [b for b in benchmarks if b.name == "multi_scale_roi_align"]
    assert benchmark.provider_names == ["torchvision", "torchtrt", "plugin_enqueue"]
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the benchmark would run")
    report = common.run_suite(
        [benchmark], device="cpu", quick=True, csv_path=tmp_path / "results.csv", show_progress=False
    )
    assert {r.status for r in report.results} == {"skipped"}, report.text()
