"""The TensorRT plugin library: builds with nvcc + TensorRT headers (or comes prebuilt in a wheel), exports exactly
two symbols, depends on the CUDA runtime only, and loads idempotently."""

import collections
import importlib.util
import json
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

import torchtrt_plugins
from torchtrt_plugins import _build, native


@pytest.fixture(scope="module")
def library(build):
    return build.library


def test_file_name_differs_from_torch_tensorrt(library):
    assert library.name == "libtorchtrt_plugins_v3.so"
    assert library.name != "libtorchtrt_plugins.so"


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils nm missing")
def test_exports_exactly_the_two_entry_points(library):
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    symbols = sorted(line.split()[-1] for line in out.stdout.splitlines() if line.split()[-2] in "TtWwDdBbRr")
    assert symbols == ["getCreators", "setLoggerFinder"]


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils nm missing")
def test_launcher_library_exports_only_the_sdk_entry_points(library):
    # Also where a toolchain links libstdc++ statically (seen on the GPU machine): its symbols must stay local.
    launchers = library.parent / "libtorchtrt_plugins_launchers.so"
    out = subprocess.run(["nm", "-D", "--defined-only", str(launchers)], capture_output=True, text=True, check=True)
    symbols = sorted(line.split()[-1] for line in out.stdout.splitlines() if line.split()[-2] in "TtWwDdBbRr")
    assert symbols == [
        "ttp_sdk_eager_op",
        "ttp_sdk_last_error",
        "ttp_sdk_launch",
        "ttp_sdk_launcher",
        "ttp_sdk_resource_tables",
        "ttp_sdk_workspace",
        "ttp_sdk_workspace_function",
    ]


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils readelf missing")
def test_depends_on_cuda_runtime_only(library):
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    assert any(n.startswith("libcudart.so") for n in needed)
    assert not [n for n in needed if "torch" in n or "c10" in n or "nvinfer" in n or "tensorrt" in n]


def test_build_is_cached(library):
    again = _build.build_plugin_library()
    assert again.library == library and not again.built_now


def test_a_built_library_is_found_without_building_by_every_lookup(library, monkeypatch):
    """Before: ``plugin_library_path(build=False)`` looked for a prebuilt library only (FileNotFoundError in a checkout
    whose library is built), and ``doctor`` had a lookup of its own."""
    from torchtrt_plugins import cli

    monkeypatch.delenv("TORCHTRT_PLUGINS_LIBRARY", raising=False)
    monkeypatch.setattr(_build, "run_cmake", lambda *a, **k: pytest.fail("a lookup must not build"))
    assert native.plugin_library_path(build=False) == library
    found, status = cli.cached_plugin_library()
    assert found == library and status.startswith(str(library))  # a wheel's adds "(prebuilt, from the wheel)"


def test_a_library_not_built_for_the_sources_is_reported_by_every_lookup(monkeypatch, tmp_path):
    from torchtrt_plugins import cli

    if _build.tensorrt_include_dir() is None or _build.nvcc_path() is None:
        pytest.skip("needs a build from the sources: " + "; ".join(_build.sdk_build_prerequisites()))
    monkeypatch.delenv("TORCHTRT_PLUGINS_LIBRARY", raising=False)
    monkeypatch.setattr(_build, "run_cmake", lambda *a, **k: pytest.fail("a lookup must not build"))
    monkeypatch.setattr(_build, "prebuilt_libraries", lambda: None)
    monkeypatch.setattr(_build, "plugin_build_dir", lambda *a: tmp_path / "not-built")
    with pytest.raises(_build.BuildError, match="not built for the current sources"):
        native.plugin_library_path(build=False)
    found, status = cli.cached_plugin_library()
    assert found is None and "not built for the current sources" in status and "torchtrt-plugins build" in status


# ------------------------------------------------------------------------------------ wheel: prebuilt libraries


def _fake_wheel(monkeypatch, tmp_path, library):
    """This package as a wheel installs it: the prebuilt libraries in lib/, the sources in _native/."""
    lib = tmp_path / "torchtrt_plugins" / "lib"
    lib.mkdir(parents=True)
    for name in (_build.PLUGIN_LIBRARY_NAME, _build.HARNESS_LIBRARY_NAME):
        shutil.copy2(library.parent / name, lib / name)
    monkeypatch.setattr(_build, "PREBUILT_DIR", lib)
    monkeypatch.delenv("TORCHTRT_PLUGINS_LIBRARY", raising=False)
    return lib


def _no_compiler_no_headers(monkeypatch, tmp_path):
    monkeypatch.delenv("TENSORRT_INCLUDE_DIR", raising=False)
    monkeypatch.delenv("TENSORRT_ROOT", raising=False)
    monkeypatch.setattr(_build, "_system_include_dirs", lambda: [("/usr/include", tmp_path / "empty")])
    monkeypatch.setattr(_build, "nvcc_path", lambda: None)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)


def test_prebuilt_library_is_used_without_nvcc_or_headers(library, monkeypatch, tmp_path):
    lib = _fake_wheel(monkeypatch, tmp_path, library)
    _no_compiler_no_headers(monkeypatch, tmp_path)
    assert _build.plugin_library_unavailable() is None
    assert torchtrt_plugins.plugin_library_path() == lib / _build.PLUGIN_LIBRARY_NAME
    assert native.plugin_library_path(build=False) == lib / _build.PLUGIN_LIBRARY_NAME
    found = _build.build_plugin_library()
    assert found.prebuilt and not found.built_now and found.harness == lib / _build.HARNESS_LIBRARY_NAME
    assert found.broken_plugins is None  # the harness's test plugins stay out of the wheel
    monkeypatch.setenv("TORCHTRT_PLUGINS_LIBRARY", str(library))  # the override still wins
    assert torchtrt_plugins.plugin_library_path() == library
    with pytest.raises(_build.BuildError, match="TensorRT headers not found; the plugin library needs"):
        _build.build_plugin_library(force=True)  # --force builds from the sources, which needs them


def test_without_prebuilt_library_or_headers_the_reason_says_what_is_needed(monkeypatch, tmp_path):
    monkeypatch.setattr(_build, "PREBUILT_DIR", tmp_path / "no-lib")
    monkeypatch.delenv("TORCHTRT_PLUGINS_LIBRARY", raising=False)
    _no_compiler_no_headers(monkeypatch, tmp_path)
    reason = _build.plugin_library_unavailable()
    assert reason.startswith("cannot build the plugin library from the sources: TensorRT headers not found")
    assert "TensorRT 10.x or 11.x (the v_1_0 IPluginV3 interfaces)" in reason and "nvcc not found" in reason
    with pytest.raises(_build.BuildError, match="TensorRT headers not found"):
        torchtrt_plugins.plugin_library_path()


def test_without_nlohmann_json_a_build_says_to_install_it(monkeypatch, tmp_path):
    """The harness's JSON headers come from the nlohmann-json package (found without importing it, as a --no-deps
    install lacks its importlib_resources): without them, a build from the sources says what to install."""
    assert (_build.nlohmann_json_include_dir() / "nlohmann" / "json.hpp").is_file()
    monkeypatch.setattr(_build, "PREBUILT_DIR", tmp_path / "no-lib")
    monkeypatch.setattr(_build, "_system_include_dirs", lambda: [("/usr/include", tmp_path / "empty")])
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "nlohmann_json" else find_spec(name, *a)
    )
    assert _build.nlohmann_json_include_dir() is None
    assert "pip install nlohmann-json" in _build.plugin_library_unavailable()


def test_cmake_build_takes_the_sdk_parts_from_the_recipe():
    """Our CMakeLists.txt builds the declared ops' libraries from the SDK's recipe (csrc/sdk/sdk_build.json, through the
    CMake package's own functions), as a user's build does: it restates none of the recipe's files or flags."""
    from torchtrt_plugins import sdk

    root = _build.source_dir()
    code = "\n".join(line.split("#")[0] for line in (root / "CMakeLists.txt").read_text().splitlines())
    recipe = sdk.build_recipe()
    keys = ("plugin_sources", "launcher_sources", "generated_plugin_source", "generated_launcher_source")
    keys += ("version_script", "launcher_version_script", "cuda_flags", "linker_flags", "plugin_link_libraries")
    parts = [part for key in keys for part in ([recipe[key]] if isinstance(recipe[key], str) else recipe[key])]
    assert [part for part in parts if re.search(rf"(?<![\w.-]){re.escape(Path(part).name)}(?![\w.-])", code)] == []
    assert "csrc/sdk/cmake/torchtrt_plugins_recipe.cmake" in code and "_torchtrt_plugins_add_products(" in code


def test_sources_are_found_in_a_checkout_and_in_an_installed_wheel(monkeypatch, tmp_path):
    root = _build.source_dir()
    assert (root / "CMakeLists.txt").is_file() and (root / "csrc" / "sdk").is_dir()
    assert (root / "csrc" / "kernels").is_dir() and (root / "csrc" / "plugins").is_dir()
    package = tmp_path / "site-packages" / "torchtrt_plugins"
    (package / "_native" / "csrc").mkdir(parents=True)
    (package / "_native" / "CMakeLists.txt").write_text("# stand-in\n")
    monkeypatch.delenv("TORCHTRT_PLUGINS_SOURCE_DIR", raising=False)
    monkeypatch.setattr(_build, "PACKAGE_DIR", package)
    monkeypatch.setattr(_build, "BUNDLED_SOURCE_DIR", package / "_native")
    assert _build.source_dir() == package / "_native"
    (package / "_native" / "CMakeLists.txt").unlink()
    with pytest.raises(_build.BuildError, match="native sources .* not found under"):
        _build.source_dir()


def _fatbin_images(path: Path) -> collections.Counter:
    """(kind, sm) of every image in the library's CUDA fat binaries: kind 1 is PTX, 2 is SASS (an ELF cubin)."""
    data, magic, found, pos = path.read_bytes(), struct.pack("<I", 0xBA55ED50), collections.Counter(), 0
    while (start := data.find(magic, pos)) >= 0:
        _, _, header_size, fat_size = struct.unpack_from("<IHHQ", data, start)
        offset, pos = start + header_size, start + header_size + fat_size
        while offset < pos:
            kind, _, entry_header, size = struct.unpack_from("<HHIQ", data, offset)
            found[(kind, struct.unpack_from("<I", data, offset + 28)[0])] += 1
            offset += entry_header + size
    return found


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils readelf missing")
def test_prebuilt_library_carries_sass_for_the_wheel_archs_and_ptx_for_the_newest():
    prebuilt = _build.prebuilt_libraries()
    if prebuilt is None:
        pytest.skip("no prebuilt library (a source checkout): .ci/run checks the wheel's")
    # The architectures the wheel was built for (TORCHTRT_PLUGINS_WHEEL_ARCHS, else _build.WHEEL_CUDA_ARCHS), in
    # CMake syntax: "90-real" is SASS only, "120" SASS and PTX.
    built = json.loads((_build.PREBUILT_DIR / "build_info.json").read_text())["cuda_archs"].split(";")
    images = _fatbin_images(prebuilt.library)
    assert {sm for kind, sm in images if kind == 2} == {int(a.split("-")[0]) for a in built}
    assert {sm for kind, sm in images if kind == 1} == {int(a) for a in built if not a.endswith("-real")}
    out = subprocess.run(["readelf", "-d", str(prebuilt.library)], capture_output=True, text=True, check=True).stdout
    assert "$ORIGIN/../../nvidia/cu13/lib" in out  # the CUDA runtime of the nvidia-cuda-runtime wheel


def test_plugin_library_path_override(library, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHTRT_PLUGINS_LIBRARY", str(library))
    assert torchtrt_plugins.plugin_library_path() == library
    monkeypatch.setenv("TORCHTRT_PLUGINS_LIBRARY", str(tmp_path / "missing.so"))
    with pytest.raises(FileNotFoundError, match="missing.so does not exist"):
        torchtrt_plugins.plugin_library_path()


class FakeRegistry:
    """Behaves like TensorRT's registry: a second load_library of the same file returns None. Its first load
    registers every creator, also those of ops other tests declared (their libraries then need no load)."""

    def __init__(self, registers=True):
        self.creators = set()
        self.loaded = []
        self.registers = registers

    def load_library(self, path):
        if path in self.loaded:
            return None
        self.loaded.append(path)
        if self.registers:
            self.creators |= {e.spec.creator_key for e in torchtrt_plugins.registered_ops()}
        return object()

    def get_creator(self, name, version, namespace):
        return object() if (name, version, namespace) in self.creators else None


def _only_our_library(monkeypatch):
    """Our library alone: a declared op's library (e.g. torchtrt_plugins.vision's, once a test imported it) cannot be
    built where the TensorRT headers are missing (the wheel's run), and these tests are about ours."""
    libraries = native._libraries
    monkeypatch.setattr(
        native, "_libraries", lambda: {k: v for k, v in libraries().items() if k is native.plugin_library_path}
    )


def test_load_plugins_is_idempotent(library, monkeypatch):
    _only_our_library(monkeypatch)
    monkeypatch.setenv("TORCHTRT_PLUGINS_LIBRARY", str(library))
    registry = FakeRegistry()
    assert torchtrt_plugins.load_plugins(registry) == library
    assert torchtrt_plugins.load_plugins(registry) == library
    assert registry.loaded == [str(library)]


def test_load_plugins_after_engine_deserialization(library, monkeypatch):
    """A plan with serialized plugins loads the library itself; our load then returns None: not an error."""
    _only_our_library(monkeypatch)
    monkeypatch.setenv("TORCHTRT_PLUGINS_LIBRARY", str(library))
    registry = FakeRegistry()
    registry.load_library(str(library))
    assert torchtrt_plugins.load_plugins(registry) == library


def test_load_plugins_reports_missing_creators(library, monkeypatch):
    monkeypatch.setenv("TORCHTRT_PLUGINS_LIBRARY", str(library))
    with pytest.raises(RuntimeError, match="did not register the creators"):
        native.load_plugins(FakeRegistry(registers=False))


def test_load_program_registers_the_creators_before_torch_tensorrt_loads(monkeypatch, tmp_path):
    """Torch-TensorRT saves no plugin library: our creators must be in the registry before its engines load."""
    import types

    from torchtrt_plugins import _compat

    steps = []
    fake = types.SimpleNamespace(load=lambda path, **kwargs: steps.append(("torch_tensorrt.load", path, kwargs)))
    monkeypatch.setattr(_compat, "torch_tensorrt", lambda: fake)
    monkeypatch.setattr(native, "load_plugins", lambda: steps.append(("load_plugins",)))
    assert torchtrt_plugins.load_program(tmp_path / "model.ep", extra_files=None) is None
    assert steps == [("load_plugins",), ("torch_tensorrt.load", str(tmp_path / "model.ep"), {"extra_files": None})]


def test_load_program_without_torch_tensorrt_says_what_is_missing(monkeypatch):
    from torchtrt_plugins import _compat

    monkeypatch.setattr(_compat, "torch_tensorrt", lambda: None)
    with pytest.raises(ImportError, match="load_program: Torch-TensorRT is not installed"):
        torchtrt_plugins.load_program("model.ep")


def test_load_plugins_loads_ours_and_only_the_declared_libraries_it_is_given(monkeypatch):
    from torchtrt_plugins import native

    class Library:
        def __init__(self, name):
            self.name = name

        def plugin_path(self):
            return f"/declared/lib{self.name}_plugins.so"

    first, second = Library("first"), Library("second")
    monkeypatch.setattr(native, "plugin_library_path", lambda build=True: Path("/ours/libtorchtrt_plugins_v3.so"))
    monkeypatch.setattr(
        native,
        "_libraries",
        lambda: {native.plugin_library_path: [], first.plugin_path: [], second.plugin_path: []},
    )
    loaded = []
    monkeypatch.setattr(native, "_load_library", lambda registry, path, entries: loaded.append(str(path)))
    native.load_plugins(object(), libraries=[second])
    assert loaded == ["/ours/libtorchtrt_plugins_v3.so", "/declared/libsecond_plugins.so"]
    loaded.clear()
    native.load_plugins(object(), libraries=())
    assert loaded == ["/ours/libtorchtrt_plugins_v3.so"]
    loaded.clear()
    native.load_plugins(object())
    assert len(loaded) == 3
