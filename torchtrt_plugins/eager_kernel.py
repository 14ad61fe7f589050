"""The C++ eager kernel of declared ops: one boxed torch kernel for every op (``csrc/sdk/eager.cpp``).

It is built against LibTorch's stable ABI (the C shims, targeting torch 2.11), so one binary serves every torch from
2.11 on. It is built on first use (a C++ compiler, torch's headers and the CUDA runtime headers; once per source
change, with a message) into the cache; a prebuilt one in ``torchtrt_plugins/lib`` is used first (a wheel built
where torch is importable ships one, which finds ``libtorch_cpu.so`` next to the installed torch: :data:`WHEEL_RPATH`).

A declared op gets its CUDA kernel in two steps. :func:`torchtrt_plugins.sdk.register_eager_kernel` registers a
Python kernel at ``declare`` time, which loads nothing. Its first call loads this library and the op's launcher
library and registers the C++ kernel in its place, from the op's table (``ttp_sdk_eager_op``), with a hook that runs
the op's fake kernel once per new call signature, so that its own checks and messages still apply. Where the C++
kernel cannot be had, the Python kernel stays (:func:`torchtrt_plugins.sdk.launch`) and one warning per process
says why. ``TORCHTRT_PLUGINS_EAGER=python`` keeps the Python kernel without a warning. The C++ kernel's errors are
``RuntimeError``s (torch's stable ABI carries no exception type) with the Python path's messages.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from . import _build, _derive, sdk

if TYPE_CHECKING:
    from .declare import Declaration

#: The library's file name, prebuilt in a wheel's ``torchtrt_plugins/lib``.
LIBRARY_NAME = "libtorchtrt_plugins_eager.so"
#: The oldest torch whose stable ABI the library targets (TORCH_TARGET_VERSION).
TARGET_TORCH = (2, 11)
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
_library: ctypes.CDLL | None = None
_unavailable: str | None = None
_warned = False
#: Hook token -> declaration (the hook's argument), and each installed op's handle.
_declarations: list[Declaration] = []
_handles: dict[str, ctypes.c_void_p] = {}
#: The Python kernels replaced while they ran, kept alive past their own call (see :func:`install`).
_replaced: list[Any] = []


#: ttp::DType -> torch dtype (the hook's dtypes).
_TORCH_DTYPES = {code: dtype for dtype, code in sdk.KERNEL_DTYPES.items()}


class EagerKernelUnavailable(RuntimeError):
    """Why the C++ eager kernel cannot serve here (the Python kernel does instead)."""


def sources() -> list[Path]:
    csrc = _build.source_dir() / "csrc"
    names = [
        "sdk/eager.cpp",
        "sdk/rules.cpp",
        "sdk/rules.h",
        "sdk/op_table.h",
        "sdk/ttp_sdk.h",
        "kernels/common.h",
        "sdk/eager.map",
    ]
    return [csrc / name for name in names]


def _cuda_include_dir() -> Path | None:
    """Where ``cuda_runtime_api.h`` is: the toolkit of nvcc or CUDA_HOME, else the ``nvidia-cuda-runtime`` package."""
    candidates = []
    nvcc = _build.nvcc_path()
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            candidates.append(Path(home) / "include")
    try:
        import nvidia  # the pip packages of the CUDA runtime (torch's CUDA builds install them)

        candidates += [Path(p) / "cu13" / "include" for p in nvidia.__path__]
        candidates += [Path(p) / "cuda_runtime" / "include" for p in nvidia.__path__]
    except ImportError:
        pass
    return next((c for c in candidates if (c / "cuda_runtime_api.h").is_file()), None)


def _compiler() -> str | None:
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def build_prerequisites() -> list[str]:
    """What building the library here lacks (empty when it can build)."""
    reasons = []
    if _compiler() is None:
        reasons.append("no C++ compiler found (set CXX)")
    if _cuda_include_dir() is None:
        reasons.append(
            "the CUDA runtime headers (cuda_runtime_api.h) are not found: install the CUDA toolkit or set CUDA_HOME"
        )
    if not (Path(torch.__file__).parent / "include" / "torch" / "csrc" / "stable").is_dir():
        reasons.append(f"torch {torch.__version__} carries no stable-ABI headers (torch/csrc/stable)")
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < TARGET_TORCH:
        reasons.append(f"torch {torch.__version__} is older than {'.'.join(map(str, TARGET_TORCH))}")
    return reasons


def build(output: Path, *, quiet: bool = False, extra_flags: Sequence[str] = (), compiler: str | None = None) -> Path:
    """Compile the library into ``output`` (the wheel's prebuild and the first-use build). Raises BuildError.

    It exports its ``ttp_eager_*`` entry points and nothing else: a compiler that links libstdc++ statically by
    default (the H100 machine's ``CXX``) would otherwise export that copy's symbols, which then mix with the
    process's own libstdc++ (torch's) and crash in the first ``std::ostream`` call. ``compiler`` (default: ``CXX``, else
    the first found) is how the wheel's prebuild links it for manylinux_2_28."""
    missing = [r for r in build_prerequisites() if compiler is None or not r.startswith("no C++ compiler")]
    if missing:
        raise _build.BuildError("cannot build the C++ eager kernel: " + "; ".join(missing))
    torch_dir = Path(torch.__file__).parent
    csrc = _build.source_dir() / "csrc"
    major, minor = TARGET_TORCH
    cxx = compiler or str(_compiler())
    compile_flags = [
        "-std=c++17",
        "-O2",
        "-fPIC",
        "-fvisibility=hidden",
        f"-DTORCH_TARGET_VERSION=0x{major:02x}{minor:02x}000000000000",
        f"-I{csrc}",
        f"-I{torch_dir / 'include'}",
        f"-I{_cuda_include_dir()}",
    ]
    if not quiet:
        _build._message(
            f"building the C++ eager kernel of declared ops against torch {torch.__version__}'s stable ABI into "
            f"{output.parent} (once per source change)"
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    # Compiled, then linked: the manylinux_2_28 compiler compiles with g++ and links with zig, one step each.
    with tempfile.TemporaryDirectory(dir=output.parent) as work:
        objects = []
        for source in (s for s in sources() if s.suffix == ".cpp"):
            objects.append(str(Path(work) / f"{source.stem}.o"))
            _run([cxx, *compile_flags, "-c", str(source), "-o", objects[-1]])
        _run(
            [
                cxx,
                "-shared",
                *objects,
                f"-L{torch_dir / 'lib'}",
                "-ltorch_cpu",
                "-ldl",
                "-Wl,--no-undefined",
                f"-Wl,--version-script={csrc / 'sdk' / 'eager.map'}",
                *extra_flags,
                "-o",
                str(output),
            ]
        )
    return output


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise _build.BuildError(f"{' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")


def library_path() -> Path:
    """The library: prebuilt in a wheel, else built from the sources into the cache (on first use)."""
    prebuilt = _build.PREBUILT_DIR / LIBRARY_NAME
    if prebuilt.is_file():
        return prebuilt
    digest = hashlib.sha256(f"{torch.__version__}|{_compiler()}|{TARGET_TORCH}".encode())
    digest.update(Path(__file__).read_bytes())  # the build command
    for path in sources():
        digest.update(path.read_bytes())
    directory = _build.cache_dir() / f"eager-{digest.hexdigest()[:16]}"
    output = directory / LIBRARY_NAME
    with _build._locked(directory):
        if not output.is_file():
            build(output)
    return output


def library() -> ctypes.CDLL:
    """The loaded library (built first if need be); raises EagerKernelUnavailable with the reason."""
    global _library, _unavailable
    with _lock:
        if _library is not None:
            return _library
        if _unavailable is not None:
            raise EagerKernelUnavailable(_unavailable)
        try:
            lib = ctypes.CDLL(str(library_path()))
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
        except (OSError, _build.BuildError, AttributeError) as err:
            _unavailable = f"{type(err).__name__}: {err}"
            raise EagerKernelUnavailable(_unavailable) from None
        _library = lib
        return lib


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


def register(
    declaration: Declaration, *, name: str | None = None, dispatch_key: str = "CUDA", tactic_argument: bool = False
) -> ctypes.c_void_p:
    """Register the C++ kernel of ``declaration`` with torch's dispatcher (under op ``name``, default its own);
    returns its handle for :func:`unregister`. With ``tactic_argument``, the op takes one more argument, last: the
    value of the tactic whose launcher runs (our ops' ``<name>_tactic``). Raises EagerKernelUnavailable."""
    lib = library()
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
    return handle


def unregister(handle: ctypes.c_void_p) -> None:
    library().ttp_eager_unregister(handle)


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
