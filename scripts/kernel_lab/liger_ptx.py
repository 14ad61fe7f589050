"""What Liger-Kernel's fused add + RMSNorm forward compiles to, on a CPU machine: Triton compiles the kernel ahead of
time for sm_90 with the launch Liger makes for a row width (BLOCK_SIZE and warps from its calculate_settings, casting
mode "gemma" as the benchmark asks, pointers, strides and width divisible by 16 as Triton specializes them), and this
prints its global loads and stores, barriers and thread count in order, then the registers ptxas gives it.

    python scripts/kernel_lab/liger_ptx.py [bf16|fp16|fp32] [width]    (liger-kernel and triton importable)
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
from pathlib import Path

import triton
from liger_kernel.ops.fused_add_rms_norm import _fused_add_rms_norm_forward_kernel
from liger_kernel.ops.utils import calculate_settings
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

SHOWN = re.compile(r"\b(ld|st)\.global|bar\.sync|griddepcontrol|createpolicy|\.reqntid|\.maxntid")


def main() -> None:
    dtype = sys.argv[1] if len(sys.argv) > 1 else "bf16"
    width = int(sys.argv[2]) if len(sys.argv) > 2 else 12288
    block, warps = calculate_settings(width)
    signature = {}
    for name in ("Y", "S", "X", "R", "W"):
        signature[f"{name}_ptr"] = f"*{dtype}"
        signature[f"{name}_row_stride"] = "i32"
    signature |= {"RSTD_ptr": "*fp32", "RSTD_row_stride": "i32", "n_cols": "i32", "eps": "fp32", "offset": "fp32"}
    signature |= {"casting_mode": "constexpr", "BLOCK_SIZE": "constexpr"}
    divisible = [i for i, name in enumerate(signature) if name.endswith(("_ptr", "_stride")) or name == "n_cols"]
    source = ASTSource(
        fn=_fused_add_rms_norm_forward_kernel,
        signature=signature,
        constexprs={"casting_mode": 1, "BLOCK_SIZE": block},
        attrs={(i,): [["tt.divisibility", 16]] for i in divisible},
    )
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    ptx = compiled.asm["ptx"]
    print(f"Liger fused add + RMSNorm forward, {dtype}, width {width}: BLOCK_SIZE {block}, {warps} warps")
    for line in ptx.splitlines():
        if SHOWN.search(line):
            print("   ", line.strip())
    # This nvcc's ptxas may know an older PTX ISA than the Triton that wrote it; the instructions above are in both.
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "kernel.ptx"
        path.write_text(re.sub(r"^\.version \d+\.\d+", ".version 8.0", ptx, count=1, flags=re.M))
        result = subprocess.run(
            ["ptxas", "-arch=sm_90a", "-v", str(path), "-o", str(Path(tmp) / "kernel.cubin")],
            capture_output=True,
            text=True,
        )
    used = re.search(r"Used \d+ registers", result.stderr)
    print("ptxas:", used.group(0) if used else result.stderr.strip())


if __name__ == "__main__":
    main()
