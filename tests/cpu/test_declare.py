"""torchtrt_plugins.declare: the declaration from the op's schema, the shape program derived from its fake kernel,
the errors a user gets, and the generic registration (converters, plugin libraries) of declared ops."""

from __future__ import annotations

from torchtrt_plugins.testing import require_sdk_build

require_sdk_build()

import itertools  # noqa: E402
from pathlib import Path  # noqa: E402

import pytest  # noqa: E402
import sdk_ops  # noqa: E402
import torch  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

import torchtrt_plugins as ttp  # noqa: E402
from torchtrt_plugins import _derive, converters, native  # noqa: E402
from torchtrt_plugins import plan as planning  # noqa: E402
from torchtrt_plugins import registry as op_registry  # noqa: E402
from torchtrt_plugins.converters import _factory  # noqa: E402

_LIB = torch.library.Library("decl_test", "DEF")


def _define(name: str, schema: str, fake, cpu=None):
    _LIB.define(name + schema)
    torch.library.register_fake(f"decl_test::{name}", fake, lib=_LIB)
    if cpu is not None:
        _LIB.impl(name, cpu, "CPU")
    return f"decl_test::{name}"


BRANCHING = _define("branching", "(Tensor x, SymInt n) -> Tensor", lambda x, n: x.new_empty((max(x.shape[0], n),)))
MODULO = _define("modulo", "(Tensor x) -> Tensor", lambda x: x.new_empty((x.shape[0] % 3,)))
UNBOUNDED = _define(
    "unbounded", "(Tensor x) -> Tensor", lambda x: x.new_empty((torch.library.get_ctx().new_dynamic_size(),))
)
BOOL_OUT = _define("bool_out", "(Tensor x) -> Tensor", lambda x: torch.empty_like(x, dtype=torch.bool))
LIST_ARG = _define("list_arg", "(Tensor x, int[] sizes) -> Tensor", lambda x, sizes: torch.empty_like(x))
MUTATES = _define("mutates", "(Tensor(a!) x) -> Tensor", lambda x: torch.empty_like(x))
PLAIN = _define("plain", "(Tensor x, Tensor y, float alpha=1.0) -> Tensor", lambda x, y, alpha=1.0: torch.empty_like(x))


def test_fields_inputs_and_names_come_from_the_schema():
    spec = sdk_ops.SHAPES.spec
    assert spec.qualname == "sdk_test::shapes"
    assert (spec.plugin_name, spec.plugin_namespace, spec.plugin_version) == ("Shapes", "sdk_test", "1")
    assert [t.name for t in spec.inputs] == ["x", "w"]
    fields = {f.name: f for f in spec.fields}
    assert [(f.name, f.type) for f in spec.fields] == [
        ("n", "INT64"),
        ("k", "INT64"),
        ("flag", "INT32"),
        ("scale", "FLOAT64"),
    ]
    assert fields["n"].shape_input and not fields["k"].shape_input
    assert fields["k"].required and (fields["k"].min, fields["k"].max) == (1, 16)
    assert fields["flag"].boolean and fields["flag"].default is False and not fields["flag"].required
    assert fields["scale"].default == 1.0 and fields["scale"].min_inclusive is False
    assert [t.value for t in spec.tactics] == [3, 7]
    assert spec.inputs[1].same_dtype_as == "x"


def test_declared_ranges_drive_the_eager_checks():
    x, w = torch.zeros(4, 3), torch.zeros(3)
    sdk_ops.SHAPES.check_args(x, w, 2, 3, True, 0.5)
    with pytest.raises(ttp.SpecError, match=r"sdk_test\.shapes: argument 'k' must be an integer >= 1 and <= 16, got 0"):
        sdk_ops.SHAPES.check_args(x, w, 2, 0)
    with pytest.raises(ttp.SpecError, match=r"sdk_test\.shapes: argument 'scale' must be a float > 0, got 0.0"):
        sdk_ops.SHAPES.check_args(x, w, 2, 3, False, 0.0)
    with pytest.raises(ttp.SpecError, match=r"argument 'flag' must be a bool, got 2"):
        sdk_ops.SHAPES.check_args(x, w, 2, 3, 2)
    with pytest.raises(ttp.SpecError, match=r"argument 'w' must have the same dtype as 'x'"):
        sdk_ops.SHAPES.check_args(x, w.half(), 2, 3)
    with pytest.raises(ttp.SpecError, match=r"argument 'x' must have dtype in \{float32, float16\}, got int32"):
        sdk_ops.SHAPES.check_args(x.int(), w.int(), 2, 3)


class _Marked(int):
    """An int the test's is_symbolic treats as a symbolic SymInt."""


def _operators(expr):
    found, i = [], 0
    while i < len(expr):
        if expr[i] >= _derive.ADD:
            found.append(expr[i])
            i += 1
        else:
            i += 1 + (2 if expr[i] in (_derive.DIM, _derive.SHAPE) else 1)
    return found


def _traced(fn, *args):
    graph = make_fx(fn, tracing_mode="symbolic")(*args)
    return graph, [n for n in graph.graph.nodes if n.op == "call_function" and "sdk_test" in str(n.target)]


@pytest.mark.parametrize("k", [1, 3, 16])
def test_shape_program_matches_the_fake_kernel(k):
    """The program, evaluated at concrete sizes, gives what the fake kernel gives (every operator is used)."""
    # n = 9 arrives as a shape input, as a symbolic SymInt does.
    call = converters.plan(
        sdk_ops.SHAPES.spec,
        (torch.zeros(6, 5), torch.zeros(5), _Marked(9), k),
        is_symbolic=lambda v: isinstance(v, _Marked),
    )
    program = sdk_ops.SHAPES.derive_for_values(
        torch.zeros(6, 5), torch.zeros(5), _Marked(9), k, is_symbolic=lambda v: isinstance(v, _Marked)
    ).program
    assert call.shape_inputs == [9] and call.field_value("n") == -(2**31)
    parsed = _derive.Program.parse(program)
    assert parsed.input_ranks == (2, 1) and parsed.num_shape_inputs == 1
    operators = set(itertools.chain.from_iterable(_operators(e) for _, dims in parsed.outputs for e in dims))
    assert {_derive.MAX, _derive.MIN, _derive.MUL, _derive.ADD} <= operators
    if k > 1:
        assert {_derive.FLOORDIV, _derive.CEILDIV} <= operators
    for rows, cols, n in itertools.product([0, 1, 5, 17], [1, 4, 9], [0, 2, 11]):
        expected = sdk_ops.shapes_sizes((rows, cols), (cols,), n, k)
        shapes, uppers = _derive.evaluate(program, [(rows, cols), (cols,)], [[n]])
        assert uppers == [] and shapes == [e for e in expected], (rows, cols, n)
    assert _derive.output_dtypes(program, [torch.float16, torch.float16]) == [torch.float16, torch.int32]


def test_symbolic_symint_becomes_a_shape_input():
    graph, (node,) = _traced(
        lambda x, w, y: torch.ops.sdk_test.shapes(x, w, y.shape[0], 2),
        *(torch.zeros(6, 5), torch.zeros(5), torch.zeros(9)),
    )
    assert planning.entry_for_target(node.target) is sdk_ops.SHAPES.entry
    assert _factory.validate_node(node)
    call = planning.plan_node(node)
    assert len(call.shape_inputs) == 1 and call.field_value("n") == -(2**31)
    program = sdk_ops.SHAPES.derive_for_values(*node.args, **node.kwargs).program
    assert _derive.Program.parse(program).num_shape_inputs == 1
    shapes, _ = _derive.evaluate(program, [(6, 5), (5,)], [[9]])
    assert shapes == [e for e in sdk_ops.shapes_sizes((6, 5), (5,), 9, 2)]


def test_data_dependent_size_becomes_a_size_tensor():
    spec = sdk_ops.NONZERO_COUNT.spec
    assert spec.requires_output_allocator and spec.hidden_outputs == 1  # found out from example_inputs
    call = converters.plan(spec, (torch.zeros(4, 3),))
    assert call.num_outputs == 2 and call.requires_output_allocator
    program = sdk_ops.NONZERO_COUNT.derive_for_values(torch.zeros(4, 3)).program
    shapes, uppers = _derive.evaluate(program, [(4, 3)])
    assert uppers == [1 << 20] and shapes == [(1 << 20, 3)]
    assert _derive.evaluate(program, [(4, 3)], sizes=[2])[0] == [(2, 3)]
    parsed = _derive.Program.parse(program)
    opt, _ = parsed.sizes[0]
    assert _derive.evaluate_expr(opt, [(4, 3)], [], []) == 1 << 19  # the declared optimum: half the bound


def test_torch_check_gives_the_upper_bound_and_size_upper_overrides():
    program = _KEPT.derive_for_values(torch.zeros(5, 2)).program
    shapes, uppers = _derive.evaluate(program, [(5, 2)])
    assert uppers == [10] and shapes == [(10,)]
    override = ttp.declare(UNBOUNDED, data_dependent=True, size_upper=lambda x: x.shape[0] * 3)
    program = override.derive_for_values(torch.zeros(7)).program
    assert _derive.evaluate(program, [(7,)])[1] == [21]


_KEPT_QUALNAME = _define(
    "kept",
    "(Tensor x) -> Tensor",
    lambda x: _kept_fake(x),
)


def _kept_fake(x):
    kept = torch.library.get_ctx().new_dynamic_size()
    torch._check(kept <= x.shape[0] * x.shape[1])
    return x.new_empty((kept,))


_KEPT = ttp.declare(_KEPT_QUALNAME, data_dependent=True)


@pytest.mark.parametrize(
    ("op", "options", "args", "message"),
    [
        (
            BRANCHING,
            {},
            (torch.zeros(3), 5),
            r"decl_test\.branching: its fake kernel branches on sizes .*torch\.sym_max",
        ),
        (
            MODULO,
            {},
            (torch.zeros(3),),
            r"decl_test\.modulo: output 0 dim 0 has size Mod\(.*\), which the plugin cannot",
        ),
        (
            UNBOUNDED,
            {"data_dependent": True},
            (torch.zeros(3),),
            r"decl_test\.unbounded: output size u\d+ .*no upper bound",
        ),
        ("decl_test::kept", {}, (torch.zeros(3, 2),), r"decl_test\.kept: .*data-dependent size.*data_dependent=True"),
        (BOOL_OUT, {}, (torch.zeros(3),), r"decl_test\.bool_out: output 0 has dtype torch\.bool"),
    ],
    ids=["branching", "modulo", "unbounded", "undeclared-dds", "bool-output"],
)
def test_derivation_errors_name_op_and_reason(op, options, args, message):
    declaration = ttp.Declaration(op, **options)
    with pytest.raises(_derive.DerivationError, match=message):
        converters.plan(declaration.spec, args, declaration=declaration)


def test_outputs_override_replaces_the_fake_kernel():
    declaration = ttp.Declaration(MODULO, outputs=lambda x: x.new_empty((x.shape[0] // 3,)))
    program = declaration.derive_for_values(torch.zeros(10)).program
    assert _derive.evaluate(program, [(10,)])[0] == [(3,)]


@pytest.mark.parametrize(
    ("op", "options", "message"),
    [
        (
            PLAIN,
            {"ranges": {"alhpa": ttp.Range(min=0)}},
            r"decl_test::plain: ranges names argument 'alhpa'.*\['alpha'\]",
        ),
        (PLAIN, {"dtypes": {"alpha": (torch.float32,)}}, r"dtypes names argument 'alpha', which is not a tensor"),
        (PLAIN, {"same_dtype": {"x": "y"}}, r"same_dtype\['x'\] must name an earlier tensor argument"),
        (PLAIN, {"tactics": {0: "a::b"}}, r"tactic values must be ints > 0"),
        (PLAIN, {"dtypes": {"x": (torch.bool, torch.float32)}}, r"argument 'x' may be bool only on its own"),
        (LIST_ARG, {}, r"decl_test::list_arg: argument 'sizes' has type int\[\], which a plugin cannot take"),
        (MUTATES, {"mutates": ("y",)}, r"decl_test::mutates: mutates names 'y', which is no argument"),
        (PLAIN, {"weight_fields": ("alpha",)}, r"decl_test::plain: weight_fields names argument 'alpha', which is not"),
        (MUTATES, {"weight_fields": ("x",)}, r"weight_fields names argument 'x', which is updated in place"),
        (PLAIN, {"weight_fields": ("y",), "dtypes": {"y": (torch.bool,)}}, r"argument 'y', which may have dtypes"),
        ("decl_test::missing", {}, r"decl_test::missing: no such torch op"),
        (
            PLAIN,
            {"dtypes": {"x": (torch.float64,)}},
            r"decl_test::plain: dtypes\['x'\] has \[torch\.float64\], which a TensorRT plugin cannot take; expected "
            r"dtypes among \{float32, float16, bfloat16, int8, int32, int64, bool\}",
        ),
        (
            PLAIN,
            {"dtypes": {"x": torch.float32}},
            r"decl_test::plain: dtypes\['x'\] must be a non-empty tuple of torch dtypes .*got torch\.float32",
        ),
        (PLAIN, {"dtypes": {"y": ()}}, r"decl_test::plain: dtypes\['y'\] must be a non-empty tuple"),
        (
            PLAIN,
            {"ranges": {"alpha": (0, 1)}},
            r"decl_test::plain: ranges\['alpha'\] must be a torchtrt_plugins\.Range \(e\.g\. Range\(min=0, max=1\)\), "
            r"got \(0, 1\)",
        ),
        (PLAIN, {"ranges": {"alpha": ttp.Range(min=2, max=1)}}, r"ranges\['alpha'\] admits no value \(min 2, max 1\)"),
        (PLAIN, {"ranges": {"alpha": ttp.Range(min="0")}}, r"ranges\['alpha'\] must have numbers \(or None\)"),
        (
            PLAIN,
            {"launcher": "not a name"},
            r"decl_test::plain: launcher must be the name of a C\+\+ function .*got 'not a name'",
        ),
        (PLAIN, {"launcher": "a::b", "tactics": {2: "a-b"}}, r"decl_test::plain: tactics\[2\] must be the name of"),
        (PLAIN, {"launcher": "a::b", "workspace": "ws()"}, r"decl_test::plain: workspace must be the name of a C\+\+"),
        (
            PLAIN,
            {"tolerances": {"float16": (1e-3, 1e-3)}},
            r"decl_test::plain: tolerances must map torch dtypes to torchtrt_plugins\.Tolerance",
        ),
        (
            PLAIN,
            {"sizes_first": True, "data_dependent": False},
            r"decl_test::plain: sizes_first=True is for data-dependent ops",
        ),
    ],
)
def test_declaration_errors_name_op_and_argument(op, options, message):
    with pytest.raises(ttp.DeclarationError, match=message):
        ttp.Declaration(op, **options)


def test_a_declaration_rejected_at_declare_time_stays_undeclared():
    """Before: dtypes={"x": (torch.float64,)} was accepted and registered, then every build and load_plugins() raised a
    bare KeyError: torch.float64; the corrected declaration then failed as registered twice."""
    qualname = _define("retried", "(Tensor x) -> Tensor", lambda x: torch.empty_like(x), cpu=lambda x: x.clone())
    with pytest.raises(ttp.DeclarationError, match=r"decl_test::retried: dtypes\['x'\] has \[torch\.float64\]"):
        ttp.declare(qualname, dtypes={"x": (torch.float64,)})
    assert qualname not in [e.spec.qualname for e in op_registry.registered_ops()]
    try:
        declaration = ttp.declare(qualname, dtypes={"x": (torch.float32,)})
        assert op_registry.get(qualname) is declaration.entry
    finally:
        op_registry.unregister(op_registry.get(qualname))


def _copy_library(tmp_path, name: str, launcher: str):
    """A library whose one source defines decl_test::copy, with PLAIN declared on it with ``launcher``."""
    from torchtrt_plugins import sdk

    source = tmp_path / "launchers.cu"
    source.write_text(
        '#include "sdk/ttp_sdk.h"\nnamespace decl_test {\n'
        "cudaError_t copy(ttp::sdk::LaunchArgs const&) { return cudaSuccess; }\n}\n"
    )
    library = sdk.PluginLibrary(name, sources=[source])
    library.add(ttp.Declaration(PLAIN, library=library, launcher=launcher, dtypes={"x": (torch.float32,)}))
    return library


def _plain_shapes(x, y, alpha=1.0):
    return torch.empty_like(x)


def test_declarations_of_the_same_generated_sources_share_one_build(tmp_path):
    """Before: a build was keyed on the rules' fingerprints only, so that the same fake kernel's shapes from another
    file (torchvision's nms fake once torchvision is imported, against ours) built the whole library again."""
    first = _copy_library(tmp_path, "decl_test_shared", "decl_test::copy")
    second = _copy_library(tmp_path, "decl_test_shared", "decl_test::copy")
    second.declarations[0] = ttp.Declaration(
        PLAIN, library=second, launcher="decl_test::copy", dtypes={"x": (torch.float32,)}, outputs=_plain_shapes
    )
    assert first.declarations[0].rules_fingerprint() != second.declarations[0].rules_fingerprint()
    built = first.build()
    again = second.build()
    assert not again.built_now and again.directory == built.directory.resolve()
    assert again.plugins.resolve() == built.plugins.resolve()


def test_a_misspelt_launcher_is_named_with_its_op_by_the_build(tmp_path):
    """Before: the build failed with the linker's `undefined reference to r26::misspelt(ttp::sdk::LaunchArgs
    const&)` and nothing else."""
    from torchtrt_plugins import _build

    library = _copy_library(tmp_path, "decl_test_misspelt", "decl_test::cpoy")
    message = (
        r"^plugin library decl_test_misspelt: decl_test\.plain: launcher 'decl_test::cpoy' is not defined in its "
        r"sources \[.*launchers\.cu'\]; define `cudaError_t cpoy\(ttp::sdk::LaunchArgs const&\)` in namespace "
        r"decl_test there, or correct the name in the declaration\n"
    )
    with pytest.raises(_build.BuildError, match=message):
        library.build()


def test_a_library_compiles_only_its_own_sources_and_links_the_sdks_shared_objects(tmp_path, monkeypatch):
    from torchtrt_plugins import _build

    sdk_ops.LIBRARY.build()  # the SDK's objects for these flags exist from here on
    run, commands = _build.run, []
    monkeypatch.setattr(_build, "run", lambda command: (commands.append(command), run(command))[1])
    built = _copy_library(tmp_path, "decl_test_own", "decl_test::copy").build(force=True)
    compiled = [Path(c[c.index("-c") + 1]).name for c in commands if "-c" in c]
    assert sorted(compiled) == ["declared_ops.cpp", "launcher_table.cpp", "launchers.cu"]
    links = [c for c in commands if "-shared" in c]
    assert [c[c.index("-o") + 1] for c in links] == [str(built.plugins), str(built.launchers)]
    for link in links:
        shared = {Path(arg).parent.name for arg in link if arg.endswith(".o") and "sdk-objects-" in arg}
        assert len(shared) == 1, link


def test_the_fake_kernels_bare_check_names_op_and_arguments():
    """Before: RuntimeError "Expected cond to be True, but got False." with no op named."""
    checked = _define(
        "checked",
        "(Tensor x, Tensor y, int k) -> Tensor",
        lambda x, y, k: (torch._check(x.shape[0] == y.shape[0]), torch.empty_like(x))[1],
    )
    declaration = ttp.Declaration(checked)
    message = (
        r"^decl_test\.checked: its fake kernel rejects the arguments \(x: \(3,\) float32, y: \(4,\) float16, k=2\): "
        r"RuntimeError: Expected cond to be True, but got False\.$"
    )
    with pytest.raises(ttp.SpecError, match=message):
        converters.plan(
            declaration.spec, (torch.zeros(3), torch.zeros(4, dtype=torch.float16), 2), declaration=declaration
        )


def test_generated_tables_carry_the_declaration():
    from torchtrt_plugins import sdk

    fields = sdk.codegen.generate_fields_header([sdk_ops.SHAPES]).replace("::ttp::sdk::", "")
    assert '{"k", "k", FieldType::kINT64, ScalarKind::kINT, true, 0.0, 1.0, 16.0, true, kNO_SHAPE_INPUT}' in fields
    assert '{"n", "n", FieldType::kINT64, ScalarKind::kINT, true, 0.0, 0.0, kUNBOUNDED, true, -2147483648.0}' in fields
    flag = '{"flag", "flag", FieldType::kINT32, ScalarKind::kBOOL, false, 0.0, 0.0, 1.0, true, kNO_SHAPE_INPUT}'
    assert flag in fields
    assert '{"scale", "scale", FieldType::kFLOAT64, ScalarKind::kFLOAT, false, 1.0, 0.0, kUNBOUNDED, false, ' in fields
    text = sdk.generate_op_tables([sdk_ops.SHAPES])
    assert "::sdk_test::fields::shapes::kTABLE, 4," in text
    assert '{{"x", 3u, -1}, {"w", 3u, 0}}' in text  # FLOAT | HALF; w shares x's type
    assert '{{0, "sdk_test::zeros", &sdk_test::zeros}, {3, "sdk_test::zeros", &sdk_test::zeros}' in text
    assert "&sdk_test::zerosWorkspace" in text
    rows = sdk.generate_launcher_table([sdk_ops.SHAPES])
    assert '{"sdk_test::shapes", 7, &sdk_test::zeros, &sdk_test::zerosWorkspace}' in rows


def test_registration_is_generic(monkeypatch):
    """register_all and load_plugins cover declared ops (before: only the ops of our own catalogue)."""
    registered = []
    monkeypatch.setattr(converters, "_registered", False)
    monkeypatch.setattr(_factory, "register", lambda entry, converter: registered.append(entry.spec.qualname) or True)
    assert converters.register_all()
    assert {"torchtrt::rms_norm", "sdk_test::shapes", "sdk_test::nonzero_count"} <= set(registered)
    assert sdk_ops.SHAPES.entry in op_registry.registered_ops()
    assert sdk_ops.SHAPES.entry not in op_registry.all_ops()  # the catalogue stays ours

    class Registry:
        def __init__(self):
            self.loaded, self.all_creators = [], []

        def load_library(self, path):
            self.loaded.append(str(path))
            return object()

    class Creator:
        def __init__(self, key):
            self.name, self.plugin_version, self.plugin_namespace = key

    registry = Registry()
    ours = "/ours/libtorchtrt_plugins_v3.so"
    monkeypatch.setattr(native, "plugin_library_path", lambda build=True: ours)
    theirs = "/theirs/libsdk_test_plugins.so"
    for entry in op_registry.registered_ops():
        if entry.library is not None:
            path = theirs if entry.spec.qualname.startswith("sdk_test::") else "/other/lib.so"
            monkeypatch.setattr(entry, "library", lambda path=path: path)
    sdk_test = [e for e in op_registry.registered_ops() if e.spec.qualname.startswith("sdk_test::")]
    registry.all_creators = [Creator(e.spec.creator_key) for e in op_registry.registered_ops() if e not in sdk_test]
    with pytest.raises(
        RuntimeError, match=r"libsdk_test_plugins\.so .*did not register the creators.*Shapes/1/sdk_test"
    ):
        native.load_plugins(registry)
    assert set(registry.loaded) == {theirs}  # ours and the others already hold their creators
    registry.all_creators += [Creator(e.spec.creator_key) for e in sdk_test]
    registry.loaded.clear()
    assert native.load_plugins(registry) == ours and registry.loaded == []


def test_load_plugins_loads_every_other_library_and_names_the_ops_of_one_that_fails(monkeypatch):
    """Before: the first library that failed to build stopped load_plugins(), so the libraries after it were never
    loaded, and the error named no op."""
    from torchtrt_plugins import _build

    class Registry:
        loaded: list = []

    def broken():
        raise _build.BuildError("nvcc failed")

    monkeypatch.setattr(native, "plugin_library_path", lambda build=True: "/ours/libtorchtrt_plugins_v3.so")
    monkeypatch.setattr(native, "_load_library", lambda registry, path, entries: registry.loaded.append(str(path)))
    first, *others = [e for e in op_registry.registered_ops() if e.library is not None]
    monkeypatch.setattr(first, "library", broken)
    for i, entry in enumerate(others):
        monkeypatch.setattr(entry, "library", lambda i=i: f"/theirs/lib{i}.so")
    registry = Registry()
    with pytest.raises(native.PluginLoadError) as info:
        native.load_plugins(registry)
    assert f"the plugins of {first.spec.label}" in str(info.value) and "BuildError: nvcc failed" in str(info.value)
    assert registry.loaded == ["/ours/libtorchtrt_plugins_v3.so"] + [f"/theirs/lib{i}.so" for i in range(len(others))]


def test_check_op_says_why_the_validator_rejects():
    """Before: "the converter's validator rejects %node" without the reason."""
    from torchtrt_plugins.testing import check_op

    qualname = _define("halves", "(Tensor x) -> Tensor", lambda x: torch.empty_like(x), cpu=lambda x: x.clone())
    declaration = ttp.declare(qualname, dtypes={"x": (torch.float16,)})
    try:
        message = r"validator rejects .*: decl_test\.halves: argument 'x' must have dtype in \{float16\}, got float32$"
        with pytest.raises(AssertionError, match=message):
            check_op(torch.ops.decl_test.halves, [(torch.zeros(3),)], checks=("plan",))
    finally:
        op_registry.unregister(declaration.entry)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_check_op_takes_a_unit_in_the_last_place_of_half_precision_by_default(dtype):
    """Before: 1e-5 for every dtype, which no fp16 or bf16 kernel meets against a reference computed otherwise."""
    from torchtrt_plugins.testing import check_op

    qualname = _define(f"nudged_{str(dtype)[6:]}", "(Tensor x) -> Tensor", torch.empty_like, cpu=lambda x: x.clone())
    declaration = ttp.declare(qualname)
    try:
        x = torch.linspace(-4, 4, 101, dtype=dtype)
        report = check_op(
            declaration.overload, [(x,)], reference=lambda x: torch.nextafter(x, x + 1), checks=("eager",)
        )
        assert "eager" in report.passed
        with pytest.raises(AssertionError, match="eager vs reference"):
            check_op(declaration.overload, [(x,)], reference=lambda x: x * 1.05, checks=("eager",))
        assert declaration.spec.tolerance(torch.int32) == ttp.Tolerance(0.0, 0.0)
    finally:
        op_registry.unregister(declaration.entry)


def test_check_op_also_takes_our_hand_written_plugins():
    from torchtrt_plugins.ops import rms_norm
    from torchtrt_plugins.testing import check_op

    samples = [(torch.randn(3, 16), torch.randn(16), 1e-5)]
    report = check_op(
        torch.ops.torchtrt.rms_norm,
        samples,
        reference=rms_norm.reference,
        checks=("eager", "opcheck", "plan", "harness"),
    )
    assert report.passed == ["eager", "opcheck", "plan", "harness"], report
    with pytest.raises(ValueError, match="not an op with a plugin"):
        check_op(torch.ops.aten.relu.default, [(torch.zeros(2),)])


def test_check_op_skips_the_checks_needing_a_plugin_library_that_cannot_be_built_here(monkeypatch):
    """Before: check_op raised BuildError from its harness check where the plugin library was neither prebuilt nor
    buildable (a checkout without TensorRT headers), though it skips every other check that cannot run, saying why."""
    from torchtrt_plugins import _build
    from torchtrt_plugins.ops import rms_norm
    from torchtrt_plugins.testing import check_op

    def no_library(*args, **kwargs):
        raise _build.BuildError("cannot build the plugin library from the sources: TensorRT headers not found")

    monkeypatch.setattr(native, "plugin_library_path", no_library)
    monkeypatch.setattr(_build, "plugin_build_prerequisites", lambda: ["TensorRT headers not found (say where)"])
    samples = [(torch.randn(3, 16), torch.randn(16), 1e-5)]
    checks = ("eager", "plan", "harness")
    report = check_op(torch.ops.torchtrt.rms_norm, samples, reference=rms_norm.reference, checks=checks)
    assert report.passed == ["eager", "plan"], report
    assert report.skipped["harness"] == (
        "the plugin library is not prebuilt and cannot be built here: TensorRT headers not found (say where)"
    )
    # With every prerequisite there, a build that fails is the op's failure, not a skip.
    monkeypatch.setattr(_build, "plugin_build_prerequisites", lambda: [])
    with pytest.raises(_build.BuildError, match="TensorRT headers not found"):
        check_op(torch.ops.torchtrt.rms_norm, samples, reference=rms_norm.reference, checks=checks)


def test_declare_registers_only_and_the_first_need_builds_and_loads(monkeypatch, tmp_path):
    """Before: with Torch-TensorRT and TensorRT importable, declare() built the op's library (nvcc) and loaded it into
    TensorRT's registry, so `sdk generate`, a step of that very build, had to switch it off around its import. Now
    declare() registers (the entry, the converter, the library, the eager kernel) and the first need builds."""
    import types

    from torchtrt_plugins import _build, _compat, sdk

    source = tmp_path / "lazy.cu"
    source.write_text("// never compiled\n")
    library = sdk.PluginLibrary("decl_test_lazy", sources=[source])
    builds = []

    def build(force=False):
        builds.append(force)
        raise _build.BuildError("nvcc failed")

    class Registry:
        def __init__(self):
            self.loaded, self.all_creators = [], []

        def load_library(self, path):
            self.loaded.append(str(path))

    registry, registered = Registry(), []
    monkeypatch.setattr(library, "build", build)
    ours = {q: e for q, e in op_registry._REGISTRY.items() if op_registry.is_ours(e)}
    monkeypatch.setattr(op_registry, "_REGISTRY", ours)  # our library and this op's only
    monkeypatch.setattr(converters, "register_entry", lambda entry: registered.append(entry) or True)
    trt = types.SimpleNamespace(__name__="tensorrt", get_plugin_registry=lambda: registry)
    monkeypatch.setattr(_compat, "tensorrt", lambda: trt)  # as where TensorRT imports
    monkeypatch.setattr(_compat, "require_tensorrt", lambda: trt)
    monkeypatch.setattr(native, "plugin_library_path", lambda build=True: "/ours/libtorchtrt_plugins_v3.so")
    monkeypatch.setattr(native, "_load_library", lambda registry, path, entries: registry.loaded.append(str(path)))
    qualname = _define("lazy", "(Tensor x) -> Tensor", lambda x: torch.empty_like(x))
    declaration = ttp.declare(qualname, library=library, launcher="decl_test::lazy")
    assert builds == [] and registry.loaded == []  # before: built (and the failure a warning) at declare
    assert registered == [declaration.entry] and library.declarations == [declaration]
    # The first need (the converter's first plugin, load_program) builds it; a failure names the op.
    with pytest.raises(native.PluginLoadError, match=r"the plugins of decl_test\.lazy: BuildError: nvcc failed"):
        native.load_plugins(registry)
    assert builds == [False] and registry.loaded == ["/ours/libtorchtrt_plugins_v3.so"]


def test_a_bad_declaration_still_fails_at_declare_and_leaves_nothing_registered(monkeypatch, tmp_path):
    from torchtrt_plugins import sdk

    source = tmp_path / "bad.cu"
    source.write_text("// never compiled\n")
    library = sdk.PluginLibrary("decl_test_bad", sources=[source])
    monkeypatch.setattr(library, "build", lambda force=False: pytest.fail("declare must not build"))
    qualname = _define("bad_launcher", "(Tensor x, float a) -> Tensor", lambda x, a: torch.empty_like(x))
    with pytest.raises(ttp.DeclarationError, match=r"decl_test::bad_launcher: launcher must be the name of a C\+\+"):
        ttp.declare(qualname, library=library, launcher="not a symbol")
    with pytest.raises(ttp.DeclarationError, match=r"ranges\['a'\] must be a torchtrt_plugins.Range"):
        ttp.declare(qualname, library=library, launcher="ns::f", ranges={"a": (0, 1)})
    assert qualname not in {e.spec.qualname for e in op_registry.registered_ops()} and library.declarations == []


# ---------------------------------------------------------------------------------------------- compiled rules


def _compiled_for(declaration, ranks):
    for program in declaration.compiled_programs:
        if _derive.Program.parse(program).input_ranks == tuple(ranks):
            return program
    raise AssertionError(f"{declaration.label}: no compiled program for ranks {ranks}")


@pytest.mark.parametrize("k", [1, 3, 16])
@pytest.mark.parametrize("n", [0, 4, 9])
def test_compiled_program_holds_for_every_field_value(k, n):
    """The program compiled into the library reads the integer fields (ARG leaves): one program serves every n and k,
    and gives what the fake kernel gives."""
    program = _compiled_for(sdk_ops.SHAPES, (2, 1))
    assert _derive.Program.parse(program).num_shape_inputs == 0
    shapes, _ = _derive.evaluate(program, [(6, 5), (5,)], args=[n, k, 0, 1])
    assert shapes == list(sdk_ops.shapes_sizes((6, 5), (5,), n, k))
    checks = _derive.Program.parse(program).checks
    assert [(lhs, rhs) for lhs, rhs in checks] == [((_derive.DIM, 1, 0), (_derive.DIM, 0, 1))]


def test_compiled_programs_cover_every_rank_the_fake_kernel_accepts():
    from torchtrt_plugins import vision
    from torchtrt_plugins.ops import masked_rows, rms_norm

    def ranks(declaration):
        return [_derive.Program.parse(p).input_ranks for p in declaration.compiled_programs]

    assert ranks(rms_norm.RMS_NORM) == [(r, 1) for r in range(1, 9)]
    assert ranks(masked_rows.MASKED_ROWS) == [(r, 1) for r in range(1, 9)]
    assert ranks(sdk_ops.SHAPES) == [(x, w) for x in range(2, 9) for w in range(1, 9)]
    assert ranks(sdk_ops.NONZERO_COUNT) == [(r,) for r in range(2, 9)]
    # torch._check(rois.size(1) == 5) is a check of the program, not a failure at a made-up size.
    assert ranks(vision.ROI_ALIGN) == [(4, r) for r in range(2, 9)]
    assert ranks(vision.NMS) == [(2, 1)]
    assert (_derive.DIM, 1, 1) in [
        lhs for lhs, _ in _derive.Program.parse(vision.ROI_ALIGN.compiled_programs[0]).checks
    ]


def test_compiled_programs_move_coupled_ranks_together():
    """x.shape == y.shape ties the ranks of x and y: every equal rank is found, no unequal one."""
    coupled = _define(
        "coupled",
        "(Tensor x, Tensor y, Tensor w) -> Tensor",
        lambda x, y, w: (torch._check(x.shape == y.shape and w.dim() == 1), torch.empty_like(x))[1],
    )
    declaration = ttp.Declaration(coupled)
    ranks = [_derive.Program.parse(p).input_ranks for p in declaration.compiled_programs]
    assert ranks == [(r, r, 1) for r in range(9)]


def _matrices(fake):
    """``fake`` for 2-D x and y only: one rank combination to derive, not the 81 of two inputs of any rank (about a
    minute on CI's cores), and the output dtype is decided the same way for each."""

    def fake_of_matrices(x, y):
        torch._check(x.dim() == 2 and y.dim() == 2)
        return fake(x, y)

    return fake_of_matrices


def test_compiled_output_dtype_is_an_inputs_or_fixed():
    fixed = _define(
        "fixed_out", "(Tensor x, Tensor y) -> Tensor", _matrices(lambda x, y: torch.empty_like(y, dtype=torch.int32))
    )
    declaration = ttp.Declaration(fixed, dtypes={"x": (torch.float32, torch.float16), "y": (torch.float32,)})
    program = _derive.Program.parse(declaration.compiled_programs[0])
    assert [code for code, _ in program.outputs] == [_derive.TRT_DTYPE_CODES[torch.int32]]
    follows_x = _define("follows_x", "(Tensor x, Tensor y) -> Tensor", _matrices(lambda x, y: torch.empty_like(x)))
    follows = ttp.Declaration(
        follows_x, dtypes={"x": (torch.float32, torch.float16), "y": (torch.float16, torch.float32)}
    )
    assert [code for code, _ in _derive.Program.parse(follows.compiled_programs[0]).outputs] == [-1]


def test_shapes_that_depend_on_a_float_argument_cannot_be_compiled():
    scaled = _define(
        "scaled_rows", "(Tensor x, float factor) -> Tensor", lambda x, factor: x.new_empty((int(8 * factor),))
    )
    declaration = ttp.Declaration(scaled, ranges={"factor": ttp.Range(min=0.0, max=4.0)})
    with pytest.raises(ttp.DeclarationError, match=r"decl_test.scaled_rows: its output shapes depend on .*'factor'"):
        _ = declaration.compiled_programs


def test_a_fake_kernel_that_accepts_no_rank_cannot_be_compiled():
    never = _define("never", "(Tensor x) -> Tensor", lambda x: (torch._check(x.dim() == 9), torch.empty_like(x))[1])
    with pytest.raises(ttp.DeclarationError, match=r"decl_test.never: its fake kernel accepts no combination"):
        _ = ttp.Declaration(never).compiled_programs


def test_the_shape_input_marker_is_one_value_in_python_and_in_the_sdk_header():
    import re

    from torchtrt_plugins import sdk
    from torchtrt_plugins.declare import SHAPE_INPUT_SENTINEL

    header = (sdk.include_dir() / "sdk" / "ttp_sdk.h").read_text()
    (value,) = re.findall(r"kSHAPE_INPUT_MARKER = (-?[0-9.]+);", header)
    assert float(value) == SHAPE_INPUT_SENTINEL == -(2**31)


@torch.library.custom_op("decl_test::affine_clip", mutates_args=(), device_types="cpu")
def _affine_clip(x: torch.Tensor, scale: float, cap: float) -> torch.Tensor:
    return (x * scale).clamp(max=cap)


@_affine_clip.register_fake
def _(x, scale, cap):
    return torch.empty_like(x)


AFFINE_CLIP = ttp.declare(
    "decl_test::affine_clip",
    dtypes={"x": (torch.float32, torch.float16)},
    ranges={"cap": ttp.Range(min=0.0, min_inclusive=False)},
)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((torch.ones(3, dtype=torch.bfloat16), 2.0, 1.0), r"'x' must have dtype in \{float32, float16\}, got bfloat16"),
        ((torch.ones(3, dtype=torch.int32), 2.0, 1.0), r"'x' must have dtype in \{float32, float16\}, got int32"),
        ((torch.ones(3), 2.0, float("nan")), r"'cap' must be a float > 0, got nan"),
        ((torch.ones(3), 2.0, -1.0), r"'cap' must be a float > 0, got -1.0"),
    ],
    ids=["bfloat16", "int32", "nan", "negative"],
)
def test_the_cpu_kernel_of_a_custom_op_checks_the_declared_dtypes_and_ranges(args, message):
    torch.testing.assert_close(torch.ops.decl_test.affine_clip(torch.ones(3), 2.0, 1.5), torch.full((3,), 1.5))
    with pytest.raises(ttp.SpecError, match=r"decl_test.affine_clip: argument " + message):
        torch.ops.decl_test.affine_clip(*args)


def test_kernel_errors_are_declaration_errors_and_the_checks_are_public():
    from torchtrt_plugins.testing import CHECKS

    assert issubclass(ttp.KernelError, ttp.DeclarationError) and "KernelError" in ttp.__all__
    assert CHECKS[:2] == ("eager", "opcheck") and "harness" in CHECKS
