"""The decoder block compiled by inductor, without (``inductor``) or with (``ours``) our lowering pass, warmed up and
then called three times inside a CUDA profiler range, for Nsight Compute: which kernel reads what from DRAM with the
L2 left as the kernels before it left it.

    ncu --profile-from-start off --cache-control none --clock-control none \\
        --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum --csv --page raw \\
        python scripts/decoder_ncu.py ours [1x128x2048]
"""

import copy
import sys

import torch

from torchtrt_plugins import lowering
from torchtrt_plugins.benchmarks import bench_model

variant = sys.argv[1] if len(sys.argv) > 1 else "ours"
if variant not in ("inductor", "ours"):
    sys.exit(f"decoder_ncu.py: variant must be 'inductor' or 'ours', not {variant!r}")
shape = tuple(int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "1x128x2048").split("x"))
block, x = bench_model.make_case(shape, torch.bfloat16, torch.device("cuda")).inputs
options = lowering.inductor_options() if variant == "ours" else {}
with torch.inference_mode():
    model = torch.compile(copy.deepcopy(block), options=options)
    for _ in range(10):
        model(x)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(3):
        model(x)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
