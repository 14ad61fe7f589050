"""torchvision::deform_conv2d through the public declare path (torchtrt_plugins.vision): the schema and fake kernel as
torchvision has them, the declaration they give, our reference against a brute-force loop and against conv2d, errors
that name the argument, and check_op's cpu-tier checks (plan, shape program, harness build phase)."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import itertools  # noqa: E402
import math  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from deform_conv2d_cases import make_args  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from torchtrt_plugins import converters, vision  # noqa: E402
from torchtrt_plugins.spec import SpecError  # noqa: E402
from torchtrt_plugins.testing import TensorArg, check_op, run_call  # noqa: E402


def brute_force(x, weight, offset, mask, bias, sh, sw, ph, pw, dh, dw, groups, offset_groups, use_mask):
    """deform_conv2d one output element at a time, in float64 Python arithmetic."""
    batch, channels, height, width = x.shape
    out_channels, group_channels, kh, kw = weight.shape
    out_h, out_w = offset.shape[2:]
    x, weight, offset, mask, bias = (t.double().tolist() for t in (x, weight, offset, mask, bias))

    def sample(b, c, y, xx):
        if y <= -1 or y >= height or xx <= -1 or xx >= width:
            return 0.0
        y0, x0 = math.floor(y), math.floor(xx)
        total = 0.0
        for row, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
            for col, wx in ((x0, 1 - (xx - x0)), (x0 + 1, xx - x0)):
                if 0 <= row < height and 0 <= col < width:
                    total += wy * wx * x[b][c][row][col]
        return total

    out = torch.zeros(batch, out_channels, out_h, out_w, dtype=torch.float64)
    per_group, per_offset_group = out_channels // groups, channels // offset_groups
    for b, o, i, j in itertools.product(range(batch), range(out_channels), range(out_h), range(out_w)):
        total = bias[o]
        for cc, ki, kj in itertools.product(range(group_channels), range(kh), range(kw)):
            c = o // per_group * group_channels + cc
            g, tap = c // per_offset_group, ki * kw + kj
            dy = offset[b][2 * (g * kh * kw + tap)][i][j]
            dx = offset[b][2 * (g * kh * kw + tap) + 1][i][j]
            value = sample(b, c, i * sh - ph + ki * dh + dy, j * sw - pw + kj * dw + dx)
            if use_mask:
                value *= mask[b][g * kh * kw + tap][i][j]
            total += weight[o][cc][ki][kj] * value
        out[b, o, i, j] = total
    return out


def test_schema_is_torchvisions():
    assert str(torch.ops.torchvision.deform_conv2d.default._schema) == "torchvision::" + vision.DEFORM_CONV2D_SCHEMA


def test_declaration_comes_from_the_schema():
    spec = vision.DEFORM_CONV2D.spec
    assert [t.name for t in spec.inputs] == ["input", "weight", "offset", "mask", "bias"]
    assert [(f.name, f.type) for f in spec.fields] == [
        *((name, "INT64") for name in ("stride_h", "stride_w", "pad_h", "pad_w", "dilation_h", "dilation_w")),
        ("groups", "INT64"),
        ("offset_groups", "INT64"),
        ("use_mask", "INT32"),
    ]
    fields = {f.name: f for f in spec.fields}
    assert fields["use_mask"].boolean and fields["stride_h"].min == 1 and fields["pad_w"].min == 0
    assert (spec.plugin_namespace, spec.plugin_name, spec.plugin_version) == ("torchtrt_vision", "DeformConv2d", "1")
    assert vision.DEFORM_CONV2D.spec.input("mask").dtypes == vision.DEFORM_CONV2D_FLOATS
    assert [t.value for t in spec.tactics] == [1, 2]
    assert vision.DEFORM_CONV2D.workspace == "ttp::vision::deformConv2dWorkspaceSize"


CONFIGS = {
    "v2": {},
    "v1": {"use_mask": False},
    "strided": {"stride": (2, 1), "pad": (0, 2), "kernel": (3, 2)},
    "dilated": {"dilation": (2, 1), "size": (8, 7)},
    "groups": {"groups": 2, "out_channels": 4},
    "offset_groups": {"offset_groups": 2, "channels": 6, "groups": 3},
    "far": {"spread": 6.0, "use_mask": False},
    "1x1": {"kernel": (1, 1), "pad": (0, 0)},
}


@pytest.mark.parametrize("config", CONFIGS.values(), ids=CONFIGS.keys())
def test_reference_matches_a_brute_force_loop(config):
    args = make_args(**config)
    expected = brute_force(*args)
    torch.testing.assert_close(vision.reference_deform_conv2d(*args).double(), expected, atol=1e-4, rtol=1e-5)


def test_reference_samples_outside_the_image_as_zero():
    """Every sample displaced past the image's edge (by more than one pixel) reads zero: the output is the bias."""
    x, weight, offset, mask, bias, *scalars = make_args(use_mask=False)
    out = vision.reference_deform_conv2d(x, weight, torch.full_like(offset, 50.0), mask, bias, *scalars)
    torch.testing.assert_close(out, bias[None, :, None, None].expand_as(out))


@pytest.mark.parametrize("config", [CONFIGS["v2"], CONFIGS["strided"], CONFIGS["dilated"], CONFIGS["groups"]])
def test_without_displacement_it_is_conv2d(config):
    """Zero offsets and a mask of ones sample every tap on its grid point: a plain (grouped) convolution."""
    x, weight, offset, mask, bias, sh, sw, ph, pw, dh, dw, groups, offset_groups, use_mask = make_args(**config)
    out = vision.reference_deform_conv2d(
        x, weight, torch.zeros_like(offset), torch.ones_like(mask), bias, sh, sw, ph, pw, dh, dw, groups,
        offset_groups, use_mask,
    )  # fmt: skip
    expected = F.conv2d(x, weight, bias, stride=(sh, sw), padding=(ph, pw), dilation=(dh, dw), groups=groups)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)


def test_an_integer_displacement_shifts_the_image():
    """An offset of (+1, -2) at every tap reads the image one row down and two columns left of the grid point."""
    x, weight, offset, mask, bias, *scalars = make_args(use_mask=False, pad=(0, 0))
    shift = offset.new_tensor([1.0, -2.0]).repeat(9)[None, :, None, None].expand_as(offset)
    out = vision.reference_deform_conv2d(x, weight, shift.contiguous(), mask, bias, *scalars)
    shifted = F.pad(x, (2, 0, 0, 1))[:, :, 1:, : x.shape[3]]  # shifted[i, j] = x[i + 1, j - 2], zero outside
    torch.testing.assert_close(out, F.conv2d(shifted, weight, bias), atol=1e-5, rtol=1e-5)


def test_half_inputs_give_half_outputs():
    args = make_args(dtype=torch.bfloat16)
    out = torch.ops.torchvision.deform_conv2d(*args)
    assert out.dtype == torch.bfloat16
    expected = vision.reference_deform_conv2d(*(a.float() if isinstance(a, torch.Tensor) else a for a in args))
    torch.testing.assert_close(out.float(), expected, atol=0.1, rtol=0.02)


def test_fake_kernel_takes_the_output_size_from_the_offset():
    args = make_args(batch=3, stride=(2, 2))

    def fn(*tensors):
        return torch.ops.torchvision.deform_conv2d(*tensors, *args[5:])

    graph = make_fx(fn, tracing_mode="fake")(*args[:5])
    (node,) = [n for n in graph.graph.nodes if n.target == torch.ops.torchvision.deform_conv2d.default]
    assert tuple(node.meta["val"].shape) == (3, 6, 3, 4)
    assert converters.validate_node(node)


BAD = {
    "offset": (lambda a: a.update(offset=a["offset"][:, :-2]), "argument 'offset' must have shape"),
    "mask": (lambda a: a.update(mask=a["mask"][:, :1]), "argument 'mask' must have shape"),
    "weight": (lambda a: a.update(weight=a["weight"][:, :3]), "argument 'weight' must have shape"),
    "bias": (lambda a: a.update(bias=a["bias"][:2]), r"argument 'bias' must have shape \(6,\)"),
    "offset_groups": (lambda a: a.update(offset_groups=3), "argument 'offset_groups' must divide"),
    "input": (lambda a: a.update(input=a["input"][..., :1, :1]), "argument 'input' must be at least as large"),
}


@pytest.mark.parametrize("change", BAD.values(), ids=BAD.keys())
def test_bad_input_names_the_argument(change):
    names = ["input", "weight", "offset", "mask", "bias", "stride_h", "stride_w", "pad_h", "pad_w"]
    names += ["dilation_h", "dilation_w", "groups", "offset_groups", "use_mask"]
    arguments = dict(zip(names, make_args(pad=(0, 0)), strict=True))
    edit, message = change
    edit(arguments)
    with pytest.raises(SpecError, match=r"torchvision\.deform_conv2d: " + message):
        torch.ops.torchvision.deform_conv2d(*arguments.values())


@pytest.mark.parametrize(("index", "name", "value"), [(5, "stride_h", 0), (8, "pad_w", -1), (12, "offset_groups", 0)])
def test_out_of_range_scalar_is_named(index, name, value):
    args = list(make_args())
    args[index] = value
    with pytest.raises(SpecError, match=rf"torchvision\.deform_conv2d: argument '{name}'"):
        vision.DEFORM_CONV2D.check_args(*args)


def test_check_op():
    samples = [
        make_args(),
        make_args(use_mask=False),
        make_args(stride=(2, 1), dilation=(1, 2), pad=(2, 1), size=(9, 8), kernel=(3, 2)),
        make_args(groups=2, offset_groups=2, out_channels=4, batch=1),
    ]
    report = check_op(torch.ops.torchvision.deform_conv2d, samples, reference=vision.reference_deform_conv2d)
    assert {"eager", "opcheck", "compile", "plan", "harness"} <= set(report.passed), report


def test_plan_gives_the_scalars_as_fields_and_builds_in_the_harness():
    args = make_args(stride=(2, 1), groups=2, out_channels=4)
    call = converters.plan(vision.DEFORM_CONV2D.spec, args)
    assert [call.field_value(name) for name in ("stride_h", "stride_w", "groups", "use_mask")] == [2, 1, 2, 1]
    result = run_call(
        call, *(TensorArg(tuple(t.shape)) for t in args[:5]), library=vision.LIBRARY.plugin_path()
    )  # fmt: skip
    result.assert_conformant()
    assert result.output_shapes["concrete"] == [[2, 4, 3, 7]]


def test_benchmark_is_listed_and_says_why_it_cannot_run(tmp_path):
    from torchtrt_plugins import cli
    from torchtrt_plugins.benchmarks import bench_deform_conv2d, common

    benchmarks, failures = cli.load_benchmarks()
    assert not failures
    (benchmark,) = [b for b in benchmarks if b.name == "deform_conv2d"]
    # Every declared tactic its own provider, eager and in the plugin.
    assert bench_deform_conv2d.TACTICS == tuple(t.value for t in vision.DEFORM_CONV2D.spec.tactics)
    forced = [f"[tactic {t}]" for t in bench_deform_conv2d.TACTICS]
    assert benchmark.provider_names == [
        "torchvision",
        "conv2d",
        "torchtrt",
        *(f"torchtrt{t}" for t in forced),
        "plugin_enqueue",
        *(f"plugin_enqueue{t}" for t in forced),
    ]
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible: the benchmark would run")
    report = common.run_suite(
        [benchmark], device="cpu", quick=True, csv_path=tmp_path / "results.csv", show_progress=False
    )
    reasons = {r.provider: r.reason for r in report.results if r.status == "skipped"}
    assert {r.status for r in report.results} == {"skipped"}, report.text()
    assert "CUDA GPU" in reasons["torchtrt"] and "CUDA GPU" in reasons["conv2d"]
