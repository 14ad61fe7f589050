"""The example package of kernels written in Python (examples/pyops): Liger-Kernel's own Triton RMSNorm forward
kernel and a CuPy SwiGLU, declared as ops, compiled ahead of time to cubin and embedded in the plugin and launcher
libraries; exported to ONNX; its own pytest run as a user runs it. NVIDIA's builder: tests/rtx/test_pyops_rtx.py."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import re  # noqa: E402
import subprocess  # noqa: E402
import warnings  # noqa: E402

import onnx  # noqa: E402
import onnx.numpy_helper  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
from example_package import PYOPS, import_pyops, run_own_tests  # noqa: E402

from torchtrt_plugins import _build, _derive, converters  # noqa: E402
from torchtrt_plugins import onnx as tonnx  # noqa: E402
from torchtrt_plugins.kernels import compile as kernel_compile  # noqa: E402
from torchtrt_plugins.kernels import source  # noqa: E402

PY = import_pyops()


def _symbols(path, local: bool = False) -> set[str]:
    """The library's exported functions, or with ``local`` every symbol of its symbol table."""
    flags = [] if local else ["-D", "--defined-only"]
    out = subprocess.run(["nm", *flags, str(path)], capture_output=True, text=True).stdout
    return {line.split()[-1] for line in out.splitlines() if local or " T " in line}


def _needed(path) -> list[str]:
    out = subprocess.run(["readelf", "-d", str(path)], capture_output=True, text=True).stdout
    return [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]


def test_both_libraries_embed_every_compiled_kernel_and_need_no_driver_library():
    build = PY.LIBRARY.build()
    archs = kernel_compile.parse_archs(_build.cuda_archs())
    cubins = sum(
        len(source._cases(kernel, index)) * len(archs)
        for d in PY.LIBRARY.declarations
        for kernel, index in d.aot_kernels.values()
    )
    for path in (build.plugins, build.launchers):
        data = path.read_bytes()
        embedded = [s for s in _symbols(path, local=True) if re.search(r"kKernel\d+_\d+_sm\d+E$", s)]
        assert len(embedded) == cubins, path
        assert b"_rms_norm_forward_kernel" in data and b"swiglu4" in data
        assert not any(name.startswith("libcuda.so") for name in _needed(path)), _needed(path)
    assert _symbols(build.plugins) == {"getCreators", "setLoggerFinder"}
    assert {"ttp_sdk_launcher", "ttp_sdk_last_error"} <= _symbols(build.launchers)


def test_python_kernels_become_generated_launchers_and_tactics():
    assert PY.SWIGLU.launchers == {0: "ttp_aot::pyops_swiglu_t0", 1: "ttp_aot::pyops_swiglu_t1"}
    assert [t.value for t in PY.SWIGLU.spec.tactics] == [1]
    assert PY.LIGER_RMS_NORM.launchers == {0: "ttp_aot::pyops_liger_rms_norm_t0"}
    kernel, _ = PY.LIGER_RMS_NORM.aot_kernels[0]
    kinds = {p.name: p.kind for p in kernel.bound_params}
    assert kinds["X_ptr"] == "input" and kinds["RSTD_ptr"] == "output" and kinds["eps"] == "scalar"
    assert kinds["n_cols"] == "expr" and kinds["W_row_stride"] == "const" and kinds["BLOCK_SIZE"] == "constexpr"


def test_liger_rms_norm_outputs_keep_their_own_dtypes():
    program = PY.LIGER_RMS_NORM.compiled_programs[0]
    assert _derive.output_dtypes(program, (torch.bfloat16, torch.bfloat16)) == [torch.bfloat16, torch.float32]
    call = converters.plan(PY.LIGER_RMS_NORM.spec, (torch.zeros(2, 3, 64), torch.zeros(64)), {"eps": 1e-5})
    assert call.num_outputs == 2 and call.field_value("eps") == 1e-5


class Block(torch.nn.Module):
    def forward(self, x, w, gate):
        y, _ = torch.ops.pyops.liger_rms_norm(x, w, 1e-5, 0.0)
        return torch.ops.pyops.swiglu(y, gate, 1.702)


def test_onnx_export_gives_plugin_nodes_with_semantic_attributes(tmp_path):
    path = tmp_path / "pyops.onnx"
    args = (torch.randn(2, 64), torch.randn(64), torch.randn(2, 64))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tonnx.export(Block(), args, path)
    nodes = [n for n in onnx.load(path).graph.node if n.domain == tonnx.domain(PY.SWIGLU.spec)]
    assert [n.op_type for n in nodes] == ["LigerRMSNorm", "CuPySwiGLU"]
    attributes = {a.name: onnx.helper.get_attribute_value(a) for n in nodes for a in n.attribute}
    attributes = {k: onnx.numpy_helper.to_array(v).item() if hasattr(v, "dims") else v for k, v in attributes.items()}
    assert attributes["eps"] == pytest.approx(1e-5) and attributes["alpha"] == pytest.approx(1.702)


def test_the_example_packages_own_tests_pass():
    run_own_tests(PYOPS)
