"""Inductor's code for a segment, on the build machine, with no GPU: its Triton kernels compiled to cubins and its
launch sequence recorded (static shapes).

Inductor lowers the segment for the fake sm_90 device (``fake_device``) and generates its Python wrapper as it would
for ``torch.compile``. The wrapper is then run once on meta tensors with its allocations and kernel launches
recorded, which gives the launch sequence exactly as Inductor wrote it: each kernel, its grid, and what each argument
points at (an input, an output, or an intermediate buffer, with its offset). Any ATen call left in the wrapper (a
matmul, a fallback kernel, a buffer zeroed with ``zero_``) refuses the segment: the plugin runs Triton kernels only.
Each kernel is compiled with Inductor's own compile options for its first config: without a GPU nothing can be
benchmarked, so where Inductor would autotune between configs the first is taken.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..kernels.compile import _Compiled, triton_images
from .fake_device import fake_cuda_device

#: Bytes each intermediate buffer's offset in the workspace is a multiple of (Inductor assumes 16-byte aligned
#: pointers when it specializes a kernel).
ALIGNMENT = 256

#: The ATen calls the recorded wrapper may make: its allocations and views over them.
_PLUMBING = frozenset({"aten.empty_strided.default", "aten.as_strided.default", "aten.alias.default"})


class Refused(Exception):
    """A segment Inductor's code cannot become a plugin of; the message says why."""


@dataclass(frozen=True)
class Pointer:
    """A kernel argument pointing into an input, an output or the workspace (``where``), ``offset`` bytes in."""

    where: str
    index: int
    offset: int


@dataclass(frozen=True)
class Value:
    """A kernel argument passed by value: a Triton type (``i32``, ``i64``, ``fp32``, ``i1``) and its value."""

    type: str
    value: int | float


@dataclass
class Launch:
    kernel: int
    grid: tuple[int, int, int]
    args: list[Pointer | Value]


@dataclass
class CompiledSegment:
    """The segment's kernels (cubins per architecture), its launches in order and the workspace they need."""

    names: list[str] = field(default_factory=list)
    kernels: list[_Compiled] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    workspace: int = 0


@contextlib.contextmanager
def _inductor(fake_mode: Any) -> Iterator[None]:
    from torch._inductor import config
    from torch._inductor.debug import DebugContext
    from torch._inductor.virtualized import V

    options = {
        "compile_threads": 1,
        "cpp_wrapper": False,
        "triton.cudagraphs": False,
        "memory_planning": False,
        "size_asserts": False,
        "nan_asserts": False,
    }
    with fake_cuda_device(), V.set_fake_mode(fake_mode), config.patch(options), DebugContext():
        yield


def _fake_inputs(mode: Any, metas: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    with mode:
        return [torch.empty(tuple(m.shape), dtype=m.dtype, device="cuda") for m in metas]


def _decomposed(module: torch.fx.GraphModule, inputs: Sequence[torch.Tensor]) -> torch.fx.GraphModule:
    """The segment in the ATen subset Inductor lowers (its own decompositions applied, as ``torch.compile`` does)."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(module, decomposition_table=select_decomp_table(), tracing_mode="fake")(*inputs)


def _lower(module: torch.fx.GraphModule, metas: Sequence[torch.Tensor], generate: bool) -> tuple[list[str], str]:
    """Inductor's lowering of ``module`` on inputs like ``metas`` (the fake sm_90 device): the ATen calls its code
    would make (its extern kernels: matmuls, convolutions, random seeds, fallbacks) and, with ``generate`` and none of
    them, its Python wrapper."""
    from torch._inductor import ir
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode

    mode = FakeTensorMode()
    inputs = _fake_inputs(mode, metas)
    with _inductor(mode):
        graph = GraphLowering(_decomposed(module, inputs), example_inputs=inputs)
        with V.set_graph_handler(graph):
            graph.run(*inputs)
            calls = [
                str(getattr(operation, "python_kernel_name", None) or type(operation).__name__)
                for operation in graph.operations
                if isinstance(operation, ir.ExternKernel) and not isinstance(operation, ir.NopKernel)
            ]
            if calls or not generate:
                return calls, ""
            code = graph.codegen()
    code = code[0] if isinstance(code, tuple) else code
    return calls, getattr(code, "value", code)


def aten_calls(module: torch.fx.GraphModule, metas: Sequence[torch.Tensor]) -> list[str]:
    """The ATen calls Inductor's code for ``module`` would make, by name; empty when it is Triton kernels only."""
    return _lower(module, metas, generate=False)[0]


class _KernelSource:
    """What ``async_compile.triton(name, source)`` returns while the wrapper is recorded: its launches are noted."""

    def __init__(self, recorder: _Recorder, name: str, source: str):
        self.recorder, self.name, self.source = recorder, name, source

    def run(self, *args: Any, stream: Any = None, **kwargs: Any) -> None:
        if kwargs:
            raise Refused(f"kernel {self.name} is launched with {sorted(kwargs)}, which the plugin cannot pass")
        self.recorder.launches.append((self, args))


class _Recorder:
    def __init__(self) -> None:
        self.launches: list[tuple[_KernelSource, tuple]] = []
        self.buffers: list[torch.Tensor] = []  # kept alive: a freed meta storage's address may be reused

    def empty_strided(self, size: Sequence[int], stride: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        tensor = torch.empty_strided(tuple(size), tuple(stride), dtype=dtype, device="meta")
        self.buffers.append(tensor)
        return tensor


class _NoDeviceGuard:
    def __init__(self, *args: Any) -> None:
        pass

    def __enter__(self) -> _NoDeviceGuard:
        return self

    def __exit__(self, *exc: Any) -> bool:
        return False


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


def _record(code: str, metas: Sequence[torch.Tensor]) -> tuple[_Recorder, list[torch.Tensor], Sequence[Any]]:
    """Runs the wrapper's ``call`` on meta tensors, its launches and allocations recorded."""
    from torch._inductor.async_compile import AsyncCompile
    from torch.utils._python_dispatch import TorchDispatchMode

    from .fake_device import _replace

    recorder = _Recorder()

    class NoAtenCalls(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if str(func) not in _PLUMBING:
                raise Refused(f"Inductor's code for it calls ATen ({func}), which the plugin cannot run")
            return func(*args, **(kwargs or {}))

    inputs = [torch.empty(tuple(m.shape), dtype=m.dtype, device="meta") for m in metas]
    with contextlib.ExitStack() as stack:
        _replace(stack, AsyncCompile, "triton", lambda self, name, source, **kw: _KernelSource(recorder, name, source))
        _replace(stack, AsyncCompile, "wait", lambda self, scope: None)
        _replace(stack, torch._C, "_cuda_getCurrentRawStream", lambda device: 0)
        _replace(stack, torch._C._dynamo.guards, "_empty_strided_cuda", recorder.empty_strided)
        _replace(stack, torch.cuda, "_DeviceGuard", _NoDeviceGuard)
        _replace(stack, torch.cuda, "set_device", lambda device: None)
        scope: dict[str, Any] = {"__name__": "torchtrt_plugins_inductor_wrapper"}
        exec(compile(code, "<inductor wrapper>", "exec"), scope)  # noqa: S102 - Inductor's own generated code
        with NoAtenCalls():
            outputs = scope["call"](list(inputs))
    return recorder, inputs, outputs


def _check_outputs(outputs: Sequence[Any], recorder: _Recorder) -> dict[int, int]:
    """Storage -> output index, each output a whole contiguous buffer Inductor allocated (the plugin's output is
    written in place of it)."""
    allocated = {_storage(b) for b in recorder.buffers}
    by_storage: dict[int, int] = {}
    for index, out in enumerate(outputs):
        if not isinstance(out, torch.Tensor):
            raise Refused(f"output {index} is not a tensor ({type(out).__name__})")
        storage = _storage(out)
        if storage not in allocated:
            raise Refused(f"output {index} is an input or a view of one; the plugin's outputs are buffers of their own")
        if storage in by_storage:
            raise Refused(f"outputs {by_storage[storage]} and {index} share a buffer")
        whole = out.untyped_storage().nbytes() == out.numel() * out.element_size()
        if out.storage_offset() != 0 or not out.is_contiguous() or not whole:
            raise Refused(f"output {index} is not a whole contiguous buffer (strides {out.stride()})")
        by_storage[storage] = index
    return by_storage


def _workspace_layout(recorder: _Recorder, outputs_by_storage: dict[int, int]) -> tuple[dict[int, int], int]:
    offsets, size = {}, 0
    for buffer in recorder.buffers:
        storage = _storage(buffer)
        if storage in outputs_by_storage or storage in offsets:
            continue
        offsets[storage] = size
        size += -(-buffer.untyped_storage().nbytes() // ALIGNMENT) * ALIGNMENT
    return offsets, size


def _autotuner(source: _KernelSource) -> Any:
    from torch._inductor.codecache import PyCodeCache

    return getattr(PyCodeCache.load(source.source), source.name)


def _compile(autotuner: Any, config: Any, archs: list[tuple[int, bool]], name: str) -> _Compiled:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    meta = autotuner._create_compile_meta(config)
    options = autotuner._create_compile_options(config, meta)
    for option in ("launch_cooperative_grid", "launch_pdl"):
        if options.get(option):
            raise Refused(f"kernel {name} needs {option}, which the plugin's launcher does not do")
    source = ASTSource(autotuner.fn, meta["signature"], meta["constants"], meta["configs"][0])

    def compile_for(arch: int) -> Any:
        try:
            return triton.compile(source, target=GPUTarget("cuda", arch, 32), options=options)
        except Exception as err:  # noqa: BLE001 - Triton's own error, reported as the segment's refusal
            raise Refused(f"Triton could not compile kernel {name} for sm_{arch}: {type(err).__name__}: {err}") from err

    return triton_images(compile_for, archs, lambda why: Refused(f"kernel {name}: {why}"))


def compile_segment(
    module: torch.fx.GraphModule, metas: Sequence[torch.Tensor], archs: list[tuple[int, bool]]
) -> CompiledSegment:
    """Inductor's kernels and launch sequence for ``module`` on inputs of ``metas``' shapes and dtypes (static),
    compiled for ``archs``. Raises :class:`Refused` with the reason where the plugin cannot run that code."""
    from torch._inductor.runtime.triton_heuristics import GridExpr

    calls, code = _lower(module, metas, generate=True)
    if calls:
        raise Refused(f"Inductor's code for it calls ATen ({', '.join(sorted(set(calls)))})")
    recorder, inputs, outputs = _record(code, metas)
    outputs_by_storage = _check_outputs(outputs, recorder)
    offsets, workspace = _workspace_layout(recorder, outputs_by_storage)
    inputs_by_storage = {_storage(t): i for i, t in enumerate(inputs)}
    segment = CompiledSegment(workspace=workspace)
    compiled: dict[str, int] = {}
    with fake_cuda_device():
        for source, args in recorder.launches:
            autotuner = _autotuner(source)
            config = autotuner.configs[0]
            if source.name not in compiled:
                compiled[source.name] = len(segment.kernels)
                segment.names.append(source.name)
                segment.kernels.append(_compile(autotuner, config, archs, source.name))
            signature = autotuner.triton_meta["signature"]
            names = list(autotuner.fn.arg_names)[: len(args)]
            named, launch_args = {}, []
            for name, value in zip(names, args):
                named[name] = value
                kind = signature[name]
                if kind == "constexpr":
                    continue
                if isinstance(value, torch.Tensor):
                    storage, offset = _storage(value), value.storage_offset() * value.element_size()
                    if storage in inputs_by_storage:
                        launch_args.append(Pointer("input", inputs_by_storage[storage], offset))
                    elif storage in outputs_by_storage:
                        launch_args.append(Pointer("output", outputs_by_storage[storage], offset))
                    elif storage in offsets:
                        launch_args.append(Pointer("workspace", 0, offsets[storage] + offset))
                    else:
                        raise Refused(f"kernel {source.name}: argument {name} points at memory the segment did not get")
                elif kind in ("i32", "i64", "fp32", "i1") and isinstance(value, (int, float, bool)):
                    launch_args.append(Value(kind, value))
                else:
                    raise Refused(f"kernel {source.name}: argument {name} of type {kind} ({value!r}) cannot be passed")
            grid = GridExpr.from_meta(autotuner.inductor_meta, config).eval_slow({**named, **config.kwargs})
            segment.launches.append(Launch(compiled[source.name], tuple(int(g) for g in grid), launch_args))
    return segment
