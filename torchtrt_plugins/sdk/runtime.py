"""The Python launch runtime: a declared op's launcher called from Python through the launcher ABI (:func:`launch`,
:class:`PreparedLaunch`), and the op's eager CUDA kernel as ``declare`` registers it (:func:`register_eager_kernel`),
which puts the C++ eager kernel in its place on its first call and otherwise runs :func:`launch`."""

from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from .. import _derive
from ..spec import OpSpec, SpecError
from . import eager_kernel
from .abi import LAUNCHER_FUNCTION, WORKSPACE_FUNCTION, LaunchArgs, LaunchTensor, tensor_struct

if TYPE_CHECKING:
    from ..declaration import Declaration

#: Where the size tensors start in the scratch buffer of a call (then the workspace, 256-byte aligned).
_SCRATCH_ALIGN = 256


class _Plan:
    """Everything about one call signature (tensor shapes, dtypes and device, scalar values, tactic) that does not
    change from call to call: checked once, then reused. Holds the ctypes structs the launcher reads, so a plan
    belongs to one thread (see :data:`_PLANS`)."""

    def __init__(self, declaration: Declaration, args: Sequence[Any], tactic: int):
        label = declaration.label
        if tactic not in declaration.launchers:
            raise SpecError(f"{label}: argument 'tactic' must be one of {sorted(declaration.launchers)}, got {tactic}")
        declaration.check_args(*args)
        bound = declaration.bind(*args)
        tensors = [bound[a.name] for a in declaration.tensor_args]
        self.device = _cuda_device(declaration, tensors)
        metas = [_derive.TensorMeta(tuple(t.shape), t.dtype) for t in tensors]
        values = {a.name: bound[a.name] for a in declaration.scalar_args}
        derived = declaration.derive(metas, values, frozenset())
        self.shapes = [tuple(t.shape) for t in tensors]
        out_shapes, uppers = _derive.evaluate(derived.program, self.shapes)
        # Per output, the dims that depend on a data-dependent size: (dim, expression) to evaluate after the launch.
        program = _derive._parse_cached(tuple(derived.program))
        self.sized_dims = [[(d, e) for d, e in enumerate(dims) if _derive.uses_size(e)] for _, dims in program.outputs]
        self.outputs = list(zip(out_shapes, derived.output_dtypes, strict=True))
        self.num_sizes = len(uppers)
        self.tensor_positions = [declaration.argument_index[a.name] for a in declaration.tensor_args]
        inputs = [tensor_struct(label, t) for t in tensors]
        outputs = [tensor_struct(label, torch.empty(0, dtype=d), s) for s, d in self.outputs]
        outputs += [tensor_struct(label, torch.empty(0, dtype=torch.int64), ()) for _ in uppers]
        # A mutated argument's output is the argument itself (the launcher updates it in place).
        self.mutated = [declaration.spec.aliased_inputs, [declaration.argument_index[n] for n in declaration.mutated]]
        outputs += [tensor_struct(label, tensors[i]) for i in self.mutated[0]]
        self.in_structs = (LaunchTensor * max(len(inputs), 1))(*inputs)
        self.out_structs = (LaunchTensor * max(len(outputs), 1))(*outputs)
        scalars = [float(f.check(declaration.qualname, bound[f.arg])) for f in declaration.spec.fields]
        self.scalars = (ctypes.c_double * max(len(scalars), 1))(*scalars)
        self.args = LaunchArgs(
            self.in_structs,
            len(inputs),
            self.out_structs,
            len(outputs),
            self.scalars,
            len(scalars),
            None,
            0,
            tactic,
            None,
        )
        self.args_pointer = ctypes.pointer(self.args)
        lib = declaration.library.launchers()
        op = declaration.qualname.encode()
        address = lib.ttp_sdk_launcher(op, tactic)
        if not address:
            raise RuntimeError(f"{label}: library {declaration.library.name} has no launcher for tactic {tactic}")
        self.launcher = LAUNCHER_FUNCTION(address)
        self.launcher_name = declaration.launchers[tactic]
        self.resources = _resource_tables(declaration, lib, scalars, self.device)
        if self.resources is not None:
            self.args.resources = self.resources
            self.args.nbResources = len(self.resources)
        workspace = lib.ttp_sdk_workspace_function(op)
        self.workspace_bytes = int(WORKSPACE_FUNCTION(workspace)(self.args_pointer)) if workspace else 0
        self.args.workspaceSize = self.workspace_bytes
        self.workspace_offset = -(-8 * self.num_sizes // _SCRATCH_ALIGN) * _SCRATCH_ALIGN
        self.scratch_bytes = self.workspace_offset + self.workspace_bytes


def _resource_tables(declaration: Declaration, lib: ctypes.CDLL, scalars: Sequence[float], device: torch.device) -> Any:
    """The op's shared tables for these scalars on ``device`` (``declare(resources=...)``), built by the launcher
    library once per key and device and kept there for the process; None when it declares none."""
    count = len(getattr(declaration, "resources", {}))
    if not count:
        return None
    tables = (ctypes.c_void_p * count)()
    values = (ctypes.c_double * max(len(scalars), 1))(*scalars)
    with torch.cuda.device(device):
        status = lib.ttp_sdk_resource_tables(declaration.qualname.encode(), values, tables)
    if status != 0:
        raise RuntimeError(
            f"{declaration.label}: building its shared tables {sorted(declaration.resources)} failed with cudaError "
            f"{status} (the first call with new table fields must not be inside a CUDA graph capture)"
        )
    return tables


def _cuda_device(declaration: Declaration, tensors: Sequence[torch.Tensor]) -> torch.device:
    """The device of a call's tensors, which must all be CUDA tensors on one device."""
    for argument, tensor in zip(declaration.tensor_args, tensors, strict=True):
        if not tensor.is_cuda or tensor.device != tensors[0].device:
            raise SpecError(
                f"{declaration.label}: argument '{argument.name}' must be a CUDA tensor on {tensors[0].device} (the "
                f"device of '{declaration.tensor_args[0].name}'), got device {tensor.device}"
            )
    return tensors[0].device


def plugin_inputs(spec: OpSpec, tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """The op's tensor inputs as the plugin takes them: each cast to its ``TensorSpec.plugin_dtype`` when it has one
    (e.g. a bool mask to int32), as the converter's cast layers do in an engine; the others as they are."""
    specs = list(spec.inputs)
    out = []
    for i, tensor in enumerate(tensors):
        dtype = getattr(specs[i], "plugin_dtype", None) if i < len(specs) else None
        out.append(tensor if dtype is None or tensor.dtype == dtype else tensor.to(dtype))
    return out


class PreparedLaunch:
    """A declared op's launcher on buffers made once, called as the plugin's ``enqueue`` calls it: on the current
    stream (read at each call), with no host synchronization (a data-dependent size stays in its size tensor on the
    device) and no allocation, so it is timed per call like the engine and can be captured in a CUDA graph.

    The checks, the derived shapes and the launch structs are :func:`launch`'s (a :class:`_Plan` of its own, not the
    per-thread cache's, since its structs point at this object's buffers). ``inputs`` are contiguous, each in its
    plugin dtype (:func:`plugin_inputs`); ``outputs`` are at their upper bounds and start filled with -1 (the launcher
    writes a data-dependent output's rows from the start; those it leaves read -1); ``sizes`` are the size tensors;
    ``workspace`` the launcher's workspace. A call runs the launcher once (phase 0, as in an engine, also for a
    ``sizes_first`` op) and returns ``outputs[0]``.
    """

    def __init__(self, declaration: Declaration, *args: Any, tactic: int = 0, **kwargs: Any):
        args = _arguments(declaration, args, kwargs)
        plan = _Plan(declaration, args, tactic)
        device = plan.device
        tensors = [args[position].contiguous() for position in plan.tensor_positions]
        self.inputs = plugin_inputs(declaration.spec, tensors)
        self.outputs = [torch.full(shape, -1, dtype=dtype, device=device) for shape, dtype in plan.outputs]
        self.sizes = [torch.zeros((), dtype=torch.int64, device=device) for _ in range(plan.num_sizes)]
        self.workspace = torch.empty(max(plan.workspace_bytes, 1), dtype=torch.uint8, device=device)
        mutated = [self.inputs[i] for i in plan.mutated[0]]  # updated in place at each call, as in an engine
        for structs, buffers in (
            (plan.in_structs, self.inputs),
            (plan.out_structs, self.outputs + self.sizes + mutated),
        ):
            for i, tensor in enumerate(buffers):
                structs[i] = tensor_struct(declaration.label, tensor)
        plan.args.workspace = self.workspace.data_ptr() if plan.workspace_bytes else None  # ttp_sdk.h: null at 0
        self._declaration, self._plan, self._tactic = declaration, plan, tactic

    def __call__(self) -> torch.Tensor:
        plan = self._plan
        plan.args.stream = torch._C._cuda_getCurrentRawStream(plan.device.index)
        _call(self._declaration, plan, self._tactic, plan.device)
        return self.outputs[0]


#: Per thread: (declaration, call signature) -> _Plan.
_PLANS = threading.local()
_MAX_PLANS = 4096
#: A data-dependent output whose upper-bound buffer wastes more than this (and more than it keeps) is copied into a
#: buffer of its actual size, so the result does not hold the upper bound's memory.
_TRIM_BYTES = 1 << 20


def _arguments(declaration: Declaration, args: tuple, kwargs: dict) -> tuple:
    """Every schema argument positionally: the dispatcher drops trailing defaults; keywords need the full bind."""
    if not kwargs:
        missing = declaration.num_arguments - len(args)
        if missing == 0:
            return args
        if 0 < missing <= len(declaration.trailing_defaults):
            return args + declaration.trailing_defaults[len(declaration.trailing_defaults) - missing :]
    bound = declaration.bind(*args, **kwargs)
    return tuple(bound[a.name] for a in declaration.schema.arguments)


def _signature(declaration: Declaration, args: tuple, tactic: int) -> tuple:
    """The cache key of a call: (declaration, tactic, each tensor's shape, dtype and device index, each scalar)."""
    key = getattr(declaration, "_eager_signature", None)
    if key is None:
        # Generated once per op: one tuple display is a few times faster than building the key in a loop.
        parts = ["d", "t"]
        for position in range(declaration.num_arguments):
            if position in declaration.tensor_positions:
                parts += [f"a[{position}].shape", f"a[{position}].dtype", f"a[{position}].get_device()"]
            else:
                parts.append(f"a[{position}]")
        key = eval(f"lambda d, a, t: ({', '.join(parts)},)")  # noqa: S307 - built from positions only
        declaration._eager_signature = key
    return key(declaration, args, tactic)


def launch(declaration: Declaration, *args: Any, tactic: int = 0, **kwargs: Any) -> Any:
    """Run a declared op's launcher on CUDA tensors (what its eager CUDA kernel does). ``tactic`` picks one.

    The checks, the shape derivation and the launcher lookup run once per call signature (shapes, dtypes, device,
    scalar values, tactic); later calls with the same signature allocate the outputs (one scratch buffer for the
    size tensors and the workspace) and call the launcher through its cached function pointer. A bool input is
    passed as kBOOL (only the TensorRT plugin takes it as INT32). A data-dependent output is allocated at its upper
    bound; after one host synchronization that reads the sizes, it is returned as a view of its first rows, or as a
    copy of them where the upper bound would waste more than it keeps (and over 1 MiB).
    """
    args = _arguments(declaration, args, kwargs)
    plans = _PLANS.__dict__
    try:
        key = _signature(declaration, args, tactic)
        plan = plans.get(key)
    except (AttributeError, TypeError):  # a non-tensor where a tensor goes, or an unhashable scalar: full checks
        key, plan = None, None
    if plan is None:
        plan = _Plan(declaration, args, tactic)
        if key is not None:
            if len(plans) >= _MAX_PLANS:  # many distinct shapes (e.g. a varying batch): start over
                plans.clear()
            plans[key] = plan
    device = plan.device
    # Held until the launch is queued: a contiguous copy freed earlier could be handed to an output below.
    inputs = [args[position].contiguous() for position in plan.tensor_positions]
    structs = plan.in_structs
    for i, tensor in enumerate(inputs):
        structs[i].data = tensor.data_ptr()
    sizes_first = plan.num_sizes and declaration.sizes_first
    # sizes_first: no outputs until the sizes are known (phase 1 writes only the size tensors).
    outputs = [] if sizes_first else [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in plan.outputs]
    structs = plan.out_structs
    for i in range(len(plan.outputs)):
        structs[i].data = outputs[i].data_ptr() if outputs else None
    scratch = None
    if plan.scratch_bytes:
        scratch = torch.empty(plan.scratch_bytes, dtype=torch.uint8, device=device)
        base = scratch.data_ptr()
        for k in range(plan.num_sizes):
            structs[len(plan.outputs) + k].data = base + 8 * k
        plan.args.workspace = base + plan.workspace_offset if plan.workspace_bytes else None
    index = device.index
    plan.args.stream = torch._C._cuda_getCurrentRawStream(index)
    plan.args.phase = 1 if sizes_first else 0
    if plan.mutated[0]:
        _bind_mutated(plan, inputs)
    _call(declaration, plan, tactic, device)
    if plan.mutated[0]:
        _write_back(plan, args, inputs)
    if sizes_first:
        counts = scratch[: 8 * plan.num_sizes].view(torch.int64).tolist()  # one host synchronization
        for i, ((shape, dtype), dims) in enumerate(zip(plan.outputs, plan.sized_dims, strict=True)):
            shape = _actual_shape(shape, plan.shapes, counts, dims)
            for dim, _ in dims:
                structs[i].dims[dim] = shape[dim]
            outputs.append(torch.empty(shape, dtype=dtype, device=device))
            structs[i].data = outputs[-1].data_ptr()
        plan.args.phase = 2
        try:
            _call(declaration, plan, tactic, device)
        finally:
            for i, ((shape, _), dims) in enumerate(zip(plan.outputs, plan.sized_dims, strict=True)):
                for dim, _ in dims:
                    structs[i].dims[dim] = shape[dim]  # the plan's upper bounds, for the next call
    elif plan.num_sizes:
        counts = scratch[: 8 * plan.num_sizes].view(torch.int64).tolist()  # one host synchronization
        outputs = [_trim(o, plan.shapes, counts, dims) for o, dims in zip(outputs, plan.sized_dims, strict=True)]
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _bind_mutated(plan: _Plan, inputs: list[torch.Tensor]) -> None:
    """Point each mutated argument's output at the argument's (contiguous) memory."""
    first = len(plan.outputs) + plan.num_sizes
    for k, i in enumerate(plan.mutated[0]):
        plan.out_structs[first + k].data = inputs[i].data_ptr()


def _write_back(plan: _Plan, args: tuple, inputs: list[torch.Tensor]) -> None:
    """A mutated argument that was not contiguous was updated in its contiguous copy: copy that back."""
    for i, position in zip(*plan.mutated, strict=True):
        if inputs[i] is not args[position]:
            args[position].copy_(inputs[i])


def _call(declaration: Declaration, plan: _Plan, tactic: int, device: torch.device) -> None:
    if torch._C._cuda_getDevice() == device.index:
        status = plan.launcher(plan.args_pointer)
    else:
        with torch.cuda.device(device):
            status = plan.launcher(plan.args_pointer)
    if status != 0:
        phase = f", phase {plan.args.phase}" if plan.args.phase else ""
        lib = declaration.library.launchers()
        why = lib.ttp_sdk_last_error().decode() if tactic in getattr(declaration, "aot_kernels", {}) else ""
        # The CUDA runtime the launcher library links names the status (as the C++ eager kernel says it).
        lib.cudaGetErrorName.restype, lib.cudaGetErrorName.argtypes = ctypes.c_char_p, [ctypes.c_int]
        raise RuntimeError(
            f"{declaration.label}: launcher '{plan.launcher_name}' (tactic {tactic}{phase}) returned "
            f"{lib.cudaGetErrorName(status).decode()} ({status})" + (f": {why}" if why else "")
        )


def _actual_shape(upper: Sequence[int], shapes: list, counts: list[int], sized_dims: list) -> list[int]:
    """An output's shape once its data-dependent sizes (``counts``) are known: ``upper``, sized dims evaluated."""
    shape = list(upper)
    for dim, expr in sized_dims:
        shape[dim] = _derive.evaluate_expr(expr, shapes, (), counts)
    return shape


def _trim(output: torch.Tensor, shapes: list, counts: list[int], sized_dims: list) -> torch.Tensor:
    """The part of an upper-bound output its data-dependent sizes say was written (the leading elements)."""
    if not sized_dims:
        return output
    shape = _actual_shape(output.shape, shapes, counts, sized_dims)
    if len(sized_dims) == 1 and sized_dims[0][0] == 0:
        kept = output.narrow(0, 0, shape[0])
    else:
        kept = output.view(-1)[: math.prod(shape)].view(shape)
    wasted = (output.numel() - kept.numel()) * output.element_size()
    if wasted > _TRIM_BYTES and wasted > kept.numel() * output.element_size():
        return kept.clone()
    return kept


#: The Library objects holding the Python eager CUDA kernels (registrations last as long as their Library).
_EAGER_LIBRARIES: list[torch.library.Library] = []
#: The registered kernels of ops' ``_tactic`` variants, by the declared op's name.
_TACTIC_KERNELS: dict[str, _PythonKernel] = {}


class _PythonKernel:
    """An op's eager CUDA kernel as registered at ``declare``: its first call puts the C++ kernel in its place
    (:func:`torchtrt_plugins.eager_kernel.install`) and redispatches; where that cannot be, it stays and runs
    :func:`launch`. With ``tactic``, the kernel of op ``<name>_tactic`` (the op's arguments, then the tactic's value:
    benchmarks and tests force each launcher with it)."""

    def __init__(self, declaration: Declaration, *, tactic: bool = False):
        self.declaration = declaration
        self.tactic = tactic
        self.first = True
        namespace, name = declaration.qualname.split("::", 1)
        name += "_tactic" if tactic else ""
        self.qualname = f"{namespace}::{name}"
        self.overload = getattr(getattr(torch.ops, namespace), name).default
        self.library = torch.library.Library(namespace, "IMPL")
        self.library.impl(name, self, "CUDA")
        _EAGER_LIBRARIES.append(self.library)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.first:
            self.first = False
            if eager_kernel.install(
                self.declaration, self.library, qualname=self.qualname, tactic_argument=self.tactic
            ):
                _EAGER_LIBRARIES.remove(self.library)
                return self.overload(*args, **kwargs)
        return launch(self.declaration, *args, **kwargs)


def unregister_eager_kernel(kernel: _PythonKernel) -> None:
    """Remove an eager CUDA kernel registered by :func:`register_eager_kernel` (a withdrawn declaration's)."""
    if kernel.library in _EAGER_LIBRARIES:
        _EAGER_LIBRARIES.remove(kernel.library)
        kernel.library._destroy()


def register_eager_kernel(declaration: Declaration, *, tactic: bool = False) -> _PythonKernel:
    """Register the op's CUDA kernel: the declared launcher, through the C++ eager kernel from its first call on
    (:mod:`torchtrt_plugins.eager_kernel`), else through :func:`launch`. With ``tactic``, the kernel of the op's
    ``<name>_tactic`` variant (defined by the caller), which takes the tactic's value as a keyword argument."""
    kernel = _PythonKernel(declaration, tactic=tactic)
    if tactic:
        _TACTIC_KERNELS[declaration.qualname] = kernel
    return kernel
