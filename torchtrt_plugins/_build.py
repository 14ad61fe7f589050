"""Building the native pieces from the one set of sources in ``csrc/``.

Two products:
- the TensorRT plugin library (``libtorchtrt_plugins_v3.so``, CMake target ``torchtrt_plugins_v3``) and the
  conformance harness, built with CMake/nvcc against the TensorRT headers (no libnvinfer, no libtorch);
- the torch extension registering the CUDA implementations of the ops, built with
  ``torch.utils.cpp_extension`` when a CUDA GPU is present.

Both are cached under ``$TORCHTRT_PLUGINS_CACHE`` (default ``~/.cache/torchtrt_plugins``), keyed by a
hash of the sources and build settings, so a build happens once per change.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

PLUGIN_LIBRARY_NAME = "libtorchtrt_plugins_v3.so"
HARNESS_LIBRARY_NAME = "libtorchtrt_plugins_harness.so"
BROKEN_PLUGINS_LIBRARY_NAME = "libttp_broken_plugins.so"
TORCH_EXTENSION_NAME = "torchtrt_plugins_cuda_ops"
DEFAULT_CUDA_ARCH = "90"


class BuildError(RuntimeError):
    pass


def _message(text: str) -> None:
    print(f"[torchtrt_plugins] {text}", file=sys.stderr, flush=True)


def source_dir() -> Path:
    """The checkout holding ``csrc/`` and ``CMakeLists.txt``."""
    override = os.environ.get("TORCHTRT_PLUGINS_SOURCE_DIR")
    root = Path(override) if override else Path(__file__).resolve().parent.parent
    if not (root / "csrc").is_dir() or not (root / "CMakeLists.txt").is_file():
        raise BuildError(
            f"native sources not found under {root}; install torchtrt-plugins from a source checkout "
            "(pip install -e .) or set TORCHTRT_PLUGINS_SOURCE_DIR to one"
        )
    return root


def cache_dir() -> Path:
    base = os.environ.get("TORCHTRT_PLUGINS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "torchtrt_plugins"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


def tensorrt_include_dir() -> Path | None:
    """TensorRT headers: ``TENSORRT_INCLUDE_DIR``, ``TENSORRT_ROOT/include``, then known places."""
    candidates = []
    if os.environ.get("TENSORRT_INCLUDE_DIR"):
        candidates.append(Path(os.environ["TENSORRT_INCLUDE_DIR"]))
    if os.environ.get("TENSORRT_ROOT"):
        candidates.append(Path(os.environ["TENSORRT_ROOT"]) / "include")
    try:
        root = source_dir()
        candidates += [
            root / ".deps" / "tensorrt" / "include",
            root.parent / "shared" / "third_party" / "tensorrt" / "include",
        ]
    except BuildError:
        pass
    candidates += [Path("/usr/include/x86_64-linux-gnu"), Path("/usr/local/tensorrt/include")]
    for candidate in candidates:
        if (candidate / "NvInferRuntime.h").is_file():
            return candidate.resolve()
    return None


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return None


def missing_build_tools() -> list[str]:
    """What building the plugin library needs and this machine lacks (empty when it can build)."""
    needs = {"nvcc": nvcc_path(), "cmake": shutil.which("cmake"), "TensorRT headers": tensorrt_include_dir()}
    return [name for name, found in needs.items() if not found]


def cuda_archs() -> str:
    """CMake CUDA architectures: ``TORCHTRT_PLUGINS_CUDA_ARCHS``, else the visible GPU, else sm_90."""
    if os.environ.get("TORCHTRT_PLUGINS_CUDA_ARCHS"):
        return os.environ["TORCHTRT_PLUGINS_CUDA_ARCHS"]
    try:
        import torch

        if torch.cuda.is_available():
            major, minor = torch.cuda.get_device_capability()
            return f"{major}{minor}"
    except Exception:  # noqa: BLE001 - no usable torch/CUDA: fall back to the default
        pass
    return DEFAULT_CUDA_ARCH


def _hash_sources(root: Path, patterns: tuple[str, ...], extra: str) -> str:
    digest = hashlib.sha256(extra.encode())
    for pattern in patterns:
        for path in sorted(p for p in root.glob(pattern) if p.is_file()):
            digest.update(str(path.relative_to(root)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@contextlib.contextmanager
def _locked(path: Path):
    """Serialize builds of one cache entry across processes (parallel test runs, several shells)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass
class PluginBuild:
    directory: Path
    library: Path
    harness: Path | None
    built_now: bool
    #: The harness's deliberately broken test plugins (built with the harness).
    broken_plugins: Path | None = None


_NATIVE_PATTERNS = (
    "CMakeLists.txt",
    "csrc/kernels/**/*",
    "csrc/contracts/**/*",
    "csrc/plugins/**/*",
    "csrc/harness/**/*",
)


def plugin_build_dir(root: Path, include: Path, nvcc: str, archs: str) -> Path:
    """The cache entry of the plugin library for these sources, headers, compiler and architectures."""
    return cache_dir() / f"plugins-{_hash_sources(root, _NATIVE_PATTERNS, f'{include}|{archs}|{nvcc}')}"


def build_plugin_library(force: bool = False, quiet: bool = False) -> PluginBuild:
    """Build (or find in the cache) the plugin library and the harness. Raises BuildError with the reason."""
    root = source_dir()
    include = tensorrt_include_dir()
    if include is None:
        raise BuildError(
            "TensorRT headers not found: set TENSORRT_INCLUDE_DIR (the folder holding NvInferRuntime.h) "
            "or TENSORRT_ROOT"
        )
    nvcc = nvcc_path()
    if nvcc is None:
        raise BuildError("nvcc not found: install the CUDA toolkit or set CUDA_HOME")
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake not found: pip install cmake")
    archs = cuda_archs()
    build_dir = plugin_build_dir(root, include, nvcc, archs)
    library = build_dir / PLUGIN_LIBRARY_NAME
    harness = build_dir / HARNESS_LIBRARY_NAME if (root / "csrc" / "harness").is_dir() else None
    broken = build_dir / BROKEN_PLUGINS_LIBRARY_NAME if harness is not None else None
    products = [p for p in (library, harness, broken) if p is not None]
    with _locked(build_dir):
        if all(p.is_file() for p in products) and not force:
            return PluginBuild(build_dir, library, harness, built_now=False, broken_plugins=broken)
        _run_cmake(root, build_dir, include, nvcc, cmake, archs, quiet)
    missing = [str(p) for p in products if not p.is_file()]
    if missing:
        raise BuildError(f"build finished but {', '.join(missing)} missing")
    return PluginBuild(build_dir, library, harness, built_now=True, broken_plugins=broken)


def _run_cmake(root: Path, build_dir: Path, include: Path, nvcc: str, cmake: str, archs: str, quiet: bool) -> None:
    if not quiet:
        _message(f"building the TensorRT plugin library for sm_{archs} into {build_dir} (once per source change)")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    env = dict(os.environ, CUDACXX=nvcc)
    configure = [
        cmake,
        "-S",
        str(root),
        "-B",
        str(build_dir),
        *generator,
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DTENSORRT_INCLUDE_DIR={include}",
        f"-DCMAKE_CUDA_ARCHITECTURES={archs}",
        f"-DCMAKE_CUDA_COMPILER={nvcc}",
    ]
    for command in (configure, [cmake, "--build", str(build_dir), "--parallel"]):
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(
                f"plugin library build failed: {' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            )


def build_torch_extension(quiet: bool = False):
    """Build (or load from the cache) the torch extension with the CUDA ops; returns the loaded module."""
    import torch
    from torch.utils import cpp_extension

    root = source_dir()
    if not torch.cuda.is_available():
        raise BuildError(
            "no CUDA GPU visible to torch: the CUDA ops are not built (the CPU reference kernels are used)"
        )
    if nvcc_path() is None:
        raise BuildError("nvcc not found: install the CUDA toolkit or set CUDA_HOME")
    archs = cuda_archs()
    cflags = ["-O3"]
    cuda_cflags = ["-O3", "--expt-relaxed-constexpr"]
    key = _hash_sources(
        root,
        ("csrc/kernels/*", "csrc/contracts/*", "csrc/torch/*"),
        f"{torch.__version__}|{torch.version.cuda}|{archs}|{sys.version_info[:2]}|{cflags}|{cuda_cflags}",
    )
    build_dir = cache_dir() / f"torch-ext-{key}"
    build_dir.mkdir(parents=True, exist_ok=True)
    if not any(build_dir.glob(f"{TORCH_EXTENSION_NAME}*.so")) and not quiet:
        _message(f"building the CUDA ops for sm_{archs} into {build_dir} (once per source change, ~1-2 min)")
    sources = sorted(str(p) for p in (root / "csrc" / "torch").glob("*.cpp"))
    sources += sorted(str(p) for p in (root / "csrc" / "kernels").glob("*.cu"))
    os.environ.setdefault("CUDA_HOME", str(Path(nvcc_path()).parent.parent))
    os.environ["TORCH_CUDA_ARCH_LIST"] = f"{archs[:-1]}.{archs[-1]}"
    return cpp_extension.load(
        name=TORCH_EXTENSION_NAME,
        sources=sources,
        extra_include_paths=[str(root / "csrc")],
        extra_cflags=cflags,
        extra_cuda_cflags=cuda_cflags,
        build_directory=str(build_dir),
        is_python_module=False,
        verbose=False,
    )
