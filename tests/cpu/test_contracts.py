"""Our ops' C++ contracts come from their declarations: csrc/contracts/ops.h is generated from the OpSpecs and current,
and the torch adapters and plugins restate none of it by hand."""

import dataclasses
import re

import pytest

from torchtrt_plugins import _build, contracts, spec


def test_generated_header_is_current():
    assert contracts.header_path().read_text() == contracts.generate(), (
        "csrc/contracts/ops.h is stale: run python -m torchtrt_plugins.contracts"
    )
    assert contracts.main(["--check"]) == 0


@pytest.mark.parametrize("entry", spec.all_ops(), ids=lambda e: e.spec.name)
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
    entry = spec.get("rms_norm")
    eps = entry.spec.field_by_name("eps")
    changed = dataclasses.replace(entry.spec, fields=(dataclasses.replace(eps, min=1e-12, min_inclusive=True),))
    before = contracts.generate()
    monkeypatch.setattr(entry, "spec", changed)
    after = contracts.generate()
    assert before != after
    assert '"a float >= 1e-12"' in after and '"a float > 0"' in before


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
