"""The SDK's CMake package: examples/myops built with find_package(torchtrt_plugins) and torchtrt_plugins_add_library
(its CMakeLists.txt) from the installed package, in a temporary folder, is the library the Python helper builds
(myops.LIBRARY.build()): the same generated tables, exports, linked libraries and creators, and no rebuild when
nothing changed."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import re  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import pytest  # noqa: E402
import torch  # noqa: E402
from example_package import EXAMPLE, import_myops  # noqa: E402

from torchtrt_plugins import _build, converters  # noqa: E402
from torchtrt_plugins.testing import TensorArg, run_call  # noqa: E402

CMAKE = shutil.which("cmake")
if CMAKE is None:
    pytest.skip("cmake not found (pip install cmake): the SDK's CMake package is not tested", allow_module_level=True)
myops = import_myops()


@pytest.fixture(scope="module")
def python_build():
    return myops.LIBRARY.build()


def _run(command: list[str]) -> str:
    result = subprocess.run(command, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(command)}\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
    return result.stdout


@pytest.fixture(scope="module")
def cmake_build(tmp_path_factory):
    """``cmake -S examples/myops`` with the package's ``sdk --cmake-dir``, as the README says; then ``--build``."""
    cmake_dir = _run([sys.executable, "-m", "torchtrt_plugins", "sdk", "--cmake-dir"]).strip()
    build = tmp_path_factory.mktemp("myops-cmake")
    _run(
        [
            CMAKE,
            "-S",
            str(EXAMPLE),
            "-B",
            str(build),
            *(["-G", "Ninja"] if shutil.which("ninja") else []),
            f"-Dtorchtrt_plugins_DIR={cmake_dir}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DCMAKE_CUDA_COMPILER={_build.nvcc_path()}",
            f"-DCMAKE_CUDA_ARCHITECTURES={_build.cuda_archs()}",
        ]
    )
    _run([CMAKE, "--build", str(build)])
    return build


def _exports(path) -> set[str]:
    out = _run(["nm", "-D", "--defined-only", str(path)])
    return {line.split()[-1] for line in out.splitlines() if line.split()[-2] in ("T", "D", "B")}


#: What a toolchain may link either way (libstdc++ statically or not): not what the SDK decides.
_SYSTEM = re.compile(r"^(libstdc\+\+|libgcc_s|libc|libm|libdl|libpthread|librt|ld-linux[-\w]*)\.so")


def _needed(path) -> set[str]:
    """The libraries a product links beyond the C/C++ runtime."""
    return {
        name
        for line in _run(["readelf", "-d", str(path)]).splitlines()
        if "NEEDED" in line and not _SYSTEM.match(name := line.split("[")[-1].rstrip("]"))
    }


def test_generated_tables_are_the_python_helpers(cmake_build, python_build):
    for name in ("declared_ops.cpp", "launcher_table.cpp", "op_fields.h"):
        assert (cmake_build / "myops_generated" / name).read_text() == (python_build.directory / name).read_text()


@pytest.mark.parametrize("product", ["plugins", "launchers"])
def test_exports_and_linked_libraries_are_the_python_helpers(cmake_build, python_build, product):
    built = cmake_build / f"libmyops_{product}.so"
    reference = getattr(python_build, product)
    assert _exports(built) == _exports(reference)
    assert _needed(built) == _needed(reference)
    needed = " ".join(_needed(built))
    assert "libcudart" in needed and not any(name in needed for name in ("nvinfer", "torch", "c10"))
    if product == "plugins":
        assert _exports(built) == {"getCreators", "setLoggerFinder"}


def test_the_harness_sees_the_same_creators(cmake_build, python_build):
    calls = [
        (converters.plan(myops.SCALED_ADD.spec, (torch.zeros(2, 3), torch.zeros(2, 3)), {"alpha": 0.5}), 2),
        (converters.plan(myops.FILTER_ABOVE.spec, (torch.zeros(4, 3), 0.0)), 1),
    ]
    for call, inputs in calls:
        shapes = [TensorArg((4, 3))] * inputs
        result = run_call(call, *shapes, library=cmake_build / "libmyops_plugins.so")
        result.assert_conformant()
        assert result.creators == run_call(call, *shapes, library=python_build.plugins).creators
        assert {(c["name"], c["namespace"]) for c in result.creators} == {
            ("ScaledAdd", "myops"),
            ("FilterAbove", "myops"),
        }


def test_a_second_build_does_nothing(cmake_build):
    products = [cmake_build / f"libmyops_{p}.so" for p in ("plugins", "launchers")]
    products += sorted((cmake_build / "myops_generated").glob("*.cpp"))
    before = [p.stat().st_mtime_ns for p in products]
    _run([CMAKE, "--build", str(cmake_build)])
    assert [p.stat().st_mtime_ns for p in products] == before
