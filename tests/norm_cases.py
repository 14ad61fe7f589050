"""What the GPU tests of the fp32-accumulating norms (rms_norm, add_rms_norm) both run: every dtype, and the shapes
each op's kernels must take whatever their configurations (tiny, odd, 3-d, empty, a decode batch, a square prefill)."""

import torch

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
COMMON_SHAPES = [
    (1, 1),
    (3, 7),
    (5, 123, 123),
    (8, 4096),
    (4096, 4096),
    (0, 64),
    (1001, 64),
    (33, 8),
    (77, 128),
    (9, 2048),
    (1024, 1536),
]


def shape_id(shape: tuple[int, ...]) -> str:
    return "x".join(map(str, shape))
