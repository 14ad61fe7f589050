"""The TensorRT plugin library: builds with nvcc + TensorRT headers, exports exactly two symbols,
depends on the CUDA runtime only, and loads idempotently."""

import shutil
import subprocess

import pytest

import torchtrt_plugins
from torchtrt_plugins import _build, native


@pytest.fixture(scope="module")
def library():
    try:
        return _build.build_plugin_library().library
    except _build.BuildError as err:
        pytest.fail(f"plugin library must build on every machine with nvcc and the TensorRT headers: {err}")


def test_file_name_differs_from_torch_tensorrt(library):
    assert library.name == "libtorchtrt_plugins_v3.so"
    assert library.name != "libtorchtrt_plugins.so"


@pytest.mark.skipif(shutil.which("nm") is None, reason="binutils nm missing")
def test_exports_exactly_the_two_entry_points(library):
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    symbols = sorted(line.split()[-1] for line in out.stdout.splitlines() if line.split()[-2] in "TtWwDdBbRr")
    assert symbols == ["getCreators", "setLoggerFinder"]


@pytest.mark.skipif(shutil.which("readelf") is None, reason="binutils readelf missing")
def test_depends_on_cuda_runtime_only(library):
    out = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True, check=True).stdout
    needed = [line.split("[")[1].rstrip("]") for line in out.splitlines() if "(NEEDED)" in line]
    assert any(n.startswith("libcudart.so") for n in needed)
    assert not [n for n in needed if "torch" in n or "c10" in n or "nvinfer" in n or "tensorrt" in n]


def test_build_is_cached(library):
    again = _build.build_plugin_library()
    assert again.library == library and not again.built_now


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


def test_load_plugins_is_idempotent(library, monkeypatch):
    monkeypatch.setenv("TORCHTRT_PLUGINS_LIBRARY", str(library))
    registry = FakeRegistry()
    assert torchtrt_plugins.load_plugins(registry) == library
    assert torchtrt_plugins.load_plugins(registry) == library
    assert registry.loaded == [str(library)]


def test_load_plugins_after_engine_deserialization(library, monkeypatch):
    """A plan with serialized plugins loads the library itself; our load then returns None: not an error."""
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
