"""Kernels written in Python (examples/pyops: Liger-Kernel's Triton RMSNorm forward, a CuPy SwiGLU) on a GPU: each
tactic's compiled cubin, launched from C++ by the eager op, against the reference and against the same kernel
launched from Python (Triton's launcher, CuPy); the plugin through the harness (check_op); CUDA graph capture; a
library built for another architecture failing with the op, the kernel and the architectures named."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import pytest  # noqa: E402
import torch  # noqa: E402
from example_package import import_pyops  # noqa: E402

from torchtrt_plugins import Declaration, sdk  # noqa: E402
from torchtrt_plugins.kernels import describe, launch  # noqa: E402
from torchtrt_plugins.testing import check_op  # noqa: E402

py = import_pyops()


def _close(declaration, got, expected):
    for g, e in zip(
        got if isinstance(got, tuple) else (got,), expected if isinstance(expected, tuple) else (expected,)
    ):
        tolerance = declaration.spec.tolerance(e.dtype)
        torch.testing.assert_close(g, e, atol=tolerance.atol, rtol=tolerance.rtol)


@pytest.mark.parametrize("dtype", py.FLOATS)
@pytest.mark.parametrize(
    "shape", [(64,), (3, 255), (33, 1000), (2, 5, 2048), (7, 4096), (2, 10000), (1, 16384)], ids=str
)
def test_liger_rms_norm_against_reference_and_liger_launched_from_python(dtype, shape):
    x = torch.randn(shape, dtype=dtype, device="cuda")
    w = torch.randn(shape[-1], dtype=dtype, device="cuda")
    got = torch.ops.pyops.liger_rms_norm(x, w, 1e-6, 0.5)
    _close(py.LIGER_RMS_NORM, got, py.reference_liger_rms_norm(x, w, 1e-6, 0.5))
    outputs = [torch.empty_like(o) for o in got]
    launch.launch_from_python(py.LIGER_RMS_NORM, (x, w, 1e-6, 0.5), outputs)
    if shape[-1] % 16 == 0:
        # Both compiled with every pointer and integer divisible by 16: the same code, the same bits.
        assert torch.equal(got[0], outputs[0]) and torch.equal(got[1], outputs[1])
    else:
        # Triton's launcher specializes each argument on its own divisibility, our unaligned build on none: the
        # same kernel compiled differently (seen on the H100: last-bit differences at widths 255 and 1000).
        _close(py.LIGER_RMS_NORM, got, tuple(outputs))


def test_liger_rms_norm_beyond_the_largest_variant_is_an_error():
    x = torch.randn(2, py.RMS_NORM_BLOCKS[-1] + 1, device="cuda")
    bound = py.RMS_NORM_BLOCKS[-1]
    message = rf"pyops::liger_rms_norm: kernel '_rms_norm_forward_kernel': .* largest variant bound {bound}"
    with pytest.raises(RuntimeError, match=message):
        torch.ops.pyops.liger_rms_norm(x, torch.ones(x.shape[-1], device="cuda"))


@pytest.mark.parametrize("dtype", py.FLOATS)
@pytest.mark.parametrize("shape", [(1,), (255,), (3, 5), (4097,), (33, 1029), (2, 3, 11008)], ids=str)
@pytest.mark.parametrize("tactic", [0, 1])
def test_swiglu_every_tactic_against_reference_and_cupy(dtype, shape, tactic):
    gate = torch.randn(shape, dtype=dtype, device="cuda")
    up = torch.randn(shape, dtype=dtype, device="cuda")
    got = sdk.launch(py.SWIGLU, gate, up, 1.702, tactic=tactic)
    _close(py.SWIGLU, got, py.reference_swiglu(gate, up, 1.702))
    out = torch.empty_like(got)
    launch.launch_from_python(py.SWIGLU, (gate, up, 1.702), [out], tactic=tactic)
    assert torch.equal(got, out)


def test_check_op_on_gpu():
    rms = [(torch.randn(33, 1000), torch.randn(1000), 1e-5, 1.0), (torch.randn(2, 3, 4096), torch.randn(4096))]
    report = check_op(torch.ops.pyops.liger_rms_norm, rms)
    assert {"eager", "harness", "python kernel"} <= set(report.passed), report
    swiglu = [(torch.randn(33, 129), torch.randn(33, 129), 0.25), (torch.randn(4099), torch.randn(4099), 1.702)]
    report = check_op(torch.ops.pyops.swiglu, swiglu)
    assert {"eager", "harness", "python kernel"} <= set(report.passed), report


def test_eager_op_replays_in_a_cuda_graph():
    x = torch.randn(8, 4096, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(4096, dtype=torch.bfloat16, device="cuda")
    torch.ops.pyops.liger_rms_norm(x, w)  # the first call loads the module (not allowed inside a capture)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y, rstd = torch.ops.pyops.liger_rms_norm(x, w)
    x.copy_(torch.randn_like(x))
    graph.replay()
    _close(py.LIGER_RMS_NORM, (y, rstd), py.reference_liger_rms_norm(x, w))


def _scale_declaration(library_name):
    import aot_ops

    library = sdk.PluginLibrary(library_name, sources=[])
    kernel = describe.triton_kernel(
        aot_ops.scale_kernel,
        grid=lambda x: (-(-x.numel() // 256),),
        params={"x_ptr": "x", "out_ptr": "out0", "n": lambda x: x.numel()},
        constexprs={"BLOCK": 256},
    )
    declaration = Declaration("aot_test::scale", launcher=kernel, library=library, dtypes={"x": (torch.float32,)})
    library.add(declaration)
    return declaration


def _other_arch() -> tuple[str, str]:
    """(this device's arch, an arch whose cubin cannot run here): sm_80 on a 9.x or newer device, else sm_90."""
    major, minor = torch.cuda.get_device_capability()
    return f"{major}{minor}", "80" if major != 8 else "90"


def test_a_library_without_this_architecture_names_op_kernel_and_architectures(monkeypatch):
    here, other = _other_arch()
    monkeypatch.setenv("TORCHTRT_PLUGINS_CUDA_ARCHS", other)
    monkeypatch.setenv("TORCHTRT_PLUGINS_PTX", "0")
    declaration = _scale_declaration("aot_arch_test_no_ptx")
    with pytest.raises(
        RuntimeError,
        match=rf"aot_test::scale: kernel 'scale_kernel': no image for this device \(sm_{here}[^)]*\).*sm_{other} cubin",
    ):
        sdk.launch(declaration, torch.randn(10, device="cuda"), 2.0)


def test_a_library_for_an_older_architecture_runs_here_through_its_ptx(monkeypatch):
    _, other = _other_arch()
    if int(other) > torch.cuda.get_device_capability()[0] * 10 + torch.cuda.get_device_capability()[1]:
        pytest.skip(f"sm_{other}'s PTX cannot run on an older device")
    monkeypatch.setenv("TORCHTRT_PLUGINS_CUDA_ARCHS", other)
    declaration = _scale_declaration("aot_arch_test_ptx")
    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(sdk.launch(declaration, x, 2.0), x * 2.0)


_FORCED = """
import sys, torch
sys.path[:0] = {paths!r}
import test_example_pyops_gpu as t
from torchtrt_plugins import sdk
x = torch.randn(1000, device="cuda")
try:
    torch.testing.assert_close(sdk.launch(t._scale_declaration({name!r}), x, 2.0), x * 2.0)
    print("LAUNCHED")
except RuntimeError as err:
    print("ERROR", err)
"""


@pytest.mark.parametrize("ptx", ["1", "0"])
def test_forced_ptx_takes_the_ptx_where_a_cubin_fits(ptx):
    """TORCHTRT_PLUGINS_FORCE_PTX=1 (read once per process: a subprocess) on a library built for this device: with
    PTX the kernel runs (JIT-compiled from it), without PTX the loader refuses the cubin that fits and says why."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    here, _ = _other_arch()
    env = {**os.environ, "TORCHTRT_PLUGINS_FORCE_PTX": "1", "TORCHTRT_PLUGINS_PTX": ptx}
    env["TORCHTRT_PLUGINS_CUDA_ARCHS"] = here
    paths = [str(Path(__file__).parent), str(Path(__file__).parent.parent), *sys.path]
    script = _FORCED.format(paths=paths, name=f"aot_forced_ptx{ptx}")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    if ptx == "1":
        assert "LAUNCHED" in run.stdout, run.stdout[-3000:]
    else:
        assert f"no image for this device (sm_{here}, TORCHTRT_PLUGINS_FORCE_PTX=1)" in run.stdout, run.stdout[-3000:]
