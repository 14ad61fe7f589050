"""torchvision::roi_align and torchvision::nms through the public declare path (torchtrt_plugins.vision): the
schemas and fake kernels as torchvision has them, the declarations they give, our references against closed-form
cases, and check_op's cpu-tier checks (plan, shape program, harness build phase, registry)."""

from __future__ import annotations

from pathlib import Path

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from torchtrt_plugins import _derive, converters, vision  # noqa: E402
from torchtrt_plugins.testing import ShapeArg, TensorArg, check_op, run_call  # noqa: E402


def test_schemas_are_torchvisions():
    assert str(torch.ops.torchvision.roi_align.default._schema) == "torchvision::" + vision.ROI_ALIGN_SCHEMA
    assert str(torch.ops.torchvision.nms.default._schema) == "torchvision::" + vision.NMS_SCHEMA


def test_declarations_come_from_the_schemas():
    fields = {f.name: f for f in vision.ROI_ALIGN.spec.fields}
    assert [(f.name, f.type) for f in vision.ROI_ALIGN.spec.fields] == [
        ("spatial_scale", "FLOAT64"),
        ("pooled_height", "INT64"),
        ("pooled_width", "INT64"),
        ("sampling_ratio", "INT64"),
        ("aligned", "INT32"),
    ]
    assert fields["pooled_height"].shape_input and fields["aligned"].boolean
    nms = vision.NMS.spec
    assert nms.requires_output_allocator and [t.name for t in nms.inputs] == ["dets", "scores"]
    assert vision.NMS.workspace == "ttp::vision::nmsWorkspaceSize"


def _boxes(n: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * 100
    size = torch.rand(n, 2, generator=generator) * 40 + 1
    return torch.cat([corner, corner + size], 1), torch.rand(n, generator=generator)


def test_nms_reference_on_a_known_case():
    dets = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [20, 20, 30, 30], [0, 0, 10, 10.0]])
    scores = torch.tensor([0.9, 0.8, 0.7, 0.95])
    # IoU(3, 0) = 1, IoU(3, 1) = 81 / 119 = 0.68: both go at 0.5 and stay at 0.7 / 1.0 respectively.
    assert vision.reference_nms(dets, scores, 0.5).tolist() == [3, 2]
    assert vision.reference_nms(dets, scores, 0.7).tolist() == [3, 1, 2]
    assert vision.reference_nms(dets, scores, 1.0).tolist() == [3, 0, 1, 2]


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling_ratio", [0, 2])
def test_roi_align_reference_on_a_linear_image(aligned, sampling_ratio):
    """On value = 100 y + x, bilinear sampling is exact and the bin average is the bin centre's value."""
    height, width = 40, 50
    ys, xs = torch.meshgrid(
        torch.arange(height, dtype=torch.float64), torch.arange(width, dtype=torch.float64), indexing="ij"
    )
    image = (100 * ys + xs).float().expand(2, 3, height, width).contiguous()
    rois = torch.tensor([[1, 4.0, 6.0, 30.0, 26.0], [0, 10.0, 2.0, 22.0, 36.0]])
    scale, ph, pw = 0.5, 3, 4
    out = vision.reference_roi_align(image, rois, scale, ph, pw, sampling_ratio, aligned)
    offset = 0.5 if aligned else 0.0
    for k, roi in enumerate(rois.tolist()):
        x1, y1 = roi[1] * scale - offset, roi[2] * scale - offset
        bin_w, bin_h = (roi[3] - roi[1]) * scale / pw, (roi[4] - roi[2]) * scale / ph
        centre_y = torch.tensor([y1 + (i + 0.5) * bin_h for i in range(ph)])
        centre_x = torch.tensor([x1 + (j + 0.5) * bin_w for j in range(pw)])
        expected = 100 * centre_y[:, None] + centre_x[None, :]
        torch.testing.assert_close(out[k], expected.expand(3, ph, pw).float(), atol=1e-3, rtol=1e-5)


def test_roi_align_outside_the_image_is_zero():
    image = torch.ones(1, 1, 8, 8)
    out = vision.reference_roi_align(image, torch.tensor([[0, 20.0, 20.0, 30.0, 30.0]]), 1.0, 2, 2, 2, False)
    assert torch.equal(out, torch.zeros(1, 1, 2, 2))


def test_check_op_roi_align():
    generator = torch.Generator().manual_seed(1)
    image = torch.randn(2, 3, 16, 20, generator=generator)
    rois = torch.tensor([[0, 1.0, 1.0, 12.0, 9.0], [1, 0.0, 3.0, 19.0, 15.5], [0, -3.0, -2.0, 5.0, 30.0]])
    samples = [(image, rois, 0.5, 3, 4, 2, True), (image, rois, 1.0, 2, 5, 0, False)]
    report = check_op(torch.ops.torchvision.roi_align, samples, reference=vision.reference_roi_align)
    assert {"eager", "opcheck", "compile", "plan", "harness"} <= set(report.passed), report


def test_check_op_nms():
    samples = [(*_boxes(50), 0.3), (*_boxes(200, seed=3), 0.7)]
    report = check_op(torch.ops.torchvision.nms, samples, reference=vision.reference_nms)
    assert {"eager", "opcheck", "compile", "plan", "harness"} <= set(report.passed), report


def _nms_fake_is_torchvisions() -> bool:
    # Asked of the registry, not of sys.modules: a torchvision put on the path after torchtrt_plugins.vision stood in
    # for it can fail its import half-way, after its fake kernels replaced ours (seen in CI).
    from torch._library.simple_registry import singleton

    return Path(singleton.find("torchvision::nms").fake_impl.kernel.source).parent.name == "torchvision"


def test_check_op_nms_keeps_a_single_box():
    # torchvision's own fake kernel makes the kept count with create_unbacked_symint(), whose lower bound is 2, so
    # torch.compile of torchvision's nms asserts `u0 >= 2` when one box is kept (seen with torchvision 0.26 on the
    # GPU machine): an upstream limit, not ours. Our stand-in fake (no torchvision) has no such bound.
    checks = ("eager", "opcheck", "plan", "harness") + (() if _nms_fake_is_torchvisions() else ("compile",))
    report = check_op(
        torch.ops.torchvision.nms, [(*_boxes(1, seed=2), 0.5)], reference=vision.reference_nms, checks=checks
    )
    assert set(checks) <= set(report.passed), report


def test_nms_output_is_a_size_tensor_bounded_by_the_box_count():
    dets, scores = _boxes(20)
    call = converters.plan(vision.NMS.spec, (dets, scores, 0.5))
    assert call.num_outputs == 2 and call.requires_output_allocator
    result = run_call(
        call,
        TensorArg((20, 4)),
        TensorArg((20,)),
        library=vision.LIBRARY.plugin_path(),
        profile=[((1, 4), (20, 4), (1000, 4)), ((1,), (20,), (1000,))],
    )
    result.assert_conformant()
    assert result.output_types == ["INT64", "INT64"]
    assert [s["output"] for s in result.size_tensors] == [1]
    assert result.output_shapes["max"][0] == [1000] and result.output_shapes["min"][0] == [0]
    # At the profile's max (1000 boxes, 16 blocks of 64): the upper triangle of the overlap bits by 64-box column
    # block (32 * 16 * 17 words) and, for the sort, the sorted order, the sorted scores and the indices (4 bytes each).
    assert result.workspace_size >= 32 * 16 * 17 * 8 + 1000 * 12


def test_symbolic_pooled_size_is_a_shape_input():
    image, rois = torch.randn(1, 4, 12, 12), torch.tensor([[0, 0.0, 0.0, 8.0, 8.0]])

    def fn(image, rois, like):
        return torch.ops.torchvision.roi_align(image, rois, 1.0, like.shape[0], 3, 2, False)

    graph = make_fx(fn, tracing_mode="symbolic")(image, rois, torch.zeros(5))
    (node,) = [n for n in graph.graph.nodes if n.target == torch.ops.torchvision.roi_align.default]
    assert converters.validate_node(node)
    call = converters.plan_node(node)
    assert len(call.shape_inputs) == 1 and call.field_value("pooled_height") == -(2**31)
    assert call.field_value("pooled_width") == 3
    result = run_call(
        call,
        TensorArg((1, 4, 12, 12)),
        TensorArg((1, 5)),
        library=vision.LIBRARY.plugin_path(),
        shape_inputs=[ShapeArg((5,), min=(1,), opt=(5,), max=(9,))],
    )
    result.assert_conformant()
    assert result.output_shapes["max"] == [[1, 4, 9, 3]] and result.output_shapes["concrete"] == [[1, 4, 5, 3]]
    program = vision.ROI_ALIGN.compiled_programs[0]  # rois of rank 2; pooled_height and pooled_width: ARG leaves
    assert _derive.evaluate(program, [(7, 4, 12, 12), (11, 5)], args=[0.5, 5, 3, 2, 1])[0] == [(11, 4, 5, 3)]


@pytest.mark.parametrize("op", ["nms", "roi_align"])
def test_benchmark_is_listed_and_says_why_it_cannot_run(op, tmp_path):
    """`torchtrt-plugins bench` lists the vision benchmarks; where torchvision's ops do not load (a CPU-only torch)
    or there is no GPU, every provider is reported as skipped with its reason, none as an error."""
    from torchtrt_plugins import cli
    from torchtrt_plugins.benchmarks import bench_roi_align, common

    benchmarks, failures = cli.load_benchmarks()
    assert not failures
    (benchmark,) = [b for b in benchmarks if b.name == op]
    tactics = {"nms": (), "roi_align": bench_roi_align.TACTICS}[op]
    forced = [f"[tactic {t}]" for t in tactics]
    assert benchmark.provider_names == [
        "torchvision",
        "torchtrt",
        *(f"torchtrt{f}" for f in forced),
        "plugin_enqueue",
        *(f"plugin_enqueue{f}" for f in forced),
    ]
    assert tactics == tuple(t.value for t in getattr(vision, op.upper()).spec.tactics)
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the benchmark would run")
    report = common.run_suite(
        [benchmark], device="cpu", quick=True, csv_path=tmp_path / "results.csv", show_progress=False
    )
    reasons = {r.provider: r.reason for r in report.results if r.status == "skipped"}
    assert {r.status for r in report.results} == {"skipped"}, report.text()
    assert set(reasons) == set(benchmark.provider_names)
    if not vision.TORCHVISION:
        assert "torchvision's ops are not loaded" in reasons["torchvision"]
    assert "CUDA GPU" in reasons["torchtrt"] and "CUDA GPU" in reasons["plugin_enqueue"]
    assert "torchvision" in report.text() and "Not run:" in report.text()


def test_benchmark_plugin_enqueue_gives_the_harness_the_converters_call(monkeypatch):
    """The declared plugin needs the shape program the converter derives, not only the op's fields: the benchmark's
    plugin_enqueue provider hands the harness the converter's call and the op's own library (on the GPU, bare fields
    made createPlugin return nullptr)."""
    from torchtrt_plugins import testing
    from torchtrt_plugins.benchmarks import bench_nms

    seen = {}

    def bench_enqueue(call, inputs, tactic=0, iters=100, library=None):
        seen.update(call=call, inputs=inputs, library=library)
        return [1.0, 2.0, 3.0]

    monkeypatch.setattr(testing, "bench_enqueue", bench_enqueue)
    case = bench_nms.make_case((40, 3), torch.float32, torch.device("cpu"))
    (provider,) = [p for p in bench_nms.PROVIDERS if p.name == "plugin_enqueue"]
    assert provider.measure(case).median_ms == 2.0
    assert seen["library"] == vision.LIBRARY.plugin_path() and seen["inputs"][0] is case.inputs[0]
    result = run_call(seen["call"], TensorArg((40, 4)), TensorArg((40,)), library=seen["library"])
    result.assert_conformant()


def batched_nms(boxes, scores, idxs, iou_threshold):
    """``torchvision.ops.batched_nms`` as its docs describe its coordinate trick (torchvision is not importable
    here): each category's boxes moved by ``idxs * (boxes.max() + 1)`` so that boxes of two categories never
    overlap, then one ``nms``."""
    offsets = idxs.to(boxes) * (boxes.max() + torch.tensor(1).to(boxes))
    return torch.ops.torchvision.nms(boxes + offsets[:, None], scores, iou_threshold)


class BatchedNms(torch.nn.Module):
    def forward(self, boxes, scores, idxs):
        return batched_nms(boxes, scores, idxs, 0.5)


def _batched_inputs(n: int, categories: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    corner = torch.rand(n, 2, generator=generator) * 40
    boxes = torch.cat([corner, corner + torch.rand(n, 2, generator=generator) * 20 + 1], dim=1)
    return boxes, torch.rand(n, generator=generator), torch.randint(0, categories, (n,), generator=generator)


def test_batched_nms_graph_reaches_our_nms_plugin():
    """An exported graph of batched_nms (dynamic box count) holds one torchvision::nms node after the offset
    arithmetic: the declared converter takes it as it is (no lowering), as a data-dependent NMS plugin."""
    boxes, scores, idxs = _batched_inputs(300, 5)
    n = torch.export.Dim("n", min=2, max=20000)
    ep = torch.export.export(
        BatchedNms(), (boxes, scores, idxs), dynamic_shapes={"boxes": {0: n}, "scores": {0: n}, "idxs": {0: n}}
    )
    (node,) = [x for x in ep.graph_module.graph.nodes if x.target == torch.ops.torchvision.nms.default]
    assert converters.validate_node(node)
    call = converters.plan_node(node)
    assert vision.NMS.spec.creator_key == ("NMS", "2", "torchtrt_vision")
    assert [(f.name, f.value) for f in call.fields[:1]] == [("iou_threshold", 0.5)] and call.num_outputs == 2
    # Per category, the greedy NMS of its own boxes: batched_nms's meaning, which the exported graph keeps.
    kept = ep.module()(boxes, scores, idxs)
    per_category = torch.cat(
        [
            (idxs == c).nonzero().flatten()[vision.reference_nms(boxes[idxs == c], scores[idxs == c], 0.5)]
            for c in range(5)
        ]
    )
    assert torch.equal(kept, per_category[torch.argsort(scores[per_category], descending=True, stable=True)])
    assert len(kept) < 300  # something was suppressed


def test_our_libraries_leave_the_vision_launchers_to_the_vision_library():
    """CMake's kernel glob excludes exactly vision.py's sources: a vision launcher compiled into our library includes
    our op_fields.h, which has no torchvision or torchtrt_vision names, and the library fails to build."""
    import re

    from torchtrt_plugins import _build

    cmake = (_build.source_dir() / "CMakeLists.txt").read_text()  # a checkout's, or the copy a wheel carries
    excluded = re.search(r'EXCLUDE REGEX "/\(([^)]*)\)', cmake).group(1).split("|")
    assert sorted(f"{name}.cu" for name in excluded) == sorted(vision._SOURCES)


def test_setup_copies_the_vision_libraries_by_the_names_vision_looks_for():
    import ast

    setup = Path(__file__).resolve().parents[2] / "setup.py"
    if not setup.is_file():
        pytest.skip("no setup.py: not a checkout (the wheel's run)")
    assignments = {
        target.id: node.value
        for node in ast.parse(setup.read_text()).body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name)
    }
    assert ast.literal_eval(assignments["VISION_LIBRARY_NAMES"]) == tuple(path.name for path in vision.PREBUILT)


def test_reference_roi_align_samples_where_torchvisions_fp32_arithmetic_does():
    # torchvision computes every sample coordinate in fp32 (roi_align_kernel.cpp, roi_align_kernel.cu); coordinates in
    # doubles moved samples of this 64-pixel map enough to fail the GPU kernel against the reference at fp32 tolerance.
    f32 = np.float32
    g = torch.Generator().manual_seed(0)
    features = torch.randn(1, 2, 64, 64, generator=g)
    corners = torch.rand(20, 2, generator=g) * 120
    boxes = torch.cat([torch.zeros(20, 1), corners, corners + 10 + torch.rand(20, 2, generator=g) * 120], 1)
    got = vision.reference_roi_align(features, boxes, 0.25, 7, 7, 0, False)
    for k, roi in enumerate(boxes.numpy()):
        x1, y1, x2, y2 = (roi[1:] * f32(0.25)).tolist()
        start, size = np.array([x1, y1], f32), np.maximum(np.array([x2, y2], f32) - np.array([x1, y1], f32), f32(1))
        bins = size / f32(7)
        grid = np.ceil(size / f32(7)).astype(int)
        coords = [
            np.array(
                [
                    start[a] + f32(p) * bins[a] + f32(i + 0.5) * bins[a] / f32(grid[a])
                    for p in range(7)
                    for i in range(grid[a])
                ],
                f32,
            )
            for a in (0, 1)
        ]
        samples = vision._bilinear(features[0], torch.from_numpy(coords[1]), torch.from_numpy(coords[0]), 64, 64)
        expected = samples.reshape(2, 7, grid[1], 7, grid[0]).sum(dim=(2, 4)) / (grid[0] * grid[1])
        torch.testing.assert_close(got[k], expected, atol=0, rtol=0)
