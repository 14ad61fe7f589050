"""Prints inductor's generated code for add_rms_norm (the benchmark's unfused ops) at three bf16 shapes:
TORCH_LOGS=output_code python3 inductor_dump.py (the log this directory holds was made from this script's first form,
which differed only in its imports, a cache directory and layout)."""

import torch


def f(x, r, w):
    r.add_(x)
    h = r.float()
    return (h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + 1e-6) * (w.float() + 0.0)).to(x.dtype)


for shape in [(16384, 8192), (65536, 4096), (4096, 12288)]:
    torch._dynamo.reset()
    x = torch.randn(*shape, dtype=torch.bfloat16, device="cuda")
    r = torch.randn_like(x)
    w = torch.rand(shape[1], dtype=x.dtype, device="cuda")
    g = torch.compile(f, dynamic=False)
    g(x, r, w)
    torch.cuda.synchronize()
    print("done", shape, flush=True)
