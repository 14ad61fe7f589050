"""Packaging steps pyproject.toml cannot declare.

- The native sources (``CMakeLists.txt`` and ``csrc/``) travel inside the package as ``torchtrt_plugins/_native``:
  the SDK's headers and recipe for users' libraries, and the sources a sources-only wheel builds on first use.
- A wheel carries the plugin library, our declared ops' launcher library and the conformance harness prebuilt
  (``torchtrt_plugins/lib``) for ``_build.WHEEL_CUDA_ARCHS``, linked to the CUDA runtime only, so it needs no
  compiler and no TensorRT headers where it is installed. The harness's broken test plugins, which prove its checks
  fire, are for our tests: a source checkout builds them, no wheel carries them.
  ``TORCHTRT_PLUGINS_PREBUILT``: ``auto`` (default: prebuild when nvcc, cmake and the headers are found, else a
  sources-only wheel, saying why), ``1`` (fail without them), ``0`` (never). ``TORCHTRT_PLUGINS_WHEEL_ARCHS``
  overrides the architectures.
- It carries the C++ eager kernel of declared ops too where torch (2.11 or later) is importable in the build
  environment (``--no-build-isolation``), in both flavours: ``libtorchtrt_plugins_eager.so`` against the stable ABI
  (every torch from 2.11 on) and ``libtorchtrt_plugins_eager_native.so`` against the full ABI of that torch, which
  serves that torch only (``build_info.json``'s ``eager_kernel_native_torch`` names it). They link torch's
  ``libtorch_cpu.so``, found next to the installed torch (RPATH ``$ORIGIN/../../torch/lib``). Elsewhere they are built
  on first use, and the build says why (``build_info.json``'s ``eager_kernel`` and ``eager_kernel_native``).
- The prebuilt libraries load on glibc 2.28 and later and need no libstdc++ (``csrc/sdk/cmake/manylinux_2_28_c++``
  says how: zig, the ``ziglang`` build requirement, links them), so the wheel is tagged ``manylinux_2_28_<arch>``
  like torch's and TensorRT's. Where ziglang cannot be imported (``--no-build-isolation`` without it), they are
  linked by the system compiler and the wheel says ``linux_<arch>``: for this machine only.
- An editable install (``pip install -e .``) copies and compiles nothing: the checkout's sources are used and the
  native pieces are built on first use.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

HERE = Path(__file__).resolve().parent
#: Where the prebuilt libraries find the CUDA runtime of the nvidia-cuda-runtime wheel (torch's CUDA 13 builds and
#: TensorRT's pip packages install it) when the system has none: site-packages/nvidia/cu13/lib.
PIP_CUDA_RUNTIME_RPATH = "$ORIGIN/../../nvidia/cu13/lib"
#: The CMake toolchain of distributable libraries (glibc 2.28, static libstdc++) and the platform tag it gives.
MANYLINUX_TOOLCHAIN = HERE / "csrc" / "sdk" / "cmake" / "manylinux_2_28.cmake"
MANYLINUX_PLATFORM = f"manylinux_2_28_{platform.machine()}"
#: torchtrt_plugins.vision.PREBUILT's file names (setup.py does not import the package; a test holds them equal).
VISION_LIBRARY_NAMES = ("libtorchtrt_vision_plugins.so", "libtorchtrt_vision_launchers.so")


def _build_module():
    """torchtrt_plugins/_build.py, loaded by path (the package itself imports torch, which a build env lacks)."""
    name = "_torchtrt_plugins_build"
    spec = importlib.util.spec_from_file_location(name, HERE / "torchtrt_plugins" / "_build.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _zig() -> str | None:
    """The zig of the ``ziglang`` package (a build requirement), which links the manylinux libraries, or None."""
    try:
        import ziglang
    except ImportError:
        return None
    zig = Path(ziglang.__file__).resolve().parent / "zig"
    return str(zig) if zig.is_file() else None


def _say(text: str) -> None:
    print(f"[torchtrt_plugins setup] {text}", file=sys.stderr, flush=True)


class BuildPy(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        package = Path(self.build_lib) / "torchtrt_plugins"
        native = package / "_native"
        shutil.rmtree(native, ignore_errors=True)
        shutil.copytree(HERE / "csrc", native / "csrc", ignore=shutil.ignore_patterns("__pycache__", "*.o", "*.so"))
        shutil.copy2(HERE / "CMakeLists.txt", native / "CMakeLists.txt")
        self._prebuild(package / "lib")

    def _prebuild(self, lib_dir: Path) -> None:
        mode = os.environ.get("TORCHTRT_PLUGINS_PREBUILT", "auto")
        if mode not in ("auto", "0", "1"):
            raise SystemExit(f"TORCHTRT_PLUGINS_PREBUILT must be auto, 0 or 1, got {mode!r}")
        if mode == "0":
            _say("TORCHTRT_PLUGINS_PREBUILT=0: sources-only wheel (the plugin library is built on first use)")
            return
        builder = _build_module()
        missing = builder.plugin_build_prerequisites()
        if missing:
            if mode == "1":
                raise SystemExit("TORCHTRT_PLUGINS_PREBUILT=1 but " + "; ".join(missing))
            _say("sources-only wheel (the plugin library is built on first use): " + "; ".join(missing))
            return
        headers = builder.find_tensorrt_headers()
        archs = os.environ.get("TORCHTRT_PLUGINS_WHEEL_ARCHS", builder.WHEEL_CUDA_ARCHS)
        build_dir = Path(self.get_finalized_command("build").build_temp).resolve() / "native"
        extra = [
            "-DCMAKE_BUILD_WITH_INSTALL_RPATH=ON",
            f"-DCMAKE_INSTALL_RPATH={PIP_CUDA_RUNTIME_RPATH}",
            "-DTORCHTRT_PLUGINS_FUZZ_PROGRAM=OFF",  # the checkout's fuzz program, which no wheel carries
        ]
        zig = _zig()
        if zig is None:
            platform_tag = f"linux_{platform.machine()}"
            _say(f"ziglang not importable: the libraries are linked for this machine's glibc ({platform_tag})")
        else:
            platform_tag = MANYLINUX_PLATFORM
            os.environ["TORCHTRT_PLUGINS_ZIG"] = zig
            extra.append(f"-DCMAKE_TOOLCHAIN_FILE={MANYLINUX_TOOLCHAIN}")
        _say(
            f"building the plugin library and harness for CUDA architectures {archs} against {headers.describe()}, "
            f"{platform_tag}"
        )
        # torchtrt_plugins.vision's libraries too, where its declarations can make their tables (they import torch).
        vision = _torch_importable()
        if vision is None:
            extra.append(f"-DTORCHTRT_PLUGINS_VISION_PYTHON={sys.executable}")
        else:
            _say(f"torchtrt_plugins.vision's libraries are built on first use: {vision}")
        lib_dir.mkdir(parents=True, exist_ok=True)
        # The C++ eager kernels (a compiler process each, torch's headers) build meanwhile: they fill the cores the
        # CMake build leaves idle (its last kernels, its links).
        eager_builds = {
            flavour: self._start_eager(lib_dir, flavour, manylinux=zig is not None) for flavour in ("stable", "native")
        }
        start = time.monotonic()
        try:
            builder.run_cmake(
                HERE, build_dir, include=headers.include, nvcc=builder.nvcc_path(), archs=archs, extra=tuple(extra)
            )
        except BaseException:
            for process in eager_builds.values():
                process.kill()
                process.wait()
            raise
        seconds = time.monotonic() - start
        names = (
            builder.PLUGIN_LIBRARY_NAME,
            builder.LAUNCHER_LIBRARY_NAME,
            builder.HARNESS_LIBRARY_NAME,
            *(() if vision else VISION_LIBRARY_NAMES),
        )
        for name in names:
            shutil.copy2(build_dir / name, lib_dir / name)
        eager, _ = self._finish_eager("stable", eager_builds["stable"])
        native, native_torch = self._finish_eager("native", eager_builds["native"])
        info = {
            "eager_kernel": eager,
            "eager_kernel_native": native,
            **({"eager_kernel_native_torch": native_torch} if native_torch else {}),
            "vision": "prebuilt" if vision is None else f"built on first use: {vision}",
            "cuda_archs": archs,
            "tensorrt_headers": ".".join(map(str, headers.version)),
            "platform": platform_tag,
            "build_seconds": seconds,
        }
        (lib_dir / "build_info.json").write_text(json.dumps(info, indent=1) + "\n")
        _say(f"built in {seconds:.0f} s: {', '.join(names)}")

    def _start_eager(self, lib_dir: Path, flavour: str, *, manylinux: bool) -> subprocess.Popen:
        """Start building the ``flavour`` C++ eager kernel into ``lib_dir`` with
        torchtrt_plugins._build.build_eager_kernel (in a child process: it imports torch); ``_finish_eager`` waits."""
        script = (
            "import sys; from pathlib import Path; from torchtrt_plugins import _build as b; "
            "from torchtrt_plugins.sdk import eager_kernel as e; "
            "f = sys.argv[3]; b.build_eager_kernel(Path(sys.argv[1]) / e.LIBRARY_NAMES[f], flavour=f, quiet=True, "
            "compiler=sys.argv[2] or None, extra_flags=['-Wl,-rpath,' + e.WHEEL_RPATH]); print(e.LIBRARY_NAMES[f]); "
            "print(e.torch_identity() if f == 'native' else '')"
        )
        compiler = str(HERE / "csrc" / "sdk" / "cmake" / "manylinux_2_28_c++") if manylinux else ""
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])))
        return subprocess.Popen(
            [sys.executable, "-c", script, str(lib_dir), compiler, flavour],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def _finish_eager(self, flavour: str, process: subprocess.Popen) -> tuple[str, str | None]:
        """What build_info.json records of the ``flavour`` C++ eager kernel's build: its file name, or why there is
        none, and for the native flavour the torch it serves (sdk.eager_kernel.torch_identity)."""
        stdout, stderr = process.communicate()
        if process.returncode == 0:
            name, served = (stdout.strip().splitlines() + [""])[:2]
            _say(f"built the {flavour} C++ eager kernel: {name}" + (f" (for torch {served})" if served else ""))
            return name, served or None
        reason = (stderr.strip().splitlines() or ["no output"])[-1]
        if "No module named 'torch'" in stderr:
            reason = "torch is not importable in the build environment (it is built on first use)"
        _say(f"no prebuilt {flavour} C++ eager kernel: {reason}")
        return f"not built: {reason}", None


def _torch_importable() -> str | None:
    """None where this build's Python imports torch (in a child process: setup.py itself does not), else why not."""
    result = subprocess.run([sys.executable, "-c", "import torch"], capture_output=True, text=True)
    if result.returncode == 0:
        return None
    return "torch is not importable in the build environment"


class BdistWheel(bdist_wheel):
    """A wheel with prebuilt libraries installs to platlib and is tagged for the platform they were linked for
    (py3-none-manylinux_2_28_x86_64); a sources-only one is py3-none-any."""

    def finalize_options(self) -> None:
        mode = os.environ.get("TORCHTRT_PLUGINS_PREBUILT", "auto")
        binary = mode == "1" or (mode == "auto" and not _build_module().plugin_build_prerequisites())
        if binary:
            self.distribution.has_ext_modules = lambda: True
        super().finalize_options()
        self.root_is_pure = not binary

    def get_tag(self) -> tuple[str, str, str]:
        tag = super().get_tag()
        if self.root_is_pure:
            return tag
        info = Path(self.bdist_dir) / "torchtrt_plugins" / "lib" / "build_info.json"
        return ("py3", "none", json.loads(info.read_text())["platform"] if info.is_file() else tag[2])


setup(cmdclass={"build_py": BuildPy, "bdist_wheel": BdistWheel})
