"""roi_align and nms: torchvision's CUDA kernels vs ours (the launchers the plugins run), GPU time per call. A
standalone script, not yet a ``BENCHMARK`` of ``torchtrt-plugins bench``.

    python -m torchtrt_plugins.benchmarks.vision_ops [--quick] [--csv bench_results/vision.csv]

Timing: ``common.time_fn`` (do_bench or CUDA events after warm-up); median, 20th and 80th percentiles in ms. Our
nms never synchronizes with the host (its output count stays on the device); torchvision's copies its overlap
matrix to the host. Without a GPU or torchvision it says so and exits.
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import torch

from torchtrt_plugins.benchmarks import common


def _boxes(n: int):
    corner = torch.rand(n, 2, device="cuda") * 1000
    return torch.cat([corner, corner + torch.rand(n, 2, device="cuda") * 100 + 1], 1), torch.rand(n, device="cuda")


def cases(quick: bool):
    nms_sizes = [1000, 5000] if quick else [1000, 5000, 20000]
    for n in nms_sizes:
        dets, scores = _boxes(n)
        yield "nms", f"N={n}", (dets, scores, 0.5)
    roi_cases = [(1, 256, 64, 64, 512)] if quick else [(1, 256, 64, 64, 512), (4, 256, 100, 152, 1000)]
    for batch, channels, height, width, k in roi_cases:
        image = torch.randn(batch, channels, height, width, device="cuda")
        corner = torch.rand(k, 2, device="cuda") * min(height, width) * 4
        rois = torch.cat([torch.randint(0, batch, (k, 1), device="cuda").float(), corner, corner + 64], 1)
        yield "roi_align", f"{batch}x{channels}x{height}x{width} K={k} 7x7", (image, rois, 0.25, 7, 7, 2, True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--csv", default="bench_results/vision.csv")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("vision_ops: skipped: no CUDA GPU visible to torch")
        return 0
    from torchtrt_plugins import sdk, vision

    if not vision.TORCHVISION:
        print("vision_ops: torchvision's ops are not loaded; timing ours only")
    device = torch.device("cuda")
    rows = []
    for op, case, call_args in cases(args.quick):
        providers = {"ours": lambda a=call_args, op=op: sdk.launch(getattr(vision, op.upper()), *a)}
        if vision.TORCHVISION:
            providers["torchvision"] = lambda a=call_args, op=op: getattr(torch.ops.torchvision, op)(*a)
        for provider, fn in providers.items():
            timing = common.time_fn(fn, device, quick=args.quick)
            rows.append([op, provider, case, f"{timing.median_ms:.4f}", f"{timing.p20_ms:.4f}", f"{timing.p80_ms:.4f}"])
            print(",".join(rows[-1]), flush=True)
    path = Path(args.csv)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as handle:
        csv.writer(handle).writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
