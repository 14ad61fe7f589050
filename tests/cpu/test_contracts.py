"""Our ops' C++ contracts come from their declarations: the generic plugin's tables of our declared ops
(csrc/sdk/generated) and csrc/contracts/ops.h of the hand-written one are generated and current, and the torch adapters
and plugins restate none of it by hand."""

import dataclasses
import re

import pytest

from torchtrt_plugins import _build, contracts, spec

HAND_WRITTEN = [e for e in spec.all_ops() if e.spec.declaration is None]
DECLARED = [e for e in spec.all_ops() if e.spec.declaration is not None]


def test_generated_files_are_current():
    files = contracts.generated_files()
    assert {p.name for p in files} == {"ops.h", "declared_ops.cpp", "launcher_table.cpp"}
    for path, text in files.items():
        assert path.read_text() == text, f"{path} is stale: run python -m torchtrt_plugins.contracts"
    assert contracts.main(["--check"]) == 0


def test_dogfooding_rms_norm_and_masked_rows_are_declared():
    assert sorted(e.spec.name for e in DECLARED) == ["masked_rows", "rms_norm"]
    assert [e.spec.name for e in HAND_WRITTEN] == ["pad_to"]


@pytest.mark.parametrize("entry", DECLARED, ids=lambda e: e.spec.name)
def test_tables_carry_each_declared_op(entry):
    s, declaration = entry.spec, entry.spec.declaration
    tables = contracts.generate_tables()
    assert (
        f'"{declaration.qualname}", "{s.plugin_name}", "{s.plugin_version}", "{s.plugin_namespace}"'
        in (tables["declared_ops.cpp"])
    )
    for field in s.fields:
        assert f'{{"{field.name}", FT::k{field.type}, ' in tables["declared_ops.cpp"]
    for value, symbol in declaration.launchers.items():
        assert f'{{"{declaration.qualname}", {value}, &{symbol}, ' in tables["launcher_table.cpp"]


def test_a_changed_range_changes_the_tables(monkeypatch):
    declaration = spec.get("rms_norm").spec.declaration
    eps = declaration.spec.field_by_name("eps")
    changed = dataclasses.replace(declaration.spec, fields=(dataclasses.replace(eps, min=1e-12, min_inclusive=True),))
    before = contracts.generate_tables()["declared_ops.cpp"]
    monkeypatch.setattr(declaration, "spec", changed)
    after = contracts.generate_tables()["declared_ops.cpp"]
    assert '{"eps", FT::kFLOAT64, false, 1e-06, 1e-12, kInf, true, kNaN}' in after
    assert '{"eps", FT::kFLOAT64, false, 1e-06, 0.0, kInf, false, kNaN}' in before


@pytest.mark.parametrize("entry", HAND_WRITTEN, ids=lambda e: e.spec.name)
def test_header_carries_each_declared_item(entry):
    s = entry.spec
    text = contracts.generate()
    block = text[text.index(f"namespace {s.name}\n") : text.index(f"}} // namespace {s.name}\n")]
    assert f'kPLUGIN_NAME = "{s.plugin_name}"' in block
    assert f'kPLUGIN_VERSION = "{s.plugin_version}"' in block
    for tensor in s.inputs:
        assert f'Input{{"{tensor.name}", ' in block
    for field in s.fields:
        assert re.search(
            rf'Field{{"{field.name}", FieldType::k{field.type}, .*"{re.escape(field.expectation())}"}}', block
        )
    values = ", ".join(str(t.value) for t in s.tactics)
    assert f"kTACTICS = std::array<int32_t, {len(s.tactics)}>{{{{{values}}}}}" in block or not s.tactics


def test_a_changed_range_changes_the_header(monkeypatch):
    entry = spec.get("pad_to")
    value = entry.spec.field_by_name("value")
    changed = dataclasses.replace(entry.spec, fields=(*entry.spec.fields[:2], dataclasses.replace(value, min=-1.0)))
    before = contracts.generate()
    monkeypatch.setattr(entry, "spec", changed)
    after = contracts.generate()
    assert before != after
    assert '"a float >= -1"' in after and '"a float"}' in before


def test_cpp_sources_restate_no_declared_item():
    """Plugin names, field names and range literals live only in the declarations (and the generated header)."""
    root = _build.source_dir() / "csrc"
    sources = [p for folder in ("torch", "plugins") for p in sorted((root / folder).glob("*.[ch]*"))]
    offenders = []
    for entry in spec.all_ops():
        literals = [f'"{entry.spec.plugin_name}"', *(f'{{"{f.name}", ' for f in entry.spec.fields)]
        for path in sources:
            text = path.read_text()
            offenders += [f"{path.name}: {literal}" for literal in literals if literal in text]
    assert not offenders
    for path in sources:
        assert "TTP_CHECK(eps" not in path.read_text() and "kInf" not in path.read_text(), path.name
