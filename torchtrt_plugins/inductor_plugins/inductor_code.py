"""Inductor's code for a segment, on the build machine, with no GPU: its Triton kernels compiled to cubins and its
launch sequence recorded, over symbolic sizes where the segment's inputs have them.

Inductor lowers the segment for the fake sm_90 device (``fake_device``) and generates its Python wrapper as it would
for ``torch.compile``. The wrapper is then run once on fake tensors with its allocations and kernel launches
recorded, which gives the launch sequence exactly as Inductor wrote it: each kernel, its grid, and what each argument
points at (an input, an output, or an intermediate buffer, with its offset). Every size in it (grids, size arguments,
offsets, buffer bytes, output shapes) is a sympy expression over the segment's size symbols, each read off one input
dimension (:class:`SizeSymbol`) up to the exported graph's maximum for it, so that the launcher computes them at
run time; a size that is not such an expression (data-dependent) refuses the segment. Any ATen call left in the
wrapper (a matmul, a fallback kernel, a buffer zeroed with ``zero_``) refuses the segment: the plugin runs Triton
kernels only.
Each kernel is compiled with Inductor's own compile options for its first config: without a GPU nothing can be
benchmarked, so where Inductor would autotune between configs the first is taken.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import sympy
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


#: A size: an int where it is static, else a sympy expression over the segment's :class:`SizeSymbol` names.
Size = int | sympy.Expr


@dataclass(frozen=True)
class SizeSymbol:
    """A size symbol of the segment: read off dimension ``dim`` of input ``input``; Inductor's code holds for
    values in ``[low, high]`` (``high`` None: unbounded): from 1 to the exported graph's maximum (:func:`_range`)."""

    name: str
    input: int
    dim: int
    low: int
    high: int | None


@dataclass(frozen=True)
class Pointer:
    """A kernel argument pointing into an input, an output or the workspace (``where``), ``offset`` bytes in (into
    the workspace: at intermediate ``index``'s offset)."""

    where: str
    index: int
    offset: Size


@dataclass(frozen=True)
class Value:
    """A kernel argument passed by value: a Triton type (``i32``, ``i64``, ``fp32``, ``i1``) and its value."""

    type: str
    value: int | float | sympy.Expr


@dataclass
class Launch:
    kernel: int
    grid: tuple[Size, Size, Size]
    args: list[Pointer | Value]


@dataclass
class CompiledSegment:
    """The segment's kernels (cubins per architecture), its launches in order, its size symbols, the shapes of its
    inputs and outputs over them, and the intermediates' bytes (laid out in the workspace in that order, each at a
    multiple of :data:`ALIGNMENT`)."""

    names: list[str] = field(default_factory=list)
    kernels: list[_Compiled] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    symbols: list[SizeSymbol] = field(default_factory=list)
    input_shapes: list[tuple[Size, ...]] = field(default_factory=list)
    output_shapes: list[tuple[Size, ...]] = field(default_factory=list)
    intermediates: list[Size] = field(default_factory=list)
    #: What Inductor assumed of the sizes while it lowered (its guards: ``Eq``, ``Ne``, ``Lt``, ... relations), which
    #: the launcher checks at run time with the symbols' ranges.
    assumptions: list[sympy.Basic] = field(default_factory=list)

    @property
    def workspace(self) -> Size:
        """The workspace's bytes (at the given sizes: an int where they are all static)."""
        return sum((aligned(b) for b in self.intermediates), 0)

    def workspace_offsets(self) -> list[Size]:
        offsets, size = [], 0
        for nbytes in self.intermediates:
            offsets.append(size)
            size = size + aligned(nbytes)
        return offsets


def aligned(nbytes: Size) -> Size:
    """``nbytes`` rounded up to a multiple of :data:`ALIGNMENT`."""
    from torch.utils._sympy.functions import CeilDiv

    if isinstance(nbytes, int):
        return -(-nbytes // ALIGNMENT) * ALIGNMENT
    return CeilDiv(nbytes, ALIGNMENT) * ALIGNMENT


def plain(value: Any) -> Size:
    """A SymInt, sympy integer or int as a :data:`Size` (an int where it is static)."""
    if isinstance(value, (bool, int)):
        return int(value)
    expr = value.node.expr if isinstance(value, torch.SymInt) else sympy.sympify(value)
    return int(expr) if expr.is_Integer else expr


@contextlib.contextmanager
def _inductor(fake_mode: Any) -> Iterator[None]:
    from torch._inductor import config
    from torch._inductor.debug import DebugContext
    from torch._inductor.virtualized import V
    from torch.fx.experimental import _config as symbolic_config

    options = {
        "compile_threads": 1,
        "cpp_wrapper": False,
        "triton.cudagraphs": False,
        "memory_planning": False,
        "size_asserts": False,
        "nan_asserts": False,
    }
    # Size-oblivious (as torch.export traces): a size symbol is not guarded against 1 where a contiguity check asks,
    # so the code holds from 1 (a Torch-TensorRT profile commonly starts there).
    oblivious = symbolic_config.patch(backed_size_oblivious=True)
    with fake_cuda_device(), V.set_fake_mode(fake_mode), config.patch(options), oblivious, DebugContext():
        yield


def _range(value: torch.SymInt) -> tuple[int, int | None]:
    """The range Inductor's code for a size symbol is generated for: from 1 (a traced graph's range starts at 2,
    torch having specialized sizes 0 and 1 while tracing, though torch.export's ranges and Torch-TensorRT's profiles
    include 1) up to the graph's maximum (None: unbounded)."""
    bounds = value.node.shape_env.var_to_range.get(value.node.expr)
    high = int(bounds.upper) if bounds is not None and bounds.upper.is_finite else None
    return 1, high


def size_symbols(metas: Sequence[torch.Tensor]) -> list[tuple[sympy.Symbol, SizeSymbol, int]]:
    """The size symbols of tensors like ``metas`` (those of a traced graph): each symbol of their shapes, with the
    first input dimension that is that symbol alone, its range and its hint. Raises :class:`Refused` for a size that
    cannot be read off the inputs (data-dependent, or only ever part of an expression)."""
    from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

    found: dict[sympy.Symbol, tuple[SizeSymbol, int]] = {}
    for i, meta in enumerate(metas):
        for d, size in enumerate(meta.shape):
            if not isinstance(size, torch.SymInt):
                continue
            if free_unbacked_symbols(size):
                raise Refused(f"input{i} has the data-dependent size {size} (dim {d}), which no profile bounds")
            expr = size.node.expr
            if expr.is_Symbol and expr not in found:
                low, high = _range(size)
                hint = int(size.node.hint) if size.node.hint is not None else max(low, 2)
                found[expr] = (SizeSymbol(f"s{len(found)}", i, d, low, high), hint)
    for i, meta in enumerate(metas):
        for d, size in enumerate(meta.shape):
            missing = [s for s in getattr(plain(size), "free_symbols", ()) if s not in found]
            if missing:
                raise Refused(f"input{i} dim {d} has size {size}, which reads no input dimension as a whole")
    return [(expr, symbol, hint) for expr, (symbol, hint) in found.items()]


def describe_inputs(metas: Sequence[torch.Tensor]) -> list[str]:
    """What Inductor's code depends on of each input: its dtype and its shape over the size symbols (named as the
    generated op names them, with their ranges)."""
    symbols = size_symbols(metas)
    names = {expr: symbol(s.name) for expr, s, _ in symbols}
    ranges = ", ".join(f"{s.name}=[{s.low}, {s.high}]" for _, s, _ in symbols)
    shapes = [tuple(d if isinstance(d, int) else plain(d).xreplace(names) for d in m.shape) for m in metas]
    return [f"{m.dtype}{shape}" for m, shape in zip(metas, shapes)] + [ranges]


def symbol(name: str) -> sympy.Symbol:
    """The sympy symbol of the size symbol ``name`` in a :class:`CompiledSegment`'s expressions."""
    return sympy.Symbol(name, integer=True, nonnegative=True)


def _fake_inputs(mode: Any, metas: Sequence[torch.Tensor]) -> tuple[list[torch.Tensor], dict[sympy.Symbol, Any]]:
    """Fake CUDA tensors like ``metas`` in ``mode``, each size symbol one of ``mode``'s shape environment (with the
    exported graph's range and hint); and the symbols of that environment -> :func:`symbol` of their names."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic

    env = mode.shape_env
    values, canonical = {}, {}
    for expr, size, hint in size_symbols(metas):
        created = env.create_symbol(hint, source=ConstantSource(size.name), dynamic_dim=DimDynamic.DYNAMIC)
        env.constrain_symbol_range(created, compiler_min=size.low, compiler_max=size.high or sys.maxsize - 1)
        values[expr] = env.create_symintnode(created, hint=hint)
        canonical[created] = symbol(size.name)
    with mode:
        inputs = [
            torch.empty([_interpret(plain(d), values) for d in meta.shape], dtype=meta.dtype, device="cuda")
            for meta in metas
        ]
    return inputs, canonical


def _interpret(expr: Size, values: dict[sympy.Symbol, Any]) -> Any:
    """``expr`` with its symbols given ``values`` (ints or SymInts), as Python arithmetic."""
    from torch.utils._sympy.interp import sympy_interp
    from torch.utils._sympy.reference import PythonReferenceAnalysis

    if isinstance(expr, int):
        return expr
    return sympy_interp(PythonReferenceAnalysis, values, expr)


def evaluate(expr: Size, symbols: Sequence[SizeSymbol], inputs: Sequence[Any]) -> Any:
    """``expr`` (over :func:`symbol`\\ s) at the sizes of ``inputs`` (tensors, fake ones included: their sizes may be
    SymInts)."""
    return _interpret(expr, {symbol(s.name): inputs[s.input].shape[s.dim] for s in symbols})


def _decomposed(module: torch.fx.GraphModule, inputs: Sequence[torch.Tensor]) -> torch.fx.GraphModule:
    """The segment in the ATen subset Inductor lowers (its own decompositions applied, as ``torch.compile`` does)."""
    from torch._inductor.decomposition import select_decomp_table
    from torch.fx.experimental.proxy_tensor import make_fx

    return make_fx(module, decomposition_table=select_decomp_table(), tracing_mode="fake")(*inputs)


@dataclass
class _Lowered:
    calls: list[str]  # the ATen calls Inductor's code makes (extern kernels)
    code: str  # its Python wrapper ("" where it calls ATen or was not asked for)
    mode: Any  # the fake mode (and shape environment) it was lowered in
    inputs: list[torch.Tensor]  # its fake inputs there
    canonical: dict[sympy.Symbol, sympy.Symbol]  # that environment's size symbols -> symbol(name)


def _lower(module: torch.fx.GraphModule, metas: Sequence[torch.Tensor], generate: bool) -> _Lowered:
    """Inductor's lowering of ``module`` on inputs like ``metas`` (the fake sm_90 device, their size symbols in a shape
    environment of its own): the ATen calls its code would make (its extern kernels: matmuls, convolutions, random
    seeds, fallbacks) and, with ``generate`` and none of them, its Python wrapper."""
    from torch._inductor import ir
    from torch._inductor.graph import GraphLowering
    from torch._inductor.virtualized import V
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    # Sizes 0 and 1 not specialized: a profile of Torch-TensorRT commonly starts at batch 1.
    mode = FakeTensorMode(shape_env=ShapeEnv(specialize_zero_one=False))
    inputs, canonical = _fake_inputs(mode, metas)
    lowered = _Lowered([], "", mode, inputs, canonical)
    with _inductor(mode):
        graph = GraphLowering(_decomposed(module, inputs), example_inputs=inputs, shape_env=mode.shape_env)
        with V.set_graph_handler(graph):
            graph.run(*inputs)
            lowered.calls = [
                str(getattr(operation, "python_kernel_name", None) or type(operation).__name__)
                for operation in graph.operations
                if isinstance(operation, ir.ExternKernel) and not isinstance(operation, (ir.NopKernel, ir.MultiOutput))
            ]
            if lowered.calls or not generate:
                return lowered
            code = graph.codegen()
    code = code[0] if isinstance(code, tuple) else code
    lowered.code = getattr(code, "value", code)
    return lowered


def aten_calls(module: torch.fx.GraphModule, metas: Sequence[torch.Tensor]) -> list[str]:
    """The ATen calls Inductor's code for ``module`` would make, by name; empty when it is Triton kernels only."""
    return _lower(module, metas, generate=False).calls


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


def _record(lowered: _Lowered) -> tuple[_Recorder, Sequence[Any]]:
    """Runs the wrapper's ``call`` on the fake inputs it was lowered for, its launches and allocations recorded."""
    from torch._inductor.async_compile import AsyncCompile
    from torch.utils._python_dispatch import TorchDispatchMode

    from .fake_device import _replace

    recorder = _Recorder()

    class NoAtenCalls(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            if str(func) not in _PLUMBING:
                raise Refused(f"Inductor's code for it calls ATen ({func}), which the plugin cannot run")
            return func(*args, **(kwargs or {}))

    with contextlib.ExitStack() as stack:
        _replace(stack, AsyncCompile, "triton", lambda self, name, source, **kw: _KernelSource(recorder, name, source))
        _replace(stack, AsyncCompile, "wait", lambda self, scope: None)
        _replace(stack, torch._C, "_cuda_getCurrentRawStream", lambda device: 0)
        _replace(stack, torch._C._dynamo.guards, "_empty_strided_cuda", recorder.empty_strided)
        _replace(stack, torch.cuda, "_DeviceGuard", _NoDeviceGuard)
        _replace(stack, torch.cuda, "set_device", lambda device: None)
        scope: dict[str, Any] = {"__name__": "torchtrt_plugins_inductor_wrapper"}
        exec(compile(lowered.code, "<inductor wrapper>", "exec"), scope)  # noqa: S102 - Inductor's own generated code
        with lowered.mode, NoAtenCalls():
            outputs = scope["call"](list(lowered.inputs))
    return recorder, outputs


def _known(condition: Any) -> bool:
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return bool(statically_known_true(condition))


def _whole_and_contiguous(tensor: torch.Tensor) -> bool:
    expected = 1
    for size, stride in reversed(list(zip(tensor.shape, tensor.stride()))):
        if not _known(size == 1) and not _known(stride == expected):
            return False
        expected = expected * size
    whole = tensor.untyped_storage().nbytes() == tensor.numel() * tensor.element_size()
    return _known(tensor.storage_offset() == 0) and _known(whole)


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
        if not _whole_and_contiguous(out):
            raise Refused(f"output {index} is not a whole contiguous buffer (strides {out.stride()})")
        by_storage[storage] = index
    return by_storage


class _Sizes:
    """Sizes of the recorded code (ints or SymInts of the lowering's environment) as :data:`Size`\\ s over the
    segment's size symbols; a size over any other symbol is data-dependent and refuses the segment."""

    def __init__(self, canonical: dict[sympy.Symbol, sympy.Symbol]):
        self.canonical = canonical

    def __call__(self, value: Any, where: str) -> Size:
        size = plain(value)
        if isinstance(size, int):
            return size
        unknown = sorted(str(s) for s in size.free_symbols if s not in self.canonical)
        if unknown:
            raise Refused(
                f"{where} has the size {size}, which depends on data ({', '.join(unknown)}), not on the "
                "sizes of the segment's inputs"
            )
        return size.xreplace(self.canonical)


def _assumed_ranges(lowered: _Lowered, symbols: list[SizeSymbol]) -> list[SizeSymbol]:
    """``symbols`` with the ranges their lowering's shape environment ended with (Inductor may narrow them)."""

    import dataclasses

    by_name = {canonical.name: created for created, canonical in lowered.canonical.items()}
    ranges = lowered.mode.shape_env.var_to_range
    out = []
    for s in symbols:
        bounds = ranges[by_name[s.name]]
        low = max(s.low, int(bounds.lower)) if bounds.lower.is_finite else s.low
        high = int(bounds.upper) if bounds.upper.is_finite and int(bounds.upper) < sys.maxsize - 1 else None
        out.append(dataclasses.replace(s, low=low, high=s.high if high is None else min(high, s.high or high)))
    return out


def _assumptions(lowered: _Lowered) -> list[sympy.Basic]:
    """The guards Inductor added while it lowered and generated the code, over the segment's size symbols."""
    out = []
    for guard in lowered.mode.shape_env.guards:
        unknown = sorted(str(s) for s in guard.expr.free_symbols if s not in lowered.canonical)
        if unknown:
            raise Refused(f"Inductor's code assumes {guard.expr}, over sizes that depend on data ({unknown})")
        out.append(guard.expr.xreplace(lowered.canonical))
    return out


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
    """Inductor's kernels and launch sequence for ``module`` on inputs like ``metas`` (their shapes, size symbols
    included, and dtypes), compiled for ``archs``. Raises :class:`Refused` with the reason where the plugin cannot
    run that code."""
    from torch._inductor.runtime.triton_heuristics import GridExpr

    lowered = _lower(module, metas, generate=True)
    if lowered.calls:
        calls = ", ".join(sorted(set(lowered.calls)))
        raise Refused(f"Inductor's code for it calls ATen ({calls}); a generated plugin runs Triton kernels only")
    recorder, outputs = _record(lowered)
    outputs_by_storage = _check_outputs(outputs, recorder)
    sizes = _Sizes(lowered.canonical)
    inputs_by_storage = {_storage(t): i for i, t in enumerate(lowered.inputs)}
    segment = CompiledSegment(symbols=_assumed_ranges(lowered, [s for _, s, _ in size_symbols(metas)]))
    segment.assumptions = _assumptions(lowered)
    segment.input_shapes = [tuple(sizes(d, f"input {i}") for d in t.shape) for i, t in enumerate(lowered.inputs)]
    segment.output_shapes = [tuple(sizes(d, f"output {i}") for d in t.shape) for i, t in enumerate(outputs)]
    intermediates: dict[int, int] = {}
    for buffer in recorder.buffers:
        storage = _storage(buffer)
        if storage not in outputs_by_storage and storage not in intermediates:
            intermediates[storage] = len(segment.intermediates)
            segment.intermediates.append(sizes(buffer.untyped_storage().nbytes(), "an intermediate buffer"))
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
            for name, value in zip(names, args):
                written = name in autotuner.mutated_arg_names
                if written and isinstance(value, torch.Tensor) and _storage(value) in inputs_by_storage:
                    raise Refused(
                        f"kernel {source.name} writes into input {inputs_by_storage[_storage(value)]} (argument "
                        f"{name}): a plugin's inputs are read-only"
                    )
            named, launch_args = {}, []
            for name, value in zip(names, args):
                named[name] = value
                kind = signature[name]
                if kind == "constexpr":
                    continue
                where = f"kernel {source.name}'s argument {name}"
                if isinstance(value, torch.Tensor):
                    storage = _storage(value)
                    offset = sizes(value.storage_offset() * value.element_size(), where)
                    if storage in inputs_by_storage:
                        launch_args.append(Pointer("input", inputs_by_storage[storage], offset))
                    elif storage in outputs_by_storage:
                        launch_args.append(Pointer("output", outputs_by_storage[storage], offset))
                    elif storage in intermediates:
                        launch_args.append(Pointer("workspace", intermediates[storage], offset))
                    else:
                        raise Refused(f"{where} points at memory the segment did not get")
                elif kind in ("i32", "i64") and isinstance(value, (int, bool, torch.SymInt)):
                    launch_args.append(Value(kind, sizes(value, where)))
                elif kind in ("fp32", "i1") and isinstance(value, (int, float, bool)):
                    launch_args.append(Value(kind, value))
                else:
                    raise Refused(f"{where} of type {kind} ({value!r}) cannot be passed")
            grid = GridExpr.from_meta(autotuner.inductor_meta, config).eval_slow({**named, **config.kwargs})
            where = f"kernel {source.name}'s grid"
            segment.launches.append(Launch(compiled[source.name], tuple(sizes(g, where) for g in grid), launch_args))
    return segment
