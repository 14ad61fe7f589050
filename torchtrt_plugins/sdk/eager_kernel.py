"""The C++ eager kernel of declared ops: one boxed torch kernel for every op (``csrc/sdk/eager.cpp``).

It comes in two flavours, one source (:data:`FLAVOURS`), tried in this order:

- ``native``: built against the full LibTorch ABI of the running torch, so it serves that torch only. It reads the
  dispatcher's arguments in place and allocates as torch's own CUDA kernels do: the least host time a call.
- ``stable``: built against LibTorch's stable ABI (the C shims, targeting torch 2.11), so one binary serves every
  torch from 2.11 on, at a little more host time a call (each argument converted to a StableIValue and back).

Each is taken prebuilt from ``torchtrt_plugins/lib`` where there is one for this torch (a wheel built where torch is
importable ships both: the stable one for every torch, the native one for the torch it was built with, which
``build_info.json`` names; they find ``libtorch_cpu.so`` next to the installed torch: :data:`WHEEL_RPATH`), else built
on first use into the cache (a C++ compiler, torch's headers and the CUDA runtime headers; once per torch and source
change, with a message). ``TORCHTRT_PLUGINS_EAGER=stable`` (or ``native``) takes that flavour only.

A declared op gets its CUDA kernel in two steps. :func:`torchtrt_plugins.sdk.register_eager_kernel` registers a
Python kernel at ``declare`` time, which loads nothing. Its first call loads this library and the op's launcher
library and registers the C++ kernel in its place, from the op's table (``ttp_sdk_eager_op``), with a hook that runs
the op's fake kernel once per new call signature, so that its own checks and messages still apply. Where the C++
kernel cannot be had, the Python kernel stays (:func:`torchtrt_plugins.sdk.launch`) and one warning per process
says why. ``TORCHTRT_PLUGINS_EAGER=python`` keeps the Python kernel without a warning. The C++ kernel's errors are
``RuntimeError``s with the Python path's messages.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from .. import _build, _derive
from ..declaration import Declaration
from .abi import KERNEL_DTYPES

#: The flavours, in the order tried.
FLAVOURS = ("native", "stable")
#: Each flavour's file name, prebuilt in a wheel's ``torchtrt_plugins/lib``.
LIBRARY_NAMES = {"native": "libtorchtrt_plugins_eager_native.so", "stable": "libtorchtrt_plugins_eager.so"}
#: build_info.json's key naming the torch the prebuilt native flavour was built for (:func:`torch_identity`).
NATIVE_TORCH_KEY = "eager_kernel_native_torch"
#: The oldest torch whose stable ABI the library targets (TORCH_TARGET_VERSION).
TARGET_TORCH = _build.EAGER_TARGET_TORCH
ENV = "TORCHTRT_PLUGINS_EAGER"
#: The prebuilt library's RPATH: torch's libraries from site-packages/torchtrt_plugins/lib (torch has loaded them by
#: the time the library is loaded; the RPATH is for the loader's and auditwheel's lookups).
WHEEL_RPATH = "$ORIGIN/../../torch/lib"

_HOOK = ctypes.CFUNCTYPE(
    ctypes.c_int32,
    ctypes.c_int32,
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_int32),
    ctypes.POINTER(ctypes.c_int32),
    ctypes.POINTER(ctypes.c_int64),
    ctypes.c_int32,
    ctypes.POINTER(ctypes.c_double),
    ctypes.c_void_p,
    ctypes.c_int32,
)

_lock = threading.RLock()
#: Per flavour: the loaded library, or why it is unavailable.
_libraries: dict[str, ctypes.CDLL] = {}
_unavailable: dict[str, str] = {}
_warned = False
#: Hook token -> declaration (the hook's argument), and each installed op's registration.
_declarations: list[Declaration] = []
_handles: dict[str, Registered] = {}
#: The Python kernels replaced while they ran, kept alive past their own call (see :func:`install`).
_replaced: list[Any] = []


#: ttp::DType -> torch dtype (the hook's dtypes).
_TORCH_DTYPES = {code: dtype for dtype, code in KERNEL_DTYPES.items()}


class EagerKernelUnavailable(RuntimeError):
    """Why the C++ eager kernel cannot serve here (the Python kernel does instead)."""


def torch_identity() -> str:
    """The running torch as the native flavour's ABI depends on it: version, commit and C++ ABI."""
    return f"{torch.__version__}|{torch.version.git_version}|cxx11abi={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"


def _check_flavour(flavour: str) -> None:
    if flavour not in FLAVOURS:
        raise ValueError(f"torchtrt_plugins eager kernel: flavour must be one of {FLAVOURS}, got {flavour!r}")


def build_prerequisites(flavour: str = "stable") -> list[str]:
    """What building the ``flavour`` library here lacks (empty when it can build)."""
    _check_flavour(flavour)
    return _build.eager_kernel_build_prerequisites(flavour)


def _prebuilt(flavour: str) -> Path | None:
    """The wheel's prebuilt ``flavour`` library, where it serves this torch."""
    path = _build.PREBUILT_DIR / LIBRARY_NAMES[flavour]
    if not path.is_file():
        return None
    if flavour == "stable":
        return path
    try:
        info = json.loads((_build.PREBUILT_DIR / "build_info.json").read_text())
    except (OSError, ValueError):
        return None
    return path if info.get(NATIVE_TORCH_KEY) == torch_identity() else None


#: The folder beside a first-use build's library that keeps its compiled objects (``_build.build_eager_kernel``).
OBJECTS = "objects"


def _cached(flavour: str) -> Path:
    """Where the first-use build of ``flavour`` goes: per torch (the native flavour: per torch_identity), compiler
    and source."""
    served = torch_identity() if flavour == "native" else torch.__version__
    digest = hashlib.sha256(f"{flavour}|{served}|{_build.cxx_compiler()}|{TARGET_TORCH}".encode())
    digest.update(Path(_build.__file__).read_bytes())  # the build command
    for path in _build.eager_kernel_sources(flavour):
        digest.update(path.read_bytes())
    return _build.cache_dir() / f"eager-{flavour}-{digest.hexdigest()[:16]}" / LIBRARY_NAMES[flavour]


def library_path(flavour: str = "stable") -> Path:
    """The ``flavour`` library: prebuilt in a wheel for this torch, else built from the sources into the cache (on
    first use). Raises BuildError."""
    _check_flavour(flavour)
    prebuilt = _prebuilt(flavour)
    if prebuilt is not None:
        return prebuilt
    output = _cached(flavour)
    with _build._locked(output.parent):
        if not output.is_file():
            _build.build_eager_kernel(output, flavour=flavour, objects=output.parent / OBJECTS)
    return output


def status(flavour: str) -> tuple[bool, str]:
    """Whether ``flavour`` can serve here, and how, without building or loading it: prebuilt for this torch, built
    into the cache, or buildable on first use; else why not."""
    _check_flavour(flavour)
    prebuilt = _prebuilt(flavour)
    if prebuilt is not None:
        return True, f"prebuilt for this torch ({prebuilt})"
    missing = build_prerequisites(flavour)
    if missing:
        return False, "cannot build here: " + "; ".join(missing)
    output = _cached(flavour)
    if output.is_file():
        return True, f"built ({output})"
    return True, "built on first use"


def _load(flavour: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(str(library_path(flavour)))
    lib.ttp_eager_flavour.restype = ctypes.c_char_p
    if lib.ttp_eager_flavour().decode() != flavour:
        raise EagerKernelUnavailable(f"{library_path(flavour)} is not the {flavour} flavour")
    lib.ttp_eager_table_version.restype = ctypes.c_int32
    lib.ttp_eager_register.restype = ctypes.c_int32
    lib.ttp_eager_register.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        _HOOK,
        ctypes.c_int32,
        ctypes.c_int32,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.c_char_p,
        ctypes.c_int32,
    ]
    lib.ttp_eager_unregister.restype = ctypes.c_int32
    lib.ttp_eager_unregister.argtypes = [ctypes.c_void_p]
    return lib


def chosen() -> tuple[str, ...]:
    """The flavours to try, in order: ``TORCHTRT_PLUGINS_EAGER=stable`` or ``native`` names one."""
    choice = os.environ.get(ENV, "").strip().lower()
    return (choice,) if choice in FLAVOURS else FLAVOURS


def library(flavour: str | None = None) -> ctypes.CDLL:
    """The loaded ``flavour`` library (built first if need be); by default the first of :data:`FLAVOURS` (or the one
    ``TORCHTRT_PLUGINS_EAGER`` names) that serves here. Raises EagerKernelUnavailable with the reasons."""
    with _lock:
        reasons = []
        for name in chosen() if flavour is None else (flavour,):
            _check_flavour(name)
            if name in _libraries:
                return _libraries[name]
            if name not in _unavailable:
                try:
                    _libraries[name] = _load(name)
                    return _libraries[name]
                except (OSError, _build.BuildError, AttributeError, EagerKernelUnavailable) as err:
                    _unavailable[name] = f"{type(err).__name__}: {err}"
            reasons.append(f"{name}: {_unavailable[name]}")
        raise EagerKernelUnavailable("; ".join(reasons))


def flavour() -> str:
    """The flavour the declared ops' eager calls run (:func:`library`'s). Raises EagerKernelUnavailable."""
    return library().ttp_eager_flavour().decode()


def _check(token, nb_inputs, dtypes, ranks, dims, nb_scalars, scalars, message, size) -> int:
    """The hook: the op's fake kernel on a call signature the C++ kernel has not seen (its checks, its messages)."""
    try:
        declaration = _declarations[token]
        metas, offset = [], 0
        for i in range(nb_inputs):
            shape = tuple(dims[offset + d] for d in range(ranks[i]))
            offset += ranks[i]
            metas.append(_derive.TensorMeta(shape, _TORCH_DTYPES[dtypes[i]]))
        values = {}
        for k, argument in enumerate(declaration.scalar_args):
            kind = declaration._types[argument.name]
            value = scalars[k]
            values[argument.name] = bool(value) if kind == "bool" else int(value) if kind != "float" else value
        declaration.check_shapes(metas, values)
        return 0
    except Exception as err:  # noqa: BLE001 - the message goes back to the C++ kernel, which raises it
        text = str(err).encode(errors="replace")[: size - 1]
        ctypes.memmove(message, text + b"\0", len(text) + 1)
        return 1


_CHECK = _HOOK(_check)


def _eager_op(declaration: Declaration) -> int:
    launchers = declaration.library.launchers()
    try:
        function = launchers.ttp_sdk_eager_op
    except AttributeError:
        raise EagerKernelUnavailable(
            f"library {declaration.library.name} has no eager tables (ttp_sdk_eager_op): rebuild it"
        ) from None
    function.restype = ctypes.c_void_p
    function.argtypes = [ctypes.c_char_p]
    address = function(declaration.qualname.encode())
    if not address:
        raise EagerKernelUnavailable(f"library {declaration.library.name} holds no eager table of {declaration.label}")
    return address


@dataclass(frozen=True)
class Registered:
    """A kernel registration (:func:`register`): the library that made it and its handle there."""

    library: ctypes.CDLL
    handle: ctypes.c_void_p

    @property
    def flavour(self) -> str:
        return self.library.ttp_eager_flavour().decode()


def register(
    declaration: Declaration,
    *,
    name: str | None = None,
    dispatch_key: str = "CUDA",
    tactic_argument: bool = False,
    flavour: str | None = None,
) -> Registered:
    """Register the C++ kernel of ``declaration`` with torch's dispatcher (under op ``name``, default its own), from
    the ``flavour`` library (default: :func:`library`'s); returns the registration for :func:`unregister`. With
    ``tactic_argument``, the op takes one more argument, last: the value of the tactic whose launcher runs (our ops'
    ``<name>_tactic``). Raises EagerKernelUnavailable."""
    lib = library(flavour)
    address = _eager_op(declaration)
    with _lock:
        _declarations.append(declaration)
        token = len(_declarations) - 1
    handle = ctypes.c_void_p()
    error = ctypes.create_string_buffer(2048)
    status = lib.ttp_eager_register(
        address,
        name.encode() if name else None,
        dispatch_key.encode(),
        _CHECK,
        token,
        int(tactic_argument),
        ctypes.byref(handle),
        error,
        len(error),
    )
    if status != 0:
        raise EagerKernelUnavailable(error.value.decode(errors="replace"))
    return Registered(lib, handle)


def unregister(registered: Registered) -> None:
    registered.library.ttp_eager_unregister(registered.handle)


def disabled() -> bool:
    """True where ``TORCHTRT_PLUGINS_EAGER=python`` chooses the Python kernel."""
    return os.environ.get(ENV, "").strip().lower() == "python"


def install(
    declaration: Declaration,
    python_kernel: torch.library.Library,
    *,
    qualname: str | None = None,
    tactic_argument: bool = False,
) -> bool:
    """Put the C++ kernel in place of the Python kernel of op ``qualname`` (default the declared op; registered by
    ``python_kernel``); False, with one warning per process saying why, where it cannot. Called from that Python
    kernel's first call, so the kernel being run is kept alive (its dispatcher entry is copied) before its
    registration is removed. ``tactic_argument``: as for :func:`register`."""
    global _warned
    if disabled():
        return False
    try:
        library()
        _eager_op(declaration)
    except EagerKernelUnavailable as err:
        with _lock:
            warn, _warned = not _warned, True
        if warn:
            warnings.warn(
                f"torchtrt_plugins: the C++ eager kernel of declared ops is unavailable ({err}); their eager CUDA "
                f"calls go through the Python path, with more host time per call. {ENV}=python silences this.",
                RuntimeWarning,
                stacklevel=3,
            )
        return False
    qualname = qualname or declaration.qualname
    keep = getattr(torch._C, "_dispatch_get_computed_kernel_for_dispatch_key", None)
    with _lock:
        if keep is not None:
            _replaced.append(keep(qualname, "CUDA"))
            python_kernel._destroy()
        _handles[qualname] = register(declaration, name=qualname, tactic_argument=tactic_argument)
    return True


def uninstall(declaration: Declaration, *, qualname: str | None = None) -> bool:
    """Remove the C++ kernel of op ``qualname`` (default the declared op; tests); the caller registers the Python
    kernel again. False if none."""
    with _lock:
        handle = _handles.pop(qualname or declaration.qualname, None)
    if handle is None:
        return False
    unregister(handle)
    return True
