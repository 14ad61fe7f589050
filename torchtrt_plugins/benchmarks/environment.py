"""Where the benchmarks run: the environment recorded with every result, and what each provider needs to run here
(a GPU, inductor, TensorRT, the harness, ...), each need answering with the reason it is not met."""

from __future__ import annotations

import datetime
import importlib
import importlib.util
import os
import platform
import shutil
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch

from torchtrt_plugins import _compat
from torchtrt_plugins.benchmarks.timing import TIMERS, _first_line, timer_name, triton_reason

# ------------------------------------------------------------------------------------------ environment


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def tensorrt_version() -> str:
    trt = _compat.tensorrt()
    if trt is None:
        return "none"
    version = getattr(trt, "__version__", "?")
    return version if trt.__name__ == "tensorrt" else f"{trt.__name__} {version}"


@dataclass(frozen=True)
class Environment:
    device: str
    gpu: str
    torch: str
    cuda: str
    tensorrt: str
    timestamp: str
    #: The source checkout's commit (``+dirty`` with uncommitted changes); empty for an installed wheel.
    commit: str = ""

    def describe(self) -> str:
        return (
            f"device={self.device}  gpu={self.gpu}  torch={self.torch}  cuda={self.cuda}  "
            f"tensorrt={self.tensorrt}  timer={timer_name(torch.device(self.device))}"
        )


def environment(device: torch.device) -> Environment:
    """What a row was measured on. On CPU the ``gpu`` column says ``cpu: <model>`` so rows are never mistaken."""
    gpu = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu: {_cpu_name()}"
    return Environment(
        device=device.type,
        gpu=gpu,
        torch=torch.__version__,
        cuda=torch.version.cuda or "none",
        tensorrt=tensorrt_version(),
        timestamp=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        commit=source_commit(),
    )


def source_commit(folder: os.PathLike | None = None) -> str:
    """The commit of the git checkout holding ``folder`` (default: this package's), ``+dirty`` when its tracked files
    differ from it; empty where there is none (an installed wheel) or no git."""
    folder = os.fspath(folder) if folder is not None else os.path.dirname(os.path.abspath(__file__))
    git = shutil.which("git")
    if git is None:
        return ""

    def ask(*args: str) -> str | None:
        try:
            done = subprocess.run([git, "-C", folder, *args], capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    commit = ask("rev-parse", "--short=12", "HEAD")
    # A package installed into a virtual environment that lies inside some repository is not that repository's.
    if not commit or ask("ls-files", "--error-unmatch", "__init__.py") is None:
        return ""
    changed = ask("status", "--porcelain", "--untracked-files=no")
    return f"{commit}+dirty" if changed else commit


# ------------------------------------------------------------------------------------------ requirements


@dataclass(frozen=True)
class RunContext:
    device: torch.device
    quick: bool = False
    #: Each provider is timed with every one of these, side by side (one result row each).
    timers: tuple[str, ...] = ("do_bench",)
    repeats: int = 1
    #: Each case is built and timed this many times, its buffers placed anew each time (common._run_case).
    placements: int = 1

    def __post_init__(self) -> None:
        unknown = [t for t in self.timers if t not in TIMERS]
        if unknown or not self.timers:
            raise ValueError(f"unknown timer(s) {unknown or list(self.timers)}; use any of {list(TIMERS)}")
        if self.repeats < 1:
            raise ValueError(f"repeats must be >= 1, got {self.repeats}")
        if self.placements < 1:
            raise ValueError(f"placements must be >= 1, got {self.placements}")


Requirement = Callable[[RunContext], str | None]


def needs_cuda(ctx: RunContext) -> str | None:
    return None if ctx.device.type == "cuda" else "needs a CUDA GPU (this run is on CPU)"


def needs_eager_kernel(entry: Any) -> Requirement:
    """The op's eager CUDA kernel on this device: its launcher library (prebuilt in a wheel, else built here); on CPU
    the reference kernel runs."""

    def check(ctx: RunContext) -> str | None:
        if ctx.device.type != "cuda":
            return None
        declaration = entry.declaration
        if declaration.library is None:
            return f"{entry.spec.qualname} is declared without a launcher library: it has no eager CUDA kernel"
        try:
            declaration.library.launchers()
        except Exception as err:  # noqa: BLE001 - whatever keeps the library from loading is the reason
            return f"{entry.spec.qualname}: its launcher library is not available ({_first_line(err)})"
        return None

    return check


def needs_inductor(ctx: RunContext) -> str | None:
    if ctx.device.type == "cuda":
        reason = triton_reason()
        return f"torch.compile (inductor) on GPU: {reason}" if reason else None
    if ctx.quick:
        return "not run on CPU with --quick (inductor's C++ compile takes ~1 min cold); run without --quick"
    if shutil.which(os.environ.get("CXX", "c++")) is None:
        return "torch.compile (inductor) on CPU needs a C++ compiler (c++ not found)"
    return None


def needs_tensorrt(ctx: RunContext) -> str | None:
    missing = []
    if importlib.util.find_spec("tensorrt") is None:
        missing.append("tensorrt")
    if _compat.torch_tensorrt() is None:
        missing.append("torch_tensorrt")
    if missing:
        return f"{' and '.join(missing)} not installed (pip install -e '.[trt]' on a machine with TensorRT)"
    return None


def needs_sdk_build(ctx: RunContext) -> str | None:
    """An op declared with ``torchtrt_plugins.declare`` runs from a library the SDK builds here (nvcc, headers)."""
    from torchtrt_plugins import _build

    missing = _build.sdk_build_prerequisites()
    return f"cannot build declared-op libraries here: {'; '.join(missing)}" if missing else None


def vision() -> Any:
    """``torchtrt_plugins.vision`` (our declarations of torchvision's nms and roi_align; it imports torchvision)."""
    return importlib.import_module("torchtrt_plugins.vision")


def needs_torchvision(ctx: RunContext) -> str | None:
    """torchvision's own ops, the peer of our declared torchvision ops (they do not load next to a CPU-only torch).

    Looks for torchvision before importing ``torchtrt_plugins.vision``: without torchvision that module defines the
    two ops itself and declares them on a library that must be built, which a benchmark that only asks whether it
    can run must not leave behind (``load_plugins`` would then need that library)."""
    try:
        importlib.import_module("torchvision")
    except Exception as err:  # noqa: BLE001 - absent, or unable to load with this torch
        return f"torchvision's ops are not loaded: {_first_line(err)}"
    try:
        if vision().TORCHVISION:
            return None
    except Exception as err:  # noqa: BLE001 - reported as the reason
        return f"torchtrt_plugins.vision does not import: {_first_line(err)}"
    return f"torchvision's ops are not loaded with torch {torch.__version__} (e.g. a CPU-only build)"


HARNESS_HOOK = "bench_enqueue"


def harness_hook() -> Callable[..., Any] | None:
    """``torchtrt_plugins.testing.bench_enqueue`` when the conformance harness provides it.

    Contract: ``bench_enqueue(op, inputs, tactic=..., iters=..., fields=...) -> list[float]``: ``op`` the op
    name, ``inputs`` the CUDA tensors in the spec's input order, ``fields`` the plugin fields by name,
    ``tactic`` a tactic value (0: the plugin's own choice). The harness runs the plugin lifecycle up to
    ``enqueue`` and returns milliseconds per ``enqueue``, each bracketed by its own CUDA events. For an op declared
    with ``torchtrt_plugins.declare``, ``op`` is the converter's ``PluginCall`` and ``library=`` its plugin library.
    """
    try:
        testing = importlib.import_module("torchtrt_plugins.testing")
    except Exception:  # noqa: BLE001 - absent or broken: reported as a skip reason
        return None
    hook = getattr(testing, HARNESS_HOOK, None)
    return hook if callable(hook) else None


def needs_harness(ctx: RunContext) -> str | None:
    if harness_hook() is None:
        return f"harness not available (torchtrt_plugins.testing.{HARNESS_HOOK} not found)"
    return None


def unmet(requirements: Iterable[Requirement], ctx: RunContext) -> str | None:
    """Every unmet requirement, joined: the user learns all that is missing at once."""
    reasons = [reason for reason in (req(ctx) for req in requirements) if reason]
    return "; ".join(reasons) if reasons else None
