"""Python kernels compiled ahead of time to cubin, each with its PTX beside it (unless ``TORCHTRT_PLUGINS_PTX=0``):
Triton's own compiler (no GPU) and NVRTC for CUDA source."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from .. import _build, _derive
from ..declaration import Declaration
from . import ptx
from .describe import _TRITON_DTYPES, ALIGNMENT, CudaKernel, KernelError, TritonKernel, Variant


def fingerprint(declarations: Sequence[Declaration], archs: str | None = None) -> str:
    """What the generated kernel source depends on, without compiling (a build's cache key)."""
    digest = hashlib.sha256(repr((archs, with_ptx())).encode())
    for d in declarations:
        for value, (kernel, index) in sorted(getattr(d, "aot_kernels", {}).items(), key=lambda kv: kv[0]):
            digest.update(f"{d.qualname}|{value}|{index}|{kernel.fingerprint()}".encode())
    return digest.hexdigest()[:16]


def parse_archs(archs: str) -> list[tuple[int, bool]]:
    """CMake CUDA architectures ("80;90", "90-real", "90a", "100f") -> [(compute capability, arch-specific)];
    PTX-only entries ("-virtual") are left out: a cubin is SASS."""
    out = []
    for entry in re.split(r"[;,\s]+", archs.strip()):
        if not entry or entry.endswith("-virtual"):
            continue
        match = re.fullmatch(r"(?:sm_|compute_)?(\d+)([af]?)(?:-real)?", entry)
        if match is None:
            raise KernelError(
                f"cannot compile kernels for CUDA architecture {entry!r} (expected e.g. 90, 90a, 90-real)"
            )
        value = (int(match.group(1)), match.group(2) == "a")
        if value not in out:
            out.append(value)
    return out


def with_ptx() -> bool:
    """Whether kernels carry their PTX beside each cubin: unless ``TORCHTRT_PLUGINS_PTX=0`` (smaller libraries that
    run only on the architectures compiled for)."""
    return os.environ.get("TORCHTRT_PLUGINS_PTX", "1") != "0"


# ---------------------------------------------------------------------------------------------- compilation


class Image(NamedTuple):
    """One image of a compiled kernel: ``kind`` "cubin" (SASS) or "ptx" (text the driver JIT-compiles, without its
    terminating nul); ``exact`` for an arch-specific one (sm_90a), which runs on that compute capability only."""

    arch: int
    exact: bool
    kind: str
    data: bytes


def _ptx_target_is_exact(ptx: str) -> bool:
    target = re.search(r"\.target\s+sm_(\d+)([af]?)", ptx)
    return bool(target and target.group(2) == "a")


@dataclass
class _Compiled:
    function: str
    images: list[Image]
    block: tuple[int, int, int]
    shared: int
    num_ctas: int = 1


@dataclass
class _Case:
    """One compiled kernel of a tactic: (variant, dtype combination, aligned)."""

    variant: int
    dtypes: tuple[torch.dtype, ...]
    aligned: bool
    compiled: _Compiled | None = None


def _dtype_combinations(declaration: Declaration) -> list[tuple[torch.dtype, ...]]:
    specs = list(declaration.spec.inputs)
    names = [s.name for s in specs]
    free = [s for s in specs if s.same_dtype_as is None]
    combos = []
    for choice in itertools.product(*(s.dtypes for s in free)):
        chosen = dict(zip((s.name for s in free), choice))
        combo = []
        for s in specs:
            combo.append(chosen[s.name] if s.same_dtype_as is None else combo[names.index(s.same_dtype_as)])
        combos.append(tuple(combo))
    return combos


def _output_dtypes(declaration: Declaration, inputs: tuple[torch.dtype, ...]) -> list[torch.dtype]:
    return _derive.output_dtypes(declaration.compiled_programs[0], inputs)


def _triton_compile(kernel: TritonKernel, variant: Variant, case: _Case, archs: list[tuple[int, bool]]) -> _Compiled:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    d = kernel.declaration
    outputs = _output_dtypes(d, case.dtypes)
    signature, constexprs, attrs = {}, {}, {}
    for position, p in enumerate(kernel.bound_params):
        if p.kind == "constexpr":
            value = variant.constexprs.get(p.name, p.value)
            signature[p.name], constexprs[p.name] = "constexpr", value
        elif p.kind == "const":
            signature[p.name], constexprs[p.name] = "constexpr", p.value
        elif p.kind in ("input", "output"):
            dtype = case.dtypes[p.index] if p.kind == "input" else outputs[p.index]
            if dtype not in _TRITON_DTYPES:
                raise kernel.fail(f"parameter '{p.name}' would point at {dtype}, which the kernel cannot take")
            signature[p.name] = "*" + _TRITON_DTYPES[dtype]
            if case.aligned:
                attrs[(position,)] = [["tt.divisibility", ALIGNMENT]]
        elif p.kind == "scalar":
            type_name = d._types[d.scalar_args[p.index].name]
            signature[p.name] = {"float": "fp32", "bool": "i1"}.get(type_name, "i64")
        else:  # expr
            signature[p.name] = "i32"
            if case.aligned and not kernel.jit.params[position].do_not_specialize:
                attrs[(position,)] = [["tt.divisibility", ALIGNMENT]]
    options = {"num_warps": variant.num_warps, "num_stages": variant.num_stages, "num_ctas": variant.num_ctas}

    def compile_for(arch: int) -> Any:
        try:
            source = ASTSource(kernel.jit, signature, constexprs, attrs)
            return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
        except Exception as err:  # noqa: BLE001 - Triton's own errors, reported with op, kernel and arch
            raise kernel.fail(
                f"Triton {triton.__version__} could not compile it for sm_{arch} (signature {signature}, constexprs "
                f"{constexprs}): {type(err).__name__}: {err}"
            ) from err

    return triton_images(compile_for, archs, kernel.fail)


def triton_images(
    compile_for: Callable[[int], Any], archs: list[tuple[int, bool]], fail: Callable[[str], Exception]
) -> _Compiled:
    """A Triton kernel's cubin for each of ``archs`` (``compile_for(arch)`` gives Triton's compiled kernel), and its
    PTX (:func:`with_ptx`), checked for what the generated launchers cannot provide; ``fail(why)`` makes the error to
    raise."""
    images, first, ptxas = [], None, ptx.ptxas_path() if with_ptx() else None
    for arch, _ in archs:
        compiled = compile_for(arch)
        md = compiled.metadata
        for what in ("global_scratch_size", "profile_scratch_size"):
            if getattr(md, what, 0):
                raise fail(f"the compiled kernel needs {what} {getattr(md, what)}; scratch is not provided yet")
        if getattr(md, "tensordesc_meta", None):
            raise fail("the compiled kernel takes tensor descriptors (TMA), which the launcher cannot pass")
        text = compiled.asm.get("ptx", "")
        exact = _ptx_target_is_exact(text)
        images.append(Image(arch, exact, "cubin", bytes(compiled.asm["cubin"])))
        if with_ptx():
            images.append(Image(arch, exact, "ptx", ptx.lower_version(text, arch, exact, ptxas).encode()))
        first = first or md
    return _Compiled(first.name, images, (32 * first.num_warps, 1, 1), first.shared, getattr(first, "num_ctas", 1))


def _cuda_include_dirs() -> list[str]:
    """The CUDA toolkit's headers (cuda_fp16.h, ...), which NVRTC does not carry: as nvcc finds them."""
    import os
    import site
    from pathlib import Path

    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = _build.nvcc_path()
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    candidates += [str(Path(p) / "nvidia" / "cu13") for p in site.getsitepackages()]
    for root in candidates:
        if root and (Path(root) / "include" / "cuda_fp16.h").is_file():
            return [str(Path(root) / "include")]
    return []


def _nvrtc_compile(kernel: CudaKernel, case: _Case, archs: list[tuple[int, bool]]) -> _Compiled:
    try:
        from cupy_backends.cuda.libs import nvrtc
    except ImportError as err:
        raise kernel.fail(
            f"compiling CUDA source needs NVRTC through CuPy (pip install cupy-cuda13x nvidia-cuda-nvrtc): {err}"
        ) from err
    d = kernel.declaration
    dtype = case.dtypes[[a.name for a in d.tensor_args].index(kernel.dtype_of)] if kernel.dtype_of else None
    function = kernel.function_for(dtype) if kernel.names else kernel.function_name
    images, lowered = [], function
    for arch, exact in archs:
        options = [*kernel.options, *(f"-I{d}" for d in _cuda_include_dirs()), f"-arch=sm_{arch}{'a' if exact else ''}"]
        with _nvrtc_program(nvrtc, kernel, function, options, f"for sm_{arch}") as program:
            if kernel.names:
                lowered = nvrtc.getLoweredName(program, function)
            images.append(Image(arch, exact, "cubin", bytes(nvrtc.getCUBIN(program))))
        if with_ptx():
            images.append(Image(arch, exact, "ptx", _nvrtc_ptx(nvrtc, kernel, function, options, arch, exact)))
    block = (*kernel.block, 1, 1)[:3]
    return _Compiled(lowered, images, block, kernel.shared_mem)


@contextlib.contextmanager
def _nvrtc_program(nvrtc: Any, kernel: CudaKernel, function: str, options: list[str], target: str) -> Iterator[Any]:
    """The kernel's NVRTC program compiled with ``options`` (``target`` says for what, in errors), destroyed after."""
    try:
        program = nvrtc.createProgram(kernel.code, f"{kernel.name}.cu", [], [])
    except Exception as err:  # noqa: BLE001 - libnvrtc missing or unusable
        raise kernel.fail(f"NVRTC is not usable (pip install nvidia-cuda-nvrtc): {err}") from err
    try:
        if kernel.names:
            nvrtc.addNameExpression(program, function)
        try:
            nvrtc.compileProgram(program, options)
        except Exception as err:  # noqa: BLE001 - a compile error: NVRTC's log says why
            log = nvrtc.getProgramLog(program)
            raise kernel.fail(f"NVRTC could not compile it {target} ({' '.join(options)}):\n{log}") from err
        yield program
    finally:
        nvrtc.destroyProgram(program)


def _nvrtc_ptx(nvrtc: Any, kernel: CudaKernel, function: str, options: list[str], arch: int, exact: bool) -> bytes:
    """The kernel's PTX for the virtual architecture ``compute_<arch>[a]`` (NVRTC gives PTX, not SASS, for a
    virtual one), compiled with the same options as its cubin."""
    virtual = [*options[:-1], f"-arch=compute_{arch}{'a' if exact else ''}"]
    with _nvrtc_program(nvrtc, kernel, function, virtual, f"to PTX for compute_{arch}") as program:
        text = nvrtc.getPTX(program)
    text = (text.decode() if isinstance(text, bytes) else text).rstrip("\0")
    return ptx.lower_version(text, arch, exact, ptx.ptxas_path()).encode()
