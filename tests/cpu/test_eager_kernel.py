"""The C++ eager kernel of declared ops (csrc/sdk/eager.cpp) without a GPU, in both flavours: it builds against this
torch's stable ABI (importing nothing else from torch) and against its full ABI; it registers with the dispatcher in
place of the Python kernel on the first call; its checks give the Python path's messages (dtypes, ranges, the fake
kernel's own checks, devices), which we see by registering sdk_test::shapes's table (and add_rms_norm's, which
mutates an argument) for the CPU key of an op with the same schema; without it, the Python kernel stays and one
warning says why."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import subprocess  # noqa: E402
import warnings  # noqa: E402

import pytest  # noqa: E402
import sdk_ops  # noqa: E402
import torch  # noqa: E402
from eager_kernels import reset_eager_kernel  # noqa: E402

from torchtrt_plugins import _build, registry, sdk  # noqa: E402
from torchtrt_plugins.ops import add_rms_norm  # noqa: E402
from torchtrt_plugins.sdk import eager_kernel  # noqa: E402

# Ops with sdk_test::shapes's and torchtrt::add_rms_norm's schemas and no kernel, so the C++ kernel can take their
# CPU key.
_LIB = torch.library.Library("ttp_eager_test", "DEF")
_LIB.define("shapes(Tensor x, Tensor w, SymInt n, int k, bool flag=False, float scale=1.0) -> (Tensor, Tensor)")
_LIB.define("add_rms_norm(Tensor x, Tensor(a!) residual, Tensor weight, float eps=1e-06) -> Tensor")
_LIB.define(
    "rms_norm_tactic(Tensor x, Tensor weight, float eps=1e-06, float weight_offset=0.0, *, int tactic) -> Tensor"
)


@pytest.fixture(scope="module", params=eager_kernel.FLAVOURS)
def flavour(request):
    try:
        eager_kernel.library_path(request.param)
    except _build.BuildError as err:
        pytest.fail(f"the eager kernel must build wherever a C++ compiler and the CUDA headers are: {err}")
    return request.param


@pytest.fixture(scope="module")
def on_cpu(flavour):
    sdk_ops.LIBRARY.build()
    handle = eager_kernel.register(sdk_ops.SHAPES, name="ttp_eager_test::shapes", dispatch_key="CPU", flavour=flavour)
    assert handle.flavour == flavour
    yield torch.ops.ttp_eager_test.shapes
    eager_kernel.unregister(handle)


@pytest.fixture(scope="module")
def mutating_on_cpu(flavour):
    declaration = add_rms_norm.ADD_RMS_NORM
    declaration.library.build()
    handle = eager_kernel.register(
        declaration, name="ttp_eager_test::add_rms_norm", dispatch_key="CPU", flavour=flavour
    )
    yield torch.ops.ttp_eager_test.add_rms_norm
    eager_kernel.unregister(handle)


def test_the_stable_flavour_links_only_torch_stable_abi_shims():
    library = eager_kernel.library_path("stable")
    out = subprocess.run(["nm", "-D", "--undefined-only", str(library)], capture_output=True, text=True)
    symbols = [line.split()[-1] for line in out.stdout.splitlines()]
    from_torch = [s for s in symbols if "@" not in s and not s.startswith(("_ITM", "__gmon"))]
    assert from_torch and all(s.startswith(("aoti_torch_", "torch_")) for s in from_torch), from_torch
    needed = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True).stdout
    assert "libtorch_cpu.so" in needed and "libtorch_python" not in needed and "libc10" not in needed


def _exported(library) -> list[str]:
    out = subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True, check=True)
    return sorted(line.split()[-1] for line in out.stdout.splitlines() if line.split()[-2] in "TtWwDdBbRrVvui")


def test_the_native_flavour_is_built_for_this_torch_only(tmp_path, monkeypatch):
    library = eager_kernel.library_path("native")
    needed = subprocess.run(["readelf", "-d", str(library)], capture_output=True, text=True).stdout
    assert "libtorch_cpu.so" in needed and "libtorch_python" not in needed
    # Another torch (a version, a commit) gets its own build, never this one.
    monkeypatch.setattr(eager_kernel, "torch_identity", lambda: "2.99.0|0000000|cxx11abi=1")
    monkeypatch.setattr(_build, "build_eager_kernel", lambda output, **kwargs: output)
    monkeypatch.setattr(_build, "cache_dir", lambda: tmp_path)
    assert eager_kernel.library_path("native").parent.parent == tmp_path


def test_prebuilt_native_flavour_serves_only_the_torch_it_names(tmp_path, monkeypatch):
    monkeypatch.setattr(_build, "PREBUILT_DIR", tmp_path)
    (tmp_path / eager_kernel.LIBRARY_NAMES["native"]).write_bytes(b"")
    info = tmp_path / "build_info.json"
    info.write_text(f'{{"{eager_kernel.NATIVE_TORCH_KEY}": "{eager_kernel.torch_identity()}"}}')
    assert eager_kernel._prebuilt("native") == tmp_path / eager_kernel.LIBRARY_NAMES["native"]
    info.write_text(f'{{"{eager_kernel.NATIVE_TORCH_KEY}": "2.99.0|0000000|cxx11abi=1"}}')
    assert eager_kernel._prebuilt("native") is None


def test_exports_only_its_entry_points_even_with_a_static_libstdcxx(flavour, tmp_path, monkeypatch):
    # The H100 machine's compiler links libstdc++ statically: the library then exported that copy's symbols, which
    # mixed with torch's libstdc++ in the process and crashed in the first std::ostream call (seen there).
    # The same objects as the library under test where it was built here (not prebuilt), linked again.
    kept = eager_kernel.library_path(flavour).parent / eager_kernel.OBJECTS
    run, commands = _build.run, []
    monkeypatch.setattr(_build, "run", lambda command: (commands.append(command), run(command))[1])
    static = _build.build_eager_kernel(
        tmp_path / "libstatic.so",
        flavour=flavour,
        quiet=True,
        extra_flags=["-static-libstdc++"],
        objects=kept if kept.is_dir() else tmp_path / eager_kernel.OBJECTS,
    )
    if eager_kernel._prebuilt(flavour) is None:
        assert [c for c in commands if "-c" in c] == []  # before: both sources compiled again for this link
    for library in (eager_kernel.library_path(flavour), static):
        assert _exported(library) == [
            "ttp_eager_flavour",
            "ttp_eager_register",
            "ttp_eager_table_version",
            "ttp_eager_unregister",
        ]


def _python_error(*args) -> str:
    with pytest.raises(Exception) as info:
        sdk.launch(sdk_ops.SHAPES, *args)
    return str(info.value)


def _cpp_error(op, *args, **kwargs) -> str:
    with pytest.raises(RuntimeError) as info:
        op(*args, **kwargs)
    return str(info.value)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param((torch.zeros(6, 5, dtype=torch.int32), torch.zeros(5, dtype=torch.int32), 9, 3), id="dtype"),
        pytest.param((torch.zeros(6, 5), torch.zeros(5, dtype=torch.float16), 9, 3), id="same-dtype"),
        pytest.param((torch.zeros(6, 5), torch.zeros(5), 9, 17), id="int-range"),
        pytest.param((torch.zeros(6, 5), torch.zeros(5), 9, 3, False, 0.0), id="float-range"),
        pytest.param((torch.zeros(6, 5), torch.zeros(5), 9, 3, False, float("inf")), id="float-inf"),
        pytest.param((torch.zeros(6, 5), torch.zeros(4), 9, 3), id="fake-kernel-check"),
        pytest.param((torch.zeros(6, 5), torch.zeros(5), 9, 3), id="device"),
    ],
)
def test_checks_give_the_python_paths_messages(on_cpu, args):
    expected = _python_error(*args)
    assert expected and expected in _cpp_error(on_cpu, *args)


def test_rank_the_fake_kernel_rejects_is_an_error_naming_the_op(on_cpu):
    message = _cpp_error(on_cpu, torch.zeros(6, 5, 1), torch.zeros(5), 9, 3)
    assert message == _python_error(torch.zeros(6, 5, 1), torch.zeros(5), 9, 3) or "sdk_test.shapes" in message


def test_python_float_repr_in_range_messages(on_cpu):
    for scale in (-1e-05, -0.0001, -1e16, -123456789012.5):
        args = (torch.zeros(6, 5), torch.zeros(5), 9, 3, False, scale)
        assert _cpp_error(on_cpu, *args).endswith(f"got {scale!r}")


def test_a_signature_seen_before_is_checked_again_where_the_call_differs(on_cpu):
    # The kernel remembers the signatures (dtypes, dims, scalars) a thread saw pass its checks and then checks only
    # the devices: a call differing in any of them, after one that passed, still gets its own message.
    passing = (torch.zeros(6, 5), torch.zeros(5), 9, 3)
    failing = [
        (torch.zeros(6, 5), torch.zeros(5), 9, 17),
        (torch.zeros(6, 5), torch.zeros(4), 9, 3),
        (torch.zeros(6, 5), torch.zeros(5, dtype=torch.float16), 9, 3),
        (torch.zeros(6, 5), torch.zeros(5), 9, 3, False, 0.0),
    ]
    for args in failing:
        for _ in range(2):
            assert "must be a CUDA tensor" in _cpp_error(on_cpu, *passing)
            assert _python_error(*args) in _cpp_error(on_cpu, *args)


def _add_rms_norm_args(x_dtype=torch.float32, residual_shape=(6, 8), eps=1e-6):
    x = torch.zeros(6, 8, dtype=x_dtype)
    return x, torch.zeros(residual_shape), torch.ones(8), eps


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(_add_rms_norm_args(x_dtype=torch.int32), id="dtype"),
        pytest.param(_add_rms_norm_args(x_dtype=torch.float16), id="same-dtype"),
        pytest.param(_add_rms_norm_args(eps=0.0), id="float-range"),
        pytest.param(_add_rms_norm_args(residual_shape=(6, 7)), id="fake-kernel-check"),
        pytest.param(_add_rms_norm_args(), id="device"),
    ],
)
def test_mutating_op_checks_give_the_python_paths_messages(mutating_on_cpu, args):
    with pytest.raises(Exception) as info:
        sdk.launch(add_rms_norm.ADD_RMS_NORM, *args)
    expected = str(info.value)
    assert expected and expected in _cpp_error(mutating_on_cpu, *args)


@pytest.fixture(scope="module")
def tactic_on_cpu(flavour):
    declaration = registry.get("rms_norm").declaration
    handle = eager_kernel.register(
        declaration, name="ttp_eager_test::rms_norm_tactic", dispatch_key="CPU", tactic_argument=True, flavour=flavour
    )
    yield torch.ops.ttp_eager_test.rms_norm_tactic
    eager_kernel.unregister(handle)


def test_tactic_argument_picks_a_declared_launcher(tactic_on_cpu):
    declaration = registry.get("rms_norm").declaration
    x, w = torch.ones(2, 8), torch.ones(8)
    with pytest.raises(Exception) as info:
        sdk.launch(declaration, x, w, 1e-6, tactic=7)
    assert str(info.value) in _cpp_error(tactic_on_cpu, x, w, 1e-6, 0.0, tactic=7)
    for tactic in sorted(declaration.launchers):  # a declared tactic passes; the device check comes next
        assert "must be a CUDA tensor" in _cpp_error(tactic_on_cpu, x, w, 1e-6, 0.0, tactic=tactic)


def test_tactic_variant_gets_the_cpp_kernel_on_first_call(flavour, monkeypatch):
    monkeypatch.setenv(eager_kernel.ENV, flavour)
    declaration = registry.get("rms_norm").declaration
    reset_eager_kernel(declaration, tactic=True)
    assert "eager.cpp" not in torch._C._dispatch_dump("torchtrt::rms_norm_tactic")
    try:
        # Called as the dispatcher would for CUDA; it redispatches, here to the CPU reference.
        sdk.runtime._TACTIC_KERNELS[declaration.qualname](torch.ones(2, 8), torch.ones(8), 1e-6, tactic=1)
        after = [line for line in torch._C._dispatch_dump("torchtrt::rms_norm_tactic").splitlines() if "CUDA" in line]
        assert len(after) == 1 and "eager.cpp" in after[0], after
    finally:
        reset_eager_kernel(declaration, tactic=True)
    assert "eager.cpp" not in torch._C._dispatch_dump("torchtrt::rms_norm_tactic")


def test_mutating_op_table_names_the_aliased_input():
    declaration = add_rms_norm.ADD_RMS_NORM
    table = sdk.generate_launcher_table([declaration])
    assert "int32_t const kEagerAliased0[] = {1};" in table  # residual, the second tensor input
    assert table.count("kEagerAliased0") == 2


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("rms_norm", (torch.ones(2, 8), torch.ones(8), 1e-6)),
        ("add_rms_norm", (torch.ones(2, 8), torch.ones(2, 8), torch.ones(8), 1e-6)),  # mutates residual
    ],
)
def test_first_call_puts_the_cpp_kernel_in_the_dispatcher(flavour, name, args, monkeypatch):
    monkeypatch.setenv(eager_kernel.ENV, flavour)
    declaration = registry.get(name).declaration
    qualname = f"torchtrt::{name}"
    before = torch._C._dispatch_dump(qualname)
    assert "eager.cpp" not in before
    try:
        # Called as the dispatcher would for CUDA; it redispatches, here to the CPU reference.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            declaration.python_kernel(*args)
        after = [line for line in torch._C._dispatch_dump(qualname).splitlines() if "CUDA" in line]
        assert len(after) == 1 and "eager.cpp" in after[0] and "boxed" in after[0], after
        assert eager_kernel._handles[qualname].flavour == flavour
    finally:
        reset_eager_kernel(declaration)
    assert "eager.cpp" not in torch._C._dispatch_dump(qualname)


@pytest.fixture
def unavailable(monkeypatch):
    monkeypatch.setattr(eager_kernel, "_libraries", {})
    why = "BuildError: no C++ compiler found (set CXX)"
    monkeypatch.setattr(eager_kernel, "_unavailable", dict.fromkeys(eager_kernel.FLAVOURS, why))
    monkeypatch.setattr(eager_kernel, "_warned", False)
    declaration = registry.get("rms_norm").declaration
    yield declaration
    reset_eager_kernel(declaration)


def test_python_kernel_stays_with_one_warning_saying_why(unavailable, monkeypatch):
    monkeypatch.delenv(eager_kernel.ENV, raising=False)
    declaration = unavailable
    x = torch.ones(2, 8)
    no_compiler = r"BuildError: no C\+\+ compiler"
    with pytest.warns(
        RuntimeWarning, match=rf"C\+\+ eager kernel .* unavailable \(native: {no_compiler}.*; stable: {no_compiler}"
    ):
        with pytest.raises(Exception, match="must be a CUDA tensor"):  # the Python path ran
            declaration.python_kernel(x, torch.ones(8), 1e-6)
    other = registry.get("pad_to").declaration
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(Exception, match="must be a CUDA tensor"):
                declaration.python_kernel(x, torch.ones(8), 1e-6)
            with pytest.raises(Exception, match="must be a CUDA tensor"):
                other.python_kernel(torch.ones(1, 1, 2, 2), 3, 3, 0.0)
    finally:
        reset_eager_kernel(other)
    assert "eager.cpp" not in torch._C._dispatch_dump("torchtrt::rms_norm")


def test_python_kernel_by_choice_warns_nothing(unavailable, monkeypatch):
    monkeypatch.setenv(eager_kernel.ENV, "python")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(Exception, match="must be a CUDA tensor"):
            unavailable.python_kernel(torch.ones(2, 8), torch.ones(8), 1e-6)
