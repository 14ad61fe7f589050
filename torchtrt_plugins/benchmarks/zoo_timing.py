"""The zoo's models timed eager vs converted (issue 45, item 6): for each model of ``torchtrt_plugins.zoo``, the time
per call of

- ``eager``: the model as its library ships it (torchvision's loops and guards, its own CUDA kernels where its ops
  library loads);
- ``converted``: its converted graph (``zoo.converted``: exported within ``vision.exportable()``, our lowering
  applied) called as a module: the declared ops run their eager kernels (the launchers their plugins enqueue, or
  torchvision's own where its ops library is loaded), everything else PyTorch's.

Timers: ``do_bench`` (GPU time per call, L2 flushed before each: these models synchronize with the host, for their
data-dependent sizes, so none can be captured in a CUDA graph, and the time includes the GPU's wait for the host) and
``host`` (wall time per call). Before timing, the converted graph's outputs are compared with eager's (within
``ATOL``/``RTOL``); a model whose outputs differ is recorded as a mismatch and not timed. Rows go to a results CSV in
the record format (``results.COLUMNS``): op ``zoo/<model>``, shape the input images'.

    python -m torchtrt_plugins.benchmarks.zoo_timing [--models a,b] [--csv PATH] [--record PATH] [--quick]

(``torchtrt-plugins zoo --time`` is the same.) Needs torchvision and transformers; a GPU for ``do_bench``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from torchtrt_plugins.benchmarks.environment import environment
from torchtrt_plugins.benchmarks.results import Result, format_shape, format_table, write_results
from torchtrt_plugins.benchmarks.timing import time_fn

#: Where the rows go without --csv.
DEFAULT_CSV = Path("bench_results") / "zoo.csv"
ATOL = RTOL = 1e-4
PROVIDERS = ("eager", "converted")


def _mismatch(got, expected) -> str | None:
    got, expected = torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(expected)
    if len(got) != len(expected):
        return f"{len(got)} outputs, eager has {len(expected)}"
    for index, (g, e) in enumerate(zip(got, expected)):
        try:
            torch.testing.assert_close(g, e, atol=ATOL, rtol=RTOL, equal_nan=True)
        except AssertionError as err:
            return f"output {index}: {str(err).splitlines()[0]}"
    return None


def _calls(name: str, device: torch.device) -> tuple[dict[str, Callable[[], object]], tuple[torch.Tensor, ...]]:
    from torchtrt_plugins import zoo

    program, model, inputs = zoo.export(name, device=device)
    graph = zoo.converted(program)

    def eager():
        with torch.no_grad():
            return model(*inputs)

    def converted():
        with torch.no_grad():
            return graph(*inputs)

    return {"eager": eager, "converted": converted}, inputs


def time_model(
    name: str, device: torch.device, timers: Sequence[str] = ("do_bench", "host"), quick: bool = False
) -> list[Result]:
    """The rows of one zoo model: each provider by each timer, or a mismatch (converted against eager)."""
    calls, inputs = _calls(name, device)
    shape, op = format_shape(inputs[0].shape), f"zoo/{name}"
    reason = _mismatch(calls["converted"](), calls["eager"]())
    rows = []
    for provider, fn in calls.items():
        for timer in timers:
            row = Result(op, provider, shape, "fp32", str(device), "ok", timer=timer)
            if reason is not None:
                row.status, row.reason = "mismatch", reason
            else:
                row.timing = time_fn(fn, device, quick=quick, timer=timer)
            rows.append(row)
    return rows


def run(
    names: Sequence[str] | None = None,
    *,
    device: str | torch.device = "cuda",
    csv_path: str | Path = DEFAULT_CSV,
    record: str | Path | None = None,
    quick: bool = False,
    log: Callable[[str], None] = print,
) -> list[Result]:
    """Time every model of ``names`` (default: the whole zoo), append the rows to ``csv_path`` (and ``record``), print
    the table; returns the rows."""
    from torchtrt_plugins import zoo

    unknown = [name for name in names or () if name not in zoo.MODELS]
    if unknown:
        raise ValueError(f"zoo_timing: unknown models {unknown}; the zoo has {list(zoo.MODELS)}")
    device = torch.device(device)
    timers = ("do_bench",) if quick else ("do_bench", "host")
    results = []
    for name in names or list(zoo.MODELS):
        begin = time.perf_counter()
        rows = time_model(name, device, timers, quick)
        results += rows
        status = next((f"{r.status}: {r.reason}" for r in rows if r.status != "ok"), "ok")
        log(f"zoo/{name}: {status} ({time.perf_counter() - begin:.1f} s)")
    path = write_results(results, environment(device), csv_path, record)
    log("")
    log(format_table(results))
    log(f"rows: {path}")
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated zoo model names (default all)")
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument("--csv", default=str(DEFAULT_CSV), help=f"results CSV to append to (default {DEFAULT_CSV})")
    parser.add_argument("--record", metavar="PATH", help="also append the rows to this CSV (the record of runs)")
    parser.add_argument("--quick", action="store_true", help="GPU time only, shorter timing")
    args = parser.parse_args(argv)
    names = [n.strip() for n in (args.models or "").split(",") if n.strip()] or None
    results = run(names, device=args.device, csv_path=args.csv, record=args.record, quick=args.quick)
    return 1 if any(r.status != "ok" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
