"""Building every native piece from the one set of sources in ``csrc/``: the one module that runs a compiler.

- CMake (:func:`build_plugin_library`): the TensorRT plugin library (``libtorchtrt_plugins_v3.so``, CMake target
  ``torchtrt_plugins_v3``), the launcher library our ops' eager CUDA kernels call and the conformance harness, built
  with nvcc against the TensorRT headers (no libnvinfer, no libtorch);
- nvcc (:func:`compile_objects`, :func:`sdk_objects`, :func:`run`): a user's declared-op library, with the flags
  of the SDK's recipe that :class:`torchtrt_plugins.sdk.PluginLibrary` reads;
- a C++ compiler (:func:`build_eager_kernel`): the C++ eager kernel of declared ops, against torch.

A wheel carries our own libraries prebuilt (``torchtrt_plugins/lib``); from a source checkout they are built on
first use. This module imports nothing of the package, nor torch at import: ``setup.py`` loads it by its path
(importing ``torchtrt_plugins._build`` would run the package's ``__init__``, which imports torch, absent from an
isolated build environment).

The sources are the checkout's ``csrc/`` and ``CMakeLists.txt``, or the copy a wheel carries in
``torchtrt_plugins/_native``. Builds are cached under ``$TORCHTRT_PLUGINS_CACHE`` (default
``~/.cache/torchtrt_plugins``), keyed by a hash of the sources and build settings, so a build happens once per
change.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

PLUGIN_LIBRARY_NAME = "libtorchtrt_plugins_v3.so"
#: The launchers of our declared ops behind the SDK's C entry points (csrc/sdk/launchers.cpp): the eager CUDA ops.
LAUNCHER_LIBRARY_NAME = "libtorchtrt_plugins_launchers.so"
HARNESS_LIBRARY_NAME = "libtorchtrt_plugins_harness.so"
BROKEN_PLUGINS_LIBRARY_NAME = "libttp_broken_plugins.so"
DEFAULT_CUDA_ARCH = "90"
#: The oldest torch the C++ eager kernel of declared ops builds against (its stable-ABI target).
EAGER_TARGET_TORCH = (2, 11)
#: CMake CUDA architectures of the libraries a wheel carries: SASS for the data-center (sm_80 A100, sm_90
#: H100/H200, sm_100 B200, sm_103 B300) and consumer (sm_86 RTX 30, sm_89 RTX 40/L4/L40, sm_120 RTX 50)
#: GPUs CUDA 13's nvcc supports from sm_80 up, plus PTX of the newest (compute_120) for later GPUs.
WHEEL_CUDA_ARCHS = "80-real;86-real;89-real;90-real;100-real;103-real;120"

PACKAGE_DIR = Path(__file__).resolve().parent
#: Where a wheel carries the native sources (``CMakeLists.txt`` and ``csrc/``) ...
BUNDLED_SOURCE_DIR = PACKAGE_DIR / "_native"
#: ... and the prebuilt plugin library, harness and the harness's broken test plugins.
PREBUILT_DIR = PACKAGE_DIR / "lib"

#: TensorRT major versions whose headers the plugin library builds against (the ``v_1_0`` IPluginV3 interfaces).
SUPPORTED_TENSORRT_MAJORS = (10, 11)
HEADERS_NEEDED = (
    "the TensorRT C++ headers (NvInferRuntime.h and the rest of TensorRT's include/) of TensorRT 10.x or 11.x "
    "(the v_1_0 IPluginV3 interfaces): the include/ folder of the open-source TensorRT release "
    "(https://github.com/NVIDIA/TensorRT, tags v10.* or v11.*), of the TensorRT tar package, or the Debian package "
    "libnvinfer-headers-dev. Set TENSORRT_INCLUDE_DIR to that folder or TENSORRT_ROOT to the folder holding it. "
    "The pip packages of TensorRT carry no headers: a wheel of torchtrt-plugins carries the library prebuilt"
)


class BuildError(RuntimeError):
    pass


def _message(text: str) -> None:
    print(f"[torchtrt_plugins] {text}", file=sys.stderr, flush=True)


def _is_source_root(root: Path) -> bool:
    return (root / "csrc").is_dir() and (root / "CMakeLists.txt").is_file()


def source_dir() -> Path:
    """The native sources (``csrc/`` and ``CMakeLists.txt``).

    ``TORCHTRT_PLUGINS_SOURCE_DIR`` if set; else the checkout this package is imported from (a source or editable
    install); else the copy an installed wheel carries (``torchtrt_plugins/_native``).
    """
    override = os.environ.get("TORCHTRT_PLUGINS_SOURCE_DIR")
    candidates = [Path(override)] if override else [PACKAGE_DIR.parent, BUNDLED_SOURCE_DIR]
    for root in candidates:
        if _is_source_root(root):
            return root
    raise BuildError(
        f"native sources (csrc/ and CMakeLists.txt) not found under {' or '.join(map(str, candidates))}; "
        "reinstall torchtrt-plugins (its wheel and a source checkout both carry them) or set "
        "TORCHTRT_PLUGINS_SOURCE_DIR to a checkout"
    )


def cache_dir() -> Path:
    base = os.environ.get("TORCHTRT_PLUGINS_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "torchtrt_plugins"
    )
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    return path


# ------------------------------------------------------------------------------------------ TensorRT headers


def tensorrt_header_version(include: Path) -> tuple[int, int, int] | None:
    """(major, minor, patch) from ``NvInferVersion.h``, or None when it cannot be read."""
    try:
        text = (include / "NvInferVersion.h").read_text(errors="replace")
    except OSError:
        return None
    parts = []
    for part in ("MAJOR", "MINOR", "PATCH"):
        # 11.x defines NV_TENSORRT_MAJOR through TRT_MAJOR_<flavour>; 10.x defines the number directly.
        found = re.search(rf"#define\s+TRT_{part}_\w+\s+(\d+)", text) or re.search(
            rf"#define\s+NV_TENSORRT_{part}\s+(\d+)", text
        )
        if found is None:
            return None
        parts.append(int(found.group(1)))
    return parts[0], parts[1], parts[2]


@dataclass
class HeaderSearch:
    """Where the TensorRT headers were found (``include`` and how: ``source``), or why not (``tried``)."""

    include: Path | None
    source: str = ""
    version: tuple[int, int, int] | None = None
    tried: list[str] = field(default_factory=list)

    def describe(self) -> str:
        if self.include is None:
            return "not found (tried: " + "; ".join(self.tried) + ")"
        version = ".".join(map(str, self.version)) if self.version else "?"
        return f"{self.include} (TensorRT {version}, from {self.source})"

    def error(self) -> str:
        """What a build needs when no headers were found."""
        return f"TensorRT headers not found; the plugin library needs {HEADERS_NEEDED}. Tried: {'; '.join(self.tried)}"


def _system_include_dirs() -> list[tuple[str, Path]]:
    """Where system packages put the headers: Debian/Ubuntu's multiarch folder, then /usr/include (RPMs)."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine().lower(), platform.machine().lower())
    return [
        ("the Debian packages' folder", Path("/usr/include") / f"{machine}-linux-gnu"),
        ("/usr/include", Path("/usr/include")),
    ]


def find_tensorrt_headers() -> HeaderSearch:
    """TensorRT headers: ``TENSORRT_INCLUDE_DIR``, else ``TENSORRT_ROOT/include`` (the tar layout), else the
    Debian packages' ``/usr/include/<arch>-linux-gnu``, else ``/usr/include``.

    A variable that is set decides: when it names no usable headers, the search stops there with the reason.
    """
    search = HeaderSearch(None)
    candidates: list[tuple[str, Path]] = []
    if os.environ.get("TENSORRT_INCLUDE_DIR"):
        candidates.append(("TENSORRT_INCLUDE_DIR", Path(os.environ["TENSORRT_INCLUDE_DIR"])))
    elif os.environ.get("TENSORRT_ROOT"):
        candidates.append(("TENSORRT_ROOT/include", Path(os.environ["TENSORRT_ROOT"]) / "include"))
    else:
        candidates += _system_include_dirs()
    for source, candidate in candidates:
        if not (candidate / "NvInferRuntime.h").is_file():
            search.tried.append(f"{source}: {candidate} has no NvInferRuntime.h")
            continue
        version = tensorrt_header_version(candidate)
        if version is None or version[0] not in SUPPORTED_TENSORRT_MAJORS:
            found = ".".join(map(str, version)) if version else "an unknown version (no readable NvInferVersion.h)"
            search.tried.append(f"{source}: {candidate} holds TensorRT {found}, not 10.x or 11.x")
            continue
        return HeaderSearch(candidate.resolve(), source, version, search.tried)
    return search


def tensorrt_include_dir() -> Path | None:
    """The folder holding the TensorRT headers (see ``find_tensorrt_headers``), or None."""
    return find_tensorrt_headers().include


#: What the conformance harness's JSON needs.
NLOHMANN_JSON_NEEDED = (
    "nlohmann/json headers not found (the conformance harness's JSON library): pip install nlohmann-json"
)


def nlohmann_json_include_dir() -> Path | None:
    """The folder holding ``nlohmann/json.hpp``: the PyPI package ``nlohmann-json`` of this Python (found without
    importing it: its ``get_include`` needs ``importlib_resources``, which an install with ``--no-deps`` lacks), else
    the system's (``nlohmann-json3-dev``), else None."""
    spec = importlib.util.find_spec("nlohmann_json")
    candidates = [Path(spec.origin).parent / "include"] if spec is not None and spec.origin else []
    candidates += [path for _, path in _system_include_dirs()]
    return next((c for c in candidates if (c / "nlohmann" / "json.hpp").is_file()), None)


# ------------------------------------------------------------------------------------------ toolchain


def nvcc_path() -> str | None:
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "nvcc").is_file():
            return str(Path(home) / "bin" / "nvcc")
    return None


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


def _hash_sources(root: Path, patterns: tuple[str, ...], extra: str, exclude: tuple[str, ...] = ()) -> str:
    digest = hashlib.sha256(extra.encode())
    for pattern in patterns:
        for path in sorted(p for p in root.glob(pattern) if p.is_file() and not any(p.match(e) for e in exclude)):
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
    #: The harness's deliberately broken test plugins, which prove its checks fire: built with the harness from a
    #: source checkout (for its tests), never carried by a wheel.
    broken_plugins: Path | None = None
    #: True for the libraries a wheel carries (``torchtrt_plugins/lib``), False for a build from the sources.
    prebuilt: bool = False
    #: Our declared ops' launchers (CUDA runtime only), which their eager CUDA kernels call.
    launchers: Path | None = None


#: Sources of the eager kernel alone (built against torch, not by CMake): no reason to rebuild the plugin library.
_EAGER_ONLY = ("csrc/sdk/eager.cpp",)
_NATIVE_PATTERNS = (
    "CMakeLists.txt",
    "csrc/kernels/**/*",
    "csrc/plugins/**/*",
    "csrc/sdk/**/*",
    "csrc/harness/**/*",
    "tests/harness_plugins/**/*",
)


def plugin_build_dir(root: Path, include: Path, nvcc: str, archs: str) -> Path:
    """The cache entry of the plugin library for these sources, headers, compiler and architectures."""
    key = _hash_sources(
        root, _NATIVE_PATTERNS, f"{include}|{archs}|{nvcc}|{nlohmann_json_include_dir()}", exclude=_EAGER_ONLY
    )
    return cache_dir() / f"plugins-{key}"


def prebuilt_libraries() -> PluginBuild | None:
    """The libraries an installed wheel carries (``torchtrt_plugins/lib``), or None (a source checkout)."""
    library = PREBUILT_DIR / PLUGIN_LIBRARY_NAME
    if not library.is_file():
        return None
    harness = PREBUILT_DIR / HARNESS_LIBRARY_NAME
    launchers = PREBUILT_DIR / LAUNCHER_LIBRARY_NAME
    return PluginBuild(
        PREBUILT_DIR,
        library,
        harness if harness.is_file() else None,
        built_now=False,
        prebuilt=True,
        launchers=launchers if launchers.is_file() else None,
    )


def sdk_build_prerequisites() -> list[str]:
    """What building a declared-op library with the SDK (``sdk.PluginLibrary.build``) lacks here (empty when it can
    build): the TensorRT headers and nvcc. The wheel carries our own libraries prebuilt, not a user's."""
    reasons = []
    headers = find_tensorrt_headers()
    if headers.include is None:
        reasons.append(headers.error())
    if nvcc_path() is None:
        reasons.append("nvcc not found: install the CUDA toolkit or set CUDA_HOME")
    return reasons


def plugin_build_prerequisites() -> list[str]:
    """What a build of the plugin library from the sources lacks here (empty when it can build)."""
    reasons = []
    try:
        harness = (source_dir() / "csrc" / "harness").is_dir()
    except BuildError as err:
        reasons.append(str(err))
        harness = False
    reasons += sdk_build_prerequisites()
    if harness and nlohmann_json_include_dir() is None:
        reasons.append(NLOHMANN_JSON_NEEDED)
    if shutil.which("cmake") is None:
        reasons.append("cmake not found: pip install cmake")
    return reasons


_CANNOT_BUILD = "cannot build the plugin library from the sources: "


def plugin_library_unavailable() -> str | None:
    """Why ``build_plugin_library()`` can give no library here (none prebuilt, and a build lacks something), or
    None when it can."""
    if prebuilt_libraries() is not None:
        return None
    missing = plugin_build_prerequisites()
    return _CANNOT_BUILD + "; ".join(missing) if missing else None


def _source_build(root: Path, include: Path, nvcc: str, archs: str, *, built_now: bool) -> PluginBuild:
    """Where the build of the sources at ``root`` puts its products (the cache entry), present or not."""
    build_dir = plugin_build_dir(root, include, nvcc, archs)
    harness = build_dir / HARNESS_LIBRARY_NAME if (root / "csrc" / "harness").is_dir() else None
    broken = build_dir / BROKEN_PLUGINS_LIBRARY_NAME if (root / "tests" / "harness_plugins").is_dir() else None
    return PluginBuild(
        build_dir,
        build_dir / PLUGIN_LIBRARY_NAME,
        harness,
        built_now=built_now,
        broken_plugins=broken if harness is not None else None,
        launchers=build_dir / LAUNCHER_LIBRARY_NAME,
    )


def _products(build: PluginBuild) -> list[Path]:
    return [p for p in (build.library, build.launchers, build.harness, build.broken_plugins) if p is not None]


def built_plugin_library() -> PluginBuild:
    """What ``build_plugin_library()`` gives, where it exists already (prebuilt, or built for the current sources
    in the cache); never builds. Raises BuildError saying why there is none."""
    prebuilt = prebuilt_libraries()
    if prebuilt is not None:
        return prebuilt
    root, include, nvcc = source_dir(), tensorrt_include_dir(), nvcc_path()
    if include is None or nvcc is None:
        raise BuildError(
            "plugin library not built, and it cannot be built here: " + "; ".join(sdk_build_prerequisites())
        )
    build = _source_build(root, include, nvcc, cuda_archs(), built_now=False)
    if not build.library.is_file():
        raise BuildError(f"plugin library not built for the current sources ({build.library}): torchtrt-plugins build")
    return build


def build_plugin_library(force: bool = False, quiet: bool = False) -> PluginBuild:
    """The plugin library and the harness: the prebuilt ones a wheel carries, else built from the sources (or
    found in the cache). ``force`` builds from the sources even when cached or prebuilt. Raises BuildError with
    what is missing."""
    if not force:
        prebuilt = prebuilt_libraries()
        if prebuilt is not None:
            return prebuilt
    missing = plugin_build_prerequisites()
    if missing:
        raise BuildError(_CANNOT_BUILD + "; ".join(missing))
    root, include, nvcc, archs = source_dir(), tensorrt_include_dir(), nvcc_path(), cuda_archs()
    assert include is not None and nvcc is not None
    build = _source_build(root, include, nvcc, archs, built_now=False)
    with _locked(build.directory):
        if all(p.is_file() for p in _products(build)) and not force:
            return build
        if not quiet:
            _message(
                f"building the TensorRT plugin library for sm_{archs} into {build.directory} (once per source change)"
            )
        run_cmake(root, build.directory, include=include, nvcc=nvcc, archs=archs)
    missing_products = [str(p) for p in _products(build) if not p.is_file()]
    if missing_products:
        raise BuildError(f"build finished but {', '.join(missing_products)} missing")
    build.built_now = True
    return build


def launcher_library_path() -> Path:
    """Our declared ops' launcher library: prebuilt in a wheel, else built with the plugin library (CMake)."""
    launchers = build_plugin_library().launchers
    if launchers is None:
        raise BuildError(f"{PREBUILT_DIR} holds no {LAUNCHER_LIBRARY_NAME}: reinstall torchtrt-plugins")
    return launchers


def run_cmake(
    root: Path, build_dir: Path, *, include: Path, nvcc: str, archs: str, extra: tuple[str, ...] = ()
) -> None:
    """Configure and build the CMake project at ``root`` into ``build_dir`` (the first-use build and the wheel's)."""
    cmake = shutil.which("cmake")
    if cmake is None:
        raise BuildError("cmake not found: pip install cmake")
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    env = dict(os.environ, CUDACXX=nvcc)
    json_include = nlohmann_json_include_dir()
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
        *([f"-DNLOHMANN_JSON_INCLUDE_DIR={json_include}"] if json_include is not None else []),
        *extra,
    ]
    for command in (configure, [cmake, "--build", str(build_dir), "--parallel"]):
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise BuildError(
                f"plugin library build failed: {' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
            )


# ------------------------------------------------------------------------------------- nvcc: a declared-op library


def nvcc_host_compiler() -> str:
    # NVCC_CCBIN picks nvcc's host compiler (the manylinux_2_28 toolchain for a distributable build).
    return os.environ.get("NVCC_CCBIN", "")


def headers_in(folders: Sequence[Path]) -> list[Path]:
    """The headers directly in ``folders`` (what a cache key of their sources covers)."""
    return sorted({path for folder in folders for path in folder.glob("*.h*")})


def files_digest(settings: Sequence[str], files: Sequence[Path]) -> str:
    """A cache key: the settings, then each file's path and contents."""
    digest = hashlib.sha256("|".join(settings).encode())
    for path in files:
        digest.update(str(path).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def compile_objects(nvcc: str, jobs: Sequence[tuple[Path, Path, list[str]]]) -> None:
    """Compile each (source, object, flags) with nvcc, in parallel. An object appears only complete: a build that
    stopped half-way leaves no object that a later build would take."""

    def compile_one(job: tuple[Path, Path, list[str]]) -> None:
        source, obj, flags = job
        partial = obj.with_name(obj.name + ".partial")
        run([nvcc, *flags, "-c", str(source), "-o", str(partial)])
        partial.replace(obj)

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        list(pool.map(compile_one, jobs))


def sdk_objects(
    nvcc: str,
    plugin_flags: list[str],
    launcher_flags: list[str],
    include_dirs: Sequence[Path],
    *,
    csrc: Path,
    recipe: dict,
    recipe_paths: Sequence[Path],
) -> dict[str, list[Path]]:
    """The objects of the recipe's SDK sources for each side ("plugin", "launcher"), compiled with its flags: once
    per compiler, flags and SDK files into the cache, then taken by every library built with them. Most of a small
    library's build is these sources (about 14 CPU-seconds of nvcc), the same for every library."""
    settings = [nvcc, nvcc_host_compiler(), str(plugin_flags), str(launcher_flags)]
    key = files_digest(settings, [*recipe_paths, *headers_in(include_dirs)])
    directory = cache_dir() / f"sdk-objects-{key}"
    jobs = {
        kind: [
            (csrc / source, directory / f"{kind}_{index:02d}_{Path(source).stem}.o", flags)
            for index, source in enumerate(recipe[f"{kind}_sources"])
        ]
        for kind, flags in (("plugin", plugin_flags), ("launcher", launcher_flags))
    }
    with _locked(directory):
        directory.mkdir(parents=True, exist_ok=True)
        compile_objects(nvcc, [job for side in jobs.values() for job in side if not job[1].is_file()])
    return {kind: [obj for _, obj, _ in side] for kind, side in jobs.items()}


# ------------------------------------------------------------------------------------- g++: the C++ eager kernel


def eager_kernel_sources(flavour: str = "stable") -> list[Path]:
    """The sources of the ``flavour`` C++ eager kernel of declared ops (the only code compiled against torch)."""
    csrc = source_dir() / "csrc"
    names = [
        "sdk/eager.cpp",
        f"sdk/eager_{flavour}.h",
        "sdk/rules.cpp",
        "sdk/rules.h",
        "sdk/fields.cpp",
        "sdk/fields.h",
        "sdk/op_table.h",
        "sdk/ttp_sdk.h",
        "sdk/dtypes.h",
        "sdk/eager.map",
    ]
    return [csrc / name for name in names]


def cuda_include_dir() -> Path | None:
    """Where ``cuda_runtime_api.h`` is: the toolkit of nvcc or CUDA_HOME, else the ``nvidia-cuda-runtime`` package."""
    candidates = []
    nvcc = nvcc_path()
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


def cxx_compiler() -> str | None:
    """The host C++ compiler: ``CXX``, else the first of c++, g++, clang++ found."""
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def eager_kernel_build_prerequisites(flavour: str = "stable") -> list[str]:
    """What building the ``flavour`` C++ eager kernel here lacks (empty when it can build)."""
    import torch

    reasons = []
    if cxx_compiler() is None:
        reasons.append("no C++ compiler found (set CXX)")
    if cuda_include_dir() is None:
        reasons.append(
            "the CUDA runtime headers (cuda_runtime_api.h) are not found: install the CUDA toolkit or set CUDA_HOME"
        )
    include = Path(torch.__file__).parent / "include"
    if flavour == "stable" and not (include / "torch" / "csrc" / "stable").is_dir():
        reasons.append(f"torch {torch.__version__} carries no stable-ABI headers (torch/csrc/stable)")
    if flavour == "native" and not (include / "torch" / "library.h").is_file():
        reasons.append(f"torch {torch.__version__} carries no LibTorch headers (torch/library.h)")
    if tuple(int(p) for p in torch.__version__.split("+")[0].split(".")[:2]) < EAGER_TARGET_TORCH:
        reasons.append(f"torch {torch.__version__} is older than {'.'.join(map(str, EAGER_TARGET_TORCH))}")
    return reasons


def build_eager_kernel(
    output: Path,
    *,
    flavour: str = "stable",
    quiet: bool = False,
    extra_flags: Sequence[str] = (),
    compiler: str | None = None,
    objects: Path | None = None,
) -> Path:
    """Compile the ``flavour`` C++ eager kernel into ``output`` (the wheel's prebuild and the first-use build). Raises
    BuildError. ``objects``: a folder that keeps the compiled objects, named by their compile commands, and gives
    them back to a later build (another link of the same compile, e.g. with ``-static-libstdc++``, compiles nothing).

    It exports its ``ttp_eager_*`` entry points and nothing else: a compiler that links libstdc++ statically by
    default (the H100 machine's ``CXX``) would otherwise export that copy's symbols, which then mix with the
    process's own libstdc++ (torch's) and crash in the first ``std::ostream`` call. ``compiler`` (default: ``CXX``, else
    the first found) is how the wheel's prebuild links it for manylinux_2_28."""
    missing = [
        r for r in eager_kernel_build_prerequisites(flavour) if compiler is None or not r.startswith("no C++ compiler")
    ]
    if missing:
        raise BuildError(f"cannot build the {flavour} C++ eager kernel: " + "; ".join(missing))
    import torch

    torch_dir = Path(torch.__file__).parent
    csrc = source_dir() / "csrc"
    cxx = compiler or str(cxx_compiler())
    compile_flags = ["-O2", "-fPIC", "-fvisibility=hidden", f"-I{csrc}", f"-I{torch_dir / 'include'}"]
    if flavour == "stable":
        major, minor = EAGER_TARGET_TORCH
        compile_flags += ["-std=c++17", f"-DTORCH_TARGET_VERSION=0x{major:02x}{minor:02x}000000000000"]
        libraries = ["-ltorch_cpu"]
        abi = "stable ABI (every torch from 2.11 on)"
    else:
        compile_flags += [
            "-std=c++20",  # what torch's own extensions build with (torch.utils.cpp_extension)
            "-DTTP_EAGER_NATIVE",
            f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
            f"-I{torch_dir / 'include' / 'torch' / 'csrc' / 'api' / 'include'}",
        ]
        libraries = ["-ltorch_cpu", "-lc10"]
        abi = "full ABI (this torch only)"
    compile_flags.append(f"-I{cuda_include_dir()}")
    if not quiet:
        _message(
            f"building the C++ eager kernel of declared ops against torch {torch.__version__}'s {abi} into "
            f"{output.parent} (once per torch and source change)"
        )
    output.parent.mkdir(parents=True, exist_ok=True)
    # Compiled, then linked: the manylinux_2_28 compiler compiles with g++ and links with zig, one step each.
    with tempfile.TemporaryDirectory(dir=output.parent) as work:
        kept = Path(work) if objects is None else objects
        kept.mkdir(parents=True, exist_ok=True)
        compiled = []
        for source in (s for s in eager_kernel_sources(flavour) if s.suffix == ".cpp"):
            command = [cxx, *compile_flags, "-c", str(source)]
            digest = hashlib.sha256("\0".join(command).encode() + source.read_bytes()).hexdigest()[:16]
            compiled.append(kept / f"{source.stem}-{digest}.o")
            if not compiled[-1].is_file():
                partial = Path(work) / f"{compiled[-1].name}.partial"
                run([*command, "-o", str(partial)])
                os.replace(partial, compiled[-1])
        run(
            [
                cxx,
                "-shared",
                *map(str, compiled),
                f"-L{torch_dir / 'lib'}",
                *libraries,
                "-ldl",
                "-Wl,--no-undefined",
                f"-Wl,--version-script={csrc / 'sdk' / 'eager.map'}",
                *extra_flags,
                "-o",
                str(output),
            ]
        )
    return output


def run(command: list[str]) -> None:
    """Run a compiler or linker; BuildError with the command and the tail of its output when it fails."""
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise BuildError(f"{' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}")
