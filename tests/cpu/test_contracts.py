"""Our ops' C++ contracts come from their declarations: the generic plugin's tables of our ops (csrc/sdk/generated)
are generated and current, every op of ours is declared (one way to make an op), and no C++ source restates a
declared item by hand."""

import dataclasses
import importlib.util
from pathlib import Path

import pytest

from torchtrt_plugins import _build, registry


def _load_contracts():
    """tools/contracts.py of this checkout (a script of the source tree, not part of the package)."""
    path = Path(__file__).resolve().parents[2] / "tools" / "contracts.py"
    if not path.is_file():
        pytest.skip(f"{path}: a source checkout's script (the wheel's tests run without one)", allow_module_level=True)
    spec = importlib.util.spec_from_file_location("contracts", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


contracts = _load_contracts()

OURS = registry.all_ops()


def test_generated_files_are_current():
    files = contracts.generated_files()
    assert {p.name for p in files} == {"declared_ops.cpp", "launcher_table.cpp", "op_fields.h"}
    for path, text in files.items():
        assert path.read_text() == text, f"{path} is stale: run python tools/contracts.py"
    assert contracts.main(["--check"]) == 0


def test_every_op_of_ours_is_declared():
    assert sorted(e.spec.name for e in OURS) == [
        "add_rms_norm",
        "efficient_nms",
        "masked_rows",
        "multi_scale_deformable_attention",
        "pad_to",
        "rms_norm",
        "rms_norm_fp8",
        "rms_norm_int8",
        "rotary_embedding",
    ]
    assert all(e.declaration is not None and e.declaration.library.ours for e in OURS)


def test_no_second_way_to_make_an_op_is_left_in_the_sources():
    """No torch adapter, generated contract header or hand-written plugin of ours: PluginBase stays for users (and
    the harness's test plugins) only."""
    root = _build.source_dir() / "csrc"
    assert not (root / "torch").exists() and not (root / "contracts").exists()
    assert sorted(p.name for p in (root / "plugins").iterdir()) == ["plugin_base.h"]


@pytest.mark.parametrize("entry", OURS, ids=lambda e: e.spec.name)
def test_tables_carry_each_declared_op(entry):
    s, declaration = entry.spec, entry.declaration
    tables = contracts.generate_tables()
    assert (
        f'"{declaration.qualname}", "{s.plugin_name}", "{s.plugin_version}", "{s.plugin_namespace}"'
        in (tables["declared_ops.cpp"])
    )
    for field in s.fields:
        assert (
            f'{{"{field.name}", "{field.arg or field.name}", ::ttp::sdk::FieldType::k{field.type}, '
            in (tables["op_fields.h"])
        )
    for value, symbol in declaration.launchers.items():
        assert f'{{"{declaration.qualname}", {value}, &{symbol}, ' in tables["launcher_table.cpp"]


INF = "::ttp::sdk::kUNBOUNDED"
NO_SHAPE_INPUT = "::ttp::sdk::kNO_SHAPE_INPUT"


def test_pad_to_sizes_carry_the_shape_input_marker():
    table = contracts.generate_tables()["op_fields.h"]
    int64 = "::ttp::sdk::FieldType::kINT64, ::ttp::sdk::ScalarKind::kINT"
    for name in ("height", "width"):
        assert f'{{"{name}", "{name}", {int64}, true, 0.0, 0.0, {INF}, true, {float(-(2**31))!r}}}' in table
    float64 = "::ttp::sdk::FieldType::kFLOAT64, ::ttp::sdk::ScalarKind::kFLOAT"
    assert f'{{"value", "value", {float64}, false, 0.0, -{INF}, {INF}, true, {NO_SHAPE_INPUT}}}' in table


def test_a_changed_range_changes_the_tables(monkeypatch):
    declaration = registry.get("rms_norm").declaration
    eps = declaration.spec.field_by_name("eps")
    changed = dataclasses.replace(declaration.spec, fields=(dataclasses.replace(eps, min=1e-12, min_inclusive=True),))
    before = contracts.generate_tables()["op_fields.h"]
    monkeypatch.setattr(declaration, "spec", changed)
    after = contracts.generate_tables()["op_fields.h"]
    eps = '{"eps", "eps", ::ttp::sdk::FieldType::kFLOAT64, ::ttp::sdk::ScalarKind::kFLOAT, false, 1e-06, '
    assert f"{eps}1e-12, {INF}, true, {NO_SHAPE_INPUT}}}" in after
    assert f"{eps}0.0, {INF}, false, {NO_SHAPE_INPUT}}}" in before


def test_cpp_sources_restate_no_declared_item():
    """Plugin names and field names live only in the declarations (and the generated tables)."""
    root = _build.source_dir() / "csrc"
    sources = [p for folder in ("kernels", "plugins", "sdk") for p in sorted((root / folder).glob("*.[ch]*"))]
    offenders = []
    for entry in OURS:
        literals = [f'"{entry.spec.plugin_name}"', *(f'{{"{f.name}", ' for f in entry.spec.fields)]
        for path in sources:
            text = path.read_text()
            offenders += [f"{path.name}: {literal}" for literal in literals if literal in text]
    assert not offenders
