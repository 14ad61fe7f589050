"""Python API of the plugin conformance harness (``csrc/harness``, ``libtorchtrt_plugins_harness.so``).

The harness loads a plugin library and drives one IPluginV3 through the lifecycle TensorRT uses, without
TensorRT: creators and fields, capability interfaces, output types, output shapes through its own
``IExprBuilder`` (symbolic, then evaluated at the profile's min/opt/max and at the concrete shapes),
``supportsFormatCombination`` enumerated position by position, ``configurePlugin``, workspace, tactics, then
for every tactic ``clone``/``setTactic``/``onShapeChange``/``enqueue``, and serialization to bytes,
``createPlugin(kRUNTIME)``, ``attachToContext`` and ``enqueue`` again. It checks the plugin rules on the way
and reports each broken rule as a :class:`Violation`.

Where the checks run:

- everywhere (no GPU needed): creators/fields, invalid field sets rejected (and logged), exceptions escaping
  interface methods, ``supportsFormatCombination`` reading positions above ``pos`` (they sit on a PROT_NONE
  page), size tensors 0-D and INT32/INT64, builder misuse, clone independence (clone a clone, reconfigure it,
  check the source; destroy the source, check the clone), serialization round trip of the fields;
- with a CUDA device and tensor inputs: ``enqueue`` for every tactic on guarded buffers (writes outside outputs
  or the workspace, modified inputs), the given stream held by a gate kernel (work outside it shows up early;
  host synchronization in ``enqueue`` trips the gate's timeout), ``clone`` allocating device memory, runtime
  plugins reproducing the build plugin's outputs, shared resources released. Without a device the execution
  phase is skipped and ``HarnessResult.enqueue_skipped`` says why.

Typical use::

    call = torchtrt_plugins.converters.plan_node(node)        # or plan(spec, args, kwargs)
    result = run_call(call, x, weight)
    result.assert_conformant()
    torch.testing.assert_close(result.output(tactic=1), eager)
"""

from __future__ import annotations

import ctypes
import json
import math
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .. import dtypes

__all__ = [
    "HarnessError",
    "HarnessResult",
    "InvalidFieldsResult",
    "LogLine",
    "RunRecord",
    "ShapeArg",
    "TensorArg",
    "Violation",
    "bench_enqueue",
    "field_json",
    "run_call",
    "run_plugin",
]

#: torch dtype -> TensorRT DataType member name.
_DTYPE_NAMES = dtypes.TRT_NAMES
_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}

_ALLOCATE = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64)
_lock = threading.Lock()
_handles: dict[str, ctypes.CDLL] = {}


class HarnessError(RuntimeError):
    """The harness could not run at all (bad request, library missing); not a verdict on the plugin."""


@dataclass(frozen=True)
class TensorArg:
    """An input given by shape and dtype only (build-phase checks; no enqueue)."""

    shape: tuple[int, ...]
    dtype: torch.dtype = torch.float32


@dataclass(frozen=True)
class ShapeArg:
    """A shape input: its values, and optionally the profile's min/opt/max values."""

    values: tuple[int, ...]
    min: tuple[int, ...] | None = None
    opt: tuple[int, ...] | None = None
    max: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Violation:
    rule: str
    plugin: str
    method: str
    detail: str

    def __str__(self) -> str:
        return f"[{self.rule}] {self.plugin} {self.method}: {self.detail}"


@dataclass(frozen=True)
class LogLine:
    severity: str
    message: str
    during: str

    def __str__(self) -> str:
        return f"{self.severity} ({self.during or '-'}): {self.message}"


@dataclass(frozen=True)
class InvalidFieldsResult:
    fields: list
    rejected: bool
    log: list[LogLine]


@dataclass
class RunRecord:
    """One enqueue: ``phase`` is "build" (a clone of the build plugin) or "runtime" (re-created from fields)."""

    phase: str
    tactic: int
    status: str
    outputs: list[torch.Tensor]
    size_tensor_values: dict[int, int]
    raw: dict = field(repr=False, default_factory=dict)


@dataclass
class HarnessResult:
    plugin: str
    raw: dict = field(repr=False)
    creators: list[dict]
    output_types: list[str]
    #: "symbolic" (strings), "min", "opt", "max", "concrete" (lists of dims; size tensors at their bound)
    output_shapes: dict[str, list]
    size_tensors: list[dict]
    formats: list[tuple[tuple[str, str], ...]]
    configured: tuple[tuple[str, str], ...] | None
    workspace_size: int | None
    tactics: list[int]
    timing_cache_id: str | None
    format_combination_limit: int | None
    serialized_fields: list[dict]
    runtime_fields: list[dict] | None
    invalid_fields: list[InvalidFieldsResult]
    runs: list[RunRecord]
    log: list[LogLine]
    violations: list[Violation]
    errors: list[dict]
    stopped: str | None
    enqueue_skipped: str | None
    #: Every plugin method the harness called, in order (``createPlugin``, ``clone``, ... ``~IPluginV3``).
    calls: list[str] = field(default_factory=list)
    #: Per output, the input it aliases (getAliasedInput, -1: none); None where the plugin's build interface is
    #: version 1 (no aliasing).
    aliased_inputs: list[int] | None = None
    #: Per shared resource key the run acquired from the harness's plugin registry: ``acquires``, ``builds`` (the
    #: registry's clones of the plugin's IPluginResource: tables built), ``releases`` (release() calls), ``peak``
    #: (references held at once) and ``held`` (at the end: 0 when the last plugin released it).
    resources: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def rules(self) -> set[str]:
        """The ids of the rules broken."""
        return {v.rule for v in self.violations}

    def run(self, tactic: int = 0, phase: str = "build") -> RunRecord:
        for record in self.runs:
            if record.tactic == tactic and record.phase == phase:
                return record
        raise KeyError(f"no {phase} run for tactic {tactic}; runs: {[(r.phase, r.tactic) for r in self.runs]}")

    def outputs(self, tactic: int = 0, phase: str = "build") -> list[torch.Tensor]:
        """The outputs of one enqueue, data-dependent ones trimmed to the size tensors' values."""
        return self.run(tactic, phase).outputs

    def output(self, tactic: int = 0, phase: str = "build", index: int = 0) -> torch.Tensor:
        return self.outputs(tactic, phase)[index]

    def creator(self, name: str, version: str = "1", namespace: str = "torchtrt") -> dict:
        for entry in self.creators:
            if (entry.get("name"), entry.get("version"), entry.get("namespace")) == (name, version, namespace):
                return entry
        raise KeyError(f"no creator {namespace}::{name} v{version}")

    def log_text(self) -> str:
        return "\n".join(str(line) for line in self.log)

    def summary(self) -> str:
        lines = [f"harness: {self.plugin}"]
        if self.stopped:
            lines.append(f"  stopped: {self.stopped}")
        lines += [f"  violation: {v}" for v in self.violations]
        lines += [f"  error: {e['step']}: {e['detail']}" for e in self.errors]
        if self.enqueue_skipped:
            lines.append(f"  enqueue skipped: {self.enqueue_skipped}")
        lines += [f"  log: {line}" for line in self.log if line.severity in ("ERROR", "INTERNAL_ERROR", "WARNING")]
        return "\n".join(lines)

    def assert_conformant(self) -> None:
        """Raise AssertionError (with the summary) unless the run completed without violations or errors."""
        if self.stopped or self.violations or self.errors:
            raise AssertionError(self.summary())


# ---------------------------------------------------------------------------------------------- libraries


def _build():
    from .. import _build

    return _build.build_plugin_library()


def plugin_library() -> Path:
    from .. import native

    return native.plugin_library_path()


_private_copies: dict[tuple[str, int, int], Path] = {}


def _private_copy(library: str | Path) -> Path:
    """A per-process copy of the plugin library for the harness to load.

    A plugin library holds process-wide state (the logger finder set by ``setLoggerFinder``). Loading
    TensorRT's own copy would make the harness and a TensorRT registry in the same process take that
    state from each other; a copy (another inode) is a separate instance with its own globals.
    """
    import shutil
    import tempfile

    path = Path(library).resolve()
    if not path.is_file():
        return path  # the harness reports a missing library itself
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns, stat.st_size)
    if key not in _private_copies:
        folder = Path(tempfile.mkdtemp(prefix="torchtrt_plugins_harness_"))
        copy = folder / path.name
        shutil.copy2(path, copy)
        _private_copies[key] = copy
    return _private_copies[key]


def _harness(path: str | Path | None = None) -> ctypes.CDLL:
    path = str(path or _build().harness or "")
    if not path:
        raise HarnessError("these sources have no conformance harness (csrc/harness)")
    with _lock:
        lib = _handles.get(path)
        if lib is None:
            # RTLD_GLOBAL: plugins find the harness's plugin registry with dlsym(RTLD_DEFAULT, ...).
            lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            lib.ttp_harness_run.argtypes = [ctypes.c_char_p, _ALLOCATE, ctypes.c_void_p]
            lib.ttp_harness_run.restype = ctypes.c_void_p
            lib.ttp_harness_bench.argtypes = [ctypes.c_char_p]
            lib.ttp_harness_bench.restype = ctypes.c_void_p
            lib.ttp_harness_free.argtypes = [ctypes.c_void_p]
            lib.ttp_harness_free.restype = None
            _handles[path] = lib
        return lib


# ---------------------------------------------------------------------------------------------- requests


#: JSON has no NaN or infinity: the harness reads and writes a field's non-finite floats as these strings (the names
#: Python's json module gives them).
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_FLOAT_FIELD_TYPES = frozenset({"FLOAT16", "BF16", "FLOAT32", "FLOAT64"})


def _finite_json(value: Any) -> Any:
    if isinstance(value, list):
        return [_finite_json(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return value


def _from_finite_json(entry: dict) -> dict:
    """A field the harness reported, its non-finite floats read back (a ``json.loads`` object hook)."""
    data = entry.get("data")
    if entry.get("type") in _FLOAT_FIELD_TYPES and isinstance(data, (list, str)):
        values = [
            _NON_FINITE.get(v, v) if isinstance(v, str) else v for v in ([data] if isinstance(data, str) else data)
        ]
        entry["data"] = values[0] if isinstance(data, str) else values
    return entry


def field_json(f: Any) -> dict:
    """One field for the harness: a ``FieldValue``, ``(name, type, value)`` or a dict (passed through); non-finite
    floats become ``"NaN"``, ``"Infinity"`` or ``"-Infinity"`` (strict JSON)."""
    if isinstance(f, Mapping):
        entry = dict(f)
        if "data" in entry:
            entry["data"] = _finite_json(entry["data"])
        return entry
    if isinstance(f, tuple) and len(f) == 3:
        name, ftype, value = f
    else:
        name, ftype, value = f.name, f.type, f.value
    if isinstance(value, (bytes, bytearray)):
        return {"name": name, "type": ftype, "hex": bytes(value).hex()}
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        value = list(value)
    return {"name": name, "type": ftype, "data": _finite_json(value)}


def _fields_json(fields: Iterable[Any] | Mapping[str, tuple[str, Any]] | None) -> list[dict]:
    if fields is None:
        return []
    if isinstance(fields, Mapping):
        return [field_json((name, ftype, value)) for name, (ftype, value) in fields.items()]
    return [field_json(f) for f in fields]


def _dims(shape: Any) -> list[int]:
    return [int(d) for d in shape]


def _dtype_name(dtype: torch.dtype) -> str:
    try:
        return _DTYPE_NAMES[dtype]
    except KeyError:
        raise HarnessError(f"dtype {dtype} has no TensorRT DataType the harness knows") from None


def _input_json(value: Any, profile: Any, device_data: bool) -> dict:
    if isinstance(value, torch.Tensor):
        shape, dtype = tuple(value.shape), value.dtype
    elif isinstance(value, TensorArg):
        shape, dtype = value.shape, value.dtype
    elif isinstance(value, tuple) and len(value) == 2 and isinstance(value[1], torch.dtype):
        shape, dtype = value
    else:
        raise HarnessError(f"an input must be a tensor, a TensorArg or (shape, dtype), got {value!r}")
    entry = {"dtype": _dtype_name(dtype), "dims": _dims(shape)}
    if profile is not None:
        low, opt, high = profile
        entry.update(min=_dims(low), opt=_dims(opt), max=_dims(high))
    if device_data and isinstance(value, torch.Tensor):
        entry["ptr"] = value.data_ptr()
    return entry


def _shape_input_json(value: Any) -> dict:
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, ShapeArg):
        entry = {"values": _dims(value.values)}
        for key in ("min", "opt", "max"):
            if getattr(value, key) is not None:
                entry[key] = _dims(getattr(value, key))
        return entry
    if isinstance(value, torch.Tensor):
        value = value.reshape(-1).tolist()
    if isinstance(value, (int, torch.SymInt)):
        value = [int(value)]
    return {"values": _dims(value)}


def _prepare_inputs(inputs: Sequence[Any], enqueue: bool | None) -> tuple[list[Any], bool, torch.device | None]:
    """Tensors made contiguous and moved to the GPU when an enqueue is wanted and possible."""
    tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
    can = torch.cuda.is_available() and len(tensors) == len(inputs)
    want = can if enqueue is None else enqueue
    if not want or not can:
        return list(inputs), False, None
    device = next((t.device for t in tensors if t.is_cuda), torch.device("cuda", torch.cuda.current_device()))
    prepared = [x.to(device).contiguous() for x in inputs]
    return prepared, True, device


def _tensor(buffers: list[torch.Tensor], out: dict, device: torch.device | None) -> torch.Tensor:
    dims = [int(d) for d in out["dims"]]
    dtype = _DTYPES.get(out["dtype"])
    index = out.get("buffer", -1)
    device = device or (buffers[0].device if buffers else "cpu")  # empty outputs stay on the inputs' device
    if dtype is None:
        raise HarnessError(f"output dtype {out['dtype']} has no torch dtype")
    count = math.prod(dims)
    if index < 0:
        return torch.empty(dims, dtype=dtype, device=device)
    raw = buffers[index]
    nbytes = count * torch.empty((), dtype=dtype).element_size()
    return raw[:nbytes].view(dtype).reshape(dims)


def _combination(rows: Any) -> tuple[tuple[str, str], ...]:
    return tuple((str(t), str(f)) for t, f in rows)


def _result(reply: dict, plugin: str, buffers: list[torch.Tensor], device: torch.device | None = None) -> HarnessResult:
    if "fatal" in reply:
        raise HarnessError(f"harness: {reply['fatal']}")
    runs = []
    for r in reply.get("runs", []):
        outputs = [_tensor(buffers, out, device) for out in r.get("outputs", [])] if r.get("status") == "ok" else []
        runs.append(
            RunRecord(
                phase=r["phase"],
                tactic=int(r["tactic"]),
                status=r.get("status", "?"),
                outputs=outputs,
                size_tensor_values={int(k): int(v) for k, v in r.get("size_tensor_values", {}).items()},
                raw=r,
            )
        )
    logs = [LogLine(line["severity"], line["message"], line.get("during", "")) for line in reply.get("log", [])]
    return HarnessResult(
        plugin=plugin,
        raw=reply,
        creators=reply.get("creators", []),
        output_types=reply.get("output_types", []),
        aliased_inputs=reply.get("aliased_inputs"),
        resources=reply.get("resources") or {},
        output_shapes=reply.get("output_shapes", {}),
        size_tensors=reply.get("size_tensors", []),
        formats=[_combination(row) for row in reply.get("formats", [])],
        configured=_combination(reply["configured"]) if "configured" in reply else None,
        workspace_size=reply.get("workspace_size"),
        tactics=[int(t) for t in reply.get("tactics", [])],
        timing_cache_id=reply.get("timing_cache_id"),
        format_combination_limit=reply.get("format_combination_limit"),
        serialized_fields=reply.get("serialized_fields", []),
        runtime_fields=reply.get("runtime_fields"),
        invalid_fields=[
            InvalidFieldsResult(
                fields=entry["fields"],
                rejected=bool(entry["rejected"]),
                log=[LogLine(line["severity"], line["message"], line.get("during", "")) for line in entry["log"]],
            )
            for entry in reply.get("invalid_fields", [])
        ],
        runs=runs,
        log=logs,
        violations=[Violation(v["rule"], v["plugin"], v["method"], v["detail"]) for v in reply.get("violations", [])],
        errors=reply.get("errors", []),
        stopped=reply.get("stopped"),
        enqueue_skipped=reply.get("enqueue_skipped"),
        calls=list(reply.get("calls", [])),
    )


def _request(
    library: str | Path | None,
    name: str,
    version: str,
    namespace: str,
    fields: Any,
    inputs: Sequence[Any],
    shape_inputs: Sequence[Any],
    profile: Sequence[Any] | None,
    device_data: bool,
) -> dict:
    if profile is not None and len(profile) != len(inputs):
        raise HarnessError(f"profile has {len(profile)} entries for {len(inputs)} inputs")
    profiles = list(profile) if profile is not None else [None] * len(inputs)
    return {
        "library": str(_private_copy(library or plugin_library())),
        "plugin": {"name": name, "version": version, "namespace": namespace},
        "fields": _fields_json(fields),
        "inputs": [_input_json(x, p, device_data) for x, p in zip(inputs, profiles, strict=False)],
        "shape_inputs": [_shape_input_json(s) for s in shape_inputs],
    }


# ---------------------------------------------------------------------------------------------- entry points


def run_plugin(
    library: str | Path | None,
    name: str,
    version: str = "1",
    namespace: str = "torchtrt",
    fields: Any = None,
    inputs: Sequence[Any] = (),
    shape_inputs: Sequence[Any] = (),
    profile: Sequence[tuple[Sequence[int], Sequence[int], Sequence[int]] | None] | None = None,
    tactics: Sequence[int] | None = None,
    invalid_fields: Sequence[Any] = (),
    enqueue: bool | None = None,
    compare_runtime_outputs: bool = True,
    gate_timeout_s: float = 2.0,
    harness: str | Path | None = None,
    enqueue_syncs_host: bool = False,
    instances: int = 1,
    capture_first_enqueue: bool = False,
) -> HarnessResult:
    """Run one plugin through the harness.

    Args:
        library: the plugin library (None: this project's ``libtorchtrt_plugins_v3.so``).
        name, version, namespace: the creator to use.
        fields: ``FieldValue``s, ``(name, type, value)`` tuples, raw dicts, or ``{name: (type, value)}``.
        inputs: torch tensors (enqueued when a GPU is present), or ``TensorArg``/``(shape, dtype)`` for the
            build-phase checks only.
        shape_inputs: values of shape inputs (ints, lists, tensors or ``ShapeArg`` with min/opt/max values).
        profile: per input ``(min, opt, max)`` shapes, or None (static: every point is the input's shape).
        tactics: tactics to enqueue (default: 0 and every tactic the plugin advertises).
        invalid_fields: field sets (same forms as ``fields``) that ``createPlugin`` must reject.
        enqueue: force (True) or skip (False) the execution phase; None: when a GPU and tensors are there.
        compare_runtime_outputs: the runtime plugin must reproduce the build plugin's outputs bit for bit.
        gate_timeout_s: how long the stream gate holds before giving up (bounds every enqueue check).
        enqueue_syncs_host: the op declares that enqueue reads back to the host (``OpSpec.enqueue_syncs_host``);
            undeclared, enqueue must capture in a CUDA graph and replay to the same outputs ("graph-capture",
            "graph-replay"); declared, it must not capture ("host-sync-declaration").
        instances: runtime plugins attached at once per tactic (as an engine holds one per layer of the op), each
            enqueued and compared with the first ("instances"); ``result.resources`` reports, per shared resource key
            the run acquired, its acquires, builds (registry clones), releases, peak references and references held
            at the end (0: released).
        capture_first_enqueue: the first enqueue after each ``onShapeChange`` must capture in a CUDA graph (global
            mode, as PyTorch captures; "first-enqueue-capture"), as a deserialized engine captured at once needs:
            meaningful in a process where the library has not run yet.
    """
    prepared, device_data, device = _prepare_inputs(inputs, enqueue)
    request = _request(library, name, version, namespace, fields, prepared, shape_inputs, profile, device_data)
    request.update(
        tactics=None if tactics is None else [int(t) for t in tactics],
        invalid_fields=[_fields_json(s) for s in invalid_fields],
        enqueue=enqueue is not False,
        compare_runtime_outputs=compare_runtime_outputs,
        gate_timeout_s=gate_timeout_s,
        enqueue_syncs_host=bool(enqueue_syncs_host),
        instances=int(instances),
        capture_first_enqueue=bool(capture_first_enqueue),
    )
    buffers: list[torch.Tensor] = []

    def allocate(_user, nbytes):
        try:
            buffer = torch.empty(max(int(nbytes), 1), dtype=torch.uint8, device=device)
        except Exception:  # noqa: BLE001 - reported to the harness as a failed allocation
            return None
        buffers.append(buffer)
        return buffer.data_ptr()

    lib = _harness(harness)
    callback = _ALLOCATE(allocate)
    if device is not None:
        torch.cuda.synchronize(device)
        with torch.cuda.device(device):
            raw = lib.ttp_harness_run(json.dumps(request).encode(), callback, None)
    else:
        raw = lib.ttp_harness_run(json.dumps(request).encode(), callback, None)
    reply = _decode(lib, raw)
    return _result(reply, f"{namespace}::{name} v{version}", buffers, device)


def _decode(lib: ctypes.CDLL, raw: int | None) -> dict:
    if not raw:
        raise HarnessError("the harness returned no result")
    try:
        return json.loads(ctypes.string_at(raw).decode("utf-8", "replace"), object_hook=_from_finite_json)
    finally:
        lib.ttp_harness_free(raw)


def _call_inputs(call: Any, inputs: Sequence[Any]) -> list[Any]:
    chosen = list(inputs) if inputs else list(call.tensor_inputs)
    if len(chosen) != len(call.tensor_inputs):
        raise HarnessError(f"{call.op}: the plugin takes {len(call.tensor_inputs)} tensor inputs, got {len(chosen)}")
    casts = list(getattr(call, "input_casts", None) or [None] * len(chosen))
    for i, value in enumerate(chosen):
        if isinstance(value, torch.fx.Node):
            meta = value.meta.get("val")
            if not isinstance(meta, torch.Tensor):
                raise HarnessError(f"{call.op}: input {i} is an FX node without a tensor value; pass the tensors")
            value = chosen[i] = TensorArg(tuple(int(d) for d in meta.shape), meta.dtype)
        # What the converter's cast layer does in front of the plugin (e.g. a bool mask taken as INT32).
        if casts[i] is not None and isinstance(value, torch.Tensor):
            chosen[i] = value.to(casts[i])
        elif casts[i] is not None and isinstance(value, TensorArg):
            chosen[i] = TensorArg(value.shape, casts[i])
    return chosen


def run_call(call: Any, *inputs: Any, library: str | Path | None = None, **kwargs: Any) -> HarnessResult:
    """Run the plugin a converter planned (a ``converters.PluginCall``) on ``inputs``.

    ``inputs`` default to the call's own tensor inputs (tensors, or FX nodes with fake values, which give the
    build-phase checks only). Shape inputs come from the call unless ``shape_inputs=`` is given. Other keyword
    arguments are those of :func:`run_plugin`.
    """
    kwargs.setdefault("shape_inputs", list(call.shape_inputs))
    kwargs.setdefault("enqueue_syncs_host", _declares_host_sync(call.op))
    return run_plugin(
        library,
        call.plugin_name,
        call.plugin_version,
        call.plugin_namespace,
        fields=call.fields,
        inputs=_call_inputs(call, inputs),
        **kwargs,
    )


def _declares_host_sync(op: str) -> bool:
    """``OpSpec.enqueue_syncs_host`` of a registered op (False for a name that is not one)."""
    from .. import registry

    try:
        return bool(registry.get(op).spec.enqueue_syncs_host)
    except KeyError:
        return False


def _call_for(call_or_spec: Any, fields: Mapping[str, Any] | None, inputs: Sequence[Any] = ()) -> Any:
    """A PluginCall from a PluginCall, or the converter's plan of an op's OpSpec or name for ``inputs`` (fields from
    ``fields`` by field or argument name, else the declared defaults)."""
    if hasattr(call_or_spec, "plugin_name") and hasattr(call_or_spec, "fields") and hasattr(call_or_spec, "op"):
        return call_or_spec
    from .. import registry
    from ..plan import plan

    op_spec = registry.get(call_or_spec).spec if isinstance(call_or_spec, str) else call_or_spec
    values = dict(fields or {})
    arguments = {t.name: tensor for t, tensor in zip(op_spec.inputs, inputs, strict=True)}
    arguments.update({f.arg: values[k] for f in op_spec.fields for k in (f.name, f.arg) if k in values})
    return plan(op_spec, (), arguments)


def bench_enqueue(
    call_or_spec: Any,
    inputs: Sequence[torch.Tensor],
    tactic: int = 0,
    iters: int = 100,
    warmup: int = 10,
    fields: Mapping[str, Any] | None = None,
    shape_inputs: Sequence[Any] = (),
    library: str | Path | None = None,
) -> list[float]:
    """Time the plugin's ``enqueue`` alone: per-iteration milliseconds measured with CUDA events.

    Args:
        call_or_spec: a ``converters.PluginCall`` (from ``plan``/``plan_node``), an ``OpSpec``, or an op name
            such as ``"rms_norm"``; for the latter two the fields come from ``fields`` (by field or argument
            name, e.g. ``{"eps": 1e-5}``) or the spec's defaults.
        inputs: CUDA tensors, in the plugin's input order (e.g. ``[x, weight]``).
        tactic: the tactic passed to ``setTactic`` (0: the plugin's default heuristic).
        iters, warmup: timed and untimed enqueues; each timed one is bracketed by its own pair of events on a
            non-blocking stream, so the times exclude launch gaps between iterations but include all kernels
            the plugin enqueues.
        shape_inputs: shape-input values, if the plugin takes any.
        library: the plugin library (default: this project's).

    Returns:
        ``iters`` floats, milliseconds per enqueue. Raises HarnessError when the plugin cannot be set up or no GPU
        is present.
    """
    call = _call_for(call_or_spec, fields, inputs)
    if not torch.cuda.is_available():
        raise HarnessError("bench_enqueue needs a CUDA GPU")
    prepared, _, device = _prepare_inputs(list(inputs), True)
    request = _request(
        library,
        call.plugin_name,
        call.plugin_version,
        call.plugin_namespace,
        call.fields,
        prepared,
        shape_inputs or list(call.shape_inputs),
        None,
        True,
    )
    request["bench"] = {"tactic": int(tactic), "iters": int(iters), "warmup": int(warmup)}
    lib = _harness()
    torch.cuda.synchronize(device)
    with torch.cuda.device(device):
        reply = _decode(lib, lib.ttp_harness_bench(json.dumps(request).encode()))
    if "fatal" in reply:
        raise HarnessError(f"bench_enqueue({call.plugin_name}, tactic {tactic}): {reply['fatal']}")
    return [float(t) for t in reply["times_ms"]]
