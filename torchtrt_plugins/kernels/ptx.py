"""The PTX ISA version of a kernel's PTX image. A CUDA driver JIT-compiles PTX only of an ISA it knows
(CUDA_ERROR_UNSUPPORTED_PTX_VERSION otherwise), and each compiler writes its own: Triton 3.9 writes its ptxas's
(8.8 for sm_80, 9.4 for sm_90a), NVRTC 13.5 writes 9.5, while a CUDA 13.0 driver knows up to 9.0. So each PTX image
is lowered to the oldest ISA its target accepts, where ptxas assembles it so (the kernel uses nothing newer), as
Triton itself rewrites the ``.version`` line to its ptxas's."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from .. import _build

# The PTX ISA that introduced each target (NVIDIA's PTX ISA manual, "PTX ISA Version"): (arch, arch-specific) ->
# (major, minor). A target not listed keeps its compiler's version.
ISA_OF_TARGET = {
    (80, False): (7, 0),
    (86, False): (7, 1),
    (87, False): (7, 4),
    (89, False): (7, 8),
    (90, False): (7, 8),
    (90, True): (8, 0),
    (100, False): (8, 6),
    (100, True): (8, 6),
    (103, False): (8, 8),
    (103, True): (8, 8),
    (120, False): (8, 7),
    (120, True): (8, 7),
    (121, False): (8, 8),
    (121, True): (8, 8),
}

_VERSION = re.compile(r"^[ \t]*\.version[ \t]+(\d+)\.(\d+)[ \t]*$", re.MULTILINE)


def version(ptx: str) -> tuple[int, int] | None:
    """The PTX ISA version ``ptx`` declares (its ``.version`` line), or None."""
    match = _VERSION.search(ptx)
    return (int(match.group(1)), int(match.group(2))) if match else None


def ptxas_path() -> str | None:
    """A ptxas to check lowered PTX with: the CUDA toolkit's (beside the nvcc the build uses), else Triton's."""
    nvcc = _build.nvcc_path()
    if nvcc and (Path(nvcc).resolve().parent / "ptxas").is_file():
        return str(Path(nvcc).resolve().parent / "ptxas")
    try:
        import triton
    except ImportError:
        return shutil.which("ptxas")
    bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"
    return str(bundled) if bundled.is_file() else shutil.which("ptxas")


def assembles(ptx: str, arch: int, exact: bool, ptxas: str) -> bool:
    """Whether ``ptxas`` assembles ``ptx`` for ``sm_<arch>[a]``."""
    with tempfile.TemporaryDirectory() as directory:
        source = Path(directory) / "kernel.ptx"
        source.write_text(ptx)
        target = f"sm_{arch}{'a' if exact else ''}"
        command = [ptxas, f"-arch={target}", "-o", str(Path(directory) / "kernel.cubin"), str(source)]
        return subprocess.run(command, capture_output=True).returncode == 0


def lower_version(ptx: str, arch: int, exact: bool, ptxas: str | None) -> str:
    """``ptx`` (for ``sm_<arch>[a]``) declaring the oldest PTX ISA its target accepts where ``ptxas`` assembles it
    so; else, or with no ptxas, unchanged."""
    declared, floor = version(ptx), ISA_OF_TARGET.get((arch, exact))
    if declared is None or floor is None or ptxas is None or declared <= floor:
        return ptx
    match = _VERSION.search(ptx)
    lowered = f"{ptx[: match.start()]}.version {floor[0]}.{floor[1]}{ptx[match.end() :]}"
    return lowered if assembles(lowered, arch, exact, ptxas) else ptx
