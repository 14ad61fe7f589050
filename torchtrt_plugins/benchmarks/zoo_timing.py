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
``ATOL``/``RTOL``); a converted graph whose outputs differ is recorded as a mismatch and not timed. Rows go to a
results CSV in the record format (``results.COLUMNS``): op ``zoo/<model>``, shape the input images'.
:func:`time_providers` (check against the reference, then time) also serves ``inductor_switch``.

    python -m torchtrt_plugins.benchmarks.zoo_timing [--models a,b] [--csv PATH] [--record PATH] [--quick]

(``torchtrt-plugins zoo --time`` is the same.) Needs torchvision and transformers; a GPU for ``do_bench``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from torchtrt_plugins.benchmarks.environment import environment
from torchtrt_plugins.benchmarks.results import Result, format_shape, format_table, write_results
from torchtrt_plugins.benchmarks.timing import _first_line, time_fn

#: Where the rows go without --csv.
DEFAULT_CSV = Path("bench_results") / "zoo.csv"
ATOL = RTOL = 1e-4
PROVIDERS = ("eager", "converted")


def mismatch(got, expected) -> str | None:
    """How ``got`` differs from ``expected`` (their tensors, within ``ATOL``/``RTOL``, NaN equal to NaN), or None."""
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


@dataclass(frozen=True)
class Call:
    """A provider of one case: ``fn`` is called once, its output checked against the reference's, then timed; with
    ``not_timed`` (``(status, reason)``, e.g. ``("skipped", "needs a CUDA GPU")``) it is not timed, and ``fn``, when
    given, is still called and checked (a mismatch is recorded as such)."""

    fn: Callable[[], object] | None = None
    not_timed: tuple[str, str] | None = None


def time_providers(
    op: str,
    shape: str,
    calls: Mapping[str, Call | Callable[[], object]],
    device: torch.device,
    timers: Sequence[str] = ("do_bench", "host"),
    quick: bool = False,
    reference: str = "eager",
) -> list[Result]:
    """The rows of one case: each provider of ``calls`` (a :class:`Call`, or its ``fn`` alone) by each timer, in that
    order. Every output is compared with ``reference``'s first; a provider whose output differs is recorded as a
    mismatch, one that raises as an error, and neither is timed."""
    calls = {name: call if isinstance(call, Call) else Call(call) for name, call in calls.items()}
    status: dict[str, tuple[str, str]] = {}
    outputs = {}
    for name, call in calls.items():
        if call.fn is None:
            status[name] = call.not_timed or ("error", "no call")
            continue
        try:
            outputs[name] = call.fn()
        except Exception as err:  # noqa: BLE001 - recorded, the run goes on
            status[name] = ("error", _first_line(err))
    for name, out in outputs.items():
        if name == reference:
            continue
        if reference not in outputs:
            status[name] = ("error", f"no {reference} output to check it against")
        elif (reason := mismatch(out, outputs[reference])) is not None:
            status[name] = ("mismatch", reason)
    outputs.clear()
    rows = []
    for name, call in calls.items():
        for timer in timers:
            row = Result(op, name, shape, "fp32", device.type, *(status.get(name) or call.not_timed or ("ok",)))
            row.timer = timer
            if row.status == "ok":
                try:
                    row.timing = time_fn(call.fn, device, quick=quick, timer=timer)
                except Exception as err:  # noqa: BLE001 - recorded, the run goes on
                    row.status, row.reason = "error", _first_line(err)
            rows.append(row)
    return rows


def time_model(
    name: str, device: torch.device, timers: Sequence[str] = ("do_bench", "host"), quick: bool = False
) -> list[Result]:
    """The rows of one zoo model: each provider by each timer, or a mismatch (converted against eager)."""
    calls, inputs = _calls(name, device)
    return time_providers(f"zoo/{name}", format_shape(inputs[0].shape), calls, device, timers, quick)


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


#: ``--device`` help by its default.
_DEVICE_HELP = {"cuda": "cuda (default) or cpu", "auto": "auto (default: cuda where there is a GPU), cuda or cpu"}


def command_line(
    argv: Sequence[str] | None, run: Callable[..., list[Result]], doc: str, models: str, **defaults: Any
) -> int:
    """A timing script's command line (``--models --device --csv --record --quick``), handed to ``run(names,
    device=, csv_path=, record=, quick=)``: ``doc`` the script's docstring, ``models`` what ``--models`` takes,
    ``defaults`` those of ``device``, ``csv`` and ``quick`` (its help). Exit status 1 where a row is an error or a
    mismatch, else 0."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    csv = defaults["csv"]
    parser.add_argument("--models", help=f"comma-separated, among {models} (default all)")
    parser.add_argument("--device", default=defaults["device"], help=_DEVICE_HELP[defaults["device"]])
    parser.add_argument("--csv", default=str(csv), help=f"results CSV to append to (default {csv})")
    parser.add_argument("--record", metavar="PATH", help="also append the rows to this CSV (the record of runs)")
    parser.add_argument("--quick", action="store_true", help=defaults["quick"])
    args = parser.parse_args(argv)
    names = [n.strip() for n in (args.models or "").split(",") if n.strip()] or None
    try:
        results = run(names, device=args.device, csv_path=args.csv, record=args.record, quick=args.quick)
    except ValueError as err:
        parser.error(str(err))
    return 1 if any(r.status in ("error", "mismatch") for r in results) else 0


def main(argv: Sequence[str] | None = None) -> int:
    quick, models = "GPU time only, shorter timing", "the zoo's (torchtrt_plugins.zoo.MODELS)"
    return command_line(argv, run, __doc__, models, device="cuda", csv=DEFAULT_CSV, quick=quick)


if __name__ == "__main__":
    sys.exit(main())
