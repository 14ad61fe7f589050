"""The PTX images of Python kernels declare the oldest PTX ISA their target accepts (torchtrt_plugins.kernels.ptx),
checked by ptxas, so that a driver older than Triton's or NVRTC's own ISA still JIT-compiles them: the H200 machine's
CUDA 13.0 driver knows PTX ISA 9.0, Triton 3.9 writes 9.4 for sm_90a and NVRTC 13.5 writes 9.5."""

from __future__ import annotations

import pytest
import torch
from example_package import pyops_unavailable

if pyops_unavailable():
    pytest.skip(pyops_unavailable(), allow_module_level=True)

import aot_ops  # noqa: E402
import cupy  # noqa: E402

from torchtrt_plugins import Declaration, triton_kernel  # noqa: E402
from torchtrt_plugins import cuda_kernel as cuda  # noqa: E402
from torchtrt_plugins.kernels import compile as kernel_compile  # noqa: E402
from torchtrt_plugins.kernels import ptx  # noqa: E402
from torchtrt_plugins.kernels import source as kernel_source  # noqa: E402

PTXAS = ptx.ptxas_path()
pytestmark = pytest.mark.skipif(PTXAS is None, reason="no ptxas (CUDA toolkit or Triton) to check PTX with")

# elect.sync came with PTX ISA 8.0: PTX using it cannot declare sm_90's 7.8.
ELECTED = """.version 9.0
.target sm_90
.address_size 64

.visible .entry elected(.param .u64 out)
{
	.reg .pred %p<2>;
	.reg .b32 %r<2>;
	.reg .b64 %rd<3>;
	elect.sync %r1|%p1, 0xffffffff;
	ld.param.u64 %rd1, [out];
	cvta.to.global.u64 %rd2, %rd1;
	st.global.u32 [%rd2], %r1;
	ret;
}
"""
PLAIN = ELECTED.replace("elect.sync %r1|%p1, 0xffffffff;", "mov.u32 %r1, 7;")


def test_ptx_is_lowered_to_the_isa_that_introduced_its_target():
    lowered = ptx.lower_version(PLAIN, 90, False, PTXAS)
    assert ptx.version(lowered) == (7, 8) and lowered.replace(".version 7.8", ".version 9.0") == PLAIN
    assert ptx.assembles(lowered, 90, False, PTXAS)


def test_ptx_using_a_newer_feature_keeps_its_version():
    assert ptx.assembles(ELECTED, 90, False, PTXAS)
    assert ptx.lower_version(ELECTED, 90, False, PTXAS) == ELECTED


def test_without_ptxas_or_for_an_unknown_target_the_ptx_is_unchanged():
    assert ptx.lower_version(PLAIN, 90, False, None) == PLAIN
    assert ptx.lower_version(PLAIN.replace("sm_90", "sm_99"), 99, False, PTXAS) == PLAIN.replace("sm_90", "sm_99")


@pytest.mark.parametrize("kind", ["triton", "cuda"])
def test_the_embedded_ptx_declares_what_a_cuda_13_0_driver_knows_and_assembles(kind):
    if kind == "triton":
        params = {"x_ptr": "x", "out_ptr": "out0", "n": lambda x: x.numel()}
        grid = lambda x, meta: (-(-x.numel() // meta["BLOCK"]),)  # noqa: E731
        kernel = triton_kernel(aot_ops.scale_kernel, grid=grid, params=params, constexprs={"BLOCK": 256})
    else:
        params = ["x", "out0", lambda x: x.numel(), "alpha"]
        raw = cupy.RawKernel(aot_ops.SCALE_SOURCE, "scale")
        kernel = cuda(raw, grid=lambda x: (-(-x.numel() // 128),), block=128, params=params)
    d = Declaration("aot_test::scale", launcher=kernel, dtypes={"x": (torch.float32,)})
    kernel, tactic = d.aot_kernels[0]
    case = kernel_source._cases(kernel, tactic)[0]
    archs = kernel_compile.parse_archs("80;90")
    if kind == "triton":
        images = kernel_compile._triton_compile(kernel, kernel.variants(tactic)[0], case, archs).images
    else:
        images = kernel_compile._nvrtc_compile(kernel, case, archs).images
    ptx_images = [i for i in images if i.kind == "ptx"]
    assert [i.arch for i in ptx_images] == [80, 90]
    for image in ptx_images:
        text = image.data.decode()
        assert ptx.version(text) == ptx.ISA_OF_TARGET[(image.arch, image.exact)] <= (9, 0), (image.arch, text[:200])
        assert ptx.assembles(text, image.arch, image.exact, PTXAS)
