"""Kernels written in Python as declared ops' launchers (torchtrt_plugins.kernels), on CPU: the mapping from the
op's arguments to the kernel's parameters, the bad inputs (each error names the op, the kernel and what is wrong),
compiling for named architectures with no GPU, and the generated C++ evaluating grids as Python does."""

from __future__ import annotations

import math
import subprocess

import pytest
import torch
from example_package import pyops_unavailable

if pyops_unavailable():
    pytest.skip(pyops_unavailable(), allow_module_level=True)

import aot_ops  # noqa: E402
import cupy  # noqa: E402

import torchtrt_plugins as ttp  # noqa: E402
from torchtrt_plugins import Declaration, _derive, triton_kernel  # noqa: E402
from torchtrt_plugins import cuda_kernel as cuda  # noqa: E402
from torchtrt_plugins.kernels import compile as kernel_compile
from torchtrt_plugins.kernels import describe
from torchtrt_plugins.kernels import source as kernel_source

FLOAT = {"x": (torch.float32,)}
HALF_FLOAT = {"x": (torch.float32, torch.float16)}


def triton_scale(**changes):
    options = dict(
        grid=lambda x, meta: (-(-x.numel() // meta["BLOCK"]),),
        params={"x_ptr": "x", "out_ptr": "out0", "n": lambda x: x.numel()},
        constexprs={"BLOCK": 256},
    )
    options.update(changes)
    return triton_kernel(aot_ops.scale_kernel, **options)


def cuda_scale(source=aot_ops.SCALE_SOURCE, **changes):
    options = dict(
        grid=lambda x: (-(-x.numel() // 128),), block=128, params=["x", "out0", lambda x: x.numel(), "alpha"]
    )
    options.update(changes)
    return cuda(cupy.RawKernel(source, "scale"), **options)


def declare(kernel, op="aot_test::scale", **options):
    return Declaration(op, launcher=kernel, dtypes=options.pop("dtypes", FLOAT), **options)


def test_triton_parameters_map_to_the_ops_arguments():
    d = declare(triton_scale())
    kinds = {p.name: (p.kind, p.index) for p in d.aot_kernels[0][0].bound_params}
    assert kinds == {
        "x_ptr": ("input", 0),
        "out_ptr": ("output", 0),
        "n": ("expr", -1),
        "alpha": ("scalar", 0),
        "BLOCK": ("constexpr", -1),
    }
    assert d.launchers == {0: "ttp_aot::aot_test_scale_t0"}


@pytest.mark.parametrize(
    ("kernel", "message"),
    [
        (lambda: triton_scale(params={"x_ptr": "x", "out_ptr": "out0"}), r"parameter 'n' takes nothing"),
        (lambda: triton_scale(params={"x_ptr": "y", "out_ptr": "out0", "n": 1}), r"parameter 'x_ptr' takes 'y', which"),
        (lambda: triton_scale(params={"nope": "x"}), r"params names 'nope', which is not a parameter"),
        (lambda: triton_scale(constexprs={}), r"parameter 'BLOCK' is a tl.constexpr with no value"),
        (
            lambda: triton_scale(params={"x_ptr": "x", "out_ptr": "out0", "n": 4, "BLOCK": "alpha"}),
            r"parameter 'BLOCK' is a tl.constexpr, but takes the op's scalar 'alpha'",
        ),
        (
            lambda: triton_scale(params={"x_ptr": "x", "out_ptr": "x", "n": 4}),
            r"output 'out0' is passed to no parameter",
        ),
        (lambda: triton_scale(grid=lambda rows: (rows,)), r"grid is a function of 'rows', which is not an argument"),
        (lambda: cuda_scale(params=["x", "out0", "alpha"]), r"its signature has 4 parameters .* params= gives 3"),
        (
            lambda: cuda_scale(params=["x", "out0", "alpha", "alpha"]),
            r"parameter 'n' \('long long n'\) takes float argument 'alpha'",
        ),
        (lambda: cuda_scale(params=["alpha", "out0", 4, "alpha"]), r"parameter 'x' \('float const\* x'\) is a pointer"),
        (
            lambda: cuda_scale(source=aot_ops.SCALE_SOURCE.replace("long long n", "struct S n")),
            r"parameter 'n' has type 'struct S n', which the launcher cannot pass",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_a_mapping_that_does_not_fit_names_op_kernel_and_parameter(kernel, message):
    with pytest.raises(describe.KernelError, match=r"aot_test::scale: kernel '\w+': " + message):
        declare(kernel())


TEMPLATE_SCALE = aot_ops.SCALE_SOURCE.replace('extern "C" __global__', "template <typename T>\n__global__").replace(
    "float const* x, float* out", "T const* x, T* out"
)


def _template_scale(names):
    return cuda(
        cupy.RawModule(code=TEMPLATE_SCALE),
        names=names,
        grid=lambda x: (1,),
        block=32,
        params=["x", "out0", lambda x: x.numel(), "alpha"],
    )


@pytest.mark.parametrize(
    ("kernel", "dtypes", "message"),
    [
        (
            lambda: cuda_scale(source=aot_ops.SCALE_SOURCE.replace("float const* x", "int const* x")),
            FLOAT,
            r"parameter 'x' \('int const\* x'\) points at int, but takes input 'x', which is torch.float32 .* "
            r"expected a pointer to float",
        ),
        (
            lambda: cuda_scale(),
            {"x": (torch.float32, torch.float16)},
            r"parameter 'x' \('float const\* x'\) points at float, but takes input 'x', which is torch.float16",
        ),
        (
            lambda: _template_scale({torch.float32: "scale<float>", torch.float16: "scale<float>"}),
            {"x": (torch.float32, torch.float16)},
            r"parameter 'x' \('T const\* x' of scale<float>\) points at float, but takes input 'x', which is "
            r"torch.float16 .* expected a pointer to __half",
        ),
        (
            lambda: cuda_scale(source=aot_ops.SCALE_SOURCE.replace("float* out", "__half* out")),
            FLOAT,
            r"parameter 'out' \('__half\* out'\) points at __half, but takes output 'out0', which is torch.float32",
        ),
    ],
    ids=["extern-int-for-float32", "float-for-float16", "template-float-for-float16", "output"],
)
def test_a_pointer_to_another_dtype_than_the_declared_is_refused_at_declare(kernel, dtypes, message):
    with pytest.raises(ttp.DeclarationError, match=r"aot_test::scale: kernel '[^']+': " + message):
        ttp.declare("aot_test::scale", launcher=kernel(), dtypes=dtypes)


def test_a_template_instance_for_each_declared_dtype_is_accepted():
    d = declare(_template_scale({torch.float32: "scale<float>", torch.float16: "scale<__half>"}), dtypes=HALF_FLOAT)
    kernel_source.check_kernels(d)


def test_a_grid_that_is_not_an_int_expression_is_refused_at_declare_naming_the_expression():
    kernel = triton_scale(grid=lambda x: (x.numel() / 256,))
    with pytest.raises(ttp.KernelError, match=r"grid\[0\] must be an int .* from .*x\.numel\(\) / 256"):
        ttp.declare("aot_test::scale", launcher=kernel, dtypes=FLOAT)
    assert "aot_test::scale" not in {e.spec.qualname for e in ttp.registered_ops()}


def test_a_bool_tensor_cannot_go_to_a_triton_kernel():
    kernel = triton_kernel(
        aot_ops.scale_kernel,
        grid=lambda x: (1,),
        params={"x_ptr": "x", "out_ptr": "out0", "n": "mask", "alpha": 1.0},
        constexprs={"BLOCK": 64},
    )
    with pytest.raises(describe.KernelError, match=r"aot_test::mask_scale: kernel 'scale_kernel': .*'mask'"):
        Declaration("aot_test::mask_scale", launcher=kernel, dtypes={"x": (torch.float32,), "mask": (torch.bool,)})


@pytest.mark.parametrize(
    ("grid", "message"),
    [
        (lambda x: (x.numel() * 0.5,), r"grid\[0\] must be an int"),
        (lambda x: (1, 2, 3, 4), r"grid must give 1 to 3 sizes"),
    ],
)
def test_a_grid_that_cannot_be_evaluated_is_an_error(grid, message):
    d = declare(triton_scale(grid=grid))
    with pytest.raises(describe.KernelError, match=r"aot_test::scale: kernel 'scale_kernel': " + message):
        kernel_source.generate_source([d], "90")


def test_a_grid_over_a_data_dependent_size_is_an_error():
    params = {"x_ptr": "x", "out_ptr": "out0", "n": lambda x: x.numel(), "alpha": "threshold"}
    kernel = triton_scale(grid=lambda out0: (out0.shape[0],), params=params)
    d = Declaration("aot_test::count_above", launcher=kernel, dtypes=FLOAT)
    with pytest.raises(describe.KernelError, match=r"count_above: kernel 'scale_kernel': grid\[0\] depends on a size"):
        kernel_source.generate_source([d], "90")


def test_cuda_source_that_does_not_compile_shows_nvrtcs_log():
    d = declare(cuda_scale(source=aot_ops.SCALE_SOURCE.replace("alpha * x[i]", "alpha * undefined_name[i]")))
    with pytest.raises(describe.KernelError, match=r"(?s)aot_test::scale: kernel 'scale': NVRTC .*undefined_name"):
        kernel_source.generate_source([d], "90")


@pytest.mark.parametrize("kind", ["triton", "cuda"])
def test_an_architecture_the_compiler_cannot_target_is_an_error(kind):
    d = declare(triton_scale() if kind == "triton" else cuda_scale())
    with pytest.raises(describe.KernelError, match=r"aot_test::scale: kernel '\w+': .*sm_20"):
        kernel_source.generate_source([d], "20")
    with pytest.raises(describe.KernelError, match=r"architecture 'native'"):
        kernel_source.generate_source([d], "native")


@pytest.mark.parametrize("kind", ["triton", "cuda"])
def test_compiles_for_named_architectures_without_a_gpu(kind):
    d = declare(triton_scale() if kind == "triton" else cuda_scale())
    source = kernel_source.generate_source([d], "80;90-real;120;90-virtual")
    for arch in (80, 90, 120):
        assert f"_sm{arch}[]" in source
    assert "_sm90-virtual" not in source and source.count("CubinImage const") == (2 if kind == "triton" else 1)
    assert "cudaError_t aot_test_scale_t0(::ttp::sdk::LaunchArgs const& args)" in source


@pytest.mark.parametrize("kind", ["triton", "cuda"])
def test_each_cubin_has_its_ptx_beside_it_unless_ptx_is_switched_off(kind, monkeypatch):
    d = declare(triton_scale() if kind == "triton" else cuda_scale())
    case = kernel_source._cases(d.aot_kernels[0][0], 0)[0]
    compile_case = (
        (lambda: kernel_compile._triton_compile(d.aot_kernels[0][0], d.aot_kernels[0][0].variants(0)[0], case, archs))
        if kind == "triton"
        else (lambda: kernel_compile._nvrtc_compile(d.aot_kernels[0][0], case, archs))
    )
    archs = kernel_compile.parse_archs("80;90")
    images = compile_case().images
    # Triton targets sm_90a on sm_90 (an arch-specific image); NVRTC compiles for what it is told (sm_90)
    exact = kind == "triton"
    assert [(i.arch, i.exact, i.kind) for i in images] == [
        (80, False, "cubin"),
        (80, False, "ptx"),
        (90, exact, "cubin"),
        (90, exact, "ptx"),
    ]
    for image in images:
        if image.kind == "cubin":
            assert image.data[:4] == b"\x7fELF"
        else:
            text = image.data.decode()
            assert f".target sm_{image.arch}{'a' if image.exact else ''}" in text and ".version " in text
            assert b"\0" not in image.data
    source = kernel_source.generate_source([d], "80;90")
    assert "ImageKind::kPTX, kKernel0_0_sm80_ptx, sizeof(kKernel0_0_sm80_ptx)}" in source
    assert "ImageKind::kCUBIN, kKernel0_0_sm90, sizeof(kKernel0_0_sm90)}" in source
    monkeypatch.setenv("TORCHTRT_PLUGINS_PTX", "0")
    assert [(i.arch, i.kind) for i in compile_case().images] == [(80, "cubin"), (90, "cubin")]
    without = kernel_source.generate_source([d], "80;90")
    assert "kPTX" not in without and "_ptx[]" not in without
    assert kernel_source.kernel_sizes(without) < kernel_source.kernel_sizes(source)


def test_the_build_cache_key_changes_with_the_ptx_switch(monkeypatch):
    d = declare(cuda_scale())
    with_ptx = kernel_compile.fingerprint([d], "90")
    monkeypatch.setenv("TORCHTRT_PLUGINS_PTX", "0")
    assert kernel_compile.fingerprint([d], "90") != with_ptx


# The images of a kernel built for sm_80 and sm_90a: (arch, exact, kind)
PICKER_IMAGES = [(80, False, "CUBIN"), (80, False, "PTX"), (90, True, "CUBIN"), (90, True, "PTX")]


@pytest.mark.parametrize(
    ("images", "device", "force_ptx", "picked"),
    [
        (PICKER_IMAGES, 90, False, 2),  # the exact cubin
        (PICKER_IMAGES, 90, True, 3),  # forced: the PTX of the same arch
        (PICKER_IMAGES, 80, False, 0),
        (PICKER_IMAGES, 86, False, 0),  # sm_80 SASS runs on 8.6: no JIT needed
        (PICKER_IMAGES, 86, True, 1),
        (PICKER_IMAGES, 89, True, 1),
        (PICKER_IMAGES, 100, False, 1),  # another major: sm_80's PTX (sm_90a's runs on 9.0 only)
        (PICKER_IMAGES, 120, False, 1),
        (PICKER_IMAGES, 75, False, -1),  # older than every image
        ([(90, True, "CUBIN"), (90, True, "PTX")], 100, False, -1),  # arch-specific images only
        ([(90, False, "CUBIN")], 100, False, -1),  # a cubin of another major never runs
        ([(90, False, "CUBIN")], 90, True, -1),  # forced PTX and none there
        ([(80, False, "PTX"), (90, False, "PTX"), (100, False, "PTX")], 103, False, 2),  # the newest PTX <= device
        ([(80, False, "PTX"), (90, False, "PTX"), (100, False, "PTX")], 90, False, 1),
    ],
)
def test_the_loader_picks_the_image_for_the_device(tmp_path, images, device, force_ptx, picked):
    """sdk::pickImage (cubin_launch.h), compiled with the host compiler and run for a fake device arch."""
    table = ", ".join(
        f"{{{arch}, {str(exact).lower()}, ttp::sdk::ImageKind::k{kind}, nullptr, 0}}" for arch, exact, kind in images
    )
    program = (
        f"ttp::sdk::CubinImage const images[] = {{{table}}};"
        f" ttp::sdk::CubinImage const* p = ttp::sdk::pickImage(images, {len(images)}, {device}, "
        f'{str(force_ptx).lower()}); std::printf("%d\\n", p == nullptr ? -1 : static_cast<int>(p - images));'
    )
    assert _run_cxx(tmp_path, program) == [picked]


def test_autotune_configs_become_tactics():
    import triton

    tuned = triton.autotune(
        configs=[triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)], key=["n"]
    )(aot_ops.scale_kernel)
    kernel = triton_kernel(tuned, grid=triton_scale().grid, params=triton_scale().params)
    d = declare(kernel)
    assert d.launchers == {0: "ttp_aot::aot_test_scale_t0", 1: "ttp_aot::aot_test_scale_t1"}
    assert [v.constexprs["BLOCK"] for t in (0, 1) for v in kernel.variants(t)] == [128, 1024]
    assert [t.value for t in d.spec.tactics] == [1]


def _tuned(**autotune):
    import triton

    configs = [triton.Config({"BLOCK": 128}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=8)]
    tuned = triton.autotune(configs=configs, key=["n"], **autotune)(aot_ops.scale_kernel)
    return triton_kernel(tuned, grid=triton_scale().grid, params=triton_scale().params)


def test_autotune_reset_to_zero_zeroes_the_outputs_on_the_stream_before_each_launch():
    d = declare(_tuned(reset_to_zero=["out_ptr"]))
    assert d.aot_kernels[0][0].zeroed_outputs == [0]
    source = kernel_source.generate_source([d], "90")
    zeroing = "cudaMemsetAsync(args.outputs[0].data, 0, static_cast<size_t>(args.outputs[0].numel() * "
    for tactic in (0, 1):
        launcher = source.split(f"aot_test_scale_t{tactic}(::ttp::sdk::LaunchArgs const& args)")[1].split("\n}\n")[0]
        assert zeroing in launcher
        assert launcher.index(zeroing) < launcher.index("launchCubin(")
    assert "cudaMemsetAsync" not in kernel_source.generate_source([declare(_tuned())], "90")


@pytest.mark.parametrize(
    ("autotune", "message"),
    [
        ({"restore_value": ["out_ptr"]}, r"triton.autotune\(restore_value=...\) is not supported"),
        ({"prune_configs_by": {"early_config_prune": lambda c, a, **k: c}}, r"triton.autotune\(prune_configs_by=...\)"),
        ({"prune_configs_by": {"perf_model": lambda **k: 1.0, "top_k": 1}}, r"triton.autotune\(prune_configs_by=...\)"),
        ({"pre_hook": lambda kwargs, reset_only=False: None}, r"triton.autotune\(pre_hook=...\) is not supported"),
        ({"post_hook": lambda kwargs, exception: None}, r"triton.autotune\(post_hook=...\) is not supported"),
        (
            {"reset_to_zero": ["x_ptr"]},
            r"triton.autotune\(reset_to_zero=\['x_ptr'\]\): parameter 'x_ptr' takes the op's input",
        ),
    ],
    ids=["restore_value", "prune", "perf_model", "pre_hook", "post_hook", "reset_an_input"],
)
def test_an_autotune_hook_the_launcher_would_ignore_is_refused(autotune, message):
    with pytest.raises(ttp.DeclarationError, match=r"aot_test::scale: kernel 'scale_kernel': " + message):
        declare(_tuned(**autotune))


def _evaluate_in_cxx(tmp_path, expressions, dims) -> list[int]:
    """The generated C++ of token ``expressions``, compiled with the host compiler and run on inputs of ``dims``."""
    values = ", ".join(kernel_source._cxx_expr(e) for e in expressions)
    tensors = ", ".join(
        f"{{nullptr, ttp::DType::kFLOAT32, {len(d)}, {{{', '.join(map(str, d)) or '0'}}}}}" for d in dims
    )
    return _run_cxx(
        tmp_path,
        f"ttp::sdk::Tensor inputs[] = {{{tensors}}}; ttp::sdk::LaunchArgs args{{inputs, {len(dims)}}};"
        f' long long values[] = {{{values}}}; for (long long v : values) std::printf("%lld\\n", v);',
    )


def _run_cxx(tmp_path, body: str) -> list[int]:
    """``body`` as main() over the SDK's headers, compiled with the host compiler and run: the ints it prints."""
    import shutil

    from torchtrt_plugins import sdk

    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler (g++)")
    (tmp_path / "e.cpp").write_text(
        '#include "sdk/cubin_launch.h"\n#include "sdk/ttp_sdk.h"\n#include <algorithm>\n#include <cstdio>\n'
        f"int main() {{ {body} }}\n"
    )
    includes = [f"-I{d}" for d in [sdk.include_dir(), *kernel_compile._cuda_include_dirs()]]
    build = subprocess.run(
        [compiler, "-std=c++17", *includes, str(tmp_path / "e.cpp"), "-o", str(tmp_path / "e")],
        capture_output=True,
        text=True,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    return [int(v) for v in subprocess.run([str(tmp_path / "e")], capture_output=True, text=True).stdout.split()]


FUNCTIONS = [
    lambda x, w: math.prod(x.shape[:-1]),
    lambda x, w: -(-x.numel() // 256),
    lambda x, w: x.shape[-1] // 3 + 1,
    lambda x, w: torch.sym_max(x.shape[0], w.shape[0]) * 2,
    lambda x, w: torch.sym_min(x.shape[-1] - w.shape[0], 5),
]


@pytest.mark.parametrize("dims", [((7, 5, 300), (4,)), ((1, 4096), (4096,)), ((0, 9), (2,))])
def test_the_generated_launcher_evaluates_grid_and_parameters_as_python_does(tmp_path, dims):
    op = torch.ops.aot_test.mask_scale.default
    metas = {
        "x": _derive.TensorMeta((None,) * len(dims[0]), torch.float32),
        "mask": _derive.TensorMeta((None,), torch.bool),
    }
    fake = lambda x, w: torch.empty([f(x, w) for f in FUNCTIONS])  # noqa: E731
    derived = _derive.derive("t", op, op._schema.arguments, {}, metas, frozenset(), fake=fake)
    expressions = _derive.Program.parse(derived.program).outputs[0][1]
    x, w = torch.empty(dims[0]), torch.empty(dims[1])
    assert _evaluate_in_cxx(tmp_path, expressions, dims) == [f(x, w) for f in FUNCTIONS]


def test_a_template_without_a_function_for_a_declared_dtype_is_an_error():
    kernel = cuda(
        cupy.RawModule(code=aot_ops.SCALE_SOURCE),
        names={torch.float32: "scale"},
        grid=lambda x: (1,),
        block=32,
        params=["x", "out0", lambda x: x.numel(), "alpha"],
    )
    with pytest.raises(
        describe.KernelError, match=r"names= has no function for dtypes \['torch.float16'\] of argument 'x'"
    ):
        declare(kernel, dtypes={"x": (torch.float32, torch.float16)})


def test_a_declaration_whose_kernel_does_not_compile_withdraws_itself_and_breaks_no_later_load(monkeypatch):
    """Before: the op stayed registered, so every later load_plugins() in the process raised PluginLoadError."""
    from torchtrt_plugins import _build, native, registry, sdk

    if missing := _build.sdk_build_prerequisites():
        pytest.skip(f"the library's build stops before its kernel compiles: {'; '.join(missing)}")

    broken = cuda_scale(source=aot_ops.SCALE_SOURCE.replace("alpha * x[i]", "alpha * undefined_name[i]"))
    ttp.declare(
        "aot_test::scale", library=sdk.PluginLibrary("aot_withdraw_test", sources=[]), launcher=broken, dtypes=FLOAT
    )
    assert torch._C._dispatch_has_kernel_for_dispatch_key("aot_test::scale", "CUDA")
    loaded = []
    monkeypatch.setattr(native, "plugin_library_path", lambda build=True: "/ours/libtorchtrt_plugins_v3.so")
    monkeypatch.setattr(native, "_load_library", lambda registry, path, entries: loaded.append(str(path)))
    # Ours and this test's library only: another declared library (torchtrt_plugins.vision's, where a test imported
    # it) cannot be built without the TensorRT headers (the wheel's run), and is not what this test is about.
    libraries = native._libraries
    monkeypatch.setattr(
        native,
        "_libraries",
        lambda: {
            k: v
            for k, v in libraries().items()
            if k is native.plugin_library_path or any(e.spec.qualname.startswith("aot_test::") for e in v)
        },
    )
    with pytest.raises(native.PluginLoadError, match=r"(?s)aot_test::scale.*NVRTC could not compile.*undefined_name"):
        native.load_plugins(object())
    assert "aot_test::scale" not in {e.spec.qualname for e in registry.registered_ops()}
    assert not torch._C._dispatch_has_kernel_for_dispatch_key("aot_test::scale", "CUDA")
    half = torch.ones(2, dtype=torch.float16)  # not a declared dtype: the CPU kernel's checks went with the op
    torch.testing.assert_close(torch.ops.aot_test.scale(half, 2.0), 2 * half)
    loaded.clear()
    native.load_plugins(object())  # as if the declaration had never been made
    assert loaded[0] == "/ours/libtorchtrt_plugins_v3.so"
